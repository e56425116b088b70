//! The portal's server-rendered pages: login, developers (API clients), webhook endpoints. Plain
//! HTML forms, each carrying the session's CSRF token; no script.

use maud::{html, Markup};
use shared_types::{ErrorCode, Scope};
use worker::{Method, Request, Response, Url};

mod layout;
mod merchants;
mod payments;
mod users;
mod webhooks;

use layout::{csrf_field, error_box, layout, page, secret_box, Form};
use webhooks::{delivery_page, endpoint_page};

use super::clients::{self, Client};
use super::deliveries;
use super::endpoints::{self, NewEndpoint, Secret};
use super::{with_cookie, Cookie, Csrf, Portal};
use crate::ctx::Ctx;
use crate::error::{ApiError, OrInternal};
use crate::http::see_other;

/// The methods `/portal/{rest}` answers (`None`: no such page).
pub fn methods(rest: &[&str]) -> Option<&'static [Method]> {
    use Method::{Get, Post};
    Some(match rest {
        [] | [""] | ["developers"] | ["merchants", _] | ["payments"] | ["payments", _] => &[Get],
        ["merchants"] | ["users"] => &[Get, Post],
        ["users", _, "remove"] => &[Post],
        ["merchants", _, "edit" | "status" | "onboarding" | "wallets" | "origins" | "roll-key"] => {
            &[Post]
        }
        ["login"] | ["webhooks"] | ["webhooks", _] => &[Get, Post],
        ["logout"] | ["developers", "clients"] => &[Post],
        ["developers", "clients", _, "rotate" | "delete"] => &[Post],
        ["webhooks", _, "reveal" | "rotate" | "delete" | "enable" | "test"] => &[Post],
        ["deliveries", _] => &[Get],
        ["deliveries", _, "resend"] => &[Post],
        ["payments", _, "refund"] => &[Post],
        _ => return None,
    })
}

/// The route of `/portal/…{rest}`, from [`methods`] and [`handle`].
pub fn route<'a>(rest: &[&'a str]) -> Option<crate::route::Route<'a, crate::route::Incoming<'a>>> {
    let mut route = crate::route::Route::new();
    for method in methods(rest)? {
        let rest = rest.to_vec();
        route =
            route.on(
                method.clone(),
                move |r: crate::route::Incoming<'a>| async move {
                    handle(r.req, r.ctx, r.url, &rest).await
                },
            );
    }
    Some(route)
}

/// Routes `/portal` and its pages (the method is one [`methods`] allows).
pub async fn handle(
    mut req: Request,
    ctx: &Ctx,
    url: &Url,
    rest: &[&str],
) -> Result<Response, ApiError> {
    let method = req.method();
    match (method.clone(), rest) {
        (Method::Get, ["login"]) => {
            if super::authenticate(&req, ctx, url, Csrf::NotNeeded)
                .await
                .is_ok()
            {
                return see_other(url, "/portal/developers");
            }
            page(200, login_page(None, ""))
        }
        (Method::Post, ["login"]) => {
            super::check_origin(&req, url)?;
            let form = Form::read(&mut req).await?;
            let email = form.get("email").unwrap_or_default().to_owned();
            match super::login(ctx, &email, form.get("password").unwrap_or_default()).await {
                Ok(session) => with_cookie(
                    see_other(url, "/portal/developers")?,
                    Cookie::Start(&session.token),
                ),
                Err(err) if err.code == ErrorCode::ServerError => Err(err),
                Err(err) => {
                    let response = page(
                        err.code.http_status(),
                        login_page(Some(&err.description), &email),
                    )?;
                    if let Some(seconds) = err.retry_after {
                        response
                            .headers()
                            .set("Retry-After", &seconds.to_string())
                            .or_internal("set header")?;
                    }
                    Ok(response)
                }
            }
        }
        (Method::Get, _) => match super::authenticate(&req, ctx, url, Csrf::NotNeeded).await {
            Ok(portal) => get(&portal, url, rest).await,
            Err(err) if err.code == ErrorCode::LoginRequired => see_other(url, "/portal/login"),
            Err(err) => Err(err),
        },
        // The router has checked the method against `methods`: the rest are changes (POST).
        _ => {
            let form = Form::read(&mut req).await?;
            let portal = match super::authenticate(
                &req,
                ctx,
                url,
                Csrf::Form(form.get("csrf_token")),
            )
            .await
            {
                Ok(portal) => portal,
                Err(err) if err.code == ErrorCode::LoginRequired => {
                    return see_other(url, "/portal/login")
                }
                Err(err)
                    if err.code == ErrorCode::CsrfFailed
                        || err.code == ErrorCode::AdminRequired =>
                {
                    return page(
                        403,
                        layout(
                            "Refused",
                            None,
                            html! {
                                section { h1 { "Request refused" } (error_box(Some(&err.description)))
                                    p { a href="/portal/developers" { "Back to the portal" } } }
                            },
                        ),
                    )
                }
                Err(err) => return Err(err),
            };
            post(&portal, url, rest, &form).await
        }
    }
}

