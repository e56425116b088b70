//! The custody sweep on a real local chain, in production mode: `xtask sweep --local`, run as an
//! operator runs it (the custody mnemonic piped on stdin), moves the deposits whose watch has
//! ended to the treasury (a token deposit's gas funded from the custody gas address first, a
//! coin deposit paying its own), leaves a watched deposit alone, sends nothing when run again,
//! and two sweeps at once send each deposit once; the worker's cron makes every sweep final (a
//! sweep the node lost broadcast again as signed) and posts it to the books: custody at zero, the
//! treasury credited, the gas posted at what the receipts say, every ledger balanced and the
//! books matching the chain at every address. A merchant's top-up addresses, which stay watched,
//! are swept as far as the books hold them: what arrives later (even in the sweep's own block)
//! is credited once, and custody's own movements (the gas funding, the sweeps) never are.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use payrail_tests::chain::{Anvil, OPERATOR_TOKEN, TEST_MNEMONIC, TEST_XPUB};
use payrail_tests::{eventually, root, Worker};
use reqwest::Method;
use serde_json::{json, Value};
use xtask::reconcile;

/// Confirmations on the tests' networks.
const DEPTH: u64 = 2;

/// Two chains, USDC on `polygon` and ether on `base` (each network a node of its own, as in
/// production: one address's coin on one chain is never two networks' money), a production worker
/// watching both, a treasury, and a custody gas address funded on `polygon`.
struct Setup {
    /// `polygon`'s node.
    anvil: Anvil,
    /// `base`'s node.
    base: Anvil,
    usdc: String,
    customer: String,
    treasury: String,
    gas: String,
    chains: String,
    worker: Worker,
    /// Polygon's sanctions oracle.
    oracle: String,
}

fn start() -> Setup {
    let anvil = Anvil::start();
    let usdc = anvil.token("USD Coin", "USDC");
    let customer = anvil.account(1);
    anvil.mint(&usdc, &customer, 1_000_000_000_000);
    let base = Anvil::start();
    let eth = base.feed("ETH / USD", 300_000_000_000, base.time());
    // Polygon has a sanctions oracle (the sweep screens the treasury against it); base has none
    // (the operator's list alone).
    let oracle = anvil.sanctions_oracle();
    let chains = json!({
        "polygon": {"rpc_url": anvil.url, "chain_id": 31337, "confirmations": DEPTH,
            "tokens": {"USDC": {"address": usdc}}, "sanctions_oracle": oracle},
        "base": {"rpc_url": base.url, "chain_id": 31337, "confirmations": DEPTH,
            "native": "ETH", "feeds": {"ETH/USD": {"address": eth}}}
    })
    .to_string();
    let worker = Worker::start_with_vars(
        "production",
        3600,
        &[
            ("PAYRAIL_EVM_XPUB", TEST_XPUB),
            ("PAYRAIL_CHAINS", &chains),
            ("PAYRAIL_OPERATOR_TOKEN", OPERATOR_TOKEN),
        ],
    );
    // The treasury: an account nobody else here pays from.
    let treasury = anvil.account(4).to_ascii_lowercase();
    let gas = xtask::sweep::keys::gas_address(TEST_MNEMONIC).unwrap();
    anvil.pay_ether(&anvil.account(0), &gas, 10u128.pow(18));
    Setup {
        anvil,
        base,
        usdc,
        customer,
        treasury,
        gas,
        chains,
        worker,
        oracle,
    }
}

/// This module's chain and worker, one test at a time: each runs the cron and the sweep, which
/// sweeps every ended deposit, and counts what they did.
fn shared() -> (MutexGuard<'static, ()>, &'static Setup) {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    (guard, SETUP.get_or_init(start))
}

/// A paid deposit: its address, and what it received (base units or wei).
struct Paid {
    address: String,
    units: u128,
}

