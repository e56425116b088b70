//! Events, deliveries, attempts and notifications.

use serde::Deserialize;
use worker::{D1Database, D1PreparedStatement};

use super::{bind, Value};

/// An event to write in the same batch as the state change that causes it.
pub struct OutboxEvent<'a> {
    /// `evt_…`.
    pub id: &'a str,
    /// Owning institution.
    pub institution_id: i64,
    /// Event type.
    pub kind: &'a str,
    /// The transaction.
    pub transaction_id: i64,
    /// The JSON body deliveries send.
    pub payload: &'a str,
    /// Unix seconds.
    pub created: i64,
}

/// The statements that follow a guarded state change in its batch: the event, only if the
/// change wrote a row (`changes() = 1` right after the UPDATE), then one pending delivery per
/// enabled endpoint of the institution subscribed to the type, only if the event exists.
pub fn outbox_statements(
    db: &D1Database,
    e: &OutboxEvent<'_>,
) -> worker::Result<Vec<D1PreparedStatement>> {
    Ok(vec![
        bind(
            db,
            "INSERT INTO events (id, institution_id, type, transaction_id, payload, created) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE changes() = 1",
            &[
                e.id.into(),
                e.institution_id.into(),
                e.kind.into(),
                e.transaction_id.into(),
                e.payload.into(),
                e.created.into(),
            ],
        )?,
        fan_out(db, e.id, e.institution_id, e.kind, None, e.created)?,
    ])
}

/// One pending delivery of event `event_id` per enabled endpoint of the institution subscribed
/// to `kind` (or just `only_endpoint`, whatever its types, for test events).
fn fan_out(
    db: &D1Database,
    event_id: &str,
    institution_id: i64,
    kind: &str,
    only_endpoint: Option<&str>,
    now: i64,
) -> worker::Result<D1PreparedStatement> {
    bind(
        db,
        "INSERT INTO deliveries (id, event_id, endpoint_id, institution_id, event_type, status, \
         attempts, next_attempt_at, created_at) \
         SELECT 'dlv_' || lower(hex(randomblob(12))), ?1, e.id, e.institution_id, ?3, 'pending', \
         0, ?5, ?5 FROM webhook_endpoints e \
         WHERE e.institution_id = ?2 AND e.status = 'enabled' \
         AND (?4 IS NOT NULL AND e.id = ?4 OR ?4 IS NULL AND (e.event_types IS NULL \
              OR instr(' ' || e.event_types || ' ', ' ' || ?3 || ' ') > 0)) \
         AND EXISTS (SELECT 1 FROM events WHERE id = ?1)",
        &[
            event_id.into(),
            institution_id.into(),
            kind.into(),
            only_endpoint.map_or(Value::Null, Value::from),
            now.into(),
        ],
    )
}

/// Writes a test event and its one delivery to `endpoint_id`, atomically.
pub async fn insert_test_event(
    db: &D1Database,
    e: &OutboxEvent<'_>,
    endpoint_id: &str,
) -> worker::Result<()> {
    db.batch(vec![
        bind(
            db,
            "INSERT INTO events (id, institution_id, type, transaction_id, payload, created) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            &[
                e.id.into(),
                e.institution_id.into(),
                e.kind.into(),
                e.transaction_id.into(),
                e.payload.into(),
                e.created.into(),
            ],
        )?,
        fan_out(
            db,
            e.id,
            e.institution_id,
            e.kind,
            Some(endpoint_id),
            e.created,
        )?,
    ])
    .await
    .map(drop)
}

#[derive(Deserialize)]
struct Id {
    id: String,
}

