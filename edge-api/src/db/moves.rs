//! Moving an institution's money tables from D1 into its object: every table of an institution's
//! store, read from D1 page by page in key order, written into the object as the same rows, and
//! read back from both in the same order to compare. The one module that names every money
//! table: a move copies rows as they are, so its statements are built from the table list below
//! (each table's rows are still written by its own module everywhere else).

use serde_json::{Map, Value as Json};

use shared_types::ledger::reads::Part;

use super::ledger::{AccountView, VIEW_COLUMNS};
use super::{all, stmt, DbError, DbResult, Stmt, Value};

/// A money table as a move reads it: its name, the columns that order it (its key), and which
/// of its rows are the institution's (`?1` is the institution).
pub struct Table {
    /// The table.
    pub name: &'static str,
    /// Its key's columns, in order: pages are read in this order on both sides.
    pub key: &'static str,
    /// The condition naming the institution's rows.
    pub whose: &'static str,
}

/// Rows of the institution by its own column.
const OWN: &str = "institution_id = ?1";

/// Every money table, parents before the rows that refer to them (the object's foreign keys).
pub const TABLES: &[Table] = &[
    Table {
        name: "transactions",
        key: "id",
        whose: OWN,
    },
    Table {
        name: "payment_parts",
        key: "transaction_id, part",
        whose: OWN,
    },
    Table {
        name: "checkout_sessions",
        key: "id",
        whose: OWN,
    },
    Table {
        name: "idempotency_keys",
        key: "merchant_id, key",
        // Keyed by merchant (the directory's merchants name the institution).
        whose: "merchant_id IN (SELECT id FROM merchants WHERE institution_id = ?1)",
    },
    Table {
        name: "deposit_watches",
        key: "address",
        whose: OWN,
    },
    Table {
        name: "chain_transfers",
        key: "network, tx_hash, log_index, address",
        whose: OWN,
    },
    Table {
        name: "settlements",
        key: "id",
        whose: OWN,
    },
    Table {
        name: "settlement_claims",
        key: "transaction_id, part",
        whose: OWN,
    },
    Table {
        name: "settlement_items",
        key: "send_id, transaction_id",
        whose: OWN,
    },
    Table {
        name: "settlement_holds",
        key: "transaction_id",
        whose: OWN,
    },
    Table {
        name: "refunds",
        key: "id",
        whose: OWN,
    },
    Table {
        name: "topup_addresses",
        key: "address",
        whose: OWN,
    },
    Table {
        name: "topup_watches",
        key: "address, token",
        whose: OWN,
    },
    Table {
        name: "topup_transfers",
        key: "network, tx_hash, log_index, address, token",
        whose: OWN,
    },
    Table {
        name: "topup_reviews",
        key: "id",
        whose: OWN,
    },
    Table {
        name: "screening_reviews",
        key: "transaction_id",
        whose: OWN,
    },
    Table {
        name: "screenings",
        key: "id",
        // A settlement wallet's decision is the directory's: it stays in D1.
        whose: "institution_id = ?1 AND subject <> 'wallet'",
    },
    Table {
        name: "events",
        key: "id",
        whose: OWN,
    },
    Table {
        name: "deliveries",
        key: "id",
        whose: OWN,
    },
    Table {
        name: "delivery_attempts",
        key: "id",
        // Keyed by delivery.
        whose: "delivery_id IN (SELECT id FROM deliveries WHERE institution_id = ?1)",
    },
];

/// One row as read, column by column.
pub type Row = Map<String, Json>;

/// Where the directory holds `institution`'s money (`d1` or `object`); `None` for no such
/// institution.
pub async fn store_of(db: &super::Db, institution: i64) -> DbResult<Option<String>> {
    #[derive(serde::Deserialize)]
    struct Found {
        store: String,
    }
    let found: Option<Found> = super::first(
        db,
        "SELECT store FROM institutions WHERE id = ?1",
        &[Value::Int(institution)],
    )
    .await?;
    Ok(found.map(|f| f.store))
}

