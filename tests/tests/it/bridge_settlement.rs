//! Settlement across networks with CCTP, against the real worker, the two local chains
//! `scripts/dev` sets up (`scripts/local-chain.js`: USDC and CCTP contracts on both, Polygon and
//! Base) and the local attestation service: a merchant that chose to be paid its USDC on Base
//! has a USDC payment made on Polygon burnt there by the treasury and minted to its wallet on
//! Base, and the payment says so (both networks, the burn as `tx_hashes.bridge`, the mint as
//! `tx_hashes.settlement`, the bridge's fee), the wallet holding exactly the net, the books
//! balanced against both chains with nothing left in flight.

use std::str::FromStr;
use std::time::Duration;

use payrail_evm::cctp;
use payrail_tests::chain::{self, logs_of, Anvil, TEST_XPUB};
use payrail_tests::{books, eventually, Worker};
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{json, Value};

/// The treasury of `scripts/dev`: anvil's well-known account 2, funded by `local-chain.js`.
const TREASURY_KEY: &str = "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";

/// The two local chains, their attestation service and a worker settling on them.
struct Across {
    polygon: Anvil,
    base: Anvil,
    local: Value,
    worker: Worker,
    _service: xtask::attestation::Server,
}

impl Across {
    fn start() -> Across {
        let (polygon, base) = (Anvil::start(), Anvil::start_chain(31338));
        let port = payrail_tests::free_port();
        let attestation_url = format!("http://127.0.0.1:{port}");
        let local =
            chain::local_chain(&[&polygon.url, "polygon", "base", &base.url, &attestation_url]);
        let service = chain::attestation(&local["attestation"]);
        let key = std::env::var("PAYRAIL_DEV_ENCRYPTION_KEY")
            .expect("PAYRAIL_DEV_ENCRYPTION_KEY (run through scripts/test)");
        let sealed = xtask::secrets::seal_treasury_key(&key, TREASURY_KEY).unwrap();
        let chains = local["chains"].to_string();
        let worker = Worker::start_with_vars(
            "sandbox",
            3600,
            &[
                ("PAYRAIL_EVM_XPUB", TEST_XPUB),
                ("PAYRAIL_CHAINS", &chains),
                ("PAYRAIL_TREASURY_KEY", &sealed),
                ("PAYRAIL_WALLET_COOLOFF_SECONDS", "0"),
            ],
        );
        Across {
            polygon,
            base,
            local,
            worker,
            _service: service,
        }
    }

    fn text(&self, path: &[&str]) -> String {
        path.iter()
            .fold(&self.local, |v, k| &v[*k])
            .as_str()
            .unwrap_or_else(|| panic!("{path:?} in the local chains' output"))
            .to_ascii_lowercase()
    }

    fn usdc(&self, network: &str) -> String {
        self.text(&["chains", network, "tokens", "USDC", "address"])
    }

    fn cctp(&self, network: &str, contract: &str) -> String {
        self.text(&["chains", network, "cctp", contract])
    }

    /// The treasury lets Polygon's token messenger burn its USDC (the operator's one-time
    /// approval).
    fn approve(&self) {
        let treasury = self.text(&["treasury"]);
        self.polygon.approve(
            &self.usdc("polygon"),
            &treasury,
            &self.cctp("polygon", "token_messenger"),
            u128::MAX,
        );
    }

    /// Merchant 0 of institution 0, paid on Base: a fresh wallet there, and its USDC paid
    /// there from every network. The wallet.
    fn merchant_paid_on_base(&self) -> String {
        let merchant = &self.worker.credentials.institutions[0].merchants[0];
        let wallet = self.base.account(6);
        let portal = self.worker.portal_login(0);
        let path = format!("/portal/api/merchants/{}/wallets/base", merchant.id);
        let set = self.worker.portal(
            Method::PUT,
            &path,
            Some(&portal),
            Some(&json!({"address": wallet})),
        );
        assert_eq!(set.status, 200, "{}", set.text);
        let chosen = self
            .worker
            .database()
            .execute(
                "UPDATE merchants SET usdc_settlement_network = 'base', \
                 usdc_settlement_usable_from = 0 WHERE id = ?1",
                [merchant.id],
            )
            .unwrap();
        assert_eq!(chosen, 1);
        wallet.to_ascii_lowercase()
    }

