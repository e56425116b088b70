//! Sending refunds, the cron's part: the refunds that need a transaction are signed and sent
//! from the treasury ([`crate::money::sends`] follows them like a settlement's), and the
//! confirmed ones are recorded on their payments (`payment.refunded` once final).

use std::collections::BTreeMap;
use std::str::FromStr;

use payrail_evm::Token;
use shared_types::ids::Scoped;
use shared_types::lifecycle::Action;
use shared_types::SendState;

use crate::chain::config::{Network, NATIVE_DECIMALS};
use crate::chain::error::{ChainError, ChainResult};
use crate::chain::{evm, rpc};
use crate::ctx::Ctx;
use crate::db::events;
use crate::db::refunds::{self, Refund};
use crate::db::sends::{self as db_sends, Purpose};
use crate::error::{ApiError, OrInternal};
use crate::money::ledger;
use crate::money::sends::{self, Transfer};
use crate::money::treasury::{self, Treasury};
use crate::payments;

/// Most refunds a run signs, and most it records on their payments.
const PER_RUN: i64 = 20;
/// The most node calls sending one refund makes: the chain id, the head, the price, the L1
/// data fee's bound, the balances and nonce, the estimate, the nonce and the broadcast.
pub(crate) const MOST_SEND_CALLS: u32 = 1 + 1 + 2 + 1 + 3 + 1 + 1 + 1;
/// The cron's part (after the settlement's, which follows every transaction out): signs the
/// refunds that need a transaction, and records the confirmed ones on their payments.
pub async fn run(ctx: &Ctx) -> Result<(), ApiError> {
    let Some(treasury) = treasury::treasury(ctx)? else {
        return Ok(());
    };
    // Refunds' share of the run's node calls.
    let budget = crate::chain::rpc::Budget::new(crate::chain::CronShares::configured(ctx).refunds);
    let networks = crate::chain::networks_within(ctx, &budget)?;
    send_due(ctx, &networks, &treasury).await;
    finish(ctx).await
}

/// Signs and sends a transaction for every refund that needs one; a refund that cannot be sent
/// now says why (the portal shows it) and is tried again.
pub(super) async fn send_due(ctx: &Ctx, networks: &BTreeMap<String, Network>, treasury: &Treasury) {
    let due = match refunds::to_send(&ctx.db, PER_RUN).await {
        Ok(due) => due,
        Err(e) => {
            worker::console_warn!("read refunds to send: {e}");
            return;
        }
    };
    for refund in due {
        if networks
            .get(&refund.network)
            .is_some_and(|n| n.node.calls_left() < MOST_SEND_CALLS)
        {
            continue; // this run's calls on its network are spent: next run
        }
        if let Err(why) = send(ctx, networks, treasury, &refund).await {
            worker::console_warn!("refund {} not sent: {why}", refund.id);
            if why.is_budget() {
                continue;
            }
            if let Err(e) = refunds::note(
                &ctx.db,
                Scoped::new(refund.institution_id, &refund.id),
                &why.public(),
                ctx.now(),
            )
            .await
            {
                worker::console_warn!("record why refund {} waits: {e}", refund.id);
            }
        }
    }
}

async fn send(
    ctx: &Ctx,
    networks: &BTreeMap<String, Network>,
    treasury: &Treasury,
    refund: &Refund,
) -> ChainResult<()> {
    let name = refund.network.as_str();
    let network = networks
        .get(name)
        .ok_or_else(|| ChainError::Config(format!("{name} is no longer configured")))?;
    crate::chain::check_chain(name, network).await?;
    let node = &network.node;
    let at_node = |e: ChainError| e.within(format!("the {name} node"));
    let units = u128::from_str(&refund.units)
        .map_err(|_| ChainError::answer("stored units are not a number"))?;
    let head = rpc::head(node).await.map_err(|e| at_node(e.into()))?;
    let price = treasury::gas_price(node).await.map_err(at_node)?;
    let l1_fee = treasury::l1_fee_bound(network).await.map_err(at_node)?;
    let token = refund.token;
    // What is left once the transactions already out are counted.
    let (have, coins) = sends::available(ctx, (name, network), treasury, token).await?;
    if have < units || coins == 0 {
        return Err(ChainError::rule(format!(
            "the treasury can send {} {} and spend {} of the coin for gas on {name} (its \
             balances less what is in flight); the refund needs {}",
            evm::from_units(have, refund.decimals).unwrap_or_default(),
            refund.asset,
            evm::from_units(coins, NATIVE_DECIMALS).unwrap_or_default(),
            evm::from_units(units, refund.decimals).unwrap_or_default(),
        )));
    }
    let to = payrail_evm::Address::parse(&refund.to_address)
        .map_err(|_| ChainError::rule("the refund's address is not an address"))?;
    let gas = treasury::estimate(node, &treasury.address, token, to, units)
        .await
        .map_err(|e| e.within("the treasury cannot send it"))?;
    let cost = treasury::most_fee(gas, price, l1_fee)
        .ok_or_else(|| at_node(ChainError::answer("the gas and L1 fees are out of range")))?;
    if coins < cost.saturating_add(if token == Token::Native { units } else { 0 }) {
        return Err(ChainError::rule(format!(
            "the treasury holds too little of the coin for gas on {name}"
        )));
    }
    let send_id = sends::new_id()?;
    // Its gas reserved in the books until the transaction is final.
    let books = ledger::reserve_gas(ctx, name, &send_id, cost).await?;
    let after = books.statements(&db_sends::in_state(&send_id, SendState::Live), ctx.now())?;
    let transfer = Transfer {
        purpose: Purpose::Refund(&refund.id),
        token,
        to,
        units,
        netted: 0,
        gas,
        price,
        l1_fee,
        rate_source: "",
    };
    sends::send(
        ctx,
        treasury,
        (name, network),
        head,
        (&send_id, &transfer),
        (Vec::new(), after),
    )
    .await
    .map(drop)
}

/// Records every confirmed refund on its payment (`payment.refunded`), once: the payment's
/// change is conditioned on the refund not being recorded yet and marks it done in the same
/// batch (and the event's id is the refund's).
async fn finish(ctx: &Ctx) -> Result<(), ApiError> {
    for refund in refunds::confirmed(&ctx.db, PER_RUN)
        .await
        .or_internal("read confirmed refunds")?
    {
        // A return changes nothing on the payment: it is done once final.
        if refund.extra {
            refunds::done(
                &ctx.db,
                Scoped::new(refund.institution_id, &refund.id),
                ctx.now(),
            )
            .await
            .or_internal("mark return done")?;
            continue;
        }
        let amount = refund.amount;
        let outcome = payments::refund(
            ctx,
            Scoped::new(refund.institution_id, refund.transaction_id),
            &Action::Refund { amount },
            &refund.id,
        )
        .await;
        // Recorded, and marked done with it; or recorded by another run meanwhile (done with
        // it too), or refused: say which.
        if let Err(err) = outcome {
            let event = payments::refund_event_id(&refund.id);
            let exists = events::payload(&ctx.db, &event)
                .await
                .or_internal("read event")?
                .is_some();
            if exists {
                // Recorded before the payment's change marked its refund done.
                refunds::done(
                    &ctx.db,
                    Scoped::new(refund.institution_id, &refund.id),
                    ctx.now(),
                )
                .await
                .or_internal("mark refund done")?;
            } else {
                err.log_with(format!(
                    "refund {} not recorded on payment {}",
                    refund.id, refund.transaction_id
                ));
            }
        }
    }
    Ok(())
}
