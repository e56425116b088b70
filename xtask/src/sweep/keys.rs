//! Custody's keys, from its BIP39 mnemonic: the account key at `m/44'/60'/0'/0` (whose xpub the
//! worker holds as `PAYRAIL_EVM_XPUB`), each deposit's key as its non-hardened child at the
//! index stored with the deposit's watch, and the custody gas address as the last child
//! (2147483647, `edge-api`'s `chain::deposit::MAX_INDEX`), which the deposit allocator never
//! reaches. The mnemonic and the seed are wiped from memory once the account key is derived (k256
//! wipes the keys it drops).

use std::str::FromStr;

use bip32::{ChildNumber, DerivationPath, Prefix, XPrv};
use payrail_evm::k256::ecdsa::SigningKey;
use zeroize::Zeroizing;

/// The account path every deposit derives from.
pub const ACCOUNT_PATH: &str = "m/44'/60'/0'/0";
/// The custody gas address's child index: the largest non-hardened one.
pub const GAS_INDEX: u32 = (1 << 31) - 1;

/// The custody account's private key.
pub struct Custody {
    account: XPrv,
}

/// A key and its address (lower-case `0x` hex).
pub struct Key {
    /// Signs the address's transactions.
    pub signing: SigningKey,
    /// Its address.
    pub address: String,
}

impl Custody {
    /// The account of `mnemonic` (BIP39, English, no passphrase). The error never repeats it.
    pub fn from_mnemonic(mnemonic: &str) -> Result<Custody, String> {
        let words = Zeroizing::new(
            mnemonic
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_ascii_lowercase(),
        );
        let parsed = bip39::Mnemonic::parse_normalized(&words).map_err(|_| {
            "the custody mnemonic on stdin is not a valid BIP39 English mnemonic".to_owned()
        })?;
        let seed = Zeroizing::new(parsed.to_seed_normalized(""));
        drop(parsed);
        let path = DerivationPath::from_str(ACCOUNT_PATH).map_err(|e| e.to_string())?;
        let account = XPrv::derive_from_path(&seed[..], &path)
            .map_err(|_| "the custody account key cannot be derived".to_owned())?;
        Ok(Custody { account })
    }

    /// The account's extended public key (`xpub…`): what the worker's `PAYRAIL_EVM_XPUB` must be.
    pub fn xpub(&self) -> String {
        self.account.public_key().to_string(Prefix::XPUB)
    }

    /// The key of child `index` (a deposit's `derivation_index`).
    pub fn child(&self, index: u32) -> Result<Key, String> {
        let child = ChildNumber::new(index, false)
            .and_then(|n| self.account.derive_child(n))
            .map_err(|_| format!("no child {index} of the custody account"))?;
        let signing = child.private_key().clone();
        let address = payrail_evm::address_of(signing.verifying_key());
        Ok(Key { signing, address })
    }

    /// The custody gas address's key: it funds token deposits' gas.
    pub fn gas(&self) -> Result<Key, String> {
        self.child(GAS_INDEX)
    }
}

/// The custody gas address of `mnemonic`, for the operator to fund (and the tests).
pub fn gas_address(mnemonic: &str) -> Result<String, String> {
    Ok(Custody::from_mnemonic(mnemonic)?.gas()?.address)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ABANDON: &str = "abandon abandon abandon abandon abandon abandon abandon abandon \
                           abandon abandon abandon about";

    #[test]
    fn derives_the_published_account_and_addresses() {
        let custody = Custody::from_mnemonic(ABANDON).unwrap();
        // scripts/dev's (and the tests') PAYRAIL_EVM_XPUB.
        assert_eq!(
            custody.xpub(),
            "xpub6EF8jXqFeFEW5bwMU7RpQtHkzE4KJxcqJtvkCjJumzW8CPpacXkb92ek4WzLQXjL93HycJwTPUAcuNxCqFPKKU5m5Z2Vq4nCyh5CyPeBFFr"
        );
        // The mnemonic's first Ethereum account, published widely.
        assert_eq!(
            custody.child(0).unwrap().address,
            "0x9858effd232b4033e47d90003d41ec34ecaeda94"
        );
        // Anvil's (and Hardhat's) mnemonic: its first three accounts.
        let anvil = Custody::from_mnemonic(
            "  TEST test test test test test test test test test test junk\n",
        )
        .unwrap();
        for (index, address) in [
            (0, "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"),
            (1, "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"),
            (2, "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc"),
        ] {
            assert_eq!(anvil.child(index).unwrap().address, address);
        }
        // The gas address is a child like the others, at the last index.
        let gas = custody.gas().unwrap();
        assert_eq!(gas.address, custody.child(GAS_INDEX).unwrap().address);
        assert_ne!(gas.address, custody.child(0).unwrap().address);
        assert_eq!(gas_address(ABANDON).unwrap(), gas.address);
        // The local custody gas address scripts/local-chain.js funds.
        assert_eq!(gas.address, "0x8848bfc75a28756b521b09afdc120bddddc7d7c9");
        assert!(
            custody.child(GAS_INDEX + 1).is_err(),
            "hardened: not a deposit"
        );
    }

    #[test]
    fn a_bad_mnemonic_is_refused_without_repeating_it() {
        let err = Custody::from_mnemonic("abandon abandon secretword")
            .err()
            .unwrap();
        assert!(!err.contains("secretword"), "{err}");
        assert!(Custody::from_mnemonic("").is_err());
    }
}
