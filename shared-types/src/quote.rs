//! Ways to pay (asset on a network) and what an order costs in each.
//!
//! The rates are indicative reference prices, fixed in code: Payrail has no market-data feed
//! yet, and in sandbox mode no real chain either. A quote is taken when the customer picks a way
//! to pay and is shown on the hosted page; amounts on the transaction stay in the order currency.

use rust_decimal::{Decimal, RoundingStrategy};

/// One way to pay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Method {
    /// Asset code.
    pub asset: &'static str,
    /// Network the customer pays on.
    pub network: &'static str,
    /// Decimal places the hosted page quotes the asset with.
    pub decimals: u32,
}

/// Every way to pay, the default first.
pub const METHODS: &[Method] = &[
    Method {
        asset: "USDC",
        network: "polygon",
        decimals: 6,
    },
    Method {
        asset: "USDC",
        network: "ethereum",
        decimals: 6,
    },
    Method {
        asset: "USDC",
        network: "solana",
        decimals: 6,
    },
    Method {
        asset: "USDC",
        network: "base",
        decimals: 6,
    },
    Method {
        asset: "USDT",
        network: "tron",
        decimals: 6,
    },
    Method {
        asset: "USDT",
        network: "ethereum",
        decimals: 6,
    },
    Method {
        asset: "ETH",
        network: "ethereum",
        decimals: 8,
    },
    Method {
        asset: "ETH",
        network: "arbitrum",
        decimals: 8,
    },
    Method {
        asset: "BTC",
        network: "bitcoin",
        decimals: 8,
    },
    Method {
        asset: "SOL",
        network: "solana",
        decimals: 6,
    },
];

/// The method for `asset` on `network`, if offered.
pub fn method(asset: &str, network: &str) -> Option<Method> {
    METHODS
        .iter()
        .copied()
        .find(|m| m.asset == asset && m.network == network)
}

/// Price of one unit of `asset` in US dollars.
fn usd_price(asset: &str) -> Option<Decimal> {
    Some(match asset {
        "USDC" | "USDT" => Decimal::ONE,
        "ETH" => Decimal::new(3200, 0),
        "BTC" => Decimal::new(95_000, 0),
        "SOL" => Decimal::new(180, 0),
        _ => return None,
    })
}

/// Units of `currency` per US dollar.
fn per_usd(currency: &str) -> Option<Decimal> {
    Some(match currency {
        "USD" => Decimal::ONE,
        "EUR" => Decimal::new(92, 2),
        "GBP" => Decimal::new(79, 2),
        "CHF" => Decimal::new(88, 2),
        "JPY" => Decimal::new(150, 0),
        _ => return None,
    })
}

/// What `amount` of `currency` costs in the method's asset, rounded up to its decimals so the
/// customer never pays short by rounding.
pub fn crypto_amount(amount: Decimal, currency: &str, method: Method) -> Option<Decimal> {
    let price = usd_price(method.asset)? * per_usd(currency)?;
    Some(
        (amount / price)
            .round_dp_with_strategy(method.decimals, RoundingStrategy::AwayFromZero)
            .normalize(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::str::FromStr;

    #[test]
    fn quotes_round_up_in_the_asset() {
        let usdc = method("USDC", "polygon").unwrap();
        assert_eq!(
            crypto_amount(Decimal::from_str("92.00").unwrap(), "EUR", usdc),
            Some(Decimal::from(100))
        );
        let btc = method("BTC", "bitcoin").unwrap();
        // 100 USD / 95000 = 0.00105263157... -> rounded up to 8 places.
        assert_eq!(
            crypto_amount(Decimal::from(100), "USD", btc),
            Some(Decimal::from_str("0.00105264").unwrap())
        );
        assert_eq!(crypto_amount(Decimal::ONE, "XXX", usdc), None);
    }

    #[test]
    fn every_method_has_a_price_and_a_fee() {
        for m in METHODS {
            assert!(usd_price(m.asset).is_some(), "{}", m.asset);
            assert!(crate::lifecycle::gas_fee(m.network) > Decimal::ZERO);
        }
        assert_eq!(method("BTC", "ethereum"), None);
    }
}
