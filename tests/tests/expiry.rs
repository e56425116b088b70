//! A checkout nobody pays expires: the cron trigger marks it. A test binary of its own, because
//! it moves a session's end into the past directly in the database while the worker is idle.

use std::time::Duration;

use payrail_tests::{eventually, Worker};
use reqwest::Method;
use serde_json::json;

#[test]
fn an_unpaid_checkout_expires_and_cannot_be_paid() {
    let worker = Worker::shared();
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
