//! API clients and the access tokens issued to them (one aggregate: a client's tokens live and
//! die with its secret).

use payrail_credentials::sql;
use serde::Deserialize;
use worker::{D1Database, D1PreparedStatement};

use super::{all, batch, bind, changed, first, run, DbResult};

/// An API client, as client authentication needs it.
#[derive(Debug, Deserialize)]
pub struct Client {
    /// Row id (not the public `client_id`).
    pub id: i64,
    /// Hex SHA-256 of the current secret.
    pub secret_hash: String,
    /// Granted scopes, space-separated.
    pub scopes: String,
}

/// The client with this public `client_id` and the failures recorded for it from `source`, read
/// together (token issue's one read).
pub async fn find_with_failures(
    db: &D1Database,
    client_id: &str,
    source: &str,
) -> DbResult<(Option<Client>, Option<super::throttle::Failures>)> {
    #[derive(Deserialize)]
    struct Row {
        id: Option<i64>,
        secret_hash: Option<String>,
        scopes: Option<String>,
        window_start: Option<i64>,
        failures: Option<i64>,
    }
    let row: Option<Row> = first(
        db,
        "SELECT c.id, c.secret_hash, c.scopes, f.window_start, f.failures FROM (SELECT 1) \
         LEFT JOIN api_clients c ON c.client_id = ?1 \
         LEFT JOIN auth_failures f ON f.client_id = ?1 AND f.source = ?2",
        &[client_id.into(), source.into()],
    )
    .await?;
    let Some(row) = row else {
        return Ok((None, None));
    };
    let client = match (row.id, row.secret_hash, row.scopes) {
        (Some(id), Some(secret_hash), Some(scopes)) => Some(Client {
            id,
            secret_hash,
            scopes,
        }),
        _ => None,
    };
    let failures = match (row.window_start, row.failures) {
        (Some(window_start), Some(failures)) => Some(super::throttle::Failures {
            window_start,
            failures,
        }),
        _ => None,
    };
    Ok((client, failures))
}

/// A token to store: only its hash, never the token.
pub struct NewToken<'a> {
    /// Hex SHA-256 of the token.
    pub token_hash: &'a str,
    /// Granted scopes, space-separated.
    pub scopes: &'a str,
    /// Unix seconds.
    pub issued_at: i64,
    /// Unix seconds.
    pub expires_at: i64,
}

/// Stores a token for `client`, only if the client's secret is still the one that was verified:
/// a rotation between the check and this write leaves no token under the old secret.
pub fn insert_token(
    db: &D1Database,
    client: &Client,
    token: &NewToken<'_>,
) -> DbResult<D1PreparedStatement> {
    bind(
        db,
        "INSERT INTO access_tokens \
         (token_hash, client_id, institution_id, scopes, issued_at, expires_at) \
         SELECT ?1, id, institution_id, ?4, ?5, ?6 FROM api_clients \
         WHERE id = ?2 AND secret_hash = ?3",
        &[
            token.token_hash.into(),
            client.id.into(),
            client.secret_hash.as_str().into(),
            token.scopes.into(),
            token.issued_at.into(),
            token.expires_at.into(),
        ],
    )
}

/// Marks the client used now.
pub fn mark_used(
    db: &D1Database,
    client: &Client,
    now_text: &str,
) -> DbResult<D1PreparedStatement> {
    bind(
        db,
        "UPDATE api_clients SET last_used_at = ?1 WHERE id = ?2",
        &[now_text.into(), client.id.into()],
    )
}

/// A live access token.
#[derive(Debug, Deserialize)]
pub struct Token {
    /// Institution the token acts for.
    pub institution_id: i64,
    /// Scopes of the token, space-separated.
    pub scopes: String,
}

/// The live token with this hash. Tokens of a rotated or deleted client are gone: rotation
/// deletes them in the same batch that replaces the secret.
pub async fn find_token(db: &D1Database, token_hash: &str, now: i64) -> DbResult<Option<Token>> {
    first(
        db,
        "SELECT institution_id, scopes FROM access_tokens WHERE token_hash = ?1 AND expires_at > ?2",
        &[token_hash.into(), now.into()],
    )
    .await
}

