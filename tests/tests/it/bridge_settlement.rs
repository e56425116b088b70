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
use payrail_tests::chain::{self, logs_of, Anvil};
use payrail_tests::faults::{self, Fault, FaultyNode};
use payrail_tests::{books, eventually, Reply, Worker};
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{json, Value};

/// The two local chains, their attestation service and a worker settling on them.
struct Across {
    polygon: Anvil,
    base: Anvil,
    local: Value,
    /// The worker's nodes behind faulty proxies (Polygon's, Base's), when asked for.
    proxies: Option<(FaultyNode, FaultyNode)>,
    worker: Worker,
    service: std::cell::RefCell<Option<xtask::attestation::Server>>,
}

impl Across {
    fn start() -> Across {
        Across::start_with(false)
    }

    /// [`Across::start`], the worker reading each chain through a [`FaultyNode`] when `faulty`.
    fn start_with(faulty: bool) -> Across {
        let (polygon, base) = (Anvil::start(), Anvil::start_chain(31338));
        let port = payrail_tests::free_port();
        let attestation_url = format!("http://127.0.0.1:{port}");
        let mut local =
            chain::local_chain(&[&polygon.url, "polygon", "base", &base.url, &attestation_url]);
        let proxies = faulty.then(|| {
            (
                FaultyNode::start(&polygon.url),
                FaultyNode::start(&base.url),
            )
        });
        if let Some((on_polygon, on_base)) = &proxies {
            local["chains"]["polygon"]["rpc_url"] = json!(on_polygon.url);
            local["chains"]["base"]["rpc_url"] = json!(on_base.url);
        }
        let service = chain::attestation(&local["attestation"]);
        let worker = chain::worker_on(&local, None);
        Across {
            polygon,
            base,
            local,
            proxies,
            worker,
            service: std::cell::RefCell::new(Some(service)),
        }
    }

    /// Stops the attestation service: its URL answers nothing.
    fn stop_service(&self) {
        drop(self.service.borrow_mut().take());
    }

    /// Starts the attestation service again, signing with `key`.
    fn start_service(&self, key: &str) {
        self.stop_service();
        *self.service.borrow_mut() = Some(chain::attestation_signed_by(
            &self.local["attestation"],
            key,
        ));
    }

