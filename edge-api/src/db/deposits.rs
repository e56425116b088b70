//! Deposit address indexes: one counter per key family, so every derived address is used once,
//! and the directory's index of custody's addresses (`custody_addresses`): every address derived,
//! at its index, with the institution it was given to. The cron derives addresses ahead of the
//! counter, so the batch that takes an index finds its address there and marks it given.

use serde::Deserialize;
use shared_types::ids::InstitutionId;

use super::{all, first, stmt, Condition, Db, DbError, DbResult, Returning, Stmt, Value};

/// An allocated index.
#[derive(Debug, Deserialize)]
pub struct Index {
    /// The index.
    pub index: i64,
}

/// What a custody address is given out for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A checkout's deposit address.
    Checkout,
    /// A merchant's top-up address.
    Topup,
}

impl Purpose {
    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Checkout => "checkout",
            Purpose::Topup => "topup",
        }
    }
}

/// An index just taken, and its address if it was derived ahead (lower case); `None` when the
/// taker must derive it and [`fill`] it.
#[derive(Debug, Deserialize)]
pub struct Given {
    /// The index.
    pub index: i64,
    /// Its address, lower case, if derived ahead.
    pub address: Option<String>,
}

/// Takes the next index of `family`, atomically: concurrent takers never get the same one. Its
/// result is not read: [`give`], next in the same batch, answers the index and its address.
pub fn allocate(family: &str) -> DbResult<Stmt> {
    stmt(
        "INSERT INTO deposit_indexes (family, next) VALUES (?1, 1) \
         ON CONFLICT (family) DO UPDATE SET next = next + 1",
        &[family.into()],
    )
}

/// [`allocate`] as a statement of the batch that counts a checkout attempt, taken only when
/// `within` holds (the attempt's counts, taken earlier in the batch, are within their limits,
/// and the facts its session is made on still hold: [`super::sessions::Admitted`]): otherwise
/// it takes nothing. An attempt past its limits never uses up an index. [`give`] follows it.
pub fn allocate_within(family: &str, within: &dyn Condition) -> DbResult<Stmt> {
    let (condition, mut params) = within.sql(2);
    params.insert(0, family.into());
    stmt(
        &format!(
            "INSERT INTO deposit_indexes (family, next) SELECT ?1, 1 WHERE {condition} \
             ON CONFLICT (family) DO UPDATE SET next = next + 1"
        ),
        &params,
    )
}

/// The index the statement just before took (an [`allocate`] of `family`), given to
/// `institution` for `purpose` in the directory's index: its row derived ahead is marked, or a
/// row without its address is made for it. Only if the statement just before changed a row (took
/// an index); it then always changes one itself, so a statement after it may follow it with
/// [`super::AfterChange`]. Answers the index and, if derived ahead, its address.
pub fn give(
    family: &str,
    institution: InstitutionId,
    purpose: Purpose,
) -> DbResult<Returning<Given>> {
    stmt(
        "INSERT INTO custody_addresses (family, derivation_index, institution_id, purpose) \
         SELECT ?1, next - 1, ?2, ?3 FROM deposit_indexes WHERE family = ?1 AND changes() = 1 \
         ON CONFLICT (family, derivation_index) DO UPDATE \
         SET institution_id = excluded.institution_id, purpose = excluded.purpose \
         RETURNING derivation_index AS \"index\", address",
        &[family.into(), institution.into(), purpose.as_str().into()],
    )
    .map(Returning::new)
}

/// Records `address` (any case) as the address of index `index` of `family`, if its row has none
/// yet: every writer derives the same address, so a race between them is harmless.
pub fn fill(family: &str, index: i64, address: &str) -> DbResult<Stmt> {
    stmt(
        "UPDATE custody_addresses SET address = ?3 \
         WHERE family = ?1 AND derivation_index = ?2 AND address IS NULL",
        &[
            family.into(),
            index.into(),
            address.to_ascii_lowercase().into(),
        ],
    )
}

/// How far `family`'s indexes were taken and indexed.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
pub struct Counter {
    /// The next index to take: every index below it was given out.
    pub next: i64,
    /// Every index below it has its row and address in the index.
    pub indexed_to: i64,
}

impl Counter {
    /// The indexes given out whose address the index may not hold yet.
    pub fn unindexed(&self) -> std::ops::Range<i64> {
        self.indexed_to..self.next.max(self.indexed_to)
    }
}

