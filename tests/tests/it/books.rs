//! The books against the chain, on a local chain of this module's own, in production mode: the
//! cron books the operator's funding of the treasury and of the custody gas address; money
//! taken from the treasury (or the gas address) behind the worker's back is recorded as drift,
//! e-mailed once, and named by `xtask reconcile`, which also finds money at a deposit address
//! that the books know nothing of; on a quiet healthy worker it finds nothing.
//!
//! The tests run one at a time and each leaves the chain as the books hold it.

use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use payrail_tests::books;
use payrail_tests::chain::{Anvil, TEST_XPUB};
use payrail_tests::{eventually, Worker};
use serde_json::json;

/// The tests' treasury key (web3.js's documentation example: funded by nobody else).
const TREASURY_KEY: &str = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318";
/// Confirmations on the tests' network.
const DEPTH: u64 = 2;
/// Where drift is e-mailed.
const OPERATOR: &str = "ops@payrail.example";

/// A local chain with USDC and a worker reconciling its books with it.
struct Setup {
    anvil: Anvil,
    usdc: String,
    treasury: String,
    gas: String,
    worker: Worker,
}

fn start() -> Setup {
    let anvil = Anvil::start();
    let usdc = anvil.token("USD Coin", "USDC");
    let now = anvil.time();
    let pol = anvil.feed("POL / USD", 50_000_000, now);
    let chains = json!({"polygon": {"rpc_url": anvil.url, "chain_id": 31337,
        "confirmations": DEPTH, "tokens": {"USDC": {"address": usdc}},
        "feeds": {"POL/USD": {"address": pol}}}})
    .to_string();
    let encryption_key = std::env::var("PAYRAIL_DEV_ENCRYPTION_KEY")
        .expect("PAYRAIL_DEV_ENCRYPTION_KEY (run through scripts/test)");
    let sealed = xtask::secrets::seal_treasury_key(&encryption_key, TREASURY_KEY).unwrap();
    let worker = Worker::start_with_vars(
        "production",
        3600,
        &[
            ("PAYRAIL_EVM_XPUB", TEST_XPUB),
            ("PAYRAIL_CHAINS", &chains),
            ("PAYRAIL_TREASURY_KEY", &sealed),
            ("PAYRAIL_WALLET_COOLOFF_SECONDS", "0"),
            ("PAYRAIL_OPERATOR_EMAIL", OPERATOR),
        ],
    );
    let treasury = books::treasury_address(&worker);
    Setup {
        anvil,
        usdc,
        treasury,
        gas: xtask::reconcile::gas_address(TEST_XPUB).unwrap(),
        worker,
    }
}

/// The module's chain and worker, one test at a time: each moves the treasury's money.
fn shared() -> (MutexGuard<'static, ()>, &'static Setup) {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    (guard, SETUP.get_or_init(start))
}

/// A recorded reconciliation.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    id: i64,
    chain: String,
    book: String,
    drift: String,
    addresses: i64,
    address_list: String,
    new_drift: i64,
    email: Option<String>,
}

impl Setup {
    /// The account's posted balance in the books (debit-normal: debits less credits), 0 when
    /// it does not exist.
    fn held(&self, account: &str) -> i128 {
        self.worker
            .database()
            .query_row(
                "SELECT debits_posted, credits_posted FROM ledger_accounts WHERE id = ?1",
                [account],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
            )
            .map(|(d, c)| d.parse::<i128>().unwrap() - c.parse::<i128>().unwrap())
            .unwrap_or(0)
    }

    fn usdc_treasury(&self) -> String {
        format!("polygon:{}:treasury", self.usdc.to_ascii_lowercase())
    }

    fn gas_account(&self) -> String {
        format!("polygon:native:custody:{}", self.gas)
    }

    /// What the chain holds and what the books hold: the treasury's USDC and coin, the gas
    /// address's coin.
    fn figures(&self) -> ([i128; 3], [i128; 3]) {
        let chain = [
            self.anvil.balance_of(&self.usdc, &self.treasury) as i128,
            self.anvil.ether_balance(&self.treasury) as i128,
            self.anvil.ether_balance(&self.gas) as i128,
        ];
        let books = [
            self.held(&self.usdc_treasury()),
            self.held(COIN_TREASURY),
            self.held(&self.gas_account()),
        ];
        (chain, books)
    }

