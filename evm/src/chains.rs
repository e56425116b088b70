//! Which EVM networks a deployment can reach, from `PAYRAIL_CHAINS` (a secret: node providers
//! put API keys in their URLs): a JSON object from network name to its JSON-RPC URL, its chain
//! id, the confirmation depth a payment on it needs, the token contracts customers may pay with
//! and the price feeds rates are read from, and whether customers may pay in the network's own
//! coin (`"native": "ETH"`, on the networks whose coin ether is), and optionally a public RPC
//! URL a customer's browser wallet may be asked to add the network with (`public_rpc_url`: shown
//! to customers, so never the node URL above, which may carry a key). Pure; tested natively. One parser for the worker (`edge-api`'s `chain::config`, which gives
//! each network its node) and the operator's tools (`xtask reconcile`, `xtask sweep`), so their
//! defaults and rules cannot drift apart.
//!
//! ```json
//! {"polygon": {"rpc_url": "https://polygon.example/KEY", "chain_id": 137, "confirmations": 64,
//!   "tokens": {"USDC": {"address": "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"}},
//!   "feeds": {"EUR/USD": {"address": "0x73366Fe0AA0Ded304479862808e02506FE556a98",
//!                         "max_age_seconds": 86400}}}}
//! ```

use std::collections::BTreeMap;
use std::str::FromStr;

use rust_decimal::Decimal;
use serde::Deserialize;

use crate::Address;

/// The EVM networks, whose addresses all derive from one key.
pub const EVM_NETWORKS: &[&str] = &["ethereum", "polygon", "base", "arbitrum"];

/// Confirmations when a network's configuration names none.
pub const DEFAULT_CONFIRMATIONS: u64 = 12;
/// Most confirmations a network may ask for.
pub const MAX_CONFIRMATIONS: u64 = 1000;
/// The tokens a network may take payments in.
pub const TOKENS: &[&str] = &["USDC", "USDT"];
/// A token's decimals when its configuration names none (USDC's and USDT's on these networks).
pub const DEFAULT_TOKEN_DECIMALS: u32 = 6;
/// The pairs a price feed may quote: each currency Payrail prices orders in, against USD.
/// `ETH/USD` prices ether and `POL/USD` Polygon's coin (payments and settlement gas), the others
/// the order currencies.
pub const FEED_PAIRS: &[&str] = &[
    "EUR/USD", "GBP/USD", "CHF/USD", "JPY/USD", "ETH/USD", "POL/USD", "USDC/USD", "USDT/USD",
];
/// How far, in basis points, a stablecoin's `COIN/USD` feed may stray from 1 USD before the
/// coin is no longer taken at its peg, when the feed's configuration names no limit.
pub const DEFAULT_PEG_TOLERANCE_BPS: u32 = 200;
/// How long after an L2's sequencer comes back up its prices are still refused, when the
/// configuration names no period (Chainlink's example uses an hour).
pub const DEFAULT_SEQUENCER_GRACE_SECONDS: u64 = 3600;
/// The networks that are L2 rollups with a sequencer, where Chainlink publishes a sequencer
/// uptime feed.
pub const SEQUENCER_NETWORKS: &[&str] = &["base", "arbitrum"];
/// The chain ids of OP Stack chains (Base and Base Sepolia), where a transaction pays an L1
/// data fee besides its gas: a network on one of them must name its `GasPriceOracle`, or the
/// fee would go uncounted. (Arbitrum counts its L1 cost in the gas itself.)
pub const OP_STACK_CHAIN_IDS: &[u64] = &[8453, 84532];
/// The coin customers may pay with natively, and the networks whose own coin it is.
pub const NATIVE_ASSET: &str = "ETH";
/// The networks whose coin is ether (Polygon's is POL, which Payrail does not take).
pub const ETHER_NETWORKS: &[&str] = &["ethereum", "base", "arbitrum"];
/// Ether's decimals (wei).
pub const NATIVE_DECIMALS: u32 = 18;
/// How old a feed's answer may be when its configuration names no limit.
pub const DEFAULT_FEED_AGE_SECONDS: u64 = 3600;
/// Most blocks one `eth_getLogs` request may span when the configuration names no limit.
pub const DEFAULT_LOG_RANGE: u64 = 2000;
/// The most the treasury pays per gas, in gwei, when the configuration names no limit: far
/// above what these networks charge in normal times (Polygon's floor is 25-30 gwei), so only a
/// runaway (a stuck transaction re-priced again and again) meets it.
pub const DEFAULT_MAX_GAS_PRICE_GWEI: u64 = 500;
/// Wei per gwei.
pub const WEI_PER_GWEI: u128 = 1_000_000_000;
/// How many block times a node's head may stand still before its answers are no longer taken
/// as fresh, when the configuration names no number.
pub const DEFAULT_STALE_HEAD_BLOCKS: u64 = 30;
/// Most transfers of the quoted asset one check of a deposit address records, when the
/// configuration names no number; the rest are recorded by the next checks.
pub const DEFAULT_TRANSFERS_PER_CHECK: u64 = 200;

