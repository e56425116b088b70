//! Moving an institution's money tables from D1 into its object: every table of an institution's
//! store, read from D1 page by page in key order, written into the object as the same rows, and
//! read back from both in the same order to compare. The one module that names every money
//! table: a move copies rows as they are, so its statements are built from the table list below
//! (each table's rows are still written by its own module everywhere else).

use serde_json::{Map, Value as Json};

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
    TABLES
        .iter()
        .rev()
        .map(|table| stmt(&format!("DELETE FROM {}", table.name), &[]))
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

#[cfg(test)]
mod tests {
    use super::{insert, value_of, Row, TABLES};

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
