//! Rates for quotes on watched networks: what one unit of an asset is worth in the order's
//! currency, and where that figure came from. USDC and USDT are taken at their US-dollar peg,
//! ether at the `ETH/USD` price feed; an order in another currency also needs that currency's
//! feed (`CUR/USD`). Feeds are Chainlink's `AggregatorV3Interface`, read with `eth_call` on the
//! same node, and an answer older than its configured age is refused. No rate means the way to
//! pay is not offered: never a made-up price.

use rust_decimal::Decimal;
use serde_json::json;

use super::config::{Feed, Network};
use super::error::{ChainError, ChainResult};
use super::{evm, rpc};

/// A rate and its provenance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rate {
    /// Units of the order currency one unit of the asset is worth.
    pub per_unit: Decimal,
    /// Where it came from, for the record (`peg`, or the feed and its round's time).
    pub source: String,
}

/// The rate of `asset` (a USD-pegged token, or ether) in `currency` on `network`, as of `now`
/// (Unix seconds).
pub async fn rate(
    network: &Network,
    network_name: &str,
    asset: &str,
    currency: &str,
    now: i64,
) -> ChainResult<Rate> {
    if network.is_native(asset) {
        return coin_rate(network, network_name, asset, currency, now).await;
    }
    let peg = (Decimal::ONE, format!("peg: 1 {asset} = 1 USD"));
    in_currency(network, network_name, peg, currency, now).await
}

/// The rate of a coin priced by its `COIN/USD` feed (ether; Polygon's POL, which pays its gas)
/// in `currency`.
pub async fn coin_rate(
    network: &Network,
    network_name: &str,
    coin: &str,
    currency: &str,
    now: i64,
) -> ChainResult<Rate> {
    let price = feed_price(network, network_name, &format!("{coin}/USD"), now).await?;
    in_currency(network, network_name, price, currency, now).await
}

/// A US-dollar price (and its source) in `currency`, through its `CUR/USD` feed.
async fn in_currency(
    network: &Network,
    network_name: &str,
    (usd, source): (Decimal, String),
    currency: &str,
    now: i64,
) -> ChainResult<Rate> {
    if currency == "USD" {
        return Ok(Rate {
            per_unit: usd,
            source,
        });
    }
    let (currency_usd, currency_source) =
        feed_price(network, network_name, &format!("{currency}/USD"), now).await?;
    let per_unit = usd.checked_div(currency_usd).ok_or_else(|| {
        ChainError::answer(format!(
            "the {currency}/USD price feed's answer is out of range"
        ))
    })?;
    Ok(Rate {
        per_unit,
        source: format!("{source}; {currency_source}"),
    })
}

/// US dollars per unit of `pair`'s base (its feed's fresh answer), and where it came from.
async fn feed_price(
    network: &Network,
    network_name: &str,
    pair: &str,
    now: i64,
) -> ChainResult<(Decimal, String)> {
    let feed = network.feeds.get(pair).ok_or_else(|| {
        ChainError::rule(format!(
            "no {pair} price feed is configured on {network_name}"
        ))
    })?;
    let (round, decimals) = read_feed(network, pair, feed).await?;
    let price = usd_price(pair, round, decimals, now, feed.max_age_seconds)?;
    let source = format!(
        "{pair} feed {} updated at {}",
        feed.address,
        shared_types::time::format_unix(i64::try_from(round.updated_at).unwrap_or(i64::MAX))
            .unwrap_or_default()
    );
    Ok((price, source))
}

/// A feed's latest round and its decimals, read with `eth_call`.
pub async fn read_feed(
    network: &Network,
    pair: &str,
    feed: &Feed,
) -> ChainResult<(evm::RoundData, u64)> {
    let call = |data: &str| {
        rpc::call(
            &network.node,
            "eth_call",
            json!([{"to": feed.address, "data": data}, "latest"]),
        )
    };
    let round = evm::round_data(&call(evm::LATEST_ROUND_DATA).await?)?;
    let decimals = evm::uint(&call(evm::DECIMALS).await?)
        .and_then(|d| u64::try_from(d).ok())
        .ok_or_else(|| {
            ChainError::answer(format!(
                "the {pair} price feed's decimals() is not a number"
            ))
        })?;
    Ok((round, decimals))
}

/// US dollars per unit of the pair's base from a feed's `XXX/USD` answer, refusing an answer
/// that is not positive or older than `max_age` seconds. Pure.
pub fn usd_price(
    pair: &str,
    round: evm::RoundData,
    decimals: u64,
    now: i64,
    max_age: u64,
) -> ChainResult<Decimal> {
    let age = now.saturating_sub(i64::try_from(round.updated_at).unwrap_or(i64::MAX));
    if age > i64::try_from(max_age).unwrap_or(i64::MAX) {
        return Err(ChainError::Stale(format!(
            "the {pair} price feed is stale: its answer is {age} s old (at most {max_age} s)"
        )));
    }
    let scale = u32::try_from(decimals).ok().filter(|d| *d <= 28);
    scale
        .filter(|_| round.answer > 0)
        .and_then(|scale| Decimal::try_from_i128_with_scale(round.answer, scale).ok())
        .ok_or_else(|| ChainError::answer(format!("the {pair} price feed's answer is not a price")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn a_fresh_feed_gives_its_price_and_a_stale_one_none() {
        let round = evm::RoundData {
            answer: 125_000_000,
            updated_at: 1_000,
        };
        assert_eq!(
            usd_price("EUR/USD", round, 8, 1_500, 3600).unwrap(),
            Decimal::from_str("1.25").unwrap()
        );
        let stale = usd_price("EUR/USD", round, 8, 1_000 + 3601, 3600)
            .unwrap_err()
            .to_string();
        assert!(stale.contains("stale"), "{stale}");
        let negative = evm::RoundData {
            answer: -1,
            updated_at: 1_000,
        };
        assert!(usd_price("EUR/USD", negative, 8, 1_000, 3600).is_err());
    }
}
