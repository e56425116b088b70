//! `/portal/api/deliveries`: one delivery with its attempts, and resending it.

use super::call::{reply, to_json, Call};
use crate::portal::deliveries;
use crate::route::Answer;

/// `GET /portal/api/deliveries/{id}`.
pub async fn show(c: Call<'_>, id: &str) -> Answer {
    reply(200, deliveries::detail(&c.portal, id).await?)
}

/// `POST /portal/api/deliveries/{id}/resend`: a new delivery of the same event.
pub async fn resend(c: Call<'_>, id: &str) -> Answer {
    reply(201, to_json(&deliveries::resend(&c.portal, id).await?)?)
}
