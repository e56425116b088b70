//! Request routing: method and path to handler, and errors to the spec's error body.

mod checkout;
mod events;
mod hosted_page;
mod list;
mod merchants;
mod sandbox;
mod token;
mod transactions;

use shared_types::ErrorCode;
use worker::{Method, Request, Response};

use crate::ctx::Ctx;
use crate::error::{ApiError, OrInternal};
use crate::http;

/// The OpenAPI 3.1 description of the partner API, served at `/openapi.json`.
const OPENAPI: &str = include_str!("../../openapi.json");

/// Answers one request; every failure becomes the spec's error body.
pub async fn handle(req: Request, ctx: &Ctx) -> worker::Result<Response> {
    match route(req, ctx).await {
        Ok(response) => Ok(response),
        Err(err) => http::error(&err),
    }
}

/// The methods a path answers (`None`: no such path). One table for the whole worker, so an
/// unsupported method, even one the platform does not know (`QUERY`), gets 405 with `Allow`.
fn methods(segments: &[&str], sandbox: bool) -> Option<&'static [Method]> {
    use Method::{Get, Options, Post};
    Some(match segments {
        ["oauth", "token"] => &[Post],
        ["v1", "transactions"]
        | ["v1", "events"]
        | ["v1", "merchants"]
        | ["v1", "merchants", _] => &[Get],
        ["checkout", "sessions"] => &[Post, Options],
        ["checkout", _] | ["checkout", _, "status"] => &[Get],
        ["checkout", _, "method"] => &[Post],
        ["checkout", _, "sandbox", _] if sandbox => &[Post],
        ["sandbox", "transactions", _, _] if sandbox => &[Post],
        ["portal", "api", rest @ ..] => return crate::portal::api::methods(rest),
        ["portal", rest @ ..] => return crate::portal::pages::methods(rest),
        ["openapi.json"] => &[Get],
        _ => return None,
    })
}

async fn route(req: Request, ctx: &Ctx) -> Result<Response, ApiError> {
    let url = req.url().or_internal("parse url")?;
    let segments: Vec<&str> = url.path().trim_start_matches('/').split('/').collect();
    let allowed = methods(&segments, ctx.sandbox())
        .ok_or_else(|| ApiError::not_found(format!("no such endpoint: {}", url.path())))?;
    // The platform's method type reads any method it does not know as GET: compare the raw one.
    let raw = req.inner().method().to_ascii_uppercase();
    if !allowed.iter().any(|m| m.as_ref() == raw) {
        let allow: Vec<&str> = allowed.iter().map(|m| m.as_ref()).collect();
        return Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!(
                "{raw} {} is not supported; use {}",
                url.path(),
                allow.join(" or ")
            ),
        )
        .with_allow(allow.join(", ")));
    }
    match segments.as_slice() {
        ["oauth", "token"] => token::handle(req, ctx, &url).await,
        ["v1", "transactions"] => transactions::list(&req, ctx, &url).await,
        ["v1", "events"] => events::list(&req, ctx, &url).await,
        ["v1", "merchants"] => merchants::list(&req, ctx, &url).await,
        ["v1", "merchants", id] => merchants::get(&req, ctx, id).await,
        ["checkout", "sessions"] => checkout::sessions(req, ctx, &url).await,
        ["checkout", id] => checkout::page(ctx, id, None).await,
        ["checkout", id, "status"] => checkout::status(ctx, id).await,
        ["checkout", id, "method"] => checkout::choose_method(req, ctx, &url, id).await,
        ["checkout", id, "sandbox", control] => {
            checkout::sandbox_control(ctx, &url, id, control).await
        }
        ["sandbox", "transactions", id, action] => sandbox::act(req, ctx, id, action).await,
        ["portal", "api", rest @ ..] => crate::portal::api::handle(req, ctx, &url, rest).await,
        ["portal", rest @ ..] => crate::portal::pages::handle(req, ctx, &url, rest).await,
        ["openapi.json"] => {
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
