//! The watcher's pass over each network (docs/SCALING.md, "The watcher by the directory's
//! index"): each cron run reads every transfer of the network's tokens in its new blocks once
//! (one `eth_getLogs` a range of blocks, for all of custody's addresses at once), looks the
//! receivers up in the directory's index of custody's addresses, and checks at once the watches
//! of the institutions' objects the money went to (a checkout's, or a merchant's top-up
//! address's), through the same checks as every other. An object no money came to is not read; its token watches are checked by
//! the cron only [`watches::PASS_SLACK_SECONDS`] later than before, to catch up what a pass could
//! not route (a node that failed the pass, a run whose calls ran out). D1's institutions keep
//! their own sweep.
//!
//! Money final at the network's depth that no store credits is held and listed for the operator
//! (`held_deposits`, `GET /operator/held-deposits`), never credited: a transfer to one of
//! custody's addresses that was never given out (derived ahead), or to one given out that its
//! store watches on no open checkout on this network (paid on another network than the one
//! quoted, or after the checkout's watch ended).
//!
//! The pass reads from `confirmations` blocks below the last block it read as final, so a
//! transfer is routed at every pass until it is final, and once then; a pass is recorded guarded
//! on where it started, so racing runs record one, and what they route twice is checked twice,
//! harmlessly (a check is guarded as every check is).

use std::collections::{BTreeMap, BTreeSet};

use shared_types::ids::InstitutionId;

use crate::chain::config::Network;
use crate::chain::error::{ChainError, ChainResult};
use crate::chain::{evm, heads, rpc, scan};
use crate::ctx::Ctx;
use crate::db::passes::{self, HeldDeposit, HeldReason, Owner};
use crate::db::Batch;
use crate::error::{ApiError, OrInternal};

/// Most distinct receivers one pass of a network looks up in the index (in statements of
/// [`LOOKUP`]); a pass whose blocks paid more stops before the block that would pass it, and the
/// next goes on from there (a single block is always read whole).
pub const MAX_RECEIVERS: usize = 3_600;

/// Most addresses one D1 statement of the pass names (about 40 KB of its 100 KB).
pub const LOOKUP: usize = 900;

/// The most node calls a pass of one network makes: the chain id, the head and its log pages.
pub const MOST_PASS_CALLS: u32 = scan::MOST_TOKEN_CALLS;

/// What a pass of one network read and where its money goes: [`Pass::held`] to check in their
/// objects, then [`Pass::finish`] with what they do not watch.
pub struct Pass<'n> {
    name: &'n str,
    started: Option<i64>,
    head: u64,
    read: Read,
    route: Route,
    /// Of the addresses given to institutions whose money is in D1, those D1 watches on none
    /// of its open checkouts on this network, with their institutions.
    unwatched_in_d1: Vec<(InstitutionId, String)>,
}

/// Reads `network`'s new blocks, looks their receivers up in the index and sorts them by where
/// their money is: `None` when the node is not past the last pass. The error is the reason to
/// record on it ([`failed`]).
pub async fn start<'n>(
    ctx: &Ctx,
    name: &'n str,
    network: &Network,
) -> Result<Option<Pass<'n>>, String> {
    let started = passes::scanned_to(&ctx.db, name)
        .await
        .map_err(|e| format!("read the pass: {e}"))?;
    let Some((head, read)) = read(ctx, name, network, started)
        .await
        .map_err(|e| e.public())?
    else {
        return Ok(None);
    };
    let receivers: BTreeSet<&str> = read.transfers.iter().map(|t| t.to.as_str()).collect();
    let receivers: Vec<&str> = receivers.into_iter().collect();
    let mut owners = Vec::new();
    for chunk in receivers.chunks(LOOKUP) {
        owners.extend(
            passes::owners(&ctx.db, chunk)
                .await
                .map_err(|e| format!("look the receivers up in the index: {e}"))?,
        );
    }
    let route = route(owners);
    let in_d1: Vec<&str> = route.in_d1.iter().map(|(_, a)| a.as_str()).collect();
    let mut watched = Vec::new();
    for chunk in in_d1.chunks(LOOKUP) {
        watched.extend(
            passes::watched_in_d1(&ctx.db, name, chunk, ctx.now())
                .await
                .map_err(|e| format!("read D1's watches: {e}"))?,
        );
    }
    let unwatched_in_d1 = route
        .in_d1
        .iter()
        .filter(|(_, a)| !watched.contains(a))
        .cloned()
        .collect();
    Ok(Some(Pass {
        name,
        started,
        head,
        read,
        route,
        unwatched_in_d1,
    }))
}

