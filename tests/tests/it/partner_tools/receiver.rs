//! The reference webhook receiver against the running worker: it stores before acknowledging,
//! dedupes (a resend, and eight deliveries fired in parallel, fulfil once), fulfils only what
//! was paid in full and sends the rest to review, matches orders by merchant and reference
//! (another merchant's payment with the same reference fulfils nothing), repairs a lost webhook
//! by reconciliation, and refuses forgeries.

use std::sync::Arc;
use std::time::Duration;

use futures_util::TryStreamExt;
use payrail::webhooks::{signature_header, Webhooks};
use payrail::{Client, EventQuery};
use payrail_receiver::{Receiver, Store};
use payrail_tests::hooks::{act, endpoint, log, payment, unix_now};
use payrail_tests::{eventually, PortalSession, Worker};
use reqwest::Method;
use serde_json::{json, Value};
use xtask::demo::MerchantKey;

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

/// A receiver behind a new webhook endpoint of institution 0; answers it and the endpoint's id.
fn start_receiver_at_endpoint(
    worker: &Worker,
    session: &PortalSession,
) -> (RunningReceiver, String) {
    // A receiver with a placeholder secret cannot exist before the endpoint does: register the
    // endpoint at a reserved port first, then start the receiver there with its secret.
    let port = payrail_tests::worker::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let (endpoint_id, secret) = endpoint(worker, session, &format!("{url}/webhooks"), None);
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
    (running, endpoint_id)
}

/// Demo merchant `index` of institution 0, as the worker's credentials file has it (its id is
/// the `merchant_id` of its transactions).
fn merchant(worker: &Worker, index: usize) -> &MerchantKey {
    let merchant = &worker.credentials.institutions[0].merchants[index];
    assert!(merchant.can_take_payments, "{merchant:?}");
    merchant
}

/// Pays and settles transaction `id` of institution 0 with `amount`; asserts it is merchant
/// `merchant_id`'s, the merchant the shop's order names.
fn pay_and_settle(worker: &Worker, id: i64, amount: &str, merchant_id: i64) {
    act(worker, 0, id, "pay", json!({ "amount": amount }));
    let settled = act(worker, 0, id, "settle", json!({}));
    assert_eq!(settled["merchant_id"], merchant_id, "{settled}");
}

/// The shop's order `reference` of `merchant_id`, added through `POST /orders`.
fn order(receiver: &RunningReceiver, merchant_id: i64, reference: &str, amount: &str) {
    let reply = reqwest::blocking::Client::new()
        .post(format!("{}/orders", receiver.url))
        .json(
            &json!({"merchant_id": merchant_id, "reference": reference, "amount": amount,
                      "currency": "EUR"}),
        )
        .send()
        .unwrap();
    assert_eq!(reply.status(), 201);
}

/// The shop's order as `GET /orders/{merchant_id}/{reference}` answers it.
fn order_state(receiver: &RunningReceiver, merchant_id: i64, reference: &str) -> String {
    let reply = reqwest::blocking::Client::new()
        .get(format!("{}/orders/{merchant_id}/{reference}", receiver.url))
        .send()
        .unwrap();
    assert_eq!(reply.status(), 200);
    let order: Value = reply.json().unwrap();
    assert_eq!(
        (&order["merchant_id"], &order["reference"]),
        (&json!(merchant_id), &json!(reference))
    );
    order["state"].as_str().unwrap().to_owned()
}

fn reviews_of(
    receiver: &RunningReceiver,
    reason: &str,
    merchant_id: i64,
    reference: &str,
) -> usize {
    receiver
        .receiver
        .store()
        .reviews()
        .unwrap()
        .iter()
        .filter(|r| {
            r.reason == reason
                && r.merchant_id == merchant_id
                && r.reference.as_deref() == Some(reference)
        })
        .count()
}

#[test]
fn the_receiver_fulfils_once_and_sends_the_rest_to_review() {
    let worker = Worker::shared();
    let session = worker.portal_login(0);
    let (running, endpoint_id) = start_receiver_at_endpoint(worker, &session);
    // `payment` pays merchant 0: the shop's orders are that merchant's.
    let shop = merchant(worker, 0).id;

    order(&running, shop, "RCV-PAID", "40.00");
    order(&running, shop, "RCV-UNDER", "40.00");
    let paid = payment(worker, 0, "RCV-PAID");
    let under = payment(worker, 0, "RCV-UNDER");
    let unknown = payment(worker, 0, "RCV-UNKNOWN");
    for (id, amount) in [(paid, "40.00"), (under, "30.00"), (unknown, "40.00")] {
        pay_and_settle(worker, id, amount, shop);
    }
    let store = running.receiver.store();
    eventually("the paid order fulfilled", Duration::from_secs(40), || {
        store.fulfilment(shop, "RCV-PAID").unwrap()
    });
    eventually(
        "the underpaid order in review",
        Duration::from_secs(40),
        || (reviews_of(&running, "underpaid", shop, "RCV-UNDER") == 1).then_some(()),
    );
    eventually(
        "the unknown order in review",
        Duration::from_secs(40),
        || (reviews_of(&running, "unknown_order", shop, "RCV-UNKNOWN") == 1).then_some(()),
    );
    assert_eq!(order_state(&running, shop, "RCV-UNDER"), "review");
    assert_eq!(store.fulfilment(shop, "RCV-UNDER").unwrap(), None);

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
        store.fulfilment(shop, "RCV-PAID").unwrap(),
        Some((paid, "webhook".to_owned()))
    );
    assert_eq!(order_state(&running, shop, "RCV-PAID"), "fulfilled");
    assert_eq!(reviews_of(&running, "unknown_order", shop, "RCV-PAID"), 0);
}

