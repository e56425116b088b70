//! Credential commands for operators: rotate a client secret, add a portal admin, on the
//! production D1 through `wrangler d1 execute --remote`, or on the local D1's file. Formats, hashes, Argon2id parameters and
//! statements all come from `payrail-credentials`, as the worker's do, so the two cannot drift;
//! this module adds only the OS's randomness and the running of SQL.

use payrail_credentials::sql::{self, Literal};

/// `N` random bytes from the OS.
fn os_random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::getrandom(&mut bytes).expect("the OS random source is available");
    bytes
}

/// A new client secret (`sk_live_` and 32 random bytes from the OS, base64url).
pub fn new_secret() -> String {
    payrail_credentials::client_secret(&os_random())
}

/// The stored form of a secret or token: lower-case hex SHA-256, as the worker computes it.
pub fn secret_hash(secret: &str) -> String {
    payrail_credentials::sha256_hex(secret)
}

/// An Argon2id PHC string with the worker's parameters and a fresh salt from the OS.
pub fn password_hash(password: &str) -> String {
    payrail_credentials::hash_password(password, &os_random())
}

/// The treasury's signing key (64 hex digits) sealed under the deployment's encryption key
/// (`PAYRAIL_ENCRYPTION_KEY`, base64): the value of the `PAYRAIL_TREASURY_KEY` secret.
pub fn seal_treasury_key(encryption_key: &str, key_hex: &str) -> Result<String, String> {
    use base64::Engine;
    let key: [u8; 32] = base64::engine::general_purpose::STANDARD
        .decode(encryption_key.trim())
        .ok()
        .and_then(|k| k.try_into().ok())
        .ok_or("PAYRAIL_ENCRYPTION_KEY is not 32 bytes of base64")?;
    let hex_key = key_hex.trim().trim_start_matches("0x");
    if hex_key.len() != 64 || !hex_key.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("the treasury key must be 64 hex digits".to_owned());
    }
    payrail_credentials::sealed::seal(
        &key,
        os_random(),
        payrail_credentials::sealed::TREASURY_KEY_CONTEXT,
        &hex_key.to_ascii_lowercase(),
    )
}

/// Whether the rotation found the client: its stored hash is now the new secret's.
const ROTATED_CLIENTS: &str =
    "SELECT count(*) AS found FROM api_clients WHERE client_id = ?1 AND secret_hash = ?2";

/// Whether the admin was added: the e-mail now has the new password's hash (a salted hash, so
/// no other row can have it).
const ADDED_ADMINS: &str =
    "SELECT count(*) AS found FROM portal_admins WHERE email = ?1 AND password_hash = ?2";

/// Which D1 database a command changes.
pub enum Target {
    /// The local database under this wrangler persist directory.
    Local(std::path::PathBuf),
    /// The production database (wrangler's `--remote`).
    Remote,
}

/// Replaces a client's secret and revokes every token issued under the old one, in one batch of
/// statements (the same command serves the local and the production database).
/// Returns the new secret, which is stored nowhere.
pub fn rotate(client_id: &str, target: &Target) -> Result<String, String> {
    if client_id.is_empty()
        || !client_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(format!("{client_id:?} is not a client id"));
    }
    let secret = new_secret();
    let hash = secret_hash(&secret);
    let now = now_text()?;
    let client = Literal::Text(client_id);
    // NULL institution: an operator names the client alone, whichever institution has it.
    let batch = render_batch(&[
        (
            sql::ROTATE_CLIENT_SECRET,
            &[
                Literal::Text(&hash),
                Literal::Text(&now),
                client,
                Literal::Null,
            ],
        ),
        (sql::REVOKE_CLIENT_TOKENS, &[client, Literal::Null]),
        (ROTATED_CLIENTS, &[client, Literal::Text(&hash)]),
    ])?;
    let stdout = execute(&batch, target)?;
    match found(&stdout) {
        Some(1) => Ok(secret),
        Some(_) => Err(format!("no client {client_id:?}; nothing changed")),
        None => Err(format!("unexpected output from wrangler:\n{stdout}")),
    }
}

