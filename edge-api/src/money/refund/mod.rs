//! Refunds on chain: an institution admin refunds a payment made on chain, in full or in part,
//! to an address the customer gave. The amount is in the order currency and is paid in the
//! payment's asset on its network at the payment's own quote (the rate the customer paid at,
//! shown before confirming), from the treasury, with a transaction signed and followed like a
//! settlement ([`super::sends`]); `payment.refunded` is written once it is final.
//!
//! Limits, all checked again by the one guarded insert ([`refunds::insert`]): refunds never add
//! up to more than the gross (whatever runs at once); a payment not yet settled is refunded in
//! full only (a part refunded before settlement would leave a rest that cannot settle), and not
//! while a settlement of it is out. The same Idempotency-Key again is the same refund.
//!
//! Money that reached a deposit after its payment was credited is returned the same way, by
//! [`returns`]; the cron signs and sends refunds, and records them once final, in [`send`].

pub mod returns;
pub mod send;

use std::str::FromStr;

use rust_decimal::Decimal;
use serde::Serialize;
use shared_types::checkout::{currency_digits, parse_decimal, AmountRule};
use shared_types::ids::{InstitutionId, Scoped};
use shared_types::{ErrorCode, RawStatus, RefundState};

use super::{ledger, screening, treasury};
use crate::chain::evm;
use crate::ctx::{timestamp, Ctx};
use crate::db::object_sends::{self, NewRequest, Paying, Request};
use crate::db::refunds::{self, NewRefund, PaymentQuote, Refund};
use crate::db::screenings::{self, Subject};
use crate::db::{self, transactions, Batch, Db};
use crate::error::{ApiError, OrInternal};
use crate::money::requests;
use crate::money::sends;
use crate::money::settle::group::NotNow;
use crate::money::watch::rules::MULTI_QUOTE;
use crate::{crypto, wallet_address};

/// Longest Idempotency-Key.
const MAX_KEY: usize = 255;

/// What an admin asks for.
pub struct RefundRequest<'a> {
    /// Order currency, decimal text.
    pub amount: &'a str,
    /// The customer's address on the network of the part refunded.
    pub address: &'a str,
    /// For a payment made in more than one way to pay, the part refunded (its number: 0 is the
    /// way to pay it is recorded in); `None` for a payment made in one.
    pub part: Option<i64>,
}

/// What a refund will send, shown before confirming.
#[derive(Debug, Serialize)]
pub struct Preview {
    /// The amount, in the order currency.
    pub amount: String,
    /// The order currency.
    pub currency: String,
    /// What is left to refund before this one.
    pub refundable: String,
    /// The asset sent.
    pub asset: String,
    /// The network it is sent on.
    pub network: String,
    /// The amount of the asset.
    pub crypto_amount: String,
    /// The same in base units.
    pub base_units: String,
    /// Order currency per unit of the asset.
    pub rate: String,
    /// Where the rate comes from.
    pub rate_source: String,
    /// The address it is sent to (checksummed).
    pub address: String,
    /// The part of the payment refunded (0 for a payment made in one way to pay).
    pub part: i64,
    /// How many parts the payment came in.
    pub parts: usize,
}

/// A refund as the portal shows it.
#[derive(Debug, Serialize)]
pub struct RefundView {
    /// Its id.
    pub id: String,
    /// The payment.
    pub transaction_id: i64,
    /// The part of it refunded (0 for a payment made in one way to pay).
    pub part: i64,
    /// The amount, in the order currency.
    pub amount: Decimal,
    /// The asset sent.
    pub asset: String,
    /// The network.
    pub network: String,
    /// The amount of the asset.
    pub crypto_amount: String,
    /// The same in base units.
    pub base_units: String,
    /// Order currency per unit of the asset (the payment's quote).
    pub rate: String,
    /// The customer's address (checksummed).
    pub address: String,
    /// `sending` (its transaction is out or about to be), `confirmed` (final), `done` (the
    /// payment shows it; `payment.refunded` was written) or `failed` (three transactions
    /// failed).
    pub state: RefundState,
    /// Its newest transaction's hash, once signed.
    pub tx_hash: Option<String>,
    /// Why its last transaction failed, or why none could be sent yet.
    pub error: Option<String>,
    /// Who asked.
    pub requested_by: String,
    /// When.
    pub created_at: String,
    /// A return of money that reached a deposit after the payment was credited (it never
    /// counts against the payment), not a refund of the payment.
    pub extra: bool,
    /// For a return: the deposit address it sends back from (checksummed).
    pub from_address: Option<String>,
}

