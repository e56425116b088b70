//! Request routing: method and path to handler, and errors to the spec's error body.

mod checkout;
mod hosted_page;
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

async fn route(req: Request, ctx: &Ctx) -> Result<Response, ApiError> {
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
            token::handle(req, ctx, &url).await
        }
        ["v1", "transactions"] => {
            allow(Method::Get)?;
            transactions::list(&req, ctx, &url).await
        }
        ["v1", "merchants"] => {
            allow(Method::Get)?;
            merchants::list(&req, ctx, &url).await
        }
        ["v1", "merchants", id] => {
            allow(Method::Get)?;
            merchants::get(&req, ctx, id).await
        }
        ["checkout", "sessions"] => checkout::sessions(req, ctx, &url).await,
        ["checkout", id] => {
            allow(Method::Get)?;
            checkout::page(ctx, id, None).await
        }
        ["checkout", id, "status"] => {
            allow(Method::Get)?;
            checkout::status(ctx, id).await
        }
        ["checkout", id, "method"] => {
            allow(Method::Post)?;
            checkout::choose_method(req, ctx, &url, id).await
        }
        ["checkout", id, "sandbox", control] => {
            allow(Method::Post)?;
            checkout::sandbox_control(ctx, &url, id, control).await
        }
        ["sandbox", "transactions", id, action] if ctx.sandbox() => {
            allow(Method::Post)?;
            sandbox::act(req, ctx, id, action).await
        }
        ["portal", "api", rest @ ..] => crate::portal::api::handle(req, ctx, &url, rest).await,
        ["portal", rest @ ..] => crate::portal::pages::handle(req, ctx, &url, rest).await,
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
