//! `GET /v1/merchants` and `GET /v1/merchants/{id}` over real HTTP.

use payrail_tests::Worker;
use serde_json::Value;

/// The worker of the tests that compare the API with the demo data as seeded (every merchant,
/// every transaction): shared only by tests that change neither (this module and
/// `transactions`), so nothing is added or changed between two reads.
fn worker() -> &'static Worker {
    Worker::own("demo-data")
}

const LIST: &str = "/v1/merchants";
const ONE: &str = "/v1/merchants/{id}";

fn list(worker: &Worker, institution: usize, query: &str) -> Value {
    let token = worker.institution_token(institution);
    let reply = worker.get(&format!("{LIST}?{query}"), Some(&token), LIST);
    assert_eq!(reply.status, 200, "{query}: {}", reply.text);
    reply.json()
}

fn ids(page: &Value) -> Vec<i64> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_i64().unwrap())
        .collect()
}

#[test]
fn lists_exactly_the_institutions_merchants_newest_first() {
    let worker = worker();
    for index in [0, 1] {
        let page = list(worker, index, "");
        let mut expected = worker.credentials.institutions[index].merchant_ids.clone();
        expected.reverse();
        assert_eq!(ids(&page), expected);
        assert_eq!(page["has_more"], false);
        assert_eq!(page["next_cursor"], Value::Null);
    }
}

#[test]
fn merchants_carry_every_field() {
    let worker = worker();
    let page = list(worker, 0, "");
    for m in page["data"].as_array().unwrap() {
        assert_eq!(m["object"], "merchant");
        assert!(m["public_key"].as_str().unwrap().starts_with("pk_live_"));
        assert_eq!(
            m["onboarding_complete"],
            m["onboarding_status"] == "completed",
            "{m}"
        );
    }
    // The demo data shows more than one status and onboarding status.
    let statuses: std::collections::HashSet<&str> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["status"].as_str().unwrap())
        .collect();
    assert!(statuses.len() > 1, "{statuses:?}");
}

#[test]
fn pages_with_limit_and_starting_after() {
    let worker = worker();
    let all = ids(&list(worker, 0, ""));
    let first = list(worker, 0, "limit=2");
    assert_eq!(ids(&first), all[..2]);
    assert_eq!(first["has_more"], true);
    assert_eq!(first["next_cursor"], all[1]);
    let second = list(worker, 0, &format!("limit=2&starting_after={}", all[1]));
    assert_eq!(ids(&second), all[2..4]);
    let last = list(worker, 0, &format!("limit=100&starting_after={}", all[3]));
    assert_eq!(ids(&last), all[4..]);
    assert_eq!(last["has_more"], false);
    assert_eq!(last["next_cursor"], Value::Null);
}

#[test]
fn filters_by_id_and_psp_reference() {
    let worker = worker();
    let page = list(worker, 1, "");
    let target = &page["data"][2];
    let by_id = list(worker, 1, &format!("id={}", target["id"]));
    assert_eq!(by_id["data"], serde_json::json!([target]));
    let reference = target["psp_reference_id"].as_str().unwrap();
    let by_reference = list(worker, 1, &format!("psp_reference_id={reference}"));
    assert_eq!(by_reference["data"], serde_json::json!([target]));
    // The other institution sees neither.
    assert_eq!(
        list(worker, 0, &format!("id={}", target["id"]))["data"],
        serde_json::json!([])
    );
    assert_eq!(
        list(worker, 0, &format!("psp_reference_id={reference}"))["data"],
        serde_json::json!([])
    );
}

#[test]
fn retrieves_one_merchant() {
    let worker = worker();
    let token = worker.institution_token(0);
    let listed = &list(worker, 0, "")["data"][0];
    let reply = worker.get(
        &format!("/v1/merchants/{}", listed["id"]),
        Some(&token),
        ONE,
    );
    assert_eq!(reply.status, 200);
    assert_eq!(&reply.json(), listed);
}

#[test]
fn another_institutions_merchant_reads_exactly_like_an_unknown_one() {
    let worker = worker();
    let token = worker.institution_token(0);
    let theirs = worker.credentials.institutions[1].merchant_ids[0];
    let other = worker.get(&format!("/v1/merchants/{theirs}"), Some(&token), ONE);
    other.assert_error(404, "not_found");
    for unknown in ["999999", "abc", "0", "-1", "1.0"] {
        let reply = worker.get(&format!("/v1/merchants/{unknown}"), Some(&token), ONE);
        reply.assert_error(404, "not_found");
        assert_eq!(reply.text, other.text, "{unknown}");
    }
}

#[test]
fn invalid_parameters_are_400_naming_the_parameter() {
    let worker = worker();
    let token = worker.institution_token(0);
    for (query, name) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("id=abc", "id"),
        ("starting_after=-5", "starting_after"),
        ("psp_reference_id=", "psp_reference_id"),
        ("status=active", "status"),
        ("page_size=10", "page_size"),
    ] {
        let reply = worker.get(&format!("{LIST}?{query}"), Some(&token), LIST);
        let description = reply.assert_error(400, "invalid_request");
        assert!(description.contains(name), "{query}: {description}");
    }
}

#[test]
fn merchants_need_a_token() {
    let worker = worker();
    worker
        .get(LIST, None, LIST)
        .assert_error(401, "invalid_client");
    worker
        .get("/v1/merchants/1", None, ONE)
        .assert_error(401, "invalid_client");
}
