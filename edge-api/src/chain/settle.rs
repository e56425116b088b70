//! Settlement: the treasury pays each merchant the net of its payments held in custody, in the
//! asset and on the network they were paid in, with EIP-1559 transactions it signs itself
//! ([`super::tx`]), and each payment is marked paid (`payment.paid`) once that transaction is at
//! the network's confirmation depth.
//!
//! It runs from the cron, in three steps, each bounded per run:
//! 1. **follow** every transaction out: at depth and succeeded, its settlement is confirmed;
//!    reverted, or its nonce taken by another transaction, its settlement fails and lets go of
//!    its payments (they settle again, in a new transaction; never `payment.paid` for a failed
//!    one); unknown to the node, it is broadcast again (the same bytes); still unmined
//!    [`stuck_after`] blocks after its broadcast, it is replaced by one with the same nonce at a
//!    higher price (priced again, so its fees are what it costs). Whichever of them is mined is
//!    the settlement's.
//! 2. **finish**: the payments of confirmed settlements are marked paid through the lifecycle,
//!    with the real transaction hash and the fees their transaction was signed with.
//! 3. **start**: payments held in custody and in no settlement are grouped per merchant,
//!    network and asset (a batch: one transfer, its gas shared), priced, signed and stored in
//!    one D1 batch (the claims and the nonce make a second worker's batch for the same payments
//!    fail whole) before they are broadcast. A group that cannot settle (no wallet on the
//!    network, the treasury short of the asset or of gas, no rate to price the gas) is held:
//!    the reason is on each payment and the institution is told once per new reason; it settles
//!    by itself once that is fixed.
//!
//! Fees, in the order currency: the PSP fee is the institution's basis points of the gross;
//! the gas fee is the transaction's gas limit (from `eth_estimateGas`) times its price, split
//! evenly over the batch's payments and converted with the network coin's price feed. The price
//! is fixed when signing (max fee = priority fee = 5/4 of the base fee plus the node's tip), so
//! the fee charged is the fee paid. `net = gross − psp_fee − gas_fee` exactly; the merchant
//! receives `net` in the asset at the payment's own quote, rounded down to base units.

use std::collections::BTreeMap;
use std::str::FromStr;

use rust_decimal::{Decimal, RoundingStrategy};
use serde_json::{json, Value};
use shared_types::checkout::currency_digits;
use shared_types::lifecycle::Action;
use shared_types::ErrorCode;

use super::config::{self, Network, NATIVE_DECIMALS, NATIVE_TOKEN};
use super::treasury::{self, balance, broadcast, estimate, gas_price, sign, Treasury};
use super::{evm, native, networks, rates, rpc};
use crate::ctx::Ctx;
use crate::db::settlements::{self, Due, Item, NewSend, NewSettlement, Purpose, Send};
use crate::db::{self, wallets};
use crate::error::{ApiError, OrInternal};
use crate::{crypto, payments};

/// Most payments considered for new settlements a run.
const DUE_PER_RUN: i64 = 200;
/// Most groups (merchant, network, asset) a run starts settling.
const GROUPS_PER_RUN: usize = 5;
/// Most transactions out a run follows.
const LIVE_PER_RUN: i64 = 20;
/// Most payments of confirmed settlements a run marks paid.
const FINISH_PER_RUN: i64 = 100;
/// Most payments in one batch.
const BATCH_LIMIT: usize = 50;

/// Blocks after its broadcast that a transaction may stay unmined before it is replaced at a
/// higher price.
pub fn stuck_after(network: &Network) -> u64 {
    (3 * network.confirmations).max(10)
}

/// The cron's part: follow every transaction out (settlements' and refunds'), finish the
/// confirmed settlements, start new ones.
pub async fn run(ctx: &Ctx) -> Result<(), ApiError> {
    let Some(treasury) = treasury::treasury(ctx)? else {
        return Ok(());
    };
    let networks = networks(ctx)?;
    follow(ctx, &networks, &treasury).await?;
    finish(ctx).await?;
    start(ctx, &networks, &treasury).await
}

