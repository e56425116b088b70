//! Reading one watched address's new blocks for one asset: what every watch needs, a checkout's
//! deposit address ([`crate::money::watch`]) and a merchant's top-up address ([`crate::money::topup`]) alike.
//!
//! A check starts from the last block read as final, `confirmations` blocks below it again (a
//! node behind a load balancer may have answered from a backend that lagged), and reads up to the
//! node's head: a token's transfer logs in pages ([`logged`]), or, for the network's
//! own coin, the balance's growth ([`super::native`]). Blocks up to `final_to` have the
//! network's depth on them; what the caller stores of them is final, what is above is replaced
//! at the next check (so a transfer reorged away disappears).

use std::collections::BTreeMap;

use payrail_evm::Token;
use serde_json::json;

use super::config::Network;
use super::error::{ChainError, ChainResult};
use super::{evm, native, rpc};
use crate::ctx::Ctx;

/// Most `eth_getLogs` requests one check makes; a longer way behind is caught up next time.
pub const MAX_LOG_REQUESTS: u64 = 5;
/// More requests a check may make when an answer is too large and the range is halved.
const MAX_SPLIT_REQUESTS: u64 = 20;
/// Largest answer read for one block's logs (a block's gas limit bounds how many transfers
/// to one address it can hold).
const MAX_BLOCK_LOGS: usize = 8 * 1024 * 1024;

/// The most node calls one [`read`] of a token makes: the chain id, the head, and its log pages.
pub const MOST_TOKEN_CALLS: u32 = 2 + (MAX_LOG_REQUESTS + MAX_SPLIT_REQUESTS) as u32;
/// The most node calls one [`read`] of the network's coin makes: the chain id, the head, and
/// the balance reads, blocks and receipts.
pub const MOST_NATIVE_CALLS: u32 = 2 + native::MOST_CALLS;

/// What to read: an address, one asset, and how far it was read.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The network's name.
    pub network: &'a str,
    /// The address, lower case.
    pub address: &'a str,
    /// The token contract or the coin.
    pub token: Token,
    /// Every block up to this one was read as final.
    pub scanned_to: i64,
    /// For an address custody may sweep while it is watched (a merchant's top-up address): its
    /// coin is read with its nonce, custody's own movements told apart ([`native::Sent`]).
    pub sent: Option<native::Sent<'a>>,
}

/// What one check found.
#[derive(Debug)]
pub enum Scan {
    /// The node is not past what was read: only its head.
    Nothing {
        /// The node's newest block.
        head: u64,
    },
    /// New blocks were read.
    Read(Fresh),
}

/// The new blocks a check read and what arrived in them.
#[derive(Debug)]
pub struct Fresh {
    /// The node's newest block.
    pub head: u64,
    /// The first block read.
    pub from: u64,
    /// Every block up to this one is accounted for.
    pub read_to: u64,
    /// Blocks up to this one have the network's depth on them (at most `read_to`).
    pub final_to: u64,
    /// The asset's transfers to the address (ERC-20 logs, or the coin's payments) in
    /// `from..=read_to`, in block order.
    pub transfers: Vec<evm::Transfer>,
    /// The time of the blocks the coin's payments are in (read with them; empty for a token).
    pub times: BTreeMap<u64, u64>,
}

/// Reads `target`'s new blocks from `network`'s node, after checking the node serves the
/// configured chain and its head is fresh ([`super::heads`]: a node whose head stands still is
/// not read, so nothing is recorded or decided on it).
pub async fn read(ctx: &Ctx, network: &Network, target: &Target<'_>) -> ChainResult<Scan> {
    let node = &network.node;
    super::check_chain(target.network, network).await?;
    let head = rpc::head(node).await?;
    super::heads::fresh(ctx, target.network, network, head).await?;
    let scanned_to = u64::try_from(target.scanned_to).unwrap_or(0);
    if head <= scanned_to {
        return Ok(Scan::Nothing { head });
    }
    let from = (scanned_to + 1).saturating_sub(network.confirmations);
    let (transfers, read_to, times) = if target.token == Token::Native {
        let native = native::read(node, target.address, from.max(1), head, target.sent).await?;
        if native.read_to < from.max(1) {
            return Err(ChainError::rule(format!(
                "blocks from {from} could not be accounted for in one check"
            )));
        }
        (native.transfers, native.read_to, native.times)
    } else {
        let token = target.token.lower();
        let (found, read_to) = logged(network, from, head, |next, end| {
            evm::transfers_to(target.address, next, end, Some(&token))
        })
        .await?;
        (found, read_to, BTreeMap::new())
    };
    // Blocks up to `final_to` have at least `confirmations` blocks on them, counting their own.
    let final_to = (head + 1)
        .saturating_sub(network.confirmations)
        .min(read_to);
    Ok(Scan::Read(Fresh {
        head,
        from,
        read_to,
        final_to,
        transfers,
        times,
    }))
}