/// One part of the books an institution's object holds ([`Part`]), as reconciliation reads it,
/// row by row: what the operator's endpoint serves `xtask reconcile --remote`.
pub async fn books(object: &super::Db, part: &Part) -> DbResult<Vec<Row>> {
    all(object, &part.sql(), &[]).await
}

/// Most institutions' objects one cron run tends (each of its tasks that reaches into them):
/// the next runs take the others, in turn.
pub const HELD_PER_RUN: i64 = 25;

/// An institution held in its object, with what the cron's work there needs of the directory.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
pub struct Held {
    /// Its id.
    pub id: i64,
    /// Its PSP fee, in basis points (what its settlements charge).
    pub psp_fee_bps: u32,
}

/// Up to `limit` institutions held in their objects, the `turn`-th such group in id order
/// (wrapping around): a caller that reads a few at a time takes every one in turn.
pub async fn held(db: &super::Db, limit: i64, turn: i64) -> DbResult<Vec<Held>> {
    all(
        db,
        "WITH held AS (SELECT count(*) AS n FROM institutions WHERE store = 'object') \
         SELECT id, psp_fee_bps FROM institutions WHERE store = 'object' ORDER BY id LIMIT ?1 \
         OFFSET (SELECT CASE WHEN n <= ?1 THEN 0 ELSE (?2 * ?1) % n END FROM held)",
        &[Value::Int(limit), Value::Int(turn)],
    )
    .await
}

/// A page of `table`'s rows in key order: `institution`'s rows in D1, or every row of an
/// object (`None`: all of them are its institution's).
pub async fn page(
    db: &super::Db,
    table: &Table,
    institution: Option<i64>,
    offset: i64,
    limit: i64,
) -> DbResult<Vec<Row>> {
    let (whose, mut params) = match institution {
        Some(institution) => (table.whose, vec![Value::Int(institution)]),
        // Every row: `?1` is bound (to NULL) only to keep the page's numbering.
        None => ("?1 IS NULL", vec![Value::Null]),
    };
    params.extend([Value::Int(limit), Value::Int(offset)]);
    all(
        db,
        &format!(
            "SELECT * FROM {} WHERE {whose} ORDER BY {} LIMIT ?2 OFFSET ?3",
            table.name, table.key
        ),
        &params,
    )
    .await
}

/// Every row of every money table in the object deleted, children first: a copy starts from
/// nothing (until the directory routes the institution to its object, nothing reads it).
pub fn clear() -> DbResult<Vec<Stmt>> {
    // The object's own tables first: its requests refer to its settlements and refunds, and its
    // books are opened again by the move.
    let own = ["object_sends", "ledger_transfers", "ledger_accounts"];
    own.iter()
        .map(|table| stmt(&format!("DELETE FROM {table}"), &[]))
        .chain(
            TABLES
                .iter()
                .rev()
                .map(|table| stmt(&format!("DELETE FROM {}", table.name), &[])),
        )
        .collect()
}

/// `row` of `table` inserted as it is.
pub fn insert(table: &Table, row: &Row) -> DbResult<Stmt> {
    let mut columns = Vec::with_capacity(row.len());
    let mut values = Vec::with_capacity(row.len());
    for (column, value) in row {
        if !column
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(DbError::bad_row(format!(
                "{}: a column named {column:?}",
                table.name
            )));
        }
        columns.push(column.as_str());
        values.push(value_of(table, column, value)?);
    }
    let placeholders: Vec<String> = (1..=values.len()).map(|n| format!("?{n}")).collect();
    stmt(
        &format!(
            "INSERT INTO {} ({}) VALUES ({})",
            table.name,
            columns.join(", "),
            placeholders.join(", ")
        ),
        &values,
    )
}

