//! The ways to pay a deployment offers, and the sandbox's on-chain artefacts.
//!
//! A way to pay is offered only where something watches its chain. No network has a chain adapter
//! yet, so production offers none (checkout answers 503 and the hosted page says payments are
//! unavailable: a customer must never be shown an address nobody watches). Sandbox offers every
//! way to pay, simulated: deposit addresses and transaction hashes shaped like each network's,
//! from random bytes, with no chain behind them.

pub mod config;
pub mod deposit;
pub mod evm;
pub mod rpc;

use shared_types::quote::{self, Method};

use crate::crypto;
use crate::ctx::Ctx;
use crate::error::{ApiError, OrInternal};

/// The ways to pay this deployment offers, in the order the hosted page lists them.
pub fn methods(ctx: &Ctx) -> &'static [Method] {
    if ctx.sandbox() {
        quote::METHODS
    } else {
        &[]
    }
}

/// The offered ways to pay on the networks where the merchant has a settlement wallet: a
/// payment is taken only where it can also be paid out.
pub fn methods_for(ctx: &Ctx, wallet_networks: &[String]) -> Vec<Method> {
    methods(ctx)
        .iter()
        .copied()
        .filter(|m| wallet_networks.iter().any(|n| n == m.network))
        .collect()
}

/// The offered way to pay with this asset and network among `offered`, if it is one.
pub fn method(offered: &[Method], asset: &str, network: &str) -> Option<Method> {
    offered
        .iter()
        .copied()
        .find(|m| m.asset == asset && m.network == network)
}

const BASE58: &[u8] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
const BECH32: &[u8] = b"qpzry9x8gf2tvdw0s3jn54khce6mua7l";

fn pick(alphabet: &[u8], bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| alphabet[usize::from(*b) % alphabet.len()] as char)
        .collect()
}

/// The EVM networks, whose addresses all derive from one key.
pub const EVM_NETWORKS: &[&str] = &["ethereum", "polygon", "base", "arbitrum"];

/// A fresh deposit address for a session paying on `network`, and the index it was derived at.
/// On an EVM network with `PAYRAIL_EVM_XPUB` configured it is derived by BIP32 at a newly
/// allocated index (never reused); otherwise, in sandbox, a simulated one.
pub async fn deposit_address(ctx: &Ctx, network: &str) -> Result<(String, Option<i64>), ApiError> {
    if let (Some(xpub), true) = (&ctx.evm_xpub, EVM_NETWORKS.contains(&network)) {
        let key = deposit::parse_xpub(xpub).map_err(|e| ApiError::internal("deposit key", e.0))?;
        let index = crate::db::deposits::allocate(&ctx.db, "evm")
            .await
            .or_internal("allocate deposit index")?;
        let address =
            deposit::evm_address(&key, index).map_err(|e| ApiError::internal("derive", e.0))?;
        return Ok((address, Some(index)));
    }
    let address = simulated_address(network).or_internal("generate address")?;
    Ok((address, None))
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
