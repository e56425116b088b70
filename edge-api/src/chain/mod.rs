//! Talking to chains: each EVM network's node (`rpc`, with a call budget), its configuration
//! (`config`, parsed from `PAYRAIL_CHAINS`), what its answers mean as values (`evm`: logs,
//! calls, amounts; `native`: the coin read from balances; `scan`: an address's new blocks;
//! `heads`: whether a node's head moves), prices (`rates`, Chainlink feeds), deposit addresses
//! (`Deriver`, over `payrail_evm::derive`: BIP32 from the custody xpub), signing (`tx`), and the errors of all of it
//! (`error`). Here too: the ways to pay a deployment offers and their quotes, and the
//! sandbox's simulated artefacts.
//!
//! A way to pay is offered only where something watches its chain: a token, or the network's own
//! coin, configured on an EVM network in `PAYRAIL_CHAINS`, with `PAYRAIL_EVM_XPUB` to derive its
//! deposit addresses. Production offers nothing else (with nothing configured, checkout answers
//! 503 and the hosted page says payments are unavailable: a customer is never shown an address
//! nobody watches). Sandbox also offers every other way to pay, simulated: addresses and hashes
//! shaped like each network's, from random bytes, with indicative rates and no chain behind
//! them.
//!
//! Nothing here moves money or writes the books: what the answers mean for the money is
//! `money`'s (the watcher credits what arrives, the treasury settles and refunds). Another chain
//! family (Bitcoin, Solana, Tron) joins as modules beside `evm`, `rates` and `scan` that derive
//! its addresses, quote and read its chain.
//!
//! Where to start: [`methods`] and [`quote`] (what checkout offers), `rpc::call` (every node
//! call), `config::parse` (the networks).

pub mod config;
pub mod custody;
pub mod error;
pub mod evm;
pub mod heads;
pub mod native;
pub mod rates;
pub mod rpc;
pub mod scan;
pub mod tx;

use std::collections::BTreeMap;

use payrail_evm::Token;
use rust_decimal::{Decimal, RoundingStrategy};
use shared_types::quote::{self, Method};

pub use config::EVM_NETWORKS;
pub use error::{ChainError, ChainResult};

use crate::crypto;
use crate::ctx::Ctx;
use crate::db::wallets::Payout;
use crate::error::{ApiError, OrInternal};

/// The configured networks, each with its node, when deposit addresses can be derived for them
/// (`PAYRAIL_CHAINS`, parsed once per event by [`Ctx::chains`]; an unreadable configuration is
/// a logged 500 naming the problem).
pub fn networks(ctx: &Ctx) -> Result<BTreeMap<String, config::Network>, ApiError> {
    if ctx.evm_xpub().is_none() {
        return Ok(BTreeMap::new());
    }
    Ok(ctx
        .chains()?
        .map(|parsed| config::with_nodes(&parsed))
        .unwrap_or_default())
}

/// The configured networks, every node taking its calls from `budget` (one cron task's share).
pub fn networks_within(
    ctx: &Ctx,
    budget: &rpc::Budget,
) -> Result<BTreeMap<String, config::Network>, ApiError> {
    let mut networks = networks(ctx)?;
    for network in networks.values_mut() {
        network.node = network.node.with_budget(budget);
    }
    Ok(networks)
}

/// The node calls one cron run may make (`PAYRAIL_CRON_NODE_CALLS`, 200 to 100,000; 900 by
/// default, inside the paid plan's 1,000 subrequests an invocation) and each task's share of
/// them, 4 : 3 : 1 : 1 : 1, so none of them can starve the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CronShares {
    /// Reading deposit addresses.
    pub watcher: u32,
    /// Following the treasury's transactions and starting settlements.
    pub settlement: u32,
    /// Sending refunds.
    pub refunds: u32,
    /// Reconciling the books with the chain ([`books`]).
    pub books: u32,
    /// Following custody's sweeps ([`sweeps`]).
    pub sweeps: u32,
}

