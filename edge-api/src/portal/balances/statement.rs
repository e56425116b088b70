//! A merchant's statement in one asset on one network, shared by the pages and the JSON API:
//! the transfers touching its account, newest first, in words, with the posted balance just
//! after each (walked back from the newest line), a page at a time; and the whole statement as
//! CSV, streamed 100 lines at a time, with its file name.

use std::str::FromStr;

use futures_util::stream::{self, Stream};
use serde::Serialize;
use shared_types::ledger::{Code, Kind, Ledger};
use shared_types::List;

use super::{asset_amount, empty, find, signed, view, Asset, Balance};
use crate::ctx::timestamp;
use crate::db::ledger::{self, TransferRow};
use crate::error::{ApiError, OrInternal};
use crate::portal::{csv_cell, merchants, Portal};
use crate::query::{StatementQuery, MAX_LIMIT};

/// What a statement line records, in words. Pure.
pub fn describe(code: &str) -> &'static str {
    match Code::parse(code) {
        Some(Code::Credit) => "Payment credited",
        Some(Code::Fee) => "PSP fee",
        Some(Code::NetworkFee) => "Network fee",
        Some(Code::Settlement) => "Settlement",
        Some(Code::Refund) => "Refund",
        Some(Code::Topup) => "Top-up",
        Some(Code::Receipt) => "Deposit received",
        Some(Code::Gas) => "Gas",
        Some(Code::Sweep) => "Sweep to the treasury",
        Some(Code::SweepGas) => "Gas of a sweep",
        Some(Code::GasFunding) => "Gas sent for a sweep",
        Some(Code::Funding) => "Funding",
        Some(Code::Move) => "Carried into the institution's own store",
        Some(Code::FloatMove) => "Treasury float moved between networks",
        None => "Other",
    }
}

/// Where a transfer of `phase` stands: `posted` (moved), `pending` (reserved, not yet moved) or
/// `voided` (released). Pure.
pub fn state_of(phase: &str) -> &'static str {
    match phase {
        "pending" => "pending",
        "void" => "voided",
        _ => "posted",
    }
}

/// One transfer touching a merchant's account, as its statement shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    /// Posting order (the cursor).
    pub seq: i64,
    /// When it was posted.
    pub created_at: String,
    /// What it records, as stored: `credit`, `fee`, `network_fee`, `settlement`, `refund`,
    /// `topup`.
    pub code: String,
    /// The same in words.
    pub description: &'static str,
    /// `single`, `pending`, `post` or `void`.
    pub phase: String,
    /// `posted`, `pending` (reserved: counts against the available balance, not yet moved) or
    /// `voided` (what the pending transfer reserved, released).
    pub state: &'static str,
    /// The payment it belongs to.
    pub transaction_id: Option<i64>,
    /// The settlement transaction, refund or payment it belongs to.
    pub reference: String,
    /// `debit` (takes from the merchant's balance) or `credit` (adds to it).
    pub side: &'static str,
    /// The amount of the asset.
    pub amount: String,
    /// The same in base units.
    pub base_units: String,
    /// The merchant's posted balance just after it (pending and voided transfers leave it as it
    /// was), `null` where it cannot be computed.
    pub balance_after: Option<String>,
    /// The same in base units.
    pub balance_after_base_units: Option<String>,
}

/// What a transfer moved on `account`'s posted balance (on the side `kind` counts as plus):
/// `None` when its amount cannot be read. Pure.
fn posted_effect(row: &TransferRow, account: &str, kind: Kind) -> Option<i128> {
    let amount = signed(u128::from_str(&row.amount).ok()?);
    if !matches!(row.phase.as_str(), "single" | "post") {
        return Some(0);
    }
    let credited = row.credit_account == account;
    Some(if credited != kind.debit_normal() {
        amount
    } else {
        -amount
    })
}

/// Each row's running balance, newest first, from the balance just after the newest (`top`):
/// each older one's is the newer one's less what the newer one posted. Pure.
pub fn running(
    rows: &[TransferRow],
    account: &str,
    kind: Kind,
    top: Option<i128>,
) -> Vec<Option<i128>> {
    let mut out = Vec::with_capacity(rows.len());
    let mut current = top;
    for row in rows {
        out.push(current);
        current = current
            .zip(posted_effect(row, account, kind))
            .map(|(balance, effect)| balance - effect);
    }
    out
}

/// The statement lines of `rows` of `account` in `decimals`, with their running balances.
fn lines(
    rows: &[TransferRow],
    account: &str,
    decimals: u32,
    top: Option<i128>,
) -> Result<Vec<Line>, ApiError> {
    let balances = running(rows, account, Kind::Merchant, top);
    rows.iter()
        .zip(balances)
        .map(|(row, after)| {
            let units = u128::from_str(&row.amount).or_internal("read transfer amount")?;
            Ok(Line {
                seq: row.seq,
                created_at: timestamp(row.created_at)?,
                code: row.code.clone(),
                description: describe(&row.code),
                phase: row.phase.clone(),
                state: state_of(&row.phase),
                transaction_id: row.transaction_id,
                reference: row.reference.clone(),
                side: if row.credit_account == account {
                    "credit"
                } else {
                    "debit"
                },
                amount: asset_amount(signed(units), decimals),
                base_units: row.amount.clone(),
                balance_after: after.map(|b| asset_amount(b, decimals)),
                balance_after_base_units: after.map(|b| b.to_string()),
            })
        })
        .collect()
}