/// The current time as the canonical timestamp text the worker stores.
fn now_text() -> Result<String, String> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| format!("the clock is before 1970: {e}"))?
        .as_secs();
    i64::try_from(secs)
        .ok()
        .and_then(shared_types::time::format_unix)
        .ok_or_else(|| "the clock is out of range".to_owned())
}

/// The statements with their values written in, as one `;`-separated batch.
pub(crate) fn render_batch(statements: &[(&str, &[Literal<'_>])]) -> Result<String, String> {
    let mut batch = String::new();
    for (statement, values) in statements {
        let rendered = sql::render(statement, values).map_err(|e| format!("{e}: {statement}"))?;
        batch.push_str(&rendered);
        batch.push_str(";\n");
    }
    Ok(batch)
}

/// The `found` count of the first statement in wrangler's JSON output that returned one.
fn found(stdout: &str) -> Option<i64> {
    serde_json::from_str::<serde_json::Value>(stdout)
        .ok()?
        .as_array()?
        .iter()
        .find_map(|r| r["results"].as_array()?.first()?["found"].as_i64())
}

/// Runs SQL on the target database, the production one through `wrangler d1 execute --remote
/// --json`; returns wrangler's output, or the same shape from the local file.
pub(crate) fn execute(sql: &str, target: &Target) -> Result<String, String> {
    let mut command = std::process::Command::new("wrangler");
    command.args(["d1", "execute", "DB", "--json", "--command", sql]);
    match target {
        Target::Local(persist_to) => return execute_local(sql, persist_to),
        Target::Remote => {
            command.arg("--remote");
        }
    }
    let output = command.output().map_err(|e| {
        format!("could not run wrangler (run scripts/setup, then source scripts/env.sh): {e}")
    })?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        return Err(format!(
            "wrangler d1 execute failed:\n{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(stdout)
}

/// Runs `sql` on the local D1 file under `persist_to` as one transaction, answering as
/// `wrangler d1 execute --json` does: each statement's rows, in order. The file is opened
/// directly (as `reconcile --local` reads it), not through a wrangler process of its own, which
/// would cost seconds of start-up for each command.
fn execute_local(sql: &str, persist_to: &std::path::Path) -> Result<String, String> {
    use rusqlite::types::ValueRef;
    use serde_json::{Map, Value};

    let failed = |e: rusqlite::Error| format!("the local D1 refused a statement: {e}");
    let file = crate::localdb::database_file(persist_to)?;
    let mut conn =
        rusqlite::Connection::open(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(failed)?;
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(failed)?;
    let mut answers = Vec::new();
    {
        let mut batch = rusqlite::Batch::new(&tx, sql);
        while let Some(mut statement) = batch.next().map_err(failed)? {
            let names: Vec<String> = statement
                .column_names()
                .into_iter()
                .map(str::to_owned)
                .collect();
            let mut rows = statement.raw_query();
            let mut results = Vec::new();
            while let Some(row) = rows.next().map_err(failed)? {
                let mut object = Map::new();
                for (i, name) in names.iter().enumerate() {
                    let value = match row.get_ref(i).map_err(failed)? {
                        ValueRef::Null => Value::Null,
                        ValueRef::Integer(n) => Value::from(n),
                        ValueRef::Real(x) => Value::from(x),
                        ValueRef::Text(t) => Value::from(String::from_utf8_lossy(t).into_owned()),
                        ValueRef::Blob(_) => return Err("a statement answered a blob".to_owned()),
                    };
                    object.insert(name.clone(), value);
                }
                results.push(Value::Object(object));
            }
            answers.push(serde_json::json!({ "results": results, "success": true }));
        }
    }
    tx.commit().map_err(failed)?;
    Ok(Value::Array(answers).to_string())
}

/// Sets an institution's PSP fee (basis points of each payment's gross, 0 to 5000) for the
/// settlements that start from now on.
pub fn set_psp_fee(institution_id: i64, basis_points: i64, target: &Target) -> Result<(), String> {
    if !(0..=5000).contains(&basis_points) {
        return Err("the fee must be 0 to 5000 basis points (0 % to 50 %)".to_owned());
    }
    let batch = render_batch(&[
        (
            "UPDATE institutions SET psp_fee_bps = ?2 WHERE id = ?1",
            &[
                Literal::Integer(institution_id),
                Literal::Integer(basis_points),
            ],
        ),
        (
            "SELECT count(*) AS found FROM institutions WHERE id = ?1 AND psp_fee_bps = ?2",
            &[
                Literal::Integer(institution_id),
                Literal::Integer(basis_points),
            ],
        ),
    ])?;
    let stdout = execute(&batch, target)?;
    match found(&stdout) {
        Some(1) => Ok(()),
        Some(_) => Err(format!("no institution {institution_id}; nothing changed")),
        None => Err(format!("unexpected output from wrangler:\n{stdout}")),
    }
}

/// Adds a portal admin to institution `institution_id` with a new random password, which is
/// returned (and stored nowhere but as its Argon2id hash).
pub fn add_admin(institution_id: i64, email: &str, target: &Target) -> Result<String, String> {
    let email = email.trim().to_ascii_lowercase();
    let valid = email.len() <= 254
        && email.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty() && domain.contains('.') && !domain.starts_with('.')
        })
        && email
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@._+-".contains(&b));
    if !valid {
        return Err(format!(
            "{email:?} is not an e-mail address this command accepts"
        ));
    }
    // 32 random bytes, base64url: the shape of a client secret without its prefix.
    let password = payrail_credentials::prefixed_token("", &os_random());
    let hash = password_hash(&password);
    let now = now_text()?;
    let batch = render_batch(&[
        (
            sql::INSERT_PORTAL_ADMIN,
            &[
                Literal::Integer(institution_id),
                Literal::Text(&email),
                Literal::Text(&email),
                Literal::Text(&hash),
                Literal::Text(&now),
            ],
        ),
        (ADDED_ADMINS, &[Literal::Text(&email), Literal::Text(&hash)]),
    ])?;
    let stdout = execute(&batch, target).map_err(|e| {
        if e.contains("UNIQUE constraint failed") {
            format!("an admin with e-mail {email} already exists")
        } else {
            e
        }
    })?;
    match found(&stdout) {
        Some(1) => Ok(password),
        Some(_) => Err(format!("no institution {institution_id}; nothing added")),
        None => Err(format!("unexpected output from wrangler:\n{stdout}")),
    }
}

/// A new institution: its money held in its own object from the start (docs/SCALING.md: new
/// institutions start in objects; the ones from before move with `xtask move`), unless its id
/// reaches 2^21 (its payments' ids, from the id times 2^32, must stay below 2^53), where it
/// stays in D1.
const ADD_INSTITUTION: &str = "INSERT INTO institutions (name, created_at, store) \
     VALUES (?1, ?2, CASE WHEN (SELECT coalesce(max(id), 0) FROM institutions) < 2097151 \
     THEN 'object' ELSE 'd1' END) RETURNING id AS found";

/// Creates an institution (its money in its own object from the start) and its first portal
/// admin (with a random password, which is returned and stored nowhere but as its Argon2id
/// hash); returns the new institution's id and the password.
pub fn add_institution(name: &str, email: &str, target: &Target) -> Result<(i64, String), String> {
    let name = name.trim();
    let valid = (1..=100).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b" .,-".contains(&b));
    if !valid {
        return Err(format!(
            "{name:?} is not a name this command accepts (1 to 100 letters, digits, spaces, \
             dots, commas, hyphens)"
        ));
    }
    let now = now_text()?;
    let batch = render_batch(&[(ADD_INSTITUTION, &[Literal::Text(name), Literal::Text(&now)])])?;
    let id = found(&execute(&batch, target)?)
        .ok_or_else(|| "unexpected output from wrangler: no institution id".to_owned())?;
    let password = add_admin(id, email, target)?;
    Ok((id, password))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new institution starts held in its own object; one whose payments' ids would pass
    /// 2^53 stays in D1.
    #[test]
    fn a_new_institution_starts_in_its_object() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::localdb::apply_migrations(&conn).unwrap();
        let add = |name: &str| -> (i64, String) {
            let id: i64 = conn
                .query_row(ADD_INSTITUTION, [name, "2026-11-27T00:00:00Z"], |r| {
                    r.get(0)
                })
                .unwrap();
            let store = conn
                .query_row("SELECT store FROM institutions WHERE id = ?1", [id], |r| {
                    r.get(0)
                })
                .unwrap();
            (id, store)
        };
        assert_eq!(add("First PSP").1, "object");
        conn.execute(
            "INSERT INTO institutions (id, name, created_at) VALUES (2097151, 'Last', '')",
            [],
        )
        .unwrap();
        let (id, store) = add("Past the bound");
        assert_eq!((id, store.as_str()), (2_097_152, "d1"));
    }

    #[test]
    fn a_batch_is_the_shared_statements_with_literals() {
        let batch = render_batch(&[
            (
                sql::REVOKE_CLIENT_TOKENS,
                &[Literal::Text("cli_a"), Literal::Null],
            ),
            (
                ROTATED_CLIENTS,
                &[Literal::Text("cli_a"), Literal::Text("ab")],
            ),
        ])
        .unwrap();
        assert_eq!(
            batch,
            "DELETE FROM access_tokens WHERE client_id IN (SELECT id FROM api_clients WHERE \
             client_id = 'cli_a' AND (NULL IS NULL OR institution_id = NULL));\n\
             SELECT count(*) AS found FROM api_clients WHERE client_id = 'cli_a' AND \
             secret_hash = 'ab';\n"
        );
        let refused = render_batch(&[(ROTATED_CLIENTS, &[Literal::Text("a'--"), Literal::Null])]);
        assert!(refused.unwrap_err().contains("?1"));
    }

    #[test]
    fn reads_the_count_from_wrangler_json() {
        let stdout = r#"[{"results": [], "success": true, "meta": {}},
                        {"results": [{"found": 1}], "success": true, "meta": {}}]"#;
        assert_eq!(found(stdout), Some(1));
        assert_eq!(found(r#"[{"results": []}]"#), None);
        assert_eq!(found("not json"), None);
    }

    #[test]
    fn now_is_canonical_timestamp_text() {
        let now = now_text().unwrap();
        assert_eq!(now.len(), "2026-11-21T04:35:27Z".len());
        assert!(shared_types::time::parse_unix(&now).is_some());
    }

    #[test]
    fn bad_input_is_refused_before_wrangler_runs() {
        let target = Target::Local("/nonexistent".into());
        assert!(rotate("cli_a'; DROP TABLE x", &target)
            .unwrap_err()
            .contains("not a client id"));
        assert!(add_admin(1, "a'b@x.example", &target)
            .unwrap_err()
            .contains("not an e-mail"));
    }

    #[test]
    fn a_local_batch_answers_as_wrangler_does_and_is_one_transaction() {
        let persist_to = std::env::temp_dir().join(format!("xtask-local-{}", std::process::id()));
        let dir = persist_to.join("v3/d1/miniflare-D1DatabaseObject");
        std::fs::create_dir_all(&dir).unwrap();
        let conn = rusqlite::Connection::open(dir.join("db.sqlite")).unwrap();
        conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, r REAL)")
            .unwrap();
        let target = Target::Local(persist_to.clone());
        let answer = execute(
            "INSERT INTO t (name, r) VALUES ('a', 1.5);\nINSERT INTO t (name) VALUES ('b');\n\
             SELECT id, name, r FROM t ORDER BY id",
            &target,
        )
        .unwrap();
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer.as_array().unwrap().len(), 3);
        assert_eq!(
            answer[2]["results"],
            serde_json::json!([{"id": 1, "name": "a", "r": 1.5}, {"id": 2, "name": "b", "r": null}])
        );
        // A statement that fails undoes the ones before it.
        let refused = execute(
            "INSERT INTO t (name) VALUES ('c');\nINSERT INTO missing VALUES (1)",
            &target,
        );
        assert!(refused.unwrap_err().contains("missing"));
        let count: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, 2);
        std::fs::remove_dir_all(&persist_to).unwrap();
    }
}
