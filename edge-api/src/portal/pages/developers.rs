//! `/portal/developers`: the institution's API clients, and the forms that create one, rotate
//! its secret and delete it.

use maud::html;
use shared_types::{ErrorCode, Scope};

use super::layout::{csrf_field, error_box, layout, page, secret_box, Call};
use crate::http::see_other;
use crate::portal::clients::{self, ApiClient};
use crate::portal::Portal;
use crate::route::Answer;

/// `GET /portal/developers`.
pub(super) async fn show(c: Call<'_>) -> Answer {
    clients_page(&c.portal, None, None).await
}

/// `POST /portal/developers/clients`: the new client's secret, shown once.
pub(super) async fn create_client(c: Call<'_>) -> Answer {
    let portal = &c.portal;
    let name = c.form.get("name").unwrap_or_default();
    match clients::create(portal, name, &c.form.all("scope")).await {
        Ok((client, secret)) => clients_page(portal, Some((&client, &secret)), None).await,
        Err(err) if err.code == ErrorCode::InvalidRequest => {
            clients_page(portal, None, Some(&err.description)).await
        }
        Err(err) => Err(err),
    }
}

/// `POST /portal/developers/clients/{id}/rotate`: the new secret, shown once.
pub(super) async fn rotate_client(c: Call<'_>, id: &str) -> Answer {
    let (client, secret) = clients::rotate(&c.portal, id).await?;
    clients_page(&c.portal, Some((&client, &secret)), None).await
}

/// `POST /portal/developers/clients/{id}/delete`.
pub(super) async fn delete_client(c: Call<'_>, id: &str) -> Answer {
    clients::delete(&c.portal, id).await?;
    see_other(c.url, "/portal/developers")
}

async fn clients_page(
    portal: &Portal<'_>,
    shown: Option<(&ApiClient, &str)>,
    error: Option<&str>,
) -> Answer {
    let clients = clients::list(portal).await?;
    let status = match (shown, error) {
        (_, Some(_)) => 400,
        _ => 200,
    };
    page(
        status,
        layout(
            "Developers",
            Some(portal),
            html! {
                section {
                    h1 { "API clients" }
                    p.muted { "Exchange a client's id and secret for a token at " code { "POST /oauth/token" } ". Every operation, with its parameters, examples and errors, and a way to try it: the " a href="/docs" { "API reference" } " (" a href="/openapi.json" { "openapi.json" } ")." }
                    @if let Some((client, secret)) = shown {
                        (secret_box(&format!("Secret of {} ({})", client.name, client.client_id), secret,
                            "Copy it now: it is shown once and stored only as a hash."))
                    }
                    @if clients.is_empty() { p { "No clients yet." } } @else {
                        table {
                            thead { tr { th { "Name" } th { "Client id" } th { "Scopes" } th { "Created" } th { "Last used" } th {} } }
                            tbody {
                                @for c in &clients {
                                    tr data-client=(c.client_id) {
                                        td { (c.name) }
                                        td { code { (c.client_id) } }
                                        td { (c.scopes) }
                                        td { (c.created_at) }
                                        td { (c.last_used_at.as_deref().unwrap_or("never")) }
                                        td {
                                            form method="post" action=(format!("/portal/developers/clients/{}/rotate", c.client_id)) {
                                                (csrf_field(portal)) button type="submit" name="rotate" { "Rotate secret" }
                                            }
                                            " "
                                            form method="post" action=(format!("/portal/developers/clients/{}/delete", c.client_id)) {
                                                (csrf_field(portal)) button.danger type="submit" name="delete" { "Delete" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                section {
                    h2 { "New client" }
                    (error_box(error))
                    form method="post" action="/portal/developers/clients" {
                        (csrf_field(portal))
                        label for="client-name" { "Name" }
                        input #client-name type="text" name="name" required maxlength="100";
                        fieldset {
                            legend { "Scopes" }
                            @for scope in Scope::ALL {
                                @let sandbox_only = scope == Scope::SandboxWrite;
                                @if !sandbox_only || portal.ctx.sandbox() {
                                    label { input type="checkbox" name="scope" value=(scope.as_str()) checked[!sandbox_only]; " " (scope.as_str()) }
                                }
                            }
                        }
                        button type="submit" { "Create client" }
                    }
                }
            },
        ),
    )
}
