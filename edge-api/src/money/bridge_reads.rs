//! What the chains say about a settlement across networks with CCTP (see
//! `money::settle::bridge`): each network's CCTP configuration, the fee a mint collected (its
//! `MintAndWithdraw`), and whether a message was received on its destination by anyone, and by
//! which transaction. Reads only: the treasury's sends (`money::sends`) and the bridge's steps
//! both use them.

use payrail_evm::bridge::{self as checks, Burn, Log};
use payrail_evm::chains::Cctp;
use payrail_evm::{cctp, Address};
use serde_json::{json, Value};

use crate::chain::config::Network;
use crate::chain::error::{ChainError, ChainResult};
use crate::chain::{evm, rpc};
use crate::db::bridges::Bridge;

/// Most `eth_getLogs` calls looking for a message received by someone else.
pub(crate) const MOST_LOG_CALLS: u32 = 8;
/// Most logs read from one receipt.
const MOST_LOGS: usize = 256;
/// The symbol CCTP carries.
pub const USDC: &str = "USDC";

/// A network's CCTP configuration, or why it has none.
pub(crate) fn cctp_of<'a>(name: &str, network: &'a Network) -> ChainResult<&'a Cctp> {
    network
        .cctp
        .as_ref()
        .ok_or_else(|| ChainError::rule(format!("{name} has no CCTP contracts configured")))
}

/// An address of the configuration or of a row, as bytes.
pub(crate) fn address(text: &str, what: &str) -> ChainResult<[u8; 20]> {
    Address::parse(text)
        .map(|a| a.0)
        .map_err(|_| ChainError::answer(format!("{what} is not an address")))
}

