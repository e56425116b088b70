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

use shared_types::ledger::{postings, split, Kind, Ledger};

use crate::ctx::Ctx;
use crate::db::ledger::{self, Account, Book, When};
use crate::db::moves::{self, Row, Table};
use crate::db::{batch, sessions, Batch, Db, DbErrorKind, Stmt};
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
    movable(ctx, institution).await?;
    copy_tables(ctx, institution).await
}

/// Refuses an institution that cannot move into its object: none by that id, one held there
/// already, or one whose payments' ids would not fit.
async fn movable(ctx: &Ctx, institution: i64) -> Result<(), ApiError> {
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
    Ok(())
}

/// Copies every money table of `institution` into its object (emptied first) and compares.
async fn copy_tables(ctx: &Ctx, institution: i64) -> Result<Report, ApiError> {
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

// ---------------------------------------------------------------------------------------------
// The move

/// How long a caller refused because a move runs waits before trying again.
const MOVE_RETRY_SECONDS: u64 = 10;

/// Most of an institution's network fee transfers one move sums (its share of D1's shared
/// network fees accounts); an institution with more is moved in a later version.
const FEE_TRANSFERS_MAX: i64 = 20_000;

/// What a move did.
#[derive(Debug, Serialize)]
pub struct MoveReport {
    /// The institution.
    pub institution: i64,
    /// Whether the directory now holds its money in its object.
    pub moved: bool,
    /// Why it did not move (it works from D1 as before; try again).
    pub reason: Option<String>,
    /// The copy's comparison, when one was made.
    pub copy: Option<Report>,
    /// Each account carried into the object: opened there at its D1 balance, closed in D1.
    pub accounts: Vec<CarriedAccount>,
}

/// An account carried by a move.
#[derive(Debug, Serialize)]
pub struct CarriedAccount {
    /// Its id (the same in both stores).
    pub id: String,
    /// Credits less debits posted, in base units (decimal text).
    pub balance: String,
}

/// Moves `institution`'s money from D1 into its object (docs/SCALING.md, "The move"): its money
/// frozen in D1 for the move's seconds (writes of its rows refused, D1's cron leaving them),
/// nothing of it in flight, every money table copied and compared, its books carried (each
/// account opened in the object at its D1 balance and closed in D1, against the stores'
/// links), then the directory pointed at the object in the batch that closes D1's books.
/// Anything short of that leaves it working from D1 as before, with the reason.
pub async fn move_in(ctx: &Ctx, institution: i64) -> Result<MoveReport, ApiError> {
    movable(ctx, institution).await?;
    let since = ctx.now();
    let mut freeze = Batch::new();
    let frozen = freeze.push(moves::freeze(institution, since).or_internal("freeze")?);
    let results = freeze
        .run(&ctx.db)
        .await
        .or_internal("freeze the institution")?;
    if !results.changed(frozen) {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "another move of this institution is running; try again once it ends",
        )
        .with_retry_after(MOVE_RETRY_SECONDS));
    }
    let outcome = moving(ctx, institution, since).await;
    if !matches!(outcome, Ok(MoveReport { moved: true, .. })) {
        let thaw = moves::thaw(institution, since).or_internal("thaw")?;
        if let Err(err) = batch(&ctx.db, vec![thaw]).await {
            worker::console_warn!("thaw institution {institution}: {err}");
        }
    }
    outcome
}

/// The move of frozen `institution` (frozen at `since`).
async fn moving(ctx: &Ctx, institution: i64, since: i64) -> Result<MoveReport, ApiError> {
    let not_moved = |reason: String, copy: Option<Report>| MoveReport {
        institution,
        moved: false,
        reason: Some(reason),
        copy,
        accounts: Vec::new(),
    };
    if let Some(why) = moves::in_flight(&ctx.db, institution)
        .await
        .or_internal("read what is in flight")?
    {
        return Ok(not_moved(format!("{why}: it moves once they are"), None));
    }
    let copy = copy_tables(ctx, institution).await?;
    if !copy.verified {
        return Ok(not_moved(
            "the copy differs from D1 (see the tables)".to_owned(),
            Some(copy),
        ));
    }
    let object = ctx.institution_object(institution)?;
    let (accounts, closing) = carry_books(ctx, &object, institution).await?;
    let mut flip = Batch::new();
    flip.extend(closing);
    let flipped = flip.push(moves::flip(institution, since).or_internal("flip")?);
    let done = flip
        .run(&ctx.db)
        .await
        .or_internal("flip the institution")?;
    if !done.changed(flipped) {
        return Err(ApiError::internal(
            "flip the institution",
            "its move was taken over by another",
        ));
    }
    Ok(MoveReport {
        institution,
        moved: true,
        reason: None,
        copy: Some(copy),
        accounts,
    })
}

