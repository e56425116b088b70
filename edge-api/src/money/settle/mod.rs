//! Settlement: the treasury pays each merchant the net of its payments held in custody, in the
//! asset and on the network they were paid in, with EIP-1559 transactions it signs itself
//! ([`crate::chain::tx`]), and each payment is marked paid (`payment.paid`) once that transaction is
//! final.
//!
//! It runs from the cron, in three steps, each bounded per run:
//! 1. **follow** every transaction out ([`super::sends::follow`]: confirmed or failed only on
//!    final evidence, broadcast again, replaced within the caps); a stalled one holds its
//!    settlement's payments with the reason.
//! 2. **finish**: the payments of confirmed settlements are marked paid through the lifecycle,
//!    with the real transaction hash and the fees their transaction was signed with.
//! 3. **start**: payments held in custody and in no settlement are grouped per merchant,
//!    network and asset (a batch: one transfer, its gas shared), priced ([`plan`]), signed and
//!    stored in one D1 batch (the claims and the nonce make a second worker's batch for the
//!    same payments fail whole) before they are broadcast. A group that cannot settle (no
//!    wallet on the network, the treasury short of the asset or of gas once what is in flight
//!    is counted, no rate to price the gas) is held: the reason is on each payment and the
//!    institution is told once per new reason; it settles by itself once that is fixed.
//!
//! Fees, in the order currency: the PSP fee is the institution's basis points of the gross;
//! the gas fee is the transaction's gas limit (from `eth_estimateGas`) times its price, split
//! evenly over the batch's payments and converted with the network coin's price feed. The price
//! is fixed when signing (max fee = priority fee = 5/4 of the base fee plus the node's tip), so
//! the fee charged is the fee paid. `net = gross − psp_fee − gas_fee` exactly; the merchant
//! receives `net` in the asset at the payment's own quote, rounded down to base units.

pub mod plan;

use std::collections::BTreeMap;
use std::str::FromStr;

use payrail_evm::Token;
use rust_decimal::Decimal;
use serde_json::json;
use shared_types::ids::{InstitutionId, Scoped};
use shared_types::lifecycle::Action;
use shared_types::{ErrorCode, SendState};

use super::ledger;
use super::sends::{self, Stalled, Transfer};
use super::treasury::{self, estimate, gas_price, Treasury};
use crate::chain::config::{self, Network, NATIVE_DECIMALS};
use crate::chain::error::{ChainError, ChainResult};
use crate::chain::rpc::Budget;
use crate::chain::{evm, rates, rpc};
use crate::ctx::Ctx;
use crate::db::notifications::NotificationKind;
use crate::db::sends::{self as db_sends, Purpose};
use crate::db::settlements::{self, NewSettlement, Settleable};
use crate::db::{refunds, wallets};
use crate::error::{ApiError, OrInternal};
use crate::{crypto, payments};

/// Most payments considered for new settlements a run.
const DUE_PER_RUN: i64 = 200;
/// Most groups (merchant, network, asset) a run starts settling.
const GROUPS_PER_RUN: usize = 5;
/// Most payments of confirmed settlements a run marks paid.
const FINISH_PER_RUN: i64 = 100;
/// Most payments in one batch.
const BATCH_LIMIT: usize = 50;

