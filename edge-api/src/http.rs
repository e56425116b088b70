//! Building responses: JSON bodies, headers, and errors in the spec's shape.

use serde::Serialize;
use worker::Response;

use crate::error::ApiError;

/// A JSON response with the given status. Every API response is private to its caller.
pub fn json<T: Serialize>(status: u16, body: &T) -> worker::Result<Response> {
    let response = Response::from_json(body)?.with_status(status);
    response.headers().set("Cache-Control", "no-store")?;
    Ok(response)
}

/// The error's status, body and headers.
pub fn error(err: &ApiError) -> worker::Result<Response> {
    let response = json(err.code.http_status(), &err.body())?;
    if let Some(challenge) = &err.challenge {
        response.headers().set("WWW-Authenticate", challenge)?;
    }
    if let Some(seconds) = err.retry_after {
        response
            .headers()
            .set("Retry-After", &seconds.to_string())?;
    }
    Ok(response)
}
