//! The delivery log and what an admin can do with it: read, resend, re-enable an endpoint (with
//! a bulk resend of what failed meanwhile), send a test event, read notifications.

use shared_types::ids::DeliveryId;
use shared_types::webhook::{Event, TEST_EVENT_TYPE};
use shared_types::{EndpointStatus, ErrorCode, List};

use super::Portal;
use crate::db::deliveries::{self, Attempt, Delivery};
use crate::db::events::{self, Guard, OutboxEvent};
use crate::db::notifications::{self, Notification};
use crate::db::{endpoints, transactions, Batch};
use crate::error::{ApiError, OrInternal};
use crate::query::{parse_time_bound, DeliveryLogQuery};
use crate::{crypto, throttle, webhooks};

/// An endpoint's deliveries, newest first, filtered as [`DeliveryLogQuery`] reads the query.
pub async fn log(
    portal: &Portal<'_>,
    endpoint_id: &str,
    query: &str,
) -> Result<List<Delivery, DeliveryId>, ApiError> {
    super::webhook_endpoints::get(portal, endpoint_id).await?;
    let q = DeliveryLogQuery::parse(query).map_err(|e| ApiError::invalid_request(e.0))?;
    let cursor = match &q.starting_after {
        None => None,
        Some(id) => {
            let cursor = deliveries::get(portal.money(), portal.institution_id(), id.as_str())
                .await
                .or_internal("read cursor")?
                .ok_or_else(|| {
                    ApiError::invalid_request("starting_after must be a delivery id from this log")
                })?;
            Some((cursor.created_at.seconds(), String::from(cursor.id)))
        }
    };
    let rows = deliveries::page(
        portal.money(),
        portal.institution_id(),
        endpoint_id,
        &q,
        cursor,
    )
    .await
    .or_internal("read deliveries")?;
    Ok(List::from_overfetch(rows, q.limit as usize, |d| {
        d.id.clone()
    }))
}

fn no_delivery() -> ApiError {
    ApiError::not_found("no such delivery")
}

/// A delivery id from a path: one not of our shape reads like an unknown one, without a query.
fn delivery_id(text: &str) -> Result<DeliveryId, ApiError> {
    DeliveryId::parse(text).map_err(|_| no_delivery())
}

/// One delivery with its attempts and the body it sends.
pub async fn detail(portal: &Portal<'_>, id: &str) -> Result<serde_json::Value, ApiError> {
    let id = delivery_id(id)?;
    let row = deliveries::get(portal.money(), portal.institution_id(), id.as_str())
        .await
        .or_internal("read delivery")?
        .ok_or_else(no_delivery)?;
    let attempts: Vec<Attempt> = deliveries::attempts(portal.money(), row.id.as_str())
        .await
        .or_internal("read attempts")?;
    let payload = events::payload(portal.money(), row.event_id.as_str())
        .await
        .or_internal("read event")?
        .unwrap_or_default();
    let mut value = serde_json::to_value(row).or_internal("encode")?;
    value["attempts"] = serde_json::to_value(attempts).or_internal("encode")?;
    value["payload"] = serde_json::Value::String(payload);
    Ok(value)
}

/// New deliveries resending `ids`, queued now.
async fn queue_new(portal: &Portal<'_>, ids: &[String]) -> Result<Vec<Delivery>, ApiError> {
    let created = deliveries::resend(portal.money(), portal.institution_id(), ids, portal.now)
        .await
        .or_internal("resend")?;
    let created_ids: Vec<DeliveryId> = created.iter().map(|d| d.id.clone()).collect();
    webhooks::enqueue(portal.ctx, &created_ids, 0, portal.held_by()).await?;
    Ok(created)
}

fn endpoint_disabled() -> ApiError {
    ApiError::new(
        ErrorCode::Conflict,
        "the endpoint is disabled; enable it first",
    )
}

/// Resends a delivery: a new delivery of the same event to the same endpoint, marked as a
/// redelivery of the original.
pub async fn resend(portal: &Portal<'_>, id: &str) -> Result<Delivery, ApiError> {
    let id = delivery_id(id)?;
    let row = deliveries::get(portal.money(), portal.institution_id(), id.as_str())
        .await
        .or_internal("read delivery")?
        .ok_or_else(no_delivery)?;
    let endpoint = super::webhook_endpoints::get(portal, &row.endpoint_id)
        .await
        .map_err(|err| match err.code {
            ErrorCode::NotFound => ApiError::new(
                ErrorCode::Conflict,
                "the endpoint of this delivery was deleted",
            ),
            _ => err,
        })?;
    if endpoint.status != EndpointStatus::Enabled {
        return Err(endpoint_disabled());
    }
    throttle::count_webhook_send(portal.ctx, portal.institution_id(), &row.endpoint_id).await?;
    queue_new(portal, &[row.id.into()])
        .await?
        .pop()
        .ok_or_else(no_delivery)
}

