//! Racing requests, fired in parallel over real HTTP: every state change is guarded on what it
//! read, so money is never refunded twice, a rotated secret never leaves a live token behind, an
//! endpoint change never undoes a rotation, parallel password guesses are all counted, and
//! parallel checkouts at a nearly full limit create exactly what it leaves.

use std::collections::HashMap;

use payrail_tests::hooks::{act, endpoint, payment};
use payrail_tests::{Reply, Worker};
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{json, Value};

/// This module's own worker: sixteen wrong passwords throttle the second institution's admin's
/// logins from this address for fifteen minutes, which every other test logging in as that
/// admin would run into.
fn worker() -> &'static Worker {
    Worker::own("races")
}

/// Runs `count` copies of `request` at once; returns their replies.
fn in_parallel(count: usize, request: impl Fn(usize) -> Reply + Sync) -> Vec<Reply> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..count)
            .map(|i| {
                let request = &request;
                scope.spawn(move || request(i))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn sandbox(worker: &Worker, id: i64, action: &str, body: &Value) -> Reply {
    worker.post_json(
        &format!("/sandbox/transactions/{id}/{action}"),
        body,
        Some(&worker.sandbox_token(0)),
        "/sandbox/transactions/{id}/{action}",
    )
}

fn statuses(replies: &[Reply]) -> HashMap<u16, usize> {
    let mut counts = HashMap::new();
    for r in replies {
        *counts.entry(r.status).or_default() += 1;
    }
    counts
}

fn decimal(value: &Value) -> Decimal {
    value.as_str().map_or(Decimal::ZERO, |s| s.parse().unwrap())
}

/// Refund events stored for the transaction (the outbox, read straight from the database).
fn refund_events(worker: &Worker, id: i64) -> i64 {
    worker
        .database()
        .query_row(
            "SELECT count(*) FROM events WHERE transaction_id = ?1 AND type = 'payment.refunded'",
            [id],
            |r| r.get(0),
        )
        .unwrap()
}

/// A payment of 40.00 EUR, paid in full and settled.
fn settled_payment(worker: &Worker, reference: &str) -> (i64, Decimal) {
    let id = payment(worker, 0, reference);
    act(worker, 0, id, "pay", json!({"amount": "40.00"}));
    let settled = act(worker, 0, id, "settle", json!({}));
    (id, decimal(&settled["amount"]["gross"]))
}

#[test]
fn parallel_partial_refunds_never_refund_more_than_was_paid() {
    let worker = worker();
    let (id, gross) = settled_payment(worker, "RACE-REFUND-1");
    // Ten refunds of 12.00 on 40.00: at most three fit.
    let replies = in_parallel(10, |_| {
        sandbox(worker, id, "refund", &json!({"amount": "12.00"}))
    });
    let counts = statuses(&replies);
    let ok = counts.get(&200).copied().unwrap_or(0);
    assert!((1..=3).contains(&ok), "{counts:?}");
    for r in replies.iter().filter(|r| r.status != 200) {
        r.assert_error(409, "conflict");
    }
    let after = worker.transaction(0, id);
    let refunded: Decimal = Decimal::from(12 * ok as i64);
    assert_eq!(
        after["status"],
        if refunded == gross {
            "refunded"
        } else {
            "partially_refunded"
        }
    );
    // Every success left exactly one event; nothing else did.
    assert_eq!(refund_events(worker, id), ok as i64);
    let stored: String = worker
        .database()
        .query_row(
            "SELECT amount_refunded FROM transactions WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored.parse::<Decimal>().unwrap(), refunded);
}

#[test]
fn refunding_the_rest_races_a_partial_refund_without_refunding_twice() {
    let worker = worker();
    let (id, gross) = settled_payment(worker, "RACE-REFUND-2");
    let replies = in_parallel(6, |i| {
        let amount = if i % 2 == 0 { "40.00" } else { "15.00" };
        sandbox(worker, id, "refund", &json!({ "amount": amount }))
    });
    let refunded: Decimal = replies
        .iter()
        .zip(["40.00", "15.00"].iter().cycle())
        .filter(|(r, _)| r.status == 200)
        .map(|(_, a)| a.parse::<Decimal>().unwrap())
        .sum();
    assert!(refunded <= gross, "refunded {refunded} of {gross}");
    for r in replies.iter().filter(|r| r.status != 200) {
        r.assert_error(409, "conflict");
    }
    let ok = replies.iter().filter(|r| r.status == 200).count();
    assert!(ok >= 1);
    assert_eq!(refund_events(worker, id), ok as i64);
}

#[test]
fn settlement_racing_a_refund_keeps_what_each_success_wrote() {
    let worker = worker();
    let id = payment(worker, 0, "RACE-SETTLE-1");
    act(worker, 0, id, "pay", json!({"amount": "40.00"}));
    let replies = in_parallel(2, |i| {
        if i == 0 {
            sandbox(worker, id, "settle", &json!({}))
        } else {
            sandbox(worker, id, "refund", &json!({"amount": "40.00"}))
        }
    });
    let (settle, refund) = (&replies[0], &replies[1]);
    for r in [settle, refund] {
        assert!(r.status == 200 || r.status == 409, "{}", r.text);
    }
    let after = worker.transaction(0, id);
    if settle.status == 200 {
        // The settlement's fields survive whatever came after it.
        assert!(after["tx_hashes"]["settlement"].is_string(), "{after}");
        assert!(after["amount"]["net"].is_string(), "{after}");
    } else {
        assert!(after["tx_hashes"]["settlement"].is_null(), "{after}");
    }
    if refund.status == 200 {
        assert_eq!(after["status"], "refunded", "{after}");
    } else {
        assert_ne!(after["status"], "refunded", "{after}");
    }
}

#[test]
fn a_token_issued_while_its_secret_rotates_dies_with_the_old_secret() {
    let worker = worker();
    let session = worker.portal_login(0);
    let (id, secret) = worker.new_client(0, "race", &["transactions:read"]);
    // Token requests under the old secret race the rotation.
    let replies = in_parallel(24, |i| {
        if i == 12 {
            worker.portal(
                Method::POST,
                &format!("/portal/api/clients/{id}/rotate"),
                Some(&session),
                None,
            )
        } else {
            worker.token_form(&[
                ("grant_type", "client_credentials"),
                ("client_id", &id),
                ("client_secret", &secret),
            ])
        }
    });
    assert_eq!(replies[12].status, 200, "{}", replies[12].text);
    let issued: Vec<String> = replies
        .iter()
        .enumerate()
        .filter(|(i, r)| *i != 12 && r.status == 200)
        .map(|(_, r)| r.json()["access_token"].as_str().unwrap().to_owned())
        .collect();
    // Refused: the old secret after the rotation, or (once enough of those failed) the
    // client's failed-authentication throttle.
    for (i, r) in replies.iter().enumerate() {
        if i != 12 && r.status != 200 {
            if r.status == 429 {
                r.assert_error(429, "rate_limited");
            } else {
                r.assert_error(401, "invalid_client");
            }
        }
    }
    // Whatever was issued before the rotation was revoked by it; nothing was issued after it.
    for token in &issued {
        worker
            .get("/v1/transactions?limit=1", Some(token), "/v1/transactions")
            .assert_error(401, "invalid_client");
    }
}

#[test]
fn an_endpoint_change_never_undoes_a_concurrent_rotation() {
    let worker = worker();
    let session = worker.portal_login(0);
    let (endpoint_id, _) = endpoint(worker, &session, "http://127.0.0.1:9/race", None);
    let path = format!("/portal/api/webhook-endpoints/{endpoint_id}");
    let replies = in_parallel(8, |i| {
        if i == 4 {
            worker.portal(
                Method::POST,
                &format!("{path}/rotate-secret"),
                Some(&session),
                Some(&json!({"grace_period_seconds": 0})),
            )
        } else {
            worker.portal(
                Method::PATCH,
                &path,
                Some(&session),
                Some(&json!({ "description": format!("edit {i}") })),
            )
        }
    });
    for r in &replies {
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let rotated = replies[4].json()["signing_secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let revealed = worker.portal(Method::GET, &format!("{path}/secret"), Some(&session), None);
    assert_eq!(revealed.json()["signing_secret"], rotated.as_str());

    // Two rotations at once: one wins, the other is told so; the winner's secret is current.
    let both = in_parallel(2, |_| {
        worker.portal(
            Method::POST,
            &format!("{path}/rotate-secret"),
            Some(&session),
            Some(&json!({"grace_period_seconds": 0})),
        )
    });
    let winners: Vec<&Reply> = both.iter().filter(|r| r.status == 200).collect();
    assert!(!winners.is_empty());
    for r in both.iter().filter(|r| r.status != 200) {
        r.assert_error(409, "conflict");
    }
    let current = worker
        .portal(Method::GET, &format!("{path}/secret"), Some(&session), None)
        .json()["signing_secret"]
        .clone();
    assert!(winners
        .iter()
        .any(|r| r.json()["signing_secret"] == current));
}

#[test]
fn parallel_login_guesses_are_counted_before_they_are_checked() {
    let worker = worker();
    // The second institution's admin, so the other tests' logins are not throttled.
    let email = worker.credentials.institutions[1].admin_email.clone();
    let replies = in_parallel(16, |_| {
        worker.send(
            worker
                .request(Method::POST, "/portal/api/login")
                .json(&json!({"email": email, "password": "not-the-password"})),
            None,
        )
    });
    let counts = statuses(&replies);
    // Five failures per address and window: every further guess is refused unchecked.
    assert!(counts.get(&401).copied().unwrap_or(0) <= 5, "{counts:?}");
    assert_eq!(
        counts.get(&401).copied().unwrap_or(0) + counts.get(&429).copied().unwrap_or(0),
        16,
        "{counts:?}"
    );
    for r in replies.iter().filter(|r| r.status == 429) {
        assert!(r.header("retry-after").is_some());
    }
}

#[test]
fn enabling_an_endpoint_through_patch_clears_its_failure_clock() {
    let worker = worker();
    let session = worker.portal_login(0);
    let receiver = payrail_tests::receiver::Receiver::start();
    receiver.set_mode(payrail_tests::receiver::Mode::Status(500));
    let (endpoint_id, _) = endpoint(worker, &session, &receiver.url("/clock"), None);
    let path = format!("/portal/api/webhook-endpoints/{endpoint_id}");
    let sent = worker.portal(Method::POST, &format!("{path}/test"), Some(&session), None);
    assert_eq!(sent.status, 201, "{}", sent.text);
    let clock = |worker: &Worker| -> Option<i64> {
        worker
            .database()
            .query_row(
                "SELECT first_failure_at FROM webhook_endpoints WHERE id = ?1",
                [&endpoint_id],
                |r| r.get(0),
            )
            .unwrap()
    };
    payrail_tests::eventually(
        "a failed attempt to start the clock",
        std::time::Duration::from_secs(30),
        || clock(worker),
    );
    for status in ["disabled", "enabled"] {
        let reply = worker.portal(
            Method::PATCH,
            &path,
            Some(&session),
            Some(&json!({ "status": status })),
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(reply.json()["status"], status);
    }
    assert_eq!(clock(worker), None, "enabled with a clean clock");
}

/// A worker whose deposit addresses are derived (`PAYRAIL_EVM_XPUB`), so a checkout session
/// takes an index from the deposit counter: its own, since the test fills a merchant's
/// checkout window and counts every row it has.
fn deriving() -> &'static Worker {
    static WORKER: std::sync::OnceLock<Worker> = std::sync::OnceLock::new();
    WORKER.get_or_init(|| {
        Worker::start_with_vars(
            "sandbox",
            3600,
            &[("PAYRAIL_EVM_XPUB", payrail_tests::chain::TEST_XPUB)],
        )
    })
}

/// Then the same race for another key the worker has just made a session for, so every racer
/// is made on what the worker remembers of the key without reading it first (the counts and
/// the address's index in one batch). One after the other: the worker's deposit index is
/// shared.
#[test]
fn parallel_checkouts_past_a_nearly_full_limit_create_exactly_what_it_leaves() {
    limit_race(deriving(), true, 0, false, "LIMIT");
    limit_race(deriving(), true, 1, true, "KNOWN-DERIVED");
    replay_race(deriving(), 2);
}

/// Eight checkouts at once with one new idempotency key, for a key the worker remembers, on a
/// worker that derives addresses (each racer takes an address's index before the write): one
/// session, the rest replays of it, and the merchant's window counts the one session only (a
/// reviewer found the index's batch counting every racer against the merchant).
fn replay_race(worker: &Worker, merchant: usize) {
    let key = worker.credentials.institutions[0].merchants[merchant]
        .public_key
        .clone();
    let options = |reference: &str| {
        json!({
            "publicKey": key, "amount": "10.00", "currency": "EUR", "title": "Race",
            "externalReference": reference, "idempotencyKey": reference,
            "redirectUrl": "https://shop.example/done", "allowCrypto": true
        })
    };
    let warm = worker.post_json(
        "/checkout/sessions",
        &options("RACE-REPLAY-FIRST"),
        None,
        "/checkout/sessions",
    );
    assert_eq!(warm.status, 201, "{}", warm.text);
    let db = worker.database();
    let before = counted(&db, &key);
    let replies = in_parallel(8, |_| {
        worker.post_json(
            "/checkout/sessions",
            &options("RACE-REPLAY-ONE-KEY"),
            None,
            "/checkout/sessions",
        )
    });
    let counts = statuses(&replies);
    assert_eq!(counts.get(&201).copied(), Some(1), "{counts:?}");
    assert_eq!(counts.get(&200).copied(), Some(7), "{counts:?}");
    let sessions: std::collections::HashSet<String> = replies
        .iter()
        .map(|r| r.json()["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sessions.len(), 1, "every racer answered the one session");
    assert_eq!(counted(&db, &key), before + 1, "one session, counted once");
}

/// The race for a remembered key whose address is simulated: the counts and every insert in
/// one batch.
#[test]
fn parallel_checkouts_for_a_remembered_key_past_a_nearly_full_limit_create_exactly_what_it_leaves()
{
    limit_race(worker(), false, 1, true, "KNOWN");
}

/// Sixteen checkouts at once for merchant `merchant` of the first institution, whose key has
/// three sessions left in its window: exactly three sessions, the rest refused, and the window
/// holds exactly the sessions stored (a refused attempt counts against its address only). `derived`: the worker derives deposit addresses. `warm`: one session is made first,
/// so the racers find the key remembered.
fn limit_race(worker: &Worker, derived: bool, merchant: usize, warm: bool, tag: &str) {
    let merchant = &worker.credentials.institutions[0].merchants[merchant];
    let key = merchant.public_key.clone();
    let db = worker.database();
    let options = |reference: String| {
        json!({
            "publicKey": key, "amount": "10.00", "currency": "EUR", "title": "Race",
            "externalReference": reference.clone(), "idempotencyKey": reference,
            "redirectUrl": "https://shop.example/done", "allowCrypto": true
        })
    };
    if warm {
        let first = worker.post_json(
            "/checkout/sessions",
            &options(format!("RACE-{tag}-FIRST")),
            None,
            "/checkout/sessions",
        );
        assert_eq!(first.status, 201, "{}", first.text);
    }
    let count = |sql: &str| -> i64 {
        db.query_row(sql, [], |r| r.get(0))
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    };
    let merchant_id: i64 = db
        .query_row(
            "SELECT id FROM merchants WHERE public_key = ?1",
            [&key],
            |r| r.get(0),
        )
        .unwrap();
    let rows = || {
        let of = |table: &str| {
            count(&format!(
                "SELECT count(*) FROM {table} WHERE merchant_id = {merchant_id}"
            ))
        };
        (
            of("transactions"),
            of("checkout_sessions"),
            of("idempotency_keys"),
            count("SELECT coalesce(max(next), 0) FROM deposit_indexes WHERE family = 'evm'"),
        )
    };
    // The merchant's per-key window (600 sessions a minute) holds 597: three are left.
    const LEFT: i64 = 3;
    const RACERS: usize = 16;
    db.execute(
        "INSERT INTO auth_failures (client_id, source, window_start, failures) \
         VALUES (?1, '*', unixepoch(), ?2) ON CONFLICT (client_id, source) DO UPDATE SET \
         window_start = excluded.window_start, failures = excluded.failures",
        rusqlite::params![format!("checkout:{key}"), 600 - LEFT],
    )
    .unwrap();
    let before = rows();
    let replies = in_parallel(RACERS, |i| {
        worker.post_json(
            "/checkout/sessions",
            &options(format!("RACE-{tag}-{i}")),
            None,
            "/checkout/sessions",
        )
    });
    let counts = statuses(&replies);
    assert_eq!(counts.get(&201).copied(), Some(LEFT as usize), "{counts:?}");
    assert_eq!(
        counts.get(&429).copied(),
        Some(RACERS - LEFT as usize),
        "{counts:?}"
    );
    for refused in replies.iter().filter(|r| r.status == 429) {
        assert!(
            refused.text.contains("for this merchant"),
            "{}",
            refused.text
        );
        let retry = refused.retry_after();
        assert!((1..=60).contains(&retry), "{retry}");
    }
    // Exactly three transactions, sessions and keys, and three deposit indexes taken (when
    // addresses are derived): a refused attempt, even one that raced past the first read, used
    // up none.
    let after = rows();
    assert_eq!(
        (
            after.0 - before.0,
            after.1 - before.1,
            after.2 - before.2,
            after.3 - before.3
        ),
        (LEFT, LEFT, LEFT, if derived { LEFT } else { 0 }),
        "before {before:?}, after {after:?}"
    );
    // Only the sessions stored count against the merchant: its window is full, never past.
    assert_eq!(counted(&db, &key), 600);
    if !derived {
        return;
    }
    let indexes: std::collections::HashSet<i64> = replies
        .iter()
        .filter(|r| r.status == 201)
        .map(|r| {
            let id = r.json()["id"].as_str().unwrap().to_owned();
            db.query_row(
                "SELECT deposit_index FROM checkout_sessions WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap()
        })
        .collect();
    assert_eq!(indexes.len(), LEFT as usize, "{indexes:?}");
}

/// The attempts counted in the key's window.
fn counted(db: &rusqlite::Connection, key: &str) -> i64 {
    db.query_row(
        "SELECT failures FROM auth_failures WHERE client_id = ?1 AND source = '*'",
        [format!("checkout:{key}")],
        |r| r.get(0),
    )
    .unwrap()
}
