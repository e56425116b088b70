//! The screening review queue and the audit export, shared by the portal's page and its JSON
//! API: every payment and every merchant's top-up its screening held (undecided first), with
//! the evidence (each sender's decision: the list that names it, the oracle and block read);
//! an admin's release or block,
//! with a required note, made once; and every screening decision and review decision of a
//! date range as CSV, for an auditor. Viewers see the queue and export; only admins decide.
//! The rules are `money::screening`'s (docs/SCREENING.md).

use serde::Serialize;
use shared_types::ids::Scoped;
use shared_types::Transaction;

use super::csv_cell::cell;
use super::Portal;
use crate::ctx::timestamp;
use crate::db::screenings::{self, HeldFunds, Review, Screening};
use crate::db::topups::{self, TopupReview};
use crate::error::{ApiError, OrInternal};
use crate::money::screening;
use crate::payments::Decision;

/// Most reviews the queue shows.
pub const QUEUE_MAX: i64 = 200;
/// Most rows one export holds (a longer range is refused: narrow it).
pub const EXPORT_MAX: i64 = 20_000;
/// Longest range one export covers, in days.
pub const EXPORT_DAYS: i64 = 366;

/// A held payment's review, as the queue shows it.
#[derive(Debug, Serialize)]
pub struct ReviewView {
    /// The payment.
    pub transaction_id: i64,
    /// Its merchant.
    pub merchant_id: i64,
    /// Its gross and currency.
    pub amount_gross: Option<String>,
    /// The order's currency.
    pub currency: Option<String>,
    /// Why it is held.
    pub reason: String,
    /// What is held at each of its deposit addresses.
    pub held: Vec<HeldFunds>,
    /// ISO 8601.
    pub opened_at: String,
    /// `released` or `blocked`, once decided.
    pub decision: Option<String>,
    /// The admin's note.
    pub note: Option<String>,
    /// Who decided.
    pub decided_by: Option<String>,
    /// ISO 8601.
    pub decided_at: Option<String>,
    /// The screening of each of its senders.
    pub evidence: Vec<Screening>,
}

/// The institution's reviews: undecided first (oldest first), then the decided (newest
/// first), at most [`QUEUE_MAX`], each with its evidence (two statements in all).
pub async fn queue(portal: &Portal<'_>) -> Result<Vec<ReviewView>, ApiError> {
    let institution = portal.institution_id();
    let reviews = screenings::reviews(portal.money(), institution, QUEUE_MAX)
        .await
        .or_internal("read the reviews")?;
    let evidence = screenings::of_reviews(portal.money(), institution)
        .await
        .or_internal("read the screenings")?;
    reviews
        .into_iter()
        .map(|r| view(r, &evidence))
        .collect::<Result<_, _>>()
}

/// The review of payment `id`, with its evidence, when its screening ever held it.
pub async fn of_payment(portal: &Portal<'_>, id: i64) -> Result<Option<ReviewView>, ApiError> {
    let payment = Scoped::new(portal.institution_id(), id);
    let Some(review) = screenings::review(portal.money(), payment)
        .await
        .or_internal("read the review")?
    else {
        return Ok(None);
    };
    let evidence = screenings::of_payment(portal.money(), payment)
        .await
        .or_internal("read the screenings")?;
    view(review, &evidence).map(Some)
}

fn view(r: Review, evidence: &[Screening]) -> Result<ReviewView, ApiError> {
    let id = r.transaction_id.to_string();
    Ok(ReviewView {
        transaction_id: r.transaction_id,
        merchant_id: r.merchant_id,
        amount_gross: r.amount_gross,
        currency: r.currency,
        reason: r.reason,
        held: serde_json::from_str(&r.held).or_internal("read the money held")?,
        opened_at: timestamp(r.opened_at)?,
        decision: r.decision,
        note: r.note,
        decided_by: r.decided_by,
        decided_at: r.decided_at.map(timestamp).transpose()?,
        evidence: evidence
            .iter()
            .filter(|s| s.subject_id == id)
            .cloned()
            .collect(),
    })
}

