//! The overview's figures beyond the payments' counts (`payments::overview`): the last 30 days'
//! gross volume per day and currency, the treasury's float per network and asset against what
//! the institution's merchants are owed, and the webhook endpoints that fail or were disabled.
//!
//! Every figure is read from D1, never from a node: the float is the books' treasury account
//! (every receipt, sweep, funding, payout, refund and gas is posted to it in the batch that
//! records it, and the cron's reconciliation compares it with the chain and e-mails any
//! drift), so the page costs a few index reads however many networks are configured.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use shared_types::checkout::currency_digits;
use shared_types::ledger::{units_text, Kind};
use shared_types::EndpointStatus;

use super::Portal;
use crate::ctx::timestamp;
use crate::db::ledger::AccountView;
use crate::db::{endpoints, ledger, transactions};
use crate::error::{ApiError, OrInternal};
use crate::money::{float_moves, treasury};

/// Days the volume chart covers, today included.
pub const CHART_DAYS: i64 = 30;

/// One day of one currency's volume.
#[derive(Debug, Clone, PartialEq)]
pub struct Day {
    /// `YYYY-MM-DD` (UTC).
    pub date: String,
    /// Gross received from the payments created that day.
    pub gross: Decimal,
    /// Those payments.
    pub count: i64,
}

/// One currency's last 30 days, oldest first, every day present (zero when nothing came in).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Order currency.
    pub currency: String,
    /// Thirty days.
    pub days: Vec<Day>,
    /// Their sum.
    pub total: Decimal,
    /// Payments in it.
    pub count: i64,
}

/// The treasury against what one network and asset's settlements need.
#[derive(Debug, Clone, PartialEq)]
pub struct Float {
    /// Network.
    pub network: String,
    /// Asset.
    pub asset: String,
    /// What the treasury holds, by the books.
    pub balance: String,
    /// The same less what its transactions in flight reserve: what it can pay out now.
    pub available: String,
    /// What the institution's merchants are owed and not yet reserved for a payout: their
    /// settlements still to come (before the fees they will be charged).
    pub owed: String,
    /// The float is below it.
    pub short: bool,
    /// By how much, when it is.
    pub shortfall: Option<String>,
}

/// An endpoint that needs attention.
#[derive(Debug, Clone)]
pub struct Troubled {
    /// `ep_…`.
    pub id: String,
    /// Receiver URL.
    pub url: String,
    /// Free text.
    pub description: String,
    /// Disabled (rather than failing).
    pub disabled: bool,
    /// Why it was disabled, when Payrail did it.
    pub disabled_reason: Option<String>,
    /// Failing since.
    pub failing_since: Option<String>,
    /// Its last successful delivery.
    pub last_success: Option<String>,
}

/// The overview's further figures.
#[derive(Debug, Clone)]
pub struct Health {
    /// One series per currency seen, by currency code.
    pub volume: Vec<Series>,
    /// One line per network and asset of the treasury or of the merchants' balances.
    pub float: Vec<Float>,
    /// Disabled or failing endpoints.
    pub endpoints: Vec<Troubled>,
    /// The treasury's address (EIP-55), when a treasury key is configured: where the operator
    /// funds it.
    pub treasury_address: Option<String>,
    /// The operator's moves of the treasury's USDC between networks not yet arrived (shown
    /// read only: the float is the platform's, shared by every institution).
    pub moving: Vec<float_moves::View>,
}

/// The day `days` before `now`'s (UTC), `YYYY-MM-DD`.
pub fn day_before(now: i64, days: i64) -> Result<String, ApiError> {
    Ok(timestamp(now - days * 86_400)?[..10].to_owned())
}

/// Reads the figures.
pub async fn health(portal: &Portal<'_>) -> Result<Health, ApiError> {
    let first_day = day_before(portal.now, CHART_DAYS - 1)?;
    let rows = transactions::daily_volume(
        portal.money(),
        portal.institution_id(),
        &format!("{first_day}T00:00:00Z"),
    )
    .await
    .or_internal("read daily volume")?;
    let dates = (0..CHART_DAYS)
        .rev()
        .map(|back| day_before(portal.now, back))
        .collect::<Result<Vec<_>, _>>()?;
    let volume = series(
        &dates,
        rows.into_iter()
            .map(|r| (r.day, r.currency, r.count, r.gross_minor)),
    );
    let treasury = ledger::treasury_accounts(portal.db())
        .await
        .or_internal("read the treasury's accounts")?;
    let merchants = ledger::merchant_accounts_of(portal.money(), portal.institution_id())
        .await
        .or_internal("read merchant balances")?;
    let float = float(&treasury, &merchants)?;
    let endpoints = endpoints::troubled(portal.db(), portal.institution_id())
        .await
        .or_internal("read endpoints")?
        .into_iter()
        .map(|e| {
            Ok(Troubled {
                disabled: e.status == EndpointStatus::Disabled,
                failing_since: e.first_failure_at.map(timestamp).transpose()?,
                last_success: e.last_success_at.map(timestamp).transpose()?,
                id: e.id,
                url: e.url,
                description: e.description,
                disabled_reason: e.disabled_reason,
            })
        })
        .collect::<Result<_, ApiError>>()?;
    // Opening the sealed key is local work: no node is asked.
    let treasury_address =
        treasury::treasury(portal.ctx)?.map(|t| crate::wallet_address::eip55(&t.address));
    let moving = float_moves::in_flight(portal.db()).await?;
    Ok(Health {
        volume,
        float,
        endpoints,
        treasury_address,
        moving,
    })
}

