//! A merchant's USDC settlement network (cross-network settlement with CCTP, docs/CCTP.md),
//! against a worker whose networks are one anvil node's: Polygon, Base and Arbitrum with USDC and
//! CCTP contracts, Ethereum with USDC and no CCTP, Polygon with USDT too. Through the portal's
//! JSON API an admin chooses the network, each refusal named (an unknown network, one not
//! configured, one without CCTP, one where the merchant has no wallet, a held institution, a
//! viewer); every change is recorded and e-mailed like a wallet change, a network chosen used
//! after the wallet cool-off, and a clear at once. A checkout of such a merchant offers USDC on every network with CCTP besides what its
//! wallets give; cleared, only what its wallets give. The merchant page shows it all, and takes
//! the choice from its form, in Chromium at desktop and phone widths.

use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use payrail_tests::browser::{exclusive, Browser};
use payrail_tests::chain::{Anvil, TEST_XPUB};
use payrail_tests::{PortalSession, Reply, Worker};
use reqwest::Method;
use serde_json::{json, Value};

use super::onboarding::api;

/// The wallet cool-off this worker runs with: two hours.
const COOL_OFF: i64 = 7200;

/// The networks with CCTP, in the order checkout lists them.
const CCTP: &[&str] = &["polygon", "base", "arbitrum"];

/// Settlement wallets of the test's merchants (accounts of no contract and nobody's custody).
const BASE_WALLET: &str = "0xd1220a0cf47c7b9be7a2e6ba89f429762e7b9adb";
const ETHEREUM_WALLET: &str = "0x8ba1f109551bd432803012645ac136ddd64dba72";

struct Setup {
    worker: Worker,
    // Kept for the worker's life: its node.
    _anvil: Anvil,
}

/// Held by the test that writes the worker's D1 file directly (alone: a write of the worker's
/// at the same moment would find the file locked) and, shared, by every other.
static DIRECT_WRITES: RwLock<()> = RwLock::new(());

/// The worker of this module, for a test that writes its database only through it.
fn shared() -> (RwLockReadGuard<'static, ()>, &'static Setup) {
    let guard = DIRECT_WRITES.read().unwrap_or_else(|e| e.into_inner());
    (guard, setup())
}

/// The worker of this module, for the test that writes its database file directly.
fn alone() -> (RwLockWriteGuard<'static, ()>, &'static Setup) {
    let guard = DIRECT_WRITES.write().unwrap_or_else(|e| e.into_inner());
    (guard, setup())
}

/// The worker of this module, on its own chain.
fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let anvil = Anvil::start();
        let owner = anvil.account(0);
        let attester = anvil.account(9);
        let mut config = serde_json::Map::new();
        for network in ["ethereum", "polygon", "base", "arbitrum"] {
            let usdc = anvil.token("USD Coin", "USDC");
            let mut tokens = json!({"USDC": {"address": usdc}});
            if network == "polygon" {
                tokens["USDT"] = json!({"address": anvil.token("Tether USD", "USDT")});
            }
            let mut settings = json!({"rpc_url": anvil.url, "chain_id": 31337,
                "confirmations": 2, "tokens": tokens});
            if CCTP.contains(&network) {
                let domain = payrail_evm::cctp::domain_named(network)
                    .expect("a CCTP domain")
                    .id;
                let cctp = anvil.cctp(domain, &[&attester], 1, &usdc, &owner);
                settings["cctp"] = json!({"token_messenger": cctp.messenger,
                    "message_transmitter": cctp.transmitter,
                    "attestation_url": "http://127.0.0.1:9"});
            }
            config.insert(network.to_owned(), settings);
        }
        let chains = Value::Object(config).to_string();
        let cool_off = COOL_OFF.to_string();
        let worker = Worker::start_with_vars(
            "sandbox",
            3600,
            &[
                ("PAYRAIL_EVM_XPUB", TEST_XPUB),
                ("PAYRAIL_CHAINS", &chains),
                ("PAYRAIL_WALLET_COOLOFF_SECONDS", &cool_off),
            ],
        );
        Setup {
            worker,
            _anvil: anvil,
        }
    })
}

