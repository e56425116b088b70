//! Merchant balances, shared by the pages and the JSON API: each merchant's account in the books
//! per network and asset (what Payrail owes it, what transfers in flight reserve, what is
//! available, how far it may go into debt), its statement with a running balance and a CSV
//! export, the debt limit an admin sets (e-mailed to every admin, like a wallet change), and
//! what a refund would do to the balance. The books keep base units; everything here shows
//! them as amounts of the asset, exactly (integer arithmetic, never floats). Every function is
//! scoped to the session's institution through the merchant: another institution's merchant is
//! `not_found`, like an unknown one.

use payrail_evm::Token;
use std::str::FromStr;

use futures_util::stream::{self, Stream};
use serde::Serialize;
use shared_types::checkout::{parse_decimal, AmountRule};
use shared_types::ledger::{Code, Kind, Ledger, Totals};
use shared_types::List;

use super::{merchants, Portal};
use crate::chain::{config, evm};
use crate::ctx::timestamp;
use crate::db::ledger::{self, Account, AccountView, TransferRow};
use crate::db::notifications::NotificationKind;
use crate::db::{refunds, transactions};
use crate::error::{ApiError, OrInternal};
use crate::query::{StatementQuery, MAX_LIMIT};

/// The highest debt limit, in units of the asset (whatever the asset: a bound, not a policy).
pub const MAX_DEBT_LIMIT: u64 = 1_000_000_000;

/// One ledger of a merchant as people read it: amounts of the asset, and the same in base units.
#[derive(Debug, Clone, Serialize)]
pub struct Balance {
    /// The network.
    pub network: String,
    /// The token contract (lower-case hex) or `native`: with the network, what names the
    /// balance in its URLs.
    pub token: String,
    /// The asset's symbol.
    pub asset: String,
    /// The asset's decimals.
    pub decimals: u32,
    /// What Payrail owes the merchant: credits less debits posted (negative: the merchant owes).
    pub balance: String,
    /// What pending transfers (a settlement or refund on its way) reserve against it.
    pub reserved: String,
    /// The balance less what is reserved: what a refund or settlement may still take, down to
    /// minus the debt limit.
    pub available: String,
    /// How far below zero `available` may go.
    pub debt_limit: String,
    /// The same four in base units (decimal text).
    pub base_units: BaseUnits,
    /// `available` is below zero.
    pub in_debt: bool,
    /// `available` is below minus the debt limit (the limit was lowered below the debt): no
    /// refund is allowed until payments cover it.
    pub over_limit: bool,
}

/// A balance's figures in base units.
#[derive(Debug, Clone, Serialize)]
pub struct BaseUnits {
    /// Balance.
    pub balance: String,
    /// Reserved.
    pub reserved: String,
    /// Available.
    pub available: String,
    /// Debt limit.
    pub debt_limit: String,
}

/// An asset on a network that a debt limit can be set for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asset {
    /// The network.
    pub network: String,
    /// The token contract (lower-case hex) or `native`.
    pub token: String,
    /// Its symbol.
    pub asset: String,
    /// Its decimals.
    pub decimals: u32,
}

impl Asset {
    /// `{network}:{token}`: the value a form sends.
    pub fn key(&self) -> String {
        format!("{}:{}", self.network, self.token)
    }
}

/// `units` base units of an asset with `decimals` as an amount of it: exact, with at least two
/// decimal places (fewer only if the asset has fewer), trailing zeros beyond them dropped, `-`
/// before a negative one. Pure.
pub fn asset_amount(units: i128, decimals: u32) -> String {
    let d = decimals.min(38);
    let scale = 10u128.pow(d);
    let abs = units.unsigned_abs();
    let (whole, fraction) = (abs / scale, abs % scale);
    let mut fraction = format!("{fraction:0width$}", width = d as usize);
    let keep = d.min(2) as usize;
    while fraction.len() > keep && fraction.ends_with('0') {
        fraction.pop();
    }
    let sign = if units < 0 { "-" } else { "" };
    if fraction.is_empty() {
        format!("{sign}{whole}")
    } else {
        format!("{sign}{whole}.{fraction}")
    }
}

/// `n` as a signed amount (base units never reach 2^127).
fn signed(n: u128) -> i128 {
    i128::try_from(n).unwrap_or(i128::MAX)
}

