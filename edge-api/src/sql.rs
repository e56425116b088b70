//! The executor: how a statement runs, and the values, results and failures it deals in. A
//! statement is a [`Stmt`] (its SQL and its values), built without touching any database (by the
//! tables' modules in `crate::db`) and run by a [`Db`], the one place that calls the database.
//! Today that is D1, the database itself or a read session of it; the same statements are to run
//! unchanged inside each institution's Durable Object, so nothing above this says where its
//! tables live.
//!
//! Statements that commit together run as one atomic transaction ([`Batch`], or [`batch`] when
//! nothing is read back: D1's batch). Each statement added to a [`Batch`] gets a typed
//! [`Handle`], and its result is read with it, never by position.

use std::cell::RefCell;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use wasm_bindgen::JsValue;
use worker::{D1Database, D1DatabaseSession, D1PreparedStatement, D1Result};

use wire::{Outcome, Reply};

/// A failed database operation, or a stored row that does not read back, classified once, here,
/// from what D1 (SQLite) says: callers ask what kind of failure it was ([`DbError::kind`],
/// [`DbError::violates`]) and never read its text.
#[derive(Debug)]
pub struct DbError {
    kind: DbErrorKind,
    text: String,
}

/// What kind of failure a [`DbError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbErrorKind {
    /// A constraint refused a row: `UNIQUE`, `CHECK`, `NOT NULL`, `FOREIGN KEY`, or a trigger's
    /// `RAISE(ABORT)`. [`DbError::violates`] says which.
    Constraint,
    /// The database was busy or overloaded: worth trying again later.
    Busy,
    /// A statement, a value or a result past D1's limits (its size, its bound parameters).
    TooLarge,
    /// A stored row that does not read back as its type.
    BadRow,
    /// Anything else (the binding, the network, SQL the database refused).
    Other,
}

impl DbErrorKind {
    /// The kind's name, as log lines show it.
    pub fn as_str(self) -> &'static str {
        match self {
            DbErrorKind::Constraint => "constraint",
            DbErrorKind::Busy => "busy",
            DbErrorKind::TooLarge => "too large",
            DbErrorKind::BadRow => "bad row",
            DbErrorKind::Other => "database",
        }
    }
}

impl std::fmt::Display for DbError {
    /// The kind, then what D1 said: `constraint: UNIQUE constraint failed: …`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind().as_str(), self.text)
    }
}

impl From<worker::Error> for DbError {
    fn from(err: worker::Error) -> Self {
        let text = err.to_string();
        DbError {
            kind: classify(&text),
            text,
        }
    }
}

/// The kind of a D1 error from its message: the one place that reads it. (D1 passes SQLite's
/// messages through: `UNIQUE constraint failed: t.c: SQLITE_CONSTRAINT`.)
fn classify(text: &str) -> DbErrorKind {
    let lower = text.to_ascii_lowercase();
    if lower.contains("constraint failed") || lower.contains("sqlite_constraint") {
        DbErrorKind::Constraint
    } else if lower.contains("sqlite_busy")
        || lower.contains("database is locked")
        || lower.contains("overloaded")
    {
        DbErrorKind::Busy
    } else if lower.contains("sqlite_toobig")
        || lower.contains("too big")
        || lower.contains("too many sql variables")
        || lower.contains("too large")
    {
        DbErrorKind::TooLarge
    } else {
        DbErrorKind::Other
    }
}

impl DbError {
    /// A stored value that does not read back as its type.
    pub fn bad_row(what: impl Into<String>) -> Self {
        DbError {
            kind: DbErrorKind::BadRow,
            text: what.into(),
        }
    }

    /// What kind of failure it is.
    pub fn kind(&self) -> DbErrorKind {
        self.kind
    }

    /// Whether it is a constraint refusing a row, the constraint being `what` (SQLite names it
    /// as `table.column` for `UNIQUE` and `NOT NULL`, and by its expression for `CHECK`: `guard
    /// = 1`).
    pub fn violates(&self, what: &str) -> bool {
        self.kind() == DbErrorKind::Constraint && self.text.contains(what)
    }
}

/// The result of every database function.
pub type DbResult<T> = Result<T, DbError>;

