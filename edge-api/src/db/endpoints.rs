//! Webhook endpoints. Every query of an institution's endpoints carries `institution_id`: another
//! institution's endpoint is simply not found.

use serde::Deserialize;
use shared_types::ids::InstitutionId;
use shared_types::EndpointStatus;

use super::{all, first, run, stmt, Db, DbResult, Stmt, Value};

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
    previous_secret_expires_at, created_at, updated_at, \
    disabled_reason";

/// The institution's endpoints, newest first.
pub async fn list(db: &Db, institution_id: InstitutionId) -> DbResult<Vec<EndpointRow>> {
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

/// An endpoint that needs someone's attention: disabled, or failing since a moment.
#[derive(Debug, Clone, Deserialize)]
pub struct Troubled {
    /// `ep_…`.
    pub id: String,
    /// Receiver URL.
    pub url: String,
    /// Free text.
    pub description: String,
    /// Enabled or disabled.
    pub status: EndpointStatus,
    /// Why Payrail disabled it, when it did.
    pub disabled_reason: Option<String>,
    /// Failing continuously since then (Unix seconds).
    pub first_failure_at: Option<i64>,
    /// Its last successful delivery (Unix seconds).
    pub last_success_at: Option<i64>,
}

/// The institution's disabled or failing endpoints (at most twenty exist), disabled first.
pub async fn troubled(db: &Db, institution_id: InstitutionId) -> DbResult<Vec<Troubled>> {
    all(
        db,
        "SELECT id, url, description, status, disabled_reason, first_failure_at, \
         last_success_at FROM webhook_endpoints WHERE institution_id = ?1 \
         AND (status = 'disabled' OR first_failure_at IS NOT NULL) \
         ORDER BY status = 'disabled' DESC, first_failure_at, id",
        &[institution_id.into()],
    )
    .await
}

/// One endpoint of the institution.
pub async fn get(
    db: &Db,
    institution_id: InstitutionId,
    id: &str,
) -> DbResult<Option<EndpointRow>> {
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
pub async fn insert(db: &Db, institution_id: InstitutionId, e: &EndpointRow) -> DbResult<()> {
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

/// The editable fields a change sets; `None` leaves a field as it is.
#[derive(Debug, Default)]
pub struct Changes {
    /// New URL.
    pub url: Option<String>,
    /// New description.
    pub description: Option<String>,
    /// New event types (`Some(None)`: every type).
    pub event_types: Option<Option<String>>,
    /// Disable it (an admin's choice: no automatic reason).
    pub disable: bool,
}

/// Writes only the fields `c` sets, so a concurrent rotation or automatic disable is never
/// overwritten with what this request read. False if no such endpoint.
pub async fn update(
    db: &Db,
    institution_id: InstitutionId,
    id: &str,
    c: &Changes,
    now_text: &str,
) -> DbResult<bool> {
    let mut params: Vec<Value> = vec![institution_id.into(), id.into(), now_text.into()];
    let mut sets = vec!["updated_at = ?3".to_owned()];
    let mut set = |column: &str, value: Value| {
        params.push(value);
        sets.push(format!("{column} = ?{}", params.len()));
    };
    if let Some(url) = &c.url {
        set("url", url.as_str().into());
    }
    if let Some(description) = &c.description {
        set("description", description.as_str().into());
    }
    if let Some(types) = &c.event_types {
        set("event_types", types.clone().into());
    }
    if c.disable {
        set("status", EndpointStatus::Disabled.as_str().into());
        set("disabled_reason", Value::Null);
    }
    let changed = run(
        db,
        &format!(
            "UPDATE webhook_endpoints SET {} WHERE institution_id = ?1 AND id = ?2",
            sets.join(", ")
        ),
        &params,
    )
    .await?;
    Ok(changed > 0)
}

/// A new signing secret, sealed.
pub struct Rotation<'a> {
    /// The sealed secret this rotation replaces, as read.
    pub replaces: &'a str,
    /// The new sealed secret.
    pub secret_encrypted: &'a str,
    /// The replaced one, while it keeps signing.
    pub previous_secret_encrypted: Option<&'a str>,
    /// End of its grace period.
    pub previous_secret_expires_at: Option<i64>,
}

/// Replaces the signing secret, only if it is still the one the rotation read: of two racing
/// rotations one wins and the other changes nothing. False if nothing was written.
pub async fn rotate_secret(
    db: &Db,
    institution_id: InstitutionId,
    id: &str,
    r: &Rotation<'_>,
    now_text: &str,
) -> DbResult<bool> {
    let changed = run(
        db,
        "UPDATE webhook_endpoints SET secret_encrypted = ?4, previous_secret_encrypted = ?5, \
         previous_secret_expires_at = ?6, updated_at = ?7 \
         WHERE institution_id = ?1 AND id = ?2 AND secret_encrypted = ?3",
        &[
            institution_id.into(),
            id.into(),
            r.replaces.into(),
            r.secret_encrypted.into(),
            r.previous_secret_encrypted.into(),
            r.previous_secret_expires_at.into(),
            now_text.into(),
        ],
    )
    .await?;
    Ok(changed > 0)
}

/// Deletes an endpoint.
pub fn delete(institution_id: InstitutionId, id: &str) -> DbResult<Stmt> {
    stmt(
        "DELETE FROM webhook_endpoints WHERE institution_id = ?1 AND id = ?2",
        &[institution_id.into(), id.into()],
    )
}

/// How many endpoints the institution has.
pub async fn count(db: &Db, institution_id: InstitutionId) -> DbResult<i64> {
    #[derive(Deserialize)]
    struct Count {
        n: i64,
    }
    let row: Option<Count> = first(
        db,
        "SELECT count(*) AS n FROM webhook_endpoints WHERE institution_id = ?1",
        &[institution_id.into()],
    )
    .await?;
    Ok(row.map_or(0, |c| c.n))
}

/// Enables an endpoint and clears its failure clock. False if no such endpoint.
pub async fn enable(
    db: &Db,
    institution_id: InstitutionId,
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
pub fn record_success(id: &str, at: i64) -> DbResult<Stmt> {
    stmt(
        "UPDATE webhook_endpoints SET last_success_at = ?2, first_failure_at = NULL WHERE id = ?1",
        &[id.into(), at.into()],
    )
}

/// A delivery failed: start the failure clock unless it runs already.
pub fn record_failure(id: &str, at: i64) -> DbResult<Stmt> {
    stmt(
        "UPDATE webhook_endpoints SET first_failure_at = coalesce(first_failure_at, ?2) \
         WHERE id = ?1",
        &[id.into(), at.into()],
    )
}

/// Disables the endpoint for continuous failure, saying why: only while it is enabled and
/// still failing since `first_failure_at`, the failure the decision was made on (a success
/// meanwhile cleared the clock; an admin or another attempt may have disabled it already).
pub fn disable(id: &str, reason: &str, now_text: &str, first_failure_at: i64) -> DbResult<Stmt> {
    stmt(
        "UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = ?2, updated_at = ?3 \
         WHERE id = ?1 AND status = 'enabled' AND first_failure_at = ?4",
        &[
            id.into(),
            reason.into(),
            now_text.into(),
            first_failure_at.into(),
        ],
    )
}

/// The ids of the institution's enabled endpoints subscribed to events of type `kind`: what an
/// event of an institution held in its object goes to (the object's fan-out is given them,
/// `deliveries::fan_out_to`).
pub async fn subscribed(
    db: &Db,
    institution_id: InstitutionId,
    kind: &str,
) -> DbResult<Vec<String>> {
    super::strings(
        db,
        "SELECT id FROM webhook_endpoints WHERE institution_id = ?1 AND status = 'enabled' \
         AND (event_types IS NULL OR instr(' ' || event_types || ' ', ' ' || ?2 || ' ') > 0) \
         ORDER BY id",
        &[institution_id.into(), kind.into()],
    )
    .await
}

/// What a delivery of an institution held in its object needs of its endpoint (the directory's
/// row), read on its own: `None` when the endpoint is gone.
#[derive(Debug, Deserialize)]
pub struct ForDelivery {
    /// Its URL.
    pub url: Option<String>,
    /// Its status.
    pub status: EndpointStatus,
    /// Sealed current secret.
    pub secret_encrypted: Option<String>,
    /// Sealed previous secret.
    pub previous_secret_encrypted: Option<String>,
    /// End of its grace period.
    pub previous_secret_expires_at: Option<i64>,
    /// First failure with no success since.
    pub first_failure_at: Option<i64>,
    /// Its last successful delivery.
    pub last_success_at: Option<i64>,
}

/// The endpoint `id` of `institution_id`, for a delivery.
pub async fn for_delivery(
    db: &Db,
    institution_id: InstitutionId,
    id: &str,
) -> DbResult<Option<ForDelivery>> {
    super::first(
        db,
        "SELECT url, status, secret_encrypted, previous_secret_encrypted, \
         previous_secret_expires_at, first_failure_at, last_success_at \
         FROM webhook_endpoints WHERE id = ?1 AND institution_id = ?2",
        &[id.into(), institution_id.into()],
    )
    .await
}
