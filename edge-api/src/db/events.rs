//! Webhook events: the outbox rows written in the same batch as the change that causes them.

use serde::Deserialize;
use shared_types::ids::{EventId, InstitutionId};

use super::{all, first, stmt, Db, DbResult, JsonPage, Order, Owner, Select, Stmt, Value};
use crate::query::EventFilter;

/// An event to write.
pub struct OutboxEvent<'a> {
    /// `evt_…`.
    pub id: &'a str,
    /// Owning institution.
    pub institution_id: InstitutionId,
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
pub fn insert(e: &OutboxEvent<'_>, guard: Guard) -> DbResult<Stmt> {
    let condition = match guard {
        Guard::AfterChange => " WHERE changes() = 1",
        Guard::None => "",
    };
    stmt(
        &format!(
            "INSERT INTO events (id, institution_id, type, transaction_id, payload, created, \
             transaction_version, seq) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, \
             (SELECT COALESCE(max(seq), 0) + 1 FROM events){condition}"
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
pub async fn payload(db: &Db, event_id: &str) -> DbResult<Option<String>> {
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
    db: &Db,
    institution_id: InstitutionId,
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

/// The feed's order: creation order (`seq`), newest first; the cursor is the event's id.
const FEED_ORDER: Order = Order {
    by: "seq",
    cursor: "id",
};

/// The index whose equality columns match the feed's filters.
fn feed_index(filter: &EventFilter) -> &'static str {
    match (filter.kind, filter.transaction_id) {
        (_, Some(_)) => "events_by_institution_transaction",
        (Some(_), None) => "events_by_type",
        (None, None) => "events_by_institution",
    }
}

/// The statement of one feed page of `owner`'s events, newest first, one row over `limit`.
pub fn feed_query(owner: Owner<'_>, filter: &EventFilter) -> Select {
    let (institution, param) = owner.sql();
    let mut sql = format!(
        "SELECT id, seq, payload FROM events INDEXED BY {} WHERE institution_id = {institution}",
        feed_index(filter)
    );
    let mut params = vec![param];
    let mut and = |clause: &dyn Fn(usize) -> String, value: Value| {
        params.push(value);
        sql.push_str(" AND ");
        sql.push_str(&clause(params.len()));
    };
    if let Some(kind) = filter.kind {
        and(&|n| format!("type = ?{n}"), kind.as_str().into());
    }
    if let Some(id) = filter.transaction_id {
        and(&|n| format!("transaction_id = ?{n}"), id.into());
    }
    if let Some(cursor) = &filter.starting_after {
        // An unknown cursor (or another institution's) reads as the end: no rows.
        and(
            &|n| {
                format!(
                    "seq < COALESCE((SELECT seq FROM events WHERE id = ?{n} \
                     AND institution_id = {institution}), 0)"
                )
            },
            cursor.as_str().into(),
        );
    }
    if let Some(after) = filter.created_after {
        and(&|n| format!("created >= ?{n}"), after.into());
    }
    if let Some(before) = filter.created_before {
        and(&|n| format!("created < ?{n}"), before.into());
    }
    params.push(Value::Int(i64::from(filter.limit) + 1));
    sql.push_str(&format!(" ORDER BY seq DESC LIMIT ?{}", params.len()));
    Select { sql, params }
}

/// One page of the events feed as JSON (each event exactly as its deliveries send it).
pub async fn feed(db: &super::Db, owner: Owner<'_>, filter: &EventFilter) -> DbResult<JsonPage> {
    super::json_page(
        db,
        owner,
        feed_query(owner, filter),
        filter.limit,
        ("json(payload)", FEED_ORDER),
    )
    .await
}

/// One of `owner`'s events as JSON, exactly as its deliveries send it (`None` when it has no
/// such event); with a token, its scopes (`None` when it is not a live token) and, when its
/// institution's money is in its object, that institution (the event is read there): one
/// statement for all.
pub async fn get_json(db: &Db, owner: Owner<'_>, id: &EventId) -> DbResult<EventRead> {
    let (institution, param) = owner.sql();
    let row: Option<EventRead> = first(
        db,
        &format!(
            "SELECT (SELECT json(payload) FROM events WHERE id = ?2 \
             AND institution_id = {institution}) AS event, {} AS scopes, \
             {} AS object_institution",
            owner.scopes_sql(),
            owner.object_sql()
        ),
        &[param, id.as_str().into()],
    )
    .await?;
    Ok(row.unwrap_or_default())
}

/// What [`get_json`] read.
#[derive(Debug, Default, Deserialize)]
pub struct EventRead {
    /// The event's JSON.
    pub event: Option<String>,
    /// The token's scopes.
    pub scopes: Option<String>,
    /// The token's institution, when its money is in its object.
    pub object_institution: Option<i64>,
}

/// Deletes the events past their retention (see [`super::deliveries::PRUNABLE_EVENTS`]), after
/// the statements of [`super::deliveries::prune`] in the same batch have deleted their
/// deliveries.
pub fn prune(before: i64, limit: i64) -> DbResult<Stmt> {
    stmt(
        &format!(
            "DELETE FROM events WHERE id IN ({}) \
             AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id)",
            super::deliveries::PRUNABLE_EVENTS
        ),
        &[before.into(), limit.into()],
    )
}
