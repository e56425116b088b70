//! `GET /v1/events`, the events feed: every event of the institution, newest first, exactly as
//! its deliveries send it; paged by cursor; filtered by type, transaction and time; its own
//! scope; one institution never sees another's. `GET /v1/events/{id}`: one of them, by its id.

use payrail_tests::hooks::{act, payment};
use payrail_tests::Worker;
use serde_json::{json, Value};

const SPEC: &str = "/v1/events";

/// A token of a new client of institution `index` with just `events:read`.
fn feed_token(worker: &Worker, index: usize) -> String {
    let (id, secret) = worker.new_client(index, "Event feed reader", &["events:read"]);
    worker.token(&id, &secret)
}

fn feed(worker: &Worker, token: &str, query: &str) -> Value {
    let reply = worker.get(&format!("/v1/events?{query}"), Some(token), SPEC);
    assert_eq!(reply.status, 200, "{query}: {}", reply.text);
    reply.json()
}

#[test]
fn the_feed_pages_every_event_newest_first_as_delivered() {
    let worker = Worker::shared();
    let token = feed_token(worker, 0);
    let id = payment(worker, 0, "FEED-1");
    act(worker, 0, id, "pay", json!({"amount": "40.00"}));
    act(worker, 0, id, "settle", json!({}));
    act(worker, 0, id, "refund", json!({"amount": "5.00"}));

    let all = feed(worker, &token, &format!("transaction_id={id}"));
    let types: Vec<&str> = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["payment.refunded", "payment.paid", "payment.succeeded"],
        "newest first"
    );
    assert_eq!(all["has_more"], false);
    assert!(all["next_cursor"].is_null());
    // Each event exactly as its deliveries send it.
    let newest = &all["data"][0];
    let stored: String = worker
        .database()
        .query_row(
            "SELECT payload FROM events WHERE id = ?1",
            [newest["id"].as_str().unwrap()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(newest, &serde_json::from_str::<Value>(&stored).unwrap());
    assert_eq!(newest["data"]["id"], id);

    // One at a time: the cursor walks the same three, none twice.
    let mut seen = Vec::new();
    let mut query = format!("transaction_id={id}&limit=1");
    loop {
        let page = feed(worker, &token, &query);
        assert_eq!(page["data"].as_array().unwrap().len(), 1);
        seen.push(page["data"][0]["id"].clone());
        if page["has_more"] == false {
            assert!(page["next_cursor"].is_null());
            break;
        }
        assert_eq!(page["next_cursor"], page["data"][0]["id"]);
        query = format!(
            "transaction_id={id}&limit=1&starting_after={}",
            page["next_cursor"].as_str().unwrap()
        );
    }
    let ids: Vec<Value> = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].clone())
        .collect();
    assert_eq!(seen, ids);

    // By type, and by time: nothing of this payment before the year 2000, all of it after.
    let paid = feed(
        worker,
        &token,
        &format!("transaction_id={id}&type=payment.paid"),
    );
    assert_eq!(paid["data"].as_array().unwrap().len(), 1);
    assert_eq!(paid["data"][0]["type"], "payment.paid");
    let old = feed(
        worker,
        &token,
        &format!("transaction_id={id}&created_before=2000-01-01"),
    );
    assert!(old["data"].as_array().unwrap().is_empty());
    let recent = feed(
        worker,
        &token,
        &format!("transaction_id={id}&created_after=2000-01-01"),
    );
    assert_eq!(recent["data"].as_array().unwrap().len(), 3);
}

