//! API clients, access tokens and the failed-authentication throttle.

use serde::Deserialize;
use worker::D1Database;

use super::{bind, Value};

/// An API client, as client authentication needs it.
#[derive(Debug, Deserialize)]
pub struct Client {
    /// Row id (not the public `client_id`).
    pub id: i64,
    /// Owning institution.
    pub institution_id: i64,
    /// Hex SHA-256 of the current secret.
    pub secret_hash: String,
    /// Granted scopes, space-separated.
    pub scopes: String,
}

/// A live access token.
#[derive(Debug, Deserialize)]
pub struct Token {
    /// Institution the token acts for.
    pub institution_id: i64,
    /// Scopes of the token, space-separated.
    pub scopes: String,
}

/// Failed authentications of one client id from one source, in the current window.
#[derive(Debug, Deserialize)]
pub struct Failures {
    /// Unix seconds the window opened.
    pub window_start: i64,
    /// Failures counted in the window.
    pub failures: i64,
}

/// The client with this public `client_id`.
pub async fn find_client(db: &D1Database, client_id: &str) -> worker::Result<Option<Client>> {
    bind(
        db,
        "SELECT id, institution_id, secret_hash, scopes FROM api_clients WHERE client_id = ?1",
        &[client_id.into()],
    )?
    .first(None)
    .await
}

/// The failure count of `client_id` from `source`, if any is recorded.
pub async fn failures(
    db: &D1Database,
    client_id: &str,
    source: &str,
) -> worker::Result<Option<Failures>> {
    bind(
        db,
        "SELECT window_start, failures FROM auth_failures WHERE client_id = ?1 AND source = ?2",
        &[client_id.into(), source.into()],
    )?
    .first(None)
    .await
}

/// Counts one failed authentication, opening a new window when the last one has closed.
pub async fn record_failure(
    db: &D1Database,
    client_id: &str,
    source: &str,
    now: i64,
    window_seconds: i64,
) -> worker::Result<()> {
    bind(
        db,
        "INSERT INTO auth_failures (client_id, source, window_start, failures) \
         VALUES (?1, ?2, ?3, 1) \
         ON CONFLICT (client_id, source) DO UPDATE SET \
           failures = CASE WHEN window_start <= ?3 - ?4 THEN 1 ELSE failures + 1 END, \
           window_start = CASE WHEN window_start <= ?3 - ?4 THEN ?3 ELSE window_start END",
        &[
            client_id.into(),
            source.into(),
            now.into(),
            window_seconds.into(),
        ],
    )?
    .run()
    .await
    .map(drop)
}

/// Stores a new token for `client` and marks the client used, in one atomic batch; clears the
/// source's failure count.
#[allow(clippy::too_many_arguments)]
pub async fn insert_token(
    db: &D1Database,
    client: &Client,
    public_client_id: &str,
    source: &str,
    token_hash: &str,
    scopes: &str,
    now: i64,
    now_text: &str,
    expires_at: i64,
) -> worker::Result<()> {
    let statements = vec![
        bind(
            db,
            "INSERT INTO access_tokens \
             (token_hash, client_id, institution_id, scopes, issued_at, expires_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            &[
                token_hash.into(),
                client.id.into(),
                client.institution_id.into(),
                scopes.into(),
                now.into(),
                expires_at.into(),
            ],
        )?,
        bind(
            db,
            "UPDATE api_clients SET last_used_at = ?1 WHERE id = ?2",
            &[now_text.into(), client.id.into()],
        )?,
        bind(
            db,
            "DELETE FROM auth_failures WHERE client_id = ?1 AND source = ?2",
            &[public_client_id.into(), source.into()],
        )?,
    ];
    db.batch(statements).await.map(drop)
}

/// The live token with this hash. Tokens of a rotated or deleted client are gone: rotation
/// deletes them in the same batch that replaces the secret.
pub async fn find_token(
    db: &D1Database,
    token_hash: &str,
    now: i64,
) -> worker::Result<Option<Token>> {
    bind(
        db,
        "SELECT institution_id, scopes FROM access_tokens WHERE token_hash = ?1 AND expires_at > ?2",
        &[token_hash.into(), now.into()],
    )?
    .first(None)
    .await
}

/// Deletes expired tokens and closed throttle windows.
pub async fn purge_expired(db: &D1Database, now: i64, window_seconds: i64) -> worker::Result<()> {
    let statements = vec![
        bind(
            db,
            "DELETE FROM access_tokens WHERE expires_at <= ?1",
            &[Value::Int(now)],
        )?,
        bind(
            db,
            "DELETE FROM auth_failures WHERE window_start <= ?1",
            &[Value::Int(now - window_seconds)],
        )?,
    ];
    db.batch(statements).await.map(drop)
}

/// Forgets the failures of `subject` from `source` (after a success).
pub async fn clear_failures(db: &D1Database, subject: &str, source: &str) -> worker::Result<()> {
    bind(
        db,
        "DELETE FROM auth_failures WHERE client_id = ?1 AND source = ?2",
        &[subject.into(), source.into()],
    )?
    .run()
    .await
    .map(drop)
}
