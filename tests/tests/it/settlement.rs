//! Settlement on a real local chain, in production mode: payments held in custody are paid to
//! the merchant's wallet by transactions the worker signs with the treasury key, followed to
//! their depth before `payment.paid`; fees add up to the gross; a batch is one transfer; a
//! missing wallet or an empty treasury holds the payment with a reason until it is fixed (and
//! two hundred held payments never keep one that can settle waiting); a stuck transaction is
//! replaced; racing cron runs send one transaction per payment.

use std::str::FromStr;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use payrail_tests::browser::{exclusive, Browser};
use payrail_tests::chain::{Anvil, Cctp, TEST_XPUB};
use payrail_tests::faults::FaultyNode;
use payrail_tests::hooks::{assert_signed, endpoint, of_transaction, wait_for};
use payrail_tests::receiver::Receiver;
use payrail_tests::{eventually, PortalSession, Worker};
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{json, Value};
use xtask::demo::DEMO_WALLETS;

/// The tests' treasury key (web3.js's documentation example: funded by nobody else).
const TREASURY_KEY: &str = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318";
/// Confirmations on the tests' network.
const DEPTH: u64 = 2;
/// 2,000 USD per POL (8 decimals): dear enough that the gas shows in cents.
const POL_USD: u128 = 200_000_000_000;

/// A local chain with USDC and price feeds, and a worker settling on it with a funded treasury
/// (or not).
pub(super) struct Setup {
    /// The network it settles on (`polygon` unless a test asks for `ethereum`).
    pub(super) network: &'static str,
    pub(super) anvil: Anvil,
    pub(super) usdc: String,
    /// USDT, when it is offered too.
    usdt: Option<String>,
    pub(super) customer: String,
    /// The `EUR/USD` feed (1.25 at the start).
    eur: String,
    pub(super) treasury: String,
    pub(super) worker: Worker,
    /// The node as the worker sees it, when it is behind a proxy that misbehaves on request.
    pub(super) node: Option<FaultyNode>,
    /// The network's sanctions oracle, when it has one (owned by anvil's account 0).
    pub(super) oracle: Option<String>,
    /// The network's CCTP contracts, configured (no attestation service answers: nothing
    /// crosses to another network here).
    cctp: Cctp,
}

fn start(fund: bool) -> Setup {
    start_in("production", fund)
}

fn start_in(mode: &str, fund: bool) -> Setup {
    start_with(mode, fund, None, &[])
}

/// In production with a funded treasury, the worker's node behind a [`FaultyNode`], and
/// `settings` added to the network's configuration.
pub(super) fn start_faulty(settings: Value) -> Setup {
    start_with("production", true, Some(settings), &[])
}

/// The same on `network` (`ethereum`: USDC and ether).
pub(super) fn start_faulty_on(settings: Value, network: &'static str) -> Setup {
    start_full(
        "production",
        true,
        Some(settings),
        &[],
        (false, network, false),
    )
}

/// The same with more `--var NAME:value` settings of the worker.
pub(super) fn start_faulty_with(settings: Value, vars: &[(&str, &str)]) -> Setup {
    start_with("production", true, Some(settings), vars)
}

/// A worker in `mode` (its treasury funded or not), its node behind a [`FaultyNode`] with
/// `faulty` added to the network's configuration when given, and `vars` besides the chain's
/// (settlement wallets are used at once unless `vars` sets their cool-off).
fn start_with(mode: &str, fund: bool, faulty: Option<Value>, vars: &[(&str, &str)]) -> Setup {
    start_full(mode, fund, faulty, vars, (false, "polygon", false))
}

/// In production with a funded treasury, a sanctions oracle on the chain (the network's
/// `sanctions_oracle`, [`Setup::oracle`]) and `vars` besides the chain's.
pub(super) fn start_screened(vars: &[(&str, &str)]) -> Setup {
    start_full(
        "production",
        true,
        Some(json!({})),
        vars,
        (false, "polygon", true),
    )
}

