//! Payments in a network's own coin (ether), read from balances.
//!
//! Ether sent to an address leaves no log, and a contract (a multisig wallet, an exchange's
//! forwarder) may send it from inside another transaction, where no `to` field names the
//! address. The balance sees every kind, so it is what is read: a deposit address never sends
//! while it is watched (custody sweeps it only after its watch ends), so its balance only
//! grows, and each block where it grew is found by bisection on `eth_getBalance` at past
//! blocks. That block's transactions name the direct payments (a reverted one moved nothing:
//! its receipt says so); what the balance grew by beyond them came from inside a contract call
//! and is recorded under the block's hash, since standard JSON-RPC cannot name the transaction
//! (traces are not part of it).
//!
//! A merchant's top-up address is different: it stays watched, and custody sweeps it all the
//! same ([`Sent`]). Only a transaction it signs can take ether out of it (an account with no
//! code), and each one raises its nonce, so it is read by its balance *and* its nonce: between
//! two blocks with the same nonce the balance only grows, as for a deposit, and each block where
//! the nonce rose is read whole, its own transactions' value and fees (from their receipts)
//! added back, so what arrived there is exactly what the balance grew by plus what left. The
//! coin custody's gas address sends it (gas for a token's sweep) and what the address sends
//! itself are custody's own movements, booked by the sweep: never a payment.
//!
//! Every read is bounded: at most [`MAX_BALANCE_READS`] balance (and nonce) reads and
//! [`MAX_BLOCKS`] blocks a check; what is left is read at the next check, from the last block
//! fully accounted for.

use std::collections::BTreeMap;

use payrail_evm::Token;
use serde_json::{json, Value};

use super::error::{ChainError, ChainResult};
use super::evm::Transfer;
use super::rpc::{self, Node};

/// Most `eth_getBalance` requests one check makes.
const MAX_BALANCE_READS: usize = 32;
/// Most blocks (with their transactions) one check reads.
const MAX_BLOCKS: usize = 8;
/// Largest block answer read (a block's gas limit bounds its size).
const MAX_BLOCK: usize = 8 * 1024 * 1024;
/// Most direct payments in one block whose receipts are read, when some must have failed.
const MAX_RECEIPTS: usize = 16;
/// The most node calls one [`read`] makes.
pub const MOST_CALLS: u32 = (MAX_BALANCE_READS + MAX_BLOCKS * (1 + MAX_RECEIPTS)) as u32;

/// What one check found: the payments to the address in blocks `from..=read_to`, and the time
/// of each of their blocks.
#[derive(Debug, Default)]
pub struct Found {
    /// The payments, in block order.
    pub transfers: Vec<Transfer>,
    /// Unix time of each block a payment is in.
    pub times: BTreeMap<u64, u64>,
    /// Every block up to this one is accounted for.
    pub read_to: u64,
}

/// How an address that custody may sweep while it is watched (a merchant's top-up address) is
/// read: by its nonce as well as its balance, with custody's own movements told apart.
#[derive(Debug, Clone, Copy)]
pub struct Sent<'a> {
    /// The custody gas address, lower case: the coin it sends is gas for a sweep, not a payment.
    pub gas: Option<&'a str>,
}

/// A block where the address's balance or nonce changed.
struct Changed {
    block: u64,
    before: u128,
    after: u128,
    /// How many transactions the address sent in it.
    sends: u64,
}

