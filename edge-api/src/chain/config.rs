//! Which EVM networks this deployment can reach, from `PAYRAIL_CHAINS` (a secret: node providers
//! put API keys in their URLs): a JSON object from network name to its JSON-RPC URL, its chain
//! id and the confirmation depth a payment on it needs. Pure; tested natively.
//!
//! ```json
//! {"polygon": {"rpc_url": "https://polygon.example/KEY", "chain_id": 137, "confirmations": 64}}
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

use super::EVM_NETWORKS;

/// Confirmations when a network's configuration names none.
pub const DEFAULT_CONFIRMATIONS: u64 = 12;
/// Most confirmations a network may ask for.
pub const MAX_CONFIRMATIONS: u64 = 1000;

/// One network's node and rules.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// JSON-RPC endpoint (never logged or shown: it may carry a key).
    pub rpc_url: String,
    /// The chain id the node must report (EIP-155).
    pub chain_id: u64,
    /// Blocks on top of a payment's block before it counts.
    #[serde(default = "default_confirmations")]
    pub confirmations: u64,
}

fn default_confirmations() -> u64 {
    DEFAULT_CONFIRMATIONS
}

/// Reads the configuration; the error names what is wrong without echoing URLs.
pub fn parse(text: &str) -> Result<BTreeMap<String, Network>, String> {
    let networks: BTreeMap<String, Network> = serde_json::from_str(text).map_err(|e| {
        format!(
            "PAYRAIL_CHAINS is not a JSON object of networks: {}",
            e.classify_name()
        )
    })?;
    for (name, network) in &networks {
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
        if network.chain_id == 0 {
            return Err(format!("PAYRAIL_CHAINS: {name}.chain_id must be positive"));
        }
        if !(1..=MAX_CONFIRMATIONS).contains(&network.confirmations) {
            return Err(format!(
                "PAYRAIL_CHAINS: {name}.confirmations must be from 1 to {MAX_CONFIRMATIONS}"
            ));
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
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(named), "{text}: {err}");
            assert!(!err.contains("secret.example"), "{err}");
        }
    }
}
