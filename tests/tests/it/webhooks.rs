//! Signed webhooks end to end: payments driven through the sandbox API, events delivered by the
//! queue consumer to real HTTP receivers on loopback, retries on the compressed schedule (3600
//! times faster: 1 s, 1 s, 1 s, 1 s, 3 s, 6 s, 12 s…), the delivery log, resend, test events.

use std::time::Duration;

use payrail_tests::hooks::{
    act, assert_signed, detail, endpoint, log, of_event, of_transaction, payment, settled,
    unix_now, wait_for,
};
use payrail_tests::receiver::{Mode, Received, Receiver};
use payrail_tests::{eventually, Worker};
use reqwest::Method;
use serde_json::{json, Value};
use shared_types::webhook::Verifier;

/// This module's own worker: an endpoint hears every event of its institution, so payments made
/// by other tests would reach its receivers and its delivery log, and their deliveries would
/// share the queue whose retry schedule these tests time.
fn worker() -> &'static Worker {
    Worker::own("webhooks")
}

/// One test at a time: an endpoint hears every event of its institution, so tests running
/// side by side would see each other's deliveries.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn every_event_arrives_once_per_subscribed_endpoint_signed_and_complete() {
    let _one = one_at_a_time();
    let worker = worker();
    let northwind = worker.portal_login(0);
    let globex = worker.portal_login(1);
    let all = Receiver::start();
    let paid_only = Receiver::start();
    let other = Receiver::start();
    let (all_id, all_secret) = endpoint(worker, &northwind, &all.url("/all"), None);
    let (paid_id, paid_secret) = endpoint(
        worker,
        &northwind,
        &paid_only.url("/paid"),
        Some(&["payment.paid"]),
    );
    let (other_id, _) = endpoint(worker, &globex, &other.url("/globex"), None);

    let id = payment(worker, 0, "WH-ALL-1");
    act(worker, 0, id, "pay", json!({"amount": "40.00"}));
    act(worker, 0, id, "settle", json!({}));
    let final_state = act(worker, 0, id, "refund", json!({"amount": "10"}));

    let mut got = of_transaction(&wait_for(&all, "three events", 3), id);
    assert_eq!(got.len(), 3, "one delivery per event");
    // Deliveries may arrive in any order (as with every webhook service); receivers use the
    // transaction state in `data`. Put them in lifecycle order to check each.
    let rank = |r: &Received| match r.json()["type"].as_str().unwrap() {
        "payment.succeeded" => 0,
        "payment.paid" => 1,
        _ => 2,
    };
    got.sort_by_key(rank);
    let types: Vec<String> = got
        .iter()
        .map(|r| r.json()["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        types,
        ["payment.succeeded", "payment.paid", "payment.refunded"]
    );
    let statuses: Vec<Value> = got
        .iter()
        .map(|r| r.json()["data"]["status"].clone())
        .collect();
    assert_eq!(
        statuses,
        [json!("paid"), json!("paid"), json!("partially_refunded")]
    );
    let mut ids: Vec<String> = Vec::new();
    for r in &got {
        assert_signed(r, &all_secret);
        payrail_tests::openapi::assert_matches_component("Event", &r.json());
        let event = Verifier::new(&all_secret)
            .verify_event(r.header("payrail-signature").unwrap(), &r.body, unix_now())
            .unwrap();
        assert!(event.id.starts_with("evt_"));
        assert_eq!(r.header("payrail-event-id"), Some(event.id.as_str()));
        assert_eq!(r.header("payrail-event-type"), Some(event.kind.as_str()));
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert!(r
            .header("user-agent")
            .unwrap_or_default()
            .starts_with("Payrail-Webhooks/"));
        assert!((event.created - unix_now()).abs() < 120);
        ids.push(event.id);
    }
    ids.sort();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique.len(), 3, "unique event ids");
    // The refund event carries the transaction exactly as the REST API shows it now.
    assert_eq!(got[2].json()["data"], final_state);
    assert_eq!(got[2].json()["data"], worker.transaction(0, id));
    assert_eq!(got[0].json()["data"]["raw_status"], "succeeded");
    assert_eq!(got[1].json()["data"]["raw_status"], "paid");

    let paid = of_transaction(&wait_for(&paid_only, "the paid event", 1), id);
    assert_eq!(paid.len(), 1);
    assert_eq!(paid[0].json()["type"], "payment.paid");
    assert_signed(&paid[0], &paid_secret);

    // Nothing else arrives later: once each endpoint has taken a marker sent after the events
    // and has nothing pending, each receiver has had exactly its share, once.
    let mut all_ids: Vec<String> = of_transaction(&settled(worker, &northwind, &all_id, &all), id)
        .iter()
        .map(|r| r.header("payrail-event-id").unwrap().to_owned())
        .collect();
    all_ids.sort();
    assert_eq!(all_ids, ids, "each event once");
    let paid = of_transaction(&settled(worker, &northwind, &paid_id, &paid_only), id);
    assert_eq!(paid.len(), 1, "only the paid event, once");
    assert_eq!(paid[0].json()["type"], "payment.paid");
    // Another institution's endpoint never hears of it.
    assert!(of_transaction(&settled(worker, &globex, &other_id, &other), id).is_empty());
}

