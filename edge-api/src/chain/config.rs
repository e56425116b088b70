//! The networks this deployment reaches, as `PAYRAIL_CHAINS` configures them, each with its node.
//! The text is parsed and checked by `payrail_evm::chains`, the one parser the worker and the
//! operator's tools (`xtask reconcile`, `xtask sweep`) share, so their defaults and rules cannot
//! drift apart; the worker parses it once per event (`Ctx::chains`) and gives each network its
//! JSON-RPC node here ([`Network`]).

use std::collections::BTreeMap;
use std::ops::Deref;

pub use payrail_evm::chains::{
    coin, Feed, DEFAULT_CONFIRMATIONS, DEFAULT_TOKEN_DECIMALS, EVM_NETWORKS, NATIVE_ASSET,
    NATIVE_DECIMALS, TOKENS, WEI_PER_GWEI,
};

#[cfg(test)]
use super::error::{ChainError, ChainResult};
use super::rpc::{self, Node};

/// A configured network (its settings, read through `Deref`) and its JSON-RPC node, with a
/// budget of [`rpc::REQUEST_CALLS`] calls (the URL is never logged or shown: it may carry a key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    /// Its node.
    pub node: Node,
    settings: payrail_evm::chains::Network,
}

impl Deref for Network {
    type Target = payrail_evm::chains::Network;

    fn deref(&self) -> &Self::Target {
        &self.settings
    }
}

/// The networks of a parsed configuration, each with its node.
pub fn with_nodes(
    parsed: &BTreeMap<String, payrail_evm::chains::Network>,
) -> BTreeMap<String, Network> {
    parsed
        .iter()
        .map(|(name, settings)| {
            let network = Network {
                node: Node::new(settings.rpc_url.clone(), rpc::REQUEST_CALLS),
                settings: settings.clone(),
            };
            (name.clone(), network)
        })
        .collect()
}

/// Reads a configuration's text, each network with its node (for the native tests: the worker
/// reads `Ctx::chains`); the error names what is wrong without echoing URLs.
#[cfg(test)]
pub fn parse(text: &str) -> ChainResult<BTreeMap<String, Network>> {
    payrail_evm::chains::parse(text)
        .map(|parsed| with_nodes(&parsed))
        .map_err(ChainError::Config)
}
