//! `/portal/api/overview`: the payments overview.

use super::call::{reply, to_json, Call};
use crate::portal::payments;
use crate::route::Answer;

/// `GET /portal/api/overview`.
pub async fn show(c: Call<'_>) -> Answer {
    reply(200, to_json(&payments::overview(&c.portal).await?)?)
}