impl RefundView {
    /// The view of a stored refund.
    pub fn of(r: Refund) -> Result<RefundView, ApiError> {
        let units = u128::from_str(&r.units).or_internal("read refund units")?;
        Ok(RefundView {
            created_at: timestamp(r.created_at)?,
            crypto_amount: evm::from_units(units, r.decimals)
                .map_or_else(|| r.units.clone(), |a| a.to_string()),
            address: wallet_address::eip55(&r.to_address),
            id: r.id,
            transaction_id: r.transaction_id,
            part: r.part,
            extra: r.extra,
            from_address: r.from_address.as_deref().map(wallet_address::eip55),
            amount: r.amount,
            asset: r.asset,
            network: r.network,
            base_units: r.units,
            rate: r.rate,
            state: r.state,
            tx_hash: r.tx_hash,
            error: r.error,
            requested_by: r.requested_by,
        })
    }
}

fn conflict(text: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::Conflict, text)
}

/// A checked request: the payment, its quote, and what is to be sent.
struct Checked {
    merchant_id: i64,
    quote: PaymentQuote,
    preview: Preview,
    amount: Decimal,
    digits: u32,
    units: u128,
}

async fn check(
    db: &Db,
    institution_id: InstitutionId,
    transaction_id: i64,
    request: &RefundRequest<'_>,
) -> Result<Checked, ApiError> {
    let t = transactions::get(db, institution_id, transaction_id)
        .await
        .or_internal("read payment")?
        .ok_or_else(|| ApiError::not_found("no such payment"))?;
    let parts = refunds::quotes_of(db, institution_id, transaction_id)
        .await
        .or_internal("read the payment's parts")?;
    if parts.is_empty() {
        return Err(conflict(
            "this payment was not made on a watched chain: nothing to send back",
        ));
    }
    let count = parts.len();
    let quote = match (request.part, count) {
        (None, 1) => parts.into_iter().next(),
        (None, _) => {
            return Err(ApiError::invalid_request(format!(
                "this payment came in {count} parts ({}): part must name the one to refund",
                part_list(&parts)
            )))
        }
        (Some(n), _) => parts.into_iter().find(|p| p.part == n),
    }
    .ok_or_else(|| {
        ApiError::invalid_request(format!(
            "part must be a part of this payment, from 0 to {}",
            count - 1
        ))
    })?;
    if count > 1 && t.raw_status == RawStatus::Succeeded {
        return Err(conflict(format!(
            "this payment came in {count} parts, each settled in its own asset: it is refunded \
             part by part once every part is settled (paid)"
        )));
    }
    if !matches!(
        t.raw_status,
        RawStatus::Succeeded | RawStatus::Paid | RawStatus::PartiallyRefunded
    ) {
        return Err(conflict(format!(
            "cannot refund a payment whose raw_status is {}",
            t.raw_status
        )));
    }
    let currency = t.currency.clone().unwrap_or_default();
    let digits = currency_digits(&currency).unwrap_or(2);
    let amount = parse_amount(request.amount, &currency)?;
    let address = wallet_address::check(&quote.network, request.address)
        .map_err(|e| ApiError::invalid_request(format!("address: {e}")))?;
    let gross = t.amount.gross.unwrap_or_default();
    let asked: Vec<Refund> = refunds::of_transaction(db, institution_id, transaction_id)
        .await
        .or_internal("read refunds")?
        .into_iter()
        .filter(|r| !r.extra)
        .collect();
    let left = shared_types::refundable(gross, asked.iter().map(|r| (r.amount, r.state)));
    if amount > left {
        return Err(conflict(format!(
            "amount exceeds what is left to refund ({left} {currency})"
        )));
    }
    // A payment made in several ways to pay: each part is refunded from what it brought.
    let left = left.min(shared_types::refundable(
        quote.gross,
        asked
            .iter()
            .filter(|r| r.part == quote.part)
            .map(|r| (r.amount, r.state)),
    ));
    if amount > left {
        return Err(conflict(format!(
            "amount exceeds what is left to refund of part {} ({left} {currency} in {} on {})",
            quote.part, quote.asset, quote.network
        )));
    }
    if t.raw_status == RawStatus::Succeeded && amount != left {
        return Err(conflict(format!(
            "a payment not yet settled is refunded in full ({left} {currency}); refund a part \
             once it is paid"
        )));
    }
    let (crypto_amount, expected) = (quote.crypto_amount, quote.expected);
    if crypto_amount <= Decimal::ZERO || expected <= Decimal::ZERO {
        return Err(conflict("the payment's quote has no amount"));
    }
    let out_of_range = || conflict("the payment's quote is out of range");
    let asset_amount = evm::at_quote(amount, (crypto_amount, expected), quote.decimals)
        .ok_or_else(out_of_range)?;
    let units = evm::to_units(asset_amount, quote.decimals)
        .filter(|u| *u > 0)
        .ok_or_else(|| ApiError::invalid_request("amount is less than one unit of the asset"))?;
    let rate = expected
        .checked_div(crypto_amount)
        .ok_or_else(out_of_range)?
        .round_dp(12)
        .normalize();
    let preview = Preview {
        amount: amount.to_string(),
        currency,
        refundable: left.to_string(),
        asset: quote.asset.clone(),
        network: quote.network.clone(),
        crypto_amount: asset_amount.normalize().to_string(),
        base_units: units.to_string(),
        rate: rate.to_string(),
        rate_source: match &quote.late_rate_source {
            Some(source) if source.starts_with(MULTI_QUOTE) => source.clone(),
            Some(source) => {
                format!("the rate when the payment arrived, after its checkout ended: {source}")
            }
            None => match quote.quoted_at {
                Some(at) => format!("the payment's quote of {at}"),
                None => "the payment's quote".to_owned(),
            },
        },
        address,
        part: quote.part,
        parts: count,
    };
    Ok(Checked {
        merchant_id: t.merchant_id,
        quote,
        preview,
        amount,
        digits,
        units,
    })
}

