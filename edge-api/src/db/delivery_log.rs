//! The delivery log as admins read and act on it: deliveries, attempts, resends, re-enabling,
//! notifications.

use serde::Deserialize;
use worker::D1Database;

use super::{bind, Value};

/// A delivery as the log shows it.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct DeliveryRow {
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
    /// Next attempt, Unix seconds.
    pub next_attempt_at: Option<i64>,
    /// Last attempt, Unix seconds.
    pub last_attempt_at: Option<i64>,
    /// The delivery this one resends.
    pub redelivery_of: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
}

const DELIVERY_COLUMNS: &str = "id, endpoint_id, event_id, event_type, status, attempts, \
    next_attempt_at, last_attempt_at, redelivery_of, created_at";

/// Filters of the delivery log.
#[derive(Debug, Default)]
pub struct LogFilter {
    /// pending, succeeded or failed.
    pub status: Option<String>,
    /// One event type.
    pub event_type: Option<String>,
    /// Created at or after (Unix seconds).
    pub created_after: Option<i64>,
    /// Created before (Unix seconds).
    pub created_before: Option<i64>,
    /// Only deliveries older than this one.
    pub starting_after: Option<(i64, String)>,
    /// Page size.
    pub limit: u32,
}

/// One page of an endpoint's deliveries, newest first, one row over the limit.
pub async fn deliveries(
    db: &D1Database,
    institution_id: i64,
    endpoint_id: &str,
    f: &LogFilter,
) -> worker::Result<Vec<DeliveryRow>> {
    let mut sql = format!(
        "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE institution_id = ?1 AND endpoint_id = ?2"
    );
    let mut params: Vec<Value> = vec![institution_id.into(), endpoint_id.into()];
    let mut and = |clause: &str, value: Value| {
        params.push(value);
        sql.push_str(&clause.replace('#', &format!("?{}", params.len())));
    };
    if let Some(status) = &f.status {
        and(" AND status = #", status.as_str().into());
    }
    if let Some(kind) = &f.event_type {
        and(" AND event_type = #", kind.as_str().into());
    }
    if let Some(after) = f.created_after {
        and(" AND created_at >= #", after.into());
    }
    if let Some(before) = f.created_before {
        and(" AND created_at < #", before.into());
    }
    if let Some((created, id)) = &f.starting_after {
        and(" AND (created_at, id) < (#", (*created).into());
        and(", #)", id.as_str().into());
    }
    params.push(Value::Int(i64::from(f.limit) + 1));
    sql.push_str(&format!(
        " ORDER BY created_at DESC, id DESC LIMIT ?{}",
        params.len()
    ));
    bind(db, &sql, &params)?.all().await?.results()
}

/// One delivery of the institution.
pub async fn delivery(
    db: &D1Database,
    institution_id: i64,
    id: &str,
) -> worker::Result<Option<DeliveryRow>> {
    bind(
        db,
        &format!("SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE institution_id = ?1 AND id = ?2"),
        &[institution_id.into(), id.into()],
    )?
    .first(None)
    .await
}

/// One attempt, as the log shows it.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct AttemptRow {
    /// 1-based.
    pub attempt: i64,
    /// Unix seconds.
    pub started_at: i64,
    /// HTTP status, if the receiver answered.
    pub status_code: Option<i64>,
    /// ok, http_status, redirect, timeout, connection.
    pub outcome: String,
    /// Milliseconds.
    pub latency_ms: i64,
    /// First 4 KB of the body.
    pub response_body: Option<String>,
    /// When the next attempt was due.
    pub next_attempt_at: Option<i64>,
}

/// A delivery's attempts, in order.
pub async fn attempts(db: &D1Database, delivery_id: &str) -> worker::Result<Vec<AttemptRow>> {
    bind(
        db,
        "SELECT attempt, started_at, status_code, outcome, latency_ms, response_body, \
         next_attempt_at FROM delivery_attempts WHERE delivery_id = ?1 ORDER BY attempt",
        &[delivery_id.into()],
    )?
    .all()
    .await?
    .results()
}