impl Setup {
    fn status(&self, session: &str) -> Value {
        let reply = self.worker.send(
            self.worker
                .request(Method::GET, &format!("/checkout/{session}/status")),
            Some("/checkout/{id}/status"),
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()
    }

    /// A checkout of `amount` USD for the first merchant of the demo's `institution`-th
    /// institution: its session id.
    fn checkout_of(&self, institution: usize, amount: &str, reference: &str) -> String {
        let key = &self.worker.credentials.institutions[institution].merchants[0].public_key;
        let session = self.worker.checkout_session(&json!({
            "publicKey": key, "amount": amount, "currency": "USD", "title": "Swept",
            "externalReference": reference, "redirectUrl": "https://shop.example/done",
            "allowCrypto": true
        }));
        session["id"].as_str().unwrap().to_owned()
    }

    /// The session's deposit address (lower case) and the units it asks for: from D1, or from
    /// the object of an institution held in it.
    fn deposit(&self, session: &str) -> (String, u128) {
        let held = |file: PathBuf| -> Option<(String, u128)> {
            let object = rusqlite::Connection::open_with_flags(
                file,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .ok()?;
            object
                .query_row(
                    "SELECT address, base_units FROM deposit_watches WHERE session_id = ?1",
                    [session],
                    |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
                )
                .ok()
                .map(|(address, units)| (address, units.parse().unwrap()))
        };
        let in_d1: Option<String> = self
            .worker
            .database()
            .query_row(
                "SELECT address FROM deposit_watches WHERE session_id = ?1",
                [session],
                |r| r.get(0),
            )
            .ok();
        match in_d1 {
            Some(_) => self.worker.deposit(session),
            None => xtask::localdb::object_files(self.worker.persist_to())
                .unwrap()
                .into_iter()
                .find_map(held)
                .expect("the session's deposit, in D1 or an object"),
        }
    }

    /// Waits until the session's payment, on `chain`, is credited.
    fn credited(&self, session: &str, chain: &Anvil) {
        chain.mine(DEPTH);
        eventually(
            "the payment to be credited",
            Duration::from_secs(30),
            || (self.status(session)["status"] == "succeeded").then_some(()),
        );
    }

    /// A checkout paid exactly in USDC on polygon and credited.
    fn paid_in_usdc(&self, amount: &str, reference: &str) -> Paid {
        self.paid_in_usdc_of(0, amount, reference)
    }

    /// The same, of the demo's `institution`-th institution.
    fn paid_in_usdc_of(&self, institution: usize, amount: &str, reference: &str) -> Paid {
        let session = self.checkout_of(institution, amount, reference);
        let (address, units) = self.deposit(&session);
        self.anvil
            .transfer(&self.usdc, &self.customer, &address, units);
        self.credited(&session, &self.anvil);
        Paid { address, units }
    }

    /// A checkout paid exactly in ether on base and credited.
    fn paid_in_ether(&self, amount: &str, reference: &str) -> Paid {
        self.paid_in_ether_of(0, amount, reference)
    }

    /// The same, of the demo's `institution`-th institution.
    fn paid_in_ether_of(&self, institution: usize, amount: &str, reference: &str) -> Paid {
        let session = self.checkout_of(institution, amount, reference);
        let reply = self.worker.send(
            self.worker
                .request(Method::POST, &format!("/checkout/{session}/method"))
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body("method=ETH:base"),
            None,
        );
        assert_eq!(reply.status, 303, "{}", reply.text);
        let (address, wei) = self.deposit(&session);
        self.base.pay_ether(&self.customer, &address, wei);
        self.credited(&session, &self.base);
        Paid {
            address,
            units: wei,
        }
    }

    /// Ends the watch of `deposit` (as seven days after its checkout would).
    fn end_watch(&self, deposit: &Paid) {
        self.worker
            .database()
            .execute(
                "UPDATE deposit_watches SET watch_until = unixepoch() - 1 WHERE address = ?1",
                [&deposit.address],
            )
            .unwrap();
    }

    /// Starts `xtask sweep --local` on this worker's database, the mnemonic piped on stdin.
    fn spawn_sweep(&self) -> std::process::Child {
        self.spawn_sweep_waiting(60)
    }

    /// The same, waiting at most `seconds` for each transaction to be mined.
    fn spawn_sweep_waiting(&self, seconds: u32) -> std::process::Child {
        let mut child = Command::new(xtask_binary())
            .args(["sweep", "--local", "--persist-to"])
            .arg(self.worker.persist_to())
            .args(["--treasury", &self.treasury, "--wait", &seconds.to_string()])
            .env("PAYRAIL_CHAINS", &self.chains)
            .env("PAYRAIL_EVM_XPUB", TEST_XPUB)
            .current_dir(root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start xtask sweep");
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{TEST_MNEMONIC}").unwrap();
        drop(stdin);
        child
    }

    /// Runs one sweep to its end; its output.
    fn sweep(&self) -> String {
        succeeded(self.spawn_sweep().wait_with_output().unwrap())
    }

    /// The custody sweeps stored: (kind, from, to, state, hash), oldest first.
    fn sweeps(&self) -> Vec<(String, String, String, String, String)> {
        let db = self.worker.database();
        let mut statement = db
            .prepare(
                "SELECT kind, from_address, to_address, state, tx_hash FROM custody_sweeps \
                 ORDER BY created_at, kind, nonce",
            )
            .unwrap();
        statement
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// The state of sweep `hash` (`sent`, `confirmed` or `failed`).
    fn state_of(&self, hash: &str) -> String {
        self.sweeps()
            .into_iter()
            .find(|r| r.4 == hash)
            .map(|r| r.3)
            .expect("a stored sweep")
    }

    /// The institution sweep `hash` names as keeping its deposit's books (`None`: D1).
    fn held_by(&self, hash: &str) -> Option<i64> {
        self.worker
            .database()
            .query_row(
                "SELECT held_by FROM custody_sweeps WHERE tx_hash = ?1",
                [hash],
                |r| r.get(0),
            )
            .unwrap()
    }

    /// Runs the cron, mining a block each time, until no sweep is `sent`.
    fn confirm_sweeps(&self) {
        eventually(
            "the worker to make every sweep final",
            Duration::from_secs(60),
            || {
                self.anvil.mine(1);
                self.base.mine(1);
                self.worker.cron();
                self.sweeps().iter().all(|s| s.3 != "sent").then_some(())
            },
        );
    }

    /// An account's balance on its normal side, from the books.
    fn book_balance(&self, network: &str, token: &str, kind: &str, owner: &str) -> i128 {
        balance_in(&self.worker.database(), (network, token), kind, owner)
    }

    /// [`Setup::book_balance`] in institution `institution`'s object.
    fn object_balance(
        &self,
        institution: i64,
        (network, token): (&str, &str),
        kind: &str,
        owner: &str,
    ) -> i128 {
        let object = self
            .worker
            .object_database(institution)
            .expect("the institution's object");
        balance_in(&object, (network, token), kind, owner)
    }

    /// The transfer with `id`: (debit, credit, amount).
    fn transfer(&self, id: &str) -> (String, String, u128) {
        self.worker
            .database()
            .query_row(
                "SELECT debit_account, credit_account, amount FROM ledger_transfers WHERE id = ?1",
                [id],
                |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get::<_, String>(2)?.parse().unwrap(),
                    ))
                },
            )
            .unwrap_or_else(|e| panic!("no transfer {id}: {e}"))
    }

    /// Gas used × effective price of a mined transaction (on either chain), in wei.
    fn gas_paid(&self, hash: &str) -> u128 {
        let mut receipt = self.anvil.receipt(hash);
        if receipt.is_null() {
            receipt = self.base.receipt(hash);
        }
        assert_eq!(receipt["status"], "0x1", "{receipt}");
        quantity(&receipt["gasUsed"]) * quantity(&receipt["effectiveGasPrice"])
    }
}

impl Setup {
    /// The books balance and match both chains at every address (`xtask reconcile --local`'s
    /// checks, each network read from its own node).
    fn assert_books_match_the_chains(&self) {
        let config = reconcile::Config::new(&self.chains, None, Some(TEST_XPUB)).unwrap();
        let books = reconcile::Books::Local(self.worker.persist_to().to_path_buf());
        let report = reconcile::reconcile(&books, &config).unwrap();
        assert!(
            report.clean(),
            "the books do not match:\n{}",
            report.render()
        );
    }
}

/// How many of the sweeps `rows` ([`Setup::sweeps`]) are of `kind`, from `from` and to `to`
/// (`""`: any).
fn count_of(
    rows: &[(String, String, String, String, String)],
    kind: &str,
    (from, to): (&str, &str),
) -> usize {
    rows.iter()
        .filter(|r| r.0 == kind && (from.is_empty() || r.1 == from) && (to.is_empty() || r.2 == to))
        .count()
}

/// An account's balance on its normal side in the books of `db` (D1's or an object's).
fn balance_in(
    db: &rusqlite::Connection,
    (network, token): (&str, &str),
    kind: &str,
    owner: &str,
) -> i128 {
    let row: Option<(String, String)> = db
        .query_row(
            "SELECT debits_posted, credits_posted FROM ledger_accounts \
             WHERE network = ?1 AND token = ?2 AND kind = ?3 AND owner = ?4",
            [network, token, kind, owner],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .ok();
    let (debits, credits) = row.map_or((0, 0), |(d, c)| {
        (d.parse::<i128>().unwrap(), c.parse::<i128>().unwrap())
    });
    if matches!(kind, "custody" | "treasury" | "gas") {
        debits - credits
    } else {
        credits - debits
    }
}

fn quantity(value: &Value) -> u128 {
    u128::from_str_radix(value.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// The output of a command that succeeded.
fn succeeded(output: Output) -> String {
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert!(
        output.status.success(),
        "xtask sweep failed:\n{stdout}\n{stderr}"
    );
    assert!(
        !stdout.contains(TEST_MNEMONIC) && !stderr.contains("abandon"),
        "the mnemonic is never printed"
    );
    stdout
}

/// The `xtask` command, built once (as `cargo run -p xtask` would).
fn xtask_binary() -> &'static PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let output = Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "xtask",
                "--bin",
                "xtask",
                "--message-format=json",
            ])
            .current_dir(root())
            .output()
            .expect("build xtask");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|m| m["target"]["name"] == "xtask")
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .expect("the xtask binary's path")
    })
}

