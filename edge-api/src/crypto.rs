//! Randomness, hashing, passwords and sealing for the worker. The credential rules (token
//! format, stored SHA-256, Argon2id parameters) live in `payrail-credentials`, shared with xtask so
//! the two cannot drift; this module feeds them random bytes from Web Crypto and keeps what only
//! the worker needs (sealing webhook signing secrets with AES-256-GCM).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// Lower-case hex SHA-256 of a secret, the stored form of client secrets, tokens and session
/// cookies.
pub use payrail_credentials::sha256_hex;

/// Compares two strings in time that depends only on their lengths.
pub use payrail_credentials::constant_time_eq;

/// Whether `password` matches the PHC string (the comparison inside is constant-time).
pub use payrail_credentials::verify_password;

/// A PHC string that matches no password, to spend the same time on unknown accounts.
pub use payrail_credentials::DUMMY_PASSWORD_HASH;

/// `N` random bytes from the platform's CSPRNG (Web Crypto on workerd).
pub fn random_bytes<const N: usize>() -> Result<[u8; N], getrandom::Error> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)?;
    Ok(bytes)
}

/// A new random token: `prefix` followed by 32 random bytes, base64url without padding.
pub fn random_token(prefix: &str) -> Result<String, getrandom::Error> {
    Ok(payrail_credentials::prefixed_token(
        prefix,
        &random_bytes::<{ payrail_credentials::TOKEN_RANDOM_BYTES }>()?,
    ))
}

/// A PHC string for `password` with a fresh salt, with the parameters `xtask` shares.
pub fn hash_password(password: &str) -> Result<String, getrandom::Error> {
    Ok(payrail_credentials::hash_password(
        password,
        &random_bytes::<{ payrail_credentials::SALT_BYTES }>()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_the_prefix_and_32_random_bytes() {
        let token = random_token("prt_").unwrap();
        let random = token.strip_prefix("prt_").expect("prefix");
        assert_eq!(URL_SAFE_NO_PAD.decode(random).unwrap().len(), 32);
        assert_ne!(random_token("prt_").unwrap(), token);
    }

    #[test]
    fn hash_is_hex_sha256() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}

/// Encrypts `plaintext` with AES-256-GCM under `key`, bound to `context` (associated data).
/// Output: `v1.` + base64url(nonce ‖ ciphertext ‖ tag).
pub fn seal(key: &[u8; 32], context: &str, plaintext: &str) -> Result<String, String> {
    use aes_gcm::aead::{Aead, KeyInit, Payload};
    let cipher = aes_gcm::Aes256Gcm::new(key.into());
    let nonce = random_bytes::<12>().map_err(|e| e.to_string())?;
    let sealed = cipher
        .encrypt(
            (&nonce).into(),
            Payload {
                msg: plaintext.as_bytes(),
                aad: context.as_bytes(),
            },
        )
        .map_err(|_| "encryption failed".to_owned())?;
    let mut out = nonce.to_vec();
    out.extend_from_slice(&sealed);
    Ok(format!("v1.{}", URL_SAFE_NO_PAD.encode(out)))
}

/// Decrypts what [`seal`] produced with the same key and context.
pub fn open(key: &[u8; 32], context: &str, sealed: &str) -> Result<String, String> {
    use aes_gcm::aead::{Aead, KeyInit, Payload};
    let bytes = sealed
        .strip_prefix("v1.")
        .and_then(|b| URL_SAFE_NO_PAD.decode(b).ok())
        .filter(|b| b.len() > 12)
        .ok_or("not a sealed value")?;
    let (nonce, ciphertext) = bytes.split_at(12);
    let cipher = aes_gcm::Aes256Gcm::new(key.into());
    let plain = cipher
        .decrypt(
            nonce.into(),
            Payload {
                msg: ciphertext,
                aad: context.as_bytes(),
            },
        )
        .map_err(|_| "decryption failed (wrong key or context)".to_owned())?;
    String::from_utf8(plain).map_err(|e| e.to_string())
}

#[cfg(test)]
mod sealed_tests {
    use super::*;

    #[test]
    fn seal_round_trips_and_binds_the_context() {
        let key = [7u8; 32];
        let sealed = seal(&key, "ep_1", "whsec_abc").unwrap();
        assert!(sealed.starts_with("v1."));
        assert_eq!(open(&key, "ep_1", &sealed).unwrap(), "whsec_abc");
        assert!(open(&key, "ep_2", &sealed).is_err());
        assert!(open(&[8u8; 32], "ep_1", &sealed).is_err());
        assert_ne!(
            seal(&key, "ep_1", "whsec_abc").unwrap(),
            sealed,
            "fresh nonce"
        );
    }

    #[test]
    fn passwords_verify_and_the_dummy_matches_nothing() {
        let phc = hash_password("correct horse").unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(verify_password("correct horse", &phc));
        assert!(!verify_password("Correct horse", &phc));
        assert!(!verify_password("", DUMMY_PASSWORD_HASH));
    }
}