#[test]
fn a_failing_receiver_gets_retries_in_schedule_order_and_everything_once_it_recovers() {
    let _one = one_at_a_time();
    let worker = worker();
    let session = worker.portal_login(1);
    let receiver = Receiver::start();
    receiver.set_mode(Mode::Status(500));
    let (endpoint_id, secret) = endpoint(worker, &session, &receiver.url("/flaky"), None);
    let id = payment(worker, 1, "WH-RETRY-1");
    act(worker, 1, id, "pay", json!({"amount": "40.00"}));
    // Other tests' events may reach this endpoint too: look only at this transaction's.
    let failures = eventually("five failed attempts", Duration::from_secs(90), || {
        let mine = of_transaction(&receiver.received(), id);
        (mine.len() >= 5).then_some(mine)
    });
    receiver.set_mode(Mode::Ok);
    let event_id = failures[0].header("payrail-event-id").unwrap().to_owned();
    let delivery = eventually("the delivery to succeed", Duration::from_secs(40), || {
        let page = log(worker, &session, &endpoint_id, "limit=100");
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["event_id"] == event_id.as_str() && d["status"] == "succeeded")
            .cloned()
    });
    let all = of_transaction(&receiver.received(), id);
    // Every attempt carried the same event, signed.
    assert!(all
        .iter()
        .all(|r| r.header("payrail-event-id") == Some(event_id.as_str())));
    for r in &all {
        assert_signed(r, &secret);
    }
    // Gaps between attempts follow 1 m, 5 m, 15 m, 1 h, 3 h (compressed: 1, 1, 1, 1, 3 s).
    let gaps: Vec<f64> = failures
        .windows(2)
        .map(|w| (w[1].at - w[0].at).as_secs_f64())
        .collect();
    // Seconds apart, not minutes (the queue adds up to a second of batching; CI adds load).
    assert!(gaps[..3].iter().all(|g| *g < 8.0), "{gaps:?}");
    let d = detail(worker, &session, delivery["id"].as_str().unwrap());
    let attempts = d["attempts"].as_array().unwrap();
    assert!(attempts.len() >= 6, "{d}");
    for (i, a) in attempts.iter().enumerate() {
        assert_eq!(a["attempt"], i as i64 + 1);
    }
    let last = attempts.last().unwrap();
    assert_eq!(last["outcome"], "ok");
    assert_eq!(last["status_code"], 200);
    assert_eq!(last["next_attempt_at"], Value::Null);
    let failed = &attempts[0];
    assert_eq!(failed["outcome"], "http_status");
    assert_eq!(failed["status_code"], 500);
    assert_eq!(failed["response_body"], "received.");
    assert!(failed["next_attempt_at"].is_string());
    // The recorded schedule: attempt 5 waited longer than attempts 1 to 4.
    let due = |a: &Value| {
        shared_types::time::parse_unix(a["next_attempt_at"].as_str().unwrap()).unwrap()
            - shared_types::time::parse_unix(a["started_at"].as_str().unwrap()).unwrap()
    };
    let delays: Vec<i64> = attempts[..5].iter().map(due).collect();
    assert!(
        delays[..4].iter().all(|d| (1..=2).contains(d)),
        "{delays:?}"
    );
    assert!((2..=4).contains(&delays[4]), "3 h compressed: {delays:?}");
    assert_eq!(
        d["payload"].as_str().unwrap().as_bytes(),
        all[0].body.as_slice()
    );
}