/// A stored value as it is bound again: NULL, an integer or text (no table holds anything
/// else; anything else is refused by name rather than changed).
fn value_of(table: &Table, column: &str, value: &Json) -> DbResult<Value> {
    match value {
        Json::Null => Ok(Value::Null),
        Json::String(text) => Ok(Value::Text(text.clone())),
        Json::Number(n) if n.is_i64() => Ok(Value::Int(n.as_i64().unwrap_or_default())),
        other => Err(DbError::bad_row(format!(
            "{}.{column}: a value that is neither null, an integer nor text ({other})",
            table.name
        ))),
    }
}

// ---------------------------------------------------------------------------------------------
// The move (`crate::shard::move_in`)

/// How long a move may go on with no request continuing it (its request ended midway and none
/// came after) before the cron gives it up: the institution works from D1 again, and the next
/// move starts afresh.
pub const MOVE_STALE_SECONDS: i64 = 300;

/// The move of `institution` running now: when it started (its freeze, which names it), if one
/// does.
pub async fn moving_since(db: &super::Db, institution: i64) -> DbResult<Option<i64>> {
    #[derive(serde::Deserialize)]
    struct Found {
        moving_since: Option<i64>,
    }
    let found: Option<Found> = super::first(
        db,
        "SELECT moving_since FROM institutions WHERE id = ?1 AND store = 'd1'",
        &[Value::Int(institution)],
    )
    .await?;
    Ok(found.and_then(|f| f.moving_since))
}

/// A move's start, as its freeze set it.
#[derive(Debug, serde::Deserialize)]
pub struct Frozen {
    /// The move's start: `now`, or just after the institution's last move's if that was later
    /// (two moves within a second are told apart).
    pub moving_since: i64,
}

/// The statement that freezes `institution`'s money in D1 for a move starting `now` (migration
/// 0036's triggers then refuse any write of its rows, and D1's cron reads leave them): only
/// while its money is in D1 and no move runs (a move running is gone on with, never started
/// again). Answers the move's start, which names it: never an earlier move's.
pub fn freeze(institution: i64, now: i64) -> DbResult<super::Returning<Frozen>> {
    stmt(
        "UPDATE institutions SET moving_since = max(?2, coalesce(move_last, 0) + 1), \
         move_last = max(?2, coalesce(move_last, 0) + 1), move_touched_at = ?2 \
         WHERE id = ?1 AND store = 'd1' AND moving_since IS NULL RETURNING moving_since",
        &[Value::Int(institution), Value::Int(now)],
    )
    .map(super::Returning::new)
}

/// The statement that records a request going on with the move started at `since` at `now`
/// (nothing if that move ended).
pub fn touch(institution: i64, since: i64, now: i64) -> DbResult<Stmt> {
    stmt(
        "UPDATE institutions SET move_touched_at = ?3 \
         WHERE id = ?1 AND store = 'd1' AND moving_since = ?2",
        &[Value::Int(institution), Value::Int(since), Value::Int(now)],
    )
}

/// The statement that ends the move started at `since` that did not flip: `institution`'s
/// money works from D1 again.
pub fn thaw(institution: i64, since: i64) -> DbResult<Stmt> {
    stmt(
        "UPDATE institutions SET moving_since = NULL, move_touched_at = NULL \
         WHERE id = ?1 AND store = 'd1' AND moving_since = ?2",
        &[Value::Int(institution), Value::Int(since)],
    )
}

/// The statement that gives up every move no request has gone on with for
/// [`MOVE_STALE_SECONDS`] by `now` (the cron's).
pub fn give_up_stale(now: i64) -> DbResult<Stmt> {
    stmt(
        "UPDATE institutions SET moving_since = NULL, move_touched_at = NULL \
         WHERE store = 'd1' AND moving_since IS NOT NULL \
         AND coalesce(move_touched_at, moving_since) < ?1 - ?2",
        &[Value::Int(now), Value::Int(MOVE_STALE_SECONDS)],
    )
}