/// A value bound to a statement parameter. It crosses to an institution's object as JSON: `null`,
/// an integer, or a string.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// An integer; must stay within ±2^53 to cross into JavaScript exactly.
    Int(i64),
    /// Text.
    Text(String),
}

impl Value {
    /// The value as JavaScript binds it (D1's and an object's SQLite alike).
    pub fn to_js(&self) -> JsValue {
        match self {
            // Ids and counters here are far below 2^53, where f64 is exact.
            Value::Null => JsValue::NULL,
            Value::Int(n) => JsValue::from_f64(*n as f64),
            Value::Text(s) => JsValue::from_str(s),
        }
    }
}

/// The native tests bind a statement's parameters to rusqlite as D1 would bind them.
#[cfg(test)]
impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(match self {
            Value::Null => rusqlite::types::ToSqlOutput::from(rusqlite::types::Null),
            Value::Int(n) => rusqlite::types::ToSqlOutput::from(*n),
            Value::Text(s) => rusqlite::types::ToSqlOutput::from(s.as_str()),
        })
    }
}

impl From<payrail_evm::Token> for Value {
    /// A token as stored: `native`, or its contract in lower case.
    fn from(token: payrail_evm::Token) -> Self {
        Value::Text(token.lower())
    }
}

impl From<shared_types::ids::InstitutionId> for Value {
    fn from(id: shared_types::ids::InstitutionId) -> Self {
        Value::Int(id.0)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Value::Int(n)
    }
}

impl From<bool> for Value {
    /// SQLite's booleans: 1 and 0.
    fn from(b: bool) -> Self {
        Value::Int(i64::from(b))
    }
}

impl From<shared_types::time::UnixTime> for Value {
    fn from(t: shared_types::time::UnixTime) -> Self {
        Value::Int(t.seconds())
    }
}

impl From<&payrail_evm::Address> for Value {
    /// The stored form, lower-case.
    fn from(a: &payrail_evm::Address) -> Self {
        Value::Text(a.lower())
    }
}

impl From<&payrail_evm::Token> for Value {
    /// The stored form: `native` or the lower-case contract.
    fn from(t: &payrail_evm::Token) -> Self {
        Value::Text(t.lower())
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Text(s)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(value: Option<T>) -> Self {
        value.map_or(Value::Null, Into::into)
    }
}

/// Where statements run: the one executor every database function goes through: D1, the
/// database itself (its primary: every write and every money decision) or a read session of it
/// (D1's Sessions API: reads that a replica may answer, sequentially consistent within the
/// session, see `routes::list::read_session`); or an institution's object, holding that
/// institution's money tables (`crate::objects`).
#[derive(Debug)]
pub enum Db {
    /// The D1 database itself.
    Primary(D1Database),
    /// A read session of it.
    Session(D1DatabaseSession),
    /// An institution's object.
    Object(Object),
}

impl Db {
    /// Whether it is an institution's object (whose tables are the money tables alone: a
    /// statement reading the treasury's beside them has its own text there).
    pub fn is_object(&self) -> bool {
        matches!(self, Db::Object(_))
    }
}

/// An institution's object as the worker reaches it: its stub and the institution it holds.
pub struct Object {
    stub: worker::Stub,
    institution: i64,
}

impl std::fmt::Debug for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Object(inst:{})", self.institution)
    }
}

impl Object {
    /// The object holding `institution`, through `stub`.
    pub fn new(stub: worker::Stub, institution: i64) -> Self {
        Object { stub, institution }
    }