/// Re-enables an endpoint; with `resend_failed_since`, also resends every delivery to it that
/// failed since then.
pub async fn enable(
    portal: &Portal<'_>,
    endpoint_id: &str,
    resend_failed_since: Option<&str>,
) -> Result<serde_json::Value, ApiError> {
    let since = resend_failed_since
        .map(|t| parse_time_bound("resend_failed_since", t))
        .transpose()
        .map_err(|e| ApiError::invalid_request(e.0))?;
    if since.is_some() {
        // Counted before anything changes: a refused call enables nothing either.
        super::webhook_endpoints::get(portal, endpoint_id).await?;
        throttle::count_webhook_send(portal.ctx, portal.institution_id(), endpoint_id).await?;
    }
    if !endpoints::enable(
        portal.db(),
        portal.institution_id(),
        endpoint_id,
        &crate::ctx::timestamp(portal.now)?,
    )
    .await
    .or_internal("enable endpoint")?
    {
        return Err(ApiError::not_found("no such webhook endpoint"));
    }
    let resent = match since {
        None => Vec::new(),
        Some(since) => {
            let failed = deliveries::failed_since(
                portal.money(),
                portal.institution_id(),
                endpoint_id,
                since,
            )
            .await
            .or_internal("find failed deliveries")?;
            queue_new(portal, &failed).await?
        }
    };
    let endpoint = super::webhook_endpoints::get(portal, endpoint_id).await?;
    let mut value = serde_json::to_value(endpoint).or_internal("encode")?;
    value["resent"] = serde_json::to_value(resent).or_internal("encode")?;
    Ok(value)
}

/// Sends a `webhook.test` event, carrying the institution's newest transaction as a sample, to
/// one endpoint (whatever its event types).
pub async fn send_test(portal: &Portal<'_>, endpoint_id: &str) -> Result<Delivery, ApiError> {
    let endpoint = super::webhook_endpoints::get(portal, endpoint_id).await?;
    if endpoint.status != EndpointStatus::Enabled {
        return Err(endpoint_disabled());
    }
    let institution = portal.institution_id();
    throttle::count_webhook_send(portal.ctx, institution, endpoint_id).await?;
    let no_sample = || {
        ApiError::new(
            ErrorCode::Conflict,
            "there is no transaction yet to send as a sample",
        )
    };
    let sample_id = transactions::newest_id(portal.money(), institution)
        .await
        .or_internal("read sample")?
        .ok_or_else(no_sample)?;
    let sample = transactions::get(portal.money(), institution, sample_id)
        .await
        .or_internal("read sample")?
        .ok_or_else(no_sample)?;
    let event = Event {
        id: crypto::random_token(shared_types::ids::EventId::PREFIX).or_internal("generate id")?,
        kind: TEST_EVENT_TYPE.to_owned(),
        created: portal.now,
        data: sample,
    };
    let payload = serde_json::to_string(&event).or_internal("encode event")?;
    let outbox = OutboxEvent {
        id: &event.id,
        institution_id: institution,
        kind: TEST_EVENT_TYPE,
        transaction_id: sample_id,
        payload: &payload,
        created: portal.now,
        transaction_version: None,
    };
    let mut batch = Batch::new();
    batch.push(events::insert(&outbox, Guard::None).or_internal("store test event")?);
    // Held in its object, the institution's endpoints are not there: the endpoint, checked
    // enabled above, is named to it.
    let fan_out = if portal.is_held() {
        deliveries::fan_out_to(
            &event.id,
            institution,
            TEST_EVENT_TYPE,
            &[endpoint_id.to_owned()],
            portal.now,
        )
    } else {
        deliveries::fan_out(
            &event.id,
            institution,
            TEST_EVENT_TYPE,
            Some(endpoint_id),
            portal.now,
        )
    }
    .or_internal("store test event")?;
    let fan_out = batch.push(fan_out);
    let results = batch
        .run(portal.money())
        .await
        .or_internal("store test event")?;
    let ids = deliveries::created(&results, fan_out).or_internal("read delivery")?;
    webhooks::enqueue(portal.ctx, &ids, 0, portal.held_by()).await?;
    let row = deliveries::get(
        portal.money(),
        institution,
        ids.first().ok_or_else(no_delivery)?,
    )
    .await
    .or_internal("read delivery")?
    .ok_or_else(no_delivery)?;
    Ok(row)
}

/// The institution's notifications.
pub async fn list_notifications(portal: &Portal<'_>) -> Result<Vec<Notification>, ApiError> {
    notifications::list(portal.db(), portal.institution_id())
        .await
        .or_internal("read notifications")
}
