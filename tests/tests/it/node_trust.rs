//! A node is trusted no further than the chain bears it out. The worker's chain (Base, on
//! anvil) is behind a proxy ([`FaultyNode`]) that can invent a transfer log or freeze its head:
//! a log the deposit address's balance does not bear out is never credited, a node whose head
//! stands still decides no checkout's end, and a flood of dust is recorded a bounded number of
//! transfers a check, none lost and none counted twice. Prices follow Chainlink's practice: no
//! quote off a stablecoin's peg, outside a feed's bounds, or while the sequencer is down or
//! just back. And a session whose quote waits on a slow node is stored only if what it was
//! made on still holds when it is written.

use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use payrail_tests::chain::{Anvil, TEST_XPUB};
use payrail_tests::faults::{invented_transfer, Fault, FaultyNode};
use payrail_tests::{eventually, PortalSession, Worker};
use reqwest::Method;
use serde_json::{json, Value};

/// Confirmations on the tests' network.
const DEPTH: u64 = 2;
/// Payments one check records, kept low so a few dozen make a flood.
const TRANSFERS_PER_CHECK: i64 = 10;

/// A chain with USDC and a production worker watching it through a proxy that misbehaves on
/// request; its head may stand still for 3 s (3 blocks of 1 s).
struct Setup {
    anvil: Anvil,
    node: FaultyNode,
    usdc: String,
    /// The `USDC/USD`, `EUR/USD` and sequencer uptime feeds.
    feeds: Feeds,
    customer: String,
    worker: Worker,
    portal: PortalSession,
}

struct Feeds {
    usdc: String,
    eur: String,
    sequencer: String,
}

/// 1.00 USD (8 decimals): USDC at its peg.
const USDC_USD: u128 = 100_000_000;
/// 1.25 USD per EUR.
const EUR_USD: u128 = 125_000_000;

fn start() -> Setup {
    let anvil = Anvil::start();
    let usdc = anvil.token("USD Coin", "USDC");
    let customer = anvil.account(1);
    anvil.mint(&usdc, &customer, 1_000_000_000_000);
    let now = anvil.time();
    let feeds = Feeds {
        usdc: anvil.feed("USDC / USD", USDC_USD, now),
        eur: anvil.feed("EUR / USD", EUR_USD, now),
        // Up for two hours, past the grace period.
        sequencer: anvil.feed("L2 Sequencer Uptime Status Feed", 0, now - 7200),
    };
    let node = FaultyNode::start(&anvil.url);
    let config = json!({"base": {"rpc_url": node.url, "chain_id": 31337,
        "confirmations": DEPTH, "tokens": {"USDC": {"address": usdc}},
        "feeds": {"USDC/USD": {"address": feeds.usdc},
                  "EUR/USD": {"address": feeds.eur, "min_answer": "0.5", "max_answer": "2"}},
        "sequencer_uptime_feed": {"address": feeds.sequencer},
        "block_time_seconds": 1, "stale_head_blocks": 3,
        "transfers_per_check": TRANSFERS_PER_CHECK}});
    let worker = Worker::start_with_vars(
        "production",
        3600,
        &[
            ("PAYRAIL_EVM_XPUB", TEST_XPUB),
            ("PAYRAIL_CHAINS", &config.to_string()),
        ],
    );
    let portal = worker.portal_login(0);
    Setup {
        anvil,
        node,
        usdc,
        feeds,
        customer,
        worker,
        portal,
    }
}

/// The shared chain and worker, for one test at a time (a test freezes the node's head, and
/// one writes the worker's database while it is idle).
fn shared() -> (MutexGuard<'static, ()>, &'static Setup) {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let setup = SETUP.get_or_init(start);
    setup.node.heal();
    (guard, setup)
}

