//! An institution's money in its own object (a SQLite-backed Durable Object): the operator's
//! copy moves every money table of one institution into its object and compares both sides;
//! once the directory holds the institution there, the partner API's money reads (the
//! transactions list and lookups, the events feed and an event by id) answer from the object,
//! exactly as they answered from D1, while other institutions keep reading from D1.

use std::sync::OnceLock;
use std::time::Duration;

use payrail_tests::chain::{chains, Anvil, TEST_XPUB};
use payrail_tests::hooks::{act, payment};
use payrail_tests::http::Reply;
use payrail_tests::{eventually, Worker};
use reqwest::Method;
use serde_json::{json, Value};

/// The operator's token this worker is started with.
const OPERATOR_TOKEN: &str = "op_test_4b1d2c9e8f7a6b5c4d3e2f1a0b9c8d7e";

/// A worker of its own: its directory is written directly, and it has the operator's API.
fn worker() -> &'static Worker {
    static WORKER: OnceLock<Worker> = OnceLock::new();
    WORKER.get_or_init(with_operator)
}

/// Another, for the test that breaks a row.
fn second_worker() -> &'static Worker {
    static WORKER: OnceLock<Worker> = OnceLock::new();
    WORKER.get_or_init(with_operator)
}

/// A sandbox worker with the operator's API.
fn with_operator() -> Worker {
    Worker::start_with_vars(
        "sandbox",
        3600,
        &[("PAYRAIL_OPERATOR_TOKEN", OPERATOR_TOKEN)],
    )
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

/// Moves `institution`'s money into its object (the operator's move: frozen in D1, copied and
/// compared, its books carried, the directory pointed at the object): the move's report.
fn hold(worker: &Worker, institution: i64) -> Value {
    let reply = move_in(worker, institution);
    assert_eq!(reply.status, 200, "{}", reply.text);
    let report = reply.json();
    assert_eq!(report["moved"], true, "{report}");
    assert_eq!(report["copy"]["verified"], true, "{report}");
    report
}

/// Where the directory says `institution`'s money lives, and since when a move of it runs.
fn store_of(worker: &Worker, institution: i64) -> (String, Option<i64>) {
    worker
        .database()
        .query_row(
            "SELECT store, moving_since FROM institutions WHERE id = ?1",
            [institution],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
}

/// `POST /operator/institutions/{id}/move` with the operator's token.
fn move_in(worker: &Worker, institution: i64) -> Reply {
    worker.send(
        worker
            .request(
                Method::POST,
                &format!("/operator/institutions/{institution}/move"),
            )
            .bearer_auth(OPERATOR_TOKEN),
        None,
    )
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

    // D1's copy is changed so that an answer read from it would show, then the directory holds
    // the institution in its object.
    let db = worker.database();
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
    db.execute(
        "UPDATE institutions SET store = 'object' WHERE id = ?1",
        [id],
    )
    .unwrap();
    // From then on D1 refuses any write of its money rows, whoever makes it.
    let frozen = db
        .execute(
            "UPDATE transactions SET external_reference = 'LATER' WHERE institution_id = ?1",
            [id],
        )
        .unwrap_err();
    assert!(
        frozen.to_string().contains("institution money moving"),
        "{frozen}"
    );
    let after = reads(worker, &token, &paths);
    for ((path, status, body), (_, was_status, was)) in after.iter().zip(&before) {
        assert_eq!(status, was_status, "{path}: {body}");
        assert_eq!(body, was, "{path}");
    }
    // Refused now: the object's rows are the money.
    let refused = copy(worker, id, Some(OPERATOR_TOKEN));
    assert_eq!(refused.status, 409, "{}", refused.text);

    // Another institution still reads from D1, and never the held institution's rows: its
    // lookups of them find nothing, like unknown ones.
    let (other_client, other_secret) =
        worker.new_client(1, "Shard reads", &["transactions:read", "events:read"]);
    let other = worker.token(&other_client, &other_secret);
    let list = worker.get("/v1/transactions?limit=1", Some(&other), "/v1/transactions");
    assert_eq!(list.status, 200, "{}", list.text);
    assert_eq!(list.json()["data"].as_array().map(Vec::len), Some(1));
    let theirs = worker.get(
        &format!("/v1/transactions?id={paid}"),
        Some(&other),
        "/v1/transactions",
    );
    assert_eq!(theirs.json()["data"], json!([]), "{}", theirs.text);
    let theirs = worker.get(
        &format!("/v1/events/{event}"),
        Some(&other),
        "/v1/events/{id}",
    );
    assert_eq!(theirs.status, 404, "{}", theirs.text);
    let stale = worker.get(
        "/v1/transactions?external_reference=STALE",
        Some(&token),
        "/v1/transactions",
    );
    assert_eq!(stale.json()["data"], json!([]), "{}", stale.text);
}

/// A copy is one transaction per page in the object: a row the object refuses in the middle of
/// a page leaves none of that page's rows, the pages before it whole, and the copy answers
/// which table it stopped at and why.
#[test]
fn a_copy_refused_in_the_middle_of_a_page_keeps_no_row_of_it() {
    let worker = second_worker();
    let id = institution_id(worker, 1);
    let db = worker.database();
    let ids: Vec<i64> = db
        .prepare("SELECT id FROM transactions WHERE institution_id = ?1 ORDER BY id")
        .unwrap()
        .query_map([id], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(
        ids.len() > 200,
        "the demo institution has {} payments",
        ids.len()
    );
    // A row D1 holds but the object's schema refuses, in the middle of the second page (rows
    // 100 to 199 in key order).
    db.execute_batch("PRAGMA ignore_check_constraints = ON")
        .unwrap();
    db.execute(
        "UPDATE transactions SET status = 'bogus' WHERE id = ?1",
        [ids[150]],
    )
    .unwrap();
    let refused = copy(worker, id, Some(OPERATOR_TOKEN));
    assert_eq!(refused.status, 409, "{}", refused.text);
    let said = refused.json()["error_description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(said.contains("stopped at transactions"), "{said}");
    assert!(said.contains("from 100"), "{said}");
    assert!(said.contains("CHECK constraint failed"), "{said}");

    // Read through the partner API once the directory holds the institution in its object:
    // exactly the first page.
    db.execute(
        "UPDATE institutions SET store = 'object' WHERE id = ?1",
        [id],
    )
    .unwrap();
    let token = worker.institution_token(1);
    let list = worker.get(
        "/v1/transactions?limit=100",
        Some(&token),
        "/v1/transactions",
    );
    assert_eq!(list.status, 200, "{}", list.text);
    let body = list.json();
    let held: Vec<i64> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_i64().unwrap())
        .rev()
        .collect();
    assert_eq!(held, ids[..100].to_vec());
    assert_eq!(body["has_more"], false, "{body}");
}

/// A third worker, for the checkout test (its institution 0 is held in its object from the
/// start of the test).
fn checkout_worker() -> &'static Worker {
    static WORKER: OnceLock<Worker> = OnceLock::new();
    WORKER.get_or_init(with_operator)
}

/// A checkout of an institution whose money is held in its object: the directory counts it and
/// indexes it, its session, transaction and idempotency key are stored in the object alone; the
/// hosted page, its status poll and a change of the way to pay read and write it there; racing
/// requests with one idempotency key make one payment; the partner API lists it from the
/// object.
#[test]
fn a_checkout_of_an_institution_held_in_its_object_lives_there() {
    let worker = checkout_worker();
    let id = institution_id(worker, 0);
    // A checkout made before the move: the worker remembers the key's merchant as held in D1,
    // and that memo must not store the next session in the wrong place.
    let key = worker.credentials.institutions[0].merchants[0]
        .public_key
        .clone();
    let early = worker.checkout_session(&json!({
        "publicKey": key, "amount": "12.00", "currency": "EUR", "title": "Before the move",
        "externalReference": "HELD-0", "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    }));
    let before = early["transaction_id"].as_i64().unwrap();
    let early_id = early["id"].as_str().unwrap().to_owned();
    hold(worker, id);
    let options = |reference: &str, idempotency: Option<&str>| {
        let mut options = json!({
            "publicKey": key, "amount": "25.00", "currency": "EUR", "title": "Held order",
            "externalReference": reference, "redirectUrl": "https://shop.example/done",
            "allowCrypto": true
        });
        if let Some(k) = idempotency {
            options["idempotencyKey"] = json!(k);
        }
        options
    };

    // Four racing requests with one idempotency key: one session, one payment.
    let replies: Vec<Reply> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let body = options("HELD-1", Some("held-key-1"));
                scope.spawn(move || {
                    worker.post_json("/checkout/sessions", &body, None, "/checkout/sessions")
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for reply in &replies {
        assert!(matches!(reply.status, 200 | 201), "{}", reply.text);
    }
    assert_eq!(replies.iter().filter(|r| r.status == 201).count(), 1);
    let session = replies[0].json();
    let session_id = session["id"].as_str().unwrap().to_owned();
    let transaction = session["transaction_id"].as_i64().unwrap();
    // Its id is the object's own, above every id D1 gives: unique across institutions.
    assert_eq!(transaction, id << 32, "{session}");
    for reply in &replies {
        assert_eq!(reply.json()["id"], session["id"], "{}", reply.text);
        assert_eq!(reply.json()["transaction_id"], session["transaction_id"]);
    }

    // The directory holds its index entry and none of its money rows.
    let db = worker.database();
    let count = |sql: &str| -> i64 { db.query_row(sql, [&session_id], |r| r.get(0)).unwrap() };
    assert_eq!(
        count("SELECT count(*) FROM checkout_index WHERE session_id = ?1"),
        1
    );
    // The losers' index entries were given back: one entry for the one checkout made since the
    // copy (the copy indexed the earlier ones).
    let since: i64 = db
        .query_row(
            "SELECT count(*) FROM checkout_index x WHERE x.institution_id = ?1 \
             AND NOT EXISTS (SELECT 1 FROM checkout_sessions s WHERE s.id = x.session_id)",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(since, 1, "index entries of sessions made in the object");
    assert_eq!(
        count("SELECT count(*) FROM checkout_sessions WHERE id = ?1"),
        0
    );
    assert_eq!(
        count("SELECT count(*) FROM idempotency_keys WHERE session_id = ?1"),
        0
    );
    let d1_payments: i64 = db
        .query_row(
            "SELECT count(*) FROM transactions WHERE external_reference = 'HELD-1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(d1_payments, 0);

    // The partner API reads it from the object: exactly one payment for the reference.
    let (client, secret) = worker.new_client(0, "Held reads", &["transactions:read"]);
    let token = worker.token(&client, &secret);
    let listed = worker.get(
        "/v1/transactions?external_reference=HELD-1",
        Some(&token),
        "/v1/transactions",
    );
    assert_eq!(listed.status, 200, "{}", listed.text);
    let data = listed.json()["data"].clone();
    assert_eq!(data.as_array().unwrap().len(), 1, "{data}");
    assert_eq!(data[0]["id"], transaction);
    assert_eq!(data[0]["status"], "pending");
    assert_eq!(data[0]["amount"]["expected"], "25.00", "{data}");

    // The hosted page and its status poll.
    let page = worker.send(
        worker.request(Method::GET, &format!("/checkout/{session_id}")),
        None,
    );
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.text.contains("Held order"), "{}", page.text);
    let merchant = &worker.credentials.institutions[0].merchants[0].name;
    assert!(page.text.contains(merchant.as_str()), "{merchant}");
    let status = worker.send(
        worker.request(Method::GET, &format!("/checkout/{session_id}/status")),
        None,
    );
    assert_eq!(status.status, 200, "{}", status.text);
    assert_eq!(status.json()["status"], "pending", "{}", status.text);

    // Another way to pay, chosen on the page: written in the object.
    let chosen = session_methods(&page.text)
        .into_iter()
        .find(|(_, pressed)| !pressed)
        .map(|(method, _)| method)
        .expect("a second way to pay");
    let changed = worker.send(
        worker
            .request(Method::POST, &format!("/checkout/{session_id}/method"))
            .form(&[("method", chosen.as_str())]),
        None,
    );
    assert_eq!(changed.status, 303, "{}", changed.text);
    let (asset, network) = chosen.split_once(':').unwrap();
    let listed = worker.get(
        &format!("/v1/transactions?id={transaction}"),
        Some(&token),
        "/v1/transactions",
    );
    assert_eq!(listed.json()["data"][0]["asset"], asset, "{}", listed.text);
    assert_eq!(
        listed.json()["data"][0]["networks"]["payment"],
        network,
        "{}",
        listed.text
    );

    // The checkout made before the move was copied with the rest, and reads from the object:
    // its page, its poll and the partner API. D1's copy of it can no longer change: D1 refuses
    // any write of a held institution's money rows, whoever makes it.
    for write in [
        "UPDATE checkout_sessions SET title = 'STALE' WHERE id = ?1",
        "UPDATE transactions SET raw_status = 'expired', status = 'failed' WHERE id = ?1",
    ] {
        let key = if write.contains("checkout_sessions") {
            early_id.clone()
        } else {
            before.to_string()
        };
        let refused = db.execute(write, [&key]).unwrap_err();
        assert!(
            refused.to_string().contains("institution money moving"),
            "{refused}"
        );
    }
    let earlier = worker.get(
        &format!("/v1/transactions?id={before}"),
        Some(&token),
        "/v1/transactions",
    );
    assert_eq!(earlier.json()["data"][0]["external_reference"], "HELD-0");
    assert_eq!(earlier.json()["data"][0]["status"], "pending");
    let page = worker.send(
        worker.request(Method::GET, &format!("/checkout/{early_id}")),
        None,
    );
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.text.contains("Before the move"), "{}", page.text);
    assert!(!page.text.contains("STALE"));
    let status = worker.send(
        worker.request(Method::GET, &format!("/checkout/{early_id}/status")),
        None,
    );
    assert_eq!(status.json()["status"], "pending", "{}", status.text);

    // An unknown checkout is still unknown.
    let unknown = worker.send(
        worker.request(
            Method::GET,
            "/checkout/cs_0000000000000000000000000000000000000000000/status",
        ),
        None,
    );
    assert_eq!(unknown.status, 404, "{}", unknown.text);
}

/// The ways to pay the hosted page offers (its buttons' `ASSET:network` values), each with
/// whether it is the one chosen.
fn session_methods(html: &str) -> Vec<(String, bool)> {
    html.match_indices("name=\"method\" value=\"")
        .map(|(at, found)| {
            let rest = &html[at + found.len()..];
            let value = rest[..rest.find('"').unwrap()].to_owned();
            let pressed = rest[..rest.find('>').unwrap()].contains("aria-pressed=\"true\"");
            (value, pressed)
        })
        .collect()
}

/// A fourth worker, for the lifecycle and webhooks of a held institution.
fn lifecycle_worker() -> &'static Worker {
    static WORKER: OnceLock<Worker> = OnceLock::new();
    WORKER.get_or_init(with_operator)
}

/// The sandbox's lifecycle on a payment of an institution held in its object: each change and
/// its event are written in the object, the event goes to the endpoints the directory has for
/// it, delivered signed from the object's deliveries, retried when the receiver fails until it
/// answers, and read back in the events feed; racing changes of one payment: one wins.
#[test]
fn a_held_institutions_payment_changes_and_its_webhooks_come_from_its_object() {
    use payrail_tests::hooks::{assert_signed, endpoint, of_transaction, wait_for};
    use payrail_tests::receiver::{Mode, Receiver};

    let worker = lifecycle_worker();
    let id = institution_id(worker, 0);
    // A checkout that has ended unpaid, moved with the rest: the cron closes it in the object.
    let ended = payment(worker, 0, "HELD-END");
    worker
        .database()
        .execute(
            "UPDATE checkout_sessions SET expires_at = unixepoch() - 120 WHERE transaction_id = ?1",
            [ended],
        )
        .unwrap();
    hold(worker, id);
    let session = worker.portal_login(0);
    let receiver = Receiver::start();
    let (_, secret) = endpoint(worker, &session, &receiver.url("/held"), None);
    let failing = Receiver::start();
    failing.set_mode(Mode::Status(500));
    let (failing_id, failing_secret) = endpoint(
        worker,
        &session,
        &failing.url("/held-failing"),
        Some(&["payment.paid"]),
    );

    let paid = payment(worker, 0, "HELD-LIFE-1");
    assert!(paid >= id << 32, "made in the object: {paid}");
    // Two racing payments of one payment: one wins, the other is refused.
    let replies: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    worker
                        .post_json(
                            &format!("/sandbox/transactions/{paid}/pay"),
                            &json!({"amount": "40.00"}),
                            Some(&worker.sandbox_token(0)),
                            "/sandbox/transactions/{id}/{action}",
                        )
                        .status
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut sorted = replies.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, vec![200, 409], "{replies:?}");
    act(worker, 0, paid, "settle", json!({}));

    // The events, delivered from the object, signed, each once to the endpoint of every type.
    let got = wait_for(&receiver, "two deliveries", 2);
    let mine = of_transaction(&got, paid);
    let mut types: Vec<String> = mine
        .iter()
        .map(|r| r.json()["type"].as_str().unwrap().to_owned())
        .collect();
    types.sort();
    assert_eq!(
        types,
        vec!["payment.paid", "payment.succeeded"],
        "{types:?}"
    );
    for r in &mine {
        assert_signed(r, &secret);
    }
    // The failing endpoint of payment.paid alone: retried until it answers, then once more
    // never.
    let failures = eventually("two failed attempts", Duration::from_secs(60), || {
        let tries = of_transaction(&failing.received(), paid);
        (tries.len() >= 2).then_some(tries)
    });
    assert!(failures.iter().all(|r| r.json()["type"] == "payment.paid"));
    failing.set_mode(Mode::Ok);
    let event_id = failures[0].header("payrail-event-id").unwrap().to_owned();
    let count_after = eventually("the retry to succeed", Duration::from_secs(60), || {
        let tries = of_transaction(&failing.received(), paid);
        (tries.len() > failures.len()).then_some(tries.len())
    });
    for r in of_transaction(&failing.received(), paid) {
        assert_eq!(r.header("payrail-event-id"), Some(event_id.as_str()));
        assert_signed(&r, &failing_secret);
    }

    // The events feed reads them from the object; D1 has none of them.
    let (client, secret) = worker.new_client(0, "Held feed", &["events:read"]);
    let token = worker.token(&client, &secret);
    let feed = worker.get(
        &format!("/v1/events?transaction_id={paid}"),
        Some(&token),
        "/v1/events",
    );
    assert_eq!(feed.status, 200, "{}", feed.text);
    assert_eq!(
        feed.json()["data"].as_array().map(Vec::len),
        Some(2),
        "{}",
        feed.text
    );
    let in_d1: i64 = worker
        .database()
        .query_row(
            "SELECT count(*) FROM events WHERE transaction_id = ?1",
            [paid],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(in_d1, 0);
    assert!(count_after > failures.len());
    // By now (the failing endpoint's retries took seconds) the first endpoint has still had each
    // event once.
    assert_eq!(of_transaction(&receiver.received(), paid).len(), 2);

    // The portal reads the held institution's payments and deliveries from its object.
    let listed = worker.portal(
        Method::GET,
        "/portal/api/payments?external_reference=HELD-LIFE-1",
        Some(&session),
        None,
    );
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(listed.json()["data"][0]["id"], paid, "{}", listed.text);
    let shown = worker.portal(
        Method::GET,
        &format!("/portal/api/payments/{paid}"),
        Some(&session),
        None,
    );
    assert_eq!(shown.status, 200, "{}", shown.text);
    let timeline = shown.json()["timeline"].clone();
    let kinds: Vec<&str> = timeline
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["what"].as_str())
        .collect();
    assert_eq!(
        kinds,
        vec!["created", "payment.succeeded", "payment.paid"],
        "{timeline}"
    );
    let log = payrail_tests::hooks::log(worker, &session, &failing_id, "limit=10");
    let delivery = log["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["event_id"] == event_id.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("the failing endpoint's delivery in its log: {log}"));
    assert_eq!(delivery["status"], "succeeded", "{delivery}");
    let detail = payrail_tests::hooks::detail(worker, &session, delivery["id"].as_str().unwrap());
    let attempts = detail["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), count_after, "{detail}");
    assert_eq!(attempts.last().unwrap()["outcome"], "ok", "{detail}");
    // Resent from the portal: once more, from the object.
    let resent = worker.portal(
        Method::POST,
        &format!(
            "/portal/api/deliveries/{}/resend",
            delivery["id"].as_str().unwrap()
        ),
        Some(&session),
        None,
    );
    assert!(matches!(resent.status, 200 | 201), "{}", resent.text);
    eventually("the resent delivery", Duration::from_secs(30), || {
        (of_transaction(&failing.received(), paid).len() > count_after).then_some(())
    });
    // A refund is checked in the object like D1's: a sandbox payment has nothing on chain to
    // send back.
    let refused = worker.portal(
        Method::POST,
        &format!("/portal/api/payments/{paid}/refunds/preview"),
        Some(&session),
        Some(&json!({"amount": "1.00", "address": "0x52908400098527886E0F7030069857D2E4169EE7"})),
    );
    assert_eq!(refused.status, 409, "{}", refused.text);
    assert!(
        refused.text.contains("not made on a watched chain"),
        "{}",
        refused.text
    );

    // The cron's run reaches the object: the ended checkout is closed there.
    let (reader, reader_secret) = worker.new_client(0, "Held reads", &["transactions:read"]);
    let reads = worker.token(&reader, &reader_secret);
    let read = |id: i64| {
        worker
            .get(
                &format!("/v1/transactions?id={id}"),
                Some(&reads),
                "/v1/transactions",
            )
            .json()["data"][0]
            .clone()
    };
    assert_eq!(read(ended)["raw_status"], "pending");
    worker.cron();
    let closed = read(ended);
    assert_eq!(closed["raw_status"], "expired", "{closed}");
    assert_eq!(read(paid)["raw_status"], "paid");
}

/// The deposit address (lower case) of checkout `session`, held in `institution`'s object, and
/// the base units it asks for.
fn held_deposit(worker: &Worker, institution: i64, session: &str) -> (String, u128) {
    let object = worker
        .object_database(institution)
        .expect("the institution's object");
    let (address, units): (String, String) = object
        .query_row(
            "SELECT address, base_units FROM deposit_watches WHERE session_id = ?1",
            [session],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the checkout's watch, in the object");
    (address, units.parse().unwrap())
}

/// A local chain with USDC and a customer holding 1,000 of it, and a production worker reading
/// it at `depth` as each of `networks` (one node serving them all), with the first demo
/// institution held in its object.
struct HeldOnChain {
    anvil: Anvil,
    usdc: String,
    customer: String,
    worker: Worker,
    institution: i64,
}

fn held_on_chain(depth: u64, networks: &[&str]) -> HeldOnChain {
    let anvil = Anvil::start();
    let usdc = anvil.token("USD Coin", "USDC");
    let customer = anvil.account(1);
    anvil.mint(&usdc, &customer, 1_000_000_000);
    let mut config = serde_json::Map::new();
    for network in networks {
        let one: Value =
            serde_json::from_str(&chains(network, &anvil.url, depth, &[("USDC", &usdc)], &[]))
                .unwrap();
        config.extend(one.as_object().unwrap().clone());
    }
    let worker = Worker::start_with_vars(
        "production",
        3600,
        &[
            ("PAYRAIL_OPERATOR_TOKEN", OPERATOR_TOKEN),
            ("PAYRAIL_EVM_XPUB", TEST_XPUB),
            ("PAYRAIL_CHAINS", &Value::Object(config).to_string()),
        ],
    );
    let institution = institution_id(&worker, 0);
    hold(&worker, institution);
    HeldOnChain {
        anvil,
        usdc,
        customer,
        worker,
        institution,
    }
}

/// A payment made on a real chain to a checkout of an institution held in its object is read
/// from its node, credited and booked in the object alone: racing polls and cron runs credit
/// it once, the cron alone credits another, D1 holds none of it, and the books (D1's and the
/// object's) balance and match the chain.
#[test]
fn a_held_institutions_chain_payment_is_credited_once_in_its_object() {
    const DEPTH: u64 = 3;
    let HeldOnChain {
        anvil,
        usdc,
        customer,
        worker,
        institution,
    } = held_on_chain(DEPTH, &["polygon"]);
    let key = &worker.credentials.institutions[0].merchants[0].public_key;
    let checkout = |amount: &str, reference: &str| -> (String, i64) {
        let session = worker.checkout_session(&json!({
            "publicKey": key, "amount": amount, "currency": "USD", "title": "Held on chain",
            "externalReference": reference, "redirectUrl": "https://shop.example/done",
            "allowCrypto": true
        }));
        (
            session["id"].as_str().unwrap().to_owned(),
            session["transaction_id"].as_i64().unwrap(),
        )
    };
    let status = |session: &str| -> Value {
        let reply = worker.send(
            worker.request(Method::GET, &format!("/checkout/{session}/status")),
            Some("/checkout/{id}/status"),
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()
    };

    let (session, id) = checkout("12.50", "HELD-CHAIN-1");
    assert!(
        id >= institution << 32,
        "a payment id of the object's range"
    );
    let (address, units) = held_deposit(&worker, institution, &session);
    assert_eq!(units, 12_500_000, "12.50 USD at the USDC peg");
    let waiting = status(&session);
    assert_eq!(waiting["chain"]["state"], "waiting", "{waiting}");
    let hash = anvil.transfer(&usdc, &customer, &address, units);
    eventually("the transfer to be seen", Duration::from_secs(20), || {
        let seen = status(&session);
        (seen["chain"]["state"] == "confirming").then_some(seen)
    });
    assert_eq!(worker.transaction(0, id)["raw_status"], "pending");
    anvil.mine(DEPTH);
    // Sixteen polls and four cron runs at once, all finding the payment at its depth.
    std::thread::scope(|scope| {
        for i in 0..20 {
            let (worker, session) = (&worker, &session);
            scope.spawn(move || {
                if i % 5 == 0 {
                    worker.cron();
                } else {
                    let reply = worker.send(
                        worker.request(Method::GET, &format!("/checkout/{session}/status")),
                        Some("/checkout/{id}/status"),
                    );
                    assert_eq!(reply.status, 200, "{}", reply.text);
                }
            });
        }
    });
    eventually("the credit", Duration::from_secs(20), || {
        (status(&session)["status"] == "succeeded").then_some(())
    });
    let t = worker.transaction(0, id);
    assert_eq!(t["raw_status"], "succeeded", "{t}");
    assert_eq!(t["amount"]["gross"], "12.50");
    assert_eq!(t["tx_hashes"]["source"], json!(hash));

    // In the object: one event, and the books of the deposit and the merchant.
    let object = worker.object_database(institution).unwrap();
    assert_eq!(
        events_of(&object, id, "payment.succeeded"),
        1,
        "one payment.succeeded"
    );
    let token = usdc.to_ascii_lowercase();
    assert_eq!(
        posted(&object, &format!("polygon:{token}:custody:{address}")),
        (12_500_000, 0)
    );
    assert_eq!(
        posted(&object, &format!("polygon:{token}:unallocated:{address}")),
        (12_500_000, 12_500_000)
    );
    let merchant: i64 = object
        .query_row(
            "SELECT merchant_id FROM transactions WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        posted(&object, &format!("polygon:{token}:merchant:{merchant}")),
        (0, 12_500_000),
        "credited to the merchant once"
    );
    // D1 holds none of it.
    let d1 = worker.database();
    let in_d1: i64 = d1
        .query_row(
            "SELECT (SELECT count(*) FROM transactions WHERE id = ?1) \
             + (SELECT count(*) FROM ledger_accounts WHERE owner = ?2)",
            rusqlite::params![id, address],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        in_d1, 0,
        "the payment and its books live in the object alone"
    );
    // The cron's reconciliation compares the held deposit with the chain, from the object's
    // books, and records it beside D1's.
    let reconciled = eventually(
        "the held deposit reconciled",
        Duration::from_secs(30),
        || {
            worker.cron();
            d1.query_row(
                "SELECT chain_units, book_units, drift FROM reconciled_addresses \
             WHERE network = 'polygon' AND token = ?1 AND address = ?2",
                [&token, &address],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                    ))
                },
            )
            .ok()
        },
    );
    assert_eq!(
        reconciled,
        ("12500000".to_owned(), "12500000".to_owned(), "0".to_owned()),
        "chain, books, drift"
    );

    // The operator's endpoint serves the object's books as its file holds them: what
    // `xtask reconcile --remote` reads for an institution held in its object.
    served_books_match_the_file(&worker, institution);

    // Another, credited by the cron alone.
    let (second, second_id) = checkout("3.00", "HELD-CHAIN-2");
    let (second_address, units) = held_deposit(&worker, institution, &second);
    anvil.transfer(&usdc, &customer, &second_address, units);
    anvil.mine(DEPTH);
    eventually("the cron's credit", Duration::from_secs(30), || {
        worker.cron();
        (worker.transaction(0, second_id)["raw_status"] == "succeeded").then_some(())
    });
    // The reconciliation reads the object's books too: both deposits hold on chain what the
    // object's books say they hold.
    payrail_tests::books::assert_balanced(&worker, &anvil);
    let report = payrail_tests::books::check(&worker, &anvil);
    let custody: Vec<(String, u128, i128)> = report
        .comparisons
        .iter()
        .filter(|c| c.scope == "custody")
        .flat_map(|c| &c.readings)
        .map(|r| (r.address.clone(), r.chain, r.books))
        .collect();
    for (deposit, units) in [(&address, 12_500_000), (&second_address, 3_000_000)] {
        assert!(
            custody.contains(&(deposit.clone(), units, i128::try_from(units).unwrap())),
            "{deposit} reconciled from the object's books: {custody:?}"
        );
    }
}

/// The payments of an institution held in its object are settled from there: the object asks,
/// the treasury signs, sends and follows, and the object reads the outcome back. A first send
/// that fails at the node after the object asked leaves the request asked and nothing signed;
/// racing cron runs then send it once; one transaction pays the merchant's wallet exactly the
/// payments' net; each payment is `paid` once, with `net = gross − psp_fee − gas_fee`; and the
/// books balance in each store, the object's link to the treasury mirroring the treasury's link
/// to it.
#[test]
fn a_held_institutions_payments_are_settled_once_from_its_object() {
    use payrail_tests::faults::Fault;
    use rust_decimal::Decimal;
    use std::str::FromStr;

    let (s, institution) = held_settling();
    let (worker, anvil) = (&s.worker, &s.anvil);
    let node = s.node.as_ref().unwrap();
    let wallet = super::settlement::wallet();
    let before = anvil.balance_of(&s.usdc, wallet);
    // Two payments of one merchant: one batch.
    let ids = held_paid(
        &s,
        institution,
        &[("30.00", "HELD-SETTLE-1"), ("20.00", "HELD-SETTLE-2")],
    );

    // The portal reads and sets the merchant's balance where it lives: in the object.
    let merchant: i64 = worker
        .object_database(institution)
        .unwrap()
        .query_row(
            "SELECT merchant_id FROM transactions WHERE id = ?1",
            [ids[0].0],
            |r| r.get(0),
        )
        .unwrap();
    let portal = worker.portal_login(0);
    let token = s.usdc.to_ascii_lowercase();
    let balances = worker.portal(
        Method::GET,
        &format!("/portal/api/merchants/{merchant}/balances"),
        Some(&portal),
        None,
    );
    assert_eq!(balances.status, 200, "{}", balances.text);
    let usdc = balances.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["token"] == json!(token))
        .cloned()
        .unwrap_or_else(|| panic!("the USDC balance: {}", balances.text));
    assert_eq!(usdc["base_units"]["balance"], "50000000", "{usdc}");
    let limit = worker.portal(
        Method::PUT,
        &format!("/portal/api/merchants/{merchant}/balances/polygon/{token}/debt-limit"),
        Some(&portal),
        Some(&json!({"debt_limit": "5"})),
    );
    assert_eq!(limit.status, 200, "{}", limit.text);
    let stored: String = worker
        .object_database(institution)
        .unwrap()
        .query_row(
            "SELECT debt_limit FROM ledger_accounts WHERE id = ?1",
            [format!("polygon:{token}:merchant:{merchant}")],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored, "5000000", "the limit on the object's account");

    // The node refuses the treasury's next nonce: the object has asked, nothing is signed.
    node.set("eth_getTransactionCount pending", Fault::Refuse, 100);
    worker.cron();
    let object = || worker.object_database(institution).unwrap();
    let asked: Vec<(String, String, String)> = {
        let db = object();
        let mut statement = db
            .prepare("SELECT id, settlement_id, state FROM object_sends")
            .unwrap();
        statement
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(asked.len(), 1, "one request for the batch: {asked:?}");
    let (request, settlement, state) = asked[0].clone();
    assert_eq!(state, "requested");
    let signed = |db: &rusqlite::Connection| -> i64 {
        db.query_row(
            "SELECT count(*) FROM chain_sends WHERE settlement_id = ?1",
            [&settlement],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(signed(&worker.database()), 0, "nothing signed yet");
    node.release("eth_getTransactionCount pending");

    // Racing cron runs send it once, and it is followed to its depth.
    eventually("the request sent again", Duration::from_secs(60), || {
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| worker.cron());
            }
        });
        (signed(&worker.database()) > 0).then_some(())
    });
    eventually("the payments paid", Duration::from_secs(90), || {
        anvil.mine(1);
        worker.cron();
        ids.iter()
            .all(|(id, _)| worker.transaction(0, *id)["raw_status"] == "paid")
            .then_some(())
    });
    let d1 = worker.database();
    let sends: Vec<(String, String)> = {
        let mut statement = d1
            .prepare("SELECT id, state FROM chain_sends WHERE settlement_id = ?1")
            .unwrap();
        statement
            .query_map([&settlement], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(
        sends,
        vec![(request.clone(), "confirmed".to_owned())],
        "one transaction, under the request's id"
    );
    // The wallet got exactly the payments' net, and each payment says so.
    let db = object();
    let net_units: u128 = {
        let mut statement = db
            .prepare("SELECT units FROM settlement_items WHERE send_id = ?1")
            .unwrap();
        statement
            .query_map([&request], |r| r.get::<_, String>(0))
            .unwrap()
            .map(|u| u.unwrap().parse::<u128>().unwrap())
            .sum()
    };
    assert_eq!(anvil.balance_of(&s.usdc, wallet) - before, net_units);
    for (id, _) in &ids {
        let t = worker.transaction(0, *id);
        let d = |v: &Value| Decimal::from_str(v.as_str().unwrap()).unwrap();
        assert_eq!(
            d(&t["amount"]["net"]),
            d(&t["amount"]["gross"]) - d(&t["amount"]["psp_fee"]) - d(&t["amount"]["gas_fee"]),
            "{t}"
        );
        assert_eq!(events_of(&db, *id, "payment.paid"), 1, "payment.paid once");
    }
    let (state, hash): (String, String) = db
        .query_row(
            "SELECT state, tx_hash FROM object_sends WHERE id = ?1",
            [&request],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(state, "confirmed");
    assert_eq!(
        worker.transaction(0, ids[0].0)["tx_hashes"]["settlement"],
        json!(hash)
    );
    // The portal shows the payment's settlement transaction, from both stores.
    let detail = s.detail(ids[0].0);
    let sent = &detail["settlement_transactions"];
    assert_eq!(sent.as_array().map(Vec::len), Some(1), "{sent}");
    assert_eq!(sent[0]["tx_hash"], json!(hash));
    assert_eq!(sent[0]["state"], "confirmed");
    // And its page, at a desktop's and a phone's width.
    look_at(
        worker,
        &format!("/portal/payments/{}", ids[0].0),
        |browser| {
            let shown = browser.wait_text("#settlement-transactions");
            assert!(
                shown
                    .to_ascii_lowercase()
                    .contains(&hash.to_ascii_lowercase()),
                "the settlement's transaction on the page: {shown}"
            );
            // A paid payment of a held institution is refunded like any other.
            assert_eq!(
                browser.eval("return document.querySelector('form.refund') !== null;"),
                json!(true)
            );
        },
        ("#settlement-transactions", "portal-held-payment-settled"),
    );
    // The books: balanced in each store and against the chain, the links mirroring.
    payrail_tests::books::settle_and_assert_balanced(worker, anvil);
    let token = s.usdc.to_ascii_lowercase();
    let ours = posted(&object(), &format!("polygon:{token}:world:treasury"));
    let theirs = posted(
        &worker.database(),
        &format!("polygon:{token}:world:institution:{institution}"),
    );
    assert_eq!(ours, (0, net_units), "the object paid out through its link");
    assert_eq!(theirs, (net_units, 0), "the treasury's link mirrors it");
}

/// The worker killed (SIGKILL) in the middle of the cron runs that settle a held institution's
/// payments, at each new broadcast, the moment the node has the treasury's transaction and
/// before the worker hears so, and started again on the same D1 and objects: it resumes from
/// what it stored (the object's request, the treasury's signed transaction) and follows the
/// transaction it never heard of, so one transaction pays the merchant's wallet exactly the
/// payment's net, the payment is `paid` once, and the books balance in both stores.
#[test]
fn a_worker_killed_mid_run_pays_a_held_institutions_payment_once() {
    let (s, institution) = held_settling();
    let (worker, anvil) = (&s.worker, &s.anvil);
    let node = s.node.as_ref().unwrap();
    let wallet = super::settlement::wallet();
    let before = anvil.balance_of(&s.usdc, wallet);
    let id = held_paid(&s, institution, &[("40.00", "HELD-KILLED")])[0].0;
    let mut kills = 0;
    eventually("the payment paid", Duration::from_secs(300), || {
        anvil.mine(1);
        if payrail_tests::faults::cron_killed_at_broadcast(worker, &[node], || ()).is_some() {
            kills += 1;
        }
        (worker.transaction(0, id)["raw_status"] == "paid").then_some(())
    });
    for _ in 0..3 {
        anvil.mine(1);
        worker.cron();
    }
    assert!(kills > 0, "the worker was killed at a broadcast");
    let sends = held_sends(&s, institution, id);
    assert_eq!(
        confirmed(&sends),
        1,
        "one transaction paid the settlement: {sends:?}"
    );
    let db = worker.object_database(institution).unwrap();
    assert_eq!(events_of(&db, id, "payment.paid"), 1, "payment.paid once");
    let net: u128 = db
        .query_row(
            "SELECT units FROM settlement_items WHERE transaction_id = ?1",
            [id],
            |r| r.get::<_, String>(0),
        )
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(anvil.balance_of(&s.usdc, wallet) - before, net);
    payrail_tests::books::settle_and_assert_balanced(worker, anvil);
}

/// A held institution's refund after its payment was paid: stored in its object with its half
/// of the books and a request, once however many requests race (the same key, and others for
/// more than is left); paid once by the treasury however many cron runs race; read back and
/// recorded on the payment (`payment.refunded` once); the books balanced in both stores, the
/// links mirroring.
#[test]
fn a_held_institutions_refund_is_paid_once_from_its_object() {
    let (s, institution) = held_settling();
    let (worker, anvil) = (&s.worker, &s.anvil);
    let id = held_paid(&s, institution, &[("30.00", "HELD-REFUND")])[0].0;
    eventually("the payment paid", Duration::from_secs(90), || {
        anvil.mine(1);
        worker.cron();
        (worker.transaction(0, id)["raw_status"] == "paid").then_some(())
    });
    let object = || worker.object_database(institution).unwrap();
    let merchant: i64 = object()
        .query_row(
            "SELECT merchant_id FROM transactions WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    let token = s.usdc.to_ascii_lowercase();
    let portal = worker.portal_login(0);
    // Settled, the merchant's balance is paid out: the refund is its debt, within its limit.
    let limit = worker.portal(
        Method::PUT,
        &format!("/portal/api/merchants/{merchant}/balances/polygon/{token}/debt-limit"),
        Some(&portal),
        Some(&json!({"debt_limit": "50"})),
    );
    assert_eq!(limit.status, 200, "{}", limit.text);
    let customer = "0x00000000000000000000000000000000000c0ffe";
    let before = anvil.balance_of(&s.usdc, customer);

    // The same key three times, and two other keys for more than would be left: one refund.
    let keys = [
        "held-refund-a",
        "held-refund-a",
        "held-refund-a",
        "held-refund-b",
        "held-refund-c",
    ];
    let replies: Vec<payrail_tests::Reply> = std::thread::scope(|scope| {
        let handles: Vec<_> = keys
            .iter()
            .map(|key| {
                let portal = &portal;
                let s = &s;
                scope.spawn(move || s.refund_as(portal, id, "20.00", customer, Some(key)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let created: Vec<&payrail_tests::Reply> = replies.iter().filter(|r| r.status == 201).collect();
    assert_eq!(
        created.len(),
        1,
        "{:#?}",
        replies.iter().map(|r| &r.text).collect::<Vec<_>>()
    );
    let refund = created[0].json()["id"].as_str().unwrap().to_owned();
    for reply in &replies {
        match reply.status {
            201 => {}
            200 => assert_eq!(reply.json()["id"], json!(refund), "{}", reply.text),
            409 => assert!(reply.text.contains("left to refund"), "{}", reply.text),
            other => panic!("{other}: {}", reply.text),
        }
    }
    let stored: i64 = object()
        .query_row(
            "SELECT count(*) FROM refunds WHERE transaction_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored, 1, "one refund in the object");
    let units: u128 = object()
        .query_row("SELECT units FROM refunds WHERE id = ?1", [&refund], |r| {
            r.get::<_, String>(0)
        })
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(units, 20_000_000);

    // Paid once, however many cron runs race while it is followed.
    eventually("the refund recorded", Duration::from_secs(90), || {
        anvil.mine(1);
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| worker.cron());
            }
        });
        (worker.transaction(0, id)["raw_status"] == "partially_refunded").then_some(())
    });
    assert_eq!(anvil.balance_of(&s.usdc, customer) - before, units);
    let sends: Vec<(String, String)> = {
        let d1 = worker.database();
        let mut statement = d1
            .prepare(
                "SELECT c.tx_hash, c.state FROM chain_sends c JOIN settlements p \
                 ON p.id = c.settlement_id WHERE p.refund_of = ?1 AND p.held_by = ?2",
            )
            .unwrap();
        statement
            .query_map(rusqlite::params![refund, institution], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(sends.len(), 1, "one transaction: {sends:?}");
    let (hash, state) = sends[0].clone();
    assert_eq!(state, "confirmed");
    let db = object();
    let (refund_state, asked): (String, i64) = db
        .query_row(
            "SELECT state, (SELECT count(*) FROM object_sends WHERE refund_id = ?1) \
             FROM refunds WHERE id = ?1",
            [&refund],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((refund_state.as_str(), asked), ("done", 1));
    assert_eq!(
        events_of(&db, id, "payment.refunded"),
        1,
        "payment.refunded once"
    );

    // The portal shows it with its transaction, from the object.
    let detail = s.detail(id);
    let shown = &detail["refunds"];
    assert_eq!(shown.as_array().map(Vec::len), Some(1), "{shown}");
    assert_eq!(shown[0]["tx_hash"], json!(hash));
    assert_eq!(shown[0]["state"], "done");
    look_at(
        worker,
        &format!("/portal/payments/{id}"),
        |browser| {
            let list = browser.wait_text("#refund-list");
            assert!(
                list.to_ascii_lowercase()
                    .contains(&hash[..10].to_ascii_lowercase()),
                "the refund's transaction on the page: {list}"
            );
        },
        ("#refunds", "portal-held-payment-refunded"),
    );

    // The books: balanced in each store and against the chain, the links mirroring (the
    // settlement's payout and the refund crossed them).
    payrail_tests::books::settle_and_assert_balanced(worker, anvil);
    let ours = posted(&object(), &format!("polygon:{token}:world:treasury"));
    let theirs = posted(
        &worker.database(),
        &format!("polygon:{token}:world:institution:{institution}"),
    );
    assert_eq!((ours.1, ours.0), theirs, "the links mirror each other");
    assert!(ours.1 >= units, "{ours:?}");
}

/// A held refund whose transaction reverts on chain (the treasury's USDC taken from under it
/// after it was signed): the object counts the failed attempt and asks again with a new
/// request, which waits (with the reason shown) while the treasury cannot cover it and is paid
/// once it can; the customer receives the refund once, `payment.refunded` is written once, and
/// the books (the failed attempt's half voided, the second's posted) balance in both stores.
#[test]
fn a_held_refunds_failed_attempt_is_asked_again_and_paid_once() {
    let (s, institution) = held_settling();
    let (worker, anvil) = (&s.worker, &s.anvil);
    let id = held_paid(&s, institution, &[("30.00", "HELD-REFUND-AGAIN")])[0].0;
    // Refunded before it settles: the whole of it, held in custody.
    let customer = "0x00000000000000000000000000000000000decaf";
    let before = anvil.balance_of(&s.usdc, customer);
    let treasury_usdc = anvil.balance_of(&s.usdc, &s.treasury);
    anvil.rpc("evm_setAutomine", json!([false]));
    let portal = worker.portal_login(0);
    let made = s.refund_as(&portal, id, "30.00", customer, Some("held-refund-again"));
    assert_eq!(made.status, 201, "{}", made.text);
    let refund = made.json()["id"].as_str().unwrap().to_owned();
    let object = || worker.object_database(institution).unwrap();
    let requests = || -> Vec<(String, String)> {
        let db = object();
        let mut statement = db
            .prepare("SELECT id, state FROM object_sends WHERE refund_id = ?1")
            .unwrap();
        statement
            .query_map([&refund], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(requests()[0].1, "sent", "signed and sent at once");
    // The treasury's USDC taken away before it is mined: the transfer reverts.
    anvil.set_token_balance(&s.usdc, &s.treasury, 0);
    // Racing cron runs read its outcome back: it is counted once, and asked again once.
    let racing_crons = || {
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| worker.cron());
            }
        });
    };
    eventually("the first attempt failed", Duration::from_secs(90), || {
        anvil.mine(1);
        racing_crons();
        requests().iter().any(|r| r.1 == "failed").then_some(())
    });
    let (attempts, error): (i64, Option<String>) = eventually(
        "asked again, waiting for the treasury",
        Duration::from_secs(60),
        || {
            anvil.mine(1);
            racing_crons();
            let (attempts, error): (i64, Option<String>) = object()
                .query_row(
                    "SELECT attempts, error FROM refunds WHERE id = ?1",
                    [&refund],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap();
            error
                .as_deref()
                .is_some_and(|e| e.contains("the treasury can send"))
                .then_some((attempts, error))
        },
    );
    assert_eq!(attempts, 1, "{error:?}");
    assert_eq!(requests().len(), 2, "one new request: {:?}", requests());
    assert_eq!(worker.transaction(0, id)["raw_status"], "succeeded");
    // The treasury covers it again: the second attempt is paid.
    anvil.set_token_balance(&s.usdc, &s.treasury, treasury_usdc);
    eventually("the refund recorded", Duration::from_secs(90), || {
        anvil.mine(1);
        worker.cron();
        (worker.transaction(0, id)["raw_status"] == "refunded").then_some(())
    });
    anvil.rpc("evm_setAutomine", json!([true]));
    assert_eq!(anvil.balance_of(&s.usdc, customer) - before, 30_000_000);
    // One request and one transaction per attempt (made within a second: in no order).
    let asked = requests();
    let mut states: Vec<&str> = asked.iter().map(|r| r.1.as_str()).collect();
    states.sort_unstable();
    assert_eq!(states, vec!["confirmed", "failed"], "{asked:?}");
    let mut states: Vec<String> = {
        let d1 = worker.database();
        let mut statement = d1
            .prepare(
                "SELECT c.state FROM chain_sends c JOIN settlements p ON p.id = c.settlement_id \
                 WHERE p.refund_of = ?1",
            )
            .unwrap();
        statement
            .query_map([&refund], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    states.sort_unstable();
    assert_eq!(
        states,
        vec!["confirmed", "failed"],
        "one transaction per attempt"
    );
    assert_eq!(events_of(&object(), id, "payment.refunded"), 1);
    payrail_tests::books::settle_and_assert_balanced(worker, anvil);
}

/// Money that reached a held payment's deposit after its credit: read into the object's books
/// (never credited), shown on the payment, and returned to the customer once however many
/// returns race, from the object through a request to the treasury; the books balance in both
/// stores and the links mirror each other.
#[test]
fn money_after_a_held_payments_credit_is_returned_once_from_its_object() {
    let (s, institution) = held_settling();
    let (worker, anvil) = (&s.worker, &s.anvil);
    let (id, session) = held_paid(&s, institution, &[("7.00", "HELD-AFTER")])[0].clone();
    let (address, _) = held_deposit(worker, institution, &session);
    // The customer sends 3 USDC more by mistake: recorded in the object, never credited.
    anvil.transfer(&s.usdc, &s.customer, &address, 3_000_000);
    anvil.mine(3);
    let portal = worker.portal_login(0);
    let detail = || s.detail(id);
    let shown = eventually(
        "the money after the credit shown",
        Duration::from_secs(60),
        || {
            // A credited payment's addresses are read every half hour: as if that long passed.
            worker.object_execute(
                institution,
                "UPDATE deposit_watches SET checked_at = 0 WHERE address = lower(?1)",
                &[&address],
            );
            worker.cron();
            anvil.mine(1);
            let detail = detail();
            let left = detail["uncredited"].as_array().cloned().unwrap_or_default();
            (!left.is_empty()).then_some(detail)
        },
    );
    assert_eq!(shown["uncredited"][0]["base_units"], "3000000", "{shown}");
    assert_eq!(shown["transaction"]["amount"]["gross"], "7.00");
    // The page offers to return it, at a desktop's and a phone's width.
    look_at(
        worker,
        &format!("/portal/payments/{id}"),
        |browser| {
            assert!(browser.wait_text("#uncredited-list").contains("3 USDC"));
            assert_eq!(
                browser.eval("return document.querySelector('form.return') !== null;"),
                json!(true)
            );
        },
        ("#uncredited", "portal-held-payment-uncredited"),
    );
    // Four returns at once: the 3 USDC go back once.
    let customer = "0x00000000000000000000000000000000000ba5e0";
    let returns = |key: String| {
        worker.send(
            worker
                .request(Method::POST, &format!("/portal/api/payments/{id}/returns"))
                .header("Cookie", format!("payrail_portal={}", portal.cookie))
                .header("X-CSRF-Token", &portal.csrf)
                .header("Idempotency-Key", key)
                .json(&json!({"deposit": address, "address": customer})),
            None,
        )
    };
    let replies: Vec<payrail_tests::Reply> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let returns = &returns;
                scope.spawn(move || returns(format!("held-after-{i}")))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let made: Vec<&payrail_tests::Reply> = replies.iter().filter(|r| r.status == 201).collect();
    assert_eq!(
        made.len(),
        1,
        "{:?}",
        replies.iter().map(|r| &r.text).collect::<Vec<_>>()
    );
    assert!(made[0].text.contains("\"extra\":true"), "{}", made[0].text);
    assert!(
        replies.iter().all(|r| [201, 409].contains(&r.status)),
        "{:?}",
        replies.iter().map(|r| &r.text).collect::<Vec<_>>()
    );
    let refund = made[0].json()["id"].as_str().unwrap().to_owned();
    eventually("the return done", Duration::from_secs(90), || {
        anvil.mine(1);
        worker.cron();
        (detail()["refunds"][0]["state"] == "done").then_some(())
    });
    assert_eq!(anvil.balance_of(&s.usdc, customer), 3_000_000);
    // The payment is untouched: it settles its 7.00, and nothing is left to return.
    eventually("the payment paid", Duration::from_secs(90), || {
        anvil.mine(1);
        worker.cron();
        (worker.transaction(0, id)["raw_status"] == "paid").then_some(())
    });
    let t = worker.transaction(0, id);
    assert_eq!(t["amount"]["gross"], "7.00");
    assert!(detail()["uncredited"].as_array().unwrap().is_empty());
    assert_eq!(returns("held-after-9".to_owned()).status, 409);
    let sends: i64 = worker
        .database()
        .query_row(
            "SELECT count(*) FROM chain_sends c JOIN settlements p ON p.id = c.settlement_id \
             WHERE p.refund_of = ?1",
            [&refund],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(sends, 1, "one transaction");
    payrail_tests::books::settle_and_assert_balanced(worker, anvil);
}

/// A checkout made while its institution's money was in D1, then copied into the institution's
/// object and the directory pointed there, is paid on chain afterwards: the object credits and
/// settles it once, and D1's cron never acts on D1's copy of it (not credited, not booked, not
/// settled there), so the merchant is paid once.
#[test]
fn d1s_copy_of_a_held_institutions_checkout_is_never_acted_on() {
    let (s, institution) = settling();
    let (worker, anvil) = (&s.worker, &s.anvil);
    let (id, session) = checkout(worker, "9.00", "BEFORE-HOLD");
    let (address, units) = worker.deposit(&session);
    hold(worker, institution);
    let wallet = super::settlement::wallet();
    let before = anvil.balance_of(&s.usdc, wallet);
    anvil.transfer(&s.usdc, &s.customer, &address, units);
    anvil.mine(3);
    eventually("the payment paid", Duration::from_secs(120), || {
        anvil.mine(1);
        worker.cron();
        (worker.transaction(0, id)["raw_status"] == "paid").then_some(())
    });
    // D1's copy: still pending, its deposit never booked, no settlement of it.
    let d1 = worker.database();
    let status: String = d1
        .query_row(
            "SELECT raw_status FROM transactions WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(status, "pending", "D1's copy is left as it was copied");
    let booked: i64 = d1
        .query_row(
            "SELECT count(*) FROM ledger_transfers WHERE debit_account LIKE '%' || lower(?1) \
             OR credit_account LIKE '%' || lower(?1)",
            [&address],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(booked, 0, "nothing of the deposit in D1's books");
    let claims: i64 = d1
        .query_row(
            "SELECT count(*) FROM settlement_claims WHERE transaction_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(claims, 0, "no settlement from D1");
    // Paid once: the wallet holds exactly the object's settlement of it.
    let object = worker.object_database(institution).unwrap();
    let net: String = object
        .query_row(
            "SELECT units FROM settlement_items WHERE transaction_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        anvil.balance_of(&s.usdc, wallet) - before,
        net.parse::<u128>().unwrap()
    );
    payrail_tests::books::settle_and_assert_balanced(worker, anvil);
}

/// The demo data moved institution by institution with `xtask move`'s code, against the
/// worker's operator API, while a payment of each is in flight: every institution's partner
/// reads answer the same before and after, each payment in flight is then paid in its object,
/// and a move of one already moved is refused with its reason.
#[test]
fn the_demo_institutions_move_one_by_one_while_payments_are_in_flight() {
    let worker = with_operator();
    let count = worker.credentials.institutions.len();
    assert!(count >= 2, "the demo has several institutions");
    let mut before = Vec::new();
    let mut pending = Vec::new();
    for index in 0..count {
        let waiting = payment(&worker, index, &format!("MOVE-DEMO-{index}"));
        pending.push(waiting);
        let (client, secret) =
            worker.new_client(index, "Move", &["transactions:read", "events:read"]);
        let token = worker.token(&client, &secret);
        let paths: Vec<String> = vec![
            "/v1/transactions?limit=25".into(),
            "/v1/transactions?status=paid&limit=10".into(),
            format!("/v1/transactions?id={waiting}"),
            "/v1/events?limit=25".into(),
        ];
        let read = reads(&worker, &token, &paths);
        before.push((token, paths, read));
    }
    let ids: Vec<i64> = (0..count).map(|i| institution_id(&worker, i)).collect();
    let mut out = Vec::new();
    let moved = xtask::moves::run(&worker.base_url, OPERATOR_TOKEN, &ids, &mut out).unwrap();
    let printed = String::from_utf8(out).unwrap();
    assert_eq!(moved.len(), count, "{printed}");
    assert!(moved.iter().all(|m| m.moved), "{printed}");
    assert_eq!(printed.lines().count(), count, "{printed}");
    for (index, (token, paths, was)) in before.iter().enumerate() {
        let now = reads(&worker, token, paths);
        for ((path, status, body), (_, was_status, was_body)) in now.iter().zip(was) {
            assert_eq!(status, was_status, "institution {index}, {path}: {body}");
            assert_eq!(body, was_body, "institution {index}, {path}");
        }
        // Its payment in flight is paid now, in its object.
        let paid = act(
            &worker,
            index,
            pending[index],
            "pay",
            json!({"amount": "40.00"}),
        );
        assert_eq!(paid["raw_status"], "succeeded", "{paid}");
        let object = worker.object_database(ids[index]).unwrap();
        let status: String = object
            .query_row(
                "SELECT raw_status FROM transactions WHERE id = ?1",
                [pending[index]],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(status, "succeeded");
    }
    // Moved already: refused, with the reason printed.
    let mut out = Vec::new();
    let again = xtask::moves::run(&worker.base_url, OPERATOR_TOKEN, &ids[..1], &mut out).unwrap();
    assert!(!again[0].moved);
    let printed = String::from_utf8(out).unwrap();
    assert!(printed.contains("not moved (409)"), "{printed}");
    assert!(printed.contains("held"), "{printed}");
}

/// A move waits for money in flight: while a settlement's transaction from D1 is out, the move
/// is refused with the reason and the institution keeps working from D1 (nothing frozen, its
/// settlement goes on); once the transaction is final, the move goes through.
#[test]
fn a_move_waits_for_a_settlement_in_flight() {
    let (s, institution) = settling();
    let (worker, anvil) = (&s.worker, &s.anvil);
    let (id, session) = checkout(worker, "8.00", "MOVE-WAITS");
    let (address, units) = worker.deposit(&session);
    anvil.transfer(&s.usdc, &s.customer, &address, units);
    anvil.mine(3);
    // Blocks only when asked: the settlement's transaction stays out.
    anvil.rpc("evm_setAutomine", json!([false]));
    eventually(
        "a settlement's transaction out",
        Duration::from_secs(60),
        || {
            anvil.mine(1);
            worker.cron();
            let live: i64 = worker
                .database()
                .query_row(
                    "SELECT count(*) FROM chain_sends WHERE state = 'live'",
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            (live > 0).then_some(())
        },
    );
    let refused = move_in(worker, institution);
    assert_eq!(refused.status, 409, "{}", refused.text);
    let report = refused.json();
    assert_eq!(report["moved"], false, "{report}");
    assert!(
        report["reason"].as_str().unwrap().contains("not final yet"),
        "{report}"
    );
    let (store, moving) = store_of(worker, institution);
    assert_eq!(
        (store.as_str(), moving),
        ("d1", None),
        "nothing left frozen"
    );
    // The settlement goes on from D1; once it is final the move goes through.
    eventually("paid from D1", Duration::from_secs(90), || {
        anvil.mine(1);
        worker.cron();
        (worker.transaction(0, id)["raw_status"] == "paid").then_some(())
    });
    anvil.rpc("evm_setAutomine", json!([true]));
    hold(worker, institution);
    assert_eq!(worker.transaction(0, id)["raw_status"], "paid");
    payrail_tests::books::settle_and_assert_balanced(worker, anvil);
}

/// Moves of one institution fired at once: one moves it, the others are refused (another move
/// is running, or it is held already), and its money is carried once.
#[test]
fn racing_moves_of_one_institution_move_it_once() {
    let worker = with_operator();
    let institution = institution_id(&worker, 0);
    let replies: Vec<Reply> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| move_in(&worker, institution)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let texts: Vec<&String> = replies.iter().map(|r| &r.text).collect();
    assert_eq!(
        replies.iter().filter(|r| r.status == 200).count(),
        1,
        "{texts:?}"
    );
    assert!(
        replies.iter().all(|r| r.status == 200 || r.status == 409),
        "{texts:?}"
    );
    let (store, moving) = store_of(&worker, institution);
    assert_eq!((store.as_str(), moving), ("object", None));
    // Its books were opened once: every carried account holds its D1 balance, not twice that.
    let moved = replies.iter().find(|r| r.status == 200).unwrap().json();
    let object = worker.object_database(institution).unwrap();
    for account in moved["accounts"].as_array().unwrap() {
        let id = account["id"].as_str().unwrap();
        let (d, c) = posted(&object, id);
        let balance: i128 = account["balance"].as_str().unwrap().parse().unwrap();
        assert_eq!(c as i128 - d as i128, balance, "{id}");
    }
}

/// While a move runs, the institution pauses: a new checkout and a change of one of its
/// payments answer 503 with `Retry-After` (D1 refuses any write of its money rows), and it
/// works again once the move ends.
#[test]
fn an_institution_being_moved_pauses_for_the_move() {
    let worker = with_operator();
    let institution = institution_id(&worker, 0);
    let existing = payment(&worker, 0, "PAUSE-BEFORE");
    let moving = |on: bool| {
        worker
            .database()
            .execute(
                "UPDATE institutions SET moving_since = CASE WHEN ?2 THEN unixepoch() END \
                 WHERE id = ?1",
                rusqlite::params![institution, on],
            )
            .unwrap();
    };
    moving(true);
    let key = &worker.credentials.institutions[0].merchants[0].public_key;
    let options = json!({
        "publicKey": key, "amount": "12.00", "currency": "USD", "title": "Paused",
        "externalReference": "PAUSED", "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    });
    let refused = worker.send(
        worker
            .request(Method::POST, "/checkout/sessions")
            .json(&options),
        None,
    );
    assert_eq!(refused.status, 503, "{}", refused.text);
    assert_eq!(
        refused.json()["error"],
        "payments_unavailable",
        "{}",
        refused.text
    );
    assert!(refused.text.contains("moving"), "{}", refused.text);
    assert!(
        refused.headers.contains_key("retry-after"),
        "{:?}",
        refused.headers
    );
    let token = worker.sandbox_token(0);
    let change = worker.send(
        worker
            .request(
                Method::POST,
                &format!("/sandbox/transactions/{existing}/pay"),
            )
            .bearer_auth(&token)
            .json(&json!({"amount": "40.00"})),
        None,
    );
    assert_eq!(change.status, 503, "{}", change.text);
    // The move ended (here: given up): it works again.
    moving(false);
    let made = worker.send(
        worker
            .request(Method::POST, "/checkout/sessions")
            .json(&options),
        None,
    );
    assert!(made.status == 200 || made.status == 201, "{}", made.text);
    let paid = act(&worker, 0, existing, "pay", json!({"amount": "40.00"}));
    assert_eq!(paid["raw_status"], "succeeded", "{paid}");
}

/// The move of an institution with money on chain, while a payment is in flight: one payment
/// credited and settled from D1, one credited and not yet settled, one checkout not yet paid.
/// The operator's move freezes it, copies and compares every table, carries its books (each of
/// its accounts opened in the object at its D1 balance and closed in D1) and points the
/// directory at the object; every partner read answers the same before and after; the payment
/// in flight is then paid and credited in the object, both unsettled payments are settled once
/// from there, and the books balance in both stores with the links mirroring each other.
#[test]
fn an_institutions_money_moves_into_its_object_with_its_books() {
    let (s, institution) = settling();
    let (worker, anvil) = (&s.worker, &s.anvil);
    let checkout = |amount: &str, reference: &str| checkout(worker, amount, reference);
    let pay = |session: &str| pay_until_credited(&s, session);
    let wallet = super::settlement::wallet();
    let start = anvil.balance_of(&s.usdc, wallet);
    // One payment settled from D1.
    let (settled, session) = checkout("10.00", "MOVE-SETTLED");
    pay(&session);
    eventually("settled from D1", Duration::from_secs(90), || {
        anvil.mine(1);
        worker.cron();
        (worker.transaction(0, settled)["raw_status"] == "paid").then_some(())
    });
    let from_d1 = anvil.balance_of(&s.usdc, wallet) - start;
    // One credited, not yet settled (its status poll credits it; no cron runs), one unpaid.
    let (credited, session) = checkout("20.00", "MOVE-CREDITED");
    pay(&session);
    let (in_flight, waiting) = checkout("5.00", "MOVE-IN-FLIGHT");
    let (client, secret) =
        worker.new_client(0, "Move reads", &["transactions:read", "events:read"]);
    let token = worker.token(&client, &secret);
    let paths: Vec<String> = vec![
        "/v1/transactions?limit=3".into(),
        format!("/v1/transactions?id={settled}"),
        format!("/v1/transactions?id={credited}"),
        format!("/v1/transactions?id={in_flight}"),
        "/v1/transactions?status=paid&limit=5".into(),
        "/v1/events?limit=10".into(),
        format!("/v1/events?transaction_id={credited}"),
    ];
    let before = reads(worker, &token, &paths);
    let d1_books = |id: &str| posted(&worker.database(), id);
    let token_hex = s.usdc.to_ascii_lowercase();
    let (merchant_account, owed) = owed_in_d1(&s, credited);
    assert!(owed > 0, "the credited payment is owed to the merchant");

    // The move.
    let report = hold(worker, institution);
    let carried = report["accounts"].as_array().unwrap();
    let carried_balance = |id: &str| -> Option<i128> {
        carried
            .iter()
            .find(|a| a["id"] == id)
            .map(|a| a["balance"].as_str().unwrap().parse().unwrap())
    };
    assert_eq!(
        carried_balance(&merchant_account),
        Some(owed as i128),
        "{report}"
    );
    // D1's accounts of the institution are closed; the object opened them.
    let (d, c) = d1_books(&merchant_account);
    assert_eq!(c, d, "closed in D1");
    let object = || worker.object_database(institution).unwrap();
    let (d, c) = posted(&object(), &merchant_account);
    assert_eq!(c - d, owed, "opened in the object");
    // A second move is refused: the institution is held.
    assert_eq!(move_in(worker, institution).status, 409);
    // Every read answers the same.
    assert_same_reads(worker, &token, &paths, &before);

    // The payment in flight is paid now, to the address given before the move.
    pay_held_and_settle(&s, institution, &waiting, [credited, in_flight]);
    // Each settled once: the wallet holds the D1 settlement and the object's, exactly.
    let db = object();
    let nets: u128 = {
        let mut statement = db
            .prepare("SELECT units FROM settlement_items WHERE transaction_id IN (?1, ?2)")
            .unwrap();
        statement
            .query_map([credited, in_flight], |r| r.get::<_, String>(0))
            .unwrap()
            .map(|u| u.unwrap().parse::<u128>().unwrap())
            .sum()
    };
    assert_eq!(anvil.balance_of(&s.usdc, wallet) - start, from_d1 + nets);
    for id in [credited, in_flight] {
        assert_eq!(events_of(&db, id, "payment.paid"), 1);
    }
    // The books: balanced in each store and against the chain; the links mirror each other.
    payrail_tests::books::settle_and_assert_balanced(worker, anvil);
    let ours = posted(&object(), &format!("polygon:{token_hex}:world:treasury"));
    let theirs = posted(
        &worker.database(),
        &format!("polygon:{token_hex}:world:institution:{institution}"),
    );
    assert_eq!((ours.1, ours.0), theirs, "the links mirror each other");
}

/// A held payment refunded in full while cron runs would settle it, all at once: the object
/// lets one of them have it. Either the refund is stored and nothing settles the payment, or
/// the settlement claimed it first and every refund is refused; the money leaves the treasury
/// once, to one of them, and the books balance in both stores.
#[test]
fn a_held_payments_refund_racing_its_settlement_pays_one_of_them() {
    let (s, institution) = held_settling();
    let (worker, anvil) = (&s.worker, &s.anvil);
    let wallet = super::settlement::wallet();
    let customer = "0x00000000000000000000000000000000000c1a55";
    let id = held_paid(&s, institution, &[("12.00", "HELD-RACE")])[0].0;
    let (wallet_before, customer_before) = (
        anvil.balance_of(&s.usdc, wallet),
        anvil.balance_of(&s.usdc, customer),
    );
    let portal = worker.portal_login(0);
    let made: Vec<payrail_tests::Reply> = std::thread::scope(|scope| {
        let refunds: Vec<_> = (0..4)
            .map(|i| {
                let (portal, s) = (&portal, &s);
                scope.spawn(move || {
                    s.refund_as(portal, id, "12.00", customer, Some(&format!("race-{i}")))
                })
            })
            .collect();
        let crons: Vec<_> = (0..4).map(|_| scope.spawn(|| worker.cron())).collect();
        crons.into_iter().for_each(|h| drop(h.join()));
        refunds.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let texts: Vec<&String> = made.iter().map(|r| &r.text).collect();
    assert!(
        made.iter().all(|r| r.status == 201 || r.status == 409),
        "{texts:?}"
    );
    let refunded = made.iter().filter(|r| r.status == 201).count();
    assert!(refunded <= 1, "one refund of the whole at most: {texts:?}");
    let end = if refunded == 1 { "refunded" } else { "paid" };
    eventually("the payment's end", Duration::from_secs(120), || {
        anvil.mine(1);
        worker.cron();
        (worker.transaction(0, id)["raw_status"] == end).then_some(())
    });
    let paid_out = anvil.balance_of(&s.usdc, wallet) - wallet_before;
    let sent_back = anvil.balance_of(&s.usdc, customer) - customer_before;
    if refunded == 1 {
        assert_eq!(
            (paid_out, sent_back),
            (0, 12_000_000),
            "refunded, never settled"
        );
        let claims: i64 = worker
            .object_database(institution)
            .unwrap()
            .query_row(
                "SELECT count(*) FROM settlement_claims WHERE transaction_id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(claims, 0, "no settlement claimed it");
    } else {
        assert_eq!(sent_back, 0, "settled, never refunded");
        assert!(paid_out > 0 && paid_out < 12_000_000, "the net: {paid_out}");
        assert!(
            made.iter().all(|r| r.text.contains("settl")),
            "refused for its settlement: {texts:?}"
        );
    }
    payrail_tests::books::settle_and_assert_balanced(worker, anvil);
}

/// A held merchant's top-up: its address given out from the directory's allocator and kept in
/// the institution's object, watched there by the cron, the money credited to the merchant's
/// balance in the object's books once (racing cron runs), shown on the merchant's page, and the
/// books balanced against the chain.
#[test]
fn a_held_merchants_top_up_is_credited_once_in_its_object() {
    let (s, institution) = held_settling();
    let (worker, anvil) = (&s.worker, &s.anvil);
    let merchant: i64 = worker
        .database()
        .query_row(
            "SELECT id FROM merchants WHERE public_key = ?1",
            [&worker.credentials.institutions[0].merchants[0].public_key],
            |r| r.get(0),
        )
        .unwrap();
    let portal = worker.portal_login(0);
    let given = worker.portal(
        Method::POST,
        &format!("/portal/api/merchants/{merchant}/topup/polygon"),
        Some(&portal),
        None,
    );
    assert_eq!(given.status, 200, "{}", given.text);
    let address = given.json()["address"].as_str().unwrap().to_owned();
    let object = || worker.object_database(institution).unwrap();
    let count = |db: &rusqlite::Connection, table: &str| -> i64 {
        db.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(&object(), "topup_addresses"), 1, "kept in the object");
    assert_eq!(
        count(&worker.database(), "topup_addresses"),
        0,
        "none in D1"
    );
    // The same again is the same address.
    let again = worker.portal(
        Method::POST,
        &format!("/portal/api/merchants/{merchant}/topup/polygon"),
        Some(&portal),
        None,
    );
    assert_eq!(again.json()["address"], json!(address));

    // A run checks the new watch; the cron's own check of it is then minutes away, so what
    // credits the top-up below is the watcher's pass, which found money for it.
    worker.cron();
    let hash = anvil.transfer(&s.usdc, &s.customer, &address, 5_000_000);
    anvil.mine(3);
    let token = s.usdc.to_ascii_lowercase();
    let balance = || -> Value {
        let reply = worker.portal(
            Method::GET,
            &format!("/portal/api/merchants/{merchant}/balances"),
            Some(&portal),
            None,
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["token"] == json!(token) && b["network"] == "polygon")
            .cloned()
            .unwrap_or(Value::Null)
    };
    // Three runs at once credit it.
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| worker.cron());
        }
    });
    assert_eq!(
        balance()["base_units"]["balance"],
        "5000000",
        "credited by the runs' pass"
    );
    // Once, whatever ran at once, and listed on the merchant's top-ups.
    let db = object();
    assert_eq!(count(&db, "topup_transfers"), 1);
    let posted: i64 = db
        .query_row(
            "SELECT count(*) FROM ledger_transfers WHERE reference = ?1",
            [&hash],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        posted, 2,
        "its receipt and its top-up, in the object's books"
    );
    let listed = worker.portal(
        Method::GET,
        &format!("/portal/api/merchants/{merchant}/topup"),
        Some(&portal),
        None,
    );
    assert_eq!(listed.status, 200, "{}", listed.text);
    let polygon = listed.json()["networks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["network"] == "polygon")
        .cloned()
        .unwrap();
    assert_eq!(polygon["transfers"][0]["tx_hash"], json!(hash), "{polygon}");
    assert_eq!(
        polygon["transfers"][0]["credited"],
        json!(true),
        "{polygon}"
    );
    look_at(
        worker,
        &format!("/portal/merchants/{merchant}"),
        |browser| {
            let table = browser.wait_text("div[data-network='polygon'] table.topup-transfers");
            assert!(
                table.contains("5 USDC") && table.contains("credited"),
                "{table}"
            );
        },
        ("#top-up", "portal-held-merchant-top-up"),
    );
    payrail_tests::books::settle_and_assert_balanced(worker, anvil);
}

/// A production worker with a funded treasury behind a [`FaultyNode`], the operator's API, and
/// its first demo institution held in its object: the setup and the institution's id.
///
/// [`FaultyNode`]: payrail_tests::faults::FaultyNode
fn held_settling() -> (super::settlement::Setup, i64) {
    let (s, institution) = settling();
    hold(&s.worker, institution);
    (s, institution)
}

/// [`held_settling`] before the hold: its first demo institution's money still in D1.
fn settling() -> (super::settlement::Setup, i64) {
    let s = super::settlement::start_faulty_with(
        json!({}),
        &[("PAYRAIL_OPERATOR_TOKEN", OPERATOR_TOKEN)],
    );
    let institution = institution_id(&s.worker, 0);
    (s, institution)
}

/// Asserts that every read of `paths` with `token` answers as `before` did.
fn assert_same_reads(
    worker: &Worker,
    token: &str,
    paths: &[String],
    before: &[(String, u16, Value)],
) {
    let after = reads(worker, token, paths);
    for ((path, status, body), (_, was_status, was)) in after.iter().zip(before) {
        assert_eq!(status, was_status, "{path}: {body}");
        assert_eq!(body, was, "{path}");
    }
}

/// Pays `waiting`, a checkout of `institution` made before its move, to the address it was
/// given (now in the object), and runs the cron until both `payments` are paid.
fn pay_held_and_settle(
    s: &super::settlement::Setup,
    institution: i64,
    waiting: &str,
    payments: [i64; 2],
) {
    let (worker, anvil) = (&s.worker, &s.anvil);
    let (address, units) = held_deposit(worker, institution, waiting);
    anvil.transfer(&s.usdc, &s.customer, &address, units);
    anvil.mine(3);
    eventually(
        "both settled from the object",
        Duration::from_secs(120),
        || {
            anvil.mine(1);
            worker.cron();
            payments
                .iter()
                .all(|id| worker.transaction(0, *id)["raw_status"] == "paid")
                .then_some(())
        },
    );
}

/// Pays checkout `session` of setup `s` in full on chain and waits for its credit (its status
/// poll credits it; no cron runs).
fn pay_until_credited(s: &super::settlement::Setup, session: &str) {
    let (worker, anvil) = (&s.worker, &s.anvil);
    let (address, units) = worker.deposit(session);
    anvil.transfer(&s.usdc, &s.customer, &address, units);
    anvil.mine(3);
    eventually("the credit", Duration::from_secs(30), || {
        let reply = worker.send(
            worker.request(Method::GET, &format!("/checkout/{session}/status")),
            None,
        );
        (reply.json()["status"] == "succeeded").then_some(())
    });
}

/// The USDC account in D1's books of the merchant of payment `transaction`, and what D1's books
/// owe it there.
fn owed_in_d1(s: &super::settlement::Setup, transaction: i64) -> (String, u128) {
    let merchant: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT merchant_id FROM transactions WHERE id = ?1",
            [transaction],
            |r| r.get(0),
        )
        .unwrap();
    let account = format!(
        "polygon:{}:merchant:{merchant}",
        s.usdc.to_ascii_lowercase()
    );
    let (d, c) = posted(&s.worker.database(), &account);
    (account, c - d)
}

/// A checkout of `amount` USD by the first demo institution's first merchant, paid in crypto:
/// its transaction's and session's ids.
fn checkout(worker: &Worker, amount: &str, reference: &str) -> (i64, String) {
    let key = &worker.credentials.institutions[0].merchants[0].public_key;
    let session = worker.checkout_session(&json!({
        "publicKey": key, "amount": amount, "currency": "USD", "title": "Held",
        "externalReference": reference, "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    }));
    (
        session["transaction_id"].as_i64().unwrap(),
        session["id"].as_str().unwrap().to_owned(),
    )
}

/// Checkouts of the held institution's first merchant, of each `(amount USD, reference)`,
/// paid exactly on chain and credited: each one's transaction and session ids.
fn held_paid(
    s: &super::settlement::Setup,
    institution: i64,
    orders: &[(&str, &str)],
) -> Vec<(i64, String)> {
    let (worker, anvil) = (&s.worker, &s.anvil);
    let mut ids = Vec::new();
    for (amount, reference) in orders {
        let (id, session) = checkout(worker, amount, reference);
        let (address, units) = held_deposit(worker, institution, &session);
        anvil.transfer(&s.usdc, &s.customer, &address, units);
        ids.push((id, session));
    }
    anvil.mine(3);
    for (id, session) in &ids {
        eventually("the credit", Duration::from_secs(30), || {
            let reply = worker.send(
                worker.request(Method::GET, &format!("/checkout/{session}/status")),
                None,
            );
            (reply.json()["status"] == "succeeded").then_some(())
        });
        assert_eq!(worker.transaction(0, *id)["raw_status"], "succeeded");
    }
    ids
}

/// How many of `sends` ([`held_sends`]) are confirmed.
fn confirmed(sends: &[(String, String)]) -> usize {
    sends
        .iter()
        .filter(|(_, state)| state == "confirmed")
        .count()
}

/// The treasury's transactions of the settlement that pays held payment `id`, oldest first:
/// (hash, state).
fn held_sends(s: &super::settlement::Setup, institution: i64, id: i64) -> Vec<(String, String)> {
    let settlement: Option<String> = s
        .worker
        .object_database(institution)
        .unwrap()
        .query_row(
            "SELECT o.settlement_id FROM settlement_items i JOIN object_sends o \
             ON o.id = i.send_id WHERE i.transaction_id = ?1",
            [id],
            |r| r.get(0),
        )
        .ok();
    let Some(settlement) = settlement else {
        return Vec::new();
    };
    let d1 = s.worker.database();
    let mut statement = d1
        .prepare(
            "SELECT tx_hash, state FROM chain_sends WHERE settlement_id = ?1 \
             ORDER BY created_at, sent_block",
        )
        .unwrap();
    statement
        .query_map([&settlement], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A held settlement's transaction stuck below the market is replaced by the treasury as its
/// own: the replacement pays the same (the payment was charged what the first was priced at;
/// the treasury bears the rest of the gas), one of them is mined, the object reads it back and
/// the payment is `paid` once, and both stores' books balance, the links mirroring.
#[test]
fn a_held_settlements_stuck_transaction_is_replaced_and_paid_once() {
    let (s, institution) = held_settling();
    let (worker, anvil) = (&s.worker, &s.anvil);
    let wallet = super::settlement::wallet();
    let before = anvil.balance_of(&s.usdc, wallet);
    let id = held_paid(&s, institution, &[("20.00", "HELD-STUCK")])[0].0;
    // Blocks are mined only when asked from now on; then the base fee rises to 5 gwei, above
    // what the first transaction was signed at.
    anvil.rpc("evm_setAutomine", json!([false]));
    let first = eventually("a first transaction", Duration::from_secs(30), || {
        worker.cron();
        held_sends(&s, institution, id)
            .first()
            .map(|(hash, _)| hash.clone())
    });
    let replaced = eventually("a replacement", Duration::from_secs(60), || {
        anvil.rpc("anvil_setNextBlockBaseFeePerGas", json!(["0x12a05f200"]));
        anvil.mine(2);
        worker.cron();
        let sends = held_sends(&s, institution, id);
        (sends.len() >= 2).then_some(sends)
    });
    assert_eq!(replaced[0], (first.clone(), "replaced".to_owned()));
    eventually("the payment paid", Duration::from_secs(90), || {
        anvil.mine(1);
        worker.cron();
        (worker.transaction(0, id)["raw_status"] == "paid").then_some(())
    });
    let t = worker.transaction(0, id);
    let hash = t["tx_hashes"]["settlement"].as_str().unwrap().to_owned();
    assert_ne!(hash, first, "the replacement was mined");
    let sends = held_sends(&s, institution, id);
    assert_eq!(confirmed(&sends), 1, "{sends:?}");
    // Charged what the first was priced at, and paid exactly the net it was asked to.
    let object = worker.object_database(institution).unwrap();
    let (units, gas_fee, recorded): (String, String, String) = object
        .query_row(
            "SELECT i.units, i.gas_fee, o.tx_hash FROM settlement_items i \
             JOIN object_sends o ON o.id = i.send_id WHERE i.transaction_id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(recorded, hash, "the object recorded the transaction mined");
    assert_eq!(t["amount"]["gas_fee"], json!(gas_fee));
    let units: u128 = units.parse().unwrap();
    assert_eq!(anvil.balance_of(&s.usdc, wallet) - before, units);
    assert_eq!(events_of(&object, id, "payment.paid"), 1);
    anvil.rpc("evm_setAutomine", json!([true]));
    payrail_tests::books::settle_and_assert_balanced(worker, anvil);
    let token = s.usdc.to_ascii_lowercase();
    assert_eq!(
        posted(&object, &format!("polygon:{token}:world:treasury")),
        (0, units)
    );
    assert_eq!(
        posted(
            &worker.database(),
            &format!("polygon:{token}:world:institution:{institution}")
        ),
        (units, 0),
        "the treasury's half posted once, whichever transaction was mined"
    );
}

/// Opens the portal's `path` as the first institution's admin at a desktop's and a phone's
/// width: `check` reads the page, then `css` is photographed as `name`, and axe-core finds no
/// serious or critical violation.
pub(super) fn look_at(
    worker: &Worker,
    path: &str,
    check: impl Fn(&payrail_tests::browser::Browser),
    (css, name): (&str, &str),
) {
    use payrail_tests::browser::{exclusive, Browser};
    let _browser = exclusive();
    let browser = Browser::start();
    let admin = &worker.credentials.institutions[0];
    browser.log_in(&worker.base_url, &admin.admin_email, &admin.admin_password);
    for (width, height) in [(1280, 900), (390, 844)] {
        browser.resize(width, height);
        browser.goto(&format!("{}{path}", worker.base_url));
        check(&browser);
        super::balances::photograph(&browser, (width, height), css, name);
        let violations = browser.serious_accessibility_violations();
        assert!(violations.is_empty(), "at {width}: {violations:#?}");
    }
}

/// The posted totals (debits, credits) of the books' account `id` in the store `db`.
fn posted(db: &rusqlite::Connection, id: &str) -> (u128, u128) {
    let (d, c): (String, String) = db
        .query_row(
            "SELECT debits_posted, credits_posted FROM ledger_accounts WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap_or_else(|e| panic!("{id}: {e}"));
    (d.parse().unwrap(), c.parse().unwrap())
}

/// How many events of `kind` payment `id` has in the store `db`.
fn events_of(db: &rusqlite::Connection, id: i64, kind: &str) -> i64 {
    db.query_row(
        "SELECT count(*) FROM events WHERE transaction_id = ?1 AND type = ?2",
        rusqlite::params![id, kind],
        |r| r.get(0),
    )
    .unwrap()
}

/// The books of `institution` (held in its object) as the worker's operator endpoint serves
/// them to `xtask reconcile --remote` and `xtask sweep --remote`, part by part, equal to its
/// object's file (and what the sweep makes of them); and the endpoint's refusals.
fn served_books_match_the_file(worker: &Worker, institution: i64) {
    use shared_types::ledger::reads::Part;
    use xtask::reconcile::{Books, Operator};
    let served = Books::Served(
        Operator {
            url: worker.base_url.clone(),
            token: OPERATOR_TOKEN.to_owned(),
        },
        institution,
    );
    let file = Books::Object(worker.object_file(institution).expect("its object's file"));
    for part in [Part::Accounts, Part::Transfers { after: 0 }, Part::Watches] {
        let rows = served.part(&part).unwrap();
        assert!(!rows.is_empty(), "{part:?}: nothing served");
        assert_eq!(rows, file.part(&part).unwrap(), "{part:?}");
    }
    let last = served
        .part(&Part::Transfers { after: 0 })
        .unwrap()
        .iter()
        .filter_map(|row| row["seq"].as_i64())
        .max()
        .expect("sequence numbers");
    assert!(
        served
            .part(&Part::Transfers { after: last })
            .unwrap()
            .is_empty(),
        "the page after the last transfer is empty"
    );
    for part in [Part::Deposits { after: -1 }, Part::Topups { after: -1 }] {
        assert_eq!(
            served.part(&part).unwrap(),
            file.part(&part).unwrap(),
            "{part:?}"
        );
    }
    // What the custody sweep reads through the worker is what it reads from the file: every
    // deposit (its watch ended before the end of time), each naming the institution.
    let sweepable = |books: &Books| {
        xtask::sweep::store::held_deposits(books, &[institution], i64::MAX).unwrap()
    };
    let through_worker = sweepable(&served);
    assert!(!through_worker.is_empty(), "its deposits");
    assert!(through_worker
        .iter()
        .all(|d| d.held_by == Some(institution)));
    assert_eq!(through_worker, sweepable(&file));
    let last_index = through_worker
        .iter()
        .map(|d| d.derivation_index)
        .max()
        .unwrap();
    assert!(
        served
            .part(&Part::Deposits { after: last_index })
            .unwrap()
            .is_empty(),
        "the page after the last deposit is empty"
    );
    assert!(
        sweepable(&served).len() == through_worker.len()
            && xtask::sweep::store::held_deposits(&served, &[institution + 1], i64::MAX)
                .unwrap()
                .is_empty(),
        "an institution not held reads nothing"
    );
    let get = |path: &str, token: Option<&str>| {
        let request = worker.request(Method::GET, path);
        worker.send(
            match token {
                Some(token) => request.bearer_auth(token),
                None => request,
            },
            None,
        )
    };
    let books = format!("/operator/institutions/{institution}/books");
    assert_eq!(get(&format!("{books}?part=accounts"), None).status, 401);
    get(&format!("{books}?part=postings"), Some(OPERATOR_TOKEN))
        .assert_error(400, "invalid_request");
    get(
        &format!("{books}?part=transfers&after=x"),
        Some(OPERATOR_TOKEN),
    )
    .assert_error(400, "invalid_request");
    get(
        &format!("{books}?part=deposits&after=-2"),
        Some(OPERATOR_TOKEN),
    )
    .assert_error(400, "invalid_request");
    get(
        "/operator/institutions/999999/books?part=accounts",
        Some(OPERATOR_TOKEN),
    )
    .assert_error(404, "not_found");
    let in_d1 = institution_id(worker, 1);
    let refused = get(
        &format!("/operator/institutions/{in_d1}/books?part=accounts"),
        Some(OPERATOR_TOKEN),
    )
    .assert_error(409, "conflict");
    assert!(refused.contains("in D1"), "{refused}");
}

/// Every address custody gives out, whichever store keeps its deposit, is in the directory's
/// index with the institution it went to, and a settlement wallet is checked against it: a
/// merchant of an institution in D1 cannot name a deposit address held in another institution's
/// object (money settled there would be credited as that institution's payment). The cron derives
/// addresses ahead, so a checkout takes its address from the index in its own batch; an index
/// taken with no address ahead is derived and filled at once; racing checkouts of both stores
/// each get their own; and indexes given out but not yet indexed are derived by the check itself,
/// which waits (503) once the cron is too far behind.
#[test]
fn every_custody_address_is_in_the_directorys_index_and_no_wallet_can_be_one() {
    let worker = Worker::start_with_vars(
        "sandbox",
        3600,
        &[
            ("PAYRAIL_OPERATOR_TOKEN", OPERATOR_TOKEN),
            ("PAYRAIL_EVM_XPUB", TEST_XPUB),
        ],
    );
    let key = payrail_evm::derive::parse_xpub(TEST_XPUB).unwrap();
    let derived = |index: i64| {
        payrail_evm::derive::evm_address(&key, index)
            .unwrap()
            .to_ascii_lowercase()
    };
    let held = institution_id(&worker, 0);
    let in_d1 = institution_id(&worker, 1);
    hold(&worker, held);
    let checkout = |institution: usize, reference: String| -> String {
        let key = &worker.credentials.institutions[institution].merchants[0].public_key;
        let session = worker.checkout_session(&json!({
            "publicKey": key, "amount": "9.00", "currency": "EUR", "title": "Indexed",
            "externalReference": reference, "redirectUrl": "https://shop.example/done",
            "allowCrypto": true
        }));
        session["id"].as_str().unwrap().to_owned()
    };
    let db = worker.database();
    let row = |index: i64| -> (Option<String>, Option<i64>, Option<String>) {
        db.query_row(
            "SELECT address, institution_id, purpose FROM custody_addresses \
             WHERE family = 'evm' AND derivation_index = ?1",
            [index],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
    };
    let counter = || -> (i64, i64) {
        db.query_row(
            "SELECT next, indexed_to FROM deposit_indexes WHERE family = 'evm'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };
    let held_address = |session: &str| -> (String, i64) {
        worker
            .object_database(held)
            .expect("the institution's object")
            .query_row(
                "SELECT lower(deposit_address), deposit_index FROM checkout_sessions WHERE id = ?1",
                [session],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
    };
    let d1_address = |session: &str| -> (String, i64) {
        db.query_row(
            "SELECT lower(deposit_address), deposit_index FROM checkout_sessions WHERE id = ?1",
            [session],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };

    // Nothing derived ahead yet: the held checkout's index is derived and filled in at once.
    let first = checkout(0, "INDEX-0".into());
    let (address, index) = held_address(&first);
    assert_eq!(address, derived(index));
    assert_eq!(
        row(index),
        (Some(address.clone()), Some(held), Some("checkout".into()))
    );
    let (next, _) = counter();
    assert_eq!(next, index + 1);

    // The cron derives 200 ahead (three runs at once write the same rows); the next checkouts,
    // six of each store at once, take theirs from the index: each its own, each row naming its
    // institution.
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| worker.cron());
        }
    });
    let (next, indexed_to) = counter();
    assert_eq!(indexed_to, next + 200, "derived ahead of the counter");
    for i in [0, next, indexed_to - 1] {
        assert_eq!(row(i).0.as_deref(), Some(derived(i).as_str()), "index {i}");
    }
    let ahead = row(next + 5).0.unwrap();
    assert_eq!(row(next + 5).1, None, "a free row names no institution");
    let sessions: Vec<(usize, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..12)
            .map(|i| {
                let checkout = &checkout;
                scope.spawn(move || (i % 2, checkout(i % 2, format!("INDEX-P{i}"))))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut seen = std::collections::HashSet::new();
    for (institution, session) in &sessions {
        let (address, index) = if *institution == 0 {
            held_address(session)
        } else {
            d1_address(session)
        };
        assert!(seen.insert(index), "index {index} given twice");
        let owner = if *institution == 0 { held } else { in_d1 };
        assert_eq!(
            row(index),
            (Some(address.clone()), Some(owner), Some("checkout".into())),
            "index {index}"
        );
        assert_eq!(address, derived(index));
    }
    assert_eq!(counter().0, next + 12);

    // A merchant of the institution in D1 cannot be paid at the held deposit address, nor at
    // one derived ahead and not yet given out; its own account is taken.
    let portal = worker.portal_login(1);
    let merchant = worker.credentials.institutions[1].merchant_ids[0];
    let set = |address: &str| {
        worker.portal(
            Method::PUT,
            &format!("/portal/api/merchants/{merchant}/wallets/polygon"),
            Some(&portal),
            Some(&json!({"address": address})),
        )
    };
    for address in [address.as_str(), ahead.as_str()] {
        let refused = set(address).assert_error(400, "invalid_request");
        assert!(
            refused.contains("one of Payrail's deposit addresses"),
            "{address}: {refused}"
        );
    }

    // Indexes given out with no row (a filling lost): the check derives them itself.
    let (_, indexed_to) = counter();
    db.execute(
        "UPDATE deposit_indexes SET next = ?1 WHERE family = 'evm'",
        [indexed_to + 5],
    )
    .unwrap();
    let lost = derived(indexed_to + 3);
    let refused = set(&lost).assert_error(400, "invalid_request");
    assert!(refused.contains("deposit addresses"), "{refused}");
    // Too far behind to derive: the check waits for the cron, which catches up.
    db.execute(
        "UPDATE deposit_indexes SET next = ?1 WHERE family = 'evm'",
        [indexed_to + 2_500],
    )
    .unwrap();
    let waiting = set(&lost);
    let text = waiting.assert_error(503, "payments_unavailable");
    assert!(text.contains("still being indexed"), "{text}");
    assert!(waiting.header("retry-after").is_some(), "{}", waiting.text);
    eventually("the index to catch up", Duration::from_secs(60), || {
        worker.cron();
        (counter().1 >= counter().0).then_some(())
    });
    let refused = set(&lost).assert_error(400, "invalid_request");
    assert!(refused.contains("deposit addresses"), "{refused}");
    assert_eq!(row(indexed_to + 3).0.as_deref(), Some(lost.as_str()));
    assert_eq!(
        row(indexed_to + 3).1,
        None,
        "given before the index kept it"
    );
    let taken = set("0x8ba1f109551bd432803012645ac136ddd64dba72");
    assert_eq!(taken.status, 200, "{}", taken.text);
}

/// [`settling`] with each request of a move making at most 20 calls: a move goes on over
/// several requests.
fn settling_in_small_steps() -> (super::settlement::Setup, i64) {
    let s = super::settlement::start_faulty_with(
        json!({}),
        &[
            ("PAYRAIL_OPERATOR_TOKEN", OPERATOR_TOKEN),
            ("PAYRAIL_MOVE_CALLS", "20"),
        ],
    );
    let institution = institution_id(&s.worker, 0);
    (s, institution)
}

/// A move larger than one request goes on over several: each answers 202 with how far it came
/// while the institution stays paused (a checkout answers 503), the worker killed (SIGKILL) in
/// the middle and started again loses nothing, racing requests go on with it in turn (each 202,
/// 200 or a 409 to wait), exactly one of them moves it and its books are carried once; every
/// partner read answers the same after, the payment in flight is then paid in the object, both
/// unsettled payments are settled once, and the books balance in both stores.
#[test]
fn a_move_larger_than_one_request_goes_on_over_several_and_survives_a_kill() {
    let (s, institution) = settling_in_small_steps();
    let (worker, anvil) = (&s.worker, &s.anvil);
    let (credited, session) = checkout(worker, "20.00", "STEPS-CREDITED");
    pay_until_credited(&s, &session);
    let (in_flight, waiting) = checkout(worker, "5.00", "STEPS-IN-FLIGHT");
    let (client, secret) = worker.new_client(0, "Steps", &["transactions:read", "events:read"]);
    let token = worker.token(&client, &secret);
    let paths: Vec<String> = vec![
        "/v1/transactions?limit=25".into(),
        format!("/v1/transactions?id={credited}"),
        format!("/v1/transactions?id={in_flight}"),
        "/v1/events?limit=25".into(),
    ];
    let before = reads(worker, &token, &paths);
    let (merchant_account, owed) = owed_in_d1(&s, credited);
    assert!(owed > 0, "the credited payment is owed to the merchant");

    // The first request goes part of the way.
    let first = move_in(worker, institution);
    assert_eq!(first.status, 202, "{}", first.text);
    let report = first.json();
    assert_eq!(report["moving"], true, "{report}");
    assert!(
        report["progress"]["tables_copied"].as_u64().unwrap() < 20,
        "{report}"
    );
    assert_eq!(store_of(worker, institution).0, "d1");
    // Paused meanwhile.
    let key = &worker.credentials.institutions[0].merchants[0].public_key;
    let paused = worker.send(
        worker
            .request(Method::POST, "/checkout/sessions")
            .json(&json!({
                "publicKey": key, "amount": "3.00", "currency": "USD", "title": "Paused",
                "externalReference": "STEPS-PAUSED", "redirectUrl": "https://shop.example/done",
                "allowCrypto": true
            })),
        None,
    );
    assert_eq!(paused.status, 503, "{}", paused.text);
    // Killed and started again: the move goes on from what the object recorded.
    let second = move_in(worker, institution);
    assert_eq!(second.status, 202, "{}", second.text);
    let copied = |reply: &Reply| reply.json()["progress"]["rows_copied"].as_i64().unwrap();
    assert!(copied(&second) > copied(&first), "{}", second.text);
    worker.kill_and_restart();
    // Three requests at once, round after round, until one moves it.
    let mut moved = Vec::new();
    let mut rounds = 0;
    while moved.is_empty() {
        rounds += 1;
        assert!(rounds < 60, "still moving after {rounds} rounds");
        let replies: Vec<Reply> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..3)
                .map(|_| scope.spawn(|| move_in(worker, institution)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for reply in replies {
            match reply.status {
                200 => moved.push(reply.json()),
                202 => {}
                409 => {
                    // Waiting its turn, or late: the move ended in another request.
                    assert!(
                        reply.header("retry-after").is_some()
                            || reply.text.contains("held")
                            || reply.text.contains("ended meanwhile"),
                        "{}",
                        reply.text
                    );
                }
                _ => panic!("{}", reply.text),
            }
        }
    }
    assert_eq!(moved.len(), 1, "{moved:?}");
    let report = &moved[0];
    assert_eq!(report["copy"]["verified"], true, "{report}");
    assert_eq!(store_of(worker, institution), ("object".to_owned(), None));
    // Carried once: the object holds what D1 owed the merchant, D1 none of it.
    let (d, c) = posted(
        &worker.object_database(institution).unwrap(),
        &merchant_account,
    );
    assert_eq!(c - d, owed, "opened in the object once");
    let (d, c) = posted(&worker.database(), &merchant_account);
    assert_eq!(c, d, "closed in D1");
    assert_same_reads(worker, &token, &paths, &before);
    // The payment in flight is paid in the object; both settle once from there.
    pay_held_and_settle(&s, institution, &waiting, [credited, in_flight]);
    let db = worker.object_database(institution).unwrap();
    for id in [credited, in_flight] {
        assert_eq!(events_of(&db, id, "payment.paid"), 1);
    }
    payrail_tests::books::settle_and_assert_balanced(worker, anvil);
}

/// A move no request goes on with for five minutes is given up by the cron: the institution
/// works from D1 again (a checkout is made), and `xtask move` then moves it afresh over several
/// requests, a line of progress for each.
#[test]
fn a_move_left_midway_is_given_up_and_moved_afresh() {
    let worker = Worker::start_with_vars(
        "sandbox",
        3600,
        &[
            ("PAYRAIL_OPERATOR_TOKEN", OPERATOR_TOKEN),
            ("PAYRAIL_MOVE_CALLS", "20"),
        ],
    );
    let institution = institution_id(&worker, 0);
    let waiting = payment(&worker, 0, "LEFT-MIDWAY");
    let first = move_in(&worker, institution);
    assert_eq!(first.status, 202, "{}", first.text);
    let since = store_of(&worker, institution).1.expect("frozen");
    // A minute on, the cron leaves it: it was gone on with lately.
    worker.cron();
    assert_eq!(store_of(&worker, institution).1, Some(since));
    worker
        .database()
        .execute(
            "UPDATE institutions SET move_touched_at = unixepoch() - 301 WHERE id = ?1",
            [institution],
        )
        .unwrap();
    worker.cron();
    assert_eq!(store_of(&worker, institution), ("d1".to_owned(), None));
    // It works from D1 again.
    let paid = act(&worker, 0, waiting, "pay", json!({"amount": "40.00"}));
    assert_eq!(paid["raw_status"], "succeeded", "{paid}");
    // Moved afresh, over several requests.
    let mut out = Vec::new();
    let moved =
        xtask::moves::run(&worker.base_url, OPERATOR_TOKEN, &[institution], &mut out).unwrap();
    let printed = String::from_utf8(out).unwrap();
    assert!(moved[0].moved, "{printed}");
    assert!(printed.lines().count() > 2, "{printed}");
    assert!(printed.contains("moving ("), "{printed}");
    let object = worker.object_database(institution).unwrap();
    let status: String = object
        .query_row(
            "SELECT raw_status FROM transactions WHERE id = ?1",
            [waiting],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(status, "succeeded");
}

/// `GET /operator/held-deposits` with the operator's token.
fn held_deposits(worker: &Worker, query: &str) -> Reply {
    worker.send(
        worker
            .request(Method::GET, &format!("/operator/held-deposits{query}"))
            .bearer_auth(OPERATOR_TOKEN),
        None,
    )
}

/// The watcher's pass reads every token transfer of a network once a run, finds the receivers
/// in the directory's index and checks the held watches money came to at once: one cron run
/// credits a held payment whose watch the cron had just checked (its own check would wait five
/// minutes more). Money to one of custody's addresses that was never given out is held and
/// listed for the operator once, under racing runs, and never credited; the books still
/// balance against the chain.
#[test]
fn the_watchers_pass_credits_held_money_at_once_and_holds_what_no_store_credits() {
    const DEPTH: u64 = 2;
    let HeldOnChain {
        anvil,
        usdc,
        customer,
        worker,
        institution,
    } = held_on_chain(DEPTH, &["polygon"]);
    let (id, session) = checkout(&worker, "4.20", "PASS-1");
    let (address, units) = held_deposit(&worker, institution, &session);
    // A run checks the new watch (and starts the network's pass); the cron's own check of it
    // is then minutes away.
    worker.cron();
    let d1 = worker.database();
    let passed = || -> (i64, Option<String>) {
        d1.query_row(
            "SELECT scanned_to, error FROM network_passes WHERE network = 'polygon'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the network's pass")
    };
    let (first, error) = passed();
    assert_eq!(error, None);
    let hash = anvil.transfer(&usdc, &customer, &address, units);
    anvil.mine(DEPTH);
    // Three runs at once: one credit, one event.
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| worker.cron());
        }
    });
    let t = worker.transaction(0, id);
    assert_eq!(
        t["raw_status"], "succeeded",
        "credited by the runs' pass: {t}"
    );
    assert_eq!(t["tx_hashes"]["source"], json!(hash));
    let object = worker.object_database(institution).unwrap();
    assert_eq!(events_of(&object, id, "payment.succeeded"), 1);
    let (scanned_to, error) = passed();
    assert_eq!(error, None);
    assert!(
        scanned_to > first,
        "the pass went on: {first} -> {scanned_to}"
    );

    // Money to an address derived ahead and never given out: held, listed once, credited
    // nowhere.
    let free: String = d1
        .query_row(
            "SELECT c.address FROM custody_addresses c JOIN deposit_indexes d \
             ON d.family = c.family WHERE c.derivation_index >= d.next + 40 \
             ORDER BY c.derivation_index LIMIT 1",
            [],
            |r| r.get(0),
        )
        .expect("an address derived ahead");
    let stray = anvil.transfer(&usdc, &customer, &free, 777_000);
    anvil.mine(DEPTH);
    let held = eventually("the stray deposit held", Duration::from_secs(30), || {
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| worker.cron());
            }
        });
        let reply = held_deposits(&worker, "");
        assert_eq!(reply.status, 200, "{}", reply.text);
        let list = reply.json()["data"].as_array().cloned().unwrap();
        (!list.is_empty()).then_some(list)
    });
    assert_eq!(held.len(), 1, "one row for one log: {held:?}");
    let row = &held[0];
    assert_eq!(row["reason"], "not_given");
    assert_eq!(row["network"], "polygon");
    assert_eq!(row["address"], json!(free));
    assert_eq!(row["tx_hash"], json!(stray.to_ascii_lowercase()));
    assert_eq!(row["amount_units"], "777000");
    assert_eq!(row["token"], json!(usdc.to_ascii_lowercase()));
    assert_eq!(row["sender"], json!(customer.to_ascii_lowercase()));
    assert_eq!(row["institution_id"], Value::Null);
    worker.cron();
    assert_eq!(
        held_deposits(&worker, "").json()["data"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "a later pass never holds it twice"
    );
    let booked: i64 = d1
        .query_row(
            "SELECT count(*) FROM ledger_accounts WHERE owner = ?1",
            [&free],
            |r| r.get(0),
        )
        .unwrap();
    let booked_held: i64 = object
        .query_row(
            "SELECT count(*) FROM ledger_accounts WHERE owner = ?1",
            [&free],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!((booked, booked_held), (0, 0), "credited nowhere");
    // The list's input is bounded and named.
    for (query, named) in [
        ("?limit=0", "limit"),
        ("?limit=101", "limit"),
        ("?before=soon", "before"),
        ("?color=red", "parameter"),
        ("?limit=5&limit=6", "parameter"),
    ] {
        let reply = held_deposits(&worker, query);
        assert_eq!(reply.status, 400, "{query}: {}", reply.text);
        let body = reply.json();
        assert_eq!(body["error"], "invalid_request", "{query}: {body}");
        assert!(
            body["error_description"]
                .as_str()
                .is_some_and(|m| m.contains(named)),
            "{query}: {body}"
        );
    }
    let before = row["seen_at"].as_i64().unwrap();
    let earlier = held_deposits(&worker, &format!("?before={before}&limit=1"));
    assert_eq!(earlier.status, 200, "{}", earlier.text);
    assert_eq!(earlier.json()["data"], json!([]));
    let unauthorized = worker.send(worker.request(Method::GET, "/operator/held-deposits"), None);
    assert_eq!(unauthorized.status, 401, "{}", unauthorized.text);
    payrail_tests::books::assert_balanced(&worker, &anvil);
}

/// Money paid on a network the checkout does not watch its address on is held for the operator
/// with the institution it was given to, never credited there: one node serves Polygon and Base
/// here, so the customer's USDC paid to the checkout's Polygon address is seen by both passes,
/// credited once on Polygon, where the address is watched, and held on Base, where it is not.
#[test]
fn money_on_a_network_its_address_is_not_watched_on_is_held_with_its_institution() {
    const DEPTH: u64 = 2;
    let HeldOnChain {
        anvil,
        usdc,
        customer,
        worker,
        institution,
    } = held_on_chain(DEPTH, &["polygon", "base"]);
    let (id, session) = checkout(&worker, "2.50", "PASS-ELSEWHERE");
    let chosen = worker.send(
        worker
            .request(Method::POST, &format!("/checkout/{session}/method"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body("method=USDC:polygon"),
        None,
    );
    assert_eq!(chosen.status, 303, "{}", chosen.text);
    let object = worker.object_database(institution).unwrap();
    let (address, units): (String, String) = object
        .query_row(
            "SELECT address, base_units FROM deposit_watches WHERE session_id = ?1 \
             AND network = 'polygon'",
            [&session],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the Polygon watch");
    let watched_on_base: i64 = object
        .query_row(
            "SELECT count(*) FROM deposit_watches WHERE address = ?1 AND network = 'base'",
            [&address],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(watched_on_base, 0);
    worker.cron();
    let hash = anvil.transfer(&usdc, &customer, &address, units.parse().unwrap());
    anvil.mine(DEPTH);
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| worker.cron());
        }
    });
    assert_eq!(
        worker.transaction(0, id)["raw_status"],
        "succeeded",
        "credited on Polygon"
    );
    assert_eq!(events_of(&object, id, "payment.succeeded"), 1);
    let reply = held_deposits(&worker, "");
    assert_eq!(reply.status, 200, "{}", reply.text);
    let held = reply.json()["data"].as_array().cloned().unwrap();
    assert_eq!(held.len(), 1, "{held:?}");
    let row = &held[0];
    assert_eq!(row["reason"], "not_watched");
    assert_eq!(row["network"], "base");
    assert_eq!(row["address"], json!(address));
    assert_eq!(row["tx_hash"], json!(hash.to_ascii_lowercase()));
    assert_eq!(row["amount_units"], json!(units));
    assert_eq!(row["institution_id"], json!(institution));
    // Nothing of it in Base's books.
    let on_base: i64 = object
        .query_row(
            "SELECT count(*) FROM ledger_accounts WHERE id LIKE 'base:%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(on_base, 0, "nothing booked on Base");
}