/// The parts of a payment in words: "0: USDC on polygon, 1: ETH on base".
fn part_list(parts: &[PaymentQuote]) -> String {
    parts
        .iter()
        .map(|p| format!("{}: {} on {}", p.part, p.asset, p.network))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What refunding `request` would send, without sending it (`held`: the object holding the
/// institution's money, when it is held there).
pub async fn preview(
    ctx: &Ctx,
    held: Option<&Db>,
    institution_id: InstitutionId,
    transaction_id: i64,
    request: &RefundRequest<'_>,
) -> Result<Preview, ApiError> {
    check(
        held.unwrap_or(&ctx.db),
        institution_id,
        transaction_id,
        request,
    )
    .await
    .map(|c| c.preview)
}

/// Refunds `request` under the Idempotency-Key `key`: the refund, and whether it is new (the
/// same key again answers the refund it made, when asked the same). For an institution held in
/// its object (`held`), the refund is stored there and paid through a request to the treasury
/// ([`crate::money::requests`]).
pub async fn request(
    ctx: &Ctx,
    held: Option<&Db>,
    institution_id: InstitutionId,
    transaction_id: i64,
    request: &RefundRequest<'_>,
    key: &str,
    requested_by: &str,
) -> Result<(RefundView, bool), ApiError> {
    check_key(key)?;
    let same = |r: &Refund| {
        r.transaction_id == transaction_id
            && request.part.is_none_or(|part| part == r.part)
            && Decimal::from_str(request.amount).is_ok_and(|asked| asked == r.amount)
            && wallet_address::check(&r.network, request.address)
                .is_ok_and(|a| a.eq_ignore_ascii_case(&r.to_address))
    };
    let db = held.unwrap_or(&ctx.db);
    if let Some(existing) = refunds::by_key(db, institution_id, key)
        .await
        .or_internal("read refund")?
    {
        return if same(&existing) {
            Ok((RefundView::of(existing)?, false))
        } else {
            Err(conflict(
                "this Idempotency-Key was used for another refund; use a new key",
            ))
        };
    }
    // The customer's address is screened once (kept across the tries), before anything is
    // stored or signed.
    let mut screened = None;
    let mut tries = 0;
    let asked =
        loop {
            tries += 1;
            match store(
                ctx,
                held,
                (institution_id, transaction_id),
                request,
                (key, requested_by),
                &mut screened,
                &same,
            )
            .await?
            {
                Attempt::Stored(asked) => break asked,
                Attempt::Existing(view) => return Ok((*view, false)),
                // Another refund or a settlement changed what this one was checked against: check
                // again on what is now true (which may refuse it), a few times, then ask the caller.
                Attempt::Raced if tries < STORE_TRIES => continue,
                Attempt::Raced => return Err(conflict(
                    "the payment or the merchant's balance kept changing while this refund was \
                     checked (other refunds or a settlement); read it again and retry",
                )),
            }
        };
    sent_now(ctx, held, institution_id, key, asked).await
}

/// Signs and sends the refund just stored under `key` now when the treasury can (otherwise
/// the cron tries again), and answers it as new. A held refund's request (`asked`) is sent to
/// the treasury; why it cannot be now is shown on the refund.
async fn sent_now(
    ctx: &Ctx,
    held: Option<&Db>,
    institution_id: InstitutionId,
    key: &str,
    asked: Option<Box<Request>>,
) -> Result<(RefundView, bool), ApiError> {
    if let Some(treasury) = treasury::treasury(ctx)? {
        let networks = crate::chain::networks(ctx)?;
        match (held, asked) {
            (Some(object), Some(asked)) => {
                match requests::send(ctx, object, &networks, &treasury, &asked).await {
                    Ok(()) | Err(NotNow::Raced) => {}
                    Err(NotNow::Hold(reason)) => {
                        requests::waits(ctx, object, &asked, 0, &reason).await?;
                    }
                }
            }
            _ => send::send_due(ctx, &networks, &treasury).await,
        }
    }
    let stored = refunds::by_key(held.unwrap_or(&ctx.db), institution_id, key)
        .await
        .or_internal("read refund")?
        .ok_or("refund vanished")
        .or_internal("read refund")?;
    Ok((RefundView::of(stored)?, true))
}

/// The batch storing refund `id` (of `institution_id`) by its guarded insert `statement`, with
/// the books' pending transfers `book` written only if it stored it; and the insert's handle.
fn with_books(
    ctx: &Ctx,
    statement: db::Stmt,
    book: &db::ledger::Book,
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<&str>,
) -> Result<(Batch, db::Handle<db::NoRows>), ApiError> {
    let mut batch = Batch::new();
    let insert = batch.push(statement);
    batch.extend(
        book.statements(&refunds::stored(institution_id, id), ctx.now())
            .or_internal("write refund")?,
    );
    Ok((batch, insert))
}

/// The request paying the first attempt of refund `refund_id` of a held institution
/// (`request_id`: its send id): `units` of `asset` (its `token`, lower case) to the customer's
/// address `to` (lower case). A refund's transaction is priced when the treasury signs it (its
/// gas is the PSP's).
fn first_attempt<'a>(
    (refund_id, request_id, institution_id): (&'a str, &'a str, InstitutionId),
    (asset, token): (&'a ledger::Asset<'a>, &'a str),
    (to, units): (&'a str, u128),
) -> NewRequest<'a> {
    NewRequest {
        id: request_id,
        institution_id,
        paying: Paying::Refund(refund_id),
        network: asset.network,
        token,
        asset: asset.symbol,
        decimals: asset.decimals,
        wallet: to,
        units,
        netted: 0,
        gas_limit: 0,
        gas_price: 0,
        l1_fee: 0,
        rate_source: "",
    }
}

/// The largest refund the rule lets in, in whole units of the order currency: far above any
/// order (an overpaid one may be refunded whole), below what the books could ever hold; what is
/// left to refund of the payment bounds it first.
const MAX_REFUND_MAJOR: u64 = 1_000_000_000;

/// A refund's amount in the order's `currency`: checkout's rule for an amount (digits, at most
/// the currency's decimal places, no sign, exponent or spaces), at most [`MAX_REFUND_MAJOR`].
fn parse_amount(text: &str, currency: &str) -> Result<Decimal, ApiError> {
    parse_decimal(
        text,
        &AmountRule {
            field: "amount",
            digits: currency_digits(currency).unwrap_or(2),
            unit: currency,
            max_major: MAX_REFUND_MAJOR,
            zero_allowed: false,
        },
    )
    .map_err(|e| ApiError::invalid_request(e.message))
}

/// A refund's or a return's Idempotency-Key: 1 to [`MAX_KEY`] printable characters.
fn check_key(key: &str) -> Result<(), ApiError> {
    if key.is_empty() || key.len() > MAX_KEY || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ApiError::invalid_request(format!(
            "an Idempotency-Key header of 1 to {MAX_KEY} printable characters is required"
        )));
    }
    Ok(())
}