/// A receipt's logs, as `payrail_evm::bridge` reads them (at most [`MOST_LOGS`]; a log not so
/// encoded is left out).
fn logs_of(logs: &Value) -> Vec<Log> {
    let bytes =
        |v: &Value| -> Option<Vec<u8>> { hex::decode(v.as_str()?.strip_prefix("0x")?).ok() };
    logs.as_array()
        .map(|all| {
            all.iter()
                .take(MOST_LOGS)
                .filter_map(|log| {
                    let address: [u8; 20] = bytes(&log["address"])?.try_into().ok()?;
                    let topics = log["topics"]
                        .as_array()?
                        .iter()
                        .take(4)
                        .map(|t| bytes(t)?.try_into().ok())
                        .collect::<Option<Vec<[u8; 32]>>>()?;
                    Some(Log {
                        address,
                        topics,
                        data: bytes(&log["data"])?,
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The fee the mint in `receipt` (on the destination `network`) collected for `bridge`, from its
/// `MintAndWithdraw` to the merchant's wallet.
pub(crate) fn fee_of_mint(
    network: &Network,
    bridge: &Bridge,
    receipt: &Value,
) -> ChainResult<u128> {
    let cctp = cctp_of(&bridge.destination_network, network)?;
    let token = network
        .tokens
        .get(USDC)
        .ok_or_else(|| ChainError::rule(format!("{} has no USDC", bridge.destination_network)))?;
    let minted = checks::minted(
        &logs_of(&receipt["logs"]),
        address(&cctp.token_messenger, "the token messenger")?,
        address(&bridge.mint_recipient, "the merchant's wallet")?,
        address(&token.address, "the destination's USDC")?,
    )
    .ok_or_else(|| {
        ChainError::answer("the mint's receipt shows no MintAndWithdraw to the wallet")
    })?;
    Ok(minted.fee)
}

/// A word of `eth_call` as a number, refused when it is not one word.
pub(crate) async fn read_word(
    node: &crate::chain::rpc::Node,
    to: &str,
    data: String,
) -> ChainResult<u128> {
    let word = rpc::call(
        node,
        "eth_call",
        json!([{"to": to, "data": data}, "latest"]),
    )
    .await?;
    evm::uint(&word).ok_or_else(|| ChainError::answer("the transmitter's answer is unreadable"))
}

/// The message of `bridge` (nonce `nonce`) as received on the destination `network` by a
/// transaction final there: that transaction's hash and the fee it collected. `None` when the
/// nonce is not used there yet, or its transaction is not final yet.
pub(crate) async fn received_elsewhere(
    network: &Network,
    bridge: &Bridge,
) -> ChainResult<Option<(String, u128)>> {
    let Some(nonce) = bridge.nonce.as_deref() else {
        return Ok(None);
    };
    let nonce: [u8; 32] = hex::decode(nonce.trim_start_matches("0x"))
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| ChainError::answer("a stored nonce is not 32 bytes"))?;
    received(network, bridge, nonce).await
}

/// [`received_elsewhere`] for the message of `nonce`.
pub(crate) async fn received(
    network: &Network,
    bridge: &Bridge,
    nonce: [u8; 32],
) -> ChainResult<Option<(String, u128)>> {
    let cctp = cctp_of(&bridge.destination_network, network)?;
    let node = &network.node;
    let transmitter = cctp.message_transmitter.to_ascii_lowercase();
    let used = read_word(node, &transmitter, cctp::used_nonces_call(nonce)).await?;
    if used == 0 {
        return Ok(None);
    }
    let head = rpc::head(node).await?;
    let topic = format!(
        "0x{}",
        hex::encode(cctp::event_topic(cctp::MESSAGE_RECEIVED_EVENT))
    );
    let nonce_topic = format!("0x{}", hex::encode(nonce));
    let range = network.log_range.max(1);
    let mut from = bridge.destination_block;
    for _ in 0..MOST_LOG_CALLS {
        if from > head {
            break;
        }
        let to = from.saturating_add(range - 1).min(head);
        let filter = json!({
            "address": transmitter,
            "topics": [topic, Value::Null, nonce_topic],
            "fromBlock": format!("{from:#x}"),
            "toBlock": format!("{to:#x}"),
        });
        let logs = rpc::call(node, "eth_getLogs", json!([filter])).await?;
        if let Some(hash) = logs
            .as_array()
            .and_then(|l| l.first())
            .and_then(|l| l["transactionHash"].as_str())
        {
            return mint_final(network, bridge, hash, head).await;
        }
        from = to.saturating_add(1);
    }
    Err(ChainError::answer(format!(
        "the message's nonce is used on {}, but its MessageReceived was not found in blocks {}..",
        bridge.destination_network, bridge.destination_block
    )))
}

/// The mint `hash` (anyone's) with the fee it collected, once final at the network's depth.
async fn mint_final(
    network: &Network,
    bridge: &Bridge,
    hash: &str,
    head: u64,
) -> ChainResult<Option<(String, u128)>> {
    let node = &network.node;
    let receipt = rpc::call(node, "eth_getTransactionReceipt", json!([hash])).await?;
    if receipt.is_null() {
        return Ok(None);
    }
    if crate::chain::final_block(network, &receipt, head)
        .await?
        .is_none()
    {
        return Ok(None);
    }
    let fee = fee_of_mint(network, bridge, &receipt)?;
    Ok(Some((hash.to_ascii_lowercase(), fee)))
}

/// The burn the treasury asks of `source` for a bridge to `destination`.
pub(crate) struct BurnAsked<'a> {
    /// Source network's CCTP.
    pub source: &'a Cctp,
    /// Destination network's CCTP.
    pub destination: &'a Cctp,
    /// The USDC contract on the source.
    pub token: &'a str,
    /// The merchant's wallet on the destination.
    pub recipient: &'a str,
    /// Base units.
    pub amount: u128,
    /// The most fee accepted.
    pub max_fee: u128,
    /// The finality asked.
    pub min_finality: u32,
}

/// The burn `asked`, by the treasury `depositor`, as `payrail_evm::bridge` checks it.
pub(crate) fn burn(asked: &BurnAsked<'_>, depositor: &str) -> ChainResult<Burn> {
    Ok(Burn {
        source_domain: asked.source.domain,
        destination_domain: asked.destination.domain,
        burn_token: address(asked.token, "the source's USDC")?,
        mint_recipient: address(asked.recipient, "the merchant's wallet")?,
        amount: asked.amount,
        max_fee: asked.max_fee,
        min_finality_threshold: asked.min_finality,
        source_messenger: address(&asked.source.token_messenger, "the token messenger")?,
        destination_messenger: address(
            &asked.destination.token_messenger,
            "the destination's token messenger",
        )?,
        depositor: address(depositor, "the treasury")?,
    })
}
