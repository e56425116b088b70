//! Nothing is stranded: more due deliveries than one queue batch holds are all swept, and an
//! attempt that could not be made is recorded and retried. On a worker of its own, because it
//! writes rows straight into the database while the worker is idle (one test at a time), and
//! runs the cron.

use std::sync::Mutex;
use std::time::Duration;

use payrail_tests::hooks::{act, detail, endpoint, log, payment};
use payrail_tests::receiver::Receiver;
use payrail_tests::{eventually, Worker};
use reqwest::Method;
use serde_json::json;

/// This module's own worker (see the module's doc).
fn worker() -> &'static Worker {
    Worker::own("stranded")
}

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn cron(worker: &Worker) {
    let reply = worker.send(
        worker.request(Method::GET, "/__scheduled?cron=*+*+*+*+*"),
        None,
    );
    assert_eq!(reply.status, 200);
}

#[test]
fn more_due_deliveries_than_a_queue_batch_are_all_swept() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let worker = worker();
    let session = worker.portal_login(0);
    let receiver = Receiver::start();
    let (endpoint_id, _) = endpoint(
        worker,
        &session,
        &receiver.url("/sweep"),
        Some(&["payment.succeeded"]),
    );
    let id = payment(worker, 0, "SWEEP-1");
    act(worker, 0, id, "pay", json!({"amount": "40.00"}));
    let first = eventually("the first delivery", Duration::from_secs(30), || {
        log(worker, &session, &endpoint_id, "status=succeeded")["data"]
            .as_array()
            .unwrap()
            .first()
            .cloned()
    });
    let event_id = first["event_id"].as_str().unwrap().to_owned();

    // 250 deliveries of that event whose queue messages were lost two minutes ago.
    let added = worker
        .database()
        .execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 250) \
             INSERT INTO deliveries (id, event_id, endpoint_id, institution_id, event_type, \
             status, attempts, next_attempt_at, created_at) \
             SELECT 'dlv_lost' || i, d.event_id, d.endpoint_id, d.institution_id, d.event_type, \
             'pending', 0, unixepoch() - 120, unixepoch() - 120 FROM n, deliveries d \
             WHERE d.id = ?1",
            [first["id"].as_str().unwrap()],
        )
        .unwrap();
    assert_eq!(added, 250);
    cron(worker);
    eventually("all 250 to arrive", Duration::from_secs(60), || {
        let got = receiver
            .received()
            .iter()
            .filter(|r| r.header("payrail-event-id") == Some(event_id.as_str()))
            .count();
        (got > 250).then_some(())
    });
    eventually("none left pending", Duration::from_secs(30), || {
        let pending: i64 = worker
            .database()
            .query_row(
                "SELECT count(*) FROM deliveries WHERE id LIKE 'dlv_lost%' AND status = 'pending'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        (pending == 0).then_some(())
    });
}

#[test]
fn an_attempt_that_could_not_be_made_is_recorded_and_retried() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let worker = worker();
    let session = worker.portal_login(1);
    let receiver = Receiver::start();
    let (endpoint_id, _) = endpoint(worker, &session, &receiver.url("/broken"), None);
    // A signing secret that no longer opens (a wrong key, a damaged row).
    let damaged = worker
        .database()
        .execute(
            "UPDATE webhook_endpoints SET secret_encrypted = 'AAAA' WHERE id = ?1",
            [&endpoint_id],
        )
        .unwrap();
    assert_eq!(damaged, 1);
    let sent = worker.portal(
        Method::POST,
        &format!("/portal/api/webhook-endpoints/{endpoint_id}/test"),
        Some(&session),
        None,
    );
    assert_eq!(sent.status, 201, "{}", sent.text);
    let delivery_id = sent.json()["id"].as_str().unwrap().to_owned();
    let d = eventually(
        "the attempt to be recorded",
        Duration::from_secs(30),
        || {
            let d = detail(worker, &session, &delivery_id);
            (!d["attempts"].as_array().unwrap().is_empty()).then_some(d)
        },
    );
    let attempt = &d["attempts"][0];
    assert_eq!(attempt["outcome"], "error", "{d}");
    assert!(attempt["next_attempt_at"].is_string(), "{d}");
    assert_eq!(d["status"], "pending", "still to be retried: {d}");
    assert!(receiver.received().is_empty(), "nothing unsigned was sent");
    // Retried on the schedule, each attempt recorded.
    eventually("a second attempt", Duration::from_secs(30), || {
        let d = detail(worker, &session, &delivery_id);
        (d["attempts"].as_array().unwrap().len() >= 2).then_some(())
    });
}
