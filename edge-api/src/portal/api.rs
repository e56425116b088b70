//! `/portal/api/…`: the JSON API behind the portal, on the portal's session (cookie) and CSRF
//! token (`X-CSRF-Token`). Bodies and errors are JSON in the spec's error shape.

use serde::Deserialize;
use serde_json::json;
use worker::{Method, Request, Response, Url};

use super::{
    clients, deliveries, endpoints, merchants, networks, payments, users, with_cookie, Cookie,
    Csrf, Portal,
};
use crate::chain::refund;
use crate::ctx::Ctx;
use crate::error::{from_json, ApiError, OrInternal};
use crate::http;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    email: String,
    password: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewClient {
    name: String,
    scopes: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Enable {
    resend_failed_since: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Rotate {
    grace_period_seconds: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WalletBody {
    address: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefundBody {
    amount: String,
    address: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OriginsBody {
    return_origins: Vec<String>,
}

/// The methods `/portal/api/{rest}` answers (`None`: no such path).
pub fn methods(rest: &[&str]) -> Option<&'static [Method]> {
    use Method::{Delete, Get, Patch, Post, Put};
    Some(match rest {
        ["merchants"] => &[Get, Post],
        ["merchants", _] => &[Get, Patch],
        ["merchants", _, "wallets", _] => &[Put, Delete],
        ["merchants", _, "return-origins"] => &[Put],
        ["merchants", _, "roll-key"] => &[Post],
        ["login"] | ["logout"] => &[Post],
        ["session"] | ["notifications"] | ["overview"] | ["payments"] | ["payments", _] => &[Get],
        ["payments", _, "refunds"] | ["payments", _, "refunds", "preview"] => &[Post],
        ["users"] => &[Get, Post],
        ["networks"] => &[Get],
        ["users", _] => &[Delete],
        ["clients"] | ["webhook-endpoints"] => &[Get, Post],
        ["clients", _] => &[Delete],
        ["clients", _, "rotate"] => &[Post],
        ["webhook-endpoints", _] => &[Get, Patch, Delete],
        ["webhook-endpoints", _, "secret" | "deliveries"] => &[Get],
        ["webhook-endpoints", _, "rotate-secret" | "enable" | "test"] => &[Post],
        ["deliveries", _] => &[Get],
        ["deliveries", _, "resend"] => &[Post],
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

/// Routes `/portal/api/{rest}` (the method is one [`methods`] allows).
pub async fn handle(
    mut req: Request,
    ctx: &Ctx,
    url: &Url,
    rest: &[&str],
) -> Result<Response, ApiError> {
    // The router has checked the method against `methods`.
    let method = req.method();
    if rest == ["login"] {
        super::check_origin(&req, url)?;
        let body = json_body(&mut req).await?;
        let Login { email, password } = from_json(&body)?;
        let session = super::login(ctx, &email, &password).await?;
        let response = http::json(
            200,
            &json!({
                "csrf_token": session.csrf_token,
                "expires_at": shared_types::time::format_unix(session.expires_at),
            }),
        )
        .or_internal("build response")?;
        return with_cookie(response, Cookie::Start(&session.token));
    }

    let changes = !matches!(method, Method::Get | Method::Head);
    let csrf = if changes {
        Csrf::Header
    } else {
        Csrf::NotNeeded
    };
    let portal = super::authenticate(&req, ctx, url, csrf).await?;
    let ok = |status: u16, body: serde_json::Value| {
        http::json(status, &body).or_internal("build response")
    };

    match (method.clone(), rest) {
        (Method::Get, ["session"]) => ok(200, session_json(&portal)),
        (Method::Post, ["logout"]) => {
            super::logout(&portal).await?;
            with_cookie(ok(200, json!({"logged_out": true}))?, Cookie::End)
        }
        (Method::Get, ["clients"]) => {
            let clients = clients::list(&portal).await?;
            ok(200, json!({"object": "list", "data": clients}))
        }
        (Method::Post, ["clients"]) => {
            let NewClient { name, scopes } = from_json(&json_body(&mut req).await?)?;
            let (client, secret) = clients::create(&portal, &name, &scopes).await?;
            ok(201, with_member(to_json(&client)?, "client_secret", secret))
        }
        (Method::Post, ["clients", id, "rotate"]) => {
            let (client, secret) = clients::rotate(&portal, id).await?;
            ok(200, with_member(to_json(&client)?, "client_secret", secret))
        }
        (Method::Delete, ["clients", id]) => {
            clients::delete(&portal, id).await?;
            ok(200, json!({"deleted": true, "client_id": id}))
        }
        (Method::Get, ["webhook-endpoints"]) => {
            let endpoints = endpoints::list(&portal).await?;
            ok(200, json!({"object": "list", "data": endpoints}))
        }
        (Method::Post, ["webhook-endpoints"]) => {
            let new: endpoints::NewEndpoint = from_json(&json_body(&mut req).await?)?;
            let (endpoint, secret) = endpoints::create(&portal, &new).await?;
            ok(
                201,
                with_member(to_json(&endpoint)?, "signing_secret", secret),
            )
        }
        (Method::Get, ["webhook-endpoints", id]) => ok(
            200,
            to_json(&endpoints::get(&portal, endpoints::endpoint_id(id)?).await?)?,
        ),
        (Method::Patch, ["webhook-endpoints", id]) => {
            let id = endpoints::endpoint_id(id)?;
            let patch: endpoints::EndpointPatch = from_json(&json_body(&mut req).await?)?;
            ok(
                200,
                to_json(&endpoints::update(&portal, id, &patch).await?)?,
            )
        }
        (Method::Delete, ["webhook-endpoints", id]) => {
            let id = endpoints::endpoint_id(id)?;
            endpoints::delete(&portal, id).await?;
            ok(200, json!({"deleted": true, "id": id}))
        }
        (Method::Get, ["webhook-endpoints", id, "secret"]) => ok(
            200,
            to_json(&endpoints::reveal_secret(&portal, endpoints::endpoint_id(id)?).await?)?,
        ),
        (Method::Post, ["webhook-endpoints", id, "rotate-secret"]) => {
            let id = endpoints::endpoint_id(id)?;
            let Rotate {
                grace_period_seconds,
            } = optional_json(&mut req).await?;
            ok(
                200,
                to_json(&endpoints::rotate_secret(&portal, id, grace_period_seconds).await?)?,
            )
        }
        (Method::Get, ["webhook-endpoints", id, "deliveries"]) => {
            let id = endpoints::endpoint_id(id)?;
            ok(
                200,
                to_json(&deliveries::log(&portal, id, url.query().unwrap_or("")).await?)?,
            )
        }
        (Method::Post, ["webhook-endpoints", id, "enable"]) => {
            let id = endpoints::endpoint_id(id)?;
            let Enable {
                resend_failed_since,
            } = optional_json(&mut req).await?;
            ok(
                200,
                deliveries::enable(&portal, id, resend_failed_since.as_deref()).await?,
            )
        }
        (Method::Post, ["webhook-endpoints", id, "test"]) => {
            let id = endpoints::endpoint_id(id)?;
            ok(201, to_json(&deliveries::send_test(&portal, id).await?)?)
        }
        (Method::Get, ["deliveries", id]) => ok(200, deliveries::detail(&portal, id).await?),
        (Method::Post, ["deliveries", id, "resend"]) => {
            ok(201, to_json(&deliveries::resend(&portal, id).await?)?)
        }
        (Method::Get, ["merchants"]) => ok(
            200,
            to_json(&merchants::list(&portal, url.query().unwrap_or("")).await?)?,
        ),
        (Method::Post, ["merchants"]) => {
            let new: merchants::NewMerchantBody = from_json(&json_body(&mut req).await?)?;
            ok(201, to_json(&merchants::create(&portal, &new).await?)?)
        }
        (Method::Get, ["merchants", id]) => {
            let id = merchants::merchant_id(id)?;
            ok(200, to_json(&merchants::detail(&portal, id).await?)?)
        }
        (Method::Patch, ["merchants", id]) => {
            let id = merchants::merchant_id(id)?;
            let patch: merchants::MerchantPatch = from_json(&json_body(&mut req).await?)?;
            ok(
                200,
                to_json(&merchants::update(&portal, id, &patch).await?)?,
            )
        }
        (Method::Put, ["merchants", id, "wallets", network]) => {
            let id = merchants::merchant_id(id)?;
            let WalletBody { address } = from_json(&json_body(&mut req).await?)?;
            ok(
                200,
                to_json(&merchants::set_wallet(&portal, id, network, Some(&address)).await?)?,
            )
        }
        (Method::Delete, ["merchants", id, "wallets", network]) => {
            let id = merchants::merchant_id(id)?;
            ok(
                200,
                to_json(&merchants::set_wallet(&portal, id, network, None).await?)?,
            )
        }
        (Method::Put, ["merchants", id, "return-origins"]) => {
            let id = merchants::merchant_id(id)?;
            let OriginsBody { return_origins } = from_json(&json_body(&mut req).await?)?;
            ok(
                200,
                to_json(&merchants::set_origins(&portal, id, &return_origins).await?)?,
            )
        }
        (Method::Post, ["merchants", id, "roll-key"]) => {
            let id = merchants::merchant_id(id)?;
            let Rotate {
                grace_period_seconds,
            } = optional_json(&mut req).await?;
            ok(
                200,
                to_json(&merchants::roll_key(&portal, id, grace_period_seconds).await?)?,
            )
        }
        (Method::Get, ["payments"]) => ok(
            200,
            to_json(&payments::list(&portal, url.query().unwrap_or("")).await?)?,
        ),
        (Method::Get, ["payments", id]) => ok(
            200,
            to_json(&payments::detail(&portal, payments::payment_id(id)?).await?)?,
        ),
        (Method::Post, ["payments", id, "refunds", "preview"]) => {
            let id = payments::payment_id(id)?;
            let RefundBody { amount, address } = from_json(&json_body(&mut req).await?)?;
            let request = refund::RefundRequest {
                amount: &amount,
                address: &address,
            };
            let preview = refund::preview(ctx, portal.institution_id(), id, &request).await?;
            ok(200, to_json(&preview)?)
        }
        (Method::Post, ["payments", id, "refunds"]) => {
            let id = payments::payment_id(id)?;
            let key = req
                .headers()
                .get("Idempotency-Key")
                .or_internal("read header")?
                .unwrap_or_default();
            let RefundBody { amount, address } = from_json(&json_body(&mut req).await?)?;
            let request = refund::RefundRequest {
                amount: &amount,
                address: &address,
            };
            let (view, created) = refund::request(
                ctx,
                portal.institution_id(),
                id,
                &request,
                &key,
                &portal.session.email,
            )
            .await?;
            ok(if created { 201 } else { 200 }, to_json(&view)?)
        }
        (Method::Get, ["overview"]) => ok(200, to_json(&payments::overview(&portal).await?)?),
        (Method::Get, ["networks"]) => {
            let list = networks::status(&portal).await?;
            ok(200, json!({"object": "list", "data": list}))
        }
        (Method::Get, ["users"]) => {
            let list = users::list(&portal).await?;
            ok(200, json!({"object": "list", "data": list}))
        }
        (Method::Post, ["users"]) => {
            let invite: users::Invite = from_json(&json_body(&mut req).await?)?;
            ok(201, to_json(&users::invite(&portal, &invite).await?)?)
        }
        (Method::Delete, ["users", id]) => {
            users::remove(&portal, id).await?;
            ok(200, json!({"deleted": true, "id": id}))
        }
        (Method::Get, ["notifications"]) => {
            let list = deliveries::list_notifications(&portal).await?;
            ok(200, json!({"object": "list", "data": list}))
        }
        _ => Err(ApiError::not_found(format!(
            "no such endpoint: {}",
            url.path()
        ))),
    }
}

/// The session as `GET /portal/api/session` shows it.
fn session_json(portal: &Portal<'_>) -> serde_json::Value {
    json!({
        "email": portal.session.email,
        "role": portal.session.role,
        "institution": portal.session.institution_name,
        "csrf_token": portal.session.csrf_token,
        "expires_at": shared_types::time::format_unix(portal.session.expires_at),
    })
}

/// An optional JSON body: an empty one reads as the default.
async fn optional_json<T: Default + serde::de::DeserializeOwned>(
    req: &mut Request,
) -> Result<T, ApiError> {
    let body = http::json_body(req, http::PORTAL_BODY_MAX).await?;
    if body.trim().is_empty() {
        Ok(T::default())
    } else {
        from_json(&body)
    }
}

/// A JSON body: the content type must say so.
async fn json_body(req: &mut Request) -> Result<String, ApiError> {
    http::body_of_type(req, "application/json", http::PORTAL_BODY_MAX).await
}

fn with_member(mut object: serde_json::Value, name: &str, value: String) -> serde_json::Value {
    object[name] = serde_json::Value::String(value);
    object
}

fn to_json<T: serde::Serialize>(view: &T) -> Result<serde_json::Value, ApiError> {
    serde_json::to_value(view).or_internal("encode response")
}