    /// Sends `statements` to the object, which commits them as one transaction; one outcome
    /// each.
    async fn call(&self, statements: &[Stmt]) -> DbResult<Vec<Outcome>> {
        let call = wire::Call {
            institution: self.institution,
            statements: statements.to_vec(),
        };
        let body = serde_json::to_string(&call).map_err(|e| DbError {
            kind: DbErrorKind::Other,
            text: format!("a call that does not write: {e}"),
        })?;
        let mut init = worker::RequestInit::new();
        init.with_method(worker::Method::Post)
            .with_body(Some(JsValue::from_str(&body)));
        let request =
            worker::Request::new_with_init(&format!("https://institution{}", wire::PATH), &init)?;
        let response: web_sys::Response = self.stub.fetch_with_request(request).await?.into();
        let status = response.status();
        let parsed = match response.json() {
            Ok(promise) => wasm_bindgen_futures::JsFuture::from(promise).await.ok(),
            Err(_) => None,
        };
        let reply = parsed.as_ref().map(Reply::from_js);
        match reply {
            Some(Ok(Reply::Done(outcomes))) if outcomes.len() == statements.len() => {
                meter::record_object(&outcomes);
                Ok(outcomes)
            }
            Some(Ok(Reply::Done(_))) => Err(DbError::bad_row(
                "an object answered another number of results than it had statements",
            )),
            Some(Ok(Reply::Failed(text))) => Err(DbError {
                kind: classify(&text),
                text,
            }),
            Some(Err(e)) => Err(DbError {
                kind: DbErrorKind::Other,
                text: format!(
                    "an answer from the object that does not read (status {status}): {e}"
                ),
            }),
            None => Err(DbError {
                kind: DbErrorKind::Other,
                text: format!("an answer from the object that is not JSON (status {status})"),
            }),
        }
    }

    /// Runs one statement.
    async fn one(&self, statement: Stmt) -> DbResult<Outcome> {
        self.call(std::slice::from_ref(&statement))
            .await?
            .pop()
            .ok_or_else(|| DbError::bad_row("an object answered no result"))
    }
}

/// An object's rows read as `R` the way D1's are: they are the JavaScript objects D1 would
/// answer, read by the same deserializer, so a type reads the same from either (a page's JSON
/// text stays a JavaScript string, `JsonPage`).
fn object_rows<R: DeserializeOwned>(outcome: &Outcome) -> DbResult<Vec<R>> {
    outcome
        .rows
        .iter()
        .map(|row| {
            serde_wasm_bindgen::from_value(row)
                .map_err(|e| DbError::bad_row(format!("an object's row: {e}")))
        })
        .collect()
}

/// What one statement answered, from D1 or from an object.
enum Answered {
    D1(D1Result),
    Object(Outcome),
}

impl Answered {
    /// Rows the statement changed.
    fn changes(&self) -> usize {
        match self {
            Answered::D1(result) => changes(result),
            Answered::Object(outcome) => outcome.changes as usize,
        }
    }

    /// Its rows, read as `R`.
    fn rows<R: DeserializeOwned>(&self) -> DbResult<Vec<R>> {
        match self {
            Answered::D1(result) => Ok(result.results()?),
            Answered::Object(outcome) => object_rows(outcome),
        }
    }
}

impl Db {
    /// `stmt` prepared and bound for D1 (`None` for an object, which is sent statements).
    fn prepared(&self, stmt: &Stmt) -> DbResult<Option<D1PreparedStatement>> {
        let prepared = match self {
            Db::Primary(db) => db.prepare(stmt.sql.as_str()),
            Db::Session(session) => session.prepare(stmt.sql.as_str()),
            Db::Object(_) => return Ok(None),
        };
        let values: Vec<JsValue> = stmt.params.iter().map(Value::to_js).collect();
        Ok(Some(prepared.bind(&values)?))
    }

    /// `stmt` prepared and bound for D1, when the database is D1.
    fn d1(&self, stmt: &Stmt) -> DbResult<D1PreparedStatement> {
        self.prepared(stmt)?
            .ok_or_else(|| DbError::bad_row("a D1 statement prepared for an object"))
    }

    /// Commits `statements` as one atomic transaction (one D1 batch, or one call to the
    /// object); one result each.
    async fn transaction(&self, statements: &[Stmt]) -> DbResult<Vec<Answered>> {
        if let Db::Object(object) = self {
            let outcomes = object.call(statements).await?;
            return Ok(outcomes.into_iter().map(Answered::Object).collect());
        }
        let prepared = statements
            .iter()
            .map(|stmt| self.d1(stmt))
            .collect::<DbResult<Vec<_>>>()?;
        let results = match self {
            Db::Primary(db) => db.batch(prepared).await?,
            Db::Session(session) => session.batch(prepared).await?,
            Db::Object(_) => unreachable!("answered above"),
        };
        meter::record(1, &results);
        Ok(results.into_iter().map(Answered::D1).collect())
    }

