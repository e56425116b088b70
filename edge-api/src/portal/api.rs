//! `/portal/api/…`: the JSON API behind the portal, on the portal's session (cookie) and CSRF
//! token (`X-CSRF-Token`). Bodies and errors are JSON in the spec's error shape. One module per
//! resource, as the URLs name them; the table below declares every route once.

mod call;
mod clients;
mod deliveries;
mod merchants;
mod networks;
mod notifications;
mod overview;
mod payments;
mod screening;
mod session;
mod topups;
mod users;
mod webhook_endpoints;

use worker::Method;

use self::call::Call;
use super::Csrf;
use crate::route::{self, Handler, Incoming, Route};

/// The route of `/portal/api/{rest}` (`None`: no such path). Logging in is the one call without
/// a session; every other runs on it (see [`on_session`]).
pub fn route<'a>(rest: &[&'a str]) -> Option<Route<'a, Incoming<'a>>> {
    match *rest {
        ["login"] => Some(Route::new().post(session::login)),
        _ => on_session_route(rest).map(|route| route.map(on_session)),
    }
}

/// Every route on the session: its path, and for each method the handler.
fn on_session_route<'a>(rest: &[&'a str]) -> Option<Route<'a, Call<'a>>> {
    Some(match *rest {
        ["logout"] => Route::new().post(session::logout),
        ["session"] => Route::new().get(session::show),
        ["clients"] => Route::new().get(clients::list).post(clients::create),
        ["clients", id] => Route::new().delete(move |c| clients::delete(c, id)),
        ["clients", id, "rotate"] => Route::new().post(move |c| clients::rotate(c, id)),
        ["webhook-endpoints"] => Route::new()
            .get(webhook_endpoints::list)
            .post(webhook_endpoints::create),
        ["webhook-endpoints", id] => Route::new()
            .get(move |c| webhook_endpoints::show(c, id))
            .patch(move |c| webhook_endpoints::update(c, id))
            .delete(move |c| webhook_endpoints::delete(c, id)),
        ["webhook-endpoints", id, "secret"] => {
            Route::new().get(move |c| webhook_endpoints::reveal_secret(c, id))
        }
        ["webhook-endpoints", id, "rotate-secret"] => {
            Route::new().post(move |c| webhook_endpoints::rotate_secret(c, id))
        }
        ["webhook-endpoints", id, "deliveries"] => {
            Route::new().get(move |c| webhook_endpoints::deliveries(c, id))
        }
        ["webhook-endpoints", id, "enable"] => {
            Route::new().post(move |c| webhook_endpoints::enable(c, id))
        }
        ["webhook-endpoints", id, "test"] => {
            Route::new().post(move |c| webhook_endpoints::test(c, id))
        }
        ["screening"] => Route::new().get(screening::list),
        ["screening", id] => Route::new().post(move |c| screening::decide(c, id)),
        ["screening", "topups", id] => Route::new().post(move |c| screening::decide_topup(c, id)),
        ["deliveries", id] => Route::new().get(move |c| deliveries::show(c, id)),
        ["deliveries", id, "resend"] => Route::new().post(move |c| deliveries::resend(c, id)),
        ["merchants"] => Route::new().get(merchants::list).post(merchants::create),
        ["merchants", id] => Route::new()
            .get(move |c| merchants::show(c, id))
            .patch(move |c| merchants::update(c, id)),
        ["merchants", id, "topup"] => Route::new().get(move |c| topups::list(c, id)),
        ["merchants", id, "topup", network] => {
            Route::new().post(move |c| topups::create(c, id, network))
        }
        ["merchants", id, "wallets", network] => Route::new()
            .put(move |c| merchants::set_wallet(c, id, network))
            .delete(move |c| merchants::remove_wallet(c, id, network)),
        ["merchants", id, "usdc-settlement-network"] => {
            Route::new().put(move |c| merchants::set_usdc_settlement(c, id))
        }
        ["merchants", id, "return-origins"] => {
            Route::new().put(move |c| merchants::set_origins(c, id))
        }
        ["merchants", id, "roll-key"] => Route::new().post(move |c| merchants::roll_key(c, id)),
        ["merchants", id, "balances"] => Route::new().get(move |c| merchants::balances(c, id)),
        ["merchants", id, "balances", network, token] => {
            Route::new().get(move |c| merchants::statement(c, id, network, token))
        }
        ["merchants", id, "balances", network, token, "debt-limit"] => {
            Route::new().put(move |c| merchants::set_debt_limit(c, id, network, token))
        }
        ["payments"] => Route::new().get(payments::list),
        ["payments", id] => Route::new().get(move |c| payments::show(c, id)),
        ["payments", id, "refunds"] => Route::new().post(move |c| payments::refund(c, id)),
        ["payments", id, "returns"] => Route::new().post(move |c| payments::return_extra(c, id)),
        ["payments", id, "refunds", "preview"] => {
            Route::new().post(move |c| payments::preview_refund(c, id))
        }
        ["overview"] => Route::new().get(overview::show),
        ["networks"] => Route::new().get(networks::list),
        ["users"] => Route::new().get(users::list).post(users::invite),
        ["users", id] => Route::new().delete(move |c| users::remove(c, id)),
        ["notifications"] => Route::new().get(notifications::list),
        _ => return None,
    })
}

/// Runs `handler` on the session: the cookie's session authenticated first and, for a change
/// (anything but a read), its CSRF token and the caller's role checked where the session is
/// (`super::authenticate`), so no handler can forget them.
fn on_session<'a>(handler: Handler<'a, Call<'a>>) -> Handler<'a, Incoming<'a>> {
    route::handler(move |Incoming { req, ctx, url }| async move {
        let csrf = if matches!(req.method(), Method::Get | Method::Head) {
            Csrf::NotNeeded
        } else {
            Csrf::Header
        };
        let portal = super::authenticate(&req, ctx, url, csrf).await?;
        handler(Call { portal, req, url }).await
    })
}