/// Node calls a cron run makes when `PAYRAIL_CRON_NODE_CALLS` does not say.
pub const DEFAULT_CRON_NODE_CALLS: u32 = 900;
/// The fewest a run may be given: every task's share still fits its largest step on a token
/// network (settlement's: following one transaction).
pub const MIN_CRON_NODE_CALLS: u32 = 200;

impl CronShares {
    /// The shares of `total` calls. Pure.
    pub fn of(total: u32) -> CronShares {
        CronShares {
            watcher: total / 10 * 4,
            settlement: total / 10 * 3,
            refunds: total / 10,
            books: total / 10,
            sweeps: total / 10,
        }
    }

    /// This deployment's shares.
    pub fn configured(ctx: &Ctx) -> CronShares {
        let total = ctx
            .cron_node_calls()
            .filter(|n| (MIN_CRON_NODE_CALLS..=100_000).contains(n))
            .unwrap_or(DEFAULT_CRON_NODE_CALLS);
        CronShares::of(total)
    }
}

/// Checks that `network`'s node serves the configured chain (its EIP-155 chain id): a node on
/// another chain is never read for deposits, asked for prices, nor sent the treasury's
/// The block of the transaction whose `receipt` this is, once it is final on `network` with the
/// chain's newest block at `head`: at the network's confirmation depth, and its block still
/// the chain's block at that height on a second read (a reorg, or a backend behind a load
/// balancer that lags, says otherwise). `None` until then: it is read again next run.
pub async fn final_block(
    network: &config::Network,
    receipt: &serde_json::Value,
    head: u64,
) -> ChainResult<Option<u64>> {
    let block = rpc::quantity(&receipt["blockNumber"])?;
    if head.saturating_add(1) < block.saturating_add(network.confirmations) {
        return Ok(None); // mined, not yet deep enough
    }
    let canonical = rpc::call(
        &network.node,
        "eth_getBlockByNumber",
        serde_json::json!([format!("{block:#x}"), false]),
    )
    .await?;
    let same = |v: &serde_json::Value| v.as_str().map(str::to_ascii_lowercase);
    let hash = same(&canonical["hash"]);
    Ok((hash.is_some() && hash == same(&receipt["blockHash"])).then_some(block))
}

/// transactions.
pub async fn check_chain(name: &str, network: &config::Network) -> ChainResult<()> {
    let answer = rpc::call(&network.node, "eth_chainId", serde_json::json!([])).await?;
    let id = rpc::quantity(&answer)?;
    if id != network.chain_id {
        return Err(ChainError::rule(format!(
            "the {name} node is on chain {id}, not the configured {}",
            network.chain_id
        )));
    }
    Ok(())
}

/// Which networks' nodes are on their configured chains, each asked once a run ([`check_chain`])
/// however many items on it the run follows.
#[derive(Default)]
pub struct ChainChecks<'a>(std::collections::BTreeMap<&'a str, bool>);

impl<'a> ChainChecks<'a> {
    /// Whether `name`'s node is on its chain; the first time, asks it, and warns that `what`
    /// on it waits when it is not.
    pub async fn right(&mut self, name: &'a str, network: &config::Network, what: &str) -> bool {
        if let Some(right) = self.0.get(name) {
            return *right;
        }
        let checked = check_chain(name, network).await;
        if let Err(e) = &checked {
            worker::console_warn!("{what} on {name} wait: {e}");
        }
        self.0.insert(name, checked.is_ok());
        checked.is_ok()
    }
}

/// The ways to pay this deployment offers, in the order the hosted page lists them: the watched
/// ones first, then (sandbox only) the simulated ones on networks without a node.
pub fn methods(ctx: &Ctx) -> Result<Vec<Method>, ApiError> {
    let networks = networks(ctx)?;
    let mut out = Vec::new();
    for name in EVM_NETWORKS {
        let Some(network) = networks.get(*name) else {
            continue;
        };
        for asset in config::TOKENS {
            if let Some(token) = network.tokens.get(*asset) {
                out.push(Method {
                    asset,
                    network: name,
                    decimals: token.decimals,
                });
            }
        }
        if network.is_native(config::NATIVE_ASSET) {
            out.push(Method {
                asset: config::NATIVE_ASSET,
                network: name,
                decimals: NATIVE_QUOTE_DECIMALS,
            });
        }
    }
    if ctx.sandbox() {
        out.extend(
            quote::METHODS
                .iter()
                .filter(|m| !networks.contains_key(m.network))
                .copied(),
        );
    }
    Ok(out)
}