/// Ids of an event's deliveries.
pub async fn deliveries_of_event(db: &D1Database, event_id: &str) -> worker::Result<Vec<String>> {
    let rows: Vec<Id> = bind(
        db,
        "SELECT id FROM deliveries WHERE event_id = ?1",
        &[event_id.into()],
    )?
    .all()
    .await?
    .results()?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// Pending deliveries that are overdue (their queue message was lost) or were claimed and never
/// finished: the cron sweep sends them to the queue again.
pub async fn overdue(
    db: &D1Database,
    overdue_before: i64,
    stale_before: i64,
) -> worker::Result<Vec<String>> {
    let rows: Vec<Id> = bind(
        db,
        "SELECT id FROM deliveries WHERE status = 'pending' AND \
         (next_attempt_at <= ?1 OR (next_attempt_at IS NULL AND last_attempt_at <= ?2)) LIMIT 500",
        &[overdue_before.into(), stale_before.into()],
    )?
    .all()
    .await?
    .results()?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// Everything one attempt needs.
#[derive(Debug, Deserialize)]
pub struct Due {
    /// Delivery id.
    pub id: String,
    /// Delivery status.
    pub status: String,
    /// Attempts made so far.
    pub attempts: i64,
    /// When the next is due.
    pub next_attempt_at: Option<i64>,
    /// The endpoint.
    pub endpoint_id: String,
    /// Owning institution.
    pub institution_id: i64,
    /// Event id.
    pub event_id: String,
    /// Event type.
    pub event_type: String,
    /// Body to send.
    pub payload: String,
    /// Endpoint URL (None when the endpoint was deleted).
    pub url: Option<String>,
    /// Endpoint status.
    pub endpoint_status: Option<String>,
    /// Sealed current secret.
    pub secret_encrypted: Option<String>,
    /// Sealed previous secret.
    pub previous_secret_encrypted: Option<String>,
    /// End of its grace period.
    pub previous_secret_expires_at: Option<i64>,
    /// First failure with no success since.
    pub first_failure_at: Option<i64>,
}

/// The delivery, its event and its endpoint.
pub async fn due(db: &D1Database, id: &str) -> worker::Result<Option<Due>> {
    bind(
        db,
        "SELECT d.id, d.status, d.attempts, d.next_attempt_at, d.endpoint_id, d.institution_id, \
         d.event_id, d.event_type, ev.payload, e.url, e.status AS endpoint_status, \
         e.secret_encrypted, e.previous_secret_encrypted, e.previous_secret_expires_at, \
         e.first_failure_at \
         FROM deliveries d JOIN events ev ON ev.id = d.event_id \
         LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.id = ?1",
        &[id.into()],
    )?
    .first(None)
    .await
}

/// Takes attempt number `attempts + 1` for this worker; false if another got there first.
pub async fn claim(db: &D1Database, id: &str, attempts: i64, now: i64) -> worker::Result<bool> {
    let result = bind(
        db,
        "UPDATE deliveries SET attempts = attempts + 1, next_attempt_at = NULL, \
         last_attempt_at = ?3 WHERE id = ?1 AND status = 'pending' AND attempts = ?2",
        &[id.into(), attempts.into(), now.into()],
    )?
    .run()
    .await?;
    Ok(super::changes(&result) > 0)
}

/// Gives a delivery up (its endpoint is gone or disabled).
pub async fn give_up(db: &D1Database, id: &str) -> worker::Result<()> {
    bind(
        db,
        "UPDATE deliveries SET status = 'failed', next_attempt_at = NULL WHERE id = ?1",
        &[id.into()],
    )?
    .run()
    .await
    .map(drop)
}

/// One attempt's result.
pub struct Attempt<'a> {
    /// Delivery.
    pub delivery_id: &'a str,
    /// Endpoint.
    pub endpoint_id: &'a str,
    /// 1-based attempt number.
    pub attempt: i64,
    /// Unix seconds.
    pub started_at: i64,
    /// HTTP status, when the receiver answered.
    pub status_code: Option<u16>,
    /// ok, http_status, redirect, timeout, connection.
    pub outcome: &'a str,
    /// Milliseconds.
    pub latency_ms: i64,
    /// First 4 KB of the body.
    pub response_body: Option<&'a str>,
    /// Next attempt, if any.
    pub next_attempt_at: Option<i64>,
}

fn insert_attempt(db: &D1Database, a: &Attempt<'_>) -> worker::Result<D1PreparedStatement> {
    bind(
        db,
        "INSERT INTO delivery_attempts (delivery_id, endpoint_id, attempt, started_at, status_code, \
         outcome, latency_ms, response_body, next_attempt_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        &[
            a.delivery_id.into(),
            a.endpoint_id.into(),
            a.attempt.into(),
            a.started_at.into(),
            a.status_code.map_or(Value::Null, |c| Value::Int(c.into())),
            a.outcome.into(),
            a.latency_ms.into(),
            a.response_body.map_or(Value::Null, Value::from),
            a.next_attempt_at.map_or(Value::Null, Value::Int),
        ],
    )
}

