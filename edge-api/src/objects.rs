//! An institution's object: a SQLite-backed Durable Object (one per institution, named
//! `inst:<id>`) holding that institution's money tables, and the wire the worker's executor
//! ([`crate::sql::Db::Object`]) speaks to it. The worker keeps the logic; the object runs the
//! statements it is sent, as D1 runs them: each call's statements in one transaction
//! (`transactionSync`: an SQL error or a failed check inside it rolls every row back), in order,
//! each answering its rows and how many rows it changed.
//!
//! What the object checks itself, whatever it is sent:
//! - its schema: the migrations of `edge-api/objects/institution/`, applied in order before its
//!   first statement and recorded in `object_migrations` (objects have no `user_version`);
//! - its institution: the first call names it and `object_identity` keeps it; a call naming
//!   another is refused, and every money table that carries the institution refuses a row of
//!   another (triggers of the schema; idempotency keys and delivery attempts are reached through
//!   their merchant and delivery), so a statement naming another institution's rows finds
//!   nothing;
//! - its bounds: a call's body, its statements and each statement's text and values are
//!   bounded before they are read.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use wasm_bindgen::prelude::{wasm_bindgen, Closure};
use wasm_bindgen::{JsCast, JsValue};

use crate::sql::wire::{check, Call, Outcome, Reply, ANSWER_ROWS_MAX, CALL_BYTES_MAX, PATH};
use crate::sql::{Stmt, Value};

/// The binding the worker reaches institutions' objects through (`wrangler.toml`).
pub const BINDING: &str = "INSTITUTIONS";

/// The object's name for institution `id`.
pub fn name(institution: i64) -> String {
    format!("inst:{institution}")
}

/// The object's schema, in order: (name, SQL).
pub(crate) const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_money",
        include_str!("../objects/institution/0001_money.sql"),
    ),
    (
        "0002_books",
        include_str!("../objects/institution/0002_books.sql"),
    ),
    (
        "0003_sends",
        include_str!("../objects/institution/0003_sends.sql"),
    ),
    (
        "0004_refund_requests",
        include_str!("../objects/institution/0004_refund_requests.sql"),
    ),
    (
        "0005_screenings",
        include_str!("../objects/institution/0005_screenings.sql"),
    ),
    (
        "0006_screening_holds",
        include_str!("../objects/institution/0006_screening_holds.sql"),
    ),
    (
        "0007_topup_screening",
        include_str!("../objects/institution/0007_topup_screening.sql"),
    ),
    (
        "0008_move_pages",
        include_str!("../objects/institution/0008_move_pages.sql"),
    ),
];

/// The object's side: its storage, and whether this instance has checked its schema and
/// identity (once per instance; a new instance checks again).
pub struct Store {
    storage: worker::Storage,
    ready: Cell<Option<i64>>,
}

impl Store {
    /// The object's storage.
    pub fn new(storage: worker::Storage) -> Self {
        Store {
            storage,
            ready: Cell::new(None),
        }
    }

    /// Answers the worker's request: a call on the one path, its body bounded before it is
    /// read.
    pub async fn fetch(&self, mut req: worker::Request) -> worker::Result<worker::Response> {
        if req.method() != worker::Method::Post || req.path() != PATH {
            return worker::Response::error("not found", 404);
        }
        let reply = match crate::http::body(&mut req, CALL_BYTES_MAX).await {
            Ok(body) => self.answer(body.as_bytes()),
            Err(refused) => Reply::Failed(format!("too large: {}", refused.description)),
        };
        let text = reply
            .to_json()
            .or_else(|e| Reply::Failed(e).to_json())
            .map_err(worker::Error::RustError)?;
        crate::http::json_js(200, &text)
    }

