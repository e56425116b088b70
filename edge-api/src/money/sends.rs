//! The treasury's transactions out, for settlements and refunds alike, written once: sign with
//! the next nonce → store (in the same D1 batch as what the transaction pays) → broadcast →
//! follow → replace when stuck → confirm or fail, only on final evidence.
//!
//! The rules that keep money from moving twice:
//! - **Final evidence only.** A transaction is confirmed or failed only from its receipt, at
//!   the network's confirmation depth, and only once a second read shows the receipt's block is
//!   still the chain's block at that height (a reorg, or a backend behind a load balancer that
//!   lags, says otherwise).
//! - **A used nonce is ours.** Only this worker signs for the treasury, and every transaction
//!   is stored before it is broadcast. When the treasury's nonce is used on chain but the node
//!   has no receipt for any of that nonce's transactions (a lagging or pruned node answers
//!   `null`), one of them was mined all the same: nothing is re-signed, the transaction waits
//!   for its receipt, and once it has waited [`stuck_after`] blocks its purpose is held with
//!   the reason.
//! - **The same bytes first.** Unknown to the node (restarted, evicted, or refusing it), a
//!   transaction is broadcast again as it was signed.
//! - **Bounded replacement.** A transaction still unmined [`stuck_after`] blocks after it was
//!   sent (the node waits for a lower base fee, evicted it as underpriced, or refuses it) is
//!   replaced with the same nonce at the current price, at least a quarter above the old one,
//!   but never above the network's `max_gas_price_gwei` nor [`MAX_PRICE_GROWTH`] times the
//!   nonce's first price: there it stops, and its purpose is held with the reason.
//! - **Balances count what is in flight.** What the treasury can send is its balance less what
//!   its live transactions not yet mined will still take ([`available`]).

use std::collections::BTreeMap;
use std::str::FromStr;

use payrail_evm::{Address, Token};
use serde_json::{json, Value};
use shared_types::ids::Scoped;
use shared_types::SendState;

use super::ledger;
use super::settle::plan::{self, Plan};
use super::treasury::{self, Treasury};
use crate::chain::config::{self, Network};
use crate::chain::error::{ChainError, ChainResult};
use crate::chain::rpc::Node;
use crate::chain::{native, rates, rpc};
use crate::crypto;
use crate::ctx::Ctx;
use crate::db::bridges::{self, Carrier};
use crate::db::sends::{self, Call, Leg, NewSend, Outgoing, Purpose};
use crate::db::{self, refunds, settlements, Batch, Stmt};
use crate::error::{ApiError, OrInternal};

/// Most transactions out a run follows.
const LIVE_PER_RUN: i64 = 20;
/// The most node calls following one transaction makes: the head, the receipts of its nonce's
/// transactions (a capped replacement makes at most a dozen), the block, the nonce, the
/// transaction, a broadcast, and a replacement's price, L1 data fee bound, rates and broadcast.
pub(crate) const MOST_FOLLOW_CALLS: u32 = 1 + 12 + 1 + 1 + 1 + 1 + 2 + 1 + 5 * 5 + 1;
/// A stuck transaction's replacements never cost more per gas than this many times the first
/// price its nonce was signed at.
pub const MAX_PRICE_GROWTH: u128 = 10;

/// Blocks after its broadcast that a transaction may stay unmined before it is replaced at a
/// higher price (or, when it cannot be, held).
pub fn stuck_after(network: &Network) -> u64 {
    (3 * network.confirmations).max(10)
}

/// A new send id.
pub fn new_id() -> ChainResult<String> {
    crypto::random_token(shared_types::ids::SendId::PREFIX)
        .map_err(|e| ChainError::Config(e.to_string()))
}

/// A transfer out of the treasury, priced, to sign.
pub struct Transfer<'a> {
    /// What it pays.
    pub purpose: Purpose<'a>,
    /// The token contract, or the coin.
    pub token: Token,
    /// The receiver.
    pub to: Address,
    /// Base units.
    pub units: u128,
    /// What a settlement pays less than its payments' net: the merchant's debt netted.
    pub netted: u128,
    /// Gas limit.
    pub gas: u64,
    /// Wei per gas.
    pub price: u128,
    /// The most L1 data fee it pays besides its gas, in wei ([`treasury::l1_fee_bound`]).
    pub l1_fee: u128,
    /// Where the gas's rate came from.
    pub rate_source: &'a str,
    /// A bridge's leg: the contract call it makes instead of paying `to` (which is then the
    /// merchant's wallet the bridge pays), and which leg.
    pub call: Option<(Call<'a>, Leg)>,
    /// Stored only if the last statement of what comes before it changed a row (its guard: of
    /// two runs, one stores it).
    pub guarded: bool,
}

