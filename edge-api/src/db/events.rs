//! Webhook events: the outbox rows written in the same batch as the change that causes them.

use serde::Deserialize;
use worker::{D1Database, D1PreparedStatement};

use super::{all, bind, first, DbResult};

/// An event to write.
pub struct OutboxEvent<'a> {
    /// `evt_…`.
    pub id: &'a str,
    /// Owning institution.
    pub institution_id: i64,
    /// Event type.
    pub kind: &'a str,
    /// The transaction.
    pub transaction_id: i64,
    /// The JSON body deliveries send.
    pub payload: &'a str,
    /// Unix seconds.
    pub created: i64,
    /// The transaction's version after the change (`None` for test events).
    pub transaction_version: Option<i64>,
}

/// Whether the event row depends on the statement before it in the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// Written only if the statement before it changed a row (`changes() = 1`): the event of a
    /// guarded state change.
    AfterChange,
    /// Written unconditionally (test events).
    None,
}

/// The event row.
pub fn insert(db: &D1Database, e: &OutboxEvent<'_>, guard: Guard) -> DbResult<D1PreparedStatement> {
    let condition = match guard {
        Guard::AfterChange => " WHERE changes() = 1",
        Guard::None => "",
    };
    bind(
        db,
        &format!(
            "INSERT INTO events (id, institution_id, type, transaction_id, payload, created, \
             transaction_version) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7{condition}"
        ),
        &[
            e.id.into(),
            e.institution_id.into(),
            e.kind.into(),
            e.transaction_id.into(),
            e.payload.into(),
            e.created.into(),
            e.transaction_version.into(),
        ],
    )
}

/// The body an event's deliveries send.
pub async fn payload(db: &D1Database, event_id: &str) -> DbResult<Option<String>> {
    #[derive(Deserialize)]
    struct Payload {
        payload: String,
    }
    let row: Option<Payload> = first(
        db,
        "SELECT payload FROM events WHERE id = ?1",
        &[event_id.into()],
    )
    .await?;
    Ok(row.map(|r| r.payload))
}

/// An event as a payment's timeline shows it.
#[derive(Debug, Clone, Deserialize)]
pub struct EventRow {
    /// `evt_…`.
    pub id: String,
    /// Event type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Unix seconds.
    pub created: i64,
}

/// The events of one of the institution's transactions, oldest first (at most 200).
pub async fn of_transaction(
    db: &D1Database,
    institution_id: i64,
    transaction_id: i64,
) -> DbResult<Vec<EventRow>> {
    all(
        db,
        "SELECT id, type, created FROM events WHERE transaction_id = ?1 AND institution_id = ?2 \
         ORDER BY created, transaction_version, id LIMIT 200",
        &[transaction_id.into(), institution_id.into()],
    )
    .await
}
