//! Black-box test harness: starts the built worker under `wrangler dev` (workerd, local D1) on a
//! free port with its own fresh database, and talks to it over real HTTP. Every JSON response
//! is checked against `edge-api/openapi.json` on the way.
//!
//! Run through `scripts/test`, which installs the tools, builds the worker once and puts Node 22
//! and wrangler first on PATH.

pub mod browser;
pub mod hooks;
pub mod openapi;
pub mod receiver;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use rusqlite::Connection;
use serde_json::Value;
use xtask::demo::{self, CredentialsFile};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// A running worker with its own database.
pub struct Worker {
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    /// The demo credentials loaded into its database.
    pub credentials: CredentialsFile,
    fixtures: Vec<FixtureClient>,
    persist_to: PathBuf,
    http: Client,
    // Dropping the pipe (when the test process exits) makes the watchdog stop wrangler.
    _watchdog: Mutex<(Child, ChildStdin)>,
}

/// A response, its body read.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Headers, lower-case names.
    pub headers: HashMap<String, String>,
    /// Body as text.
    pub text: String,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text))
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// Asserts the status and the spec's error body with this code; returns the description.
    pub fn assert_error(&self, status: u16, code: &str) -> String {
        assert_eq!(self.status, status, "status of {}", self.text);
        let body = self.json();
        assert_eq!(body["error"], code, "{body}");
        assert_eq!(body.as_object().map(|o| o.len()), Some(2), "{body}");
        body["error_description"]
            .as_str()
            .expect("a description")
            .to_owned()
    }
}

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Worker {
    /// The worker shared by every test of this test binary, started on first use.
    pub fn shared() -> &'static Worker {
        static WORKER: OnceLock<Worker> = OnceLock::new();
        WORKER.get_or_init(Worker::start)
    }

    /// Starts a new worker in sandbox mode (the local default).
    pub fn start() -> Worker {
        Worker::start_in("sandbox")
    }

    /// Starts a new worker with `PAYRAIL_MODE` = `mode`, the webhook schedule compressed 3600
    /// times (a minute becomes a second at least, twelve hours twelve seconds).
    pub fn start_in(mode: &str) -> Worker {
        Worker::start_with(mode, 3600)
    }

    /// Starts a new worker with `PAYRAIL_MODE` = `mode` and `PAYRAIL_WEBHOOK_TIME_SCALE` =
    /// `time_scale`: migrations, demo data, `wrangler dev`.
    pub fn start_with(mode: &str, time_scale: u64) -> Worker {
        let root = root();
        let port = free_port();
        let base_url = format!("http://127.0.0.1:{port}");
        let persist_to = root
            .join("target/payrail-tests")
            .join(format!("{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&persist_to);
        std::fs::create_dir_all(&persist_to).expect("create persist dir");

        let status = Command::new("wrangler")
            .args(["d1", "migrations", "apply", "DB", "--local", "--persist-to"])
            .arg(&persist_to)
            .current_dir(&root)
            .env("CI", "true")
            .stdout(Stdio::null())
            .status()
            .expect("run wrangler (is scripts/env.sh sourced? use scripts/test)");
        assert!(status.success(), "migrations failed");
        let mut conn =
            Connection::open(xtask::localdb::database_file(&persist_to).expect("local database"))
                .expect("open local database");
        let credentials = demo::seed(&mut conn, &base_url).expect("seed demo data");
        let fixtures = add_fixtures(&conn);
        drop(conn);

        let log = persist_to.join("wrangler.log");
        let key = std::env::var("PAYRAIL_DEV_ENCRYPTION_KEY").expect(
            "PAYRAIL_DEV_ENCRYPTION_KEY is set by scripts/env.sh (run through scripts/test)",
        );
        let script = format!(
            "PAYRAIL_SKIP_BUILD=1 wrangler dev --ip 127.0.0.1 --port {port} --inspector-port {} \
             --persist-to '{}' --var PAYRAIL_MODE:{mode} --var PAYRAIL_ENCRYPTION_KEY:{key} \
             --var PAYRAIL_WEBHOOK_TIME_SCALE:{time_scale} --test-scheduled \
             --show-interactive-dev-session=false >'{}' 2>&1 & w=$!; cat >/dev/null; kill $w; \
             wait $w",
            free_port(),
            persist_to.display(),
            log.display()
        );
        let mut child = Command::new("bash")
            .args(["-c", &script])
            .current_dir(&root)
            .stdin(Stdio::piped())
            .spawn()
            .expect("start wrangler dev");
        let stdin = child.stdin.take().expect("piped stdin");

        let http = Client::builder()
            .timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("http client");
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if http.get(format!("{base_url}/openapi.json")).send().is_ok() {
                break;
            }
            if let Ok(Some(exit)) = child.try_wait() {
                panic!("wrangler dev exited ({exit}):\n{}", read_log(&log));
            }
            assert!(
                Instant::now() < deadline,
                "wrangler dev not ready in 90 s:\n{}",
                read_log(&log)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Worker {
            base_url,
            credentials,
            fixtures,
            persist_to,
            http,
            _watchdog: Mutex::new((child, stdin)),
        }
    }

    /// Opens the worker's local D1 database directly, to check what the worker stored. Never
    /// write through it while the worker runs: workerd does not wait on SQLite's lock.
    pub fn database(&self) -> Connection {
        let conn = Connection::open(
            xtask::localdb::database_file(&self.persist_to).expect("local database"),
        )
        .expect("open local database");
        conn.busy_timeout(Duration::from_secs(10))
            .expect("busy timeout");
        conn
    }

    /// Wrangler's persist directory of this worker.
    pub fn persist_to(&self) -> &Path {
        &self.persist_to
    }

    /// Sends a request; `spec_path` is the OpenAPI path template the response is checked
    /// against (`None` for requests outside the partner API).
    pub fn send(
        &self,
        request: reqwest::blocking::RequestBuilder,
        spec_path: Option<&str>,
    ) -> Reply {
        let request = request.build().expect("valid request");
        let method = request.method().as_str().to_ascii_lowercase();
        let response = self.http.execute(request).expect("request sent");
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    v.to_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let text = response.text().expect("body read");
        let reply = Reply {
            status,
            headers,
            text,
        };
        if let Some(path) = spec_path {
            openapi::assert_conforms(path, &method, &reply);
        }
        reply
    }

    /// A GET of an absolute URL with this worker's client (no redirects followed).
    pub fn http_get(&self, url: &str) -> reqwest::blocking::RequestBuilder {
        self.http.get(url)
    }

    /// A request builder for `path` on this worker.
    pub fn request(
        &self,
        method: reqwest::Method,
        path: &str,
    ) -> reqwest::blocking::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base_url))
    }

    /// `POST /oauth/token` with a form body (pairs sent as given, so tests can repeat fields).
    pub fn token_form(&self, pairs: &[(&str, &str)]) -> Reply {
        let body = form(pairs);
        self.send(
            self.request(reqwest::Method::POST, "/oauth/token")
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(body),
            Some("/oauth/token"),
        )
    }

    /// A fresh access token for a client, all its scopes.
    pub fn token(&self, client_id: &str, client_secret: &str) -> String {
        let reply = self.token_form(&[
            ("grant_type", "client_credentials"),
            ("client_id", client_id),
            ("client_secret", client_secret),
        ]);
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()["access_token"]
            .as_str()
            .expect("access_token")
            .to_owned()
    }

    /// A token for demo institution `index` (0 or 1).
    pub fn institution_token(&self, index: usize) -> String {
        static TOKENS: OnceLock<Mutex<HashMap<usize, String>>> = OnceLock::new();
        let tokens = TOKENS.get_or_init(Default::default);
        if let Some(token) = tokens.lock().expect("lock").get(&index) {
            return token.clone();
        }
        let institution = &self.credentials.institutions[index];
        let token = self.token(&institution.client_id, &institution.client_secret);
        tokens.lock().expect("lock").insert(index, token.clone());
        token
    }

    /// `POST path` with a JSON body (and a bearer token), checked against the spec path template.
    pub fn post_json(
        &self,
        path: &str,
        body: &Value,
        token: Option<&str>,
        spec_path: &str,
    ) -> Reply {
        let mut request = self.request(reqwest::Method::POST, path).json(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        self.send(request, Some(spec_path))
    }

    /// Creates a checkout session; asserts it was created (201) and returns its body.
    pub fn checkout_session(&self, options: &Value) -> Value {
        let reply = self.post_json("/checkout/sessions", options, None, "/checkout/sessions");
        assert_eq!(reply.status, 201, "{}", reply.text);
        reply.json()
    }

    /// The transaction `id` as institution `institution` reads it through `/v1/transactions`.
    pub fn transaction(&self, institution: usize, id: i64) -> Value {
        let token = self.institution_token(institution);
        let reply = self.get(
            &format!("/v1/transactions?id={id}"),
            Some(&token),
            "/v1/transactions",
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()["data"][0].clone()
    }

    /// Logs the admin of demo institution `index` into the portal through the JSON API.
    pub fn portal_login(&self, index: usize) -> PortalSession {
        let institution = &self.credentials.institutions[index];
        let reply = self.send(
            self.request(reqwest::Method::POST, "/portal/api/login")
                .json(&serde_json::json!({
                    "email": institution.admin_email,
                    "password": institution.admin_password,
                })),
            None,
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        let set_cookie = reply.header("set-cookie").expect("Set-Cookie").to_owned();
        let cookie = set_cookie
            .split(';')
            .next()
            .and_then(|pair| pair.strip_prefix("payrail_portal="))
            .expect("the session cookie")
            .to_owned();
        PortalSession {
            cookie,
            csrf: reply.json()["csrf_token"]
                .as_str()
                .expect("csrf_token")
                .to_owned(),
        }
    }

    /// A portal JSON API call with a session (cookie and CSRF header) and an optional body.
    pub fn portal(
        &self,
        method: reqwest::Method,
        path: &str,
        session: Option<&PortalSession>,
        body: Option<&Value>,
    ) -> Reply {
        let mut request = self.request(method, path);
        if let Some(session) = session {
            request = request
                .header("Cookie", format!("payrail_portal={}", session.cookie))
                .header("X-CSRF-Token", &session.csrf);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        self.send(request, None)
    }

    /// `GET path` with a bearer token, checked against the spec path template.
    pub fn get(&self, path: &str, token: Option<&str>, spec_path: &str) -> Reply {
        let mut request = self.request(reqwest::Method::GET, path);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        self.send(request, Some(spec_path))
    }

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

/// A portal session: the cookie value and its CSRF token.
#[derive(Debug, Clone)]
pub struct PortalSession {
    /// Value of the `payrail_portal` cookie.
    pub cookie: String,
    /// The session's CSRF token.
    pub csrf: String,
}

/// A fixture client's credentials.
pub struct FixtureClient {
    /// Fixture name.
    pub name: &'static str,
    /// Public client id.
    pub client_id: String,
    /// Secret.
    pub client_secret: String,
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

/// Encodes pairs as `application/x-www-form-urlencoded`, keeping order and repeats.
pub fn form(pairs: &[(&str, &str)]) -> String {
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        serializer.append_pair(k, v);
    }
    serializer.finish()
}

fn read_log(path: &Path) -> String {
    std::fs::File::open(path)
        .map(|f| {
            BufReader::new(f)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Polls `check` until it returns `Some`, or panics after `timeout` naming `what`.
pub fn eventually<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