    /// Where a read session's reads stood (its bookmark), for the client's next read; `None`
    /// for the database itself, an object, or a session that has read nothing.
    pub fn bookmark(&self) -> DbResult<Option<String>> {
        match self {
            Db::Primary(_) | Db::Object(_) => Ok(None),
            Db::Session(session) => Ok(session.get_bookmark()?),
        }
    }
}

/// Most values bound to one statement: D1's limit (SQLite objects on Cloudflare have the same).
pub const MAX_BOUND_PARAMETERS: usize = 100;

/// A statement: its SQL (with `?N` placeholders) and the values bound to them, in order. Built
/// without touching a database; run by a [`Db`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stmt {
    sql: String,
    params: Vec<Value>,
}

impl Stmt {
    /// Its SQL.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// The values bound to it, in order.
    pub fn params(&self) -> &[Value] {
        &self.params
    }
}

/// `sql` with `params` bound in order; refused when it binds more values than a statement may.
pub fn stmt(sql: &str, params: &[Value]) -> DbResult<Stmt> {
    if params.len() > MAX_BOUND_PARAMETERS {
        return Err(DbError {
            kind: DbErrorKind::TooLarge,
            text: format!(
                "{} values bound to one statement; at most {MAX_BOUND_PARAMETERS}",
                params.len()
            ),
        });
    }
    Ok(Stmt {
        sql: sql.to_owned(),
        params: params.to_vec(),
    })
}

/// The first row, if any.
pub async fn first<R: DeserializeOwned>(
    db: &Db,
    sql: &str,
    params: &[Value],
) -> DbResult<Option<R>> {
    if let Db::Object(object) = db {
        let outcome = object.one(stmt(sql, params)?).await?;
        return Ok(object_rows(&outcome)?.into_iter().next());
    }
    let statement = db.d1(&stmt(sql, params)?)?;
    if !meter::on() {
        return Ok(statement.first(None).await?);
    }
    // Metered, the same statement runs with `all` (D1's `first` answers no `meta`) and the
    // first row is kept: the answer is the same, the cost is counted.
    let result = statement.all().await?;
    meter::record(1, std::slice::from_ref(&result));
    Ok(result.results::<R>()?.into_iter().next())
}

/// Every row.
pub async fn all<R: DeserializeOwned>(db: &Db, sql: &str, params: &[Value]) -> DbResult<Vec<R>> {
    if let Db::Object(object) = db {
        let outcome = object.one(stmt(sql, params)?).await?;
        return object_rows(&outcome);
    }
    let result = db.d1(&stmt(sql, params)?)?.all().await?;
    meter::record(1, std::slice::from_ref(&result));
    Ok(result.results()?)
}

/// Runs a statement; returns how many rows it changed.
pub async fn run(db: &Db, sql: &str, params: &[Value]) -> DbResult<usize> {
    if let Db::Object(object) = db {
        return Ok(object.one(stmt(sql, params)?).await?.changes as usize);
    }
    let result = db.d1(&stmt(sql, params)?)?.run().await?;
    meter::record(1, std::slice::from_ref(&result));
    Ok(changes(&result))
}

/// The first column of every row, as text.
pub async fn strings(db: &Db, sql: &str, params: &[Value]) -> DbResult<Vec<String>> {
    if let Db::Object(object) = db {
        let outcome = object.one(stmt(sql, params)?).await?;
        return Ok(outcome
            .rows
            .iter()
            .filter_map(|row| js_sys::Object::values(&row.into()).get(0).as_string())
            .collect());
    }
    let statement = db.d1(&stmt(sql, params)?)?;
    if meter::on() {
        // Metered, through `all` (`raw` answers no `meta`): each row is one column.
        let result = statement.all().await?;
        meter::record(1, std::slice::from_ref(&result));
        let rows: Vec<serde_json::Map<String, serde_json::Value>> = result.results()?;
        return Ok(rows
            .into_iter()
            .filter_map(|row| row.into_iter().next())
            .filter_map(|(_, v)| v.as_str().map(str::to_owned))
            .collect());
    }
    let rows: Vec<Vec<String>> = statement.raw().await?;
    Ok(rows
        .into_iter()
        .filter_map(|row| row.into_iter().next())
        .collect())
}

