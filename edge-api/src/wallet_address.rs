//! Settlement wallet addresses, checked per network before they are stored: the most attacked
//! field in payments, so a typo or a pasted address of another chain is refused, never paid to.
//! Pure; the encodings come from well-kept crates (Keccak-256 for EIP-55, base58check, bech32).
//!
//! - EVM networks (Ethereum, Polygon, Base, Arbitrum): `0x` and 20 bytes of hex. All lower or
//!   all upper case is accepted and stored with its EIP-55 checksum; mixed case must be that
//!   checksum. The zero address, the well-known burn addresses (`0x…dEaD` and its kin) and the
//!   precompile and system range (below `0x…10000`) are refused (funds sent there are lost).
//!   Payrail's own addresses and contracts are refused by the caller, which knows them.
//! - Bitcoin: mainnet segwit (bech32 `bc1q…`, bech32m `bc1p…`) or base58check P2PKH (`1…`) and
//!   P2SH (`3…`).
//! - Solana: base58 of 32 bytes.
//! - Tron: base58check of 21 bytes starting 0x41 (`T…`).

use payrail_evm::Address;

/// Longest address text considered at all.
const MAX_LEN: usize = 128;

/// The networks a settlement wallet can be set for.
pub const NETWORKS: &[&str] = &[
    "ethereum", "polygon", "base", "arbitrum", "bitcoin", "solana", "tron",
];

/// The address in its stored form, or why it is refused (the text names the network).
pub fn check(network: &str, address: &str) -> Result<String, String> {
    let address = address.trim();
    if address.is_empty() || address.len() > MAX_LEN {
        return Err(format!("address must be a {} address", label(network)));
    }
    match network {
        _ if is_evm(network) => evm(network, address),
        "bitcoin" => bitcoin(address),
        "solana" => solana(address),
        "tron" => tron(address),
        other => Err(format!(
            "network {other:?} is not one Payrail pays out on; networks are {}",
            NETWORKS.join(", ")
        )),
    }
}

/// Whether `network` is an EVM network (its wallets are `0x` addresses, which may hold code).
pub fn is_evm(network: &str) -> bool {
    matches!(network, "ethereum" | "polygon" | "base" | "arbitrum")
}

