//! Returns of extra money: what reached a deposit address of a payment after the payment was
//! credited is sent back to the customer, from that address, as a refund marked `extra`. It is
//! reserved from the address's unallocated account in the books, stored by one guarded insert,
//! then signed, followed and finished like any refund ([`super`]); the payment and what is left
//! to refund of it never change: this money was never credited. A held institution's return is
//! stored in its object and paid through a request to the treasury, as its refunds are.

use std::str::FromStr;

use rust_decimal::Decimal;
use shared_types::checkout::currency_digits;
use shared_types::ids::Scoped;
use shared_types::RawStatus;

use super::{check_key, conflict, first_attempt, sent_now, with_books, RefundView, STORE_TRIES};
use crate::chain::evm;
use crate::ctx::Ctx;
use crate::db::refunds::{self, Refund};
use crate::db::screenings::{self, Subject};
use crate::db::{self, object_sends, transactions, watches, Db};
use crate::error::{ApiError, OrInternal};
use crate::money::{ledger, screening, sends};
use crate::{crypto, wallet_address};

/// Returns to `to` (the customer's address) everything that reached deposit `deposit` of
/// payment `transaction_id` after the payment was credited, under the Idempotency-Key `key`:
/// the return (a refund marked `extra`), and whether it is new. The payment does not change,
/// and its refundable amount does not either: this money was never credited. Refused (409)
/// before the payment is credited (its money then counts toward it) and when nothing is left
/// there; two at once return it once (the books' batch guards the address's balance).
pub async fn return_extra(
    ctx: &Ctx,
    held: Option<&Db>,
    Scoped {
        institution: institution_id,
        id: transaction_id,
    }: Scoped<i64>,
    (deposit, to): (&str, &str),
    key: &str,
    requested_by: &str,
) -> Result<(RefundView, bool), ApiError> {
    check_key(key)?;
    let deposit = deposit.trim().to_ascii_lowercase();
    let same = |r: &Refund| {
        r.extra
            && r.transaction_id == transaction_id
            && r.from_address.as_deref() == Some(deposit.as_str())
            && wallet_address::check(&r.network, to)
                .is_ok_and(|a| a.eq_ignore_ascii_case(&r.to_address))
    };
    let existing = |stored: Refund| {
        if same(&stored) {
            Ok((RefundView::of(stored)?, false))
        } else {
            Err(conflict(
                "this Idempotency-Key was used for another refund; use a new key",
            ))
        }
    };
    let db = held.unwrap_or(&ctx.db);
    if let Some(stored) = refunds::by_key(db, institution_id, key)
        .await
        .or_internal("read refund")?
    {
        return existing(stored);
    }
    let t = transactions::get(db, institution_id, transaction_id)
        .await
        .or_internal("read payment")?
        .ok_or_else(|| ApiError::not_found("no such payment"))?;
    if !matches!(
        t.raw_status,
        RawStatus::Succeeded | RawStatus::Paid | RawStatus::PartiallyRefunded | RawStatus::Refunded
    ) {
        return Err(conflict(format!(
            "money at a checkout's addresses is returned only once its payment was credited \
             (its raw_status is {}): until then it counts toward the payment",
            t.raw_status
        )));
    }
    let watch = watches::deposits_of_transaction(db, institution_id, transaction_id)
        .await
        .or_internal("read deposits")?
        .into_iter()
        .find(|w| w.address.lower() == deposit)
        .ok_or_else(|| {
            ApiError::invalid_request("deposit must be one of this payment's deposit addresses")
        })?;
    let to = wallet_address::check(&watch.network, to)
        .map_err(|e| ApiError::invalid_request(format!("address: {e}")))?;
    let asset = ledger::Asset {
        network: &watch.network,
        token: watch.token,
        symbol: &watch.asset,
        decimals: watch.decimals,
    };
    // What it is worth at the address's quote, for people to read.
    let rate = Decimal::from_str(&watch.rate).unwrap_or_default();
    let digits = currency_digits(t.currency.as_deref().unwrap_or_default()).unwrap_or(2);
    let to = to.to_ascii_lowercase();
    // Money from an address on a sanctions list stays frozen in custody: never sent back.
    let senders = watches::senders_at(db, institution_id, &deposit)
        .await
        .or_internal("read the money's senders")?;
    let subject = format!("payment {transaction_id}");
    for sender in &senders {
        screening::frozen_sender(
            ctx,
            db,
            (&watch.network, sender),
            (institution_id, &subject),
        )
        .await?;
    }
    // The customer's address is screened once, before anything is stored or signed.
    let screened = screening::gate(
        ctx,
        db,
        (&watch.network, &to),
        (
            institution_id,
            Subject::Return,
            &format!("payment {transaction_id}"),
        ),
    )
    .await?;
    let token = watch.token.lower();
    let mut tries = 0;
    let asked = loop {
        tries += 1;
        let id = crypto::random_token(shared_types::ids::RefundId::PREFIX)
            .or_internal("generate refund id")?;
        let (book, units) = ledger::reserve_return(
            ctx,
            held.map(|object| (object, institution_id)),
            &asset,
            (&deposit, transaction_id),
            &id,
        )
        .await?;
        if held.is_some() {
            // The treasury's books must take their half too before anything is asked (they are
            // read again when it is sent).
            ledger::reserve_held_refund_payout(
                ctx,
                &asset,
                (
                    Scoped::new(institution_id, t.merchant_id),
                    transaction_id,
                    Some(&deposit),
                ),
                &id,
                (units, 0),
            )
            .await
            .map_err(|e| conflict(format!("cannot return it now: {}", e.public())))?;
        }
        let worth = evm::from_units(units, watch.decimals)
            .and_then(|a| a.checked_mul(rate))
            .unwrap_or_default()
            .round_dp(digits);
        let factor = 10i64.pow(digits);
        let minor = (worth * Decimal::from(factor))
            .trunc()
            .to_string()
            .parse::<i64>()
            .unwrap_or(0)
            .max(1);
        let (units_text, worth_text, rate_text) = (
            units.to_string(),
            worth.to_string(),
            rate.round_dp(12).normalize().to_string(),
        );
        let statement = refunds::insert_return(&refunds::NewReturn {
            id: &id,
            institution_id,
            transaction_id,
            key,
            amount: (&worth_text, minor),
            from: (
                &deposit,
                &watch.network,
                &watch.asset,
                &watch.token.lower(),
                watch.decimals,
            ),
            units: &units_text,
            rate: &rate_text,
            to_address: &to,
            requested_by,
            now: ctx.now(),
        })
        .or_internal("write return")?;
        let (mut batch, insert) =
            with_books(ctx, statement, &book, Scoped::new(institution_id, &id))?;
        let decision = screened.record(institution_id, (Subject::Return, &id), ctx.now())?;
        batch.push(screenings::insert_for_refund(&decision).or_internal("write return")?);
        let request_id = sends::new_id().or_internal("a request's id")?;
        let request = first_attempt(
            (&id, &request_id, institution_id),
            (&asset, &token),
            (&to, units),
        );
        if held.is_some() {
            batch.push(object_sends::request(&request, ctx.now()).or_internal("write return")?);
        }
        match batch.run(db).await {
            Ok(results) if results.changed(insert) => {
                break held.map(|_| {
                    let mut asked = request.stored(t.merchant_id, Some(transaction_id), ctx.now());
                    asked.from_address = Some(deposit.clone());
                    Box::new(asked)
                })
            }
            Ok(_) => {
                return Err(conflict(
                    "the payment changed while this return was checked",
                ))
            }
            // The address's balance changed meanwhile (another return): look again.
            Err(e) if db::ledger::raced(&e) && tries < STORE_TRIES => continue,
            Err(e) if db::ledger::raced(&e) => {
                return Err(conflict(
                    "the address's balance kept changing while this return was checked; read \
                     it again and retry",
                ))
            }
            // The key was taken meanwhile: the other request's return answers.
            Err(_) => {
                let stored = refunds::by_key(db, institution_id, key)
                    .await
                    .or_internal("read refund")?
                    .ok_or("return vanished")
                    .or_internal("write return")?;
                return existing(stored);
            }
        }
    };
    sent_now(ctx, held, institution_id, key, asked).await
}
