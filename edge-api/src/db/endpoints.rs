//! Webhook endpoints. Every query of an institution's endpoints carries `institution_id`: another
//! institution's endpoint is simply not found.

use serde::Deserialize;
use shared_types::EndpointStatus;
use worker::{D1Database, D1PreparedStatement};

use super::{all, bind, first, run, DbResult};

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
    /// Enabled or disabled.
    pub status: EndpointStatus,
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
pub async fn list(db: &D1Database, institution_id: i64) -> DbResult<Vec<EndpointRow>> {
    all(
        db,
        &format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE institution_id = ?1 \
             ORDER BY created_at DESC, id DESC"
        ),
        &[institution_id.into()],
    )
    .await
}

/// One endpoint of the institution.
pub async fn get(db: &D1Database, institution_id: i64, id: &str) -> DbResult<Option<EndpointRow>> {
    first(
        db,
        &format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE institution_id = ?1 AND id = ?2"
        ),
        &[institution_id.into(), id.into()],
    )
    .await
}

/// Adds an endpoint.
pub async fn insert(db: &D1Database, institution_id: i64, e: &EndpointRow) -> DbResult<()> {
    run(
        db,
        "INSERT INTO webhook_endpoints (id, institution_id, url, description, event_types, status, \
         secret_encrypted, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
        &[
            e.id.as_str().into(),
            institution_id.into(),
            e.url.as_str().into(),
            e.description.as_str().into(),
            e.event_types.clone().into(),
            e.status.as_str().into(),
            e.secret_encrypted.as_str().into(),
            e.created_at.as_str().into(),
        ],
    )
    .await
    .map(drop)
}

/// Writes an endpoint's editable fields and secrets back.
pub async fn update(db: &D1Database, institution_id: i64, e: &EndpointRow) -> DbResult<bool> {
    let changed = run(
        db,
        "UPDATE webhook_endpoints SET url = ?3, description = ?4, event_types = ?5, status = ?6, \
         secret_encrypted = ?7, previous_secret_encrypted = ?8, previous_secret_expires_at = ?9, \
         updated_at = ?10 WHERE institution_id = ?1 AND id = ?2",
        &[
            institution_id.into(),
            e.id.as_str().into(),
            e.url.as_str().into(),
            e.description.as_str().into(),
            e.event_types.clone().into(),
            e.status.as_str().into(),
            e.secret_encrypted.as_str().into(),
            e.previous_secret_encrypted.clone().into(),
            e.previous_secret_expires_at.into(),
            e.updated_at.as_str().into(),
        ],
    )
    .await?;
    Ok(changed > 0)
}

/// Deletes an endpoint. False if no such endpoint.
pub async fn delete(db: &D1Database, institution_id: i64, id: &str) -> DbResult<bool> {
    let changed = run(
        db,
        "DELETE FROM webhook_endpoints WHERE institution_id = ?1 AND id = ?2",
        &[institution_id.into(), id.into()],
    )
    .await?;
    Ok(changed > 0)
}

/// Enables an endpoint and clears its failure clock. False if no such endpoint.
pub async fn enable(
    db: &D1Database,
    institution_id: i64,
    id: &str,
    now_text: &str,
) -> DbResult<bool> {
    let changed = run(
        db,
        "UPDATE webhook_endpoints SET status = 'enabled', disabled_reason = NULL, \
         first_failure_at = NULL, updated_at = ?3 WHERE institution_id = ?1 AND id = ?2",
        &[institution_id.into(), id.into(), now_text.into()],
    )
    .await?;
    Ok(changed > 0)
}

/// A delivery succeeded: the endpoint is healthy again.
pub fn record_success(db: &D1Database, id: &str, at: i64) -> DbResult<D1PreparedStatement> {
    bind(
        db,
        "UPDATE webhook_endpoints SET last_success_at = ?2, first_failure_at = NULL WHERE id = ?1",
        &[id.into(), at.into()],
    )
}

/// A delivery failed: start the failure clock unless it runs already.
pub fn record_failure(db: &D1Database, id: &str, at: i64) -> DbResult<D1PreparedStatement> {
    bind(
        db,
        "UPDATE webhook_endpoints SET first_failure_at = coalesce(first_failure_at, ?2) \
         WHERE id = ?1",
        &[id.into(), at.into()],
    )
}

/// Disables the endpoint for continuous failure, saying why.
pub fn disable(db: &D1Database, id: &str, reason: &str) -> DbResult<D1PreparedStatement> {
    bind(
        db,
        "UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = ?2 WHERE id = ?1",
        &[id.into(), reason.into()],
    )
}