/// Reads the payments in ether to `address` in blocks `from..=until` (`from` at least 1). An
/// address custody may sweep while it is watched is read with `sent` (its nonce too, and its
/// own movements told apart); any other must never send.
pub async fn read(
    node: &Node,
    address: &str,
    from: u64,
    until: u64,
    sent: Option<Sent<'_>>,
) -> ChainResult<Found> {
    let state = |block: u64| async move {
        let tag = format!("{block:#x}");
        let answer = rpc::call(node, "eth_getBalance", json!([address, tag])).await?;
        let balance = wei(&answer)
            .ok_or_else(|| ChainError::answer("the node's balance is not a quantity"))?;
        let nonce = match sent {
            None => 0,
            Some(_) => rpc::quantity(
                &rpc::call(node, "eth_getTransactionCount", json!([address, tag])).await?,
            )?,
        };
        ChainResult::Ok((balance, nonce))
    };
    // Each state read is a balance, and (for an address that sends) its nonce.
    let per_read = if sent.is_some() { 2 } else { 1 };
    let before = from - 1;
    let mut reads = 2 * per_read;
    let first = state(before).await?;
    let last = state(until).await?;
    // Segments (start, its state, end, its state) still to account for, the earliest on top:
    // the blocks where something changed come out in order.
    let mut todo = vec![(before, first, until, last)];
    let mut changed: Vec<Changed> = Vec::new();
    let mut read_to = before;
    while let Some((lo, (at_lo, n_lo), hi, (at_hi, n_hi))) = todo.pop() {
        let Some(sends) = n_hi.checked_sub(n_lo) else {
            return Err(ChainError::answer(format!(
                "the address's nonce fell between blocks {lo} and {hi}"
            )));
        };
        if sends == 0 && at_hi < at_lo {
            return Err(ChainError::answer(format!(
                "the balance fell between blocks {lo} and {hi} with no transaction of the \
                 address: its balance no longer measures what it received"
            )));
        }
        if (sends == 0 && at_hi == at_lo) || hi == lo + 1 {
            if sends > 0 || at_hi > at_lo {
                if changed.len() == MAX_BLOCKS {
                    break;
                }
                changed.push(Changed {
                    block: hi,
                    before: at_lo,
                    after: at_hi,
                    sends,
                });
            }
            read_to = hi;
            continue;
        }
        if reads + per_read > MAX_BALANCE_READS {
            break;
        }
        let mid = lo + (hi - lo) / 2;
        let at_mid = state(mid).await?;
        reads += per_read;
        todo.push((mid, at_mid, hi, (at_hi, n_hi)));
        todo.push((lo, (at_lo, n_lo), mid, at_mid));
    }
    let mut found = Found {
        read_to,
        ..Found::default()
    };
    let own: Vec<&str> = match sent {
        Some(s) => s.gas.into_iter().chain([address]).collect(),
        None => Vec::new(),
    };
    for c in changed {
        let number = c.block;
        let block = rpc::call_capped(
            node,
            "eth_getBlockByNumber",
            json!([format!("{number:#x}"), true]),
            MAX_BLOCK,
        )
        .await?;
        let time = rpc::quantity(&block["timestamp"])?;
        // What the address itself sent in the block: each transaction's value (if it
        // succeeded) and its fees, from its receipt.
        let mine = sent_by(&block, address)?;
        if u64::try_from(mine.len()).ok() != Some(c.sends) {
            return Err(ChainError::answer(format!(
                "block {number}: the address's nonce rose by {}, but the block holds {} of its \
                 transactions",
                c.sends,
                mine.len()
            )));
        }
        if mine.len() > MAX_RECEIPTS {
            return Err(ChainError::rule(format!(
                "block {number} holds {} transactions of the address: more than {MAX_RECEIPTS} \
                 receipts to read",
                mine.len()
            )));
        }
        let mut left = 0u128;
        for (hash, value) in &mine {
            let receipt = rpc::call(node, "eth_getTransactionReceipt", json!([hash])).await?;
            left = left
                .checked_add(spent(&receipt, *value)?)
                .ok_or_else(|| ChainError::answer("the address's sends add up past 128 bits"))?;
        }
        // What arrived: what the balance grew by, plus what left.
        let arrived = c
            .after
            .checked_add(left)
            .and_then(|a| a.checked_sub(c.before))
            .ok_or_else(|| {
                ChainError::answer(format!(
                    "block {number}: the balance fell by more than the address sent"
                ))
            })?;
        if arrived == 0 {
            continue;
        }
        let (theirs, ours) = split_payments(&block, address, &own)?;
        let mut direct: Vec<(String, u128, u64)> = theirs.iter().chain(&ours).cloned().collect();
        if direct.iter().map(|t| t.1).sum::<u128>() > arrived {
            // More was sent directly than arrived: some of it reverted.
            direct = succeeded(node, direct, MAX_RECEIPTS - mine.len()).await?;
        }
        // Custody's own coin (gas for a sweep, from its gas address) is no payment.
        let custody: u128 = direct
            .iter()
            .filter(|t| ours.iter().any(|o| o.0 == t.0))
            .map(|t| t.1)
            .sum();
        direct.retain(|t| !ours.iter().any(|o| o.0 == t.0));
        let growth = arrived.checked_sub(custody).ok_or_else(|| {
            ChainError::answer(format!(
                "block {number}: custody's coin to the address exceeds what arrived"
            ))
        })?;
        if growth == 0 {
            continue;
        }
        found
            .transfers
            .extend(attribute(&block, address, number, growth, &direct)?);
        found.times.insert(number, time);
    }
    Ok(found)
}