/// A merchant's top-up held by its screening, as the queue shows it.
#[derive(Debug, Serialize)]
pub struct TopupReviewView {
    /// The review's id (`tpr_…`).
    pub id: String,
    /// The merchant it tops up.
    pub merchant_id: i64,
    /// The network.
    pub network: String,
    /// The transfer's transaction.
    pub tx_hash: String,
    /// The merchant's top-up address it reached.
    pub address: String,
    /// The asset.
    pub asset: String,
    /// The amount held, in the asset.
    pub amount: String,
    /// The same in base units.
    pub base_units: String,
    /// Who sent it; `null` when the chain does not name the sender.
    pub sender: Option<String>,
    /// Why it is held.
    pub reason: String,
    /// ISO 8601.
    pub opened_at: String,
    /// `released` or `blocked`, once decided.
    pub decision: Option<String>,
    /// The admin's note.
    pub note: Option<String>,
    /// Who decided.
    pub decided_by: Option<String>,
    /// ISO 8601.
    pub decided_at: Option<String>,
    /// Its sender's screening.
    pub evidence: Vec<Screening>,
}

/// The institution's held top-ups: undecided first (oldest first), then the decided (newest
/// first), at most [`QUEUE_MAX`], each with its evidence (two statements in all).
pub async fn topup_queue(portal: &Portal<'_>) -> Result<Vec<TopupReviewView>, ApiError> {
    let institution = portal.institution_id();
    let reviews = topups::reviews_of(portal.money(), institution, QUEUE_MAX)
        .await
        .or_internal("read the top-up reviews")?;
    let evidence = screenings::of_topup_reviews(portal.money(), institution)
        .await
        .or_internal("read the screenings")?;
    reviews
        .into_iter()
        .map(|r| topup_view(r, &evidence))
        .collect::<Result<_, _>>()
}

fn topup_view(r: TopupReview, evidence: &[Screening]) -> Result<TopupReviewView, ApiError> {
    let transfer = format!("{}:{}", r.tx_hash, r.log_index);
    let units = r.units.parse::<u128>().or_internal("read the units held")?;
    Ok(TopupReviewView {
        amount: crate::chain::evm::from_units(units, r.decimals)
            .ok_or("out of range")
            .or_internal("read the units held")?
            .to_string(),
        base_units: r.units,
        evidence: evidence
            .iter()
            .filter(|s| s.subject_id == transfer && s.network == r.network)
            .cloned()
            .collect(),
        id: r.id,
        merchant_id: r.merchant_id,
        network: r.network,
        tx_hash: r.tx_hash,
        address: r.address,
        asset: r.asset,
        sender: r.sender,
        reason: r.reason,
        opened_at: timestamp(r.opened_at)?,
        decision: r.decision,
        note: r.note,
        decided_by: r.decided_by,
        decided_at: r.decided_at.map(timestamp).transpose()?,
    })
}

/// Releases (`release`) or blocks the held top-up of review `id` with the admin's `note`: the
/// review as decided. Admins only.
pub async fn decide_topup(
    portal: &Portal<'_>,
    id: &str,
    release: bool,
    note: &str,
) -> Result<TopupReviewView, ApiError> {
    portal.require_admin()?;
    let institution = portal.institution_id();
    let decided = screening::decide_topup(
        portal.ctx,
        portal.held(),
        Scoped::new(institution, id),
        &Decision {
            release,
            note,
            by: &portal.session.email,
        },
    )
    .await?;
    let evidence = screenings::of_topup_reviews(portal.money(), institution)
        .await
        .or_internal("read the screenings")?;
    topup_view(decided, &evidence)
}

/// Releases (`release`) or blocks held payment `id` with the admin's `note`: the payment as it
/// now stands. Admins only.
pub async fn decide(
    portal: &Portal<'_>,
    id: i64,
    release: bool,
    note: &str,
) -> Result<Transaction, ApiError> {
    portal.require_admin()?;
    screening::decide(
        portal.ctx,
        portal.held(),
        Scoped::new(portal.institution_id(), id),
        &Decision {
            release,
            note,
            by: &portal.session.email,
        },
    )
    .await
}

/// The export's columns.
const CSV_HEADER: [&str; 14] = [
    "time",
    "record",
    "subject",
    "subject_id",
    "network",
    "address",
    "result",
    "listed_by",
    "oracle",
    "oracle_block",
    "list_version",
    "decision",
    "note",
    "decided_by",
];

