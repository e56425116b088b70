//! The shop's SQLite database: orders, every event received (unique by id), fulfilments (at
//! most one per order), cases for review, and the reconciliation checkpoint.
//!
//! An order is identified by its merchant and its reference together: one Payrail institution
//! receives the events of all its merchants, and an `external_reference` is only unique within
//! one merchant.

use std::path::Path;
use std::str::FromStr;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension, Transaction as SqlTx};
use rust_decimal::Decimal;
use serde::Serialize;

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
CREATE TABLE IF NOT EXISTS orders (
    merchant_id INTEGER NOT NULL CHECK (merchant_id > 0),
    reference   TEXT NOT NULL,
    amount      TEXT NOT NULL,
    currency    TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'fulfilled', 'review')),
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, reference)
);
CREATE TABLE IF NOT EXISTS events (
    seq          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    type         TEXT NOT NULL,
    body         BLOB NOT NULL,
    received_at  INTEGER NOT NULL,
    deliveries   INTEGER NOT NULL DEFAULT 1,
    processed_at INTEGER
);
CREATE INDEX IF NOT EXISTS events_unprocessed ON events (seq) WHERE processed_at IS NULL;
CREATE TABLE IF NOT EXISTS fulfilments (
    merchant_id    INTEGER NOT NULL,
    reference      TEXT NOT NULL,
    transaction_id INTEGER NOT NULL,
    gross          TEXT NOT NULL,
    source         TEXT NOT NULL CHECK (source IN ('webhook', 'reconcile')),
    fulfilled_at   INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, reference),
    FOREIGN KEY (merchant_id, reference) REFERENCES orders (merchant_id, reference)
);
CREATE TABLE IF NOT EXISTS reviews (
    id             INTEGER PRIMARY KEY,
    transaction_id INTEGER NOT NULL,
    merchant_id    INTEGER NOT NULL,
    reference      TEXT,
    reason         TEXT NOT NULL,
    detail         TEXT NOT NULL,
    source         TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    UNIQUE (transaction_id, reason)
);
CREATE TABLE IF NOT EXISTS checkpoints (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
";

/// The tables whose rows belong to a merchant: a database where one of them lacks
/// `merchant_id` was made by an earlier version of this receiver.
const MERCHANT_TABLES: [&str; 3] = ["orders", "fulfilments", "reviews"];

/// An order of the shop.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Order {
    /// The Payrail merchant the order was placed with (the transaction's `merchant_id`).
    pub merchant_id: i64,
    /// Your order id: the checkout's `externalReference`, unique within the merchant.
    pub reference: String,
    /// What the customer owes.
    pub amount: Decimal,
    /// In this currency.
    pub currency: String,
    /// `open`, `fulfilled` or `review`.
    pub state: String,
}

/// A case a person has to look at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Review {
    /// The Payrail transaction.
    pub transaction_id: i64,
    /// The transaction's merchant.
    pub merchant_id: i64,
    /// The order it names, if any (the merchant's order of that reference).
    pub reference: Option<String>,
    /// `unknown_order`, `underpaid`, `currency_mismatch`, `no_reference`, `refunded_after_fulfilment`.
    pub reason: String,
    /// What was found, for the person.
    pub detail: String,
    /// `webhook` or `reconcile`.
    pub source: String,
}

/// What a paid transaction led to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The order was fulfilled now.
    Fulfilled,
    /// The order had been fulfilled already: nothing done.
    AlreadyFulfilled,
    /// A case for review was opened now (or existed already).
    Review(String),
}

/// An error of the store.
pub type StoreError = rusqlite::Error;

/// The database, one connection behind a lock (SQLite writes one at a time anyway).
pub struct Store {
    conn: Mutex<Connection>,
}

pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Store {
    /// Opens (creating) the database at `path`. A database made by an earlier version of this
    /// receiver, whose orders had no merchant, is refused with an error saying what to do.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        check_schema(&conn, path)?;
        conn.execute_batch(SCHEMA)?;
        Ok(Store {
            conn: Mutex::new(conn),
        })
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self
            .conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut conn)
    }

    /// Adds an order of merchant `merchant_id` (the shop's checkout does this before showing
    /// the pay button). The same reference may exist once per merchant.
    pub fn add_order(
        &self,
        merchant_id: i64,
        reference: &str,
        amount: Decimal,
        currency: &str,
    ) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO orders (merchant_id, reference, amount, currency, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![merchant_id, reference, amount.to_string(), currency, now()],
            )
            .map(drop)
        })
    }

    /// One order of a merchant.
    pub fn order(&self, merchant_id: i64, reference: &str) -> Result<Option<Order>, StoreError> {
        self.with(|c| find_order(&c.transaction()?, merchant_id, reference))
    }

    /// Stores a verified event unless its id is known; answers whether it was new. A repeat
    /// only counts the delivery.
    pub fn insert_event(&self, id: &str, kind: &str, body: &[u8]) -> Result<bool, StoreError> {
        self.with(|c| {
            let inserted = c.execute(
                "INSERT INTO events (id, type, body, received_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (id) DO NOTHING",
                params![id, kind, body, now()],
            )?;
            if inserted == 0 {
                c.execute(
                    "UPDATE events SET deliveries = deliveries + 1 WHERE id = ?1",
                    [id],
                )?;
            }
            Ok(inserted == 1)
        })
    }

    /// Up to `limit` events not processed yet, oldest first: (id, body).
    pub fn unprocessed(&self, limit: u32) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(
                "SELECT id, body FROM events WHERE processed_at IS NULL ORDER BY seq LIMIT ?1",
            )?;
            let rows = stmt.query_map([limit], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })
    }

    /// Runs `work` and marks the event processed in one SQLite transaction: a crash between the
    /// two leaves the event unprocessed, and processing it again is harmless.
    pub fn process_event<T>(
        &self,
        id: &str,
        work: impl FnOnce(&SqlTx<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let result = work(&tx)?;
            tx.execute(
                "UPDATE events SET processed_at = ?2 WHERE id = ?1",
                params![id, now()],
            )?;
            tx.commit()?;
            Ok(result)
        })
    }

    /// Runs `work` in one SQLite transaction.
    pub fn atomically<T>(
        &self,
        work: impl FnOnce(&SqlTx<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let result = work(&tx)?;
            tx.commit()?;
            Ok(result)
        })
    }

    /// How many deliveries of the event arrived, and whether it was processed.
    pub fn event_status(&self, id: &str) -> Result<Option<(i64, bool)>, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT deliveries, processed_at IS NOT NULL FROM events WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })
    }

    /// The fulfilment of a merchant's order, if any (the table allows one per order): the
    /// transaction that paid it, and the source that fulfilled it.
    pub fn fulfilment(
        &self,
        merchant_id: i64,
        reference: &str,
    ) -> Result<Option<(i64, String)>, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT transaction_id, source FROM fulfilments
                 WHERE merchant_id = ?1 AND reference = ?2",
                params![merchant_id, reference],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })
    }

    /// Every case for review, oldest first.
    pub fn reviews(&self) -> Result<Vec<Review>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(
                "SELECT transaction_id, merchant_id, reference, reason, detail, source
                 FROM reviews ORDER BY id",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(Review {
                    transaction_id: r.get(0)?,
                    merchant_id: r.get(1)?,
                    reference: r.get(2)?,
                    reason: r.get(3)?,
                    detail: r.get(4)?,
                    source: r.get(5)?,
                })
            })?;
            rows.collect()
        })
    }

    /// A checkpoint's value.
    pub fn checkpoint(&self, name: &str) -> Result<Option<i64>, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT value FROM checkpoints WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .optional()
        })
    }

    /// Sets a checkpoint, unless it is set and `only_if_missing`.
    pub fn set_checkpoint(
        &self,
        name: &str,
        value: i64,
        only_if_missing: bool,
    ) -> Result<(), StoreError> {
        let sql = if only_if_missing {
            "INSERT INTO checkpoints (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING"
        } else {
            "INSERT INTO checkpoints (name, value) VALUES (?1, ?2)
             ON CONFLICT (name) DO UPDATE SET value = excluded.value"
        };
        self.with(|c| c.execute(sql, params![name, value]).map(drop))
    }
}

/// Refuses a database made before orders belonged to a merchant. `CREATE TABLE IF NOT EXISTS`
/// would keep its old tables, and orders keyed by reference alone would let one merchant's
/// payment fulfil another merchant's order; this reference receiver does not migrate its local
/// file, so it says what to do instead.
fn check_schema(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    for table in MERCHANT_TABLES {
        let (exists, has_merchant): (bool, bool) = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1),
                    EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = 'merchant_id')",
            [table],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        if exists && !has_merchant {
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
                Some(format!(
                    "{}: made by an earlier version of the reference receiver (its {table} table \
                     has no merchant_id). Orders are now matched by merchant and reference, and \
                     this reference implementation does not migrate its local SQLite file: start \
                     with a new file (--database) and add the open orders again with their \
                     merchant id, or migrate this one yourself",
                    path.display()
                )),
            ));
        }
    }
    Ok(())
}

pub(crate) fn find_order(
    tx: &SqlTx<'_>,
    merchant_id: i64,
    reference: &str,
) -> Result<Option<Order>, StoreError> {
    tx.query_row(
        "SELECT merchant_id, reference, amount, currency, state FROM orders
         WHERE merchant_id = ?1 AND reference = ?2",
        params![merchant_id, reference],
        |r| {
            let amount: String = r.get(2)?;
            Ok(Order {
                merchant_id: r.get(0)?,
                reference: r.get(1)?,
                amount: Decimal::from_str(&amount).map_err(|err| {
                    rusqlite::Error::FromSqlConversionFailure(
                        2,
                        rusqlite::types::Type::Text,
                        Box::new(err),
                    )
                })?,
                currency: r.get(3)?,
                state: r.get(4)?,
            })
        },
    )
    .optional()
}