/// The offered ways to pay where the merchant can be paid out: a payment is taken only where it
/// can also be settled. That is every way to pay on a network where it has a settlement wallet
/// and, when it chose a network to be paid USDC on ([`Payout::usdc_settlement_network`]) that
/// has CCTP and where it still has a wallet, USDC on every network with CCTP too (the treasury
/// carries it across: [`cctp_networks`]).
pub fn methods_for(ctx: &Ctx, payout: &Payout) -> Result<Vec<Method>, ApiError> {
    Ok(offered_to(methods(ctx)?, payout, &cctp_networks(ctx)?))
}

/// The asset CCTP carries.
pub const CCTP_ASSET: &str = "USDC";

/// The configured networks whose USDC can cross with CCTP (`cctp` configured, which requires
/// `tokens.USDC`), in the order the hosted page lists networks.
pub fn cctp_networks(ctx: &Ctx) -> Result<Vec<&'static str>, ApiError> {
    let networks = networks(ctx)?;
    Ok(EVM_NETWORKS
        .iter()
        .copied()
        .filter(|name| {
            networks
                .get(*name)
                .is_some_and(|n| n.cctp.is_some() && n.tokens.contains_key(CCTP_ASSET))
        })
        .collect())
}

/// [`methods_for`]'s rule over the deployment's ways to pay (`methods`, kept in their order) and
/// its networks with CCTP (`cctp`). Pure.
fn offered_to(methods: Vec<Method>, payout: &Payout, cctp: &[&str]) -> Vec<Method> {
    let has_wallet = |network: &str| payout.networks.iter().any(|n| n == network);
    let across = payout
        .usdc_settlement_network
        .as_deref()
        .is_some_and(|to| has_wallet(to) && cctp.contains(&to));
    methods
        .into_iter()
        .filter(|m| {
            has_wallet(m.network) || (across && m.asset == CCTP_ASSET && cctp.contains(&m.network))
        })
        .collect()
}

/// The offered way to pay with this asset and network among `offered`, if it is one.
pub fn method(offered: &[Method], asset: &str, network: &str) -> Option<Method> {
    offered
        .iter()
        .copied()
        .find(|m| m.asset == asset && m.network == network)
}

/// Decimal places an amount of ether is quoted to (one unit of the last is a tiny fraction of a
/// cent; the full 18 would only make the amount harder to read and type).
pub const NATIVE_QUOTE_DECIMALS: u32 = 8;

/// What a customer is asked to send.
#[derive(Debug, Clone)]
pub struct Quote {
    /// The amount of the asset, rounded up to its decimals.
    pub crypto_amount: Decimal,
    /// Units of the order currency one unit of the asset is worth.
    pub rate: Decimal,
    /// Where the rate came from.
    pub rate_source: String,
    /// On a watched network: what the watch needs.
    pub watched: Option<WatchedQuote>,
}

/// The chain side of a quote on a watched network.
#[derive(Debug, Clone)]
pub struct WatchedQuote {
    /// Token contract, or the network's own coin.
    pub token: Token,
    /// Its decimals (18 for ether).
    pub decimals: u32,
    /// The crypto amount in base units.
    pub base_units: u128,
    /// The newest block when quoted.
    pub head_block: u64,
}

