//! Notifications to an institution's admins (an endpoint disabled for continuous failure, payments
//! held from settlement, a settlement wallet changed, a merchant's debt limit changed).

use serde::{Deserialize, Serialize};
use shared_types::ids::InstitutionId;
use shared_types::time::UnixTime;

use super::{all, stmt, Db, DbResult, Stmt};

/// What a notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotificationKind {
    /// A webhook endpoint was disabled after failing continuously.
    EndpointDisabled,
    /// Payments held in custody cannot settle now (with why).
    SettlementHeld,
    /// A merchant's settlement wallet was set, changed or removed.
    WalletChanged,
    /// How far a merchant's balance may go into debt was changed.
    DebtLimitChanged,
    /// A payment is held by its screening, for review.
    ScreeningHold,
}

impl NotificationKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EndpointDisabled => "endpoint_disabled",
            Self::SettlementHeld => "settlement_held",
            Self::WalletChanged => "wallet_changed",
            Self::DebtLimitChanged => "debt_limit_changed",
            Self::ScreeningHold => "screening_hold",
        }
    }
}

impl std::fmt::Display for NotificationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happened to a notification's e-mail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EmailStatus {
    /// Handed to the e-mail binding.
    Sent,
    /// No e-mail binding or sender is configured.
    NotConfigured,
    /// The institution has no admin to write to.
    NoRecipients,
    /// The binding refused it.
    Failed,
}

impl EmailStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sent => "sent",
            Self::NotConfigured => "not_configured",
            Self::NoRecipients => "no_recipients",
            Self::Failed => "failed",
        }
    }
}

impl std::fmt::Display for EmailStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A notification to record.
pub struct NewNotification<'a> {
    /// The institution.
    pub institution_id: InstitutionId,
    /// Subject line.
    pub subject: &'a str,
    /// Text.
    pub body: &'a str,
    /// What happened to the e-mail.
    pub email_status: EmailStatus,
    /// Unix seconds.
    pub created_at: i64,
}

/// Records a notification of `kind`.
pub fn insert(kind: NotificationKind, n: &NewNotification<'_>) -> DbResult<Stmt> {
    stmt(
        "INSERT INTO notifications (institution_id, kind, subject, body, email_status, \
         created_at) VALUES (?1, ?6, ?2, ?3, ?4, ?5)",
        &[
            n.institution_id.into(),
            n.subject.into(),
            n.body.into(),
            n.email_status.as_str().into(),
            n.created_at.into(),
            kind.as_str().into(),
        ],
    )
}

/// A notification as the portal shows it.
#[derive(Debug, Deserialize, Serialize)]
pub struct Notification {
    /// Row id.
    pub id: i64,
    /// What it is about.
    pub kind: NotificationKind,
    /// Subject line.
    pub subject: String,
    /// Text.
    pub body: String,
    /// sent, not_configured, no_recipients, failed.
    pub email_status: EmailStatus,
    /// When.
    pub created_at: UnixTime,
}

/// The institution's newest notifications.
pub async fn list(db: &Db, institution_id: InstitutionId) -> DbResult<Vec<Notification>> {
    all(
        db,
        "SELECT id, kind, subject, body, email_status, created_at FROM notifications \
         WHERE institution_id = ?1 ORDER BY id DESC LIMIT 100",
        &[institution_id.into()],
    )
    .await
}
