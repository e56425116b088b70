//! `/portal/api/screening`: the review queue of payments held by their screening, and an
//! admin's decision on one (`POST /portal/api/screening/{payment id}`).

use serde::Deserialize;

use super::call::{reply, to_json, Call};
use crate::error::ApiError;
use crate::portal::payments::payment_id;
use crate::portal::screening;
use crate::route::Answer;

/// `GET /portal/api/screening`.
pub async fn list(c: Call<'_>) -> Answer {
    let queue = screening::queue(&c.portal).await?;
    reply(200, to_json(&serde_json::json!({ "data": queue }))?)
}

/// A decision as the API takes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Decide {
    /// `release` or `block`.
    decision: String,
    /// Why (required).
    note: String,
}

/// `POST /portal/api/screening/{id}`: `{"decision": "release" | "block", "note": "…"}`; the
/// payment as it now stands.
pub async fn decide(mut c: Call<'_>, id: &str) -> Answer {
    let id = payment_id(id)?;
    let body: Decide = c.json().await?;
    let release = match body.decision.as_str() {
        "release" => true,
        "block" => false,
        _ => {
            return Err(ApiError::invalid_request(
                "decision must be release or block",
            ))
        }
    };
    let after = screening::decide(&c.portal, id, release, &body.note).await?;
    reply(200, to_json(&after)?)
}
