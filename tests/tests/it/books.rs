//! The books against the chain, on a local chain of this module's own, in production mode: the
//! cron books the operator's funding of the treasury and of the custody gas address.

use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use payrail_tests::chain::{Anvil, TEST_XPUB};
use payrail_tests::{eventually, Worker};
use reqwest::Method;
use serde_json::json;

/// The tests' treasury key (web3.js's documentation example: funded by nobody else).
const TREASURY_KEY: &str = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318";
/// Confirmations on the tests' network.
const DEPTH: u64 = 2;

/// A local chain with USDC and a worker reconciling its books with it.
struct Setup {
    anvil: Anvil,
    usdc: String,
    treasury: String,
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
        ],
    );
    let portal = worker.portal_login(0);
    let networks = worker.portal(Method::GET, "/portal/api/networks", Some(&portal), None);
    assert_eq!(networks.status, 200, "{}", networks.text);
    let treasury = networks.json()["data"][0]["treasury"]["address"]
        .as_str()
        .unwrap_or_else(|| panic!("the treasury is shown: {}", networks.text))
        .to_ascii_lowercase();
    Setup {
        anvil,
        usdc,
        treasury,
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

    /// The account ids of the treasury in USDC and in the coin.
    fn treasury_accounts(&self) -> (String, String) {
        (
            format!("polygon:{}:treasury", self.usdc.to_ascii_lowercase()),
            "polygon:native:treasury".to_owned(),
        )
    }

    /// Runs the cron (mining a block each time) until the books' treasury holds what the
    /// chain holds.
    fn books_meet_the_chain(&self) {
        let (usdc, coin) = self.treasury_accounts();
        eventually(
            "the books to hold what the treasury holds",
            Duration::from_secs(60),
            || {
                self.worker.cron();
                self.anvil.mine(1);
                let chain = (
                    self.anvil.balance_of(&self.usdc, &self.treasury),
                    self.anvil.ether_balance(&self.treasury),
                );
                let books = (self.held(&usdc), self.held(&coin));
                (books == (chain.0 as i128, chain.1 as i128)).then_some(())
            },
        );
    }
}

#[test]
fn the_cron_books_the_operators_funding_of_the_treasury() {
    let (_one, s) = shared();
    let (usdc, coin) = s.treasury_accounts();
    let (usdc_before, coin_before) = (s.held(&usdc), s.held(&coin));
    s.anvil.mint(&s.usdc, &s.treasury, 5_000_000_000);
    s.anvil
        .pay_ether(&s.anvil.account(0), &s.treasury, 3 * 10u128.pow(18));
    // Not before the money is final: at the confirmed block (the one before the newest, at a
    // depth of two) the chain does not hold the ether yet.
    s.worker.cron();
    assert_eq!(s.held(&coin), coin_before);
    s.anvil.mine(DEPTH);
    s.books_meet_the_chain();
    assert_eq!(s.held(&usdc) - usdc_before, 5_000_000_000);
    assert_eq!(s.held(&coin) - coin_before, 3 * 10i128.pow(18));
    // Booked as funding from the world, once: more runs book nothing more.
    let fundings = |account: &str| -> i128 {
        s.worker
            .database()
            .query_row(
                "SELECT COALESCE(sum(CAST(amount AS INTEGER)), 0) FROM ledger_transfers \
                 WHERE code = 'funding' AND debit_account = ?1 \
                 AND credit_account = 'polygon:' || ?2 || ':world'",
                [account, account.split(':').nth(1).unwrap()],
                |r| r.get::<_, i64>(0),
            )
            .unwrap()
            .into()
    };
    assert_eq!(fundings(&usdc), s.held(&usdc));
    for _ in 0..3 {
        s.worker.cron();
        s.anvil.mine(1);
    }
    assert_eq!(fundings(&usdc), s.held(&usdc));
    assert_eq!(
        s.held(&usdc),
        s.anvil.balance_of(&s.usdc, &s.treasury) as i128
    );
}