#[test]
fn the_feed_is_the_institutions_own_behind_its_own_scope() {
    let worker = Worker::shared();
    let id = payment(worker, 0, "FEED-2");
    act(worker, 0, id, "pay", json!({"amount": "40.00"}));
    // Another institution's reader sees none of it, by id or in its whole feed.
    let other = feed_token(worker, 1);
    let theirs = feed(worker, &other, &format!("transaction_id={id}"));
    assert!(theirs["data"].as_array().unwrap().is_empty());
    let everything = feed(worker, &other, "limit=100");
    assert!(everything["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["data"]["id"] != id));
    // Another institution's event as a cursor reads as the end, even to a reader with older
    // events of its own: it tells nothing of where that event stands.
    let own = payment(worker, 1, "FEED-2-OWN");
    act(worker, 1, own, "pay", json!({"amount": "10.00"}));
    let later = payment(worker, 0, "FEED-2-LATER");
    act(worker, 0, later, "pay", json!({"amount": "10.00"}));
    let not_theirs = feed(
        worker,
        &feed_token(worker, 0),
        &format!("transaction_id={later}"),
    )["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let older = feed(worker, &other, &format!("transaction_id={own}"));
    assert_eq!(older["data"].as_array().unwrap().len(), 1, "{older}");
    let past = feed(worker, &other, &format!("starting_after={not_theirs}"));
    assert_eq!(past["data"], json!([]), "{past}");
    assert_eq!(past["has_more"], false);
    // The scope is its own: a transactions reader is refused.
    let reply = worker.get("/v1/events", Some(&worker.institution_token(0)), SPEC);
    let why = reply.assert_error(403, "insufficient_scope");
    assert!(why.contains("events:read"), "{why}");
    // Bad parameters are named; a bad token is refused before them.
    let token = feed_token(worker, 0);
    for (query, named) in [
        ("type=payment.lost", "type"),
        ("starting_after=12", "starting_after"),
        ("limit=0", "limit"),
        ("transaction_id=abc", "transaction_id"),
        ("created_after=yesterday", "created_after"),
        ("colour=red", "colour"),
    ] {
        let reply = worker.get(&format!("/v1/events?{query}"), Some(&token), SPEC);
        let why = reply.assert_error(400, "invalid_request");
        assert!(why.contains(named), "{query}: {why}");
    }
    let reply = worker.get("/v1/events?type=payment.lost", Some("at_not-a-token"), SPEC);
    reply.assert_error(401, "invalid_client");
}

#[test]
fn an_event_is_found_by_its_id_as_delivered_and_only_by_its_own_institution() {
    let worker = Worker::shared();
    const ONE: &str = "/v1/events/{id}";
    let token = feed_token(worker, 0);
    let id = payment(worker, 0, "FEED-3");
    act(worker, 0, id, "pay", json!({"amount": "40.00"}));
    let listed = feed(worker, &token, &format!("transaction_id={id}"))["data"][0].clone();
    let event_id = listed["id"].as_str().unwrap().to_owned();

    // Exactly the feed's item (which is exactly the delivered body), with a bookmark.
    let reply = worker.get(&format!("/v1/events/{event_id}"), Some(&token), ONE);
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json(), listed);
    assert!(reply.header("payrail-bookmark").is_some());

    // Another institution's reader: exactly like an unknown id, or one that cannot be an event's.
    let other = feed_token(worker, 1);
    for (token, id) in [
        (&other, event_id.as_str()),
        (&token, "evt_doesnotexist"),
        (&token, "12"),
        (&token, "evt_%2F"),
    ] {
        let reply = worker.get(&format!("/v1/events/{id}"), Some(token), ONE);
        let why = reply.assert_error(404, "not_found");
        assert_eq!(why, "no such event", "{id}");
    }
    // Its own scope, and a token before anything else.
    let reply = worker.get(
        &format!("/v1/events/{event_id}"),
        Some(&worker.institution_token(0)),
        ONE,
    );
    let why = reply.assert_error(403, "insufficient_scope");
    assert!(why.contains("events:read"), "{why}");
    for id in [event_id.as_str(), "12"] {
        let reply = worker.get(&format!("/v1/events/{id}"), Some("at_not-a-token"), ONE);
        reply.assert_error(401, "invalid_client");
    }
}
