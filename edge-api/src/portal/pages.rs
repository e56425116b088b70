//! The portal's server-rendered pages: plain HTML forms, each carrying the session's CSRF token;
//! no script. One module per part of the portal, as the URLs name them, each with its pages and
//! the forms they post; the table below declares every route once.

use maud::html;
use shared_types::ErrorCode;
use worker::Method;

mod balances;
mod chart;
mod deliveries;
mod developers;
mod layout;
mod merchants;
mod overview;
mod payments;
mod screening;
mod session;
mod topups;
mod usdc_settlement;
mod users;
mod webhook_endpoints;

use layout::{error_box, layout, page, Call, Form};

use super::Csrf;
use crate::error::{ApiError, OrInternal};
use crate::http::see_other;
use crate::route::{self, Answer, Handler, Incoming, Route};

/// The route of `/portal/{rest}` (`None`: no such page). The login page is the one without a
/// session; every other runs on it (see [`on_session`]).
pub fn route<'a>(rest: &[&'a str]) -> Option<Route<'a, Incoming<'a>>> {
    match *rest {
        ["login"] => Some(Route::new().get(session::show_login).post(session::login)),
        _ => on_session_route(rest).map(|route| route.map(on_session)),
    }
}

/// Every page on the session: its path, and for each method the handler.
fn on_session_route<'a>(rest: &[&'a str]) -> Option<Route<'a, Call<'a>>> {
    Some(match *rest {
        [] | [""] => Route::new().get(overview::show),
        ["logout"] => Route::new().post(session::logout),
        ["payments"] => Route::new().get(payments::list),
        ["payments", "export.csv"] => Route::new().get(payments::export),
        ["payments", id] => Route::new().get(move |c| payments::show(c, id)),
        ["payments", id, "refund"] => Route::new().post(move |c| payments::refund(c, id)),
        ["payments", id, "return"] => Route::new().post(move |c| payments::return_extra(c, id)),
        ["screening"] => Route::new().get(screening::show),
        ["screening", "export.csv"] => Route::new().get(screening::export),
        ["screening", id] => Route::new().post(move |c| screening::decide(c, id)),
        ["screening", "topups", id] => Route::new().post(move |c| screening::decide_topup(c, id)),
        ["merchants"] => Route::new().get(merchants::list).post(merchants::create),
        ["merchants", id] => Route::new().get(move |c| merchants::show(c, id)),
        ["merchants", id, "topup"] => Route::new().post(move |c| topups::create(c, id)),
        ["merchants", id, "edit"] => Route::new().post(move |c| merchants::edit(c, id)),
        ["merchants", id, "status"] => Route::new().post(move |c| merchants::set_status(c, id)),
        ["merchants", id, "onboarding"] => {
            Route::new().post(move |c| merchants::set_onboarding(c, id))
        }
        ["merchants", id, "wallets"] => Route::new().post(move |c| merchants::set_wallet(c, id)),
        ["merchants", id, "usdc-settlement"] => {
            Route::new().post(move |c| usdc_settlement::set(c, id))
        }
        ["merchants", id, "origins"] => Route::new().post(move |c| merchants::set_origins(c, id)),
        ["merchants", id, "roll-key"] => Route::new().post(move |c| merchants::roll_key(c, id)),
        ["merchants", id, "debt-limit"] => {
            Route::new().post(move |c| merchants::set_debt_limit(c, id))
        }
        ["merchants", id, "balance", network, token] => {
            Route::new().get(move |c| balances::statement(c, id, network, token))
        }
        ["merchants", id, "balance", network, token, "export.csv"] => {
            Route::new().get(move |c| balances::export(c, id, network, token))
        }
        ["developers"] => Route::new().get(developers::show),
        ["developers", "clients"] => Route::new().post(developers::create_client),
        ["developers", "clients", id, "rotate"] => {
            Route::new().post(move |c| developers::rotate_client(c, id))
        }
        ["developers", "clients", id, "delete"] => {
            Route::new().post(move |c| developers::delete_client(c, id))
        }
        ["webhooks"] => Route::new()
            .get(webhook_endpoints::list)
            .post(webhook_endpoints::create),
        ["webhooks", id] => Route::new()
            .get(move |c| webhook_endpoints::show(c, id))
            .post(move |c| webhook_endpoints::update(c, id)),
        ["webhooks", id, "reveal"] => {
            Route::new().post(move |c| webhook_endpoints::reveal_secret(c, id))
        }
        ["webhooks", id, "rotate"] => {
            Route::new().post(move |c| webhook_endpoints::rotate_secret(c, id))
        }
        ["webhooks", id, "delete"] => Route::new().post(move |c| webhook_endpoints::delete(c, id)),
        ["webhooks", id, "enable"] => Route::new().post(move |c| webhook_endpoints::enable(c, id)),
        ["webhooks", id, "test"] => Route::new().post(move |c| webhook_endpoints::test(c, id)),
        ["deliveries", id] => Route::new().get(move |c| deliveries::show(c, id)),
        ["deliveries", id, "resend"] => Route::new().post(move |c| deliveries::resend(c, id)),
        ["users"] => Route::new().get(users::list).post(users::invite),
        ["users", id, "remove"] => Route::new().post(move |c| users::remove(c, id)),
        _ => return None,
    })
}

