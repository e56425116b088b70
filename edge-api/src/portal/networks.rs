//! The state of each configured EVM network's node, for the people who run the deployment: the
//! chain id it reports against the configured one, its newest block, or why it cannot be read.
//! The node's URL is never shown.

use serde::Serialize;
use serde_json::json;

use super::Portal;
use crate::chain::{config, rpc};
use crate::error::ApiError;

/// One network as its node answers now.
#[derive(Debug, Serialize)]
pub struct NetworkStatus {
    /// Network name.
    pub network: String,
    /// The configured chain id.
    pub chain_id: u64,
    /// The confirmation depth payments on it need.
    pub confirmations: u64,
    /// `ok`, `wrong_chain` (the node is on another chain) or `unreachable`.
    pub status: &'static str,
    /// The chain id the node reports.
    pub node_chain_id: Option<u64>,
    /// The node's newest block.
    pub head_block: Option<u64>,
    /// Why it cannot be used, when it cannot.
    pub error: Option<String>,
}

/// Every configured network's state; an invalid configuration is one clear error.
pub async fn status(portal: &Portal<'_>) -> Result<Vec<NetworkStatus>, ApiError> {
    let Some(text) = &portal.ctx.chains else {
        return Ok(Vec::new());
    };
    let networks = config::parse(text).map_err(|e| ApiError::internal("PAYRAIL_CHAINS", e))?;
    let mut out = Vec::new();
    for (name, network) in networks {
        let node = async {
            let chain =
                rpc::quantity(&rpc::call(&network.rpc_url, "eth_chainId", json!([])).await?)?;
            let head =
                rpc::quantity(&rpc::call(&network.rpc_url, "eth_blockNumber", json!([])).await?)?;
            Ok::<_, String>((chain, head))
        };
        let (status, node_chain_id, head_block, error) = match node.await {
            Ok((chain, head)) if chain == network.chain_id => ("ok", Some(chain), Some(head), None),
            Ok((chain, head)) => (
                "wrong_chain",
                Some(chain),
                Some(head),
                Some(format!(
                    "the node is on chain {chain}, not the configured {}",
                    network.chain_id
                )),
            ),
            Err(err) => ("unreachable", None, None, Some(err)),
        };
        out.push(NetworkStatus {
            network: name,
            chain_id: network.chain_id,
            confirmations: network.confirmations,
            status,
            node_chain_id,
            head_block,
            error,
        });
    }
    Ok(out)
}