impl Pass<'_> {
    /// The addresses money came to of each institution held in its object: their watches are
    /// checked now.
    pub fn held(&self) -> &BTreeMap<InstitutionId, Vec<String>> {
        &self.route.held
    }

    /// The merchants' top-up addresses money came to of each institution held in its object:
    /// their watches are checked now.
    pub fn held_topups(&self) -> &BTreeMap<InstitutionId, Vec<String>> {
        &self.route.topups
    }

    /// Holds what is final and no store credits (to an address never given out; to one of D1's
    /// or of `unwatched` (the objects' addresses they watch on no open checkout here), and
    /// records the pass, in one batch: a pass recorded has held what it found.
    pub async fn finish(
        self,
        ctx: &Ctx,
        unwatched: &[(InstitutionId, String)],
    ) -> Result<(), String> {
        let now = ctx.now();
        let mut batch = Batch::new();
        for transfer in self
            .read
            .transfers
            .iter()
            .filter(|t| t.block_number <= self.read.final_to)
        {
            let to = transfer.to.as_str();
            let reason = if self.route.free.contains(to) {
                Some((HeldReason::NotGiven, None))
            } else {
                self.unwatched_in_d1
                    .iter()
                    .chain(unwatched)
                    .find(|(_, a)| a == to)
                    .map(|(institution, _)| (HeldReason::NotWatched, Some(*institution)))
            };
            let Some((reason, institution_id)) = reason else {
                continue;
            };
            let held = held(self.name, transfer, reason, institution_id, now);
            batch.push(passes::hold(&held).map_err(|e| e.to_string())?);
        }
        batch.push(
            passes::record(
                self.name,
                self.started,
                // A node behind the last pass's (another backend) never takes the pass back.
                i64::try_from(self.read.final_to)
                    .unwrap_or(i64::MAX)
                    .max(self.started.unwrap_or(0)),
                i64::try_from(self.head).unwrap_or(i64::MAX),
                now,
            )
            .map_err(|e| e.to_string())?,
        );
        batch
            .run(&ctx.db)
            .await
            .map_err(|e| format!("record the pass: {e}"))?;
        Ok(())
    }
}

/// Records why the pass of `network` could not read its node or route what it read.
pub async fn failed(ctx: &Ctx, name: &str, error: &str) -> Result<(), ApiError> {
    worker::console_warn!("the watcher's pass over {name}: {error}");
    let stmt = passes::failed(name, error, ctx.now()).or_internal("record the pass")?;
    crate::db::batch(&ctx.db, vec![stmt])
        .await
        .or_internal("record the pass")
}

/// What a pass of one network read.
struct Read {
    /// Blocks up to it have the network's depth on them.
    final_to: u64,
    /// The transfers in the blocks read.
    transfers: Vec<evm::Transfer>,
}

/// Reads `network`'s token transfers in its blocks after `started` (`confirmations` below it
/// again), up to the node's head: `None` when the node is not past it. The first pass reads one
/// `log_range` back from the head (older deposits were read by their own watches).
async fn read(
    ctx: &Ctx,
    name: &str,
    network: &Network,
    started: Option<i64>,
) -> ChainResult<Option<(u64, Read)>> {
    crate::chain::check_chain(name, network).await?;
    let head = rpc::head(&network.node).await?;
    heads::fresh(ctx, name, network, head).await?;
    let scanned_to = match started {
        Some(s) => u64::try_from(s).unwrap_or(0),
        None => head.saturating_sub(network.log_range),
    };
    if head <= scanned_to && started.is_some() {
        return Ok(None);
    }
    let from = (scanned_to + 1)
        .saturating_sub(network.confirmations)
        .max(1)
        .min(head);
    let tokens: Vec<String> = network
        .tokens
        .values()
        .map(|t| t.address.to_ascii_lowercase())
        .collect();
    let (mut transfers, mut read_to) = scan::logged(network, from, head, |next, end| {
        evm::transfers_of(&tokens, next, end)
    })
    .await?;
    if let Some(cut) = within_receivers(&mut transfers, MAX_RECEIVERS) {
        read_to = cut - 1;
    }
    if read_to < from {
        return Err(ChainError::rule(format!(
            "blocks from {from} could not be read in one pass"
        )));
    }
    let final_to = (head + 1)
        .saturating_sub(network.confirmations)
        .min(read_to);
    Ok(Some((
        head,
        Read {
            final_to,
            transfers,
        },
    )))
}

/// Keeps the transfers (in chain order) of the first blocks whose receivers number at most
/// `limit`, the first block always whole; answers the first block left out, if any. Pure.
pub fn within_receivers(transfers: &mut Vec<evm::Transfer>, limit: usize) -> Option<u64> {
    transfers.sort_by_key(|t| (t.block_number, t.log_index));
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut start = 0;
    while start < transfers.len() {
        let block = transfers[start].block_number;
        let end = transfers[start..]
            .iter()
            .position(|t| t.block_number != block)
            .map_or(transfers.len(), |n| start + n);
        let mut with = seen.clone();
        with.extend(transfers[start..end].iter().map(|t| t.to.clone()));
        if with.len() > limit && start > 0 {
            transfers.truncate(start);
            return Some(block);
        }
        seen = with;
        start = end;
    }
    None
}

/// Where each receiver's money is credited, from the index.
#[derive(Debug, Default)]
struct Route {
    /// Addresses derived ahead and never given out.
    free: BTreeSet<String>,
    /// Given for checkouts to institutions whose money is in D1.
    in_d1: Vec<(InstitutionId, String)>,
    /// Given to institutions held in their objects, for checkouts.
    held: BTreeMap<InstitutionId, Vec<String>>,
    /// Given to merchants of institutions held in their objects, to top up.
    topups: BTreeMap<InstitutionId, Vec<String>>,
}