/// Signs `transfer` with the treasury's next nonce on `name` and stores it as `send_id` in one
/// batch with `before` and `after` (its purpose's statements, around the send's insert), then
/// broadcasts it: `Ok(Some(hash))`. `Ok(None)`: the batch stored no transaction (the purpose
/// already has one out, or lost a race: another run's batch took the nonce or the payments),
/// and nothing was sent.
pub async fn send(
    ctx: &Ctx,
    treasury: &Treasury,
    (name, network): (&str, &Network),
    head: u64,
    (send_id, transfer): (&str, &Transfer<'_>),
    (before, after): (Vec<Stmt>, Vec<Stmt>),
) -> ChainResult<Option<String>> {
    let node = &network.node;
    let nonce = next_nonce(ctx, node, name, &treasury.address).await?;
    let priced = (nonce, transfer.gas, transfer.price);
    let signed = match transfer.call {
        Some((call, _)) => treasury::sign_call(treasury, network, call, priced)?,
        None => treasury::sign(
            treasury,
            network,
            (transfer.token, transfer.to),
            priced,
            transfer.units,
        )?,
    };
    let new = NewSend {
        id: send_id,
        purpose: transfer.purpose,
        network: name,
        sender: &treasury.address,
        nonce,
        gas_limit: transfer.gas,
        gas_price: transfer.price,
        l1_fee: transfer.l1_fee,
        rate_source: transfer.rate_source,
        units: transfer.units,
        netted: transfer.netted,
        tx_hash: &signed.hash,
        raw: &signed.raw,
        head,
        now: ctx.now(),
        call: transfer.call,
    };
    let mut batch = Batch::new();
    batch.extend(before);
    let insert = batch.push(if transfer.guarded {
        sends::insert_after_change(&new)?
    } else {
        sends::insert(&new)?
    });
    batch.extend(after);
    let stored = match batch.run(&ctx.db).await {
        Ok(results) => results.changed(insert),
        Err(e) => {
            // Another run claimed one of these payments, or took the nonce: nothing was
            // stored, and nothing is sent.
            worker::console_warn!("{send_id} not stored ({e}): another run is sending");
            false
        }
    };
    if !stored {
        return Ok(None);
    }
    broadcast(ctx, node, send_id, &signed.raw, head).await;
    Ok(Some(signed.hash))
}

/// The nonce the treasury's next transaction on `network` takes: the higher of the node's
/// pending count and one past the highest stored that was or may still be mined (the batch
/// that stores it is what takes it: see `db::sends`).
async fn next_nonce(ctx: &Ctx, node: &Node, network: &str, sender: &str) -> ChainResult<u64> {
    let pending = rpc::quantity(
        &rpc::call(node, "eth_getTransactionCount", json!([sender, "pending"]))
            .await
            .map_err(|e| ChainError::from(e).within(format!("the {network} node")))?,
    )?;
    let stored = sends::next_nonce(&ctx.db, network, sender).await?;
    Ok(pending.max(stored))
}

/// Sends the signed bytes to the node and records the outcome; a failure is retried by
/// [`follow`].
async fn broadcast(ctx: &Ctx, node: &Node, send_id: &str, raw: &str, head: u64) {
    let error = rpc::call(node, "eth_sendRawTransaction", json!([raw]))
        .await
        .err();
    if let Some(e) = &error {
        worker::console_warn!("broadcast of {send_id}: {e}");
    }
    let error = error.map(|e| e.public());
    if let Err(e) = sends::broadcast(&ctx.db, send_id, head, error.as_deref(), ctx.now()).await {
        worker::console_warn!("record the broadcast of {send_id}: {e}");
    }
}

/// What the treasury can still send on `name`: its balance of `token` and of the coin, less
/// what its transactions out and not yet mined will take (their units, and for the coin their
/// most gas).
pub async fn available(
    ctx: &Ctx,
    (name, network): (&str, &Network),
    treasury: &Treasury,
    token: Token,
) -> ChainResult<(u128, u128)> {
    let node = &network.node;
    let at_node = |e: ChainError| e.within(format!("the {name} node"));
    let have = treasury::balance(node, &treasury.address, token)
        .await
        .map_err(at_node)?;
    let coins = treasury::balance(node, &treasury.address, Token::Native)
        .await
        .map_err(at_node)?;
    let mined = rpc::quantity(
        &rpc::call(
            node,
            "eth_getTransactionCount",
            json!([treasury.address, "latest"]),
        )
        .await
        .map_err(|e| at_node(e.into()))?,
    )?;
    let (mut asset_out, mut coin_out) = (0u128, 0u128);
    for out in sends::in_flight(&ctx.db, name, &treasury.address).await? {
        if out.nonce < mined {
            continue; // mined: the balance shows it already
        }
        let units = u128::from_str(&out.units).unwrap_or(u128::MAX);
        let price = u128::from_str(&out.gas_price).unwrap_or(u128::MAX);
        let l1_fee = u128::from_str(&out.l1_fee).unwrap_or(u128::MAX);
        let fee = treasury::most_fee(out.gas_limit, price, l1_fee).unwrap_or(u128::MAX);
        coin_out = coin_out.saturating_add(fee);
        if out.token == Token::Native {
            coin_out = coin_out.saturating_add(units);
        }
        if out.token == token {
            asset_out = asset_out.saturating_add(units);
        }
    }
    let coins_left = coins.saturating_sub(coin_out);
    let asset_left = if token == Token::Native {
        coins_left
    } else {
        have.saturating_sub(asset_out)
    };
    Ok((asset_left, coins_left))
}

// ---------------------------------------------------------------------------------------------
// Following

/// A transaction out that cannot go on by itself, and why: its purpose is held (a
/// settlement's payments) or noted (a refund) with the reason.
pub struct Stalled {
    /// The transaction.
    pub send: Outgoing,
    /// Why, in words that may be shown.
    pub reason: String,
}

/// Follows every transaction out (settlements' and refunds'), at most [`LIVE_PER_RUN`] a run;
/// returns those that are stalled.
pub async fn follow(
    ctx: &Ctx,
    networks: &BTreeMap<String, Network>,
    treasury: &Treasury,
) -> Result<Vec<Stalled>, ApiError> {
    let live = sends::live(&ctx.db, LIVE_PER_RUN)
        .await
        .or_internal("read transactions out")?;
    let mut stalled = Vec::new();
    // Each network's node is asked its chain id once a run: one on another chain is not read.
    let mut chains = crate::chain::ChainChecks::default();
    for send in live {
        let Some((name, network)) = networks.get_key_value(&send.network) else {
            worker::console_warn!(
                "{} is no longer configured: {} waits",
                send.network,
                send.id
            );
            continue;
        };
        let right = chains.right(name, network, "transactions out").await;
        if !right || network.node.calls_left() < MOST_FOLLOW_CALLS {
            continue; // another chain, or this run's calls on it are spent: next run
        }
        match follow_one(ctx, network, treasury, &send).await {
            Ok(None) => {}
            Ok(Some(reason)) => stalled.push(Stalled { send, reason }),
            Err(e) if e.is_budget() => {}
            Err(e) => {
                worker::console_warn!("following {}: {e}", send.id);
                let within = match e {
                    stale @ ChainError::StaleHead(_) => stale,
                    e => e.within(format!("the {} node", send.network)),
                };
                if let Err(e) = sends::note(&ctx.db, &send.id, &within.public(), ctx.now()).await {
                    worker::console_warn!("record why {} waits: {e}", send.id);
                }
            }
        }
    }
    Ok(stalled)
}

/// The first of `candidates` (one nonce's transactions) that has a receipt, with it.
async fn mined<'a>(
    node: &Node,
    candidates: &'a [Outgoing],
) -> ChainResult<Option<(&'a Outgoing, Value)>> {
    for candidate in candidates {
        let answer = rpc::call(
            node,
            "eth_getTransactionReceipt",
            json!([candidate.tx_hash]),
        )
        .await?;
        if !answer.is_null() {
            return Ok(Some((candidate, answer)));
        }
    }
    Ok(None)
}

