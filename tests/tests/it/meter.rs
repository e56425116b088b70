//! The D1 meter (`PAYRAIL_METER=1`, used by `scripts/bench`): off, answers carry no
//! `Payrail-D1`; on, it counts a known request's D1 work from D1's own meta. It also holds the
//! checkout hot paths to their round trips.

use std::sync::{Mutex, MutexGuard, OnceLock};

use payrail_tests::Worker;
use serde_json::json;

/// The metered worker both tests use, one test at a time: the meter counts in the isolate, so
/// requests made side by side would share their counts.
fn metered() -> (MutexGuard<'static, ()>, &'static Worker) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    static WORKER: OnceLock<Worker> = OnceLock::new();
    let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let worker =
        WORKER.get_or_init(|| Worker::start_with_vars("sandbox", 3600, &[("PAYRAIL_METER", "1")]));
    (turn, worker)
}

/// The `Payrail-D1` counts of a reply, by name.
fn counts(header: &str) -> std::collections::BTreeMap<String, f64> {
    header
        .split(';')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.parse().expect("a number")))
        .collect()
}

#[test]
fn the_meter_reports_only_when_switched_on_and_counts_a_token_as_one_batch() {
    let off = Worker::shared();
    let reply = off.token_form(&[
        ("grant_type", "client_credentials"),
        ("client_id", &off.credentials.institutions[0].client_id),
        (
            "client_secret",
            &off.credentials.institutions[0].client_secret,
        ),
    ]);
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.header("payrail-d1"),
        None,
        "the meter is off by default"
    );

    let (_turn, on) = metered();
    let i = &on.credentials.institutions[0];
    let reply = on.token_form(&[
        ("grant_type", "client_credentials"),
        ("client_id", &i.client_id),
        ("client_secret", &i.client_secret),
    ]);
    assert_eq!(reply.status, 200, "{}", reply.text);
    let token = counts(
        reply
            .header("payrail-d1")
            .expect("metered answers carry Payrail-D1"),
    );
    // Issuing a token is one batch (client check, throttle, token insert together).
    assert_eq!(token["trips"], 1.0, "{token:?}");
    assert!(token["statements"] >= 2.0, "{token:?}");
    assert!(token["rows_written"] >= 1.0, "{token:?}");
    assert!(token["size_after"] > 0.0, "{token:?}");
    // A request that touches no D1 counts nothing.
    let floor = on.send(on.request(reqwest::Method::GET, "/v1/no-such-route"), None);
    assert_eq!(floor.status, 404);
    let none = counts(floor.header("payrail-d1").expect("Payrail-D1 on a 404"));
    assert_eq!(none["trips"], 0.0, "{none:?}");
    assert_eq!(none["statements"], 0.0, "{none:?}");
}

#[test]
fn a_checkout_session_takes_one_round_trip_once_its_key_is_known_its_page_and_status_poll_one() {
    let (_turn, on) = metered();
    let key = on
        .credentials
        .institutions
        .iter()
        .flat_map(|i| &i.merchants)
        .find(|m| m.name == "Alpine Outfitters")
        .expect("demo merchant")
        .public_key
        .clone();
    let options = |idempotency_key: Option<&str>| {
        let mut body = json!({
            "publicKey": key, "amount": "12.00", "currency": "EUR", "title": "Meter",
            "externalReference": "meter", "redirectUrl": "https://shop.example/thanks",
            "allowCrypto": true
        });
        if let Some(k) = idempotency_key {
            body["idempotencyKey"] = json!(k);
        }
        body
    };
    let create = |body: &serde_json::Value, status: u16| {
        let reply = on.post_json("/checkout/sessions", body, None, "/checkout/sessions");
        assert_eq!(reply.status, status, "{}", reply.text);
        let cost = counts(reply.header("payrail-d1").expect("metered"));
        (reply.json(), cost)
    };
    // A key the worker has not read yet: one batch that only reads (the limits' windows,
    // merchant, wallets, origin, key) and one write batch (the attempt's counts and the inserts
    // conditioned on them).
    let (plain, cost) = create(&options(None), 201);
    assert_eq!(cost["trips"], 2.0, "{cost:?}");
    // Once read, the key is remembered: the next session is one write batch, its inserts
    // conditioned on the counts and on every fact remembered still holding.
    let (keyed, cost) = create(&options(Some("meter-1")), 201);
    assert_eq!(cost["trips"], 1.0, "{cost:?}");
    // The same idempotency key again stores nothing; the same batch counted it and found the
    // session to answer.
    let (replayed, cost) = create(&options(Some("meter-1")), 200);
    assert_eq!(cost["trips"], 1.0, "{cost:?}");
    assert_eq!(replayed["id"], keyed["id"]);
    assert_eq!(replayed["transaction_id"], keyed["transaction_id"]);
    // A refused attempt for a key no merchant has: its read, then its count.
    let mut unknown = options(None);
    unknown["publicKey"] = json!("pk_test_nobodyhasthiskey0000");
    let (_, cost) = create(&unknown, 404);
    assert_eq!(cost["trips"], 2.0, "{cost:?}");
    // Its transaction id comes back from the write batch: the one the session was stored with.
    let session = plain["id"].as_str().expect("session id");
    let stored: i64 = on
        .database()
        .query_row(
            "SELECT transaction_id FROM checkout_sessions WHERE id = ?1",
            [session],
            |r| r.get(0),
        )
        .expect("the session is stored");
    assert_eq!(plain["transaction_id"], json!(stored));
    // A status poll is one read batch.
    let poll = on.send(
        on.request(reqwest::Method::GET, &format!("/checkout/{session}/status")),
        Some("/checkout/{id}/status"),
    );
    assert_eq!(poll.status, 200, "{}", poll.text);
    let cost = counts(poll.header("payrail-d1").expect("metered"));
    assert_eq!(cost["trips"], 1.0, "{cost:?}");
    // So is the hosted page (the session, its merchant's wallets, its watches).
    let page = on.send(
        on.request(reqwest::Method::GET, &format!("/checkout/{session}")),
        None,
    );
    assert_eq!(page.status, 200, "{}", page.text);
    let cost = counts(page.header("payrail-d1").expect("metered"));
    assert_eq!(cost["trips"], 1.0, "{cost:?}");
}
