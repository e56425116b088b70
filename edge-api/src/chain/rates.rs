//! Rates for quotes on watched networks: what one unit of an asset is worth in the order's
//! currency, and where that figure came from. USDC and USDT are taken at their US-dollar peg,
//! ether at the `ETH/USD` price feed; an order in another currency also needs that currency's
//! feed (`CUR/USD`). Feeds are Chainlink's `AggregatorV3Interface`, read with `eth_call` on the
//! same node. No rate means the way to pay is not offered: never a made-up price.
//!
//! Chainlink's documented practice for consumers is followed:
//! - an answer older than its feed's `max_age_seconds` is refused, and so is one outside the
//!   feed's configured `min_answer`..`max_answer` (a feed stuck at its aggregator's floor or
//!   ceiling, or a broken one);
//! - a stablecoin taken at its peg is checked against its own `COIN/USD` feed where one is
//!   configured: beyond `peg_tolerance_bps` from 1 USD it is not quoted (a depeg);
//! - on an L2 with a sequencer uptime feed configured (Base, Arbitrum), no price is taken while
//!   the sequencer is down, nor for its grace period after it is back up (its feeds could not be
//!   updated meanwhile, while their answers still look fresh).

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
    rate_at(network, network_name, asset, currency, At::latest(now)).await
}

/// Where on the chain a rate is read: at `block` (the feeds' state at it), judged as of `time`
/// (that block's time: an answer is fresh, and the sequencer up, as of then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    /// The block, `None`: the node's latest.
    pub block: Option<u64>,
    /// Unix seconds the answers are judged at.
    pub time: i64,
}

impl At {
    /// The node's latest state, as of `now`.
    pub fn latest(now: i64) -> At {
        At {
            block: None,
            time: now,
        }
    }

    /// The JSON-RPC block tag.
    fn tag(self) -> serde_json::Value {
        match self.block {
            Some(block) => json!(format!("{block:#x}")),
            None => json!("latest"),
        }
    }
}

/// The rate of `asset` in `currency` on `network` as the chain stood `at` a block: the rules
/// of [`rate`] (fresh, within bounds, on peg, sequencer up), judged at that block's time. What
/// late money is valued at: the rate when it arrived.
pub async fn rate_at(
    network: &Network,
    network_name: &str,
    asset: &str,
    currency: &str,
    at: At,
) -> ChainResult<Rate> {
    sequencer_up(network, network_name, at).await?;
    if network.is_native(asset) {
        let price = feed_price(network, network_name, &format!("{asset}/USD"), at).await?;
        return in_currency(network, network_name, price, currency, at).await;
    }
    let peg = pegged(network, network_name, asset, at).await?;
    in_currency(network, network_name, peg, currency, at).await
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
    let at = At::latest(now);
    sequencer_up(network, network_name, at).await?;
    let price = feed_price(network, network_name, &format!("{coin}/USD"), at).await?;
    in_currency(network, network_name, price, currency, at).await
}

/// A stablecoin at its peg, 1 USD, once its own `COIN/USD` feed (where configured) says it is
/// within the feed's `peg_tolerance_bps` of it.
async fn pegged(
    network: &Network,
    network_name: &str,
    asset: &str,
    at: At,
) -> ChainResult<(Decimal, String)> {
    let pair = format!("{asset}/USD");
    let peg = format!("peg: 1 {asset} = 1 USD");
    let Some(feed) = network.feeds.get(&pair) else {
        return Ok((Decimal::ONE, peg));
    };
    let (price, source) = feed_price(network, network_name, &pair, at).await?;
    on_peg(asset, price, feed.peg_tolerance_bps)?;
    Ok((Decimal::ONE, format!("{peg} ({source}: {price})")))
}

/// Refuses a stablecoin whose US-dollar price is more than `tolerance_bps` from 1. Pure.
pub fn on_peg(asset: &str, price: Decimal, tolerance_bps: u32) -> ChainResult<()> {
    let off = (price - Decimal::ONE).abs();
    if off * Decimal::from(10_000) > Decimal::from(tolerance_bps) {
        return Err(ChainError::rule(format!(
            "{asset} is off its peg: its {asset}/USD feed answers {} USD, more than {} % from \
             1 USD, so it is not taken at its peg",
            price.normalize(),
            (Decimal::from(tolerance_bps) / Decimal::from(100)).normalize()
        )));
    }
    Ok(())
}

/// Refuses every price on `network` while its L2 sequencer is down, and for its grace period
/// after it is back up, when a sequencer uptime feed is configured (Chainlink's practice: the
/// feed answers 0 while up, 1 while down; `startedAt` is when that last changed, 0 in an
/// invalid round).
pub async fn sequencer_up(network: &Network, network_name: &str, at: At) -> ChainResult<()> {
    let Some(feed) = &network.sequencer_uptime_feed else {
        return Ok(());
    };
    let answer = rpc::call(
        &network.node,
        "eth_call",
        json!([{"to": feed.address, "data": evm::LATEST_ROUND_DATA}, at.tag()]),
    )
    .await?;
    let round = evm::round_data(&answer)?;
    sequencer_rule(network_name, round, feed.grace_period_seconds, at.time)
}

