//! What Payrail reads and writes on EVM chains, as data: ERC-20 `Transfer` logs, log filters,
//! price-feed answers, amounts in base units and the EIP-681 payment request a wallet scans.
//! Pure; pinned by native tests.

use payrail_evm::Token;
use rust_decimal::{Decimal, RoundingStrategy};
use serde_json::{json, Value};

use super::error::{ChainError, ChainResult};
use super::rpc;

/// `keccak256("Transfer(address,address,uint256)")`, the ERC-20 transfer event's topic.
pub const TRANSFER_TOPIC: &str =
    "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
/// `latestRoundData()` of Chainlink's `AggregatorV3Interface`.
pub const LATEST_ROUND_DATA: &str = "0xfeaf968c";
/// `decimals()`.
pub const DECIMALS: &str = "0x313ce567";

/// An address as a 32-byte log topic: `0x`, 24 zeros, the address in lower case.
pub fn address_topic(address: &str) -> String {
    let hex = address.trim_start_matches("0x").to_ascii_lowercase();
    format!("0x{hex:0>64}")
}

/// The `eth_getLogs` filter for every ERC-20 transfer to `to` in blocks `from..=until`, of the
/// `token` contract, or of any contract (to find unexpected tokens too).
pub fn transfers_to(to: &str, from: u64, until: u64, token: Option<&str>) -> Value {
    let mut filter = json!({
        "fromBlock": format!("{from:#x}"),
        "toBlock": format!("{until:#x}"),
        "topics": [TRANSFER_TOPIC, null, address_topic(to)],
    });
    if let Some(token) = token {
        filter["address"] = json!(token);
    }
    json!([filter])
}

/// The `eth_getLogs` filter for every ERC-20 transfer of the `tokens` contracts (lower case) in
/// blocks `from..=until`, to anyone: the watcher's pass over a network.
pub fn transfers_of(tokens: &[String], from: u64, until: u64) -> Value {
    json!([{
        "fromBlock": format!("{from:#x}"),
        "toBlock": format!("{until:#x}"),
        "address": tokens,
        "topics": [TRANSFER_TOPIC],
    }])
}

/// One ERC-20 transfer as a node reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    /// The token contract, lower case.
    pub token: Token,
    /// The receiving address, lower case.
    pub to: String,
    /// The sending address, lower case: the log's `from`, or for ether the transaction's
    /// sender; `None` for ether sent from inside a contract call (standard JSON-RPC does not
    /// name who sent it).
    pub from: Option<String>,
    /// The transaction's hash.
    pub tx_hash: String,
    /// The log's index in its block.
    pub log_index: u64,
    /// The block it is in.
    pub block_number: u64,
    /// Amount in the token's base units; `None` when it is not an ERC-20 amount or exceeds 128
    /// bits (recorded for review, never credited).
    pub amount: Option<u128>,
}

/// Reads an `eth_getLogs` answer; logs the node marks `removed` (reorged away) are left out. A
/// `Transfer` that is not a well-formed ERC-20 one (an ERC-721 token id in a fourth topic, an
/// empty amount) is kept with no amount: recorded for review, never credited, and never a reason
/// to stop reading the address (anyone can send one).
pub fn transfers(logs: &Value) -> ChainResult<Vec<Transfer>> {
    let logs = logs
        .as_array()
        .ok_or_else(|| ChainError::answer("the node's logs are not a list"))?;
    let mut out = Vec::with_capacity(logs.len());
    for log in logs {
        if log["removed"].as_bool() == Some(true) {
            continue;
        }
        let text = |name: &str| {
            log[name]
                .as_str()
                .map(str::to_ascii_lowercase)
                .ok_or_else(|| ChainError::answer(format!("a log has no {name}")))
        };
        let topics = log["topics"]
            .as_array()
            .filter(|t| t.len() >= 3 && t[0] == TRANSFER_TOPIC)
            .ok_or_else(|| ChainError::answer("a log is not a transfer"))?;
        let address = |topic: &Value| {
            topic
                .as_str()
                .and_then(|t| t.strip_prefix("0x"))
                .filter(|t| t.len() == 64)
                .map(|t| format!("0x{}", &t[24..].to_ascii_lowercase()))
        };
        let to = address(&topics[2])
            .ok_or_else(|| ChainError::answer("a transfer's receiver is not an address"))?;
        let from = address(&topics[1])
            .ok_or_else(|| ChainError::answer("a transfer's sender is not an address"))?;
        let amount = if topics.len() == 3 {
            log["data"].as_str().and_then(word).flatten()
        } else {
            None
        };
        out.push(Transfer {
            token: Token::parse(&text("address")?)
                .map_err(|_| ChainError::answer("a transfer's contract is not an address"))?,
            to,
            from: Some(from),
            tx_hash: text("transactionHash")?,
            log_index: rpc::quantity(&log["logIndex"])?,
            block_number: rpc::quantity(&log["blockNumber"])?,
            amount,
        });
    }
    Ok(out)
}