/// The statement that points the directory at `institution`'s object, ending its move started
/// at `since` (only that move's: one given up, or started again, changes nothing, and the caller
/// refuses its batch).
pub fn flip(institution: i64, since: i64) -> DbResult<Stmt> {
    stmt(
        "UPDATE institutions SET store = 'object', moving_since = NULL, move_touched_at = NULL \
         WHERE id = ?1 AND store = 'd1' AND moving_since = ?2",
        &[Value::Int(institution), Value::Int(since)],
    )
}

// ---------------------------------------------------------------------------------------------
// A move's pages, kept in the object (`object_move_pages`)

/// The name a move's start is recorded under in its pages.
const STARTED: &str = "";

/// What the object has recorded of the move started at `since`.
#[derive(Debug, Default)]
pub struct Progress {
    /// Whether the move started in the object (its tables emptied for it).
    pub started: bool,
    /// Each table's rows copied, and whether its last page was copied (a page short of full).
    pub tables: std::collections::BTreeMap<String, (i64, bool)>,
}

impl Progress {
    /// Table `name`'s rows copied, and whether it is whole.
    pub fn of(&self, name: &str) -> (i64, bool) {
        self.tables.get(name).copied().unwrap_or((0, false))
    }
}

/// The pages `object` recorded for the move started at `since`; a page is whole at
/// `page_rows` rows.
pub async fn progress(object: &super::Db, since: i64, page_rows: i64) -> DbResult<Progress> {
    let pages: Vec<Page> = all(object, PAGES, &[Value::Int(since)]).await?;
    Ok(Progress::of_pages(pages, page_rows))
}

/// The pages of a move (`?1`), in order.
const PAGES: &str = "SELECT table_name, rows FROM object_move_pages WHERE since = ?1 \
     ORDER BY table_name, first_row";

/// A page of a move as recorded.
#[derive(Debug, serde::Deserialize)]
pub struct Page {
    /// Its table (empty: the move's start).
    pub table_name: String,
    /// Its rows.
    pub rows: i64,
}

impl Progress {
    /// What `pages` say, a page being whole at `page_rows` rows.
    pub fn of_pages(pages: Vec<Page>, page_rows: i64) -> Progress {
        let mut progress = Progress::default();
        for page in pages {
            if page.table_name == STARTED {
                progress.started = true;
                continue;
            }
            let entry = progress.tables.entry(page.table_name).or_default();
            entry.0 += page.rows;
            entry.1 |= page.rows < page_rows;
        }
        progress
    }
}

/// The statements that start the move `since` in the object: its start recorded (once: a
/// second start of the same move breaks the key and commits nothing), every other move's pages
/// forgotten and every money table emptied ([`clear`]).
pub fn start(since: i64) -> DbResult<Vec<Stmt>> {
    let mut statements = vec![
        stmt(
            "INSERT INTO object_move_pages (since, table_name, first_row, rows) \
             VALUES (?1, ?2, 0, 0)",
            &[Value::Int(since), STARTED.into()],
        )?,
        stmt(
            "DELETE FROM object_move_pages WHERE since <> ?1",
            &[Value::Int(since)],
        )?,
    ];
    statements.extend(clear()?);
    Ok(statements)
}

/// The statement that records the page of `table` from row `first_row` (`rows` of them) of the
/// move `since`, to commit with the page's rows: it breaks its key (and the page commits
/// nothing) if that page was recorded already, and fails its check if the move did not start in
/// the object (a move started again emptied it).
pub fn record_page(since: i64, table: &Table, first_row: i64, rows: i64) -> DbResult<Stmt> {
    stmt(
        "INSERT INTO object_move_pages (since, table_name, first_row, rows) \
         VALUES (?1, ?2, ?3, CASE WHEN EXISTS (SELECT 1 FROM object_move_pages \
           WHERE since = ?1 AND table_name = ?5) THEN ?4 ELSE -1 END)",
        &[
            Value::Int(since),
            table.name.into(),
            Value::Int(first_row),
            Value::Int(rows),
            STARTED.into(),
        ],
    )
}