/// One step of one transaction out; `Some(reason)` when it is stalled.
async fn follow_one(
    ctx: &Ctx,
    network: &Network,
    treasury: &Treasury,
    send: &Outgoing,
) -> ChainResult<Option<String>> {
    let node = &network.node;
    let now = ctx.now();
    let head = rpc::head(node).await?;
    // A node whose head stands still says nothing final: no receipt is acted on, no nonce
    // taken for used, nothing broadcast again or replaced, until it moves.
    crate::chain::heads::fresh(ctx, &send.network, network, head).await?;
    let stuck = head >= send.sent_block.saturating_add(stuck_after(network));
    // The live transaction, or one it replaced, may be the one mined.
    let mut candidates = vec![send.clone()];
    candidates.extend(sends::replaced(&ctx.db, send).await?);
    if let Some((carrier, receipt)) = mined(node, &candidates).await? {
        return settle_receipt(ctx, network, send, carrier, &receipt, head).await;
    }
    let used = rpc::quantity(
        &rpc::call(
            node,
            "eth_getTransactionCount",
            json!([send.sender, "latest"]),
        )
        .await?,
    )?;
    if used > send.nonce {
        // One of this nonce's transactions was mined (nothing else signs for the treasury),
        // and the node has no receipt for it: wait for one, never sign again.
        let why = format!(
            "nonce {} is used on chain, but the node has no receipt for its transaction yet",
            send.nonce
        );
        sends::note(&ctx.db, &send.id, &why, now).await?;
        return Ok(stuck.then_some(why));
    }
    let known = rpc::call(node, "eth_getTransactionByHash", json!([send.tx_hash])).await?;
    if known.is_null() {
        // The node does not have it (restarted, evicted, refused it): the same bytes again.
        let error = rpc::call(node, "eth_sendRawTransaction", json!([send.raw]))
            .await
            .err()
            .map(|e| e.public());
        sends::broadcast(&ctx.db, &send.id, send.sent_block, error.as_deref(), now).await?;
    }
    if stuck {
        // Unmined long after it was sent: the node waits for a lower base fee, evicted it as
        // underpriced, or will not take it. A higher price is the remedy for the first two,
        // and the caps bound it for the third.
        let first_price = candidates
            .iter()
            .filter_map(|c| u128::from_str(&c.gas_price).ok())
            .min()
            .unwrap_or(0);
        return replace(ctx, network, treasury, send, (head, first_price)).await;
    }
    Ok(None)
}

