//! The shared statements against the worker's real migrations in SQLite, both bound (as the
//! worker runs them) and rendered with literals (as xtask runs them), so a schema change that
//! breaks them fails here.

use payrail_credentials::sql::{
    render, Literal, INSERT_PORTAL_ADMIN, REVOKE_CLIENT_TOKENS, ROTATE_CLIENT_SECRET,
};
use payrail_credentials::{client_secret, hash_password, sha256_hex, verify_password};
use rusqlite::{params, Connection};

const NOW: &str = "2026-11-21T04:35:27Z";

/// Two institutions, one client each, two tokens per client.
fn database() -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    // The worker's real schema, every migration in file-name order as wrangler applies them.
    xtask::localdb::apply_migrations(&conn).unwrap();
    for (id, client) in [(1, "cli_acme"), (2, "cli_globex")] {
        conn.execute(
            "INSERT INTO institutions (id, name, created_at) VALUES (?1, ?1, ?2)",
            params![id, NOW],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO api_clients (id, institution_id, client_id, name, secret_hash, scopes, \
             created_at) VALUES (?1, ?1, ?2, ?2, 'old', 'transactions:read', ?3)",
            params![id, client, NOW],
        )
        .unwrap();
        for token in ["a", "b"] {
            conn.execute(
                "INSERT INTO access_tokens (token_hash, client_id, institution_id, scopes, \
                 issued_at, expires_at) VALUES (?1, ?2, ?2, 'transactions:read', 0, 3600)",
                params![format!("{client}-{token}"), id],
            )
            .unwrap();
        }
    }
    conn
}

fn client(conn: &Connection, client_id: &str) -> (String, Option<String>, i64) {
    conn.query_row(
        "SELECT secret_hash, secret_rotated_at, (SELECT count(*) FROM access_tokens t \
         WHERE t.client_id = c.id) FROM api_clients c WHERE client_id = ?1",
        [client_id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .unwrap()
}

#[test]
fn bound_rotation_is_scoped_to_the_institution() {
    let conn = database();
    let hash = sha256_hex(&client_secret(&[9; 32]));
    // Another institution's client: nothing changes.
    let changed = conn
        .execute(ROTATE_CLIENT_SECRET, params![hash, NOW, "cli_acme", 2])
        .unwrap();
    conn.execute(REVOKE_CLIENT_TOKENS, params!["cli_acme", 2])
        .unwrap();
    assert_eq!(changed, 0);
    assert_eq!(client(&conn, "cli_acme"), ("old".into(), None, 2));

    let changed = conn
        .execute(ROTATE_CLIENT_SECRET, params![hash, NOW, "cli_acme", 1])
        .unwrap();
    conn.execute(REVOKE_CLIENT_TOKENS, params!["cli_acme", 1])
        .unwrap();
    assert_eq!(changed, 1);
    assert_eq!(client(&conn, "cli_acme"), (hash, Some(NOW.into()), 0));
    assert_eq!(client(&conn, "cli_globex"), ("old".into(), None, 2));
}

#[test]
fn rendered_rotation_does_what_the_bound_one_does() {
    let conn = database();
    let hash = sha256_hex(&client_secret(&[9; 32]));
    let batch = [
        render(
            ROTATE_CLIENT_SECRET,
            &[
                Literal::Text(&hash),
                Literal::Text(NOW),
                Literal::Text("cli_globex"),
                Literal::Null,
            ],
        )
        .unwrap(),
        render(
            REVOKE_CLIENT_TOKENS,
            &[Literal::Text("cli_globex"), Literal::Null],
        )
        .unwrap(),
    ]
    .join(";\n");
    conn.execute_batch(&batch).unwrap();
    assert_eq!(client(&conn, "cli_globex"), (hash, Some(NOW.into()), 0));
    assert_eq!(client(&conn, "cli_acme"), ("old".into(), None, 2));
}

#[test]
fn an_admin_is_added_only_to_an_existing_institution() {
    let conn = database();
    let phc = hash_password("correct horse", &[3; 16]);
    let add = |institution: i64, email: &str| {
        let sql = render(
            INSERT_PORTAL_ADMIN,
            &[
                Literal::Integer(institution),
                Literal::Text(email),
                Literal::Text(email),
                Literal::Text(&phc),
                Literal::Text(NOW),
            ],
        )
        .unwrap();
        conn.execute(&sql, [])
    };
    assert_eq!(add(2, "ops@globex.example").unwrap(), 1);
    assert_eq!(add(99, "x@globex.example").unwrap(), 0);
    let taken = add(1, "ops@globex.example").unwrap_err().to_string();
    assert!(taken.contains("UNIQUE constraint failed"), "{taken}");

    let stored: String = conn
        .query_row(
            "SELECT password_hash FROM portal_admins WHERE email = 'ops@globex.example' \
             AND institution_id = 2",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(verify_password("correct horse", &stored));
}
