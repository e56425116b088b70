//! Settlement of institutions held in their own objects (docs/SCALING.md). The object decides:
//! what is due, the merchant's balance, the fees, and its half of the books. The treasury's
//! books (D1, until the treasury has an object of its own) sign, send, follow and replace the
//! transaction exactly as for D1's own settlements ([`super::sends`]). No transaction spans
//! the two stores, so money moves once by these steps:
//!
//! 1. **Ask.** One transaction of the object writes the settlement, its claims and items, its
//!    half of the books (the fees, and the payout from the merchant to the object's link to
//!    the treasury: `shared_types::ledger::split`) and a request, before anything is signed.
//! 2. **Send.** One D1 batch stores the signed transaction under the request's id, with the
//!    treasury's row of the settlement and its half of the books (the payout from its link to
//!    the institution, and the gas). The key refuses a second store of one request, so a
//!    request sent again (its answer lost, or the worker stopped between 1 and 2: the cron
//!    sends any left `requested`) is never paid twice.
//! 3. **Read back.** Each run, the object asks the treasury's books what became of its open
//!    requests (the transaction final for each settlement) and records the outcome under a
//!    guard on the request's state, with the end of its half of the books: a repeat changes
//!    nothing. Then its payments are marked paid as D1's are ([`super::finish`]).
//!
//! A replacement of a held settlement's transaction pays what the first was priced at (its
//! payments were charged that), and only its gas moves in the treasury's books.

use std::collections::BTreeMap;
use std::str::FromStr;

use payrail_evm::{Address, Token};
use shared_types::ids::Scoped;
use shared_types::SendState;

use super::group::{asset_of, covers, hold, new_id, price_group, NotNow, MOST_GROUP_CALLS};
use crate::chain::config::Network;
use crate::chain::error::ChainError;
use crate::chain::rpc;
use crate::ctx::Ctx;
use crate::db::object_sends::{self, NewRequest, Request};
use crate::db::sends::{self as db_sends, Outgoing, Purpose};
use crate::db::settlements::{self, NewSettlement, Settleable};
use crate::db::{moves, Batch, Db};
use crate::error::{ApiError, OrInternal};
use crate::money::ledger::{self, Asset};
use crate::money::sends::{self, Transfer};
use crate::money::treasury::{self, Treasury};

/// Most open requests one object's run reads back.
const REQUESTS_PER_RUN: i64 = 20;
/// Most requests one object's run sends again.
const RESENDS_PER_RUN: i64 = 5;
/// How long a request stays `requested` before the cron sends it again (its first send is
/// made right after it is written; this covers a lost answer, a node that failed it, or a
/// stopped worker; a request sent twice is stored once).
const RESEND_AFTER_SECONDS: i64 = 10;

/// Step 3: what the treasury's books say of the object's open requests (of `institution`),
/// recorded; answers the requests the treasury has not stored, for [`resend`].
pub(super) async fn read_back(
    ctx: &Ctx,
    object: &Db,
    institution: i64,
) -> Result<Vec<Request>, ApiError> {
    let open = object_sends::open(object, institution, REQUESTS_PER_RUN)
        .await
        .or_internal("read requests out")?;
    if open.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = open.iter().map(|r| r.id.as_str()).collect();
    let stored = db_sends::stored(&ctx.db, &ids)
        .await
        .or_internal("read the treasury's transactions")?;
    let settlement_ids: Vec<&str> = open.iter().map(|r| r.settlement_id.as_str()).collect();
    let finals = db_sends::final_of(&ctx.db, &settlement_ids)
        .await
        .or_internal("read the treasury's transactions")?;
    let mut unsent = Vec::new();
    for request in open {
        let outcome = match finals
            .iter()
            .find(|f| f.settlement_id == request.settlement_id)
        {
            Some(done) => record(ctx, object, &request, done).await,
            None if stored.contains(&request.id) => {
                if request.state == "requested" {
                    mark_sent(object, &request.id, ctx.now()).await
                } else {
                    Ok(())
                }
            }
            None => {
                unsent.push(request);
                continue;
            }
        };
        if let Err(err) = outcome {
            err.log_with(format!("the outcome of request {}", request.id));
        }
    }
    Ok(unsent)
}