/// The first 32-byte word of `0x…` data as an unsigned number: `Some(None)` when it does not
/// fit 128 bits, `None` when it is not a word.
fn word(data: &str) -> Option<Option<u128>> {
    let hex = data.strip_prefix("0x")?;
    if hex.len() < 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let (high, low) = (&hex[..32], &hex[32..64]);
    if high.bytes().any(|b| b != b'0') {
        return Some(None);
    }
    Some(u128::from_str_radix(low, 16).ok())
}

/// A call's result read as one unsigned word, if it fits 128 bits.
pub fn uint(result: &Value) -> Option<u128> {
    result.as_str().and_then(word).flatten()
}

/// A price feed's latest answer: the price and when it was updated (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundData {
    /// The answer, scaled by the feed's decimals.
    pub answer: i128,
    /// When the round started (a sequencer uptime feed: when its status last changed).
    pub started_at: u64,
    /// When the answer was last updated.
    pub updated_at: u64,
}

/// Reads the `latestRoundData()` answer: five words, the answer second (signed), the start
/// time third, the update time fourth.
pub fn round_data(result: &Value) -> ChainResult<RoundData> {
    let hex = result
        .as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .filter(|h| h.len() == 5 * 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| ChainError::answer("the price feed's answer is not latestRoundData"))?;
    let words: Vec<&str> = (0..5).map(|i| &hex[i * 64..(i + 1) * 64]).collect();
    // A signed 256-bit answer: it fits 128 bits when the high half is all 0 or all f.
    let (high, low) = words[1].split_at(32);
    let answer = u128::from_str_radix(low, 16)
        .map_err(|_| ChainError::answer("the price feed's answer is not a number"))?
        as i128;
    let answer = match high {
        h if h.bytes().all(|b| b == b'0') && answer >= 0 => answer,
        h if h.bytes().all(|b| b == b'f' || b == b'F') && answer < 0 => answer,
        _ => {
            return Err(ChainError::answer(
                "the price feed's answer is out of range",
            ))
        }
    };
    let time = |w: &str| {
        word(&format!("0x{w}"))
            .flatten()
            .and_then(|t| u64::try_from(t).ok())
            .ok_or_else(|| ChainError::answer("the price feed's round time is out of range"))
    };
    Ok(RoundData {
        answer,
        started_at: time(words[2])?,
        updated_at: time(words[3])?,
    })
}

/// `amount` of an order currency in the asset at a payment's own quote (`crypto_amount` of the
/// asset for `expected` of the currency), rounded down to `decimals` places: what a settlement
/// pays of a net and what a refund sends. `None` when it is out of a decimal's range. Pure.
pub fn at_quote(
    amount: Decimal,
    (crypto_amount, expected): (Decimal, Decimal),
    decimals: u32,
) -> Option<Decimal> {
    amount
        .checked_mul(crypto_amount)
        .and_then(|x| x.checked_div(expected))
        .map(|x| x.round_dp_with_strategy(decimals, RoundingStrategy::ToZero))
}

