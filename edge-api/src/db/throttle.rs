//! Failure counters (`auth_failures`): failed authentications per subject (a client id, or a
//! portal login's e-mail) and source address, in fixed windows.

use serde::Deserialize;
use shared_types::ids::Scoped;

use super::{first, run, stmt, Condition, Db, DbResult, Returning, Stmt, Value};

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
    db: &Db,
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
    db: &Db,
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

/// One window's count after an attempt ([`count_attempts_in_batch`], [`count_attempt_if`]).
#[derive(Debug, Deserialize)]
pub struct Counted {
    /// Unix seconds the window opened.
    pub window_start: i64,
    /// Attempts counted in the window, this one included.
    pub failures: i64,
}

impl Counted {
    /// The window.
    pub fn window(&self) -> Failures {
        Failures {
            window_start: self.window_start,
            failures: self.failures,
        }
    }
}

/// Counts one attempt in each of `windows` (subject, source, window length in seconds) in one
/// statement, as [`count_attempt`] does in one, for a batch: its rows are the windows
/// after the count, one per window (in no set order: each names its own).
pub fn count_attempts_in_batch(
    windows: &[(&str, &str, i64)],
    now: i64,
) -> DbResult<Returning<Counted>> {
    let (sql, params) = count_attempts(windows, now);
    stmt(&sql, &params).map(Returning::new)
}

/// [`count_attempts_in_batch`]'s SQL and parameters.
fn count_attempts(windows: &[(&str, &str, i64)], now: i64) -> (String, Vec<Value>) {
    let mut params: Vec<Value> = vec![now.into()];
    let mut rows = Vec::new();
    let mut lengths = Vec::new();
    for (subject, source, seconds) in windows {
        let n = params.len() + 1;
        rows.push(format!("(?{n}, ?{}, ?1, 1)", n + 1));
        lengths.push(format!(
            "WHEN client_id = ?{n} AND source = ?{} THEN ?{}",
            n + 1,
            n + 2
        ));
        params.extend([(*subject).into(), (*source).into(), (*seconds).into()]);
    }
    // A window closed `length` seconds after it opened starts afresh at this attempt.
    let closed = format!("window_start <= ?1 - CASE {} END", lengths.join(" "));
    let sql = format!(
        "INSERT INTO auth_failures (client_id, source, window_start, failures) VALUES {} \
         ON CONFLICT (client_id, source) DO UPDATE SET \
           failures = CASE WHEN {closed} THEN 1 ELSE failures + 1 END, \
           window_start = CASE WHEN {closed} THEN ?1 ELSE window_start END \
         RETURNING client_id, source, window_start, failures",
        rows.join(", ")
    );
    (sql, params)
}

/// Counts one attempt in the window (subject, source, window length in seconds) as
/// [`count_attempts_in_batch`] does, but only if `condition` holds when the batch reaches it:
/// its row is the window after the count, or none when nothing was counted.
pub fn count_attempt_if(
    (subject, source, seconds): (&str, &str, i64),
    now: i64,
    condition: &dyn Condition,
) -> DbResult<Returning<Counted>> {
    let (sql, params) = count_attempt_if_sql((subject, source, seconds), now, condition);
    stmt(&sql, &params).map(Returning::new)
}

/// [`count_attempt_if`]'s SQL and parameters.
fn count_attempt_if_sql(
    (subject, source, seconds): (&str, &str, i64),
    now: i64,
    condition: &dyn Condition,
) -> (String, Vec<Value>) {
    let mut params: Vec<Value> = vec![now.into(), subject.into(), source.into(), seconds.into()];
    let (holds, more) = condition.sql(params.len() + 1);
    params.extend(more);
    // `WHERE` makes the SELECT's end plain to SQLite's parser before the upsert clause.
    let sql = format!(
        "INSERT INTO auth_failures (client_id, source, window_start, failures) \
         SELECT ?2, ?3, ?1, 1 WHERE {holds} \
         ON CONFLICT (client_id, source) DO UPDATE SET \
           failures = CASE WHEN window_start <= ?1 - ?4 THEN 1 ELSE failures + 1 END, \
           window_start = CASE WHEN window_start <= ?1 - ?4 THEN ?1 ELSE window_start END \
         RETURNING client_id, source, window_start, failures"
    );
    (sql, params)
}