    /// The state of payment `id`'s bridge, and why it waits.
    fn bridge(&self, id: i64) -> Option<(String, Option<String>)> {
        self.worker
            .database()
            .query_row(
                "SELECT b.state, b.note FROM bridges b JOIN settlement_claims k \
                 ON k.settlement_id = b.settlement_id WHERE k.transaction_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .ok()
    }

    /// Runs the cron, a block mined on each chain before each run, until payment `id`'s bridge
    /// is `state`.
    fn until_bridge(&self, id: i64, state: &str) {
        self.runs_until(&format!("payment {id}'s bridge to be {state}"), 120, || {
            self.bridge(id).map(|b| b.0).as_deref() == Some(state)
        });
    }

    /// Cron runs ([`Across::run`]) until `done`, for at most `seconds`.
    fn runs_until(&self, what: &str, seconds: u64, done: impl Fn() -> bool) {
        eventually(what, Duration::from_secs(seconds), || {
            self.run();
            done().then_some(())
        });
    }

    /// A cron run, after a block on each chain.
    fn run(&self) {
        self.polygon.mine(1);
        self.base.mine(1);
        self.worker.cron();
    }

    /// Payment `id`'s transactions out by leg and state, in order.
    fn legs(&self, id: i64) -> Vec<(String, String)> {
        let db = self.worker.database();
        let mut query = db
            .prepare(
                "SELECT c.leg, c.state FROM chain_sends c JOIN settlement_claims k \
                 ON k.settlement_id = c.settlement_id WHERE k.transaction_id = ?1 \
                 ORDER BY c.created_at, c.leg",
            )
            .unwrap();
        let legs = query
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        legs
    }

    /// A merchant paid on Base, and its USDC payment of `amount` USD on Polygon burnt and waiting
    /// for its attestation (the service stopped): the merchant's wallet and the payment.
    fn burnt_awaiting_attestation(&self, amount: &str) -> (String, i64) {
        let wallet = self.merchant_paid_on_base();
        self.stop_service();
        let id = self.paid(amount);
        self.until_bridge(id, "attesting");
        (wallet, id)
    }

    /// A third party (anvil's account 5) receives the attested message of the Polygon burn
    /// `burn` on Base, mined at once: its transaction's hash.
    fn received_by_a_third_party(&self, burn: &str) -> String {
        let (message, attestation) = self.attested(burn);
        let relayer = self.base.account(5);
        let receipt = self.base.send(
            &relayer,
            Some(&self.cctp("base", "message_transmitter")),
            &cctp::receive_message_call(&message, &attestation),
        );
        receipt["transactionHash"].as_str().unwrap().to_owned()
    }

    /// The mint recipient (40 hex digits, lower case) of the one `DepositForBurn` of the
    /// succeeded Polygon transaction `burn`.
    fn mint_recipient_of(&self, burn: &str) -> String {
        let receipt = self.polygon.receipt(burn);
        assert_eq!(receipt["status"], "0x1", "{receipt}");
        let topic = format!(
            "0x{}",
            hex::encode(cctp::event_topic(cctp::DEPOSIT_FOR_BURN_EVENT))
        );
        let burns = logs_of(&receipt, &self.cctp("polygon", "token_messenger"), &topic);
        assert_eq!(burns.len(), 1, "{receipt}");
        let data = burns[0]["data"].as_str().unwrap().trim_start_matches("0x");
        // Word 1 of the data: the mint recipient.
        data[64 + 24..128].to_ascii_lowercase()
    }

    /// The burns (`DepositForBurn` on Polygon) and mints (`MintAndWithdraw` on Base) on chain.
    fn on_chain(&self) -> (usize, usize) {
        let count = |anvil: &Anvil, contract: &str, event: &str| -> usize {
            let topic = format!("0x{}", hex::encode(cctp::event_topic(event)));
            let head = anvil.head();
            let logs = anvil.rpc(
                "eth_getLogs",
                json!([{"address": contract, "topics": [topic], "fromBlock": "0x0",
                    "toBlock": format!("{head:#x}")}]),
            );
            logs.as_array().map_or(0, Vec::len)
        };
        (
            count(
                &self.polygon,
                &self.cctp("polygon", "token_messenger"),
                cctp::DEPOSIT_FOR_BURN_EVENT,
            ),
            count(
                &self.base,
                &self.cctp("base", "token_messenger"),
                cctp::MINT_AND_WITHDRAW_EVENT,
            ),
        )
    }

    /// A cron run (after a block on each chain) in which the worker is killed at the first
    /// broadcast of a new transaction ([`faults::cron_killed_at_broadcast`]): payment `id`'s
    /// legs ([`Across::legs`]) as the worker had stored them then, or `None` when it broadcast
    /// nothing new.
    fn run_killed_at_broadcast(&self, id: i64) -> Option<Vec<(String, String)>> {
        let (on_polygon, on_base) = self.proxies.as_ref().expect("the proxies");
        self.polygon.mine(1);
        self.base.mine(1);
        faults::cron_killed_at_broadcast(&self.worker, &[on_polygon, on_base], || self.legs(id))
    }

    /// After a few more runs: payment `id`, paid, was settled by one burn and one mint, signed
    /// once each, and [`Across::assert_paid_once`].
    fn assert_settled_once(&self, id: i64, wallet: &str) {
        for _ in 0..3 {
            self.run();
        }
        let legs: Vec<String> = self.legs(id).into_iter().map(|(leg, _)| leg).collect();
        assert_eq!(legs, ["burn", "mint"], "one of each signed");
        self.assert_paid_once(id, wallet);
    }

    /// Payment `id` has one `payment.paid`, `wallet` holds exactly its net on Base, and the
    /// books balance against both chains.
    fn assert_paid_once(&self, id: i64, wallet: &str) {
        assert_eq!(self.paid_events(id), 1);
        let t = self.worker.transaction(0, id);
        assert_eq!(
            self.base.balance_of(&self.usdc("base"), wallet),
            units(&t["amount"]["net"])
        );
        books::settle_and_assert_balanced_on(&self.worker, &[&self.polygon, &self.base]);
    }

    /// How many `payment.paid` events payment `id` has.
    fn paid_events(&self, id: i64) -> i64 {
        self.worker
            .database()
            .query_row(
                "SELECT count(*) FROM events WHERE transaction_id = ?1 AND type = 'payment.paid'",
                [id],
                |r| r.get(0),
            )
            .unwrap()
    }

    /// The attestation service's complete answer for the burn `hash` on Polygon, once it has
    /// one: the message and its attestation.
    fn attested(&self, hash: &str) -> (Vec<u8>, Vec<u8>) {
        let url = self
            .service
            .borrow()
            .as_ref()
            .expect("the attestation service")
            .url();
        let http = reqwest::blocking::Client::new();
        let lookup = format!("{url}/v2/messages/7?transactionHash={hash}");
        let answer: Value = eventually("the burn's attestation", Duration::from_secs(60), || {
            self.polygon.mine(1);
            let response = http.get(&lookup).send().ok()?;
            (response.status().as_u16() == 200)
                .then(|| response.json::<Value>().ok())
                .flatten()
                .filter(|a| a["messages"][0]["status"] == "complete")
        });
        let bytes = |field: &str| {
            hex::decode(
                answer["messages"][0][field]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("0x"),
            )
            .unwrap()
        };
        (bytes("message"), bytes("attestation"))
    }

    /// Payment `id`'s burn, once stored.
    fn burn_hash(&self, id: i64) -> String {
        self.worker
            .database()
            .query_row(
                "SELECT c.tx_hash FROM chain_sends c JOIN settlement_claims k \
                 ON k.settlement_id = c.settlement_id WHERE k.transaction_id = ?1 \
                 AND c.leg = 'burn' AND c.state = 'confirmed'",
                [id],
                |r| r.get(0),
            )
            .expect("a final burn")
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
        let path = format!(
            "/portal/api/merchants/{}/usdc-settlement-network",
            merchant.id
        );
        let chosen = self.worker.portal(
            Method::PUT,
            &path,
            Some(&portal),
            Some(&json!({"usdc_settlement_network": "base"})),
        );
        assert_eq!(chosen.status, 200, "{}", chosen.text);
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
        self.runs_until(&format!("payment {id} to be {raw}"), 180, || {
            self.raw_status(id) == raw
        });
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
    assert_eq!(
        s.mint_recipient_of(burn),
        wallet.trim_start_matches("0x"),
        "the burn mints to the merchant's wallet"
    );
    // The mint: a Base transaction minting to the wallet.
    let mint = t["tx_hashes"]["settlement"]
        .as_str()
        .expect("a settlement hash");
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
    assert_eq!(
        fee("bridge_fee"),
        Decimal::ZERO,
        "a standard transfer is free"
    );
    assert!(fee("gas_fee") > Decimal::ZERO, "{t}");
    assert_eq!(
        s.base.balance_of(&usdc_base, &wallet) - before,
        units(&amount["net"]),
        "the wallet on Base holds exactly the net more"
    );
    // One burn and one mint, and nothing left in flight.
    let db = s.worker.database();
    assert_eq!(
        s.legs(id),
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

    // The portal shows both legs on the payment, each with its network.
    let sent = s.worker.portal_payment(0, id)["settlement_transactions"].clone();
    let shown: Vec<(&str, &str, &str, bool)> = sent
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["tx_hash"].as_str().unwrap(),
                c["leg"].as_str().unwrap_or_default(),
                c["network"].as_str().unwrap(),
                c["gas_fee"].is_null(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            (burn, "burn", "polygon", false),
            (mint, "mint", "base", true)
        ],
        "{sent}"
    );
    super::shard::look_at(
        &s.worker,
        &format!("/portal/payments/{id}"),
        |browser| {
            let table = browser.wait_text("#settlement-transactions");
            assert!(table.contains("Burn on polygon"), "{table}");
            assert!(table.contains("Mint on base"), "{table}");
            assert!(table.contains("Counted with the burn"), "{table}");
        },
        ("#settlement-transactions", "portal-payment-settled-across"),
    );
    books::settle_and_assert_balanced_on(&s.worker, &[&s.polygon, &s.base]);
}

/// The attestation service out of reach for many runs: the burn is final and waits, nothing is
/// burnt again nor minted, the reason is kept; back, the one burn is minted and the payment paid
/// once.
#[test]
fn a_bridge_waits_for_its_attestation_without_burning_twice() {
    let s = Across::start();
    let (wallet, id) = s.burnt_awaiting_attestation("5.00");
    for _ in 0..25 {
        s.run();
    }
    assert_eq!(s.raw_status(id), "succeeded");
    assert_eq!(s.legs(id), [("burn".to_owned(), "confirmed".to_owned())]);
    let (state, note) = s.bridge(id).expect("the bridge");
    assert_eq!(state, "attesting");
    assert!(
        note.as_deref()
            .is_some_and(|n| n.contains("attestation service")),
        "{note:?}"
    );
    s.start_service(chain::LOCAL_ATTESTER_KEY);
    s.until(id, "paid");
    assert_eq!(
        s.legs(id),
        [
            ("burn".to_owned(), "confirmed".to_owned()),
            ("mint".to_owned(), "confirmed".to_owned())
        ]
    );
    s.assert_paid_once(id, &wallet);
}

/// Anyone may receive an attested message: a third party mints before the treasury does, and
/// its transaction is the settlement's (the treasury signs no mint), the payment paid once.
#[test]
fn a_mint_by_a_third_party_first_is_the_settlement() {
    let s = Across::start();
    let (wallet, id) = s.burnt_awaiting_attestation("6.00");
    s.start_service(chain::LOCAL_ATTESTER_KEY);
    let theirs = s.received_by_a_third_party(&s.burn_hash(id));
    s.until(id, "paid");
    let t = s.worker.transaction(0, id);
    assert_eq!(t["tx_hashes"]["settlement"], theirs.as_str(), "{t}");
    assert_eq!(t["networks"]["settlement"], "base", "{t}");
    assert_eq!(s.legs(id), [("burn".to_owned(), "confirmed".to_owned())]);
    for _ in 0..3 {
        s.run();
    }
    assert_eq!(s.paid_events(id), 1);
    assert_eq!(
        s.base.balance_of(&s.usdc("base"), &wallet),
        units(&t["amount"]["net"])
    );
    books::settle_and_assert_balanced_on(&s.worker, &[&s.polygon, &s.base]);
}

/// An attestation signed by a key the destination's transmitter does not take is refused: no
/// mint is signed, the reason is kept; the real attester's is minted.
#[test]
fn an_attestation_by_a_key_that_is_no_attester_is_refused() {
    let s = Across::start();
    let (_, id) = s.burnt_awaiting_attestation("4.00");
    // Anvil's well-known account 8: a key, but not the transmitter's attester.
    s.start_service("0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97");
    let refused = eventually("the refusal", Duration::from_secs(60), || {
        s.run();
        s.bridge(id)
            .and_then(|b| b.1)
            .filter(|n| n.contains("refused"))
    });
    assert!(refused.contains("attest"), "{refused}");
    for _ in 0..3 {
        s.run();
    }
    assert_eq!(s.legs(id), [("burn".to_owned(), "confirmed".to_owned())]);
    assert_eq!(s.raw_status(id), "succeeded");
    s.start_service(chain::LOCAL_ATTESTER_KEY);
    s.until(id, "paid");
    assert_eq!(s.paid_events(id), 1);
    books::settle_and_assert_balanced_on(&s.worker, &[&s.polygon, &s.base]);
}

/// The treasury's mint and a third party's in the same block, the third party's first: the
/// treasury's reverts ("Nonce already used"), the message is found received by the other
/// (its `MessageReceived`), that transaction is the settlement's, and the payment is paid once
/// with the treasury's reverted mint's gas booked.
#[test]
fn a_treasury_mint_refused_as_already_received_is_success() {
    let s = Across::start();
    let (wallet, id) = s.burnt_awaiting_attestation("3.00");
    // Base stops mining: what is sent waits in its pool.
    s.base.rpc("evm_setIntervalMining", json!([0]));
    s.base.rpc("evm_setAutomine", json!([false]));
    s.start_service(chain::LOCAL_ATTESTER_KEY);
    eventually(
        "the treasury's mint to be out",
        Duration::from_secs(60),
        || {
            s.polygon.mine(1);
            s.worker.cron();
            s.legs(id)
                .iter()
                .any(|(leg, state)| leg == "mint" && state == "live")
                .then_some(())
        },
    );
    let (message, attestation) = s.attested(&s.burn_hash(id));
    // A relayer's mint, paying far more per gas: mined first.
    let theirs = s.base.rpc(
        "eth_sendTransaction",
        json!([{"from": s.base.account(5), "to": s.cctp("base", "message_transmitter"),
            "data": cctp::receive_message_call(&message, &attestation), "gas": "0x7a120",
            "maxFeePerGas": "0x2540be4000", "maxPriorityFeePerGas": "0x2540be4000"}]),
    );
    let theirs = theirs.as_str().unwrap().to_owned();
    s.base.mine(1);
    assert_eq!(s.base.receipt(&theirs)["status"], "0x1");
    s.base.rpc("evm_setAutomine", json!([true]));
    s.until(id, "paid");
    let t = s.worker.transaction(0, id);
    assert_eq!(t["tx_hashes"]["settlement"], theirs.as_str(), "{t}");
    assert_eq!(
        s.legs(id),
        [
            ("burn".to_owned(), "confirmed".to_owned()),
            ("mint".to_owned(), "failed".to_owned())
        ],
        "the treasury's own mint reverted"
    );
    assert_eq!(s.paid_events(id), 1);
    assert_eq!(
        s.base.balance_of(&s.usdc("base"), &wallet),
        units(&t["amount"]["net"])
    );
    books::settle_and_assert_balanced_on(&s.worker, &[&s.polygon, &s.base]);
}

/// Both chains' nodes lying for 25 runs (half the receipts answered `null`, half the broadcasts
/// refused), through the burn, the attestation and the mint: exactly one burn and one mint are
/// mined, and the payment is paid once with the net in the wallet.
#[test]
fn lying_nodes_on_both_chains_make_one_burn_and_one_mint() {
    let s = Across::start_with(true);
    let wallet = s.merchant_paid_on_base();
    let (on_polygon, on_base) = s.proxies.as_ref().expect("the proxies");
    for node in [on_polygon, on_base] {
        node.set("eth_getTransactionReceipt", Fault::Null, 50);
        node.set("eth_sendRawTransaction", Fault::Refuse, 50);
    }
    let id = s.paid("8.00");
    for _ in 0..25 {
        s.run();
    }
    assert!(
        on_polygon.faulted("eth_getTransactionReceipt") + on_base.faulted("eth_sendRawTransaction")
            > 0,
        "the nodes lied"
    );
    on_polygon.heal();
    on_base.heal();
    s.until(id, "paid");
    for _ in 0..3 {
        s.run();
    }
    // On chain: one DepositForBurn for the wallet, one MintAndWithdraw to it.
    assert_eq!(s.on_chain(), (1, 1), "one burn and one mint");
    let confirmed: Vec<String> = s
        .legs(id)
        .into_iter()
        .filter(|(_, state)| state == "confirmed")
        .map(|(leg, _)| leg)
        .collect();
    assert_eq!(confirmed, ["burn", "mint"]);
    s.assert_paid_once(id, &wallet);
}

/// Four cron runs at once, again and again, from the payment to its mint: the settlement's
/// claims, the burn's nonce and the bridge's guarded move to `minting` let one run start each
/// leg, so exactly one burn and one mint are signed and the payment is paid once.
#[test]
fn racing_cron_runs_sign_one_burn_and_one_mint() {
    let s = Across::start();
    let wallet = s.merchant_paid_on_base();
    let id = s.paid("9.00");
    eventually("the payment paid", Duration::from_secs(180), || {
        s.polygon.mine(1);
        s.base.mine(1);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| s.worker.cron());
            }
        });
        (s.raw_status(id) == "paid").then_some(())
    });
    s.assert_settled_once(id, &wallet);
}

