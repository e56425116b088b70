//! Signed EVM transactions: EIP-1559 (type 2) transactions encoded with RLP and signed with
//! secp256k1 over their Keccak-256 hash, as `eth_sendRawTransaction` takes them. The encoding
//! and signing are `payrail-evm`'s, shared with the offline custody signer (`xtask sweep`) and
//! pinned there by published vectors; this module adds the worker's key handling and errors.

pub use payrail_evm::{Eip1559, Signed};

use k256::ecdsa::{SigningKey, VerifyingKey};

use super::error::{ChainError, ChainResult};

/// A private key from 64 hex digits (with or without `0x`); the error never repeats it.
pub fn parse_key(text: &str) -> ChainResult<SigningKey> {
    let bytes = hex::decode(text.trim().trim_start_matches("0x"))
        .ok()
        .filter(|b| b.len() == 32)
        .ok_or_else(|| ChainError::Config("the key is not 32 bytes of hex".to_owned()))?;
    SigningKey::from_slice(&bytes)
        .map_err(|_| ChainError::Config("the key is not a valid secp256k1 key".to_owned()))
}

/// The address of a public key, lower-case `0x` hex.
pub fn address_of(key: &VerifyingKey) -> String {
    payrail_evm::address_of(key)
}

/// Signs `tx` with `key`.
pub fn sign(tx: &Eip1559, key: &SigningKey) -> ChainResult<Signed> {
    tx.sign(key).map_err(|e| ChainError::Config(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Anvil's (and Hardhat's) first development account.
    const KEY: &str = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

    #[test]
    fn a_key_has_its_published_address() {
        let key = parse_key(KEY).unwrap();
        assert_eq!(
            address_of(key.verifying_key()),
            "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
        );
        assert!(parse_key("0x12").is_err());
        let zero = "0".repeat(64);
        let err = parse_key(&zero).unwrap_err().to_string();
        assert!(!err.contains(&zero));
    }
}
