//! Real payments on a real local chain, in production mode: the worker derives a deposit address,
//! quotes it from the peg or a price feed, and a funded anvil account pays it with real token
//! transfers. Detection, confirmations, amounts adding up, over- and underpayment, late money,
//! a reorg, another token, a stale rate and a node that goes away.

use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use payrail_tests::chain::{chains, Anvil, Relay, TEST_XPUB};
use payrail_tests::{eventually, Worker};
use reqwest::Method;
use serde_json::{json, Value};

/// A chain with USDC, another token and price feeds, and a production worker watching it.
struct Setup {
    anvil: Anvil,
    usdc: String,
    usdt: String,
    other: String,
    forwarder: String,
    customer: String,
    /// The `ETH/USD` feed (3,000 USD at the start).
    eth: String,
    worker: Worker,
}

/// Confirmations the tests' network asks for.
const DEPTH: u64 = 3;

fn start(anvil: Anvil, rpc_url: Option<&str>) -> Setup {
    let usdc = anvil.token("USD Coin", "USDC");
    let usdt = anvil.token("Tether USD", "USDT");
    let other = anvil.token("Other Coin", "OTHER");
    let customer = anvil.account(1);
    anvil.mint(&usdc, &customer, 1_000_000_000);
    anvil.mint(&usdt, &customer, 1_000_000_000);
    anvil.mint(&other, &customer, 1_000_000_000);
    let now = anvil.time();
    // 1 EUR = 1.25 USD, fresh; 1 GBP = 1.30 USD, two hours old (stale: the default limit is 1 h).
    let eur = anvil.feed("EUR / USD", 125_000_000, now);
    let gbp = anvil.feed("GBP / USD", 130_000_000, now - 7200);
    let eth = anvil.feed("ETH / USD", 300_000_000_000, now);
    let forwarder = anvil.deploy("TestForwarder", "");
    let url = rpc_url.unwrap_or(&anvil.url);
    let mut config: Value = serde_json::from_str(&chains(
        "polygon",
        url,
        DEPTH,
        &[("USDC", &usdc), ("USDT", &usdt)],
        &[("EUR/USD", &eur), ("GBP/USD", &gbp)],
    ))
    .unwrap();
    // Base on the same node, taking ether.
    config["base"] = json!({"rpc_url": url, "chain_id": 31337, "confirmations": DEPTH,
        "native": "ETH", "feeds": {"ETH/USD": {"address": eth}, "EUR/USD": {"address": eur}}});
    let worker = Worker::start_with_vars(
        "production",
        3600,
        &[
            ("PAYRAIL_EVM_XPUB", TEST_XPUB),
            ("PAYRAIL_CHAINS", &config.to_string()),
        ],
    );
    Setup {
        anvil,
        usdc,
        usdt,
        other,
        forwarder,
        customer,
        eth,
        worker,
    }
}

/// The shared chain and worker, for one test at a time: each counts blocks (confirming 1/3),
/// which another test's mining would change under it.
fn shared() -> (MutexGuard<'static, ()>, &'static Setup) {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    (guard, SETUP.get_or_init(|| start(Anvil::start(), None)))
}

