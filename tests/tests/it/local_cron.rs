//! The local cron, as `scripts/dev` runs it: a worker on the local chain `scripts/dev` sets up
//! (`scripts/local-chain.js`: tokens, price feeds, a funded treasury, a block every two seconds),
//! its cron trigger fired by `scripts/local-cron` alone (every two seconds here, every minute in
//! `scripts/dev`). A customer pays on chain with no page open, and nobody requests
//! `/__scheduled` nor the checkout's status: the payment is credited and settled to the merchant
//! all the same.

use std::time::Duration;

use payrail_tests::chain::{self, Anvil};
use payrail_tests::{eventually, Worker};
use serde_json::json;
use xtask::demo::DEMO_WALLETS;

/// How often the test's local cron fires, in seconds (`scripts/dev`: 60).
const PERIOD: u64 = 2;

#[test]
fn a_payment_on_chain_is_credited_and_settled_by_the_cron_alone() {
    let anvil = Anvil::start();
    let local = chain::local_chain(&[&anvil.url, "polygon", "base"]);
    let usdc = local["chains"]["polygon"]["tokens"]["USDC"]["address"]
        .as_str()
        .unwrap()
        .to_owned();
    let customer = local["customer"].as_str().unwrap().to_owned();
    let worker = chain::worker_on(&local, Some(PERIOD));

    let merchant = &worker.credentials.institutions[0].merchants[0];
    let session = worker.checkout_session(&json!({
        "publicKey": merchant.public_key, "amount": "7.00", "currency": "USD",
        "title": "Paid from a phone", "externalReference": "LOCAL-CRON-1",
        "redirectUrl": "https://shop.example/done", "allowCrypto": true
    }));
    let id = session["transaction_id"].as_i64().unwrap();
    let (address, units): (String, String) = worker
        .database()
        .query_row(
            "SELECT w.address, w.base_units FROM checkout_sessions s \
             JOIN deposit_watches w ON w.address = lower(s.deposit_address) \
             WHERE s.id = ?1 AND w.asset = 'USDC'",
            [session["id"].as_str().unwrap()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the session's USDC deposit address");
    let wallet = DEMO_WALLETS
        .iter()
        .find(|(network, _)| *network == "polygon")
        .unwrap()
        .1;
    let before = anvil.balance_of(&usdc, wallet);
    // The customer pays from a wallet and closes the page: from here on the test only reads
    // (the database, the partner API, the chain); it never asks for the page, its status, or a
    // cron run, and mines nothing (the node makes a block every two seconds).
    anvil.transfer(&usdc, &customer, &address, units.parse().unwrap());

    let raw = |worker: &Worker| -> String {
        worker
            .database()
            .query_row(
                "SELECT raw_status FROM transactions WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap()
    };
    eventually(
        "the payment to be credited by the cron",
        Duration::from_secs(60),
        || (raw(&worker) != "pending").then_some(()),
    );
    eventually(
        "the payment to be settled by the cron",
        Duration::from_secs(90),
        || (raw(&worker) == "paid").then_some(()),
    );
    let t = worker.transaction(0, id);
    assert_eq!(t["status"], "paid", "{t}");
    assert_eq!(t["networks"]["settlement"], "polygon", "{t}");
    let hash = t["tx_hashes"]["settlement"].as_str().expect("a settlement");
    assert_eq!(anvil.receipt(hash)["status"], "0x1");
    assert!(
        anvil.balance_of(&usdc, wallet) > before,
        "the merchant's wallet received the net"
    );
    // The runs were scripts/local-cron's: its log holds no failed run.
    let log = std::fs::read_to_string(worker.persist_to().join("local-cron.log")).unwrap();
    assert!(log.is_empty(), "local-cron reported: {log}");
}