/// A transaction's value (wei) and hash, as the node's block body gives them. Pure.
fn value_and_hash(tx: &Value) -> ChainResult<(u128, &str)> {
    let value = wei(&tx["value"])
        .ok_or_else(|| ChainError::answer("a transaction's value is unreadable"))?;
    let hash = tx["hash"]
        .as_str()
        .ok_or_else(|| ChainError::answer("a transaction has no hash"))?;
    Ok((value, hash))
}

/// The transactions of `block` (read with their bodies) that `address` sent: their hash and
/// value. Pure.
pub fn sent_by(block: &Value, address: &str) -> ChainResult<Vec<(String, u128)>> {
    let transactions = block["transactions"]
        .as_array()
        .ok_or_else(|| ChainError::answer("the node's block has no transaction list"))?;
    let mut out = Vec::new();
    for tx in transactions {
        let from = tx["from"].as_str().map(str::to_ascii_lowercase);
        if from.as_deref() != Some(address) {
            continue;
        }
        let (value, hash) = value_and_hash(tx)?;
        out.push((hash.to_ascii_lowercase(), value));
    }
    Ok(out)
}

/// What a transaction of the address took out of it, from its `receipt`: its `value` if it
/// succeeded, and its fees (gas used × effective price, and an L1 data fee). Pure.
pub fn spent(receipt: &Value, value: u128) -> ChainResult<u128> {
    let status = rpc::quantity(&receipt["status"])?;
    let gas_used = wei(&receipt["gasUsed"])
        .ok_or_else(|| ChainError::answer("the receipt's gasUsed is not a quantity"))?;
    let price = wei(&receipt["effectiveGasPrice"])
        .ok_or_else(|| ChainError::answer("the receipt's effectiveGasPrice is not a quantity"))?;
    let l1_fee = l1_fee_paid(receipt)?;
    gas_used
        .checked_mul(price)
        .and_then(|fee| fee.checked_add(l1_fee))
        .and_then(|fee| fee.checked_add(if status == 1 { value } else { 0 }))
        .ok_or_else(|| ChainError::answer("the receipt's fees add up past 128 bits"))
}

/// The L1 data fee a receipt says its transaction paid besides its gas (an OP Stack chain's
/// `l1Fee`; 0 where there is none).
pub fn l1_fee_paid(receipt: &Value) -> ChainResult<u128> {
    match &receipt["l1Fee"] {
        Value::Null => Ok(0),
        fee => wei(fee).ok_or_else(|| ChainError::answer("the receipt's l1Fee is not a quantity")),
    }
}

/// An amount of wei as a JSON-RPC quantity (up to 128 bits). Pure.
pub fn wei(value: &Value) -> Option<u128> {
    value
        .as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .filter(|hex| !hex.is_empty() && hex.len() <= 32)
        .and_then(|hex| u128::from_str_radix(hex, 16).ok())
}

/// A direct payment: its transaction's hash, value and index.
pub type Payment = (String, u128, u64);