/// Every screening decision and review decision of the institution from `from` to `to`
/// (inclusive dates, `YYYY-MM-DD`, at most [`EXPORT_DAYS`] days), oldest first, as CSV: its
/// settlement wallets' (D1's) and its money's (where its money is). Refused (400) when a date
/// is not one or the range holds more than [`EXPORT_MAX`] rows.
pub async fn export(portal: &Portal<'_>, query: &str) -> Result<Vec<u8>, ApiError> {
    let (from, to) = range(query)?;
    let institution = portal.institution_id();
    let mut rows = screenings::of_institution(
        portal.money(),
        institution,
        (from, to),
        false,
        EXPORT_MAX + 1,
    )
    .await
    .or_internal("read the screenings")?;
    rows.extend(
        screenings::of_institution(portal.db(), institution, (from, to), true, EXPORT_MAX + 1)
            .await
            .or_internal("read the screenings")?,
    );
    let decided = screenings::decided_between(portal.money(), institution, (from, to))
        .await
        .or_internal("read the decisions")?;
    let topups_decided = topups::reviews_decided_between(portal.money(), institution, (from, to))
        .await
        .or_internal("read the decisions")?;
    let total = rows.len() + decided.len() + topups_decided.len();
    if i64::try_from(total).unwrap_or(i64::MAX) > EXPORT_MAX {
        return Err(ApiError::invalid_request(format!(
            "the range holds more than {EXPORT_MAX} records: narrow it"
        )));
    }
    rows.sort_by(|a, b| (a.screened_at, &a.id).cmp(&(b.screened_at, &b.id)));
    // Screenings and decisions, merged by time.
    let mut lines: Vec<(i64, Vec<String>)> = Vec::with_capacity(total);
    for s in rows {
        lines.push((
            s.screened_at,
            vec![
                timestamp(s.screened_at)?,
                "screening".to_owned(),
                s.subject,
                cell(&s.subject_id),
                s.network,
                s.address,
                s.result,
                s.listed_by.as_deref().map(cell).unwrap_or_default(),
                s.oracle.unwrap_or_default(),
                s.oracle_block.map(|b| b.to_string()).unwrap_or_default(),
                s.list_version.to_string(),
                String::new(),
                String::new(),
                String::new(),
            ],
        ));
    }
    for r in decided {
        let at = r.decided_at.unwrap_or(r.opened_at);
        lines.push((
            at,
            vec![
                timestamp(at)?,
                "decision".to_owned(),
                "payment".to_owned(),
                r.transaction_id.to_string(),
                String::new(),
                String::new(),
                String::new(),
                cell(&r.reason),
                String::new(),
                String::new(),
                String::new(),
                r.decision.unwrap_or_default(),
                r.note.as_deref().map(cell).unwrap_or_default(),
                r.decided_by.as_deref().map(cell).unwrap_or_default(),
            ],
        ));
    }
    for r in topups_decided {
        let at = r.decided_at.unwrap_or(r.opened_at);
        lines.push((
            at,
            vec![
                timestamp(at)?,
                "decision".to_owned(),
                "topup".to_owned(),
                format!("{}:{}", r.tx_hash, r.log_index),
                r.network,
                r.sender.unwrap_or_default(),
                String::new(),
                cell(&r.reason),
                String::new(),
                String::new(),
                String::new(),
                r.decision.unwrap_or_default(),
                r.note.as_deref().map(cell).unwrap_or_default(),
                r.decided_by.as_deref().map(cell).unwrap_or_default(),
            ],
        ));
    }
    lines.sort_by_key(|(at, _)| *at);
    let mut out = csv::Writer::from_writer(Vec::new());
    out.write_record(CSV_HEADER)
        .or_internal("write the export")?;
    for (_, line) in lines {
        out.write_record(line).or_internal("write the export")?;
    }
    out.into_inner().or_internal("write the export")
}

/// The export's range from its query (`from` and `to`, inclusive dates): Unix seconds from the
/// first day's start to the day after the last's.
fn range(query: &str) -> Result<(i64, i64), ApiError> {
    let (mut from, mut to) = (None, None);
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        let day = || {
            (value.len() == 10)
                .then(|| shared_types::time::parse_filter_bound(&value))
                .flatten()
                .and_then(|bound| shared_types::time::parse_unix(&bound))
                .ok_or_else(|| {
                    ApiError::invalid_request(format!("{name} must be a date, YYYY-MM-DD"))
                })
        };
        match name.as_ref() {
            "from" if from.is_none() => from = Some(day()?),
            "to" if to.is_none() => to = Some(day()?),
            _ => {
                return Err(ApiError::invalid_request(format!(
                    "unknown or repeated parameter {name:?}: the export takes from and to \
                     (YYYY-MM-DD)"
                )))
            }
        }
    }
    let (Some(from), Some(to)) = (from, to) else {
        return Err(ApiError::invalid_request(
            "from and to are required (YYYY-MM-DD, inclusive)",
        ));
    };
    let end = to + 86_400;
    if end <= from || end - from > EXPORT_DAYS * 86_400 {
        return Err(ApiError::invalid_request(format!(
            "from must be on or before to, and the range at most {EXPORT_DAYS} days"
        )));
    }
    Ok((from, end))
}