/// Runs a page's `handler` on the session. A read is authenticated first (without a session it
/// goes to the login page). A change (POST) has its form read, then the session authenticated
/// with the form's CSRF token and the caller's role checked where the session is
/// (`super::authenticate`), so no handler can forget them; a refusal is a page saying why.
fn on_session<'a>(handler: Handler<'a, Call<'a>>) -> Handler<'a, Incoming<'a>> {
    route::handler(move |Incoming { mut req, ctx, url }| async move {
        if req.method() == Method::Get {
            return match super::authenticate(&req, ctx, url, Csrf::NotNeeded).await {
                Ok(portal) => {
                    let form = Form::default();
                    handler(Call { portal, url, form }).await
                }
                Err(err) if err.code == ErrorCode::LoginRequired => see_other(url, "/portal/login"),
                Err(err) => Err(err),
            };
        }
        let form = Form::read(&mut req).await?;
        let csrf = Csrf::Form(form.get("csrf_token"));
        let portal = match super::authenticate(&req, ctx, url, csrf).await {
            Ok(portal) => portal,
            Err(err) if err.code == ErrorCode::LoginRequired => {
                return see_other(url, "/portal/login")
            }
            Err(err)
                if err.code == ErrorCode::CsrfFailed || err.code == ErrorCode::AdminRequired =>
            {
                return refused(&err.description)
            }
            Err(err) => return Err(err),
        };
        handler(Call { portal, url, form }).await
    })
}

/// Whether `path` is one of the portal's pages (under `/portal`, but not its JSON API): a
/// failure there is answered as a page ([`failure`]), an unknown page included.
pub fn is_page(path: &str) -> bool {
    match path.strip_prefix("/portal") {
        Some(rest) => {
            (rest.is_empty() || rest.starts_with('/'))
                && rest != "/api"
                && !rest.starts_with("/api/")
        }
        None => false,
    }
}

/// A page's failure as a page of the portal: its status, what went wrong (escaped, like all that
/// a page shows), the way back, and every page's headers, with `Allow` or `Retry-After` where
/// the failure carries them. A person meets these, not a program: never the API's JSON.
pub fn failure(err: &ApiError) -> Result<worker::Response, ApiError> {
    let status = err.code.http_status();
    let title = match status {
        400 => "Bad request",
        403 => "Refused",
        404 => "Page not found",
        405 => "Method not allowed",
        408 => "Request timed out",
        409 => "Conflict",
        413 => "Request too large",
        429 => "Too many requests",
        503 => "Unavailable",
        _ => "Something went wrong",
    };
    let response = page(
        status,
        layout(
            title,
            None,
            html! {
                section #failure {
                    h1 { (title) }
                    (error_box(Some(&err.description)))
                    p { a href="/portal/" { "Back to the portal" } }
                }
            },
        ),
    )?;
    let headers = response.headers();
    if let Some(allow) = &err.allow {
        headers.set("Allow", allow).or_internal("set header")?;
    }
    if let Some(seconds) = err.retry_after {
        headers
            .set("Retry-After", &seconds.to_string())
            .or_internal("set header")?;
    }
    Ok(response)
}

/// The page of a change refused for its CSRF token or the caller's role.
fn refused(why: &str) -> Answer {
    page(
        403,
        layout(
            "Refused",
            None,
            html! {
                section { h1 { "Request refused" } (error_box(Some(why)))
                    p { a href="/portal/" { "Back to the portal" } } }
            },
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::is_page;

    #[test]
    fn pages_are_the_portal_paths_outside_its_json_api() {
        for page in [
            "/portal",
            "/portal/",
            "/portal/payments",
            "/portal/nope",
            "/portal/apis",
        ] {
            assert!(is_page(page), "{page}");
        }
        for other in [
            "/portal/api",
            "/portal/api/",
            "/portal/api/session",
            "/portalx",
            "/v1/x",
        ] {
            assert!(!is_page(other), "{other}");
        }
    }
}
