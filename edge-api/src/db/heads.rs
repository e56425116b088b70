//! The newest block each network's node has reported and when it was first reported
//! (`node_heads`): how the worker tells a node whose head has stopped moving from a fresh one.

use serde::Deserialize;

use super::notifications::EmailStatus;
use super::{first, run, Db, DbError, DbResult};

/// A network's newest head as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Head {
    /// The highest block number its node has answered.
    pub head: i64,
    /// When that number was first answered (Unix seconds).
    pub first_seen_at: i64,
}

/// Records that `network`'s node answered `head` at `now`, and returns the newest head stored
/// after it: `head` first seen now when it is higher than any before, else the stored one with
/// its first sighting (a head that did not move, or moved back, changes nothing). One statement,
/// so racing readers keep the highest head and its earliest sighting.
pub async fn seen(db: &Db, network: &str, head: u64, now: i64) -> DbResult<Head> {
    let head = i64::try_from(head).unwrap_or(i64::MAX);
    first(
        db,
        "INSERT INTO node_heads (network, head, first_seen_at, checked_at) VALUES (?1, ?2, ?3, ?3) \
         ON CONFLICT (network) DO UPDATE SET \
         first_seen_at = CASE WHEN excluded.head > head THEN excluded.first_seen_at \
         ELSE first_seen_at END, \
         head = max(head, excluded.head), checked_at = excluded.checked_at \
         RETURNING head, first_seen_at",
        &[network.into(), head.into(), now.into()],
    )
    .await?
    .ok_or_else(|| DbError::bad_row("the head's upsert returned no row"))
}

/// Claims the alert about `network`'s node standing still at `head`: true for the one caller
/// that should e-mail the operator about this stall (the head moved since the last alert, or
/// none was sent), false for every other. One guarded statement, so racing runs send one.
pub async fn claim_alert(db: &Db, network: &str, head: i64, now: i64) -> DbResult<bool> {
    let changed = run(
        db,
        "UPDATE node_heads SET alerted_head = head, alerted_at = ?3, alert_email_status = NULL \
         WHERE network = ?1 AND head = ?2 AND alerted_head IS NOT head",
        &[network.into(), head.into(), now.into()],
    )
    .await?;
    Ok(changed == 1)
}

/// Records what became of the alert's e-mail.
pub async fn alerted(db: &Db, network: &str, status: EmailStatus) -> DbResult<()> {
    run(
        db,
        "UPDATE node_heads SET alert_email_status = ?2 WHERE network = ?1",
        &[network.into(), status.as_str().into()],
    )
    .await
    .map(drop)
}
