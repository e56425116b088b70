//! Request routing: method and path to handler, and errors to the spec's error body.

mod checkout;
mod merchants;
mod sandbox;
mod token;
mod transactions;

use shared_types::ErrorCode;
use worker::{Env, Method, Request, Response};

use crate::db::clients;
use crate::error::{ApiError, OrInternal};
use crate::{auth, http};

/// The OpenAPI 3.1 description of the partner API, served at `/openapi.json`.
const OPENAPI: &str = include_str!("../../openapi.json");

/// Answers one request; every failure becomes the spec's error body.
pub async fn handle(req: Request, env: &Env) -> worker::Result<Response> {
    match route(req, env).await {
        Ok(response) => Ok(response),
        Err(err) => http::error(&err),
    }
}

async fn route(req: Request, env: &Env) -> Result<Response, ApiError> {
    let url = req.url().or_internal("parse url")?;
    let segments: Vec<&str> = url.path().trim_start_matches('/').split('/').collect();
    let method = req.method();
    let allow = |allowed: Method| {
        if method == allowed {
            Ok(())
        } else {
            Err(ApiError::new(
                ErrorCode::MethodNotAllowed,
                format!("{} {} is not supported; use {allowed}", method, url.path()),
            )
            .with_allow(allowed.to_string()))
        }
    };
    match segments.as_slice() {
        ["oauth", "token"] => {
            allow(Method::Post)?;
            token::handle(req, env, &url).await
        }
        ["v1", "transactions"] => {
            allow(Method::Get)?;
            transactions::list(&req, env, &url).await
        }
        ["v1", "merchants"] => {
            allow(Method::Get)?;
            merchants::list(&req, env, &url).await
        }
        ["v1", "merchants", id] => {
            allow(Method::Get)?;
            merchants::get(&req, env, id).await
        }
        ["checkout", "sessions"] => checkout::sessions(req, env, &url).await,
        ["checkout", id] => {
            allow(Method::Get)?;
            checkout::page(env, id, None).await
        }
        ["checkout", id, "status"] => {
            allow(Method::Get)?;
            checkout::status(env, id).await
        }
        ["checkout", id, "method"] => {
            allow(Method::Post)?;
            checkout::choose_method(req, env, &url, id).await
        }
        ["checkout", id, "sandbox", control] => {
            allow(Method::Post)?;
            checkout::sandbox_control(env, &url, id, control).await
        }
        ["sandbox", "transactions", id, action] if sandbox(env) => {
            allow(Method::Post)?;
            sandbox::act(req, env, id, action).await
        }
        ["portal", "api", rest @ ..] => crate::portal::api::handle(req, env, &url, rest).await,
        ["portal", rest @ ..] => crate::portal::pages::handle(req, env, &url, rest).await,
        ["openapi.json"] => {
            allow(Method::Get)?;
            let response = Response::ok(OPENAPI).or_internal("build response")?;
            response
                .headers()
                .set("Content-Type", "application/json")
                .or_internal("set header")?;
            Ok(response)
        }
        _ => Err(ApiError::not_found(format!(
            "no such endpoint: {}",
            url.path()
        ))),
    }
}

/// The D1 database binding.
pub fn database(env: &Env) -> Result<worker::D1Database, ApiError> {
    env.d1("DB").or_internal("bind D1")
}

/// Whether this deployment runs in sandbox mode (`PAYRAIL_MODE=sandbox`): the local default,
/// never production. Sandbox adds the lifecycle controls; without it their routes do not exist.
pub fn sandbox(env: &Env) -> bool {
    env.var("PAYRAIL_MODE")
        .map(|v| v.to_string() == "sandbox")
        .unwrap_or(false)
}

/// Current time in Unix seconds (`SystemTime` is unavailable on wasm32).
pub fn now() -> i64 {
    (js_sys::Date::now() / 1000.0).floor() as i64
}

/// The caller's address, for throttling (`CF-Connecting-IP`, set by Cloudflare).
pub fn source(req: &Request) -> Result<String, ApiError> {
    Ok(req
        .headers()
        .get("CF-Connecting-IP")
        .or_internal("read header")?
        .unwrap_or_else(|| "unknown".to_owned()))
}

/// Authorises the request for `scope`, as its institution.
async fn caller(
    req: &Request,
    env: &Env,
    scope: shared_types::Scope,
) -> Result<(worker::D1Database, auth::Caller), ApiError> {
    let db = database(env)?;
    let caller = auth::authorize(&db, req.headers(), scope, now()).await?;
    Ok((db, caller))
}

/// The cron trigger's housekeeping: expired tokens, closed throttle windows, expired checkouts,
/// idempotency keys past their retention, ended portal sessions, and webhook deliveries whose
/// queue message was lost.
pub async fn housekeeping(env: &Env, _cron: String) -> Result<(), ApiError> {
    let db = database(env)?;
    let now = now();
    clients::purge_expired(&db, now, auth::FAILURE_WINDOW_SECONDS)
        .await
        .or_internal("purge expired tokens")?;
    let now_text = shared_types::time::format_unix(now)
        .ok_or("time out of range")
        .or_internal("format now")?;
    crate::db::checkout::expire_sessions(&db, now, &now_text)
        .await
        .or_internal("expire checkouts")?;
    // Keys are honoured for 24 hours and kept a day longer.
    crate::db::checkout::purge_keys(&db, now - 2 * checkout::KEY_SECONDS)
        .await
        .or_internal("purge idempotency keys")?;
    crate::db::portal::purge_sessions(&db, now)
        .await
        .or_internal("purge portal sessions")?;
    crate::webhooks::sweep(env).await
}
