//! The portal's tables: admins, sessions, API clients as the portal manages them, and webhook
//! endpoints. Every query of an institution's objects carries `institution_id`: another
//! institution's object is simply not found.

use serde::Deserialize;
use worker::D1Database;

use super::{bind, Value};

/// An admin, as login needs it.
#[derive(Debug, Deserialize)]
pub struct Admin {
    /// Row id.
    pub id: i64,
    /// The admin's institution.
    pub institution_id: i64,
    /// Argon2id PHC string.
    pub password_hash: String,
}

/// The admin with this (lower-cased) e-mail.
pub async fn admin_by_email(db: &D1Database, email: &str) -> worker::Result<Option<Admin>> {
    bind(
        db,
        "SELECT id, institution_id, password_hash FROM portal_admins WHERE email = ?1",
        &[email.into()],
    )?
    .first(None)
    .await
}

/// A live session and who it belongs to.
#[derive(Debug, Clone, Deserialize)]
pub struct Session {
    /// The admin's institution: every portal query is scoped to it.
    pub institution_id: i64,
    /// The session's CSRF token.
    pub csrf_token: String,
    /// Unix seconds.
    pub expires_at: i64,
    /// Unix seconds.
    pub absolute_expires_at: i64,
    /// The admin's e-mail.
    pub email: String,
    /// The institution's name.
    pub institution_name: String,
}

/// Stores a new session.
pub async fn insert_session(
    db: &D1Database,
    token_hash: &str,
    admin: &Admin,
    csrf_token: &str,
    now: i64,
    expires_at: i64,
    absolute_expires_at: i64,
) -> worker::Result<()> {
    bind(
        db,
        "INSERT INTO portal_sessions (token_hash, admin_id, institution_id, csrf_token, \
         created_at, expires_at, absolute_expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        &[
            token_hash.into(),
            admin.id.into(),
            admin.institution_id.into(),
            csrf_token.into(),
            now.into(),
            expires_at.into(),
            absolute_expires_at.into(),
        ],
    )?
    .run()
    .await
    .map(drop)
}

/// The live session with this token hash.
pub async fn session(
    db: &D1Database,
    token_hash: &str,
    now: i64,
) -> worker::Result<Option<Session>> {
    bind(
        db,
        "SELECT s.institution_id, s.csrf_token, s.expires_at, s.absolute_expires_at, \
         a.email, i.name AS institution_name FROM portal_sessions s \
         JOIN portal_admins a ON a.id = s.admin_id JOIN institutions i ON i.id = s.institution_id \
         WHERE s.token_hash = ?1 AND s.expires_at > ?2",
        &[token_hash.into(), now.into()],
    )?
    .first(None)
    .await
}

/// Moves a session's idle end.
pub async fn extend_session(
    db: &D1Database,
    token_hash: &str,
    expires_at: i64,
) -> worker::Result<()> {
    bind(
        db,
        "UPDATE portal_sessions SET expires_at = ?2 WHERE token_hash = ?1",
        &[token_hash.into(), expires_at.into()],
    )?
    .run()
    .await
    .map(drop)
}

/// Ends a session.
pub async fn delete_session(db: &D1Database, token_hash: &str) -> worker::Result<()> {
    bind(
        db,
        "DELETE FROM portal_sessions WHERE token_hash = ?1",
        &[token_hash.into()],
    )?
    .run()
    .await
    .map(drop)
}

/// Deletes sessions past their end.
pub async fn purge_sessions(db: &D1Database, now: i64) -> worker::Result<()> {
    bind(
        db,
        "DELETE FROM portal_sessions WHERE expires_at <= ?1",
        &[now.into()],
    )?
    .run()
    .await
    .map(drop)
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
pub async fn clients(db: &D1Database, institution_id: i64) -> worker::Result<Vec<ClientRow>> {
    bind(
        db,
        &format!(
            "SELECT {CLIENT_COLUMNS} FROM api_clients WHERE institution_id = ?1 ORDER BY id DESC"
        ),
        &[institution_id.into()],
    )?
    .all()
    .await?
    .results()
}

/// One client of the institution.
pub async fn client(
    db: &D1Database,
    institution_id: i64,
    client_id: &str,
) -> worker::Result<Option<ClientRow>> {
    bind(
        db,
        &format!(
            "SELECT {CLIENT_COLUMNS} FROM api_clients WHERE institution_id = ?1 AND client_id = ?2"
        ),
        &[institution_id.into(), client_id.into()],
    )?
    .first(None)
    .await
}

/// Adds a client.
pub async fn insert_client(
    db: &D1Database,
    institution_id: i64,
    client_id: &str,
    name: &str,
    secret_hash: &str,
    scopes: &str,
    now_text: &str,
) -> worker::Result<()> {
    bind(
        db,
        "INSERT INTO api_clients (institution_id, client_id, name, secret_hash, scopes, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        &[
            institution_id.into(),
            client_id.into(),
            name.into(),
            secret_hash.into(),
            scopes.into(),
            now_text.into(),
        ],
    )?
    .run()
    .await
    .map(drop)
}

fn client_scope(institution_id: i64, client_id: &str) -> [Value; 2] {
    [institution_id.into(), client_id.into()]
}