/// The event body a delivery sends.
pub async fn payload(db: &D1Database, event_id: &str) -> worker::Result<Option<String>> {
    #[derive(Deserialize)]
    struct Payload {
        payload: String,
    }
    let row: Option<Payload> = bind(
        db,
        "SELECT payload FROM events WHERE id = ?1",
        &[event_id.into()],
    )?
    .first(None)
    .await?;
    Ok(row.map(|r| r.payload))
}

/// New deliveries resending `ids` (of the institution), due now; returns their ids.
pub async fn resend(
    db: &D1Database,
    institution_id: i64,
    ids: &[String],
    now: i64,
) -> worker::Result<Vec<String>> {
    let mut created = Vec::new();
    for chunk in ids.chunks(50) {
        let mut statements = Vec::new();
        for id in chunk {
            let new_id = format!(
                "dlv_{}",
                hex::encode(
                    crate::crypto::random_bytes::<12>()
                        .map_err(|e| worker::Error::RustError(e.to_string()))?
                )
            );
            statements.push(bind(
                db,
                "INSERT INTO deliveries (id, event_id, endpoint_id, institution_id, event_type, \
                 status, attempts, next_attempt_at, redelivery_of, created_at) \
                 SELECT ?1, event_id, endpoint_id, institution_id, event_type, 'pending', 0, ?4, \
                 id, ?4 FROM deliveries WHERE id = ?2 AND institution_id = ?3",
                &[
                    new_id.as_str().into(),
                    id.as_str().into(),
                    institution_id.into(),
                    now.into(),
                ],
            )?);
            created.push(new_id);
        }
        db.batch(statements).await?;
    }
    Ok(created)
}

/// Failed deliveries of an endpoint created at or after `since`.
pub async fn failed_since(
    db: &D1Database,
    institution_id: i64,
    endpoint_id: &str,
    since: i64,
) -> worker::Result<Vec<String>> {
    super::strings(
        db,
        "SELECT id FROM deliveries WHERE institution_id = ?1 AND endpoint_id = ?2 \
         AND status = 'failed' AND created_at >= ?3 ORDER BY created_at LIMIT 1000",
        &[institution_id.into(), endpoint_id.into(), since.into()],
    )
    .await
}

/// Enables an endpoint and clears its failure clock.
pub async fn enable_endpoint(
    db: &D1Database,
    institution_id: i64,
    endpoint_id: &str,
    now_text: &str,
) -> worker::Result<bool> {
    let result = bind(
        db,
        "UPDATE webhook_endpoints SET status = 'enabled', disabled_reason = NULL, \
         first_failure_at = NULL, updated_at = ?3 WHERE institution_id = ?1 AND id = ?2",
        &[institution_id.into(), endpoint_id.into(), now_text.into()],
    )?
    .run()
    .await?;
    Ok(super::changes(&result) > 0)
}

/// A notification to the institution's admins.
#[derive(Debug, Deserialize, serde::Serialize)]
pub struct NotificationRow {
    /// Row id.
    pub id: i64,
    /// endpoint_disabled.
    pub kind: String,
    /// Subject line.
    pub subject: String,
    /// Text.
    pub body: String,
    /// sent, not_configured, no_recipients, failed.
    pub email_status: String,
    /// Unix seconds.
    pub created_at: i64,
}

/// The institution's notifications, newest first.
pub async fn notifications(
    db: &D1Database,
    institution_id: i64,
) -> worker::Result<Vec<NotificationRow>> {
    bind(
        db,
        "SELECT id, kind, subject, body, email_status, created_at FROM notifications \
         WHERE institution_id = ?1 ORDER BY id DESC LIMIT 100",
        &[institution_id.into()],
    )?
    .all()
    .await?
    .results()
}

/// The institution's newest transaction, as a sample for test events.
pub async fn newest_transaction(
    db: &D1Database,
    institution_id: i64,
) -> worker::Result<Option<i64>> {
    #[derive(Deserialize)]
    struct Row {
        id: i64,
    }
    let row: Option<Row> = bind(
        db,
        "SELECT id FROM transactions INDEXED BY transactions_by_institution \
         WHERE institution_id = ?1 ORDER BY id DESC LIMIT 1",
        &[institution_id.into()],
    )?
    .first(None)
    .await?;
    Ok(row.map(|r| r.id))
}