/// Deletes expired tokens.
pub async fn purge_expired_tokens(db: &D1Database, now: i64) -> DbResult<usize> {
    run(
        db,
        "DELETE FROM access_tokens WHERE expires_at <= ?1",
        &[now.into()],
    )
    .await
}

/// An API client as the portal lists it.
#[derive(Debug, Deserialize)]
pub struct ClientRow {
    /// Public client id.
    pub client_id: String,
    /// Display name.
    pub name: String,
    /// Granted scopes, space-separated.
    pub scopes: String,
    /// Creation time.
    pub created_at: String,
    /// Last token issued.
    pub last_used_at: Option<String>,
    /// Last secret rotation.
    pub secret_rotated_at: Option<String>,
}

const CLIENT_COLUMNS: &str = "client_id, name, scopes, created_at, last_used_at, secret_rotated_at";

/// The institution's clients, newest first.
pub async fn list(db: &D1Database, institution_id: i64) -> DbResult<Vec<ClientRow>> {
    all(
        db,
        &format!(
            "SELECT {CLIENT_COLUMNS} FROM api_clients WHERE institution_id = ?1 ORDER BY id DESC"
        ),
        &[institution_id.into()],
    )
    .await
}

/// One client of the institution.
pub async fn get(
    db: &D1Database,
    institution_id: i64,
    client_id: &str,
) -> DbResult<Option<ClientRow>> {
    first(
        db,
        &format!(
            "SELECT {CLIENT_COLUMNS} FROM api_clients WHERE institution_id = ?1 AND client_id = ?2"
        ),
        &[institution_id.into(), client_id.into()],
    )
    .await
}

/// A client to add.
pub struct NewClient<'a> {
    /// Owning institution.
    pub institution_id: i64,
    /// Public id.
    pub client_id: &'a str,
    /// Display name.
    pub name: &'a str,
    /// Hex SHA-256 of the secret.
    pub secret_hash: &'a str,
    /// Granted scopes, space-separated.
    pub scopes: &'a str,
    /// Creation time.
    pub now_text: &'a str,
}

/// Adds a client.
pub async fn insert(db: &D1Database, c: &NewClient<'_>) -> DbResult<()> {
    run(
        db,
        "INSERT INTO api_clients (institution_id, client_id, name, secret_hash, scopes, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        &[
            c.institution_id.into(),
            c.client_id.into(),
            c.name.into(),
            c.secret_hash.into(),
            c.scopes.into(),
            c.now_text.into(),
        ],
    )
    .await
    .map(drop)
}

/// Replaces the client's secret and revokes its tokens, atomically, with the statements the
/// rotation command shares. False if the institution has no such client.
pub async fn rotate(
    db: &D1Database,
    institution_id: i64,
    client_id: &str,
    secret_hash: &str,
    now_text: &str,
) -> DbResult<bool> {
    let results = batch(
        db,
        vec![
            bind(
                db,
                sql::ROTATE_CLIENT_SECRET,
                &[
                    secret_hash.into(),
                    now_text.into(),
                    client_id.into(),
                    institution_id.into(),
                ],
            )?,
            revoke_tokens(db, institution_id, client_id)?,
        ],
    )
    .await?;
    Ok(changed(&results, 0))
}

/// Deletes every token of the client.
fn revoke_tokens(
    db: &D1Database,
    institution_id: i64,
    client_id: &str,
) -> DbResult<D1PreparedStatement> {
    bind(
        db,
        sql::REVOKE_CLIENT_TOKENS,
        &[client_id.into(), institution_id.into()],
    )
}

/// Deletes a client and its tokens, atomically. False if no such client.
pub async fn delete(db: &D1Database, institution_id: i64, client_id: &str) -> DbResult<bool> {
    let results = batch(
        db,
        vec![
            revoke_tokens(db, institution_id, client_id)?,
            bind(
                db,
                "DELETE FROM api_clients WHERE institution_id = ?1 AND client_id = ?2",
                &[institution_id.into(), client_id.into()],
            )?,
        ],
    )
    .await?;
    Ok(changed(&results, 1))
}
