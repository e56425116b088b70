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

/// An Argon2id PHC string with the worker's parameters (19 MiB, 2 passes, 1 lane).
pub fn password_hash(password: &str) -> String {
    use argon2::password_hash::{rand_core::OsRng, PasswordHasher, SaltString};
    let params = argon2::Params::new(19 * 1024, 2, 1, None).expect("valid parameters");
    argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
        .hash_password(password.as_bytes(), &SaltString::generate(&mut OsRng))
        .expect("hashing succeeds")
        .to_string()
}

/// Which D1 database a command changes.
pub enum Target {
    /// The local database under this wrangler persist directory.
    Local(std::path::PathBuf),
    /// The production database (wrangler's `--remote`).
    Remote,
}

/// Replaces a client's secret and revokes every token issued under the old one, in one batch of
/// statements run by `wrangler d1 execute` (so the same command serves local and production).
/// Returns the new secret, which is stored nowhere.
pub fn rotate(client_id: &str, target: &Target) -> Result<String, String> {
    if client_id.is_empty()
        || !client_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(format!("{client_id:?} is not a client id"));
    }
    let secret = new_secret();
    // Both values are checked ([A-Za-z0-9_-]) or generated (hex) here, so quoting them is safe.
    let sql = format!(
        "UPDATE api_clients SET secret_hash = '{hash}', \
         secret_rotated_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE client_id = '{client_id}'; \
         DELETE FROM access_tokens WHERE client_id IN \
         (SELECT id FROM api_clients WHERE client_id = '{client_id}'); \
         SELECT count(*) AS clients FROM api_clients WHERE client_id = '{client_id}';",
        hash = secret_hash(&secret),
    );
    let stdout = execute(&sql, target)?;
    let found = serde_json::from_str::<serde_json::Value>(&stdout)
        .ok()
        .and_then(|v| {
            v.as_array()?
                .iter()
                .filter_map(|r| r["results"].as_array()?.first()?["clients"].as_i64())
                .next()
        });
    match found {
        Some(1) => Ok(secret),
        Some(_) => Err(format!("no client {client_id:?}; nothing changed")),
        None => Err(format!("unexpected output from wrangler:\n{stdout}")),
    }
}

/// Runs SQL on the target database through `wrangler d1 execute --json`; returns its output.
fn execute(sql: &str, target: &Target) -> Result<String, String> {
    let mut command = std::process::Command::new("wrangler");
    command.args(["d1", "execute", "DB", "--json", "--command", sql]);
    match target {
        Target::Local(persist_to) => {
            command.arg("--local").arg("--persist-to").arg(persist_to);
        }
        Target::Remote => {
            command.arg("--remote");
        }
    }
    let output = command.output().map_err(|e| {
        format!("could not run wrangler (run scripts/setup, then source scripts/env.sh): {e}")
    })?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        return Err(format!(
            "wrangler d1 execute failed:\n{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(stdout)
}

/// Adds a portal admin to institution `institution_id` with a new random password, which is
/// returned (and stored nowhere but as its Argon2id hash).
pub fn add_admin(institution_id: i64, email: &str, target: &Target) -> Result<String, String> {
    let email = email.trim().to_ascii_lowercase();
    let valid = email.len() <= 254
        && email.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty() && domain.contains('.') && !domain.starts_with('.')
        })
        && email
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@._+-".contains(&b));
    if !valid {
        return Err(format!(
            "{email:?} is not an e-mail address this command accepts"
        ));
    }
    let password = new_secret().replacen(SECRET_PREFIX, "", 1);
    // The e-mail is checked above ([a-z0-9@._+-]) and the hash is a PHC string ([A-Za-z0-9$=,+/]).
    let sql = format!(
        "INSERT INTO portal_admins (institution_id, email, name, password_hash, created_at) \
         SELECT id, '{email}', '{email}', '{hash}', strftime('%Y-%m-%dT%H:%M:%SZ', 'now') \
         FROM institutions WHERE id = {institution_id}; \
         SELECT count(*) AS admins FROM portal_admins WHERE email = '{email}';",
        hash = password_hash(&password),
    );
    let stdout = execute(&sql, target).map_err(|e| {
        if e.contains("UNIQUE constraint failed") {
            format!("an admin with e-mail {email} already exists")
        } else {
            e
        }
    })?;
    let added = serde_json::from_str::<serde_json::Value>(&stdout)
        .ok()
        .and_then(|v| {
            v.as_array()?
                .iter()
                .filter_map(|r| r["results"].as_array()?.first()?["admins"].as_i64())
                .next()
        });
    match added {
        Some(1) => Ok(password),
        _ => Err(format!("no institution {institution_id}; nothing added")),
    }
}