/// The id of merchant `merchant_id`'s account in `asset`.
fn account_id(asset: &Asset, merchant_id: i64) -> String {
    Ledger::new(&asset.network, &asset.token).account(Kind::Merchant, &merchant_id.to_string())
}

/// A page of a merchant's statement in `token` on `network`, newest first: `limit` (1 to 100,
/// default 25) and `starting_after` (a line's `seq`: the lines posted before it).
pub async fn statement(
    portal: &Portal<'_>,
    merchant_id: i64,
    (network, token): (&str, &str),
    query: &str,
) -> Result<(Balance, List<Line>), ApiError> {
    let q = StatementQuery::parse(query).map_err(|e| ApiError::invalid_request(e.0))?;
    merchants::row(portal, merchant_id).await?;
    let (asset, account) = find(portal, merchant_id, network, token).await?;
    let Some(account) = account else {
        return Ok((
            empty(&asset),
            List::from_overfetch(Vec::new(), 1, |l: &Line| l.seq),
        ));
    };
    let id = account_id(&asset, merchant_id);
    let rows = ledger::statement_page(
        portal.money(),
        &id,
        q.starting_after,
        i64::from(q.limit) + 1,
    )
    .await
    .or_internal("read statement")?;
    let top = match rows.first() {
        Some(newest) => ledger::balance_after(portal.money(), &id, newest.seq)
            .await
            .or_internal("read running balance")?,
        None => None,
    };
    let page = List::from_overfetch(
        lines(&rows, &id, asset.decimals, top)?,
        q.limit as usize,
        |l| l.seq,
    );
    Ok((view(&account)?, page))
}

/// The CSV header of a statement.
const CSV_HEADER: &[&str] = &[
    "seq",
    "created_at",
    "code",
    "description",
    "state",
    "transaction_id",
    "reference",
    "asset",
    "network",
    "debit",
    "credit",
    "balance",
    "debit_base_units",
    "credit_base_units",
    "balance_base_units",
];

fn csv_rows(lines: &[Line], asset: &Asset, header: bool) -> Result<Vec<u8>, String> {
    let mut out = csv::Writer::from_writer(Vec::new());
    if header {
        out.write_record(CSV_HEADER).map_err(|e| e.to_string())?;
    }
    for l in lines {
        let (debit, credit) = if l.side == "debit" {
            (l.amount.as_str(), "")
        } else {
            ("", l.amount.as_str())
        };
        let (debit_units, credit_units) = if l.side == "debit" {
            (l.base_units.as_str(), "")
        } else {
            ("", l.base_units.as_str())
        };
        out.write_record([
            l.seq.to_string().as_str(),
            &l.created_at,
            &l.code,
            l.description,
            l.state,
            &l.transaction_id.map(|t| t.to_string()).unwrap_or_default(),
            // Written by Payrail, but a cell that starts like a formula is never let through.
            &csv_cell::cell(&l.reference),
            &csv_cell::cell(&asset.asset),
            &csv_cell::cell(&asset.network),
            debit,
            credit,
            l.balance_after.as_deref().unwrap_or_default(),
            debit_units,
            credit_units,
            l.balance_after_base_units.as_deref().unwrap_or_default(),
        ])
        .map_err(|e| e.to_string())?;
    }
    out.into_inner().map_err(|e| e.to_string())
}

/// The file name of a statement's export.
pub fn export_name(merchant_id: i64, asset: &Asset) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect()
    };
    format!(
        "statement-{merchant_id}-{}-{}.csv",
        clean(&asset.network),
        clean(&asset.asset)
    )
}

/// A merchant's whole statement in `token` on `network` as CSV, newest first with the running
/// balance, read and written 100 lines at a time while the response streams; and its asset.
pub async fn export(
    portal: &Portal<'_>,
    merchant_id: i64,
    (network, token): (&str, &str),
) -> Result<
    (
        Asset,
        impl Stream<Item = Result<Vec<u8>, worker::Error>> + 'static,
    ),
    ApiError,
