//! Sealing: AES-256-GCM under the deployment's `PAYRAIL_ENCRYPTION_KEY`, bound to a context
//! (associated data), for what must be kept in clear somewhere but never stored so: webhook
//! signing secrets (context: the endpoint id) and the treasury's signing key (context
//! [`TREASURY_KEY_CONTEXT`]). Format: `v1.` + base64url(nonce ‖ ciphertext ‖ tag).

use aes_gcm::aead::{Aead, KeyInit, Payload};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// The context the treasury key is sealed under.
pub const TREASURY_KEY_CONTEXT: &str = "payrail treasury key";

/// Encrypts `plaintext` under `key` with the caller's fresh random `nonce`, bound to `context`.
pub fn seal(
    key: &[u8; 32],
    nonce: [u8; 12],
    context: &str,
    plaintext: &str,
) -> Result<String, String> {
    let cipher = aes_gcm::Aes256Gcm::new(key.into());
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

/// Decrypts what [`seal`] produced with the same key and context. The error never holds the
/// text.
pub fn open(key: &[u8; 32], context: &str, sealed: &str) -> Result<String, String> {
    let bytes = sealed
        .trim()
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
    String::from_utf8(plain).map_err(|_| "the sealed value is not text".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_round_trips_and_binds_the_context() {
        let key = [7u8; 32];
        let sealed = seal(&key, [1; 12], "ep_1", "whsec_abc").unwrap();
        assert!(sealed.starts_with("v1."));
        assert_eq!(open(&key, "ep_1", &sealed).unwrap(), "whsec_abc");
        assert!(open(&key, "ep_2", &sealed).is_err());
        assert!(open(&[8u8; 32], "ep_1", &sealed).is_err());
        assert_ne!(seal(&key, [2; 12], "ep_1", "whsec_abc").unwrap(), sealed);
        assert!(open(&key, "ep_1", "v1.").is_err());
    }
}
