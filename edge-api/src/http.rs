//! Building responses: JSON bodies, headers, and errors in the spec's shape.

use std::time::Duration;

use futures_util::future::{select, Either};
use futures_util::StreamExt;
use serde::Serialize;
use shared_types::ErrorCode;
use wasm_bindgen::{JsCast, JsValue};
use worker::{AbortController, Delay, Fetch, Request, Response, Url};

use crate::error::{ApiError, OrInternal};

/// A JSON response with the given status. Every API response is private to its caller.
pub fn json<T: Serialize>(status: u16, body: &T) -> worker::Result<Response> {
    let response = Response::from_json(body)?.with_status(status);
    response.headers().set("Cache-Control", "no-store")?;
    Ok(response)
}

/// A response of JSON text built elsewhere (by SQLite, for a merchant lookup).
pub fn json_text(status: u16, body: &str) -> worker::Result<Response> {
    json_js(status, &js_sys::JsString::from(body))
}

/// A JSON response whose body is a JavaScript string (a list page D1 built): it never enters
/// wasm memory.
pub fn json_js(status: u16, body: &js_sys::JsString) -> worker::Result<Response> {
    let init = web_sys::ResponseInit::new();
    init.set_status(status);
    let response = Response::from(
        JsResponse::new(body, &init)
            .map_err(worker::Error::from)?
            .unchecked_into::<web_sys::Response>(),
    );
    let headers = response.headers();
    headers.set("Content-Type", "application/json")?;
    headers.set("Cache-Control", "no-store")?;
    Ok(response)
}

#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    /// The platform's `Response`, made from a JavaScript string.
    #[wasm_bindgen(js_name = Response)]
    type JsResponse;

    #[wasm_bindgen(constructor, catch)]
    fn new(body: &js_sys::JsString, init: &web_sys::ResponseInit) -> Result<JsResponse, JsValue>;
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

/// Largest token request body (a form of a few short fields).
pub const TOKEN_BODY_MAX: usize = 8 * 1024;
/// Largest checkout body (the options of one payment), and the hosted page's and sandbox's small
/// bodies.
pub const CHECKOUT_BODY_MAX: usize = 16 * 1024;
/// Largest portal body (a JSON object or a page's form).
pub const PORTAL_BODY_MAX: usize = 64 * 1024;
/// Most fields a form may carry.
pub const FORM_FIELDS_MAX: usize = 64;

/// The request body, refused unless `Content-Type` names `media_type` (parameters such as
/// `charset` allowed) and the body fits in `max` bytes.
pub async fn body_of_type(
    req: &mut Request,
    media_type: &str,
    max: usize,
) -> Result<String, ApiError> {
    require_media_type(req, media_type)?;
    body(req, max).await
}

/// Refuses the request unless its `Content-Type` names `media_type` (parameters allowed).
fn require_media_type(req: &Request, media_type: &str) -> Result<(), ApiError> {
    let content_type = req
        .headers()
        .get("Content-Type")
        .or_internal("read header")?
        .unwrap_or_default();
    if content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case(media_type))
    {
        Ok(())
    } else {
        Err(ApiError::invalid_request(format!(
            "Content-Type must be {media_type}"
        )))
    }
}

/// A JSON body of at most `max` bytes, or an empty one (`Content-Type` must say JSON when it is
/// not empty).
pub async fn json_body(req: &mut Request, max: usize) -> Result<String, ApiError> {
    let text = body(req, max).await?;
    if !text.trim().is_empty() {
        require_media_type(req, "application/json")?;
    }
    Ok(text)
}

/// How long a request's body may take to arrive once the handler asks for it. Every body the
/// worker reads is small (at most 64 KB), so a client that has not sent it by then has declared
/// more than it sends, or is holding the request open; it is answered 408 rather than waited on.
pub const BODY_DEADLINE: Duration = Duration::from_secs(10);

/// The body as UTF-8 text, read only up to `max` bytes and within [`BODY_DEADLINE`]: a larger
/// one is refused with 413 as soon as it is known to be larger (from `Content-Length`, or while
/// streaming), never read whole; one that has not arrived in time, with 408.
pub async fn body(req: &mut Request, max: usize) -> Result<String, ApiError> {
    let read = Box::pin(body_now(req, max));
    match select(read, Box::pin(Delay::from(BODY_DEADLINE))).await {
        Either::Left((body, _)) => body,
        Either::Right(_) => Err(ApiError::new(
            ErrorCode::RequestTimeout,
            format!(
                "the request body did not arrive within {} seconds",
                BODY_DEADLINE.as_secs()
            ),
        )),
    }
}

/// [`body`] without its deadline.
async fn body_now(req: &mut Request, max: usize) -> Result<String, ApiError> {
    let too_large = || {
        ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("the request body must be at most {max} bytes"),
        )
    };
    let declared = req
        .headers()
        .get("Content-Length")
        .or_internal("read header")?
        .and_then(|n| n.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let bytes = match declared {
        Some(0) => return Ok(String::new()),
        // The platform delivers exactly the declared length, known here to be within `max`: one
        // read instead of a stream's reader and chunks.
        Some(_) => req.bytes().await.map_err(|_| ended_early())?,
        None => streamed(req, max).await?.ok_or_else(too_large)?,
    };
    String::from_utf8(bytes).map_err(|_| ApiError::invalid_request("the body must be UTF-8 text"))
}

/// The refusal of a body the client stopped sending before its end (a closed connection).
fn ended_early() -> ApiError {
    ApiError::invalid_request("the request body ended before its end")
}

