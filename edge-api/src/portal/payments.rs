//! The payments view, shared by the pages and the JSON API: the institution's transactions with
//! the partner API's filters and index-backed pages, one payment's timeline (its events, their
//! deliveries per endpoint and every attempt), a CSV export of a filtered list streamed page by
//! page, and the overview's counts and gross volume per status and currency.

use futures_util::stream::{self, Stream};
use payrail_evm::{Address, Token, TxHash};
use rust_decimal::Decimal;
use serde::Serialize;
use shared_types::checkout::currency_digits;
use shared_types::time::UnixTime;
use shared_types::{List, Status, Transaction};

use super::csv_cell::cell;
use super::Portal;
use crate::chain;
use crate::ctx::timestamp;
use crate::db::deliveries::{Attempt, Delivery};
use crate::db::watches::TransferKind;
use crate::db::{deliveries, events, refunds, sends, settlements, transactions, watches};
use crate::error::{ApiError, OrInternal};
use crate::money;
use crate::money::refund::RefundView;
use crate::query::{parse_id, TransactionFilter, MAX_LIMIT};

/// One page of the institution's payments, filtered exactly as `GET /v1/transactions` is.
pub async fn list(portal: &Portal<'_>, query: &str) -> Result<List<Transaction>, ApiError> {
    let filter = TransactionFilter::parse(query).map_err(|e| ApiError::invalid_request(e.0))?;
    let rows = transactions::list(portal.money(), portal.institution_id(), &filter)
        .await
        .or_internal("list payments")?;
    Ok(List::from_overfetch(rows, filter.limit as usize, |t| t.id))
}

/// A delivery of one of the payment's events, with its attempts.
#[derive(Debug, Serialize)]
pub struct TimelineDelivery {
    /// The delivery.
    #[serde(flatten)]
    pub delivery: Delivery,
    /// Every attempt, in order.
    pub attempt_log: Vec<Attempt>,
}

/// One moment of a payment's life.
#[derive(Debug, Serialize)]
pub struct TimelineEntry {
    /// When.
    pub at: Option<String>,
    /// What happened (`created`, or an event type).
    pub what: String,
    /// The event, for an event.
    pub event_id: Option<String>,
    /// Its deliveries, for an event.
    pub deliveries: Vec<TimelineDelivery>,
}

/// A deposit address given out for the payment, with the quote it was given under.
#[derive(Debug, Serialize)]
pub struct DepositView {
    /// Network.
    pub network: String,
    /// Asset.
    pub asset: String,
    /// The deposit address.
    pub address: Address,
    /// What it is paid in: `native` or the token contract.
    pub token: Token,
    /// What the customer was asked to send.
    pub crypto_amount: String,
    /// Order currency per unit of the asset.
    pub rate: String,
    /// Where the rate came from.
    pub rate_source: String,
    /// When the quote was taken.
    pub quoted_at: UnixTime,
    /// The newest block at the last check.
    pub head_block: i64,
    /// Why the last check could not read the network's node, if it could not.
    pub node_error: Option<String>,
}

/// A transfer seen on chain to one of the payment's deposit addresses.
#[derive(Debug, Serialize)]
pub struct TransferView {
    /// Transaction hash.
    pub tx_hash: TxHash,
    /// Its log's index.
    pub log_index: i64,
    /// The deposit address it went to.
    pub address: Address,
    /// What moved: `native` or the token contract.
    pub token: Token,
    /// Amount in the quoted asset's units (`null` when it is not the quoted token, or beyond any
    /// real amount).
    pub amount: Option<String>,
    /// That asset (its address's way to pay).
    pub asset: Option<String>,
    /// Amount in the token's base units.
    pub base_units: Option<String>,
    /// Its block.
    pub block_number: i64,
    /// At the network's confirmation depth.
    pub confirmed: bool,
    /// `payment` (the quoted token, counted) or `unexpected_token` (for review: never credited).
    pub kind: TransferKind,
    /// In a block after the checkout's end (credited late).
    pub after_expiry: bool,
    /// A late payment's rate (order currency per unit: the rate when it arrived), once valued.
    pub rate: Option<String>,
    /// Where that rate came from.
    pub rate_source: Option<String>,
}