/// The worker killed (SIGKILL) at each broadcast it makes, the moment the node has the
/// transaction and before the worker hears so (the deposit's sweep, the burn, the mint), and
/// started again on the same database: it resumes where it was (the burn followed, attested and
/// minted, the mint followed to the end), so one burn and one mint are mined and the payment is
/// paid once, the books balanced on both chains.
#[test]
fn a_worker_killed_between_the_burn_and_the_mint_resumes_with_the_mint() {
    let s = Across::start_with(true);
    let wallet = s.merchant_paid_on_base();
    let id = s.paid("6.00");
    let mut kills = Vec::new();
    eventually("the payment paid", Duration::from_secs(300), || {
        kills.extend(s.run_killed_at_broadcast(id));
        (s.raw_status(id) == "paid").then_some(())
    });
    let leg = |leg: &str, state: &str| (leg.to_owned(), state.to_owned());
    assert!(
        kills.contains(&vec![leg("burn", "live")]),
        "killed as the burn went out: {kills:?}"
    );
    assert!(
        kills.contains(&vec![leg("burn", "confirmed"), leg("mint", "live")]),
        "killed as the mint went out, after the burn: {kills:?}"
    );
    assert_eq!(s.on_chain(), (1, 1), "one burn and one mint");
    s.assert_settled_once(id, &wallet);
}