    /// Runs the cron (mining a block each time) until the books hold what the chain holds.
    fn books_meet_the_chain(&self) {
        eventually(
            "the books to hold what the chain holds",
            Duration::from_secs(60),
            || {
                self.worker.cron();
                self.anvil.mine(1);
                let (chain, books) = self.figures();
                (chain == books).then_some(())
            },
        );
    }

    /// A treasury with money and gas, booked.
    fn funded(&self) {
        if self.anvil.balance_of(&self.usdc, &self.treasury) == 0 {
            self.anvil.mint(&self.usdc, &self.treasury, 1_000_000_000);
        }
        if self.anvil.ether_balance(&self.treasury) == 0 {
            self.anvil
                .pay_ether(&self.anvil.account(0), &self.treasury, 10u128.pow(18));
        }
        self.anvil.mine(DEPTH);
        self.books_meet_the_chain();
    }

    /// The reconciliations of `token` in `scope` after row `after`, oldest first.
    fn rows(&self, token: &str, scope: &str, after: i64) -> Vec<Row> {
        let db = self.worker.database();
        let mut statement = db
            .prepare(
                "SELECT id, chain_units, book_units, drift, addresses, address_list, new_drift, \
                 email_status FROM reconciliations \
                 WHERE network = 'polygon' AND token = ?1 AND scope = ?2 AND id > ?3 ORDER BY id",
            )
            .unwrap();
        statement
            .query_map(rusqlite::params![token, scope, after], |r| {
                Ok(Row {
                    id: r.get(0)?,
                    chain: r.get(1)?,
                    book: r.get(2)?,
                    drift: r.get(3)?,
                    addresses: r.get(4)?,
                    address_list: r.get(5)?,
                    new_drift: r.get(6)?,
                    email: r.get(7)?,
                })
            })
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// The newest reconciliation's id.
    fn last_row(&self) -> i64 {
        self.worker
            .database()
            .query_row(
                "SELECT COALESCE(max(id), 0) FROM reconciliations",
                [],
                |r| r.get(0),
            )
            .unwrap()
    }

    /// Runs the cron and mines until `scope` of `token` records a row with `drift`.
    fn drift_recorded(&self, token: &str, scope: &str, after: i64, drift: &str) -> Row {
        eventually(
            &format!("a {scope} drift of {drift}"),
            Duration::from_secs(60),
            || {
                self.worker.cron();
                self.anvil.mine(1);
                self.rows(token, scope, after)
                    .into_iter()
                    .find(|r| r.drift == drift)
            },
        )
    }
}

/// The coin treasury's account.
const COIN_TREASURY: &str = "polygon:native:treasury";

#[test]
fn the_cron_books_the_operators_funding_of_the_treasury() {
    let (_one, s) = shared();
    let usdc = s.usdc_treasury();
    let (usdc_before, coin_before) = (s.held(&usdc), s.held(COIN_TREASURY));
    s.anvil.mint(&s.usdc, &s.treasury, 5_000_000_000);
    s.anvil
        .pay_ether(&s.anvil.account(0), &s.treasury, 3 * 10u128.pow(18));
    // Not before the money is final: at the confirmed block (the one before the newest, at a
    // depth of two) the chain does not hold the ether yet.
    s.worker.cron();
    assert_eq!(s.held(COIN_TREASURY), coin_before);
    s.anvil.mine(DEPTH);
    s.books_meet_the_chain();
    assert_eq!(s.held(&usdc) - usdc_before, 5_000_000_000);
    assert_eq!(s.held(COIN_TREASURY) - coin_before, 3 * 10i128.pow(18));
    // Booked as funding from the world, once: more runs book nothing more.
    let fundings = || -> i64 {
        s.worker
            .database()
            .query_row(
                "SELECT COALESCE(sum(CAST(amount AS INTEGER)), 0) FROM ledger_transfers \
                 WHERE code = 'funding' AND debit_account = ?1 AND credit_account = ?2",
                [
                    usdc.as_str(),
                    &format!("polygon:{}:world", s.usdc.to_ascii_lowercase()),
                ],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert_eq!(i128::from(fundings()), s.held(&usdc));
    let after = s.last_row();
    for _ in 0..3 {
        s.worker.cron();
        s.anvil.mine(1);
    }
    assert_eq!(i128::from(fundings()), s.held(&usdc));
    // Each run records that the treasury agrees with the chain.
    let token = s.usdc.to_ascii_lowercase();
    let rows = s.rows(&token, "treasury", after);
    assert!(rows.len() >= 3, "{rows:?}");
    assert!(
        rows.iter().all(|r| r.drift == "0"
            && r.chain == r.book
            && r.addresses == 1
            && r.address_list == format!("[\"{}\"]", s.treasury)
            && r.new_drift == 0),
        "{rows:?}"
    );
    books::assert_balanced(&s.worker, &s.anvil);
    // The portal's overview shows the treasury's address and the booked float, from the books.
    let session = s.worker.portal_login(0);
    let html = s
        .worker
        .send(
            s.worker
                .request(reqwest::Method::GET, "/portal/")
                .header("Cookie", format!("payrail_portal={}", session.cookie)),
            None,
        )
        .text;
    let address = html
        .split("id=\"treasury-address\">")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .unwrap_or_else(|| panic!("the treasury's address on the overview: {html}"));
    assert_eq!(address.to_ascii_lowercase(), s.treasury);
    let row = html
        .split("<tr data-network=\"polygon\" data-asset=\"USDC\"")
        .nth(1)
        .and_then(|rest| rest.split("</tr>").next())
        .unwrap_or_else(|| panic!("the USDC float on the overview: {html}"));
    let float = shared_types::ledger::units_text(s.held(&usdc), 6);
    assert!(
        row.contains(&format!("data-label=\"Treasury\">{float}<")),
        "{float} in {row}"
    );
}

#[test]
fn money_taken_from_the_treasury_behind_the_workers_back_is_drift_emailed_once() {
    let (_one, s) = shared();
    s.funded();
    let token = s.usdc.to_ascii_lowercase();
    let after = s.last_row();
    let booked = s.held(&s.usdc_treasury());
    // Someone with the treasury's key moves 2.5 USDC out without the worker.
    let thief = s.anvil.account(7);
    s.anvil.impersonate(&s.treasury, true);
    s.anvil.transfer(&s.usdc, &s.treasury, &thief, 2_500_000);
    s.anvil.impersonate(&s.treasury, false);
    s.anvil.mine(DEPTH);
    let first = s.drift_recorded(&token, "treasury", after, "-2500000");
    assert_eq!(first.book, booked.to_string());
    assert_eq!(first.chain, (booked - 2_500_000).to_string());
    assert_eq!(first.new_drift, 1, "{first:?}");
    // The operator's e-mail was attempted once (this deployment has no e-mail binding).
    assert_eq!(first.email.as_deref(), Some("not_configured"), "{first:?}");
    // Never booked as anything: the books still say what they said.
    assert_eq!(s.held(&s.usdc_treasury()), booked);
    // The drift stays recorded at every run, but it is news once.
    for _ in 0..3 {
        s.worker.cron();
        s.anvil.mine(1);
    }
    let rows = s.rows(&token, "treasury", after);
    let drifting: Vec<&Row> = rows.iter().filter(|r| r.drift == "-2500000").collect();
    assert!(drifting.len() >= 4, "{rows:?}");
    assert_eq!(
        rows.iter()
            .filter(|r| r.new_drift == 1 || r.email.is_some())
            .count(),
        1,
        "{rows:?}"
    );
    // The gas that transfer burnt is drift in the coin too.
    let coin = s.rows("native", "treasury", after);
    assert!(
        coin.iter()
            .any(|r| r.new_drift == 1 && r.drift.starts_with('-')),
        "{coin:?}"
    );
    // `xtask reconcile --local` names it and fails.
    let report = books::check(&s.worker, &s.anvil);
    assert!(!report.clean());
    let names: Vec<String> = report.drifts().iter().map(|c| c.name()).collect();
    assert!(
        names.contains(&"polygon USDC treasury".to_owned()),
        "{names:?}"
    );
    let text = report.render();
    assert!(
        text.contains(&format!(
            "DRIFT {} at block {}: chain",
            s.treasury, report.comparisons[0].block
        )),
        "{text}"
    );
    assert!(
        text.contains("drift -2.5 USDC (-2500000 base units)"),
        "{text}"
    );
    assert!(
        text.contains("result: DRIFT in polygon USDC treasury"),
        "{text}"
    );
    // Put back, it agrees again, and a later drift would be news again.
    s.anvil.mint(&s.usdc, &s.treasury, 2_500_000);
    s.anvil
        .set_balance(&s.treasury, s.held(COIN_TREASURY) as u128);
    s.anvil.mine(DEPTH);
    let back = s.drift_recorded(&token, "treasury", first.id, "0");
    assert_eq!(back.new_drift, 0);
    s.books_meet_the_chain();
    books::assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn the_custody_gas_address_is_funded_and_compared() {
    let (_one, s) = shared();
    let booked = s.held(&s.gas_account());
    s.anvil
        .pay_ether(&s.anvil.account(0), &s.gas, 2 * 10u128.pow(17));
    s.anvil.mine(DEPTH);
    s.books_meet_the_chain();
    assert_eq!(s.held(&s.gas_account()) - booked, 2 * 10i128.pow(17));
    // Less there than the books say: custody drift, news once.
    let after = s.last_row();
    let held = s.held(&s.gas_account());
    s.anvil.set_balance(&s.gas, (held - 1000) as u128);
    s.anvil.mine(DEPTH);
    let row = s.drift_recorded("native", "custody", after, "-1000");
    assert_eq!(row.new_drift, 1, "{row:?}");
    assert!(row.address_list.contains(&s.gas), "{row:?}");
    assert!(row.addresses >= 1);
    assert_eq!(s.held(&s.gas_account()), held, "never booked");
    let report = books::check(&s.worker, &s.anvil);
    assert!(
        report
            .drifts()
            .iter()
            .any(|c| c.name() == "polygon POL custody"),
        "{}",
        report.render()
    );
    s.anvil.set_balance(&s.gas, held as u128);
    s.anvil.mine(DEPTH);
    s.drift_recorded("native", "custody", row.id, "0");
    books::assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn money_at_a_deposit_address_that_the_books_do_not_know_is_reported() {
    let (_one, s) = shared();
    s.funded();
    let key = &s.worker.credentials.institutions[0].merchants[0].public_key;
    let session = s.worker.checkout_session(&json!({
        "publicKey": key, "amount": "5.00", "currency": "USD", "title": "Books",
        "externalReference": "BOOKS-1", "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    }));
    let address: String = s
        .worker
        .database()
        .query_row(
            "SELECT lower(deposit_address) FROM checkout_sessions WHERE id = ?1",
            [session["id"].as_str().unwrap()],
            |r| r.get(0),
        )
        .unwrap();
    // A deposit address waiting for USDC agrees with the books: it holds nothing yet.
    books::assert_balanced(&s.worker, &s.anvil);
    // The coin sent to it is nobody's payment: the books know nothing of it.
    s.anvil.pay_ether(&s.anvil.account(0), &address, 12345);
    s.anvil.mine(DEPTH);
    let report = books::check(&s.worker, &s.anvil);
    let custody = report
        .drifts()
        .into_iter()
        .find(|c| c.name() == "polygon POL custody")
        .unwrap_or_else(|| panic!("{}", report.render()));
    let drifting: Vec<_> = custody.drifting().collect();
    assert_eq!(drifting.len(), 1, "{}", report.render());
    assert_eq!(drifting[0].address, address);
    assert_eq!(drifting[0].drift(), 12345);
    s.anvil.set_balance(&address, 0);
    s.anvil.mine(DEPTH);
    books::assert_balanced(&s.worker, &s.anvil);
}

#[test]
fn reconcile_finds_nothing_on_a_quiet_healthy_worker() {
    let (_one, s) = shared();
    s.funded();
    let report = books::check(&s.worker, &s.anvil);
    assert!(report.clean(), "{}", report.render());
    let text = report.render();
    assert!(
        text.contains("balanced")
            && text.ends_with("result: the books balance and match the chain\n"),
        "{text}"
    );
    // Each ledger of the network was compared: the treasury and custody in USDC and the coin.
    let names: Vec<String> = report.comparisons.iter().map(|c| c.name()).collect();
    for name in [
        "polygon USDC treasury",
        "polygon USDC custody",
        "polygon POL treasury",
        "polygon POL custody",
    ] {
        assert!(names.contains(&name.to_owned()), "{names:?}");
    }
    // The worker's own runs agree too.
    let after = s.last_row();
    s.worker.cron();
    let token = s.usdc.to_ascii_lowercase();
    for (token, scope) in [(token.as_str(), "treasury"), ("native", "treasury")] {
        let rows = s.rows(token, scope, after);
        assert!(
            !rows.is_empty() && rows.iter().all(|r| r.drift == "0"),
            "{rows:?}"
        );
    }
}
