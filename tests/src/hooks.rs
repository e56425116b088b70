//! Helpers of the webhook tests: endpoints through the portal API, payments through the
//! sandbox API, and what the loopback receivers got.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::Method;
use serde_json::{json, Value};
use shared_types::webhook::Verifier;

use crate::receiver::{Received, Receiver};
use crate::{eventually, PortalSession, Worker};

/// Unix seconds now.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Creates a webhook endpoint through the portal API; returns its id and signing secret.
pub fn endpoint(
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

/// A new pending payment of 40.00 EUR for the institution's first merchant; returns its id.
pub fn payment(worker: &Worker, institution: usize, reference: &str) -> i64 {
    let key = &worker.credentials.institutions[institution].merchants[0].public_key;
    let session = worker.checkout_session(&json!({
        "publicKey": key, "amount": "40.00", "currency": "EUR", "title": "Webhook test",
        "externalReference": reference, "redirectUrl": "https://shop.example/done", "allowCrypto": true
    }));
    session["transaction_id"].as_i64().unwrap()
}

/// A sandbox action on a payment of the institution; returns the transaction after it.
pub fn act(worker: &Worker, institution: usize, id: i64, action: &str, body: Value) -> Value {
    let reply = worker.post_json(
        &format!("/sandbox/transactions/{id}/{action}"),
        &body,
        Some(&worker.sandbox_token(institution)),
        "/sandbox/transactions/{id}/{action}",
    );
    assert_eq!(reply.status, 200, "{action}: {}", reply.text);
    reply.json()
}

/// Waits until the receiver has at least `count` requests; returns them all.
pub fn wait_for(receiver: &Receiver, what: &str, count: usize) -> Vec<Received> {
    eventually(what, Duration::from_secs(40), || {
        let got = receiver.received();
        (got.len() >= count).then_some(got)
    })
}

/// The requests whose event concerns transaction `id`.
pub fn of_transaction(received: &[Received], id: i64) -> Vec<Received> {
    received
        .iter()
        .filter(|r| r.json()["data"]["id"] == id)
        .cloned()
        .collect()
}

/// Asserts that a request verifies with `secret` (shared-types' verifier, now).
pub fn assert_signed(r: &Received, secret: &str) {
    let header = r.header("payrail-signature").expect("Payrail-Signature");
    Verifier::new(secret)
        .verify(header, &r.body, unix_now())
        .unwrap_or_else(|e| panic!("{e}: {header}"));
}

/// One page of an endpoint's delivery log, with `query`.
pub fn log(worker: &Worker, session: &PortalSession, endpoint_id: &str, query: &str) -> Value {
    let reply = worker.portal(
        Method::GET,
        &format!("/portal/api/webhook-endpoints/{endpoint_id}/deliveries?{query}"),
        Some(session),
        None,
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()
}

/// One delivery with its attempts.
pub fn detail(worker: &Worker, session: &PortalSession, delivery_id: &str) -> Value {
    let reply = worker.portal(
        Method::GET,
        &format!("/portal/api/deliveries/{delivery_id}"),
        Some(session),
        None,
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()
}

/// The requests that carry event `event_id`.
pub fn of_event(received: &[Received], event_id: &str) -> Vec<Received> {
    received
        .iter()
        .filter(|r| r.header("payrail-event-id") == Some(event_id))
        .cloned()
        .collect()
}

/// Waits until nothing more is on its way to an endpoint whose receiver answers 200, and
/// returns what the receiver got. Reading the receiver right after the expected requests
/// arrived cannot see one that comes later; so this sends a test event to the endpoint as a
/// marker, waits until the marker has arrived and the endpoint's log has no pending delivery
/// (no retry or queued message left), and only then reads the receiver. The marker itself is
/// left out of what it returns.
pub fn settled(
    worker: &Worker,
    session: &PortalSession,
    endpoint_id: &str,
    receiver: &Receiver,
) -> Vec<Received> {
    let reply = worker.portal(
        Method::POST,
        &format!("/portal/api/webhook-endpoints/{endpoint_id}/test"),
        Some(session),
        None,
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    let marker = reply.json()["event_id"].as_str().unwrap().to_owned();
    eventually("the marker event", Duration::from_secs(40), || {
        (!of_event(&receiver.received(), &marker).is_empty()).then_some(())
    });
    eventually("no pending delivery", Duration::from_secs(40), || {
        let pending = log(worker, session, endpoint_id, "status=pending&limit=100");
        pending["data"].as_array().unwrap().is_empty().then_some(())
    });
    let received = receiver.received();
    assert_eq!(of_event(&received, &marker).len(), 1, "the marker once");
    received
        .into_iter()
        .filter(|r| r.header("payrail-event-id") != Some(marker.as_str()))
        .collect()
}