/// Acts on a receipt of one of the nonce's transactions (`carrier`), only once it is final:
/// at depth, and its block still the chain's at that height.
async fn settle_receipt(
    ctx: &Ctx,
    network: &Network,
    live: &Outgoing,
    carrier: &Outgoing,
    receipt: &Value,
    head: u64,
) -> ChainResult<Option<String>> {
    let Some(block) = crate::chain::final_block(network, receipt, head).await? else {
        return Ok(None);
    };
    let now = ctx.now();
    let gas_used = native::wei(&receipt["gasUsed"])
        .ok_or_else(|| ChainError::answer("the receipt's gasUsed is not a quantity"))?;
    // What the gas (and on an OP Stack chain the L1 data fee) cost to the wei: the receipt's
    // effective price (ours is fixed when signing, so it is the signed price unless the node
    // says otherwise) and its `l1Fee`.
    let signed_price = u128::from_str(&carrier.gas_price)
        .map_err(|_| ChainError::answer("a stored gas price is not a number"))?;
    let gas_wei = treasury::fee_paid(receipt, signed_price)?;
    let succeeded = rpc::quantity(&receipt["status"])? == 1;
    if carrier.leg() == Some(Leg::Mint) {
        let statements = end_mint(
            ctx,
            network,
            (live, carrier),
            (receipt, succeeded),
            block,
            gas_wei,
        )
        .await?;
        db::batch(&ctx.db, statements).await?;
        return Ok(None);
    }
    let statements = if succeeded {
        let mut statements = sends::confirm(carrier, &live.id, block, gas_used, now)?;
        match (carrier.purpose(), Carrier::of_send(carrier)) {
            // A burn final: the attestation is awaited, and the settlement is paid (or the
            // float moved) at the mint.
            (_, Some(bridge)) => statements.push(bridges::burnt(bridge, &carrier.tx_hash, now)?),
            (Purpose::FloatMove(_), None) => {
                return Err(ChainError::answer(
                    "a float move's transaction is not a leg",
                ))
            }
            (Purpose::Settlement(id), None) => statements.extend(settlements::confirm(
                Scoped::new(carrier.institution_id, id),
                now,
            )?),
            (Purpose::Refund(id), _) => {
                statements.push(refunds::confirm(
                    Scoped::new(carrier.institution_id, id),
                    now,
                )?);
            }
        }
        let when = sends::in_state(&carrier.id, SendState::Confirmed);
        statements
            .extend(ledger::end_send(ctx, (live, carrier), true, gas_wei, false, &when).await?);
        statements
    } else {
        // Reverted at depth: the nonce is used for good, nothing of it can be mined any more.
        let why = format!("{} reverted in block {block}", carrier.tx_hash);
        let mut statements = vec![sends::fail(&live.id, block, &why, now)?];
        if let Some(bridge) = Carrier::of_send(live) {
            statements.push(bridges::failed(bridge, now)?);
        }
        match live.purpose() {
            Purpose::Settlement(id) => {
                let settlement = Scoped::new(live.institution_id, id);
                statements.extend(settlements::fail(settlement, &why, now)?);
            }
            Purpose::FloatMove(_) => {}
            Purpose::Refund(id) => {
                statements.push(refunds::attempt_failed(
                    Scoped::new(live.institution_id, id),
                    &why,
                    now,
                )?);
            }
        }
        // A refund given up at its last attempt releases what it reserved.
        let given_up = match live.purpose() {
            Purpose::Refund(id) => {
                refunds::attempts(&ctx.db, Scoped::new(live.institution_id, id)).await? + 1
                    >= refunds::ATTEMPTS
            }
            Purpose::Settlement(_) | Purpose::FloatMove(_) => false,
        };
        let when = sends::in_state(&live.id, SendState::Failed);
        statements
            .extend(ledger::end_send(ctx, (live, carrier), false, gas_wei, given_up, &when).await?);
        statements
    };
    db::batch(&ctx.db, statements).await?;
    Ok(None)
}