/// Quotes `amount` of `currency` in `method`: on a watched network from a real rate and the
/// node's newest block; simulated (sandbox) from the indicative rates. An error says why the
/// way to pay cannot be offered now (logged here; [`ChainError::public`] is what may be shown).
pub async fn quote(
    ctx: &Ctx,
    method: Method,
    amount: Decimal,
    currency: &str,
) -> ChainResult<Quote> {
    quote_from_chain(ctx, method, amount, currency)
        .await
        .inspect_err(|why| {
            worker::console_warn!("no quote for {} on {}: {why}", method.asset, method.network);
        })
}

async fn quote_from_chain(
    ctx: &Ctx,
    method: Method,
    amount: Decimal,
    currency: &str,
) -> ChainResult<Quote> {
    let networks = networks(ctx).map_err(|e| {
        e.log();
        ChainError::Config(e.description)
    })?;
    let Some(network) = networks.get(method.network) else {
        let crypto_amount = quote::crypto_amount(amount, currency, method).ok_or_else(|| {
            ChainError::rule(format!(
                "no indicative rate for {} in {currency}",
                method.asset
            ))
        })?;
        return Ok(Quote {
            crypto_amount,
            rate: amount
                .checked_div(crypto_amount)
                .ok_or_else(|| ChainError::rule("the indicative rate is out of range"))?,
            rate_source: "indicative (sandbox)".to_owned(),
            watched: None,
        });
    };
    // The contract (or `native`), its decimals, and the places the amount is quoted to.
    let (token, decimals, places) = if network.is_native(method.asset) {
        let decimals = config::NATIVE_DECIMALS;
        (Token::Native, decimals, NATIVE_QUOTE_DECIMALS)
    } else {
        let token = network.tokens.get(method.asset).ok_or_else(|| {
            ChainError::Config(format!(
                "{} is not configured on {}",
                method.asset, method.network
            ))
        })?;
        let contract = payrail_evm::Address::parse(&token.address).map_err(|_| {
            ChainError::Config(format!(
                "{} on {} has no contract address",
                method.asset, method.network
            ))
        })?;
        (Token::Erc20(contract), token.decimals, token.decimals)
    };
    let rate = rates::rate(network, method.network, method.asset, currency, ctx.now()).await?;
    let head =
        rpc::quantity(&rpc::call(&network.node, "eth_blockNumber", serde_json::json!([])).await?)?;
    let crypto_amount = amount
        .checked_div(rate.per_unit)
        .ok_or_else(|| ChainError::answer("the rate is out of range"))?
        .round_dp_with_strategy(places, RoundingStrategy::AwayFromZero)
        .normalize();
    let base_units = evm::to_units(crypto_amount, decimals)
        .ok_or_else(|| ChainError::rule("the amount does not fit the token"))?;
    Ok(Quote {
        crypto_amount,
        rate: rate.per_unit,
        rate_source: rate.source,
        watched: Some(WatchedQuote {
            token,
            decimals,
            base_units,
            head_block: head,
        }),
    })
}

const BASE58: &[u8] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
const BECH32: &[u8] = b"qpzry9x8gf2tvdw0s3jn54khce6mua7l";

fn pick(alphabet: &[u8], bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| alphabet[usize::from(*b) % alphabet.len()] as char)
        .collect()
}

/// Sandbox on a local development node: pays `units` of `token` (or of the network's coin, for
/// the coin) to `deposit` from the demo wallet (`PAYRAIL_DEMO_WALLET`, an
/// account the node itself signs for, as anvil's are), with a real transaction on that chain.
/// Returns its hash.
pub async fn pay_from_demo_wallet(
    ctx: &Ctx,
    network: &str,
    token: Token,
    deposit: &str,
    units: u128,
) -> ChainResult<String> {
    let wallet = match (ctx.demo_wallet(), ctx.sandbox()) {
        (Some(wallet), true) => wallet,
        _ => {
            return Err(ChainError::Config(
                "no demo wallet is configured".to_owned(),
            ))
        }
    };
    let networks = networks(ctx).map_err(|e| {
        e.log();
        ChainError::Config(e.description)
    })?;
    let node = &networks
        .get(network)
        .ok_or_else(|| ChainError::Config(format!("{network} is not configured")))?
        .node;
    let transaction = if token == Token::Native {
        serde_json::json!({"from": wallet, "to": deposit, "value": format!("{units:#x}")})
    } else {
        serde_json::json!({"from": wallet, "to": token.lower(), "data": evm::transfer_call(deposit, units)})
    };
    let hash = rpc::call(
        node,
        "eth_sendTransaction",
        serde_json::json!([transaction]),
    )
    .await?;
    hash.as_str()
        .map(str::to_owned)
        .ok_or_else(|| ChainError::answer("the node's answer is not a transaction hash"))
}