> {
    merchants::row(portal, merchant_id).await?;
    let (asset, stored) = find(portal, merchant_id, network, token).await?;
    let id = account_id(&asset, merchant_id);
    let database = portal.ctx.database_binder();
    let limit = i64::from(MAX_LIMIT);
    let of = asset.clone();
    // State: the cursor of the next page (`None` once done, `Some(None)` for the first), the
    // running balance just after the last line written, and whether the header is written.
    let start: Option<Option<i64>> = stored.is_some().then_some(None);
    let first = (start, None::<i128>, true);
    let body = stream::unfold(first, move |(next, running, header)| {
        let db = database();
        let (id, asset) = (id.clone(), of.clone());
        async move {
            let Some(before) = next else {
                // An account with no transfer (or none at all) is the header alone.
                return header.then(|| {
                    let bytes = csv_rows(&[], &asset, true).map_err(worker::Error::RustError);
                    (bytes, (None, running, false))
                });
            };
            let page = async {
                let db = db?;
                let failed = |e: crate::db::DbError| worker::Error::RustError(e.to_string());
                let mut rows = ledger::statement_page(&db, &id, before, limit + 1)
                    .await
                    .map_err(failed)?;
                let more = rows.len() > limit as usize;
                rows.truncate(limit as usize);
                let top = match (before, rows.first()) {
                    (None, Some(newest)) => ledger::balance_after(&db, &id, newest.seq)
                        .await
                        .map_err(failed)?,
                    (None, None) => None,
                    (Some(_), _) => running,
                };
                let balances = running_balances(&rows, &id, top);
                let lines = lines(&rows, &id, asset.decimals, top).map_err(|e| {
                    e.log();
                    worker::Error::RustError(e.description)
                })?;
                let bytes = csv_rows(&lines, &asset, header).map_err(worker::Error::RustError)?;
                let next = match (more, rows.last()) {
                    (true, Some(last)) => Some(Some(last.seq)),
                    _ => None,
                };
                Ok::<_, worker::Error>((bytes, next, balances))
            };
            match page.await {
                Ok((bytes, next, after)) => Some((Ok(bytes), (next, after, false))),
                // The error ends the stream; the client sees a cut-off download.
                Err(err) => Some((Err(err), (None, None, false))),
            }
        }
    });
    Ok((asset, body))
}

/// The running balance just after the oldest of `rows` is posted less what it posted: the
/// balance just after the line before it, where the next page starts. Pure.
fn running_balances(rows: &[TransferRow], account: &str, top: Option<i128>) -> Option<i128> {
    let last = rows.last()?;
    let before_last = running(rows, account, Kind::Merchant, top).pop()??;
    posted_effect(last, account, Kind::Merchant).map(|effect| before_last - effect)
}

#[cfg(test)]
mod tests {
    use super::super::tests::usdc;
    use super::*;

    #[test]
    fn every_code_has_words() {
        for code in Code::ALL {
            assert_ne!(describe(code.as_str()), "Other", "{code:?}");
        }
        assert_eq!(describe("credit"), "Payment credited");
        assert_eq!(describe("fee"), "PSP fee");
        assert_eq!(describe("network_fee"), "Network fee");
        assert_eq!(describe("nonsense"), "Other");
        assert_eq!(
            ["single", "pending", "post", "void"].map(state_of),
            ["posted", "pending", "posted", "voided"]
        );
    }

    fn row(seq: i64, (debit, credit): (&str, &str), amount: u128, phase: &str) -> TransferRow {
        TransferRow {
            id: format!("t{seq}"),
            seq,
            debit_account: debit.into(),
            credit_account: credit.into(),
            amount: amount.to_string(),
            code: "credit".into(),
            phase: phase.into(),
            pending_id: None,
            transaction_id: None,
            reference: String::new(),
            created_at: 0,
        }
    }

    #[test]
    fn the_running_balance_walks_back_from_the_newest_line() {
        let m = "polygon:0xabc:merchant:1";
        // Oldest first: credited 100, a settlement of 70 reserved, then posted, a refund of 50
        // reserved (into debt), a fee reserved then voided.
        let oldest_first = [
            row(1, ("u", m), 100, "single"),
            row(2, (m, "t"), 70, "pending"),
            row(3, (m, "t"), 70, "post"),
            row(4, (m, "t"), 50, "pending"),
            row(5, (m, "f"), 3, "pending"),
            row(6, (m, "f"), 3, "void"),
        ];
        let newest_first: Vec<TransferRow> = oldest_first.iter().rev().cloned().collect();
        // Posted now: 100 - 70 = 30.
        let balances = running(&newest_first, m, Kind::Merchant, Some(30));
        assert_eq!(
            balances,
            [30, 30, 30, 30, 100, 100].map(Some).to_vec(),
            "newest first"
        );
        // What the next page starts from: the balance just before the oldest line here.
        assert_eq!(running_balances(&newest_first, m, Some(30)), Some(0));
        assert_eq!(running_balances(&newest_first[..3], m, Some(30)), Some(30));
        // Unknown at the top: unknown all the way.
        assert_eq!(
            running(&newest_first, m, Kind::Merchant, None),
            vec![None; 6]
        );
        // A debit-normal account counts the other way.
        let t = [row(1, ("t", "w"), 5, "single")];
        assert_eq!(running(&t, "t", Kind::Treasury, Some(5)), vec![Some(5)]);
        assert_eq!(running_balances(&t, "t", Some(5)), Some(10));
    }

    #[test]
    fn an_export_is_named_by_merchant_network_and_asset() {
        assert_eq!(export_name(7, &usdc()), "statement-7-polygon-USDC.csv");
    }
}
