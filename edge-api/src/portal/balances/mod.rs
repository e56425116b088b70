//! Merchant balances, shared by the pages and the JSON API: each merchant's account in the books
//! per network and asset (what Payrail owes it, what transfers in flight reserve, what is
//! available, how far it may go into debt), and what a refund would do to the balance. Its
//! statement and the CSV export are [`statement`]'s; the debt limit an admin sets is
//! [`debt_limit`]'s. The books keep base units; everything here shows them as amounts of the
//! asset, exactly (integer arithmetic, never floats). Every function is scoped to the session's
//! institution through the merchant: another institution's merchant is `not_found`, like an
//! unknown one.

pub mod debt_limit;
pub mod statement;

use std::str::FromStr;

use payrail_evm::Token;
use serde::Serialize;
use shared_types::ledger::{Kind, Totals};

use super::{merchants, Portal};
use crate::chain::config;
use crate::db::ledger::{self, AccountView};
use crate::db::{refunds, transactions};
use crate::error::{ApiError, OrInternal};

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
    ledger::of_merchant(portal.money(), portal.institution_id(), merchant_id)
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

/// What taking `units` from an account with `available` and debt limit `limit` leaves: the
/// available balance after, whether it is below zero, and whether it keeps the limit. Pure.
pub fn after_taking(available: i128, limit: u128, units: u128) -> (i128, bool, bool) {
    let after = available - signed(units);
    (after, after < 0, after >= -signed(limit))
}

/// What refunding `units` base units of part `part` of payment `transaction_id` would do to
/// its merchant's balance in that part's asset; `None` for a payment not made on a watched
/// chain (it has no balance to take from).
pub async fn refund_effect(
    portal: &Portal<'_>,
    (transaction_id, part): (i64, i64),
    units: &str,
) -> Result<Option<RefundEffect>, ApiError> {
    let Some(payment) = transactions::get(portal.money(), portal.institution_id(), transaction_id)
        .await
        .or_internal("read payment")?
    else {
        return Ok(None);
    };
    let Some(quote) = refunds::quotes_of(portal.money(), portal.institution_id(), transaction_id)
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

    /// USDC on Polygon, for the tests of this module and its children.
    pub(super) fn usdc() -> Asset {
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
}