/// What derives the deposit addresses of a network whose addresses are derived (an EVM network
/// with `PAYRAIL_EVM_XPUB` configured), at indexes allocated from its family's counter
/// ([`custody`]).
pub struct Deriver(bip32::XPub);

impl Deriver {
    /// The deriver of `network`'s deposit addresses; `None` where they are simulated.
    pub fn for_network(ctx: &Ctx, network: &str) -> Result<Option<Deriver>, ApiError> {
        if !EVM_NETWORKS.contains(&network) {
            return Ok(None);
        }
        Self::deposit_key(ctx)
    }

    /// The deriver of the deposit key (every EVM network's), if one is configured.
    pub fn deposit_key(ctx: &Ctx) -> Result<Option<Deriver>, ApiError> {
        ctx.evm_xpub()
            .map(|xpub| {
                payrail_evm::derive::parse_xpub(&xpub)
                    .map(Deriver)
                    .map_err(|e| ApiError::internal("deposit key", e.0))
            })
            .transpose()
    }

    /// The counter its indexes are allocated from (`crate::db::deposits`).
    pub fn family(&self) -> &'static str {
        "evm"
    }

    /// The address at `index`.
    pub fn address(&self, index: i64) -> Result<String, ApiError> {
        payrail_evm::derive::evm_address(&self.0, index)
            .map_err(|e| ApiError::internal("derive", e.0))
    }
}

/// A simulated deposit address for `network` (sandbox: nothing watches it).
pub fn simulated(network: &str) -> Result<String, ApiError> {
    simulated_address(network).or_internal("generate address")
}

/// A simulated deposit address in the network's format (sandbox only: nothing watches it).
fn simulated_address(network: &str) -> Result<String, getrandom::Error> {
    let bytes = crypto::random_bytes::<44>()?;
    Ok(match network {
        "bitcoin" => format!("bc1q{}", pick(BECH32, &bytes[..38])),
        "tron" => format!("T{}", pick(BASE58, &bytes[..33])),
        "solana" => pick(BASE58, &bytes[..44]),
        _ => format!("0x{}", hex::encode(&bytes[..20])),
    })
}

/// A transaction hash in the network's format.
pub fn tx_hash(network: &str) -> Result<String, getrandom::Error> {
    let bytes = crypto::random_bytes::<88>()?;
    Ok(match network {
        "bitcoin" | "tron" => hex::encode(&bytes[..32]),
        "solana" => pick(BASE58, &bytes[..88]),
        _ => format!("0x{}", hex::encode(&bytes[..32])),
    })
}

#[cfg(test)]
mod tests {
    use shared_types::quote::Method;

    use super::{offered_to, CronShares, Payout};

    fn way(asset: &'static str, network: &'static str) -> Method {
        Method {
            asset,
            network,
            decimals: 6,
        }
    }

    /// A deployment's ways to pay, in the order `methods` lists them.
    fn deployment() -> Vec<Method> {
        vec![
            way("USDC", "ethereum"),
            way("ETH", "ethereum"),
            way("USDC", "polygon"),
            way("USDT", "polygon"),
            way("USDC", "base"),
            way("ETH", "base"),
            way("USDC", "arbitrum"),
        ]
    }

    fn payout(networks: &[&str], usdc: Option<&str>) -> Payout {
        Payout {
            networks: networks.iter().map(|n| (*n).to_owned()).collect(),
            usdc_settlement_network: usdc.map(str::to_owned),
        }
    }