/// Replaces the client's secret and revokes its tokens, atomically. False if no such client.
pub async fn rotate_client(
    db: &D1Database,
    institution_id: i64,
    client_id: &str,
    secret_hash: &str,
    now_text: &str,
) -> worker::Result<bool> {
    let [institution, client] = client_scope(institution_id, client_id);
    let results = db
        .batch(vec![
            bind(
                db,
                "UPDATE api_clients SET secret_hash = ?3, secret_rotated_at = ?4 \
                 WHERE institution_id = ?1 AND client_id = ?2",
                &[
                    institution.clone(),
                    client.clone(),
                    secret_hash.into(),
                    now_text.into(),
                ],
            )?,
            bind(
                db,
                "DELETE FROM access_tokens WHERE client_id IN (SELECT id FROM api_clients \
                 WHERE institution_id = ?1 AND client_id = ?2)",
                &[institution, client],
            )?,
        ])
        .await?;
    Ok(results.first().is_some_and(|r| super::changes(r) > 0))
}

/// Deletes the client and its tokens, atomically. False if no such client.
pub async fn delete_client(
    db: &D1Database,
    institution_id: i64,
    client_id: &str,
) -> worker::Result<bool> {
    let [institution, client] = client_scope(institution_id, client_id);
    let results = db
        .batch(vec![
            bind(
                db,
                "DELETE FROM access_tokens WHERE client_id IN (SELECT id FROM api_clients \
                 WHERE institution_id = ?1 AND client_id = ?2)",
                &[institution.clone(), client.clone()],
            )?,
            bind(
                db,
                "DELETE FROM api_clients WHERE institution_id = ?1 AND client_id = ?2",
                &[institution, client],
            )?,
        ])
        .await?;
    Ok(results.get(1).is_some_and(|r| super::changes(r) > 0))
}

/// A webhook endpoint row.
#[derive(Debug, Clone, Deserialize)]
pub struct EndpointRow {
    /// `ep_…`.
    pub id: String,
    /// Receiver URL.
    pub url: String,
    /// Free text.
    pub description: String,
    /// Space-separated types, or None for all.
    pub event_types: Option<String>,
    /// `enabled` or `disabled`.
    pub status: String,
    /// Sealed current secret.
    pub secret_encrypted: String,
    /// Sealed previous secret, during a rotation's grace period.
    pub previous_secret_encrypted: Option<String>,
    /// End of the grace period, Unix seconds.
    pub previous_secret_expires_at: Option<i64>,
    /// Creation time.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
    /// Why the endpoint was disabled automatically, if it was.
    #[serde(default)]
    pub disabled_reason: Option<String>,
}

const ENDPOINT_COLUMNS: &str = "id, url, description, event_types, status, secret_encrypted, \
    previous_secret_encrypted, previous_secret_expires_at, created_at, updated_at, \
    disabled_reason";

/// The institution's endpoints, newest first.
pub async fn endpoints(db: &D1Database, institution_id: i64) -> worker::Result<Vec<EndpointRow>> {
    bind(
        db,
        &format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE institution_id = ?1 \
             ORDER BY created_at DESC, id DESC"
        ),
        &[institution_id.into()],
    )?
    .all()
    .await?
    .results()
}

/// One endpoint of the institution.
pub async fn endpoint(
    db: &D1Database,
    institution_id: i64,
    id: &str,
) -> worker::Result<Option<EndpointRow>> {
    bind(
        db,
        &format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE institution_id = ?1 AND id = ?2"
        ),
        &[institution_id.into(), id.into()],
    )?
    .first(None)
    .await
}

/// Adds an endpoint.
pub async fn insert_endpoint(
    db: &D1Database,
    institution_id: i64,
    e: &EndpointRow,
) -> worker::Result<()> {
    bind(
        db,
        "INSERT INTO webhook_endpoints (id, institution_id, url, description, event_types, status, \
         secret_encrypted, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
        &[
            e.id.as_str().into(),
            institution_id.into(),
            e.url.as_str().into(),
            e.description.as_str().into(),
            e.event_types.clone().map_or(Value::Null, Value::Text),
            e.status.as_str().into(),
            e.secret_encrypted.as_str().into(),
            e.created_at.as_str().into(),
        ],
    )?
    .run()
    .await
    .map(drop)
}

/// Writes an endpoint's editable fields and secrets back.
pub async fn update_endpoint(
    db: &D1Database,
    institution_id: i64,
    e: &EndpointRow,
) -> worker::Result<bool> {
    let result = bind(
        db,
        "UPDATE webhook_endpoints SET url = ?3, description = ?4, event_types = ?5, status = ?6, \
         secret_encrypted = ?7, previous_secret_encrypted = ?8, previous_secret_expires_at = ?9, \
         updated_at = ?10 WHERE institution_id = ?1 AND id = ?2",
        &[
            institution_id.into(),
            e.id.as_str().into(),
            e.url.as_str().into(),
            e.description.as_str().into(),
            e.event_types.clone().map_or(Value::Null, Value::Text),
            e.status.as_str().into(),
            e.secret_encrypted.as_str().into(),
            e.previous_secret_encrypted
                .clone()
                .map_or(Value::Null, Value::Text),
            e.previous_secret_expires_at.map_or(Value::Null, Value::Int),
            e.updated_at.as_str().into(),
        ],
    )?
    .run()
    .await?;
    Ok(super::changes(&result) > 0)
}

/// Deletes an endpoint. False if no such endpoint.
pub async fn delete_endpoint(
    db: &D1Database,
    institution_id: i64,
    id: &str,
) -> worker::Result<bool> {
    let result = bind(
        db,
        "DELETE FROM webhook_endpoints WHERE institution_id = ?1 AND id = ?2",
        &[institution_id.into(), id.into()],
    )?
    .run()
    .await?;
    Ok(super::changes(&result) > 0)
}
