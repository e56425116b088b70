//! Randomness, hashing, passwords and sealing for the worker. The credential rules (token
//! format, stored SHA-256, Argon2id parameters) live in `payrail-credentials`, shared with xtask so
//! the two cannot drift; this module feeds them random bytes from Web Crypto and keeps what only
//! the worker needs (sealing webhook signing secrets with AES-256-GCM).

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
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;

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

/// Encrypts `plaintext` with AES-256-GCM under `key` and a fresh nonce, bound to `context`.
pub fn seal(key: &[u8; 32], context: &str, plaintext: &str) -> Result<String, String> {
    let nonce = random_bytes::<12>().map_err(|e| e.to_string())?;
    payrail_credentials::sealed::seal(key, nonce, context, plaintext)
}

/// Decrypts what [`seal`] produced with the same key and context.
pub use payrail_credentials::sealed::open;

#[cfg(test)]
mod password_tests {
    use super::*;

    #[test]
    fn passwords_verify_and_the_dummy_matches_nothing() {
        let phc = hash_password("correct horse").unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(verify_password("correct horse", &phc));
        assert!(!verify_password("Correct horse", &phc));
        assert!(!verify_password("", DUMMY_PASSWORD_HASH));
    }
}