/// The rows `(day, currency, count, gross in minor units)` as one series per currency over
/// `dates` (oldest first), days without rows at zero. Pure.
pub fn series(
    dates: &[String],
    rows: impl IntoIterator<Item = (String, String, i64, i64)>,
) -> Vec<Series> {
    let mut by_currency: BTreeMap<String, BTreeMap<String, (i64, i64)>> = BTreeMap::new();
    for (day, currency, count, minor) in rows {
        let entry = by_currency
            .entry(currency)
            .or_default()
            .entry(day)
            .or_default();
        // Each row is bounded (`db::transactions::GROSS_MINOR`); their sum saturates rather
        // than wrap.
        entry.0 = entry.0.saturating_add(count);
        entry.1 = entry.1.saturating_add(minor);
    }
    by_currency
        .into_iter()
        .map(|(currency, days)| {
            let digits = currency_digits(&currency).unwrap_or(2);
            let days: Vec<Day> = dates
                .iter()
                .map(|date| {
                    let (count, minor) = days.get(date).copied().unwrap_or_default();
                    Day {
                        date: date.clone(),
                        gross: Decimal::new(minor, digits),
                        count,
                    }
                })
                .collect();
            Series {
                total: days
                    .iter()
                    .try_fold(Decimal::ZERO, |total, d| total.checked_add(d.gross))
                    .unwrap_or(Decimal::MAX),
                count: days.iter().map(|d| d.count).sum(),
                currency,
                days,
            }
        })
        .collect()
}

/// The treasury's float per ledger against what the merchants' accounts are owed there (each
/// merchant's available balance when positive: a merchant in debt owes, and is not paid out).
/// Pure but for the rows' decimal text.
pub fn float(treasury: &[AccountView], merchants: &[AccountView]) -> Result<Vec<Float>, ApiError> {
    // (network, asset) -> (decimals, balance, available, owed)
    let mut lines: BTreeMap<(String, String), (u32, i128, i128, i128)> = BTreeMap::new();
    for account in treasury {
        let (_, totals) = account.totals().or_internal("read the treasury's totals")?;
        let line = lines
            .entry((account.network.clone(), account.asset.clone()))
            .or_insert((account.decimals, 0, 0, 0));
        line.1 += totals.balance(Kind::Treasury);
        line.2 += totals.available(Kind::Treasury);
    }
    for account in merchants {
        let (_, totals) = account.totals().or_internal("read a merchant's totals")?;
        let line = lines
            .entry((account.network.clone(), account.asset.clone()))
            .or_insert((account.decimals, 0, 0, 0));
        line.3 += totals.available(Kind::Merchant).max(0);
    }
    Ok(lines
        .into_iter()
        .map(|((network, asset), (decimals, balance, available, owed))| {
            let short = available < owed;
            Float {
                network,
                asset,
                balance: units_text(balance, decimals),
                available: units_text(available, decimals),
                owed: units_text(owed, decimals),
                short,
                shortfall: short.then(|| units_text(owed - available, decimals)),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(network: &str, asset: &str, kind: &str, debits: &str, credits: &str) -> AccountView {
        AccountView {
            id: format!("{network}:x:{kind}"),
            network: network.into(),
            token: "x".into(),
            asset: asset.into(),
            decimals: 6,
            kind: kind.into(),
            owner: String::new(),
            debits_posted: debits.into(),
            credits_posted: credits.into(),
            debits_pending: "0".into(),
            credits_pending: "0".into(),
            debt_limit: "0".into(),
        }
    }

    #[test]
    fn the_float_is_short_when_below_what_merchants_are_owed() {
        let treasury = [account("polygon", "USDC", "treasury", "5000000", "1000000")];
        let merchants = [
            account("polygon", "USDC", "merchant", "0", "3000000"),
            account("polygon", "USDC", "merchant", "0", "2500000"),
            // In debt: owes, is owed nothing.
            account("polygon", "USDC", "merchant", "900000", "0"),
            account("base", "ETH", "merchant", "0", "1"),
        ];
        let lines = float(&treasury, &merchants).unwrap();
        assert_eq!(lines.len(), 2);
        let base = &lines[0];
        assert_eq!((base.network.as_str(), base.short), ("base", true));
        assert_eq!(base.balance, "0");
        let polygon = &lines[1];
        assert_eq!(polygon.balance, "4");
        assert_eq!(polygon.owed, "5.5");
        assert!(polygon.short);
        assert_eq!(polygon.shortfall.as_deref(), Some("1.5"));
        let enough = float(&treasury, &merchants[..1]).unwrap();
        assert!(!enough[0].short && enough[0].shortfall.is_none());
    }

    #[test]
    fn every_day_of_the_chart_is_present_and_summed_per_currency() {
        let dates: Vec<String> = ["2026-11-21", "2026-11-22", "2026-11-23"]
            .map(String::from)
            .to_vec();
        let series = series(
            &dates,
            [
                ("2026-11-21".into(), "EUR".into(), 2, 1050),
                ("2026-11-23".into(), "EUR".into(), 1, 5),
                ("2026-11-22".into(), "JPY".into(), 1, 1200),
            ],
        );
        assert_eq!(series.len(), 2);
        let eur = &series[0];
        assert_eq!(eur.currency, "EUR");
        assert_eq!(eur.days.len(), 3);
        assert_eq!(eur.days[1].gross, Decimal::ZERO);
        assert_eq!(eur.total.to_string(), "10.55");
        assert_eq!(eur.count, 3);
        assert_eq!(series[1].total.to_string(), "1200");
    }
}
