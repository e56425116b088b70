//! Partner reads through D1's Sessions API: lists may be answered by a replica, lookups by id by
//! the primary, and a client that sends back an answer's `Payrail-Bookmark` reads at least what
//! that answer saw. Under `wrangler dev` every session reads the one local database, so these
//! tests hold the rule's visible parts: a lookup after a write sees it, a new token reads at
//! once, bookmarks go out and come back, and a bad one is refused by name. The portal's read
//! pages read through a session too, and show an admin's own change at once.

use payrail_tests::hooks::{act, payment};
use payrail_tests::http::Reply;
use payrail_tests::Worker;
use reqwest::Method;
use serde_json::json;

const SPEC: &str = "/v1/transactions";

fn with_bookmark(worker: &Worker, path: &str, token: &str, bookmark: &str) -> Reply {
    let request = worker
        .request(Method::GET, path)
        .bearer_auth(token)
        .header("Payrail-Bookmark", bookmark);
    worker.send(request, Some(SPEC))
}

#[test]
fn a_lookup_right_after_a_change_sees_it_and_answers_carry_a_bookmark() {
    let worker = Worker::shared();
    let (client, secret) = worker.new_client(0, "Read sessions", &["transactions:read"]);
    // A token issued a moment ago reads at once (a replica that has not seen it yet is not
    // taken for a refusal).
    let token = worker.token(&client, &secret);
    let id = payment(worker, 0, "READ-1");
    act(worker, 0, id, "pay", json!({"amount": "40.00"}));
    act(worker, 0, id, "settle", json!({}));
    let lookup = worker.get(&format!("{SPEC}?id={id}"), Some(&token), SPEC);
    assert_eq!(lookup.status, 200, "{}", lookup.text);
    assert_eq!(
        lookup.json()["data"][0]["status"],
        "paid",
        "{}",
        lookup.text
    );
    let bookmark = lookup
        .header("payrail-bookmark")
        .expect("a bookmark on every partner read")
        .to_owned();

    // Sent back, it reads at least as new.
    let list = with_bookmark(worker, &format!("{SPEC}?limit=5"), &token, &bookmark);
    assert_eq!(list.status, 200, "{}", list.text);
    assert!(list.header("payrail-bookmark").is_some());
    let seen = with_bookmark(worker, &format!("{SPEC}?id={id}"), &token, &bookmark);
    assert_eq!(seen.json()["data"][0]["status"], "paid", "{}", seen.text);

    // The events feed and the merchant lookup answer with one too.
    let (feeder, feed_secret) = worker.new_client(0, "Read sessions feed", &["events:read"]);
    let feed_token = worker.token(&feeder, &feed_secret);
    let feed = worker.get(
        &format!("/v1/events?transaction_id={id}"),
        Some(&feed_token),
        "/v1/events",
    );
    assert_eq!(feed.status, 200, "{}", feed.text);
    assert_eq!(
        feed.json()["data"].as_array().unwrap().len(),
        2,
        "{}",
        feed.text
    );
    assert!(feed.header("payrail-bookmark").is_some());
}

#[test]
fn a_bookmark_that_is_not_one_is_refused_by_name() {
    let worker = Worker::shared();
    let token = worker.institution_token(0);
    for bad in ["not a bookmark", "x".repeat(200).as_str(), "ab;cd"] {
        let reply = with_bookmark(worker, &format!("{SPEC}?limit=1"), &token, bad);
        let message = reply.assert_error(400, "invalid_request");
        assert!(message.contains("Payrail-Bookmark"), "{message}");
    }
    // Well shaped but never given out: the primary answers (it is newer than any bookmark),
    // never a 500.
    let forged = "00000000-00000000-00000000-00000000000000000000000000000000";
    let reply = with_bookmark(worker, &format!("{SPEC}?limit=1"), &token, forged);
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(reply.header("payrail-bookmark").is_some());
}

#[test]
fn the_portals_read_pages_read_through_a_session_and_show_an_admins_own_change() {
    let worker = Worker::shared();
    let portal = worker.portal_login(0);
    let name = "Read through a session";
    let created = worker.portal(
        Method::POST,
        "/portal/api/clients",
        Some(&portal),
        Some(&json!({"name": name, "scopes": ["transactions:read"]})),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    assert!(
        !created.headers.contains_key("payrail-bookmark"),
        "a write is the primary's, outside any session"
    );
    // Read right after the write: the JSON list and the page both show it, each answered
    // through a session (its bookmark on the answer).
    let list = worker.portal(Method::GET, "/portal/api/clients", Some(&portal), None);
    assert_eq!(list.status, 200, "{}", list.text);
    assert!(list.text.contains(name), "{}", list.text);
    let page = worker.portal_page(&portal, "/portal/developers");
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.text.contains(name));
    for reply in [&list, &page] {
        let bookmark = reply.headers.get("payrail-bookmark");
        assert!(
            bookmark.is_some_and(|b| !b.is_empty()),
            "{:?}",
            reply.headers
        );
    }
}