/// The statements recording a bridge's mint final on the destination (`network`): succeeded,
/// the message is received (the fee it collected read from its `MintAndWithdraw`), the bridge
/// minted and its settlement confirmed; reverted, the message may still have been received by
/// someone else's transaction first (then that one is recorded as the mint, and the treasury's
/// only spent gas), or not (the bridge goes back to be minted again). Its gas is posted either
/// way.
async fn end_mint(
    ctx: &Ctx,
    network: &Network,
    (live, carrier): (&Outgoing, &Outgoing),
    (receipt, succeeded): (&Value, bool),
    block: u64,
    gas_wei: u128,
) -> ChainResult<Vec<Stmt>> {
    let now = ctx.now();
    let carried = Carrier::of_send(carrier).ok_or_else(|| {
        ChainError::answer("a mint carries neither a settlement nor a float move")
    })?;
    let bridge = bridges::of(&ctx.db, carried)
        .await?
        .ok_or_else(|| ChainError::answer("a mint's bridge is not stored"))?;
    let gas_used = native::wei(&receipt["gasUsed"])
        .ok_or_else(|| ChainError::answer("the receipt's gasUsed is not a quantity"))?;
    let (mut statements, state, received) = if succeeded {
        let fee = crate::money::bridge_reads::fee_of_mint(network, &bridge, receipt)?;
        let mut statements = sends::confirm(carrier, &live.id, block, gas_used, now)?;
        statements.push(bridges::minted(carried, (&carrier.tx_hash, fee), now)?);
        (statements, SendState::Confirmed, Some(fee))
    } else {
        let why = format!("{} reverted in block {block}", carrier.tx_hash);
        let mut statements = vec![sends::fail(&live.id, block, &why, now)?];
        match crate::money::bridge_reads::received_elsewhere(network, &bridge).await? {
            Some((hash, fee)) => {
                statements.push(bridges::minted(carried, (&hash, fee), now)?);
                (statements, SendState::Failed, Some(fee))
            }
            None => {
                statements.push(bridges::mint_failed(carried, &why, now)?);
                (statements, SendState::Failed, None)
            }
        }
    };
    if let (Some(_), Carrier::Settlement(settlement)) = (received, carried) {
        statements.extend(settlements::confirm(settlement, now)?);
    }
    let id_of_state = if succeeded { &carrier.id } else { &live.id };
    let when = sends::in_state(id_of_state, state);
    let mint = ledger::MintEnd {
        live,
        carrier,
        gas_wei,
    };
    statements.extend(ledger::end_mint(ctx, &bridge, Some(mint), received, &when).await?);
    Ok(statements)
}

