//! The delivery log and what an admin can do with it: read, resend, re-enable an endpoint (with
//! a bulk resend of what failed meanwhile), send a test event, read notifications.

use serde::Serialize;
use shared_types::lifecycle::EventType;
use shared_types::webhook::Event;
use shared_types::{time, ErrorCode};
use worker::Env;

use super::Portal;
use crate::crypto;
use crate::db::delivery_log::{self as db, AttemptRow, DeliveryRow, LogFilter, NotificationRow};
use crate::db::transactions;
use crate::db::webhooks::{self as outbox, OutboxEvent};
use crate::error::{ApiError, OrInternal};
use crate::query::{parse_id, TransactionFilter, DEFAULT_LIMIT, MAX_LIMIT};

/// Type of the events `send_test` creates.
pub const TEST_EVENT: &str = "webhook.test";

/// A delivery with its times as timestamps.
#[derive(Debug, Serialize)]
pub struct Delivery {
    /// Always `webhook_delivery`.
    pub object: &'static str,
    /// `dlv_…`.
    pub id: String,
    /// Endpoint.
    pub endpoint_id: String,
    /// Event.
    pub event_id: String,
    /// Event type.
    pub event_type: String,
    /// pending, succeeded, failed.
    pub status: String,
    /// Attempts made.
    pub attempts: i64,
    /// When the next attempt is due.
    pub next_attempt_at: Option<String>,
    /// When the last attempt was made.
    pub last_attempt_at: Option<String>,
    /// The delivery this one resends.
    pub redelivery_of: Option<String>,
    /// Creation time.
    pub created_at: Option<String>,
}

impl From<DeliveryRow> for Delivery {
    fn from(d: DeliveryRow) -> Self {
        Delivery {
            object: "webhook_delivery",
            id: d.id,
            endpoint_id: d.endpoint_id,
            event_id: d.event_id,
            event_type: d.event_type,
            status: d.status,
            attempts: d.attempts,
            next_attempt_at: d.next_attempt_at.and_then(time::format_unix),
            last_attempt_at: d.last_attempt_at.and_then(time::format_unix),
            redelivery_of: d.redelivery_of,
            created_at: time::format_unix(d.created_at),
        }
    }
}

/// One attempt, times as timestamps.
#[derive(Debug, Serialize)]
pub struct Attempt {
    /// 1-based.
    pub attempt: i64,
    /// When it started.
    pub started_at: Option<String>,
    /// HTTP status, if any.
    pub status_code: Option<i64>,
    /// ok, http_status, redirect, timeout, connection.
    pub outcome: String,
    /// Milliseconds.
    pub latency_ms: i64,
    /// First 4 KB of the answer.
    pub response_body: Option<String>,
    /// When the next attempt was due.
    pub next_attempt_at: Option<String>,
}

impl From<AttemptRow> for Attempt {
    fn from(a: AttemptRow) -> Self {
        Attempt {
            attempt: a.attempt,
            started_at: time::format_unix(a.started_at),
            status_code: a.status_code,
            outcome: a.outcome,
            latency_ms: a.latency_ms,
            response_body: a.response_body,
            next_attempt_at: a.next_attempt_at.and_then(time::format_unix),
        }
    }
}

/// A page of the log.
#[derive(Debug, Serialize)]
pub struct Page {
    /// Always `list`.
    pub object: &'static str,
    /// Deliveries, newest first.
    pub data: Vec<Delivery>,
    /// Whether more exist.
    pub has_more: bool,
    /// `starting_after` for the next page.
    pub next_cursor: Option<String>,
}

fn bound(name: &str, value: &str) -> Result<i64, ApiError> {
    time::parse_filter_bound(value)
        .and_then(|t| time::parse_unix(&t))
        .ok_or_else(|| {
            ApiError::invalid_request(format!(
                "{name} must be an ISO 8601 date-time with an offset or a date"
            ))
        })
}