/// The same, with USDT offered beside USDC when `usdt` (the treasury funded with both), on
/// `network`: `polygon` (USDC, and POL for gas), or `ethereum`, where ether is also a way to
/// pay (its `ETH/USD` feed at the same 2,000 USD); with a sanctions oracle when `screened`.
fn start_full(
    mode: &str,
    fund: bool,
    faulty: Option<Value>,
    vars: &[(&str, &str)],
    (usdt, network, screened): (bool, &'static str, bool),
) -> Setup {
    let anvil = Anvil::start();
    let oracle = screened.then(|| anvil.sanctions_oracle());
    let usdc = anvil.token("USD Coin", "USDC");
    let customer = anvil.account(1);
    anvil.mint(&usdc, &customer, 1_000_000_000_000);
    let now = anvil.time();
    let coin = if network == "ethereum" { "ETH" } else { "POL" };
    let pol = anvil.feed(&format!("{coin} / USD"), POL_USD, now);
    let eur = anvil.feed("EUR / USD", 125_000_000, now);
    let node = faulty.as_ref().map(|_| FaultyNode::start(&anvil.url));
    let rpc_url = node.as_ref().map_or(&anvil.url, |n| &n.url);
    let mut tokens = json!({"USDC": {"address": usdc}});
    let usdt = usdt.then(|| {
        let usdt = anvil.token("Tether USD", "USDT");
        anvil.mint(&usdt, &customer, 1_000_000_000_000);
        tokens["USDT"] = json!({"address": usdt});
        usdt
    });
    let mut config = json!({network: {"rpc_url": rpc_url, "chain_id": 31337,
        "confirmations": DEPTH, "tokens": tokens,
        "feeds": {format!("{coin}/USD"): {"address": pol}, "EUR/USD": {"address": eur}}}});
    if network == "ethereum" {
        config[network]["native"] = json!("ETH");
    }
    if let Some(oracle) = &oracle {
        config[network]["sanctions_oracle"] = json!(oracle);
    }
    let domain = payrail_evm::cctp::domain_named(network)
        .expect("a CCTP domain")
        .id;
    let cctp = anvil.cctp(domain, &[&anvil.account(9)], 1, &usdc, &anvil.account(0));
    config[network]["cctp"] = json!({"token_messenger": cctp.messenger,
        "message_transmitter": cctp.transmitter, "attestation_url": "http://127.0.0.1:9"});
    for (key, value) in faulty.iter().filter_map(Value::as_object).flatten() {
        config[network][key] = value.clone();
    }
    let encryption_key = std::env::var("PAYRAIL_DEV_ENCRYPTION_KEY")
        .expect("PAYRAIL_DEV_ENCRYPTION_KEY (run through scripts/test)");
    let sealed = xtask::secrets::seal_treasury_key(&encryption_key, TREASURY_KEY).unwrap();
    let chains = config.to_string();
    let mut all = vec![
        ("PAYRAIL_EVM_XPUB", TEST_XPUB),
        ("PAYRAIL_CHAINS", chains.as_str()),
        ("PAYRAIL_TREASURY_KEY", sealed.as_str()),
        ("PAYRAIL_WALLET_COOLOFF_SECONDS", "0"),
    ];
    for (name, value) in vars {
        all.retain(|(n, _)| n != name);
        all.push((name, value));
    }
    let worker = Worker::start_with_vars(mode, 3600, &all);
    let portal = worker.portal_login(0);
    let networks = worker.portal(Method::GET, "/portal/api/networks", Some(&portal), None);
    assert_eq!(networks.status, 200, "{}", networks.text);
    let treasury = networks.json()["data"][0]["treasury"]["address"]
        .as_str()
        .unwrap_or_else(|| panic!("the treasury is shown: {}", networks.text))
        .to_owned();
    let setup = Setup {
        network,
        anvil,
        usdc,
        usdt,
        customer,
        eur,
        treasury,
        worker,
        node,
        oracle,
        cctp,
    };
    if fund {
        setup.fund_treasury();
    }
    setup
}

impl Setup {
    /// Gas money and a float of USDC for the treasury.
    fn fund_treasury(&self) {
        self.anvil
            .pay_ether(&self.anvil.account(0), &self.treasury, 10u128.pow(19));
        self.anvil
            .mint(&self.usdc, &self.treasury, 1_000_000_000_000);
        if let Some(usdt) = &self.usdt {
            self.anvil.mint(usdt, &self.treasury, 1_000_000_000_000);
        }
        self.books_funded();
    }

    /// The treasury's balance of `token` (`native` for the coin) in the books, in base units.
    pub(super) fn treasury_book(&self, token: &str) -> u128 {
        let (debits, credits): (String, String) = self
            .worker
            .database()
            .query_row(
                "SELECT debits_posted, credits_posted FROM ledger_accounts WHERE id = ?1",
                [format!(
                    "{}:{}:treasury",
                    self.network,
                    token.to_ascii_lowercase()
                )],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap_or(("0".into(), "0".into()));
        debits.parse::<u128>().unwrap() - credits.parse::<u128>().unwrap()
    }

    /// Runs the cron, mining the funding to its depth, until the books hold what the treasury
    /// holds on chain (the operator's funding, booked by reconciliation).
    pub(super) fn books_funded(&self) {
        eventually(
            "the treasury's funding in the books",
            Duration::from_secs(60),
            || {
                self.anvil.mine(1);
                self.worker.cron();
                (self.treasury_book(&self.usdc)
                    == self.anvil.balance_of(&self.usdc, &self.treasury)
                    && self.usdt.iter().all(|usdt| {
                        self.treasury_book(usdt) == self.anvil.balance_of(usdt, &self.treasury)
                    })
                    && self.treasury_book("native") == self.anvil.ether_balance(&self.treasury))
                .then_some(())
            },
        );
    }

    /// A checkout of `amount` `currency` for merchant `merchant`: its transaction and session
    /// ids.
    pub(super) fn checkout(
        &self,
        merchant: usize,
        amount: &str,
        currency: &str,
        reference: &str,
    ) -> (i64, String) {
        let key = &self.worker.credentials.institutions[0].merchants[merchant].public_key;
        let session = self.worker.checkout_session(&json!({
            "publicKey": key, "amount": amount, "currency": currency, "title": "Settle",
            "externalReference": reference,
            "redirectUrl": "https://shop.example/done", "allowCrypto": true
        }));
        (
            session["transaction_id"].as_i64().unwrap(),
            session["id"].as_str().unwrap().to_owned(),
        )
    }

    /// Polls the checkout's status until its payment is credited.
    pub(super) fn until_credited(&self, session: &str) {
        eventually(
            "the payment to be credited",
            Duration::from_secs(20),
            || {
                let reply = self.worker.send(
                    self.worker
                        .request(Method::GET, &format!("/checkout/{session}/status")),
                    None,
                );
                (reply.json()["status"] == "succeeded").then_some(())
            },
        );
    }

    /// A checkout of `amount` `currency` for merchant `merchant`, paid exactly on chain and
    /// credited: its transaction id.
    pub(super) fn paid(&self, merchant: usize, amount: &str, currency: &str) -> i64 {
        let (id, session) = self.checkout(merchant, amount, currency, &format!("SETTLE-{amount}"));
        let (address, units) = self.worker.deposit(&session);
        self.anvil
            .transfer(&self.usdc, &self.customer, &address, units);
        self.anvil.mine(DEPTH);
        self.until_credited(&session);
        id
    }

    /// A checkout of `amount` USD for merchant `merchant` paid exactly in ether (on a setup
    /// on `ethereum`) and credited: its transaction id.
    pub(super) fn paid_in_ether(&self, merchant: usize, amount: &str) -> i64 {
        let (id, session) = self.checkout(merchant, amount, "USD", &format!("SETTLE-ETH-{amount}"));
        let changed = self.worker.send(
            self.worker
                .request(Method::POST, &format!("/checkout/{session}/method"))
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(format!("method=ETH:{}", self.network)),
            None,
        );
        assert_eq!(changed.status, 303, "{}", changed.text);
        let (address, wei) = self.worker.deposit(&session);
        self.anvil.pay_ether(&self.customer, &address, wei);
        self.anvil.mine(DEPTH);
        self.until_credited(&session);
        id
    }

    pub(super) fn raw_status(&self, id: i64) -> String {
        self.worker
            .database()
            .query_row(
                "SELECT raw_status FROM transactions WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap()
    }

    /// Runs the cron and mines a block until every one of `ids` is paid.
    pub(super) fn settle(&self, ids: &[i64]) {
        eventually(
            "the payments to be settled",
            Duration::from_secs(60),
            || {
                self.worker.cron();
                self.anvil.mine(1);
                ids.iter()
                    .all(|id| self.raw_status(*id) == "paid")
                    .then_some(())
            },
        );
    }

    /// The payment as the portal shows it.
    pub(super) fn detail(&self, id: i64) -> Value {
        self.worker.portal_payment(0, id)
    }

    /// How many transactions the treasury signed for `id`, by state.
    pub(super) fn sends(&self, id: i64) -> Vec<(String, String)> {
        let db = self.worker.database();
        let mut statement = db
            .prepare(
                "SELECT c.tx_hash, c.state FROM settlement_items i \
                 JOIN chain_sends c ON c.id = i.send_id WHERE i.transaction_id = ?1 \
                 ORDER BY c.created_at, c.sent_block",
            )
            .unwrap();
        statement
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }
}

/// Answers as status and body.
type Answers = Vec<(u16, String)>;

/// `n` requests at once (`call(0)` … `call(n - 1)`): every answer, and those that made
/// something (201).
fn at_once(n: usize, call: impl Fn(usize) -> payrail_tests::Reply + Sync) -> (Answers, Answers) {
    let answers: Answers = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let call = &call;
                scope.spawn(move || {
                    let reply = call(i);
                    (reply.status, reply.text)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let made = answers
        .iter()
        .filter(|(status, _)| *status == 201)
        .cloned()
        .collect();
    (answers, made)
}

fn shared() -> (MutexGuard<'static, ()>, &'static Setup) {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    (guard, SETUP.get_or_init(|| start(true)))
}

pub(super) fn wallet() -> &'static str {
    wallet_on("polygon")
}

/// The demo merchants' settlement wallet on `network`.
pub(super) fn wallet_on(network: &str) -> &'static str {
    DEMO_WALLETS
        .iter()
        .find(|(name, _)| *name == network)
        .unwrap()
        .1
}

pub(super) fn d(value: &Value) -> Decimal {
    Decimal::from_str(
        value
            .as_str()
            .unwrap_or_else(|| panic!("an amount: {value}")),
    )
    .unwrap()
}

/// The order-currency value of `wei` of POL at the tests' feed, to the cent.
pub(super) fn pol_in_usd(wei: u128) -> Decimal {
    let pol = Decimal::from_i128_with_scale(i128::try_from(wei).unwrap(), 18);
    (pol * Decimal::from(2000))
        .round_dp_with_strategy(2, rust_decimal::RoundingStrategy::MidpointAwayFromZero)
}

fn quantity(value: &Value) -> u128 {
    u128::from_str_radix(value.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

#[test]
fn a_paid_checkout_settles_its_net_to_the_merchants_wallet() {
    let (_one, s) = shared();
    let before = s.anvil.balance_of(&s.usdc, wallet());
    let id = s.paid(0, "12.50", "USD");
    s.settle(&[id]);
    let t = s.worker.transaction(0, id);
    assert_eq!(t["raw_status"], "paid", "{t}");
    assert_eq!(t["status"], "paid");
    assert_eq!(t["networks"]["settlement"], "polygon");
    assert!(t["tx_hashes"]["bridge"].is_null());
    assert!(t["amount"]["bridge_fee"].is_null());
    let amount = &t["amount"];
    assert_eq!(amount["psp_fee"], "0.13", "1 % of 12.50, to the cent");
    assert_eq!(
        d(&amount["net"]) + d(&amount["psp_fee"]) + d(&amount["gas_fee"]),
        d(&amount["gross"]),
        "{amount}"
    );
    // The settlement transaction is real, succeeded, and paid exactly the net.
    let hash = t["tx_hashes"]["settlement"].as_str().unwrap();
    let receipt = s.anvil.receipt(hash);
    assert_eq!(receipt["status"], "0x1", "{receipt}");
    assert_eq!(
        receipt["to"].as_str().unwrap().to_lowercase(),
        s.usdc.to_lowercase()
    );
    assert_eq!(
        receipt["from"].as_str().unwrap().to_lowercase(),
        s.treasury.to_lowercase()
    );
    let net_units = (d(&amount["net"]) * Decimal::from(1_000_000))
        .to_string()
        .parse::<Decimal>()
        .unwrap();
    assert_eq!(
        Decimal::from(s.anvil.balance_of(&s.usdc, wallet()) - before),
        net_units,
        "the merchant's balance rose by exactly the net"
    );
    // The gas fee is what the transaction cost: gas used at its price, at the POL/USD feed.
    let cost = quantity(&receipt["gasUsed"]) * quantity(&receipt["effectiveGasPrice"]);
    assert_eq!(d(&amount["gas_fee"]), pol_in_usd(cost), "{receipt}");
    assert!(d(&amount["gas_fee"]) > Decimal::ZERO);
    // payment.paid is in the outbox with the same figures and hash.
    let payload: String = s
        .worker
        .database()
        .query_row(
            "SELECT payload FROM events WHERE transaction_id = ?1 AND type = 'payment.paid'",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    let event: Value = serde_json::from_str(&payload).unwrap();
    assert_eq!(event["data"]["tx_hashes"]["settlement"], json!(hash));
    assert_eq!(event["data"]["amount"], t["amount"]);
    assert_eq!(event["data"]["status"], "paid");
    // The portal shows the transaction; the simulated settle control is refused.
    let detail = s.detail(id);
    let sends = detail["settlement_transactions"].as_array().unwrap();
    assert_eq!(sends.len(), 1);
    assert_eq!(sends[0]["state"], "confirmed");
    assert_eq!(sends[0]["tx_hash"], json!(hash));
    assert!(detail["settlement_hold"].is_null());
    // Its life in the books: a receipt and a credit; the settlement's fee, network fee, payout
    // and gas reserve pending, then three posts and the reserve's void; the gas it used.
    let posted: Vec<(String, String)> = {
        let db = s.worker.database();
        let mut rows = db
            .prepare(
                "SELECT code, phase FROM ledger_transfers WHERE transaction_id = ?1 \
                 OR reference IN (SELECT send_id FROM settlement_items WHERE transaction_id = ?1) \
                 OR reference = ?2 ORDER BY seq",
            )
            .unwrap();
        rows.query_map(
            rusqlite::params![id, t["tx_hashes"]["source"].as_str()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    };
    let count = |code: &str, phase: &str| {
        posted
            .iter()
            .filter(|(c, p)| c == code && p == phase)
            .count()
    };
    assert_eq!(posted.len(), 11, "{posted:?}");
    assert_eq!(count("receipt", "single"), 1, "{posted:?}");
    assert_eq!(count("credit", "single"), 1, "{posted:?}");
    for code in ["fee", "network_fee", "settlement"] {
        assert_eq!(count(code, "pending"), 1, "{code}: {posted:?}");
        assert_eq!(count(code, "post"), 1, "{code}: {posted:?}");
    }
    assert_eq!(count("gas", "pending"), 1, "{posted:?}");
    assert_eq!(count("gas", "void"), 1, "{posted:?}");
    assert_eq!(count("gas", "single"), 1, "{posted:?}");
    s.assert_books();
}

#[test]
fn a_batch_pays_several_payments_in_one_transfer() {
    let (_one, s) = shared();
    let before = s.anvil.balance_of(&s.usdc, wallet());
    let ids = [
        s.paid(0, "3.00", "USD"),
        s.paid(0, "4.00", "USD"),
        s.paid(0, "10.00", "EUR"),
    ];
    s.settle(&ids);
    let ts: Vec<Value> = ids.iter().map(|id| s.worker.transaction(0, *id)).collect();
    let hash = &ts[0]["tx_hashes"]["settlement"];
    assert!(
        ts.iter().all(|t| &t["tx_hashes"]["settlement"] == hash),
        "one transfer: {ts:?}"
    );
    // Its gas is shared: the shares add up to what it cost, each at its currency's rate.
    let receipt = s.anvil.receipt(hash.as_str().unwrap());
    let cost = quantity(&receipt["gasUsed"]) * quantity(&receipt["effectiveGasPrice"]);
    let usd_shares = d(&ts[0]["amount"]["gas_fee"]) + d(&ts[1]["amount"]["gas_fee"]);
    let whole = pol_in_usd(cost);
    // The EUR payment's share is converted at 1.25 USD per EUR.
    let eur_share_in_usd = d(&ts[2]["amount"]["gas_fee"]) * Decimal::new(125, 2);
    let total = usd_shares + eur_share_in_usd;
    assert!(
        (total - whole).abs() <= Decimal::new(2, 2),
        "shares {total} of {whole}"
    );
    // The merchant received every net, at each payment's quote (USDC: 1 USD, or 1.25 per EUR).
    let mut expected_units = Decimal::ZERO;
    for t in &ts {
        let net = d(&t["amount"]["net"]);
        let in_usdc = if t["currency"] == "EUR" {
            net * Decimal::new(125, 2)
        } else {
            net
        };
        assert_eq!(
            d(&t["amount"]["net"]) + d(&t["amount"]["psp_fee"]) + d(&t["amount"]["gas_fee"]),
            d(&t["amount"]["gross"])
        );
        expected_units += (in_usdc * Decimal::from(1_000_000)).trunc();
    }
    assert_eq!(
        Decimal::from(s.anvil.balance_of(&s.usdc, wallet()) - before),
        expected_units
    );
    s.assert_books();
}

/// Copies the row of `table` whose `key` column is `value`, with the columns `set` names given
/// new values (the rest as they are); the new row's rowid.
fn copy_row(
    db: &rusqlite::Connection,
    table: &str,
    (key, value): (&str, &dyn rusqlite::ToSql),
    set: &[(&str, rusqlite::types::Value)],
) -> i64 {
    let columns: Vec<String> = db
        .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut params: Vec<&dyn rusqlite::ToSql> = vec![value];
    let chosen: Vec<String> = columns
        .iter()
        .map(|c| match set.iter().find(|(name, _)| name == c) {
            Some((_, v)) => {
                params.push(v);
                format!("?{}", params.len())
            }
            None => c.clone(),
        })
        .collect();
    db.execute(
        &format!(
            "INSERT INTO {table} ({}) SELECT {} FROM {table} WHERE {key} = ?1",
            columns.join(", "),
            chosen.join(", ")
        ),
        params.as_slice(),
    )
    .unwrap();
    db.last_insert_rowid()
}

#[test]
fn two_hundred_payments_that_cannot_settle_never_keep_one_that_can_from_settling() {
    use rusqlite::types::Value as Sql;
    let s = start(true);
    // Merchant 1's wallet on Polygon is removed once its payment arrived: the payment is held.
    let template = s.paid(1, "3.00", "USD");
    let merchant = &s.worker.credentials.institutions[0].merchants[1];
    let portal = s.worker.portal_login(0);
    let path = format!("/portal/api/merchants/{}/wallets/polygon", merchant.id);
    let removed = s.worker.portal(Method::DELETE, &path, Some(&portal), None);
    assert_eq!(removed.status, 200, "{}", removed.text);
    eventually("the payment to be held", Duration::from_secs(30), || {
        s.worker.cron();
        s.detail(template)["settlement_hold"]["reason"]
            .as_str()
            .map(str::to_owned)
    });
    // Two hundred more like it (a run considers 200 payments), each with its watch, its
    // confirmed transfer and its hold, all older than the payment that can settle.
    let held: Vec<i64> = {
        let db = s.worker.database();
        let (address, session): (String, String) = db
            .query_row(
                "SELECT address, session_id FROM deposit_watches WHERE transaction_id = ?1",
                [template],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        (0..200)
            .map(|k: i64| {
                let id = copy_row(
                    &db,
                    "transactions",
                    ("id", &template),
                    &[
                        ("id", Sql::Null),
                        ("external_reference", Sql::Text(format!("HELD-{k}"))),
                    ],
                );
                let copy = format!("0x{:040x}", 0xdead_0000 + k);
                let copied_session = format!("cs_held_{k}");
                copy_row(
                    &db,
                    "checkout_sessions",
                    ("id", &session),
                    &[
                        ("id", Sql::Text(copied_session.clone())),
                        ("transaction_id", Sql::Integer(id)),
                        ("deposit_address", Sql::Text(copy.clone())),
                    ],
                );
                copy_row(
                    &db,
                    "deposit_watches",
                    ("address", &address),
                    &[
                        ("address", Sql::Text(copy.clone())),
                        ("transaction_id", Sql::Integer(id)),
                        ("session_id", Sql::Text(copied_session.clone())),
                    ],
                );
                copy_row(
                    &db,
                    "chain_transfers",
                    ("address", &address),
                    &[
                        ("address", Sql::Text(copy)),
                        ("session_id", Sql::Text(copied_session)),
                        ("tx_hash", Sql::Text(format!("0x{:064x}", 0xbeef_0000 + k))),
                    ],
                );
                copy_row(
                    &db,
                    "settlement_holds",
                    ("transaction_id", &template),
                    &[("transaction_id", Sql::Integer(id))],
                );
                id
            })
            .collect()
    };
    assert_eq!(held.len(), 200);
    // Merchant 0's payment can settle, and does, ahead of the two hundred.
    let id = s.paid(0, "4.00", "USD");
    s.settle(&[id]);
    assert_eq!(s.raw_status(id), "paid");
    for h in [template, held[0], held[199]] {
        assert_eq!(s.raw_status(h), "succeeded", "still held: {h}");
        assert!(s.sends(h).is_empty());
    }
}

#[test]
fn a_payment_without_a_wallet_on_its_network_waits_until_one_is_added() {
    let (_one, s) = shared();
    let merchant = &s.worker.credentials.institutions[0].merchants[1];
    let id = s.paid(1, "6.00", "USD");
    // The merchant's Polygon wallet is removed after the payment arrived.
    let portal = s.worker.portal_login(0);
    let path = format!("/portal/api/merchants/{}/wallets/polygon", merchant.id);
    let removed = s.worker.portal(Method::DELETE, &path, Some(&portal), None);
    assert_eq!(removed.status, 200, "{}", removed.text);
    eventually("the payment to be held", Duration::from_secs(30), || {
        s.worker.cron();
        s.detail(id)["settlement_hold"]["reason"]
            .as_str()
            .map(str::to_owned)
    });
    let detail = s.detail(id);
    let reason = detail["settlement_hold"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("no settlement wallet on polygon"),
        "{reason}"
    );
    assert_eq!(s.raw_status(id), "succeeded");
    assert!(s.sends(id).is_empty(), "nothing was sent");
    // The institution was told.
    let told: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT count(*) FROM notifications WHERE kind = 'settlement_held' \
             AND body LIKE '%' || ?1 || '%'",
            [id.to_string()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(told, 1);
    // The wallet is added back through the portal: the payment settles by itself.
    let put = s.worker.portal(
        Method::PUT,
        &path,
        Some(&portal),
        Some(&json!({"address": wallet()})),
    );
    assert_eq!(put.status, 200, "{}", put.text);
    s.settle(&[id]);
    assert!(
        s.detail(id)["settlement_hold"].is_null(),
        "the hold is cleared"
    );
    assert_eq!(s.sends(id).len(), 1);
    s.assert_books();
}

#[test]
fn racing_cron_runs_send_one_transaction_per_payment() {
    let (_one, s) = shared();
    let before = s.anvil.balance_of(&s.usdc, wallet());
    let ids = [s.paid(2, "5.00", "USD"), s.paid(2, "7.00", "USD")];
    std::thread::scope(|scope| {
        for _ in 0..6 {
            scope.spawn(|| s.worker.cron());
        }
    });
    s.settle(&ids);
    for id in ids {
        let sends = s.sends(id);
        assert_eq!(
            sends.len(),
            1,
            "one transaction for payment {id}: {sends:?}"
        );
        assert_eq!(sends[0].1, "confirmed");
    }
    let nets: Decimal = ids
        .iter()
        .map(|id| d(&s.worker.transaction(0, *id)["amount"]["net"]))
        .sum();
    assert_eq!(
        Decimal::from(s.anvil.balance_of(&s.usdc, wallet()) - before),
        nets * Decimal::from(1_000_000),
        "paid once"
    );
    s.assert_books();
}

#[test]
fn an_empty_treasury_holds_payments_until_it_is_funded() {
    let s = start(false);
    let id = s.paid(0, "9.00", "USD");
    eventually("the payment to be held", Duration::from_secs(30), || {
        s.worker.cron();
        s.detail(id)["settlement_hold"]["reason"]
            .as_str()
            .map(str::to_owned)
    });
    let reason = s.detail(id)["settlement_hold"]["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(reason.contains("treasury holds no USDC"), "{reason}");
    // Tokens but no gas money: held again, with the new reason.
    s.anvil.mint(&s.usdc, &s.treasury, 1_000_000_000);
    let gas_reason = eventually("the gas reason", Duration::from_secs(30), || {
        s.worker.cron();
        s.detail(id)["settlement_hold"]["reason"]
            .as_str()
            .filter(|r| r.contains("for gas"))
            .map(str::to_owned)
    });
    assert!(
        gas_reason.contains("POL on polygon for gas"),
        "{gas_reason}"
    );
    assert_eq!(s.raw_status(id), "succeeded");
    // The institution's fee schedule is its own: 2.5 % from now on.
    let target = xtask::secrets::Target::Local(s.worker.persist_to().to_owned());
    let institution: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT institution_id FROM transactions WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    xtask::secrets::set_psp_fee(institution, 250, &target).unwrap();
    assert!(xtask::secrets::set_psp_fee(institution, 9000, &target).is_err());
    s.anvil
        .pay_ether(&s.anvil.account(0), &s.treasury, 10u128.pow(19));
    s.settle(&[id]);
    let t = s.worker.transaction(0, id);
    assert_eq!(t["amount"]["psp_fee"], "0.23", "2.5 % of 9.00, to the cent");
    assert!(s.detail(id)["settlement_hold"].is_null());
    let shown = s.worker.portal(
        Method::GET,
        "/portal/api/networks",
        Some(&s.worker.portal_login(0)),
        None,
    );
    let balances = &shown.json()["data"][0]["treasury"]["balances"];
    assert_eq!(balances[0]["asset"], "POL", "{balances}");
    assert_eq!(balances[1]["asset"], "USDC");
    s.assert_books();
}

#[test]
fn a_stuck_settlement_is_replaced_at_a_higher_price_and_only_one_is_mined() {
    let s = start(true);
    let id = s.paid(0, "20.00", "USD");
    // Blocks are mined only when asked from now on, and the worker signs at the newest block's
    // base fee (below 1 gwei by now) plus a quarter, plus the node's 1 gwei tip.
    s.anvil.rpc("evm_setAutomine", json!([false]));
    let first = eventually("a first transaction", Duration::from_secs(30), || {
        s.worker.cron();
        s.sends(id).first().map(|(hash, _)| hash.clone())
    });
    // Then the base fee rises to 5 gwei: blocks go by without it, and the worker replaces it,
    // priced at the new base fee.
    let replaced = eventually("a replacement", Duration::from_secs(60), || {
        s.anvil
            .rpc("anvil_setNextBlockBaseFeePerGas", json!(["0x12a05f200"]));
        s.anvil.mine(2);
        s.worker.cron();
        let sends = s.sends(id);
        (sends.len() >= 2).then_some(sends)
    });
    assert_eq!(replaced[0], (first.clone(), "replaced".to_owned()));
    s.settle(&[id]);
    let t = s.worker.transaction(0, id);
    let hash = t["tx_hashes"]["settlement"].as_str().unwrap();
    assert_ne!(hash, first, "the replacement was mined");
    assert!(s
        .anvil
        .try_rpc("eth_getTransactionReceipt", json!([first]))
        .is_none_or(|r| r.is_null()));
    let receipt = s.anvil.receipt(hash);
    let cost = quantity(&receipt["gasUsed"]) * quantity(&receipt["effectiveGasPrice"]);
    assert_eq!(
        d(&t["amount"]["gas_fee"]),
        pol_in_usd(cost),
        "charged what it cost"
    );
    assert_eq!(
        d(&t["amount"]["net"]) + d(&t["amount"]["psp_fee"]) + d(&t["amount"]["gas_fee"]),
        d(&t["amount"]["gross"])
    );
    let states: Vec<String> = s.sends(id).into_iter().map(|(_, state)| state).collect();
    assert_eq!(
        states.iter().filter(|st| *st == "confirmed").count(),
        1,
        "{states:?}"
    );
    s.assert_books();
}

impl Setup {
    /// Asks for a refund through the portal's JSON API (`preview`, or made under `key`).
    pub(super) fn refund(
        &self,
        id: i64,
        amount: &str,
        address: &str,
        key: Option<&str>,
    ) -> payrail_tests::Reply {
        self.refund_as(&self.worker.portal_login(0), id, amount, address, key)
    }

    /// The same in the session `portal` (parallel requests share one login: every login attempt
    /// counts against the throttle until it succeeds).
    pub(super) fn refund_as(
        &self,
        portal: &PortalSession,
        id: i64,
        amount: &str,
        address: &str,
        key: Option<&str>,
    ) -> payrail_tests::Reply {
        self.refund_body(
            portal,
            id,
            &json!({"amount": amount, "address": address}),
            key,
        )
    }

    /// A refund preview (no `key`) or request with `body` as sent.
    fn refund_body(
        &self,
        portal: &PortalSession,
        id: i64,
        body: &Value,
        key: Option<&str>,
    ) -> payrail_tests::Reply {
        let path = match key {
            Some(_) => format!("/portal/api/payments/{id}/refunds"),
            None => format!("/portal/api/payments/{id}/refunds/preview"),
        };
        let mut request = self
            .worker
            .request(Method::POST, &path)
            .header("Cookie", format!("payrail_portal={}", portal.cookie))
            .header("X-CSRF-Token", &portal.csrf)
            .json(body);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        self.worker.send(request, None)
    }

    /// The books balance and match the chain once nothing is in flight.
    pub(super) fn assert_books(&self) {
        payrail_tests::books::settle_and_assert_balanced(&self.worker, &self.anvil);
    }

    /// The books' account of merchant `merchant`'s USDC on polygon.
    pub(super) fn merchant_account(&self, merchant: usize) -> String {
        let id: i64 = self
            .worker
            .database()
            .query_row(
                "SELECT id FROM merchants WHERE public_key = ?1",
                [&self.worker.credentials.institutions[0].merchants[merchant].public_key],
                |r| r.get(0),
            )
            .unwrap();
        format!(
            "{}:{}:merchant:{id}",
            self.network,
            self.usdc.to_ascii_lowercase()
        )
    }

    /// The merchant's balance in the books, in base units: credits less debits posted, and
    /// what pending transfers reserve.
    pub(super) fn owed(&self, merchant: usize) -> (i128, i128) {
        let (dp, cp, dpend): (String, String, String) = self
            .worker
            .database()
            .query_row(
                "SELECT debits_posted, credits_posted, debits_pending FROM ledger_accounts \
                 WHERE id = ?1",
                [self.merchant_account(merchant)],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap_or(("0".into(), "0".into(), "0".into()));
        let n = |t: &str| t.parse::<i128>().unwrap();
        (n(&cp) - n(&dp), n(&dpend))
    }

    /// Lets merchant `merchant` owe up to `units` of USDC (what the portal's form sets).
    pub(super) fn allow_debt(&self, merchant: usize, units: u128) {
        self.worker
            .database()
            .execute(
                "UPDATE ledger_accounts SET debt_limit = ?2, version = version + 1 WHERE id = ?1",
                rusqlite::params![self.merchant_account(merchant), units.to_string()],
            )
            .unwrap();
    }

    /// Runs the cron and mines until every refund of `id` is recorded on it.
    pub(super) fn refunds_done(&self, id: i64) -> Value {
        eventually("the refunds to be done", Duration::from_secs(60), || {
            self.worker.cron();
            self.anvil.mine(1);
            let detail = self.detail(id);
            let refunds = detail["refunds"].as_array().unwrap().clone();
            refunds
                .iter()
                .all(|r| r["state"] == "done")
                .then_some(detail)
        })
    }
}

#[test]
fn refunds_go_out_on_chain_once_and_never_beyond_the_payment() {
    let (_one, s) = shared();
    let customer = s.anvil.account(5);
    let id = s.paid(0, "20.00", "USD");
    s.settle(&[id]);
    // Refunds of a settled payment are the merchant's debt: this one may owe the whole gross.
    s.allow_debt(0, 20_000_000);
    // What a refund sends is shown first, at the payment's own quote.
    let preview = s.refund(id, "5.00", &customer, None);
    assert_eq!(preview.status, 200, "{}", preview.text);
    let preview = preview.json();
    assert_eq!(preview["crypto_amount"], "5");
    assert_eq!(preview["base_units"], "5000000");
    assert_eq!(preview["rate"], "1");
    assert_eq!(preview["refundable"], "20.00");
    let bad = s.refund(id, "5.00", "0x1234", None);
    assert_eq!(bad.status, 400);
    assert!(bad.text.contains("address"), "{}", bad.text);
    // An amount follows checkout's rule: no spaces, sign or exponent (the outside probe's " 1",
    // "+1" and "1e0" were taken as 1), the currency's places, within the largest order.
    for (amount, says) in [
        (
            " 1",
            "amount must be a positive number with at most 2 decimal places",
        ),
        (
            "+1",
            "amount must be a positive number with at most 2 decimal places",
        ),
        (
            "1e0",
            "amount must be a positive number with at most 2 decimal places",
        ),
        ("1.001", "amount must have at most 2 decimal places"),
        ("0.00", "amount must be greater than zero"),
        ("1000000000.01", "amount must be at most 1000000000"),
    ] {
        let refused = s.refund(id, amount, &customer, None);
        assert_eq!(refused.status, 400, "{amount:?}: {}", refused.text);
        assert!(refused.text.contains(says), "{amount:?}: {}", refused.text);
    }

    let first = s.refund(id, "5.00", &customer, Some("refund-1"));
    assert_eq!(first.status, 201, "{}", first.text);
    let again = s.refund(id, "5.00", &customer, Some("refund-1"));
    assert_eq!(again.status, 200, "the same key is the same refund");
    assert_eq!(again.json()["id"], first.json()["id"]);
    let reused = s.refund(id, "6.00", &customer, Some("refund-1"));
    assert_eq!(reused.status, 409, "{}", reused.text);
    let detail = s.refunds_done(id);
    assert_eq!(detail["transaction"]["raw_status"], "partially_refunded");
    assert_eq!(s.anvil.balance_of(&s.usdc, &customer), 5_000_000);
    let hash = detail["refunds"][0]["tx_hash"].as_str().unwrap().to_owned();
    assert_eq!(s.anvil.receipt(&hash)["status"], "0x1");

    // More than is left: refused, naming what is left.
    let beyond = s.refund(id, "15.01", &customer, Some("refund-beyond"));
    assert_eq!(beyond.status, 409);
    assert!(beyond.text.contains("15.00"), "{}", beyond.text);
    // Six refunds of 6.00 at once: only two fit in the 15.00 left.
    let portal = s.worker.portal_login(0);
    let made: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|i| {
                let (customer, portal) = (&customer, &portal);
                scope.spawn(move || {
                    s.refund_as(portal, id, "6.00", customer, Some(&format!("race-{i}")))
                        .status
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // At most two fit. A request that loses every race to the others (each retried on what
    // is then true) is refused with 409 and can be made again: it never pays beyond the rest.
    let won = made.iter().filter(|st| **st == 201).count();
    assert!((1..=2).contains(&won), "{made:?}");
    assert!(made.iter().all(|st| *st == 201 || *st == 409), "{made:?}");
    if won == 1 {
        let again = s.refund_as(&portal, id, "6.00", &customer, Some("race-again"));
        assert_eq!(again.status, 201, "{}", again.text);
    }
    let rest = s.refund(id, "3.00", &customer, Some("refund-rest"));
    assert_eq!(rest.status, 201, "{}", rest.text);
    let detail = s.refunds_done(id);
    assert_eq!(detail["transaction"]["raw_status"], "refunded");
    assert_eq!(detail["refunds"].as_array().unwrap().len(), 4);
    assert_eq!(
        s.anvil.balance_of(&s.usdc, &customer),
        20_000_000,
        "exactly the gross, once"
    );
    let events: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT count(*) FROM events WHERE transaction_id = ?1 AND type = 'payment.refunded'",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(events, 4, "one payment.refunded per refund");
    let nothing = s.refund(id, "0.01", &customer, Some("refund-more"));
    assert_eq!(nothing.status, 409);
    s.assert_books();
}

#[test]
fn a_payment_not_yet_settled_is_refunded_in_full_and_then_never_settled() {
    let (_one, s) = shared();
    let customer = s.anvil.account(6);
    let id = s.paid(1, "8.00", "USD");
    let part = s.refund(id, "3.00", &customer, None);
    assert_eq!(part.status, 409, "{}", part.text);
    assert!(part.text.contains("in full"), "{}", part.text);
    let full = s.refund(id, "8.00", &customer, Some("refund-unsettled"));
    assert_eq!(full.status, 201, "{}", full.text);
    let detail = s.refunds_done(id);
    assert_eq!(detail["transaction"]["raw_status"], "refunded");
    assert_eq!(s.anvil.balance_of(&s.usdc, &customer), 8_000_000);
    s.worker.cron();
    assert!(s.sends(id).is_empty(), "a refunded payment is not settled");
    s.assert_books();
}

/// Sandbox mode only because production refuses loopback webhook receivers; the chain side is
/// the same in both.
#[test]
fn payment_paid_and_payment_refunded_arrive_signed_with_the_real_figures() {
    let s = start_in("sandbox", true);
    let receiver = Receiver::start();
    let portal = s.worker.portal_login(0);
    let types = ["payment.paid", "payment.refunded"];
    let (_, secret) = endpoint(&s.worker, &portal, &receiver.url("/hooks"), Some(&types));
    let id = s.paid(0, "11.00", "USD");
    s.settle(&[id]);
    let t = s.worker.transaction(0, id);
    let paid = of_transaction(&wait_for(&receiver, "payment.paid", 1), id);
    assert_eq!(paid.len(), 1);
    let event = paid[0].json();
    assert_eq!(event["type"], "payment.paid");
    assert_eq!(event["data"]["status"], "paid");
    assert_eq!(
        event["data"]["tx_hashes"]["settlement"],
        t["tx_hashes"]["settlement"]
    );
    assert_eq!(event["data"]["amount"], t["amount"]);
    assert_signed(&paid[0], &secret);
    // The simulated controls are refused for a payment made on chain.
    let simulated = s.worker.post_json(
        &format!("/sandbox/transactions/{id}/refund"),
        &json!({"amount": "1.00"}),
        Some(&s.worker.sandbox_token(0)),
        "/sandbox/transactions/{id}/{action}",
    );
    assert_eq!(simulated.status, 409, "{}", simulated.text);
    assert!(simulated.text.contains("on chain"), "{}", simulated.text);
    let customer = s.anvil.account(7);
    s.allow_debt(0, 11_000_000);
    let refund = s.refund(id, "11.00", &customer, Some("signed-refund"));
    assert_eq!(refund.status, 201, "{}", refund.text);
    s.refunds_done(id);
    let refunded: Vec<_> = of_transaction(&wait_for(&receiver, "payment.refunded", 2), id)
        .into_iter()
        .filter(|r| r.json()["type"] == "payment.refunded")
        .collect();
    assert_eq!(refunded.len(), 1);
    assert_eq!(refunded[0].json()["data"]["status"], "refunded");
    assert_signed(&refunded[0], &secret);
    s.assert_books();
}

#[test]
fn a_settlement_the_node_dropped_is_sent_again_and_mined_once() {
    let s = start(true);
    let id = s.paid(0, "15.00", "USD");
    s.anvil.rpc("evm_setAutomine", json!([false]));
    let hash = eventually("a transaction", Duration::from_secs(30), || {
        s.worker.cron();
        s.sends(id).first().map(|(hash, _)| hash.clone())
    });
    // The node forgets it (a restart, an eviction): nothing is mined, nothing is known.
    s.anvil.rpc("anvil_dropTransaction", json!([hash]));
    let known = |hash: &str| {
        s.anvil
            .try_rpc("eth_getTransactionByHash", json!([hash]))
            .is_some_and(|t| !t.is_null())
    };
    assert!(!known(&hash));
    // The next run sends the same bytes again.
    s.worker.cron();
    assert!(known(&hash), "broadcast again");
    s.anvil.rpc("evm_setAutomine", json!([true]));
    s.settle(&[id]);
    let t = s.worker.transaction(0, id);
    assert_eq!(t["tx_hashes"]["settlement"], json!(hash));
    assert_eq!(s.sends(id), vec![(hash, "confirmed".to_owned())]);
    s.assert_books();
}

/// A sandbox with a watched chain (as `scripts/dev` runs): a payment the sandbox API simulates
/// on a watched checkout brought no money on chain, so the treasury must never settle or refund
/// it; the simulated controls handle it end to end instead.
#[test]
fn a_simulated_payment_on_a_watched_checkout_never_moves_treasury_money() {
    let s = start_in("sandbox", true);
    let key = &s.worker.credentials.institutions[0].merchants[0].public_key;
    let session = s.worker.checkout_session(&json!({
        "publicKey": key, "amount": "20.00", "currency": "EUR", "title": "Simulated",
        "externalReference": "SIMULATED-1", "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    }));
    let id = session["transaction_id"].as_i64().unwrap();
    let watched: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT count(*) FROM deposit_watches WHERE transaction_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        watched > 0,
        "the checkout's address is watched on the chain"
    );
    let treasury_usdc = s.anvil.balance_of(&s.usdc, &s.treasury);
    let sandbox = |action: &str, body: Value| {
        s.worker.post_json(
            &format!("/sandbox/transactions/{id}/{action}"),
            &body,
            Some(&s.worker.sandbox_token(0)),
            "/sandbox/transactions/{id}/{action}",
        )
    };
    let paid = sandbox("pay", json!({"amount": "20.00"}));
    assert_eq!(paid.status, 200, "{}", paid.text);
    s.worker.cron();
    s.worker.cron();
    assert!(s.sends(id).is_empty(), "no settlement was signed");
    let refund = s.refund(id, "20.00", &s.anvil.account(7), None);
    assert_eq!(refund.status, 409, "{}", refund.text);
    assert!(
        refund.text.contains("not made on a watched chain"),
        "{}",
        refund.text
    );
    // The simulated settlement and refund are the ones that apply.
    let settled = sandbox("settle", json!({}));
    assert_eq!(settled.status, 200, "{}", settled.text);
    assert_eq!(settled.json()["raw_status"], "paid");
    let refunded = sandbox("refund", json!({"amount": "20.00"}));
    assert_eq!(refunded.status, 200, "{}", refunded.text);
    s.worker.cron();
    assert!(s.sends(id).is_empty());
    assert_eq!(s.anvil.balance_of(&s.usdc, &s.treasury), treasury_usdc);
    s.assert_books();
}

#[test]
fn a_changed_wallet_is_used_only_after_its_cool_off_and_the_admins_are_told_at_once() {
    let s = start_with(
        "production",
        true,
        None,
        &[("PAYRAIL_WALLET_COOLOFF_SECONDS", "20")],
    );
    let merchant = &s.worker.credentials.institutions[0].merchants[0];
    let portal = s.worker.portal_login(0);
    // Someone with an admin's password points the merchant's payouts at another wallet.
    let other = s.anvil.account(5);
    let path = format!("/portal/api/merchants/{}/wallets/polygon", merchant.id);
    let put = s.worker.portal(
        Method::PUT,
        &path,
        Some(&portal),
        Some(&json!({"address": other})),
    );
    assert_eq!(put.status, 200, "{}", put.text);
    let wallet = put.json()["wallets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["network"] == "polygon")
        .cloned()
        .unwrap();
    assert!(wallet["usable_from"].as_str().is_some(), "{wallet}");
    // The merchant's page says when settlements start using it.
    let page = s.worker.send(
        s.worker
            .request(Method::GET, &format!("/portal/merchants/{}", merchant.id))
            .header("Cookie", format!("payrail_portal={}", portal.cookie)),
        None,
    );
    assert_eq!(page.status, 200);
    assert!(
        page.text.contains("Used for settlements from"),
        "{}",
        page.text
    );
    let (subject, body): (String, String) = s
        .worker
        .database()
        .query_row(
            "SELECT subject, body FROM notifications WHERE kind = 'wallet_changed'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(subject.contains("settlement wallet"), "{subject}");
    assert!(
        body.to_ascii_lowercase()
            .contains(&other.to_ascii_lowercase()),
        "{body}"
    );
    // A payment that arrives meanwhile waits, with why; nothing is sent anywhere.
    let id = s.paid(0, "9.00", "USD");
    let reason = eventually("the payment to wait", Duration::from_secs(30), || {
        s.worker.cron();
        s.detail(id)["settlement_hold"]["reason"]
            .as_str()
            .map(str::to_owned)
    });
    assert!(reason.contains("cool-off"), "{reason}");
    assert!(s.sends(id).is_empty());
    // Once the cool-off is over, it settles to the new wallet.
    let before = s.anvil.balance_of(&s.usdc, &other);
    s.settle(&[id]);
    assert!(s.anvil.balance_of(&s.usdc, &other) > before);
    s.assert_books();
}

#[test]
fn racing_cron_runs_replace_a_stuck_transaction_once_and_confirm_it_once() {
    let s = start(true);
    let id = s.paid(0, "8.00", "USD");
    s.anvil.rpc("evm_setAutomine", json!([false]));
    eventually("a first transaction", Duration::from_secs(30), || {
        s.worker.cron();
        s.sends(id).first().cloned()
    });
    // Stuck behind a 5 gwei base fee for more than ten blocks: six runs at once find it so.
    s.anvil
        .rpc("anvil_setNextBlockBaseFeePerGas", json!(["0x12a05f200"]));
    s.anvil.mine(12);
    std::thread::scope(|scope| {
        for _ in 0..6 {
            scope.spawn(|| s.worker.cron());
        }
    });
    let sends = s.sends(id);
    assert_eq!(
        sends.len(),
        2,
        "one replacement, whatever ran at once: {sends:?}"
    );
    // Mined and deep: six runs at once confirm it, and the payment is paid, once.
    s.anvil.rpc("evm_setAutomine", json!([true]));
    s.anvil.mine(1 + DEPTH);
    std::thread::scope(|scope| {
        for _ in 0..6 {
            scope.spawn(|| s.worker.cron());
        }
    });
    s.settle(&[id]);
    let states: Vec<String> = s.sends(id).into_iter().map(|(_, state)| state).collect();
    assert_eq!(
        states.iter().filter(|st| *st == "confirmed").count(),
        1,
        "{states:?}"
    );
    let paid: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT count(*) FROM events WHERE transaction_id = ?1 AND type = 'payment.paid'",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(paid, 1, "one payment.paid");
    s.assert_books();
}

#[test]
fn a_refund_after_settlement_is_the_merchants_debt_and_is_netted_from_its_next_settlement() {
    let s = start(true);
    let customer = s.anvil.account(7);
    let first = s.paid(0, "10.00", "USD");
    s.settle(&[first]);
    let (left, _) = s.owed(0);
    assert!(
        (0..10).contains(&left),
        "the merchant is owed at most rounding dust: {left}"
    );
    let treasury_before = s.anvil.balance_of(&s.usdc, &s.treasury);

    // Its balance does not cover a refund and it may not owe: refused, naming the balance,
    // and nothing leaves the treasury.
    let refused = s.refund(first, "10.00", &customer, Some("after-settlement"));
    assert_eq!(refused.status, 409, "{}", refused.text);
    assert!(refused.text.contains("balance"), "{}", refused.text);
    assert!(refused.text.contains("debt limit"), "{}", refused.text);
    let preview = s.refund(first, "10.00", &customer, None);
    assert_eq!(preview.status, 200, "{}", preview.text);
    let effect = &preview.json()["balance"];
    assert_eq!(
        effect["within_limit"], false,
        "the review step says so first: {effect}"
    );
    assert_eq!(effect["into_debt"], true, "{effect}");
    s.worker.cron();
    assert_eq!(s.anvil.balance_of(&s.usdc, &s.treasury), treasury_before);

    // Allowed to owe it: refunded, and the merchant owes the refund.
    s.allow_debt(0, 10_000_000);
    let made = s.refund(first, "10.00", &customer, Some("after-settlement-2"));
    assert_eq!(made.status, 201, "{}", made.text);
    s.refunds_done(first);
    assert_eq!(s.anvil.balance_of(&s.usdc, &customer), 10_000_000);
    let (owed, reserved) = s.owed(0);
    assert_eq!(reserved, 0);
    assert_eq!(owed, left - 10_000_000, "the merchant owes the refund");

    // Its next payment settles less by the debt: the merchant's wallet gets the rest.
    let wallet_before = s.anvil.balance_of(&s.usdc, wallet());
    let second = s.paid(0, "25.00", "USD");
    s.settle(&[second]);
    let t = s.worker.transaction(0, second);
    let net_units = (d(&t["amount"]["net"]) * Decimal::from(1_000_000))
        .trunc()
        .to_string()
        .parse::<i128>()
        .unwrap();
    let paid = i128::try_from(s.anvil.balance_of(&s.usdc, wallet()) - wallet_before).unwrap();
    assert!(
        paid <= net_units - 10_000_000 + left && paid >= net_units - 10_000_000,
        "netted: paid {paid}, net {net_units}"
    );
    assert_eq!(
        t["amount"]["gross"], "25.00",
        "the payment's own figures are unchanged"
    );
    let (after, _) = s.owed(0);
    assert!((0..10).contains(&after), "the debt is paid: {after}");
    // Over the merchant's whole life the treasury paid out what its payments brought, less
    // fees: the refund came out of the merchant, not out of everyone's float.
    let netted: String = s
        .worker
        .database()
        .query_row(
            "SELECT c.netted FROM chain_sends c JOIN settlement_items i ON i.send_id = c.id \
             WHERE i.transaction_id = ?1 AND c.state = 'confirmed'",
            [second],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(netted.parse::<i128>().unwrap(), net_units - paid);
    s.assert_books();
}

#[test]
fn refunds_of_a_settled_payment_racing_its_merchants_next_settlement_never_overdraw_it() {
    let s = start(true);
    let customer = s.anvil.account(8);
    let settled = s.paid(0, "10.00", "USD");
    s.settle(&[settled]);
    // The next payment is credited, not yet settled: its 20.00 is what the merchant is owed.
    let next = s.paid(0, "20.00", "USD");
    let (owed, _) = s.owed(0);
    assert!(owed >= 20_000_000, "{owed}");
    // Six refunds of 5.00 of the settled payment and six cron runs at once: the refunds come
    // out of the merchant's balance, the settlement pays what is left; never more in all.
    let portal = s.worker.portal_login(0);
    let made: Vec<u16> = std::thread::scope(|scope| {
        let refunds: Vec<_> = (0..6)
            .map(|i| {
                let (customer, portal, s) = (&customer, &portal, &s);
                scope.spawn(move || {
                    s.refund_as(
                        portal,
                        settled,
                        "5.00",
                        customer,
                        Some(&format!("race-{i}")),
                    )
                    .status
                })
            })
            .collect();
        let crons: Vec<_> = (0..6).map(|_| scope.spawn(|| s.worker.cron())).collect();
        crons.into_iter().for_each(|h| drop(h.join()));
        refunds.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(made.iter().all(|st| *st == 201 || *st == 409), "{made:?}");
    let refunded = made.iter().filter(|st| **st == 201).count();
    assert!(refunded <= 2, "at most the 10.00 gross: {made:?}");
    if refunded > 0 {
        s.refunds_done(settled);
    }
    s.settle(&[next]);
    // The books: the merchant never went below zero (no debt was allowed), and what left the
    // treasury for it is what its payments brought less fees.
    let (after, reserved) = s.owed(0);
    assert_eq!(reserved, 0);
    assert!(after >= 0, "never overdrawn: {after}");
    let out: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT COALESCE(sum(CAST(amount AS INTEGER)), 0) FROM ledger_transfers \
             WHERE debit_account = ?1 AND phase IN ('single', 'post') \
             AND code IN ('settlement', 'refund', 'fee', 'network_fee')",
            [s.merchant_account(0)],
            |r| r.get(0),
        )
        .unwrap();
    let credited: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT COALESCE(sum(CAST(amount AS INTEGER)), 0) FROM ledger_transfers \
             WHERE credit_account = ?1 AND code = 'credit'",
            [s.merchant_account(0)],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(credited, 30_000_000);
    assert!(out <= credited, "paid out {out} of {credited}");
    assert_eq!(i128::from(credited - out), after);
    s.assert_books();
}

#[test]
fn late_money_settles_and_refunds_at_the_rate_it_was_valued_at() {
    let s = start(true);
    let key = &s.worker.credentials.institutions[0].merchants[0].public_key;
    let session = s.worker.checkout_session(&json!({
        "publicKey": key, "amount": "10.00", "currency": "EUR", "title": "Late",
        "externalReference": "SETTLE-LATE", "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    }));
    let id = session["transaction_id"].as_i64().unwrap();
    let session = session["id"].as_str().unwrap().to_owned();
    let (address, units) = s.worker.deposit(&session);
    // 10.00 EUR at 1.25 USD each: 12.50 USDC.
    assert_eq!(units, 12_500_000);
    s.worker
        .database()
        .execute(
            "UPDATE checkout_sessions SET expires_at = unixepoch() - 120 WHERE id = ?1",
            [&session],
        )
        .unwrap();
    eventually("the checkout to expire", Duration::from_secs(20), || {
        s.worker.cron();
        (s.raw_status(id) == "expired").then_some(())
    });
    // The euro falls to 1 USD before the money arrives: 12.50 USDC is then worth 12.50 EUR.
    s.anvil.set_feed(&s.eur, 100_000_000, s.anvil.time());
    s.anvil.transfer(&s.usdc, &s.customer, &address, units);
    s.anvil.mine(DEPTH);
    eventually("the late money credited", Duration::from_secs(20), || {
        s.worker.send(
            s.worker
                .request(Method::GET, &format!("/checkout/{session}/status")),
            None,
        );
        (s.raw_status(id) == "succeeded").then_some(())
    });
    let t = s.worker.transaction(0, id);
    assert_eq!(t["amount"]["gross"], "12.50", "{t}");
    assert_eq!(t["amount_status"], "OVERPAID");
    // The merchant is paid its net at that rate, 1 USDC a euro (at the quote's 1.25 it would
    // be sent more USDC than came in).
    s.settle(&[id]);
    let t = s.worker.transaction(0, id);
    let net = t["amount"]["net"].as_str().unwrap();
    let cents: u128 = net.replace('.', "").parse().unwrap();
    let sent: String = s
        .worker
        .database()
        .query_row(
            "SELECT units FROM settlement_items WHERE transaction_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(sent, (cents * 10_000).to_string(), "{net} EUR at 1 USDC");
    // A refund is paid at it too, and says so.
    let preview = s.refund(id, "5.00", &s.anvil.account(5), None);
    assert_eq!(preview.status, 200, "{}", preview.text);
    let preview = preview.json();
    assert_eq!(preview["crypto_amount"], "5");
    assert_eq!(preview["rate"], "1");
    assert!(
        preview["rate_source"]
            .as_str()
            .is_some_and(|r| r.contains("after its checkout ended") && r.contains("EUR/USD")),
        "{preview}"
    );
    s.assert_books();
}

#[test]
fn a_payment_made_in_two_assets_is_settled_and_refunded_per_part_each_in_its_own() {
    let s = start_full("production", true, None, &[], (true, "polygon", false));
    let usdt = s.usdt.clone().unwrap();
    let key = &s.worker.credentials.institutions[0].merchants[0].public_key;
    let session = s.worker.checkout_session(&json!({
        "publicKey": key, "amount": "20.00", "currency": "USD", "title": "Two assets",
        "externalReference": "SETTLE-TWO", "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    }));
    let id = session["transaction_id"].as_i64().unwrap();
    let session = session["id"].as_str().unwrap().to_owned();
    let status = || {
        s.worker.send(
            s.worker
                .request(Method::GET, &format!("/checkout/{session}/status")),
            None,
        )
    };
    // Half in USDC; seen and confirmed, the checkout waits for the rest.
    let (usdc_address, usdc_units) = s.worker.deposit(&session);
    assert_eq!(usdc_units, 20_000_000);
    s.anvil
        .transfer(&s.usdc, &s.customer, &usdc_address, 10_000_000);
    s.anvil.mine(DEPTH);
    eventually("the USDC half confirmed", Duration::from_secs(20), || {
        status();
        let confirmed: i64 = s
            .worker
            .database()
            .query_row(
                "SELECT count(*) FROM chain_transfers WHERE address = lower(?1) AND confirmed = 1",
                [&usdc_address],
                |r| r.get(0),
            )
            .unwrap();
        (confirmed == 1).then_some(())
    });
    assert_eq!(s.raw_status(id), "pending");
    // The customer changes the way to pay and sends the other half in USDT.
    let changed = s.worker.send(
        s.worker
            .request(Method::POST, &format!("/checkout/{session}/method"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body("method=USDT:polygon"),
        None,
    );
    assert_eq!(changed.status, 303, "{}", changed.text);
    let (usdt_address, usdt_units) = s.worker.deposit(&session);
    assert_ne!(usdt_address, usdc_address);
    assert_eq!(usdt_units, 20_000_000);
    s.anvil
        .transfer(&usdt, &s.customer, &usdt_address, 10_000_000);
    s.anvil.mine(DEPTH);
    eventually("the payment credited", Duration::from_secs(20), || {
        status();
        (s.raw_status(id) == "succeeded").then_some(())
    });
    let t = s.worker.transaction(0, id);
    assert_eq!(t["amount"]["gross"], "20.00", "{t}");
    assert_eq!(t["amount_status"], "EXACT");
    // Two parts, each its half, booked to the merchant in its own asset.
    let parts = s.detail(id)["parts"].clone();
    let shares: Vec<(String, String)> = parts
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["asset"].as_str().unwrap().into(),
                p["gross"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        shares,
        [
            ("USDC".into(), "10.00".into()),
            ("USDT".into(), "10.00".into())
        ],
        "{parts}"
    );
    // Not settled yet: a refund must name its part, and waits until every part is settled.
    let portal = s.worker.portal_login(0);
    let customer = s.anvil.account(5);
    let unnamed = s.refund(id, "5.00", &customer, None);
    assert_eq!(unnamed.status, 400, "{}", unnamed.text);
    assert!(unnamed.text.contains("2 parts"), "{}", unnamed.text);
    let early = s.refund_body(
        &portal,
        id,
        &json!({"amount": "10.00", "address": customer, "part": 1}),
        None,
    );
    assert_eq!(early.status, 409, "{}", early.text);
    assert!(
        early.text.contains("once every part is settled"),
        "{}",
        early.text
    );
    // Each part settles in its own asset to the merchant's wallet; then the payment is paid.
    // Four cron runs at once first: each part is claimed by one settlement, sent once.
    let before = (
        s.anvil.balance_of(&s.usdc, wallet()),
        s.anvil.balance_of(&usdt, wallet()),
    );
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| s.worker.cron());
        }
    });
    let sent: Vec<(i64, i64)> = {
        let db = s.worker.database();
        let mut rows = db
            .prepare(
                "SELECT part, count(*) FROM settlement_items WHERE transaction_id = ?1 \
                 GROUP BY part ORDER BY part",
            )
            .unwrap();
        rows.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(sent, [(0, 1), (1, 1)], "one transaction per part");
    s.settle(&[id]);
    let items: Vec<(i64, String)> = {
        let db = s.worker.database();
        let mut rows = db
            .prepare(
                "SELECT i.part, i.units FROM settlement_items i JOIN chain_sends c \
                 ON c.id = i.send_id AND c.state = 'confirmed' WHERE i.transaction_id = ?1 \
                 ORDER BY i.part",
            )
            .unwrap();
        rows.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(items.len(), 2, "{items:?}");
    let paid = |k: usize| items[k].1.parse::<u128>().unwrap();
    assert_eq!(
        s.anvil.balance_of(&s.usdc, wallet()) - before.0,
        paid(0),
        "the USDC part in USDC"
    );
    assert_eq!(
        s.anvil.balance_of(&usdt, wallet()) - before.1,
        paid(1),
        "the USDT part in USDT"
    );
    assert!(paid(0) > 9_000_000 && paid(1) > 9_000_000, "{items:?}");
    let t = s.worker.transaction(0, id);
    let (gross, psp, gas, net) = (
        d(&t["amount"]["gross"]),
        d(&t["amount"]["psp_fee"]),
        d(&t["amount"]["gas_fee"]),
        d(&t["amount"]["net"]),
    );
    assert_eq!(psp + gas + net, gross, "{t}");
    // Refunded per part, in its own asset. Settled, it is the merchant's debt in that asset:
    // refused until the institution allows it (a debt limit on its USDT balance).
    let body = json!({"amount": "4.00", "address": customer, "part": 1});
    let refused = s.refund_body(&portal, id, &body, Some("two-assets-refused"));
    assert_eq!(refused.status, 409, "{}", refused.text);
    assert!(refused.text.contains("0 USDT"), "{}", refused.text);
    let usdt_account = s
        .merchant_account(0)
        .replace(&s.usdc.to_ascii_lowercase(), &usdt.to_ascii_lowercase());
    s.worker
        .database()
        .execute(
            "UPDATE ledger_accounts SET debt_limit = '100000000', version = version + 1 \
             WHERE id = ?1",
            [&usdt_account],
        )
        .unwrap();
    // Three refunds of 4.00 of the USDT part at once: its 10.00 covers two. The debt limit
    // (100 USDT) and what is left of the payment (20.00) would allow all three: the part's own
    // limit is what holds.
    let (answers, made) = at_once(3, |i| {
        s.refund_body(&portal, id, &body, Some(&format!("two-assets-{i}")))
    });
    assert_eq!(made.len(), 2, "{answers:?}");
    assert!(
        made.iter()
            .all(|(_, text)| text.contains("\"asset\":\"USDT\"")),
        "{answers:?}"
    );
    assert!(
        answers.iter().any(|(status, _)| *status == 409),
        "{answers:?}"
    );
    // More than is left of the part is refused, though the payment has more left.
    let too_much = s.refund_body(
        &portal,
        id,
        &json!({"amount": "2.01", "address": customer, "part": 1}),
        None,
    );
    assert_eq!(too_much.status, 409, "{}", too_much.text);
    assert!(too_much.text.contains("part 1"), "{}", too_much.text);
    eventually("the USDT refunds on chain", Duration::from_secs(60), || {
        s.worker.cron();
        s.anvil.mine(1);
        (s.anvil.balance_of(&usdt, &customer) == 8_000_000).then_some(())
    });
    assert_eq!(s.anvil.balance_of(&s.usdc, &customer), 0, "nothing in USDC");
    s.assert_books();
}

#[test]
fn money_sent_after_the_credit_is_shown_and_returned_to_the_customer_once() {
    let (_one, s) = shared();
    let (id, session) = s.checkout(0, "7.00", "USD", "SETTLE-AFTER");
    let (address, units) = s.worker.deposit(&session);
    s.anvil.transfer(&s.usdc, &s.customer, &address, units);
    s.anvil.mine(DEPTH);
    s.until_credited(&session);
    let portal = s.worker.portal_login(0);
    let customer = "0xb7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7";
    // Before anything more arrives there is nothing to return.
    let body = json!({"deposit": address, "address": customer});
    let returns = |key: &str| {
        s.worker.send(
            s.worker
                .request(Method::POST, &format!("/portal/api/payments/{id}/returns"))
                .header("Cookie", format!("payrail_portal={}", portal.cookie))
                .header("X-CSRF-Token", &portal.csrf)
                .header("Idempotency-Key", key)
                .json(&body),
            None,
        )
    };
    let nothing = returns("after-0");
    assert_eq!(nothing.status, 409, "{}", nothing.text);
    assert!(nothing.text.contains("nothing"), "{}", nothing.text);
    // The customer sends 3 USDC more by mistake: recorded, never credited.
    s.anvil.transfer(&s.usdc, &s.customer, &address, 3_000_000);
    s.anvil.mine(DEPTH);
    // A credited payment's addresses are read every 30 minutes: as if that long had passed.
    let due = || {
        s.worker
            .database()
            .execute(
                "UPDATE deposit_watches SET checked_at = 0 WHERE address = lower(?1)",
                [&address],
            )
            .unwrap();
    };
    let shown = eventually(
        "the money after the credit shown",
        Duration::from_secs(30),
        || {
            due();
            s.worker.cron();
            s.anvil.mine(1);
            let detail = s.detail(id);
            let left = detail["uncredited"].as_array().cloned().unwrap_or_default();
            (!left.is_empty()).then_some(detail)
        },
    );
    assert_eq!(shown["uncredited"][0]["base_units"], "3000000", "{shown}");
    assert_eq!(shown["uncredited"][0]["amount"], "3");
    assert_eq!(shown["transaction"]["amount"]["gross"], "7.00");
    // The payment's page shows it with a way to return it, at a desktop's and a phone's width.
    {
        let _browser = exclusive();
        let browser = Browser::start();
        let admin = &s.worker.credentials.institutions[0];
        browser.log_in(
            &s.worker.base_url,
            &admin.admin_email,
            &admin.admin_password,
        );
        for (width, height) in [(1280, 900), (390, 844)] {
            browser.resize(width, height);
            browser.goto(&format!("{}/portal/payments/{id}", s.worker.base_url));
            assert!(browser.wait_text("#uncredited-list").contains("3 USDC"));
            super::balances::photograph(
                &browser,
                (width, height),
                "#uncredited",
                "portal-payment-uncredited",
            );
            let violations = browser.serious_accessibility_violations();
            assert!(violations.is_empty(), "at {width}: {violations:#?}");
            // A mistyped address is refused on a page that names it, and nothing is sent.
            browser.fill("#return-address-0", "0x1234");
            browser.click("form.return button");
            assert!(browser.wait_text("#return-refused").contains("address"));
            super::balances::photograph(
                &browser,
                (width, height),
                "#return-refused",
                "portal-payment-return-refused",
            );
            let violations = browser.serious_accessibility_violations();
            assert!(violations.is_empty(), "refused at {width}: {violations:#?}");
        }
    }
    assert!(s.detail(id)["refunds"].as_array().unwrap().is_empty());
    // Four returns at once: the 3 USDC go back once.
    let (answers, made) = at_once(4, |i| returns(&format!("after-{}", i + 1)));
    assert_eq!(made.len(), 1, "{answers:?}");
    assert!(made[0].1.contains("\"extra\":true"), "{}", made[0].1);
    assert!(
        answers
            .iter()
            .all(|(status, _)| [201, 409].contains(status)),
        "{answers:?}"
    );
    eventually("the return on chain", Duration::from_secs(60), || {
        s.worker.cron();
        s.anvil.mine(1);
        (s.anvil.balance_of(&s.usdc, customer) == 3_000_000).then_some(())
    });
    eventually("the return done", Duration::from_secs(30), || {
        s.worker.cron();
        s.anvil.mine(1);
        let detail = s.detail(id);
        (detail["refunds"][0]["state"] == "done").then_some(detail)
    });
    // The payment is untouched: it still settles its 7.00, and nothing is left to return.
    s.settle(&[id]);
    let t = s.worker.transaction(0, id);
    assert_eq!(t["amount"]["gross"], "7.00");
    assert_eq!(t["raw_status"], "paid");
    assert!(s.detail(id)["uncredited"].as_array().unwrap().is_empty());
    assert_eq!(returns("after-5").status, 409);
    assert_eq!(s.anvil.balance_of(&s.usdc, customer), 3_000_000);
    s.assert_books();
}

#[test]
fn two_ether_settlements_in_one_run_never_overdraw_the_treasury() {
    // Two merchants' ether payments (0.007 and 0.0075 ETH at 2,000 USD) and a treasury that
    // holds 0.01 ETH: enough for one settlement and its gas, not both.
    let s = start_full("production", false, None, &[], (false, "ethereum", false));
    let first = s.paid_in_ether(0, "14.00");
    let second = s.paid_in_ether(1, "15.00");
    s.anvil
        .pay_ether(&s.anvil.account(0), &s.treasury, 10_000_000_000_000_000);
    s.books_funded();
    // Nothing is mined while the run signs: the first transfer is still in flight when the
    // second group is priced, and the node's balance does not show it yet.
    s.anvil.rpc("evm_setAutomine", json!([false]));
    s.worker.cron();
    let sends: i64 = s
        .worker
        .database()
        .query_row("SELECT count(*) FROM chain_sends", [], |r| r.get(0))
        .unwrap();
    assert_eq!(sends, 1, "one settlement signed, the other held");
    let held = [first, second]
        .iter()
        .find_map(|id| {
            s.detail(*id)["settlement_hold"]["reason"]
                .as_str()
                .map(str::to_owned)
        })
        .expect("the other payment is held");
    assert!(
        held.contains("in flight") || held.contains("treasury's books"),
        "{held}"
    );
    s.anvil.rpc("evm_setAutomine", json!([true]));
    s.anvil.mine(1);
    // Funded again, the held one settles; each was sent once and nothing was refused.
    s.anvil
        .pay_ether(&s.anvil.account(0), &s.treasury, 10_000_000_000_000_000);
    s.settle(&[first, second]);
    for id in [first, second] {
        let sends = s.sends(id);
        assert_eq!(sends.len(), 1, "payment {id}: {sends:?}");
        assert_eq!(sends[0].1, "confirmed");
    }
    s.assert_books();
}

/// An outside probe's finding: a settlement wallet could be one of Payrail's own addresses or a
/// contract (the treasury, the USDC contract, a live deposit address, `0x…dEaD` were all taken),
/// where money settled would be lost or land back in custody. Each is refused naming what it
/// is (the network's CCTP contracts too); a contract of any other kind only with the admin's word that it is a contract wallet;
/// an account as ever.
#[test]
fn a_settlement_wallet_is_never_payrails_own_address_nor_an_unconfirmed_contract() {
    let (_one, s) = shared();
    let worker = &s.worker;
    let session = worker.portal_login(0);
    let merchant = worker.credentials.institutions[0].merchant_ids[3];
    let path = format!("/portal/api/merchants/{merchant}/wallets/polygon");
    let set = |address: &str, contract_wallet: Option<bool>| {
        let mut body = json!({"address": address});
        if let Some(confirmed) = contract_wallet {
            body["contract_wallet"] = json!(confirmed);
        }
        worker.portal(Method::PUT, &path, Some(&session), Some(&body))
    };
    let (_, checkout) = s.checkout(0, "3.00", "USD", "WALLET-DEPOSIT");
    let (deposit, _) = worker.deposit(&checkout);
    let contract = "0x00000000000000000000000000000000c0ffee00";
    s.anvil
        .rpc("anvil_setCode", json!([contract, "0x6080604052"]));
    for (address, says) in [
        (s.treasury.as_str(), "Payrail's treasury"),
        (s.usdc.as_str(), "the USDC token contract on polygon"),
        (s.eur.as_str(), "the EUR/USD price feed on polygon"),
        (deposit.as_str(), "one of Payrail's deposit addresses"),
        (
            s.cctp.messenger.as_str(),
            "the CCTP token messenger on polygon",
        ),
        (
            s.cctp.transmitter.as_str(),
            "the CCTP message transmitter on polygon",
        ),
        ("0x000000000000000000000000000000000000dEaD", "burn address"),
        ("0x0000000000000000000000000000000000000004", "precompile"),
        (contract, "is a contract on polygon"),
    ] {
        let refused = set(address, None).assert_error(400, "invalid_request");
        assert!(refused.contains(says), "{address}: {refused}");
    }
    // Payrail's own addresses stay refused whatever the admin says.
    let refused = set(&s.usdc, Some(true)).assert_error(400, "invalid_request");
    assert!(refused.contains("token contract"), "{refused}");
    // A contract wallet the admin vouches for is taken; so is an account, as ever.
    let taken = set(contract, Some(true));
    assert_eq!(taken.status, 200, "{}", taken.text);
    let taken = set(&s.anvil.account(7), None);
    assert_eq!(taken.status, 200, "{}", taken.text);
    // The page's form: the box ticked is the same word.
    let page = worker.portal_form(
        &session,
        &format!("/portal/merchants/{merchant}/wallets"),
        &[
            ("csrf_token", &session.csrf),
            ("network", "polygon"),
            ("address", contract),
        ],
    );
    assert_eq!(page.status, 400, "{}", page.text);
    assert!(
        page.text.contains("is a contract on polygon"),
        "{}",
        page.text
    );
    let page = worker.portal_form(
        &session,
        &format!("/portal/merchants/{merchant}/wallets"),
        &[
            ("csrf_token", &session.csrf),
            ("network", "polygon"),
            ("address", contract),
            ("contract_wallet", "yes"),
        ],
    );
    assert_eq!(page.status, 303, "{}", page.text);
    assert_eq!(set(wallet(), None).status, 200, "the demo wallet again");
}
