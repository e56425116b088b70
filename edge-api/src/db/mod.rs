//! The only code that touches D1. SQL lives here as constants or small builders, always with
//! bound parameters (`?1`), never with values spliced into the text.

pub mod checkout;
pub mod clients;
pub mod delivery_log;
pub mod merchants;
pub mod portal;
pub mod transactions;
pub mod webhooks;

#[cfg(test)]
mod plan_tests;

use serde::de::DeserializeOwned;
use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement};

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

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Value::Int(n)
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

/// A statement and its parameters, built without touching D1 (so its plan can be tested).
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// SQL with `?N` placeholders.
    pub sql: String,
    /// Values for `?1`, `?2`, ...
    pub params: Vec<Value>,
}

impl Query {
    /// Prepares the statement on `db` with its parameters bound.
    pub fn prepare(&self, db: &D1Database) -> worker::Result<D1PreparedStatement> {
        bind(db, &self.sql, &self.params)
    }

    /// Runs the statement and deserializes every row.
    pub async fn all<R: DeserializeOwned>(&self, db: &D1Database) -> worker::Result<Vec<R>> {
        self.prepare(db)?.all().await?.results()
    }
}

/// Prepares `sql` on `db` with `params` bound in order.
pub fn bind(db: &D1Database, sql: &str, params: &[Value]) -> worker::Result<D1PreparedStatement> {
    let values: Vec<JsValue> = params.iter().map(Value::to_js).collect();
    db.prepare(sql).bind(&values)
}

/// The first column of every row, as text.
pub async fn strings(db: &D1Database, sql: &str, params: &[Value]) -> worker::Result<Vec<String>> {
    let rows: Vec<Vec<String>> = bind(db, sql, params)?.raw().await?;
    Ok(rows
        .into_iter()
        .filter_map(|row| row.into_iter().next())
        .collect())
}

/// Rows a statement changed.
pub fn changes(result: &worker::D1Result) -> usize {
    result
        .meta()
        .ok()
        .flatten()
        .and_then(|m| m.changes)
        .unwrap_or(0)
}