fn label(network: &str) -> String {
    let mut chars = network.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// A stored or typed EVM address (`0x` and 40 hex digits, any case) as people read it, with its
/// EIP-55 checksum; text that is not an address is returned as it is (it is shown, never paid).
pub fn eip55(address: &str) -> String {
    Address::parse(address).map_or_else(|_| address.to_owned(), |a| a.checksummed())
}

fn evm(network: &str, address: &str) -> Result<String, String> {
    let bad = || {
        format!(
            "address must be a {} address: 0x and 40 hex digits",
            label(network)
        )
    };
    let hex = address.strip_prefix("0x").ok_or_else(bad)?;
    if hex.len() != 40 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    if hex.bytes().all(|b| b == b'0') {
        return Err("address must not be the zero address: funds sent there are lost".into());
    }
    let parsed = Address::parse(address).map_err(|_| bad())?;
    if parsed.is_burn() {
        return Err(format!(
            "address {address} is a well-known burn address: funds sent there are lost"
        ));
    }
    if parsed.is_system() {
        return Err(format!(
            "address {address} is a precompile or system address, not a wallet: funds sent \
             there are lost"
        ));
    }
    let checksummed = eip55(address);
    let mixed =
        hex.bytes().any(|b| b.is_ascii_lowercase()) && hex.bytes().any(|b| b.is_ascii_uppercase());
    if mixed && checksummed[2..] != *hex {
        return Err(format!(
            "address {address} has a wrong EIP-55 checksum (a mistyped character?); check it \
             against the wallet"
        ));
    }
    Ok(checksummed)
}

fn bitcoin(address: &str) -> Result<String, String> {
    let bad = "address must be a Bitcoin mainnet address (bc1…, 1… or 3…)";
    if address.to_ascii_lowercase().starts_with("bc1") {
        let (hrp, _version, program) =
            bech32::segwit::decode(address).map_err(|_| bad.to_owned())?;
        if hrp != bech32::hrp::BC || !(2..=40).contains(&program.len()) {
            return Err(bad.into());
        }
        return Ok(address.to_ascii_lowercase());
    }
    let bytes = bs58::decode(address)
        .with_check(None)
        .into_vec()
        .map_err(|_| bad.to_owned())?;
    // Version byte 0x00 (P2PKH) or 0x05 (P2SH), then a 20-byte hash.
    match bytes.as_slice() {
        [0x00 | 0x05, rest @ ..] if rest.len() == 20 => Ok(address.to_owned()),
        _ => Err(bad.into()),
    }
}

fn solana(address: &str) -> Result<String, String> {
    let bytes = bs58::decode(address)
        .into_vec()
        .map_err(|_| "address must be a Solana address: base58 of 32 bytes".to_owned())?;
    if bytes.len() != 32 {
        return Err("address must be a Solana address: base58 of 32 bytes".into());
    }
    Ok(address.to_owned())
}

fn tron(address: &str) -> Result<String, String> {
    let bad = "address must be a Tron address (T… in base58check)";
    let bytes = bs58::decode(address)
        .with_check(Some(0x41))
        .into_vec()
        .map_err(|_| bad.to_owned())?;
    if bytes.len() != 21 {
        return Err(bad.into());
    }
    Ok(address.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evm_addresses_carry_their_checksum() {
        // EIP-55's own examples.
        for good in [
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
            "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
            "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
            "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
        ] {
            assert_eq!(check("ethereum", good).unwrap(), good);
            assert_eq!(
                check("polygon", &good.to_ascii_lowercase().replace("0X", "0x")).unwrap(),
                good,
                "lower case is stored checksummed"
            );
        }
        // One letter's case flipped: the checksum catches it.
        assert!(
            check("ethereum", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD")
                .unwrap_err()
                .contains("EIP-55")
        );
        assert!(check("base", "0x0000000000000000000000000000000000000000")
            .unwrap_err()
            .contains("zero"));
        for bad in [
            "5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeA",
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeg",
            "",
        ] {
            assert!(check("arbitrum", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bitcoin_addresses() {
        for good in [
            "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", // BIP-173
            "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0", // BIP-350
            "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2",
            "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy",
        ] {
            assert!(check("bitcoin", good).is_ok(), "{good}");
        }
        for bad in [
            "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5", // checksum
            "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx", // testnet
            "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN3",
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        ] {
            assert!(check("bitcoin", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn solana_and_tron_addresses() {
        assert!(check("solana", "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v").is_ok());
        assert!(check("solana", "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGk").is_err());
        assert!(check("solana", "0OIl").is_err());
        assert!(check("tron", "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t").is_ok());
        assert!(check("tron", "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u").is_err());
        // A Bitcoin base58check address is not a Tron one (wrong version byte).
        assert!(check("tron", "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2").is_err());
        assert!(check("dogecoin", "D1")
            .unwrap_err()
            .contains("networks are"));
    }

    #[test]
    fn burn_and_system_addresses_are_no_wallets() {
        for lost in [
            "0x000000000000000000000000000000000000dEaD",
            "0xdEad000000000000000000000000000000000000",
            "0xdead000000000000000042069420694206942069",
            "0x0000000000000000000000000000000000000001",
            "0x000000000000000000000000000000000000fFfF",
            "0xffffffffffffffffffffffffffffffffffffffff",
        ] {
            let refused = check("polygon", lost).expect_err(lost);
            assert!(refused.contains("funds sent there are lost"), "{refused}");
        }
        assert!(check("polygon", "0x0000000000000000000000000000000000010000").is_ok());
    }
}