#[test]
fn ended_deposits_are_swept_to_the_treasury_once_and_the_books_follow() {
    let (_one, s) = shared();
    let token = s.paid_in_usdc("12.50", "SWEEP-USDC");
    let coin = s.paid_in_ether("9.00", "SWEEP-ETH");
    let watched = s.paid_in_usdc("3.00", "SWEEP-WATCHED");
    s.end_watch(&token);
    s.end_watch(&coin);
    let treasury_usdc = s.anvil.balance_of(&s.usdc, &s.treasury);
    let treasury_ether = s.base.ether_balance(&s.treasury);
    let gas_before = s.anvil.ether_balance(&s.gas);

    let output = s.sweep();
    assert!(output.contains(&token.address), "{output}");
    assert!(output.contains(&coin.address), "{output}");
    assert!(!output.contains(&watched.address), "{output}");

    // On chain: both deposits emptied into the treasury; the watched one untouched.
    assert_eq!(s.anvil.balance_of(&s.usdc, &token.address), 0);
    assert_eq!(
        s.anvil.balance_of(&s.usdc, &s.treasury) - treasury_usdc,
        token.units
    );
    assert_eq!(
        s.base.ether_balance(&coin.address),
        0,
        "all of it, less its gas"
    );
    assert_eq!(s.anvil.balance_of(&s.usdc, &watched.address), watched.units);
    let rows = s.sweeps();
    let of = |address: &str| -> Vec<_> {
        rows.iter()
            .filter(|r| r.1 == address || r.2 == address)
            .cloned()
            .collect()
    };
    assert!(of(&watched.address).is_empty(), "{rows:?}");
    // The token deposit: its gas funded from the custody gas address, then its sweep.
    let token_rows = of(&token.address);
    assert_eq!(token_rows.len(), 2, "{token_rows:?}");
    let (funding, token_sweep) = (&token_rows[0], &token_rows[1]);
    assert_eq!(
        (funding.0.as_str(), funding.1.as_str()),
        ("gas", s.gas.as_str())
    );
    assert_eq!(
        (token_sweep.0.as_str(), token_sweep.2.as_str()),
        ("sweep", s.treasury.as_str())
    );
    let coin_rows = of(&coin.address);
    assert_eq!(coin_rows.len(), 1, "{coin_rows:?}");
    let coin_sweep = &coin_rows[0];
    let coin_gas = s.gas_paid(&coin_sweep.4);
    assert_eq!(
        s.base.ether_balance(&s.treasury) - treasury_ether,
        coin.units - coin_gas
    );
    // The gas address paid exactly the funding and the funding's own gas.
    let funded = s.anvil.ether_balance(&token.address) + s.gas_paid(&token_sweep.4);
    assert_eq!(
        gas_before - s.anvil.ether_balance(&s.gas),
        funded + s.gas_paid(&funding.4)
    );

    // The worker makes them final at depth and posts them to the books.
    s.confirm_sweeps();
    let rows = s.sweeps();
    assert!(rows.iter().all(|r| r.3 == "confirmed"), "{rows:?}");
    let usdc = s.usdc.to_ascii_lowercase();
    assert_eq!(
        s.book_balance("polygon", &usdc, "custody", &token.address),
        0
    );
    assert_eq!(
        s.book_balance("base", "native", "custody", &coin.address),
        0
    );
    // What the gas funding left at the token deposit (gas limit above gas used) is in the
    // books, to the wei.
    assert_eq!(
        s.book_balance("polygon", "native", "custody", &token.address),
        i128::try_from(s.anvil.ether_balance(&token.address)).unwrap()
    );
    let (debit, credit, amount) = s.transfer(&format!("sweep:polygon:{}", token_sweep.4));
    assert_eq!(amount, token.units);
    assert_eq!(debit, format!("polygon:{usdc}:treasury"));
    assert_eq!(credit, format!("polygon:{usdc}:custody:{}", token.address));
    let (_, _, amount) = s.transfer(&format!("sweep:base:{}", coin_sweep.4));
    assert_eq!(amount, coin.units - coin_gas);
    for (network, hash) in [
        ("polygon", &token_sweep.4),
        ("base", &coin_sweep.4),
        ("polygon", &funding.4),
    ] {
        let (debit, _, amount) = s.transfer(&format!("sweep_gas:{network}:{hash}"));
        assert_eq!(debit, format!("{network}:native:gas"));
        assert_eq!(amount, s.gas_paid(hash), "the gas of {hash}");
    }
    let (debit, credit, amount) = s.transfer(&format!("gas_funding:polygon:{}", funding.4));
    assert_eq!(debit, format!("polygon:native:custody:{}", token.address));
    assert_eq!(credit, format!("polygon:native:custody:{}", s.gas));
    assert_eq!(amount, funded);
    assert!(
        s.book_balance("polygon", &usdc, "treasury", "") >= i128::try_from(token.units).unwrap()
    );
    assert!(s.book_balance("polygon", "native", "custody", &s.gas) >= 0);
    s.assert_books_match_the_chains();

    // Run again: nothing is sent, nothing stored.
    let before = s.sweeps();
    let output = s.sweep();
    assert!(output.contains("swept 0 deposits"), "{output}");
    assert_eq!(s.sweeps(), before);
    assert_eq!(s.anvil.balance_of(&s.usdc, &watched.address), watched.units);
    // The cron run again posts nothing twice.
    let transfers = || -> i64 {
        s.worker
            .database()
            .query_row("SELECT count(*) FROM ledger_transfers", [], |r| r.get(0))
            .unwrap()
    };
    let posted = transfers();
    s.worker.cron();
    assert_eq!(transfers(), posted);
}

