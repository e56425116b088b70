//! The money path against a node that misbehaves: the worker's chain is behind a proxy
//! ([`FaultyNode`]) that answers `null` for receipts, refuses broadcasts, drops and garbles
//! calls, or moves its price between two readers. Whatever it does, a payment is settled once,
//! a refund is paid once and recorded, the treasury never pays above its fee caps, and what
//! stalls is held with a reason.

use std::time::Duration;

use payrail_tests::eventually;
use payrail_tests::faults::{Fault, FaultyNode};
use serde_json::{json, Value};

use super::settlement::{
    d, pol_in_usd, start_faulty, start_faulty_on, start_faulty_with, wallet, wallet_on, Setup,
};

/// Cron runs (a block each) well past the point where a stuck transaction is acted on (3 × the
/// confirmation depth, at least 10 blocks).
const RUNS: usize = 25;

fn node(s: &Setup) -> &FaultyNode {
    s.node.as_ref().expect("a worker behind the faulty node")
}

/// What the treasury signed for `id`: (hash, state, wei per gas).
fn sends_priced(s: &Setup, id: i64) -> Vec<(String, String, u128)> {
    let db = s.worker.database();
    let mut statement = db
        .prepare(
            "SELECT c.tx_hash, c.state, c.gas_price FROM settlement_items i \
             JOIN chain_sends c ON c.id = i.send_id WHERE i.transaction_id = ?1 \
             ORDER BY c.created_at, c.sent_block",
        )
        .unwrap();
    statement
        .query_map([id], |r| {
            let price: String = r.get(2)?;
            Ok((r.get(0)?, r.get(1)?, price.parse().unwrap()))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The units of the payment's confirmed settlement.
fn settled_units(s: &Setup, id: i64) -> u128 {
    let units: String = s
        .worker
        .database()
        .query_row(
            "SELECT i.units FROM settlement_items i JOIN chain_sends c ON c.id = i.send_id \
             WHERE i.transaction_id = ?1 AND c.state = 'confirmed'",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    units.parse().unwrap()
}

/// A fifth of the calls of most methods fail, each in its own way (dropped, garbled, refused,
/// hung, oversized, `null`), and a tenth of the receipts are denied.
fn strike_at_random(faulty: &FaultyNode) {
    for (method, fault) in [
        ("eth_blockNumber", Fault::Drop),
        ("eth_getBlockByNumber", Fault::Garbage),
        ("eth_call", Fault::Refuse),
        ("eth_estimateGas", Fault::Hang),
        ("eth_getTransactionCount", Fault::Oversized),
        ("eth_sendRawTransaction", Fault::Refuse),
        ("eth_getTransactionByHash", Fault::Null),
        ("eth_getBalance", Fault::Drop),
        ("eth_chainId", Fault::Garbage),
    ] {
        faulty.set(method, fault, 20);
    }
    faulty.set("eth_getTransactionReceipt", Fault::Null, 10);
}

fn hold_reason(s: &Setup, id: i64) -> Option<String> {
    s.detail(id)["settlement_hold"]["reason"]
        .as_str()
        .map(str::to_owned)
}

#[test]
fn a_node_that_answers_null_receipts_never_makes_the_treasury_pay_twice() {
    let s = start_faulty(json!({}));
    let before = s.anvil.balance_of(&s.usdc, wallet());
    let id = s.paid(0, "20.00", "USD");
    node(&s).set("eth_getTransactionReceipt", Fault::Null, 100);
    for _ in 0..RUNS {
        s.worker.cron();
        s.anvil.mine(1);
    }
    assert!(node(&s).faulted("eth_getTransactionReceipt") >= RUNS / 2);
    let sends = sends_priced(&s, id);
    assert_eq!(
        sends.len(),
        1,
        "one transaction, never signed again: {sends:?}"
    );
    assert_eq!(sends[0].1, "live", "it waits for its receipt");
    let received = s.anvil.balance_of(&s.usdc, wallet()) - before;
    assert!(
        received > 0 && received < 20_000_000,
        "paid once, its net: {received}"
    );
    let reason = hold_reason(&s, id).expect("held with the reason");
    assert!(reason.contains("no receipt"), "{reason}");
    assert_eq!(s.raw_status(id), "succeeded", "not paid without a receipt");
    // The node recovers: the one transaction is confirmed, nothing more was sent.
    node(&s).heal();
    s.settle(&[id]);
    assert_eq!(sends_priced(&s, id)[0].1, "confirmed");
    assert_eq!(sends_priced(&s, id).len(), 1);
    assert_eq!(s.anvil.balance_of(&s.usdc, wallet()) - before, received);
    assert_eq!(settled_units(&s, id), received);
    assert!(
        s.detail(id)["settlement_hold"].is_null(),
        "the hold is cleared"
    );
    s.assert_books();
}

#[test]
fn a_node_that_refuses_broadcasts_stops_the_price_at_its_cap() {
    let s = start_faulty(json!({}));
    node(&s).set("eth_sendRawTransaction", Fault::Refuse, 100);
    let before = s.anvil.balance_of(&s.usdc, wallet());
    let id = s.paid(0, "15.00", "USD");
    // Each run finds it stuck (ten blocks on): it is replaced at a higher price until the cap
    // of ten times its first price, then held there.
    let reason = eventually("a hold at the cap", Duration::from_secs(120), || {
        s.anvil.mine(10);
        s.worker.cron();
        hold_reason(&s, id).filter(|r| r.contains("cap"))
    });
    assert!(
        !reason.contains("faulty node"),
        "the node's words stay in the log: {reason}"
    );
    let sends = sends_priced(&s, id);
    let first = sends[0].2;
    assert!(sends.len() > 1, "replaced while under the cap: {sends:?}");
    assert!(
        sends.iter().all(|(_, _, price)| *price <= 10 * first),
        "never above ten times the first price: {sends:?}"
    );
    for _ in 0..3 {
        s.anvil.mine(10);
        s.worker.cron();
    }
    assert_eq!(
        sends_priced(&s, id).len(),
        sends.len(),
        "no more once at the cap"
    );
    assert_eq!(
        s.anvil.balance_of(&s.usdc, wallet()),
        before,
        "nothing sent"
    );
    // Once the node takes it, the live one (the same bytes) is mined, and only it.
    node(&s).heal();
    s.settle(&[id]);
    let after = sends_priced(&s, id);
    let confirmed: Vec<_> = after.iter().filter(|c| c.1 == "confirmed").collect();
    assert_eq!(confirmed.len(), 1, "{after:?}");
    assert_eq!(
        s.anvil.balance_of(&s.usdc, wallet()) - before,
        settled_units(&s, id)
    );
    s.assert_books();
}

#[test]
fn a_stuck_settlement_stops_at_the_fee_cap_and_is_held() {
    // Capped at 3 gwei: the first price (below 1 gwei of base fee, × 5/4, plus the node's 1 gwei
    // tip) fits, a replacement once the base fee is 5 gwei does not.
    let s = start_faulty(json!({"max_gas_price_gwei": 3}));
    let id = s.paid(0, "20.00", "USD");
    s.anvil.rpc("evm_setAutomine", json!([false]));
    let first = eventually("a first transaction", Duration::from_secs(30), || {
        s.worker.cron();
        sends_priced(&s, id).first().cloned()
    });
    assert!(first.2 <= 3_000_000_000, "{first:?}");
    let reason = eventually("a hold at the cap", Duration::from_secs(90), || {
        s.anvil
            .rpc("anvil_setNextBlockBaseFeePerGas", json!(["0x12a05f200"]));
        s.anvil.mine(2);
        s.worker.cron();
        hold_reason(&s, id).filter(|r| r.contains("cap"))
    });
    assert!(reason.contains("3 gwei"), "{reason}");
    let sends = sends_priced(&s, id);
    assert_eq!(sends.len(), 1, "never replaced above the cap: {sends:?}");
    assert!(sends.iter().all(|(_, _, price)| *price <= 3_000_000_000));
    // The base fee falls again: the payment settles, once, never above the cap (the first
    // transaction, or a replacement the lower price allows).
    s.anvil
        .rpc("anvil_setNextBlockBaseFeePerGas", json!(["0x3b9aca00"]));
    s.anvil.rpc("evm_setAutomine", json!([true]));
    s.settle(&[id]);
    let sends = sends_priced(&s, id);
    assert_eq!(sends[0].0, first.0);
    assert_eq!(
        sends.iter().filter(|c| c.1 == "confirmed").count(),
        1,
        "{sends:?}"
    );
    assert!(sends.iter().all(|(_, _, price)| *price <= 3_000_000_000));
    s.assert_books();
}

#[test]
fn an_op_stack_chains_l1_data_fee_is_reserved_charged_and_booked_from_the_receipt() {
    // The chain acts out Base's L1 data fee: 0.00002 POL a transaction, which its oracle
    // bounds at 0.00003 (4 and 6 cents at the tests' 2,000 USD per POL).
    let s = start_faulty(json!({"l1_fee_oracle": "0x420000000000000000000000000000000000000F"}));
    let (fee, bound) = (20_000_000_000_000u128, 30_000_000_000_000u128);
    node(&s).charge_l1_fee(&s.treasury, fee, bound);
    let id = s.paid(0, "20.00", "USD");
    s.settle(&[id]);
    assert_eq!(
        node(&s).charged_l1_fees(),
        1,
        "one transaction, charged once"
    );
    let (send_id, tx_hash, gas_limit, price, l1_fee): (String, String, u64, String, String) = s
        .worker
        .database()
        .query_row(
            "SELECT c.id, c.tx_hash, c.gas_limit, c.gas_price, c.l1_fee FROM settlement_items i \
             JOIN chain_sends c ON c.id = i.send_id WHERE i.transaction_id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap();
    // Reserved at the oracle's bound, and the merchant's network fee is the gas and the bound
    // at the feed, fixed when it was signed.
    assert_eq!(l1_fee, bound.to_string());
    let price: u128 = price.parse().unwrap();
    let t = s.worker.transaction(0, id);
    assert_eq!(
        d(&t["amount"]["gas_fee"]),
        pol_in_usd(u128::from(gas_limit) * price + bound),
        "{t}"
    );
    // What was paid is the receipt's: its gas and its l1Fee, booked to the base unit.
    let receipt = s.anvil.receipt(&tx_hash);
    let used = u128::from_str_radix(
        receipt["gasUsed"]
            .as_str()
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    let booked: String = s
        .worker
        .database()
        .query_row(
            "SELECT amount FROM ledger_transfers WHERE code = 'gas' AND phase = 'single' \
             AND reference = ?1",
            [&send_id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(booked, (used * price + fee).to_string());
    // The books match the chain, which took the fee from the treasury.
    s.assert_books();
}

#[test]
fn under_random_node_faults_every_payment_settles_exactly_once() {
    let s = start_faulty(json!({}));
    let before = s.anvil.balance_of(&s.usdc, wallet());
    let ids: Vec<i64> = ["11.00", "12.00", "13.00"]
        .iter()
        .map(|amount| s.paid(0, amount, "USD"))
        .collect();
    let faulty = node(&s);
    strike_at_random(faulty);
    // The first settlement's broadcast is refused for sure, the rest at random.
    faulty.set("eth_sendRawTransaction", Fault::Refuse, 100);
    eventually("a refused broadcast", Duration::from_secs(60), || {
        s.worker.cron();
        (faulty.faulted("eth_sendRawTransaction") > 0).then_some(())
    });
    faulty.set("eth_sendRawTransaction", Fault::Refuse, 20);
    eventually(
        "every payment to be settled through the faults",
        Duration::from_secs(240),
        || {
            s.worker.cron();
            s.anvil.mine(1);
            ids.iter()
                .all(|id| s.raw_status(*id) == "paid")
                .then_some(())
        },
    );
    let mut settled = 0;
    for id in &ids {
        let sends = sends_priced(&s, *id);
        let confirmed: Vec<_> = sends.iter().filter(|c| c.1 == "confirmed").collect();
        assert_eq!(confirmed.len(), 1, "payment {id} settled once: {sends:?}");
        assert!(sends.iter().all(|c| c.1 != "failed"), "{sends:?}");
        settled += settled_units(&s, *id);
        let t = s.worker.transaction(0, *id);
        assert_eq!(
            t["tx_hashes"]["settlement"],
            Value::from(confirmed[0].0.clone())
        );
    }
    assert_eq!(
        s.anvil.balance_of(&s.usdc, wallet()) - before,
        settled,
        "the wallet received exactly what the confirmed transactions carried"
    );
    // The books are compared with the chain as it is: read through a node that tells the
    // truth (one in five of the lying node's chain ids is garbage, so which read of the check
    // fails depends only on how many calls came before it).
    faulty.heal();
    s.assert_books();
}

#[test]
fn under_random_faults_token_and_ether_payments_settle_once_and_refunds_pay_what_was_asked() {
    // Gas capped at 50 gwei: no transaction of the treasury's may be priced above it.
    let s = start_faulty_on(json!({"max_gas_price_gwei": 50}), "ethereum");
    let merchant = wallet_on("ethereum");
    let before = (
        s.anvil.balance_of(&s.usdc, merchant),
        s.anvil.ether_balance(merchant),
    );
    let tokens: Vec<i64> = ["11.00", "12.00", "13.00"]
        .iter()
        .map(|amount| s.paid(0, amount, "USD"))
        .collect();
    let ether: Vec<i64> = ["14.00", "15.00", "16.00"]
        .iter()
        .map(|amount| s.paid_in_ether(0, amount))
        .collect();
    let faulty = node(&s);
    strike_at_random(faulty);
    // One payment in each asset refunded in full before it settles, to fresh addresses.
    let refunded = [(tokens[0], "11.00"), (ether[0], "14.00")];
    let customers = [
        "0xa1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
        "0xa2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2",
    ];
    for ((id, amount), to) in refunded.iter().zip(customers) {
        let reply = s.refund(*id, amount, to, Some(&format!("faults-{id}")));
        assert_eq!(reply.status, 201, "{}", reply.text);
    }
    // A refused broadcast and a lie about a receipt for sure, then back to chance.
    for (method, fault, percent) in [
        ("eth_sendRawTransaction", Fault::Refuse, 20),
        ("eth_getTransactionReceipt", Fault::Null, 10),
    ] {
        faulty.set(method, fault.clone(), 100);
        eventually(method, Duration::from_secs(60), || {
            s.worker.cron();
            s.anvil.mine(1);
            (faulty.faulted(method) > 0).then_some(())
        });
        faulty.set(method, fault, percent);
    }
    let settling: Vec<i64> = tokens[1..].iter().chain(&ether[1..]).copied().collect();
    eventually(
        "every payment settled or refunded through the faults",
        Duration::from_secs(300),
        || {
            s.worker.cron();
            s.anvil.mine(1);
            (settling.iter().all(|id| s.raw_status(*id) == "paid")
                && refunded
                    .iter()
                    .all(|(id, _)| s.raw_status(*id) == "refunded"))
            .then_some(())
        },
    );
    // Each settled once, in its own asset; the wallet got exactly what was confirmed.
    let mut settled = (0u128, 0u128);
    for id in &settling {
        let sends = sends_priced(&s, *id);
        let confirmed = sends.iter().filter(|c| c.1 == "confirmed").count();
        assert_eq!(confirmed, 1, "payment {id} settled once: {sends:?}");
        assert!(sends.iter().all(|c| c.1 != "failed"), "{sends:?}");
        if tokens.contains(id) {
            settled.0 += settled_units(&s, *id);
        } else {
            settled.1 += settled_units(&s, *id);
        }
    }
    assert_eq!(s.anvil.balance_of(&s.usdc, merchant) - before.0, settled.0);
    assert_eq!(s.anvil.ether_balance(merchant) - before.1, settled.1);
    // The refunded ones never settled, and each customer got exactly what was asked, once.
    let db = s.worker.database();
    for ((id, _), to) in refunded.iter().zip(customers) {
        assert!(sends_priced(&s, *id).is_empty(), "payment {id} was settled");
        let units: String = db
            .query_row(
                "SELECT units FROM refunds WHERE transaction_id = ?1 AND state = 'done'",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        let got = if *id == tokens[0] {
            s.anvil.balance_of(&s.usdc, to)
        } else {
            s.anvil.ether_balance(to)
        };
        assert_eq!(got.to_string(), units, "refund of payment {id}");
    }
    // No transaction the treasury signed is priced above the cap.
    let prices: Vec<u128> = db
        .prepare("SELECT gas_price FROM chain_sends")
        .unwrap()
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(|p| p.unwrap().parse().unwrap())
        .collect();
    assert!(!prices.is_empty());
    assert!(
        prices.iter().all(|p| *p <= 50_000_000_000),
        "prices in wei: {prices:?}"
    );
    // Faults that struck: the run was not a healthy one.
    let struck: Vec<(&str, usize, usize)> = [
        "eth_call",
        "eth_getBalance",
        "eth_getTransactionReceipt",
        "eth_sendRawTransaction",
    ]
    .iter()
    .map(|m| (*m, faulty.calls(m), faulty.faulted(m)))
    .collect();
    assert!(struck.iter().all(|(_, _, f)| *f > 0), "{struck:?}");
    // The books balance and match the chain (read through a healed node).
    faulty.heal();
    s.assert_books();
}

#[test]
fn a_cron_run_stays_within_its_node_calls_and_the_watcher_cannot_starve_settlement() {
    // The fewest calls a run may have, 200: 80 for the watcher (a checkout's token check may
    // take 45, a top-up's 28), 60 for settlement (following one transaction may take 46), 20
    // for refunds, 20 for the books (one network's funding step takes 6, custody addresses the
    // rest), 20 for following custody's sweeps.
    let s = start_faulty_with(json!({}), &[("PAYRAIL_CRON_NODE_CALLS", "200")]);
    let id = s.paid(0, "14.00", "USD");
    // Thirty open checkouts whose addresses the watcher reads every run: more than its share
    // lets it read in one run.
    let key = &s.worker.credentials.institutions[0].merchants[0].public_key;
    for n in 0..30 {
        s.worker.checkout_session(&json!({
            "publicKey": key, "amount": "5.00", "currency": "USD", "title": "Open",
            "externalReference": format!("OPEN-{n}"),
            "redirectUrl": "https://shop.example/done", "allowCrypto": true
        }));
    }
    let faulty = node(&s);
    let mut runs = Vec::new();
    eventually("the payment to be settled", Duration::from_secs(90), || {
        let before = faulty.total_calls();
        s.worker.cron();
        runs.push(faulty.total_calls() - before);
        s.anvil.mine(1);
        (s.raw_status(id) == "paid").then_some(())
    });
    assert!(
        runs.iter().all(|calls| *calls <= 200),
        "node calls per cron run: {runs:?}"
    );
    // Every open address was read meanwhile or is read in the next runs: none is left behind.
    eventually(
        "every open address to be read",
        Duration::from_secs(60),
        || {
            let before = faulty.total_calls();
            s.worker.cron();
            assert!(faulty.total_calls() - before <= 200);
            let unread: i64 = s
                .worker
                .database()
                .query_row(
                    "SELECT count(*) FROM deposit_watches WHERE read_at = 0",
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            (unread == 0).then_some(())
        },
    );
    s.assert_books();
}

/// What the treasury signed for the refunds of `id`: (hash, state).
fn refund_sends(s: &Setup, id: i64) -> Vec<(String, String)> {
    let db = s.worker.database();
    let mut statement = db
        .prepare(
            "SELECT c.tx_hash, c.state FROM chain_sends c JOIN refunds r ON r.id = c.refund_id \
             WHERE r.transaction_id = ?1 ORDER BY c.created_at, c.sent_block",
        )
        .unwrap();
    statement
        .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Six cron runs at once find a refund's transaction stuck, and each reads a higher tip than
/// the one before it: one replacement is stored, and only what is stored is sent, so the
/// transaction mined is one the books know. The customer is paid once, the refund is recorded
/// and the books balance.
#[test]
fn racing_runs_replace_a_stuck_refund_once_while_the_price_moves_and_send_only_what_they_store() {
    let s = start_faulty(json!({}));
    let customer = s.anvil.account(7);
    let id = s.paid(0, "10.00", "USD");
    s.anvil.rpc("evm_setAutomine", json!([false]));
    let made = s.refund(id, "10.00", &customer, Some("stuck-refund"));
    assert_eq!(made.status, 201, "{}", made.text);
    let first = eventually(
        "the refund's first transaction",
        Duration::from_secs(30),
        || {
            s.worker.cron();
            refund_sends(&s, id).first().cloned()
        },
    );
    // Stuck behind a 5 gwei base fee for more than ten blocks; each run reads a tip a gwei above
    // the last, so racing replacements would sign different transactions for the nonce.
    s.anvil
        .rpc("anvil_setNextBlockBaseFeePerGas", json!(["0x12a05f200"]));
    s.anvil.mine(12);
    node(&s).set("eth_maxPriorityFeePerGas", Fault::Climb(1_000_000_000), 100);
    std::thread::scope(|scope| {
        for _ in 0..6 {
            scope.spawn(|| s.worker.cron());
        }
    });
    node(&s).heal();
    let sends = refund_sends(&s, id);
    assert_eq!(sends.len(), 2, "one replacement: {sends:?}");
    assert_eq!(sends[0], (first.0, "replaced".to_owned()));
    s.anvil.rpc("evm_setAutomine", json!([true]));
    s.refunds_done(id);
    let sends = refund_sends(&s, id);
    assert_eq!(
        sends[1].1, "confirmed",
        "the stored replacement was mined: {sends:?}"
    );
    assert_eq!(s.anvil.balance_of(&s.usdc, &customer), 10_000_000);
    s.assert_books();
}

/// A node behind what the books already hold final (a backend behind a load balancer, some
/// blocks behind the one that mined a settlement) funds nothing: at its confirmed block the
/// treasury still holds the payout that has left since, which would pass for the operator's
/// funding.
#[test]
fn a_node_behind_the_books_final_block_books_no_funding() {
    let s = start_faulty(json!({}));
    let id = s.paid(0, "15.00", "USD");
    s.settle(&[id]);
    s.assert_books();
    let db = s.worker.database();
    let fundings = || -> i64 {
        db.query_row(
            "SELECT count(*) FROM ledger_transfers WHERE code = 'funding'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    let mined: i64 = db
        .query_row(
            "SELECT max(block_number) FROM chain_sends WHERE state = 'confirmed'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let before = fundings();
    // The node's head one block before the payout's, so its confirmed block is older still.
    let lag = s.anvil.head() + 1 - u64::try_from(mined).unwrap();
    node(&s).set("eth_blockNumber", Fault::Lag(lag), 100);
    for _ in 0..3 {
        s.worker.cron();
    }
    assert_eq!(
        fundings(),
        before,
        "funding booked from a node behind the books"
    );
    node(&s).heal();
    s.assert_books();
}
