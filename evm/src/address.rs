//! Addresses and transaction hashes as values, not text: parsed once where they enter (a node's
//! answer, a stored row, a form), compared as bytes, stored lower-case (so that SQL equality is
//! byte equality) and shown to people with their EIP-55 checksum.

use core::fmt;
use core::str::FromStr;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};
use sha3::{Digest, Keccak256};

/// An EVM account or contract address: 20 bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Address(pub [u8; 20]);

/// Well-known EVM burn addresses (lower-case hex without `0x`): funds sent there are
/// unrecoverable by design.
pub const BURN_ADDRESSES: &[&str] = &[
    "000000000000000000000000000000000000dead",
    "dead000000000000000000000000000000000000",
    "dead000000000000000042069420694206942069",
    "ffffffffffffffffffffffffffffffffffffffff",
];

/// Why a text is not an address or a hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotHex {
    /// How many hex digits the value has.
    pub digits: usize,
}

impl fmt::Display for NotHex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not 0x and {} hex digits", self.digits)
    }
}

fn fixed_hex<const N: usize>(text: &str) -> Result<[u8; N], NotHex> {
    let bad = NotHex { digits: N * 2 };
    let digits = text.strip_prefix("0x").ok_or(bad)?;
    if digits.len() != N * 2 {
        return Err(bad);
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(digits, &mut out).map_err(|_| bad)?;
    Ok(out)
}

impl Address {
    /// `0x` and 40 hex digits, in any case. The checksum of a mixed-case address is a person's
    /// concern and is checked where people type them (settlement wallets), not here.
    pub fn parse(text: &str) -> Result<Address, NotHex> {
        fixed_hex(text).map(Address)
    }

    /// The stored form: `0x` and lower-case hex.
    pub fn lower(&self) -> String {
        format!("0x{}", hex::encode(self.0))
    }

    /// The form people and wallets read: EIP-55, each hex letter upper case when the matching
    /// nibble of Keccak-256 of the lower-case hex is 8 or more.
    pub fn checksummed(&self) -> String {
        let lower = hex::encode(self.0);
        let hash = Keccak256::digest(lower.as_bytes());
        let digits: String = lower
            .chars()
            .enumerate()
            .map(|(i, c)| {
                let nibble = (hash[i / 2] >> (if i % 2 == 0 { 4 } else { 0 })) & 0x0f;
                if c.is_ascii_alphabetic() && nibble >= 8 {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect();
        format!("0x{digits}")
    }

    /// Whether it is the zero address (where sent funds are burnt).
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 20]
    }

    /// Whether money sent here is lost by design: a well-known burn address (`0x…dEaD` and its
    /// kin, and all ones).
    pub fn is_burn(&self) -> bool {
        BURN_ADDRESSES.contains(&self.lower().trim_start_matches("0x"))
    }

    /// Whether it is in the precompile and system range (below `0x…10000`): no key holds it.
    pub fn is_system(&self) -> bool {
        self.0[..18].iter().all(|b| *b == 0)
    }

    /// `0x` and 40 hex digits, the surrounding space trimmed, where mixed case must be the
    /// address's EIP-55 checksum (all lower or all upper case carries none); `None` otherwise.
    pub fn parse_checked(text: &str) -> Option<Address> {
        let text = text.trim();
        let address = Address::parse(text).ok()?;
        let hex = text.get(2..)?;
        let mixed = hex.bytes().any(|b| b.is_ascii_lowercase())
            && hex.bytes().any(|b| b.is_ascii_uppercase());
        (!mixed || address.checksummed().get(2..) == Some(hex)).then_some(address)
    }
}

/// EIP-55, as people read it.
impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.checksummed())
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.lower())
    }
}

impl FromStr for Address {
    type Err = NotHex;
    fn from_str(text: &str) -> Result<Self, NotHex> {
        Address::parse(text)
    }
}

/// Written with its checksum: every view shows addresses as wallets do.
impl Serialize for Address {
    fn serialize<S: Serializer>(&self, to: S) -> Result<S::Ok, S::Error> {
        to.serialize_str(&self.checksummed())
    }
}

/// Read from either case (a stored row is lower-case).
impl<'de> Deserialize<'de> for Address {
    fn deserialize<D: Deserializer<'de>>(from: D) -> Result<Self, D::Error> {
        let text = String::deserialize(from)?;
        Address::parse(&text).map_err(de::Error::custom)
    }
}

/// What a payment moves: the network's own coin, or an ERC-20 token at its contract. Stored and
/// written as `native` or the contract's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Token {
    /// The network's coin (ether on Ethereum and its rollups).
    Native,
    /// An ERC-20 contract.
    Erc20(Address),
}

