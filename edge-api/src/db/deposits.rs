//! Deposit address indexes: one counter per key family, so every derived address is used once.

use serde::Deserialize;

use super::{first, stmt, Condition, Db, DbError, DbResult, Returning};

/// An allocated index.
#[derive(Debug, Deserialize)]
pub struct Index {
    /// The index.
    pub index: i64,
}

/// Takes the next index of `family`, atomically: concurrent sessions never get the same one.
pub async fn allocate(db: &Db, family: &str) -> DbResult<i64> {
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

/// [`allocate`] as a statement of the batch that counts a checkout attempt, taken only when
/// `within` holds (the attempt's counts, taken earlier in the batch, are within their limits,
/// and the facts its session is made on still hold: [`super::sessions::Admitted`]): otherwise
/// it takes nothing and answers no row. An attempt past its limits never uses up an index.
pub fn allocate_within(family: &str, within: &dyn Condition) -> DbResult<Returning<Index>> {
    let (condition, mut params) = within.sql(2);
    params.insert(0, family.into());
    stmt(
        &format!(
            "INSERT INTO deposit_indexes (family, next) SELECT ?1, 1 WHERE {condition} \
             ON CONFLICT (family) DO UPDATE SET next = next + 1 RETURNING next - 1 AS \"index\""
        ),
        &params,
    )
    .map(Returning::new)
}

/// Whether `address` (lower-case hex) is one of custody's addresses given out to any
/// institution: a checkout's deposit address or a merchant's top-up address. Money sent there
/// from the treasury would land back in custody, booked to nobody.
pub async fn custody_holds(db: &Db, address: &str) -> DbResult<bool> {
    #[derive(Deserialize)]
    struct Found {
        found: i64,
    }
    let row: Option<Found> = first(
        db,
        "SELECT EXISTS (SELECT 1 FROM deposit_watches WHERE address = ?1) \
         OR EXISTS (SELECT 1 FROM topup_addresses WHERE address = ?1) AS found",
        &[address.into()],
    )
    .await?;
    Ok(row.is_some_and(|r| r.found == 1))
}