/// Sorts the index's `owners` by where their money is credited. A D1 merchant's top-up address
/// is its own watcher's ([`crate::money::topup`]); an index given before the index kept its
/// institution names no store, and is caught up by the cron's own checks.
fn route(owners: Vec<Owner>) -> Route {
    let mut route = Route::default();
    for owner in owners {
        let address = owner.address;
        if !owner.given {
            route.free.insert(address);
            continue;
        }
        let Some(institution) = owner.institution_id else {
            continue;
        };
        let held = owner.store.as_deref() == Some("object");
        match (owner.purpose.as_deref(), held) {
            (Some("checkout"), true) => route.held.entry(institution).or_default().push(address),
            (Some("checkout"), false) => route.in_d1.push((institution, address)),
            (Some("topup"), true) => route.topups.entry(institution).or_default().push(address),
            // D1's top-up addresses are read by its own top-up watcher.
            _ => {}
        }
    }
    route
}

/// The held deposit of `transfer`.
fn held(
    network: &str,
    transfer: &evm::Transfer,
    reason: HeldReason,
    institution_id: Option<InstitutionId>,
    now: i64,
) -> HeldDeposit {
    HeldDeposit {
        network: network.to_owned(),
        tx_hash: transfer.tx_hash.clone(),
        log_index: i64::try_from(transfer.log_index).unwrap_or(i64::MAX),
        address: transfer.to.clone(),
        token: transfer.token.lower(),
        sender: transfer.from.clone(),
        amount_units: transfer.amount.map(|a| a.to_string()),
        block_number: i64::try_from(transfer.block_number).unwrap_or(i64::MAX),
        reason,
        institution_id,
        seen_at: now,
    }
}

#[cfg(test)]
mod tests {
    use payrail_evm::Token;

    use super::*;

    fn transfer(block: u64, log: u64, to: &str) -> evm::Transfer {
        evm::Transfer {
            token: Token::Native,
            to: to.to_owned(),
            from: None,
            tx_hash: format!("0x{block:02x}{log:02x}"),
            log_index: log,
            block_number: block,
            amount: Some(1),
        }
    }

    #[test]
    fn a_pass_keeps_whole_blocks_within_its_receivers() {
        // Within the limit: all kept.
        let mut all = vec![
            transfer(2, 0, "a"),
            transfer(1, 0, "b"),
            transfer(2, 1, "a"),
        ];
        assert_eq!(within_receivers(&mut all, 2), None);
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].block_number, 1, "in chain order");
        // The third receiver is in block 3: blocks 1 and 2 are kept, block 3 is next time's.
        let mut more = vec![
            transfer(1, 0, "a"),
            transfer(2, 0, "b"),
            transfer(2, 1, "a"),
            transfer(3, 0, "c"),
            transfer(4, 0, "d"),
        ];
        assert_eq!(within_receivers(&mut more, 2), Some(3));
        assert_eq!(more.len(), 3);
        // One block past the limit alone is read whole.
        let mut one = vec![
            transfer(5, 0, "a"),
            transfer(5, 1, "b"),
            transfer(5, 2, "c"),
        ];
        assert_eq!(within_receivers(&mut one, 2), None);
        assert_eq!(one.len(), 3);
        // The limit passed inside the second block: only the first is kept.
        let mut inside = vec![
            transfer(5, 0, "a"),
            transfer(6, 0, "b"),
            transfer(6, 1, "c"),
        ];
        assert_eq!(within_receivers(&mut inside, 2), Some(6));
        assert_eq!(inside.len(), 1);
        // Nothing at all.
        assert_eq!(within_receivers(&mut Vec::new(), 2), None);
    }

    #[test]
    fn receivers_are_routed_by_where_their_money_is() {
        let owner = |address: &str,
                     given: bool,
                     institution: Option<i64>,
                     purpose: Option<&str>,
                     store: Option<&str>| Owner {
            address: address.to_owned(),
            given,
            institution_id: institution.map(InstitutionId),
            purpose: purpose.map(str::to_owned),
            store: store.map(str::to_owned),
        };
        let owners = vec![
            owner("free", false, None, None, None),
            owner("d1", true, Some(1), Some("checkout"), Some("d1")),
            owner("held", true, Some(2), Some("checkout"), Some("object")),
            owner("held2", true, Some(2), Some("checkout"), Some("object")),
            owner("topup", true, Some(2), Some("topup"), Some("object")),
            owner("d1topup", true, Some(1), Some("topup"), Some("d1")),
            owner("legacy", true, None, None, None),
        ];
        let route = route(owners);
        assert_eq!(route.free.iter().collect::<Vec<_>>(), ["free"]);
        assert_eq!(route.in_d1, [(InstitutionId(1), "d1".to_owned())]);
        assert_eq!(route.held.len(), 1);
        assert_eq!(route.held[&InstitutionId(2)], ["held", "held2"]);
        assert_eq!(route.topups.len(), 1);
        assert_eq!(route.topups[&InstitutionId(2)], ["topup"]);
    }
}
