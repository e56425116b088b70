//! Credential rules in one place, shared by the worker (`edge-api`, built for wasm32) and the
//! operator commands (`xtask`, native), so that the two cannot drift apart: what client secrets
//! and access tokens look like, the hash under which they are stored, the Argon2id parameters of
//! portal passwords, the SQL that rotates a client secret or adds a portal admin, and sealing
//! (AES-256-GCM) of what must be kept in clear somewhere, like the treasury key.
//!
//! Nothing here draws randomness. Callers pass random bytes in (the worker from Web Crypto
//! through getrandom, xtask from the OS), which keeps the crate free of platform code.

mod password;
pub mod sealed;
pub mod sql;
mod token;

pub use password::{
    hash_password, verify_password, ARGON2_LANES, ARGON2_MEMORY_KIB, ARGON2_PASSES,
    DUMMY_PASSWORD_HASH, SALT_BYTES,
};
pub use token::{
    access_token, client_secret, constant_time_eq, prefixed_token, sha256_hex, ACCESS_TOKEN_PREFIX,
    CLIENT_SECRET_PREFIX, TOKEN_RANDOM_BYTES,
};