    /// Answers a call's body: the call read and bounded, the schema migrated, the institution
    /// checked, then the statements run in one transaction.
    pub fn answer(&self, body: &[u8]) -> Reply {
        if body.len() > CALL_BYTES_MAX {
            return Reply::Failed(format!(
                "too large: a call of {} bytes; at most {CALL_BYTES_MAX}",
                body.len()
            ));
        }
        let call: Call = match serde_json::from_slice(body) {
            Ok(call) => call,
            Err(e) => return Reply::Failed(format!("a call that does not read: {e}")),
        };
        if let Err(e) = check(&call) {
            return Reply::Failed(format!("too large: {e}"));
        }
        if let Err(e) = self.ready_for(call.institution) {
            return Reply::Failed(e);
        }
        let sql = self.storage.sql();
        match transaction_sync(&self.storage, move || run_all(&sql, &call.statements)) {
            Ok(outcomes) => Reply::Done(outcomes),
            Err(e) => Reply::Failed(e),
        }
    }

    /// Migrates the schema (once per instance) and checks that the object holds `institution`,
    /// recording it if the object is new.
    fn ready_for(&self, institution: i64) -> Result<(), String> {
        if let Some(held) = self.ready.get() {
            return same_institution(held, institution);
        }
        let sql = self.storage.sql();
        let now = (js_sys::Date::now() / 1000.0).floor() as i64;
        let held = transaction_sync(&self.storage, move || {
            migrate(&sql, now)?;
            identity(&sql, institution, now)
        })?;
        self.ready.set(Some(held));
        same_institution(held, institution)
    }
}

/// Refuses a call for another institution than the object's.
fn same_institution(held: i64, asked: i64) -> Result<(), String> {
    if held == asked {
        Ok(())
    } else {
        Err(format!(
            "this object holds institution {held}, not institution {asked}"
        ))
    }
}

/// Applies the migrations not yet recorded, in order.
fn migrate(sql: &worker::SqlStorage, now: i64) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    struct Applied {
        name: String,
    }
    run(
        sql,
        "CREATE TABLE IF NOT EXISTS object_migrations \
         (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)",
        &[],
    )?;
    let applied: Vec<Applied> = query(sql, "SELECT name FROM object_migrations", &[])?;
    for (name, text) in MIGRATIONS {
        if applied.iter().any(|a| a.name == *name) {
            continue;
        }
        for statement in statements_of(text) {
            run(sql, statement, &[]).map_err(|e| format!("migration {name}: {e}"))?;
        }
        run(
            sql,
            "INSERT INTO object_migrations (name, applied_at) VALUES (?1, ?2)",
            &[Value::from(*name), Value::Int(now)],
        )?;
    }
    Ok(())
}

/// The institution the object holds, recorded as `institution` when it holds none yet.
fn identity(sql: &worker::SqlStorage, institution: i64, now: i64) -> Result<i64, String> {
    #[derive(serde::Deserialize)]
    struct Held {
        institution_id: i64,
    }
    run(
        sql,
        "INSERT INTO object_identity (only_row, institution_id, created_at) VALUES (1, ?1, ?2) \
         ON CONFLICT (only_row) DO NOTHING",
        &[Value::Int(institution), Value::Int(now)],
    )?;
    let held: Vec<Held> = query(
        sql,
        "SELECT institution_id FROM object_identity WHERE only_row = 1",
        &[],
    )?;
    held.first()
        .map(|h| h.institution_id)
        .ok_or_else(|| "the object's identity does not read back".to_owned())
}

/// A migration's statements: split after each `;` that ends a line outside a trigger's body
/// (`BEGIN … END;`), comments dropped.
pub fn statements_of(text: &str) -> Vec<&str> {
    let mut statements = Vec::new();
    let mut start = 0;
    let mut in_body = false;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let code = line.split("--").next().unwrap_or("").trim();
        let upper = code.to_ascii_uppercase();
        if upper.ends_with("BEGIN") || upper.contains(" BEGIN ") {
            in_body = true;
        }
        offset += line.len();
        if code.ends_with(';') && (!in_body || upper.ends_with("END;")) {
            in_body = false;
            let statement = text[start..offset].trim();
            if !statement.is_empty() {
                statements.push(statement);
            }
            start = offset;
        }
    }
    statements
}