#[test]
fn two_sweeps_at_once_send_each_deposit_once() {
    let (_one, s) = shared();
    let token = s.paid_in_usdc("7.25", "RACE-USDC");
    let coin = s.paid_in_ether("4.00", "RACE-ETH");
    s.end_watch(&token);
    s.end_watch(&coin);
    let treasury_usdc = s.anvil.balance_of(&s.usdc, &s.treasury);
    let treasury_ether = s.base.ether_balance(&s.treasury);
    let gas_nonce = || {
        quantity(
            &s.anvil
                .rpc("eth_getTransactionCount", json!([s.gas, "latest"])),
        )
    };
    let gas_nonce_before = gas_nonce();

    let (a, b) = (s.spawn_sweep(), s.spawn_sweep());
    let outputs = [
        succeeded(a.wait_with_output().unwrap()),
        succeeded(b.wait_with_output().unwrap()),
    ];
    // Between them, they swept each deposit and funded the token deposit's gas once; what one
    // of them found already sent by the other it waited on.
    let counted = |what: &str| -> usize {
        outputs
            .iter()
            .map(|o| {
                let after = o.rsplit_once(what).map_or("", |(_, rest)| rest);
                let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
                digits
                    .parse::<usize>()
                    .unwrap_or_else(|_| panic!("{what}: {o}"))
            })
            .sum()
    };
    assert_eq!(counted("swept "), 2, "{outputs:?}");
    assert_eq!(counted("funding gas for "), 1, "{outputs:?}");

    let rows = s.sweeps();
    let count = |kind: &str, from: &str, to: &str| count_of(&rows, kind, (from, to));
    assert_eq!(
        count("sweep", &token.address, ""),
        1,
        "{rows:?}\n{outputs:?}"
    );
    assert_eq!(
        count("sweep", &coin.address, ""),
        1,
        "{rows:?}\n{outputs:?}"
    );
    assert_eq!(count("gas", "", &token.address), 1, "{rows:?}\n{outputs:?}");
    assert_eq!(gas_nonce() - gas_nonce_before, 1, "one funding sent");
    assert_eq!(s.anvil.balance_of(&s.usdc, &token.address), 0);
    assert_eq!(
        s.anvil.balance_of(&s.usdc, &s.treasury) - treasury_usdc,
        token.units
    );
    assert_eq!(s.base.ether_balance(&coin.address), 0);
    let coin_sweep = rows
        .iter()
        .find(|r| r.0 == "sweep" && r.1 == coin.address)
        .unwrap();
    assert_eq!(
        s.base.ether_balance(&s.treasury) - treasury_ether,
        coin.units - s.gas_paid(&coin_sweep.4)
    );
    // Each deposit's transactions: one each, mined (nothing sent that failed).
    for (chain, address) in [(&s.anvil, &token.address), (&s.base, &coin.address)] {
        let nonce = quantity(&chain.rpc("eth_getTransactionCount", json!([address, "latest"])));
        assert_eq!(nonce, 1, "{address} sent once");
    }
    s.confirm_sweeps();
    assert!(s.sweeps().iter().all(|r| r.3 == "confirmed"));
    let usdc = s.usdc.to_ascii_lowercase();
    assert_eq!(
        s.book_balance("polygon", &usdc, "custody", &token.address),
        0
    );
    assert_eq!(
        s.book_balance("base", "native", "custody", &coin.address),
        0
    );
    s.assert_books_match_the_chains();
}