/// Commits the statements as one atomic transaction, reading nothing back (a batch whose
/// results are read is built with [`Batch`]).
pub async fn batch(db: &Db, statements: Vec<Stmt>) -> DbResult<()> {
    // D1 refuses a batch of no statements; committing nothing needs no round trip.
    if statements.is_empty() {
        return Ok(());
    }
    db.transaction(&statements).await?;
    Ok(())
}

/// Statements committed together as one atomic transaction (a D1 batch), each read back by
/// the [`Handle`] it was given when added, so no caller counts positions:
///
/// ```ignore
/// let mut batch = Batch::new();
/// let update = batch.push(transactions::apply_change(db, ..)?);
/// let fan_out = batch.push(deliveries::fan_out(db, ..)?);
/// let results = batch.run(db).await?;
/// if results.changed(update) {
///     let created = results.rows(fan_out)?;
/// }
/// ```
#[derive(Default)]
pub struct Batch {
    statements: Vec<Stmt>,
}

/// A statement whose rows (a `SELECT`, or `RETURNING`) its batch reads back as `R`.
pub struct Returning<R> {
    statement: Stmt,
    rows: PhantomData<fn() -> R>,
}

impl<R> Returning<R> {
    /// `statement`, its rows read as `R`.
    pub fn new(statement: Stmt) -> Self {
        Self {
            statement,
            rows: PhantomData,
        }
    }
}

/// What a batch takes: a plain statement (its rows are not read), or one [`Returning`] rows.
pub trait Statement {
    /// What the statement's rows read as.
    type Rows;
    /// The statement itself.
    fn statement(self) -> Stmt;
}

/// The rows of a plain statement: there are none to read, so `rows` cannot be asked of it.
pub enum NoRows {}

impl Statement for Stmt {
    type Rows = NoRows;
    fn statement(self) -> Stmt {
        self
    }
}

impl<R> Statement for Returning<R> {
    type Rows = R;
    fn statement(self) -> Stmt {
        self.statement
    }
}

/// A statement's place in its [`Batch`], given when it was added; its rows read as `R`.
pub struct Handle<R> {
    index: usize,
    rows: PhantomData<fn() -> R>,
}

impl<R> Clone for Handle<R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for Handle<R> {}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `statement`; its result is read with the handle returned.
    pub fn push<S: Statement>(&mut self, statement: S) -> Handle<S::Rows> {
        self.statements.push(statement.statement());
        Handle {
            index: self.statements.len() - 1,
            rows: PhantomData,
        }
    }

    /// Adds statements whose results are not read.
    pub fn extend(&mut self, statements: impl IntoIterator<Item = Stmt>) {
        self.statements.extend(statements);
    }

    /// Commits the statements, in the order added, as one atomic transaction. An empty batch
    /// commits nothing and makes no round trip (D1 refuses a batch of no statements).
    pub async fn run(self, db: &Db) -> DbResult<BatchResults> {
        if self.statements.is_empty() {
            return Ok(BatchResults(Vec::new()));
        }
        Ok(BatchResults(db.transaction(&self.statements).await?))
    }
}

/// What a committed [`Batch`] answered, read by each statement's [`Handle`].
pub struct BatchResults(Vec<Answered>);

impl BatchResults {
    /// Whether the statement changed a row.
    pub fn changed<R>(&self, statement: Handle<R>) -> bool {
        self.0.get(statement.index).is_some_and(|r| r.changes() > 0)
    }

    /// The statement's rows.
    pub fn rows<R: DeserializeOwned>(&self, statement: Handle<R>) -> DbResult<Vec<R>> {
        match self.0.get(statement.index) {
            Some(result) => result.rows(),
            None => Err(DbError::bad_row(
                "a batch answered fewer results than it had statements",
            )),
        }
    }
}

/// Rows a statement changed.
fn changes(result: &D1Result) -> usize {
    result
        .meta()
        .ok()
        .flatten()
        .and_then(|m| m.changes)
        .unwrap_or(0)
}

