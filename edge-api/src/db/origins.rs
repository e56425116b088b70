//! The origins a merchant's checkouts may return the customer to.

use serde::Deserialize;

use super::{batch, stmt, strings, Db, DbResult, Returning, Value};

/// The merchant's allowed return origins.
pub async fn list(db: &Db, merchant_id: i64) -> DbResult<Vec<String>> {
    strings(
        db,
        "SELECT origin FROM merchant_origins WHERE merchant_id = ?1 ORDER BY origin",
        &[merchant_id.into()],
    )
    .await
}

/// The origins of several merchants (at most 100), as (merchant id, origin).
pub async fn of_merchants(db: &Db, ids: &[i64]) -> DbResult<Vec<(i64, String)>> {
    #[derive(Deserialize)]
    struct Row {
        merchant_id: i64,
        origin: String,
    }
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let placeholders: Vec<String> = (1..=ids.len()).map(|n| format!("?{n}")).collect();
    let params: Vec<Value> = ids.iter().map(|id| Value::from(*id)).collect();
    let rows: Vec<Row> = super::all(
        db,
        &format!(
            "SELECT merchant_id, origin FROM merchant_origins WHERE merchant_id IN ({}) \
             ORDER BY merchant_id, origin",
            placeholders.join(", ")
        ),
        &params,
    )
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.merchant_id, r.origin))
        .collect())
}

/// Replaces the whole list, atomically.
pub async fn replace(
    db: &Db,
    merchant_id: i64,
    origins: &[String],
    now_text: &str,
) -> DbResult<()> {
    let mut statements = vec![stmt(
        "DELETE FROM merchant_origins WHERE merchant_id = ?1",
        &[merchant_id.into()],
    )?];
    for origin in origins {
        statements.push(stmt(
            "INSERT INTO merchant_origins (merchant_id, origin, created_at) VALUES (?1, ?2, ?3)",
            &[merchant_id.into(), origin.as_str().into(), now_text.into()],
        )?);
    }
    batch(db, statements).await
}

/// A row that is there when the origin is allowed.
#[derive(Debug, Deserialize)]
pub struct Allowed {
    /// Always 1.
    pub found: i64,
}

/// Whether `origin` is one of the return origins of the merchant with the publishable key
/// `public_key` at `now` (see [`super::merchants::BY_KEY`]): one row when it is, none when it is
/// not, for checkout's read batch.
pub fn allows_by_key(public_key: &str, now: i64, origin: &str) -> DbResult<Returning<Allowed>> {
    stmt(
        &format!(
            "SELECT 1 AS found FROM merchant_origins WHERE merchant_id = {} AND origin = ?3",
            super::merchants::BY_KEY
        ),
        &[public_key.into(), now.into(), origin.into()],
    )
    .map(Returning::new)
}