/// Replaces a stuck transaction: the same nonce, at the current price and at least a quarter
/// above the old one (nodes want a tenth more to replace), within the network's cap and
/// [`MAX_PRICE_GROWTH`] times the nonce's first price (`first_price`); a settlement's payments
/// are priced again at it (their fees are what it costs), a refund sends the same amount (its
/// gas is the PSP's). Beyond a cap it is stalled instead.
async fn replace(
    ctx: &Ctx,
    network: &Network,
    treasury: &Treasury,
    send: &Outgoing,
    (head, first_price): (u64, u128),
) -> ChainResult<Option<String>> {
    let node = &network.node;
    let gwei = |wei: u128| wei.div_ceil(config::WEI_PER_GWEI);
    let old_price = u128::from_str(&send.gas_price)
        .map_err(|_| ChainError::answer("a stored gas price is not a number"))?;
    let price = treasury::gas_price(node)
        .await?
        .max(old_price.saturating_add(old_price / 4).saturating_add(1));
    let cap = network
        .max_gas_price()
        .min(first_price.saturating_mul(MAX_PRICE_GROWTH));
    if price > cap {
        // Worded without the market's price, so the reason (and its alert) stays the same
        // while it waits.
        let why = format!(
            "the treasury's transaction is stuck at {} gwei per gas, and replacing it would go \
             above the cap of {} gwei",
            gwei(old_price),
            gwei(cap)
        );
        sends::note(&ctx.db, &send.id, &why, ctx.now()).await?;
        return Ok(Some(why));
    }
    // The L1 data fee bounded again (it follows L1's fees), never below the first bound.
    let old_l1_fee = u128::from_str(&send.l1_fee)
        .map_err(|_| ChainError::answer("a stored L1 fee is not a number"))?;
    let l1_fee = treasury::l1_fee_bound(network).await?.max(old_l1_fee);
    let gas_wei = treasury::most_fee(send.gas_limit, price, l1_fee)
        .ok_or_else(|| ChainError::answer("the replacement's fees are out of range"))?;
    let (units, items, rate_source) = match send.purpose() {
        // Held in its institution's object: the payments were charged what the first
        // transaction was priced at, and a replacement pays the same (its extra gas is the
        // treasury's).
        Purpose::Settlement(_) if send.held_by.is_some() => {
            let units = u128::from_str(&send.units)
                .map_err(|_| ChainError::answer("stored units are not a number"))?;
            (units, Vec::new(), send.rate_source.clone())
        }
        // A bridge's leg calls a contract with its amount signed in: a replacement makes the
        // same call (its extra gas is the treasury's), and a burn keeps its payments' parts.
        Purpose::Settlement(_) if send.leg().is_some() => {
            let units = u128::from_str(&send.units)
                .map_err(|_| ChainError::answer("stored units are not a number"))?;
            let items = match send.leg() {
                Some(Leg::Burn) => {
                    settlements::items_of(&ctx.db, Scoped::new(send.institution_id, &send.id))
                        .await?
                }
                _ => Vec::new(),
            };
            (units, items, send.rate_source.clone())
        }
        Purpose::Settlement(settlement_id) => {
            let settlement = Scoped::new(send.institution_id, settlement_id);
            match reprice(ctx, network, settlement, (&send.network, price, gas_wei)).await? {
                Repriced::At(priced, source) => (priced.units, priced.items, source),
                Repriced::Cannot(why) => {
                    sends::note(&ctx.db, &send.id, &why, ctx.now()).await?;
                    return Ok(Some(why));
                }
            }
        }
        // A refund sends the same amount (its gas is the PSP's); a float move's leg makes the
        // same call (its gas is the platform's).
        Purpose::Refund(_) | Purpose::FloatMove(_) => {
            let units = u128::from_str(&send.units)
                .map_err(|_| ChainError::answer("stored units are not a number"))?;
            (units, Vec::new(), send.rate_source.clone())
        }
    };
    // The books: the old transaction's reservations voided, the new one's made (a settlement
    // at its new fees, its merchant's debt netted as before).
    let send_id = new_id()?;
    let parts = match send.purpose() {
        Purpose::Settlement(_) if send.held_by.is_none() && send.leg().is_none() => {
            Some(ledger::parts(&items)?)
        }
        _ => None,
    };
    let when = sends::in_state(&send_id, SendState::Live);
    let (books, units) =
        match ledger::replace_send(ctx, send, &send_id, parts.as_deref(), gas_wei, &when).await {
            Ok((books, payout)) => (books, if parts.is_some() { payout } else { units }),
            Err(ChainError::Rule(why)) => {
                sends::note(&ctx.db, &send.id, &why, ctx.now()).await?;
                return Ok(Some(why));
            }
            Err(e) => return Err(e),
        };
    let netted = match parts {
        Some(_) => items
            .iter()
            .filter_map(|i| u128::from_str(&i.units).ok())
            .sum::<u128>()
            .saturating_sub(units),
        None => u128::from_str(&send.netted).unwrap_or(0),
    };
    let priced = (send.nonce, send.gas_limit, price);
    let signed = match send.call() {
        Some(call) => treasury::sign_call(treasury, network, call, priced)?,
        None => treasury::sign(treasury, network, (send.token, send.wallet), priced, units)?,
    };
    let new = NewSend {
        id: &send_id,
        purpose: send.purpose(),
        network: &send.network,
        sender: &send.sender,
        nonce: send.nonce,
        gas_limit: send.gas_limit,
        gas_price: price,
        l1_fee,
        rate_source: &rate_source,
        units,
        netted,
        tx_hash: &signed.hash,
        raw: &signed.raw,
        head,
        now: ctx.now(),
        call: send.call().zip(send.leg()),
    };
    let [retire, store] = sends::replace(&send.id, &new)?;
    let mut batch = Batch::new();
    batch.push(retire);
    let stored = batch.push(store);
    batch.extend(settlements::items(&send_id, &items)?);
    batch.extend(books);
    // Only what was stored is sent: of racing runs, the one that retired the old transaction.
    match batch.run(&ctx.db).await {
        Ok(results) if results.changed(stored) => {
            broadcast(ctx, node, &send_id, &signed.raw, head).await;
        }
        Ok(_) => worker::console_warn!("{} not replaced: another run replaced it", send.id),
        Err(e) => worker::console_warn!("replacement of {} not stored ({e})", send.id),
    }
    Ok(None)
}

