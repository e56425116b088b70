//! Webhook deliveries and their attempts: the outbox's fan-out, what the consumer claims and
//! records, the cron sweep's overdue list, and the delivery log admins read and resend from.

use serde::{Deserialize, Serialize};
use shared_types::ids::InstitutionId;
use shared_types::ids::{DeliveryId, EndpointId, EventId};
use shared_types::time::UnixTime;
use shared_types::{AttemptOutcome, DeliveryObject, DeliveryStatus, EndpointStatus};

use super::{
    all, batch, first, stmt, strings, Batch, BatchResults, Db, DbResult, Handle, Returning, Stmt,
    Value, MONEY_IN_D1,
};
use crate::query::DeliveryLogQuery;

/// The one way a delivery id is made: `dlv_` and 24 random hex digits, in SQL, because fan-out
/// creates one delivery per matching endpoint in a single statement.
const NEW_ID: &str = "'dlv_' || lower(hex(randomblob(12)))";

/// One pending delivery of event `event_id` per enabled endpoint of the institution subscribed
/// to `kind` (or just `only_endpoint`, whatever its types, for test events), only if the event
/// exists (it may not, when the guarded change before it in the batch wrote nothing). Its rows
/// are the new deliveries ([`created`]).
pub fn fan_out(
    event_id: &str,
    institution_id: InstitutionId,
    kind: &str,
    only_endpoint: Option<&str>,
    now: i64,
) -> DbResult<Returning<NewDelivery>> {
    stmt(
        &format!(
            "INSERT INTO deliveries (id, event_id, endpoint_id, institution_id, event_type, \
             status, attempts, next_attempt_at, created_at) \
             SELECT {NEW_ID}, ?1, e.id, e.institution_id, ?3, 'pending', 0, ?5, ?5 \
             FROM webhook_endpoints e \
             WHERE e.institution_id = ?2 AND e.status = 'enabled' \
             AND (?4 IS NOT NULL AND e.id = ?4 OR ?4 IS NULL AND (e.event_types IS NULL \
                  OR instr(' ' || e.event_types || ' ', ' ' || ?3 || ' ') > 0)) \
             AND EXISTS (SELECT 1 FROM events WHERE id = ?1) RETURNING id"
        ),
        &[
            event_id.into(),
            institution_id.into(),
            kind.into(),
            only_endpoint.into(),
            now.into(),
        ],
    )
    .map(Returning::new)
}

/// [`fan_out`] in an institution's object, which holds no endpoints: one delivery per endpoint
/// of `endpoint_ids` (the directory's subscribed endpoints, `super::endpoints::subscribed`),
/// only if the event exists. Its rows are the new deliveries ([`created`]).
pub fn fan_out_to(
    event_id: &str,
    institution_id: InstitutionId,
    kind: &str,
    endpoint_ids: &[String],
    now: i64,
) -> DbResult<Returning<NewDelivery>> {
    let ids = serde_json::to_string(endpoint_ids)
        .map_err(|e| super::DbError::bad_row(format!("endpoint ids: {e}")))?;
    stmt(
        &format!(
            "INSERT INTO deliveries (id, event_id, endpoint_id, institution_id, event_type, \
             status, attempts, next_attempt_at, created_at) \
             SELECT {NEW_ID}, ?1, j.value, ?2, ?3, 'pending', 0, ?5, ?5 FROM json_each(?4) j \
             WHERE EXISTS (SELECT 1 FROM events WHERE id = ?1) RETURNING id"
        ),
        &[
            event_id.into(),
            institution_id.into(),
            kind.into(),
            ids.into(),
            now.into(),
        ],
    )
    .map(Returning::new)
}

/// A delivery the [`fan_out`] statement created.
#[derive(Deserialize)]
pub struct NewDelivery {
    /// Its id.
    pub id: DeliveryId,
}

/// Ids of the deliveries a batch's [`fan_out`] statement created.
pub fn created(results: &BatchResults, fan_out: Handle<NewDelivery>) -> DbResult<Vec<DeliveryId>> {
    Ok(results
        .rows(fan_out)?
        .into_iter()
        .map(|row| row.id)
        .collect())
}