/// Opens `institution`'s accounts in its `object` at their D1 balances (each against the
/// object's link to the treasury, merchants with their debt limits), and answers the D1
/// statements that close them (against D1's link to the institution, guarded on the accounts'
/// versions as read), for the flip's batch. Its share of D1's shared network fees accounts is
/// what its own payments' transfers moved there.
async fn carry_books(
    ctx: &Ctx,
    object: &Db,
    institution: i64,
) -> Result<(Vec<CarriedAccount>, Vec<Stmt>), ApiError> {
    let number = |text: &str| text.parse::<i128>().or_internal("read a balance");
    let mut rows = moves::accounts_of(&ctx.db, institution)
        .await
        .or_internal("read the institution's accounts")?;
    let mut balances: Vec<i128> = Vec::with_capacity(rows.len());
    for row in &rows {
        balances.push(number(&row.credits_posted)? - number(&row.debits_posted)?);
    }
    // Its share of the network fees.
    let fees = moves::network_fee_transfers(&ctx.db, institution, FEE_TRANSFERS_MAX + 1)
        .await
        .or_internal("read the network fees")?;
    if fees.len() as i64 > FEE_TRANSFERS_MAX {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!(
                "the institution has more than {FEE_TRANSFERS_MAX} network fee transfers to \
                 carry: one move cannot sum them"
            ),
        ));
    }
    for account in moves::network_fee_accounts(&ctx.db)
        .await
        .or_internal("read the network fees")?
    {
        let mut share = 0i128;
        for t in &fees {
            let amount = number(&t.amount)?;
            if t.credit_account == account.id {
                share += amount;
            }
            if t.debit_account == account.id {
                share -= amount;
            }
        }
        if share != 0 {
            rows.push(account);
            balances.push(share);
        }
    }
    let institution_id = InstitutionId(institution);
    let mut accounts = Vec::with_capacity(rows.len());
    let mut links = (Vec::new(), Vec::new());
    for row in &rows {
        let ledger = Ledger::new(&row.network, &row.token);
        let kind = Kind::parse(&row.kind)
            .ok_or("a kind of account it does not know")
            .or_internal("read an account's kind")?;
        let mut account = Account::new(&ledger, (&row.asset, row.decimals), kind, &row.owner);
        if kind == Kind::Merchant {
            account = account.of_institution(institution_id);
        }
        accounts.push(account);
        let asset = (row.asset.as_str(), row.decimals);
        links.0.push(Account::new(
            &ledger,
            asset,
            Kind::World,
            split::TREASURY_LINK,
        ));
        links.1.push(Account::new(
            &ledger,
            asset,
            Kind::World,
            &split::institution_link(institution),
        ));
    }
    let ids: Vec<String> = accounts.iter().map(Account::id).collect();
    let now = ctx.now();
    let mut opened = Book::load(
        object,
        &[accounts.clone(), links.0.clone()].concat(),
        &[],
        &[],
    )
    .await
    .or_internal("read the object's books")?;
    let mut closed = Book::load(
        &ctx.db,
        &[accounts.clone(), links.1.clone()].concat(),
        &[],
        &[],
    )
    .await
    .or_internal("read the books")?;
    let mut carried = Vec::new();
    for ((account, balance), (into, out)) in
        ids.iter().zip(&balances).zip(links.0.iter().zip(&links.1))
    {
        let open = postings::moved((account, &into.id()), *balance, institution, true);
        let close = postings::moved((account, &out.id()), *balance, institution, false);
        if let (Some(open), Some(close)) = (open, close) {
            opened
                .record(open)
                .map_err(|r| ApiError::internal("open", r))?;
            closed
                .record(close)
                .map_err(|r| ApiError::internal("close", r))?;
            carried.push(CarriedAccount {
                id: account.clone(),
                balance: balance.to_string(),
            });
        }
    }
    let mut statements = opened
        .statements(&When::always(), now)
        .or_internal("open the books")?;
    // Merchants keep their debt limits.
    for (account, row) in accounts.iter().zip(&rows) {
        let limit = row.debt_limit.parse::<u128>().or_internal("read a limit")?;
        if account.kind == Kind::Merchant && limit > 0 {
            statements.push(ledger::set_limit(account, limit, now).or_internal("a limit")?);
        }
    }
    batch(object, statements)
        .await
        .or_internal("open the object's books")?;
    let closing = closed
        .statements(&When::always(), now)
        .or_internal("close the books")?;
    Ok((carried, closing))
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
