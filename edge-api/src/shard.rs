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
    if moves::moving_since(&ctx.db, institution)
        .await
        .or_internal("read the institution's move")?
        .is_some()
    {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "the institution is being moved into its object: a copy would empty it midway",
        )
        .with_retry_after(MOVE_RETRY_SECONDS));
    }
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

/// Copies every money table of `institution` into its object (emptied first) and compares: a
/// rehearsal, its pages recorded in the object as a move's of its own (named by the negated
/// time in milliseconds: two rehearsals one after the other within a second are two, while
/// racing ones that start in the same millisecond record one start and the other is busy), read
/// back from both sides once each table is copied.
async fn copy_tables(ctx: &Ctx, institution: i64) -> Result<Report, ApiError> {
    let object = ctx.institution_object(institution)?;
    let mut calls = Calls::new(CALLS_MAX);
    let rehearsal = -(js_sys::Date::now() as i64);
    calls.spend()?;
    match batch(
        &object,
        moves::start(rehearsal).or_internal("clear the object")?,
    )
    .await
    {
        Ok(()) => {}
        Err(raced) if raced.kind() == DbErrorKind::Constraint => return Err(busy()),
        Err(failed) => return Err(failed).or_internal("clear the object"),
    }
    let mut tables = Vec::with_capacity(moves::TABLES.len());
    for table in moves::TABLES {
        let mut copied = 0;
        loop {
            let rows = copy_page(
                ctx,
                &object,
                (table, institution, copied),
                rehearsal,
                &mut calls,
            )
            .await?
            .map_err(|why| ApiError::new(ErrorCode::Conflict, why))?;
            copied += rows;
            if rows < PAGE_ROWS {
                break;
            }
        }
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

/// Calls a page of a move makes: its rows read from D1, written and read back in the object,
/// and a copied checkout's entries in the directory's index.
const PAGE_CALLS: usize = 3;

/// Calls the end of a move makes: the counts on both sides, its books carried (the accounts and
/// fees read, both books loaded, the object's opened) and the flip.
const FINISH_CALLS: usize = 12;

/// What a move did.
#[derive(Debug, Serialize)]
pub struct MoveReport {
    /// The institution.
    pub institution: i64,
    /// Whether the directory now holds its money in its object.
    pub moved: bool,
    /// Whether the move goes on (not moved yet, the institution still paused): call again.
    pub moving: bool,
    /// Why it did not move (it works from D1 as before; try again).
    pub reason: Option<String>,
    /// How far the move has come: the rows copied into the object so far, and the tables whole.
    pub progress: Option<MoveProgress>,
    /// The comparison of both sides, once every table was copied.
    pub copy: Option<Report>,
    /// Each account carried into the object: opened there at its D1 balance, closed in D1.
    pub accounts: Vec<CarriedAccount>,
}

/// How far a move has come.
#[derive(Debug, Serialize)]
pub struct MoveProgress {
    /// Rows copied into the object so far.
    pub rows_copied: i64,
    /// Tables whole in the object.
    pub tables_copied: usize,
    /// The money tables in all.
    pub tables: usize,
}

/// An account carried by a move.
#[derive(Debug, Serialize)]
pub struct CarriedAccount {
    /// Its id (the same in both stores).
    pub id: String,
    /// Credits less debits posted, in base units (decimal text).
    pub balance: String,
}

/// Moves `institution`'s money from D1 into its object, or goes on with its move (docs/SCALING.md,
/// "The move"): its money frozen in D1 while it moves (writes of its rows refused, D1's cron
/// leaving them), nothing of it in flight when it starts, every money table copied page by page
/// (each page recorded in the object with its rows and read back there), both sides counted, its
/// books carried (each account opened in the object at its D1 balance and closed in D1, against
/// the stores' links), then the directory pointed at the object in the batch that closes D1's
/// books. A request makes at most `PAYRAIL_MOVE_CALLS` calls: a move that needs more answers how
/// far it came, still paused, and the next request goes on from the pages the object recorded
/// (a request stopped anywhere loses nothing: a page and its record commit together). A move
/// that finds a difference, or must wait for money in flight, is given up with the reason (the
/// institution works from D1 again); one no request goes on with for five minutes is given up by
/// the cron.
pub async fn move_in(ctx: &Ctx, institution: i64) -> Result<MoveReport, ApiError> {
    movable(ctx, institution).await?;
    let now = ctx.now();
    let mut calls = Calls::new(ctx.move_calls());
    calls.spend()?;
    let since = match moves::moving_since(&ctx.db, institution)
        .await
        .or_internal("read the institution's move")?
    {
        Some(since) => since,
        None => {
            calls.spend()?;
            let mut freeze = Batch::new();
            let frozen = freeze.push(moves::freeze(institution, now).or_internal("freeze")?);
            let results = freeze
                .run(&ctx.db)
                .await
                .or_internal("freeze the institution")?;
            let Some(frozen) = results
                .rows(frozen)
                .or_internal("freeze the institution")?
                .into_iter()
                .next()
            else {
                return Err(ApiError::new(
                    ErrorCode::Conflict,
                    "another move of this institution started just now; call again to go on \
                     with it",
                )
                .with_retry_after(MOVE_RETRY_SECONDS));
            };
            frozen.moving_since
        }
    };
    calls.spend()?;
    let mut touch = Batch::new();
    let touched = touch.push(moves::touch(institution, since, now).or_internal("touch")?);
    if !touch
        .run(&ctx.db)
        .await
        .or_internal("go on with the move")?
        .changed(touched)
    {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "the institution's move ended meanwhile (moved, or given up); read where its money is",
        ));
    }
    let outcome = moving(ctx, institution, since, &mut calls).await;
    // A move refused for a reason works from D1 again; one that goes on, or met an error on the
    // way (a call that failed: the next request goes on from what was recorded), stays paused.
    if matches!(
        outcome,
        Ok(MoveReport {
            moved: false,
            moving: false,
            ..
        })
    ) {
        let thaw = moves::thaw(institution, since).or_internal("thaw")?;
        if let Err(err) = batch(&ctx.db, vec![thaw]).await {
            worker::console_warn!("thaw institution {institution}: {err}");
        }
    }
    outcome
}

