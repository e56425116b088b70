//! A receiver that does not answer within ten seconds has failed the attempt. In a binary of
//! its own: locally the queue hands the consumer one batch at a time, so a ten-second attempt
//! would hold up the timing of the other webhook tests.

use std::time::Duration;

use payrail_tests::receiver::{Mode, Received, Receiver};
use payrail_tests::{eventually, PortalSession, Worker};
use reqwest::Method;
use serde_json::{json, Value};

fn endpoint(
    worker: &Worker,
    session: &PortalSession,
    url: &str,
    types: Option<&[&str]>,
) -> (String, String) {
    let mut body = json!({"url": url, "description": "test receiver"});
    if let Some(types) = types {
        body["event_types"] = json!(types);
    }
    let reply = worker.portal(
        Method::POST,
        "/portal/api/webhook-endpoints",
        Some(session),
        Some(&body),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    let e = reply.json();
    (
        e["id"].as_str().unwrap().to_owned(),
        e["signing_secret"].as_str().unwrap().to_owned(),
    )
}

fn payment(worker: &Worker, institution: usize, reference: &str) -> i64 {
    let key = &worker.credentials.institutions[institution].merchants[0].public_key;
    let session = worker.checkout_session(&json!({
        "publicKey": key, "amount": "40.00", "currency": "EUR", "title": "Webhook test",
        "externalReference": reference, "redirectUrl": "https://shop.example/done", "allowCrypto": true
    }));
    session["transaction_id"].as_i64().unwrap()
}

fn act(worker: &Worker, institution: usize, id: i64, action: &str, body: Value) -> Value {
    let reply = worker.post_json(
        &format!("/sandbox/transactions/{id}/{action}"),
        &body,
        Some(&worker.institution_token(institution)),
        "/sandbox/transactions/{id}/{action}",
    );
    assert_eq!(reply.status, 200, "{action}: {}", reply.text);
    reply.json()
}

fn wait_for(receiver: &Receiver, what: &str, count: usize) -> Vec<Received> {
    eventually(what, Duration::from_secs(40), || {
        let got = receiver.received();
        (got.len() >= count).then_some(got)
    })
}

fn log(worker: &Worker, session: &PortalSession, endpoint_id: &str, query: &str) -> Value {
    let reply = worker.portal(
        Method::GET,
        &format!("/portal/api/webhook-endpoints/{endpoint_id}/deliveries?{query}"),
        Some(session),
        None,
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()
}

fn detail(worker: &Worker, session: &PortalSession, delivery_id: &str) -> Value {
    let reply = worker.portal(
        Method::GET,
        &format!("/portal/api/deliveries/{delivery_id}"),
        Some(session),
        None,
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()
}

#[test]
fn a_receiver_that_hangs_past_ten_seconds_has_failed() {
    let worker = Worker::shared();
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