/// The usual time between blocks on `network`, in seconds: Ethereum's 12-second slots, Polygon's
/// and Base's 2 seconds, Arbitrum's sub-second blocks counted as 1.
pub fn default_block_time(network: &str) -> u64 {
    match network {
        "ethereum" => 12,
        "polygon" | "base" => 2,
        _ => 1,
    }
}

/// One network's node and rules.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Its JSON-RPC node's URL (never logged or shown: it may carry a key).
    pub rpc_url: String,
    /// The chain id the node must report (EIP-155).
    pub chain_id: u64,
    /// Blocks on top of a payment's block before it counts.
    #[serde(default = "default_confirmations")]
    pub confirmations: u64,
    /// The tokens customers may pay with, by asset code ([`TOKENS`]).
    #[serde(default)]
    pub tokens: BTreeMap<String, Token>,
    /// Price feeds (Chainlink's `AggregatorV3Interface`) by pair ([`FEED_PAIRS`]).
    #[serde(default)]
    pub feeds: BTreeMap<String, Feed>,
    /// Most blocks one `eth_getLogs` request spans (providers cap it).
    #[serde(default = "default_log_range")]
    pub log_range: u64,
    /// [`NATIVE_ASSET`] when customers may pay in the network's own coin.
    #[serde(default)]
    pub native: Option<String>,
    /// The most the treasury pays per gas, in gwei: a transaction is never signed above it, and
    /// a stuck one stops being re-priced there (its payments are held with the reason).
    #[serde(default = "default_max_gas_price")]
    pub max_gas_price_gwei: u64,
    /// A public JSON-RPC endpoint for the network that the hosted page may hand a browser wallet
    /// which does not know the chain (`wallet_addEthereumChain`). Shown to customers: never a
    /// URL with a key. None: such a wallet is asked to add the network itself.
    #[serde(default)]
    pub public_rpc_url: Option<String>,
    /// Seconds between blocks ([`default_block_time`] when not named).
    #[serde(default)]
    pub block_time_seconds: Option<u64>,
    /// How many block times the node's head may stand still before its answers are not taken
    /// as fresh: nothing is credited, expired or given up on from them until it moves.
    #[serde(default = "default_stale_head_blocks")]
    pub stale_head_blocks: u64,
    /// Most transfers of the quoted asset one check of a deposit address records (a flood of
    /// dust is recorded over several checks, never in one batch).
    #[serde(default = "default_transfers_per_check")]
    pub transfers_per_check: u64,
    /// Chainlink's L2 sequencer uptime feed ([`SEQUENCER_NETWORKS`] only): no price is taken on
    /// the network while its sequencer is down, nor for a grace period after it is back up.
    #[serde(default)]
    pub sequencer_uptime_feed: Option<SequencerFeed>,
    /// An OP Stack chain's `GasPriceOracle` (on Base the predeploy `0x4200…000F`; required on
    /// [`OP_STACK_CHAIN_IDS`]): its `getL1FeeUpperBound` bounds the L1 data fee each treasury
    /// transaction pays besides its gas, reserved and counted in flight with the gas; the
    /// receipt's `l1Fee` is what is booked.
    #[serde(default)]
    pub l1_fee_oracle: Option<String>,
    /// A sanctions oracle with the interface Chainalysis publishes on EVM networks
    /// (`isSanctioned(address) returns (bool)`): every address money comes from or goes to on
    /// the network is screened against it (besides the operator's own list), and an answer that
    /// cannot be read stops the money until it can. None: the network is screened against the
    /// operator's list alone.
    #[serde(default)]
    pub sanctions_oracle: Option<String>,
    /// The network's part in Circle's Cross-Chain Transfer Protocol V2: with it, USDC paid here
    /// may be settled to a merchant's wallet on another network that has it too (burnt here,
    /// minted there). None: what is paid here is settled here.
    #[serde(default)]
    pub cctp: Option<Cctp>,
}

/// How USDC crosses from a network with CCTP: Standard (no fee; the attestation waits for the
/// network's finality) or Fast (attested sooner, for a fee in basis points of the amount).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CctpTransfer {
    /// Finality threshold 2000, no fee.
    #[default]
    Standard,
    /// Finality threshold 1000, a fee of at most [`Cctp::max_fast_fee_bps`].
    Fast,
}

