//! The only code that touches D1, one module per table or aggregate it owns: a table is written
//! by exactly one module. SQL lives there as constants or small builders, always with bound
//! parameters (`?1`), never with values spliced into the text.
//!
//! Statements that must commit together (a state change and its outbox event, an attempt and
//! its delivery) are built by their tables' modules as prepared statements and committed with
//! [`Batch`] (or [`batch`], when nothing is read back) by the service that knows they belong
//! together: D1's batch is its only transaction. Each statement added to a [`Batch`] gets a
//! typed [`Handle`], and its result is read with it, never by position.
//!
//! Every function returns [`DbResult`]; callers turn a failure into a logged 500 with
//! `or_internal("context")`.

pub mod clients;
pub mod deliveries;
pub mod deposits;
pub mod endpoints;
pub mod events;
pub mod heads;
// Posting (`Book`, `When`, `open_of`, `raced`) is used once payments, settlements and refunds
// post their transfers; until then only the portal's reads are.
pub mod ledger;
pub mod merchants;
pub mod notifications;
pub mod origins;
pub mod parts;
pub mod portal;
pub mod reconciliations;
pub mod refunds;
pub mod sends;
pub mod sessions;
pub mod settlements;
pub mod sweeps;
pub mod throttle;
pub mod topups;
pub mod transactions;
pub mod wallets;
pub mod watches;

#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod scope_tests;

use std::cell::RefCell;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use wasm_bindgen::{JsCast, JsValue};
use worker::{D1Database, D1PreparedStatement, D1Result};

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

/// A value bound to a statement parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// An integer; must stay within ±2^53 to cross into JavaScript exactly.
    Int(i64),
    /// Text.
    Text(String),
}