/// Records `request`'s outcome `done` in the object, with the end of its half of the books.
async fn record(
    ctx: &Ctx,
    object: &Db,
    request: &Request,
    done: &db_sends::Final,
) -> Result<(), ApiError> {
    let now = ctx.now();
    let confirmed = done.state == SendState::Confirmed.as_str();
    let token = Token::parse(&request.token).or_internal("read a request's token")?;
    let asset = Asset {
        network: &request.network,
        token,
        symbol: &request.asset,
        decimals: request.decimals,
    };
    let settlement = Scoped::new(request.institution_id, request.settlement_id.as_str());
    let mut batch = Batch::new();
    batch.push(
        object_sends::finished(
            &request.id,
            confirmed,
            &done.tx_hash,
            done.error.as_deref(),
            now,
        )
        .or_internal("record a request's outcome")?,
    );
    if confirmed {
        batch.extend(settlements::confirm_held(settlement, now).or_internal("confirm")?);
    } else {
        let why = done.error.as_deref().unwrap_or("its transaction failed");
        batch.extend(settlements::fail(settlement, why, now).or_internal("fail")?);
    }
    batch.extend(
        ledger::end_held_request(
            ctx,
            object,
            (
                &asset,
                Scoped::new(request.institution_id, request.merchant_id),
            ),
            &request.id,
            confirmed,
            &object_sends::in_state(&request.id, &done.state),
        )
        .await
        .or_internal("end a settlement in the books")?,
    );
    batch
        .run(object)
        .await
        .or_internal("record a request's outcome")?;
    Ok(())
}

/// Sends again the requests left `requested` for [`RESEND_AFTER_SECONDS`] that the treasury
/// never stored (`unsent`, as [`read_back`] found them), at most [`RESENDS_PER_RUN`].
pub(super) async fn resend(
    ctx: &Ctx,
    object: &Db,
    (networks, treasury): (&BTreeMap<String, Network>, &Treasury),
    institution: moves::Held,
    unsent: Vec<Request>,
) -> Result<(), ApiError> {
    let before = ctx.now() - RESEND_AFTER_SECONDS;
    let due = unsent
        .iter()
        .filter(|r| r.updated_at <= before)
        .take(usize::try_from(RESENDS_PER_RUN).unwrap_or(usize::MAX));
    for request in due {
        match send(ctx, object, networks, treasury, request).await {
            Ok(()) | Err(NotNow::Raced) => {}
            Err(NotNow::Hold(reason)) => {
                let settlement =
                    Scoped::new(request.institution_id, request.settlement_id.as_str());
                let claimed =
                    settlements::claimed_held(object, settlement, institution.psp_fee_bps)
                        .await
                        .or_internal("read a settlement's payments")?;
                let ids: Vec<i64> = claimed.iter().map(|d| d.transaction_id).collect();
                hold(ctx, Some(object), request.institution_id, &ids, &reason).await?;
            }
        }
    }
    Ok(())
}

/// Steps 1 and 2 for `group`, due in `object`: priced as D1's groups are, asked in one
/// transaction of the object, then sent.
pub(super) async fn settle_group(
    ctx: &Ctx,
    object: &Db,
    networks: &BTreeMap<String, Network>,
    treasury: &Treasury,
    group: &[Settleable],
) -> Result<(), NotNow> {
    let first = &group[0];
    let priced = price_group(ctx, Some(object), networks, treasury, group).await?;
    let now = ctx.now();
    let settlement_id = new_id(shared_types::ids::SettlementId::PREFIX)?;
    let send_id = sends::new_id()?;
    let asset = asset_of(first);
    let owners = Scoped::new(first.institution_id, first.merchant_id);
    let parts = ledger::parts(&priced.plan.items)?;
    let reserved =
        ledger::reserve_held_settlement(object, &asset, owners, &send_id, &parts).await?;
    covers(first, &priced, reserved.payout)?;
    // The treasury's books must take their half too before anything is asked (they are read
    // again when it is sent).
    ledger::reserve_held_payout(
        ctx,
        &asset,
        owners,
        &send_id,
        reserved.payout,
        priced.gas_cost,
    )
    .await?;
    let token = first.token.lower();
    let request = NewRequest {
        id: &send_id,
        settlement_id: &settlement_id,
        network: priced.name,
        token: &token,
        asset: &first.asset,
        decimals: first.decimals,
        wallet: &priced.wallet_text,
        units: reserved.payout,
        netted: priced.plan.units - reserved.payout,
        gas_limit: priced.gas,
        gas_price: priced.price,
        l1_fee: priced.l1_fee,
        rate_source: &priced.rate_source,
    };
    let settlement = NewSettlement {
        id: &settlement_id,
        institution_id: first.institution_id,
        merchant_id: first.merchant_id,
        network: priced.name,
        asset: &first.asset,
        token: first.token,
        wallet: &priced.wallet_text,
    };
    let mut batch = Batch::new();
    batch.extend(
        settlements::start(&settlement, &priced.plan.items, now).map_err(ChainError::from)?,
    );
    batch.extend(settlements::items(&send_id, &priced.plan.items).map_err(ChainError::from)?);
    batch.push(object_sends::request(&request, now).map_err(ChainError::from)?);
    batch.extend(
        reserved
            .institution
            .statements(&object_sends::in_state(&send_id, "requested"), now)
            .map_err(ChainError::from)?,
    );
    if let Err(e) = batch.run(object).await {
        // Another run claimed one of these payments first: nothing was asked.
        worker::console_warn!("settlement {settlement_id} not asked ({e}): another run is");
        return Err(NotNow::Raced);
    }
    let request = request.stored(first.institution_id, first.merchant_id, now);
    send(ctx, object, networks, treasury, &request).await
}