/// A network's CCTP V2 contracts and attestation service (Circle's in production; the project's
/// own on the local chains, with the same interface).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cctp {
    /// Circle's domain for the network (0 Ethereum, 3 Arbitrum, 6 Base, 7 Polygon PoS): not
    /// configured, but taken from the network's name ([`crate::cctp::domain_named`]).
    #[serde(skip)]
    pub domain: u32,
    /// `TokenMessengerV2`: burns on `depositForBurn`, mints for a received message.
    pub token_messenger: String,
    /// `MessageTransmitterV2`: emits the burn's message, takes the attested message
    /// (`receiveMessage`), spends each nonce once.
    pub message_transmitter: String,
    /// The attestation service's base URL (Circle's: `https://iris-api.circle.com`), asked for
    /// the messages burns on this network emitted and for the fee of a route from it.
    pub attestation_url: String,
    /// How USDC leaves this network.
    #[serde(default)]
    pub transfer: CctpTransfer,
    /// Fast only: the most fee paid, in basis points of the amount (at most
    /// [`MAX_FAST_FEE_BPS`]); a quote above it is never paid.
    #[serde(default)]
    pub max_fast_fee_bps: u32,
}

/// The most a network's configuration may let a Fast transfer cost, in basis points (1 %).
pub const MAX_FAST_FEE_BPS: u32 = 100;

/// A URL without credentials, https or (a local node or stand-in in development) http on this
/// machine.
fn https_or_local(url: &url::Url) -> bool {
    url.username().is_empty()
        && url.password().is_none()
        && (url.scheme() == "https"
            || (url.scheme() == "http"
                && matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"))))
}

/// An attestation service's URL: [`https_or_local`], with no query or fragment.
fn attestation_url_ok(text: &str) -> bool {
    url::Url::parse(text)
        .is_ok_and(|u| https_or_local(&u) && u.query().is_none() && u.fragment().is_none())
}

/// An L2 sequencer uptime feed (Chainlink's: answer 0 up, 1 down; `startedAt` when it last
/// changed).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequencerFeed {
    /// The feed's address.
    pub address: String,
    /// How long after the sequencer is back up prices are still refused.
    #[serde(default = "default_sequencer_grace")]
    pub grace_period_seconds: u64,
}

/// The coin a network's gas is paid in: ether, or POL on Polygon.
pub fn coin(network: &str) -> &'static str {
    if network == "polygon" {
        "POL"
    } else {
        NATIVE_ASSET
    }
}

impl Network {
    /// Whether `asset` is paid in the network's own coin here.
    pub fn is_native(&self, asset: &str) -> bool {
        self.native.as_deref() == Some(asset)
    }

    /// The most the treasury pays per gas here, in wei.
    pub fn max_gas_price(&self) -> u128 {
        u128::from(self.max_gas_price_gwei) * WEI_PER_GWEI
    }

    /// Every contract the network's configuration names, each with what it is ("the USDC token
    /// contract", "the EUR/USD price feed", …): none may ever be paid (tokens sent to them are
    /// lost).
    pub fn contracts(&self) -> Vec<(String, &str)> {
        let mut named: Vec<(String, &str)> = Vec::new();
        for (asset, token) in &self.tokens {
            named.push((format!("the {asset} token contract"), &token.address));
        }
        for (pair, feed) in &self.feeds {
            named.push((format!("the {pair} price feed"), &feed.address));
        }
        let single = [
            (
                "the sequencer uptime feed",
                self.sequencer_uptime_feed.as_ref().map(|f| &f.address),
            ),
            ("the L1 fee oracle", self.l1_fee_oracle.as_ref()),
            ("the sanctions oracle", self.sanctions_oracle.as_ref()),
            (
                "the CCTP token messenger",
                self.cctp.as_ref().map(|c| &c.token_messenger),
            ),
            (
                "the CCTP message transmitter",
                self.cctp.as_ref().map(|c| &c.message_transmitter),
            ),
        ];
        for (what, address) in single {
            if let Some(address) = address {
                named.push((what.to_owned(), address));
            }
        }
        named
    }

    /// How long, in seconds, the node's head may stand still and its answers still count as
    /// fresh: [`Network::stale_head_blocks`] block times.
    pub fn stale_after_seconds(&self) -> u64 {
        self.block_time_seconds
            .unwrap_or(1)
            .saturating_mul(self.stale_head_blocks)
    }
}

/// A token contract.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Token {
    /// The contract's address.
    pub address: String,
    /// Its decimals.
    #[serde(default = "default_token_decimals")]
    pub decimals: u32,
}

/// A price feed contract.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Feed {
    /// The aggregator's address.
    pub address: String,
    /// An answer older than this is stale: the ways to pay that need it are not offered.
    #[serde(default = "default_feed_age")]
    pub max_age_seconds: u64,
    /// The least answer taken, in US dollars (a feed stuck at its aggregator's floor, or a
    /// broken one, answers below any real price).
    #[serde(default, deserialize_with = "bound")]
    pub min_answer: Option<Decimal>,
    /// The greatest answer taken, in US dollars.
    #[serde(default, deserialize_with = "bound")]
    pub max_answer: Option<Decimal>,
    /// A stablecoin's feed (`USDC/USD`, `USDT/USD`): how far from 1 USD, in basis points, its
    /// answer may be for the coin to be taken at its peg.
    #[serde(default = "default_peg_tolerance")]
    pub peg_tolerance_bps: u32,
}