impl Value {
    fn to_js(&self) -> JsValue {
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

/// For the native tests: whether `condition` holds on `conn` as it stands.
#[cfg(test)]
pub(crate) fn holds(conn: &rusqlite::Connection, condition: &dyn Condition) -> bool {
    let (sql, params) = condition.sql(1);
    conn.query_row(
        &format!("SELECT {sql}"),
        rusqlite::params_from_iter(params.iter()),
        |row| row.get::<_, i64>(0),
    )
    .unwrap()
        == 1
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

/// A condition the inserts of a batch carry (an attempt's counts within their limits, the facts a
/// checkout session was made on still holding): its SQL, with its parameters numbered from
/// `?first`, and those parameters, to be bound after the statement's own.
pub trait Condition {
    /// The SQL and its parameters.
    fn sql(&self, first: usize) -> (String, Vec<Value>);
}

/// A condition held by reference.
impl<C: Condition + ?Sized> Condition for &C {
    fn sql(&self, first: usize) -> (String, Vec<Value>) {
        (**self).sql(first)
    }
}

/// Both conditions.
pub struct And<'a>(pub &'a dyn Condition, pub &'a dyn Condition);

impl Condition for And<'_> {
    fn sql(&self, first: usize) -> (String, Vec<Value>) {
        let (left, mut params) = self.0.sql(first);
        let (right, more) = self.1.sql(first + params.len());
        params.extend(more);
        (format!("({left}) AND ({right})"), params)
    }
}

/// Reads one of SQLite's booleans (a column of 0 and 1, as D1 returns it) as a `bool`: use as
/// `#[serde(deserialize_with = "flag")]`. Any other value is a bad row, not a guess.
pub fn flag<'de, D: serde::Deserializer<'de>>(from: D) -> Result<bool, D::Error> {
    struct Flag;
    impl serde::de::Visitor<'_> for Flag {
        type Value = bool;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("0 or 1")
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<bool, E> {
            Ok(v)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<bool, E> {
            match v {
                0 => Ok(false),
                1 => Ok(true),
                _ => Err(E::custom(format!("{v} where 0 or 1 was stored"))),
            }
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<bool, E> {
            self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<bool, E> {
            if v == 0.0 {
                Ok(false)
            } else if v == 1.0 {
                Ok(true)
            } else {
                Err(E::custom(format!("{v} where 0 or 1 was stored")))
            }
        }
    }
    from.deserialize_any(Flag)
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

/// A query and its parameters, built without touching D1 (so its plan can be tested); named
/// apart from `crate::query`, which validates query strings.
#[derive(Debug, Clone, PartialEq)]
pub struct Select {
    /// SQL with `?N` placeholders.
    pub sql: String,
    /// Values for `?1`, `?2`, ...
    pub params: Vec<Value>,
}

impl Select {
    /// Runs the statement and deserializes every row.
    pub async fn all<R: DeserializeOwned>(&self, db: &D1Database) -> DbResult<Vec<R>> {
        all(db, &self.sql, &self.params).await
    }
}

/// Whose rows a list reads: a known institution's, or the one a bearer token acts for (by the
/// token's hash) — then the token's check rides in the list's own statement, one round trip
/// for both (the partner API's hot path).
#[derive(Debug, Clone, Copy)]
pub enum Owner<'a> {
    /// This institution.
    Institution(shared_types::ids::InstitutionId),
    /// The institution of the live access token with this hash; nobody's when there is none.
    Token(&'a str),
}

/// A live token's institution, from its hash in `?1`.
const TOKEN_INSTITUTION: &str = "(SELECT institution_id FROM access_tokens \
     WHERE token_hash = ?1 AND expires_at > unixepoch())";
/// A live token's scopes, from its hash in `?1`.
const TOKEN_SCOPES: &str = "(SELECT scopes FROM access_tokens \
     WHERE token_hash = ?1 AND expires_at > unixepoch())";

impl Owner<'_> {
    /// The SQL of the owning institution's id, and its parameter (always `?1`).
    pub fn sql(self) -> (&'static str, Value) {
        match self {
            Owner::Institution(id) => ("?1", Value::from(id)),
            Owner::Token(hash) => (TOKEN_INSTITUTION, hash.into()),
        }
    }

    /// The SQL of the token's scopes (NULL for a known institution, or no live token).
    fn scopes_sql(self) -> &'static str {
        match self {
            Owner::Institution(_) => "NULL",
            Owner::Token(_) => TOKEN_SCOPES,
        }
    }
}

/// One page of a list, its rows already JSON: SQLite builds each object (`json_object`) and the
/// array (the objects' texts joined), so the text goes to the response as it is, with no row
/// ever crossing into Rust (the partner API's lists, its hot path).
#[derive(Debug, Deserialize)]
pub struct JsonPage {
    /// The rows of the page (up to the limit), a JSON array, left a JavaScript string: copying
    /// it into wasm memory and back out cost more than the query itself (wasm-bindgen copies a
    /// string in character by character).
    #[serde(with = "serde_wasm_bindgen::preserve")]
    pub data: JsValue,
    /// How many rows the query found: one over the limit means a further page.
    pub found: i64,
    /// The cursor of the page's last row (its id) when the page is full.
    pub last: Option<serde_json::Value>,
    /// With [`Owner::Token`]: the token's scopes, or `None` when it is not a live token.
    pub scopes: Option<String>,
}

impl JsonPage {
    /// The list envelope (`object`, `data`, `has_more`, `next_cursor`) around the rows, joined
    /// in JavaScript.
    pub fn envelope(&self, limit: u32) -> DbResult<js_sys::JsString> {
        let data = self
            .data
            .dyn_ref::<js_sys::JsString>()
            .ok_or_else(|| DbError::bad_row("a page's rows are not JSON text"))?;
        let has_more = self.found > i64::from(limit);
        let cursor = match (has_more, &self.last) {
            (true, Some(last)) => last.to_string(),
            _ => "null".to_owned(),
        };
        Ok(js_sys::JsString::from("{\"object\":\"list\",\"data\":")
            .concat(data)
            .concat(&js_sys::JsString::from(format!(
                ",\"has_more\":{has_more},\"next_cursor\":{cursor}}}"
            ))))
    }
}

/// How a list is ordered, newest first, and what its cursor is.
#[derive(Debug, Clone, Copy)]
pub struct Order {
    /// The column it is ordered by, descending.
    pub by: &'static str,
    /// The column the next page's cursor is.
    pub cursor: &'static str,
}

/// Lists ordered and paged by their integer id.
pub const BY_ID: Order = Order {
    by: "id",
    cursor: "id",
};

/// Runs `page` (a list query of `owner`'s rows fetching `limit + 1` rows, newest first by
/// `order`, its last parameter the `LIMIT`) with each row turned into JSON by `object` (a
/// `json_object(...)` over its columns).
pub async fn json_page(
    db: &impl Prepare,
    owner: Owner<'_>,
    page: Select,
    limit: u32,
    (object, order): (&str, Order),
) -> DbResult<JsonPage> {
    let mut params = page.params;
    params.push(Value::Int(i64::from(limit)));
    let n = params.len();
    // The page is kept as each row's order key, cursor and JSON text only (copying whole rows
    // into the materialized page cost as much as building their JSON), and the array is the
    // texts joined: each is already a JSON object, so nothing is parsed again.
    let sql = format!(
        "WITH page AS MATERIALIZED (SELECT {by} AS by_, {cursor} AS cursor_, {object} AS row_ \
         FROM ({})) SELECT \
         (SELECT count(*) FROM page) AS found, \
         (SELECT '[' || coalesce(group_concat(row_, ','), '') || ']' FROM \
          (SELECT row_ FROM page ORDER BY by_ DESC LIMIT ?{n})) AS data, \
         (SELECT cursor_ FROM page ORDER BY by_ DESC LIMIT 1 OFFSET ?{n} - 1) AS last, \
         {} AS scopes",
        page.sql,
        owner.scopes_sql(),
        by = order.by,
        cursor = order.cursor,
    );
    first(db, &sql, &params)
        .await?
        .ok_or_else(|| DbError::bad_row("a page query returned no row"))
}

/// What statements are prepared on: the database itself (its primary: every write and every
/// money decision) or a session of it (D1's Sessions API: reads that a replica may answer,
/// sequentially consistent within the session, see `routes::list::read_session`).
pub trait Prepare {
    /// `sql` as a statement of this database or session.
    fn statement(&self, sql: &str) -> D1PreparedStatement;
}

impl Prepare for D1Database {
    fn statement(&self, sql: &str) -> D1PreparedStatement {
        self.prepare(sql)
    }
}

impl Prepare for worker::D1DatabaseSession {
    fn statement(&self, sql: &str) -> D1PreparedStatement {
        self.prepare(sql)
    }
}

/// Prepares `sql` on `db` with `params` bound in order.
pub fn bind(db: &impl Prepare, sql: &str, params: &[Value]) -> DbResult<D1PreparedStatement> {
    let values: Vec<JsValue> = params.iter().map(Value::to_js).collect();
    Ok(db.statement(sql).bind(&values)?)
}

/// The first row, if any.
pub async fn first<R: DeserializeOwned>(
    db: &impl Prepare,
    sql: &str,
    params: &[Value],
) -> DbResult<Option<R>> {
    let statement = bind(db, sql, params)?;
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
pub async fn all<R: DeserializeOwned>(
    db: &impl Prepare,
    sql: &str,
    params: &[Value],
) -> DbResult<Vec<R>> {
    let result = bind(db, sql, params)?.all().await?;
    meter::record(1, std::slice::from_ref(&result));
    Ok(result.results()?)
}

/// Runs a statement; returns how many rows it changed.
pub async fn run(db: &D1Database, sql: &str, params: &[Value]) -> DbResult<usize> {
    let result = bind(db, sql, params)?.run().await?;
    meter::record(1, std::slice::from_ref(&result));
    Ok(changes(&result))
}

/// The first column of every row, as text.
pub async fn strings(db: &D1Database, sql: &str, params: &[Value]) -> DbResult<Vec<String>> {
    let statement = bind(db, sql, params)?;
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
pub async fn batch(db: &D1Database, statements: Vec<D1PreparedStatement>) -> DbResult<()> {
    // D1 refuses a batch of no statements; committing nothing needs no round trip.
    if statements.is_empty() {
        return Ok(());
    }
    let results = db.batch(statements).await?;
    meter::record(1, &results);
    Ok(())
}

/// Statements committed together as one D1 batch (D1's only transaction), each read back by
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
    statements: Vec<D1PreparedStatement>,
}

/// A statement whose rows (a `SELECT`, or `RETURNING`) its batch reads back as `R`.
pub struct Returning<R> {
    statement: D1PreparedStatement,
    rows: PhantomData<fn() -> R>,
}

impl<R> Returning<R> {
    /// `statement`, its rows read as `R`.
    pub fn new(statement: D1PreparedStatement) -> Self {
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
    /// The statement as D1 runs it.
    fn prepared(self) -> D1PreparedStatement;
}

/// The rows of a plain statement: there are none to read, so `rows` cannot be asked of it.
pub enum NoRows {}

impl Statement for D1PreparedStatement {
    type Rows = NoRows;
    fn prepared(self) -> D1PreparedStatement {
        self
    }
}

impl<R> Statement for Returning<R> {
    type Rows = R;
    fn prepared(self) -> D1PreparedStatement {
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
        self.statements.push(statement.prepared());
        Handle {
            index: self.statements.len() - 1,
            rows: PhantomData,
        }
    }

    /// Adds statements whose results are not read.
    pub fn extend(&mut self, statements: impl IntoIterator<Item = D1PreparedStatement>) {
        self.statements.extend(statements);
    }

    /// Commits the statements, in the order added, as one atomic transaction. An empty batch
    /// commits nothing and makes no round trip (D1 refuses a batch of no statements).
    pub async fn run(self, db: &D1Database) -> DbResult<BatchResults> {
        if self.statements.is_empty() {
            return Ok(BatchResults(Vec::new()));
        }
        let results = db.batch(self.statements).await?;
        meter::record(1, &results);
        Ok(BatchResults(results))
    }
}

/// What a committed [`Batch`] answered, read by each statement's [`Handle`].
pub struct BatchResults(Vec<D1Result>);

impl BatchResults {
    /// Whether the statement changed a row.
    pub fn changed<R>(&self, statement: Handle<R>) -> bool {
        self.0.get(statement.index).is_some_and(|r| changes(r) > 0)
    }

    /// The statement's rows.
    pub fn rows<R: DeserializeOwned>(&self, statement: Handle<R>) -> DbResult<Vec<R>> {
        match self.0.get(statement.index) {
            Some(result) => Ok(result.results()?),
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
    use super::{D1Result, RefCell};

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
