//! The state of each configured EVM network's node, for the people who run the deployment: the
//! chain id it reports against the configured one, its newest block, or why it cannot be read.
//! The node's URL is never shown.

use payrail_evm::Token;
use serde::Serialize;
use serde_json::json;

use super::Portal;
use rust_decimal::Decimal;

use crate::chain::rpc::RpcError;
use crate::chain::{self, config, rates, rpc, ChainError};
use crate::error::ApiError;
use crate::money::treasury;

/// One network as its node answers now.
#[derive(Debug, Serialize)]
pub struct NetworkStatus {
    /// Network name.
    pub network: String,
    /// The configured chain id.
    pub chain_id: u64,
    /// The confirmation depth payments on it need.
    pub confirmations: u64,
    /// `ok`, `stale` (its head has stood still for longer than the network allows: nothing is
    /// decided on its answers), `wrong_chain` (the node is on another chain) or `unreachable`.
    pub status: &'static str,
    /// The chain id the node reports.
    pub node_chain_id: Option<u64>,
    /// The node's newest block.
    pub head_block: Option<u64>,
    /// Why it cannot be used, when it cannot.
    pub error: Option<String>,
    /// The tokens customers may pay with on it.
    pub tokens: Vec<TokenView>,
    /// Its price feeds, as they answer now.
    pub feeds: Vec<FeedStatus>,
    /// The treasury's balances here, when a treasury key is configured.
    pub treasury: Option<TreasuryView>,
}

/// The treasury on one network: the hot wallet settlements and refunds are paid from.
#[derive(Debug, Serialize)]
pub struct TreasuryView {
    /// Its address (EIP-55).
    pub address: String,
    /// What it holds of the network's coin (gas) and of each configured token.
    pub balances: Vec<BalanceView>,
}

/// One balance.
#[derive(Debug, Serialize)]
pub struct BalanceView {
    /// Asset code (the network's coin: ETH, or POL on Polygon).
    pub asset: String,
    /// The amount, or `null` when the node could not say.
    pub amount: Option<String>,
}

/// A configured token.
#[derive(Debug, Serialize)]
pub struct TokenView {
    /// Asset code.
    pub asset: String,
    /// The contract, or `native` for the network's own coin.
    pub address: String,
    /// Its decimals.
    pub decimals: u32,
}

/// A price feed as it answers now.
#[derive(Debug, Serialize)]
pub struct FeedStatus {
    /// `CUR/USD`.
    pub pair: String,
    /// The aggregator.
    pub address: String,
    /// `ok`, `stale` (older than allowed: the ways to pay that need it are not offered) or
    /// `unreadable`.
    pub status: &'static str,
    /// US dollars per unit of the currency, when read.
    pub answer: Option<String>,
    /// When the answer was last updated.
    pub updated_at: Option<String>,
    /// How old an answer may be.
    pub max_age_seconds: u64,
    /// Why it cannot be used, when it cannot.
    pub error: Option<String>,
}

/// Every configured network's state, with the treasury's balances as its node answers now; an
/// invalid configuration is one clear error.
pub async fn status(portal: &Portal<'_>) -> Result<Vec<NetworkStatus>, ApiError> {
    status_of(portal, true).await
}