/// What D1 work costs, counted from each call's own `meta` when switched on (`PAYRAIL_METER=1`,
/// never in the production configuration): round trips, statements, rows read and written, the
/// time D1 reports, and the database's size after the last call. The entry points start it
/// for each event and report it (a response header, or one log line for cron and queue work).
///
/// It lives in the isolate, not in the request: requests that interleave in one isolate share
/// it, so a measurement sends one request at a time (as `scripts/bench` does). Switched off,
/// every call is made exactly as before and nothing is counted.
pub mod meter {
    use super::{D1Result, Outcome, RefCell};

    /// The sums over one event's D1 calls.
    #[derive(Debug, Default, Clone, Copy, PartialEq)]
    pub struct Counts {
        /// Calls to D1 (a batch is one).
        pub trips: u64,
        /// Statements run.
        pub statements: u64,
        /// Rows D1 reports read.
        pub rows_read: u64,
        /// Rows D1 reports written (index entries included).
        pub rows_written: u64,
        /// Milliseconds D1 reports spent executing, summed.
        pub duration_ms: f64,
        /// The database's size in bytes after the last call, when reported.
        pub size_after: Option<u64>,
        /// Calls to institutions' objects (a call's statements commit together), and what
        /// they ran: statements, and rows read and written as the objects count them. Not D1
        /// work: counted apart.
        pub object_calls: u64,
        /// See `object_calls`.
        pub object_statements: u64,
        /// See `object_calls`.
        pub object_rows_read: u64,
        /// See `object_calls`.
        pub object_rows_written: u64,
    }

    impl Counts {
        /// The header's (and the log line's) form:
        /// `trips=2;statements=5;rows_read=9;rows_written=4;duration_ms=0.412;size_after=86016`.
        pub fn render(&self) -> String {
            let mut text = format!(
                "trips={};statements={};rows_read={};rows_written={};duration_ms={:.3}",
                self.trips, self.statements, self.rows_read, self.rows_written, self.duration_ms
            );
            if let Some(size) = self.size_after {
                text.push_str(&format!(";size_after={size}"));
            }
            if self.object_calls > 0 {
                text.push_str(&format!(
                    ";object_calls={};object_statements={};object_rows_read={};\
                     object_rows_written={}",
                    self.object_calls,
                    self.object_statements,
                    self.object_rows_read,
                    self.object_rows_written
                ));
            }
            text
        }
    }

    thread_local! {
        static METER: RefCell<Option<Counts>> = const { RefCell::new(None) };
    }

    /// Starts counting from zero.
    pub fn start() {
        METER.with(|m| *m.borrow_mut() = Some(Counts::default()));
    }

    /// Stops counting; what was counted since [`start`], if it was started.
    pub fn finish() -> Option<Counts> {
        METER.with(|m| m.borrow_mut().take())
    }

    /// Whether counting is on.
    pub fn on() -> bool {
        METER.with(|m| m.borrow().is_some())
    }

    /// Adds one call to an object that answered `outcomes` (one per statement).
    pub fn record_object(outcomes: &[Outcome]) {
        METER.with(|m| {
            if let Some(counts) = m.borrow_mut().as_mut() {
                counts.object_calls += 1;
                counts.object_statements += outcomes.len() as u64;
                for outcome in outcomes {
                    counts.object_rows_read += outcome.rows_read;
                    counts.object_rows_written += outcome.rows_written;
                }
            }
        });
    }

