//! Portal admin passwords: Argon2id with OWASP's minimum parameters (19 MiB, 2 passes, 1 lane),
//! slow for guessing and bearable for one login. xtask hashes (it creates admins), the worker
//! verifies; both take the parameters from here.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

/// Argon2id memory cost in KiB (19 MiB).
pub const ARGON2_MEMORY_KIB: u32 = 19 * 1024;

/// Argon2id time cost: passes over the memory.
pub const ARGON2_PASSES: u32 = 2;

/// Argon2id parallelism: lanes.
pub const ARGON2_LANES: u32 = 1;

/// Length of the random salt [`hash_password`] takes.
pub const SALT_BYTES: usize = 16;

/// A PHC string with these parameters that matches no password: verifying against it spends the
/// same time on an unknown account as on a known one.
pub const DUMMY_PASSWORD_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$4k5Ea1YtJQ6DC0UePCEPmzVUbXvV4Xo3yZcD5hXgDWU";

/// The hasher: Argon2id, version 0x13, with the parameters above.
fn argon2() -> Argon2<'static> {
    let params = Params::new(ARGON2_MEMORY_KIB, ARGON2_PASSES, ARGON2_LANES, None)
        .expect("constant parameters are valid");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// The PHC string (`$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>`) of `password` under `salt`,
/// which must be fresh random bytes from a CSPRNG.
///
/// # Panics
///
/// Never in practice: the parameters are constant and valid, a 16-byte salt is within Argon2's
/// bounds, and only a password longer than 4 GiB would be refused.
pub fn hash_password(password: &str, salt: &[u8; SALT_BYTES]) -> String {
    let salt = SaltString::encode_b64(salt).expect("16 bytes are a valid salt");
    argon2()
        .hash_password(password.as_bytes(), &salt)
        .expect("hashing with valid parameters succeeds")
        .to_string()
}

/// Whether `password` matches the PHC string `phc` (the comparison inside is constant-time).
/// False for anything that is not a PHC string this crate can check.
pub fn verify_password(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc)
        .map(|hash| argon2().verify_password(password.as_bytes(), &hash).is_ok())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_carry_the_parameters() {
        let phc = hash_password("correct horse", &[1; SALT_BYTES]);
        assert!(
            phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$AQEBAQEBAQEBAQEBAQEBAQ$"),
            "{phc}"
        );
        assert_eq!(phc, hash_password("correct horse", &[1; SALT_BYTES]));
        assert_ne!(phc, hash_password("correct horse", &[2; SALT_BYTES]));
        assert!(verify_password("correct horse", &phc));
        assert!(!verify_password("Correct horse", &phc));
        assert!(!verify_password("correct horse", "not a phc string"));
    }

    #[test]
    fn the_dummy_has_the_parameters_and_matches_nothing() {
        let dummy = PasswordHash::new(DUMMY_PASSWORD_HASH).expect("a PHC string");
        let params = Params::try_from(&dummy).expect("argon2 parameters");
        assert_eq!(dummy.algorithm, Algorithm::Argon2id.ident());
        assert_eq!(dummy.version, Some(Version::V0x13 as u32));
        assert_eq!(
            (params.m_cost(), params.t_cost(), params.p_cost()),
            (ARGON2_MEMORY_KIB, ARGON2_PASSES, ARGON2_LANES)
        );
        assert!(!verify_password("", DUMMY_PASSWORD_HASH));
    }
}