/// An endpoint's deliveries, filtered: `status`, `event_type`, `created_after`,
/// `created_before`, `limit`, `starting_after` (a delivery id).
pub async fn log(portal: &Portal, endpoint_id: &str, query: &str) -> Result<Page, ApiError> {
    super::ops::endpoint(portal, endpoint_id).await?;
    let mut filter = LogFilter {
        limit: DEFAULT_LIMIT,
        ..LogFilter::default()
    };
    let mut seen = Vec::new();
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        if seen.contains(&name) {
            return Err(ApiError::invalid_request(format!(
                "{name} must be given at most once"
            )));
        }
        seen.push(name.clone());
        match name.as_ref() {
            "status" if matches!(value.as_ref(), "pending" | "succeeded" | "failed") => {
                filter.status = Some(value.into_owned())
            }
            "status" => {
                return Err(ApiError::invalid_request(
                    "status must be pending, succeeded or failed",
                ))
            }
            "event_type" if EventType::parse(&value).is_some() || value == TEST_EVENT => {
                filter.event_type = Some(value.into_owned())
            }
            "event_type" => {
                return Err(ApiError::invalid_request(format!(
                    "event_type {value:?} is not an event type"
                )))
            }
            "created_after" => filter.created_after = Some(bound("created_after", &value)?),
            "created_before" => filter.created_before = Some(bound("created_before", &value)?),
            "limit" => {
                filter.limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| {
                        ApiError::invalid_request(format!(
                            "limit must be an integer from 1 to {MAX_LIMIT}"
                        ))
                    })?
            }
            "starting_after" => {
                let cursor = db::delivery(&portal.db, portal.session.institution_id, &value)
                    .await
                    .or_internal("read cursor")?
                    .ok_or_else(|| {
                        ApiError::invalid_request(
                            "starting_after must be a delivery id from this log",
                        )
                    })?;
                filter.starting_after = Some((cursor.created_at, cursor.id));
            }
            other => {
                return Err(ApiError::invalid_request(format!(
                    "unknown parameter {other:?}; the log takes status, event_type, \
                     created_after, created_before, limit, starting_after"
                )))
            }
        }
    }
    let mut rows = db::deliveries(
        &portal.db,
        portal.session.institution_id,
        endpoint_id,
        &filter,
    )
    .await
    .or_internal("read deliveries")?;
    let has_more = rows.len() > filter.limit as usize;
    rows.truncate(filter.limit as usize);
    let next_cursor = has_more
        .then(|| rows.last().map(|r| r.id.clone()))
        .flatten();
    Ok(Page {
        object: "list",
        data: rows.into_iter().map(Delivery::from).collect(),
        has_more,
        next_cursor,
    })
}

fn no_delivery() -> ApiError {
    ApiError::not_found("no such delivery")
}

/// One delivery with its attempts and the body it sends.
pub async fn detail(portal: &Portal, id: &str) -> Result<serde_json::Value, ApiError> {
    let row = db::delivery(&portal.db, portal.session.institution_id, id)
        .await
        .or_internal("read delivery")?
        .ok_or_else(no_delivery)?;
    let attempts: Vec<Attempt> = db::attempts(&portal.db, &row.id)
        .await
        .or_internal("read attempts")?
        .into_iter()
        .map(Attempt::from)
        .collect();
    let payload = db::payload(&portal.db, &row.event_id)
        .await
        .or_internal("read event")?
        .unwrap_or_default();
    let mut value = serde_json::to_value(Delivery::from(row)).or_internal("encode")?;
    value["attempts"] = serde_json::to_value(attempts).or_internal("encode")?;
    value["payload"] = serde_json::Value::String(payload);
    Ok(value)
}

async fn queue_new(env: &Env, portal: &Portal, ids: &[String]) -> Result<Vec<Delivery>, ApiError> {
    let created = db::resend(&portal.db, portal.session.institution_id, ids, portal.now)
        .await
        .or_internal("resend")?;
    crate::webhooks::enqueue(env, &created, 0).await?;
    let mut out = Vec::new();
    for id in &created {
        if let Some(row) = db::delivery(&portal.db, portal.session.institution_id, id)
            .await
            .or_internal("read delivery")?
        {
            out.push(Delivery::from(row));
        }
    }
    Ok(out)
}