impl Setup {
    /// The checkout request for `amount` of `currency`.
    fn order(&self, amount: &str, currency: &str, reference: &str) -> Value {
        let key = &self.worker.credentials.institutions[0].merchants[0].public_key;
        json!({
            "publicKey": key, "amount": amount, "currency": currency, "title": "Trust",
            "externalReference": reference, "redirectUrl": "https://shop.example/done",
            "allowCrypto": true
        })
    }

    /// Why a checkout of `amount` of `currency` cannot be paid on chain now (503).
    fn refused(&self, amount: &str, currency: &str, reference: &str) -> String {
        let reply = self.worker.post_json(
            "/checkout/sessions",
            &self.order(amount, currency, reference),
            None,
            "/checkout/sessions",
        );
        reply.assert_error(503, "payments_unavailable")
    }

    /// A checkout of `amount` USD: (session id, transaction id, deposit address, base units).
    fn checkout(&self, amount: &str, reference: &str) -> (String, i64, String, u128) {
        self.checkout_in(amount, "USD", reference)
    }

    /// The same in `currency`.
    fn checkout_in(
        &self,
        amount: &str,
        currency: &str,
        reference: &str,
    ) -> (String, i64, String, u128) {
        let session = self
            .worker
            .checkout_session(&self.order(amount, currency, reference));
        let id = session["transaction_id"].as_i64().unwrap();
        let session = session["id"].as_str().unwrap().to_owned();
        let (address, units) = self.worker.deposit(&session);
        (session, id, address, units)
    }