/// A payment with its timeline.
#[derive(Debug, Serialize)]
pub struct PaymentDetail {
    /// The transaction, as the partner API shows it.
    pub transaction: Transaction,
    /// What happened to it, oldest first.
    pub timeline: Vec<TimelineEntry>,
    /// The deposit addresses given out for it, with their quotes (none for simulated ones).
    pub deposits: Vec<DepositView>,
    /// Every transfer seen to them, in chain order.
    pub chain_transfers: Vec<TransferView>,
    /// Why it is held in custody instead of settling, when it is.
    pub settlement_hold: Option<HoldView>,
    /// Every transaction the treasury signed to settle it, oldest first.
    pub settlement_transactions: Vec<sends::SendView>,
    /// Its refunds on chain, oldest first.
    pub refunds: Vec<RefundView>,
    /// What it received per way to pay (one part for a payment made in one): each is settled
    /// and refunded in its own asset.
    pub parts: Vec<PartView>,
    /// Money that reached its deposit addresses after it was credited and is still there to
    /// return (none before the credit: that money counts toward the payment).
    pub uncredited: Vec<UncreditedView>,
    /// The review of its screening, when a sender held it.
    pub screening: Option<super::screening::ReviewView>,
}

/// Money that reached one of a credited payment's deposit addresses after the credit: owed to
/// nobody, and returnable to the customer.
#[derive(Debug, Serialize)]
pub struct UncreditedView {
    /// The deposit address.
    pub address: Address,
    /// Its network.
    pub network: String,
    /// Its asset.
    pub asset: String,
    /// How much is left there, in the asset's units.
    pub amount: String,
    /// The same in base units.
    pub base_units: String,
}

/// A part of a payment made on chain: the money it received in one way to pay.
#[derive(Debug, Serialize)]
pub struct PartView {
    /// Its number (0: the way to pay the payment is recorded in).
    pub part: i64,
    /// The asset.
    pub asset: String,
    /// The network.
    pub network: String,
    /// Its share of the gross, in the order currency.
    pub gross: Decimal,
    /// What is left to refund of it (refunds not failed taken off).
    pub refundable: Decimal,
    /// Order currency per unit of the asset: what it settles and refunds at.
    pub rate: String,
}

/// Why a payment is not settling.
#[derive(Debug, Serialize)]
pub struct HoldView {
    /// The reason.
    pub reason: String,
    /// Since when.
    pub since: String,
}

fn no_payment() -> ApiError {
    ApiError::not_found("no such payment")
}

/// What is left in the unallocated accounts of a credited payment's deposit addresses: money
/// that came after the credit (one read of the books).
async fn uncredited(
    portal: &Portal<'_>,
    transaction: &Transaction,
    deposits: &[watches::Deposit],
) -> Result<Vec<UncreditedView>, ApiError> {
    use shared_types::RawStatus;
    if !matches!(
        transaction.raw_status,
        RawStatus::Succeeded | RawStatus::Paid | RawStatus::PartiallyRefunded | RawStatus::Refunded
    ) || deposits.is_empty()
    {
        return Ok(Vec::new());
    }
    let accounts: Vec<_> = deposits
        .iter()
        .map(|d| {
            money::ledger::Asset {
                network: &d.network,
                token: d.token,
                symbol: &d.asset,
                decimals: d.decimals,
            }
            .account(shared_types::ledger::Kind::Unallocated, &d.address.lower())
        })
        .collect();
    let book = crate::db::ledger::Book::load(portal.money(), &accounts, &[], &[])
        .await
        .or_internal("read the books")?;
    Ok(deposits
        .iter()
        .zip(&accounts)
        .filter_map(|(d, account)| {
            let left = u128::try_from(book.available(&account.id())).ok()?;
            (left > 0).then(|| UncreditedView {
                address: d.address,
                network: d.network.clone(),
                asset: d.asset.clone(),
                amount: chain::evm::from_units(left, d.decimals)
                    .map_or_else(|| left.to_string(), |a| a.normalize().to_string()),
                base_units: left.to_string(),
            })
        })
        .collect())
}