/// The view of one stored account.
fn view(account: &AccountView) -> Result<Balance, ApiError> {
    let (kind, totals) = account.totals().or_internal("read balance")?;
    Ok(balance_of(
        &Asset {
            network: account.network.clone(),
            token: account.token.clone(),
            asset: account.asset.clone(),
            decimals: account.decimals,
        },
        kind,
        &totals,
    ))
}

/// The view of `totals` of an account of `kind` in `asset`. Pure.
pub fn balance_of(asset: &Asset, kind: Kind, totals: &Totals) -> Balance {
    let balance = totals.balance(kind);
    let available = totals.available(kind);
    let reserved = balance - available;
    let limit = signed(totals.debt_limit);
    let amount = |units: i128| asset_amount(units, asset.decimals);
    Balance {
        network: asset.network.clone(),
        token: asset.token.clone(),
        asset: asset.asset.clone(),
        decimals: asset.decimals,
        balance: amount(balance),
        reserved: amount(reserved),
        available: amount(available),
        debt_limit: amount(limit),
        base_units: BaseUnits {
            balance: balance.to_string(),
            reserved: reserved.to_string(),
            available: available.to_string(),
            debt_limit: limit.to_string(),
        },
        in_debt: available < 0,
        over_limit: available < -limit,
    }
}

/// The empty balance of an asset the merchant has no account in yet.
fn empty(asset: &Asset) -> Balance {
    balance_of(asset, Kind::Merchant, &Totals::default())
}

/// The merchant's accounts (after checking the merchant is the institution's).
async fn accounts(portal: &Portal<'_>, merchant_id: i64) -> Result<Vec<AccountView>, ApiError> {
    ledger::of_merchant(portal.db(), portal.institution_id(), merchant_id)
        .await
        .or_internal("read balances")
}

/// Every balance of merchant `merchant_id`, by network and asset.
pub async fn list(portal: &Portal<'_>, merchant_id: i64) -> Result<Vec<Balance>, ApiError> {
    merchants::row(portal, merchant_id).await?;
    accounts(portal, merchant_id)
        .await?
        .iter()
        .map(view)
        .collect()
}

/// The assets this deployment takes payments in on a watched network (`PAYRAIL_CHAINS`): an
/// unreadable configuration reads as none (the networks page names the problem).
pub fn configured(portal: &Portal<'_>) -> Vec<Asset> {
    let Ok(Some(networks)) = portal.ctx.chains() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, network) in networks.iter() {
        for (asset, token) in &network.tokens {
            out.push(Asset {
                network: name.clone(),
                token: token.address.to_ascii_lowercase(),
                asset: asset.clone(),
                decimals: token.decimals,
            });
        }
        if let Some(asset) = &network.native {
            out.push(Asset {
                network: name.clone(),
                token: Token::NATIVE.to_owned(),
                asset: asset.clone(),
                decimals: config::NATIVE_DECIMALS,
            });
        }
    }
    out
}

/// What a debt limit can be set for: the merchant's balances, then the configured assets it
/// has none in yet. Pure.
pub fn limit_choices(balances: &[Balance], configured: &[Asset]) -> Vec<Asset> {
    let mut out: Vec<Asset> = balances
        .iter()
        .map(|b| Asset {
            network: b.network.clone(),
            token: b.token.clone(),
            asset: b.asset.clone(),
            decimals: b.decimals,
        })
        .collect();
    for asset in configured {
        if !out
            .iter()
            .any(|a| a.network == asset.network && a.token == asset.token)
        {
            out.push(asset.clone());
        }
    }
    out
}

fn no_balance(network: &str, token: &str) -> ApiError {
    ApiError::not_found(format!(
        "the merchant has no balance in {token} on {network}, and Payrail takes no payments in it"
    ))
}

/// The merchant's account in `token` on `network`: as stored, or a configured asset it has no
/// account in yet (`None`), or `not_found`.
async fn find(
    portal: &Portal<'_>,
    merchant_id: i64,
    network: &str,
    token: &str,
) -> Result<(Asset, Option<AccountView>), ApiError> {
    let token = token.to_ascii_lowercase();
    let stored = accounts(portal, merchant_id)
        .await?
        .into_iter()
        .find(|a| a.network == network && a.token == token);
    if let Some(account) = stored {
        let asset = Asset {
            network: account.network.clone(),
            token: account.token.clone(),
            asset: account.asset.clone(),
            decimals: account.decimals,
        };
        return Ok((asset, Some(account)));
    }
    configured(portal)
        .into_iter()
        .find(|a| a.network == network && a.token == token)
        .map(|asset| (asset, None))
        .ok_or_else(|| no_balance(network, &token))
}

