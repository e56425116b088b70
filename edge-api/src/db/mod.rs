//! The tables' statements, one module per table or aggregate it owns: a table is written by
//! exactly one module. SQL lives there as constants or small builders, always with bound
//! parameters (`?1`), never with values spliced into the text. Each builds [`Stmt`]s, which the
//! executor ([`Db`], in `crate::sql`) runs wherever the tables live; no module here or above
//! says where.
//!
//! Statements that must commit together (a state change and its outbox event, an attempt and
//! its delivery) are built by their tables' modules and committed with [`Batch`] (or
//! [`batch`], when nothing is read back) by the service that knows they belong together: one
//! atomic transaction. Each statement added to a [`Batch`] gets a typed [`Handle`], and its
//! result is read with it, never by position.
//!
//! Every function returns [`DbResult`]; callers turn a failure into a logged 500 with
//! `or_internal("context")`.

pub mod bridges;
pub mod clients;
pub mod deliveries;
pub mod deposits;
pub mod endpoints;
pub mod events;
pub mod float_moves;
pub mod heads;
// Posting (`Book`, `When`, `open_of`, `raced`) is used once payments, settlements and refunds
// post their transfers; until then only the portal's reads are.
pub mod ledger;
pub mod merchants;
pub mod moves;
pub mod notifications;
pub mod object_sends;
pub mod origins;
pub mod parts;
pub mod passes;
pub mod portal;
pub mod reconciliations;
pub mod refunds;
pub mod screenings;
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
#[cfg(test)]
pub(crate) mod store_tests;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use wasm_bindgen::{JsCast, JsValue};

// The executor and what it runs, from the layer below: every table module reads them from here.
pub use crate::sql::{
    all, batch, first, run, stmt, strings, Batch, BatchResults, Db, DbError, DbErrorKind, DbResult,
    Handle, NoRows, Returning, Stmt, Value,
};

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

/// The statement just before in the batch changed a row (SQLite's `changes()`): for a write
/// that follows a guarded one and must happen exactly when it did.
pub struct AfterChange;

impl Condition for AfterChange {
    fn sql(&self, _first: usize) -> (String, Vec<Value>) {
        ("changes() = 1".to_owned(), Vec::new())
    }
}

/// The condition, in D1, that a row's institution keeps its money there: written after the
/// row's alias (`w.{MONEY_IN_D1}`). The cron's reads of D1's rows of every institution carry
/// it, so the D1 rows of an institution held in its object (copies, once the directory points
/// at the object), or being moved there, are never checked, credited, settled, refunded,
/// expired or delivered again from D1. Those reads run in an institution's object without it (its rows are all its own).
pub const MONEY_IN_D1: &str =
    "institution_id IN (SELECT id FROM institutions WHERE store = 'd1' AND moving_since IS NULL)";

/// Where an institution's money lives, as the directory says (`institutions.store`): D1's money
/// tables, or the institution's own object (`crate::objects`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MoneyStore {
    /// D1.
    D1,
    /// Its object.
    Object,
}

impl MoneyStore {
    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            MoneyStore::D1 => "d1",
            MoneyStore::Object => "object",
        }
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
    pub async fn all<R: DeserializeOwned>(&self, db: &Db) -> DbResult<Vec<R>> {
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
    /// For a list of money (transactions, events): the institution of the live access token
    /// with this hash when the directory holds its money in D1; nobody's when there is no such
    /// token, or its institution's money is in its object (`JsonPage::object_institution` then
    /// names it, and the list runs there).
    MoneyOfToken(&'a str),
}

/// A live token's institution, from its hash in `?1`.
const TOKEN_INSTITUTION: &str = "(SELECT institution_id FROM access_tokens \
     WHERE token_hash = ?1 AND expires_at > unixepoch())";
/// A live token's institution when its money is in D1, from its hash in `?1`.
const TOKEN_D1_INSTITUTION: &str = "(SELECT t.institution_id FROM access_tokens t \
     JOIN institutions i ON i.id = t.institution_id \
     WHERE t.token_hash = ?1 AND t.expires_at > unixepoch() AND i.store = 'd1')";
/// A live token's institution when its money is in its object, from its hash in `?1`.
const TOKEN_OBJECT_INSTITUTION: &str = "(SELECT t.institution_id FROM access_tokens t \
     JOIN institutions i ON i.id = t.institution_id \
     WHERE t.token_hash = ?1 AND t.expires_at > unixepoch() AND i.store = 'object')";
/// A live token's scopes, from its hash in `?1`.
const TOKEN_SCOPES: &str = "(SELECT scopes FROM access_tokens \
     WHERE token_hash = ?1 AND expires_at > unixepoch())";

impl Owner<'_> {
    /// The SQL of the owning institution's id, and its parameter (always `?1`).
    pub fn sql(self) -> (&'static str, Value) {
        match self {
            Owner::Institution(id) => ("?1", Value::from(id)),
            Owner::Token(hash) => (TOKEN_INSTITUTION, hash.into()),
            Owner::MoneyOfToken(hash) => (TOKEN_D1_INSTITUTION, hash.into()),
        }
    }

    /// The SQL of the token's institution when its money is in its object (NULL otherwise).
    fn object_sql(self) -> &'static str {
        match self {
            Owner::Institution(_) | Owner::Token(_) => "NULL",
            Owner::MoneyOfToken(_) => TOKEN_OBJECT_INSTITUTION,
        }
    }

    /// The SQL of the token's scopes (NULL for a known institution, or no live token).
    fn scopes_sql(self) -> &'static str {
        match self {
            Owner::Institution(_) => "NULL",
            Owner::Token(_) | Owner::MoneyOfToken(_) => TOKEN_SCOPES,
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
    /// With [`Owner::MoneyOfToken`]: the token's institution when its money is in its object
    /// (the page read here is then empty, and is read again there).
    pub object_institution: Option<i64>,
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
    db: &Db,
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
         {} AS scopes, {} AS object_institution",
        page.sql,
        owner.scopes_sql(),
        owner.object_sql(),
        by = order.by,
        cursor = order.cursor,
    );
    first(db, &sql, &params)
        .await?
        .ok_or_else(|| DbError::bad_row("a page query returned no row"))
}
