//! API clients and the access tokens issued to them (one aggregate: a client's tokens live and
//! die with its secret).

use payrail_credentials::sql;
use serde::{Deserialize, Serialize};
use shared_types::ids::InstitutionId;
use shared_types::ApiClientObject;

use super::{all, first, run, stmt, Batch, Db, DbResult, Returning, Stmt, Value};

/// An API client, as client authentication needs it.
#[derive(Debug, Deserialize)]
pub struct Client {
    /// Hex SHA-256 of the current secret.
    pub secret_hash: String,
    /// Granted scopes, space-separated.
    pub scopes: String,
}

/// A token request, as the one batch that verifies it and stores its token needs it.
pub struct Issue<'a> {
    /// The public `client_id` presented.
    pub client_id: &'a str,
    /// Where the request came from (failures are counted per client and source).
    pub source: &'a str,
    /// Hex SHA-256 of the secret presented.
    pub presented_hash: &'a str,
    /// The scopes asked for, each known; `None` asks for the client's whole grant.
    pub asked: Option<Vec<&'a str>>,
    /// Hex SHA-256 of the new token: only its hash is stored, never the token.
    pub token_hash: &'a str,
    /// Unix seconds now.
    pub now: i64,
    /// Now, as stored text.
    pub now_text: &'a str,
    /// Unix seconds the token expires.
    pub expires_at: i64,
    /// Failures from one source that refuse further attempts within their window.
    pub max_failures: i64,
    /// The failure window's length.
    pub window_seconds: i64,
}

/// What the batch read, and whether it stored the token.
pub struct Issued {
    /// The client, when the `client_id` exists.
    pub client: Option<Client>,
    /// The failures recorded for the client from the source.
    pub failures: Option<super::throttle::Failures>,
    /// Whether the token was stored (and the client marked used, the failures cleared).
    pub stored: bool,
}

/// Token issue in one round trip, one transaction: reads the client and the caller's failures,
/// and stores the token and marks the client used only if the presented secret's hash is the
/// client's, the caller is under its failure limit and every asked scope is granted; then runs
/// `clear_failures` (the throttle's statement, guarded on the token being stored). The caller
/// makes the same checks on what was read (the secret in constant time) and answers from them;
/// a token is revealed only when both agree.
pub async fn issue(db: &Db, issue: &Issue<'_>, clear_failures: Stmt) -> DbResult<Issued> {
    #[derive(Deserialize)]
    struct Row {
        id: Option<i64>,
        secret_hash: Option<String>,
        scopes: Option<String>,
        window_start: Option<i64>,
        failures: Option<i64>,
    }
    let read = stmt(
        "SELECT c.id, c.secret_hash, c.scopes, f.window_start, f.failures FROM (SELECT 1) \
         LEFT JOIN api_clients c ON c.client_id = ?1 \
         LEFT JOIN auth_failures f ON f.client_id = ?1 AND f.source = ?2",
        &[issue.client_id.into(), issue.source.into()],
    )?;
    let mut params: Vec<Value> = vec![
        issue.token_hash.into(),
        issue.client_id.into(),
        issue.presented_hash.into(),
        issue.asked.as_ref().map(|asked| asked.join(" ")).into(),
        issue.now.into(),
        issue.expires_at.into(),
        issue.source.into(),
        issue.max_failures.into(),
        issue.window_seconds.into(),
    ];
    let mut sql = String::from(
        "INSERT INTO access_tokens \
         (token_hash, client_id, institution_id, scopes, issued_at, expires_at) \
         SELECT ?1, c.id, c.institution_id, coalesce(?4, c.scopes), ?5, ?6 FROM api_clients c \
         WHERE c.client_id = ?2 AND c.secret_hash = ?3 \
         AND NOT EXISTS (SELECT 1 FROM auth_failures f WHERE f.client_id = ?2 AND f.source = ?7 \
         AND f.failures >= ?8 AND f.window_start + ?9 > ?5)",
    );
    for scope in issue.asked.iter().flatten() {
        params.push(format!(" {scope} ").into());
        sql.push_str(&format!(
            " AND instr(' ' || c.scopes || ' ', ?{}) > 0",
            params.len()
        ));
    }
    let store = stmt(&sql, &params)?;
    // The new token's hash is fresh and random: it exists exactly when the INSERT wrote it.
    let mark_used = stmt(
        "UPDATE api_clients SET last_used_at = ?1 WHERE client_id = ?2 \
         AND EXISTS (SELECT 1 FROM access_tokens WHERE token_hash = ?3)",
        &[
            issue.now_text.into(),
            issue.client_id.into(),
            issue.token_hash.into(),
        ],
    )?;
    let mut batch = Batch::new();
    let read = batch.push(Returning::<Row>::new(read));
    let store = batch.push(store);
    batch.push(mark_used);
    batch.push(clear_failures);
    let results = batch.run(db).await?;
    let row = results.rows(read)?.into_iter().next();
    let client = row
        .as_ref()
        .and_then(|r| match (r.id, &r.secret_hash, &r.scopes) {
            (Some(_), Some(secret_hash), Some(scopes)) => Some(Client {
                secret_hash: secret_hash.clone(),
                scopes: scopes.clone(),
            }),
            _ => None,
        });
    let failures = row.and_then(|r| match (r.window_start, r.failures) {
        (Some(window_start), Some(failures)) => Some(super::throttle::Failures {
            window_start,
            failures,
        }),
        _ => None,
    });
    Ok(Issued {
        client,
        failures,
        stored: results.changed(store),
    })
}