#[test]
fn a_receiver_that_is_down_gets_the_event_once_it_is_up() {
    let _one = one_at_a_time();
    let worker = worker();
    let session = worker.portal_login(0);
    let port = payrail_tests::free_port();
    let (endpoint_id, _) = endpoint(
        worker,
        &session,
        &format!("http://127.0.0.1:{port}/down"),
        Some(&["payment.paid"]),
    );
    let id = payment(worker, 0, "WH-DOWN-1");
    act(worker, 0, id, "pay", json!({"amount": "40.00"}));
    act(worker, 0, id, "settle", json!({}));
    eventually("two failed attempts", Duration::from_secs(30), || {
        let d = log(worker, &session, &endpoint_id, "")["data"][0].clone();
        (d["attempts"].as_i64().unwrap_or(0) >= 2).then_some(())
    });
    let d = log(worker, &session, &endpoint_id, "")["data"][0].clone();
    assert_eq!(
        detail(worker, &session, d["id"].as_str().unwrap())["attempts"][0]["outcome"],
        "connection"
    );
    let receiver = Receiver::start_on(port);
    let got = wait_for(&receiver, "the event after recovery", 1);
    assert_eq!(got[0].json()["type"], "payment.paid");
    assert_eq!(got[0].json()["data"]["id"], id);
}

#[test]
fn during_a_secret_rotation_deliveries_carry_both_signatures() {
    let _one = one_at_a_time();
    let worker = worker();
    let session = worker.portal_login(0);
    let receiver = Receiver::start();
    let (endpoint_id, old) = endpoint(
        worker,
        &session,
        &receiver.url("/rotating"),
        Some(&["payment.succeeded"]),
    );
    let rotated = worker.portal(
        Method::POST,
        &format!("/portal/api/webhook-endpoints/{endpoint_id}/rotate-secret"),
        Some(&session),
        Some(&json!({"grace_period_seconds": 3600})),
    );
    let new = rotated.json()["signing_secret"]
        .as_str()
        .unwrap()
        .to_owned();
    act(
        worker,
        0,
        payment(worker, 0, "WH-ROTATE-1"),
        "pay",
        json!({"amount": "40.00"}),
    );
    let got = wait_for(&receiver, "the event", 1);
    let header = got[0].header("payrail-signature").unwrap();
    assert_eq!(header.matches("v1=").count(), 2, "{header}");
    assert_signed(&got[0], &old);
    assert_signed(&got[0], &new);
    // With no grace, only the new secret signs.
    worker.portal(
        Method::POST,
        &format!("/portal/api/webhook-endpoints/{endpoint_id}/rotate-secret"),
        Some(&session),
        Some(&json!({"grace_period_seconds": 0})),
    );
    let newest = worker
        .portal(
            Method::GET,
            &format!("/portal/api/webhook-endpoints/{endpoint_id}/secret"),
            Some(&session),
            None,
        )
        .json()["signing_secret"]
        .as_str()
        .unwrap()
        .to_owned();
    act(
        worker,
        0,
        payment(worker, 0, "WH-ROTATE-2"),
        "pay",
        json!({"amount": "40.00"}),
    );
    let got = wait_for(&receiver, "the second event", 2);
    let header = got[1].header("payrail-signature").unwrap();
    assert_eq!(header.matches("v1=").count(), 1, "{header}");
    assert_signed(&got[1], &newest);
    assert!(Verifier::new(&new)
        .verify(header, &got[1].body, unix_now())
        .is_err());
}