// ---------------------------------------------------------------------------------------------
// Pricing (pure)

/// What a batch pays: each payment's part, the units sent in all, and the payments left out
/// (with why).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The parts.
    pub items: Vec<Item>,
    /// Base units transferred.
    pub units: u128,
    /// Payments that cannot settle in it.
    pub held: Vec<(i64, String)>,
}

/// Prices a batch: `gas_wei` (limit × price) shared evenly (the first takes the remainder),
/// converted with `coin_rates` (order-currency units per coin, by currency). A payment whose
/// fees leave nothing is left out and the gas shared again among the rest. Pure.
pub fn plan(due: &[Due], gas_wei: u128, coin_rates: &BTreeMap<String, Decimal>) -> Plan {
    let mut held = Vec::new();
    let mut included: Vec<&Due> = due.iter().collect();
    while !included.is_empty() {
        let n = included.len() as u128;
        let mut items = Vec::new();
        let mut units = 0u128;
        let mut dropped = None;
        for (k, d) in included.iter().enumerate() {
            let wei = gas_wei / n + if k == 0 { gas_wei % n } else { 0 };
            match part(d, wei, coin_rates) {
                Ok((item, u)) => {
                    units += u;
                    items.push(item);
                }
                Err(why) => {
                    dropped = Some((k, why));
                    break;
                }
            }
        }
        match dropped {
            Some((k, why)) => {
                held.push((included[k].transaction_id, why));
                included.remove(k);
            }
            None => return Plan { items, units, held },
        }
    }
    Plan {
        items: Vec::new(),
        units: 0,
        held,
    }
}

/// One payment's part when its gas share is `wei`.
fn part(
    d: &Due,
    wei: u128,
    coin_rates: &BTreeMap<String, Decimal>,
) -> Result<(Item, u128), String> {
    let number =
        |text: &str| Decimal::from_str(text).map_err(|_| format!("{text} is not an amount"));
    let gross = number(&d.gross)?;
    let expected = number(&d.expected)?;
    let crypto_amount = number(&d.crypto_amount)?;
    let digits = currency_digits(&d.currency).unwrap_or(2);
    let rate = coin_rates
        .get(&d.currency)
        .ok_or_else(|| format!("no rate prices the gas in {}", d.currency))?;
    let coin = evm::from_units(wei, NATIVE_DECIMALS).ok_or("the gas cost is out of range")?;
    let round = |x: Decimal| {
        let mut rounded = x.round_dp_with_strategy(digits, RoundingStrategy::MidpointAwayFromZero);
        rounded.rescale(digits);
        rounded
    };
    let gas_fee = round(coin * rate);
    let psp_fee = round(gross * Decimal::from(d.psp_fee_bps) / Decimal::from(10_000));
    let net = gross - psp_fee - gas_fee;
    if net <= Decimal::ZERO || expected <= Decimal::ZERO || crypto_amount <= Decimal::ZERO {
        return Err(format!(
            "the fees ({psp_fee} PSP, {gas_fee} network) leave nothing of {gross} {} to settle",
            d.currency
        ));
    }
    let asset_net = (net * crypto_amount / expected)
        .round_dp_with_strategy(d.decimals, RoundingStrategy::ToZero);
    let units = evm::to_units(asset_net, d.decimals)
        .filter(|u| *u > 0)
        .ok_or_else(|| format!("{net} {} is less than one unit of {}", d.currency, d.asset))?;
    let item = Item {
        transaction_id: d.transaction_id,
        psp_fee: psp_fee.to_string(),
        gas_fee: gas_fee.to_string(),
        net: net.to_string(),
        units: units.to_string(),
    };
    Ok((item, units))
}

// ---------------------------------------------------------------------------------------------
// Step 3: start

/// Why a group does not settle now.
enum NotNow {
    /// Shown on its payments, and told to the institution.
    Hold(String),
    /// Someone else is settling it (a concurrent run won the batch): nothing to record.
    Raced,
}

