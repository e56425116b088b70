//! The portal's payments view: the same filters and pages as the partner API, one payment's
//! timeline with its deliveries and attempts, the overview's exact volume, and the CSV export of
//! every matching payment.

use std::collections::HashSet;
use std::time::Duration;

use payrail_tests::hooks::{act, endpoint, payment};
use payrail_tests::receiver::Receiver;
use payrail_tests::{eventually, PortalSession, Worker};
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{json, Value};

/// This module's own worker: its tests hold the portal's list against the API's newest
/// payments, count the overview exactly and export every paid payment, which payments made by
/// other tests alongside would change between two reads.
fn worker() -> &'static Worker {
    Worker::own("payments_view")
}

fn api(worker: &Worker, session: &PortalSession, path: &str) -> payrail_tests::Reply {
    worker.portal(
        Method::GET,
        &format!("/portal/api{path}"),
        Some(session),
        None,
    )
}

fn page(worker: &Worker, session: &PortalSession, path: &str) -> payrail_tests::Reply {
    worker.send(
        worker
            .request(Method::GET, path)
            .header("Cookie", format!("payrail_portal={}", session.cookie)),
        None,
    )
}

#[test]
fn the_list_is_the_partner_apis_list() {
    let worker = worker();
    let session = worker.portal_login(0);
    let token = worker.institution_token(0);
    for query in [
        "limit=7",
        "status=paid&limit=5",
        "status=refunded&limit=3&created_after=2026-08-01",
    ] {
        let portal = api(worker, &session, &format!("/payments?{query}"));
        assert_eq!(portal.status, 200, "{}", portal.text);
        let partner = worker.get(
            &format!("/v1/transactions?{query}"),
            Some(&token),
            "/v1/transactions",
        );
        assert_eq!(portal.json(), partner.json(), "{query}");
    }
    api(worker, &session, "/payments?status=PAID").assert_error(400, "invalid_request");
    let html = page(worker, &session, "/portal/payments?status=paid");
    assert_eq!(html.status, 200);
    assert!(html.text.contains("id=\"payments\""));
    // The filter form sends its empty fields too: they filter nothing.
    let form = page(
        worker,
        &session,
        "/portal/payments?status=&merchant_id=&external_reference=&id=&created_after=&created_before=",
    );
    assert_eq!(form.status, 200, "{}", form.text);
}

#[test]
fn a_payments_timeline_shows_its_events_deliveries_and_attempts() {
    let worker = worker();
    let session = worker.portal_login(0);
    let receiver = Receiver::start();
    endpoint(
        worker,
        &session,
        &receiver.url("/timeline"),
        Some(&["payment.succeeded", "payment.paid"]),
    );
    let id = payment(worker, 0, "VIEW-TIMELINE-1");
    act(worker, 0, id, "pay", json!({"amount": "40.00"}));
    act(worker, 0, id, "settle", json!({}));
    let detail = eventually(
        "both deliveries to succeed",
        Duration::from_secs(40),
        || {
            let d = api(worker, &session, &format!("/payments/{id}")).json();
            let done = d["timeline"].as_array().unwrap().iter().skip(1).all(|e| {
                e["deliveries"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x["status"] == "succeeded")
            });
            (done && d["timeline"].as_array().unwrap().len() == 3).then_some(d)
        },
    );
    let timeline = detail["timeline"].as_array().unwrap();
    let what: Vec<&str> = timeline
        .iter()
        .map(|e| e["what"].as_str().unwrap())
        .collect();
    assert_eq!(what, ["created", "payment.succeeded", "payment.paid"]);
    assert_eq!(detail["transaction"]["id"], id);
    let delivery = &timeline[1]["deliveries"][0];
    assert_eq!(delivery["attempt_log"][0]["outcome"], "ok", "{detail}");

    let html = page(worker, &session, &format!("/portal/payments/{id}"));
    assert!(html.text.contains("payment.paid"));
    assert!(html.text.contains("Resend"));
    // Another institution's payment is not found.
    let globex = worker.portal_login(1);
    api(worker, &globex, &format!("/payments/{id}")).assert_error(404, "not_found");
}