/// `units` base units of a token with `decimals` as a decimal amount, if it fits.
pub fn from_units(units: u128, decimals: u32) -> Option<Decimal> {
    i128::try_from(units)
        .ok()
        .and_then(|u| Decimal::try_from_i128_with_scale(u, decimals).ok())
        .map(|d| d.normalize())
}

/// A decimal amount in base units of a token with `decimals`, rounded up (a customer is never
/// asked for less than the quote).
pub fn to_units(amount: Decimal, decimals: u32) -> Option<u128> {
    let scaled = amount
        .round_dp_with_strategy(decimals, RoundingStrategy::AwayFromZero)
        .checked_mul(Decimal::from(10u64.checked_pow(decimals.min(19))?))?;
    let scaled = if decimals > 19 {
        scaled.checked_mul(Decimal::from(10u64.checked_pow(decimals - 19)?))?
    } else {
        scaled
    };
    u128::try_from(scaled.trunc()).ok()
}

/// The call data of ERC-20 `balanceOf(owner)` and `transfer(to, units)`, shared with the
/// offline custody signer.
pub use payrail_evm::{balance_of_call, transfer_call};

/// The EIP-681 request to pay `units` of the `token` contract to `to` on chain `chain_id`:
/// what the hosted page's QR code holds.
pub fn payment_uri(token: &str, chain_id: u64, to: &str, units: u128) -> String {
    format!("ethereum:{token}@{chain_id}/transfer?address={to}&uint256={units}")
}