/// The cron's part: follow every transaction out (settlements' and refunds'), finish the
/// confirmed settlements, start new ones.
pub async fn run(ctx: &Ctx) -> Result<(), ApiError> {
    let Some(treasury) = treasury::treasury(ctx)? else {
        return Ok(());
    };
    // Settlement's share of the run's node calls, for following and starting alike.
    let budget = Budget::new(crate::chain::CronShares::configured(ctx).settlement);
    let networks = crate::chain::networks_within(ctx, &budget)?;
    let stalled = sends::follow(ctx, &networks, &treasury).await?;
    for Stalled { send, reason } in stalled {
        match send.purpose() {
            Purpose::Settlement(id) => {
                let held = settlements::claimed(&ctx.db, Scoped::new(send.institution_id, id))
                    .await
                    .or_internal("read a settlement's payments")?;
                if let Some(first) = held.first() {
                    let ids: Vec<i64> = held.iter().map(|d| d.transaction_id).collect();
                    hold(ctx, first.institution_id, &ids, &reason).await?;
                }
            }
            Purpose::Refund(id) => refunds::note(
                &ctx.db,
                Scoped::new(send.institution_id, id),
                &reason,
                ctx.now(),
            )
            .await
            .or_internal("record why a refund waits")?,
        }
    }
    finish(ctx).await?;
    start(ctx, &networks, &treasury).await
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

impl From<ChainError> for NotNow {
    fn from(e: ChainError) -> Self {
        worker::console_warn!("settlement: {e}");
        if e.is_budget() {
            // The run's calls are spent: nothing about these payments to record.
            return NotNow::Raced;
        }
        NotNow::Hold(e.public())
    }
}

/// The most node calls starting one group's settlement makes: the chain id, the gas's rate in
/// each of up to five currencies, the head, the price, the L1 data fee's bound, the balances
/// and nonce, two estimates, the nonce and the broadcast.
pub(crate) const MOST_GROUP_CALLS: u32 = 1 + 5 * 5 + 1 + 2 + 1 + 3 + 2 + 1 + 1;

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
    // Batches never mix institutions: each group is one institution's merchant, network and
    // asset.
    let mut groups: BTreeMap<(InstitutionId, i64, String, String), Vec<Settleable>> =
        BTreeMap::new();
    for d in due {
        let key = (
            d.institution_id,
            d.merchant_id,
            d.network.clone(),
            d.asset.clone(),
        );
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
    for ((_, merchant_id, network, asset), group) in groups.into_iter().take(GROUPS_PER_RUN) {
        if networks
            .get(&network)
            .is_some_and(|n| n.node.calls_left() < MOST_GROUP_CALLS)
        {
            continue; // this run's calls on it are spent: next run
        }
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
async fn hold(
    ctx: &Ctx,
    institution_id: InstitutionId,
    ids: &[i64],
    reason: &str,
) -> Result<(), ApiError> {
    let new = settlements::hold(&ctx.db, (institution_id, ids), reason, ctx.now())
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
    crate::notify::admins(
        ctx,
        institution_id,
        NotificationKind::SettlementHeld,
        &subject,
        &body,
    )
    .await
}

async fn settle_group(
    ctx: &Ctx,
    networks: &BTreeMap<String, Network>,
    treasury: &Treasury,
    group: &[Settleable],
) -> Result<(), NotNow> {
    let first = &group[0];
    let name = first.network.as_str();
    let network = networks
        .get(name)
        .ok_or_else(|| format!("{name} is no longer configured"))?;
    let wallet = wallets::list(&ctx.db, first.merchant_id)
        .await
        .map_err(|e| ChainError::from(e).within("the merchant's wallets"))?
        .into_iter()
        .find(|w| w.network == name)
        .ok_or_else(|| format!("the merchant has no settlement wallet on {name}"))?;
    if wallet.usable_from > ctx.now() {
        return Err(format!(
            "the merchant's settlement wallet on {name} was changed at {}; settlements use it \
             from {} (a cool-off after every change)",
            wallet.updated_at,
            crate::ctx::timestamp(wallet.usable_from).unwrap_or_default()
        )
        .into());
    }
    let wallet = payrail_evm::Address::parse(&wallet.address)
        .map_err(|_| format!("the merchant's settlement wallet on {name} is not an address"))?;
    let wallet_text = wallet.lower();
    crate::chain::check_chain(name, network).await?;
    let node = &network.node;
    let token = first.token;
    let coin = config::coin(name);
    let now = ctx.now();
    let mut coin_rates = BTreeMap::new();
    let mut sources = Vec::new();
    for d in group {
        if !coin_rates.contains_key(&d.currency) {
            let rate = rates::coin_rate(network, name, coin, &d.currency, now)
                .await
                .map_err(|e| e.within("no rate prices the gas"))?;
            coin_rates.insert(d.currency.clone(), rate.per_unit);
            sources.push(rate.source);
        }
    }
    let at_node = |e: ChainError| e.within(format!("the {name} node"));
    let head = rpc::quantity(
        &rpc::call(node, "eth_blockNumber", json!([]))
            .await
            .map_err(|e| at_node(e.into()))?,
    )
    .map_err(|e| at_node(e.into()))?;
    let price = gas_price(node).await.map_err(at_node)?;
    // On an OP Stack chain each transaction also pays an L1 data fee, shared like the gas.
    let l1_fee = treasury::l1_fee_bound(network).await.map_err(at_node)?;
    let fees = |gas: u64| {
        treasury::most_fee(gas, price, l1_fee)
            .ok_or_else(|| at_node(ChainError::answer("the gas and L1 fees are out of range")))
    };
    // What is left once the transactions already out are counted.
    let (have, coins) = sends::available(ctx, (name, network), treasury, token).await?;
    if have == 0 {
        return Err(format!("the treasury holds no {} on {name} to send", first.asset).into());
    }
    if coins == 0 {
        return Err(format!("the treasury holds no {coin} on {name} for gas").into());
    }
    // Priced with the gas of a small transfer, then again with the real amount's, in case it
    // differs.
    let cannot = |e: ChainError| {
        e.within(format!(
            "the treasury cannot send {} on {name}",
            first.asset
        ))
    };
    let mut gas = estimate(node, &treasury.address, token, wallet, 1)
        .await
        .map_err(cannot)?;
    let mut priced = plan::plan(group, fees(gas)?, &coin_rates);
    if priced.units > 0 {
        let again = estimate(
            node,
            &treasury.address,
            token,
            wallet,
            priced.units.min(have),
        )
        .await
        .map_err(cannot)?;
        if again != gas {
            gas = again;
            priced = plan::plan(group, fees(gas)?, &coin_rates);
        }
    }
    for (id, why) in &priced.held {
        if let Err(err) = hold(ctx, first.institution_id, &[*id], why).await {
            err.log_with(format!("hold of payment {id}"));
        }
    }
    if priced.items.is_empty() {
        return Err(NotNow::Raced);
    }
    let gas_cost = fees(gas)?;
    // The books first: the fees and payout reserved against the merchant's balance (a debt
    // from refunds after settlement is netted from the payout) and the treasury's.
    let settlement_id = new_id(shared_types::ids::SettlementId::PREFIX)?;
    let send_id = sends::new_id()?;
    let asset = ledger::Asset {
        network: name,
        token,
        symbol: &first.asset,
        decimals: first.decimals,
    };
    let parts = ledger::parts(&priced.items)?;
    let reserved = ledger::reserve_settlement(
        ctx,
        &asset,
        Scoped::new(first.institution_id, first.merchant_id),
        &send_id,
        &parts,
        gas_cost,
    )
    .await?;
    let payout = reserved.payout;
    let needed = payout + if token == Token::Native { gas_cost } else { 0 };
    let asset_units = |units: u128, decimals: u32| {
        evm::from_units(units, decimals).map_or_else(|| units.to_string(), |d| d.to_string())
    };
    if have < needed {
        return Err(format!(
            "the treasury can send {} {} on {name} (its balance less what is in flight); {} \
             are needed",
            asset_units(have, first.decimals),
            first.asset,
            asset_units(needed, first.decimals)
        )
        .into());
    }
    if token != Token::Native && coins < gas_cost {
        return Err(format!(
            "the treasury can spend {} {coin} on {name} for gas (its balance less what is in \
             flight); {} are needed",
            asset_units(coins, NATIVE_DECIMALS),
            asset_units(gas_cost, NATIVE_DECIMALS)
        )
        .into());
    }
    let rate_source = sources.join("; ");
    let settlement = NewSettlement {
        id: &settlement_id,
        institution_id: first.institution_id,
        merchant_id: first.merchant_id,
        network: name,
        asset: &first.asset,
        token,
        wallet: &wallet_text,
    };
    let transfer = Transfer {
        purpose: Purpose::Settlement(&settlement_id),
        token,
        to: wallet,
        units: payout,
        netted: priced.units - payout,
        gas,
        price,
        l1_fee,
        rate_source: &rate_source,
    };
    let before = settlements::start(&settlement, &priced.items, now).map_err(ChainError::from)?;
    let mut after = settlements::items(&send_id, &priced.items).map_err(ChainError::from)?;
    after.extend(
        reserved
            .book
            .statements(&db_sends::in_state(&send_id, SendState::Live), now)
            .map_err(ChainError::from)?,
    );
    let stored = sends::send(
        ctx,
        treasury,
        (name, network),
        head,
        (&send_id, &transfer),
        (before, after),
    )
    .await?;
    if stored {
        Ok(())
    } else {
        Err(NotNow::Raced)
    }
}

/// A new random id with `prefix`.
fn new_id(prefix: &str) -> ChainResult<String> {
    crypto::random_token(prefix).map_err(|e| ChainError::Config(e.to_string()))
}

// ---------------------------------------------------------------------------------------------
// Step 2: finish

async fn finish(ctx: &Ctx) -> Result<(), ApiError> {
    let rows = settlements::to_finish(&ctx.db, FINISH_PER_RUN)
        .await
        .or_internal("read confirmed settlements")?;
    let cut = rows.len() >= usize::try_from(FINISH_PER_RUN).unwrap_or(usize::MAX);
    let mut payments: Vec<Vec<settlements::ToFinish>> = Vec::new();
    for row in rows {
        match payments.last_mut() {
            Some(parts) if parts[0].transaction_id == row.transaction_id => parts.push(row),
            _ => payments.push(vec![row]),
        }
    }
    // The limit may have cut the last payment's parts: it is marked at the next run.
    if cut && payments.len() > 1 {
        payments.pop();
    }
    for parts in payments {
        let first = &parts[0];
        let (mut psp_fee, mut gas_fee) = (Decimal::ZERO, Decimal::ZERO);
        for part in &parts {
            let fee = |text: &str| Decimal::from_str(text).or_internal("read a settlement fee");
            psp_fee += fee(&part.psp_fee)?;
            gas_fee += fee(&part.gas_fee)?;
        }
        // A payment settled in parts (one per way to pay it came in) is paid once every part
        // is: its fees are theirs added up, its settlement hash the first part's.
        let action = Action::SettleOnChain { psp_fee, gas_fee };
        match payments::settle(
            ctx,
            Scoped::new(first.institution_id, first.transaction_id),
            &action,
            &first.tx_hash,
        )
        .await
        {
            Ok(()) => {}
            // Changed meanwhile (another run marked it): the next run sees it.
            Err(err) if err.code == ErrorCode::Conflict => {}
            Err(err) => err.log_with(format!("payment {} not marked paid", first.transaction_id)),
        }
    }
    Ok(())
}
