//! Retention: the cron prunes events (with their deliveries and attempts) and ended checkout
//! sessions past the retention period (30 days), in bounded batches, oldest first, and keeps
//! what is still needed: events with a delivery still pending, sessions of payments still
//! pending or with a deposit address. On a worker of its own, because it moves rows' times into
//! the past directly in the database while the worker is idle, and runs the cron.

use std::time::Duration;

use payrail_tests::hooks::{act, payment};
use payrail_tests::{eventually, Worker};
use rusqlite::Connection;
use serde_json::json;

/// Most events one cron run prunes (the worker's `cron::PRUNE_EVENTS`).
const PER_RUN: i64 = 200;

/// Past the default retention of 30 days.
const AGE: i64 = 31 * 24 * 60 * 60;

fn count(db: &Connection, sql: &str) -> i64 {
    db.query_row(sql, [], |row| row.get(0)).unwrap()
}

/// Events that may go: none of their deliveries is still pending.
const PRUNABLE: &str = "SELECT count(*) FROM events e WHERE e.created < unixepoch() - 2592000 \
    AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.status = 'pending')";

#[test]
fn the_cron_prunes_what_is_past_retention_in_bounded_batches_and_keeps_what_is_needed() {
    let worker = Worker::own("retention");
    // Enough old events that one run cannot prune them all: each payment makes two.
    let ids: Vec<i64> = (0..110)
        .map(|n| {
            let id = payment(worker, 0, &format!("OLD-{n}"));
            act(worker, 0, id, "pay", json!({"amount": "40.00"}));
            act(worker, 0, id, "settle", json!({}));
            id
        })
        .collect();
    let pending_payment = payment(worker, 0, "OLD-PENDING");
    let db = worker.database();
    // The worker is idle: age every event, session and key past the retention.
    db.execute_batch(&format!(
        "UPDATE events SET created = created - {AGE};
         UPDATE checkout_sessions SET created_at = created_at - {AGE}, expires_at = expires_at - {AGE};
         UPDATE idempotency_keys SET created_at = created_at - {AGE};"
    ))
    .unwrap();
    // Deliveries of two old events (this institution has no endpoint: they are written here):
    // one still pending keeps its event whatever its age; one that failed goes with its
    // attempt.
    let event_of = |id: i64| -> String {
        db.query_row(
            "SELECT id FROM events WHERE transaction_id = ?1 ORDER BY seq LIMIT 1",
            [id],
            |row| row.get(0),
        )
        .unwrap()
    };
    let (kept_event, gone_event) = (event_of(ids[1]), event_of(ids[2]));
    db.execute_batch(&format!(
        "INSERT INTO deliveries (id, event_id, endpoint_id, institution_id, event_type, status, \
         attempts, next_attempt_at, created_at) \
         SELECT 'dlv_retention_pending', id, 'ep_retention', institution_id, type, 'pending', 1, \
         unixepoch() + 86400, created FROM events WHERE id = '{kept_event}';
         INSERT INTO deliveries (id, event_id, endpoint_id, institution_id, event_type, status, \
         attempts, created_at) \
         SELECT 'dlv_retention_failed', id, 'ep_retention', institution_id, type, 'failed', 1, \
         created FROM events WHERE id = '{gone_event}';
         INSERT INTO delivery_attempts (delivery_id, endpoint_id, attempt, started_at, \
         status_code, outcome, latency_ms) \
         VALUES ('dlv_retention_failed', 'ep_retention', 1, unixepoch() - {AGE}, 500, \
         'http_status', 12);"
    ))
    .unwrap();
    let before = count(&db, "SELECT count(*) FROM events");
    let prunable = count(&db, PRUNABLE);
    assert!(
        prunable > PER_RUN,
        "{prunable} old events: more than one run's share"
    );

    worker.cron();
    let after_one = count(&db, "SELECT count(*) FROM events");
    assert_eq!(
        before - after_one,
        PER_RUN,
        "one run prunes one bounded batch"
    );

    // Later runs take the rest; what a pending delivery needs stays.
    eventually("every old event pruned", Duration::from_secs(60), || {
        worker.cron();
        (count(&db, PRUNABLE) == 0).then_some(())
    });
    let event_exists = |id: &str| {
        count(
            &db,
            &format!(
                "SELECT count(*) FROM events WHERE id = '{}'",
                id.replace('\'', "")
            ),
        ) == 1
    };
    assert!(
        event_exists(&kept_event),
        "an event with a pending delivery stays"
    );
    assert!(
        !event_exists(&gone_event),
        "an old event whose delivery ended goes"
    );
    for (sql, what) in [
        (
            "SELECT count(*) FROM deliveries WHERE id = 'dlv_retention_failed'",
            "the old event's ended delivery goes with it",
        ),
        (
            "SELECT count(*) FROM deliveries d WHERE NOT EXISTS \
             (SELECT 1 FROM events e WHERE e.id = d.event_id)",
            "no delivery outlives its event",
        ),
        (
            "SELECT count(*) FROM delivery_attempts a WHERE NOT EXISTS \
             (SELECT 1 FROM deliveries d WHERE d.id = a.delivery_id)",
            "no attempt outlives its delivery",
        ),
    ] {
        assert_eq!(count(&db, sql), 0, "{what}");
    }

    // The feed shows what is kept; a new event is kept.
    let (client, secret) = worker.new_client(0, "Retention reader", &["events:read"]);
    let token = worker.token(&client, &secret);
    let fresh = payment(worker, 0, "NEW-1");
    act(worker, 0, fresh, "pay", json!({"amount": "40.00"}));
    worker.cron();
    let reply = worker.get(
        &format!("/v1/events?transaction_id={fresh}"),
        Some(&token),
        "/v1/events",
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.json()["data"].as_array().unwrap().len(),
        1,
        "{}",
        reply.text
    );
    let old = worker.get(
        &format!("/v1/events?transaction_id={}", ids[0]),
        Some(&token),
        "/v1/events",
    );
    assert_eq!(
        old.json()["data"].as_array().unwrap().len(),
        0,
        "{}",
        old.text
    );

    // Sessions: an ended one of a finished payment goes; the payments themselves stay.
    let sessions_left = |id: i64| {
        count(
            &db,
            &format!("SELECT count(*) FROM checkout_sessions WHERE transaction_id = {id}"),
        )
    };
    assert_eq!(
        sessions_left(ids[0]),
        0,
        "an ended session of a settled payment is pruned"
    );
    assert_eq!(
        worker.transaction(0, ids[0])["status"],
        "paid",
        "the payment itself is kept"
    );
    // The pending payment's session ended: the cron expired the payment first, then pruned it.
    assert_eq!(
        worker.transaction(0, pending_payment)["raw_status"],
        "expired"
    );
    assert_eq!(sessions_left(fresh), 1, "a recent session stays");
    assert_eq!(
        count(
            &db,
            &format!(
                "SELECT count(*) FROM idempotency_keys WHERE created_at < unixepoch() - {AGE} + 60"
            )
        ),
        0,
        "old idempotency keys are pruned"
    );
}
