//! Failure counters (`auth_failures`): failed authentications per subject (a client id, or a
//! portal login's e-mail) and source address, in fixed windows.

use serde::Deserialize;
use worker::{D1Database, D1PreparedStatement};

use super::{bind, first, run, DbResult, Returning, Value};

/// Failures of one subject from one source, in the current window.
#[derive(Debug, Deserialize)]
pub struct Failures {
    /// Unix seconds the window opened.
    pub window_start: i64,
    /// Failures counted in the window.
    pub failures: i64,
}

/// Counts one failure, opening a new window when the last one has closed.
pub async fn record_failure(
    db: &D1Database,
    subject: &str,
    source: &str,
    now: i64,
    window_seconds: i64,
) -> DbResult<()> {
    run(
        db,
        "INSERT INTO auth_failures (client_id, source, window_start, failures) \
         VALUES (?1, ?2, ?3, 1) \
         ON CONFLICT (client_id, source) DO UPDATE SET \
           failures = CASE WHEN window_start <= ?3 - ?4 THEN 1 ELSE failures + 1 END, \
           window_start = CASE WHEN window_start <= ?3 - ?4 THEN ?3 ELSE window_start END",
        &[
            subject.into(),
            source.into(),
            now.into(),
            window_seconds.into(),
        ],
    )
    .await
    .map(drop)
}

/// Counts one attempt, opening a new window when the last one has closed, and answers the
/// window as it stands after it.
const COUNT_ATTEMPT: &str =
    "INSERT INTO auth_failures (client_id, source, window_start, failures) \
     VALUES (?1, ?2, ?3, 1) \
     ON CONFLICT (client_id, source) DO UPDATE SET \
       failures = CASE WHEN window_start <= ?3 - ?4 THEN 1 ELSE failures + 1 END, \
       window_start = CASE WHEN window_start <= ?3 - ?4 THEN ?3 ELSE window_start END \
     RETURNING window_start, failures";

/// Counts one attempt first, atomically, and returns the window as it stands after it: of N
/// racing attempts each sees its own count, so no more than the limit get past.
pub async fn count_attempt(
    db: &D1Database,
    subject: &str,
    source: &str,
    now: i64,
    window_seconds: i64,
) -> DbResult<Failures> {
    let row: Option<Failures> = first(
        db,
        COUNT_ATTEMPT,
        &attempt(subject, source, now, window_seconds),
    )
    .await?;
    row.ok_or_else(|| super::DbError::bad_row("the attempt count returned no row"))
}

/// [`COUNT_ATTEMPT`]'s parameters.
fn attempt(subject: &str, source: &str, now: i64, window_seconds: i64) -> [Value; 4] {
    [
        subject.into(),
        source.into(),
        now.into(),
        window_seconds.into(),
    ]
}

/// [`count_attempt`] as a statement of a batch (its one row is the window after the count).
pub fn count_attempt_in_batch(
    db: &D1Database,
    subject: &str,
    source: &str,
    now: i64,
    window_seconds: i64,
) -> DbResult<Returning<Failures>> {
    bind(
        db,
        COUNT_ATTEMPT,
        &attempt(subject, source, now, window_seconds),
    )
    .map(Returning::new)
}

/// Forgets the failures of `subject` from `source` (after a success); with `issued`, only once
/// the access token with that hash exists (the one the same batch stores, if it does).
pub fn clear(
    db: &D1Database,
    subject: &str,
    source: &str,
    issued: Option<&str>,
) -> DbResult<D1PreparedStatement> {
    bind(
        db,
        "DELETE FROM auth_failures WHERE client_id = ?1 AND source = ?2 \
         AND (?3 IS NULL OR EXISTS (SELECT 1 FROM access_tokens WHERE token_hash = ?3))",
        &[subject.into(), source.into(), issued.into()],
    )
}

/// Deletes windows that opened at or before `closed_before`, at most `limit` of them.
pub async fn purge(db: &D1Database, closed_before: i64, limit: i64) -> DbResult<usize> {
    run(
        db,
        "DELETE FROM auth_failures WHERE (client_id, source) IN (SELECT client_id, source \
         FROM auth_failures INDEXED BY auth_failures_by_window \
         WHERE window_start <= ?1 ORDER BY window_start LIMIT ?2)",
        &[closed_before.into(), limit.into()],
    )
    .await
}
