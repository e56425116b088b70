//! Moving an institution's money into its object (docs/SCALING.md, "Migration from one
//! database"): every money table's rows of the institution copied from D1 into the object, page
//! by page in key order, then read back from both sides in the same order and compared, table by
//! table (counts and a SHA-256 over every row). The copy starts from an empty object each time
//! and changes nothing in D1, so it can be rehearsed while the institution keeps working from
//! D1; it is refused once the directory holds the institution in its object, where the object's
//! rows are the money itself.

use serde::Serialize;
use sha2::{Digest, Sha256};
use shared_types::ErrorCode;

use crate::ctx::Ctx;
use crate::db::moves::{self, Row, Table};
use crate::db::{batch, Db, Stmt};
use crate::error::{ApiError, OrInternal};

/// Rows per page: one object call (one transaction) per page.
const PAGE_ROWS: i64 = 100;

/// Most pages one copy reads from D1 (each page is one D1 read and one object call; a request
/// may make a bounded number of subrequests): 40,000 rows.
const PAGES_MAX: usize = 400;

/// What a copy found, table by table.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The institution copied.
    pub institution: i64,
    /// Each money table: its rows on both sides and whether every row is the same.
    pub tables: Vec<TableReport>,
    /// Whether every table matched.
    pub verified: bool,
}

/// One table's comparison.
#[derive(Debug, Serialize)]
pub struct TableReport {
    /// The table.
    pub table: &'static str,
    /// The institution's rows in D1.
    pub d1_rows: i64,
    /// The rows in the object.
    pub object_rows: i64,
    /// Whether both sides hold the same rows (same count, same SHA-256 over every row in key
    /// order).
    pub same: bool,
}

/// Copies `institution`'s money tables into its object and compares both sides.
pub async fn copy(ctx: &Ctx, institution: i64) -> Result<Report, ApiError> {
    match moves::store_of(&ctx.db, institution)
        .await
        .or_internal("read the institution")?
    {
        None => return Err(ApiError::not_found("no such institution")),
        Some(store) if store != "d1" => {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                "the institution's money is already held by its object: a copy would replace it",
            ))
        }
        Some(_) => {}
    }
    let object = ctx.institution_object(institution)?;
    batch(&object, moves::clear().or_internal("clear the object")?)
        .await
        .or_internal("clear the object")?;
    let mut pages = 0;
    let mut tables = Vec::with_capacity(moves::TABLES.len());
    for table in moves::TABLES {
        let mut d1 = Side::default();
        loop {
            pages += 1;
            if pages > PAGES_MAX {
                return Err(ApiError::new(
                    ErrorCode::Conflict,
                    format!(
                        "the institution holds more than {} rows: more than one copy may read",
                        PAGES_MAX as i64 * PAGE_ROWS
                    ),
                ));
            }
            let rows = moves::page(&ctx.db, table, institution, d1.rows, PAGE_ROWS)
                .await
                .or_internal("read a page")?;
            let inserts = rows
                .iter()
                .map(|row| moves::insert(table, row))
                .collect::<Result<Vec<Stmt>, _>>()
                .or_internal("copy a page")?;
            // One page, one transaction in the object: a row it refuses leaves none of the
            // page's rows (the pages before stay, and the next copy starts afresh anyway).
            if let Err(refused) = batch(&object, inserts).await {
                return Err(ApiError::new(
                    ErrorCode::Conflict,
                    format!(
                        "the copy stopped at {} (its rows from {} in key order): the object \
                         refused one: {refused}",
                        table.name, d1.rows
                    ),
                ));
            }
            let full = rows.len() as i64 == PAGE_ROWS;
            d1.add(&rows);
            if !full {
                break;
            }
        }
        let held = read_back(&object, table).await?;
        tables.push(TableReport {
            table: table.name,
            d1_rows: d1.rows,
            object_rows: held.rows,
            same: d1.rows == held.rows && d1.digest.finalize() == held.digest.finalize(),
        });
    }
    Ok(Report {
        institution,
        verified: tables.iter().all(|t| t.same),
        tables,
    })
}

/// One side's rows of a table: how many, and the SHA-256 over each row's JSON in key order.
#[derive(Default)]
struct Side {
    rows: i64,
    digest: Sha256,
}

impl Side {
    fn add(&mut self, rows: &[Row]) {
        for row in rows {
            self.digest
                .update(serde_json::to_string(row).unwrap_or_default().as_bytes());
            self.digest.update(b"\n");
        }
        self.rows += rows.len() as i64;
    }
}

/// Every row of `table` in the object, in key order.
async fn read_back(object: &Db, table: &Table) -> Result<Side, ApiError> {
    let mut side = Side::default();
    loop {
        let rows = moves::page_held(object, table, side.rows, PAGE_ROWS)
            .await
            .or_internal("read the object back")?;
        let full = rows.len() as i64 == PAGE_ROWS;
        side.add(&rows);
        if !full {
            return Ok(side);
        }
    }
}