/// One balance of merchant `merchant_id`: `token` (a contract or `native`) on `network`. A
/// configured asset the merchant has no account in yet is an empty balance.
pub async fn get(
    portal: &Portal<'_>,
    merchant_id: i64,
    network: &str,
    token: &str,
) -> Result<Balance, ApiError> {
    merchants::row(portal, merchant_id).await?;
    match find(portal, merchant_id, network, token).await? {
        (_, Some(account)) => view(&account),
        (asset, None) => Ok(empty(&asset)),
    }
}

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
    let rows = ledger::statement_page(portal.db(), &id, q.starting_after, i64::from(q.limit) + 1)
        .await
        .or_internal("read statement")?;
    let top = match rows.first() {
        Some(newest) => ledger::balance_after(portal.db(), &id, newest.seq)
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
            &super::payments::cell(&l.reference),
            &super::payments::cell(&asset.asset),
            &super::payments::cell(&asset.network),
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
                let lines = lines(&rows, &id, asset.decimals, top)
                    .map_err(|e| worker::Error::RustError(e.description))?;
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

/// A debt limit as base units of the asset, or why it is refused, naming the field: the amount
/// rule every amount that enters follows ([`parse_decimal`]), with the asset's decimal places,
/// zero allowed (no debt) and at most [`MAX_DEBT_LIMIT`]. Pure.
pub fn parse_limit(text: &str, asset: &Asset) -> Result<u128, String> {
    let (symbol, decimals) = (&asset.asset, asset.decimals);
    if text.is_empty() {
        return Err(format!(
            "debt_limit is required: an amount of {symbol} (0 for no debt)"
        ));
    }
    if text.starts_with('-') {
        return Err("debt_limit must not be negative".to_owned());
    }
    let amount = parse_decimal(
        text,
        &AmountRule {
            field: "debt_limit",
            digits: decimals,
            unit: symbol,
            max_major: MAX_DEBT_LIMIT,
            zero_allowed: true,
        },
    )
    .map_err(|e| format!("{} (an amount of {symbol}, 0 for no debt)", e.message))?;
    evm::to_units(amount, decimals)
        .ok_or_else(|| format!("debt_limit is out of range for {symbol}; got {text}"))
}

/// Sets how far merchant `merchant_id`'s balance in `token` on `network` may go into debt
/// (`text`: an amount of the asset), creating its account if need be, and tells every admin of
/// the institution, like a wallet change. The same limit again changes nothing.
pub async fn set_debt_limit(
    portal: &Portal<'_>,
    merchant_id: i64,
    (network, token): (&str, &str),
    text: &str,
) -> Result<Balance, ApiError> {
    let merchant = merchants::row(portal, merchant_id).await?;
    let (asset, stored) = find(portal, merchant_id, network, token).await?;
    let limit = parse_limit(text, &asset).map_err(ApiError::invalid_request)?;
    let old = match &stored {
        Some(account) => account.totals().or_internal("read balance")?.1.debt_limit,
        None => 0,
    };
    if old == limit {
        return get(portal, merchant_id, network, token).await;
    }
    let account = Account::new(
        &Ledger::new(&asset.network, &asset.token),
        (&asset.asset, asset.decimals),
        Kind::Merchant,
        &merchant_id.to_string(),
    )
    .of_institution(portal.institution_id());
    let statement = ledger::set_limit(portal.db(), &account, limit, portal.now)
        .or_internal("set debt limit")?;
    crate::db::batch(portal.db(), vec![statement])
        .await
        .or_internal("set debt limit")?;
    let amount = |units: u128| {
        format!(
            "{} {}",
            asset_amount(signed(units), asset.decimals),
            asset.asset
        )
    };
    let subject = format!(
        "The debt limit of {} in {} on {} changed",
        merchant.name, asset.asset, asset.network
    );
    let body = format!(
        "The debt limit of merchant {} ({merchant_id}) in {} on {} was changed from {} to {} by \
         {} at {}. A refund of a payment already settled may now take the merchant's balance \
         down to -{}; what the merchant owes is taken from its next settlements in {} on {}. If \
         nobody at your company made this change, set it back in the portal and change your \
         admins' passwords now.",
        merchant.name,
        asset.asset,
        asset.network,
        amount(old),
        amount(limit),
        portal.session.email,
        timestamp(portal.now)?,
        amount(limit),
        asset.asset,
        asset.network,
    );
    crate::notify::admins(
        portal.ctx,
        portal.institution_id(),
        NotificationKind::DebtLimitChanged,
        &subject,
        &body,
    )
    .await?;
    get(portal, merchant_id, network, token).await
}

/// What a refund would do to its merchant's balance.
#[derive(Debug, Clone, Serialize)]
pub struct RefundEffect {
    /// The merchant.
    pub merchant_id: i64,
    /// The asset.
    pub asset: String,
    /// The network.
    pub network: String,
    /// What the merchant has available now (an amount of the asset).
    pub available_before: String,
    /// What it would have available after the refund.
    pub available_after: String,
    /// Its debt limit.
    pub debt_limit: String,
    /// The refund takes it below zero: a debt, taken from its next settlements.
    pub into_debt: bool,
    /// It stays within the debt limit; otherwise the books refuse the refund (409) until
    /// payments cover it, or an admin raises the limit.
    pub within_limit: bool,
}

/// What taking `units` from an account with `available` and `debt_limit` leaves: the available
/// balance after, whether it is below zero, and whether it keeps the limit. Pure.
pub fn after_taking(available: i128, debt_limit: u128, units: u128) -> (i128, bool, bool) {
    let after = available - signed(units);
    (after, after < 0, after >= -signed(debt_limit))
}

/// What refunding `units` base units of part `part` of payment `transaction_id` would do to
/// its merchant's balance in that part's asset; `None` for a payment not made on a watched
/// chain (it has no balance to take from).
pub async fn refund_effect(
    portal: &Portal<'_>,
    (transaction_id, part): (i64, i64),
    units: &str,
) -> Result<Option<RefundEffect>, ApiError> {
    let Some(payment) = transactions::get(portal.db(), portal.institution_id(), transaction_id)
        .await
        .or_internal("read payment")?
    else {
        return Ok(None);
    };
    let Some(quote) = refunds::quotes_of(portal.db(), portal.institution_id(), transaction_id)
        .await
        .or_internal("read the payment's parts")?
        .into_iter()
        .find(|q| q.part == part)
    else {
        return Ok(None);
    };
    let units = u128::from_str(units).or_internal("read refund units")?;
    let merchant_id = payment.merchant_id;
    let token = quote.token.lower();
    let account = accounts(portal, merchant_id)
        .await?
        .into_iter()
        .find(|a| a.network == quote.network && a.token == token);
    let (kind, totals) = match &account {
        Some(account) => account.totals().or_internal("read balance")?,
        None => (Kind::Merchant, Totals::default()),
    };
    let decimals = account.as_ref().map_or(quote.decimals, |a| a.decimals);
    let available = totals.available(kind);
    let (after, into_debt, within_limit) = after_taking(available, totals.debt_limit, units);
    Ok(Some(RefundEffect {
        merchant_id,
        asset: quote.asset,
        network: quote.network,
        available_before: asset_amount(available, decimals),
        available_after: asset_amount(after, decimals),
        debt_limit: asset_amount(signed(totals.debt_limit), decimals),
        into_debt,
        within_limit,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usdc() -> Asset {
        Asset {
            network: "polygon".into(),
            token: "0xabc".into(),
            asset: "USDC".into(),
            decimals: 6,
        }
    }

    #[test]
    fn base_units_read_as_exact_amounts_of_the_asset() {
        assert_eq!(asset_amount(0, 6), "0.00");
        assert_eq!(asset_amount(1, 6), "0.000001");
        assert_eq!(asset_amount(12_500_000, 6), "12.50");
        assert_eq!(asset_amount(-30_000_000, 6), "-30.00");
        assert_eq!(asset_amount(1_234_567_891, 6), "1234.567891");
        // 18 decimals, far past what a float or an i64 holds.
        assert_eq!(
            asset_amount(123_456_789_000_000_000_000_000_001, 18),
            "123456789.000000000000000001"
        );
        assert_eq!(asset_amount(10_000_000_000_000_000, 18), "0.01");
        assert_eq!(asset_amount(7, 0), "7");
        assert_eq!(asset_amount(15, 1), "1.5");
    }

    #[test]
    fn a_balance_shows_what_is_reserved_and_available() {
        let totals = Totals {
            credits_posted: 100_000_000,
            debits_posted: 20_000_000,
            debits_pending: 90_000_000,
            credits_pending: 0,
            debt_limit: 5_000_000,
        };
        let b = balance_of(&usdc(), Kind::Merchant, &totals);
        assert_eq!(
            (
                b.balance.as_str(),
                b.reserved.as_str(),
                b.available.as_str()
            ),
            ("80.00", "90.00", "-10.00")
        );
        assert_eq!(b.debt_limit, "5.00");
        assert_eq!(b.base_units.available, "-10000000");
        assert!(b.in_debt && b.over_limit);
        let within = balance_of(
            &usdc(),
            Kind::Merchant,
            &Totals {
                debt_limit: 10_000_000,
                ..totals
            },
        );
        assert!(within.in_debt && !within.over_limit);
    }

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
    fn a_debt_limit_is_a_bounded_amount_of_the_asset() {
        let usdc = usdc();
        assert_eq!(parse_limit("250", &usdc), Ok(250_000_000));
        assert_eq!(parse_limit("99.50", &usdc), Ok(99_500_000));
        assert_eq!(parse_limit("0", &usdc), Ok(0));
        assert_eq!(parse_limit("0.000001", &usdc), Ok(1));
        assert_eq!(parse_limit("1000000000", &usdc), Ok(1_000_000_000_000_000));
        let eth = Asset {
            asset: "ETH".into(),
            decimals: 18,
            ..usdc.clone()
        };
        assert_eq!(
            parse_limit("1000000000", &eth),
            Ok(1_000_000_000_000_000_000_000_000_000)
        );
        assert_eq!(parse_limit("0.000000000000000001", &eth), Ok(1));
        for (bad, says) in [
            ("", "required"),
            ("-1", "must not be negative"),
            ("-0", "must not be negative"),
            ("0.0000001", "at most 6 decimal places"),
            ("1000000000.01", "at most 1000000000"),
            ("1e5", "must be a number with"),
            ("1,000", "must be a number with"),
            ("12 USDC", "must be a number with"),
            (" 99.50 ", "must be a number with"),
            ("+1", "must be a number with"),
            (".", "must be a number with"),
            ("1.2.3", "must be a number with"),
            ("NaN", "must be a number with"),
            (
                "99999999999999999999999999999999999999999",
                "at most 1000000000",
            ),
        ] {
            let refused = parse_limit(bad, &usdc).expect_err(bad);
            assert!(refused.starts_with("debt_limit"), "{bad}: {refused}");
            assert!(refused.contains(says), "{bad}: {refused}");
        }
    }

    #[test]
    fn a_refund_shows_whether_it_goes_into_debt() {
        assert_eq!(after_taking(100, 0, 40), (60, false, true));
        assert_eq!(after_taking(100, 0, 100), (0, false, true));
        assert_eq!(after_taking(100, 50, 130), (-30, true, true));
        assert_eq!(after_taking(100, 50, 150), (-50, true, true));
        assert_eq!(after_taking(100, 50, 151), (-51, true, false));
        assert_eq!(after_taking(-10, 0, 1), (-11, true, false));
    }

    #[test]
    fn limit_choices_are_the_balances_then_the_other_configured_assets() {
        let balance = empty(&usdc());
        let eth = Asset {
            network: "base".into(),
            token: Token::NATIVE.into(),
            asset: "ETH".into(),
            decimals: 18,
        };
        let choices = limit_choices(&[balance], &[usdc(), eth.clone()]);
        assert_eq!(choices, vec![usdc(), eth]);
        assert_eq!(choices[0].key(), "polygon:0xabc");
    }

    #[test]
    fn an_export_is_named_by_merchant_network_and_asset() {
        assert_eq!(export_name(7, &usdc()), "statement-7-polygon-USDC.csv");
    }
}