/// The move of frozen `institution` (frozen at `since`), from where its object's pages say it
/// stands, within `calls`.
async fn moving(
    ctx: &Ctx,
    institution: i64,
    since: i64,
    calls: &mut Calls,
) -> Result<MoveReport, ApiError> {
    let report = |moved: bool, moving: bool, reason: Option<String>| MoveReport {
        institution,
        moved,
        moving,
        reason,
        progress: None,
        copy: None,
        accounts: Vec::new(),
    };
    let going_on = |progress: &moves::Progress| {
        let mut going = report(false, true, None);
        going.progress = Some(progress_of(progress));
        going
    };
    let object = ctx.institution_object(institution)?;
    calls.spend()?;
    let mut progress = moves::progress(&object, since, PAGE_ROWS)
        .await
        .or_internal("read the move's progress")?;
    if !progress.started {
        calls.spend()?;
        if let Some(why) = moves::in_flight(&ctx.db, institution)
            .await
            .or_internal("read what is in flight")?
        {
            return Ok(report(
                false,
                false,
                Some(format!("{why}: it moves once they are")),
            ));
        }
        calls.spend()?;
        match batch(&object, moves::start(since).or_internal("start the move")?).await {
            Ok(()) => {}
            // Another request of the move started it first: its pages are the move's.
            Err(raced) if raced.kind() == DbErrorKind::Constraint => return Err(busy()),
            Err(failed) => return Err(failed).or_internal("start the move"),
        }
        progress = moves::Progress {
            started: true,
            ..Default::default()
        };
    }
    for table in moves::TABLES {
        let (mut copied, mut whole) = progress.of(table.name);
        while !whole {
            if calls.left() < PAGE_CALLS {
                return Ok(going_on(&progress));
            }
            let rows =
                match copy_page(ctx, &object, (table, institution, copied), since, calls).await? {
                    Ok(rows) => rows,
                    Err(why) => return Ok(report(false, false, Some(why))),
                };
            copied += rows;
            whole = rows < PAGE_ROWS;
            progress
                .tables
                .insert(table.name.to_owned(), (copied, whole));
        }
    }
    if calls.left() < FINISH_CALLS {
        return Ok(going_on(&progress));
    }
    // Both sides counted, table by table: with D1 frozen, a row added or removed there since its
    // page was copied shows as a difference.
    let copy = compare_counts(ctx, &object, institution, calls).await?;
    if !copy.verified {
        let mut refused = report(
            false,
            false,
            Some("the copy differs from D1 (see the tables)".to_owned()),
        );
        refused.copy = Some(copy);
        return Ok(refused);
    }
    let (accounts, closing) = carry_books(ctx, &object, (institution, since), calls).await?;
    calls.spend()?;
    let mut flip = Batch::new();
    flip.extend(closing);
    let flipped = flip.push(moves::flip(institution, since).or_internal("flip")?);
    // D1's closing is guarded on its accounts as read: another request that flipped first
    // moved them.
    let done = match flip.run(&ctx.db).await {
        Ok(done) => done,
        Err(raced) if ledger::raced(&raced) => return Err(busy()),
        Err(failed) => return Err(failed).or_internal("flip the institution"),
    };
    if !done.changed(flipped) {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "the institution's move ended meanwhile (moved by another request, or given up)",
        ));
    }
    Ok(MoveReport {
        institution,
        moved: true,
        moving: false,
        reason: None,
        progress: Some(progress_of(&progress)),
        copy: Some(copy),
        accounts,
    })
}