    /// A checkout of `amount` USD paid in full in USDC on Polygon by the local customer: its
    /// payment id.
    fn paid(&self, amount: &str) -> i64 {
        let merchant = &self.worker.credentials.institutions[0].merchants[0];
        let session = self.worker.checkout_session(&json!({
            "publicKey": merchant.public_key, "amount": amount, "currency": "USD",
            "title": "Paid on Polygon", "externalReference": format!("ACROSS-{amount}"),
            "redirectUrl": "https://shop.example/done", "allowCrypto": true
        }));
        let id = session["transaction_id"].as_i64().unwrap();
        let (address, units): (String, String) = self
            .worker
            .database()
            .query_row(
                "SELECT address, base_units FROM deposit_watches \
                 WHERE transaction_id = ?1 AND asset = 'USDC' AND network = 'polygon'",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("the session's USDC deposit address on Polygon");
        let customer = self.text(&["customer"]);
        self.polygon.transfer(
            &self.usdc("polygon"),
            &customer,
            &address,
            units.parse().unwrap(),
        );
        id
    }

    fn raw_status(&self, id: i64) -> String {
        self.worker
            .database()
            .query_row(
                "SELECT raw_status FROM transactions WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap()
    }

    /// Runs the cron, a block mined on each chain before each run, until payment `id` is
    /// `raw`.
    fn until(&self, id: i64, raw: &str) {
        eventually(
            &format!("payment {id} to be {raw}"),
            Duration::from_secs(180),
            || {
                self.polygon.mine(1);
                self.base.mine(1);
                self.worker.cron();
                (self.raw_status(id) == raw).then_some(())
            },
        );
    }
}

/// An amount of the order currency as USDC base units (the local USDC is quoted at 1 USD).
fn units(amount: &Value) -> u128 {
    let amount = Decimal::from_str(amount.as_str().expect("an amount")).unwrap();
    (amount * Decimal::from(1_000_000u32))
        .normalize()
        .to_string()
        .parse()
        .expect("whole base units")
}

#[test]
fn a_usdc_payment_on_polygon_is_burnt_there_and_minted_to_the_merchants_wallet_on_base() {
    let s = Across::start();
    s.approve();
    let wallet = s.merchant_paid_on_base();
    let usdc_base = s.usdc("base");
    let before = s.base.balance_of(&usdc_base, &wallet);
    let id = s.paid("7.00");
    s.until(id, "paid");

    let t = s.worker.transaction(0, id);
    assert_eq!(t["networks"]["payment"], "polygon", "{t}");
    assert_eq!(t["networks"]["settlement"], "base", "{t}");
    // The burn: a Polygon transaction whose DepositForBurn mints to the merchant's wallet.
    let burn = t["tx_hashes"]["bridge"].as_str().expect("a bridge hash");
    let receipt = s.polygon.receipt(burn);
    assert_eq!(receipt["status"], "0x1", "{receipt}");
    let topic = format!(
        "0x{}",
        hex::encode(cctp::event_topic(cctp::DEPOSIT_FOR_BURN_EVENT))
    );
    let burns = logs_of(&receipt, &s.cctp("polygon", "token_messenger"), &topic);
    assert_eq!(burns.len(), 1, "{receipt}");
    let data = burns[0]["data"].as_str().unwrap().trim_start_matches("0x");
    // Word 1 of the data: the mint recipient.
    assert_eq!(
        &data[64 + 24..128],
        wallet.trim_start_matches("0x"),
        "the burn mints to the merchant's wallet"
    );
    // The mint: a Base transaction minting to the wallet.
    let mint = t["tx_hashes"]["settlement"].as_str().expect("a settlement hash");
    let receipt = s.base.receipt(mint);
    assert_eq!(receipt["status"], "0x1", "{receipt}");
    let topic = format!(
        "0x{}",
        hex::encode(cctp::event_topic(cctp::MINT_AND_WITHDRAW_EVENT))
    );
    let mints = logs_of(&receipt, &s.cctp("base", "token_messenger"), &topic);
    assert_eq!(mints.len(), 1, "{receipt}");

    // The money: net = gross − psp_fee − gas_fee − bridge_fee, and the wallet holds exactly it.
    let amount = &t["amount"];
    let fee = |name: &str| Decimal::from_str(amount[name].as_str().unwrap()).unwrap();
    assert_eq!(
        fee("net"),
        fee("gross") - fee("psp_fee") - fee("gas_fee") - fee("bridge_fee"),
        "{t}"
    );
    assert_eq!(fee("bridge_fee"), Decimal::ZERO, "a standard transfer is free");
    assert!(fee("gas_fee") > Decimal::ZERO, "{t}");
    assert_eq!(
        s.base.balance_of(&usdc_base, &wallet) - before,
        units(&amount["net"]),
        "the wallet on Base holds exactly the net more"
    );
    // One burn and one mint, and nothing left in flight.
    let db = s.worker.database();
    let legs: Vec<(String, String)> = db
        .prepare(
            "SELECT c.leg, c.state FROM chain_sends c JOIN settlement_claims k \
             ON k.settlement_id = c.settlement_id WHERE k.transaction_id = ?1 ORDER BY c.leg",
        )
        .unwrap()
        .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        legs,
        [
            ("burn".to_owned(), "confirmed".to_owned()),
            ("mint".to_owned(), "confirmed".to_owned())
        ]
    );
    let in_flight: (String, String) = db
        .query_row(
            "SELECT debits_posted, credits_posted FROM ledger_accounts WHERE id = ?1",
            [format!("polygon:{}:treasury:bridge", s.usdc("polygon"))],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the bridge's in-flight account");
    assert_eq!(in_flight.0, in_flight.1, "nothing in flight");
    drop(db);
    books::settle_and_assert_balanced_on(&s.worker, &[&s.polygon, &s.base]);
}
