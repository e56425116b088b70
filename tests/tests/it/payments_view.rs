//! The portal's payments view: the same filters and pages as the partner API, merchant names and
//! status badges, the quick date ranges, the search box (by id, external reference, transaction
//! hash or deposit address, never another institution's payment), one payment's timeline with
//! its deliveries and attempts, the overview's exact volume, and the CSV export of every
//! matching payment.

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
    worker.portal_page(session, path)
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

/// The ids of the rows of a payments page, in order.
fn row_ids(html: &str) -> Vec<i64> {
    html.split("data-payment=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn the_list_shows_merchant_names_and_status_badges() {
    let worker = worker();
    let session = worker.portal_login(0);
    // The API's page first: payments made meanwhile only push its rows down the longer page.
    let api = api(worker, &session, "/payments?limit=25").json();
    let html = page(worker, &session, "/portal/payments?limit=100").text;
    assert!(!row_ids(&html).is_empty());
    let names: std::collections::HashMap<i64, String> = worker.credentials.institutions[0]
        .merchants
        .iter()
        .map(|m| (m.id, m.name.clone()))
        .collect();
    for t in api["data"].as_array().unwrap() {
        let id = t["id"].as_i64().unwrap();
        let row = html
            .split(&format!("data-payment=\"{id}\""))
            .nth(1)
            .and_then(|r| r.split("</tr>").next())
            .unwrap_or_else(|| panic!("row {id} in the page"));
        let merchant = t["merchant_id"].as_i64().unwrap();
        let name = names
            .get(&merchant)
            .expect("a demo merchant")
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        assert!(
            row.contains(&format!(
                "<a href=\"/portal/merchants/{merchant}\">{name}</a>"
            )),
            "{row}"
        );
        let status = t["status"].as_str().unwrap();
        assert!(
            row.contains(&format!("class=\"badge s-{status}\"")),
            "{row}"
        );
        if let Some(amount) = t["amount_status"].as_str() {
            let label = match amount {
                "EXACT" => "Exact",
                "UNDERPAID" => "Underpaid",
                _ => "Overpaid",
            };
            assert!(row.contains(&format!(">{label}</span>")), "{row}");
        }
    }
}

#[test]
fn quick_ranges_filter_by_the_day_created() {
    let worker = worker();
    let session = worker.portal_login(0);
    let today = &payrail_tests::today();
    let fresh = payment(worker, 0, "VIEW-QUICK-RANGE");
    let html = page(worker, &session, "/portal/payments?status=pending").text;
    // Each range keeps the other filters and starts on its first day.
    let link = format!("/portal/payments?status=pending&amp;created_after={today}");
    assert!(html.contains(&format!("href=\"{link}\"")), "{html}");
    for label in ["Today", "7 days", "30 days"] {
        assert!(html.contains(&format!(">{label}</a>")), "{label}");
    }
    // The range's page is the API's list of the same filters (read again if a payment made by
    // another test alongside landed between the two reads).
    eventually("the same list twice", Duration::from_secs(20), || {
        let ranged = page(
            worker,
            &session,
            &format!("/portal/payments?status=pending&created_after={today}&limit=100"),
        );
        assert_eq!(ranged.status, 200);
        assert!(ranged.text.contains("aria-current=\"page\">Today"));
        let ids = row_ids(&ranged.text);
        assert!(ids.contains(&fresh), "{ids:?}");
        let expected: Vec<i64> = api(
            worker,
            &session,
            &format!("/payments?status=pending&created_after={today}&limit=100"),
        )
        .json()["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_i64().unwrap())
            .collect();
        (ids == expected).then_some(())
    });
    // Before today: not there.
    let before = page(
        worker,
        &session,
        &format!("/portal/payments?created_before={today}&limit=100"),
    );
    assert!(!row_ids(&before.text).contains(&fresh));
}

#[test]
fn the_search_finds_a_payment_by_each_key_and_never_another_institutions() {
    let worker = worker();
    let session = worker.portal_login(0);
    let key = &worker.credentials.institutions[0].merchants[0].public_key;
    let s = worker.checkout_session(&json!({
        "publicKey": key, "amount": "12.00", "currency": "EUR", "title": "Search",
        "externalReference": "VIEW-SEARCH-1", "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    }));
    let id = s["transaction_id"].as_i64().unwrap();
    act(worker, 0, id, "pay", json!({"amount": "12.00"}));
    let settled = act(worker, 0, id, "settle", json!({}));
    let source = settled["tx_hashes"]["source"].as_str().unwrap().to_owned();
    let settlement = settled["tx_hashes"]["settlement"]
        .as_str()
        .unwrap()
        .to_owned();
    let address: String = worker
        .database()
        .query_row(
            "SELECT deposit_address FROM checkout_sessions WHERE transaction_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    let search = |session: &PortalSession, q: &str| {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("q", q)
            .finish();
        page(worker, session, &format!("/portal/payments?{query}"))
    };
    let mut keys = vec![
        (id.to_string(), "id"),
        ("VIEW-SEARCH-1".to_owned(), "external_reference"),
        (source.clone(), "tx_hash"),
        (settlement.clone(), "tx_hash"),
        (address.clone(), "deposit_address"),
        (format!("  {source}  "), "tx_hash"),
    ];
    if let Some(hex) = address.strip_prefix("0x") {
        // EVM hex as people paste it, in any case.
        keys.push((format!("0x{}", hex.to_ascii_uppercase()), "deposit_address"));
    }
    for (q, key) in keys {
        let found = search(&session, &q);
        assert_eq!(found.status, 200, "{q}: {}", found.text);
        assert_eq!(row_ids(&found.text), [id], "{q}");
        assert!(found.text.contains(&format!("data-key=\"{key}\"")), "{q}");
        assert!(found.text.contains("1 payment match"), "{q}");
    }
    // Exact matches only.
    let partial = search(&session, &source[..20]);
    assert!(row_ids(&partial.text).is_empty());
    assert!(partial.text.contains("No payment matches"));
    // Another institution finds none of it.
    let globex = worker.portal_login(1);
    for q in [
        id.to_string(),
        "VIEW-SEARCH-1".into(),
        source,
        settlement,
        address,
    ] {
        let found = search(&globex, &q);
        assert_eq!(found.status, 200);
        assert!(
            row_ids(&found.text).is_empty(),
            "{q} found by another institution"
        );
    }
    // Bounded: a text longer than any key is refused, saying so.
    let long = search(&session, &"x".repeat(256));
    assert_eq!(long.status, 400);
    assert!(
        long.text.contains("at most 255 characters"),
        "{}",
        long.text
    );
}
