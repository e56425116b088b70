//! The shop's SQLite database: orders, every event received (unique by id), fulfilments (at
//! most one per order), cases for review, and the reconciliation checkpoint.

use std::path::Path;
use std::str::FromStr;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension, Transaction as SqlTx};
use rust_decimal::Decimal;
use serde::Serialize;

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
CREATE TABLE IF NOT EXISTS orders (
    reference  TEXT PRIMARY KEY,
    amount     TEXT NOT NULL,
    currency   TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'fulfilled', 'review')),
    created_at INTEGER NOT NULL
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
    reference      TEXT PRIMARY KEY REFERENCES orders (reference),
    transaction_id INTEGER NOT NULL,
    gross          TEXT NOT NULL,
    source         TEXT NOT NULL CHECK (source IN ('webhook', 'reconcile')),
    fulfilled_at   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS reviews (
    id             INTEGER PRIMARY KEY,
    transaction_id INTEGER NOT NULL,
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

/// An order of the shop.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Order {
    /// Your order id: the checkout's `externalReference`.
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
    /// The order it names, if any.
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
    /// Opens (creating) the database at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
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

    /// Adds an order (the shop's checkout does this before showing the pay button).
    pub fn add_order(
        &self,
        reference: &str,
        amount: Decimal,
        currency: &str,
    ) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO orders (reference, amount, currency, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![reference, amount.to_string(), currency, now()],
            )
            .map(drop)
        })
    }

    /// One order.
    pub fn order(&self, reference: &str) -> Result<Option<Order>, StoreError> {
        self.with(|c| find_order(&c.transaction()?, reference))
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

    /// How many fulfilments the order has (0 or 1: the table allows no more), and their source.
    pub fn fulfilment(&self, reference: &str) -> Result<Option<(i64, String)>, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT transaction_id, source FROM fulfilments WHERE reference = ?1",
                [reference],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })
    }

    /// Every case for review, oldest first.
    pub fn reviews(&self) -> Result<Vec<Review>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(
                "SELECT transaction_id, reference, reason, detail, source FROM reviews ORDER BY id",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(Review {
                    transaction_id: r.get(0)?,
                    reference: r.get(1)?,
                    reason: r.get(2)?,
                    detail: r.get(3)?,
                    source: r.get(4)?,
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

pub(crate) fn find_order(tx: &SqlTx<'_>, reference: &str) -> Result<Option<Order>, StoreError> {
    tx.query_row(
        "SELECT reference, amount, currency, state FROM orders WHERE reference = ?1",
        [reference],
        |r| {
            let amount: String = r.get(1)?;
            Ok(Order {
                reference: r.get(0)?,
                amount: Decimal::from_str(&amount).map_err(|err| {
                    rusqlite::Error::FromSqlConversionFailure(
                        1,
                        rusqlite::types::Type::Text,
                        Box::new(err),
                    )
                })?,
                currency: r.get(2)?,
                state: r.get(3)?,
            })
        },
    )
    .optional()
}

/// Fulfils the order once: the primary key on `fulfilments.reference` makes a second attempt
/// (a repeated delivery, a reconciliation that meets a delivered event) change nothing.
pub(crate) fn fulfil(
    tx: &SqlTx<'_>,
    order: &Order,
    transaction_id: i64,
    gross: Decimal,
    source: &str,
) -> Result<Outcome, StoreError> {
    let inserted = tx.execute(
        "INSERT INTO fulfilments (reference, transaction_id, gross, source, fulfilled_at)
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (reference) DO NOTHING",
        params![
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
        "UPDATE orders SET state = 'fulfilled' WHERE reference = ?1",
        [&order.reference],
    )?;
    Ok(Outcome::Fulfilled)
}

/// Opens a case for review (once per transaction and reason).
pub(crate) fn review(
    tx: &SqlTx<'_>,
    transaction_id: i64,
    reference: Option<&str>,
    reason: &str,
    detail: &str,
    source: &str,
) -> Result<Outcome, StoreError> {
    tx.execute(
        "INSERT INTO reviews (transaction_id, reference, reason, detail, source, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (transaction_id, reason) DO NOTHING",
        params![transaction_id, reference, reason, detail, source, now()],
    )?;
    if let Some(reference) = reference {
        tx.execute(
            "UPDATE orders SET state = 'review' WHERE reference = ?1 AND state = 'open'",
            [reference],
        )?;
    }
    Ok(Outcome::Review(reason.to_owned()))
}
