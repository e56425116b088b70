//! EVM chains as Payrail reaches them, written once for the worker and the operator's tools: the
//! networks' configuration (`PAYRAIL_CHAINS`, [`chains`]), custody's addresses derived from the
//! deposit key ([`derive`]), and transactions as bytes, for the two signers Payrail has: the worker, which
//! signs the treasury's settlements and refunds (`edge-api`'s `chain::tx`), and the offline
//! custody signer, which sweeps deposits into the treasury (`xtask sweep`). EIP-1559 (type 2)
//! transactions encoded with RLP and signed with secp256k1 over their Keccak-256 hash, as
//! `eth_sendRawTransaction` takes them; addresses of keys; ERC-20 call data. Pure, no I/O, and
//! wasm-friendly; pinned by native tests against published vectors, and the chain tests send
//! what this signs to a real node.

mod address;
pub mod bridge;
pub mod cctp;
pub mod chains;
pub mod derive;

pub use address::{Address, NotHex, Token, TxHash};

use alloy_rlp::{BufMut, Encodable, Header};
pub use k256;
use k256::ecdsa::{RecoveryId, Signature, SigningKey, VerifyingKey};
use sha3::{Digest, Keccak256};

/// An EIP-1559 transaction before signing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eip1559 {
    /// EIP-155 chain id.
    pub chain_id: u64,
    /// The sender's nonce.
    pub nonce: u64,
    /// Tip per gas, in wei.
    pub max_priority_fee_per_gas: u128,
    /// Most paid per gas, in wei.
    pub max_fee_per_gas: u128,
    /// Gas limit.
    pub gas_limit: u64,
    /// The receiver (a contract for a token transfer).
    pub to: [u8; 20],
    /// Wei sent.
    pub value: u128,
    /// Call data.
    pub data: Vec<u8>,
}

/// A signed transaction: what the node takes, and its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// `0x02…`, for `eth_sendRawTransaction`.
    pub raw: String,
    /// Its hash, lower-case `0x` hex.
    pub hash: String,
}

/// The key could not sign (it never says why: nothing about a key is shown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsignable;

impl std::fmt::Display for Unsignable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the transaction could not be signed")
    }
}

impl std::error::Error for Unsignable {}

/// An empty access list.
struct NoAccessList;

impl Encodable for NoAccessList {
    fn encode(&self, out: &mut dyn BufMut) {
        Header {
            list: true,
            payload_length: 0,
        }
        .encode(out);
    }

    fn length(&self) -> usize {
        1
    }
}

/// A 32-byte big-endian integer as RLP takes it: without leading zeros.
fn trimmed(bytes: &[u8]) -> &[u8] {
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    &bytes[zeros..]
}

fn list(fields: &[&dyn Encodable]) -> Vec<u8> {
    let payload_length = fields.iter().map(|f| f.length()).sum();
    let mut out = Vec::with_capacity(payload_length + 9);
    Header {
        list: true,
        payload_length,
    }
    .encode(&mut out);
    for field in fields {
        field.encode(&mut out);
    }
    out
}

impl Eip1559 {
    /// `0x02 ‖ rlp([chain_id, nonce, tip, max fee, gas, to, value, data, access_list,
    /// …signature])`: without a signature, the bytes the signature covers; with one, the raw
    /// transaction.
    fn encode(&self, signature: &[&dyn Encodable]) -> Vec<u8> {
        let (to, data) = (&self.to[..], &self.data[..]);
        let mut fields: Vec<&dyn Encodable> = vec![
            &self.chain_id,
            &self.nonce,
            &self.max_priority_fee_per_gas,
            &self.max_fee_per_gas,
            &self.gas_limit,
            &to,
            &self.value,
            &data,
            &NoAccessList,
        ];
        fields.extend_from_slice(signature);
        let mut out = vec![2];
        out.extend(list(&fields));
        out
    }

    /// The bytes its signature covers.
    pub fn signing_payload(&self) -> Vec<u8> {
        self.encode(&[])
    }