/// Resends a delivery: a new delivery of the same event to the same endpoint, marked as a
/// redelivery of the original.
pub async fn resend(env: &Env, portal: &Portal, id: &str) -> Result<Delivery, ApiError> {
    let row = db::delivery(&portal.db, portal.session.institution_id, id)
        .await
        .or_internal("read delivery")?
        .ok_or_else(no_delivery)?;
    let endpoint = super::ops::endpoint(portal, &row.endpoint_id)
        .await
        .map_err(|_| {
            ApiError::new(
                ErrorCode::Conflict,
                "the endpoint of this delivery was deleted",
            )
        })?;
    if endpoint.status != "enabled" {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "the endpoint is disabled; enable it first",
        ));
    }
    queue_new(env, portal, &[row.id])
        .await?
        .pop()
        .ok_or_else(no_delivery)
}

/// Re-enables an endpoint; with `resend_failed_since`, also resends every delivery to it that
/// failed since then.
pub async fn enable(
    env: &Env,
    portal: &Portal,
    endpoint_id: &str,
    resend_failed_since: Option<&str>,
) -> Result<serde_json::Value, ApiError> {
    let since = resend_failed_since
        .map(|t| bound("resend_failed_since", t))
        .transpose()?;
    let now = time::format_unix(portal.now)
        .ok_or("time")
        .or_internal("format now")?;
    if !db::enable_endpoint(&portal.db, portal.session.institution_id, endpoint_id, &now)
        .await
        .or_internal("enable endpoint")?
    {
        return Err(ApiError::not_found("no such webhook endpoint"));
    }
    let resent = match since {
        None => Vec::new(),
        Some(since) => {
            let failed = db::failed_since(
                &portal.db,
                portal.session.institution_id,
                endpoint_id,
                since,
            )
            .await
            .or_internal("find failed deliveries")?;
            queue_new(env, portal, &failed).await?
        }
    };
    let endpoint = super::ops::endpoint(portal, endpoint_id).await?;
    let mut value = serde_json::to_value(endpoint).or_internal("encode")?;
    value["resent"] = serde_json::to_value(resent).or_internal("encode")?;
    Ok(value)
}

/// Sends a `webhook.test` event, carrying the institution's newest transaction as a sample, to
/// one endpoint (whatever its event types).
pub async fn send_test(
    env: &Env,
    portal: &Portal,
    endpoint_id: &str,
) -> Result<Delivery, ApiError> {
    let endpoint = super::ops::endpoint(portal, endpoint_id).await?;
    if endpoint.status != "enabled" {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "the endpoint is disabled; enable it first",
        ));
    }
    let institution = portal.session.institution_id;
    let sample_id = db::newest_transaction(&portal.db, institution)
        .await
        .or_internal("read sample")?
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::Conflict,
                "there is no transaction yet to send as a sample",
            )
        })?;
    let filter = TransactionFilter {
        limit: 1,
        id: parse_id(&sample_id.to_string()),
        ..TransactionFilter::default()
    };
    let sample = transactions::list(&portal.db, institution, &filter)
        .await
        .or_internal("read sample")?
        .pop()
        .ok_or("sample vanished")
        .or_internal("read sample")?;
    let event = Event {
        id: crypto::random_token("evt_").or_internal("generate id")?,
        kind: TEST_EVENT.to_owned(),
        created: portal.now,
        data: sample,
    };
    let payload = serde_json::to_string(&event).or_internal("encode event")?;
    outbox::insert_test_event(
        &portal.db,
        &OutboxEvent {
            id: &event.id,
            institution_id: institution,
            kind: TEST_EVENT,
            transaction_id: sample_id,
            payload: &payload,
            created: portal.now,
        },
        endpoint_id,
    )
    .await
    .or_internal("store test event")?;
    let ids = outbox::deliveries_of_event(&portal.db, &event.id)
        .await
        .or_internal("read delivery")?;
    crate::webhooks::enqueue(env, &ids, 0).await?;
    let row = db::delivery(
        &portal.db,
        institution,
        ids.first().ok_or_else(no_delivery)?,
    )
    .await
    .or_internal("read delivery")?
    .ok_or_else(no_delivery)?;
    Ok(Delivery::from(row))
}

/// The institution's notifications.
pub async fn notifications(portal: &Portal) -> Result<Vec<NotificationRow>, ApiError> {
    db::notifications(&portal.db, portal.session.institution_id)
        .await
        .or_internal("read notifications")
}
