//! `/portal/api/screening`: the review queue of payments and merchants' top-ups held by their
//! screening, and an admin's decision on one (`POST /portal/api/screening/{payment id}`,
//! `POST /portal/api/screening/topups/{review id}`).

use serde::Deserialize;

use super::call::{reply, to_json, Call};
use crate::error::ApiError;
use crate::portal::payments::payment_id;
use crate::portal::screening;
use crate::route::Answer;

/// `GET /portal/api/screening`.
pub async fn list(c: Call<'_>) -> Answer {
    let queue = screening::queue(&c.portal).await?;
    let topups = screening::topup_queue(&c.portal).await?;
    reply(
        200,
        to_json(&serde_json::json!({ "data": queue, "topups": topups }))?,
    )
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

impl Decide {
    /// Whether it releases; refused when it is neither release nor block.
    fn release(&self) -> Result<bool, ApiError> {
        match self.decision.as_str() {
            "release" => Ok(true),
            "block" => Ok(false),
            _ => Err(ApiError::invalid_request(
                "decision must be release or block",
            )),
        }
    }
}

/// `POST /portal/api/screening/{id}`: `{"decision": "release" | "block", "note": "…"}`; the
/// payment as it now stands.
pub async fn decide(mut c: Call<'_>, id: &str) -> Answer {
    let id = payment_id(id)?;
    let body: Decide = c.json().await?;
    let after = screening::decide(&c.portal, id, body.release()?, &body.note).await?;
    reply(200, to_json(&after)?)
}

/// `POST /portal/api/screening/topups/{id}`: the same body; the top-up's review as decided.
pub async fn decide_topup(mut c: Call<'_>, id: &str) -> Answer {
    let body: Decide = c.json().await?;
    let after = screening::decide_topup(&c.portal, id, body.release()?, &body.note).await?;
    reply(200, to_json(&after)?)
}
