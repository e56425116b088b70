//! `/portal/api/notifications`: what Payrail told the institution's admins (an endpoint disabled
//! for continuous failure, payments held from settlement).

use serde_json::json;

use super::call::{reply, Call};
use crate::portal::deliveries;
use crate::route::Answer;

/// `GET /portal/api/notifications`.
pub async fn list(c: Call<'_>) -> Answer {
    let list = deliveries::list_notifications(&c.portal).await?;
    reply(200, json!({"object": "list", "data": list}))
}