/// Runs each statement in order; the first failure stops (and, inside a transaction, rolls
/// back) everything.
/// An answer past [`ANSWER_ROWS_MAX`] rows is refused inside the transaction, so nothing it
/// wrote stays.
fn run_all(sql: &worker::SqlStorage, statements: &[Stmt]) -> Result<Vec<Outcome>, String> {
    let outcomes = statements
        .iter()
        .map(|statement| exec(sql, statement.sql(), statement.params()))
        .collect::<Result<Vec<_>, _>>()?;
    let rows: usize = outcomes.iter().map(|o| o.rows.length() as usize).sum();
    if rows > ANSWER_ROWS_MAX {
        return Err(format!(
            "too large: an answer of {rows} rows; at most {ANSWER_ROWS_MAX}"
        ));
    }
    Ok(outcomes)
}

/// A row kept as the JavaScript object the cursor made (never read into wasm memory).
#[derive(serde::Deserialize)]
struct RawRow(#[serde(with = "serde_wasm_bindgen::preserve")] JsValue);

/// Runs one statement: its rows as the cursor made them, and the rows it changed counted as D1
/// counts them (SQLite's `changes()`, asked only of a statement that wrote: after one that did
/// not, it would answer for an earlier statement).
fn exec(sql: &worker::SqlStorage, text: &str, params: &[Value]) -> Result<Outcome, String> {
    let values: Vec<JsValue> = params.iter().map(Value::to_js).collect();
    let cursor = sql.exec_raw(text, values).map_err(|e| e.to_string())?;
    let raw: Vec<RawRow> = cursor.to_array().map_err(|e| e.to_string())?;
    let rows = js_sys::Array::new();
    for row in raw {
        rows.push(&row.0);
    }
    let rows_read = cursor.rows_read() as u64;
    let rows_written = cursor.rows_written() as u64;
    let changes = if rows_written == 0 {
        0
    } else {
        count(sql, "SELECT changes() AS n")?
    };
    Ok(Outcome {
        rows,
        changes,
        rows_read,
        rows_written,
    })
}

/// Runs a statement whose rows are not read.
fn run(sql: &worker::SqlStorage, text: &str, params: &[Value]) -> Result<(), String> {
    let values: Vec<JsValue> = params.iter().map(Value::to_js).collect();
    let cursor = sql.exec_raw(text, values).map_err(|e| e.to_string())?;
    // Stepped to its end: a statement runs as its cursor is read.
    cursor
        .to_array::<RawRow>()
        .map(drop)
        .map_err(|e| e.to_string())
}

/// A statement's rows, read as `R` (through `to_array`: `one` cannot answer zero rows).
fn query<R: serde::de::DeserializeOwned>(
    sql: &worker::SqlStorage,
    text: &str,
    params: &[Value],
) -> Result<Vec<R>, String> {
    let values: Vec<JsValue> = params.iter().map(Value::to_js).collect();
    sql.exec_raw(text, values)
        .and_then(|cursor| cursor.to_array())
        .map_err(|e| e.to_string())
}

/// A statement's one count, `n`.
fn count(sql: &worker::SqlStorage, text: &str) -> Result<u64, String> {
    #[derive(serde::Deserialize)]
    struct Count {
        n: i64,
    }
    let counted: Vec<Count> = query(sql, text, &[])?;
    counted
        .first()
        .map(|c| c.n.max(0) as u64)
        .ok_or_else(|| format!("{text} did not answer a count"))
}

#[wasm_bindgen]
extern "C" {
    /// The platform's storage object, for the one method workers-rs does not bind.
    type SyncStorage;

    /// `storage.transactionSync(fn)`: runs `fn` in a transaction, committed when it returns
    /// and rolled back when it throws.
    #[wasm_bindgen(method, catch, js_name = transactionSync)]
    fn transaction_sync(this: &SyncStorage, body: &js_sys::Function) -> Result<JsValue, JsValue>;
}

/// Runs `body` in one transaction of the object's storage: committed when it returns `Ok`,
/// every row rolled back when it returns `Err` or SQLite refuses a statement.
pub fn transaction_sync<T: 'static>(
    storage: &worker::Storage,
    body: impl FnOnce() -> Result<T, String> + 'static,
) -> Result<T, String> {
    let result: Rc<RefCell<Option<Result<T, String>>>> = Rc::default();
    let slot = result.clone();
    let closure = Closure::once(move || -> Result<JsValue, JsValue> {
        let outcome = body();
        let failed = outcome.as_ref().err().map(|e| JsValue::from_str(e));
        *slot.borrow_mut() = Some(outcome);
        match failed {
            // Thrown, so the platform rolls the transaction back.
            Some(error) => Err(error),
            None => Ok(JsValue::UNDEFINED),
        }
    });
    let raw: &SyncStorage = storage.as_raw().unchecked_ref();
    let thrown = raw.transaction_sync(closure.as_ref().unchecked_ref()).err();
    drop(closure);
    let outcome = result.borrow_mut().take();
    match (outcome, thrown) {
        (Some(Ok(value)), None) => Ok(value),
        (Some(Err(e)), _) => Err(e),
        (_, Some(thrown)) => Err(thrown
            .as_string()
            .or_else(|| {
                thrown
                    .dyn_ref::<js_sys::Error>()
                    .map(|e| String::from(e.message()))
            })
            .unwrap_or_else(|| "the transaction failed".to_owned())),
        (None, None) => Err("the transaction did not run".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::{statements_of, MIGRATIONS};
    use crate::sql::wire::{check, Call, CALL_STATEMENTS_MAX};
    use crate::sql::{stmt, Value};

    /// The migrations split into statements that SQLite runs one by one to the same schema as
    /// each whole file at once, in order (triggers' bodies kept whole).
    #[test]
    fn migrations_split_into_whole_statements() {
        let whole = rusqlite::Connection::open_in_memory().unwrap();
        let split = rusqlite::Connection::open_in_memory().unwrap();
        let schema = |c: &rusqlite::Connection| -> Vec<String> {
            let mut s = c
                .prepare("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name")
                .unwrap();
            s.query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let mut triggers = 0;
        for (name, text) in MIGRATIONS {
            whole.execute_batch(text).unwrap();
            let statements = statements_of(text);
            for statement in &statements {
                let mut prepared = split
                    .prepare(statement)
                    .unwrap_or_else(|e| panic!("{name}: {e}: {statement}"));
                prepared.raw_execute().unwrap();
            }
            assert_eq!(schema(&whole), schema(&split), "{name}");
            // Each trigger is one statement, its body whole.
            let in_file = text.matches("CREATE TRIGGER").count();
            assert_eq!(
                statements
                    .iter()
                    .filter(|s| s.starts_with("CREATE TRIGGER"))
                    .count(),
                in_file,
                "{name}"
            );
            triggers += in_file;
        }
        assert!(triggers > 10, "the identity triggers are there");
    }

    /// A call travels as JSON and back unchanged; values keep their kind.
    #[test]
    fn a_call_crosses_as_json() {
        let call = Call {
            institution: 7,
            statements: vec![stmt(
                "SELECT ?1, ?2, ?3",
                &[
                    Value::Null,
                    Value::Int(9_007_199_254_740_991),
                    Value::from("x"),
                ],
            )
            .unwrap()],
        };
        let text = serde_json::to_string(&call).unwrap();
        let back: Call = serde_json::from_str(&text).unwrap();
        assert_eq!(back.statements, call.statements);
        assert_eq!(back.institution, 7);
    }

    /// A call past its bounds is refused, naming the bound.
    #[test]
    fn a_call_is_bounded() {
        let one = stmt("SELECT 1", &[]).unwrap();
        let call = Call {
            institution: 1,
            statements: vec![one; CALL_STATEMENTS_MAX + 1],
        };
        assert!(check(&call).unwrap_err().contains("201 statements"));
        let long = stmt(&format!("SELECT '{}'", "a".repeat(100 * 1024)), &[]).unwrap();
        let call = Call {
            institution: 1,
            statements: vec![long],
        };
        assert!(check(&call).unwrap_err().contains("bytes"));
    }
}
