//! The reference webhook receiver against the running worker: it stores before acknowledging,
//! dedupes (a resend, and eight deliveries fired in parallel, fulfil once), fulfils only what
//! was paid in full and sends the rest to review, repairs a lost webhook by reconciliation, and
//! refuses forgeries.

use std::sync::Arc;
use std::time::Duration;

use futures_util::TryStreamExt;
use payrail::webhooks::{signature_header, Webhooks};
use payrail::{Client, EventQuery};
use payrail_receiver::{Receiver, Store};
use payrail_tests::hooks::{act, endpoint, log, payment, unix_now};
use payrail_tests::{eventually, Worker};
use reqwest::Method;
use serde_json::{json, Value};

use super::{runtime, sdk_client, TempDir};

/// A reference receiver on a free port with its own database, running on the shared runtime.
struct RunningReceiver {
    url: String,
    receiver: Arc<Receiver>,
    _dir: TempDir,
}

fn start_receiver(secret: &str, client: Option<Client>) -> RunningReceiver {
    let dir = std::env::temp_dir().join(format!(
        "payrail-receiver-{}-{}",
        std::process::id(),
        payrail_tests::worker::free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let store = Store::open(&dir.join("shop.db")).unwrap();
    let receiver = Receiver::new(store, Webhooks::new(secret), client, Duration::ZERO).unwrap();
    let listener = runtime()
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    runtime().spawn(receiver.clone().run(listener, None));
    RunningReceiver {
        url,
        receiver,
        _dir: TempDir(dir),
    }
}

fn order(receiver: &RunningReceiver, reference: &str, amount: &str) {
    let reply = reqwest::blocking::Client::new()
        .post(format!("{}/orders", receiver.url))
        .json(&json!({"reference": reference, "amount": amount, "currency": "EUR"}))
        .send()
        .unwrap();
    assert_eq!(reply.status(), 201);
}

fn reviews_of(receiver: &RunningReceiver, reason: &str, reference: &str) -> usize {
    receiver
        .receiver
        .store()
        .reviews()
        .unwrap()
        .iter()
        .filter(|r| r.reason == reason && r.reference.as_deref() == Some(reference))
        .count()
}

#[test]
fn the_receiver_fulfils_once_and_sends_the_rest_to_review() {
    let worker = Worker::shared();
    let session = worker.portal_login(0);
    // A receiver with a placeholder secret cannot exist before the endpoint does: register the
    // endpoint at a reserved port first, then start the receiver there with its secret.
    let port = payrail_tests::worker::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let (endpoint_id, secret) = endpoint(worker, &session, &format!("{url}/webhooks"), None);
    let dir = std::env::temp_dir().join(format!("payrail-receiver-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let receiver = Receiver::new(
        Store::open(&dir.join("shop.db")).unwrap(),
        Webhooks::new(&secret),
        None,
        Duration::ZERO,
    )
    .unwrap();
    let listener = runtime()
        .block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))
        .unwrap();
    runtime().spawn(receiver.clone().run(listener, None));
    let running = RunningReceiver {
        url,
        receiver,
        _dir: TempDir(dir),
    };

    order(&running, "RCV-PAID", "40.00");
    order(&running, "RCV-UNDER", "40.00");
    let paid = payment(worker, 0, "RCV-PAID");
    let under = payment(worker, 0, "RCV-UNDER");
    let unknown = payment(worker, 0, "RCV-UNKNOWN");
    for (id, amount) in [(paid, "40.00"), (under, "30.00"), (unknown, "40.00")] {
        act(worker, 0, id, "pay", json!({ "amount": amount }));
        act(worker, 0, id, "settle", json!({}));
    }
    let store = running.receiver.store();
    eventually("the paid order fulfilled", Duration::from_secs(40), || {
        store.fulfilment("RCV-PAID").unwrap()
    });
    eventually(
        "the underpaid order in review",
        Duration::from_secs(40),
        || (reviews_of(&running, "underpaid", "RCV-UNDER") == 1).then_some(()),
    );
    eventually(
        "the unknown order in review",
        Duration::from_secs(40),
        || (reviews_of(&running, "unknown_order", "RCV-UNKNOWN") == 1).then_some(()),
    );
    assert_eq!(store.order("RCV-UNDER").unwrap().unwrap().state, "review");
    assert_eq!(store.fulfilment("RCV-UNDER").unwrap(), None);

    // The same payment.paid delivered again (a resend from the portal): acknowledged, stored
    // once, fulfilled once.
    let client = sdk_client(worker, 0);
    let events: Vec<payrail::webhooks::Event> = runtime()
        .block_on(
            client
                .events(
                    EventQuery::new()
                        .transaction_id(paid)
                        .kind(payrail::EventType::PaymentPaid),
                )
                .try_collect(),
        )
        .unwrap();
    let event_id = events[0].id.clone();
    assert_eq!(store.event_status(&event_id).unwrap(), Some((1, true)));
    let delivery = eventually("the paid delivery logged", Duration::from_secs(20), || {
        log(worker, &session, &endpoint_id, "event_type=payment.paid")["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["event_id"] == event_id.as_str() && d["status"] == "succeeded")
            .map(|d| d["id"].as_str().unwrap().to_owned())
    });
    let reply = worker.portal(
        Method::POST,
        &format!("/portal/api/deliveries/{delivery}/resend"),
        Some(&session),
        None,
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    eventually("the repeat delivered", Duration::from_secs(40), || {
        (store.event_status(&event_id).unwrap() == Some((2, true))).then_some(())
    });
    assert_eq!(
        store.fulfilment("RCV-PAID").unwrap(),
        Some((paid, "webhook".to_owned()))
    );
    assert_eq!(store.order("RCV-PAID").unwrap().unwrap().state, "fulfilled");
    assert_eq!(reviews_of(&running, "unknown_order", "RCV-PAID"), 0);
}

#[test]
fn a_lost_webhook_is_repaired_by_reconciliation() {
    let worker = Worker::shared();
    // This receiver has no endpoint: every webhook for its order is lost.
    let running = start_receiver("whsec_never_used", Some(sdk_client(worker, 0)));
    order(&running, "RCV-LOST", "25.00");
    let id = payment(worker, 0, "RCV-LOST");
    act(worker, 0, id, "pay", json!({"amount": "25.00"}));
    act(worker, 0, id, "settle", json!({}));
    let store = running.receiver.store();
    assert_eq!(store.fulfilment("RCV-LOST").unwrap(), None);

    let report = runtime().block_on(running.receiver.reconcile()).unwrap();
    assert!(report.seen >= 1 && report.fulfilled == 1, "{report:?}");
    assert_eq!(
        store.fulfilment("RCV-LOST").unwrap(),
        Some((id, "reconcile".to_owned()))
    );
    assert_eq!(store.order("RCV-LOST").unwrap().unwrap().state, "fulfilled");
    // Again: nothing new to repair, and nothing fulfilled twice.
    let again = runtime().block_on(running.receiver.reconcile()).unwrap();
    assert_eq!(again.fulfilled, 0, "{again:?}");
}

#[test]
fn racing_deliveries_of_one_event_are_stored_once_and_fulfil_once() {
    let running = start_receiver("whsec_race", None);
    order(&running, "RCV-RACE", "12.00");
    let body = json!({"id": "evt_race", "type": "payment.paid", "created": unix_now(),
        "data": {"object": "transaction", "id": 91, "merchant_id": 1, "status": "paid",
            "raw_status": "paid", "amount_status": "EXACT", "asset": "USDC", "currency": "EUR",
            "amount": {"gross": "12.00", "net": "11.88", "expected": "12.00", "psp_fee": "0.12",
                       "gas_fee": "0.00", "bridge_fee": null},
            "networks": {"payment": "polygon", "settlement": "polygon"},
            "tx_hashes": {"source": "0x1", "bridge": null, "settlement": "0x2"},
            "customer_email": null, "external_reference": "RCV-RACE",
            "created_at": "2026-11-22T00:00:00Z", "paid_at": "2026-11-22T00:00:05Z"}})
    .to_string();
    let signature = signature_header(&["whsec_race"], unix_now(), body.as_bytes());
    let http = reqwest::blocking::Client::new();
    let barrier = std::sync::Barrier::new(8);
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let racers: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    http.post(format!("{}/webhooks", running.url))
                        .header("Payrail-Signature", &signature)
                        .body(body.clone())
                        .send()
                        .unwrap()
                        .status()
                        .as_u16()
                })
            })
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert_eq!(statuses, [204; 8], "every delivery is acknowledged");
    let store = running.receiver.store();
    eventually("the event processed", Duration::from_secs(20), || {
        (store.event_status("evt_race").unwrap() == Some((8, true))).then_some(())
    });
    assert_eq!(
        store.fulfilment("RCV-RACE").unwrap(),
        Some((91, "webhook".to_owned()))
    );
    assert_eq!(store.order("RCV-RACE").unwrap().unwrap().state, "fulfilled");
}

