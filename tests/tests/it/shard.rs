//! An institution's money in its own object (a SQLite-backed Durable Object): the operator's
//! copy moves every money table of one institution into its object and compares both sides;
//! once the directory holds the institution there, the partner API's money reads (the
//! transactions list and lookups, the events feed and an event by id) answer from the object,
//! exactly as they answered from D1, while other institutions keep reading from D1.

use std::sync::OnceLock;

use payrail_tests::hooks::{act, payment};
use payrail_tests::http::Reply;
use payrail_tests::Worker;
use reqwest::Method;
use serde_json::{json, Value};

/// The operator's token this worker is started with.
const OPERATOR_TOKEN: &str = "op_test_4b1d2c9e8f7a6b5c4d3e2f1a0b9c8d7e";

/// A worker of its own: its directory is written directly, and it has the operator's API.
fn worker() -> &'static Worker {
    static WORKER: OnceLock<Worker> = OnceLock::new();
    WORKER.get_or_init(|| {
        Worker::start_with_vars(
            "sandbox",
            3600,
            &[("PAYRAIL_OPERATOR_TOKEN", OPERATOR_TOKEN)],
        )
    })
}

/// The D1 id of demo institution `index`.
fn institution_id(worker: &Worker, index: usize) -> i64 {
    let name = &worker.credentials.institutions[index].name;
    worker
        .database()
        .query_row("SELECT id FROM institutions WHERE name = ?1", [name], |r| {
            r.get(0)
        })
        .unwrap()
}

/// `POST /operator/institutions/{id}/copy` with `token`.
fn copy(worker: &Worker, institution: i64, token: Option<&str>) -> Reply {
    let mut request = worker.request(
        Method::POST,
        &format!("/operator/institutions/{institution}/copy"),
    );
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    worker.send(request, None)
}

/// What the partner reads answer for `token`: every list page and lookup the test compares.
fn reads(worker: &Worker, token: &str, paths: &[String]) -> Vec<(String, u16, Value)> {
    paths
        .iter()
        .map(|path| {
            let spec = path.split('?').next().unwrap();
            let spec = if spec.starts_with("/v1/events/") {
                "/v1/events/{id}"
            } else {
                spec
            };
            let reply = worker.get(path, Some(token), spec);
            (path.clone(), reply.status, reply.json())
        })
        .collect()
}

#[test]
fn an_institution_copied_into_its_object_reads_the_same_from_it() {
    let worker = worker();
    let id = institution_id(worker, 0);
    // A payment's whole life, so every kind of row exists: a session, its watch, its events
    // and deliveries, a settlement, a refund.
    let paid = payment(worker, 0, "SHARD-1");
    act(worker, 0, paid, "pay", json!({"amount": "40.00"}));
    act(worker, 0, paid, "settle", json!({}));
    let refunded = payment(worker, 0, "SHARD-2");
    act(worker, 0, refunded, "pay", json!({"amount": "40.00"}));
    act(worker, 0, refunded, "refund", json!({"amount": "40.00"}));
    let (client, secret) =
        worker.new_client(0, "Shard reads", &["transactions:read", "events:read"]);
    let token = worker.token(&client, &secret);
    let feed = worker.get("/v1/events?limit=3", Some(&token), "/v1/events");
    assert_eq!(feed.status, 200, "{}", feed.text);
    let event = feed.json()["data"][0]["id"].as_str().unwrap().to_owned();
    let first = worker.get("/v1/transactions?limit=2", Some(&token), "/v1/transactions");
    let cursor = first.json()["next_cursor"].clone();
    assert!(cursor.is_i64(), "{}", first.text);
    let paths: Vec<String> = vec![
        "/v1/transactions?limit=2".into(),
        format!("/v1/transactions?limit=2&cursor={cursor}"),
        format!("/v1/transactions?id={paid}"),
        "/v1/transactions?status=paid&limit=5".into(),
        "/v1/transactions?external_reference=SHARD-2".into(),
        "/v1/events?limit=4".into(),
        format!("/v1/events?transaction_id={refunded}"),
        format!("/v1/events/{event}"),
        "/v1/events/evt_00000000000000000000000000".into(),
    ];
    let before = reads(worker, &token, &paths);
    assert!(before[0].2["data"].as_array().is_some_and(|d| d.len() == 2));
    assert_eq!(before[8].1, 404);

    // The operator's API: no token, a wrong one, refused.
    for token in [None, Some("op_wrong")] {
        let refused = copy(worker, id, token);
        assert_eq!(refused.status, 401, "{}", refused.text);
        assert_eq!(refused.json()["error"], "invalid_client");
    }
    assert_eq!(copy(worker, 999_999, Some(OPERATOR_TOKEN)).status, 404);

    // Copied and compared: every money table, the same rows on both sides.
    let report = copy(worker, id, Some(OPERATOR_TOKEN));
    assert_eq!(report.status, 200, "{}", report.text);
    let report = report.json();
    assert_eq!(report["verified"], true, "{report}");
    let rows = |table: &str| {
        report["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["table"] == table)
            .unwrap_or_else(|| panic!("{table} in {report}"))
            .clone()
    };
    for table in ["transactions", "checkout_sessions", "events"] {
        let t = rows(table);
        assert!(t["d1_rows"].as_i64().unwrap() > 0, "{t}");
        assert_eq!(t["d1_rows"], t["object_rows"], "{t}");
    }
    let d1_transactions: i64 = worker
        .database()
        .query_row(
            "SELECT count(*) FROM transactions WHERE institution_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows("transactions")["d1_rows"], d1_transactions);
    // A second copy starts from an empty object and finds the same.
    let again = copy(worker, id, Some(OPERATOR_TOKEN)).json();
    assert_eq!(again["verified"], true, "{again}");
    assert_eq!(again["tables"], report["tables"]);

    // The directory holds the institution in its object; D1's copy is changed so that an
    // answer read from it would show.
    let db = worker.database();
    db.execute(
        "UPDATE institutions SET store = 'object' WHERE id = ?1",
        [id],
    )
    .unwrap();
    db.execute(
        "UPDATE transactions SET external_reference = 'STALE' WHERE institution_id = ?1",
        [id],
    )
    .unwrap();
    db.execute(
        "UPDATE events SET payload = json_set(payload, '$.type', 'stale') \
         WHERE institution_id = ?1",
        [id],
    )
    .unwrap();
    let after = reads(worker, &token, &paths);
    for ((path, status, body), (_, was_status, was)) in after.iter().zip(&before) {
        assert_eq!(status, was_status, "{path}: {body}");
        assert_eq!(body, was, "{path}");
    }
    // Refused now: the object's rows are the money.
    let refused = copy(worker, id, Some(OPERATOR_TOKEN));
    assert_eq!(refused.status, 409, "{}", refused.text);

    // Another institution still reads from D1.
    let other = worker.institution_token(1);
    let list = worker.get("/v1/transactions?limit=1", Some(&other), "/v1/transactions");
    assert_eq!(list.status, 200, "{}", list.text);
    let stale = worker.get(
        "/v1/transactions?external_reference=STALE",
        Some(&token),
        "/v1/transactions",
    );
    assert_eq!(stale.json()["data"], json!([]), "{}", stale.text);
}