/// The transactions of `block` (read with their bodies) that send a value to `address`, parted
/// by sender: those from anyone else, and those from one of `own` (custody's own movements).
/// Pure.
pub fn split_payments(
    block: &Value,
    address: &str,
    own: &[&str],
) -> ChainResult<(Vec<Payment>, Vec<Payment>)> {
    let transactions = block["transactions"]
        .as_array()
        .ok_or_else(|| ChainError::answer("the node's block has no transaction list"))?;
    let (mut theirs, mut ours) = (Vec::new(), Vec::new());
    for tx in transactions {
        let to = tx["to"].as_str().map(str::to_ascii_lowercase);
        if to.as_deref() != Some(address) {
            continue;
        }
        let (value, hash) = value_and_hash(tx)?;
        let index = rpc::quantity(&tx["transactionIndex"])?;
        if value == 0 {
            continue;
        }
        let from = tx["from"].as_str().map(str::to_ascii_lowercase);
        let payment = (hash.to_ascii_lowercase(), value, index);
        if from.is_some_and(|f| own.contains(&f.as_str())) {
            ours.push(payment);
        } else {
            theirs.push(payment);
        }
    }
    Ok((theirs, ours))
}

/// The direct payments whose transaction succeeded (read from their receipts).
async fn succeeded(
    node: &Node,
    direct: Vec<(String, u128, u64)>,
    most: usize,
) -> ChainResult<Vec<(String, u128, u64)>> {
    if direct.len() > most {
        return Err(ChainError::rule(format!(
            "a block holds {} payments to the address, some failed: more than {most} \
             receipts to read",
            direct.len()
        )));
    }
    let mut out = Vec::new();
    for payment in direct {
        let receipt = rpc::call(node, "eth_getTransactionReceipt", json!([payment.0])).await?;
        if rpc::quantity(&receipt["status"])? == 1 {
            out.push(payment);
        }
    }
    Ok(out)
}