/// An institution held in its object has its deposits swept like D1's, each transaction
/// posted as a half in each store: the deposit's custody in the object, the treasury, its gas
/// and the custody gas address in D1's books, the two links mirroring each other. A deposit
/// paid while the institution's money was in D1, and moved with it, is swept once and posted
/// in the object (D1's copy of its watch, ended too, is never swept as D1's). Two sweeps at once
/// send each deposit once, and a third sends nothing. A held merchant's top-up address is swept
/// as far as its object's books hold it; what arrives later is credited once there, custody's
/// own movements never; and the cron's reconciliation never takes a sweep on its way for a
/// drift.
#[test]
fn a_held_institutions_deposits_and_top_ups_are_swept_once_and_posted_in_both_stores() {
    let (_one, s) = shared();
    let usdc = s.usdc.to_ascii_lowercase();
    // Paid while its money is in D1, its watch ended (as seven days would end it, in D1's copy
    // too: D1's rows are frozen once moved), then moved into its object with it.
    let before = s.paid_in_usdc_of(1, "6.50", "HELD-USDC");
    s.end_watch(&before);
    let merchant = s.worker.credentials.institutions[1].merchant_ids[0];
    let institution: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT institution_id FROM merchants WHERE id = ?1",
            [merchant],
            |r| r.get(0),
        )
        .unwrap();
    let moved = s.worker.send(
        s.worker
            .request(
                Method::POST,
                &format!("/operator/institutions/{institution}/move"),
            )
            .bearer_auth(OPERATOR_TOKEN),
        None,
    );
    assert_eq!(moved.status, 200, "{}", moved.text);
    // Paid once it is held: its watch is in the object alone.
    let after = s.paid_in_ether_of(1, "3.00", "HELD-ETH");
    // Both watches end in the object.
    for deposit in [&before, &after] {
        let ended = s.worker.object_execute(
            institution,
            "UPDATE deposit_watches SET watch_until = unixepoch() - 1 WHERE address = ?1",
            &[&deposit.address],
        );
        assert_eq!(ended, 1, "{} is the object's", deposit.address);
    }
    let treasury_usdc = s.anvil.balance_of(&s.usdc, &s.treasury);
    let treasury_ether = s.base.ether_balance(&s.treasury);
    let booked_usdc = s.book_balance("polygon", &usdc, "treasury", "");
    let compared_before: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT COALESCE(max(id), 0) FROM reconciliations",
            [],
            |r| r.get(0),
        )
        .unwrap();

    let (a, b) = (s.spawn_sweep(), s.spawn_sweep());
    let outputs = [
        succeeded(a.wait_with_output().unwrap()),
        succeeded(b.wait_with_output().unwrap()),
    ];
    let ours = |address: &str| address == before.address || address == after.address;
    let rows: Vec<_> = s
        .sweeps()
        .into_iter()
        .filter(|r| ours(&r.1) || ours(&r.2))
        .collect();
    let count = |kind: &str, from: &str, to: &str| count_of(&rows, kind, (from, to));
    assert_eq!(
        count("sweep", &before.address, &s.treasury),
        1,
        "{rows:?}\n{outputs:?}"
    );
    assert_eq!(
        count("sweep", &after.address, &s.treasury),
        1,
        "{rows:?}\n{outputs:?}"
    );
    assert_eq!(
        count("gas", &s.gas, &before.address),
        1,
        "{rows:?}\n{outputs:?}"
    );
    assert_eq!(rows.len(), 3, "{rows:?}");
    for (_, _, _, _, hash) in &rows {
        assert_eq!(
            s.held_by(hash),
            Some(institution),
            "{hash} names the institution whose object keeps the deposit"
        );
    }
    for (chain, address) in [(&s.anvil, &before.address), (&s.base, &after.address)] {
        let nonce = quantity(&chain.rpc("eth_getTransactionCount", json!([address, "latest"])));
        assert_eq!(nonce, 1, "{address} sent once");
    }
    assert_eq!(s.anvil.balance_of(&s.usdc, &before.address), 0);
    assert_eq!(
        s.anvil.balance_of(&s.usdc, &s.treasury) - treasury_usdc,
        before.units
    );
    assert_eq!(s.base.ether_balance(&after.address), 0);

    // Deep on both chains, four cron runs at once make each sweep final (twice: a deposit's
    // sweep waits a run for its gas funding): each half is posted once (the balances below
    // would count a second).
    s.anvil.mine(DEPTH + 1);
    s.base.mine(DEPTH + 1);
    for _ in 0..2 {
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| s.worker.cron());
            }
        });
    }
    let states: Vec<String> = rows.iter().map(|r| s.state_of(&r.4)).collect();
    assert!(
        states.iter().all(|state| state == "confirmed"),
        "made final by the racing runs: {states:?}"
    );
    s.confirm_sweeps();
    // The object's custody follows the chain; D1 keeps none of it (the first deposit's account
    // there was closed by the move, and stays at zero).
    let in_object = |ledger: (&str, &str), kind: &str, owner: &str| {
        s.object_balance(institution, ledger, kind, owner)
    };
    assert_eq!(in_object(("polygon", &usdc), "custody", &before.address), 0);
    assert_eq!(in_object(("base", "native"), "custody", &after.address), 0);
    assert_eq!(
        in_object(("polygon", "native"), "custody", &before.address),
        i128::try_from(s.anvil.ether_balance(&before.address)).unwrap(),
        "the funded gas its sweep did not use"
    );
    assert_eq!(
        s.book_balance("polygon", &usdc, "custody", &before.address),
        0
    );
    assert_eq!(
        s.book_balance("base", "native", "custody", &after.address),
        0
    );
    assert_eq!(
        s.book_balance("polygon", &usdc, "treasury", "") - booked_usdc,
        i128::try_from(before.units).unwrap()
    );
    // Each store's link to the other mirrors it, in every ledger the sweeps moved.
    let link = shared_types::ledger::split::institution_link(institution);
    for ledger in [
        ("polygon", usdc.as_str()),
        ("polygon", "native"),
        ("base", "native"),
    ] {
        assert_eq!(
            in_object(ledger, "world", "treasury"),
            -s.book_balance(ledger.0, ledger.1, "world", &link),
            "the links of {ledger:?}"
        );
    }
    let coin_sweep = s
        .sweeps()
        .into_iter()
        .find(|r| r.0 == "sweep" && r.1 == after.address)
        .unwrap();
    assert_eq!(
        s.base.ether_balance(&s.treasury) - treasury_ether,
        after.units - s.gas_paid(&coin_sweep.4)
    );

    // Nothing is left to sweep.
    let again = s.sweep();
    assert_eq!(counts(&again).0, 0, "{again}");

    // A held merchant's top-up address: swept as far as its object's books hold it, each
    // transaction naming the institution; what arrives later is credited once in the object,
    // custody's own movements (the gas funding, the sweep) never.
    let merchant = s.worker.credentials.institutions[1].merchants[0].id;
    let topup = s.topup_address_of(1, merchant, "polygon");
    let owner = merchant.to_string();
    let credited = || in_object(("polygon", &usdc), "merchant", &owner);
    let credited_before = credited();
    let topups_of = |hash: &str| -> i64 {
        s.worker
            .object_database(institution)
            .unwrap()
            .query_row(
                "SELECT count(*) FROM ledger_transfers WHERE code = 'topup' AND reference = ?1",
                [hash],
                |r| r.get(0),
            )
            .unwrap()
    };
    let first = s.anvil.transfer(&s.usdc, &s.customer, &topup, 20_000_000);
    s.cron_until("the held top-up to be credited", || topups_of(&first) == 1);
    let treasury_usdc = s.anvil.balance_of(&s.usdc, &s.treasury);
    let output = s.sweep();
    assert!(output.contains(&topup), "{output}");
    let rows: Vec<_> = s
        .sweeps()
        .into_iter()
        .filter(|r| r.1 == topup || r.2 == topup)
        .collect();
    assert_eq!(
        rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        ["gas", "sweep"],
        "{rows:?}\n{output}"
    );
    assert!(
        rows.iter().all(|r| s.held_by(&r.4) == Some(institution)),
        "{rows:?}"
    );
    assert_eq!(s.anvil.balance_of(&s.usdc, &topup), 0);
    assert_eq!(
        s.anvil.balance_of(&s.usdc, &s.treasury) - treasury_usdc,
        20_000_000
    );
    s.confirm_sweeps();
    let later = s.anvil.transfer(&s.usdc, &s.customer, &topup, 5_000_000);
    s.cron_until("the later held top-up to be credited", || {
        topups_of(&later) == 1
    });
    for hash in [&first, &later] {
        assert_eq!(topups_of(hash), 1, "{hash} credited once");
    }
    for (.., hash) in &rows {
        assert_eq!(topups_of(hash), 0, "{hash} is custody's own");
    }
    assert_eq!(credited() - credited_before, 25_000_000);
    assert_eq!(
        in_object(("polygon", "native"), "merchant", &owner),
        0,
        "the coin the gas address sent is no top-up"
    );
    assert_eq!(in_object(("polygon", &usdc), "custody", &topup), 5_000_000);
    // What arrived since is swept by the next run, once.
    let output = s.sweep();
    assert_eq!(counts(&output).0, 1, "{output}");
    s.confirm_sweeps();
    assert_eq!(in_object(("polygon", &usdc), "custody", &topup), 0);
    assert_eq!(s.anvil.balance_of(&s.usdc, &topup), 0);
    let again = s.sweep();
    assert_eq!(counts(&again), (0, 0), "{again}");

    // The books match both chains at every address, the top-up address compared once its
    // watch has read past the sweeps.
    s.reconciled_until(
        "the books to match the chains at the held top-up address",
        |r| compared(r, &topup) > 0,
    );

    // The cron's reconciliation never took a sweep on its way for a drift: an address being
    // swept, or whose watch has not read as far as its sweep, waits until both are booked.
    s.worker.cron();
    let drifts: Vec<(String, String, String)> = {
        let db = s.worker.database();
        let mut statement = db
            .prepare(
                "SELECT network, token, drift FROM reconciliations WHERE id > ?1 \
                 AND scope = 'custody' AND drift <> '0'",
            )
            .unwrap();
        statement
            .query_map([compared_before], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert!(drifts.is_empty(), "{drifts:?}");
    s.assert_books_match_the_chains();
}

#[test]
fn a_sweep_the_node_lost_is_broadcast_again_by_the_worker_and_booked_once() {
    let (_one, s) = shared();
    let coin = s.paid_in_ether("5.00", "LOST-ETH");
    s.end_watch(&coin);
    // The node takes the sweep but mines nothing, then loses it (a restart, an eviction).
    s.base.rpc("evm_setAutomine", json!([false]));
    let output = succeeded(s.spawn_sweep_waiting(1).wait_with_output().unwrap());
    let rows = s.sweeps();
    let sweep = rows
        .iter()
        .find(|r| r.0 == "sweep" && r.1 == coin.address)
        .unwrap_or_else(|| panic!("{rows:?}\n{output}"))
        .clone();
    assert!(output.contains("not mined yet"), "{output}");
    s.base.rpc("anvil_dropTransaction", json!([sweep.4]));
    s.base.rpc("evm_setAutomine", json!([true]));
    assert!(s
        .base
        .rpc("eth_getTransactionByHash", json!([sweep.4]))
        .is_null());
    assert!(s.base.ether_balance(&coin.address) > 0);

    // The worker broadcasts the same bytes again, and makes the sweep final once mined deep.
    s.confirm_sweeps();
    let row = s.sweeps().into_iter().find(|r| r.4 == sweep.4).unwrap();
    assert_eq!(row.3, "confirmed");
    assert_eq!(s.base.receipt(&sweep.4)["status"], "0x1");
    assert_eq!(s.base.ether_balance(&coin.address), 0);
    let posted: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT count(*) FROM ledger_transfers WHERE reference = ?1 \
             AND code IN ('sweep', 'sweep_gas')",
            [&sweep.4],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(posted, 2, "the sweep and its gas, once");
    assert_eq!(
        s.book_balance("base", "native", "custody", &coin.address),
        0
    );
    s.assert_books_match_the_chains();
}

/// The first institution's first active merchant.
fn active_merchant(worker: &Worker) -> i64 {
    let db = worker.database();
    worker.credentials.institutions[0]
        .merchant_ids
        .iter()
        .copied()
        .find(|id| {
            db.query_row("SELECT status FROM merchants WHERE id = ?1", [id], |r| {
                r.get::<_, String>(0)
            })
            .unwrap()
                == "active"
        })
        .expect("an active merchant")
}

impl Setup {
    /// `merchant`'s top-up address on `network`, given out by an admin (lower case).
    fn topup_address(&self, merchant: i64, network: &str) -> String {
        self.topup_address_of(0, merchant, network)
    }

    /// The same, by an admin of the demo's `institution`-th institution.
    fn topup_address_of(&self, institution: usize, merchant: i64, network: &str) -> String {
        let admin = self.worker.portal_login(institution);
        let reply = self.worker.portal(
            Method::POST,
            &format!("/portal/api/merchants/{merchant}/topup/{network}"),
            Some(&admin),
            None,
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()["address"]
            .as_str()
            .unwrap()
            .to_ascii_lowercase()
    }

    /// The books' top-ups recorded for the chain transaction (or block) `hash`: their ids.
    fn topups_of(&self, hash: &str) -> Vec<String> {
        let db = self.worker.database();
        let mut statement = db
            .prepare("SELECT id FROM ledger_transfers WHERE code = 'topup' AND reference = ?1")
            .unwrap();
        statement
            .query_map([hash], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// Runs the cron (a block mined on each chain each time) until `xtask reconcile --local`
    /// finds the books clean against both chains and `done` holds of its report.
    fn reconciled_until(&self, what: &str, done: impl Fn(&reconcile::Report) -> bool) {
        let config = reconcile::Config::new(&self.chains, None, Some(TEST_XPUB)).unwrap();
        let books = reconcile::Books::Local(self.worker.persist_to().to_path_buf());
        self.cron_until(what, || {
            let report = reconcile::reconcile(&books, &config).unwrap();
            report.clean() && done(&report)
        });
    }

    /// Runs the cron, mining a block on each chain each time, until `done` holds.
    fn cron_until(&self, what: &str, mut done: impl FnMut() -> bool) {
        eventually(what, Duration::from_secs(60), || {
            self.anvil.mine(1);
            self.base.mine(1);
            self.worker.cron();
            done().then_some(())
        });
    }
}

/// How many custody comparisons of `report` read `address`.
fn compared(report: &reconcile::Report, address: &str) -> usize {
    report
        .comparisons
        .iter()
        .filter(|c| c.scope == "custody")
        .flat_map(|c| &c.readings)
        .filter(|r| r.address == address)
        .count()
}

/// What a sweep's output says it swept and funded: (swept, funded).
fn counts(output: &str) -> (usize, usize) {
    let after = |what: &str| -> usize {
        let rest = output.rsplit_once(what).map_or("", |(_, rest)| rest);
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits
            .parse()
            .unwrap_or_else(|_| panic!("{what}: {output}"))
    };
    (after("swept "), after("funding gas for "))
}

#[test]
fn top_up_addresses_are_swept_while_watched_and_later_top_ups_are_credited_once() {
    let (_one, s) = shared();
    let merchant = active_merchant(&s.worker);
    let polygon = s.topup_address(merchant, "polygon");
    let base = s.topup_address(merchant, "base");
    let usdc = s.usdc.to_ascii_lowercase();
    let owner = merchant.to_string();
    let credited = |network: &str, token: &str| s.book_balance(network, token, "merchant", &owner);
    let before_usdc = credited("polygon", &usdc);
    let before_ether = credited("base", "native");
    const TENTH: u128 = 100_000_000_000_000_000;

    // The merchant tops up 20 USDC on polygon and 0.3 ETH on base: credited at their depth.
    let first_usdc = s.anvil.transfer(&s.usdc, &s.customer, &polygon, 20_000_000);
    let first_ether = s.base.pay_ether(&s.customer, &base, 3 * TENTH);
    s.cron_until("the top-ups to be credited", || {
        s.topups_of(&first_usdc).len() == 1 && s.topups_of(&first_ether).len() == 1
    });
    let treasury_usdc = s.anvil.balance_of(&s.usdc, &s.treasury);
    let treasury_ether = s.base.ether_balance(&s.treasury);

    // The sweep takes what the books hold there, though the addresses stay watched. On base a
    // second top-up of 0.05 ETH waits in the pool and is mined in the block of the sweep: the
    // ether watch, which reads the address's balance, must count it, and only it.
    s.base.rpc("evm_setAutomine", json!([false]));
    let same_block = s.base.rpc(
        "eth_sendTransaction",
        json!([{"from": s.customer, "to": base, "value": format!("{:#x}", TENTH / 2)}]),
    );
    let same_block = same_block.as_str().unwrap().to_ascii_lowercase();
    let output = succeeded(s.spawn_sweep_waiting(3).wait_with_output().unwrap());
    s.base.mine(1);
    s.base.rpc("evm_setAutomine", json!([true]));
    assert!(
        output.contains(&polygon) && output.contains(&base),
        "{output}"
    );
    let rows = s.sweeps();
    let of = |rows: &[(String, String, String, String, String)], address: &str| -> Vec<_> {
        rows.iter()
            .filter(|r| r.1 == address || r.2 == address)
            .cloned()
            .collect()
    };
    let polygon_rows = of(&rows, &polygon);
    assert_eq!(
        polygon_rows
            .iter()
            .map(|r| r.0.as_str())
            .collect::<Vec<_>>(),
        ["gas", "sweep"],
        "its gas funded from the custody gas address, then its USDC swept: {rows:?}\n{output}"
    );
    let (funding, usdc_sweep) = (polygon_rows[0].4.clone(), polygon_rows[1].4.clone());
    let base_rows = of(&rows, &base);
    assert_eq!(base_rows.len(), 1, "{rows:?}");
    let ether_sweep = base_rows[0].4.clone();
    let sweep_block = s.base.receipt(&ether_sweep)["blockNumber"].clone();
    assert_eq!(
        s.base.receipt(&same_block)["blockNumber"],
        sweep_block,
        "the top-up and the sweep in one block"
    );
    assert_eq!(s.anvil.balance_of(&s.usdc, &polygon), 0);
    assert_eq!(
        s.anvil.balance_of(&s.usdc, &s.treasury) - treasury_usdc,
        20_000_000
    );
    let ether_gas = s.gas_paid(&ether_sweep);
    assert_eq!(
        s.base.ether_balance(&s.treasury) - treasury_ether,
        3 * TENTH - ether_gas,
        "what the books held, less its gas"
    );
    assert_eq!(
        s.base.ether_balance(&base),
        TENTH / 2,
        "the top-up in its block"
    );

    // Final at depth and booked; the USDC sent later and the ether in the sweep's block are
    // credited once, and custody's own movements (the gas funding, the sweeps) never are.
    s.confirm_sweeps();
    let later_usdc = s.anvil.transfer(&s.usdc, &s.customer, &polygon, 5_000_000);
    s.cron_until("the later top-ups to be credited", || {
        s.topups_of(&later_usdc).len() == 1 && s.topups_of(&same_block).len() == 1
    });
    for hash in [&first_usdc, &first_ether, &later_usdc, &same_block] {
        assert_eq!(s.topups_of(hash).len(), 1, "{hash} credited once");
    }
    for hash in [&funding, &usdc_sweep, &ether_sweep] {
        assert!(s.topups_of(hash).is_empty(), "{hash} is custody's own");
    }
    assert_eq!(credited("polygon", &usdc) - before_usdc, 25_000_000);
    assert_eq!(
        credited("base", "native") - before_ether,
        i128::try_from(3 * TENTH + TENTH / 2).unwrap()
    );
    assert_eq!(
        credited("polygon", "native"),
        0,
        "the coin the gas address sent is no top-up"
    );
    assert_eq!(
        s.book_balance("polygon", &usdc, "custody", &polygon),
        5_000_000
    );
    assert_eq!(
        s.book_balance("base", "native", "custody", &base),
        i128::try_from(TENTH / 2).unwrap()
    );

    // Two sweeps at once move what arrived since, once.
    let treasury_usdc = s.anvil.balance_of(&s.usdc, &s.treasury);
    let treasury_ether = s.base.ether_balance(&s.treasury);
    let (a, b) = (s.spawn_sweep(), s.spawn_sweep());
    let outputs = [
        succeeded(a.wait_with_output().unwrap()),
        succeeded(b.wait_with_output().unwrap()),
    ];
    let (swept, funded) = outputs
        .iter()
        .map(|o| counts(o))
        .fold((0, 0), |(s, f), (ds, df)| (s + ds, f + df));
    // The USDC's gas funded once (unless what the first funding left pays it).
    assert_eq!(swept, 2, "{outputs:?}");
    assert!(funded <= 1, "{outputs:?}");
    let rows = s.sweeps();
    assert_eq!(of(&rows, &polygon).len(), 3 + funded, "{rows:?}");
    assert_eq!(of(&rows, &base).len(), 2, "{rows:?}");
    assert_eq!(s.anvil.balance_of(&s.usdc, &polygon), 0);
    assert_eq!(
        s.anvil.balance_of(&s.usdc, &s.treasury) - treasury_usdc,
        5_000_000
    );
    let second = &of(&rows, &base)[1].4;
    assert_eq!(
        s.base.ether_balance(&s.treasury) - treasury_ether,
        TENTH / 2 - s.gas_paid(second)
    );
    assert_eq!(s.base.ether_balance(&base), 0);
    s.confirm_sweeps();

    // Run again: nothing is sent.
    let before = s.sweeps();
    let output = s.sweep();
    assert_eq!(counts(&output), (0, 0), "{output}");
    assert_eq!(s.sweeps(), before);

    // The books balance and match both chains at every address, the top-up addresses compared
    // once their watches have read past the sweeps; the merchant is owed what it sent.
    s.reconciled_until(
        "the books to match the chains at the top-up addresses",
        |r| compared(r, &polygon) == 2 && compared(r, &base) == 1,
    );
    assert_eq!(s.book_balance("polygon", &usdc, "custody", &polygon), 0);
    assert_eq!(s.book_balance("base", "native", "custody", &base), 0);
    assert_eq!(credited("polygon", &usdc) - before_usdc, 25_000_000);
    assert_eq!(
        credited("base", "native") - before_ether,
        i128::try_from(3 * TENTH + TENTH / 2).unwrap()
    );
}

/// Takes the treasury off polygon's oracle when dropped: a failing test leaves the next ones a
/// treasury they can sweep to.
struct Unlists<'a>(&'a Setup);

impl Drop for Unlists<'_> {
    fn drop(&mut self) {
        self.0
            .anvil
            .sanction(&self.0.oracle, &[&self.0.treasury], false);
    }
}

#[test]
fn the_treasury_is_screened_before_anything_is_swept_to_it() {
    let (_one, s) = shared();
    let deposit = s.paid_in_usdc("4.00", "SWEEP-SCREENED");
    s.end_watch(&deposit);
    let from_deposit = |s: &Setup| {
        s.sweeps()
            .into_iter()
            .filter(|(kind, from, ..)| kind == "sweep" && *from == deposit.address)
            .count()
    };
    // A refused network fails the run (exit status 1), saying why.
    let refused = |s: &Setup| {
        let output = s.spawn_sweep().wait_with_output().unwrap();
        assert!(!output.status.success(), "a refused network fails the run");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    // Listed on polygon's oracle: polygon is refused, nothing signed there.
    s.anvil.sanction(&s.oracle, &[&s.treasury], true);
    let unlist = Unlists(s);
    let output = refused(s);
    assert!(
        output.contains("polygon: refused: the treasury") && output.contains("sanctions oracle"),
        "{output}"
    );
    assert_eq!(from_deposit(s), 0, "nothing swept to a listed treasury");
    assert_eq!(s.anvil.balance_of(&s.usdc, &deposit.address), deposit.units);
    drop(unlist);
    // On the operator's list: every network is refused, naming the entry.
    let db = s.worker.database();
    db.execute(
        "INSERT INTO sanctioned_addresses (address, source, entry, listed_on, added_at, added_by) \
         VALUES (?1, 'manual', 'treasury test entry', '2026-11-28', unixepoch(), 'sweep test')",
        [&s.treasury],
    )
    .unwrap();
    let output = refused(s);
    assert!(
        output.contains("polygon: refused: the treasury")
            && output.contains("manual: treasury test entry"),
        "{output}"
    );
    assert_eq!(from_deposit(s), 0);
    db.execute(
        "UPDATE sanctioned_addresses SET removed_at = unixepoch(), removed_by = 'sweep test' \
         WHERE address = ?1",
        [&s.treasury],
    )
    .unwrap();
    // Clear on both: swept once, the screening kept with the sweep.
    let output = s.sweep();
    assert!(output.contains(&deposit.address), "{output}");
    assert_eq!(from_deposit(s), 1);
    let (oracle, block, version): (Option<String>, Option<i64>, Option<i64>) = db
        .query_row(
            "SELECT screened_oracle, screened_block, screened_list_version FROM custody_sweeps \
             WHERE kind = 'sweep' AND from_address = ?1",
            [&deposit.address],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(
        oracle.as_deref(),
        Some(s.oracle.to_ascii_lowercase().as_str())
    );
    assert!(block.is_some_and(|b| b > 0), "{block:?}");
    assert!(
        version.is_some_and(|v| v > 0),
        "the list's version: {version:?}"
    );
    s.confirm_sweeps();
    s.assert_books_match_the_chains();
}