/// Pending deliveries that are overdue (their queue message was lost) or were claimed and never
/// finished: the cron sweep sends them to the queue again (in D1, only of institutions whose
/// money is there).
pub async fn overdue(db: &Db, overdue_before: i64, stale_before: i64) -> DbResult<Vec<DeliveryId>> {
    strings(
        db,
        &if db.is_object() {
            "SELECT id FROM deliveries WHERE status = 'pending' AND \
             (next_attempt_at <= ?1 OR (next_attempt_at IS NULL AND last_attempt_at <= ?2)) \
             LIMIT 500"
                .to_owned()
        } else {
            format!(
                "SELECT id FROM deliveries WHERE status = 'pending' AND \
                 (next_attempt_at <= ?1 OR (next_attempt_at IS NULL AND last_attempt_at <= ?2)) \
                 AND {MONEY_IN_D1} LIMIT 500"
            )
        },
        &[overdue_before.into(), stale_before.into()],
    )
    .await?
    .iter()
    .map(|id| {
        DeliveryId::parse(id).map_err(|_| super::DbError::bad_row("a delivery id of another shape"))
    })
    .collect()
}

/// Everything one attempt needs.
#[derive(Debug, Deserialize)]
pub struct Due {
    /// Delivery id.
    pub id: DeliveryId,
    /// Delivery status.
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: i64,
    /// When the next is due.
    pub next_attempt_at: Option<i64>,
    /// The endpoint.
    pub endpoint_id: String,
    /// Owning institution.
    pub institution_id: InstitutionId,
    /// Event id.
    pub event_id: String,
    /// Event type.
    pub event_type: String,
    /// Body to send.
    pub payload: String,
    /// Endpoint URL (None when the endpoint was deleted).
    pub url: Option<String>,
    /// Endpoint status.
    pub endpoint_status: Option<EndpointStatus>,
    /// Sealed current secret.
    pub secret_encrypted: Option<String>,
    /// Sealed previous secret.
    pub previous_secret_encrypted: Option<String>,
    /// End of its grace period.
    pub previous_secret_expires_at: Option<i64>,
    /// First failure with no success since.
    pub first_failure_at: Option<i64>,
    /// The endpoint's last successful delivery.
    pub last_success_at: Option<i64>,
    /// When the delivery was made.
    pub created_at: i64,
}

/// The delivery, its event and its endpoint.
pub async fn due(db: &Db, id: &str) -> DbResult<Option<Due>> {
    first(
        db,
        "SELECT d.id, d.status, d.attempts, d.next_attempt_at, d.endpoint_id, d.institution_id, \
         d.event_id, d.event_type, ev.payload, e.url, e.status AS endpoint_status, \
         e.secret_encrypted, e.previous_secret_encrypted, e.previous_secret_expires_at, \
         e.first_failure_at, e.last_success_at, d.created_at \
         FROM deliveries d JOIN events ev ON ev.id = d.event_id \
         LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.id = ?1",
        &[id.into()],
    )
    .await
}

/// Takes the delivery's next attempt, in one statement that also reads everything the attempt
/// needs: only while it is pending, due by `now` (or its last attempt went stale before
/// `stale_before`: that worker is gone), and its endpoint is enabled. The guard makes the claim
/// exclusive: a second consumer of the same message finds it in flight and gets `None`, as it
/// does when the delivery is early, finished or its endpoint unusable ([`due`] says which).
pub async fn claim_due(db: &Db, id: &str, now: i64, stale_before: i64) -> DbResult<Option<Due>> {
    first(
        db,
        &claim_due_sql(),
        &[id.into(), now.into(), stale_before.into()],
    )
    .await
}

/// The claim both [`claim_due`] and [`claim_held`] make: `?1` the delivery, `?2` now, `?3` stale
/// before; the attempt taken only while the delivery is pending and due by now (or its last
/// attempt went stale).
const CLAIM: &str = "UPDATE deliveries SET attempts = attempts + 1, next_attempt_at = NULL, \
     last_attempt_at = ?2 \
     WHERE id = ?1 AND status = 'pending' \
     AND (next_attempt_at <= ?2 + 1 \
          OR (next_attempt_at IS NULL AND (last_attempt_at IS NULL OR last_attempt_at <= ?3)))";

/// What a claim answers of the delivery and its event (its endpoint's fields follow).
const CLAIMED: &str = "id, status, attempts - 1 AS attempts, next_attempt_at, endpoint_id, \
     institution_id, event_id, event_type, \
     (SELECT ev.payload FROM events ev WHERE ev.id = deliveries.event_id) AS payload";