/// The transfers `filter` asks for (one token's to one address, or the watcher's pass: every
/// transfer of the network's tokens) in blocks `from..` up to `head`, and the last block read.
pub async fn logged(
    network: &Network,
    from: u64,
    head: u64,
    filter: impl Fn(u64, u64) -> serde_json::Value,
) -> ChainResult<(Vec<evm::Transfer>, u64)> {
    let node = &network.node;
    let until = head.min(from.saturating_add(network.log_range * MAX_LOG_REQUESTS) - 1);
    // The transfers, in ranges of `log_range` blocks; an answer too large (or refused:
    // providers cap results) is asked again for half the range, down to one block, whose
    // answer may be larger (a block's gas limit bounds its logs). Only the named tokens' logs
    // are asked for, so nobody can crowd them out with another contract's.
    let mut found = Vec::new();
    let mut next = from;
    let mut span = network.log_range;
    let mut requests = 0;
    while next <= until && requests < MAX_LOG_REQUESTS + MAX_SPLIT_REQUESTS {
        let end = until.min(next + span - 1);
        requests += 1;
        let filter = filter(next, end);
        let cap = if span == 1 {
            MAX_BLOCK_LOGS
        } else {
            rpc::MAX_ANSWER
        };
        match rpc::call_capped(node, "eth_getLogs", filter, cap).await {
            Ok(logs) => {
                found.extend(evm::transfers(&logs)?);
                next = end + 1;
            }
            Err(e) if span > 1 && e.ask_less() => {
                span = (span / 2).max(1);
            }
            Err(e) => return Err(ChainError::from(e).within(format!("blocks {next} to {end}"))),
        }
    }
    let Some(read_to) = next.checked_sub(1).filter(|r| *r >= from) else {
        return Err(ChainError::rule(format!(
            "blocks from {from} could not be read in {requests} requests"
        )));
    };
    Ok((found, read_to))
}

/// Keeps at most `limit` of the payments in `seen`, the earliest in chain order, and every
/// other entry in the blocks before the first block it does not wholly keep; returns that
/// block (the check reads up to it, and is final only below it), or `None` when all are kept.
/// `place` gives an entry's block, its log index and whether it is a payment. Pure.
pub fn cap<T>(
    seen: &mut Vec<T>,
    limit: usize,
    place: impl Fn(&T) -> (u64, u64, bool),
) -> Option<u64> {
    let mut payments: Vec<(u64, u64)> = seen
        .iter()
        .map(&place)
        .filter(|(_, _, payment)| *payment)
        .map(|(block, log, _)| (block, log))
        .collect();
    if payments.len() <= limit {
        return None;
    }
    payments.sort_unstable();
    let kept = &payments[..limit];
    let cut = payments[limit].0;
    seen.retain(|t| {
        let (block, log, payment) = place(t);
        block < cut || (payment && kept.binary_search(&(block, log)).is_ok())
    });
    Some(cut)
}

/// Refuses a check whose logs claim more of `target`'s token than the address holds: its
/// `balanceOf` at block `final_to` must cover `claimed`, every unit of the asset (`symbol`,
/// `decimals`) confirmed to it, less what custody swept from it by then (a merchant's top-up
/// address; a checkout's never sends while it is watched). A balance below that means the node
/// invented a transfer, or the token took the money back: nothing of the check is stored, and
/// it is read again at the next.
pub async fn cover(
    network: &Network,
    target: &Target<'_>,
    (symbol, decimals): (&str, u32),
    (claimed, swept): (u128, u128),
    final_to: u64,
) -> ChainResult<()> {
    let call = json!({"to": target.token.lower(), "data": evm::balance_of_call(target.address)});
    let word = rpc::call(
        &network.node,
        "eth_call",
        json!([call, format!("{final_to:#x}")]),
    )
    .await?;
    let held = evm::uint(&word)
        .ok_or_else(|| ChainError::answer("the token's balanceOf answer is unreadable"))?;
    let owed = claimed.saturating_sub(swept);
    if held < owed {
        let amount = |u: u128| {
            evm::from_units(u, decimals)
                .map_or_else(|| u.to_string(), |d| d.normalize().to_string())
        };
        let less = if swept > 0 {
            format!(" (less {} {symbol} custody swept from it)", amount(swept))
        } else {
            String::new()
        };
        return Err(ChainError::answer(format!(
            "the node's transfer logs show {} {symbol} paid to the address by block \
             {final_to}{less}, but its balance there is {} {symbol}: nothing is credited until \
             the chain holds what the logs say",
            amount(claimed),
            amount(held),
        )));
    }
    Ok(())
}