/// A checkout of `amount` `currency` for the first merchant: (session id, transaction id).
fn checkout(worker: &Worker, amount: &str, currency: &str, reference: &str) -> (String, i64) {
    let key = &worker.credentials.institutions[0].merchants[0].public_key;
    let session = worker.checkout_session(&json!({
        "publicKey": key, "amount": amount, "currency": currency, "title": "On chain",
        "externalReference": reference, "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    }));
    (
        session["id"].as_str().unwrap().to_owned(),
        session["transaction_id"].as_i64().unwrap(),
    )
}

/// The session's deposit address and the base units it asks for.
fn deposit(worker: &Worker, session: &str) -> (String, u128) {
    let (address, units): (String, String) = worker
        .database()
        .query_row(
            "SELECT s.deposit_address, w.base_units FROM checkout_sessions s \
             JOIN deposit_watches w ON w.address = lower(s.deposit_address) WHERE s.id = ?1",
            [session],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    (address, units.parse().unwrap())
}

/// Chooses another way to pay (`ASSET:network`) on the hosted page; its deposit and units.
fn choose(worker: &Worker, session: &str, method: &str) -> (String, u128) {
    let reply = worker.send(
        worker
            .request(Method::POST, &format!("/checkout/{session}/method"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("method={method}")),
        None,
    );
    assert_eq!(reply.status, 303, "{}", reply.text);
    deposit(worker, session)
}

fn status(worker: &Worker, session: &str) -> Value {
    let reply = worker.send(
        worker.request(Method::GET, &format!("/checkout/{session}/status")),
        Some("/checkout/{id}/status"),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()
}

/// Polls the status until `done` holds.
fn until(worker: &Worker, session: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    eventually(what, Duration::from_secs(20), || {
        Some(status(worker, session)).filter(|s| done(s))
    })
}

#[test]
fn an_exact_payment_is_detected_confirmed_and_credited() {
    let (_one, s) = shared();
    let (session, id) = checkout(&s.worker, "12.50", "USD", "CHAIN-EXACT");
    let (address, units) = deposit(&s.worker, &session);
    assert_eq!(units, 12_500_000, "12.50 USD at the USDC peg");
    let waiting = status(&s.worker, &session);
    assert_eq!(waiting["status"], "pending");
    assert_eq!(waiting["chain"]["state"], "waiting", "{waiting}");

    let hash = s.anvil.transfer(&s.usdc, &s.customer, &address, units);
    let seen = until(&s.worker, &session, "the transfer to be seen", |st| {
        st["chain"]["state"] == "confirming"
    });
    assert_eq!(seen["chain"]["required"], DEPTH);
    assert_eq!(seen["chain"]["confirmations"], 1);
    assert_eq!(seen["status"], "pending", "not credited before its depth");
    assert_eq!(s.worker.transaction(0, id)["raw_status"], "pending");

    s.anvil.mine(DEPTH - 1);
    until(&s.worker, &session, "the payment to be credited", |st| {
        st["status"] == "succeeded"
    });
    let t = s.worker.transaction(0, id);
    assert_eq!(t["raw_status"], "succeeded");
    assert_eq!(t["amount_status"], "EXACT");
    assert_eq!(t["amount"]["gross"], "12.50");
    assert_eq!(t["tx_hashes"]["source"], json!(hash));
    assert_eq!(t["networks"]["payment"], "polygon");
    assert!(t["paid_at"].is_string());
    // The event is in the outbox, describing the credited payment.
    let payload: String = s
        .worker
        .database()
        .query_row(
            "SELECT payload FROM events WHERE transaction_id = ?1 AND type = 'payment.succeeded'",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    let event: Value = serde_json::from_str(&payload).unwrap();
    assert_eq!(event["data"]["tx_hashes"]["source"], json!(hash));
    assert_eq!(event["data"]["amount"]["gross"], "12.50");
    // The books: the deposit address holds it in custody, and it is owed to the merchant.
    let db = s.worker.database();
    let address = address.to_ascii_lowercase();
    let posted = |id: String| -> (String, String) {
        db.query_row(
            "SELECT debits_posted, credits_posted FROM ledger_accounts WHERE id = ?1",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap_or_else(|e| panic!("account {id}: {e}"))
    };
    let token = s.usdc.to_ascii_lowercase();
    let custody = posted(format!("polygon:{token}:custody:{address}"));
    assert_eq!(custody, ("12500000".to_owned(), "0".to_owned()));
    let unallocated = posted(format!("polygon:{token}:unallocated:{address}"));
    assert_eq!(unallocated, ("12500000".to_owned(), "12500000".to_owned()));
    let merchant: i64 = db
        .query_row(
            "SELECT merchant_id FROM transactions WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    let credit: (String, String, String) = db
        .query_row(
            "SELECT debit_account, credit_account, amount FROM ledger_transfers WHERE id = ?1",
            [format!("credit:{id}")],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(
        credit,
        (
            format!("polygon:{token}:unallocated:{address}"),
            format!("polygon:{token}:merchant:{merchant}"),
            "12500000".to_owned()
        ),
        "credited to the merchant"
    );
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn transfers_add_up_and_more_is_overpaid() {
    let (_one, s) = shared();
    let (session, id) = checkout(&s.worker, "20.00", "USD", "CHAIN-PARTS");
    let (address, units) = deposit(&s.worker, &session);
    let first = s.anvil.transfer(&s.usdc, &s.customer, &address, units / 2);
    s.anvil.mine(DEPTH);
    let part = until(&s.worker, &session, "the first half", |st| {
        st["chain"]["state"] == "waiting" && st["chain"]["received"] == "10.00"
    });
    assert_eq!(part["status"], "pending", "half is not enough while open");
    s.anvil
        .transfer(&s.usdc, &s.customer, &address, units / 2 + 5_000_000);
    s.anvil.mine(DEPTH);
    until(&s.worker, &session, "the sum to be credited", |st| {
        st["status"] == "succeeded"
    });
    let t = s.worker.transaction(0, id);
    assert_eq!(t["amount"]["gross"], "25.00");
    assert_eq!(t["amount_status"], "OVERPAID");
    assert_eq!(t["tx_hashes"]["source"], json!(first), "the first transfer");
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn another_token_is_recorded_for_review_and_never_credited() {
    let (_one, s) = shared();
    let (session, id) = checkout(&s.worker, "5.00", "USD", "CHAIN-OTHER");
    let (address, units) = deposit(&s.worker, &session);
    let hash = s.anvil.transfer(&s.other, &s.customer, &address, units);
    s.anvil.mine(DEPTH);
    eventually("the other token recorded", Duration::from_secs(20), || {
        status(&s.worker, &session);
        s.worker
            .database()
            .query_row(
                "SELECT kind, confirmed FROM chain_transfers WHERE tx_hash = ?1",
                [&hash],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
            )
            .ok()
            .filter(|(_, confirmed)| *confirmed == 1)
    });
    let kind: String = s
        .worker
        .database()
        .query_row(
            "SELECT kind FROM chain_transfers WHERE tx_hash = ?1",
            [&hash],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(kind, "unexpected_token");
    // A zero-value transfer of the quoted token (address-poisoning spam) is recorded, not
    // counted.
    let zero = s.anvil.transfer(&s.usdc, &s.customer, &address, 0);
    s.anvil.mine(DEPTH);
    let zero_kind = eventually(
        "the zero transfer recorded",
        Duration::from_secs(20),
        || {
            status(&s.worker, &session);
            s.worker
                .database()
                .query_row(
                    "SELECT kind FROM chain_transfers WHERE tx_hash = ?1 AND confirmed = 1",
                    [&zero],
                    |r| r.get::<_, String>(0),
                )
                .ok()
        },
    );
    assert_eq!(zero_kind, "no_value");
    assert_eq!(status(&s.worker, &session)["chain"]["state"], "waiting");
    assert_eq!(s.worker.transaction(0, id)["raw_status"], "pending");

    // The institution sees it on the payment, for review, with the quote the address was given.
    let detail = s.worker.portal_payment(0, id);
    let seen = &detail["chain_transfers"][0];
    assert_eq!(seen["tx_hash"], json!(hash));
    assert_eq!(seen["kind"], "unexpected_token");
    assert_eq!(
        seen["amount"],
        Value::Null,
        "not counted as the quoted asset"
    );
    assert_eq!(seen["base_units"], json!(units.to_string()));
    assert_eq!(
        seen["token"].as_str().unwrap().to_ascii_lowercase(),
        s.other.to_ascii_lowercase()
    );
    let quote = &detail["deposits"][0];
    assert_eq!(
        quote["address"],
        json!(address),
        "EIP-55, as the page shows it"
    );
    assert_eq!(quote["crypto_amount"], "5");
    assert_eq!(quote["rate"], "1");
    assert!(quote["rate_source"].as_str().unwrap().starts_with("peg"));
    // Another institution does not see it.
    let stranger = s.worker.portal_login(1);
    let hidden = s.worker.portal(
        Method::GET,
        &format!("/portal/api/payments/{id}"),
        Some(&stranger),
        None,
    );
    assert_eq!(hidden.status, 404);
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn orders_in_other_currencies_take_a_fresh_feed_and_a_stale_one_offers_nothing() {
    let (_one, s) = shared();
    // 1 EUR = 1.25 USD: 40.00 EUR is 50 USDC.
    let (session, _) = checkout(&s.worker, "40.00", "EUR", "CHAIN-EUR");
    let (_, units) = deposit(&s.worker, &session);
    assert_eq!(units, 50_000_000);
    let source: String = s
        .worker
        .database()
        .query_row(
            "SELECT rate_source FROM deposit_watches WHERE session_id = ?1",
            [&session],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        source.starts_with("peg: 1 USDC = 1 USD; EUR/USD feed 0x"),
        "{source}"
    );

    let key = &s.worker.credentials.institutions[0].merchants[0].public_key;
    let stale = s.worker.post_json(
        "/checkout/sessions",
        &json!({
            "publicKey": key, "amount": "10.00", "currency": "GBP", "title": "Stale",
            "externalReference": "CHAIN-GBP", "redirectUrl": "https://shop.example/done",
            "allowCrypto": true
        }),
        None,
        "/checkout/sessions",
    );
    let why = stale.assert_error(503, "payments_unavailable");
    assert!(why.contains("GBP/USD price feed is stale"), "{why}");
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn a_transfer_reorged_away_before_its_depth_returns_the_checkout_to_waiting() {
    let s = start(Anvil::start(), None);
    let (session, id) = checkout(&s.worker, "7.00", "USD", "CHAIN-REORG");
    let (address, units) = deposit(&s.worker, &session);
    // The same in ether, read from balances.
    let (ether_session, ether_id) = checkout(&s.worker, "9.00", "USD", "CHAIN-REORG-ETH");
    let (ether_address, wei) = choose(&s.worker, &ether_session, "ETH:base");
    let before = s.anvil.snapshot();
    let hash = s.anvil.transfer(&s.usdc, &s.customer, &address, units);
    let ether_hash = s.anvil.pay_ether(&s.customer, &ether_address, wei);
    for session in [&session, &ether_session] {
        until(&s.worker, session, "the payment to be seen", |st| {
            st["chain"]["state"] == "confirming"
        });
    }
    s.anvil.revert(before);
    s.anvil.mine(DEPTH + 1);
    for session in [&session, &ether_session] {
        until(&s.worker, session, "the checkout to wait again", |st| {
            st["chain"]["state"] == "waiting"
        });
    }
    for hash in [&hash, &ether_hash] {
        let left: i64 = s
            .worker
            .database()
            .query_row(
                "SELECT count(*) FROM chain_transfers WHERE tx_hash = ?1",
                [hash],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(left, 0, "the reorged payment is gone");
    }
    assert_eq!(s.worker.transaction(0, id)["raw_status"], "pending");
    assert_eq!(s.worker.transaction(0, ether_id)["raw_status"], "pending");
    // Paid again on the new chain: credited once.
    let again = s.anvil.transfer(&s.usdc, &s.customer, &address, units);
    let ether_again = s.anvil.pay_ether(&s.customer, &ether_address, wei);
    s.anvil.mine(DEPTH);
    for (session, id, hash) in [
        (&session, id, again),
        (&ether_session, ether_id, ether_again),
    ] {
        until(&s.worker, session, "the new payment credited", |st| {
            st["status"] == "succeeded"
        });
        let t = s.worker.transaction(0, id);
        assert_eq!(t["tx_hashes"]["source"], json!(hash));
        assert_eq!(t["amount_status"], "EXACT");
    }
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn an_underpayment_is_credited_at_the_end_and_late_money_after_it() {
    let s = start(Anvil::start(), None);
    let db_end = |session: &str| ended(&s.worker, session);
    let cron = || s.worker.cron();

    // 90 % paid and confirmed while open: waiting; at the end, credited as underpaid.
    let (short, short_id) = checkout(&s.worker, "10.00", "USD", "CHAIN-UNDER");
    let (address, units) = deposit(&s.worker, &short);
    s.anvil
        .transfer(&s.usdc, &s.customer, &address, units * 9 / 10);
    s.anvil.mine(DEPTH);
    until(&s.worker, &short, "the part payment", |st| {
        st["chain"]["received"] == "9.00"
    });
    db_end(&short);
    cron();
    // The page's poll (or the cron's next check of the address) credits what arrived.
    let t = eventually("the underpayment credited", Duration::from_secs(20), || {
        status(&s.worker, &short);
        Some(s.worker.transaction(0, short_id)).filter(|t| t["raw_status"] == "succeeded")
    });
    assert_eq!(t["amount_status"], "UNDERPAID");
    assert_eq!(t["amount"]["gross"], "9.00");

    // Nothing paid by the end: expired. Money that comes later is still credited.
    let (late, late_id) = checkout(&s.worker, "3.00", "USD", "CHAIN-LATE");
    let (address, units) = deposit(&s.worker, &late);
    db_end(&late);
    cron();
    eventually("the checkout to expire", Duration::from_secs(20), || {
        Some(s.worker.transaction(0, late_id)).filter(|t| t["raw_status"] == "expired")
    });
    let hash = s.anvil.transfer(&s.usdc, &s.customer, &address, units);
    s.anvil.mine(DEPTH);
    // Whoever asks for its status (the customer reloading, say) has it read at once; the cron
    // gets to recently expired checkouts every minute.
    let t = eventually("the late payment credited", Duration::from_secs(20), || {
        status(&s.worker, &late);
        Some(s.worker.transaction(0, late_id)).filter(|t| t["raw_status"] == "succeeded")
    });
    assert_eq!(t["amount_status"], "EXACT");
    assert_eq!(t["tx_hashes"]["source"], json!(hash));
    let after: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT after_expiry FROM chain_transfers WHERE tx_hash = ?1",
            [&hash],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(after, 1, "recorded as after the end");

    // Only a zero-value transfer by the end: expired like any unpaid checkout, not held.
    let (zero, zero_id) = checkout(&s.worker, "2.00", "USD", "CHAIN-ZERO");
    let (address, _) = deposit(&s.worker, &zero);
    s.anvil.transfer(&s.usdc, &s.customer, &address, 0);
    s.anvil.mine(DEPTH);
    until(&s.worker, &zero, "the zero transfer read", |st| {
        st["chain"]["state"] == "waiting"
    });
    db_end(&zero);
    let t = eventually(
        "the zero-only checkout to expire",
        Duration::from_secs(20),
        || {
            cron();
            Some(s.worker.transaction(0, zero_id)).filter(|t| t["raw_status"] == "expired")
        },
    );
    assert_eq!(t["amount"]["gross"], Value::Null);
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

/// `ETH/USD` feed answers (8 decimals) for a price in whole US dollars.
/// Moves `session`'s end two minutes into the past: a read now is past the end and its grace.
/// Only while no request is in flight (the worker does not wait on SQLite's lock).
fn ended(worker: &Worker, session: &str) {
    worker
        .database()
        .execute(
            "UPDATE checkout_sessions SET expires_at = unixepoch() - 120 WHERE id = ?1",
            [session],
        )
        .unwrap();
}

fn usd(dollars: u128) -> u128 {
    dollars * 100_000_000
}

#[test]
fn late_ether_is_valued_at_the_price_when_it_arrived_never_the_old_quote() {
    let s = start(Anvil::start(), None);
    let end = |session: &str| ended(&s.worker, session);
    let expired = |session: &str, id: i64| {
        end(session);
        eventually("the checkout to expire", Duration::from_secs(20), || {
            s.worker.cron();
            Some(s.worker.transaction(0, id)).filter(|t| t["raw_status"] == "expired")
        });
    };
    let db = || s.worker.database();

    // 30.00 USD quoted at 3,000 USD an ether: 0.01 ETH. Nothing by the end: expired.
    let (session, id) = checkout(&s.worker, "30.00", "USD", "CHAIN-LATE-ETH");
    let (address, wei) = choose(&s.worker, &session, "ETH:base");
    assert_eq!(wei, 10_000_000_000_000_000);
    expired(&session, id);
    // Ether halves; the customer sends the old quote's 0.01 ETH; then the price is back. The
    // money is worth what ether was worth in its block: 15.00, underpaid.
    s.anvil.set_feed(&s.eth, usd(1_500), s.anvil.time());
    let hash = s.anvil.pay_ether(&s.customer, &address, wei);
    s.anvil.set_feed(&s.eth, usd(3_000), s.anvil.time());
    s.anvil.mine(DEPTH);
    let t = eventually("the late ether credited", Duration::from_secs(20), || {
        status(&s.worker, &session);
        Some(s.worker.transaction(0, id)).filter(|t| t["raw_status"] == "succeeded")
    });
    assert_eq!(t["amount"]["gross"], "15.00", "{t}");
    assert_eq!(t["amount_status"], "UNDERPAID");
    assert_eq!(t["tx_hashes"]["source"], json!(hash));
    let (rate, source): (String, String) = db()
        .query_row(
            "SELECT rate, rate_source FROM chain_transfers WHERE tx_hash = ?1",
            [&hash],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(rate, "1500");
    assert!(
        source.contains("ETH/USD feed") && source.contains("when it arrived"),
        "{source}"
    );
    let late_rate: String = db()
        .query_row(
            "SELECT late_rate FROM transactions WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(late_rate, "1500");
    // The event carries the value at arrival (the spec's transaction object, nothing added).
    let payload: String = db()
        .query_row(
            "SELECT payload FROM events WHERE transaction_id = ?1 AND type = 'payment.succeeded'",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    let event: Value = serde_json::from_str(&payload).unwrap();
    assert_eq!(event["data"]["amount"]["gross"], "15.00");
    assert_eq!(event["data"]["amount_status"], "UNDERPAID");
    // The page says so.
    let page = s.worker.send(
        s.worker
            .request(Method::GET, &format!("/checkout/{session}")),
        None,
    );
    assert!(
        page.text.contains(
            "valued at the rate when it arrived: 1 ETH = 1,500 USD. It counts as 15.00 USD"
        ),
        "{}",
        page.text
    );
    {
        // As a customer sees it, at both widths (before the page returns them to the shop).
        let _one = payrail_tests::browser::exclusive();
        let browser = payrail_tests::browser::Browser::start();
        for (width, name) in [(1280, "late-valued-1280"), (390, "late-valued-390")] {
            browser.resize(width, 900);
            browser.goto(&format!("{}/checkout/{session}", s.worker.base_url));
            let said = browser.text("#late-valuation").unwrap_or_default();
            assert!(said.contains("1 ETH = 1,500 USD"), "{said}");
            browser.screenshot(name);
            let violations = browser.serious_accessibility_violations();
            assert!(violations.is_empty(), "{violations:#?}");
        }
    }

    // The feed stale when the money arrives: nothing is decided on the old quote; the page's
    // status says why; once a fresh price can be read, the first one after it values it.
    let (stale, stale_id) = checkout(&s.worker, "30.00", "USD", "CHAIN-LATE-STALE");
    let (address, wei) = choose(&s.worker, &stale, "ETH:base");
    expired(&stale, stale_id);
    s.anvil.set_feed(&s.eth, usd(3_000), s.anvil.time() - 7_200);
    s.anvil.pay_ether(&s.customer, &address, wei);
    s.anvil.mine(DEPTH);
    let held = until(
        &s.worker,
        &stale,
        "the late money held for its rate",
        |st| st["chain"]["state"] == "valuing",
    );
    assert!(
        held["chain"]["valuation_error"]
            .as_str()
            .is_some_and(|e| e.contains("stale")),
        "{held}"
    );
    s.worker.cron();
    assert_eq!(s.worker.transaction(0, stale_id)["raw_status"], "expired");
    let page = s.worker.send(
        s.worker.request(Method::GET, &format!("/checkout/{stale}")),
        None,
    );
    assert!(
        page.text
            .contains("A payment arrived after the time to pay was up")
            && !page.text.contains("No funds were taken"),
        "{}",
        page.text
    );
    // A fresh price, then another while cron runs and status polls race to value the money:
    // whichever price the first of them read, the money is valued once, at one rate, and the
    // payment credited once at it.
    s.anvil.set_feed(&s.eth, usd(2_000), s.anvil.time());
    std::thread::scope(|scope| {
        for i in 0..10 {
            let (worker, stale) = (&s.worker, &stale);
            scope.spawn(move || {
                if i % 2 == 0 {
                    worker.cron();
                } else {
                    status(worker, stale);
                }
            });
        }
        s.anvil.set_feed(&s.eth, usd(2_500), s.anvil.time());
    });
    let t = eventually("the held ether credited", Duration::from_secs(20), || {
        status(&s.worker, &stale);
        Some(s.worker.transaction(0, stale_id)).filter(|t| t["raw_status"] == "succeeded")
    });
    let (rates, rate): (i64, String) = db()
        .query_row(
            "SELECT count(rate), max(rate) FROM chain_transfers WHERE session_id = ?1 \
             AND kind = 'payment'",
            [&stale],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(rates, 1, "one transfer, valued once");
    assert!(rate == "2000" || rate == "2500", "{rate}");
    let gross = if rate == "2000" { "20.00" } else { "25.00" };
    assert_eq!(t["amount"]["gross"], gross, "the rate stored: {rate}; {t}");
    let (late_rate, source): (String, String) = db()
        .query_row(
            "SELECT late_rate, late_rate_source FROM transactions WHERE id = ?1",
            [stale_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        late_rate, rate,
        "settled and refunded at the rate it was valued at"
    );
    assert!(source.contains("first price read after"), "{source}");
    let count = |sql: &str| -> i64 { db().query_row(sql, [stale_id], |r| r.get(0)).unwrap() };
    assert_eq!(
        count(
            "SELECT count(*) FROM events WHERE transaction_id = ?1 \
             AND type = 'payment.succeeded'"
        ),
        1,
        "credited once"
    );
    assert_eq!(
        count(
            "SELECT count(*) FROM ledger_transfers WHERE transaction_id = ?1 AND code = 'credit'"
        ),
        1,
        "posted once"
    );
    let event: Value = serde_json::from_str(
        &db()
            .query_row(
                "SELECT payload FROM events WHERE transaction_id = ?1 \
                 AND type = 'payment.succeeded'",
                [stale_id],
                |r| r.get::<_, String>(0),
            )
            .unwrap(),
    )
    .unwrap();
    assert_eq!(event["data"]["amount"]["gross"], gross);
    s.anvil.set_feed(&s.eth, usd(3_000), s.anvil.time());

    // Its settlement at that rate: settlement::late_money_settles_and_refunds_at_the_rate_it_was_valued_at.
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn a_node_that_goes_away_is_retried_and_the_page_says_it_is_checking() {
    let anvil = Anvil::start();
    let relay = Relay::start(&anvil.url);
    let s = start(anvil, Some(&relay.url));
    let (session, id) = checkout(&s.worker, "4.00", "USD", "CHAIN-DOWN");
    let (address, units) = deposit(&s.worker, &session);
    relay.set_up(false);
    let down = until(&s.worker, &session, "the node to be missed", |st| {
        st["chain"]["node_unreachable"] == true
    });
    assert_eq!(down["status"], "pending");
    // No new checkout can be quoted meanwhile; the error names the node, never its URL.
    let key = &s.worker.credentials.institutions[0].merchants[0].public_key;
    let refused = s.worker.post_json(
        "/checkout/sessions",
        &json!({
            "publicKey": key, "amount": "1.00", "currency": "USD", "title": "Down",
            "externalReference": "CHAIN-DOWN-2", "redirectUrl": "https://shop.example/done",
            "allowCrypto": true
        }),
        None,
        "/checkout/sessions",
    );
    let why = refused.assert_error(503, "payments_unavailable");
    assert!(why.contains("unreachable"), "{why}");
    assert!(!why.contains(&relay.url), "{why}");

    s.anvil.transfer(&s.usdc, &s.customer, &address, units);
    s.anvil.mine(DEPTH);
    relay.set_up(true);
    until(
        &s.worker,
        &session,
        "the payment once the node is back",
        |st| st["status"] == "succeeded",
    );
    assert_eq!(s.worker.transaction(0, id)["amount_status"], "EXACT");

    // A checkout that ends while the node is away is not decided on a guess: it stays pending
    // (not expired, no underpayment credited) until its address is read after the end.
    let (late, late_id) = checkout(&s.worker, "5.00", "USD", "CHAIN-DOWN-END");
    let (address, units) = deposit(&s.worker, &late);
    s.anvil.transfer(&s.usdc, &s.customer, &address, units / 2);
    s.anvil.mine(DEPTH);
    until(&s.worker, &late, "the half payment", |st| {
        st["chain"]["received"] == "2.50"
    });
    relay.set_up(false);
    until(&s.worker, &late, "the node to be missed", |st| {
        st["chain"]["node_unreachable"] == true
    });
    // The worker is idle between requests: the end moves two minutes into the past.
    ended(&s.worker, &late);
    s.worker.cron();
    let held = status(&s.worker, &late);
    assert_eq!(held["status"], "pending", "{held}");
    assert_eq!(s.worker.transaction(0, late_id)["raw_status"], "pending");
    // The rest was sent in time too; the node comes back and the whole is credited.
    s.anvil
        .transfer(&s.usdc, &s.customer, &address, units - units / 2);
    s.anvil.mine(DEPTH);
    relay.set_up(true);
    until(
        &s.worker,
        &late,
        "the payment after the node is back",
        |st| st["status"] == "succeeded",
    );
    let t = s.worker.transaction(0, late_id);
    assert_eq!(t["amount_status"], "EXACT", "{t}");
    assert_eq!(t["amount"]["gross"], "5.00");
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn racing_polls_and_cron_runs_credit_a_payment_once() {
    let (_one, s) = shared();
    let (session, id) = checkout(&s.worker, "8.00", "USD", "CHAIN-RACE");
    let (address, units) = deposit(&s.worker, &session);
    s.anvil.transfer(&s.usdc, &s.customer, &address, units);
    s.anvil.mine(DEPTH);
    // Sixteen polls and four cron runs at once, all finding the payment at its depth.
    std::thread::scope(|scope| {
        for i in 0..20 {
            let session = &session;
            scope.spawn(move || {
                if i % 5 == 0 {
                    s.worker.cron();
                } else {
                    status(&s.worker, session);
                }
            });
        }
    });
    until(&s.worker, &session, "the credit", |st| {
        st["status"] == "succeeded"
    });
    let events: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT count(*) FROM events WHERE transaction_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(events, 1, "one payment.succeeded");
    let t = s.worker.transaction(0, id);
    assert_eq!(t["amount"]["gross"], "8.00");
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn a_way_to_pay_chosen_again_keeps_its_address_and_every_address_stays_watched() {
    let (_one, s) = shared();
    let (session, id) = checkout(&s.worker, "6.00", "USD", "CHAIN-SWITCH");
    let (first, units) = deposit(&s.worker, &session);
    let choose = |method: &str| choose(&s.worker, &session, method).0;
    let second = std::thread::scope(|scope| {
        // Eight at once: one address for the way to pay, whoever wins.
        let handles: Vec<_> = (0..8)
            .map(|_| scope.spawn(|| choose("USDT:polygon")))
            .collect();
        let seen: Vec<String> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(seen.iter().all(|a| *a == seen[0]), "{seen:?}");
        seen[0].clone()
    });
    assert_ne!(second, first, "a fresh address for another way to pay");
    assert_eq!(
        choose("USDC:polygon"),
        first,
        "the first way to pay's own address"
    );
    assert_eq!(choose("USDT:polygon"), second);
    let watches: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT count(*) FROM deposit_watches WHERE session_id = ?1",
            [&session],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(watches, 2);
    // The page now asks for USDT; the customer pays the USDC address it showed before.
    let hash = s.anvil.transfer(&s.usdc, &s.customer, &first, units);
    s.anvil.mine(DEPTH);
    until(&s.worker, &session, "the earlier address's payment", |st| {
        st["status"] == "succeeded"
    });
    let t = s.worker.transaction(0, id);
    assert_eq!(t["tx_hashes"]["source"], json!(hash));
    assert_eq!(t["amount_status"], "EXACT");
    assert_eq!(
        t["asset"], "USDC",
        "the asset it was paid in, not the one shown last"
    );
    let usdt_watch: String = s
        .worker
        .database()
        .query_row(
            "SELECT token FROM deposit_watches WHERE session_id = ?1 AND asset = 'USDT'",
            [&session],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(usdt_watch, s.usdt.to_ascii_lowercase());
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn ether_sent_directly_and_from_inside_a_contract_call_adds_up_and_is_credited() {
    let (_one, s) = shared();
    let (session, id) = checkout(&s.worker, "30.00", "EUR", "CHAIN-ETHER");
    let (address, wei) = choose(&s.worker, &session, "ETH:base");
    // 30 EUR at 1.25 USD each is 37.50 USD; at 3,000 USD an ether, 0.0125 ETH.
    assert_eq!(wei, 12_500_000_000_000_000);
    let page = s.worker.send(
        s.worker
            .request(Method::GET, &format!("/checkout/{session}")),
        None,
    );
    assert_eq!(page.status, 200);
    assert!(
        page.text
            .contains(&format!("ethereum:{address}@31337?value={wei}")),
        "the EIP-681 request for ether: {}",
        page.text
    );
    assert!(page.text.contains("0.0125 ETH"));
    assert!(
        !page.text.contains("token-contract"),
        "ether has no contract"
    );

    let direct = s.anvil.pay_ether(&s.customer, &address, wei / 2);
    let seen = until(&s.worker, &session, "the first half to be seen", |st| {
        st["chain"]["state"] == "confirming"
    });
    assert_eq!(seen["chain"]["confirmations"], 1, "{seen}");
    let inside = s
        .anvil
        .forward_ether(&s.forwarder, &s.customer, &address, wei - wei / 2);
    s.anvil.mine(DEPTH);
    // The chain does not name who sent ether from inside a call: it could not be screened, so
    // the payment is held for review, and an admin releases it.
    until(&s.worker, &session, "the ether to be held", |st| {
        st["status"] == "held"
    });
    release(&s.worker, id);
    until(&s.worker, &session, "the ether to be credited", |st| {
        st["status"] == "succeeded"
    });
    let t = s.worker.transaction(0, id);
    assert_eq!(t["amount_status"], "EXACT", "{t}");
    assert_eq!(t["amount"]["gross"], "30.00");
    assert_eq!(t["asset"], "ETH");
    assert_eq!(t["networks"]["payment"], "base");
    assert_eq!(t["tx_hashes"]["source"], json!(direct));
    let transfers: Vec<(String, String, String, i64)> = s
        .worker
        .database()
        .prepare(
            "SELECT tx_hash, amount, kind, confirmed FROM chain_transfers \
             WHERE address = lower(?1) ORDER BY block_number",
        )
        .unwrap()
        .query_map([&address], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let half = (wei / 2).to_string();
    let rest = (wei - wei / 2).to_string();
    assert_eq!(
        transfers,
        vec![
            (direct, half, "payment".to_owned(), 1),
            (
                // An internal transfer: recorded under its block's hash.
                inside["blockHash"].as_str().unwrap().to_owned(),
                rest,
                "payment".to_owned(),
                1
            ),
        ]
    );
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn ether_sent_from_inside_calls_to_two_deposit_addresses_in_one_block_credits_both() {
    let (_one, s) = shared();
    let (first, first_id) = checkout(&s.worker, "10.00", "EUR", "CHAIN-INSIDE-1");
    let (first_address, first_wei) = choose(&s.worker, &first, "ETH:base");
    let (second, second_id) = checkout(&s.worker, "12.00", "EUR", "CHAIN-INSIDE-2");
    let (second_address, second_wei) = choose(&s.worker, &second, "ETH:base");
    // Both from inside contract calls, mined in the same block: each is recorded under that
    // block's hash with log index 0, once per address.
    s.anvil.rpc("evm_setAutomine", json!([false]));
    let hashes = [
        s.anvil
            .forward_ether_unmined(&s.forwarder, &s.customer, &first_address, first_wei),
        s.anvil
            .forward_ether_unmined(&s.forwarder, &s.customer, &second_address, second_wei),
    ];
    s.anvil.mine(1);
    s.anvil.rpc("evm_setAutomine", json!([true]));
    let blocks: Vec<Value> = hashes
        .iter()
        .map(|h| s.anvil.receipt(h)["blockHash"].clone())
        .collect();
    assert_eq!(blocks[0], blocks[1], "one block");
    s.anvil.mine(DEPTH);
    for (session, id) in [(&first, first_id), (&second, second_id)] {
        // Not screened (the chain does not name the sender): held, then released.
        until(&s.worker, session, "the ether to be held", |st| {
            st["status"] == "held"
        });
        release(&s.worker, id);
        until(&s.worker, session, "the ether to be credited", |st| {
            st["status"] == "succeeded"
        });
        assert_eq!(s.worker.transaction(0, id)["amount_status"], "EXACT");
    }
    let rows: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT count(*) FROM chain_transfers WHERE tx_hash = ?1 AND log_index = 0 \
             AND kind = 'payment'",
            [blocks[0].as_str().unwrap()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, 2, "one transfer per address");
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

/// Releases payment `id`, held by its screening, as demo institution 0's admin: the review
/// names the sender the chain does not name.
fn release(worker: &Worker, id: i64) {
    let admin = worker.portal_login(0);
    let review = worker.screening_review(&admin, id);
    assert!(
        review["reason"]
            .as_str()
            .unwrap()
            .contains("from inside a contract call"),
        "{review}"
    );
    let released = worker.portal(
        Method::POST,
        &format!("/portal/api/screening/{id}"),
        Some(&admin),
        Some(&json!({"decision": "release", "note": "our customer's multisig wallet"})),
    );
    assert_eq!(released.status, 200, "{}", released.text);
}
