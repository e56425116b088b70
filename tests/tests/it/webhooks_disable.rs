//! The auto-disable rule, with the schedule compressed 86400 times (5 days become 5 seconds):
//! an endpoint that fails continuously is disabled, its admins notified once (recorded; no
//! e-mail binding here), and after re-enabling, the failed deliveries are resent in bulk; one
//! delivery an otherwise healthy endpoint refuses is given up after the same 5 days.

use std::time::Duration;

use payrail_tests::receiver::{Mode, Receiver};
use payrail_tests::{eventually, PortalSession, Worker};
use reqwest::Method;
use serde_json::json;

#[test]
fn continuous_failure_disables_the_endpoint_and_re_enabling_resends() {
    let worker = Worker::start_with("sandbox", 86_400);
    let session = worker.portal_login(0);
    let port = payrail_tests::free_port();
    let endpoint_id = endpoint(&worker, &session, &format!("http://127.0.0.1:{port}/dead"));
    let started = shared_types::time::format_unix(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
            - 5,
    )
    .unwrap();
    let id = paid_payments(&worker, 1, "WH-DISABLE")[0];

    let endpoint = eventually(
        "the endpoint to be disabled",
        Duration::from_secs(60),
        || {
            let e = worker
                .portal(
                    Method::GET,
                    &format!("/portal/api/webhook-endpoints/{endpoint_id}"),
                    Some(&session),
                    None,
                )
                .json();
            (e["status"] == "disabled").then_some(e)
        },
    );
    assert_eq!(endpoint["status"], "disabled");
    let notes = worker
        .portal(
            Method::GET,
            "/portal/api/notifications",
            Some(&session),
            None,
        )
        .json();
    let note = &notes["data"][0];
    assert_eq!(note["kind"], "endpoint_disabled");
    assert!(note["subject"]
        .as_str()
        .unwrap()
        .contains(&format!("127.0.0.1:{port}")));
    assert_eq!(note["email_status"], "not_configured");
    let log = worker
        .portal(
            Method::GET,
            &format!("/portal/api/webhook-endpoints/{endpoint_id}/deliveries"),
            Some(&session),
            None,
        )
        .json();
    let failed = &log["data"][0];
    assert_eq!(failed["status"], "failed");
    assert!(failed["attempts"].as_i64().unwrap() >= 3, "{failed}");
    // The pages say so too.
    let cookie = format!("payrail_portal={}", session.cookie);
    let list = worker.send(
        worker
            .request(Method::GET, "/portal/webhooks")
            .header("Cookie", &cookie),
        None,
    );
    assert!(
        list.text.contains("Notifications") && list.text.contains("disabled your webhook endpoint")
    );
    let detail = worker.send(
        worker
            .request(Method::GET, &format!("/portal/webhooks/{endpoint_id}"))
            .header("Cookie", &cookie),
        None,
    );
    assert!(
        detail.text.contains("Payrail disabled this endpoint"),
        "{}",
        detail.text
    );
    assert!(detail.text.contains("name=\"enable\""));
    // Resending while disabled is refused.
    worker
        .portal(
            Method::POST,
            &format!(
                "/portal/api/deliveries/{}/resend",
                failed["id"].as_str().unwrap()
            ),
            Some(&session),
            None,
        )
        .assert_error(409, "conflict");

    // Fix the receiver, re-enable, resend everything that failed meanwhile.
    let receiver = Receiver::start_on(port);
    let enabled = worker.portal(
        Method::POST,
        &format!("/portal/api/webhook-endpoints/{endpoint_id}/enable"),
        Some(&session),
        Some(&json!({"resend_failed_since": started})),
    );
    assert_eq!(enabled.status, 200, "{}", enabled.text);
    assert_eq!(enabled.json()["status"], "enabled");
    assert_eq!(enabled.json()["resent"].as_array().unwrap().len(), 1);
    let got = eventually("the resent event", Duration::from_secs(30), || {
        let got = receiver.received();
        (!got.is_empty()).then_some(got)
    });
    assert_eq!(got[0].json()["type"], "payment.succeeded");
    assert_eq!(got[0].json()["data"]["id"], id);

    // A delivery whose queue message was lost is found by the cron sweep. (Written directly
    // while the worker is idle: this worker runs this one test.)
    eventually("the resend to be recorded", Duration::from_secs(20), || {
        let log = worker
            .portal(
                Method::GET,
                &format!("/portal/api/webhook-endpoints/{endpoint_id}/deliveries?status=succeeded"),
                Some(&session),
                None,
            )
            .json();
        (!log["data"].as_array().unwrap().is_empty()).then_some(())
    });
    let lost = worker
        .database()
        .execute(
            "INSERT INTO deliveries (id, event_id, endpoint_id, institution_id, event_type, status, \
             attempts, next_attempt_at, created_at) SELECT 'dlv_lostmessage', event_id, endpoint_id, \
             institution_id, event_type, 'pending', 0, unixepoch() - 120, unixepoch() - 120 \
             FROM deliveries WHERE endpoint_id = ?1 LIMIT 1",
            [&endpoint_id],
        )
        .unwrap();
    assert_eq!(lost, 1);
    let cron = worker.send(
        worker.request(Method::GET, "/__scheduled?cron=*+*+*+*+*"),
        None,
    );
    assert_eq!(cron.status, 200);
    eventually("the swept delivery", Duration::from_secs(30), || {
        (receiver.received().len() >= 2).then_some(())
    });
    let swept = worker
        .portal(
            Method::GET,
            "/portal/api/deliveries/dlv_lostmessage",
            Some(&session),
            None,
        )
        .json();
    assert_eq!(swept["status"], "succeeded", "{swept}");
}