/// The statement of [`claim_due`]: `?1` the delivery, `?2` now, `?3` stale before.
fn claim_due_sql() -> String {
    // RETURNING takes the bare table name (older SQLite refuses an alias there).
    // RETURNING takes the bare table name (older SQLite refuses an alias there).
    let endpoint = |column: &str| {
        format!("(SELECT e.{column} FROM webhook_endpoints e WHERE e.id = deliveries.endpoint_id)")
    };
    format!(
        "{CLAIM} \
             AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = deliveries.endpoint_id \
                         AND e.status = 'enabled' AND e.url IS NOT NULL) \
             RETURNING {CLAIMED}, {} AS url, {} AS endpoint_status, {} AS secret_encrypted, \
             {} AS previous_secret_encrypted, {} AS previous_secret_expires_at, \
             {} AS first_failure_at, {} AS last_success_at, created_at",
        endpoint("url"),
        endpoint("status"),
        endpoint("secret_encrypted"),
        endpoint("previous_secret_encrypted"),
        endpoint("previous_secret_expires_at"),
        endpoint("first_failure_at"),
        endpoint("last_success_at"),
    )
}

/// [`claim_due`] in an institution's object, which holds no endpoints: the claim, guarded on
/// the delivery alone, and its event; the endpoint's fields are left empty, for the caller to
/// read from the directory (and to give the delivery up if the endpoint is gone or off).
pub async fn claim_held(db: &Db, id: &str, now: i64, stale_before: i64) -> DbResult<Option<Due>> {
    first(
        db,
        &format!(
            "{CLAIM} RETURNING {CLAIMED}, NULL AS url, NULL AS endpoint_status, NULL AS secret_encrypted, \
         NULL AS previous_secret_encrypted, NULL AS previous_secret_expires_at, \
         NULL AS first_failure_at, NULL AS last_success_at, created_at"
        ),
        &[id.into(), now.into(), stale_before.into()],
    )
    .await
}

/// [`due`] in an institution's object: the delivery and its event, the endpoint's fields left
/// empty.
pub async fn due_held(db: &Db, id: &str) -> DbResult<Option<Due>> {
    first(
        db,
        "SELECT d.id, d.status, d.attempts, d.next_attempt_at, d.endpoint_id, d.institution_id, \
         d.event_id, d.event_type, ev.payload, NULL AS url, NULL AS endpoint_status, \
         NULL AS secret_encrypted, NULL AS previous_secret_encrypted, \
         NULL AS previous_secret_expires_at, NULL AS first_failure_at, NULL AS last_success_at, \
         d.created_at \
         FROM deliveries d JOIN events ev ON ev.id = d.event_id WHERE d.id = ?1",
        &[id.into()],
    )
    .await
}

/// Gives a delivery up (its endpoint is gone or disabled), while it is still pending: an
/// attempt in flight that succeeded meanwhile is not overwritten.
pub async fn give_up(db: &Db, id: &str) -> DbResult<()> {
    batch(db, vec![give_up_statement(id)?]).await
}

/// The statement of [`give_up`], for a batch that records the attempt with it.
pub fn give_up_statement(id: &str) -> DbResult<Stmt> {
    stmt(
        "UPDATE deliveries SET status = 'failed', next_attempt_at = NULL \
         WHERE id = ?1 AND status = 'pending'",
        &[id.into()],
    )
}

/// The events past their retention that may go, at most `?2`, oldest first: created before
/// `?1` and with no delivery still pending (none is, long before: a delivery is given up at its
/// first failure 5 days after it was made, `webhook::should_give_up`).
pub const PRUNABLE_EVENTS: &str = "SELECT e.id FROM events e INDEXED BY events_by_created \
     WHERE e.created < ?1 AND NOT EXISTS (SELECT 1 FROM deliveries p \
     WHERE p.event_id = e.id AND p.status = 'pending') ORDER BY e.created LIMIT ?2";

