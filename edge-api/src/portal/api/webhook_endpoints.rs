//! `/portal/api/webhook-endpoints`: the institution's webhook endpoints, their signing secrets,
//! delivery logs, re-enabling and test events.

use serde::Deserialize;
use serde_json::json;

use super::call::{reply, to_json, with_member, Call, Rotate};
use crate::portal::deliveries;
use crate::portal::webhook_endpoints::{self, endpoint_id, EndpointPatch, NewEndpoint};
use crate::route::Answer;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Enable {
    resend_failed_since: Option<String>,
}

/// `GET /portal/api/webhook-endpoints`.
pub async fn list(c: Call<'_>) -> Answer {
    let endpoints = webhook_endpoints::list(&c.portal).await?;
    reply(200, json!({"object": "list", "data": endpoints}))
}

/// `POST /portal/api/webhook-endpoints`: the new endpoint with its signing secret.
pub async fn create(mut c: Call<'_>) -> Answer {
    let new: NewEndpoint = c.json().await?;
    let (endpoint, secret) = webhook_endpoints::create(&c.portal, &new).await?;
    reply(
        201,
        with_member(to_json(&endpoint)?, "signing_secret", secret),
    )
}

/// `GET /portal/api/webhook-endpoints/{id}`.
pub async fn show(c: Call<'_>, id: &str) -> Answer {
    reply(
        200,
        to_json(&webhook_endpoints::get(&c.portal, endpoint_id(id)?).await?)?,
    )
}

/// `PATCH /portal/api/webhook-endpoints/{id}`.
pub async fn update(mut c: Call<'_>, id: &str) -> Answer {
    let id = endpoint_id(id)?;
    let patch: EndpointPatch = c.json().await?;
    reply(
        200,
        to_json(&webhook_endpoints::update(&c.portal, id, &patch).await?)?,
    )
}

/// `DELETE /portal/api/webhook-endpoints/{id}`.
pub async fn delete(c: Call<'_>, id: &str) -> Answer {
    let id = endpoint_id(id)?;
    webhook_endpoints::delete(&c.portal, id).await?;
    reply(200, json!({"deleted": true, "id": id}))
}

/// `GET /portal/api/webhook-endpoints/{id}/secret`.
pub async fn reveal_secret(c: Call<'_>, id: &str) -> Answer {
    reply(
        200,
        to_json(&webhook_endpoints::reveal_secret(&c.portal, endpoint_id(id)?).await?)?,
    )
}

/// `POST /portal/api/webhook-endpoints/{id}/rotate-secret`.
pub async fn rotate_secret(mut c: Call<'_>, id: &str) -> Answer {
    let id = endpoint_id(id)?;
    let Rotate {
        grace_period_seconds,
    } = c.optional_json().await?;
    reply(
        200,
        to_json(&webhook_endpoints::rotate_secret(&c.portal, id, grace_period_seconds).await?)?,
    )
}

/// `GET /portal/api/webhook-endpoints/{id}/deliveries`: the delivery log.
pub async fn deliveries(c: Call<'_>, id: &str) -> Answer {
    let id = endpoint_id(id)?;
    reply(
        200,
        to_json(&deliveries::log(&c.portal, id, c.query()).await?)?,
    )
}

/// `POST /portal/api/webhook-endpoints/{id}/enable`.
pub async fn enable(mut c: Call<'_>, id: &str) -> Answer {
    let id = endpoint_id(id)?;
    let Enable {
        resend_failed_since,
    } = c.optional_json().await?;
    reply(
        200,
        deliveries::enable(&c.portal, id, resend_failed_since.as_deref()).await?,
    )
}

/// `POST /portal/api/webhook-endpoints/{id}/test`: a test event, delivered like any other.
pub async fn test(c: Call<'_>, id: &str) -> Answer {
    let id = endpoint_id(id)?;
    reply(201, to_json(&deliveries::send_test(&c.portal, id).await?)?)
}
