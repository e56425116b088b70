//! `/portal/api/merchants/{id}/topup`: a merchant's top-up addresses and what arrived there.

use super::call::{reply, to_json, Call};
use crate::portal::merchants::merchant_id;
use crate::portal::topups;
use crate::route::Answer;

/// `GET /portal/api/merchants/{id}/topup`.
pub async fn list(c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    reply(200, to_json(&topups::list(&c.portal, id).await?)?)
}

/// `POST /portal/api/merchants/{id}/topup/{network}`: the merchant's top-up address on the
/// network, given out now if it has none.
pub async fn create(c: Call<'_>, id: &str, network: &str) -> Answer {
    let id = merchant_id(id)?;
    reply(
        200,
        to_json(&topups::create(&c.portal, id, network).await?)?,
    )
}
