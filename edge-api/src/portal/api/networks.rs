//! `/portal/api/networks`: the networks Payrail watches and their state.

use serde_json::json;

use super::call::{reply, Call};
use crate::portal::networks;
use crate::route::Answer;

/// `GET /portal/api/networks`.
pub async fn list(c: Call<'_>) -> Answer {
    let list = networks::status(&c.portal).await?;
    reply(200, json!({"object": "list", "data": list}))
}