// ---------------------------------------------------------------------------------------------
// Moving the treasury's float between networks

/// `method path` of `worker`'s operator API, with the operator's token when `token`.
fn operator(
    worker: &Worker,
    method: Method,
    path: &str,
    body: Option<Value>,
    token: bool,
) -> Reply {
    let mut request = worker.request(method, path);
    if token {
        request = request.bearer_auth(chain::OPERATOR_TOKEN);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    worker.send(request, None)
}

/// `POST /operator/float-moves` of `amount` USDC from `from` to `to` under `reference`.
fn move_float(worker: &Worker, from: &str, to: &str, amount: &str, reference: &str) -> Reply {
    let body = json!({"from": from, "to": to, "amount": amount, "reference": reference});
    operator(
        worker,
        Method::POST,
        "/operator/float-moves",
        Some(body),
        true,
    )
}

impl Across {
    /// `method path` of the operator API ([`operator`]).
    fn operator(&self, method: Method, path: &str, body: Option<Value>, token: bool) -> Reply {
        operator(&self.worker, method, path, body, token)
    }

    /// [`move_float`] on this worker.
    fn move_float(&self, from: &str, to: &str, amount: &str, reference: &str) -> Reply {
        move_float(&self.worker, from, to, amount, reference)
    }

    /// The move `id` as the operator API reads it.
    fn float_move(&self, id: &str) -> Value {
        let read = self.operator(
            Method::GET,
            &format!("/operator/float-moves/{id}"),
            None,
            true,
        );
        assert_eq!(read.status, 200, "{}", read.text);
        read.json()
    }

    /// The treasury's address (the same on both chains).
    fn treasury(&self) -> String {
        self.polygon.account(2).to_ascii_lowercase()
    }

    /// The treasury's USDC on `network` by the books (its posted balance), once the cron has
    /// booked its funding: the local chain funds it before the worker starts.
    fn booked_treasury_usdc(&self, network: &str, anvil: &Anvil) -> u128 {
        let usdc = self.usdc(network);
        let on_chain = anvil.balance_of(&usdc, &self.treasury());
        let read = || -> Option<u128> {
            let (debits, credits): (String, String) = self
                .worker
                .database()
                .query_row(
                    "SELECT debits_posted, credits_posted FROM ledger_accounts \
                     WHERE kind = 'treasury' AND owner = '' AND network = ?1 AND token = ?2",
                    [network, usdc.as_str()],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .ok()?;
            debits
                .parse::<u128>()
                .ok()?
                .checked_sub(credits.parse::<u128>().ok()?)
        };
        self.runs_until(
            &format!("the treasury's USDC on {network} to be booked"),
            60,
            || read() == Some(on_chain),
        );
        on_chain
    }
}

#[test]
fn the_operator_moves_usdc_float_from_polygon_to_base_once() {
    let s = Across::start();
    let treasury = s.treasury();
    let (usdc_polygon, usdc_base) = (s.usdc("polygon"), s.usdc("base"));
    let on_polygon = s.booked_treasury_usdc("polygon", &s.polygon);
    let on_base = s.base.balance_of(&usdc_base, &treasury);
    assert!(
        on_polygon >= 25_000_000,
        "the local treasury holds USDC on Polygon"
    );

    // Five requests with one reference, in parallel: one move, one burn.
    let replies: Vec<Reply> = std::thread::scope(|scope| {
        let asks: Vec<_> = (0..5)
            .map(|_| {
                scope.spawn(|| {
                    move_float(&s.worker, "polygon", "base", "25", "rebalance-2026-11-28")
                })
            })
            .collect();
        asks.into_iter().map(|a| a.join().unwrap()).collect()
    });
    let made: Vec<&Reply> = replies.iter().filter(|r| r.status == 201).collect();
    assert_eq!(
        made.len(),
        1,
        "one request made the move: {:?}",
        replies
            .iter()
            .map(|r| (r.status, &r.text))
            .collect::<Vec<_>>()
    );
    let id = made[0].json()["id"].as_str().unwrap().to_owned();
    for reply in &replies {
        assert!(
            reply.status == 201 || (reply.status == 200 && reply.json()["id"] == id.as_str()),
            "a repeat answers the same move: {} {}",
            reply.status,
            reply.text
        );
    }
    let asked = made[0].json();
    assert_eq!(asked["from"], "polygon", "{asked}");
    assert_eq!(asked["to"], "base", "{asked}");
    assert_eq!(asked["amount"], "25", "{asked}");
    assert_eq!(asked["state"], "burning", "{asked}");
    // Every institution's overview shows the move in flight, read only.
    super::shard::look_at(
        &s.worker,
        "/portal",
        |browser| {
            let table = browser.wait_text("#float-moves");
            assert!(
                table.contains("polygon") && table.contains("base"),
                "{table}"
            );
            assert!(table.contains("25") && table.contains("Burning"), "{table}");
        },
        ("#treasury-float", "portal-overview-float-moving"),
    );

    s.runs_until("the float move to be moved", 180, || {
        s.float_move(&id)["state"] == "moved"
    });
    let moved = s.float_move(&id);
    let fee = Decimal::from_str(moved["fee"].as_str().unwrap()).unwrap();
    let received = Decimal::from_str(moved["received"].as_str().unwrap()).unwrap();
    assert_eq!(received + fee, Decimal::from(25), "{moved}");
    // On chain: one burn from Polygon's treasury, minting to the treasury itself on Base.
    assert_eq!(s.on_chain(), (1, 1), "one burn and one mint");
    let burn = moved["burn_tx_hash"].as_str().expect("the burn's hash");
    assert_eq!(
        s.mint_recipient_of(burn),
        treasury.trim_start_matches("0x"),
        "the burn mints to the treasury"
    );
    let mint = moved["mint_tx_hash"].as_str().expect("the mint's hash");
    assert_eq!(s.base.receipt(mint)["status"], "0x1");
    assert_eq!(
        s.polygon.balance_of(&usdc_polygon, &treasury),
        on_polygon - 25_000_000,
        "the treasury on Polygon holds exactly 25 USDC less"
    );
    assert_eq!(
        s.base.balance_of(&usdc_base, &treasury) - on_base,
        units(&json!(received.to_string())),
        "the treasury on Base holds exactly what was minted more"
    );

    // The same reference again is the same move; for another amount it is refused.
    let again = s.move_float("polygon", "base", "25", "rebalance-2026-11-28");
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json()["id"], id.as_str());
    assert_eq!(again.json()["state"], "moved");
    let other = s.move_float("polygon", "base", "26", "rebalance-2026-11-28");
    assert_eq!(other.status, 409, "{}", other.text);
    assert!(other.text.contains("already made move"), "{}", other.text);
    let listed = s.operator(Method::GET, "/operator/float-moves", None, true);
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(
        listed.json()["data"].as_array().map(Vec::len),
        Some(1),
        "{}",
        listed.text
    );
    for _ in 0..3 {
        s.run();
    }
    assert_eq!(s.on_chain(), (1, 1), "nothing burnt or minted twice");
    books::settle_and_assert_balanced_on(&s.worker, &[&s.polygon, &s.base]);
}

#[test]
fn a_float_move_is_refused_with_the_reason_and_racing_moves_never_overdraw() {
    let s = Across::start();
    let booked = s.booked_treasury_usdc("polygon", &s.polygon);
    let refused = |reply: &Reply, status: u16, words: &str| {
        assert_eq!(reply.status, status, "{}", reply.text);
        assert!(reply.text.contains(words), "{words:?} in {}", reply.text);
    };
    refused(
        &s.move_float("polygon", "polygon", "1", "a"),
        400,
        "two different networks",
    );
    refused(
        &s.move_float("polygon", "mars", "1", "b"),
        400,
        "configured network",
    );
    refused(
        &s.move_float("polygon", "base", "-1", "c"),
        400,
        "positive USDC amount",
    );
    refused(
        &s.move_float("polygon", "base", "1.0000001", "d"),
        400,
        "at most 6 decimals",
    );
    refused(&s.move_float("polygon", "base", "1", ""), 400, "reference");
    let whole = (booked / 1_000_000 + 1).to_string();
    refused(
        &s.move_float("polygon", "base", &whole, "e"),
        409,
        "at most",
    );
    let anonymous = s.operator(
        Method::POST,
        "/operator/float-moves",
        Some(json!({"from": "polygon", "to": "base", "amount": "1", "reference": "f"})),
        false,
    );
    assert_eq!(anonymous.status, 401, "{}", anonymous.text);
    refused(
        &s.operator(Method::GET, "/operator/float-moves/fm_nothing", None, true),
        404,
        "no float move",
    );

    // Three moves of 40% of the float each, in parallel: never more than the float moves.
    let share = (booked * 2 / 5 / 1_000_000).to_string();
    let replies: Vec<Reply> = std::thread::scope(|scope| {
        let asks: Vec<_> = (0..3)
            .map(|n| {
                let share = &share;
                let worker = &s.worker;
                scope.spawn(move || {
                    move_float(worker, "polygon", "base", share, &format!("race-{n}"))
                })
            })
            .collect();
        asks.into_iter().map(|a| a.join().unwrap()).collect()
    });
    let made = replies.iter().filter(|r| r.status == 201).count();
    assert!(
        (1..=2).contains(&made),
        "one or two of three 40% moves are made: {:?}",
        replies
            .iter()
            .map(|r| (r.status, &r.text))
            .collect::<Vec<_>>()
    );
    for reply in replies.iter().filter(|r| r.status != 201) {
        assert_eq!(reply.status, 409, "{}", reply.text);
    }
    s.runs_until("the float moves to be moved", 180, || {
        let listed = s
            .operator(Method::GET, "/operator/float-moves", None, true)
            .json();
        listed["data"]
            .as_array()
            .is_some_and(|moves| moves.iter().all(|m| m["state"] == "moved"))
    });
    let (burns, mints) = s.on_chain();
    assert_eq!(
        (burns, mints),
        (made, made),
        "one burn and one mint per move made"
    );
    books::settle_and_assert_balanced_on(&s.worker, &[&s.polygon, &s.base]);
}

/// A third party receives a float move's attested message first: its transaction is the move's
/// mint (the treasury signs none), the treasury on Base holds exactly what was minted more, and
/// the arrival, before the worker hears of it, is never booked as the operator's funding.
#[test]
fn a_float_move_minted_by_a_third_party_first_is_moved_once() {
    let s = Across::start();
    let treasury = s.treasury();
    let usdc_base = s.usdc("base");
    s.booked_treasury_usdc("polygon", &s.polygon);
    let on_base = s.base.balance_of(&usdc_base, &treasury);
    s.stop_service();
    let made = s.move_float("polygon", "base", "10", "third-party-mint");
    assert_eq!(made.status, 201, "{}", made.text);
    let id = made.json()["id"].as_str().unwrap().to_owned();
    s.runs_until("the move's burn to be final", 120, || {
        s.float_move(&id)["state"] == "attesting"
    });
    s.start_service(chain::LOCAL_ATTESTER_KEY);
    let burn = s.float_move(&id)["burn_tx_hash"]
        .as_str()
        .expect("the burn's hash")
        .to_owned();
    let theirs = s.received_by_a_third_party(&burn);
    s.runs_until("the float move to be moved", 120, || {
        s.float_move(&id)["state"] == "moved"
    });
    let moved = s.float_move(&id);
    assert_eq!(moved["mint_tx_hash"], theirs.as_str(), "{moved}");
    let received = Decimal::from_str(moved["received"].as_str().unwrap()).unwrap();
    assert_eq!(
        s.base.balance_of(&usdc_base, &treasury) - on_base,
        units(&json!(received.to_string()))
    );
    let signed: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT count(*) FROM chain_sends WHERE float_move_id = ?1 AND leg = 'mint'",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(signed, 0, "the treasury signed no mint");
    assert_eq!(s.on_chain(), (1, 1));
    books::settle_and_assert_balanced_on(&s.worker, &[&s.polygon, &s.base]);
}