/// A payment id from a path segment.
pub fn payment_id(text: &str) -> Result<i64, ApiError> {
    parse_id(text).ok_or_else(no_payment)
}

/// One payment and its timeline.
pub async fn detail(portal: &Portal<'_>, id: i64) -> Result<PaymentDetail, ApiError> {
    let institution = portal.institution_id();
    let transaction = transactions::get(portal.money(), institution, id)
        .await
        .or_internal("read payment")?
        .ok_or_else(no_payment)?;
    let events = events::of_transaction(portal.money(), institution, id)
        .await
        .or_internal("read events")?;
    let mut sent = deliveries::of_transaction(portal.money(), institution, id)
        .await
        .or_internal("read deliveries")?;
    let mut timeline = vec![TimelineEntry {
        at: transaction.created_at.clone(),
        what: "created".to_owned(),
        event_id: None,
        deliveries: Vec::new(),
    }];
    for event in events {
        let (mine, rest): (Vec<_>, Vec<_>) = sent.into_iter().partition(|d| d.event_id == event.id);
        sent = rest;
        let mut with_attempts = Vec::with_capacity(mine.len());
        for delivery in mine {
            let attempt_log = deliveries::attempts(portal.money(), &delivery.id)
                .await
                .or_internal("read attempts")?;
            with_attempts.push(TimelineDelivery {
                delivery,
                attempt_log,
            });
        }
        timeline.push(TimelineEntry {
            at: Some(timestamp(event.created)?),
            what: event.kind,
            event_id: Some(event.id),
            deliveries: with_attempts,
        });
    }
    let found = watches::deposits_of_transaction(portal.money(), portal.institution_id(), id)
        .await
        .or_internal("read deposits")?;
    let chain_transfers =
        watches::transfers_of_transaction(portal.money(), portal.institution_id(), id)
            .await
            .or_internal("read transfers")?
            .into_iter()
            .map(|t| {
                let deposit = found.iter().find(|d| d.address == t.address);
                let amount = deposit
                    .filter(|d| t.kind == TransferKind::Payment && d.token == t.token)
                    .zip(t.amount.as_deref().and_then(|a| a.parse::<u128>().ok()))
                    .and_then(|(d, units)| chain::evm::from_units(units, d.decimals))
                    .map(|a| a.to_string());
                TransferView {
                    asset: deposit.map(|d| d.asset.clone()),
                    tx_hash: t.tx_hash,
                    log_index: t.log_index,
                    address: t.address,
                    token: t.token,
                    amount,
                    base_units: t.amount,
                    block_number: t.block_number,
                    confirmed: t.confirmed,
                    kind: t.kind,
                    after_expiry: t.after_expiry,
                    rate: t.rate.map(|r| r.normalize().to_string()),
                    rate_source: t.rate_source,
                }
            })
            .collect();
    let uncredited = uncredited(portal, &transaction, &found).await?;
    let deposits = found
        .into_iter()
        .map(|d| {
            Ok(DepositView {
                quoted_at: d.quoted_at,
                network: d.network,
                asset: d.asset,
                address: d.address,
                token: d.token,
                crypto_amount: d.crypto_amount,
                rate: d.rate,
                rate_source: d.rate_source,
                head_block: d.head_block,
                node_error: d.node_error,
            })
        })
        .collect::<Result<_, ApiError>>()?;
    let settlement_hold = settlements::hold_of(portal.money(), portal.institution_id(), id)
        .await
        .or_internal("read settlement hold")?
        .map(|h| {
            Ok::<_, ApiError>(HoldView {
                reason: h.reason,
                since: timestamp(h.since)?,
            })
        })
        .transpose()?;
    // The treasury's transactions for the payment: for an institution held in its object, its
    // shares of its settlements there, beside the treasury's transactions of each.
    let settlement_transactions = if portal.is_held() {
        held_settlement_transactions(portal, id).await?
    } else {
        sends::of_settled_payment(portal.db(), portal.institution_id(), id)
            .await
            .or_internal("read settlement transactions")?
    };
    let refunds: Vec<RefundView> =
        refunds::of_transaction(portal.money(), portal.institution_id(), id)
            .await
            .or_internal("read refunds")?
            .into_iter()
            .map(RefundView::of)
            .collect::<Result<_, ApiError>>()?;
    let parts = refunds::quotes_of(portal.money(), portal.institution_id(), id)
        .await
        .or_internal("read the payment's parts")?
        .into_iter()
        .map(|q| PartView {
            refundable: shared_types::refundable(
                q.gross,
                refunds
                    .iter()
                    .filter(|r| r.part == q.part && !r.extra)
                    .map(|r| (r.amount, r.state)),
            ),
            rate: q
                .expected
                .checked_div(q.crypto_amount)
                .map_or_else(String::new, |r| r.round_dp(12).normalize().to_string()),
            part: q.part,
            asset: q.asset,
            network: q.network,
            gross: q.gross,
        })
        .collect();
    let screening = super::screening::of_payment(portal, id).await?;
    Ok(PaymentDetail {
        transaction,
        timeline,
        deposits,
        chain_transfers,
        settlement_hold,
        settlement_transactions,
        refunds,
        parts,
        uncredited,
        screening,
    })
}

