//! Merchant onboarding through the portal's JSON API: create, edit, the onboarding and account
//! state machines, settlement wallets checked per network (every change recorded), allowed
//! return origins, key rolls, and what checkout then accepts. Every refusal names its problem;
//! another institution's merchant is 404 everywhere.

use payrail_tests::{PortalSession, Reply, Worker};
use reqwest::Method;
use serde_json::{json, Value};

/// This module's own worker: its tests add merchants to the second institution, some of them
/// ready to take payments but only with return origins of their own, and tests that take the
/// institution's merchants as they find them (`payrail trigger` picks its newest merchant that
/// can take payments) would pick one of these.
fn worker() -> &'static Worker {
    Worker::own("onboarding")
}

/// A request to the portal's JSON API (`/portal/api{path}`) with `session`.
pub(super) fn api(
    worker: &Worker,
    session: &PortalSession,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Reply {
    worker.portal(
        method,
        &format!("/portal/api{path}"),
        Some(session),
        body.as_ref(),
    )
}

fn create(worker: &Worker, session: &PortalSession, reference: &str) -> Value {
    let reply = api(
        worker,
        session,
        Method::POST,
        "/merchants",
        Some(json!({
            "name": format!("Shop {reference}"),
            "legal_name": format!("Shop {reference} Ltd"),
            "email": "payments@shop.example",
            "psp_reference_id": reference,
        })),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.json()
}

fn patch(worker: &Worker, session: &PortalSession, id: i64, body: Value) -> Reply {
    api(
        worker,
        session,
        Method::PATCH,
        &format!("/merchants/{id}"),
        Some(body),
    )
}

fn checkout(worker: &Worker, key: &str, redirect: &str) -> Reply {
    worker.post_json(
        "/checkout/sessions",
        &json!({
            "publicKey": key, "amount": "12.00", "currency": "EUR", "title": "Onboarding order",
            "externalReference": "ONB-ORDER", "redirectUrl": redirect, "allowCrypto": true
        }),
        None,
        "/checkout/sessions",
    )
}

/// A merchant of the second institution made ready to take payments.
fn ready(worker: &Worker, session: &PortalSession, reference: &str) -> Value {
    let m = create(worker, session, reference);
    let id = m["id"].as_i64().unwrap();
    for status in ["in_review", "completed"] {
        let reply = patch(worker, session, id, json!({ "onboarding_status": status }));
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    let wallet = api(
        worker,
        session,
        Method::PUT,
        &format!("/merchants/{id}/wallets/polygon"),
        Some(json!({"address": "0xd1220a0cf47c7b9be7a2e6ba89f429762e7b9adb"})),
    );
    assert_eq!(wallet.status, 200, "{}", wallet.text);
    let origins = api(
        worker,
        session,
        Method::PUT,
        &format!("/merchants/{id}/return-origins"),
        Some(json!({"return_origins": ["https://shop.example"]})),
    );
    assert_eq!(origins.status, 200, "{}", origins.text);
    let m = origins.json();
    assert_eq!(m["can_take_payments"], true, "{m}");
    m
}

#[test]
fn a_new_merchant_is_pending_with_a_key_and_cannot_take_payments_yet() {
    let worker = worker();
    let session = worker.portal_login(1);
    let m = create(worker, &session, "ONB-NEW-1");
    assert_eq!(m["status"], "active");
    assert_eq!(m["onboarding_status"], "pending");
    assert_eq!(m["onboarding_complete"], false);
    assert_eq!(m["onboarding_next"], json!(["in_review"]));
    assert!(
        m["public_key"].as_str().unwrap().starts_with("pk_test_"),
        "sandbox keys"
    );
    assert_eq!(m["can_take_payments"], false);
    assert!(m["cannot_take_payments_because"]
        .as_str()
        .unwrap()
        .contains("onboarding"));
    let refused = checkout(
        worker,
        m["public_key"].as_str().unwrap(),
        "https://shop.example/x",
    );
    refused.assert_error(403, "merchant_unavailable");

    // The partner API sees it at once.
    let token = worker.institution_token(1);
    let id = m["id"].as_i64().unwrap();
    let seen = worker.get(
        &format!("/v1/merchants/{id}"),
        Some(&token),
        "/v1/merchants/{id}",
    );
    assert_eq!(seen.status, 200, "{}", seen.text);
    assert_eq!(seen.json()["psp_reference_id"], "ONB-NEW-1");
    let renamed = patch(worker, &session, id, json!({"name": "Renamed shop"}));
    assert_eq!(renamed.status, 200, "{}", renamed.text);
    let seen = worker.get(
        &format!("/v1/merchants/{id}"),
        Some(&token),
        "/v1/merchants/{id}",
    );
    assert_eq!(seen.json()["name"], "Renamed shop");
}

#[test]
fn bad_merchants_are_refused_naming_the_field() {
    let worker = worker();
    let session = worker.portal_login(1);
    create(worker, &session, "ONB-TAKEN-1");
    let taken = api(
        worker,
        &session,
        Method::POST,
        "/merchants",
        Some(
            json!({"name": "Other", "legal_name": "Other Ltd", "email": "a@b.example",
                    "psp_reference_id": "ONB-TAKEN-1"}),
        ),
    );
    assert!(taken.assert_error(409, "conflict").contains("ONB-TAKEN-1"));
    for (body, named) in [
        (
            json!({"name": "", "legal_name": "L", "email": "a@b.example", "psp_reference_id": "R1"}),
            "name",
        ),
        (
            json!({"name": "N", "legal_name": "L", "email": "not-an-email", "psp_reference_id": "R2"}),
            "email",
        ),
        (
            json!({"name": "N", "legal_name": "L", "email": "a@b.example", "psp_reference_id": "has space"}),
            "psp_reference_id",
        ),
        (
            json!({"name": "N", "legal_name": "L", "email": "a@b.example", "psp_reference_id": "R3", "colour": "red"}),
            "colour",
        ),
    ] {
        let reply = api(worker, &session, Method::POST, "/merchants", Some(body));
        assert!(
            reply.assert_error(400, "invalid_request").contains(named),
            "{named}"
        );
    }
    // Taken by an edit too.
    let other = create(worker, &session, "ONB-TAKEN-2");
    let edit = patch(
        worker,
        &session,
        other["id"].as_i64().unwrap(),
        json!({"psp_reference_id": "ONB-TAKEN-1"}),
    );
    edit.assert_error(409, "conflict");
}

#[test]
fn onboarding_and_account_moves_follow_the_rules() {
    let worker = worker();
    let session = worker.portal_login(1);
    let id = create(worker, &session, "ONB-MOVES-1")["id"]
        .as_i64()
        .unwrap();
    let skip = patch(
        worker,
        &session,
        id,
        json!({"onboarding_status": "completed"}),
    );
    let message = skip.assert_error(409, "conflict");
    assert!(
        message.contains("in_review"),
        "names the allowed move: {message}"
    );
    for status in ["in_review", "rejected", "in_review", "completed"] {
        let reply = patch(worker, &session, id, json!({ "onboarding_status": status }));
        assert_eq!(reply.status, 200, "{status}: {}", reply.text);
        assert_eq!(reply.json()["onboarding_status"], status);
    }
    assert!(patch(
        worker,
        &session,
        id,
        json!({"onboarding_status": "pending"})
    )
    .assert_error(409, "conflict")
    .contains("final"));
    patch(
        worker,
        &session,
        id,
        json!({"onboarding_status": "sideways"}),
    )
    .assert_error(400, "invalid_request");
    for status in ["suspended", "active", "disabled"] {
        let reply = patch(worker, &session, id, json!({ "status": status }));
        assert_eq!(reply.status, 200, "{status}: {}", reply.text);
    }
    patch(worker, &session, id, json!({"status": "active"})).assert_error(409, "conflict");
}

#[test]
fn wallets_are_checked_per_network_and_every_change_is_recorded() {
    let worker = worker();
    let session = worker.portal_login(1);
    let id = create(worker, &session, "ONB-WALLET-1")["id"]
        .as_i64()
        .unwrap();
    let put = |network: &str, address: &str| {
        api(
            worker,
            &session,
            Method::PUT,
            &format!("/merchants/{id}/wallets/{network}"),
            Some(json!({ "address": address })),
        )
    };
    for (network, address, named) in [
        (
            "ethereum",
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD",
            "EIP-55",
        ),
        (
            "ethereum",
            "0x0000000000000000000000000000000000000000",
            "zero",
        ),
        ("polygon", "0x1234", "Polygon"),
        (
            "bitcoin",
            "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5",
            "Bitcoin",
        ),
        ("solana", "0OIl", "Solana"),
        ("tron", "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", "Tron"),
    ] {
        let reply = put(network, address);
        assert!(
            reply.assert_error(400, "invalid_request").contains(named),
            "{network} {address}"
        );
    }
    put("dogecoin", "D1").assert_error(404, "not_found");

    let set = put("ethereum", "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed");
    assert_eq!(set.status, 200, "{}", set.text);
    assert_eq!(
        set.json()["wallets"][0]["address"],
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        "stored with its checksum"
    );
    assert_eq!(
        put("ethereum", "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359").status,
        200
    );
    assert_eq!(
        put("bitcoin", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4").status,
        200
    );
    let removed = api(
        worker,
        &session,
        Method::DELETE,
        &format!("/merchants/{id}/wallets/bitcoin"),
        None,
    );
    assert_eq!(removed.status, 200, "{}", removed.text);

    let detail = api(
        worker,
        &session,
        Method::GET,
        &format!("/merchants/{id}"),
        None,
    )
    .json();
    let changes = detail["wallet_changes"].as_array().unwrap();
    assert_eq!(changes.len(), 4, "{detail}");
    // Newest first: removed bitcoin, added bitcoin, replaced ethereum, added ethereum.
    assert_eq!(changes[0]["network"], "bitcoin");
    assert_eq!(changes[0]["new_address"], Value::Null);
    assert_eq!(
        changes[2]["old_address"],
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
    );
    assert_eq!(
        changes[2]["new_address"],
        "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"
    );
    assert_eq!(changes[3]["old_address"], Value::Null);
    assert!(changes
        .iter()
        .all(|c| c["changed_by"] == worker.credentials.institutions[1].admin_email.as_str()));
}

#[test]
fn checkout_needs_a_wallet_and_returns_only_to_allowed_origins() {
    let worker = worker();
    let session = worker.portal_login(1);
    let m = ready(worker, &session, "ONB-CHECKOUT-1");
    let key = m["public_key"].as_str().unwrap();
    let created = checkout(worker, key, "https://shop.example/thanks");
    assert_eq!(created.status, 201, "{}", created.text);
    // Only the networks it has a wallet on are offered.
    let page = worker.send(
        worker.http_get(created.json()["url"].as_str().unwrap()),
        None,
    );
    assert!(page.text.contains("USDC · Polygon"));
    assert!(!page.text.contains("BTC · Bitcoin"));

    let phishing = checkout(worker, key, "https://shop.example.evil.test/thanks");
    assert!(phishing
        .assert_error(403, "redirect_not_allowed")
        .contains("https://shop.example.evil.test"));

    for bad in [
        "http://shop.example",
        "https://shop.example/path",
        "not a url",
    ] {
        api(
            worker,
            &session,
            Method::PUT,
            &format!("/merchants/{}/return-origins", m["id"]),
            Some(json!({ "return_origins": [bad] })),
        )
        .assert_error(400, "invalid_request");
    }
    let many: Vec<String> = (0..11).map(|i| format!("https://s{i}.example")).collect();
    api(
        worker,
        &session,
        Method::PUT,
        &format!("/merchants/{}/return-origins", m["id"]),
        Some(json!({ "return_origins": many })),
    )
    .assert_error(400, "invalid_request");

    // Without a wallet on an offered network, no checkout.
    let removed = api(
        worker,
        &session,
        Method::DELETE,
        &format!("/merchants/{}/wallets/polygon", m["id"]),
        None,
    );
    assert_eq!(removed.json()["can_take_payments"], false);
    assert!(checkout(worker, key, "https://shop.example/thanks")
        .assert_error(403, "merchant_unavailable")
        .contains("wallet"));
}

#[test]
fn a_rolled_key_stops_at_once_or_after_its_grace() {
    let worker = worker();
    let session = worker.portal_login(1);
    let m = ready(worker, &session, "ONB-ROLL-1");
    let id = m["id"].as_i64().unwrap();
    let first = m["public_key"].as_str().unwrap().to_owned();
    let roll = |body: Option<Value>| {
        api(
            worker,
            &session,
            Method::POST,
            &format!("/merchants/{id}/roll-key"),
            body,
        )
    };
    let graced = roll(Some(json!({"grace_period_seconds": 3600})));
    assert_eq!(graced.status, 200, "{}", graced.text);
    let second = graced.json()["public_key"].as_str().unwrap().to_owned();
    assert_ne!(first, second);
    assert!(graced.json()["previous_key_expires_at"].is_string());
    assert_eq!(
        checkout(worker, &first, "https://shop.example/a").status,
        201,
        "old key in grace"
    );
    assert_eq!(
        checkout(worker, &second, "https://shop.example/a").status,
        201
    );

    let now = roll(Some(json!({"grace_period_seconds": 0})));
    assert_eq!(now.status, 200, "{}", now.text);
    let third = now.json()["public_key"].as_str().unwrap().to_owned();
    for old in [&first, &second] {
        checkout(worker, old, "https://shop.example/a").assert_error(404, "not_found");
    }
    assert_eq!(
        checkout(worker, &third, "https://shop.example/a").status,
        201
    );
    roll(Some(json!({"grace_period_seconds": -1}))).assert_error(400, "invalid_request");
}

#[test]
fn another_institutions_merchant_is_not_found_everywhere() {
    let worker = worker();
    let globex = worker.portal_login(1);
    let id = create(worker, &globex, "ONB-ISOLATED-1")["id"]
        .as_i64()
        .unwrap();
    let northwind = worker.portal_login(0);
    for (method, path, body) in [
        (Method::GET, format!("/merchants/{id}"), None),
        (
            Method::PATCH,
            format!("/merchants/{id}"),
            Some(json!({"name": "Mine now"})),
        ),
        (
            Method::PUT,
            format!("/merchants/{id}/wallets/polygon"),
            Some(json!({"address": "0xd1220a0cf47c7b9be7a2e6ba89f429762e7b9adb"})),
        ),
        (
            Method::PUT,
            format!("/merchants/{id}/return-origins"),
            Some(json!({"return_origins": ["https://evil.example"]})),
        ),
        (Method::POST, format!("/merchants/{id}/roll-key"), None),
    ] {
        api(worker, &northwind, method.clone(), &path, body).assert_error(404, "not_found");
    }
    let listed = api(
        worker,
        &northwind,
        Method::GET,
        "/merchants?q=ONB-ISOLATED-1",
        None,
    );
    assert_eq!(listed.json()["data"], json!([]));
    let mine = api(
        worker,
        &globex,
        Method::GET,
        &format!("/merchants/{id}"),
        None,
    )
    .json();
    assert_eq!(mine["name"], "Shop ONB-ISOLATED-1", "unchanged");
}

#[test]
fn the_merchant_list_searches_and_pages() {
    let worker = worker();
    let session = worker.portal_login(1);
    for i in 0..3 {
        create(worker, &session, &format!("ONB-LIST-{i}"));
    }
    let by_reference = api(
        worker,
        &session,
        Method::GET,
        "/merchants?q=ONB-LIST-1",
        None,
    )
    .json();
    assert_eq!(by_reference["data"].as_array().unwrap().len(), 1);
    assert_eq!(by_reference["data"][0]["psp_reference_id"], "ONB-LIST-1");
    let by_name = api(
        worker,
        &session,
        Method::GET,
        "/merchants?q=shop%20onb-list",
        None,
    )
    .json();
    assert_eq!(
        by_name["data"].as_array().unwrap().len(),
        3,
        "a name prefix, any case"
    );
    let first = api(
        worker,
        &session,
        Method::GET,
        "/merchants?q=Shop%20ONB-LIST&limit=2",
        None,
    )
    .json();
    assert_eq!(first["has_more"], true);
    let cursor = first["next_cursor"].as_i64().unwrap();
    let rest = api(
        worker,
        &session,
        Method::GET,
        &format!("/merchants?q=Shop%20ONB-LIST&limit=2&starting_after={cursor}"),
        None,
    )
    .json();
    assert_eq!(rest["data"].as_array().unwrap().len(), 1);
    assert_eq!(rest["has_more"], false);
    api(worker, &session, Method::GET, "/merchants?colour=red", None)
        .assert_error(400, "invalid_request");
}

/// Runs `count` requests at once; returns their replies.
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

#[test]
fn racing_merchant_writes_each_apply_once() {
    let worker = worker();
    let session = worker.portal_login(1);
    let m = create(worker, &session, "ONB-RACE-1");
    let id = m["id"].as_i64().unwrap();
    assert_eq!(
        patch(
            worker,
            &session,
            id,
            json!({"onboarding_status": "in_review"})
        )
        .status,
        200
    );

    // Approve and reject at once: one decision wins, the other is told the merchant changed.
    let decisions = in_parallel(6, |i| {
        let to = if i % 2 == 0 { "completed" } else { "rejected" };
        patch(worker, &session, id, json!({ "onboarding_status": to }))
    });
    let won: Vec<String> = decisions
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| r.json()["onboarding_status"].as_str().unwrap().to_owned())
        .collect();
    for r in decisions.iter().filter(|r| r.status != 200) {
        r.assert_error(409, "conflict");
    }
    let now = api(
        worker,
        &session,
        Method::GET,
        &format!("/merchants/{id}"),
        None,
    )
    .json();
    assert!(!won.is_empty());
    // Every later success moved on from the earlier one (completed is final, rejected may only
    // go back to review), so the stored state is the last success.
    assert_eq!(
        now["onboarding_status"],
        won.last().unwrap().as_str(),
        "{won:?}"
    );

    // Six different first wallets at once: one is stored, and exactly it is in the log.
    let addresses = [
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
        "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
        "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
        "0x52908400098527886E0F7030069857D2E4169EE7",
        "0x8617E340B3D01FA5F11F306F4090FD50E238070D",
    ];
    let set = in_parallel(6, |i| {
        api(
            worker,
            &session,
            Method::PUT,
            &format!("/merchants/{id}/wallets/ethereum"),
            Some(json!({ "address": addresses[i] })),
        )
    });
    let ok = set.iter().filter(|r| r.status == 200).count();
    assert!(ok >= 1);
    for r in set.iter().filter(|r| r.status != 200) {
        r.assert_error(409, "conflict");
    }
    let detail = api(
        worker,
        &session,
        Method::GET,
        &format!("/merchants/{id}"),
        None,
    )
    .json();
    let changes = detail["wallet_changes"].as_array().unwrap();
    assert_eq!(
        changes.len(),
        ok,
        "one log line per stored change: {detail}"
    );
    assert_eq!(
        detail["wallets"][0]["address"], changes[0]["new_address"],
        "the newest change is what is stored"
    );

    // Rolling the key from several tabs at once: one new key, the rest refused.
    let rolls = in_parallel(4, |_| {
        api(
            worker,
            &session,
            Method::POST,
            &format!("/merchants/{id}/roll-key"),
            Some(json!({"grace_period_seconds": 0})),
        )
    });
    let winners: Vec<&Reply> = rolls.iter().filter(|r| r.status == 200).collect();
    assert!(!winners.is_empty());
    for r in rolls.iter().filter(|r| r.status != 200) {
        r.assert_error(409, "conflict");
    }
    let key = api(
        worker,
        &session,
        Method::GET,
        &format!("/merchants/{id}"),
        None,
    )
    .json()["public_key"]
        .clone();
    assert!(winners.iter().any(|r| r.json()["public_key"] == key));
}