impl Token {
    /// How the coin is written in place of a contract.
    pub const NATIVE: &'static str = "native";

    /// `native`, or a contract address in any case.
    pub fn parse(text: &str) -> Result<Token, NotHex> {
        if text == Token::NATIVE {
            Ok(Token::Native)
        } else {
            Address::parse(text).map(Token::Erc20)
        }
    }

    /// The stored form: `native` or the lower-case contract address.
    pub fn lower(&self) -> String {
        match self {
            Token::Native => Token::NATIVE.to_owned(),
            Token::Erc20(contract) => contract.lower(),
        }
    }
}

/// `native`, or the contract with its checksum.
impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Native => f.write_str(Token::NATIVE),
            Token::Erc20(contract) => fmt::Display::fmt(contract, f),
        }
    }
}

impl Serialize for Token {
    fn serialize<S: Serializer>(&self, to: S) -> Result<S::Ok, S::Error> {
        to.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Token {
    fn deserialize<D: Deserializer<'de>>(from: D) -> Result<Self, D::Error> {
        let text = String::deserialize(from)?;
        Token::parse(&text).map_err(de::Error::custom)
    }
}

/// A transaction (or block) hash: 32 bytes, shown lower-case as nodes and explorers do.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TxHash(pub [u8; 32]);

impl TxHash {
    /// `0x` and 64 hex digits, in any case.
    pub fn parse(text: &str) -> Result<TxHash, NotHex> {
        fixed_hex(text).map(TxHash)
    }

    /// The Keccak-256 of signed transaction bytes: the transaction's hash.
    pub fn of_raw(raw: &[u8]) -> TxHash {
        TxHash(Keccak256::digest(raw).into())
    }
}

impl fmt::Display for TxHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{}", hex::encode(self.0))
    }
}

impl fmt::Debug for TxHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for TxHash {
    type Err = NotHex;
    fn from_str(text: &str) -> Result<Self, NotHex> {
        TxHash::parse(text)
    }
}

impl Serialize for TxHash {
    fn serialize<S: Serializer>(&self, to: S) -> Result<S::Ok, S::Error> {
        to.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TxHash {
    fn deserialize<D: Deserializer<'de>>(from: D) -> Result<Self, D::Error> {
        let text = String::deserialize(from)?;
        TxHash::parse(&text).map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_reads_any_case_and_shows_its_eip55_checksum() {
        // EIP-55's own test vectors.
        for shown in [
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
            "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
            "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
            "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
        ] {
            let address = Address::parse(&shown.to_ascii_lowercase()).unwrap();
            assert_eq!(address.checksummed(), shown);
            assert_eq!(address.to_string(), shown);
            assert_eq!(address.lower(), shown.to_ascii_lowercase());
            assert_eq!(Address::parse(shown), Ok(address));
            let json = serde_json::to_string(&address).unwrap();
            assert_eq!(json, format!("\"{shown}\""));
            assert_eq!(serde_json::from_str::<Address>(&json).unwrap(), address);
        }
    }

    #[test]
    fn anything_else_is_not_an_address_or_a_hash() {
        for bad in [
            "",
            "0x",
            "5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
            "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beae",
            "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaedd",
            "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaeg",
            "0X5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
        ] {
            assert_eq!(Address::parse(bad), Err(NotHex { digits: 40 }), "{bad}");
        }
        assert!(serde_json::from_str::<Address>("42").is_err());
        assert!(TxHash::parse("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed").is_err());
    }

    #[test]
    fn a_token_is_the_coin_or_a_contract() {
        let usdc = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
        assert_eq!(Token::parse("native"), Ok(Token::Native));
        let token = Token::parse(usdc).unwrap();
        assert_eq!(token.lower(), usdc);
        assert_eq!(
            token.to_string(),
            "0x5FbDB2315678afecb367f032d93F642f64180aa3"
        );
        assert_eq!(serde_json::to_string(&Token::Native).unwrap(), "\"native\"");
        assert_eq!(
            serde_json::from_str::<Token>(&format!("\"{usdc}\"")).unwrap(),
            token
        );
        assert!(Token::parse("Native").is_err());
    }

    #[test]
    fn a_hash_is_lower_case_hex() {
        let text = "0x88df016429689c079f3b2f6ad39fa052532c56795b733da78a91ebe6a713944b";
        let hash = TxHash::parse(&text.to_ascii_uppercase().replacen("0X", "0x", 1)).unwrap();
        assert_eq!(hash.to_string(), text);
        assert_eq!(serde_json::to_string(&hash).unwrap(), format!("\"{text}\""));
        assert_eq!(
            TxHash::of_raw(b""),
            TxHash::parse("0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470")
                .unwrap()
        );
    }
}