/// A live access token.
#[derive(Debug, Deserialize)]
pub struct Token {
    /// Institution the token acts for.
    pub institution_id: InstitutionId,
    /// Scopes of the token, space-separated.
    pub scopes: String,
    /// Where its institution's money lives.
    pub store: super::MoneyStore,
}

/// The live token with this hash. Tokens of a rotated or deleted client are gone: rotation
/// deletes them in the same batch that replaces the secret.
pub async fn find_token(db: &Db, token_hash: &str, now: i64) -> DbResult<Option<Token>> {
    first(
        db,
        "SELECT t.institution_id, t.scopes, i.store FROM access_tokens t \
         JOIN institutions i ON i.id = t.institution_id \
         WHERE t.token_hash = ?1 AND t.expires_at > ?2",
        &[token_hash.into(), now.into()],
    )
    .await
}

/// Deletes expired tokens, at most `limit` of them.
pub async fn purge_expired_tokens(db: &Db, now: i64, limit: i64) -> DbResult<usize> {
    run(
        db,
        "DELETE FROM access_tokens WHERE token_hash IN (SELECT token_hash FROM access_tokens \
         INDEXED BY access_tokens_by_expiry \
         WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)",
        &[now.into(), limit.into()],
    )
    .await
}

/// An API client as the portal lists it (never its secret): read from its row, written with its
/// scopes as a list.
#[derive(Debug, Deserialize, Serialize)]
pub struct ApiClient {
    /// Always `api_client`.
    #[serde(skip_deserializing)]
    pub object: ApiClientObject,
    /// Public client id.
    pub client_id: String,
    /// Display name.
    pub name: String,
    /// Granted scopes: stored space-separated, written as a list.
    #[serde(serialize_with = "words")]
    pub scopes: String,
    /// Creation time.
    pub created_at: String,
    /// Last token issued.
    pub last_used_at: Option<String>,
    /// Last secret rotation.
    pub secret_rotated_at: Option<String>,
}

fn words<S: serde::Serializer>(text: &str, to: S) -> Result<S::Ok, S::Error> {
    to.collect_seq(text.split(' ').filter(|w| !w.is_empty()))
}

const CLIENT_COLUMNS: &str = "client_id, name, scopes, created_at, last_used_at, secret_rotated_at";

/// The institution's clients, newest first.
pub async fn list(db: &Db, institution_id: InstitutionId) -> DbResult<Vec<ApiClient>> {
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
    db: &Db,
    institution_id: InstitutionId,
    client_id: &str,
) -> DbResult<Option<ApiClient>> {
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
    pub institution_id: InstitutionId,
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
pub async fn insert(db: &Db, c: &NewClient<'_>) -> DbResult<()> {
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
    db: &Db,
    institution_id: InstitutionId,
    client_id: &str,
    secret_hash: &str,
    now_text: &str,
) -> DbResult<bool> {
    let mut batch = Batch::new();
    let rotate = batch.push(stmt(
        sql::ROTATE_CLIENT_SECRET,
        &[
            secret_hash.into(),
            now_text.into(),
            client_id.into(),
            institution_id.into(),
        ],
    )?);
    batch.push(revoke_tokens(institution_id, client_id)?);
    Ok(batch.run(db).await?.changed(rotate))
}

/// Deletes every token of the client.
fn revoke_tokens(institution_id: InstitutionId, client_id: &str) -> DbResult<Stmt> {
    stmt(
        sql::REVOKE_CLIENT_TOKENS,
        &[client_id.into(), institution_id.into()],
    )
}

/// Deletes a client and its tokens, atomically. False if no such client.
pub async fn delete(db: &Db, institution_id: InstitutionId, client_id: &str) -> DbResult<bool> {
    let mut batch = Batch::new();
    batch.push(revoke_tokens(institution_id, client_id)?);
    let delete = batch.push(stmt(
        "DELETE FROM api_clients WHERE institution_id = ?1 AND client_id = ?2",
        &[institution_id.into(), client_id.into()],
    )?);
    Ok(batch.run(db).await?.changed(delete))
}