/// Step 2: the treasury signs and stores `request`'s transaction, with its row of the
/// settlement and its half of the books, and sends it; the object records it sent.
async fn send(
    ctx: &Ctx,
    object: &Db,
    networks: &BTreeMap<String, Network>,
    treasury: &Treasury,
    request: &Request,
) -> Result<(), NotNow> {
    let name = request.network.as_str();
    let network = networks
        .get(name)
        .ok_or_else(|| format!("{name} is no longer configured"))?;
    if network.node.calls_left() < MOST_GROUP_CALLS {
        return Err(NotNow::Raced); // this run's calls on it are spent: next run
    }
    let number = |text: &str| {
        u128::from_str(text).map_err(|_| ChainError::answer("a request's figure is not a number"))
    };
    let token = Token::parse(&request.token)
        .map_err(|_| ChainError::answer("a request's token is not an address"))?;
    let wallet = Address::parse(&request.wallet)
        .map_err(|_| ChainError::answer("a request's wallet is not an address"))?;
    let (units, netted) = (number(&request.units)?, number(&request.netted)?);
    let (price, l1_fee) = (number(&request.gas_price)?, number(&request.l1_fee)?);
    crate::chain::check_chain(name, network).await?;
    let at_node = |e: ChainError| e.within(format!("the {name} node"));
    let head = rpc::head(&network.node)
        .await
        .map_err(|e| at_node(e.into()))?;
    let gas_wei = treasury::most_fee(request.gas_limit, price, l1_fee)
        .ok_or_else(|| ChainError::answer("the request's fees are out of range"))?;
    let asset = Asset {
        network: name,
        token,
        symbol: &request.asset,
        decimals: request.decimals,
    };
    let books = ledger::reserve_held_payout(
        ctx,
        &asset,
        Scoped::new(request.institution_id, request.merchant_id),
        &request.id,
        units,
        gas_wei,
    )
    .await?;
    let settlement = NewSettlement {
        id: &request.settlement_id,
        institution_id: request.institution_id,
        merchant_id: request.merchant_id,
        network: name,
        asset: &request.asset,
        token,
        wallet: &request.wallet,
    };
    let now = ctx.now();
    let before =
        vec![settlements::held(&settlement, request.decimals, now).map_err(ChainError::from)?];
    let after = books
        .statements(&db_sends::in_state(&request.id, SendState::Live), now)
        .map_err(ChainError::from)?;
    let transfer = Transfer {
        purpose: Purpose::Settlement(&request.settlement_id),
        token,
        to: wallet,
        units,
        netted,
        gas: request.gas_limit,
        price,
        l1_fee,
        rate_source: &request.rate_source,
    };
    let stored = sends::send(
        ctx,
        treasury,
        (name, network),
        head,
        (&request.id, &transfer),
        (before, after),
    )
    .await?;
    if !stored {
        return Err(NotNow::Raced);
    }
    if let Err(err) = mark_sent(object, &request.id, now).await {
        // Read back at the next run.
        err.log_with(format!("record request {} sent", request.id));
    }
    Ok(())
}

/// Records in the object that the treasury stored request `id`.
async fn mark_sent(object: &Db, id: &str, now: i64) -> Result<(), ApiError> {
    let sent = object_sends::sent(id, now).or_internal("record a request sent")?;
    crate::db::batch(object, vec![sent])
        .await
        .or_internal("record a request sent")
}

/// A held settlement's transaction that cannot go on by itself: its payments are held in the
/// object with the reason, and the institution told.
pub(super) async fn stalled(
    ctx: &Ctx,
    send: &Outgoing,
    settlement_id: &str,
    reason: &str,
) -> Result<(), ApiError> {
    let Some(institution) = send.held_by else {
        return Ok(());
    };
    let object = ctx.institution_object(institution.0)?;
    let claimed = settlements::claimed_held(&object, Scoped::new(institution, settlement_id), 0)
        .await
        .or_internal("read a settlement's payments")?;
    let ids: Vec<i64> = claimed.iter().map(|d| d.transaction_id).collect();
    if ids.is_empty() {
        return Ok(());
    }
    hold(ctx, Some(&object), institution, &ids, reason).await
}