/// The statements deleting the deliveries of [`PRUNABLE_EVENTS`] and their attempts, for the
/// batch that deletes the events after them.
pub fn prune(before: i64, limit: i64) -> DbResult<Vec<Stmt>> {
    let params = [before.into(), limit.into()];
    Ok(vec![
        stmt(
            &format!(
                "DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT d.id FROM deliveries d \
                 WHERE d.event_id IN ({PRUNABLE_EVENTS}))"
            ),
            &params,
        )?,
        stmt(
            &format!("DELETE FROM deliveries WHERE event_id IN ({PRUNABLE_EVENTS})"),
            &params,
        )?,
    ])
}

/// One attempt's result, to store.
pub struct NewAttempt<'a> {
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
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// Milliseconds.
    pub latency_ms: i64,
    /// First 4 KB of the body.
    pub response_body: Option<&'a str>,
    /// Next attempt, if any.
    pub next_attempt_at: Option<i64>,
}

/// The attempt's row.
pub fn insert_attempt(a: &NewAttempt<'_>) -> DbResult<Stmt> {
    stmt("INSERT INTO delivery_attempts (delivery_id, endpoint_id, attempt, started_at, status_code, \
         outcome, latency_ms, response_body, next_attempt_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        &[
            a.delivery_id.into(),
            a.endpoint_id.into(),
            a.attempt.into(),
            a.started_at.into(),
            a.status_code.map_or(Value::Null, |c| Value::Int(c.into())),
            a.outcome.as_str().into(),
            a.latency_ms.into(),
            a.response_body.into(),
            a.next_attempt_at.into(),
        ],
    )
}

/// The delivery is done.
pub fn mark_succeeded(id: &str) -> DbResult<Stmt> {
    stmt(
        "UPDATE deliveries SET status = 'succeeded', next_attempt_at = NULL WHERE id = ?1",
        &[id.into()],
    )
}

/// The delivery's next attempt is due at `at`.
pub fn schedule(id: &str, at: Option<i64>) -> DbResult<Stmt> {
    stmt(
        "UPDATE deliveries SET next_attempt_at = ?2 WHERE id = ?1",
        &[id.into(), at.into()],
    )
}

/// Every pending delivery of `institution_id`'s to the endpoint fails (it was disabled or
/// deleted): never another institution's, whatever endpoint id it is given.
pub fn fail_pending_of_endpoint(
    institution_id: InstitutionId,
    endpoint_id: &str,
) -> DbResult<Stmt> {
    fail_pending(institution_id, endpoint_id, "")
}

/// [`fail_pending_of_endpoint`], only while the endpoint is disabled: for the batch that
/// disables it on a condition, so that nothing is failed when the condition did not hold.
pub fn fail_pending_of_disabled_endpoint(
    institution_id: InstitutionId,
    endpoint_id: &str,
) -> DbResult<Stmt> {
    fail_pending(
        institution_id,
        endpoint_id,
        " AND EXISTS (SELECT 1 FROM webhook_endpoints e \
         WHERE e.id = ?1 AND e.institution_id = ?2 AND e.status = 'disabled')",
    )
}

/// The statement of both: `?1` the endpoint, `?2` the institution, `condition` added last.
fn fail_pending(
    institution_id: InstitutionId,
    endpoint_id: &str,
    condition: &str,
) -> DbResult<Stmt> {
    stmt(
        &format!(
            "UPDATE deliveries SET status = 'failed', next_attempt_at = NULL \
             WHERE endpoint_id = ?1 AND institution_id = ?2 AND status = 'pending'{condition}"
        ),
        &[endpoint_id.into(), institution_id.into()],
    )
}

/// A delivery as the log shows it: read from its row, written with its times as timestamps.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Delivery {
    /// Always `webhook_delivery`.
    #[serde(skip_deserializing)]
    pub object: DeliveryObject,
    /// `dlv_…`.
    pub id: DeliveryId,
    /// Endpoint.
    pub endpoint_id: EndpointId,
    /// Event.
    pub event_id: EventId,
    /// Event type.
    pub event_type: String,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Attempts made.
    pub attempts: i64,
    /// When the next attempt is due.
    pub next_attempt_at: Option<UnixTime>,
    /// When the last attempt was made.
    pub last_attempt_at: Option<UnixTime>,
    /// The delivery this one resends.
    pub redelivery_of: Option<DeliveryId>,
    /// Creation time.
    pub created_at: UnixTime,
}

