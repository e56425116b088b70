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

pub(crate) mod bridge;
pub(crate) mod group;
mod held;
pub mod plan;

use std::collections::BTreeMap;
use std::str::FromStr;

use rust_decimal::Decimal;
use shared_types::ids::Scoped;
use shared_types::lifecycle::Action;
use shared_types::{ErrorCode, SendState};

use super::ledger;
use super::sends::{self, Stalled, Transfer};
use super::treasury::{self, Treasury};
use super::{refund, requests};
use crate::chain::config::Network;
use crate::chain::error::ChainError;
use crate::chain::rpc::Budget;
use crate::ctx::Ctx;
use crate::db::bridges::{self, BurnTerms, NewBridge};
use crate::db::sends::{self as db_sends, Call, Leg, Purpose};
use crate::db::settlements::{self, NewSettlement, Settleable};
use crate::db::{moves, refunds, Db};
use crate::error::{ApiError, OrInternal};
use crate::payments;
pub(crate) use group::MOST_GROUP_CALLS;
use group::{asset_of, covers, groups, hold, new_id, price_group, screening_of, NotNow};

/// Most payments considered for new settlements a run.
const DUE_PER_RUN: i64 = 200;
/// Most payments of confirmed settlements a run marks paid.
const FINISH_PER_RUN: i64 = 100;
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
            Purpose::Settlement(id) if send.held_by.is_some() => {
                if let Err(err) = requests::stalled(ctx, &send, id, &reason).await {
                    err.log_with(format!("what waits on {id}'s transaction"));
                }
            }
            Purpose::Settlement(id) => {
                let claimed = settlements::claimed(&ctx.db, Scoped::new(send.institution_id, id))
                    .await
                    .or_internal("read a settlement's payments")?;
                if let Some(first) = claimed.first() {
                    let ids: Vec<i64> = claimed.iter().map(|d| d.transaction_id).collect();
                    hold(ctx, None, first.institution_id, &ids, &reason).await?;
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
            Purpose::FloatMove(id) => {
                let carrier = crate::db::bridges::Carrier::FloatMove(id);
                crate::db::bridges::note(&ctx.db, carrier, &reason, ctx.now())
                    .await
                    .or_internal("record why a float move waits")?;
            }
        }
    }
    bridge::run(ctx, &networks, &treasury).await?;
    finish(ctx, None).await?;
    start(ctx, &networks, &treasury, None).await?;
    // Then the institutions held in their objects (taken in turn, `HELD_PER_RUN` a run), each
    // asking the treasury for its sends ([`held`]). One object failing is logged; the others go
    // on.
    let now = ctx.now();
    for institution in moves::held(&ctx.db, moves::HELD_PER_RUN, now / 60)
        .await
        .or_internal("list held institutions")?
    {
        if let Err(err) = in_object(ctx, &networks, &treasury, institution).await {
            err.log_with(format!(
                "settlement in institution {}'s object",
                institution.id
            ));
        }
    }
    Ok(())
}

/// One held institution's object: its requests' outcomes read back, those never stored sent
/// again, its paid payments marked, new settlements started.
async fn in_object(
    ctx: &Ctx,
    networks: &BTreeMap<String, Network>,
    treasury: &Treasury,
    institution: moves::Held,
) -> Result<(), ApiError> {
    let object = ctx.institution_object(institution.id)?;
    let unsent = requests::read_back(ctx, &object, institution.id).await?;
    requests::resend(ctx, &object, (networks, treasury), institution, unsent).await?;
    finish(ctx, Some(&object)).await?;
    refund::send::finish(ctx, Some(&object)).await?;
    start(
        ctx,
        networks,
        treasury,
        Some((&object, institution.psp_fee_bps)),
    )
    .await
}

// ---------------------------------------------------------------------------------------------
// Step 3: start

/// Starts the settlements of the groups due: D1's, or (`held`) those of the institution whose
/// object is given, with its PSP fee.
async fn start(
    ctx: &Ctx,
    networks: &BTreeMap<String, Network>,
    treasury: &Treasury,
    held: Option<(&Db, u32)>,
) -> Result<(), ApiError> {
    let due = match held {
        None => settlements::due(&ctx.db, DUE_PER_RUN).await,
        Some((object, fee)) => settlements::due_held(object, fee, DUE_PER_RUN).await,
    }
    .or_internal("read payments to settle")?;
    let object = held.map(|(object, _)| object);
    let sending = settlements::sending_groups(object.unwrap_or(&ctx.db))
        .await
        .or_internal("read settlements out")?;
    for ((_, merchant_id, network, asset), group) in groups(due, &sending) {
        if networks
            .get(&network)
            .is_some_and(|n| n.node.calls_left() < MOST_GROUP_CALLS)
        {
            continue; // this run's calls on it are spent: next run
        }
        let started = match object {
            None => settle_group(ctx, networks, treasury, &group).await,
            Some(object) => held::settle_group(ctx, object, networks, treasury, &group).await,
        };
        match started {
            Ok(()) | Err(NotNow::Raced) => {}
            Err(NotNow::Hold(reason)) => {
                worker::console_warn!(
                    "settlement of merchant {merchant_id}'s {asset} on {network} held: {reason}"
                );
                let ids: Vec<i64> = group.iter().map(|d| d.transaction_id).collect();
                hold(ctx, object, group[0].institution_id, &ids, &reason).await?;
            }
        }
    }
    Ok(())
}