/// The page of `table` in the object from row `offset` in key order, as a statement (to read
/// back in the call that wrote it).
pub fn page_in_object(table: &Table, offset: i64, limit: i64) -> DbResult<super::Returning<Row>> {
    stmt(
        &format!(
            "SELECT * FROM {} ORDER BY {} LIMIT ?1 OFFSET ?2",
            table.name, table.key
        ),
        &[Value::Int(limit), Value::Int(offset)],
    )
    .map(super::Returning::new)
}

/// A table's rows counted.
#[derive(Debug, serde::Deserialize)]
pub struct Count {
    /// How many.
    pub n: i64,
}

/// The statement that counts `table`'s rows: `institution`'s in D1, or every row of an object
/// (`None`).
pub fn count(table: &Table, institution: Option<i64>) -> DbResult<super::Returning<Count>> {
    match institution {
        Some(institution) => stmt(
            &format!(
                "SELECT count(*) AS n FROM {} WHERE {}",
                table.name, table.whose
            ),
            &[Value::Int(institution)],
        ),
        None => stmt(&format!("SELECT count(*) AS n FROM {}", table.name), &[]),
    }
    .map(super::Returning::new)
}

/// Which of D1's accounts are the institution's (`?1`), as a move carries them: its merchants',
/// its fees, and its deposit and top-up addresses' custody and unallocated money (the accounts
/// every institution shares are not here: the network fees are carried by share,
/// [`network_fee_transfers`]).
const ACCOUNTS_OF: &str = "((kind = 'merchant' AND institution_id = ?1) \
     OR (kind = 'fees' AND owner = CAST(?1 AS TEXT)) \
     OR (kind IN ('custody', 'unallocated') AND owner IN \
         (SELECT address FROM deposit_watches WHERE institution_id = ?1 \
          UNION SELECT address FROM topup_addresses WHERE institution_id = ?1)))";

/// `institution`'s accounts in D1's books ([`ACCOUNTS_OF`]).
pub async fn accounts_of(db: &super::Db, institution: i64) -> DbResult<Vec<AccountView>> {
    all(
        db,
        &format!("SELECT {VIEW_COLUMNS} FROM ledger_accounts WHERE {ACCOUNTS_OF} ORDER BY id"),
        &[Value::Int(institution)],
    )
    .await
}

/// The network fees accounts of D1's books (one a ledger, shared by every institution).
pub async fn network_fee_accounts(db: &super::Db) -> DbResult<Vec<AccountView>> {
    all(
        db,
        &format!(
            "SELECT {VIEW_COLUMNS} FROM ledger_accounts WHERE kind = 'network_fees' ORDER BY id"
        ),
        &[],
    )
    .await
}

/// A posted transfer touching a network fees account, for one of an institution's payments.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct FeeTransfer {
    /// Its debit account.
    pub debit_account: String,
    /// Its credit account.
    pub credit_account: String,
    /// Base units (decimal text).
    pub amount: String,
}

/// The posted transfers into or out of a network fees account for `institution`'s payments
/// (its share of what D1's shared accounts hold), at most `limit`.
pub async fn network_fee_transfers(
    db: &super::Db,
    institution: i64,
    limit: i64,
) -> DbResult<Vec<FeeTransfer>> {
    all(
        db,
        "SELECT t.debit_account, t.credit_account, t.amount FROM ledger_transfers t \
         JOIN transactions p ON p.id = t.transaction_id AND p.institution_id = ?1 \
         WHERE t.phase IN ('single', 'post') AND (t.debit_account IN \
           (SELECT id FROM ledger_accounts WHERE kind = 'network_fees') \
         OR t.credit_account IN (SELECT id FROM ledger_accounts WHERE kind = 'network_fees')) \
         LIMIT ?2",
        &[Value::Int(institution), Value::Int(limit)],
    )
    .await
}

