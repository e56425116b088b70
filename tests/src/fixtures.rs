//! What a worker's database holds before the worker starts: the demo data (institutions, their
//! admins, clients and merchants, the same on every machine) and test fixtures that can only be
//! written directly: extra API clients, one per test that changes a client, and an access token
//! and a portal session that are already expired. Written before `wrangler dev` starts, because
//! workerd does not wait on SQLite's lock: no test writes while the worker runs.

use rusqlite::Connection;
use xtask::demo::{self, CredentialsFile};

use crate::Worker;

/// Extra API clients created before the worker starts, one per test that changes a client, so
/// no test writes to the database while the worker runs: (name, institution id, scopes).
pub const FIXTURE_CLIENTS: &[(&str, i64, &str)] = &[
    ("bad-credentials", 2, "transactions:read"),
    ("throttle", 1, "transactions:read"),
    ("rotate", 2, "transactions:read merchants:read"),
];

/// An access token stored already expired, for the expiry test.
pub const EXPIRED_TOKEN: &str = "prt_expired-fixture-token-0000000000000000000000";

/// A portal session cookie stored already expired, for the session-expiry test.
pub const EXPIRED_PORTAL_SESSION: &str = "expired-portal-session-fixture-0000000000000";

/// A fixture client's credentials.
pub struct FixtureClient {
    /// Fixture name.
    pub name: &'static str,
    /// Public client id.
    pub client_id: String,
    /// Secret.
    pub client_secret: String,
}

/// Loads the demo data and the fixtures into a migrated database (the worker at `base_url` will
/// serve it); returns the demo credentials and the fixture clients. Closes the connection.
pub(crate) fn seed(mut conn: Connection, base_url: &str) -> (CredentialsFile, Vec<FixtureClient>) {
    let credentials = demo::seed(&mut conn, base_url).expect("seed demo data");
    let fixtures = add_fixtures(&conn);
    (credentials, fixtures)
}

fn add_fixtures(conn: &Connection) -> Vec<FixtureClient> {
    let fixtures: Vec<FixtureClient> = FIXTURE_CLIENTS
        .iter()
        .map(|(name, institution_id, scopes)| {
            let client = FixtureClient {
                name,
                client_id: format!("cli_test_{}", name.replace('-', "_")),
                client_secret: xtask::secrets::new_secret(),
            };
            conn.execute(
                "INSERT INTO api_clients (institution_id, client_id, name, secret_hash, scopes, \
                 created_at) VALUES (?1, ?2, ?3, ?4, ?5, '2026-11-01T00:00:00Z')",
                rusqlite::params![
                    institution_id,
                    client.client_id,
                    name,
                    xtask::secrets::secret_hash(&client.client_secret),
                    scopes
                ],
            )
            .expect("insert fixture client");
            client
        })
        .collect();
    conn.execute(
        "INSERT INTO access_tokens (token_hash, client_id, institution_id, scopes, issued_at, \
         expires_at) VALUES (?1, 1, 1, 'transactions:read merchants:read', 1000, 4600)",
        [xtask::secrets::secret_hash(EXPIRED_TOKEN)],
    )
    .expect("insert expired token");
    conn.execute(
        "INSERT INTO portal_sessions (token_hash, admin_id, institution_id, csrf_token, \
         created_at, expires_at, absolute_expires_at) VALUES (?1, 1, 1, 'csrf', 1000, 2000, 2000)",
        [xtask::secrets::secret_hash(EXPIRED_PORTAL_SESSION)],
    )
    .expect("insert expired portal session");
    fixtures
}

impl Worker {
    /// Credentials of the fixture client `name` (see [`FIXTURE_CLIENTS`]).
    pub fn fixture_client(&self, name: &str) -> (String, String) {
        let fixture = self
            .fixtures
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no fixture client {name}"));
        (fixture.client_id.clone(), fixture.client_secret.clone())
    }
}
