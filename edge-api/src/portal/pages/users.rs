//! The users page: who has a portal login for the institution and what they may do; admins
//! invite users (the first password is shown once) and remove them.

use maud::html;
use shared_types::{ErrorCode, PortalRole};

use super::layout::{csrf_field, error_box, layout, page, secret_box, Call};
use crate::error::ApiError;
use crate::http::see_other;
use crate::portal::users::{self, Invite, Invited};
use crate::portal::Portal;
use crate::route::Answer;

/// An error the page shows (a refusal of the user's input), rather than fail.
fn shown(err: &ApiError) -> bool {
    matches!(err.code, ErrorCode::InvalidRequest | ErrorCode::Conflict)
}

/// `GET /portal/users`.
pub(super) async fn list(c: Call<'_>) -> Answer {
    list_page(&c.portal, None, None).await
}

/// `POST /portal/users`: the invited user's first password, shown once.
pub(super) async fn invite(c: Call<'_>) -> Answer {
    let invite = Invite {
        email: c.form.get("email").unwrap_or_default().to_owned(),
        role: c.form.get("role").unwrap_or_default().to_owned(),
    };
    match users::invite(&c.portal, &invite).await {
        Ok(invited) => list_page(&c.portal, Some(&invited), None).await,
        Err(err) if shown(&err) => list_page(&c.portal, None, Some(&err.description)).await,
        Err(err) => Err(err),
    }
}

/// `POST /portal/users/{id}/remove`.
pub(super) async fn remove(c: Call<'_>, id: &str) -> Answer {
    match users::remove(&c.portal, id).await {
        Ok(()) => see_other(c.url, "/portal/users"),
        Err(err) if shown(&err) => list_page(&c.portal, None, Some(&err.description)).await,
        Err(err) => Err(err),
    }
}

/// The users, and the form to invite one (admins only); `invited`: the answer to an invite.
async fn list_page(portal: &Portal<'_>, invited: Option<&Invited>, error: Option<&str>) -> Answer {
    let all = users::list(portal).await?;
    let admin = portal.session.role == PortalRole::Admin;
    page(
        if error.is_some() { 400 } else { 200 },
        layout(
            "Users",
            Some(portal),
            html! {
                section {
                    h1 { "Portal users" }
                    p.muted { "Admins may do everything. Viewers read payments, merchants and the delivery log; they change nothing and see no secret." }
                    @if let Some(new) = invited {
                        (secret_box(&format!("First password of {}", new.user.email), &new.password,
                            "Hand it over securely: it is shown once and stored only as Argon2id."))
                    }
                    (error_box(error))
                    table #users {
                        thead { tr { th { "E-mail" } th { "Role" } th { "Added" } th {} } }
                        tbody {
                            @for u in &all {
                                tr data-user=(u.id) {
                                    td { (u.email) }
                                    td { (u.role.as_str()) }
                                    td { (u.created_at) }
                                    td {
                                        @if admin && u.id != portal.session.admin_id {
                                            form method="post" action=(format!("/portal/users/{}/remove", u.id)) {
                                                (csrf_field(portal)) button.danger type="submit" { "Remove" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                @if admin {
                    section {
                        h2 { "Invite a user" }
                        form method="post" action="/portal/users" {
                            (csrf_field(portal))
                            label for="user-email" { "E-mail" }
                            input #user-email type="email" name="email" required;
                            label for="user-role" { "Role" }
                            select #user-role name="role" {
                                option value="viewer" { "viewer" }
                                option value="admin" { "admin" }
                            }
                            p { button type="submit" { "Invite" } }
                        }
                    }
                }
            },
        ),
    )
}