/// The window of `subject` from `source` as it stands, without counting anything (one row, or
/// none before its first attempt), for a batch that only reads.
pub fn window(subject: &str, source: &str) -> DbResult<Returning<Failures>> {
    stmt(
        "SELECT window_start, failures FROM auth_failures WHERE client_id = ?1 AND source = ?2",
        &[subject.into(), source.into()],
    )
    .map(Returning::new)
}

/// What the inserts of a batch that counts an attempt ([`count_attempts_in_batch`], earlier in
/// the same batch) are conditioned on: every count it just took is within its limit. A batch is
/// one transaction, so of N racing attempts exactly those whose own count is within the limit
/// insert anything.
#[derive(Debug, Clone, Default)]
pub struct Within {
    counts: Vec<(String, String, i64)>,
    just_counted: bool,
}

impl Within {
    /// No condition yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the condition that `subject`'s count from `source` is at most `max`.
    pub fn at_most(mut self, subject: &str, source: &str, max: i64) -> Self {
        self.counts
            .push((subject.to_owned(), source.to_owned(), max));
        self
    }

    /// Adds the condition that the statement just before the one it guards counted its
    /// attempt ([`count_attempt_if`], whose condition held): SQLite's `changes()` is what that
    /// statement changed, in a batch as anywhere on one connection.
    pub fn just_counted(mut self) -> Self {
        self.just_counted = true;
        self
    }
}

