//! A call to the JSON API on the portal's session, and what its handlers share: reading a JSON
//! body and answering in JSON.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use worker::{Request, Url};

use crate::error::{from_json, ApiError, OrInternal};
use crate::http;
use crate::portal::Portal;
use crate::route::Answer;

/// A request to the JSON API on an authenticated session (a change's CSRF token and the caller's
/// role already checked).
pub struct Call<'a> {
    /// The session.
    pub portal: Portal<'a>,
    /// The request, its body unread.
    pub req: Request,
    /// The request's URL.
    pub url: &'a Url,
}

impl Call<'_> {
    /// The JSON body, read as `T`.
    pub async fn json<T: DeserializeOwned>(&mut self) -> Result<T, ApiError> {
        from_json(&json_body(&mut self.req).await?)
    }

    /// An optional JSON body, read as `T`: an empty one reads as the default.
    pub async fn optional_json<T: Default + DeserializeOwned>(&mut self) -> Result<T, ApiError> {
        let body = http::json_body(&mut self.req, http::PORTAL_BODY_MAX).await?;
        if body.trim().is_empty() {
            Ok(T::default())
        } else {
            from_json(&body)
        }
    }

    /// The query string (empty when there is none).
    pub fn query(&self) -> &str {
        self.url.query().unwrap_or("")
    }
}

/// A JSON body: the content type must say so.
pub async fn json_body(req: &mut Request) -> Result<String, ApiError> {
    http::body_of_type(req, "application/json", http::PORTAL_BODY_MAX).await
}

/// The body of a rotation (a webhook signing secret, a merchant's key): how long the old one
/// stays valid.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Rotate {
    /// Seconds; absent: the default.
    pub grace_period_seconds: Option<i64>,
}

/// A JSON answer.
pub fn reply(status: u16, body: serde_json::Value) -> Answer {
    http::json(status, &body).or_internal("build response")
}

/// A view as JSON.
pub fn to_json<T: Serialize>(view: &T) -> Result<serde_json::Value, ApiError> {
    serde_json::to_value(view).or_internal("encode response")
}

/// `object` with one more member (a secret shown once).
pub fn with_member(mut object: serde_json::Value, name: &str, value: String) -> serde_json::Value {
    object[name] = serde_json::Value::String(value);
    object
}