impl From<String> for NotNow {
    fn from(why: String) -> Self {
        NotNow::Hold(why)
    }
}

async fn start(
    ctx: &Ctx,
    networks: &BTreeMap<String, Network>,
    treasury: &Treasury,
) -> Result<(), ApiError> {
    let due = settlements::due(&ctx.db, DUE_PER_RUN)
        .await
        .or_internal("read payments to settle")?;
    let sending = settlements::sending_groups(&ctx.db)
        .await
        .or_internal("read settlements out")?;
    let mut groups: BTreeMap<(i64, String, String), Vec<Due>> = BTreeMap::new();
    for d in due {
        let key = (d.merchant_id, d.network.clone(), d.asset.clone());
        if !sending.contains(&key) {
            let group = groups.entry(key).or_default();
            if group.len() < BATCH_LIMIT {
                group.push(d);
            }
        }
    }
    // Never held first, then the least recently held.
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by_key(|(_, group)| group.iter().map(|d| d.held_at).max().unwrap_or(0));
    for ((merchant_id, network, asset), group) in groups.into_iter().take(GROUPS_PER_RUN) {
        match settle_group(ctx, networks, treasury, &group).await {
            Ok(()) | Err(NotNow::Raced) => {}
            Err(NotNow::Hold(reason)) => {
                worker::console_warn!(
                    "settlement of merchant {merchant_id}'s {asset} on {network} held: {reason}"
                );
                let ids: Vec<i64> = group.iter().map(|d| d.transaction_id).collect();
                hold(ctx, group[0].institution_id, &ids, &reason).await?;
            }
        }
    }
    Ok(())
}

