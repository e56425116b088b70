//! Client ids and secrets: generation and the hash stored in D1.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

/// Prefix of client secrets.
pub const SECRET_PREFIX: &str = "sk_live_";

/// A new client secret: 32 random bytes from the OS, base64url.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).expect("the OS random source is available");
    format!("{SECRET_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))
}

/// The stored form of a secret: lower-case hex SHA-256 (the worker computes the same).
pub fn secret_hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}