/// Records a success: the delivery is done, the endpoint healthy again.
pub async fn succeeded(db: &D1Database, a: &Attempt<'_>) -> worker::Result<()> {
    db.batch(vec![
        insert_attempt(db, a)?,
        bind(
            db,
            "UPDATE deliveries SET status = 'succeeded', next_attempt_at = NULL WHERE id = ?1",
            &[a.delivery_id.into()],
        )?,
        bind(
            db,
            "UPDATE webhook_endpoints SET last_success_at = ?2, first_failure_at = NULL \
             WHERE id = ?1",
            &[a.endpoint_id.into(), a.started_at.into()],
        )?,
    ])
    .await
    .map(drop)
}

/// Records a failure with a next attempt due.
pub async fn failed(db: &D1Database, a: &Attempt<'_>) -> worker::Result<()> {
    db.batch(vec![
        insert_attempt(db, a)?,
        bind(
            db,
            "UPDATE deliveries SET next_attempt_at = ?2 WHERE id = ?1",
            &[
                a.delivery_id.into(),
                a.next_attempt_at.map_or(Value::Null, Value::Int),
            ],
        )?,
        bind(
            db,
            "UPDATE webhook_endpoints SET first_failure_at = coalesce(first_failure_at, ?2) \
             WHERE id = ?1",
            &[a.endpoint_id.into(), a.started_at.into()],
        )?,
    ])
    .await
    .map(drop)
}

/// Records a failure that disables the endpoint: its pending deliveries fail too, and the
/// notification is recorded, all at once.
pub async fn failed_and_disabled(
    db: &D1Database,
    a: &Attempt<'_>,
    institution_id: i64,
    reason: &str,
    subject: &str,
    body: &str,
    email_status: &str,
) -> worker::Result<()> {
    db.batch(vec![
        insert_attempt(db, a)?,
        bind(
            db,
            "UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = ?2 WHERE id = ?1",
            &[a.endpoint_id.into(), reason.into()],
        )?,
        bind(
            db,
            "UPDATE deliveries SET status = 'failed', next_attempt_at = NULL \
             WHERE endpoint_id = ?1 AND status = 'pending'",
            &[a.endpoint_id.into()],
        )?,
        bind(
            db,
            "INSERT INTO notifications (institution_id, kind, subject, body, email_status, \
             created_at) VALUES (?1, 'endpoint_disabled', ?2, ?3, ?4, ?5)",
            &[
                institution_id.into(),
                subject.into(),
                body.into(),
                email_status.into(),
                a.started_at.into(),
            ],
        )?,
    ])
    .await
    .map(drop)
}

#[derive(Deserialize)]
struct Email {
    email: String,
}

/// E-mail addresses of the institution's admins.
pub async fn admin_emails(db: &D1Database, institution_id: i64) -> worker::Result<Vec<String>> {
    let rows: Vec<Email> = bind(
        db,
        "SELECT email FROM portal_admins WHERE institution_id = ?1 ORDER BY id",
        &[institution_id.into()],
    )?
    .all()
    .await?
    .results()?;
    Ok(rows.into_iter().map(|r| r.email).collect())
}

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
    let rows: Vec<Id> = bind(
        db,
        "SELECT id FROM deliveries WHERE institution_id = ?1 AND endpoint_id = ?2 \
         AND status = 'failed' AND created_at >= ?3 ORDER BY created_at LIMIT 1000",
        &[institution_id.into(), endpoint_id.into(), since.into()],
    )?
    .all()
    .await?
    .results()?;
    Ok(rows.into_iter().map(|r| r.id).collect())
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