#[test]
fn resend_test_events_and_the_log_filters() {
    let _one = one_at_a_time();
    let worker = worker();
    let session = worker.portal_login(1);
    let receiver = Receiver::start();
    let (endpoint_id, secret) = endpoint(worker, &session, &receiver.url("/log"), None);
    let id = payment(worker, 1, "WH-LOG-1");
    act(worker, 1, id, "pay", json!({"amount": "40.00"}));
    act(worker, 1, id, "settle", json!({}));
    wait_for(&receiver, "two events", 2);
    let page = eventually("both delivered", Duration::from_secs(20), || {
        let page = log(worker, &session, &endpoint_id, "status=succeeded");
        (page["data"].as_array().unwrap().len() == 2).then_some(page)
    });
    // Pagination and filters.
    let first = log(worker, &session, &endpoint_id, "limit=1");
    assert_eq!(first["has_more"], true);
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = log(
        worker,
        &session,
        &endpoint_id,
        &format!("limit=1&starting_after={cursor}"),
    );
    assert_ne!(second["data"][0]["id"], first["data"][0]["id"]);
    let paid = log(worker, &session, &endpoint_id, "event_type=payment.paid");
    assert_eq!(paid["data"].as_array().unwrap().len(), 1);
    assert_eq!(
        log(worker, &session, &endpoint_id, "status=failed")["data"],
        json!([])
    );
    assert_eq!(
        log(worker, &session, &endpoint_id, "created_before=2020-01-01")["data"],
        json!([])
    );
    for bad in [
        "status=lost",
        "limit=0",
        "colour=red",
        "created_after=soon",
        "starting_after=dlv_nope",
    ] {
        worker
            .portal(
                Method::GET,
                &format!("/portal/api/webhook-endpoints/{endpoint_id}/deliveries?{bad}"),
                Some(&session),
                None,
            )
            .assert_error(400, "invalid_request");
    }

    // Resend: the same event again, as a new delivery marked as a redelivery.
    let original = page["data"][0]["id"].as_str().unwrap().to_owned();
    let event_id = page["data"][0]["event_id"].as_str().unwrap().to_owned();
    let before = of_event(&receiver.received(), &event_id);
    assert_eq!(before.len(), 1, "delivered once so far");
    let resent = worker.portal(
        Method::POST,
        &format!("/portal/api/deliveries/{original}/resend"),
        Some(&session),
        None,
    );
    assert_eq!(resent.status, 201, "{}", resent.text);
    let resent = resent.json();
    let resent_id = resent["id"].as_str().unwrap().to_owned();
    assert_ne!(resent_id, original, "a new delivery");
    assert_eq!(resent["redelivery_of"], original.as_str());
    assert_eq!(resent["event_id"], event_id.as_str());
    assert_eq!(resent["endpoint_id"], endpoint_id.as_str());
    // What the receiver sees is the same event again: the same Payrail-Event-Id (receivers
    // deduplicate on it) and byte for byte the same body, signed with the endpoint's secret.
    let copies = eventually("the resent event", Duration::from_secs(40), || {
        let copies = of_event(&receiver.received(), &event_id);
        (copies.len() >= 2).then_some(copies)
    });
    assert_eq!(copies.len(), 2, "one more copy");
    assert_eq!(copies[1].body, before[0].body);
    assert_eq!(
        copies[1].header("payrail-event-type"),
        before[0].header("payrail-event-type")
    );
    assert_signed(&copies[1], &secret);
    // Only the log tells the two deliveries of the event apart.
    let deliveries = eventually("the resend to succeed", Duration::from_secs(20), || {
        let page = log(worker, &session, &endpoint_id, "limit=100");
        let of_event: Vec<Value> = page["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["event_id"] == event_id.as_str())
            .cloned()
            .collect();
        of_event
            .iter()
            .any(|d| d["id"] == resent_id.as_str() && d["status"] == "succeeded")
            .then_some(of_event)
    });
    assert_eq!(deliveries.len(), 2, "{deliveries:?}");
    let first = deliveries
        .iter()
        .find(|d| d["id"] == original.as_str())
        .unwrap();
    let again = deliveries
        .iter()
        .find(|d| d["id"] == resent_id.as_str())
        .unwrap();
    assert_eq!(first["redelivery_of"], Value::Null);
    assert_eq!(first["status"], "succeeded");
    assert_eq!(first["attempts"], 1, "the original is left as it was");
    assert_eq!(again["redelivery_of"], original.as_str());
    assert_eq!(again["attempts"], 1);

    // A test event to this endpoint.
    let test = worker.portal(
        Method::POST,
        &format!("/portal/api/webhook-endpoints/{endpoint_id}/test"),
        Some(&session),
        None,
    );
    assert_eq!(test.status, 201, "{}", test.text);
    let test_event = test.json()["event_id"].as_str().unwrap().to_owned();
    let got = eventually("the test event", Duration::from_secs(40), || {
        let got = of_event(&receiver.received(), &test_event);
        (!got.is_empty()).then_some(got)
    });
    assert_eq!(got[0].json()["type"], "webhook.test");
    assert_eq!(got[0].header("payrail-event-type"), Some("webhook.test"));
    assert_signed(&got[0], &secret);

    // Another institution cannot read, resend or delete any of it, nor fail what is pending.
    let northwind = worker.portal_login(0);
    let db = worker.database();
    let status = || -> String {
        db.query_row(
            "SELECT status FROM deliveries WHERE id = ?1",
            [&original],
            |r| r.get(0),
        )
        .unwrap()
    };
    // Pending, due far in the future (the delivery sweep leaves it alone meanwhile).
    db.execute(
        "UPDATE deliveries SET status = 'pending', next_attempt_at = unixepoch() + 86400 \
         WHERE id = ?1",
        [&original],
    )
    .unwrap();
    worker
        .portal(
            Method::DELETE,
            &format!("/portal/api/webhook-endpoints/{endpoint_id}"),
            Some(&northwind),
            None,
        )
        .assert_error(404, "not_found");
    assert_eq!(
        status(),
        "pending",
        "another institution failed its delivery"
    );
    db.execute(
        "UPDATE deliveries SET status = 'succeeded', next_attempt_at = NULL WHERE id = ?1",
        [&original],
    )
    .unwrap();
    worker
        .portal(
            Method::GET,
            &format!("/portal/api/deliveries/{original}"),
            Some(&northwind),
            None,
        )
        .assert_error(404, "not_found");
    worker
        .portal(
            Method::POST,
            &format!("/portal/api/deliveries/{original}/resend"),
            Some(&northwind),
            None,
        )
        .assert_error(404, "not_found");
    worker
        .portal(
            Method::GET,
            &format!("/portal/api/webhook-endpoints/{endpoint_id}/deliveries"),
            Some(&northwind),
            None,
        )
        .assert_error(404, "not_found");
}

/// An outside probe's finding: re-enabling an endpoint and resending what failed since a moment
/// after which nothing failed answered 500 (an empty batch was committed), though the endpoint
/// was enabled. It answers as with a failure to resend: the endpoint, and nothing resent; the
/// portal's form goes back to the endpoint's page.
#[test]
fn re_enabling_with_nothing_failed_since_resends_nothing() {
    let _one = one_at_a_time();
    let worker = worker();
    let session = worker.portal_login(1);
    let receiver = Receiver::start();
    let (endpoint_id, _) = endpoint(worker, &session, &receiver.url("/quiet"), None);
    let enabled = worker.portal(
        Method::POST,
        &format!("/portal/api/webhook-endpoints/{endpoint_id}/enable"),
        Some(&session),
        Some(&json!({"resend_failed_since": "2030-01-01T00:00:00Z"})),
    );
    assert_eq!(enabled.status, 200, "{}", enabled.text);
    assert_eq!(enabled.json()["status"], "enabled");
    assert_eq!(enabled.json()["resent"], json!([]));
    let page = worker.portal_form(
        &session,
        &format!("/portal/webhooks/{endpoint_id}/enable"),
        &[
            ("csrf_token", &session.csrf),
            ("resend_failed_since", "2030-01-01"),
        ],
    );
    assert_eq!(page.status, 303, "{}", page.text);
    assert!(receiver.received().is_empty(), "nothing was sent");
}

/// An outside probe's finding: resends and test events had no limit, so an admin could make
/// Payrail send requests to any URL as fast as it could ask. Each endpoint takes 10 a minute and
/// an institution 30 over all its endpoints; past either the answer is 429 with `Retry-After`
/// and nothing is sent. Another institution's are its own. On a worker of its own: it fills an
/// institution's minute.
#[test]
fn resends_and_test_events_are_limited_per_endpoint_and_per_institution() {
    let worker = Worker::own("webhook_sends");
    let session = worker.portal_login(0);
    let receiver = Receiver::start();
    let endpoints: Vec<String> = (0..4)
        .map(|n| endpoint(worker, &session, &receiver.url(&format!("/e{n}")), None).0)
        .collect();
    let test = |session, id: &str| {
        worker.portal(
            Method::POST,
            &format!("/portal/api/webhook-endpoints/{id}/test"),
            Some(session),
            None,
        )
    };
    let refused = |reply: payrail_tests::Reply, says: &str| {
        reply.assert_error(429, "rate_limited");
        assert!(reply.text.contains(says), "{}", reply.text);
        assert!((1..=60).contains(&reply.retry_after()), "{}", reply.text);
    };
    // Ten test events to the first endpoint at once: all sent; the eleventh is refused.
    let sent: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..10)
            .map(|_| scope.spawn(|| test(&session, &endpoints[0]).status))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(sent, [201; 10]);
    refused(test(&session, &endpoints[0]), "to this endpoint");
    // A resend to the same endpoint counts the same.
    let delivery = log(worker, &session, &endpoints[0], "")["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    refused(
        worker.portal(
            Method::POST,
            &format!("/portal/api/deliveries/{delivery}/resend"),
            Some(&session),
            None,
        ),
        "to this endpoint",
    );
    // Other endpoints of the institution, until the institution's thirty.
    for id in &endpoints[1..3] {
        for _ in 0..10 {
            assert_eq!(test(&session, id).status, 201);
        }
    }
    refused(test(&session, &endpoints[3]), "in the last minute");
    // The portal's buttons meet the same limit, as a page.
    let page = worker.portal_form(
        &session,
        &format!("/portal/webhooks/{}/test", endpoints[3]),
        &[("csrf_token", &session.csrf)],
    );
    assert_eq!(page.status, 429, "{}", page.text);
    assert!(page.text.contains("in the last minute"), "{}", page.text);
    // Another institution is not held back.
    let globex = worker.portal_login(1);
    let (theirs, _) = endpoint(worker, &globex, &receiver.url("/globex"), None);
    assert_eq!(test(&globex, &theirs).status, 201);
    // Exactly what was accepted was sent: 30 test events and Globex's one.
    let received = eventually("the accepted sends", Duration::from_secs(60), || {
        let received = receiver.received();
        (received.len() >= 31).then_some(received)
    });
    assert_eq!(received.len(), 31);
    let stored: i64 = worker
        .database()
        .query_row(
            "SELECT count(*) FROM deliveries WHERE event_type = 'webhook.test'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored, 31, "nothing refused was stored");
}

/// An outside probe's finding: a sandbox let an endpoint point at any port of the machine and
/// kept the answer in the delivery log, so an admin could read the local node (or anything else
/// listening). Loopback endpoints take only the ports the operator names
/// (`PAYRAIL_LOOPBACK_PORTS`); every spelling of 127.0.0.1 counts as loopback.
#[test]
fn loopback_endpoints_take_only_the_ports_the_operator_allows() {
    let receiver = Receiver::start();
    let port = receiver
        .url("/")
        .split(':')
        .nth(2)
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    let allowed = format!("{port},3000-3999");
    let worker = Worker::start_with_vars(
        "sandbox",
        3600,
        &[("PAYRAIL_LOOPBACK_PORTS", allowed.as_str())],
    );
    let session = worker.portal_login(0);
    let create = |url: &str| {
        worker.portal(
            Method::POST,
            "/portal/api/webhook-endpoints",
            Some(&session),
            Some(&json!({"url": url, "description": "loopback"})),
        )
    };
    let node = payrail_tests::free_port();
    for url in [
        format!("http://127.0.0.1:{node}/"),
        format!("http://127.1:{node}/"),
        format!("http://2130706433:{node}/"),
        format!("http://0x7f000001:{node}/"),
        format!("http://localhost:{node}/"),
        format!("http://[::1]:{node}/"),
        "http://127.0.0.1/".to_owned(),
    ] {
        let refused = create(&url).assert_error(400, "invalid_request");
        assert!(
            refused.contains(&format!(
                "only on the ports the operator allows for receivers ({allowed})"
            )),
            "{url}: {refused}"
        );
    }
    let made = create(&receiver.url("/hooks"));
    assert_eq!(made.status, 201, "{}", made.text);
    assert_eq!(create("http://localhost:3000/webhooks").status, 201);
}
