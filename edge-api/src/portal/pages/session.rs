//! `/portal/login` and `/portal/logout`: the login page and form, and logging out.

use maud::{html, Markup};
use shared_types::ErrorCode;

use super::layout::{error_box, layout, page, Call, Form};
use crate::error::OrInternal;
use crate::http::see_other;
use crate::portal::{self, with_cookie, Cookie, Csrf};
use crate::route::{Answer, Incoming};

/// `GET /portal/login`: the form, or the overview when already logged in.
pub(super) async fn show_login(Incoming { req, ctx, url }: Incoming<'_>) -> Answer {
    match portal::authenticate(&req, ctx, url, Csrf::NotNeeded).await {
        Ok(_) => return see_other(url, "/portal/"),
        // The form is shown all the same; a failure on our side is logged.
        Err(err) => err.log(),
    }
    page(200, login_page(None, ""))
}

/// `POST /portal/login`: a session cookie and the overview (where an admin lands, as on
/// Stripe's dashboard), or the form again saying why not.
pub(super) async fn login(Incoming { mut req, ctx, url }: Incoming<'_>) -> Answer {
    portal::check_origin(&req, url)?;
    let form = Form::read(&mut req).await?;
    let email = form.get("email").unwrap_or_default().to_owned();
    match portal::login(ctx, &email, form.get("password").unwrap_or_default()).await {
        Ok(session) => with_cookie(see_other(url, "/portal/")?, Cookie::Start(&session.token)),
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

/// `POST /portal/logout`: ends the session.
pub(super) async fn logout(c: Call<'_>) -> Answer {
    portal::logout(&c.portal).await?;
    with_cookie(see_other(c.url, "/portal/login")?, Cookie::End)
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
