//! `GET /v1/transactions` over real HTTP: shapes, order, pagination, every filter, isolation
//! between institutions and every invalid parameter.

use std::collections::HashSet;

use payrail_tests::Worker;
use rusqlite::types::Value as SqlValue;
use serde_json::Value;

/// The worker of the tests that compare the API with the demo data as seeded (every merchant,
/// every transaction): shared only by tests that change neither (this module and `merchants`),
/// so nothing is added or changed between two reads.
fn worker() -> &'static Worker {
    Worker::own("demo-data")
}

const SPEC: &str = "/v1/transactions";

fn list(worker: &Worker, institution: usize, query: &str) -> Value {
    let token = worker.institution_token(institution);
    let reply = worker.get(&format!("{SPEC}?{query}"), Some(&token), SPEC);
    assert_eq!(reply.status, 200, "{query}: {}", reply.text);
    reply.json()
}

/// Every id the filter matches, walking all pages with `limit=100`.
fn all_ids(worker: &Worker, institution: usize, query: &str) -> Vec<i64> {
    let mut ids = Vec::new();
    let mut cursor: Option<i64> = None;
    loop {
        let mut q = format!("limit=100&{query}");
        if let Some(c) = cursor {
            q.push_str(&format!("&starting_after={c}"));
        }
        let page = list(worker, institution, &q);
        let data = page["data"].as_array().unwrap();
        ids.extend(data.iter().map(|t| t["id"].as_i64().unwrap()));
        match page["has_more"].as_bool().unwrap() {
            true => {
                assert_eq!(page["next_cursor"], *ids.last().unwrap());
                cursor = Some(ids[ids.len() - 1]);
            }
            false => {
                assert_eq!(page["next_cursor"], Value::Null);
                return ids;
            }
        }
    }
}

/// The ids the database holds for a WHERE clause over institution `institution_id`, newest first.
fn db_ids(worker: &Worker, institution_id: i64, clause: &str, params: &[SqlValue]) -> Vec<i64> {
    let conn = worker.database();
    let sql = format!(
        "SELECT id FROM transactions WHERE institution_id = {institution_id} {clause} \
         ORDER BY id DESC"
    );
    let mut stmt = conn.prepare(&sql).unwrap();
    let rows = stmt
        .query_map(rusqlite::params_from_iter(params.iter()), |r| r.get(0))
        .unwrap();
    rows.map(Result::unwrap).collect()
}