/// Sets merchant `id`'s USDC settlement network to `body` (the whole JSON body).
fn choose(worker: &Worker, session: &PortalSession, id: i64, body: Value) -> Reply {
    api(
        worker,
        session,
        Method::PUT,
        &format!("/merchants/{id}/usdc-settlement-network"),
        Some(body),
    )
}

fn detail(worker: &Worker, session: &PortalSession, id: i64) -> Value {
    let reply = api(
        worker,
        session,
        Method::GET,
        &format!("/merchants/{id}"),
        None,
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()
}

/// A merchant of the session's institution, onboarded and taking payments back to
/// https://shop.example, with settlement wallets on `wallets` (network, address).
fn merchant(
    worker: &Worker,
    session: &PortalSession,
    reference: &str,
    wallets: &[(&str, &str)],
) -> i64 {
    let created = api(
        worker,
        session,
        Method::POST,
        "/merchants",
        Some(json!({
            "name": format!("Across {reference}"),
            "legal_name": format!("Across {reference} Ltd"),
            "email": "payments@across.example",
            "psp_reference_id": reference,
        })),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.json()["id"].as_i64().unwrap();
    for status in ["in_review", "completed"] {
        let moved = api(
            worker,
            session,
            Method::PATCH,
            &format!("/merchants/{id}"),
            Some(json!({ "onboarding_status": status })),
        );
        assert_eq!(moved.status, 200, "{}", moved.text);
    }
    for (network, address) in wallets {
        let set = api(
            worker,
            session,
            Method::PUT,
            &format!("/merchants/{id}/wallets/{network}"),
            Some(json!({ "address": address })),
        );
        assert_eq!(set.status, 200, "{}", set.text);
    }
    let origins = api(
        worker,
        session,
        Method::PUT,
        &format!("/merchants/{id}/return-origins"),
        Some(json!({"return_origins": ["https://shop.example"]})),
    );
    assert_eq!(origins.status, 200, "{}", origins.text);
    id
}

fn unix(text: &Value) -> i64 {
    let text = text.as_str().unwrap_or_else(|| panic!("a time: {text}"));
    shared_types::time::parse_unix(text).unwrap_or_else(|| panic!("an RFC 3339 time: {text}"))
}

/// The institution's `wallet_changed` notifications about `merchant`'s USDC settlement network.
fn told(worker: &Worker, session: &PortalSession, merchant: &str) -> Vec<Value> {
    let reply = api(worker, session, Method::GET, "/notifications", None);
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| {
            n["kind"] == "wallet_changed"
                && n["subject"]
                    .as_str()
                    .is_some_and(|s| s.contains("USDC settlement network") && s.contains(merchant))
        })
        .cloned()
        .collect()
}

#[test]
fn an_admin_chooses_the_network_each_change_recorded_cooled_off_and_told_and_clears_it() {
    let (_shared, setup) = shared();
    let worker = &setup.worker;
    let admin = worker.portal_login(0);
    let email = &worker.credentials.institutions[0].admin_email;
    let id = merchant(worker, &admin, "ACROSS-SET", &[("base", BASE_WALLET)]);
    let before = detail(worker, &admin, id);
    assert_eq!(before["usdc_settlement_network"], Value::Null);
    assert_eq!(before["usdc_settlement_usable_from"], Value::Null);
    assert_eq!(before["usdc_settlement_changes"], json!([]));

    let chosen = choose(
        worker,
        &admin,
        id,
        json!({"usdc_settlement_network": "base"}),
    );
    assert_eq!(chosen.status, 200, "{}", chosen.text);
    let chosen = chosen.json();
    assert_eq!(chosen["usdc_settlement_network"], "base");
    let shown = detail(worker, &admin, id);
    let changes = shown["usdc_settlement_changes"].as_array().unwrap().clone();
    assert_eq!(changes.len(), 1, "{shown}");
    let change = &changes[0];
    assert_eq!(
        (
            &change["old_network"],
            &change["new_network"],
            &change["changed_by"]
        ),
        (&Value::Null, &json!("base"), &json!(email))
    );
    // The wallet cool-off, from the change.
    assert_eq!(
        unix(&change["usable_from"]) - unix(&change["changed_at"]),
        COOL_OFF
    );
    assert_eq!(shown["usdc_settlement_usable_from"], change["usable_from"]);
    assert_eq!(chosen["usdc_settlement_usable_from"], change["usable_from"]);
    // Every admin is told, as of a wallet change.
    let notes = told(worker, &admin, "Across ACROSS-SET");
    assert_eq!(notes.len(), 1, "{notes:?}");
    let body = notes[0]["body"].as_str().unwrap();
    assert!(
        body.to_lowercase().contains(BASE_WALLET),
        "the wallet on Base in {body}"
    );
    for said in [
        "was set to base",
        "USDT and ether",
        "polygon, arbitrum",
        email,
    ] {
        assert!(body.contains(said), "{said:?} not in {body}");
    }

    // The same choice again changes nothing: no record, no e-mail, the cool-off kept.
    let again = choose(
        worker,
        &admin,
        id,
        json!({"usdc_settlement_network": "base"}),
    );
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(
        again.json()["usdc_settlement_usable_from"],
        change["usable_from"]
    );
    assert_eq!(
        detail(worker, &admin, id)["usdc_settlement_changes"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(told(worker, &admin, "Across ACROSS-SET").len(), 1);

    // null clears it: recorded and told like any change.
    let cleared = choose(worker, &admin, id, json!({"usdc_settlement_network": null}));
    assert_eq!(cleared.status, 200, "{}", cleared.text);
    assert_eq!(cleared.json()["usdc_settlement_network"], Value::Null);
    let shown = detail(worker, &admin, id);
    let changes = shown["usdc_settlement_changes"].as_array().unwrap();
    assert_eq!(changes.len(), 2, "{shown}");
    assert_eq!(
        (&changes[0]["old_network"], &changes[0]["new_network"]),
        (&json!("base"), &Value::Null)
    );
    // A clear sends nothing anywhere new: it applies at once, as a wallet removed.
    assert_eq!(changes[0]["usable_from"], changes[0]["changed_at"]);
    assert_eq!(
        shown["usdc_settlement_usable_from"],
        changes[0]["usable_from"]
    );
    let notes = told(worker, &admin, "Across ACROSS-SET");
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes
        .iter()
        .any(|n| n["body"].as_str().unwrap().contains("(base) was cleared")));

    // The list shows the choice too.
    let list = api(worker, &admin, Method::GET, "/merchants?q=ACROSS-SET", None);
    assert_eq!(list.status, 200, "{}", list.text);
    assert_eq!(
        list.json()["data"][0]["usdc_settlement_network"],
        Value::Null
    );
}

#[test]
fn each_refusal_names_its_problem_and_changes_nothing() {
    let (_shared, setup) = shared();
    let worker = &setup.worker;
    let admin = worker.portal_login(0);
    let id = merchant(
        worker,
        &admin,
        "ACROSS-REFUSED",
        &[("base", BASE_WALLET), ("ethereum", ETHEREUM_WALLET)],
    );
    for (body, says) in [
        (
            json!({"usdc_settlement_network": "dogecoin"}),
            "no such network \"dogecoin\"",
        ),
        (
            json!({"usdc_settlement_network": "solana"}),
            "solana is not configured",
        ),
        (
            json!({"usdc_settlement_network": "ethereum"}),
            "ethereum has no CCTP configured",
        ),
        (
            json!({"usdc_settlement_network": "arbitrum"}),
            "no settlement wallet on arbitrum",
        ),
        (json!({}), "usdc_settlement_network: required"),
        (
            json!({"usdc_settlement_network": 7}),
            "usdc_settlement_network",
        ),
        (
            json!({"usdc_settlement_network": "base", "also": 1}),
            "also",
        ),
    ] {
        let refused = choose(worker, &admin, id, body.clone());
        let why = refused.assert_error(400, "invalid_request");
        assert!(why.contains(says), "{body}: {why}");
    }
    // Each network refusal says which networks would do.
    let why = choose(
        worker,
        &admin,
        id,
        json!({"usdc_settlement_network": "ethereum"}),
    )
    .assert_error(400, "invalid_request");
    assert!(why.contains("polygon, base, arbitrum"), "{why}");
    let shown = detail(worker, &admin, id);
    assert_eq!(shown["usdc_settlement_network"], Value::Null);
    assert_eq!(shown["usdc_settlement_changes"], json!([]));

    // Another institution's merchant is unknown.
    let other = worker.portal_login(1);
    choose(
        worker,
        &other,
        id,
        json!({"usdc_settlement_network": "base"}),
    )
    .assert_error(404, "not_found");

    // A viewer changes nothing; a request without the CSRF token neither.
    let invited = api(
        worker,
        &admin,
        Method::POST,
        "/users",
        Some(json!({"email": "across-viewer@northwind.example", "role": "viewer"})),
    );
    assert_eq!(invited.status, 201, "{}", invited.text);
    let viewer = worker.portal_login_as(
        "across-viewer@northwind.example",
        invited.json()["password"].as_str().unwrap(),
    );
    choose(
        worker,
        &viewer,
        id,
        json!({"usdc_settlement_network": "base"}),
    )
    .assert_error(403, "admin_required");
    let forged = PortalSession {
        cookie: admin.cookie.clone(),
        csrf: "not-the-token".to_owned(),
    };
    choose(
        worker,
        &forged,
        id,
        json!({"usdc_settlement_network": "base"}),
    )
    .assert_error(403, "csrf_failed");
    assert_eq!(
        detail(worker, &admin, id)["usdc_settlement_changes"],
        json!([])
    );
}

#[test]
fn an_institution_whose_money_is_held_in_its_object_is_refused_the_choice_for_now() {
    let (_alone, setup) = alone();
    let worker = &setup.worker;
    let admin = worker.portal_login(1);
    let id = merchant(worker, &admin, "ACROSS-HELD", &[("base", BASE_WALLET)]);
    let name = &worker.credentials.institutions[1].name;
    let database = worker.database();
    let institution: i64 = database
        .query_row("SELECT id FROM institutions WHERE name = ?1", [name], |r| {
            r.get(0)
        })
        .unwrap();
    let set_store = |store: &str| {
        database
            .execute(
                "UPDATE institutions SET store = ?1 WHERE id = ?2",
                rusqlite::params![store, institution],
            )
            .unwrap();
    };
    set_store("object");
    let refused = choose(
        worker,
        &admin,
        id,
        json!({"usdc_settlement_network": "base"}),
    );
    // Clearing what is not chosen is allowed (and changes nothing).
    let cleared = choose(worker, &admin, id, json!({"usdc_settlement_network": null}));
    let page = worker.portal_page(&admin, &format!("/portal/merchants/{id}"));
    set_store("d1");
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(
        page.text.contains("id=\"usdc-settlement-held\""),
        "{}",
        page.text
    );
    assert!(
        !page.text.contains("class=\"usdc-settlement\""),
        "no form to choose"
    );
    let why = refused.assert_error(409, "conflict");
    assert!(
        why.contains(
            "cross-network settlement runs only for institutions whose money is still in D1"
        ),
        "{why}"
    );
    assert_eq!(cleared.status, 200, "{}", cleared.text);
    assert_eq!(
        detail(worker, &admin, id)["usdc_settlement_changes"],
        json!([])
    );
    // In D1 again: allowed.
    let chosen = choose(
        worker,
        &admin,
        id,
        json!({"usdc_settlement_network": "base"}),
    );
    assert_eq!(chosen.status, 200, "{}", chosen.text);
}

/// The ways to pay the hosted page of checkout `url` offers, as `ASSET:network`.
fn offered(worker: &Worker, url: &str) -> Vec<String> {
    let reply = worker.send(worker.http_get(url), None);
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply
        .text
        .split("name=\"method\" value=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().to_owned())
        .collect()
}

fn checkout(worker: &Worker, key: &str, reference: &str) -> Value {
    worker.checkout_session(&json!({
        "publicKey": key, "amount": "10.00", "currency": "USD", "title": "Across order",
        "externalReference": reference, "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    }))
}

#[test]
fn a_checkout_offers_usdc_on_every_network_with_cctp_once_the_merchant_chose_one() {
    let (_shared, setup) = shared();
    let worker = &setup.worker;
    let admin = worker.portal_login(0);
    let key_of = |id: i64| {
        detail(worker, &admin, id)["public_key"]
            .as_str()
            .unwrap()
            .to_owned()
    };

    // Without the choice: what the wallet on Base gives (the sandbox's simulated networks have
    // no wallet of this merchant).
    let plain = merchant(worker, &admin, "ACROSS-PLAIN", &[("base", BASE_WALLET)]);
    let session = checkout(worker, &key_of(plain), "ACROSS-PLAIN-1");
    assert_eq!(
        offered(worker, session["url"].as_str().unwrap()),
        ["USDC:base"]
    );

    // With it (chosen before the merchant's first checkout, so no isolate remembers its key
    // without it): USDC on every network with CCTP, offered during the cool-off already
    // (payments wait for it before they settle); the session starts on the first of them.
    let id = merchant(worker, &admin, "ACROSS-CHECKOUT", &[("base", BASE_WALLET)]);
    let chosen = choose(
        worker,
        &admin,
        id,
        json!({"usdc_settlement_network": "base"}),
    );
    assert_eq!(chosen.status, 200, "{}", chosen.text);
    let session = checkout(worker, &key_of(id), "ACROSS-1");
    let url = session["url"].as_str().unwrap();
    assert_eq!(
        offered(worker, url),
        ["USDC:polygon", "USDC:base", "USDC:arbitrum"],
        "USDC on every network with CCTP; none on Ethereum (no CCTP), no USDT on Polygon"
    );
    let transaction = session["transaction_id"].as_i64().unwrap();
    let t = worker.transaction(0, transaction);
    assert_eq!(
        (&t["asset"], &t["networks"]["payment"]),
        (&json!("USDC"), &json!("polygon"))
    );

    // The customer may switch to another of them, and not to USDC on Ethereum.
    let path = &url[worker.base_url.len()..];
    let switch = |method: &str| {
        worker.send(
            worker
                .request(Method::POST, &format!("{path}/method"))
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(format!("method={method}")),
            None,
        )
    };
    let switched = switch("USDC%3Aarbitrum");
    assert_eq!(switched.status, 303, "{}", switched.text);
    let t = worker.transaction(0, transaction);
    assert_eq!(
        (&t["asset"], &t["networks"]["payment"]),
        (&json!("USDC"), &json!("arbitrum"))
    );
    switch("USDC%3Aethereum").assert_error(400, "invalid_request");

    // The wallet on Base removed: nothing can be paid out across, nor on Base.
    let removed = api(
        worker,
        &admin,
        Method::DELETE,
        &format!("/merchants/{id}/wallets/base"),
        None,
    );
    assert_eq!(removed.status, 200, "{}", removed.text);
    assert_eq!(offered(worker, url), Vec::<String>::new());
    let back = api(
        worker,
        &admin,
        Method::PUT,
        &format!("/merchants/{id}/wallets/base"),
        Some(json!({ "address": BASE_WALLET })),
    );
    assert_eq!(back.status, 200, "{}", back.text);
    assert_eq!(offered(worker, url).len(), 3);

    // Cleared: what the wallet gives, again.
    let cleared = choose(worker, &admin, id, json!({"usdc_settlement_network": null}));
    assert_eq!(cleared.status, 200, "{}", cleared.text);
    assert_eq!(offered(worker, url), ["USDC:base"]);
}

/// At a desktop's and a phone's width: `url` opened, the element `wait` waited for and its
/// text given to `check`, the page and the element `css` photographed as `name`
/// (`balances::photograph`), and no serious or critical accessibility violation.
fn look_at_widths(
    browser: &Browser,
    url: &str,
    wait: &str,
    (css, name): (&str, &str),
    check: impl Fn(&str),
) {
    for (width, height) in [(1280, 900), (390, 844)] {
        browser.resize(width, height);
        browser.goto(url);
        check(&browser.wait_text(wait));
        super::balances::photograph(browser, (width, height), css, name);
        let violations = browser.serious_accessibility_violations();
        assert!(violations.is_empty(), "{name}, {width}: {violations:#?}");
    }
}

#[test]
fn the_merchant_page_shows_and_takes_the_choice_in_chromium_at_desktop_and_phone_widths() {
    let _browser = exclusive();
    let (_shared, setup) = shared();
    let worker = &setup.worker;
    let admin_session = worker.portal_login(0);
    let id = merchant(
        worker,
        &admin_session,
        "ACROSS-PAGE",
        &[("base", BASE_WALLET), ("ethereum", ETHEREUM_WALLET)],
    );
    let admin = &worker.credentials.institutions[0];
    let browser = Browser::start();
    browser.log_in(&worker.base_url, &admin.admin_email, &admin.admin_password);
    let page = format!("{}/portal/merchants/{id}", worker.base_url);

    // Not chosen yet: the page says what the choice would do.
    browser.resize(1280, 900);
    browser.goto(&page);
    let none = browser.wait_text("#usdc-settlement-none");
    assert!(
        none.contains("each payment settles on the network it was paid on"),
        "{none}"
    );
    browser.wait_text("#usdc-settlement");
    let part = browser.eval("return document.getElementById('usdc-settlement').textContent;");
    let part = part.as_str().unwrap_or_default();
    for said in [
        "polygon, base and arbitrum",
        "USDT and ether always settle on the network they were paid on",
        "arbitrum (no settlement wallet there yet)",
    ] {
        assert!(part.contains(said), "{said:?} not in {part}");
    }
    look_at_widths(
        &browser,
        &format!("{page}#usdc-settlement"),
        "#usdc-settlement-none",
        ("#usdc-settlement", "portal-usdc-settlement-none"),
        |_| {},
    );

    // Chosen from the form.
    browser.resize(1280, 900);
    browser.eval(
        "const s = document.getElementById('usdc_settlement_network'); s.value = 'base'; return s.value;",
    );
    browser.click("form.usdc-settlement button[type=submit]");
    let chosen = browser.wait_text("#usdc-settlement-chosen");
    assert!(chosen.contains("settled to the wallet on base"), "{chosen}");
    assert!(chosen.contains("Applies from"), "the cool-off: {chosen}");
    assert!(browser.wait_text("#usdc-settled-on").contains("base"));
    assert!(browser
        .wait_text("#usdc-settlement-changes")
        .contains(&admin.admin_email));

    // A network without CCTP from the form: the page says why, nothing changes.
    browser.eval(
        "const s = document.getElementById('usdc_settlement_network'); \
         const o = document.createElement('option'); o.value = 'ethereum'; s.add(o); \
         s.value = 'ethereum'; return s.value;",
    );
    browser.click("form.usdc-settlement button[type=submit]");
    let refused = browser.wait_text("p.error");
    assert!(
        refused.contains("ethereum has no CCTP configured"),
        "{refused}"
    );
    super::balances::photograph(
        &browser,
        (1280, 900),
        "p.error",
        "portal-usdc-settlement-refused",
    );
    let violations = browser.serious_accessibility_violations();
    assert!(violations.is_empty(), "refused, 1280: {violations:#?}");
    assert!(browser
        .wait_text("#usdc-settlement-chosen")
        .contains("base"));

    look_at_widths(
        &browser,
        &format!("{page}#usdc-settlement"),
        "#usdc-settlement-chosen",
        ("#usdc-settlement", "portal-usdc-settlement-chosen"),
        |_| {},
    );

    // The hosted page of such a merchant's checkout, offering USDC on each network with CCTP.
    let key = detail(worker, &admin_session, id)["public_key"]
        .as_str()
        .unwrap()
        .to_owned();
    let session = checkout(worker, &key, "ACROSS-PAGE-1");
    look_at_widths(
        &browser,
        session["url"].as_str().unwrap(),
        "form.methods",
        ("form.methods", "hosted-usdc-across"),
        |ways| {
            assert!(
                ways.contains("Arbitrum") && ways.contains("Polygon"),
                "{ways}"
            );
        },
    );

    // Cleared from the form (the empty choice).
    browser.resize(1280, 900);
    browser.goto(&page);
    browser.eval(
        "const s = document.getElementById('usdc_settlement_network'); s.value = ''; return s.value;",
    );
    browser.click("form.usdc-settlement button[type=submit]");
    let cleared = browser.wait_text("#usdc-settlement-none");
    assert!(cleared.contains("Not chosen"), "{cleared}");
    super::balances::photograph(
        &browser,
        (1280, 900),
        "#usdc-settlement",
        "portal-usdc-settlement-cleared",
    );
    let violations = browser.serious_accessibility_violations();
    assert!(violations.is_empty(), "cleared, 1280: {violations:#?}");
    assert_eq!(
        detail(worker, &admin_session, id)["usdc_settlement_changes"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}