    /// The hosted page's status poll (which checks the session's address).
    fn status(&self, session: &str) -> Value {
        let reply = self.worker.send(
            self.worker
                .request(Method::GET, &format!("/checkout/{session}/status")),
            Some("/checkout/{id}/status"),
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()
    }

    /// Why the last check of the payment's deposit address was refused, as the portal shows it.
    fn refusal(&self, id: i64) -> Option<String> {
        let reply = self.worker.portal(
            Method::GET,
            &format!("/portal/api/payments/{id}"),
            Some(&self.portal),
            None,
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()["deposits"][0]["node_error"]
            .as_str()
            .map(str::to_owned)
    }

    fn raw_status(&self, id: i64) -> String {
        self.worker.transaction(0, id)["raw_status"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// The payments stored as final to `address`.
    fn final_payments(&self, address: &str) -> i64 {
        self.worker
            .database()
            .query_row(
                "SELECT count(*) FROM chain_transfers WHERE address = lower(?1) \
                 AND confirmed = 1 AND kind = 'payment'",
                [address],
                |r| r.get(0),
            )
            .unwrap()
    }
}

#[test]
fn a_transfer_log_the_deposit_balance_does_not_bear_out_is_never_credited() {
    let (_one, s) = shared();
    let (session, id, address, units) = s.checkout("20.00", "TRUST-FAKE-LOG");
    // The node adds a transfer of the whole amount that the chain never saw, in the next block,
    // to every answer that covers it.
    let block = s.anvil.head() + 1;
    let invented = format!("0x{}", "ab".repeat(32));
    s.node.set(
        "eth_getLogs",
        Fault::ExtraLog(invented_transfer(
            (&s.usdc, &s.customer, &address),
            units,
            block,
            &invented,
        )),
        100,
    );
    s.anvil.mine(DEPTH + 1);
    let why = eventually("the check to be refused", Duration::from_secs(30), || {
        s.anvil.mine(1);
        s.status(&session);
        s.refusal(id).filter(|why| why.contains("balance"))
    });
    assert!(why.contains("20 USDC"), "{why}");
    assert!(why.contains("its balance there is 0 USDC"), "{why}");
    assert!(s.node.faulted("eth_getLogs") > 0);
    // Checked again and again, it stays refused: nothing credited, nothing stored as final.
    for _ in 0..3 {
        s.anvil.mine(1);
        let st = s.status(&session);
        assert_eq!(st["status"], "pending", "{st}");
    }
    assert_eq!(s.raw_status(id), "pending");
    assert_eq!(s.final_payments(&address), 0);
    // The node stops inventing; the customer pays for real: credited, once, from the real
    // transfer, and the refusal is gone.
    s.node.heal();
    let hash = s.anvil.transfer(&s.usdc, &s.customer, &address, units);
    s.anvil.mine(DEPTH);
    eventually("the real payment credited", Duration::from_secs(30), || {
        s.anvil.mine(1);
        (s.status(&session)["status"] == "succeeded").then_some(())
    });
    let t = s.worker.transaction(0, id);
    assert_eq!(t["tx_hashes"]["source"], json!(hash));
    assert_eq!(t["amount"]["gross"], "20.00");
    assert_eq!(t["amount_status"], "EXACT");
    assert_eq!(s.final_payments(&address), 1);
    assert_eq!(s.refusal(id), None);
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn a_node_whose_head_stands_still_decides_no_checkouts_end() {
    let (_one, s) = shared();
    let (session, id, address, units) = s.checkout("6.00", "TRUST-FROZEN");
    // The worker reads the address at a new head, then the node's head freezes there.
    s.anvil.mine(1);
    s.status(&session);
    let frozen = s.anvil.head();
    s.node.set("eth_blockNumber", Fault::Head(frozen), 100);
    // The customer pays in time; the chain moves on, the node does not.
    let hash = s.anvil.transfer(&s.usdc, &s.customer, &address, units);
    s.anvil.mine(DEPTH);
    let why = eventually("the frozen head noticed", Duration::from_secs(30), || {
        s.status(&session);
        s.refusal(id).filter(|why| why.contains("head"))
    });
    assert!(why.contains(&format!("at block {frozen}")), "{why}");
    // The operator is e-mailed about it once (this worker has no e-mail binding: the record
    // says so), not at every read.
    let alert = || -> (i64, i64, String) {
        s.worker
            .database()
            .query_row(
                "SELECT alerted_head, alerted_at, alert_email_status FROM node_heads \
                 WHERE alerted_head = ?1",
                [i64::try_from(frozen).unwrap()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .expect("the stall's alert")
    };
    let first = alert();
    assert_eq!(first.0, i64::try_from(frozen).unwrap());
    assert_eq!(first.2, "not_configured");
    // The operator's overview says so too.
    let networks = s
        .worker
        .portal(Method::GET, "/portal/api/networks", Some(&s.portal), None);
    assert_eq!(networks.status, 200, "{}", networks.text);
    assert_eq!(
        networks.json()["data"][0]["status"],
        "stale",
        "{}",
        networks.text
    );
    // The checkout ends meanwhile (the worker is idle: its end moves two minutes into the
    // past). On the frozen node's word the address looks unpaid: it is not expired.
    s.worker
        .database()
        .execute(
            "UPDATE checkout_sessions SET expires_at = unixepoch() - 120 WHERE id = ?1",
            [&session],
        )
        .unwrap();
    for _ in 0..3 {
        s.worker.cron();
        assert_eq!(s.status(&session)["status"], "pending");
    }
    assert_eq!(s.raw_status(id), "pending", "not expired on a stale head");
    assert_eq!(
        alert(),
        first,
        "one alert for the stall, however many reads saw it"
    );
    // The node catches up: the payment made in time is credited, never expired first.
    s.node.heal();
    eventually("the payment credited", Duration::from_secs(30), || {
        s.anvil.mine(1);
        (s.status(&session)["status"] == "succeeded").then_some(())
    });
    let t = s.worker.transaction(0, id);
    assert_eq!(t["tx_hashes"]["source"], json!(hash));
    assert_eq!(t["amount_status"], "EXACT");
    let expired: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT count(*) FROM events WHERE transaction_id = ?1 AND type = 'payment.expired'",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(expired, 0, "never expired");
    assert_eq!(s.refusal(id), None);
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn a_flood_of_dust_is_recorded_a_bounded_number_a_check_none_lost_or_counted_twice() {
    let (_one, s) = shared();
    let (session, id, address, units) = s.checkout("1.00", "TRUST-DUST");
    // 25 dust payments of one base unit in one block, then 10 in blocks of their own.
    s.anvil.rpc("evm_setAutomine", json!([false]));
    for _ in 0..25 {
        s.anvil.transfer_unmined(&s.usdc, &s.customer, &address, 1);
    }
    s.anvil.mine(1);
    s.anvil.rpc("evm_setAutomine", json!([true]));
    for _ in 0..10 {
        s.anvil.transfer(&s.usdc, &s.customer, &address, 1);
    }
    s.anvil.mine(DEPTH);
    // Each poll checks the address at most once; each check stores at most TRANSFERS_PER_CHECK
    // of them as final.
    let mut counts = vec![0];
    eventually(
        "every dust payment recorded",
        Duration::from_secs(60),
        || {
            s.anvil.mine(1);
            s.status(&session);
            let now = s.final_payments(&address);
            if now != *counts.last().unwrap() {
                counts.push(now);
            }
            (now >= 35).then_some(())
        },
    );
    assert!(
        counts
            .windows(2)
            .all(|w| w[1] - w[0] <= TRANSFERS_PER_CHECK),
        "final payments after each check: {counts:?}"
    );
    assert_eq!(*counts.last().unwrap(), 35, "{counts:?}");
    // All 35 units are in the books, once each.
    let custody: String = s
        .worker
        .database()
        .query_row(
            "SELECT debits_posted FROM ledger_accounts WHERE id = ?1",
            [format!(
                "base:{}:custody:{}",
                s.usdc.to_ascii_lowercase(),
                address.to_ascii_lowercase()
            )],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(custody, "35");
    assert_eq!(
        s.status(&session)["status"],
        "pending",
        "35 units are not 1 USD"
    );
    // The rest arrives: the whole is credited, exactly.
    s.anvil.transfer(&s.usdc, &s.customer, &address, units - 35);
    eventually("the payment credited", Duration::from_secs(30), || {
        s.anvil.mine(1);
        (s.status(&session)["status"] == "succeeded").then_some(())
    });
    let t = s.worker.transaction(0, id);
    assert_eq!(t["amount"]["gross"], "1.00");
    assert_eq!(t["amount_status"], "EXACT");
    assert_eq!(s.final_payments(&address), 36);
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn no_quote_off_a_stablecoins_peg_outside_a_feeds_bounds_or_while_the_sequencer_is_down() {
    let (_one, s) = shared();
    let now = s.anvil.time();
    // All well: USDC at its peg (checked against its feed), EUR within its bounds.
    let (_, _, _, units) = s.checkout("5.00", "TRUST-PEG");
    assert_eq!(units, 5_000_000);
    let (_, _, _, units) = s.checkout_in("4.00", "EUR", "TRUST-EUR");
    assert_eq!(units, 5_000_000, "4 EUR at 1.25 USD");
    let source: String = s
        .worker
        .database()
        .query_row(
            "SELECT rate_source FROM deposit_watches ORDER BY created_at DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        source.starts_with("peg: 1 USDC = 1 USD (USDC/USD feed 0x"),
        "{source}"
    );

    // USDC trades at 0.95 USD: not taken at its peg, whatever the order's currency.
    s.anvil.set_feed(&s.feeds.usdc, 95_000_000, now);
    let why = s.refused("5.00", "USD", "TRUST-DEPEG");
    assert!(why.contains("USDC is off its peg"), "{why}");
    assert!(why.contains("0.95 USD, more than 2 %"), "{why}");
    s.anvil.set_feed(&s.feeds.usdc, 99_000_000, now);
    s.checkout("5.00", "TRUST-NEAR-PEG");
    s.anvil.set_feed(&s.feeds.usdc, USDC_USD, now);

    // The EUR/USD feed answers 5 USD, above its bound of 2: no EUR order is quoted.
    s.anvil.set_feed(&s.feeds.eur, 500_000_000, now);
    let why = s.refused("4.00", "EUR", "TRUST-BOUNDS");
    assert!(
        why.contains("EUR/USD price feed answers 5, outside its bounds (0.5 to 2)"),
        "{why}"
    );
    s.anvil.set_feed(&s.feeds.eur, EUR_USD, now);

    // The sequencer goes down: nothing is quoted; back up just now: not for its grace period.
    s.anvil.set_feed(&s.feeds.sequencer, 1, now);
    let why = s.refused("5.00", "USD", "TRUST-SEQUENCER-DOWN");
    assert!(why.contains("the base sequencer is down"), "{why}");
    s.anvil.set_feed(&s.feeds.sequencer, 0, s.anvil.time());
    let why = s.refused("5.00", "USD", "TRUST-SEQUENCER-GRACE");
    assert!(why.contains("the base sequencer came back up"), "{why}");
    assert!(why.contains("3600 s"), "{why}");
    // Up for longer than the grace period: quoted again.
    s.anvil
        .set_feed(&s.feeds.sequencer, 0, s.anvil.time() - 3601);
    s.checkout("5.00", "TRUST-SEQUENCER-UP");
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn a_node_on_another_chain_is_never_read_for_deposits() {
    let (_one, s) = shared();
    let (session, id, address, units) = s.checkout("9.00", "TRUST-CHAIN");
    // The node now says it serves Ethereum mainnet, not the configured chain.
    s.node.set("eth_chainId", Fault::ChainId(1), 100);
    let logs_before = s.node.calls("eth_getLogs");
    s.anvil.transfer(&s.usdc, &s.customer, &address, units);
    s.anvil.mine(DEPTH + 1);
    let why = eventually("the node to be refused", Duration::from_secs(30), || {
        s.anvil.mine(1);
        s.status(&session);
        s.refusal(id).filter(|why| why.contains("on chain 1"))
    });
    assert!(why.contains("not the configured 31337"), "{why}");
    assert!(s.node.faulted("eth_chainId") > 0);
    assert_eq!(
        s.node.calls("eth_getLogs"),
        logs_before,
        "nothing is read from a node on another chain"
    );
    assert_eq!(s.status(&session)["status"], "pending");
    assert_eq!(s.raw_status(id), "pending");
    assert_eq!(s.final_payments(&address), 0);
    // Back on the right chain: the payment is credited, once.
    s.node.heal();
    eventually("the payment credited", Duration::from_secs(30), || {
        s.anvil.mine(1);
        (s.status(&session)["status"] == "succeeded").then_some(())
    });
    assert_eq!(s.final_payments(&address), 1);
    assert_eq!(s.refusal(id), None);
    payrail_tests::books::settle_and_assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn status_polls_read_the_node_at_most_once_per_address_every_two_seconds() {
    let (_one, s) = shared();
    let (session, ..) = s.checkout("3.00", "TRUST-POLLS");
    // A page polling as fast as it can for three seconds: each check of the address asks the
    // node its chain id once, so the checks are counted by those calls.
    let checks_before = s.node.calls("eth_chainId");
    let started = std::time::Instant::now();
    let mut polls = 0u32;
    while started.elapsed() < Duration::from_secs(3) {
        assert_eq!(s.status(&session)["status"], "pending");
        polls += 1;
    }
    let elapsed = started.elapsed().as_secs();
    let checks = s.node.calls("eth_chainId") - checks_before;
    // At most one check every two seconds of the window (and the one at its start).
    let most = usize::try_from(elapsed / 2 + 2).unwrap();
    assert!(
        checks <= most,
        "{checks} node checks for {polls} polls in {elapsed} s"
    );
    assert!(polls >= 10, "the polls were answered: {polls}");
    assert!(
        usize::try_from(polls).unwrap() > checks * 3,
        "most polls were answered without the node: {checks} checks, {polls} polls"
    );
}

#[test]
fn racing_reads_of_a_stalled_node_tell_the_operator_once() {
    let (_one, s) = shared();
    // Six open checkouts, so six addresses are read at once, each by its own poll.
    let sessions: Vec<String> = (0..6)
        .map(|k| s.checkout("2.00", &format!("TRUST-RACE-{k}")).0)
        .collect();
    s.anvil.mine(1);
    let frozen = s.anvil.head();
    s.node.set("eth_blockNumber", Fault::Head(frozen), 100);
    let told = format!("head stands still at block {frozen}:");
    // Every address polled and the cron run, all at once, again and again until the stall is
    // noticed, and once more after.
    let all_at_once = || {
        std::thread::scope(|scope| {
            for session in &sessions {
                scope.spawn(move || s.status(session));
            }
            scope.spawn(|| s.worker.cron());
        });
    };
    eventually("the stall to be noticed", Duration::from_secs(30), || {
        all_at_once();
        s.worker.log().contains(&told).then_some(())
    });
    all_at_once();
    assert_eq!(
        s.worker.log().matches(&told).count(),
        1,
        "one alert claimed for the stall, whatever raced to notice it"
    );
    s.node.heal();
}

/// A session is written only on the facts it was made on, read a moment before: a merchant
/// suspended while its session's quote waits on a slow node gets no session and nothing is
/// stored, and the same wait with nothing changed ends in a session. (The isolate's memo of
/// the key is forgotten first, by a refused attempt, so the session takes the full read.)
#[test]
fn a_merchant_suspended_while_its_session_waits_on_the_node_gets_nothing_stored() {
    let (_one, s) = shared();
    let db = s.worker.database();
    let key = &s.worker.credentials.institutions[0].merchants[0].public_key;
    let merchant: i64 = db
        .query_row(
            "SELECT id FROM merchants WHERE public_key = ?1",
            [key],
            |r| r.get(0),
        )
        .unwrap();
    let status = |status: &str| {
        db.execute(
            "UPDATE merchants SET status = ?1 WHERE id = ?2",
            rusqlite::params![status, merchant],
        )
        .unwrap();
    };
    let stored = || -> i64 {
        db.query_row(
            "SELECT count(*) FROM transactions WHERE merchant_id = ?1",
            [merchant],
            |r| r.get(0),
        )
        .unwrap()
    };
    let order = s.order("12.00", "USD", "TRUST-SLOW-QUOTE");
    let post = || {
        s.worker
            .post_json("/checkout/sessions", &order, None, "/checkout/sessions")
    };
    status("suspended");
    post().assert_error(403, "merchant_unavailable");
    status("active");

    // `change` runs while the session's quote waits on the node for the newest block.
    let wait_on_the_node = |change: &dyn Fn()| {
        let held = s.node.faulted("eth_blockNumber");
        s.node.set("eth_blockNumber", Fault::Hold, 100);
        std::thread::scope(|scope| {
            let pending = scope.spawn(post);
            eventually(
                "the quote to wait on the node",
                Duration::from_secs(10),
                || (s.node.faulted("eth_blockNumber") > held).then_some(()),
            );
            change();
            s.node.release("eth_blockNumber");
            pending.join().unwrap()
        })
    };

    let before = stored();
    let reply = wait_on_the_node(&|| status("suspended"));
    let why = reply.assert_error(403, "merchant_unavailable");
    assert!(why.contains("suspended"), "{why}");
    assert_eq!(
        stored(),
        before,
        "a session was stored for a suspended merchant"
    );
    status("active");

    // Refused again, so the key is read in full again: with nothing changed it is made.
    status("suspended");
    post().assert_error(403, "merchant_unavailable");
    status("active");
    let reply = wait_on_the_node(&|| {});
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(stored(), before + 1);
}