async fn get(portal: &Portal<'_>, url: &Url, rest: &[&str]) -> Result<Response, ApiError> {
    match rest {
        [] | [""] => payments::overview(portal).await,
        ["payments"] => payments::list(portal, url).await,
        ["payments", "export.csv"] => payments::export(portal, url),
        ["payments", id] => {
            payments::detail(portal, crate::portal::payments::payment_id(id)?).await
        }
        ["developers"] => developers(portal, None, None).await,
        ["users"] => users::list(portal, None, None).await,
        ["merchants"] => merchants::list(portal, url, None, None).await,
        ["merchants", id] => {
            merchants::detail(
                portal,
                url,
                crate::portal::merchants::merchant_id(id)?,
                None,
                200,
            )
            .await
        }
        ["webhooks"] => webhooks::webhooks(portal, None, None).await,
        ["webhooks", id] => {
            endpoint_page(portal, endpoints::endpoint_id(id)?, None, None, 200).await
        }
        ["deliveries", id] => delivery_page(portal, id).await,
        _ => Err(ApiError::not_found(format!("no such page: {}", url.path()))),
    }
}

async fn post(
    portal: &Portal<'_>,
    url: &Url,
    rest: &[&str],
    form: &Form,
) -> Result<Response, ApiError> {
    match rest {
        ["merchants", rest @ ..] => merchants::post(portal, url, rest, form).await,
        ["payments", id, "refund"] => {
            let id = crate::portal::payments::payment_id(id)?;
            payments::refund(portal, url, id, form).await
        }
        ["users", rest @ ..] => users::post(portal, url, rest, form).await,
        ["logout"] => {
            super::logout(portal).await?;
            with_cookie(see_other(url, "/portal/login")?, Cookie::End)
        }
        ["developers", "clients"] => {
            match clients::create(
                portal,
                form.get("name").unwrap_or_default(),
                &form.all("scope"),
            )
            .await
            {
                Ok((client, secret)) => developers(portal, Some((&client, &secret)), None).await,
                Err(err) if err.code == ErrorCode::InvalidRequest => {
                    developers(portal, None, Some(&err.description)).await
                }
                Err(err) => Err(err),
            }
        }
        ["developers", "clients", id, "rotate"] => {
            let (client, secret) = clients::rotate(portal, id).await?;
            developers(portal, Some((&client, &secret)), None).await
        }
        ["developers", "clients", id, "delete"] => {
            clients::delete(portal, id).await?;
            see_other(url, "/portal/developers")
        }
        ["webhooks"] => {
            let types = form.all("event_type");
            let new = NewEndpoint {
                url: form.get("url").unwrap_or_default().to_owned(),
                description: form.get("description").unwrap_or_default().to_owned(),
                // No box ticked means every type.
                event_types: (!types.is_empty()).then_some(types),
            };
            match endpoints::create(portal, &new).await {
                Ok((endpoint, secret)) => {
                    let shown = Secret {
                        signing_secret: secret,
                        previous_secret_expires_at: None,
                    };
                    endpoint_page(portal, &endpoint.id, Some(&shown), None, 201).await
                }
                Err(err) if err.code == ErrorCode::InvalidRequest => {
                    webhooks::webhooks(portal, Some(&err.description), Some(&new)).await
                }
                Err(err) => Err(err),
            }
        }
        ["webhooks", id] => {
            let id = endpoints::endpoint_id(id)?;
            let types = form.all("event_type");
            let patch = endpoints::EndpointPatch {
                url: form.get("url").map(str::to_owned),
                description: form.get("description").map(str::to_owned),
                event_types: Some((!types.is_empty()).then_some(types)),
                status: form.get("status").map(str::to_owned),
            };
            match endpoints::update(portal, id, &patch).await {
                Ok(_) => see_other(url, &format!("/portal/webhooks/{id}")),
                Err(err) if err.code == ErrorCode::InvalidRequest => {
                    endpoint_page(portal, id, None, Some(&err.description), 400).await
                }
                Err(err) => Err(err),
            }
        }
        ["webhooks", id, "reveal"] => {
            let id = endpoints::endpoint_id(id)?;
            let secret = endpoints::reveal_secret(portal, id).await?;
            endpoint_page(portal, id, Some(&secret), None, 200).await
        }
        ["webhooks", id, "rotate"] => {
            let id = endpoints::endpoint_id(id)?;
            let hours = form.get("grace_hours").unwrap_or("24");
            let grace = hours
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|h| *h >= 0)
                .map(|h| h * 3600);
            match grace {
                None => {
                    endpoint_page(
                        portal,
                        id,
                        None,
                        Some("grace period must be a whole number of hours, 0 or more"),
                        400,
                    )
                    .await
                }
                Some(grace) => match endpoints::rotate_secret(portal, id, Some(grace)).await {
                    Ok(secret) => endpoint_page(portal, id, Some(&secret), None, 200).await,
                    Err(err) if err.code == ErrorCode::InvalidRequest => {
                        endpoint_page(portal, id, None, Some(&err.description), 400).await
                    }
                    Err(err) => Err(err),
                },
            }
        }
        ["webhooks", id, "delete"] => {
            endpoints::delete(portal, endpoints::endpoint_id(id)?).await?;
            see_other(url, "/portal/webhooks")
        }
        ["webhooks", id, "enable"] => {
            let id = endpoints::endpoint_id(id)?;
            let since = form.get("resend_failed_since").filter(|s| !s.is_empty());
            match deliveries::enable(portal, id, since).await {
                Ok(_) => see_other(url, &format!("/portal/webhooks/{id}")),
                Err(err) if err.code == ErrorCode::InvalidRequest => {
                    endpoint_page(portal, id, None, Some(&err.description), 400).await
                }
                Err(err) => Err(err),
            }
        }
        ["webhooks", id, "test"] => {
            let id = endpoints::endpoint_id(id)?;
            match deliveries::send_test(portal, id).await {
                Ok(_) => see_other(url, &format!("/portal/webhooks/{id}")),
                Err(err) if err.code == ErrorCode::Conflict => {
                    endpoint_page(portal, id, None, Some(&err.description), 409).await
                }
                Err(err) => Err(err),
            }
        }
        ["deliveries", id, "resend"] => match deliveries::resend(portal, id).await {
            Ok(d) => see_other(url, &format!("/portal/webhooks/{}", d.endpoint_id)),
            Err(err) if err.code == ErrorCode::Conflict => page(
                409,
                layout(
                    "Resend refused",
                    Some(portal),
                    html! {
                        section { h1 { "Resend refused" } (error_box(Some(&err.description)))
                            p { a href="/portal/webhooks" { "Back to the endpoints" } } }
                    },
                ),
            ),
            Err(err) => Err(err),
        },
        _ => Err(ApiError::not_found(format!("no such page: {}", url.path()))),
    }
}

fn login_page(error: Option<&str>, email: &str) -> Markup {
    layout(
        "Log in",
        None,
        html! {
            section {
                h1 { "Log in" }
                (error_box(error))
                form method="post" action="/portal/login" {
                    label for="email" { "E-mail" }
                    input #email type="email" name="email" value=(email) required autocomplete="username";
                    label for="password" { "Password" }
                    input #password type="password" name="password" required autocomplete="current-password";
                    p { button type="submit" { "Log in" } }
                }
            }
        },
    )
}

async fn developers(
    portal: &Portal<'_>,
    shown: Option<(&Client, &str)>,
    error: Option<&str>,
) -> Result<Response, ApiError> {
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
                    p.muted { "Exchange a client's id and secret for a token at " code { "POST /oauth/token" } "." }
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
                                        td { (c.scopes.join(" ")) }
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