/// How many times a refund is checked and stored when others race it.
const STORE_TRIES: u32 = 4;

/// What one check-and-store of a refund came to.
enum Attempt {
    /// Stored, with its books (a held refund with its request to the treasury).
    Stored(Option<Box<Request>>),
    /// Another request stored a refund under the same key first: that one answers.
    Existing(Box<RefundView>),
    /// What it was checked against changed before it was stored: nothing was written.
    Raced,
}

/// Checks the refund against the payment and the books as they are now, and stores it with its
/// pending transfers in one batch guarded on what was read: in D1, or in the object holding
/// the institution's money (`held`), with its request to the treasury.
async fn store(
    ctx: &Ctx,
    held: Option<&Db>,
    (institution_id, transaction_id): (InstitutionId, i64),
    request: &RefundRequest<'_>,
    (key, requested_by): (&str, &str),
    screened: &mut Option<screening::Read>,
    same: &impl Fn(&Refund) -> bool,
) -> Result<Attempt, ApiError> {
    let db = held.unwrap_or(&ctx.db);
    let checked = check(db, institution_id, transaction_id, request).await?;
    let to = checked.preview.address.to_ascii_lowercase();
    let screened = match screened {
        Some(read) if read.address == to => read,
        _ => screened.insert(
            screening::gate(
                ctx,
                db,
                (&checked.quote.network, &to),
                (
                    institution_id,
                    Subject::Refund,
                    &format!("payment {transaction_id}"),
                ),
            )
            .await?,
        ),
    };
    let id = crypto::random_token(shared_types::ids::RefundId::PREFIX)
        .or_internal("generate refund id")?;
    // The books: the merchant's balance (down to its debt limit) and the treasury's must
    // cover it. A refund after settlement is the merchant's debt, never the treasury's loss.
    let asset = ledger::Asset {
        network: &checked.quote.network,
        token: checked.quote.token,
        symbol: &checked.quote.asset,
        decimals: checked.quote.decimals,
    };
    let owners = (
        Scoped::new(institution_id, checked.merchant_id),
        transaction_id,
    );
    let book = match held {
        None => ledger::reserve_refund(ctx, &asset, owners, &id, checked.units).await?,
        Some(object) => {
            // The institution's half, in its object; the treasury's books must take theirs too
            // before anything is asked (they are read again when it is sent).
            let book =
                ledger::reserve_held_refund(object, &asset, owners, &id, checked.units).await?;
            ledger::reserve_held_refund_payout(
                ctx,
                &asset,
                (owners.0, owners.1, None),
                &id,
                (checked.units, 0),
            )
            .await
            .map_err(|e| conflict(format!("cannot refund now: {}", e.public())))?;
            book
        }
    };
    let factor = 10i64.pow(checked.digits);
    let minor = (checked.amount * Decimal::from(factor))
        .trunc()
        .to_string()
        .parse::<i64>()
        .or_internal("amount in minor units")?;
    let units = checked.units.to_string();
    let statement = refunds::insert(&NewRefund {
        id: &id,
        institution_id,
        transaction_id,
        key,
        amount: &checked.preview.amount,
        amount_minor: minor,
        minor_per_major: factor,
        quote: &checked.quote,
        units: &units,
        rate: &checked.preview.rate,
        to_address: &checked.preview.address.to_ascii_lowercase(),
        requested_by,
        now: ctx.now(),
    })
    .or_internal("write refund")?;
    let (mut batch, insert) = with_books(ctx, statement, &book, Scoped::new(institution_id, &id))?;
    let decision = screened.record(institution_id, (Subject::Refund, &id), ctx.now())?;
    batch.push(screenings::insert_for_refund(&decision).or_internal("write refund")?);
    let request_id = sends::new_id().or_internal("a request's id")?;
    let token = checked.quote.token.lower();
    let asked = first_attempt(
        (&id, &request_id, institution_id),
        (&asset, &token),
        (&to, checked.units),
    );
    if held.is_some() {
        batch.push(object_sends::request(&asked, ctx.now()).or_internal("write refund")?);
    }
    let inserted = match batch.run(db).await {
        Ok(results) => results.changed(insert),
        Err(e) if db::ledger::raced(&e) => {
            return Ok(Attempt::Raced);
        }
        // The key was taken meanwhile: the other request's refund answers.
        Err(_) => {
            let existing = refunds::by_key(db, institution_id, key)
                .await
                .or_internal("read refund")?
                .ok_or("refund vanished")
                .or_internal("write refund")?;
            return if same(&existing) {
                Ok(Attempt::Existing(Box::new(RefundView::of(existing)?)))
            } else {
                Err(conflict("this Idempotency-Key was used for another refund"))
            };
        }
    };
    // Not inserted: checked a moment ago, and another refund or a settlement came in between.
    Ok(if inserted {
        Attempt::Stored(
            held.map(|_| {
                Box::new(asked.stored(checked.merchant_id, Some(transaction_id), ctx.now()))
            }),
        )
    } else {
        Attempt::Raced
    })
}