/// Fulfils the order once: the primary key on `fulfilments (merchant_id, reference)` makes a
/// second attempt (a repeated delivery, a reconciliation that meets a delivered event) change
/// nothing.
pub(crate) fn fulfil(
    tx: &SqlTx<'_>,
    order: &Order,
    transaction_id: i64,
    gross: Decimal,
    source: &str,
) -> Result<Outcome, StoreError> {
    let inserted = tx.execute(
        "INSERT INTO fulfilments (merchant_id, reference, transaction_id, gross, source, fulfilled_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (merchant_id, reference) DO NOTHING",
        params![
            order.merchant_id,
            order.reference,
            transaction_id,
            gross.to_string(),
            source,
            now()
        ],
    )?;
    if inserted == 0 {
        return Ok(Outcome::AlreadyFulfilled);
    }
    tx.execute(
        "UPDATE orders SET state = 'fulfilled' WHERE merchant_id = ?1 AND reference = ?2",
        params![order.merchant_id, order.reference],
    )?;
    Ok(Outcome::Fulfilled)
}

/// Opens a case for review (once per transaction and reason); the merchant's order of that
/// reference, if it exists and is open, goes to review too.
pub(crate) fn review(
    tx: &SqlTx<'_>,
    transaction_id: i64,
    merchant_id: i64,
    reference: Option<&str>,
    reason: &str,
    detail: &str,
    source: &str,
) -> Result<Outcome, StoreError> {
    tx.execute(
        "INSERT INTO reviews (transaction_id, merchant_id, reference, reason, detail, source, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (transaction_id, reason) DO NOTHING",
        params![transaction_id, merchant_id, reference, reason, detail, source, now()],
    )?;
    if let Some(reference) = reference {
        tx.execute(
            "UPDATE orders SET state = 'review'
             WHERE merchant_id = ?1 AND reference = ?2 AND state = 'open'",
            params![merchant_id, reference],
        )?;
    }
    Ok(Outcome::Review(reason.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database file of its own, removed when dropped.
    struct TempDb(std::path::PathBuf);

    impl TempDb {
        fn new(name: &str) -> TempDb {
            TempDb(std::env::temp_dir().join(format!(
                "payrail-receiver-{name}-{}-{}.db",
                std::process::id(),
                now()
            )))
        }
    }

    impl Drop for TempDb {
        fn drop(&mut self) {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
            }
        }
    }

    #[test]
    fn a_reference_is_one_order_per_merchant() {
        let store = Store::open(Path::new(":memory:")).unwrap();
        store.add_order(1, "ORD-1", Decimal::ONE, "EUR").unwrap();
        let again = store
            .add_order(1, "ORD-1", Decimal::ONE, "EUR")
            .unwrap_err();
        assert_eq!(
            again.sqlite_error_code(),
            Some(rusqlite::ErrorCode::ConstraintViolation)
        );
        store.add_order(2, "ORD-1", Decimal::TEN, "USD").unwrap();
        assert_eq!(store.order(1, "ORD-1").unwrap().unwrap().currency, "EUR");
        assert_eq!(store.order(2, "ORD-1").unwrap().unwrap().currency, "USD");
        assert_eq!(store.order(3, "ORD-1").unwrap(), None);
        // The schema refuses an order without a real merchant.
        assert!(store.add_order(0, "ORD-2", Decimal::ONE, "EUR").is_err());
    }

    #[test]
    fn a_database_reopened_keeps_its_orders() {
        let db = TempDb::new("reopen");
        Store::open(&db.0)
            .unwrap()
            .add_order(7, "ORD-1", Decimal::ONE, "EUR")
            .unwrap();
        let store = Store::open(&db.0).unwrap();
        assert_eq!(store.order(7, "ORD-1").unwrap().unwrap().merchant_id, 7);
    }

    #[test]
    fn a_database_from_before_merchants_is_refused_with_what_to_do() {
        let db = TempDb::new("old");
        // The tables as the receiver made them when orders were keyed by reference alone.
        Connection::open(&db.0)
            .unwrap()
            .execute_batch(
                "CREATE TABLE orders (reference TEXT PRIMARY KEY, amount TEXT NOT NULL,
                     currency TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'open',
                     created_at INTEGER NOT NULL);
                 CREATE TABLE fulfilments (reference TEXT PRIMARY KEY REFERENCES orders (reference),
                     transaction_id INTEGER NOT NULL, gross TEXT NOT NULL, source TEXT NOT NULL,
                     fulfilled_at INTEGER NOT NULL);
                 INSERT INTO orders (reference, amount, currency, created_at)
                     VALUES ('ORD-1', '40.00', 'EUR', 0);",
            )
            .unwrap();
        let Err(err) = Store::open(&db.0) else {
            panic!("an old database was opened");
        };
        let message = err.to_string();
        for needed in [
            db.0.display().to_string().as_str(),
            "earlier version of the reference receiver",
            "orders table has no merchant_id",
            "matched by merchant and reference",
            "does not migrate its local SQLite file",
            "--database",
        ] {
            assert!(message.contains(needed), "{needed:?} not in {message:?}");
        }
        // Nothing was changed: the old order is still there, as it was.
        let conn = Connection::open(&db.0).unwrap();
        let kept: String = conn
            .query_row("SELECT reference FROM orders", [], |r| r.get(0))
            .unwrap();
        assert_eq!(kept, "ORD-1");
    }
}
