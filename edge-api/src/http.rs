//! Building responses: JSON bodies, headers, and errors in the spec's shape.

use serde::Serialize;
use worker::{Request, Response, Url};

use crate::error::{ApiError, OrInternal};

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
    if let Some(allow) = &err.allow {
        response.headers().set("Allow", allow)?;
    }
    if let Some(seconds) = err.retry_after {
        response
            .headers()
            .set("Retry-After", &seconds.to_string())?;
    }
    Ok(response)
}

/// The request body, refused unless `Content-Type` names `media_type` (parameters such as
/// `charset` allowed).
pub async fn body_of_type(req: &mut Request, media_type: &str) -> Result<String, ApiError> {
    let content_type = req
        .headers()
        .get("Content-Type")
        .or_internal("read header")?
        .unwrap_or_default();
    if !content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case(media_type))
    {
        return Err(ApiError::invalid_request(format!(
            "Content-Type must be {media_type}"
        )));
    }
    req.text().await.or_internal("read body")
}

/// `303 See Other` to one of our own paths. (Built by hand: `Response::redirect` has immutable
/// headers, and some redirects add a cookie.)
pub fn see_other(url: &Url, path: &str) -> Result<Response, ApiError> {
    let mut target = url.clone();
    target.set_path(path);
    target.set_query(None);
    let response = Response::empty()
        .or_internal("build redirect")?
        .with_status(303);
    response
        .headers()
        .set("Location", target.as_str())
        .or_internal("set header")?;
    Ok(response)
}

/// The caller's address (`CF-Connecting-IP`, set by Cloudflare), when known.
pub fn caller_address(req: &Request) -> Option<String> {
    req.headers().get("CF-Connecting-IP").ok().flatten()
}