/// A settlement priced again.
enum Repriced {
    /// Its payments at the new price, and the feeds that priced the gas.
    At(Plan, String),
    /// It cannot be: why.
    Cannot(String),
}

/// A settlement's payments on `name` priced again at `price` per gas, which with the L1 data
/// fee makes `gas_wei` at most.
async fn reprice(
    ctx: &Ctx,
    network: &Network,
    settlement: Scoped<&str>,
    (name, price, gas_wei): (&str, u128, u128),
) -> ChainResult<Repriced> {
    let due = settlements::claimed(&ctx.db, settlement).await?;
    if due.is_empty() {
        return Ok(Repriced::Cannot(
            "its payments are no longer held in custody".to_owned(),
        ));
    }
    let coin = config::coin(name);
    let mut coin_rates = BTreeMap::new();
    let mut sources = Vec::new();
    for d in &due {
        if !coin_rates.contains_key(&d.currency) {
            let rate = rates::coin_rate(network, name, coin, &d.currency, ctx.now()).await?;
            coin_rates.insert(d.currency.clone(), rate.per_unit);
            sources.push(rate.source);
        }
    }
    let priced = plan::plan(&due, gas_wei, &coin_rates);
    if !priced.held.is_empty() {
        return Ok(Repriced::Cannot(format!(
            "a replacement at {} gwei per gas would leave a payment nothing",
            price.div_ceil(config::WEI_PER_GWEI)
        )));
    }
    Ok(Repriced::At(priced, sources.join("; ")))
}