/// `family`'s counter (zeros before its first index is taken or derived).
pub async fn counter(db: &Db, family: &str) -> DbResult<Counter> {
    let row: Option<Counter> = first(
        db,
        "SELECT next, indexed_to FROM deposit_indexes WHERE family = ?1",
        &[family.into()],
    )
    .await?;
    Ok(row.unwrap_or_default())
}

/// The indexes in `range` of `family` whose address the index holds.
pub async fn with_address(
    db: &Db,
    family: &str,
    range: std::ops::Range<i64>,
) -> DbResult<Vec<i64>> {
    all(
        db,
        "SELECT derivation_index AS \"index\" FROM custody_addresses \
         WHERE family = ?1 AND derivation_index >= ?2 AND derivation_index < ?3 \
         AND address IS NOT NULL ORDER BY derivation_index",
        &[family.into(), range.start.into(), range.end.into()],
    )
    .await
    .map(|rows: Vec<Index>| rows.into_iter().map(|r| r.index).collect())
}

/// Rows of addresses (index, address) one [`put`] statement writes: three values each, within
/// D1's 100 bound values.
const PUT_ROWS: usize = 33;

/// Stores derived addresses (index, address in any case) of `family` in the index: a row made
/// free (or given out, below the counter, before the index kept it), or an existing row's missing
/// address filled. A row that has its address keeps it (the same, derived alike).
pub fn put(family: &str, derived: &[(i64, String)]) -> DbResult<Vec<Stmt>> {
    derived
        .chunks(PUT_ROWS)
        .map(|rows| {
            let mut params: Vec<Value> = Vec::with_capacity(rows.len() * 3);
            let values: Vec<String> = rows
                .iter()
                .enumerate()
                .map(|(i, (index, address))| {
                    params.push(family.into());
                    params.push((*index).into());
                    params.push(address.to_ascii_lowercase().into());
                    format!("(?{}, ?{}, ?{})", 3 * i + 1, 3 * i + 2, 3 * i + 3)
                })
                .collect();
            stmt(
                &format!(
                    "INSERT INTO custody_addresses (family, derivation_index, address) \
                     VALUES {} ON CONFLICT (family, derivation_index) DO UPDATE \
                     SET address = excluded.address WHERE address IS NULL",
                    values.join(", ")
                ),
                &params,
            )
        })
        .collect()
}

/// Records that every index of `family` below `to` has its address in the index (never moving
/// back: concurrent runs record the furthest).
pub fn indexed(family: &str, to: i64) -> DbResult<Stmt> {
    stmt(
        "INSERT INTO deposit_indexes (family, next, indexed_to) VALUES (?1, 0, ?2) \
         ON CONFLICT (family) DO UPDATE SET indexed_to = max(indexed_to, excluded.indexed_to)",
        &[family.into(), to.into()],
    )
}

/// Whether `address` (lower-case hex) is in the directory's index of custody's addresses (given
/// out or derived ahead). The indexes given out but not yet indexed ([`Counter::unindexed`]) are
/// the caller's to derive and compare.
pub async fn in_index(db: &Db, address: &str) -> DbResult<bool> {
    #[derive(Deserialize)]
    struct Found {
        found: i64,
    }
    let row: Option<Found> = first(
        db,
        "SELECT EXISTS (SELECT 1 FROM custody_addresses WHERE address = ?1) AS found",
        &[address.into()],
    )
    .await?;
    row.map(|r| r.found == 1)
        .ok_or_else(|| DbError::bad_row("the address check returned no row"))
}

/// Whether `address` (lower-case hex) is one of `institution`'s own deposit or top-up addresses
/// in `db` (in its object: whether the object keeps that deposit).
pub async fn store_holds(db: &Db, institution: InstitutionId, address: &str) -> DbResult<bool> {
    #[derive(Deserialize)]
    struct Kept {
        kept: i64,
    }
    let row: Option<Kept> = first(
        db,
        "SELECT EXISTS (SELECT 1 FROM deposit_watches WHERE institution_id = ?1 AND address = ?2) \
         OR EXISTS (SELECT 1 FROM topup_addresses WHERE institution_id = ?1 AND address = ?2) \
         AS kept",
        &[institution.into(), address.into()],
    )
    .await?;
    Ok(row.is_some_and(|r| r.kept == 1))
}

#[cfg(test)]
mod tests {
    use rusqlite::{params_from_iter, Connection, OptionalExtension};

    use super::*;
    use crate::db::sessions::Always;
    use crate::db::Condition;
    use crate::sql::Statement;

