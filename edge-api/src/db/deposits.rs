//! Deposit address indexes: one counter per key family, so every derived address is used once.

use serde::Deserialize;
use worker::D1Database;

use super::{first, DbError, DbResult};

/// Takes the next index of `family`, atomically: concurrent sessions never get the same one.
pub async fn allocate(db: &D1Database, family: &str) -> DbResult<i64> {
    #[derive(Deserialize)]
    struct Index {
        index: i64,
    }
    let row: Option<Index> = first(
        db,
        "INSERT INTO deposit_indexes (family, next) VALUES (?1, 1) \
         ON CONFLICT (family) DO UPDATE SET next = next + 1 RETURNING next - 1 AS \"index\"",
        &[family.into()],
    )
    .await?;
    row.map(|r| r.index)
        .ok_or_else(|| DbError::bad_row("the index allocation returned no row"))
}