    fn names(offered: &[Method]) -> Vec<String> {
        offered
            .iter()
            .map(|m| format!("{}:{}", m.asset, m.network))
            .collect()
    }

    /// Polygon, Base and Arbitrum have CCTP; Ethereum does not.
    const CCTP: &[&str] = &["polygon", "base", "arbitrum"];

    #[test]
    fn without_a_choice_only_the_wallets_networks_are_offered() {
        let offered = offered_to(deployment(), &payout(&["base"], None), CCTP);
        assert_eq!(names(&offered), ["USDC:base", "ETH:base"]);
        assert!(offered_to(deployment(), &payout(&[], None), CCTP).is_empty());
    }

    #[test]
    fn a_choice_adds_usdc_on_every_network_with_cctp_in_the_deployments_order() {
        let offered = offered_to(deployment(), &payout(&["base"], Some("base")), CCTP);
        // USDT and ether only where a wallet is; USDC on Ethereum (no CCTP) not at all.
        assert_eq!(
            names(&offered),
            ["USDC:polygon", "USDC:base", "ETH:base", "USDC:arbitrum"]
        );
        // A wallet elsewhere still brings that network's other assets.
        let offered = offered_to(
            deployment(),
            &payout(&["base", "polygon"], Some("base")),
            CCTP,
        );
        assert_eq!(
            names(&offered),
            [
                "USDC:polygon",
                "USDT:polygon",
                "USDC:base",
                "ETH:base",
                "USDC:arbitrum"
            ]
        );
    }

    #[test]
    fn a_choice_counts_only_with_a_wallet_there_and_cctp_there() {
        // The wallet on the chosen network was removed: nothing can be paid out across.
        let offered = offered_to(deployment(), &payout(&["polygon"], Some("base")), CCTP);
        assert_eq!(names(&offered), ["USDC:polygon", "USDT:polygon"]);
        // The chosen network lost its CCTP configuration: nothing is minted there.
        let offered = offered_to(deployment(), &payout(&["ethereum"], Some("ethereum")), CCTP);
        assert_eq!(names(&offered), ["USDC:ethereum", "ETH:ethereum"]);
        // A held institution's merchant: its choice is left out.
        let offered = offered_to(deployment(), &payout(&["base"], Some("base")).held(), CCTP);
        assert_eq!(names(&offered), ["USDC:base", "ETH:base"]);
    }

    #[test]
    fn each_cron_task_has_a_share_that_fits_its_largest_step() {
        let shares = CronShares::of(super::DEFAULT_CRON_NODE_CALLS);
        assert_eq!(
            (
                shares.watcher,
                shares.settlement,
                shares.refunds,
                shares.books,
                shares.sweeps
            ),
            (360, 270, 90, 90, 90)
        );
        assert!(
            shares.watcher + shares.settlement + shares.refunds + shares.books + shares.sweeps
                <= 1000
        );
        // The smallest total allowed still lets every task take its largest step on a token
        // network.
        let least = CronShares::of(super::MIN_CRON_NODE_CALLS);
        // The watcher's share covers a checkout's check and, left over for the top-ups, one
        // top-up check.
        assert!(
            least.watcher
                >= crate::money::watch::MOST_TOKEN_CHECK_CALLS
                    + crate::money::topup::MOST_TOKEN_CHECK_CALLS,
            "{least:?}"
        );
        assert!(
            least.settlement >= crate::money::sends::MOST_FOLLOW_CALLS,
            "{least:?}"
        );
        assert!(
            least.settlement >= crate::money::settle::MOST_GROUP_CALLS,
            "{least:?}"
        );
        assert!(
            least.refunds >= crate::money::refund::send::MOST_SEND_CALLS,
            "{least:?}"
        );
        assert!(
            least.books >= crate::money::books::MOST_NETWORK_CALLS,
            "{least:?}"
        );
        // Following a sweep, after its network's chain id.
        assert!(
            least.sweeps > crate::money::sweeps::MOST_FOLLOW_CALLS,
            "{least:?}"
        );
    }
}