/// The EIP-681 request to pay `wei` of the chain's own coin to `to` on chain `chain_id`.
pub fn native_payment_uri(chain_id: u64, to: &str, wei: u128) -> String {
    format!("ethereum:{to}@{chain_id}?value={wei}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha3::{Digest, Keccak256};
    use std::str::FromStr;

    #[test]
    fn the_transfer_topic_and_selectors_are_their_signatures_hashes() {
        let hash = |s: &str| format!("0x{}", hex::encode(Keccak256::digest(s.as_bytes())));
        assert_eq!(hash("Transfer(address,address,uint256)"), TRANSFER_TOPIC);
        assert!(hash("latestRoundData()").starts_with(LATEST_ROUND_DATA));
        assert!(hash("decimals()").starts_with(DECIMALS));
        assert!(hash("balanceOf(address)").starts_with(payrail_evm::BALANCE_OF));
        assert!(hash("transfer(address,uint256)").starts_with("0xa9059cbb"));
        assert!(hash("isSanctioned(address)").starts_with(payrail_evm::IS_SANCTIONED));
    }

    #[test]
    fn filters_by_the_padded_receiver() {
        let filter = transfers_to("0x9858EfFD232B4033E47d90003D41EC34EcaEda94", 16, 255, None);
        assert_eq!(filter[0]["fromBlock"], "0x10");
        assert_eq!(filter[0]["toBlock"], "0xff");
        assert_eq!(
            filter[0]["topics"][2],
            "0x0000000000000000000000009858effd232b4033e47d90003d41ec34ecaeda94"
        );
        assert_eq!(filter[0]["topics"][1], Value::Null);
        assert_eq!(filter[0].get("address"), None, "any contract");
        let one = transfers_to(
            "0x9858EfFD232B4033E47d90003D41EC34EcaEda94",
            1,
            2,
            Some("0xabc"),
        );
        assert_eq!(one[0]["address"], "0xabc");
    }

    fn log(data: &str, removed: bool) -> Value {
        json!({
            "address": "0x5FbDB2315678afecb367f032d93F642f64180aa3",
            "topics": [TRANSFER_TOPIC,
                "0x000000000000000000000000f39fd6e51aad88f6f4ce6ab8827279cfffb92266",
                "0x0000000000000000000000009858EfFD232B4033E47d90003D41EC34EcaEda94"],
            "data": data,
            "blockNumber": "0x1b",
            "transactionHash": "0xAB01",
            "logIndex": "0x2",
            "removed": removed,
        })
    }

    #[test]
    fn reads_transfers_and_skips_removed_ones() {
        let amount = format!("0x{:064x}", 12_500_000u128);
        let read = transfers(&json!([log(&amount, false), log(&amount, true)])).unwrap();
        assert_eq!(
            read,
            vec![Transfer {
                token: Token::parse("0x5fbdb2315678afecb367f032d93f642f64180aa3").unwrap(),
                to: "0x9858effd232b4033e47d90003d41ec34ecaeda94".into(),
                from: Some("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266".into()),
                tx_hash: "0xab01".into(),
                log_index: 2,
                block_number: 27,
                amount: Some(12_500_000),
            }]
        );
        let huge = format!("0x1{}", "0".repeat(63));
        assert_eq!(
            transfers(&json!([log(&huge, false)])).unwrap()[0].amount,
            None
        );
        // Not an ERC-20 amount: kept, with none.
        assert_eq!(
            transfers(&json!([log("0x12", false)])).unwrap()[0].amount,
            None
        );
        let mut nft = log("0x", false);
        nft["topics"]
            .as_array_mut()
            .unwrap()
            .push(json!(format!("0x{:064x}", 7)));
        let read = transfers(&json!([nft])).unwrap();
        assert_eq!((read.len(), read[0].amount), (1, None));
        assert!(transfers(&json!({"not": "a list"})).is_err());
        let mut approval = log(&amount, false);
        approval["topics"][0] = json!("0x8c5be1e5");
        assert!(transfers(&json!([approval])).is_err());
    }

    #[test]
    fn reads_a_feeds_latest_round() {
        let words = |answer: &str| {
            format!(
                "0x{:064x}{answer}{:064x}{:064x}{:064x}",
                7, 1_700_000_000u64, 1_700_000_100u64, 7
            )
        };
        let round = round_data(&json!(words(&format!("{:064x}", 108_450_000u64)))).unwrap();
        assert_eq!(
            round,
            RoundData {
                answer: 108_450_000,
                started_at: 1_700_000_000,
                updated_at: 1_700_000_100
            }
        );
        let negative = round_data(&json!(words(&"f".repeat(64)))).unwrap();
        assert_eq!(negative.answer, -1);
        assert!(round_data(&json!("0x1234")).is_err());
    }

    #[test]
    fn converts_amounts_and_base_units() {
        let d = |s: &str| Decimal::from_str(s).unwrap();
        assert_eq!(to_units(d("12.5"), 6), Some(12_500_000));
        assert_eq!(to_units(d("0.0000001"), 6), Some(1), "rounded up");
        assert_eq!(to_units(d("1"), 18), Some(1_000_000_000_000_000_000));
        assert_eq!(from_units(12_500_000, 6), Some(d("12.5")));
        assert_eq!(from_units(1, 18), Some(d("0.000000000000000001")));
        assert_eq!(from_units(u128::MAX, 6), None);
    }

    #[test]
    fn encodes_a_transfer_call() {
        let hash = |s: &str| hex::encode(Keccak256::digest(s.as_bytes()));
        assert!(hash("transfer(address,uint256)").starts_with("a9059cbb"));
        assert_eq!(
            transfer_call("0x9858EfFD232B4033E47d90003D41EC34EcaEda94", 25_500_000),
            format!(
                "0xa9059cbb{}{:064x}",
                "0000000000000000000000009858effd232b4033e47d90003d41ec34ecaeda94", 25_500_000
            )
        );
    }

    #[test]
    fn writes_eip681_requests() {
        assert_eq!(
            payment_uri(
                "0x5FbDB2315678afecb367f032d93F642f64180aa3",
                137,
                "0x9858EfFD232B4033E47d90003D41EC34EcaEda94",
                12_500_000
            ),
            "ethereum:0x5FbDB2315678afecb367f032d93F642f64180aa3@137/transfer?\
             address=0x9858EfFD232B4033E47d90003D41EC34EcaEda94&uint256=12500000"
        );
        assert_eq!(
            native_payment_uri(
                8453,
                "0x9858EfFD232B4033E47d90003D41EC34EcaEda94",
                2_014_000_000_000_000_000
            ),
            "ethereum:0x9858EfFD232B4033E47d90003D41EC34EcaEda94@8453?value=2014000000000000000"
        );
    }
}