impl Condition for Within {
    /// A count with no row (none taken) is not within; no counts at all: always true.
    fn sql(&self, first: usize) -> (String, Vec<Value>) {
        let mut sql = Vec::new();
        let mut params = Vec::new();
        if self.just_counted {
            sql.push("changes() = 1".to_owned());
        }
        for (subject, source, max) in &self.counts {
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

/// The condition that the window of `subject` from `source` has room at `now` for one more
/// attempt: none counted yet, a window `seconds` long that has closed, or fewer than `max`.
#[derive(Debug, Clone)]
pub struct Room<'a> {
    /// The subject.
    pub subject: &'a str,
    /// The source.
    pub source: &'a str,
    /// Attempts a window allows.
    pub max: i64,
    /// Unix seconds.
    pub now: i64,
    /// The window's length.
    pub seconds: i64,
}

impl Condition for Room<'_> {
    fn sql(&self, first: usize) -> (String, Vec<Value>) {
        let n = first;
        (
            format!(
                "NOT EXISTS (SELECT 1 FROM auth_failures WHERE client_id = ?{n} \
                 AND source = ?{} AND failures >= ?{} AND window_start > ?{} - ?{})",
                n + 1,
                n + 2,
                n + 3,
                n + 4
            ),
            vec![
                self.subject.into(),
                self.source.into(),
                self.max.into(),
                self.now.into(),
                self.seconds.into(),
            ],
        )
    }
}

/// Gives back one count of the window of `subject` from `source` that an attempt took at
/// `held_at`, unless checkout session `session` exists (it was stored, and keeps its place):
/// nothing when the window has started afresh since, or holds nothing.
pub fn release_unless_stored(
    (subject, source): (&str, &str),
    held_at: i64,
    session: Scoped<&str>,
) -> DbResult<Stmt> {
    stmt(
        "UPDATE auth_failures SET failures = failures - 1 \
         WHERE client_id = ?1 AND source = ?2 AND window_start <= ?3 AND failures > 0 \
         AND NOT EXISTS (SELECT 1 FROM checkout_sessions WHERE id = ?4 AND institution_id = ?5)",
        &[
            subject.into(),
            source.into(),
            held_at.into(),
            session.id.into(),
            session.institution.into(),
        ],
    )
}

/// Forgets the failures of `subject` from `source` (after a success); with `issued`, only once
/// the access token with that hash exists (the one the same batch stores, if it does).
pub fn clear(subject: &str, source: &str, issued: Option<&str>) -> DbResult<Stmt> {
    stmt(
        "DELETE FROM auth_failures WHERE client_id = ?1 AND source = ?2 \
         AND (?3 IS NULL OR EXISTS (SELECT 1 FROM access_tokens WHERE token_hash = ?3))",
        &[subject.into(), source.into(), issued.into()],
    )
}

/// Deletes windows that opened at or before `closed_before`, at most `limit` of them.
pub async fn purge(db: &Db, closed_before: i64, limit: i64) -> DbResult<usize> {
    run(
        db,
        "DELETE FROM auth_failures WHERE (client_id, source) IN (SELECT client_id, source \
         FROM auth_failures INDEXED BY auth_failures_by_window \
         WHERE window_start <= ?1 ORDER BY window_start LIMIT ?2)",
        &[closed_before.into(), limit.into()],
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The windows after one attempt counted at `now`, by subject: (opened, count).
    fn count(conn: &rusqlite::Connection, now: i64) -> Vec<(String, i64, i64)> {
        let (sql, params) = count_attempts(
            &[("checkout:pk", "*", 60), ("checkout", "1.2.3.4", 900)],
            now,
        );
        let mut statement = conn.prepare(&sql).unwrap();
        let mut rows: Vec<(String, i64, i64)> = statement
            .query_map(rusqlite::params_from_iter(params.iter()), |r| {
                Ok((r.get(0)?, r.get(2)?, r.get(3)?))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows.sort();
        rows
    }

    #[test]
    fn one_statement_counts_an_attempt_in_each_window_each_closing_at_its_own_length() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        xtask::localdb::apply_migrations(&conn).unwrap();
        let (key, address) = ("checkout:pk".to_owned(), "checkout".to_owned());
        assert_eq!(
            count(&conn, 1_000),
            [(address.clone(), 1_000, 1), (key.clone(), 1_000, 1)]
        );
        assert_eq!(
            count(&conn, 1_059),
            [(address.clone(), 1_000, 2), (key.clone(), 1_000, 2)]
        );
        // The minute's window has closed, the quarter hour's has not.
        assert_eq!(
            count(&conn, 1_060),
            [(address.clone(), 1_000, 3), (key.clone(), 1_060, 1)]
        );
        assert_eq!(count(&conn, 1_900), [(address, 1_900, 1), (key, 1_900, 1)]);
    }

    #[test]
    fn a_conditional_count_counts_only_while_its_condition_holds() {
        struct Holds(bool);
        impl Condition for Holds {
            fn sql(&self, first: usize) -> (String, Vec<Value>) {
                (format!("?{first}"), vec![Value::from(i64::from(self.0))])
            }
        }
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        xtask::localdb::apply_migrations(&conn).unwrap();
        let count = |now: i64, holds: bool| -> Option<(i64, i64)> {
            let (sql, params) = count_attempt_if_sql(("checkout:pk", "*", 60), now, &Holds(holds));
            let mut statement = conn.prepare(&sql).unwrap();
            let mut rows = statement
                .query_map(rusqlite::params_from_iter(params.iter()), |r| {
                    Ok((r.get(2)?, r.get(3)?))
                })
                .unwrap();
            rows.next().map(Result::unwrap)
        };
        assert_eq!(count(1_000, false), None, "no row before the first count");
        assert_eq!(count(1_000, true), Some((1_000, 1)));
        assert_eq!(
            count(1_010, false),
            None,
            "a refused attempt is not counted"
        );
        assert_eq!(count(1_020, true), Some((1_000, 2)));
        assert_eq!(count(1_060, true), Some((1_060, 1)), "the window closed");
    }

    #[test]
    fn an_insert_just_after_a_count_with_room_sees_whether_it_was_counted() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        xtask::localdb::apply_migrations(&conn).unwrap();
        conn.execute_batch("CREATE TEMP TABLE stored (n INTEGER)")
            .unwrap();
        let within = Within::new().just_counted();
        // One attempt: the count with room for two, then the insert it guards.
        let attempt = |now: i64| -> bool {
            let room = Room {
                subject: "checkout:pk",
                source: "*",
                max: 2,
                now,
                seconds: 60,
            };
            let (count, params) = count_attempt_if_sql(("checkout:pk", "*", 60), now, &room);
            let mut statement = conn.prepare(&count).unwrap();
            let mut rows = statement
                .query(rusqlite::params_from_iter(params.iter()))
                .unwrap();
            while rows.next().unwrap().is_some() {}
            drop(rows);
            drop(statement);
            let (holds, params) = within.sql(1);
            conn.execute(
                &format!("INSERT INTO stored SELECT 1 WHERE {holds}"),
                rusqlite::params_from_iter(params.iter()),
            )
            .unwrap()
                == 1
        };
        assert!(attempt(1_000));
        assert!(attempt(1_010));
        assert!(
            !attempt(1_020),
            "the window is full: not counted, not stored"
        );
        let counted: i64 = conn
            .query_row("SELECT failures FROM auth_failures", [], |r| r.get(0))
            .unwrap();
        assert_eq!(counted, 2, "the refused attempt is not counted");
        assert!(attempt(1_060), "a new window has room");
    }
}
