//! Moving an institution's money into its object (docs/SCALING.md, "Migration from one
//! database"): every money table's rows of the institution copied from D1 into the object, page
//! by page in key order, then read back from both sides in the same order and compared, table by
//! table (counts and a SHA-256 over every row): D1 is read again for the comparison, so a row
//! changed while it was copied shows as a difference. The copy starts from an empty object each
//! time and changes no money in D1 (it writes the copied checkouts' entries in the directory's
//! index, which count only once the directory points at the object), so it can be rehearsed
//! while the institution keeps working from D1; it is refused once the directory holds the
//! institution in its object, where the object's rows are the money itself.

use serde::Serialize;
use sha2::{Digest, Sha256};
use shared_types::ids::{InstitutionId, Scoped};
use shared_types::ErrorCode;

use crate::ctx::Ctx;
use crate::db::moves::{self, Row, Table};
use crate::db::{batch, sessions, Db, DbErrorKind, Stmt};
use crate::error::{ApiError, OrInternal};

/// Rows per page: one object call (one transaction) per page.
const PAGE_ROWS: i64 = 100;

/// Most calls one copy makes (D1 reads and writes, object calls: each is a subrequest, and one
/// request may make only so many, 1,000 on older plans): a page of 100 rows costs four or five
/// (read from D1, written to the object, read back from both), so about 20,000 rows.
const CALLS_MAX: usize = 900;

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
    // A payment made in the object gets an id from the institution's id times 2^32, which must
    // stay below 2^53 to cross into JavaScript exactly.
    if institution >= 1 << 21 {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!(
                "institution {institution} cannot be held in an object: its payments' ids \
                 would pass 2^53 (institutions from 2^21 up stay in D1)"
            ),
        ));
    }
    let object = ctx.institution_object(institution)?;
    let mut calls = Calls::default();
    calls.spend()?;
    batch(&object, moves::clear().or_internal("clear the object")?)
        .await
        .or_internal("clear the object")?;
    let mut tables = Vec::with_capacity(moves::TABLES.len());
    for table in moves::TABLES {
        copy_table(ctx, &object, table, institution, &mut calls).await?;
        // Both sides read again in key order once the table is copied: a row of D1 changed,
        // added or removed while it was copied shows as a difference, never as a match.
        let source = read_back(&ctx.db, table, Some(institution), &mut calls).await?;
        let held = read_back(&object, table, None, &mut calls).await?;
        tables.push(TableReport {
            table: table.name,
            d1_rows: source.rows,
            object_rows: held.rows,
            same: source.rows == held.rows && source.digest.finalize() == held.digest.finalize(),
        });
    }
    Ok(Report {
        institution,
        verified: tables.iter().all(|t| t.same),
        tables,
    })
}

/// Copies `table`'s rows of `institution` from D1 into `object`, page by page; a copied
/// checkout gets its entry in the directory's index (which counts only once the directory
/// points at the object).
async fn copy_table(
    ctx: &Ctx,
    object: &Db,
    table: &Table,
    institution: i64,
    calls: &mut Calls,
) -> Result<(), ApiError> {
    let mut copied = 0;
    loop {
        calls.spend()?;
        let rows = moves::page(&ctx.db, table, Some(institution), copied, PAGE_ROWS)
            .await
            .or_internal("read a page")?;
        let inserts = rows
            .iter()
            .map(|row| moves::insert(table, row))
            .collect::<Result<Vec<Stmt>, _>>()
            .or_internal("copy a page")?;
        calls.spend()?;
        // One page, one transaction in the object: a row it refuses leaves none of the page's
        // rows (the pages before stay, and the next copy starts afresh anyway).
        match batch(object, inserts).await {
            Ok(()) => {}
            Err(refused) if refused.kind() == DbErrorKind::Constraint => {
                return Err(ApiError::new(
                    ErrorCode::Conflict,
                    format!(
                        "the copy stopped at {} (its rows from {copied} in key order): the \
                         object refused one: {refused}",
                        table.name
                    ),
                ))
            }
            Err(failed) => return Err(failed).or_internal("copy a page"),
        }
        if table.name == "checkout_sessions" && !rows.is_empty() {
            calls.spend()?;
            let entries = rows
                .iter()
                .map(|row| index_entry(row, institution))
                .collect::<Result<Vec<Stmt>, _>>()?;
            batch(&ctx.db, entries)
                .await
                .or_internal("index copied checkouts")?;
        }
        copied += rows.len() as i64;
        if (rows.len() as i64) < PAGE_ROWS {
            return Ok(());
        }
    }
}

/// The directory's index entry of a copied checkout session's row.
fn index_entry(row: &Row, institution: i64) -> Result<Stmt, ApiError> {
    let id = row.get("id").and_then(|v| v.as_str());
    let merchant = row.get("merchant_id").and_then(serde_json::Value::as_i64);
    let created = row.get("created_at").and_then(serde_json::Value::as_i64);
    let (Some(id), Some(merchant), Some(created)) = (id, merchant, created) else {
        return Err(ApiError::internal(
            "index copied checkouts",
            "a checkout session row without its id, merchant or time",
        ));
    };
    sessions::index_copied(
        id,
        Scoped::new(InstitutionId(institution), merchant),
        created,
    )
    .or_internal("index copied checkouts")
}

/// The calls a copy has made, refused past [`CALLS_MAX`].
#[derive(Default)]
struct Calls(usize);

impl Calls {
    fn spend(&mut self) -> Result<(), ApiError> {
        self.0 += 1;
        if self.0 > CALLS_MAX {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!(
                    "the institution holds more rows than one copy may read and write within \
                     its {CALLS_MAX} calls"
                ),
            ));
        }
        Ok(())
    }
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

/// Every row of `table` where `db` holds it, in key order: `institution`'s in D1, or all of the
/// object's (`None`).
async fn read_back(
    db: &Db,
    table: &Table,
    institution: Option<i64>,
    calls: &mut Calls,
) -> Result<Side, ApiError> {
    let mut side = Side::default();
    loop {
        calls.spend()?;
        let rows = moves::page(db, table, institution, side.rows, PAGE_ROWS)
            .await
            .or_internal("read a table back")?;
        let full = rows.len() as i64 == PAGE_ROWS;
        side.add(&rows);
        if !full {
            return Ok(side);
        }
    }
}