    fn database() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        xtask::localdb::apply_migrations(&conn).unwrap();
        // Only the index is under test: the institution it names need not exist.
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        conn
    }

    fn exec(conn: &Connection, statement: &Stmt) -> usize {
        conn.execute(statement.sql(), params_from_iter(statement.params().iter()))
            .unwrap()
    }

    /// The allocation and the give, as one checkout's batch runs them (in one transaction).
    fn take(conn: &Connection, within: &dyn Condition) -> Option<(i64, Option<String>)> {
        exec(conn, &allocate_within("evm", within).unwrap());
        let given = give("evm", InstitutionId(7), Purpose::Checkout)
            .unwrap()
            .statement();
        conn.query_row(given.sql(), params_from_iter(given.params().iter()), |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()
        .unwrap()
    }

    fn row(conn: &Connection, index: i64) -> (Option<String>, Option<i64>, Option<String>) {
        conn.query_row(
            "SELECT address, institution_id, purpose FROM custody_addresses \
             WHERE family = 'evm' AND derivation_index = ?1",
            [index],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
    }

    struct Never;
    impl Condition for Never {
        fn sql(&self, _first: usize) -> (String, Vec<Value>) {
            ("0".to_owned(), Vec::new())
        }
    }

    fn counter_of(conn: &Connection) -> Counter {
        conn.query_row(
            "SELECT next, indexed_to FROM deposit_indexes WHERE family = 'evm'",
            [],
            |r| {
                Ok(Counter {
                    next: r.get(0)?,
                    indexed_to: r.get(1)?,
                })
            },
        )
        .unwrap()
    }

    #[test]
    fn an_index_taken_is_given_with_its_address_derived_ahead_or_filled_after() {
        let conn = database();
        // Nothing derived ahead: the first index is given with no address, then filled.
        assert_eq!(take(&conn, &Always), Some((0, None)));
        assert_eq!(row(&conn, 0), (None, Some(7), Some("checkout".into())));
        exec(
            &conn,
            &fill("evm", 0, "0xAbC0000000000000000000000000000000000000").unwrap(),
        );
        assert_eq!(
            row(&conn, 0).0.as_deref(),
            Some("0xabc0000000000000000000000000000000000000")
        );
        // The cron derives ahead: index 0 (filled) keeps its address; 1 and 2 become free rows.
        let derived: Vec<(i64, String)> = (0..3).map(|i| (i, format!("0x{i:040x}"))).collect();
        for statement in put("evm", &derived).unwrap() {
            exec(&conn, &statement);
        }
        exec(&conn, &indexed("evm", 3).unwrap());
        assert_eq!(
            row(&conn, 0).0.as_deref(),
            Some("0xabc0000000000000000000000000000000000000")
        );
        assert_eq!(row(&conn, 1), (Some(format!("0x{:040x}", 1)), None, None));
        assert_eq!(
            counter_of(&conn),
            Counter {
                next: 1,
                indexed_to: 3
            }
        );
        assert!(counter_of(&conn).unindexed().is_empty());
        // The next checkout finds index 1's address ahead and marks it given.
        assert_eq!(
            take(&conn, &Always),
            Some((1, Some(format!("0x{:040x}", 1))))
        );
        assert_eq!(row(&conn, 1).1, Some(7));
        // An attempt past its limits takes no index, and the give after it marks nothing (not
        // index 1 again, nor 2).
        assert_eq!(take(&conn, &Never), None);
        assert_eq!(row(&conn, 2).1, None);
        assert_eq!(counter_of(&conn).next, 2);
        // The watermark never moves back; past the ahead rows, the taken ones are unindexed.
        exec(&conn, &indexed("evm", 1).unwrap());
        assert_eq!(counter_of(&conn).indexed_to, 3);
        for _ in 0..3 {
            take(&conn, &Always).unwrap();
        }
        assert_eq!(counter_of(&conn).unindexed(), 3..5);
    }

    #[test]
    fn derived_addresses_are_written_within_d1s_bound_values() {
        let conn = database();
        let derived: Vec<(i64, String)> = (0..100).map(|i| (i, format!("0x{i:040x}"))).collect();
        let statements = put("evm", &derived).unwrap();
        assert_eq!(statements.len(), 4);
        for statement in &statements {
            assert!(statement.params().len() <= 100);
            exec(&conn, statement);
        }
        let count: i64 = conn
            .query_row("SELECT count(*) FROM custody_addresses", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, 100);
        // The same again changes nothing (a racing run derives the same).
        for statement in &statements {
            assert_eq!(exec(&conn, statement), 0);
        }
    }
}
