//! Request routing: every path the worker answers, its methods and their handlers, in one table
//! (the portal's under `/portal`); the dispatch and the 405 are read from it, and every failure
//! is rendered as the spec's error body.

mod checkout;
mod events;
mod hosted_page;
mod list;
mod merchants;
mod operator;
mod sandbox;
mod token;
mod transactions;

#[cfg(test)]
mod tables_test;

use worker::{Request, Response};

use crate::crypto;
use crate::ctx::Ctx;
use crate::error::{ApiError, OrInternal};
use crate::http;
use crate::portal;
use crate::route::{Answer, Incoming, Route};

/// The OpenAPI 3.1 description of the partner API, served at `/openapi.json`.
const OPENAPI: &str = include_str!("../../openapi.json");

/// Answers one request; every failure becomes the spec's error body, or on the portal's pages,
/// a page saying what went wrong. Every answer carries `Payrail-Request-Id`, a fresh id that a
/// failure on our side is logged with, so a partner quoting it finds the log line.
pub async fn handle(req: Request, ctx: &Ctx) -> worker::Result<Response> {
    let page = portal::pages::is_page(&req.path());
    let request_id = request_id();
    let answer = dispatch(req, ctx).await;
    // The request's boundary: a failure on our side is logged here, once, with its source line.
    if let Some(line) = answer.as_ref().err().and_then(ApiError::log_line) {
        worker::console_error!("{request_id}: {line}");
    }
    let mut response = match answer {
        Ok(response) => response,
        Err(err) if page => match portal::pages::failure(&err) {
            Ok(response) => response,
            Err(_) => http::error(&err)?,
        },
        Err(err) => http::error(&err)?,
    };
    // An answer with immutable headers (none of ours) goes out without the id.
    let _ = response.headers_mut().set(REQUEST_ID, &request_id);
    Ok(response)
}

/// The answer header naming the request.
pub const REQUEST_ID: &str = "Payrail-Request-Id";

/// `req_` and 12 random bytes in hex; `req_unknown` if the platform's generator fails (the id
/// only names a log line: the answer does not wait on it).
fn request_id() -> String {
    crypto::random_bytes::<12>().map_or_else(
        |_| "req_unknown".to_owned(),
        |bytes| format!("req_{}", hex::encode(bytes)),
    )
}

/// Every path the worker answers, with its methods and their handlers (`None`: no such path).
/// One table for the whole worker, so an unsupported method, even one the platform does not
/// know (`QUERY`), gets 405 with `Allow`. The sandbox's paths exist only in sandbox mode.
fn route<'a>(segments: &[&'a str], sandbox: bool) -> Option<Route<'a, Incoming<'a>>> {
    Some(match *segments {
        ["oauth", "token"] => Route::new().post(token::issue),
        ["v1", "transactions"] => Route::new().get(transactions::list),
        ["v1", "events"] => Route::new().get(events::list),
        ["v1", "events", id] => Route::new().get(move |r| events::get(r, id)),
        ["v1", "merchants"] => Route::new().get(merchants::list),
        ["v1", "merchants", id] => Route::new().get(move |r| merchants::get(r, id)),
        ["checkout", "sessions"] => Route::new()
            .post(checkout::create_session)
            .options(checkout::preflight),
        ["checkout", id] => Route::new().get(move |r| checkout::show(r, id)),
        ["checkout", id, "status"] => Route::new().get(move |r| checkout::status(r, id)),
        ["checkout", id, "method"] => Route::new().post(move |r| checkout::choose_method(r, id)),
        ["checkout", id, "sandbox", control] if sandbox => {
            Route::new().post(move |r| checkout::sandbox_control(r, id, control))
        }
        ["sandbox", "transactions", id, action] if sandbox => {
            Route::new().post(move |r| sandbox::act(r, id, action))
        }
        ["portal", "api", ref rest @ ..] => return portal::api::route(rest),
        ["portal", ref rest @ ..] => return portal::pages::route(rest),
        ["operator", "institutions", id, "move"] => {
            Route::new().post(move |r| operator::move_in(r, id))
        }
        ["operator", "institutions", id, "copy"] => {
            Route::new().post(move |r| operator::copy(r, id))
        }
        ["operator", "institutions", id, "books"] => {
            Route::new().get(move |r| operator::books(r, id))
        }
        ["operator", "sanctioned-addresses"] => Route::new()
            .get(operator::sanctions)
            .post(operator::load_sanctions),
        ["operator", "sanctioned-addresses", "remove"] => {
            Route::new().post(operator::remove_sanction)
        }
        ["operator", "screening-outages"] => Route::new().get(operator::outages),
        ["operator", "float-moves"] => Route::new()
            .get(operator::float_moves)
            .post(operator::move_float),
        ["operator", "float-moves", id] => Route::new().get(move |r| operator::float_move(r, id)),
        ["operator", "held-deposits"] => Route::new().get(operator::held_deposits),
        ["openapi.json"] => Route::new().get(openapi),
        _ => return None,
    })
}

async fn dispatch(req: Request, ctx: &Ctx) -> Result<Response, ApiError> {
    let url = req.url().or_internal("parse url")?;
    let segments: Vec<&str> = url.path().trim_start_matches('/').split('/').collect();
    let route = route(&segments, ctx.sandbox()).ok_or_else(|| {
        let what = if portal::pages::is_page(url.path()) {
            "page"
        } else {
            "endpoint"
        };
        ApiError::not_found(format!("no such {what}: {}", url.path()))
    })?;
    // The platform's method type reads any method it does not know as GET: pass the raw one.
    let method = req.inner().method();
    let handler = route.handler(&method, url.path())?;
    // The portal's read pages read through a D1 session (replicas once D1 read replication is
    // on), its bookmark on the answer; everything else reads the primary (the partner API's
    // reads choose their own sessions, `routes::list`).
    if segments.first() == Some(&"portal") && matches!(method.as_str(), "GET" | "HEAD") {
        let reading = ctx.reading_through_session()?;
        let response = handler(Incoming {
            req,
            ctx: &reading,
            url: &url,
        })
        .await?;
        return list::with_bookmark(response, &reading.db);
    }
    handler(Incoming {
        req,
        ctx,
        url: &url,
    })
    .await
}

/// `GET /openapi.json`.
async fn openapi(_: Incoming<'_>) -> Answer {
    let response = Response::ok(OPENAPI).or_internal("build response")?;
    response
        .headers()
        .set("Content-Type", "application/json")
        .or_internal("set header")?;
    Ok(response)
}