/// Count and gross volume of one status and currency over a period.
#[derive(Debug, Serialize)]
pub struct VolumeLine {
    /// Normalized status.
    pub status: Status,
    /// Order currency.
    pub currency: Option<String>,
    /// Transactions.
    pub count: i64,
    /// Sum of `amount.gross`, decimal text in the currency's digits.
    pub gross: String,
}

/// The overview of one period.
#[derive(Debug, Serialize)]
pub struct Period {
    /// Days back from now.
    pub days: i64,
    /// One line per status and currency seen.
    pub lines: Vec<VolumeLine>,
}

/// The overview: the last 7 and 30 days.
#[derive(Debug, Serialize)]
pub struct Overview {
    /// Always `overview`.
    pub object: &'static str,
    /// 7 days, then 30.
    pub periods: Vec<Period>,
}

/// Counts and gross volume per status and currency for the last 7 and 30 days.
pub async fn overview(portal: &Portal<'_>) -> Result<Overview, ApiError> {
    let mut periods = Vec::new();
    for days in [7, 30] {
        let since = timestamp(portal.now - days * 86_400)?;
        let mut lines: Vec<VolumeLine> =
            transactions::volume(portal.money(), portal.institution_id(), &since)
                .await
                .or_internal("read volume")?
                .into_iter()
                .map(|v| {
                    let digits = v.currency.as_deref().and_then(currency_digits).unwrap_or(2);
                    VolumeLine {
                        status: v.status,
                        gross: rust_decimal::Decimal::new(v.gross_minor, digits).to_string(),
                        currency: v.currency,
                        count: v.count,
                    }
                })
                .collect();
        lines.sort_by(|a, b| {
            (a.status.as_str(), &a.currency).cmp(&(b.status.as_str(), &b.currency))
        });
        periods.push(Period { days, lines });
    }
    Ok(Overview {
        object: "overview",
        periods,
    })
}

/// The CSV header: every field of a transaction, flattened.
const CSV_HEADER: &[&str] = &[
    "id",
    "created_at",
    "paid_at",
    "merchant_id",
    "status",
    "raw_status",
    "amount_status",
    "currency",
    "amount_expected",
    "amount_gross",
    "psp_fee",
    "gas_fee",
    "bridge_fee",
    "amount_net",
    "asset",
    "network_payment",
    "network_settlement",
    "tx_hash_source",
    "tx_hash_bridge",
    "tx_hash_settlement",
    "external_reference",
    "customer_email",
];