#[test]
fn another_merchants_payment_with_the_same_reference_fulfils_nothing() {
    let worker = Worker::shared();
    let session = worker.portal_login(0);
    let (running, _) = start_receiver_at_endpoint(worker, &session);
    // One institution, two merchants: the endpoint gets both merchants' events, and each may
    // use the reference "RCV-SHARED" for an order of its own.
    let (ours, theirs) = (merchant(worker, 0), merchant(worker, 1));
    order(&running, ours.id, "RCV-SHARED", "40.00");

    let checkout = worker.checkout_session(&json!({
        "publicKey": theirs.public_key, "amount": "40.00", "currency": "EUR",
        "title": "Receiver test", "externalReference": "RCV-SHARED",
        "redirectUrl": "https://shop.example/done", "allowCrypto": true
    }));
    let their_payment = checkout["transaction_id"].as_i64().unwrap();
    pay_and_settle(worker, their_payment, "40.00", theirs.id);
    let store = running.receiver.store();
    let review = eventually(
        "the other merchant's payment in review",
        Duration::from_secs(40),
        || {
            store
                .reviews()
                .unwrap()
                .into_iter()
                .find(|r| r.transaction_id == their_payment)
        },
    );
    assert_eq!(
        (
            review.merchant_id,
            review.reference.as_deref(),
            review.reason.as_str()
        ),
        (theirs.id, Some("RCV-SHARED"), "unknown_order")
    );
    assert!(
        review.detail.contains(&format!("merchant {}", theirs.id)),
        "{review:?}"
    );
    assert_eq!(store.fulfilment(ours.id, "RCV-SHARED").unwrap(), None);
    assert_eq!(order_state(&running, ours.id, "RCV-SHARED"), "open");

    // Our merchant's own payment for the order fulfils it.
    let our_payment = payment(worker, 0, "RCV-SHARED");
    pay_and_settle(worker, our_payment, "40.00", ours.id);
    eventually("our order fulfilled", Duration::from_secs(40), || {
        store.fulfilment(ours.id, "RCV-SHARED").unwrap()
    });
    assert_eq!(
        store.fulfilment(ours.id, "RCV-SHARED").unwrap(),
        Some((our_payment, "webhook".to_owned()))
    );
    assert_eq!(order_state(&running, ours.id, "RCV-SHARED"), "fulfilled");
    // The other merchant's order of the same reference is another order.
    order(&running, theirs.id, "RCV-SHARED", "40.00");
    assert_eq!(order_state(&running, theirs.id, "RCV-SHARED"), "open");
}

#[test]
fn a_lost_webhook_is_repaired_by_reconciliation() {
    let worker = Worker::shared();
    // This receiver has no endpoint: every webhook for its order is lost.
    let running = start_receiver("whsec_never_used", Some(sdk_client(worker, 0)));
    let shop = merchant(worker, 0).id;
    order(&running, shop, "RCV-LOST", "25.00");
    let id = payment(worker, 0, "RCV-LOST");
    pay_and_settle(worker, id, "25.00", shop);
    let store = running.receiver.store();
    assert_eq!(store.fulfilment(shop, "RCV-LOST").unwrap(), None);

    let report = runtime().block_on(running.receiver.reconcile()).unwrap();
    assert!(report.seen >= 1 && report.fulfilled == 1, "{report:?}");
    assert_eq!(
        store.fulfilment(shop, "RCV-LOST").unwrap(),
        Some((id, "reconcile".to_owned()))
    );
    assert_eq!(order_state(&running, shop, "RCV-LOST"), "fulfilled");
    // Again: nothing new to repair, and nothing fulfilled twice.
    let again = runtime().block_on(running.receiver.reconcile()).unwrap();
    assert_eq!(again.fulfilled, 0, "{again:?}");
}

#[test]
fn racing_deliveries_of_one_event_are_stored_once_and_fulfil_once() {
    let running = start_receiver("whsec_race", None);
    // No worker here: the event is made up, for a merchant id of our choosing.
    let shop = 1;
    order(&running, shop, "RCV-RACE", "12.00");
    let body = json!({"id": "evt_race", "type": "payment.paid", "created": unix_now(),
        "data": {"object": "transaction", "id": 91, "merchant_id": shop, "status": "paid",
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
        store.fulfilment(shop, "RCV-RACE").unwrap(),
        Some((91, "webhook".to_owned()))
    );
    assert_eq!(order_state(&running, shop, "RCV-RACE"), "fulfilled");
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