/// A bound given as a JSON number or decimal text.
fn bound<'de, D: serde::Deserializer<'de>>(from: D) -> Result<Option<Decimal>, D::Error> {
    use serde::de::Error;
    let text = match Option::<serde_json::Value>::deserialize(from)? {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(serde_json::Value::String(text)) => text,
        Some(serde_json::Value::Number(n)) => n.to_string(),
        Some(_) => return Err(D::Error::custom("a bound is a number")),
    };
    Decimal::from_str(&text)
        .or_else(|_| Decimal::from_scientific(&text))
        .map(Some)
        .map_err(|_| D::Error::custom("a bound is a number"))
}

fn default_peg_tolerance() -> u32 {
    DEFAULT_PEG_TOLERANCE_BPS
}

fn default_sequencer_grace() -> u64 {
    DEFAULT_SEQUENCER_GRACE_SECONDS
}

fn default_confirmations() -> u64 {
    DEFAULT_CONFIRMATIONS
}

fn default_token_decimals() -> u32 {
    DEFAULT_TOKEN_DECIMALS
}

fn default_feed_age() -> u64 {
    DEFAULT_FEED_AGE_SECONDS
}

fn default_log_range() -> u64 {
    DEFAULT_LOG_RANGE
}

fn default_max_gas_price() -> u64 {
    DEFAULT_MAX_GAS_PRICE_GWEI
}

fn default_stale_head_blocks() -> u64 {
    DEFAULT_STALE_HEAD_BLOCKS
}

fn default_transfers_per_check() -> u64 {
    DEFAULT_TRANSFERS_PER_CHECK
}

/// The networks of a configuration, by name.
pub type Chains = BTreeMap<String, Network>;