async fn settle_group(
    ctx: &Ctx,
    networks: &BTreeMap<String, Network>,
    treasury: &Treasury,
    group: &[Settleable],
) -> Result<(), NotNow> {
    let first = &group[0];
    let priced = price_group(ctx, None, networks, treasury, group).await?;
    let (name, token, now) = (priced.name, first.token, ctx.now());
    // The books first: the fees and payout reserved against the merchant's balance (a debt
    // from refunds after settlement is netted from the payout) and the treasury's.
    let settlement_id = new_id(shared_types::ids::SettlementId::PREFIX)?;
    let send_id = sends::new_id()?;
    let asset = asset_of(first);
    let parts = ledger::parts(&priced.plan.items)?;
    let reserved = ledger::reserve_settlement(
        ctx,
        &asset,
        Scoped::new(first.institution_id, first.merchant_id),
        &send_id,
        &parts,
        priced.gas_cost,
    )
    .await?;
    let payout = reserved.payout;
    covers(first, &priced, payout)?;
    let settlement = NewSettlement {
        id: &settlement_id,
        institution_id: first.institution_id,
        merchant_id: first.merchant_id,
        network: name,
        asset: &first.asset,
        token,
        wallet: &priced.wallet_text,
    };
    // Across networks: the burn (its amount the payout, its most fee from the route's quote)
    // and the bridge that follows it to the mint.
    let burn = match &priced.bridge {
        None => None,
        Some(across) => {
            let (from, to) = (
                crate::money::bridge_reads::cctp_of(name, priced.network)?,
                crate::money::bridge_reads::cctp_of(across.name, across.network)?,
            );
            let (min_finality, max_fee) = bridge::fee_for(from, to, payout).await?;
            let token_text = token.to_string();
            let asked = crate::money::bridge_reads::BurnAsked {
                source: from,
                destination: to,
                token: &token_text,
                recipient: &priced.wallet_text,
                amount: payout,
                max_fee,
                min_finality,
            };
            let data = crate::money::bridge_reads::burn(&asked, &treasury.address)?
                .deposit_for_burn_call();
            Some((
                from.token_messenger.to_ascii_lowercase(),
                data,
                across,
                (min_finality, max_fee),
                token_text,
            ))
        }
    };
    let transfer = Transfer {
        purpose: Purpose::Settlement(&settlement_id),
        token,
        to: priced.wallet,
        units: payout,
        netted: priced.plan.units - payout,
        gas: priced.gas,
        price: priced.price,
        l1_fee: priced.l1_fee,
        rate_source: &priced.rate_source,
        call: burn.as_ref().map(|(messenger, data, ..)| {
            (
                Call {
                    to: messenger,
                    data,
                },
                Leg::Burn,
            )
        }),
        guarded: false,
    };
    let mut before =
        settlements::start(&settlement, &priced.plan.items, now).map_err(ChainError::from)?;
    before.push(screening_of(&priced, first, &settlement_id, now)?);
    if let Some((_, _, across, (min_finality, max_fee), token_text)) = &burn {
        before.push(
            bridges::insert(&NewBridge {
                settlement_id: &settlement_id,
                institution_id: first.institution_id,
                burn: BurnTerms {
                    source_network: name,
                    destination_network: across.name,
                    token: token_text,
                    amount: payout,
                    max_fee: *max_fee,
                    min_finality: *min_finality,
                    mint_recipient: &priced.wallet_text,
                    destination_block: across.head,
                },
                now,
            })
            .map_err(ChainError::from)?,
        );
    }
    let mut after = settlements::items(&send_id, &priced.plan.items).map_err(ChainError::from)?;
    after.extend(
        reserved
            .book
            .statements(&db_sends::in_state(&send_id, SendState::Live), now)
            .map_err(ChainError::from)?,
    );
    let stored = sends::send(
        ctx,
        treasury,
        (name, priced.network),
        priced.head,
        (&send_id, &transfer),
        (before, after),
    )
    .await?;
    if stored.is_some() {
        Ok(())
    } else {
        Err(NotNow::Raced)
    }
}

// ---------------------------------------------------------------------------------------------
// Step 2: finish

/// Marks paid the payments whose settlements are all confirmed: in D1, or in the object that
/// holds them (`held`).
async fn finish(ctx: &Ctx, held: Option<&Db>) -> Result<(), ApiError> {
    let rows = match held {
        None => settlements::to_finish(&ctx.db, FINISH_PER_RUN).await,
        Some(object) => settlements::to_finish_held(object, FINISH_PER_RUN).await,
    }
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
        let mut bridge_fee = None::<Decimal>;
        for part in &parts {
            let fee = |text: &str| Decimal::from_str(text).or_internal("read a settlement fee");
            psp_fee += fee(&part.psp_fee)?;
            gas_fee += fee(&part.gas_fee)?;
            if part.destination_network.is_some() {
                let share = bridge::fee_share(part).ok_or_else(|| {
                    ApiError::internal("price a bridge's fee", "its figures are unreadable")
                })?;
                *bridge_fee.get_or_insert(Decimal::ZERO) += share;
            }
        }
        // A payment settled in parts (one per way to pay it came in) is paid once every part
        // is: its fees are theirs added up, its settlement hash the first part's (across
        // networks: the mint, and its burn).
        let across = first.destination_network.clone().zip(bridge_fee);
        let action = Action::SettleOnChain {
            psp_fee,
            gas_fee,
            bridge: across,
        };
        match payments::settle(
            ctx,
            held,
            Scoped::new(first.institution_id, first.transaction_id),
            &action,
            (&first.tx_hash, first.bridge_hash.as_deref()),
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