/// Adds a webhook endpoint for `url`; its id.
fn endpoint(worker: &Worker, session: &PortalSession, url: &str) -> String {
    let created = worker.portal(
        Method::POST,
        "/portal/api/webhook-endpoints",
        Some(session),
        Some(&json!({ "url": url })),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    created.json()["id"].as_str().unwrap().to_owned()
}

/// Pays `count` sandbox payments of the first demo merchant (their events go to every
/// endpoint); their transaction ids.
fn paid_payments(worker: &Worker, count: usize, reference: &str) -> Vec<i64> {
    let key = &worker.credentials.institutions[0].merchants[0].public_key;
    let mut ids = Vec::new();
    for n in 0..count {
        let session = worker.checkout_session(&json!({
            "publicKey": key, "amount": "15", "currency": "USD", "title": "Webhook rules",
            "externalReference": format!("{reference}-{n}"), "redirectUrl": "https://shop.example/",
            "allowCrypto": true
        }));
        let id = session["transaction_id"].as_i64().unwrap();
        let paid = worker.post_json(
            &format!("/sandbox/transactions/{id}/pay"),
            &json!({"amount": "15"}),
            Some(&worker.sandbox_token(0)),
            "/sandbox/transactions/{id}/{action}",
        );
        assert_eq!(paid.status, 200, "{}", paid.text);
        ids.push(id);
    }
    ids
}

#[test]
fn many_deliveries_failing_past_the_window_disable_the_endpoint_and_notify_once() {
    let worker = Worker::start_with("sandbox", 86_400);
    let session = worker.portal_login(0);
    let port = payrail_tests::free_port();
    let endpoint_id = endpoint(&worker, &session, &format!("http://127.0.0.1:{port}/dead"));
    // Eight deliveries retried every second on their own schedules: past the 5 s window several
    // attempts decide to disable at once. One turns the endpoint off; the rest find it off.
    paid_payments(&worker, 8, "WH-DISABLE-MANY");
    let db = worker.database();
    // Done when the endpoint is off, nothing of it is pending, and no attempt is in flight:
    // every claim (`attempts` counts them) has recorded its attempt, so any attempt that
    // decided to disable has ended.
    eventually(
        "the endpoint disabled, none of its deliveries pending, no attempt in flight",
        Duration::from_secs(60),
        || {
            let (disabled, pending, claimed, recorded): (i64, i64, i64, i64) = db
                .query_row(
                    "SELECT (SELECT count(*) FROM webhook_endpoints WHERE id = ?1 \
                     AND status = 'disabled'), \
                     (SELECT count(*) FROM deliveries WHERE endpoint_id = ?1 \
                     AND status = 'pending'), \
                     (SELECT coalesce(sum(attempts), 0) FROM deliveries WHERE endpoint_id = ?1), \
                     (SELECT count(*) FROM delivery_attempts WHERE endpoint_id = ?1)",
                    [&endpoint_id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .unwrap();
            (disabled == 1 && pending == 0 && claimed == recorded).then_some(())
        },
    );
    let notes = worker
        .portal(
            Method::GET,
            "/portal/api/notifications",
            Some(&session),
            None,
        )
        .json();
    let disabled: Vec<_> = notes["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "endpoint_disabled")
        .collect();
    assert_eq!(disabled.len(), 1, "one notification: {notes}");
    let failed: i64 = db
        .query_row(
            "SELECT count(*) FROM deliveries WHERE endpoint_id = ?1 AND status = 'failed'",
            [&endpoint_id],
            |r| r.get(0),
        )
        .unwrap();
    assert!(failed >= 8, "every delivery failed: {failed}");
}

#[test]
fn a_delivery_refused_for_five_days_is_given_up_while_the_endpoint_takes_the_rest() {
    let worker = Worker::start_with("sandbox", 86_400);
    let session = worker.portal_login(0);
    let receiver = Receiver::start();
    receiver.set_mode(Mode::RefuseType("payment.succeeded"));
    let endpoint_id = endpoint(&worker, &session, &receiver.url("/picky"));
    paid_payments(&worker, 1, "WH-GIVE-UP");
    let db = worker.database();
    let refused_status = || -> Option<String> {
        db.query_row(
            "SELECT status FROM deliveries WHERE endpoint_id = ?1 \
             AND event_type = 'payment.succeeded'",
            [&endpoint_id],
            |r| r.get(0),
        )
        .ok()
    };
    // A test event every second keeps the endpoint healthy: each success clears its failure
    // clock, so only the delivery's own age can end its retries.
    let mut last_test: Option<std::time::Instant> = None;
    eventually(
        "the refused delivery to be given up",
        Duration::from_secs(60),
        || {
            if last_test.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
                let test = worker.portal(
                    Method::POST,
                    &format!("/portal/api/webhook-endpoints/{endpoint_id}/test"),
                    Some(&session),
                    None,
                );
                assert_eq!(test.status, 201, "{}", test.text);
                last_test = Some(std::time::Instant::now());
            }
            (refused_status().as_deref() == Some("failed")).then_some(())
        },
    );
    let endpoint = worker
        .portal(
            Method::GET,
            &format!("/portal/api/webhook-endpoints/{endpoint_id}"),
            Some(&session),
            None,
        )
        .json();
    assert_eq!(endpoint["status"], "enabled", "{endpoint}");
    let refused = receiver
        .received()
        .iter()
        .filter(|r| r.answered == 400)
        .count();
    assert!(refused >= 3, "retried before giving up: {refused}");
    assert!(
        receiver.received().iter().any(|r| r.answered == 200),
        "the endpoint took the rest"
    );
}