    /// Signs it with `key` (RFC 6979, so the same transaction and key always give the same
    /// bytes; low `s`, as EIP-2 wants).
    pub fn sign(&self, key: &SigningKey) -> Result<Signed, Unsignable> {
        let digest = Keccak256::digest(self.signing_payload());
        let (signature, recovery): (Signature, RecoveryId) = key
            .sign_prehash_recoverable(&digest)
            .map_err(|_| Unsignable)?;
        let (r, s) = (signature.r().to_bytes(), signature.s().to_bytes());
        let raw = self.encode(&[&u8::from(recovery.is_y_odd()), &trimmed(&r), &trimmed(&s)]);
        Ok(Signed {
            hash: format!("0x{}", hex::encode(Keccak256::digest(&raw))),
            raw: format!("0x{}", hex::encode(raw)),
        })
    }
}

/// The address of a public key, lower-case `0x` hex: the last 20 bytes of the Keccak-256 of
/// its uncompressed point.
pub fn address_of(key: &VerifyingKey) -> String {
    let point = key.to_encoded_point(false);
    let hash = Keccak256::digest(&point.as_bytes()[1..]);
    format!("0x{}", hex::encode(&hash[12..]))
}

/// An address (`0x` and 40 hex digits, any case) as bytes.
pub fn address_bytes(address: &str) -> Option<[u8; 20]> {
    hex::decode(address.trim_start_matches("0x"))
        .ok()
        .and_then(|b| <[u8; 20]>::try_from(b).ok())
}

/// An address as a 32-byte ABI word, lower-case hex without `0x`.
fn address_word(address: &str) -> String {
    let hex = address.trim_start_matches("0x").to_ascii_lowercase();
    format!("{hex:0>64}")
}

/// `balanceOf(address)`'s selector.
pub const BALANCE_OF: &str = "0x70a08231";
/// `transfer(address,uint256)`'s selector.
pub const TRANSFER: &str = "0xa9059cbb";

/// The call data of ERC-20 `balanceOf(owner)`, `0x` hex.
pub fn balance_of_call(owner: &str) -> String {
    format!("{BALANCE_OF}{}", address_word(owner))
}

/// The call data of ERC-20 `transfer(to, units)`, `0x` hex.
pub fn transfer_call(to: &str, units: u128) -> String {
    format!("{TRANSFER}{}{units:064x}", address_word(to))
}

/// `allowance(address,address)`'s selector.
pub const ALLOWANCE: &str = "0xdd62ed3e";

/// The call data of ERC-20 `allowance(owner, spender)`, `0x` hex.
pub fn allowance_call(owner: &str, spender: &str) -> String {
    format!(
        "{ALLOWANCE}{}{}",
        address_word(owner),
        address_word(spender)
    )
}

/// `isSanctioned(address)`'s selector: the sanctions oracle's (the interface Chainalysis
/// publishes on EVM networks).
pub const IS_SANCTIONED: &str = "0xdf592f7d";

/// The call data of the sanctions oracle's `isSanctioned(address)`, `0x` hex.
pub fn is_sanctioned_call(address: &str) -> String {
    format!("{IS_SANCTIONED}{}", address_word(address))
}

/// An `isSanctioned` answer (`0x` and hex, as `eth_call` returns it) read: true or false, or why
/// it is neither. Exactly one ABI word holding 0 or 1 is an answer; anything else (no contract
/// at the address, a short or long answer, another number) is refused, never taken as "not
/// listed".
pub fn sanctioned_answer(answer: &str) -> Result<bool, &'static str> {
    let hex = answer
        .strip_prefix("0x")
        .ok_or("its answer is not hex data")?;
    if hex.is_empty() {
        return Err("no contract answers at the configured address");
    }
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("its answer is not one ABI word");
    }
    let (zeros, last) = hex.split_at(63);
    if zeros.bytes().any(|b| b != b'0') {
        return Err("its answer is neither true nor false");
    }
    match last {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err("its answer is neither true nor false"),
    }
}

