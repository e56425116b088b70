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
        insert_event(db, e, true)?,
        fan_out(db, e.id, e.institution_id, e.kind, None, e.created)?,
    ])
}

/// The event row; with `after_change`, only if the statement before it in the batch changed a
/// row (`changes() = 1`).
fn insert_event(
    db: &D1Database,
    e: &OutboxEvent<'_>,
    after_change: bool,
) -> worker::Result<D1PreparedStatement> {
    let guard = if after_change {
        " WHERE changes() = 1"
    } else {
        ""
    };
    bind(
        db,
        &format!(
            "INSERT INTO events (id, institution_id, type, transaction_id, payload, created) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6{guard}"
        ),
        &[
            e.id.into(),
            e.institution_id.into(),
            e.kind.into(),
            e.transaction_id.into(),
            e.payload.into(),
            e.created.into(),
        ],
    )
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
        insert_event(db, e, false)?,
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

/// Ids of an event's deliveries.
pub async fn deliveries_of_event(db: &D1Database, event_id: &str) -> worker::Result<Vec<String>> {
    super::strings(
        db,
        "SELECT id FROM deliveries WHERE event_id = ?1",
        &[event_id.into()],
    )
    .await
}

/// Pending deliveries that are overdue (their queue message was lost) or were claimed and never
/// finished: the cron sweep sends them to the queue again.
pub async fn overdue(
    db: &D1Database,
    overdue_before: i64,
    stale_before: i64,
) -> worker::Result<Vec<String>> {
    super::strings(
        db,
        "SELECT id FROM deliveries WHERE status = 'pending' AND \
         (next_attempt_at <= ?1 OR (next_attempt_at IS NULL AND last_attempt_at <= ?2)) LIMIT 500",
        &[overdue_before.into(), stale_before.into()],
    )
    .await
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

/// E-mail addresses of the institution's admins.
pub async fn admin_emails(db: &D1Database, institution_id: i64) -> worker::Result<Vec<String>> {
    super::strings(
        db,
        "SELECT email FROM portal_admins WHERE institution_id = ?1 ORDER BY id",
        &[institution_id.into()],
    )
    .await
}