const DELIVERY_COLUMNS: &str = "id, endpoint_id, event_id, event_type, status, attempts, \
    next_attempt_at, last_attempt_at, redelivery_of, created_at";

/// One page of an endpoint's deliveries, newest first, one row over the limit; `cursor` is the
/// (creation time, id) of the delivery named by `starting_after`.
pub async fn page(
    db: &Db,
    institution_id: InstitutionId,
    endpoint_id: &str,
    f: &DeliveryLogQuery,
    cursor: Option<(i64, String)>,
) -> DbResult<Vec<Delivery>> {
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
    if let Some((created, id)) = cursor {
        and(" AND (created_at, id) < (#", created.into());
        and(", #)", id.into());
    }
    params.push(Value::Int(i64::from(f.limit) + 1));
    sql.push_str(&format!(
        " ORDER BY created_at DESC, id DESC LIMIT ?{}",
        params.len()
    ));
    all(db, &sql, &params).await
}

/// One delivery of the institution.
pub async fn get(db: &Db, institution_id: InstitutionId, id: &str) -> DbResult<Option<Delivery>> {
    first(
        db,
        &format!("SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE institution_id = ?1 AND id = ?2"),
        &[institution_id.into(), id.into()],
    )
    .await
}

/// The deliveries of every event of one of the institution's transactions, oldest first (at
/// most 500).
pub async fn of_transaction(
    db: &Db,
    institution_id: InstitutionId,
    transaction_id: i64,
) -> DbResult<Vec<Delivery>> {
    all(
        db,
        "SELECT d.id, d.endpoint_id, d.event_id, d.event_type, d.status, d.attempts, \
         d.next_attempt_at, d.last_attempt_at, d.redelivery_of, d.created_at \
         FROM events e JOIN deliveries d ON d.event_id = e.id \
         WHERE e.transaction_id = ?1 AND e.institution_id = ?2 \
         ORDER BY d.created_at, d.id LIMIT 500",
        &[transaction_id.into(), institution_id.into()],
    )
    .await
}

/// One attempt, as the log shows it.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Attempt {
    /// 1-based.
    pub attempt: i64,
    /// When it started.
    pub started_at: UnixTime,
    /// HTTP status, if the receiver answered.
    pub status_code: Option<i64>,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// Milliseconds.
    pub latency_ms: i64,
    /// First 4 KB of the body.
    pub response_body: Option<String>,
    /// When the next attempt was due.
    pub next_attempt_at: Option<UnixTime>,
}

/// A delivery's attempts, in order.
pub async fn attempts(db: &Db, delivery_id: &str) -> DbResult<Vec<Attempt>> {
    all(
        db,
        "SELECT attempt, started_at, status_code, outcome, latency_ms, response_body, \
         next_attempt_at FROM delivery_attempts WHERE delivery_id = ?1 ORDER BY attempt",
        &[delivery_id.into()],
    )
    .await
}

/// Largest number of deliveries one resend statement copies (D1 binds at most 100 values).
const RESEND_CHUNK: usize = 90;

/// New deliveries resending `ids` (of the institution), due now; returns them as created, read
/// back in bounded chunks with `RETURNING`.
pub async fn resend(
    db: &Db,
    institution_id: InstitutionId,
    ids: &[String],
    now: i64,
) -> DbResult<Vec<Delivery>> {
    let mut batch = Batch::new();
    let mut chunks = Vec::new();
    for chunk in ids.chunks(RESEND_CHUNK) {
        let mut params: Vec<Value> = vec![institution_id.into(), now.into()];
        params.extend(chunk.iter().map(|id| Value::from(id.as_str())));
        let placeholders: Vec<String> = (3..=params.len()).map(|n| format!("?{n}")).collect();
        let copy = stmt(
            &format!(
                "INSERT INTO deliveries (id, event_id, endpoint_id, institution_id, event_type, \
                 status, attempts, next_attempt_at, redelivery_of, created_at) \
                 SELECT {NEW_ID}, event_id, endpoint_id, institution_id, event_type, 'pending', 0, \
                 ?2, id, ?2 FROM deliveries WHERE institution_id = ?1 AND id IN ({}) \
                 RETURNING {DELIVERY_COLUMNS}",
                placeholders.join(", ")
            ),
            &params,
        )?;
        chunks.push(batch.push(Returning::<Delivery>::new(copy)));
    }
    let results = batch.run(db).await?;
    let mut created = Vec::new();
    for chunk in chunks {
        created.extend(results.rows(chunk)?);
    }
    Ok(created)
}

