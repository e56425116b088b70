//! Bearer credentials (client secrets, access tokens, and other random ids): their format, and
//! the hash that is stored instead of them. They carry 256 random bits, so a fast hash is enough:
//! there is no dictionary to attack, and a slow hash would only slow every request.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Prefix of client secrets (the OAuth `client_secret` of an API client).
pub const CLIENT_SECRET_PREFIX: &str = "sk_live_";

/// Prefix of access tokens issued by the token endpoint.
pub const ACCESS_TOKEN_PREFIX: &str = "prt_";

/// How many random bytes a secret or token carries.
pub const TOKEN_RANDOM_BYTES: usize = 32;

/// `prefix` followed by `random` in base64url without padding (43 characters).
pub fn prefixed_token(prefix: &str, random: &[u8; TOKEN_RANDOM_BYTES]) -> String {
    format!("{prefix}{}", URL_SAFE_NO_PAD.encode(random))
}

/// A client secret (`sk_live_…`) made of `random`, which must come from a CSPRNG.
pub fn client_secret(random: &[u8; TOKEN_RANDOM_BYTES]) -> String {
    prefixed_token(CLIENT_SECRET_PREFIX, random)
}

/// An access token (`prt_…`) made of `random`, which must come from a CSPRNG.
pub fn access_token(random: &[u8; TOKEN_RANDOM_BYTES]) -> String {
    prefixed_token(ACCESS_TOKEN_PREFIX, random)
}

/// Lower-case hex SHA-256 of a secret: the only form in which client secrets, access tokens and
/// session cookies are stored.
pub fn sha256_hex(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Compares two strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_the_standard_vectors() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            sha256_hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn tokens_are_the_prefix_and_43_base64url_characters() {
        assert_eq!(
            client_secret(&[0; 32]),
            format!("sk_live_{}", "A".repeat(43))
        );
        assert_eq!(
            access_token(&[0xff; 32]),
            format!("prt_{}8", "_".repeat(42))
        );
        let mut counting = [0u8; 32];
        for (i, b) in counting.iter_mut().enumerate() {
            *b = i as u8 * 8;
        }
        let token = prefixed_token("evt_", &counting);
        assert_eq!(token, "evt_AAgQGCAoMDhASFBYYGhweICIkJigqLC4wMjQ2ODo8Pg");
        assert_eq!(token.len(), 4 + 43);
    }

    #[test]
    fn compares() {
        assert!(constant_time_eq("abc", "abc"));
        assert!(!constant_time_eq("abc", "abd"));
        assert!(!constant_time_eq("abc", "abcd"));
        assert!(constant_time_eq("", ""));
    }
}