/// Records `reason` on the payments and tells the institution when it is new for any of them.
async fn hold(ctx: &Ctx, institution_id: i64, ids: &[i64], reason: &str) -> Result<(), ApiError> {
    let new = settlements::hold(&ctx.db, ids, reason, ctx.now())
        .await
        .or_internal("record settlement hold")?;
    if new.is_empty() {
        return Ok(());
    }
    let list = new
        .iter()
        .map(|id| id.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let subject = "Payrail is holding payments it cannot settle".to_owned();
    let body = format!(
        "These payments are held in custody and not settled yet: {list}. Reason: {reason}. \
         They settle by themselves once this is fixed; the portal shows the reason on each."
    );
    crate::webhooks::notify(ctx, institution_id, "settlement_held", &subject, &body).await
}

async fn settle_group(
    ctx: &Ctx,
    networks: &BTreeMap<String, Network>,
    treasury: &Treasury,
    group: &[Due],
) -> Result<(), NotNow> {
    let first = &group[0];
    let name = first.network.as_str();
    let network = networks
        .get(name)
        .ok_or_else(|| format!("{name} is no longer configured"))?;
    let wallet = wallets::list(&ctx.db, first.merchant_id)
        .await
        .map_err(|e| format!("the merchant's wallets could not be read: {e}"))?
        .into_iter()
        .find(|w| w.network == name)
        .map(|w| w.address.to_ascii_lowercase())
        .ok_or_else(|| format!("the merchant has no settlement wallet on {name}"))?;
    let url = &network.rpc_url;
    let token = first.token.as_str();
    let coin = config::coin(name);
    let now = ctx.now();
    let mut coin_rates = BTreeMap::new();
    let mut sources = Vec::new();
    for d in group {
        if !coin_rates.contains_key(&d.currency) {
            let rate = rates::coin_rate(network, name, coin, &d.currency, now)
                .await
                .map_err(|e| format!("no rate prices the gas: {}", super::public_reason(&e)))?;
            coin_rates.insert(d.currency.clone(), rate.per_unit);
            sources.push(rate.source);
        }
    }
    let node = |e: String| format!("the {name} node: {}", super::public_reason(&e));
    let head = rpc::quantity(
        &rpc::call(url, "eth_blockNumber", json!([]))
            .await
            .map_err(node)?,
    )
    .map_err(node)?;
    let price = gas_price(url).await.map_err(node)?;
    let have = balance(url, &treasury.address, token).await.map_err(node)?;
    if have == 0 {
        return Err(format!("the treasury holds no {} on {name}", first.asset).into());
    }
    let coins = balance(url, &treasury.address, NATIVE_TOKEN)
        .await
        .map_err(node)?;
    if coins == 0 {
        return Err(format!("the treasury holds no {coin} on {name} for gas").into());
    }
    // Priced with the gas of a small transfer, then again with the real amount's, in case it
    // differs.
    let cannot = |e: String| {
        format!(
            "the treasury cannot send {} on {name}: {}",
            first.asset,
            super::public_reason(&e)
        )
    };
    let mut gas = estimate(url, &treasury.address, token, &wallet, 1)
        .await
        .map_err(cannot)?;
    let mut priced = plan(group, u128::from(gas) * price, &coin_rates);
    if priced.units > 0 {
        let again = estimate(
            url,
            &treasury.address,
            token,
            &wallet,
            priced.units.min(have),
        )
        .await
        .map_err(cannot)?;
        if again != gas {
            gas = again;
            priced = plan(group, u128::from(gas) * price, &coin_rates);
        }
    }
    for (id, why) in &priced.held {
        if let Err(err) = hold(ctx, first.institution_id, &[*id], why).await {
            worker::console_warn!("hold of payment {id}: {}", err.description);
        }
    }
    if priced.items.is_empty() {
        return Err(NotNow::Raced);
    }
    let gas_cost = u128::from(gas) * price;
    let needed = priced.units + if token == NATIVE_TOKEN { gas_cost } else { 0 };
    let asset_units = |units: u128, decimals: u32| {
        evm::from_units(units, decimals).map_or_else(|| units.to_string(), |d| d.to_string())
    };
    if have < needed {
        return Err(format!(
            "the treasury holds {} {} on {name}; {} are needed",
            asset_units(have, first.decimals),
            first.asset,
            asset_units(needed, first.decimals)
        )
        .into());
    }
    if token != NATIVE_TOKEN && coins < gas_cost {
        return Err(format!(
            "the treasury holds {} {coin} on {name} for gas; {} are needed",
            asset_units(coins, NATIVE_DECIMALS),
            asset_units(gas_cost, NATIVE_DECIMALS)
        )
        .into());
    }
    let nonce = treasury::next_nonce(ctx, url, name, &treasury.address).await?;
    let signed = sign(
        treasury,
        network,
        (token, &wallet),
        (nonce, gas, price),
        priced.units,
    )?;
    let settlement_id = crypto::random_token("stl_").map_err(|e| e.to_string())?;
    let send_id = crypto::random_token("snd_").map_err(|e| e.to_string())?;
    let rate_source = sources.join("; ");
    let send = NewSend {
        id: &send_id,
        purpose: Purpose::Settlement(&settlement_id),
        network: name,
        sender: &treasury.address,
        nonce,
        gas_limit: gas,
        gas_price: price,
        rate_source: &rate_source,
        units: priced.units,
        tx_hash: &signed.hash,
        raw: &signed.raw,
        head,
        now,
    };
    let settlement = NewSettlement {
        id: &settlement_id,
        institution_id: first.institution_id,
        merchant_id: first.merchant_id,
        network: name,
        asset: &first.asset,
        token,
        wallet: &wallet,
    };
    let statements = settlements::start(&ctx.db, &settlement, &send, &priced.items)
        .map_err(|e| e.to_string())?;
    if let Err(e) = db::batch(&ctx.db, statements).await {
        // Another run claimed one of these payments, or took the nonce: nothing was stored, and
        // nothing is sent.
        worker::console_warn!("settlement not started ({e}); another run is settling");
        return Err(NotNow::Raced);
    }
    broadcast(ctx, url, &send_id, &signed.raw, head).await;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Step 1: follow

async fn follow(
    ctx: &Ctx,
    networks: &BTreeMap<String, Network>,
    treasury: &Treasury,
) -> Result<(), ApiError> {
    let live = settlements::live(&ctx.db, LIVE_PER_RUN)
        .await
        .or_internal("read transactions out")?;
    for send in live {
        let Some(network) = networks.get(&send.network) else {
            worker::console_warn!(
                "{} is no longer configured: {} waits",
                send.network,
                send.id
            );
            continue;
        };
        if let Err(e) = follow_one(ctx, network, treasury, &send).await {
            worker::console_warn!("following {}: {e}", send.id);
        }
    }
    Ok(())
}

/// The first of `candidates` (one nonce's transactions) that has a receipt, with it.
async fn mined<'a>(url: &str, candidates: &'a [Send]) -> Result<Option<(&'a Send, Value)>, String> {
    for candidate in candidates {
        let answer =
            rpc::call(url, "eth_getTransactionReceipt", json!([candidate.tx_hash])).await?;
        if !answer.is_null() {
            return Ok(Some((candidate, answer)));
        }
    }
    Ok(None)
}

async fn follow_one(
    ctx: &Ctx,
    network: &Network,
    treasury: &Treasury,
    send: &Send,
) -> Result<(), String> {
    let url = &network.rpc_url;
    let now = ctx.now();
    let head = rpc::quantity(&rpc::call(url, "eth_blockNumber", json!([])).await?)?;
    let nonce = u64::try_from(send.nonce).map_err(|_| "bad nonce")?;
    // The live transaction, or one it replaced, may be the one mined.
    let mut candidates = vec![send.clone()];
    candidates.extend(
        settlements::replaced(&ctx.db, send)
            .await
            .map_err(|e| e.to_string())?,
    );
    if let Some((candidate, receipt)) = mined(url, &candidates).await? {
        let block = rpc::quantity(&receipt["blockNumber"])?;
        let statements = if rpc::quantity(&receipt["status"])? == 1 {
            if head + 1 < block + network.confirmations {
                return Ok(()); // mined, not yet deep enough
            }
            let gas_used = native::wei(&receipt["gasUsed"]).ok_or("bad gasUsed")?;
            settlements::confirm(&ctx.db, candidate, &send.id, block, gas_used, now)
        } else {
            let why = format!("{} reverted in block {block}", candidate.tx_hash);
            settlements::fail(&ctx.db, send, "failed", Some(block), &why, now)
        }
        .map_err(|e| e.to_string())?;
        db::batch(&ctx.db, statements)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(());
    }
    // The nonce used at the confirmation depth, and still none of ours has a receipt (asked
    // again after the count, so one mined meanwhile is not missed): another transaction took it.
    let deep = (head + 1).saturating_sub(network.confirmations);
    let used_deep = rpc::quantity(
        &rpc::call(
            url,
            "eth_getTransactionCount",
            json!([send.sender, format!("{deep:#x}")]),
        )
        .await?,
    )?;
    if used_deep > nonce && mined(url, &candidates).await?.is_none() {
        let why = format!("nonce {nonce} was used by another transaction");
        let statements = settlements::fail(&ctx.db, send, "dropped", None, &why, now)
            .map_err(|e| e.to_string())?;
        db::batch(&ctx.db, statements)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(());
    }
    let sent_block = u64::try_from(send.sent_block).unwrap_or(0);
    if head >= sent_block + stuck_after(network) {
        return replace(ctx, network, treasury, send, head).await;
    }
    let known = rpc::call(url, "eth_getTransactionByHash", json!([send.tx_hash])).await?;
    if known.is_null() {
        // The node forgot it (restarted, evicted): the same bytes again.
        let error = rpc::call(url, "eth_sendRawTransaction", json!([send.raw]))
            .await
            .err()
            .map(|e| super::public_reason(&e));
        settlements::broadcast(&ctx.db, &send.id, sent_block, error.as_deref(), now)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Replaces a stuck transaction: the same nonce, at a price at least a quarter above the old one
/// (nodes want a tenth more to replace); a settlement's payments are priced again at it (their
/// fees are what it costs), a refund sends the same amount (its gas is the PSP's).
async fn replace(
    ctx: &Ctx,
    network: &Network,
    treasury: &Treasury,
    send: &Send,
    head: u64,
) -> Result<(), String> {
    let url = &network.rpc_url;
    let old_price = u128::from_str(&send.gas_price).map_err(|_| "bad gas price")?;
    let price = gas_price(url).await?.max(old_price + old_price / 4 + 1);
    let gas = u64::try_from(send.gas_limit).map_err(|_| "bad gas limit")?;
    let (units, items, rate_source) = match send.purpose() {
        Purpose::Settlement(settlement_id) => {
            let (priced, source) = reprice(ctx, network, send, settlement_id, gas, price).await?;
            (priced.units, priced.items, source)
        }
        Purpose::Refund(_) => {
            let units = u128::from_str(&send.units).map_err(|_| "bad units")?;
            (units, Vec::new(), String::new())
        }
    };
    let nonce = u64::try_from(send.nonce).map_err(|_| "bad nonce")?;
    let signed = sign(
        treasury,
        network,
        (&send.token, &send.wallet),
        (nonce, gas, price),
        units,
    )?;
    let send_id = crypto::random_token("snd_").map_err(|e| e.to_string())?;
    let new = NewSend {
        id: &send_id,
        purpose: send.purpose(),
        network: &send.network,
        sender: &send.sender,
        nonce,
        gas_limit: gas,
        gas_price: price,
        rate_source: &rate_source,
        units,
        tx_hash: &signed.hash,
        raw: &signed.raw,
        head,
        now: ctx.now(),
    };
    let statements =
        settlements::replace(&ctx.db, &send.id, &new, &items).map_err(|e| e.to_string())?;
    db::batch(&ctx.db, statements)
        .await
        .map_err(|e| format!("replacement not stored ({e}): another run replaced it"))?;
    broadcast(ctx, url, &send_id, &signed.raw, head).await;
    Ok(())
}

/// A settlement's payments priced again at `price` per gas, and the feeds that priced it.
async fn reprice(
    ctx: &Ctx,
    network: &Network,
    send: &Send,
    settlement_id: &str,
    gas: u64,
    price: u128,
) -> Result<(Plan, String), String> {
    let due = settlements::claimed(&ctx.db, settlement_id)
        .await
        .map_err(|e| e.to_string())?;
    if due.is_empty() {
        return Err("its payments are no longer held in custody".to_owned());
    }
    let coin = config::coin(&send.network);
    let mut coin_rates = BTreeMap::new();
    let mut sources = Vec::new();
    for d in &due {
        if !coin_rates.contains_key(&d.currency) {
            let rate =
                rates::coin_rate(network, &send.network, coin, &d.currency, ctx.now()).await?;
            coin_rates.insert(d.currency.clone(), rate.per_unit);
            sources.push(rate.source);
        }
    }
    let priced = plan(&due, u128::from(gas) * price, &coin_rates);
    if !priced.held.is_empty() {
        // At this price some payment's fees would eat it: keep waiting at the old one.
        return Err(format!(
            "a replacement at {price} wei per gas leaves a payment nothing"
        ));
    }
    Ok((priced, sources.join("; ")))
}

// ---------------------------------------------------------------------------------------------
// Step 2: finish

async fn finish(ctx: &Ctx) -> Result<(), ApiError> {
    let rows = settlements::to_finish(&ctx.db, FINISH_PER_RUN)
        .await
        .or_internal("read confirmed settlements")?;
    for row in rows {
        let fee = |text: &str| Decimal::from_str(text).or_internal("read a settlement fee");
        let action = Action::SettleOnChain {
            psp_fee: fee(&row.psp_fee)?,
            gas_fee: fee(&row.gas_fee)?,
        };
        match payments::settle(ctx, row.transaction_id, &action, &row.tx_hash).await {
            Ok(()) => {}
            // Changed meanwhile (another run marked it): the next run sees it.
            Err(err) if err.code == ErrorCode::Conflict => {}
            Err(err) => worker::console_warn!(
                "payment {} not marked paid: {}",
                row.transaction_id,
                err.description
            ),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn due(id: i64, gross: &str, currency: &str) -> Due {
        Due {
            transaction_id: id,
            institution_id: 1,
            merchant_id: 1,
            currency: currency.into(),
            gross: gross.into(),
            expected: gross.into(),
            asset: "USDC".into(),
            network: "polygon".into(),
            token: "0xtoken".into(),
            decimals: 6,
            crypto_amount: gross.into(),
            psp_fee_bps: 100,
            held_at: 0,
        }
    }

    fn rates() -> BTreeMap<String, Decimal> {
        // 0.5 USD per coin.
        BTreeMap::from([("USD".to_owned(), Decimal::new(5, 1))])
    }

    #[test]
    fn fees_add_up_and_the_gas_is_shared() {
        // 0.2 coin of gas: 0.10 USD, 0.05 each.
        let batch = [due(1, "10.00", "USD"), due(2, "20.00", "USD")];
        let priced = plan(&batch, 200_000_000_000_000_000, &rates());
        assert!(priced.held.is_empty());
        let item = &priced.items[0];
        assert_eq!(
            (item.psp_fee.as_str(), item.gas_fee.as_str()),
            ("0.10", "0.05")
        );
        assert_eq!(item.net, "9.85");
        assert_eq!(item.units, "9850000");
        let second = &priced.items[1];
        assert_eq!(
            (second.psp_fee.as_str(), second.net.as_str()),
            ("0.20", "19.75")
        );
        assert_eq!(priced.units, 9_850_000 + 19_750_000);
        for (i, d) in priced.items.iter().zip(&batch) {
            let sum = Decimal::from_str(&i.psp_fee).unwrap()
                + Decimal::from_str(&i.gas_fee).unwrap()
                + Decimal::from_str(&i.net).unwrap();
            assert_eq!(sum, Decimal::from_str(&d.gross).unwrap());
        }
    }

    #[test]
    fn a_payment_the_fees_would_eat_is_held_and_the_rest_share_the_gas() {
        // 1 coin of gas: 0.50 USD; even half of it eats the 0.20 payment.
        let batch = [due(1, "0.20", "USD"), due(2, "50.00", "USD")];
        let priced = plan(&batch, 1_000_000_000_000_000_000, &rates());
        assert_eq!(priced.held.len(), 1);
        assert_eq!(priced.held[0].0, 1);
        assert!(
            priced.held[0].1.contains("leave nothing"),
            "{:?}",
            priced.held
        );
        assert_eq!(priced.items.len(), 1);
        assert_eq!(
            priced.items[0].gas_fee, "0.50",
            "the whole gas on the one left"
        );
        let alone = plan(&batch[..1], 1_000_000_000_000_000_000, &rates());
        assert!(alone.items.is_empty());
    }

    #[test]
    fn net_is_paid_at_the_payments_own_quote_rounded_down() {
        // 10.00 EUR quoted at 10.869566 USDC; no gas, 1 % fee: 9.90 EUR is 10.760870 USDC.
        let mut d = due(1, "10.00", "EUR");
        d.crypto_amount = "10.869566".into();
        let rates = BTreeMap::from([("EUR".to_owned(), Decimal::ONE)]);
        let priced = plan(&[d], 0, &rates);
        assert_eq!(priced.items[0].net, "9.90");
        assert_eq!(priced.units, 10_760_870);
        let unpriced = plan(&[due(2, "1.00", "GBP")], 0, &rates);
        assert!(unpriced.held[0].1.contains("GBP"));
    }
}
