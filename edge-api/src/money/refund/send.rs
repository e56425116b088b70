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
use crate::db::refunds::{self, Refund};
use crate::db::screenings::Subject;
use crate::db::sends::{self as db_sends, Purpose};
use crate::db::{events, Db};
use crate::error::{ApiError, OrInternal};
use crate::money::sends::{self, Transfer};
use crate::money::treasury::{self, Treasury};
use crate::money::{ledger, screening};
use crate::payments;

/// Most refunds a run signs, and most it records on their payments.
const PER_RUN: i64 = 20;
/// The most node calls sending one refund makes: the chain id, the head, the price, the L1
/// data fee's bound, the balances and nonce, the estimate, the sanctions oracle (its address
/// screened again), the nonce and the broadcast.
pub(crate) const MOST_SEND_CALLS: u32 = 1 + 1 + 2 + 1 + 3 + 1 + 1 + 1 + 1;
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
    finish(ctx, None).await
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
    let units = u128::from_str(&refund.units)
        .map_err(|_| ChainError::answer("stored units are not a number"))?;
    let to = payrail_evm::Address::parse(&refund.to_address)
        .map_err(|_| ChainError::rule("the refund's address is not an address"))?;
    let what = Payout {
        network: &refund.network,
        token: refund.token,
        symbol: &refund.asset,
        decimals: refund.decimals,
        to,
        units,
    };
    let (network, priced) = price(ctx, networks, treasury, &what).await?;
    screening::before_signing(
        ctx,
        &ctx.db,
        (what.network, network, priced.head),
        &refund.to_address,
        (refund.institution_id, subject_of(refund.extra), &refund.id),
    )
    .await?;
    let send_id = sends::new_id()?;
    // Its gas reserved in the books until the transaction is final.
    let books = ledger::reserve_gas(ctx, what.network, &send_id, priced.cost).await?;
    let after = books.statements(&db_sends::in_state(&send_id, SendState::Live), ctx.now())?;
    let transfer = Transfer {
        purpose: Purpose::Refund(&refund.id),
        token: what.token,
        to,
        units,
        netted: 0,
        gas: priced.gas,
        price: priced.price,
        l1_fee: priced.l1_fee,
        rate_source: "",
        call: None,
        guarded: false,
    };
    sends::send(
        ctx,
        treasury,
        (what.network, network),
        priced.head,
        (&send_id, &transfer),
        (Vec::new(), after),
    )
    .await
    .map(drop)
}

/// What screening calls a refund's address: a refund's, or a return's (money sent after the
/// credit, sent back: `extra`).
pub(crate) fn subject_of(extra: bool) -> Subject {
    if extra {
        Subject::Return
    } else {
        Subject::Refund
    }
}

/// What a refund's transaction pays: `units` of the asset on `network` to `to`.
pub(crate) struct Payout<'a> {
    /// Network.
    pub network: &'a str,
    /// Token contract, or the coin.
    pub token: Token,
    /// The asset's symbol.
    pub symbol: &'a str,
    /// Its decimals.
    pub decimals: u32,
    /// The customer's address.
    pub to: payrail_evm::Address,
    /// Base units.
    pub units: u128,
}

/// A refund's transaction priced: the head when priced, wei per gas, the L1 data fee's bound,
/// the gas limit, and the most it costs in the coin.
pub(crate) struct Priced {
    /// The newest block.
    pub head: u64,
    /// Wei per gas.
    pub price: u128,
    /// The most L1 data fee.
    pub l1_fee: u128,
    /// Gas limit.
    pub gas: u64,
    /// The most it costs in the coin, gas and L1 data fee.
    pub cost: u128,
}

/// Prices a refund's transaction `what` from the treasury, now: the chain checked, the gas
/// estimated, and what the treasury can send (its balances less what is in flight) checked to
/// cover it and its gas. `Err` with words when it cannot be sent now.
pub(crate) async fn price<'n>(
    ctx: &Ctx,
    networks: &'n BTreeMap<String, Network>,
    treasury: &Treasury,
    what: &Payout<'_>,
) -> ChainResult<(&'n Network, Priced)> {
    let name = what.network;
    let network = networks
        .get(name)
        .ok_or_else(|| ChainError::Config(format!("{name} is no longer configured")))?;
    crate::chain::check_chain(name, network).await?;
    let node = &network.node;
    let at_node = |e: ChainError| e.within(format!("the {name} node"));
    let units = what.units;
    let head = rpc::head(node).await.map_err(|e| at_node(e.into()))?;
    let price = treasury::gas_price(node).await.map_err(at_node)?;
    let l1_fee = treasury::l1_fee_bound(network).await.map_err(at_node)?;
    let token = what.token;
    // What is left once the transactions already out are counted.
    let (have, coins) = sends::available(ctx, (name, network), treasury, token).await?;
    if have < units || coins == 0 {
        return Err(ChainError::rule(format!(
            "the treasury can send {} {} and spend {} of the coin for gas on {name} (its \
             balances less what is in flight); the refund needs {}",
            evm::from_units(have, what.decimals).unwrap_or_default(),
            what.symbol,
            evm::from_units(coins, NATIVE_DECIMALS).unwrap_or_default(),
            evm::from_units(units, what.decimals).unwrap_or_default(),
        )));
    }
    let gas = treasury::estimate(node, &treasury.address, token, what.to, units)
        .await
        .map_err(|e| e.within("the treasury cannot send it"))?;
    let cost = treasury::most_fee(gas, price, l1_fee)
        .ok_or_else(|| at_node(ChainError::answer("the gas and L1 fees are out of range")))?;
    if coins < cost.saturating_add(if token == Token::Native { units } else { 0 }) {
        return Err(ChainError::rule(format!(
            "the treasury holds too little of the coin for gas on {name}"
        )));
    }
    Ok((
        network,
        Priced {
            head,
            price,
            l1_fee,
            gas,
            cost,
        },
    ))
}

/// Records every confirmed refund on its payment (`payment.refunded`), once: the payment's
/// change is conditioned on the refund not being recorded yet and marks it done in the same
/// batch (and the event's id is the refund's). D1's refunds, or those of the institution whose
/// object is `held`.
pub(crate) async fn finish(ctx: &Ctx, held: Option<&Db>) -> Result<(), ApiError> {
    let db = held.unwrap_or(&ctx.db);
    for refund in refunds::confirmed(db, PER_RUN)
        .await
        .or_internal("read confirmed refunds")?
    {
        let scoped = Scoped::new(refund.institution_id, refund.id.as_str());
        // A return changes nothing on the payment: it is done once final.
        if refund.extra {
            refunds::done(db, scoped, ctx.now())
                .await
                .or_internal("mark return done")?;
            continue;
        }
        let amount = refund.amount;
        let outcome = payments::refund(
            ctx,
            held,
            Scoped::new(refund.institution_id, refund.transaction_id),
            &Action::Refund { amount },
            &refund.id,
        )
        .await;
        // Recorded, and marked done with it; or recorded by another run meanwhile (done with
        // it too), or refused: say which.
        if let Err(err) = outcome {
            let event = payments::refund_event_id(&refund.id);
            let exists = events::payload(db, &event)
                .await
                .or_internal("read event")?
                .is_some();
            if exists {
                // Recorded before the payment's change marked its refund done.
                refunds::done(db, scoped, ctx.now())
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
