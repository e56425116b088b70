//! Failure counters (`auth_failures`): failed authentications per subject (a client id, or a
//! portal login's e-mail) and source address, in fixed windows.

use serde::Deserialize;
use worker::{D1Database, D1PreparedStatement};

use super::{bind, first, run, Condition, DbResult, Returning, Value};

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

/// The window of `subject` from `source` as it stands, without counting anything (one row, or
/// none before its first attempt), for a batch that only reads.
pub fn window(db: &D1Database, subject: &str, source: &str) -> DbResult<Returning<Failures>> {
    bind(
        db,
        "SELECT window_start, failures FROM auth_failures WHERE client_id = ?1 AND source = ?2",
        &[subject.into(), source.into()],
    )
    .map(Returning::new)
}

/// What the inserts of a batch that counts an attempt ([`count_attempt_in_batch`], earlier in
/// the same batch) are conditioned on: every count it just took is within its limit. A batch is
/// one transaction, so of N racing attempts exactly those whose own count is within the limit
/// insert anything.
#[derive(Debug, Clone, Default)]
pub struct Within(Vec<(String, String, i64)>);

impl Within {
    /// No condition yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the condition that `subject`'s count from `source` is at most `max`.
    pub fn at_most(mut self, subject: &str, source: &str, max: i64) -> Self {
        self.0.push((subject.to_owned(), source.to_owned(), max));
        self
    }
}

impl Condition for Within {
    /// A count with no row (none taken) is not within; no counts at all: always true.
    fn sql(&self, first: usize) -> (String, Vec<Value>) {
        let mut sql = Vec::new();
        let mut params = Vec::new();
        for (subject, source, max) in &self.0 {
            let n = first + params.len();
            sql.push(format!(
                "coalesce((SELECT failures FROM auth_failures WHERE client_id = ?{n} \
                 AND source = ?{}), ?{} + 1) <= ?{}",
                n + 1,
                n + 2,
                n + 2
            ));
            params.extend([
                Value::from(subject.as_str()),
                Value::from(source.as_str()),
                Value::from(*max),
            ]);
        }
        if sql.is_empty() {
            return ("1".to_owned(), params);
        }
        (sql.join(" AND "), params)
    }
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