/// The OP Stack's `GasPriceOracle` predeploy (on Base and every OP Stack chain), which prices
/// the L1 data fee a transaction pays besides its gas.
pub const GAS_PRICE_ORACLE: &str = "0x420000000000000000000000000000000000000f";
/// `getL1FeeUpperBound(uint256)`'s selector (the oracle's, since the Fjord upgrade).
pub const L1_FEE_UPPER_BOUND: &str = "0xf1c7a58b";

/// The call data of the oracle's `getL1FeeUpperBound(unsigned_size)`: the most L1 data fee, in
/// wei, a transaction of that many unsigned bytes pays now.
pub fn l1_fee_upper_bound_call(unsigned_size: u64) -> String {
    format!("{L1_FEE_UPPER_BOUND}{unsigned_size:064x}")
}

/// The most bytes a transfer Payrail signs takes unsigned: every number at its widest, and the
/// call data of an ERC-20 `transfer`. What the L1 data fee is bounded for.
pub fn max_transfer_bytes() -> u64 {
    let widest = Eip1559 {
        chain_id: u64::MAX,
        nonce: u64::MAX,
        max_priority_fee_per_gas: u128::MAX,
        max_fee_per_gas: u128::MAX,
        gas_limit: u64::MAX,
        to: [0xff; 20],
        value: u128::MAX,
        data: vec![0xff; 4 + 32 + 32],
    };
    widest.signing_payload().len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Anvil's (and Hardhat's) first development account.
    const KEY: &str = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

    fn key(text: &str) -> SigningKey {
        SigningKey::from_slice(&hex::decode(text.trim_start_matches("0x")).unwrap()).unwrap()
    }

    #[test]
    fn the_l1_fee_bound_is_asked_for_the_widest_transfer() {
        let selector = Keccak256::digest(b"getL1FeeUpperBound(uint256)");
        assert_eq!(
            L1_FEE_UPPER_BOUND,
            format!("0x{}", hex::encode(&selector[..4]))
        );
        assert_eq!(
            l1_fee_upper_bound_call(0x1c2),
            format!("{L1_FEE_UPPER_BOUND}{:0>64}", "1c2")
        );
        // Any real transfer is no longer than the bound, and the bound is not far above one.
        let real = transfer().signing_payload().len() as u64;
        let widest = max_transfer_bytes();
        assert!(real < widest && widest < 256, "{real} {widest}");
    }

    fn transfer() -> Eip1559 {
        Eip1559 {
            chain_id: 31337,
            nonce: 7,
            max_priority_fee_per_gas: 2_000_000_000,
            max_fee_per_gas: 2_000_000_000,
            gas_limit: 51_234,
            to: address_bytes("0x5fbdb2315678afecb367f032d93f642f64180aa3").unwrap(),
            value: 0,
            data: vec![0xa9, 0x05, 0x9c, 0xbb],
        }
    }

    #[test]
    fn a_key_has_its_published_address() {
        assert_eq!(
            address_of(key(KEY).verifying_key()),
            "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
        );
        assert_eq!(address_bytes("0x12"), None);
        assert_eq!(address_bytes("0xzz"), None);
    }

    #[test]
    fn the_payload_is_the_standard_rlp_list() {
        let payload = transfer().signing_payload();
        // 0x02, then a list of 45 bytes (0xed): chain id 31337 (0x827a69), nonce 7, 2 gwei
        // twice (0x8477359400), gas 51234 (0x82c822), the 20-byte receiver (0x94…), value 0
        // (0x80), 4 bytes of data (0x84…), the empty access list (0xc0).
        let expected = "02ed827a690784773594008477359400\
                        82c822945fbdb2315678afecb367f032d93f642f64180aa3\
                        8084a9059cbbc0";
        assert_eq!(hex::encode(&payload), expected);
    }

    #[test]
    fn signs_the_published_eip1559_vectors_byte_for_byte() {
        // Two of ethereumjs's published EIP-1559 signing vectors (chain 7822, one signature of
        // each y parity): RFC 6979 makes signing deterministic, so every byte must match.
        let vectors = [
            (
                (819, 75_853, 121_212, 35_552, 43_203_529),
                "0x02f870821e8e8203338301284d8301d97c828ae094000000000000000000000000000000\
                 000000aaaa8402933bc980c080a0d067f2167008c59219652f91cbf8788dbca5f771f6e91e2b\
                 7657e85b78b472e0a01d305af9fe81fdba43f0dfcd400ed24dcace0a7e30d4e85701dcaaf484\
                 cd079e",
            ),
            (
                (353, 38_850, 136_295, 32_593, 61_901_619),
                "0x02f86f821e8e8201618297c283021467827f5194000000000000000000000000000000000000\
                 aaaa8403b08b3380c001a004205678f13fc1d7b10feea6513dfa76e24418b6e08097d95c6f93a3\
                 b64e536da01d45ad61bfece43862de2cce7d2575a8c1d08c26c87f3cb5f26d7b0be54a91b2",
            ),
        ];
        let signer = key("8f2a55949038a9610f50fb23b5883af3b4ecb3c3bb792cbcefbd1542c692be63");
        for ((nonce, tip, max_fee, gas_limit, value), raw) in vectors {
            let tx = Eip1559 {
                chain_id: 7822,
                nonce,
                max_priority_fee_per_gas: tip,
                max_fee_per_gas: max_fee,
                gas_limit,
                to: address_bytes("0x000000000000000000000000000000000000aaaa").unwrap(),
                value,
                data: Vec::new(),
            };
            let signed = tx.sign(&signer).unwrap();
            assert_eq!(signed.raw, raw.replace(' ', ""), "nonce {nonce}");
            let bytes = hex::decode(&signed.raw[2..]).unwrap();
            assert_eq!(
                signed.hash,
                format!("0x{}", hex::encode(Keccak256::digest(&bytes)))
            );
        }
    }

    #[test]
    fn the_signature_recovers_to_the_signer() {
        let key = key(KEY);
        let tx = transfer();
        let signed = tx.sign(&key).unwrap();
        let raw = hex::decode(&signed.raw[2..]).unwrap();
        assert_eq!(raw[0], 2);
        // The last three fields: y parity, r, s; r and s are at most 32 bytes each.
        let mut body = &raw[1..];
        let header = Header::decode(&mut body).unwrap();
        assert!(header.list);
        assert_eq!(header.payload_length, body.len());
        let payload = tx.signing_payload();
        let unsigned_len = payload.len() - 1 - 1; // without 0x02 and the short list header
        let mut rest = &body[unsigned_len..];
        let parity = <u8 as alloy_rlp::Decodable>::decode(&mut rest).unwrap();
        let r = Header::decode_bytes(&mut rest, false).unwrap();
        let s = Header::decode_bytes(&mut rest, false).unwrap();
        assert!(rest.is_empty());
        let mut rs = [0u8; 64];
        rs[32 - r.len()..32].copy_from_slice(r);
        rs[64 - s.len()..].copy_from_slice(s);
        let signature = Signature::from_slice(&rs).unwrap();
        assert!(signature.normalize_s().is_none(), "low s (EIP-2)");
        let recovered = VerifyingKey::recover_from_prehash(
            &Keccak256::digest(&payload),
            &signature,
            RecoveryId::new(parity == 1, false),
        )
        .unwrap();
        assert_eq!(address_of(&recovered), address_of(key.verifying_key()));
    }

    #[test]
    fn erc20_call_data_is_the_selector_and_its_words() {
        assert_eq!(
            transfer_call("0x5FbDB2315678afecb367f032d93F642f64180aa3", 1_000_000),
            "0xa9059cbb0000000000000000000000005fbdb2315678afecb367f032d93f642f64180aa3\
             00000000000000000000000000000000000000000000000000000000000f4240"
        );
        assert_eq!(
            balance_of_call("0x5FbDB2315678afecb367f032d93F642f64180aa3"),
            "0x70a082310000000000000000000000005fbdb2315678afecb367f032d93f642f64180aa3"
        );
    }
}
