//! A checkout nobody pays expires: it refuses payment as soon as it ends, and the cron trigger
//! marks it, however long ago it ended. On a worker of its own, because it moves sessions' ends
//! into the past directly in the database while the worker is idle, and runs the cron.

use std::time::Duration;

use payrail_tests::{eventually, Worker};
use reqwest::Method;
use serde_json::json;

/// This module's own worker (see the module's doc).
fn worker() -> &'static Worker {
    Worker::own("expiry")
}

/// The tests write to the database, which is safe only while the worker is idle: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn an_unpaid_checkout_expires_and_cannot_be_paid() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let worker = worker();
    let key = &worker.credentials.institutions[0].merchants[0].public_key;
    let session = worker.checkout_session(&json!({
        "publicKey": key, "amount": 10, "currency": "GBP", "title": "Late order",
        "externalReference": "EXP-1", "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    }));
    let id = session["transaction_id"].as_i64().unwrap();
    let sid = session["id"].as_str().unwrap();
    let moved = worker
        .database()
        .execute(
            "UPDATE checkout_sessions SET expires_at = unixepoch() - 1 WHERE id = ?1",
            [sid],
        )
        .unwrap();
    assert_eq!(moved, 1);
    // The page knows at once; the stored status follows at the next cron run.
    let status = worker.send(
        worker.request(Method::GET, &format!("/checkout/{sid}/status")),
        Some("/checkout/{id}/status"),
    );
    assert_eq!(status.json()["status"], "expired");
    assert_eq!(worker.transaction(0, id)["raw_status"], "pending");
    // Not payable either, although the cron has not marked it yet.
    let early = worker.post_json(
        &format!("/sandbox/transactions/{id}/pay"),
        &json!({"amount": "10"}),
        Some(&worker.sandbox_token(0)),
        "/sandbox/transactions/{id}/{action}",
    );
    assert!(early.assert_error(409, "conflict").contains("ended"));
    assert_eq!(worker.transaction(0, id)["raw_status"], "pending");

    let cron = worker.send(
        worker.request(Method::GET, "/__scheduled?cron=*+*+*+*+*"),
        None,
    );
    assert_eq!(cron.status, 200);
    let expired = eventually(
        "the cron to expire the payment",
        Duration::from_secs(10),
        || {
            let t = worker.transaction(0, id);
            (t["raw_status"] == "expired").then_some(t)
        },
    );
    assert_eq!(expired["status"], "failed");
    let page = worker.send(worker.http_get(session["url"].as_str().unwrap()), None);
    assert!(page.text.contains("expired"));
    assert!(!page.text.contains("deposit-address"));
    let pay = worker.post_json(
        &format!("/sandbox/transactions/{id}/pay"),
        &json!({"amount": "10"}),
        Some(&worker.sandbox_token(0)),
        "/sandbox/transactions/{id}/{action}",
    );
    pay.assert_error(409, "conflict");
}

#[test]
fn a_checkout_that_ended_long_ago_is_expired_too() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let worker = worker();
    let key = &worker.credentials.institutions[0].merchants[0].public_key;
    let session = worker.checkout_session(&json!({
        "publicKey": key, "amount": 12, "currency": "GBP", "title": "Forgotten order",
        "externalReference": "EXP-OLD-1", "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    }));
    let id = session["transaction_id"].as_i64().unwrap();
    // Ended eight days ago (a cron outage, say): no look-back window may strand it.
    let moved = worker
        .database()
        .execute(
            "UPDATE checkout_sessions SET expires_at = unixepoch() - 8 * 86400 WHERE id = ?1",
            [session["id"].as_str().unwrap()],
        )
        .unwrap();
    assert_eq!(moved, 1);
    let cron = worker.send(
        worker.request(Method::GET, "/__scheduled?cron=*+*+*+*+*"),
        None,
    );
    assert_eq!(cron.status, 200);
    eventually(
        "the old checkout to expire",
        Duration::from_secs(10),
        || (worker.transaction(0, id)["raw_status"] == "expired").then_some(()),
    );
}
