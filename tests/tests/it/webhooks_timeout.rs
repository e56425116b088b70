//! A receiver that does not answer within ten seconds has failed the attempt. On a worker of
//! its own: locally the queue hands the consumer one batch at a time, so a ten-second attempt
//! would hold up the deliveries (and the timing) of every other test on the same worker.

use std::time::Duration;

use payrail_tests::hooks::{act, detail, endpoint, log, payment, wait_for};
use payrail_tests::receiver::{Mode, Receiver};
use payrail_tests::{eventually, Worker};
use serde_json::{json, Value};

/// This module's own worker (see the module's doc).
fn worker() -> &'static Worker {
    Worker::own("webhooks_timeout")
}

#[test]
fn a_receiver_that_hangs_past_ten_seconds_has_failed() {
    let worker = worker();
    let session = worker.portal_login(0);
    let receiver = Receiver::start();
    receiver.set_mode(Mode::Hang);
    let (endpoint_id, _) = endpoint(
        worker,
        &session,
        &receiver.url("/slow"),
        Some(&["payment.succeeded"]),
    );
    let id = payment(worker, 0, "WH-HANG-1");
    act(worker, 0, id, "pay", json!({"amount": "40.00"}));
    wait_for(&receiver, "the first attempt", 1);
    receiver.set_mode(Mode::Ok);
    let d = eventually(
        "the delivery to succeed after the timeout",
        Duration::from_secs(60),
        || {
            let d = log(worker, &session, &endpoint_id, "")["data"][0].clone();
            (d["status"] == "succeeded").then_some(d)
        },
    );
    let attempts = detail(worker, &session, d["id"].as_str().unwrap())["attempts"].clone();
    assert_eq!(attempts[0]["outcome"], "timeout");
    assert!(
        attempts[0]["latency_ms"].as_i64().unwrap() >= 9_900,
        "{attempts}"
    );
    assert_eq!(attempts[0]["status_code"], Value::Null);
    assert_eq!(
        attempts.as_array().unwrap().last().unwrap()["outcome"],
        "ok"
    );
}