fn csv_rows(rows: &[Transaction], header: bool) -> Result<Vec<u8>, String> {
    let mut out = csv::Writer::from_writer(Vec::new());
    if header {
        out.write_record(CSV_HEADER).map_err(|e| e.to_string())?;
    }
    let text = |v: &Option<String>| v.as_deref().map(cell).unwrap_or_default();
    let decimal = |v: &Option<rust_decimal::Decimal>| v.map(|d| d.to_string()).unwrap_or_default();
    for t in rows {
        out.write_record([
            t.id.to_string(),
            text(&t.created_at),
            text(&t.paid_at),
            t.merchant_id.to_string(),
            t.status.as_str().to_owned(),
            t.raw_status.as_str().to_owned(),
            t.amount_status
                .map(|s| s.as_str().to_owned())
                .unwrap_or_default(),
            text(&t.currency),
            decimal(&t.amount.expected),
            decimal(&t.amount.gross),
            decimal(&t.amount.psp_fee),
            decimal(&t.amount.gas_fee),
            decimal(&t.amount.bridge_fee),
            decimal(&t.amount.net),
            text(&t.asset),
            text(&t.networks.payment),
            text(&t.networks.settlement),
            text(&t.tx_hashes.source),
            text(&t.tx_hashes.bridge),
            text(&t.tx_hashes.settlement),
            text(&t.external_reference),
            text(&t.customer_email),
        ])
        .map_err(|e| e.to_string())?;
    }
    out.into_inner().map_err(|e| e.to_string())
}

/// Every payment matching the filters (`limit` and `starting_after` are ignored), as CSV, read
/// and written one index-backed page of 100 at a time while the response streams.
pub fn export(
    portal: &Portal<'_>,
    query: &str,
) -> Result<impl Stream<Item = Result<Vec<u8>, worker::Error>> + 'static, ApiError> {
    let mut filter = TransactionFilter::parse(query).map_err(|e| ApiError::invalid_request(e.0))?;
    filter.limit = MAX_LIMIT;
    filter.starting_after = None;
    let database = portal.ctx.database_binder();
    let institution = portal.institution_id();
    // State: the filter for the next page, whether the header is written, and whether the end
    // was reached.
    Ok(stream::unfold(
        (Some(filter), true),
        move |(next, first)| {
            let db = database();
            async move {
                let filter = next?;
                let page = async {
                    let db = db?;
                    let mut rows = transactions::list(&db, institution, &filter)
                        .await
                        .map_err(|e| worker::Error::RustError(e.to_string()))?;
                    let more = rows.len() > filter.limit as usize;
                    rows.truncate(filter.limit as usize);
                    let bytes = csv_rows(&rows, first).map_err(worker::Error::RustError)?;
                    let next = match (more, rows.last()) {
                        (true, Some(last)) => Some(TransactionFilter {
                            starting_after: Some(last.id),
                            ..filter.clone()
                        }),
                        _ => None,
                    };
                    Ok::<_, worker::Error>((bytes, next))
                };
                match page.await {
                    Ok((bytes, next)) => Some((Ok(bytes), (next, false))),
                    // The error ends the stream; the client sees a cut-off download.
                    Err(err) => Some((Err(err), (None, false))),
                }
            }
        },
    ))
}

/// The treasury's transactions that settle payment `id` of an institution held in its object:
/// the payment's share of each settlement read there, each settlement's transactions read from
/// the treasury's books.
async fn held_settlement_transactions(
    portal: &Portal<'_>,
    id: i64,
) -> Result<Vec<sends::SendView>, ApiError> {
    let items = settlements::held_items_of(portal.money(), portal.institution_id(), id)
        .await
        .or_internal("read settlement items")?;
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = items.iter().map(|i| i.settlement_id.as_str()).collect();
    let sent = sends::of_held_settlements(portal.db(), &ids)
        .await
        .or_internal("read settlement transactions")?;
    sent.into_iter()
        .filter_map(|c| {
            let item = items.iter().find(|i| i.settlement_id == c.settlement_id)?;
            Some((c, item))
        })
        .map(|(c, item)| {
            Ok(sends::SendView {
                tx_hash: c.tx_hash,
                state: c.state,
                nonce: c.nonce,
                gas_price: c.gas_price,
                gas_limit: c.gas_limit,
                gas_used: c.gas_used,
                block_number: c.block_number,
                error: c.error,
                rate_source: c.rate_source,
                gas_fee: Some(item.gas_fee.clone()),
                net: item.net.clone(),
                net_base_units: item.units.clone(),
                wallet: payrail_evm::Address::parse(&item.wallet)
                    .or_internal("read a settlement's wallet")?,
                created_at: c.created_at,
                network: c.network,
                leg: None,
            })
        })
        .collect()
}