#[test]
fn the_receiver_refuses_forgeries_and_stores_nothing() {
    let running = start_receiver("whsec_real", None);
    let http = reqwest::blocking::Client::new();
    let body = json!({"id": "evt_forged", "type": "payment.paid", "created": unix_now(),
                      "data": {}})
    .to_string();
    let post = |signature: Option<String>, body: String| {
        let mut request = http.post(format!("{}/webhooks", running.url)).body(body);
        if let Some(signature) = signature {
            request = request.header("Payrail-Signature", signature);
        }
        let reply = request.send().unwrap();
        let status = reply.status().as_u16();
        (status, reply.json::<Value>().unwrap_or(Value::Null))
    };
    let forged = signature_header(&["whsec_guess"], unix_now(), body.as_bytes());
    let (status, answer) = post(Some(forged), body.clone());
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("invalid_signature"))
    );
    assert_eq!(answer["error_description"], "no signature matches");
    let (status, answer) = post(None, body.clone());
    assert_eq!(
        (status, answer["error_description"].as_str()),
        (400, Some("no Payrail-Signature header"))
    );
    let stale = signature_header(&["whsec_real"], unix_now() - 3600, body.as_bytes());
    assert_eq!(post(Some(stale), body.clone()).0, 400);
    let huge = "x".repeat(payrail_receiver::MAX_BODY_BYTES + 1);
    let signed = signature_header(&["whsec_real"], unix_now(), huge.as_bytes());
    assert_eq!(post(Some(signed), huge).0, 413);
    assert_eq!(
        running.receiver.store().event_status("evt_forged").unwrap(),
        None
    );
}
