//! The books of a test worker against its chain: the same checks as `cargo run -p xtask --
//! reconcile --local` ([`xtask::reconcile`]), on the worker's local D1 and its node. Every ledger
//! balances and its kept totals are its transfers'; the treasury and every deposit address hold
//! on chain, at the confirmed block, what the books say. For the end of a test that moves money.

use reqwest::Method;
use serde_json::Value;
use xtask::reconcile::{self, Books, Config, Report};

use crate::chain::Anvil;
use crate::Worker;

/// What reconciling `worker`'s books with the chain finds, reading the chain from `anvil`
/// (whatever proxy the worker itself reads it through).
pub fn check(worker: &Worker, anvil: &Anvil) -> Report {
    let mut chains: Value = serde_json::from_str(
        worker
            .var("PAYRAIL_CHAINS")
            .expect("the worker watches a chain (PAYRAIL_CHAINS)"),
    )
    .expect("PAYRAIL_CHAINS is JSON");
    for network in chains
        .as_object_mut()
        .into_iter()
        .flat_map(|m| m.values_mut())
    {
        network["rpc_url"] = Value::String(anvil.url.clone());
    }
    let treasury = worker
        .var("PAYRAIL_TREASURY_KEY")
        .map(|_| treasury_address(worker));
    let config = Config::new(
        &chains.to_string(),
        treasury.as_deref(),
        worker.var("PAYRAIL_EVM_XPUB"),
    )
    .expect("the reconciliation settings");
    reconcile::reconcile(&Books::Local(worker.persist_to().to_path_buf()), &config)
        .unwrap_or_else(|e| panic!("reconcile: {e}"))
}

/// What reconciling `worker`'s books with its chains finds, each read from its own node as the
/// worker's `PAYRAIL_CHAINS` names it (several chains, no proxy between).
pub fn check_as_configured(worker: &Worker) -> Report {
    let chains = worker
        .var("PAYRAIL_CHAINS")
        .expect("the worker watches a chain (PAYRAIL_CHAINS)");
    let treasury = worker
        .var("PAYRAIL_TREASURY_KEY")
        .map(|_| treasury_address(worker));
    let config = Config::new(chains, treasury.as_deref(), worker.var("PAYRAIL_EVM_XPUB"))
        .expect("the reconciliation settings");
    reconcile::reconcile(&Books::Local(worker.persist_to().to_path_buf()), &config)
        .unwrap_or_else(|e| panic!("reconcile: {e}"))
}

/// [`settle_and_assert_balanced`] on several chains (`anvils`, a block mined on each before
/// each run), each read from its own node.
pub fn settle_and_assert_balanced_on(worker: &Worker, anvils: &[&Anvil]) {
    settle_until_clean(worker, anvils, || check_as_configured(worker));
}

/// Panics, with the whole report, unless the books balance and match the chain.
pub fn assert_balanced(worker: &Worker, anvil: &Anvil) {
    let report = check(worker, anvil);
    assert!(
        report.clean(),
        "the books do not match:\n{}",
        report.render()
    );
}

/// Runs the cron and mines a block until nothing is in flight and the books balance and match
/// the chain (a transaction just mined is booked once it is deep enough); panics with the last
/// report after a minute.
pub fn settle_and_assert_balanced(worker: &Worker, anvil: &Anvil) {
    settle_until_clean(worker, &[anvil], || check(worker, anvil));
}

/// Runs the cron, a block mined on each of `anvils` before each run, until `check` finds the
/// books clean; panics with its last report after a minute.
fn settle_until_clean(worker: &Worker, anvils: &[&Anvil], check: impl Fn() -> Report) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        for anvil in anvils {
            anvil.mine(1);
        }
        worker.cron();
        let report = check();
        if report.clean() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the books do not match:\n{}",
            report.render()
        );
    }
}

/// The treasury's address, as the portal shows it.
pub fn treasury_address(worker: &Worker) -> String {
    let portal = worker.portal_login(0);
    let networks = worker.portal(Method::GET, "/portal/api/networks", Some(&portal), None);
    assert_eq!(networks.status, 200, "{}", networks.text);
    networks.json()["data"][0]["treasury"]["address"]
        .as_str()
        .unwrap_or_else(|| panic!("the treasury is shown: {}", networks.text))
        .to_ascii_lowercase()
}