    /// Adds `trips` round trips that answered `results` (one per statement).
    pub fn record(trips: u64, results: &[D1Result]) {
        METER.with(|m| {
            if let Some(counts) = m.borrow_mut().as_mut() {
                counts.trips += trips;
                counts.statements += results.len() as u64;
                for meta in results.iter().filter_map(|r| r.meta().ok().flatten()) {
                    counts.rows_read += meta.rows_read.unwrap_or(0) as u64;
                    counts.rows_written += meta.rows_written.unwrap_or(0) as u64;
                    counts.duration_ms += meta.duration.unwrap_or(0.0);
                    if let Some(size) = meta.size_after {
                        counts.size_after = Some(size as u64);
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod error_tests {
    use super::{classify, DbError, DbErrorKind};

    /// What SQLite says, as D1 passes it on, classified.
    #[test]
    fn d1_errors_are_classified_from_sqlites_own_words() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE t (a INTEGER UNIQUE, b INTEGER NOT NULL, c INTEGER CHECK (c = 1))",
        )
        .unwrap();
        conn.execute("INSERT INTO t VALUES (1, 1, 1)", []).unwrap();
        let said = |sql: &str| conn.execute(sql, []).unwrap_err().to_string();
        for (sql, what) in [
            ("INSERT INTO t VALUES (1, 1, 1)", "t.a"),
            ("INSERT INTO t VALUES (2, NULL, 1)", "t.b"),
            ("INSERT INTO t VALUES (3, 1, 2)", "c = 1"),
        ] {
            let text = format!("D1_ERROR: {}: SQLITE_CONSTRAINT", said(sql));
            assert_eq!(classify(&text), DbErrorKind::Constraint, "{text}");
            let err = DbError {
                kind: classify(&text),
                text,
            };
            assert!(err.violates(what), "{err}");
            assert!(!err.violates("t.z"), "{err}");
        }
        assert_eq!(classify("D1_ERROR: database is locked"), DbErrorKind::Busy);
        assert_eq!(
            classify("D1 DB is overloaded. Requests queued for too long."),
            DbErrorKind::Busy
        );
        assert_eq!(
            classify("D1_ERROR: too many SQL variables at offset 10: SQLITE_ERROR"),
            DbErrorKind::TooLarge
        );
        assert_eq!(classify("D1_ERROR: no such table: x"), DbErrorKind::Other);
        let bad = DbError::bad_row("a count that is not a number");
        assert_eq!(bad.kind(), DbErrorKind::BadRow);
        assert!(!bad.violates("count"));
        assert_eq!(bad.to_string(), "bad row: a count that is not a number");
    }
}

#[cfg(test)]
mod stmt_tests {
    use super::{stmt, DbErrorKind, Value, MAX_BOUND_PARAMETERS};

    /// A statement binding more values than D1 (or an object's SQLite) takes is refused when it
    /// is built, naming the count, before any database sees it.
    #[test]
    fn a_statement_binds_at_most_the_limit_of_values() {
        let values = vec![Value::Int(1); MAX_BOUND_PARAMETERS];
        assert!(stmt("SELECT 1", &values).is_ok());
        let values = vec![Value::Int(1); MAX_BOUND_PARAMETERS + 1];
        let err = stmt("SELECT 1", &values).unwrap_err();
        assert_eq!(err.kind(), DbErrorKind::TooLarge);
        assert!(err.to_string().contains("101 values"), "{err}");
    }
}

/// The wire between the worker and an institution's object (`crate::objects`): a call of
/// statements, and what each answered.
pub mod wire {
    use serde::{Deserialize, Serialize};
    use wasm_bindgen::JsValue;

    use super::{Stmt, MAX_BOUND_PARAMETERS};

    /// The one path the object answers.
    pub const PATH: &str = "/sql";

    /// Largest call body: a batch of statements and their values (a page of rows moved in is the
    /// largest the worker sends).
    pub const CALL_BYTES_MAX: usize = 4 * 1024 * 1024;

    /// Most statements in one call.
    pub const CALL_STATEMENTS_MAX: usize = 200;

    /// Longest statement text (Cloudflare's limit for one statement in an object).
    pub const STATEMENT_BYTES_MAX: usize = 100 * 1024;

    /// One call to an object: the institution it is for and the statements it commits together.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct Call {
        /// The institution the caller believes this object holds.
        pub institution: i64,
        /// Committed together, in order.
        pub statements: Vec<Stmt>,
    }

    /// Most rows one answer carries (every statement the worker sends reads a bounded page).
    pub const ANSWER_ROWS_MAX: usize = 20_000;

    /// What one statement answered. Its rows stay JavaScript objects, as D1 answers them, from
    /// the object's cursor to the worker's deserializer: the answer crosses as JSON made and
    /// read by the platform, and a page's text never enters wasm memory on the way.
    #[derive(Debug)]
    pub struct Outcome {
        /// Its rows, each an object of its columns.
        pub rows: js_sys::Array,
        /// Rows it inserted, updated or deleted itself (SQLite's `changes()`, as D1's meta counts
        /// them: not rows changed by triggers).
        pub changes: u64,
        /// Rows SQLite read and wrote for it (indexes included), as the object's cursor counts.
        pub rows_read: u64,
        /// See `rows_read`.
        pub rows_written: u64,
    }

    /// An object's answer to a [`Call`].
    #[derive(Debug)]
    pub enum Reply {
        /// Committed: one outcome per statement.
        Done(Vec<Outcome>),
        /// Nothing committed: what SQLite (or the object's own check) said.
        Failed(String),
    }

    impl Reply {
        /// As JSON text (`{"done": [{"rows", "changes", "rows_read", "rows_written"}…]}` or
        /// `{"failed": "…"}`), made by the platform.
        pub fn to_json(&self) -> Result<js_sys::JsString, String> {
            let reply = js_sys::Object::new();
            let set = |target: &JsValue, key: &str, value: &JsValue| {
                js_sys::Reflect::set(target, &JsValue::from_str(key), value)
                    .map(drop)
                    .map_err(|_| format!("an answer's {key} cannot be set"))
            };
            match self {
                Reply::Failed(text) => set(&reply, "failed", &JsValue::from_str(text))?,
                Reply::Done(outcomes) => {
                    let done = js_sys::Array::new();
                    for outcome in outcomes {
                        let o: JsValue = js_sys::Object::new().into();
                        set(&o, "rows", &outcome.rows)?;
                        set(&o, "changes", &JsValue::from_f64(outcome.changes as f64))?;
                        set(
                            &o,
                            "rows_read",
                            &JsValue::from_f64(outcome.rows_read as f64),
                        )?;
                        set(
                            &o,
                            "rows_written",
                            &JsValue::from_f64(outcome.rows_written as f64),
                        )?;
                        done.push(&o);
                    }
                    set(&reply, "done", &done)?;
                }
            }
            js_sys::JSON::stringify(&reply).map_err(|_| "an answer that is not JSON".to_owned())
        }

        /// An answer as the platform parsed it.
        pub fn from_js(reply: &JsValue) -> Result<Reply, String> {
            let get = |target: &JsValue, key: &str| {
                js_sys::Reflect::get(target, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
            };
            if let Some(text) = get(reply, "failed").as_string() {
                return Ok(Reply::Failed(text));
            }
            let done = get(reply, "done");
            if !js_sys::Array::is_array(&done) {
                return Err("an answer with neither done nor failed".to_owned());
            }
            let count = |o: &JsValue, key: &str| -> Result<u64, String> {
                get(o, key)
                    .as_f64()
                    .filter(|n| *n >= 0.0 && n.fract() == 0.0)
                    .map(|n| n as u64)
                    .ok_or_else(|| format!("an outcome without its {key}"))
            };
            js_sys::Array::from(&done)
                .iter()
                .map(|o| {
                    let rows = get(&o, "rows");
                    if !js_sys::Array::is_array(&rows) {
                        return Err("an outcome without its rows".to_owned());
                    }
                    Ok(Outcome {
                        rows: rows.into(),
                        changes: count(&o, "changes")?,
                        rows_read: count(&o, "rows_read")?,
                        rows_written: count(&o, "rows_written")?,
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Reply::Done)
        }
    }

    /// A call refused before any statement runs, naming the bound it breaks.
    pub fn check(call: &Call) -> Result<(), String> {
        if call.statements.len() > CALL_STATEMENTS_MAX {
            return Err(format!(
                "{} statements in one call; at most {CALL_STATEMENTS_MAX}",
                call.statements.len()
            ));
        }
        for statement in &call.statements {
            if statement.sql().len() > STATEMENT_BYTES_MAX {
                return Err(format!(
                    "a statement of {} bytes; at most {STATEMENT_BYTES_MAX}",
                    statement.sql().len()
                ));
            }
            if statement.params().len() > MAX_BOUND_PARAMETERS {
                return Err(format!(
                    "{} values bound to one statement; at most {MAX_BOUND_PARAMETERS}",
                    statement.params().len()
                ));
            }
        }
        Ok(())
    }
}