#[test]
fn first_page_is_25_newest_first_with_a_consistent_cursor() {
    let worker = worker();
    let page = list(worker, 0, "");
    assert_eq!(page["object"], "list");
    let data = page["data"].as_array().unwrap();
    assert_eq!(data.len(), 25);
    let ids: Vec<i64> = data.iter().map(|t| t["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");
    assert_eq!(page["has_more"], true);
    assert_eq!(page["next_cursor"], ids[24]);
    assert_eq!(ids, db_ids(worker, 1, "", &[])[..25]);
}

#[test]
fn walking_every_page_returns_exactly_the_institutions_rows() {
    let worker = worker();
    for (index, institution_id) in [(0, 1), (1, 2)] {
        let ids = all_ids(worker, index, "");
        let expected = db_ids(worker, institution_id, "", &[]);
        assert!(
            expected.len() > 200,
            "demo data has a few hundred rows each"
        );
        assert_eq!(ids, expected);
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
    }
}

#[test]
fn a_page_matches_the_stored_row_field_for_field() {
    let worker = worker();
    // A settled, bridged payment has every field set.
    let id: i64 = worker
        .database()
        .query_row(
            "SELECT id FROM transactions WHERE institution_id = 1 AND raw_status = 'paid' \
             AND bridge_fee IS NOT NULL ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .expect("a bridged payment in the demo data");
    let page = list(worker, 0, &format!("id={id}"));
    let t = &page["data"][0];
    let row: Vec<Option<String>> = worker
        .database()
        .query_row(
            "SELECT amount_gross, amount_net, amount_expected, psp_fee, gas_fee, bridge_fee, \
             network_payment, network_settlement, tx_hash_source, tx_hash_bridge, \
             tx_hash_settlement, created_at, paid_at, external_reference, amount_status, asset, \
             currency FROM transactions WHERE id = ?1",
            [id],
            |r| (0..17).map(|i| r.get(i)).collect(),
        )
        .unwrap();
    let wire = [
        &t["amount"]["gross"],
        &t["amount"]["net"],
        &t["amount"]["expected"],
        &t["amount"]["psp_fee"],
        &t["amount"]["gas_fee"],
        &t["amount"]["bridge_fee"],
        &t["networks"]["payment"],
        &t["networks"]["settlement"],
        &t["tx_hashes"]["source"],
        &t["tx_hashes"]["bridge"],
        &t["tx_hashes"]["settlement"],
        &t["created_at"],
        &t["paid_at"],
        &t["external_reference"],
        &t["amount_status"],
        &t["asset"],
        &t["currency"],
    ];
    for (stored, sent) in row.iter().zip(wire) {
        assert_eq!(
            sent.as_str(),
            Some(stored.as_deref().expect("every field set")),
            "{t}"
        );
    }
    assert_eq!(t["object"], "transaction");
    assert_eq!(t["status"], "paid");
    assert_eq!(t["raw_status"], "paid");
    assert_ne!(t["networks"]["payment"], t["networks"]["settlement"]);
}

#[test]
fn unset_fields_are_present_as_null() {
    let worker = worker();
    let page = list(worker, 0, "status=pending&limit=100");
    let pending = page["data"].as_array().unwrap();
    assert!(!pending.is_empty());
    for t in pending {
        assert_eq!(t["raw_status"], "pending");
        for (group, key) in [
            ("amount", "gross"),
            ("amount", "net"),
            ("tx_hashes", "source"),
        ] {
            assert_eq!(t[group][key], Value::Null, "{t}");
        }
        assert_eq!(t["paid_at"], Value::Null);
        assert_eq!(t["amount_status"], Value::Null);
    }
}

#[test]
fn every_status_filter_matches_the_database() {
    let worker = worker();
    for status in [
        "pending",
        "paid",
        "failed",
        "refunded",
        "partially_refunded",
    ] {
        let ids = all_ids(worker, 0, &format!("status={status}"));
        assert!(!ids.is_empty(), "{status} is in the demo data");
        assert_eq!(
            ids,
            db_ids(worker, 1, "AND status = ?1", &[status.to_owned().into()]),
            "{status}"
        );
    }
    // Both raw statuses behind `paid` show up.
    let raw: HashSet<String> = list(worker, 0, "status=paid&limit=100")["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["raw_status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        raw,
        HashSet::from(["paid".to_owned(), "succeeded".to_owned()])
    );
}

#[test]
fn merchant_reference_and_id_filters() {
    let worker = worker();
    let merchant = worker.credentials.institutions[0].merchant_ids[1];
    assert_eq!(
        all_ids(worker, 0, &format!("merchant_id={merchant}")),
        db_ids(worker, 1, "AND merchant_id = ?1", &[merchant.into()])
    );

    let first = &list(worker, 0, "limit=1")["data"][0];
    let reference = first["external_reference"].as_str().expect("a reference");
    let by_reference = list(
        worker,
        0,
        &format!("external_reference={}", urlencode(reference)),
    );
    assert_eq!(by_reference["data"].as_array().unwrap().len(), 1);
    assert_eq!(by_reference["data"][0]["id"], first["id"]);

    let by_id = list(worker, 0, &format!("id={}", first["id"]));
    assert_eq!(by_id["data"].as_array().unwrap().len(), 1);
    assert_eq!(by_id["has_more"], false);
    assert_eq!(by_id["next_cursor"], Value::Null);
    let none = list(worker, 0, "id=9999999");
    assert_eq!(none["data"], serde_json::json!([]));
}

#[test]
fn date_filters_are_inclusive_after_and_exclusive_before() {
    let worker = worker();
    let sample = &list(worker, 0, "limit=50")["data"][40];
    let at = sample["created_at"].as_str().unwrap().to_owned();
    let after = all_ids(worker, 0, &format!("created_after={at}"));
    assert!(after.contains(&sample["id"].as_i64().unwrap()));
    assert_eq!(
        after,
        db_ids(worker, 1, "AND created_at >= ?1", &[at.clone().into()])
    );
    let before = all_ids(worker, 0, &format!("created_before={at}"));
    assert!(!before.contains(&sample["id"].as_i64().unwrap()));
    assert_eq!(
        before,
        db_ids(worker, 1, "AND created_at < ?1", &[at.clone().into()])
    );

    // An offset names the same instant; a date means midnight UTC.
    let window = all_ids(
        worker,
        0,
        "created_after=2026-09-01T02:00:00%2B02:00&created_before=2026-10-01",
    );
    assert_eq!(
        window,
        db_ids(
            worker,
            1,
            "AND created_at >= '2026-09-01T00:00:00Z' AND created_at < '2026-10-01T00:00:00Z'",
            &[]
        )
    );
    assert!(!window.is_empty());
    let empty = list(worker, 0, "created_after=2030-01-01");
    assert_eq!(empty["data"], serde_json::json!([]));
}

#[test]
fn filters_combine() {
    let worker = worker();
    let merchant = worker.credentials.institutions[1].merchant_ids[0];
    let ids = all_ids(
        worker,
        1,
        &format!(
            "merchant_id={merchant}&status=paid&created_after=2026-08-01&created_before=2026-11-01"
        ),
    );
    let expected = db_ids(
        worker,
        2,
        "AND merchant_id = ?1 AND status = 'paid' AND created_at >= '2026-08-01T00:00:00Z' \
         AND created_at < '2026-11-01T00:00:00Z'",
        &[merchant.into()],
    );
    assert!(!expected.is_empty());
    assert_eq!(ids, expected);
}

#[test]
fn an_institution_never_sees_another_institutions_rows() {
    let worker = worker();
    let theirs = db_ids(worker, 1, "", &[]);
    let their_merchant = worker.credentials.institutions[0].merchant_ids[0];
    let their_reference: String = worker
        .database()
        .query_row(
            "SELECT external_reference FROM transactions WHERE institution_id = 1 \
             AND external_reference IS NOT NULL LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    for query in [
        format!("id={}", theirs[0]),
        format!("merchant_id={their_merchant}"),
        format!("external_reference={their_reference}"),
        format!("merchant_id={their_merchant}&status=paid"),
    ] {
        let page = list(worker, 1, &query);
        assert_eq!(page["data"], serde_json::json!([]), "{query}");
        assert_eq!(page["has_more"], false);
    }
    // A cursor taken from the other institution's ids pages only through our own rows.
    let ours: HashSet<i64> = db_ids(worker, 2, "", &[]).into_iter().collect();
    let after_theirs: Vec<i64> = list(
        worker,
        1,
        &format!("limit=100&starting_after={}", theirs[3]),
    )["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_i64().unwrap())
        .collect();
    assert!(!after_theirs.is_empty());
    assert!(after_theirs.iter().all(|id| ours.contains(id)));
    let merchants: HashSet<i64> = worker.credentials.institutions[1]
        .merchant_ids
        .iter()
        .copied()
        .collect();
    for t in list(worker, 1, "limit=100")["data"].as_array().unwrap() {
        assert!(merchants.contains(&t["merchant_id"].as_i64().unwrap()));
    }
}

#[test]
fn invalid_parameters_are_400_naming_the_parameter() {
    let worker = worker();
    let token = worker.institution_token(0);
    for (query, name) in [
        ("id=abc", "id"),
        ("id=1.5", "id"),
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=-1", "limit"),
        ("starting_after=x", "starting_after"),
        ("merchant_id=", "merchant_id"),
        ("created_after=yesterday", "created_after"),
        ("created_before=2026-02-30", "created_before"),
        ("created_before=2026-11-21T10:00:00", "created_before"),
        ("status=unknown", "status"),
        ("status=PAID", "status"),
        ("colour=blue", "colour"),
        ("limit=5&limit=6", "limit"),
        ("cursor=5", "cursor"),
    ] {
        let reply = worker.get(&format!("{SPEC}?{query}"), Some(&token), SPEC);
        let description = reply.assert_error(400, "invalid_request");
        assert!(description.contains(name), "{query}: {description}");
    }
}

#[test]
fn authentication_comes_before_parameter_checks() {
    let worker = worker();
    worker
        .get(&format!("{SPEC}?limit=0"), None, SPEC)
        .assert_error(401, "invalid_client");
}

fn urlencode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
