//! Random secrets, hashing and constant-time comparison.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// `N` random bytes from the platform's CSPRNG (Web Crypto on workerd).
pub fn random_bytes<const N: usize>() -> Result<[u8; N], getrandom::Error> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)?;
    Ok(bytes)
}

/// A new random token: `prefix` followed by 32 random bytes, base64url without padding.
pub fn random_token(prefix: &str) -> Result<String, getrandom::Error> {
    Ok(format!(
        "{prefix}{}",
        URL_SAFE_NO_PAD.encode(random_bytes::<32>()?)
    ))
}

/// Lower-case hex SHA-256 of a secret. Secrets here carry 256 random bits, so a fast hash is
/// enough: there is no dictionary to attack, and a slow hash would only slow every request.
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
    fn hash_is_hex_sha256() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn compares() {
        assert!(constant_time_eq("abc", "abc"));
        assert!(!constant_time_eq("abc", "abd"));
        assert!(!constant_time_eq("abc", "abcd"));
    }
}

/// Argon2id with OWASP's minimum parameters (19 MiB, 2 passes, 1 lane): slow for guessing,
/// bearable for one login.
fn argon2() -> argon2::Argon2<'static> {
    let params = argon2::Params::new(19 * 1024, 2, 1, None).expect("constant parameters are valid");
    argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
}

/// A PHC string for `password` with a fresh salt. (Admins are created by `xtask`, which hashes
/// with the same parameters; the worker only verifies.)
#[cfg(test)]
pub fn hash_password(password: &str) -> Result<String, String> {
    use argon2::password_hash::{PasswordHasher, SaltString};
    let salt = SaltString::encode_b64(&random_bytes::<16>().map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    argon2()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

/// Whether `password` matches the PHC string (the comparison inside is constant-time).
pub fn verify_password(password: &str, phc: &str) -> bool {
    use argon2::password_hash::{PasswordHash, PasswordVerifier};
    PasswordHash::new(phc)
        .map(|hash| argon2().verify_password(password.as_bytes(), &hash).is_ok())
        .unwrap_or(false)
}

/// A PHC string that matches no password, to spend the same time on unknown accounts.
pub const DUMMY_PASSWORD_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$4k5Ea1YtJQ6DC0UePCEPmzVUbXvV4Xo3yZcD5hXgDWU";

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
        assert!(argon2::password_hash::PasswordHash::new(DUMMY_PASSWORD_HASH).is_ok());
    }
}