/// A body of unknown length, read in chunks up to `max` bytes; `None` as soon as it is larger.
async fn streamed(req: &mut Request, max: usize) -> Result<Option<Vec<u8>>, ApiError> {
    let Ok(mut stream) = req.stream() else {
        return Ok(Some(Vec::new())); // no body at all
    };
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| ended_early())?;
        if bytes.len() + chunk.len() > max {
            return Ok(None);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Some(bytes))
}

/// The fields of a form body, refused when there are more than [`FORM_FIELDS_MAX`].
pub fn form_fields(body: &str) -> Result<Vec<(String, String)>, ApiError> {
    let mut fields = Vec::new();
    for (name, value) in form_urlencoded::parse(body.as_bytes()) {
        if fields.len() == FORM_FIELDS_MAX {
            return Err(ApiError::invalid_request(format!(
                "the form must have at most {FORM_FIELDS_MAX} fields"
            )));
        }
        fields.push((name.into_owned(), value.into_owned()));
    }
    Ok(fields)
}

/// `303 See Other` to one of our own paths. (Built by hand: `Response::redirect` has immutable
/// headers, and some redirects add a cookie.)
pub fn see_other(url: &Url, path: &str) -> Result<Response, ApiError> {
    let mut target = url.clone();
    // A fragment (`#refunds`) is the fragment, never part of the path.
    let (path, fragment) = match path.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (path, None),
    };
    target.set_path(path);
    target.set_query(None);
    target.set_fragment(fragment);
    let response = Response::empty()
        .or_internal("build redirect")?
        .with_status(303);
    response
        .headers()
        .set("Location", target.as_str())
        .or_internal("set header")?;
    Ok(response)
}

/// Why an outbound request got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchFailure {
    /// Refused connection, DNS failure, reset: Workers report them alike.
    Unreachable,
    /// No answer within the deadline (the request is aborted).
    Timeout,
}

/// Sends `request` with a deadline; answers its status and at most the first `max` bytes of its
/// body. Every outbound request (webhook deliveries, chain nodes, DNS checks) goes through here,
/// so none can hang or read without bound.
pub async fn fetch(
    request: Request,
    deadline: Duration,
    max: usize,
) -> Result<(u16, Vec<u8>), FetchFailure> {
    let controller = AbortController::default();
    let signal = controller.signal();
    let exchange = async {
        let response = Fetch::Request(request).send_with_signal(&signal).await?;
        let status = response.status_code();
        Ok::<_, worker::Error>((status, read_prefix(response, max).await))
    };
    let outcome = select(Box::pin(exchange), Box::pin(Delay::from(deadline))).await;
    match outcome {
        Either::Left((Ok(answer), _)) => Ok(answer),
        Either::Left((Err(_), _)) => Err(FetchFailure::Unreachable),
        Either::Right(_) => {
            controller.abort();
            Err(FetchFailure::Timeout)
        }
    }
}

/// At most the first `max` bytes of a fetched response's body; the rest is cancelled unread, so
/// an answer that streams without end costs one small buffer.
async fn read_prefix(response: Response, max: usize) -> Vec<u8> {
    let raw: web_sys::Response = response.into();
    let Some(body) = raw.body() else {
        return Vec::new();
    };
    let mut stream = wasm_streams::ReadableStream::from_raw(body).into_stream();
    let mut bytes = Vec::new();
    while bytes.len() < max {
        let Some(Ok(chunk)) = stream.next().await else {
            break;
        };
        let chunk = js_sys::Uint8Array::new(&chunk);
        let wanted = (max - bytes.len()).min(chunk.length() as usize);
        bytes.extend(chunk.subarray(0, wanted as u32).to_vec());
    }
    // Whatever is left is never read.
    let _ = stream.cancel().await;
    bytes
}

/// The caller's address (`CF-Connecting-IP`, set by Cloudflare), when known, as throttles key
/// it: an IPv6 caller by its /64, since one subscriber holds a whole /64.
pub fn caller_address(req: &Request) -> Option<String> {
    let address = req.headers().get("CF-Connecting-IP").ok().flatten()?;
    Some(throttle_key(&address))
}

/// The throttle key of an address: IPv4 as it is, IPv6 as its /64 prefix.
pub fn throttle_key(address: &str) -> String {
    match address.trim().parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => {
            let s = v6.segments();
            let prefix = std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0);
            format!("{prefix}/64")
        }
        Ok(std::net::IpAddr::V6(v6)) => v6
            .to_ipv4_mapped()
            .map_or_else(String::new, |v4| v4.to_string()),
        Ok(ip) => ip.to_string(),
        Err(_) => address.trim().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{form_fields, throttle_key, FORM_FIELDS_MAX};

    #[test]
    fn forms_have_a_field_cap() {
        let many = vec!["a=1"; FORM_FIELDS_MAX + 1].join("&");
        assert!(form_fields(&many).is_err());
        assert_eq!(form_fields("a=1&b=%20").unwrap()[1].1, " ");
    }

    #[test]
    fn ipv6_callers_are_keyed_by_their_64() {
        assert_eq!(throttle_key("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
        assert_eq!(throttle_key("2001:db8:1:2:bbbb::9"), "2001:db8:1:2::/64");
        assert_eq!(throttle_key("203.0.113.7"), "203.0.113.7");
        assert_eq!(throttle_key("::ffff:203.0.113.7"), "203.0.113.7");
        assert_eq!(throttle_key("not an address"), "not an address");
    }
}