/// What keeps `institution` from moving now, in words: a transaction of its settlements or
/// refunds still out, or a transfer of its books still pending; `None` when nothing does.
pub async fn in_flight(db: &super::Db, institution: i64) -> DbResult<Option<String>> {
    #[derive(serde::Deserialize)]
    struct Counts {
        sends: i64,
        pending: i64,
    }
    let counts: Option<Counts> = super::first(
        db,
        &format!(
            "SELECT (SELECT count(*) FROM chain_sends c \
             LEFT JOIN settlements s ON s.id = c.settlement_id \
             LEFT JOIN refunds r ON r.id = c.refund_id \
             WHERE c.state = 'live' AND s.held_by IS NULL \
             AND (s.institution_id = ?1 OR r.institution_id = ?1)) AS sends, \
             (SELECT count(*) FROM ledger_accounts WHERE {ACCOUNTS_OF} \
             AND (debits_pending <> '0' OR credits_pending <> '0')) AS pending"
        ),
        &[Value::Int(institution)],
    )
    .await?;
    Ok(counts.and_then(|c| {
        let mut why = Vec::new();
        if c.sends > 0 {
            why.push(format!(
                "{} of its settlements' or refunds' transactions are not final yet",
                c.sends
            ));
        }
        if c.pending > 0 {
            why.push(format!(
                "{} of its accounts have transfers pending",
                c.pending
            ));
        }
        (!why.is_empty()).then(|| why.join(", and "))
    }))
}

#[cfg(test)]
mod tests {
    use super::{insert, value_of, Row, TABLES};

    /// An object's schema, in memory.
    fn object() -> rusqlite::Connection {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for (_, text) in crate::objects::MIGRATIONS {
            conn.execute_batch(text).unwrap();
        }
        conn
    }

    /// `statements` in one transaction, as the object commits a call: all or none.
    fn commit(conn: &mut rusqlite::Connection, statements: &[super::Stmt]) -> Result<(), String> {
        let tx = conn.transaction().unwrap();
        for s in statements {
            tx.execute(s.sql(), rusqlite::params_from_iter(s.params().iter()))
                .map_err(|e| e.to_string())?;
        }
        tx.commit().map_err(|e| e.to_string())
    }