/// Another request of the move is copying the same page, or starting it: this one stops.
fn busy() -> ApiError {
    ApiError::new(
        ErrorCode::Conflict,
        "another request is going on with this institution's move now; call again in a few \
         seconds",
    )
    .with_retry_after(MOVE_RETRY_SECONDS)
}

/// How far `progress` has come, for the report.
fn progress_of(progress: &moves::Progress) -> MoveProgress {
    MoveProgress {
        rows_copied: progress.tables.values().map(|(rows, _)| rows).sum(),
        tables_copied: progress.tables.values().filter(|(_, whole)| *whole).count(),
        tables: moves::TABLES.len(),
    }
}

/// Copies one page of `table`'s rows of `institution` from row `offset` in key order from D1
/// into `object`, recorded as a page of the move `since` in the same transaction, and reads it
/// back there: the rows copied, or (inner `Err`) why the move must be given up (the object
/// refused a row, or holds it otherwise than D1). 409 when another request of the move copied
/// that page first.
async fn copy_page(
    ctx: &Ctx,
    object: &Db,
    (table, institution, offset): (&Table, i64, i64),
    since: i64,
    calls: &mut Calls,
) -> Result<Result<i64, String>, ApiError> {
    calls.spend()?;
    let rows = moves::page(&ctx.db, table, Some(institution), offset, PAGE_ROWS)
        .await
        .or_internal("read a page")?;
    let count = rows.len() as i64;
    let mut page = Batch::new();
    page.push(moves::record_page(since, table, offset, count).or_internal("record a page")?);
    page.extend(
        rows.iter()
            .map(|row| moves::insert(table, row))
            .collect::<Result<Vec<Stmt>, _>>()
            .or_internal("copy a page")?,
    );
    let back = page.push(moves::page_in_object(table, offset, PAGE_ROWS).or_internal("read back")?);
    calls.spend()?;
    let written = match page.run(object).await {
        Ok(written) => written,
        Err(raced) if raced.violates("object_move_pages") => return Err(busy()),
        Err(refused) if refused.kind() == DbErrorKind::Constraint => {
            return Ok(Err(format!(
                "the copy stopped at {} (its rows from {offset} in key order): the object \
                 refused one: {refused}",
                table.name
            )))
        }
        Err(failed) => return Err(failed).or_internal("copy a page"),
    };
    let back: Vec<Row> = written.rows(back).or_internal("read a page back")?;
    if back != rows {
        return Ok(Err(format!(
            "the copy of {} differs from D1 in its rows from {offset} in key order",
            table.name
        )));
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
    Ok(Ok(count))
}

/// Every money table counted on both sides (two calls): `institution`'s rows in D1, every row
/// in its object.
async fn compare_counts(
    ctx: &Ctx,
    object: &Db,
    institution: i64,
    calls: &mut Calls,
) -> Result<Report, ApiError> {
    let mut d1 = Batch::new();
    let mut held = Batch::new();
    let handles: Vec<_> = moves::TABLES
        .iter()
        .map(|table| {
            Ok((
                d1.push(moves::count(table, Some(institution))?),
                held.push(moves::count(table, None)?),
            ))
        })
        .collect::<Result<_, crate::db::DbError>>()
        .or_internal("count the tables")?;
    calls.spend()?;
    let d1 = d1.run(&ctx.db).await.or_internal("count D1's tables")?;
    calls.spend()?;
    let held = held
        .run(object)
        .await
        .or_internal("count the object's tables")?;
    let count = |results: &crate::db::BatchResults, handle| -> Result<i64, ApiError> {
        Ok(results
            .rows(handle)
            .or_internal("count a table")?
            .first()
            .map_or(0, |c: &moves::Count| c.n))
    };
    let mut tables = Vec::with_capacity(handles.len());
    for (table, (source, kept)) in moves::TABLES.iter().zip(handles) {
        let (d1_rows, object_rows) = (count(&d1, source)?, count(&held, kept)?);
        tables.push(TableReport {
            table: table.name,
            d1_rows,
            object_rows,
            same: d1_rows == object_rows,
        });
    }
    Ok(Report {
        institution,
        verified: tables.iter().all(|t| t.same),
        tables,
    })
}

/// Opens `institution`'s accounts in its `object` at their D1 balances (each against the
/// object's link to the treasury, merchants with their debt limits), and answers the D1
/// statements that close them (against D1's link to the institution, guarded on the accounts'
/// versions as read and on the move started at `since` still holding the institution), for the
/// flip's batch. Openings already made by an earlier request of the move are found by their ids
/// and not made again. Its share of D1's shared network fees accounts is
/// what its own payments' transfers moved there.
async fn carry_books(
    ctx: &Ctx,
    object: &Db,
    (institution, since): (i64, i64),
    calls: &mut Calls,
) -> Result<(Vec<CarriedAccount>, Vec<Stmt>), ApiError> {
    let number = |text: &str| text.parse::<i128>().or_internal("read a balance");
    calls.spend()?;
    let mut rows = moves::accounts_of(&ctx.db, institution)
        .await
        .or_internal("read the institution's accounts")?;
    let mut balances: Vec<i128> = Vec::with_capacity(rows.len());
    for row in &rows {
        balances.push(number(&row.credits_posted)? - number(&row.debits_posted)?);
    }
    // Its share of the network fees.
    calls.spend()?;
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
    calls.spend()?;
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
    // The object's books are opened once: a request of the move that opened them and stopped
    // before the flip left the openings (by their ids) for the next to find.
    let openings: Vec<String> = ids
        .iter()
        .map(|id| postings::moved_id(institution, id))
        .collect();
    calls.spend()?;
    calls.spend()?;
    let mut opened = Book::load(
        object,
        &[accounts.clone(), links.0.clone()].concat(),
        &openings,
        &[],
    )
    .await
    .or_internal("read the object's books")?;
    calls.spend()?;
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
    calls.spend()?;
    match batch(object, statements).await {
        Ok(()) => {}
        // Another request of the move opened them first.
        Err(raced) if ledger::raced(&raced) => return Err(busy()),
        Err(failed) => return Err(failed).or_internal("open the object's books"),
    }
    // Closed only with the flip: while this move still holds the institution.
    let still_moving = When::holds(
        "EXISTS (SELECT 1 FROM institutions WHERE id = ?1 AND store = 'd1' AND moving_since = ?2)",
        vec![institution.into(), since.into()],
    );
    let closing = closed
        .statements(&still_moving, now)
        .or_internal("close the books")?;
    Ok((carried, closing))
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

/// The calls a copy or a request of a move has made, refused past its budget.
struct Calls {
    made: usize,
    most: usize,
}

impl Calls {
    /// At most `most` calls.
    fn new(most: usize) -> Self {
        Calls { made: 0, most }
    }

    /// Calls still to make.
    fn left(&self) -> usize {
        self.most.saturating_sub(self.made)
    }

    fn spend(&mut self) -> Result<(), ApiError> {
        self.made += 1;
        if self.made > self.most {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!(
                    "the institution holds more rows than one copy may read and write within \
                     its {} calls",
                    self.most
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