/// Reads the configuration; the error names what is wrong without echoing URLs.
pub fn parse(text: &str) -> Result<BTreeMap<String, Network>, String> {
    let mut networks: BTreeMap<String, Network> = serde_json::from_str(text).map_err(|e| {
        format!(
            "PAYRAIL_CHAINS is not a JSON object of networks: {}",
            e.classify_name()
        )
    })?;
    for (name, network) in &mut networks {
        if !EVM_NETWORKS.contains(&name.as_str()) {
            return Err(format!(
                "PAYRAIL_CHAINS: {name:?} is not an EVM network Payrail knows ({})",
                EVM_NETWORKS.join(", ")
            ));
        }
        let url = url::Url::parse(&network.rpc_url)
            .map_err(|_| format!("PAYRAIL_CHAINS: {name}.rpc_url is not a URL"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "PAYRAIL_CHAINS: {name}.rpc_url must be http or https"
            ));
        }
        if let Some(public) = &network.public_rpc_url {
            // A public endpoint is https, or http on this machine (a local node in development).
            if !url::Url::parse(public).is_ok_and(|u| https_or_local(&u)) {
                return Err(format!(
                    "PAYRAIL_CHAINS: {name}.public_rpc_url must be an https URL without \
                     credentials (http only on localhost)"
                ));
            }
        }
        if network.chain_id == 0 {
            return Err(format!("PAYRAIL_CHAINS: {name}.chain_id must be positive"));
        }
        if !(1..=MAX_CONFIRMATIONS).contains(&network.confirmations) {
            return Err(format!(
                "PAYRAIL_CHAINS: {name}.confirmations must be from 1 to {MAX_CONFIRMATIONS}"
            ));
        }
        if !(1..=1_000_000).contains(&network.max_gas_price_gwei) {
            return Err(format!(
                "PAYRAIL_CHAINS: {name}.max_gas_price_gwei must be from 1 to 1000000"
            ));
        }
        let block_time = *network
            .block_time_seconds
            .get_or_insert_with(|| default_block_time(name));
        if !(1..=600).contains(&block_time) {
            return Err(format!(
                "PAYRAIL_CHAINS: {name}.block_time_seconds must be from 1 to 600"
            ));
        }
        if !(2..=10_000).contains(&network.stale_head_blocks) {
            return Err(format!(
                "PAYRAIL_CHAINS: {name}.stale_head_blocks must be from 2 to 10000"
            ));
        }
        if !(1..=1_000).contains(&network.transfers_per_check) {
            return Err(format!(
                "PAYRAIL_CHAINS: {name}.transfers_per_check must be from 1 to 1000"
            ));
        }
        if !(1..=100_000).contains(&network.log_range) {
            return Err(format!(
                "PAYRAIL_CHAINS: {name}.log_range must be from 1 to 100000"
            ));
        }
        // A contract's address as strictly as a wallet's: its checksum when in mixed case, and
        // never an address money sent to is lost at.
        let contract = |what: String, address: &str| {
            Address::parse_checked(address)
                .filter(|a| !a.is_zero() && !a.is_burn() && !a.is_system())
                .map(|a| a.checksummed())
                .ok_or_else(|| format!("PAYRAIL_CHAINS: {what} is not a contract address (0x…)"))
        };
        for (asset, token) in &mut network.tokens {
            if !TOKENS.contains(&asset.as_str()) {
                return Err(format!(
                    "PAYRAIL_CHAINS: {name}.tokens.{asset} is not a token Payrail takes ({})",
                    TOKENS.join(", ")
                ));
            }
            token.address = contract(format!("{name}.tokens.{asset}.address"), &token.address)?;
            if token.decimals > 28 {
                return Err(format!(
                    "PAYRAIL_CHAINS: {name}.tokens.{asset}.decimals must be at most 28"
                ));
            }
        }
        if let Some(native) = &network.native {
            if native != NATIVE_ASSET || !ETHER_NETWORKS.contains(&name.as_str()) {
                return Err(format!(
                    "PAYRAIL_CHAINS: {name}.native must be {NATIVE_ASSET:?}, on {} only",
                    ETHER_NETWORKS.join(", ")
                ));
            }
        }
        for (pair, feed) in &mut network.feeds {
            if !FEED_PAIRS.contains(&pair.as_str()) {
                return Err(format!(
                    "PAYRAIL_CHAINS: {name}.feeds.{pair} is not a pair Payrail reads ({})",
                    FEED_PAIRS.join(", ")
                ));
            }
            feed.address = contract(format!("{name}.feeds.{pair}.address"), &feed.address)?;
            if feed.max_age_seconds == 0 {
                return Err(format!(
                    "PAYRAIL_CHAINS: {name}.feeds.{pair}.max_age_seconds must be positive"
                ));
            }
            let positive = |b: &Option<Decimal>| b.is_none_or(|b| b > Decimal::ZERO);
            let ordered = match (feed.min_answer, feed.max_answer) {
                (Some(min), Some(max)) => min < max,
                _ => true,
            };
            if !positive(&feed.min_answer) || !positive(&feed.max_answer) || !ordered {
                return Err(format!(
                    "PAYRAIL_CHAINS: {name}.feeds.{pair}: min_answer and max_answer must be \
                     positive, the least below the greatest"
                ));
            }
            if !(1..=5_000).contains(&feed.peg_tolerance_bps) {
                return Err(format!(
                    "PAYRAIL_CHAINS: {name}.feeds.{pair}.peg_tolerance_bps must be from 1 to 5000"
                ));
            }
        }
        if let Some(oracle) = &mut network.l1_fee_oracle {
            *oracle = contract(format!("{name}.l1_fee_oracle"), oracle)?;
        } else if OP_STACK_CHAIN_IDS.contains(&network.chain_id) {
            return Err(format!(
                "PAYRAIL_CHAINS: {name}.l1_fee_oracle is required on chain {} (an OP Stack \
                 chain charges an L1 data fee): the GasPriceOracle, {}",
                network.chain_id,
                crate::GAS_PRICE_ORACLE
            ));
        }
        if let Some(oracle) = &mut network.sanctions_oracle {
            *oracle = contract(format!("{name}.sanctions_oracle"), oracle)?;
        }
        if let Some(feed) = &mut network.sequencer_uptime_feed {
            if !SEQUENCER_NETWORKS.contains(&name.as_str()) {
                return Err(format!(
                    "PAYRAIL_CHAINS: {name}.sequencer_uptime_feed is for L2 networks only ({})",
                    SEQUENCER_NETWORKS.join(", ")
                ));
            }
            feed.address = contract(
                format!("{name}.sequencer_uptime_feed.address"),
                &feed.address,
            )?;
            if feed.grace_period_seconds > 86_400 {
                return Err(format!(
                    "PAYRAIL_CHAINS: {name}.sequencer_uptime_feed.grace_period_seconds must be \
                     at most 86400"
                ));
            }
        }
        if let Some(cctp) = &mut network.cctp {
            // Every network Payrail knows is a CCTP domain.
            cctp.domain = crate::cctp::domain_named(name)
                .ok_or_else(|| format!("PAYRAIL_CHAINS: {name} is not a CCTP domain"))?
                .id;
            if !network.tokens.contains_key("USDC") {
                return Err(format!(
                    "PAYRAIL_CHAINS: {name}.cctp carries USDC: {name}.tokens.USDC is required"
                ));
            }
            cctp.token_messenger = contract(
                format!("{name}.cctp.token_messenger"),
                &cctp.token_messenger,
            )?;
            cctp.message_transmitter = contract(
                format!("{name}.cctp.message_transmitter"),
                &cctp.message_transmitter,
            )?;
            if !attestation_url_ok(&cctp.attestation_url) {
                return Err(format!(
                    "PAYRAIL_CHAINS: {name}.cctp.attestation_url must be an https URL without \
                     credentials, query or fragment (http only on localhost)"
                ));
            }
            let fee_ok = match cctp.transfer {
                CctpTransfer::Standard => cctp.max_fast_fee_bps == 0,
                CctpTransfer::Fast => (1..=MAX_FAST_FEE_BPS).contains(&cctp.max_fast_fee_bps),
            };
            if !fee_ok {
                return Err(format!(
                    "PAYRAIL_CHAINS: {name}.cctp.max_fast_fee_bps must be from 1 to \
                     {MAX_FAST_FEE_BPS} with \"transfer\": \"fast\", and is not given otherwise"
                ));
            }
        }
    }
    Ok(networks)
}

