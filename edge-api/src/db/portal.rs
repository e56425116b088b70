//! Portal admins and their sessions.

use serde::Deserialize;
use shared_types::ids::InstitutionId;

use shared_types::PortalRole;

use super::{all, first, run, stmt, strings, Batch, Db, DbResult};

/// An admin, as login needs it.
#[derive(Debug, Deserialize)]
pub struct Admin {
    /// Row id.
    pub id: i64,
    /// The admin's institution.
    pub institution_id: InstitutionId,
    /// Argon2id PHC string.
    pub password_hash: String,
}

/// The admin with this (lower-cased) e-mail.
pub async fn admin_by_email(db: &Db, email: &str) -> DbResult<Option<Admin>> {
    first(
        db,
        "SELECT id, institution_id, password_hash FROM portal_admins WHERE email = ?1",
        &[email.into()],
    )
    .await
}

/// A live session and who it belongs to.
#[derive(Debug, Clone, Deserialize)]
pub struct Session {
    /// The user.
    pub admin_id: i64,
    /// What the user may do.
    pub role: PortalRole,
    /// The admin's institution: every portal query is scoped to it.
    pub institution_id: InstitutionId,
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
    /// Where the institution's money lives.
    pub store: super::MoneyStore,
}

/// Stores a new session.
pub async fn insert_session(
    db: &Db,
    token_hash: &str,
    admin: &Admin,
    csrf_token: &str,
    now: i64,
    expires_at: i64,
    absolute_expires_at: i64,
) -> DbResult<()> {
    run(
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
    )
    .await
    .map(drop)
}

/// The live session with this token hash.
pub async fn session(db: &Db, token_hash: &str, now: i64) -> DbResult<Option<Session>> {
    first(
        db,
        "SELECT s.admin_id, a.role, s.institution_id, s.csrf_token, s.expires_at, \
         s.absolute_expires_at, a.email, i.name AS institution_name, i.store \
         FROM portal_sessions s \
         JOIN portal_admins a ON a.id = s.admin_id JOIN institutions i ON i.id = s.institution_id \
         WHERE s.token_hash = ?1 AND s.expires_at > ?2",
        &[token_hash.into(), now.into()],
    )
    .await
}

/// Moves a session's idle end.
pub async fn extend_session(db: &Db, token_hash: &str, expires_at: i64) -> DbResult<()> {
    run(
        db,
        "UPDATE portal_sessions SET expires_at = ?2 WHERE token_hash = ?1",
        &[token_hash.into(), expires_at.into()],
    )
    .await
    .map(drop)
}

/// Ends a session.
pub async fn delete_session(db: &Db, token_hash: &str) -> DbResult<()> {
    run(
        db,
        "DELETE FROM portal_sessions WHERE token_hash = ?1",
        &[token_hash.into()],
    )
    .await
    .map(drop)
}

/// Deletes sessions past their end, at most `limit` of them.
pub async fn purge_sessions(db: &Db, now: i64, limit: i64) -> DbResult<()> {
    run(
        db,
        "DELETE FROM portal_sessions WHERE token_hash IN (SELECT token_hash FROM portal_sessions \
         INDEXED BY portal_sessions_by_expiry \
         WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)",
        &[now.into(), limit.into()],
    )
    .await
    .map(drop)
}

/// E-mail addresses of the institution's admins.
pub async fn admin_emails(db: &Db, institution_id: InstitutionId) -> DbResult<Vec<String>> {
    strings(
        db,
        "SELECT email FROM portal_admins WHERE institution_id = ?1 ORDER BY id",
        &[institution_id.into()],
    )
    .await
}

/// A portal user as the users page lists them.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct User {
    /// Row id.
    pub id: i64,
    /// Lower-cased e-mail.
    pub email: String,
    /// Display name.
    pub name: String,
    /// What they may do.
    pub role: PortalRole,
    /// When they were added.
    pub created_at: String,
}

/// The institution's portal users.
pub async fn users(db: &Db, institution_id: InstitutionId) -> DbResult<Vec<User>> {
    all(
        db,
        "SELECT id, email, name, role, created_at FROM portal_admins WHERE institution_id = ?1 \
         ORDER BY id",
        &[institution_id.into()],
    )
    .await
}

/// Adds a user; `None` when the e-mail is taken (by any institution: e-mails log in alone).
pub async fn insert_user(
    db: &Db,
    institution_id: InstitutionId,
    email: &str,
    role: PortalRole,
    password_hash: &str,
    now_text: &str,
) -> DbResult<Option<i64>> {
    #[derive(Deserialize)]
    struct Id {
        id: i64,
    }
    let row: Option<Id> = first(
        db,
        "INSERT INTO portal_admins (institution_id, email, name, password_hash, created_at, role) \
         VALUES (?1, ?2, ?2, ?3, ?4, ?5) ON CONFLICT (email) DO NOTHING RETURNING id",
        &[
            institution_id.into(),
            email.into(),
            password_hash.into(),
            now_text.into(),
            role.as_str().into(),
        ],
    )
    .await?;
    Ok(row.map(|r| r.id))
}

/// Removes a user of the institution and ends their sessions, atomically; never the caller
/// (`acting_id`) and never the last admin. False if nothing was removed.
pub async fn delete_user(
    db: &Db,
    institution_id: InstitutionId,
    id: i64,
    acting_id: i64,
) -> DbResult<bool> {
    // Sessions go first (they refer to the user), under the same guard as the user.
    const REMOVABLE: &str = "institution_id = ?1 AND id = ?2 AND id != ?3 \
        AND (role = 'viewer' OR (SELECT count(*) FROM portal_admins \
             WHERE institution_id = ?1 AND role = 'admin') > 1)";
    let params = [institution_id.into(), id.into(), acting_id.into()];
    let mut batch = Batch::new();
    batch.push(stmt(
        &format!(
            "DELETE FROM portal_sessions WHERE admin_id = ?2 AND EXISTS \
             (SELECT 1 FROM portal_admins WHERE {REMOVABLE})"
        ),
        &params,
    )?);
    let remove = batch.push(stmt(
        &format!("DELETE FROM portal_admins WHERE {REMOVABLE}"),
        &params,
    )?);
    Ok(batch.run(db).await?.changed(remove))
}