/// Failed deliveries of an endpoint created at or after `since`.
pub async fn failed_since(
    db: &Db,
    institution_id: InstitutionId,
    endpoint_id: &str,
    since: i64,
) -> DbResult<Vec<String>> {
    strings(
        db,
        "SELECT id FROM deliveries WHERE institution_id = ?1 AND endpoint_id = ?2 \
         AND status = 'failed' AND created_at >= ?3 ORDER BY created_at LIMIT 1000",
        &[institution_id.into(), endpoint_id.into(), since.into()],
    )
    .await
}

#[cfg(test)]
mod tests {
    use rusqlite::{params, Connection};

    /// Runs the claim; the attempts before it, when it claimed.
    fn claim(conn: &Connection, now: i64) -> Option<i64> {
        let mut stmt = conn.prepare(&super::claim_due_sql()).unwrap();
        let mut rows = stmt.query(params!["dlv_1", now, now - 20]).unwrap();
        rows.next().unwrap().map(|row| row.get("attempts").unwrap())
    }

    fn database(next_attempt_at: i64) -> Connection {
        database_at(":memory:", next_attempt_at)
    }

    fn database_at(path: &str, next_attempt_at: i64) -> Connection {
        let conn = Connection::open(path).unwrap();
        xtask::localdb::apply_migrations(&conn).unwrap();
        // One endpoint, event and delivery, without the institution and payment they name.
        conn.execute_batch(
            "PRAGMA foreign_keys = OFF; \
             INSERT INTO webhook_endpoints (id, institution_id, url, status, secret_encrypted, \
             created_at, updated_at) VALUES ('ep_1', 1, 'https://x.example/h', 'enabled', 's', \
             '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'); \
             INSERT INTO events (id, institution_id, type, transaction_id, payload, created) \
             VALUES ('evt_1', 1, 'payment.paid', 1, '{}', 0);",
        )
        .unwrap();
        conn.execute(
            "INSERT INTO deliveries (id, event_id, endpoint_id, institution_id, event_type, \
             status, next_attempt_at, created_at) \
             VALUES ('dlv_1', 'evt_1', 'ep_1', 1, 'payment.paid', 'pending', ?1, 0)",
            [next_attempt_at],
        )
        .unwrap();
        conn
    }

    #[test]
    fn a_due_delivery_is_claimed_once_until_its_attempt_goes_stale() {
        let conn = database(1000);
        assert_eq!(claim(&conn, 1000), Some(0));
        // A second message for it while the attempt is in flight.
        assert_eq!(claim(&conn, 1005), None);
        // Its consumer vanished without recording anything: stale after 20 s.
        assert_eq!(claim(&conn, 1021), Some(1));
    }

    #[test]
    fn racing_consumers_of_one_message_claim_it_once() {
        let dir = std::env::temp_dir().join(format!("payrail-claim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("d1.sqlite");
        let _ = std::fs::remove_file(&path);
        let path = path.to_str().unwrap().to_owned();
        drop(database_at(&path, 1000));
        let barrier = std::sync::Barrier::new(8);
        let claimed = std::thread::scope(|scope| {
            let racers: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        let conn = Connection::open(&path).unwrap();
                        conn.busy_timeout(std::time::Duration::from_secs(10))
                            .unwrap();
                        barrier.wait();
                        claim(&conn, 1000)
                    })
                })
                .collect();
            racers
                .into_iter()
                .filter_map(|racer| racer.join().unwrap())
                .count()
        });
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(claimed, 1);
    }

    #[test]
    fn early_finished_and_unusable_deliveries_are_not_claimed() {
        let conn = database(1000);
        assert_eq!(claim(&conn, 990), None, "early");
        conn.execute("UPDATE webhook_endpoints SET status = 'disabled'", [])
            .unwrap();
        assert_eq!(claim(&conn, 1000), None, "endpoint disabled");
        conn.execute("UPDATE webhook_endpoints SET status = 'enabled'", [])
            .unwrap();
        conn.execute("UPDATE deliveries SET status = 'succeeded'", [])
            .unwrap();
        assert_eq!(claim(&conn, 1000), None, "finished");
    }
}
