//! Signed EVM transactions: EIP-1559 (type 2) transactions encoded with RLP and signed with
//! secp256k1 over their Keccak-256 hash, as `eth_sendRawTransaction` takes them. Pure; the
//! encoding is checked natively and every signature recovers to its key's address, and the
//! chain tests send what this signs to a real node.

use alloy_rlp::{BufMut, Encodable, Header};
use k256::ecdsa::{RecoveryId, Signature, SigningKey, VerifyingKey};
use sha3::{Digest, Keccak256};

use super::error::{ChainError, ChainResult};

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
    fn signing_payload(&self) -> Vec<u8> {
        self.encode(&[])
    }

    /// Signs it with `key`.
    pub fn sign(&self, key: &SigningKey) -> ChainResult<Signed> {
        let digest = Keccak256::digest(self.signing_payload());
        let (signature, recovery): (Signature, RecoveryId) = key
            .sign_prehash_recoverable(&digest)
            .map_err(|_| ChainError::Config("the transaction could not be signed".to_owned()))?;
        let (r, s) = (signature.r().to_bytes(), signature.s().to_bytes());
        let raw = self.encode(&[&u8::from(recovery.is_y_odd()), &trimmed(&r), &trimmed(&s)]);
        Ok(Signed {
            hash: format!("0x{}", hex::encode(Keccak256::digest(&raw))),
            raw: format!("0x{}", hex::encode(raw)),
        })
    }
}

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
    let point = key.to_encoded_point(false);
    let hash = Keccak256::digest(&point.as_bytes()[1..]);
    format!("0x{}", hex::encode(&hash[12..]))
}

/// An address (`0x` and 40 hex digits) as bytes.
pub fn address_bytes(address: &str) -> ChainResult<[u8; 20]> {
    hex::decode(address.trim_start_matches("0x"))
        .ok()
        .and_then(|b| <[u8; 20]>::try_from(b).ok())
        .ok_or_else(|| ChainError::answer(format!("{address} is not an address")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Anvil's (and Hardhat's) first development account.
    const KEY: &str = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

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
    fn the_signature_recovers_to_the_signer() {
        let key = parse_key(KEY).unwrap();
        let tx = transfer();
        let signed = tx.sign(&key).unwrap();
        let raw = hex::decode(&signed.raw[2..]).unwrap();
        assert_eq!(raw[0], 2);
        assert_eq!(
            signed.hash,
            format!("0x{}", hex::encode(Keccak256::digest(&raw)))
        );
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
}