/// The same, the treasury's balances read from its node only when `read_treasury` (the
/// overview shows the books' figure instead: no node call per balance on every view).
pub async fn status_of(
    portal: &Portal<'_>,
    read_treasury: bool,
) -> Result<Vec<NetworkStatus>, ApiError> {
    let Some(parsed) = portal.ctx.chains()? else {
        return Ok(Vec::new());
    };
    let networks = config::with_nodes(&parsed);
    let treasury = if read_treasury {
        treasury::treasury(portal.ctx)?.map(|t| t.address)
    } else {
        None
    };
    let mut out = Vec::new();
    for (name, network) in networks {
        let node = async {
            let chain = rpc::quantity(&rpc::call(&network.node, "eth_chainId", json!([])).await?)?;
            let head = rpc::head(&network.node).await?;
            Ok::<_, RpcError>((chain, head))
        };
        let (status, node_chain_id, head_block, error) = match node.await {
            Ok((chain, head)) if chain == network.chain_id => {
                // A head that stands still is recorded and judged as the watcher judges it.
                match chain::heads::fresh(portal.ctx, &name, &network, head).await {
                    Err(stale @ ChainError::StaleHead(_)) => {
                        ("stale", Some(chain), Some(head), Some(stale.public()))
                    }
                    _ => ("ok", Some(chain), Some(head), None),
                }
            }
            Ok((chain, head)) => (
                "wrong_chain",
                Some(chain),
                Some(head),
                Some(format!(
                    "the node is on chain {chain}, not the configured {}",
                    network.chain_id
                )),
            ),
            Err(err) => ("unreachable", None, None, Some(err.public())),
        };
        let tokens = network
            .tokens
            .iter()
            .map(|(asset, token)| TokenView {
                asset: asset.clone(),
                address: token.address.clone(),
                decimals: token.decimals,
            })
            .chain(network.native.iter().map(|asset| TokenView {
                asset: asset.clone(),
                address: Token::NATIVE.to_owned(),
                decimals: config::NATIVE_DECIMALS,
            }))
            .collect();
        let mut feeds = Vec::new();
        for (pair, feed) in &network.feeds {
            let read = if matches!(status, "ok" | "stale") {
                rates::read_feed(&network, pair, feed).await
            } else {
                Err(ChainError::rule("the node cannot be used"))
            };
            let (status, answer, updated_at, error) = match read {
                Ok((round, decimals)) => {
                    let fresh =
                        rates::usd_price(pair, round, decimals, portal.now, feed.max_age_seconds)
                            .and_then(|price| rates::within_bounds(pair, price, feed));
                    let answer = u32::try_from(decimals)
                        .ok()
                        .and_then(|d| Decimal::try_from_i128_with_scale(round.answer, d).ok())
                        .map(|d| d.normalize().to_string());
                    let updated = i64::try_from(round.updated_at)
                        .ok()
                        .and_then(shared_types::time::format_unix);
                    match fresh {
                        Ok(_) => ("ok", answer, updated, None),
                        Err(why @ ChainError::Stale(_)) => {
                            ("stale", answer, updated, Some(why.public()))
                        }
                        Err(why) => ("unreadable", answer, updated, Some(why.public())),
                    }
                }
                Err(why) => ("unreadable", None, None, Some(why.public())),
            };
            feeds.push(FeedStatus {
                pair: pair.clone(),
                address: feed.address.clone(),
                status,
                answer,
                updated_at,
                max_age_seconds: feed.max_age_seconds,
                error,
            });
        }
        let treasury = match &treasury {
            Some(address) if matches!(status, "ok" | "stale") => {
                Some(treasury_view(&name, &network, address).await)
            }
            _ => None,
        };
        out.push(NetworkStatus {
            treasury,
            network: name,
            chain_id: network.chain_id,
            confirmations: network.confirmations,
            status,
            node_chain_id,
            head_block,
            error,
            tokens,
            feeds,
        });
    }
    Ok(out)
}

/// The treasury's balances on `network`.
async fn treasury_view(name: &str, network: &config::Network, address: &str) -> TreasuryView {
    let mut balances = vec![BalanceView {
        asset: config::coin(name).to_owned(),
        amount: treasury::balance(&network.node, address, Token::Native)
            .await
            .ok()
            .and_then(|wei| chain::evm::from_units(wei, config::NATIVE_DECIMALS))
            .map(|a| a.to_string()),
    }];
    for (asset, token) in &network.tokens {
        balances.push(BalanceView {
            asset: asset.clone(),
            amount: async {
                let contract = payrail_evm::Address::parse(&token.address).ok()?;
                treasury::balance(&network.node, address, Token::Erc20(contract))
                    .await
                    .ok()
            }
            .await
            .and_then(|units| chain::evm::from_units(units, token.decimals))
            .map(|a| a.to_string()),
        });
    }
    TreasuryView {
        address: crate::wallet_address::eip55(address),
        balances,
    }
}
