//! The requests of institutions held in their own objects to the treasury (docs/SCALING.md):
//! each settlement's payout, and each attempt of a refund. The object decides (what is due, the
//! merchant's balance, the fees, its half of the books); the treasury's books (D1, until the
//! treasury has an object of its own) sign, send, follow and replace the transaction exactly as
//! for D1's own ([`super::sends`]). No transaction spans the two stores, so money moves once by
//! these steps:
//!
//! 1. **Ask.** One transaction of the object writes the settlement (its claims and items) or the
//!    refund, its half of the books (against the merchant, and to the object's link to the
//!    treasury: `shared_types::ledger::split`) and a request, before anything is signed
//!    ([`super::settle`], [`super::refund`]).
//! 2. **Send** ([`send`]). One D1 batch stores the signed transaction under the request's id,
//!    with the treasury's row of what it pays (`settlements` with `held_by`: a settlement, or a
//!    refund's attempt) and its half of the books (the payout from its link to the
//!    institution, and the gas). The key refuses a second store of one request, so a request
//!    sent again (its answer lost, or the worker stopped between 1 and 2: the cron sends any
//!    left `requested`, [`resend`]) is never paid twice.
//! 3. **Read back** ([`read_back`]). Each run, the object asks the treasury's books what became
//!    of its open requests (the transaction final for each) and records the outcome under a
//!    guard on the request's state, with the end of its half of the books: a repeat changes
//!    nothing. A settlement's payments are then marked paid, a refund recorded on its payment;
//!    a refund whose transaction failed is asked again by a new request (up to
//!    `refunds::ATTEMPTS`), or given up and its reservation released.
//!
//! A replacement of a held request's transaction pays what the first was priced at (a
//! settlement's payments were charged that; a refund sends its amount), and only its gas moves
//! in the treasury's books.

use std::collections::BTreeMap;
use std::str::FromStr;

use payrail_evm::{Address, Token};
use shared_types::ids::Scoped;
use shared_types::SendState;