    fn pages(conn: &rusqlite::Connection, since: i64) -> super::Progress {
        let mut statement = conn.prepare(super::PAGES).unwrap();
        let pages = statement
            .query_map([since], |r| {
                Ok(super::Page {
                    table_name: r.get(0)?,
                    rows: r.get(1)?,
                })
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        super::Progress::of_pages(pages, 100)
    }

    /// Two moves of one institution within a second are told apart: the second starts just
    /// after the first, whatever the clock says; a freeze while a move runs takes nothing.
    #[test]
    fn every_move_has_a_start_of_its_own() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        xtask::localdb::apply_migrations(&conn).unwrap();
        conn.execute(
            "INSERT INTO institutions (id, name, created_at) VALUES (3, 'Three', '2026-12-01T00:00:00Z')",
            [],
        )
        .unwrap();
        let freeze = |now: i64| -> Option<i64> {
            let s = super::freeze(3, now).unwrap();
            let s = crate::sql::Statement::statement(s);
            conn.query_row(
                s.sql(),
                rusqlite::params_from_iter(s.params().iter()),
                |r| r.get(0),
            )
            .ok()
        };
        let thaw = |since: i64| {
            let s = super::thaw(3, since).unwrap();
            conn.execute(s.sql(), rusqlite::params_from_iter(s.params().iter()))
                .unwrap()
        };
        assert_eq!(freeze(1_000), Some(1_000));
        assert_eq!(freeze(1_000), None, "a move runs");
        assert_eq!(thaw(1_000), 1);
        assert_eq!(freeze(1_000), Some(1_001), "the same second");
        assert_eq!(thaw(1_001), 1);
        assert_eq!(freeze(999), Some(1_002), "a clock gone back");
        assert_eq!(thaw(1_002), 1);
        assert_eq!(freeze(5_000), Some(5_000));
    }

    /// A move's pages: its start once, each page once, none before its start, and the tables
    /// whole once a page short of full is recorded; a move started again forgets the others'.
    #[test]
    fn a_moves_pages_are_recorded_once_and_only_after_its_start() {
        let mut conn = object();
        let (events, deliveries) = (
            TABLES.iter().find(|t| t.name == "events").unwrap(),
            TABLES.iter().find(|t| t.name == "deliveries").unwrap(),
        );
        let page =
            |since, table, first, rows| super::record_page(since, table, first, rows).unwrap();
        // Before its start: refused by name, nothing recorded.
        let refused = commit(&mut conn, &[page(7, events, 0, 100)]).unwrap_err();
        assert!(refused.contains("object_move_pages_started"), "{refused}");
        assert!(!pages(&conn, 7).started);
        commit(&mut conn, &super::start(7).unwrap()).unwrap();
        // A second start of the same move commits nothing (its pages stay).
        commit(&mut conn, &[page(7, events, 0, 100)]).unwrap();
        let again = commit(&mut conn, &super::start(7).unwrap()).unwrap_err();
        assert!(again.contains("object_move_pages"), "{again}");
        // A page sent twice commits once.
        let twice = commit(&mut conn, &[page(7, events, 0, 100)]).unwrap_err();
        assert!(twice.contains("object_move_pages"), "{twice}");
        commit(
            &mut conn,
            &[page(7, events, 100, 40), page(7, deliveries, 0, 100)],
        )
        .unwrap();
        let progress = pages(&conn, 7);
        assert!(progress.started);
        assert_eq!(progress.of("events"), (140, true));
        assert_eq!(progress.of("deliveries"), (100, false));
        assert_eq!(progress.of("transactions"), (0, false));
        // Another move's start forgets this one's pages, whose next page is then refused.
        commit(&mut conn, &super::start(9).unwrap()).unwrap();
        assert!(!pages(&conn, 7).started);
        assert!(commit(&mut conn, &[page(7, deliveries, 100, 3)]).is_err());
    }

    /// The list names every money table of the schema, once, and each key is the table's
    /// primary key.
    #[test]
    fn every_money_table_is_moved_in_its_key_order() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        xtask::localdb::apply_migrations(&conn).unwrap();
        let mut names: Vec<&str> = TABLES.iter().map(|t| t.name).collect();
        for table in TABLES {
            let mut key: Vec<(i64, String)> = conn
                .prepare(&format!("PRAGMA table_info({})", table.name))
                .unwrap()
                .query_map([], |r| Ok((r.get::<_, i64>(5)?, r.get::<_, String>(1)?)))
                .unwrap()
                .map(Result::unwrap)
                .filter(|(pk, _)| *pk > 0)
                .collect();
            key.sort();
            let key: Vec<String> = key.into_iter().map(|(_, c)| c).collect();
            assert_eq!(key.join(", "), table.key, "{}", table.name);
            // The condition reads in D1 as written.
            conn.prepare(&format!(
                "SELECT * FROM {} WHERE {} ORDER BY {}",
                table.name, table.whose, table.key
            ))
            .unwrap();
        }
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
        assert_eq!(
            names,
            crate::db::store_tests::institution_tables(),
            "the money tables"
        );
    }

    /// A row is inserted as read; a value of another kind, or a strange column name, is
    /// refused by name.
    #[test]
    fn rows_are_inserted_as_read() {
        let table = &TABLES[0];
        let row: Row =
            serde_json::from_str(r#"{"id": 7, "status": "paid", "paid_at": null}"#).unwrap();
        let statement = insert(table, &row).unwrap();
        assert_eq!(
            statement.sql(),
            "INSERT INTO transactions (id, paid_at, status) VALUES (?1, ?2, ?3)"
        );
        let err = value_of(table, "amount", &serde_json::json!(1.5)).unwrap_err();
        assert!(err.to_string().contains("transactions.amount"), "{err}");
        let odd: Row = serde_json::from_str(r#"{"id); DROP TABLE x; --": 1}"#).unwrap();
        assert!(insert(table, &odd).is_err());
    }
}
