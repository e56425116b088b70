//! Notifications to an institution's admins (an endpoint disabled for continuous failure, payments
//! held from settlement).

use serde::{Deserialize, Serialize};
use worker::{D1Database, D1PreparedStatement};

use super::{all, bind, DbResult};

/// A notification to record.
pub struct NewNotification<'a> {
    /// The institution.
    pub institution_id: i64,
    /// Subject line.
    pub subject: &'a str,
    /// Text.
    pub body: &'a str,
    /// What happened to the e-mail: sent, not_configured, no_recipients, failed.
    pub email_status: &'a str,
    /// Unix seconds.
    pub created_at: i64,
}

/// Records an `endpoint_disabled` notification.
pub fn insert_endpoint_disabled(
    db: &D1Database,
    n: &NewNotification<'_>,
) -> DbResult<D1PreparedStatement> {
    insert(db, "endpoint_disabled", n)
}

/// Records a notification of `kind` (`endpoint_disabled`, `settlement_held`).
pub fn insert(
    db: &D1Database,
    kind: &str,
    n: &NewNotification<'_>,
) -> DbResult<D1PreparedStatement> {
    bind(
        db,
        "INSERT INTO notifications (institution_id, kind, subject, body, email_status, \
         created_at) VALUES (?1, ?6, ?2, ?3, ?4, ?5)",
        &[
            n.institution_id.into(),
            n.subject.into(),
            n.body.into(),
            n.email_status.into(),
            n.created_at.into(),
            kind.into(),
        ],
    )
}

/// A notification as the portal shows it.
#[derive(Debug, Deserialize, Serialize)]
pub struct NotificationRow {
    /// Row id.
    pub id: i64,
    /// endpoint_disabled, settlement_held.
    pub kind: String,
    /// Subject line.
    pub subject: String,
    /// Text.
    pub body: String,
    /// sent, not_configured, no_recipients, failed.
    pub email_status: String,
    /// Unix seconds.
    pub created_at: i64,
}

/// The institution's newest notifications.
pub async fn list(db: &D1Database, institution_id: i64) -> DbResult<Vec<NotificationRow>> {
    all(
        db,
        "SELECT id, kind, subject, body, email_status, created_at FROM notifications \
         WHERE institution_id = ?1 ORDER BY id DESC LIMIT 100",
        &[institution_id.into()],
    )
    .await
}