use super::settle::group::{hold, NotNow, MOST_GROUP_CALLS};
use crate::chain::config::Network;
use crate::chain::error::ChainError;
use crate::chain::rpc;
use crate::ctx::Ctx;
use crate::db::object_sends::{self, NewRequest, Paying, Request};
use crate::db::sends::{self as db_sends, Outgoing, Purpose};
use crate::db::settlements::{self, NewSettlement};
use crate::db::{moves, refunds, Batch, Db};
use crate::error::{ApiError, OrInternal};
use crate::money::ledger::{self, Asset};
use crate::money::refund::send::{self as refund_send, Payout};
use crate::money::screening;
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
pub async fn read_back(ctx: &Ctx, object: &Db, institution: i64) -> Result<Vec<Request>, ApiError> {
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
    let payout_ids: Vec<&str> = open.iter().map(|r| r.payout_id.as_str()).collect();
    let finals = db_sends::final_of(&ctx.db, &payout_ids)
        .await
        .or_internal("read the treasury's transactions")?;
    let mut unsent = Vec::new();
    for request in open {
        let outcome = match finals.iter().find(|f| f.settlement_id == request.payout_id) {
            Some(done) => record(ctx, object, &request, done).await,
            None if stored.contains(&request.id) => {
                if request.state == "requested" {
                    mark_sent(object, &request.id, None, ctx.now()).await
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

/// The asset a request pays in.
fn asset_of(request: &Request) -> Result<Asset<'_>, ApiError> {
    Ok(Asset {
        network: &request.network,
        token: Token::parse(&request.token).or_internal("read a request's token")?,
        symbol: &request.asset,
        decimals: request.decimals,
    })
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
    let asset = asset_of(request)?;
    let owners = Scoped::new(request.institution_id, request.merchant_id);
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
    let recorded = object_sends::in_state(&request.id, &done.state);
    let why = done.error.as_deref().unwrap_or("its transaction failed");
    match request.paying() {
        Paying::Settlement(id) => {
            let settlement = Scoped::new(request.institution_id, id);
            if confirmed {
                batch.extend(settlements::confirm_held(settlement, now).or_internal("confirm")?);
            } else {
                batch.extend(settlements::fail(settlement, why, now).or_internal("fail")?);
            }
            batch.extend(
                ledger::end_held_request(
                    ctx,
                    object,
                    (&asset, owners, None),
                    &request.id,
                    confirmed,
                    &recorded,
                )
                .await
                .or_internal("end a settlement in the books")?,
            );
        }
        Paying::Refund(id) => {
            let refund = Scoped::new(request.institution_id, id);
            let given_up = !confirmed
                && refunds::attempts(object, refund)
                    .await
                    .or_internal("read a refund's attempts")?
                    + 1
                    >= refunds::ATTEMPTS;
            if confirmed {
                batch.push(refunds::confirm_held(refund, now).or_internal("confirm a refund")?);
            } else {
                batch.push(
                    refunds::attempt_failed(refund, why, now).or_internal("fail an attempt")?,
                );
            }
            if confirmed || given_up {
                batch.extend(
                    ledger::end_held_request(
                        ctx,
                        object,
                        (&asset, owners, request.from_address.as_deref()),
                        id,
                        confirmed,
                        &recorded,
                    )
                    .await
                    .or_internal("end a refund in the books")?,
                );
            } else {
                // Asked again: a new request (with a new send id) for its next attempt.
                let again = NewRequest {
                    id: &sends::new_id().or_internal("a request's id")?,
                    institution_id: request.institution_id,
                    paying: Paying::Refund(id),
                    network: &request.network,
                    token: &request.token,
                    asset: &request.asset,
                    decimals: request.decimals,
                    wallet: &request.wallet,
                    units: u128::from_str(&request.units).or_internal("a request's units")?,
                    netted: 0,
                    gas_limit: 0,
                    gas_price: 0,
                    l1_fee: 0,
                    rate_source: "",
                };
                batch.push(object_sends::again(&again, now).or_internal("ask again")?);
            }
        }
    }
    batch
        .run(object)
        .await
        .or_internal("record a request's outcome")?;
    Ok(())
}

/// Sends again the requests left `requested` for [`RESEND_AFTER_SECONDS`] that the treasury
/// never stored (`unsent`, as [`read_back`] found them), at most [`RESENDS_PER_RUN`].
pub async fn resend(
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
                waits(ctx, object, request, institution.psp_fee_bps, &reason).await?;
            }
        }
    }
    Ok(())
}

/// Records why `request` waits: a settlement's payments held with the reason (the
/// institution told), a refund's reason shown on it.
pub async fn waits(
    ctx: &Ctx,
    object: &Db,
    request: &Request,
    psp_fee_bps: u32,
    reason: &str,
) -> Result<(), ApiError> {
    match request.paying() {
        Paying::Settlement(id) => {
            let settlement = Scoped::new(request.institution_id, id);
            let claimed = settlements::claimed_held(object, settlement, psp_fee_bps)
                .await
                .or_internal("read a settlement's payments")?;
            let ids: Vec<i64> = claimed.iter().map(|d| d.transaction_id).collect();
            hold(ctx, Some(object), request.institution_id, &ids, reason).await
        }
        Paying::Refund(id) => refunds::note(
            object,
            Scoped::new(request.institution_id, id),
            reason,
            ctx.now(),
        )
        .await
        .or_internal("record why a refund waits"),
    }
}

/// Step 2: the treasury signs and stores `request`'s transaction, with its row of what it pays
/// and its half of the books, and sends it; the object records it sent. A settlement's was
/// priced when asked (its payments were charged that); a refund's is priced now.
pub async fn send(
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
    let units = number(&request.units)?;
    let asset = Asset {
        network: name,
        token,
        symbol: &request.asset,
        decimals: request.decimals,
    };
    let owners = Scoped::new(request.institution_id, request.merchant_id);
    let (head, (gas, price, l1_fee), books, refund_of) = match request.paying() {
        Paying::Settlement(_) => {
            let (price, l1_fee) = (number(&request.gas_price)?, number(&request.l1_fee)?);
            crate::chain::check_chain(name, network).await?;
            let head = rpc::head(&network.node)
                .await
                .map_err(|e| ChainError::from(e).within(format!("the {name} node")))?;
            let gas_wei = treasury::most_fee(request.gas_limit, price, l1_fee)
                .ok_or_else(|| ChainError::answer("the request's fees are out of range"))?;
            let books =
                ledger::reserve_held_payout(ctx, &asset, owners, &request.id, units, gas_wei)
                    .await?;
            (head, (request.gas_limit, price, l1_fee), books, None)
        }
        Paying::Refund(refund_id) => {
            let payment = request
                .transaction_id
                .ok_or_else(|| ChainError::answer("a refund's request names no payment"))?;
            let what = Payout {
                network: name,
                token,
                symbol: &request.asset,
                decimals: request.decimals,
                to: wallet,
                units,
            };
            let (_, priced) = refund_send::price(ctx, networks, treasury, &what).await?;
            screening::before_signing(
                ctx,
                object,
                (name, network, priced.head),
                &request.wallet,
                (
                    request.institution_id,
                    refund_send::subject_of(request.from_address.is_some()),
                    refund_id,
                ),
            )
            .await?;
            let books = ledger::reserve_held_refund_payout(
                ctx,
                &asset,
                (owners, payment, request.from_address.as_deref()),
                &request.id,
                (units, priced.cost),
            )
            .await?;
            (
                priced.head,
                (priced.gas, priced.price, priced.l1_fee),
                books,
                Some(refund_id),
            )
        }
    };
    let payout = NewSettlement {
        id: &request.payout_id,
        institution_id: request.institution_id,
        merchant_id: request.merchant_id,
        network: name,
        asset: &request.asset,
        token,
        wallet: &request.wallet,
    };
    let now = ctx.now();
    let before = vec![
        settlements::held(&payout, (request.decimals, refund_of), now).map_err(ChainError::from)?,
    ];
    let after = books
        .statements(&db_sends::in_state(&request.id, SendState::Live), now)
        .map_err(ChainError::from)?;
    let transfer = Transfer {
        purpose: Purpose::Settlement(&request.payout_id),
        token,
        to: wallet,
        units,
        netted: number(&request.netted)?,
        gas,
        price,
        l1_fee,
        rate_source: &request.rate_source,
        call: None,
        guarded: false,
    };
    let Some(hash) = sends::send(
        ctx,
        treasury,
        (name, network),
        head,
        (&request.id, &transfer),
        (before, after),
    )
    .await?
    else {
        return Err(NotNow::Raced);
    };
    if let Err(err) = mark_sent(object, &request.id, Some(&hash), now).await {
        // Read back at the next run.
        err.log_with(format!("record request {} sent", request.id));
    }
    Ok(())
}

/// Records in the object that the treasury stored request `id` (with its transaction's hash,
/// when known).
async fn mark_sent(object: &Db, id: &str, hash: Option<&str>, now: i64) -> Result<(), ApiError> {
    let sent = object_sends::sent(id, hash, now).or_internal("record a request sent")?;
    crate::db::batch(object, vec![sent])
        .await
        .or_internal("record a request sent")
}

/// A held request's transaction that cannot go on by itself (`payout_id`: the treasury's row
/// of what it pays): a settlement's payments are held in the object with the reason, and the
/// institution told; a refund shows the reason.
pub async fn stalled(
    ctx: &Ctx,
    send: &Outgoing,
    payout_id: &str,
    reason: &str,
) -> Result<(), ApiError> {
    let Some(institution) = send.held_by else {
        return Ok(());
    };
    let object = ctx.institution_object(institution.0)?;
    let Some(request) = object_sends::by_payout(&object, institution, payout_id)
        .await
        .or_internal("read a request")?
    else {
        return Ok(());
    };
    waits(ctx, &object, &request, 0, reason).await
}
