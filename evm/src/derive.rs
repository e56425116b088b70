//! Custody's addresses on EVM networks, derived by BIP32 from an extended public key
//! (`PAYRAIL_EVM_XPUB`, the account at `m/44'/60'/0'/0` of the custody wallet): one fresh
//! deposit address per checkout session, at an index allocated once in D1, and the custody gas
//! address at the last index. The worker that serves checkout only ever holds the public key:
//! the private keys stay with custody. One derivation for the worker and the operator's tools.
//! Pure; pinned by native tests.

use std::str::FromStr;

use crate::Address;
use bip32::{ChildNumber, XPub};
use sha3::{Digest, Keccak256};

/// Largest index a non-hardened BIP32 child can have.
pub const MAX_INDEX: i64 = (1 << 31) - 1;

/// The custody gas address is this child of the deposit key: the last non-hardened index, which
/// deposit allocation never reaches.
pub const GAS_ADDRESS_INDEX: i64 = MAX_INDEX;

/// Why an extended public key or an index cannot give an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeriveError(pub String);

/// Checks an extended public key (`xpub…`); an error says what is wrong without echoing it.
pub fn parse_xpub(text: &str) -> Result<XPub, DeriveError> {
    XPub::from_str(text.trim()).map_err(|_| {
        DeriveError("PAYRAIL_EVM_XPUB is not a valid extended public key (xpub…)".to_owned())
    })
}

/// The EIP-55 address of child `index` of `xpub`: Keccak-256 of the uncompressed public key,
/// last 20 bytes.
pub fn evm_address(xpub: &XPub, index: i64) -> Result<String, DeriveError> {
    let index = u32::try_from(index)
        .ok()
        .filter(|i| i64::from(*i) <= MAX_INDEX)
        .ok_or_else(|| DeriveError(format!("deposit index {index} is out of range")))?;
    let child = ChildNumber::new(index, false)
        .and_then(|n| xpub.derive_child(n))
        .map_err(|_| DeriveError(format!("no child {index} of the deposit key")))?;
    let point = child.public_key().to_encoded_point(false);
    let hash = Keccak256::digest(&point.as_bytes()[1..]);
    let mut address = [0u8; 20];
    address.copy_from_slice(&hash[12..]);
    Ok(Address(address).checksummed())
}

/// The custody gas address of the deposit key `xpub` (text), lower case.
pub fn gas_address(xpub: &str) -> Result<String, DeriveError> {
    Ok(evm_address(&parse_xpub(xpub)?, GAS_ADDRESS_INDEX)?.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The account-level xpub (`m/44'/60'/0'/0`) of a BIP39 mnemonic.
    fn xpub_of(mnemonic: &str) -> String {
        let seed = bip39::Mnemonic::parse(mnemonic).unwrap().to_seed("");
        bip32::XPrv::derive_from_path(seed, &"m/44'/60'/0'/0".parse().unwrap())
            .unwrap()
            .public_key()
            .to_string(bip32::Prefix::XPUB)
    }

    #[test]
    fn derives_the_published_addresses_of_well_known_mnemonics() {
        // BIP39's first test mnemonic: its first Ethereum account is published widely.
        let abandon = parse_xpub(&xpub_of(
            "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon \
             abandon about",
        ))
        .unwrap();
        assert_eq!(
            evm_address(&abandon, 0).unwrap(),
            "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"
        );
        // Anvil's (and Hardhat's) default accounts, from their documented mnemonic.
        let anvil = parse_xpub(&xpub_of(
            "test test test test test test test test test test test junk",
        ))
        .unwrap();
        for (index, address) in [
            (0, "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"),
            (1, "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"),
            (2, "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"),
        ] {
            assert_eq!(evm_address(&anvil, index).unwrap(), address);
        }
    }

    #[test]
    fn derives_bip32_public_children_as_published() {
        // BIP32 test vector 2: m/0 is the non-hardened child 0 of the master key.
        let master = parse_xpub(
            "xpub661MyMwAqRbcFW31YEwpkMuc5THy2PSt5bDMsktWQcFF8syAmRUapSCGu8ED9W6oDMSgv6Zz8idoc4a6mr8BDzTJY47LJhkJ8UB7WEGuduB",
        )
        .unwrap();
        let child = master
            .derive_child(ChildNumber::new(0, false).unwrap())
            .unwrap();
        assert_eq!(
            child.to_string(bip32::Prefix::XPUB),
            "xpub69H7F5d8KSRgmmdJg2KhpAK8SR3DjMwAdkxj3ZuxV27CprR9LgpeyGmXUbC6wb7ERfvrnKZjXoUmmDznezpbZb7ap6r1D3tgFxHmwMkQTPH"
        );
    }

    #[test]
    fn refuses_bad_keys_and_indexes() {
        assert!(parse_xpub("xpub-not-a-key").is_err());
        assert!(!parse_xpub("xprv9s21ZrQH143K")
            .unwrap_err()
            .0
            .contains("xprv9s"));
        let key = parse_xpub(
            "xpub661MyMwAqRbcFW31YEwpkMuc5THy2PSt5bDMsktWQcFF8syAmRUapSCGu8ED9W6oDMSgv6Zz8idoc4a6mr8BDzTJY47LJhkJ8UB7WEGuduB",
        )
        .unwrap();
        assert!(evm_address(&key, -1).is_err());
        assert!(evm_address(&key, MAX_INDEX + 1).is_err());
        assert!(evm_address(&key, MAX_INDEX).is_ok());
    }
}
