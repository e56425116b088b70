//! A merchant's debt limit in one asset on one network, set by an admin from the pages or the
//! JSON API: the limit read as an amount of the asset and bounded, written to the books
//! (creating the account if need be), and e-mailed to every admin of the institution, like a
//! wallet change.

use shared_types::checkout::{parse_decimal, AmountRule};
use shared_types::ledger::{Kind, Ledger};

use super::{asset_amount, find, get, signed, Asset, Balance};
use crate::chain::evm;
use crate::ctx::timestamp;
use crate::db::ledger::{self, Account};
use crate::db::notifications::NotificationKind;
use crate::error::{ApiError, OrInternal};
use crate::portal::{merchants, Portal};

/// The highest debt limit, in units of the asset (whatever the asset: a bound, not a policy).
pub const MAX_DEBT_LIMIT: u64 = 1_000_000_000;

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
    let statement = ledger::set_limit(&account, limit, portal.now).or_internal("set debt limit")?;
    // The merchant's account lives where its institution's money does.
    crate::db::batch(portal.money(), vec![statement])
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

#[cfg(test)]
mod tests {
    use super::super::tests::usdc;
    use super::*;

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
}