/// The sequencer rule on its feed's `round`, pure.
pub fn sequencer_rule(
    network_name: &str,
    round: evm::RoundData,
    grace: u64,
    now: i64,
) -> ChainResult<()> {
    if round.answer != 0 {
        return Err(ChainError::rule(format!(
            "the {network_name} sequencer is down (its uptime feed says so): no price is taken \
             until it is back up and {grace} s have passed"
        )));
    }
    if round.started_at == 0 {
        return Err(ChainError::answer(format!(
            "the {network_name} sequencer uptime feed's round is not valid"
        )));
    }
    let up_for = now.saturating_sub(i64::try_from(round.started_at).unwrap_or(i64::MAX));
    if up_for <= i64::try_from(grace).unwrap_or(i64::MAX) {
        return Err(ChainError::rule(format!(
            "the {network_name} sequencer came back up {} s ago: no price is taken until {grace} \
             s have passed",
            up_for.max(0)
        )));
    }
    Ok(())
}

/// A US-dollar price (and its source) in `currency`, through its `CUR/USD` feed.
async fn in_currency(
    network: &Network,
    network_name: &str,
    (usd, source): (Decimal, String),
    currency: &str,
    at: At,
) -> ChainResult<Rate> {
    if currency == "USD" {
        return Ok(Rate {
            per_unit: usd,
            source,
        });
    }
    let (currency_usd, currency_source) =
        feed_price(network, network_name, &format!("{currency}/USD"), at).await?;
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

/// US dollars per unit of `pair`'s base (its feed's fresh answer, within its bounds), and
/// where it came from.
async fn feed_price(
    network: &Network,
    network_name: &str,
    pair: &str,
    at: At,
) -> ChainResult<(Decimal, String)> {
    let feed = network.feeds.get(pair).ok_or_else(|| {
        ChainError::rule(format!(
            "no {pair} price feed is configured on {network_name}"
        ))
    })?;
    let (round, decimals) = read_feed_at(network, pair, feed, at.tag()).await?;
    let price = usd_price(pair, round, decimals, at.time, feed.max_age_seconds)?;
    within_bounds(pair, price, feed)?;
    let source = format!(
        "{pair} feed {} updated at {}",
        feed.address,
        shared_types::time::format_unix(i64::try_from(round.updated_at).unwrap_or(i64::MAX))
            .unwrap_or_default()
    );
    Ok((price, source))
}

/// Refuses a price outside the feed's configured `min_answer`..=`max_answer`. Pure.
pub fn within_bounds(pair: &str, price: Decimal, feed: &Feed) -> ChainResult<()> {
    let below = feed.min_answer.is_some_and(|min| price < min);
    let above = feed.max_answer.is_some_and(|max| price > max);
    if below || above {
        let bound = |b: Option<Decimal>| b.map_or("none".to_owned(), |b| b.normalize().to_string());
        return Err(ChainError::answer(format!(
            "the {pair} price feed answers {}, outside its bounds ({} to {})",
            price.normalize(),
            bound(feed.min_answer),
            bound(feed.max_answer)
        )));
    }
    Ok(())
}

/// A feed's latest round and its decimals, read with `eth_call`.
pub async fn read_feed(
    network: &Network,
    pair: &str,
    feed: &Feed,
) -> ChainResult<(evm::RoundData, u64)> {
    read_feed_at(network, pair, feed, json!("latest")).await
}

/// A feed's round and decimals at the block `tag`.
async fn read_feed_at(
    network: &Network,
    pair: &str,
    feed: &Feed,
    tag: serde_json::Value,
) -> ChainResult<(evm::RoundData, u64)> {
    let call = |data: &str| {
        rpc::call(
            &network.node,
            "eth_call",
            json!([{"to": feed.address, "data": data}, tag]),
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
            started_at: 1_000,
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
            started_at: 1_000,
            updated_at: 1_000,
        };
        assert!(usd_price("EUR/USD", negative, 8, 1_000, 3600).is_err());
    }

    #[test]
    fn bounds_pegs_and_the_sequencer() {
        let d = |s: &str| Decimal::from_str(s).unwrap();
        let feed = Feed {
            address: "0x1".into(),
            max_age_seconds: 3600,
            min_answer: Some(d("0.5")),
            max_answer: Some(d("2")),
            peg_tolerance_bps: 200,
        };
        assert!(within_bounds("EUR/USD", d("1.25"), &feed).is_ok());
        let low = within_bounds("EUR/USD", d("0.1"), &feed).unwrap_err();
        assert!(
            low.public().contains("outside its bounds (0.5 to 2)"),
            "{low}"
        );
        assert!(within_bounds("EUR/USD", d("2.01"), &feed).is_err());
        assert!(on_peg("USDC", d("0.9801"), 200).is_ok());
        assert!(on_peg("USDC", d("1.02"), 200).is_ok());
        let off = on_peg("USDC", d("0.95"), 200).unwrap_err();
        assert!(off.public().contains("off its peg"), "{off}");
        assert!(off.public().contains("more than 2 %"), "{off}");
        let round = |answer, started_at| evm::RoundData {
            answer,
            started_at,
            updated_at: started_at,
        };
        assert!(sequencer_rule("base", round(0, 1_000), 3600, 4_601).is_ok());
        let down = sequencer_rule("base", round(1, 1_000), 3600, 9_000).unwrap_err();
        assert!(down.public().contains("sequencer is down"), "{down}");
        let grace = sequencer_rule("base", round(0, 1_000), 3600, 4_600).unwrap_err();
        assert!(
            grace.public().contains("came back up 3600 s ago"),
            "{grace}"
        );
        assert!(sequencer_rule("base", round(0, 0), 3600, 9_000).is_err());
    }
}