#[test]
fn the_overview_counts_exactly() {
    let worker = worker();
    let session = worker.portal_login(1);
    let paid_chf = |o: &Value| {
        o["periods"][0]["lines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["status"] == "paid" && l["currency"] == "CHF")
            .map(|l| {
                (
                    l["count"].as_i64().unwrap(),
                    l["gross"].as_str().unwrap().parse::<Decimal>().unwrap(),
                )
            })
            .unwrap_or((0, Decimal::ZERO))
    };
    let before = paid_chf(&api(worker, &session, "/overview").json());
    let key = &worker.credentials.institutions[1].merchants[0].public_key;
    for (i, amount) in ["10.10", "20.25"].iter().enumerate() {
        let s = worker.checkout_session(&json!({
            "publicKey": key, "amount": amount, "currency": "CHF", "title": "Overview",
            "externalReference": format!("VIEW-OVERVIEW-{i}"), "redirectUrl": "https://shop.example/done",
            "allowCrypto": true
        }));
        act(
            worker,
            1,
            s["transaction_id"].as_i64().unwrap(),
            "pay",
            json!({ "amount": amount }),
        );
    }
    let after = paid_chf(&api(worker, &session, "/overview").json());
    assert_eq!(after.0 - before.0, 2);
    assert_eq!(after.1 - before.1, "30.35".parse::<Decimal>().unwrap());
    let html = page(worker, &session, "/portal/");
    assert_eq!(html.status, 200);
    assert!(html.text.contains("Last 7 days") && html.text.contains("Last 30 days"));
}

#[test]
fn the_export_streams_every_matching_payment_as_csv() {
    let worker = worker();
    let session = worker.portal_login(1);
    let token = worker.institution_token(1);
    // Every refunded or paid payment of the institution, through the partner API's pages.
    let mut expected = HashSet::new();
    let mut cursor: Option<i64> = None;
    loop {
        let after = cursor
            .map(|c| format!("&starting_after={c}"))
            .unwrap_or_default();
        let page = worker
            .get(
                &format!("/v1/transactions?status=paid&limit=100{after}"),
                Some(&token),
                "/v1/transactions",
            )
            .json();
        for t in page["data"].as_array().unwrap() {
            expected.insert(t["id"].as_i64().unwrap());
        }
        match page["next_cursor"].as_i64() {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert!(
        expected.len() > 100,
        "more than one page: {}",
        expected.len()
    );
    let csv = page(worker, &session, "/portal/payments/export.csv?status=paid");
    assert_eq!(csv.status, 200);
    assert!(csv.header("content-type").unwrap().starts_with("text/csv"));
    assert!(csv
        .header("content-disposition")
        .unwrap()
        .contains("payments.csv"));
    let mut reader = csv::Reader::from_reader(csv.text.as_bytes());
    let headers = reader.headers().unwrap().clone();
    assert_eq!(&headers[0], "id");
    let gross = headers.iter().position(|h| h == "amount_gross").unwrap();
    let mut got = HashSet::new();
    for record in reader.records() {
        let record = record.unwrap();
        got.insert(record[0].parse::<i64>().unwrap());
        // Decimals as strings, exactly as the API shows them.
        assert!(record[gross].parse::<Decimal>().is_ok(), "{record:?}");
    }
    assert_eq!(got, expected);
    // No session, no export.
    let anonymous = worker.send(
        worker.request(Method::GET, "/portal/payments/export.csv"),
        None,
    );
    assert_eq!(anonymous.status, 303);
}

#[test]
fn a_reference_a_spreadsheet_would_run_is_exported_as_text() {
    let worker = worker();
    let session = worker.portal_login(0);
    let reference = "=HYPERLINK(\"https://attacker.example\",\"Refund\")";
    let id = payment(worker, 0, reference);
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("external_reference", reference)
        .finish();
    let csv = page(
        worker,
        &session,
        &format!("/portal/payments/export.csv?{query}"),
    );
    assert_eq!(csv.status, 200, "{}", csv.text);
    let mut reader = csv::Reader::from_reader(csv.text.as_bytes());
    let headers = reader.headers().unwrap().clone();
    let column = headers
        .iter()
        .position(|h| h == "external_reference")
        .unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 1, "{}", csv.text);
    assert_eq!(rows[0][0].parse::<i64>().unwrap(), id);
    assert_eq!(&rows[0][column], format!("'{reference}"));
    // The API itself still answers the reference as it was given.
    let t = worker.transaction(0, id);
    assert_eq!(t["external_reference"], reference);
}
