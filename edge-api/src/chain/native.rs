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
//! Every read is bounded: at most [`MAX_BALANCE_READS`] balances and [`MAX_BLOCKS`] blocks a
//! check; what is left is read at the next check, from the last block fully accounted for.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::config::NATIVE_TOKEN;
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

/// Reads the payments in ether to `address` in blocks `from..=until` (`from` at least 1).
pub async fn read(node: &Node, address: &str, from: u64, until: u64) -> ChainResult<Found> {
    let balance = |block: u64| async move {
        let answer = rpc::call(
            node,
            "eth_getBalance",
            json!([address, format!("{block:#x}")]),
        )
        .await?;
        wei(&answer).ok_or_else(|| ChainError::answer("the node's balance is not a quantity"))
    };
    let before = from - 1;
    let mut reads = 2;
    let first = balance(before).await?;
    let last = balance(until).await?;
    // Segments (start, its balance, end, its balance) still to account for, the earliest on
    // top: the blocks where the balance grew come out in order.
    let mut todo = vec![(before, first, until, last)];
    let mut grew = Vec::new();
    let mut read_to = before;
    while let Some((lo, at_lo, hi, at_hi)) = todo.pop() {
        if at_hi < at_lo {
            return Err(ChainError::answer(format!(
                "the balance fell between blocks {lo} and {hi}: the address has sent, so its \
                 balance no longer measures what it received"
            )));
        }
        if at_hi == at_lo || hi == lo + 1 {
            if at_hi > at_lo {
                if grew.len() == MAX_BLOCKS {
                    break;
                }
                grew.push((hi, at_hi - at_lo));
            }
            read_to = hi;
            continue;
        }
        if reads == MAX_BALANCE_READS {
            break;
        }
        let mid = lo + (hi - lo) / 2;
        let at_mid = balance(mid).await?;
        reads += 1;
        todo.push((mid, at_mid, hi, at_hi));
        todo.push((lo, at_lo, mid, at_mid));
    }
    let mut found = Found {
        read_to,
        ..Found::default()
    };
    for (number, growth) in grew {
        let block = rpc::call_capped(
            node,
            "eth_getBlockByNumber",
            json!([format!("{number:#x}"), true]),
            MAX_BLOCK,
        )
        .await?;
        let time = rpc::quantity(&block["timestamp"])?;
        let direct = direct_payments(&block, address)?;
        let direct = if direct.iter().map(|t| t.1).sum::<u128>() > growth {
            // More was sent directly than arrived: some of it reverted.
            succeeded(node, direct).await?
        } else {
            direct
        };
        found
            .transfers
            .extend(attribute(&block, address, number, growth, &direct)?);
        found.times.insert(number, time);
    }
    Ok(found)
}

/// An amount of wei as a JSON-RPC quantity (up to 128 bits). Pure.
pub fn wei(value: &Value) -> Option<u128> {
    value
        .as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .filter(|hex| !hex.is_empty() && hex.len() <= 32)
        .and_then(|hex| u128::from_str_radix(hex, 16).ok())
}

/// The transactions of `block` (read with their bodies) that send a value to `address`: their
/// hash, value and index. Pure.
pub fn direct_payments(block: &Value, address: &str) -> ChainResult<Vec<(String, u128, u64)>> {
    let transactions = block["transactions"]
        .as_array()
        .ok_or_else(|| ChainError::answer("the node's block has no transaction list"))?;
    let mut out = Vec::new();
    for tx in transactions {
        let to = tx["to"].as_str().map(str::to_ascii_lowercase);
        if to.as_deref() != Some(address) {
            continue;
        }
        let value = wei(&tx["value"])
            .ok_or_else(|| ChainError::answer("a transaction's value is unreadable"))?;
        let hash = tx["hash"]
            .as_str()
            .ok_or_else(|| ChainError::answer("a transaction has no hash"))?;
        let index = rpc::quantity(&tx["transactionIndex"])?;
        if value > 0 {
            out.push((hash.to_ascii_lowercase(), value, index));
        }
    }
    Ok(out)
}

/// The direct payments whose transaction succeeded (read from their receipts).
async fn succeeded(
    node: &Node,
    direct: Vec<(String, u128, u64)>,
) -> ChainResult<Vec<(String, u128, u64)>> {
    if direct.len() > MAX_RECEIPTS {
        return Err(ChainError::rule(format!(
            "a block holds {} payments to the address, some failed: more than {MAX_RECEIPTS} \
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
    let transfer = |tx_hash: String, log_index, amount| Transfer {
        token: NATIVE_TOKEN.to_owned(),
        to: address.to_owned(),
        tx_hash,
        log_index,
        block_number: number,
        amount: Some(amount),
    };
    let mut out: Vec<Transfer> = direct
        .iter()
        .map(|(hash, value, index)| transfer(hash.clone(), *index, *value))
        .collect();
    if inside > 0 {
        let hash = block["hash"]
            .as_str()
            .ok_or_else(|| ChainError::answer("the node's block has no hash"))?;
        out.push(transfer(hash.to_ascii_lowercase(), 0, inside));
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
        let direct = direct_payments(&block(), TO).unwrap();
        assert_eq!(direct, vec![("0xaa".to_owned(), 10u128.pow(18), 0)]);
        assert!(direct_payments(&json!({}), TO).is_err());
        let bad = json!({"transactions": [{"hash": "0x1", "to": TO, "value": "12"}]});
        assert!(direct_payments(&bad, TO).is_err());
    }

    #[test]
    fn growth_beyond_the_direct_payments_came_from_inside_a_call() {
        let direct = direct_payments(&block(), TO).unwrap();
        let exact = attribute(&block(), TO, 7, 10u128.pow(18), &direct).unwrap();
        assert_eq!(exact.len(), 1);
        assert_eq!(exact[0].tx_hash, "0xaa");
        assert_eq!(exact[0].token, NATIVE_TOKEN);
        let more = attribute(&block(), TO, 7, 10u128.pow(18) + 5, &direct).unwrap();
        assert_eq!(more.len(), 2);
        assert_eq!(
            (more[1].tx_hash.as_str(), more[1].amount),
            ("0xb10c", Some(5))
        );
        assert!(attribute(&block(), TO, 7, 1, &direct).is_err());
    }

    #[test]
    fn wei_reads_quantities_beyond_64_bits() {
        assert_eq!(wei(&json!("0x56bc75e2d63100000")), Some(10u128.pow(20)));
        assert_eq!(wei(&json!("0x0")), Some(0));
        assert_eq!(wei(&json!("0x")), None);
        assert_eq!(wei(&json!(5)), None);
    }
}