/// The payments that made the balance grow by `growth` in block `number`: the direct ones, and
/// the rest (sent from inside a contract call) under the block's hash. Pure.
pub fn attribute(
    block: &Value,
    address: &str,
    number: u64,
    growth: u128,
    direct: &[(String, u128, u64)],
) -> ChainResult<Vec<Transfer>> {
    let sent: u128 = direct.iter().map(|t| t.1).sum();
    let Some(inside) = growth.checked_sub(sent) else {
        return Err(ChainError::answer(format!(
            "block {number}: the payments to the address exceed what its balance grew by"
        )));
    };
    let transfer = |tx_hash: String, from: Option<String>, log_index, amount| Transfer {
        token: Token::Native,
        to: address.to_owned(),
        from,
        tx_hash,
        log_index,
        block_number: number,
        amount: Some(amount),
    };
    // A direct payment's sender is its transaction's.
    let sender = |hash: &str| {
        block["transactions"].as_array().and_then(|txs| {
            txs.iter()
                .find(|tx| {
                    tx["hash"]
                        .as_str()
                        .is_some_and(|h| h.eq_ignore_ascii_case(hash))
                })
                .and_then(|tx| tx["from"].as_str())
                .map(str::to_ascii_lowercase)
        })
    };
    let mut out: Vec<Transfer> = direct
        .iter()
        .map(|(hash, value, index)| transfer(hash.clone(), sender(hash), *index, *value))
        .collect();
    if inside > 0 {
        let hash = block["hash"]
            .as_str()
            .ok_or_else(|| ChainError::answer("the node's block has no hash"))?;
        out.push(transfer(hash.to_ascii_lowercase(), None, 0, inside));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TO: &str = "0x9858effd232b4033e47d90003d41ec34ecaeda94";

    fn block() -> Value {
        json!({
            "hash": "0xB10C",
            "timestamp": "0x10",
            "transactions": [
                {"hash": "0xAA", "to": "0x9858EfFD232B4033E47d90003D41EC34EcaEda94",
                 "from": "0x00000000000000000000000000000000000000C5",
                 "value": "0xde0b6b3a7640000", "transactionIndex": "0x0"},
                {"hash": "0xbb", "to": "0x0000000000000000000000000000000000000001",
                 "value": "0x1", "transactionIndex": "0x1"},
                {"hash": "0xcc", "to": null, "value": "0x0", "transactionIndex": "0x2"},
                {"hash": "0xdd", "to": TO, "value": "0x0", "transactionIndex": "0x3"}
            ]
        })
    }

    #[test]
    fn direct_payments_are_the_valued_transactions_to_the_address() {
        let direct = split_payments(&block(), TO, &[]).unwrap().0;
        assert_eq!(direct, vec![("0xaa".to_owned(), 10u128.pow(18), 0)]);
        assert!(split_payments(&json!({}), TO, &[]).is_err());
        let bad = json!({"transactions": [{"hash": "0x1", "to": TO, "value": "12"}]});
        assert!(split_payments(&bad, TO, &[]).is_err());
    }

    #[test]
    fn growth_beyond_the_direct_payments_came_from_inside_a_call() {
        let direct = split_payments(&block(), TO, &[]).unwrap().0;
        let exact = attribute(&block(), TO, 7, 10u128.pow(18), &direct).unwrap();
        assert_eq!(exact.len(), 1);
        assert_eq!(exact[0].tx_hash, "0xaa");
        assert_eq!(exact[0].token, Token::Native);
        // A direct payment names its sender; what came from inside a call cannot.
        assert_eq!(
            exact[0].from.as_deref(),
            Some("0x00000000000000000000000000000000000000c5")
        );
        let more = attribute(&block(), TO, 7, 10u128.pow(18) + 5, &direct).unwrap();
        assert_eq!(more.len(), 2);
        assert_eq!(
            (more[1].tx_hash.as_str(), more[1].amount),
            ("0xb10c", Some(5))
        );
        assert_eq!(more[1].from, None);
        assert!(attribute(&block(), TO, 7, 1, &direct).is_err());
    }

    #[test]
    fn custodys_own_coin_is_told_apart_from_payments() {
        let gas = "0x00000000000000000000000000000000000000aa";
        let block = json!({
            "hash": "0xb10c",
            "transactions": [
                {"hash": "0x01", "from": "0x00000000000000000000000000000000000000AA", "to": TO,
                 "value": "0x64", "transactionIndex": "0x0"},
                {"hash": "0x02", "from": "0x0000000000000000000000000000000000000001", "to": TO,
                 "value": "0x5", "transactionIndex": "0x1"},
                {"hash": "0x03", "from": TO, "to": "0x0000000000000000000000000000000000000002",
                 "value": "0x7", "transactionIndex": "0x2"}
            ]
        });
        let (theirs, ours) = split_payments(&block, TO, &[gas, TO]).unwrap();
        assert_eq!(theirs, vec![("0x02".to_owned(), 5, 1)]);
        assert_eq!(ours, vec![("0x01".to_owned(), 100, 0)]);
        // Without custody's addresses (a checkout's deposit), every payment is a payment.
        assert_eq!(split_payments(&block, TO, &[]).unwrap().0.len(), 2);
        assert_eq!(sent_by(&block, TO).unwrap(), vec![("0x03".to_owned(), 7)]);
    }

    #[test]
    fn what_a_transaction_of_the_address_took_out_is_its_value_and_its_fees() {
        let receipt = |status: &str| {
            json!({"status": status, "gasUsed": "0x5208", "effectiveGasPrice": "0x3",
                   "l1Fee": "0x10"})
        };
        assert_eq!(
            spent(&receipt("0x1"), 1_000).unwrap(),
            1_000 + 21_000 * 3 + 16
        );
        // A reverted one moved nothing but paid its fees.
        assert_eq!(spent(&receipt("0x0"), 1_000).unwrap(), 21_000 * 3 + 16);
        assert!(spent(&json!({"status": "0x1"}), 1).is_err());
    }

    #[test]
    fn wei_reads_quantities_beyond_64_bits() {
        assert_eq!(wei(&json!("0x56bc75e2d63100000")), Some(10u128.pow(20)));
        assert_eq!(wei(&json!("0x0")), Some(0));
        assert_eq!(wei(&json!("0x")), None);
        assert_eq!(wei(&json!(5)), None);
    }
}