/// What `serde_json` found wrong, without the text it found it in.
trait Classify {
    fn classify_name(&self) -> &'static str;
}

impl Classify for serde_json::Error {
    fn classify_name(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "unreadable",
            serde_json::error::Category::Syntax => "not JSON",
            serde_json::error::Category::Data => {
                "a member is missing, unknown or of the wrong type"
            }
            serde_json::error::Category::Eof => "cut short",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_networks_with_defaults() {
        let networks = parse(
            r#"{"polygon": {"rpc_url": "https://polygon.example/KEY", "chain_id": 137},
                "base": {"rpc_url": "http://127.0.0.1:8545", "chain_id": 31337, "confirmations": 2}}"#,
        )
        .unwrap();
        assert_eq!(networks["polygon"].confirmations, DEFAULT_CONFIRMATIONS);
        assert_eq!(networks["base"].chain_id, 31337);
        assert!(networks["base"].tokens.is_empty());
        assert_eq!(networks["base"].log_range, DEFAULT_LOG_RANGE);
        assert!(!networks["base"].is_native("ETH"));
        let ether = parse(
            r#"{"base": {"rpc_url": "http://n.example", "chain_id": 84532, "native": "ETH",
                "l1_fee_oracle": "0x420000000000000000000000000000000000000F"}}"#,
        );
        assert!(ether.unwrap()["base"].is_native("ETH"));
        let public = parse(
            r#"{"base": {"rpc_url": "https://n.example/KEY", "chain_id": 8453,
                "l1_fee_oracle": "0x420000000000000000000000000000000000000F",
                "public_rpc_url": "https://mainnet.base.org"}}"#,
        );
        assert_eq!(
            public.unwrap()["base"].public_rpc_url.as_deref(),
            Some("https://mainnet.base.org")
        );
        let with_tokens = parse(
            r#"{"polygon": {"rpc_url": "https://p.example", "chain_id": 137,
                "tokens": {"USDC": {"address": "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"}},
                "feeds": {"EUR/USD": {"address": "0x73366Fe0AA0Ded304479862808e02506FE556a98",
                                      "max_age_seconds": 86400}}}}"#,
        )
        .unwrap();
        let polygon = &with_tokens["polygon"];
        // An address with space around it (a pasted secret) reads as the address.
        let spaced = parse(
            r#"{"polygon": {"rpc_url": "https://p.example", "chain_id": 137,
                "tokens": {"USDC": {"address": " 0x3c499c542cef5e3811e1192ce70d8cc03d5c3359 "}}}}"#,
        )
        .unwrap();
        assert_eq!(
            spaced["polygon"].tokens["USDC"].address,
            "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"
        );
        assert_eq!(polygon.tokens["USDC"].decimals, DEFAULT_TOKEN_DECIMALS);
        assert_eq!(polygon.feeds["EUR/USD"].max_age_seconds, 86400);
        assert_eq!(polygon.feeds["EUR/USD"].min_answer, None);
        assert_eq!(polygon.block_time_seconds, Some(2));
        assert_eq!(polygon.stale_after_seconds(), 60);
        assert_eq!(polygon.transfers_per_check, DEFAULT_TRANSFERS_PER_CHECK);
        let guarded = parse(
            r#"{"base": {"rpc_url": "https://b.example", "chain_id": 8453,
                "l1_fee_oracle": "0x420000000000000000000000000000000000000F",
                "feeds": {"USDC/USD": {"address": "0x7e860098F58bBFC8648a4311b374B1D669a2bc6B",
                                       "min_answer": "0.5", "max_answer": 2,
                                       "peg_tolerance_bps": 100}},
                "sequencer_uptime_feed": {"address": "0xBCF85224fc0756B9Fa45aA7892530B47e10b6433"}}}"#,
        )
        .unwrap();
        let base = &guarded["base"];
        let usdc = &base.feeds["USDC/USD"];
        assert_eq!(usdc.min_answer, Some(Decimal::new(5, 1)));
        assert_eq!(usdc.max_answer, Some(Decimal::from(2)));
        assert_eq!(usdc.peg_tolerance_bps, 100);
        assert!(base
            .l1_fee_oracle
            .as_deref()
            .is_some_and(|o| o.eq_ignore_ascii_case(crate::GAS_PRICE_ORACLE)));
        let sequencer = base.sequencer_uptime_feed.as_ref().unwrap();
        assert_eq!(
            sequencer.grace_period_seconds,
            DEFAULT_SEQUENCER_GRACE_SECONDS
        );
        assert_eq!(base.block_time_seconds, Some(2));
    }

    /// A network with USDC and the given `cctp` member.
    fn with_cctp(name: &str, cctp: &str) -> String {
        format!(
            r#""{name}": {{"rpc_url": "https://x.example", "chain_id": 1,
                "tokens": {{"USDC": {{"address": "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"}}}},
                "cctp": {cctp}}}"#
        )
    }

    const MESSENGER: &str = "0x28b5a0e9C621a5BadaA536219b3a228C8168cf5d";
    const TRANSMITTER: &str = "0x81D40F21F12A8F0E3252Bccb954D722d4c464B64";

    fn cctp(rest: &str) -> String {
        format!(
            r#"{{"token_messenger": "{MESSENGER}",
                "message_transmitter": "{TRANSMITTER}", "attestation_url": "https://iris-api.circle.com"{rest}}}"#
        )
    }

    #[test]
    fn reads_a_networks_cctp() {
        let text = format!(
            "{{{}, {}}}",
            with_cctp("polygon", &cctp("")),
            with_cctp(
                "base",
                &cctp(r#", "transfer": "fast", "max_fast_fee_bps": 2"#)
            )
        );
        let networks = parse(&text).unwrap();
        let polygon = networks["polygon"].cctp.as_ref().unwrap();
        assert_eq!(polygon.domain, 7);
        assert_eq!(networks["base"].cctp.as_ref().unwrap().domain, 6);
        assert_eq!(polygon.transfer, CctpTransfer::Standard);
        assert_eq!(polygon.max_fast_fee_bps, 0);
        assert_eq!(polygon.token_messenger, MESSENGER);
        let base = networks["base"].cctp.as_ref().unwrap();
        assert_eq!(
            (base.transfer, base.max_fast_fee_bps),
            (CctpTransfer::Fast, 2)
        );
        // A local stand-in is reached over http on this machine.
        let local = parse(&format!(
            "{{{}}}",
            with_cctp(
                "base",
                &cctp("").replace("https://iris-api.circle.com", "http://127.0.0.1:8547")
            )
        ))
        .unwrap();
        assert!(local["base"].cctp.is_some());
        assert!(networks.values().all(|n| n.cctp.is_some()));
        let named: Vec<String> = networks["polygon"]
            .contracts()
            .into_iter()
            .map(|(what, address)| format!("{what} {address}"))
            .collect();
        assert_eq!(
            named,
            [
                "the USDC token contract 0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359".to_owned(),
                format!("the CCTP token messenger {MESSENGER}"),
                format!("the CCTP message transmitter {TRANSMITTER}"),
            ]
        );
    }

    #[test]
    fn a_networks_cctp_is_refused_naming_what_is_wrong() {
        let one = |name: &str, cctp: String| format!("{{{}}}", with_cctp(name, &cctp));
        let cases = [
            (
                // USDC is what CCTP carries.
                format!(
                    r#"{{"polygon": {{"rpc_url": "https://x.example", "chain_id": 1, "cctp": {}}}}}"#,
                    cctp("")
                ),
                "polygon.tokens.USDC is required",
            ),
            (
                one("polygon", cctp("").replace(MESSENGER, "0x1234")),
                "polygon.cctp.token_messenger",
            ),
            (
                one(
                    "polygon",
                    cctp("").replace(TRANSMITTER, "0x0000000000000000000000000000000000000000"),
                ),
                "polygon.cctp.message_transmitter",
            ),
            (
                one(
                    "polygon",
                    cctp("").replace("https://iris-api.circle.com", "http://iris.example"),
                ),
                "polygon.cctp.attestation_url",
            ),
            (
                one(
                    "polygon",
                    cctp("").replace("https://iris-api.circle.com", "https://iris.example/?key=1"),
                ),
                "polygon.cctp.attestation_url",
            ),
            (
                one("polygon", cctp(r#", "transfer": "fast""#)),
                "polygon.cctp.max_fast_fee_bps",
            ),
            (
                one(
                    "polygon",
                    cctp(r#", "transfer": "fast", "max_fast_fee_bps": 101"#),
                ),
                "polygon.cctp.max_fast_fee_bps",
            ),
            (
                one("polygon", cctp(r#", "max_fast_fee_bps": 2"#)),
                "polygon.cctp.max_fast_fee_bps",
            ),
            (
                one("polygon", cctp(r#", "transfer": "instant""#)),
                "wrong type",
            ),
            (one("polygon", cctp(r#", "attesters": []"#)), "unknown"),
            (one("polygon", cctp(r#", "domain": 7"#)), "unknown"),
        ];
        for (text, named) in cases {
            let error = parse(&text).unwrap_err();
            assert!(error.contains(named), "{text}: {error}");
        }
    }

    #[test]
    fn refusals_name_the_member_but_never_the_url() {
        for (text, named) in [
            (
                r#"{"dogecoin": {"rpc_url": "https://x.example", "chain_id": 1}}"#,
                "dogecoin",
            ),
            (
                r#"{"polygon": {"rpc_url": "ftp://secret.example", "chain_id": 1}}"#,
                "http",
            ),
            (
                r#"{"polygon": {"rpc_url": "https://x.example", "chain_id": 1,
                    "public_rpc_url": "http://rpc.example"}}"#,
                "polygon.public_rpc_url",
            ),
            (
                r#"{"polygon": {"rpc_url": "https://x.example", "chain_id": 1,
                    "public_rpc_url": "https://user:key@rpc.example"}}"#,
                "polygon.public_rpc_url",
            ),
            (
                r#"{"polygon": {"rpc_url": "https://x.example", "chain_id": 0}}"#,
                "chain_id",
            ),
            (
                r#"{"polygon": {"rpc_url": "https://x.example", "chain_id": 1, "confirmations": 0}}"#,
                "confirmations",
            ),
            (
                r#"{"polygon": {"rpc_url": "https://x.example"}}"#,
                "missing",
            ),
            ("not json", "not JSON"),
            (
                r#"{"polygon": {"rpc_url": "https://x.example", "chain_id": 1,
                    "sequencer_uptime_feed": {"address": "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"}}}"#,
                "L2 networks only",
            ),
            (
                r#"{"polygon": {"rpc_url": "https://x.example", "chain_id": 1,
                    "feeds": {"EUR/USD": {"address": "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359",
                                          "min_answer": 2, "max_answer": 1}}}}"#,
                "min_answer",
            ),
            (
                r#"{"polygon": {"rpc_url": "https://x.example", "chain_id": 1,
                    "stale_head_blocks": 1}}"#,
                "stale_head_blocks",
            ),
            (
                r#"{"polygon": {"rpc_url": "https://x.example", "chain_id": 1,
                    "transfers_per_check": 0}}"#,
                "transfers_per_check",
            ),
            (
                r#"{"polygon": {"rpc_url": "https://x.example", "chain_id": 1, "native": "ETH"}}"#,
                "polygon.native",
            ),
            (
                r#"{"base": {"rpc_url": "https://x.example", "chain_id": 1, "native": "BTC"}}"#,
                "base.native",
            ),
            (
                r#"{"polygon": {"rpc_url": "https://x.example", "chain_id": 1,
                    "tokens": {"DAI": {"address": "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"}}}}"#,
                "DAI",
            ),
            (
                r#"{"polygon": {"rpc_url": "https://x.example", "chain_id": 1,
                    "tokens": {"USDC": {"address": "0x12"}}}}"#,
                "polygon.tokens.USDC.address",
            ),
            (
                r#"{"polygon": {"rpc_url": "https://x.example", "chain_id": 1,
                    "feeds": {"BTC/EUR": {"address": "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"}}}}"#,
                "BTC/EUR",
            ),
            (
                r#"{"base": {"rpc_url": "https://x.example", "chain_id": 8453}}"#,
                "base.l1_fee_oracle is required on chain 8453",
            ),
            (
                r#"{"base": {"rpc_url": "https://x.example", "chain_id": 8453,
                    "l1_fee_oracle": "0x42"}}"#,
                "base.l1_fee_oracle is not a contract address",
            ),
            (
                r#"{"polygon": {"rpc_url": "https://x.example", "chain_id": 1,
                    "tokens": {"USDC": {"address": "0x3C499c542cEF5E3811e1192ce70d8cC03d5c3359"}}}}"#,
                "polygon.tokens.USDC.address is not a contract address",
            ),
            (
                r#"{"polygon": {"rpc_url": "https://x.example", "chain_id": 1,
                    "feeds": {"EUR/USD": {"address": "0x0000000000000000000000000000000000000001"}}}}"#,
                "polygon.feeds.EUR/USD.address is not a contract address",
            ),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(named), "{text}: {err}");
            assert!(!err.contains("secret.example"), "{err}");
        }
    }
}
