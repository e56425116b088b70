//! The worker process: each [`Worker`] is the built worker under `wrangler dev` (workerd, local
//! D1) on a free port, with a database of its own, migrated (a copy of one migrated once per
//! test process) and seeded before it starts, so tests never race the worker for SQLite's lock
//! while seeding. A watchdog shell stops wrangler
//! when the test process goes away, however it ends.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use rusqlite::Connection;
use xtask::demo::CredentialsFile;

use crate::fixtures::{self, FixtureClient};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A running worker with its own database.
pub struct Worker {
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    /// The demo credentials loaded into its database.
    pub credentials: CredentialsFile,
    /// The fixture clients added to its database (see [`fixtures::FIXTURE_CLIENTS`]).
    pub(crate) fixtures: Vec<FixtureClient>,
    /// The HTTP client every request to it goes through (no redirects followed).
    pub(crate) http: Client,
    /// Access tokens of the demo institutions, by index, that this worker issued. The cache is
    /// the worker's own, so its key is (worker, institution): a token of another worker (whose
    /// database does not know it) is never handed out, even when a later worker reuses the port
    /// of one that stopped.
    pub(crate) institution_tokens: Mutex<HashMap<(usize, bool), String>>,
    persist_to: PathBuf,
    /// The `--var NAME:value` settings it was started with besides the mode's.
    vars: Vec<(String, String)>,
    /// The watchdog's script: `wrangler dev` on this worker's port and database.
    script: String,
    // Dropping the pipe (when the worker is dropped or the test process exits) makes the
    // watchdog stop wrangler.
    watchdog: Mutex<(Child, ChildStdin)>,
}

impl Worker {
    /// What the worker has written to its log (wrangler's output, the worker's console lines
    /// among it) so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.persist_to.join("wrangler.log")).unwrap_or_default()
    }

    /// The worker shared by every test that needs no worker of its own, started on first use.
    /// Its tests run side by side with many others: each asserts only on what it made itself.
    pub fn shared() -> &'static Worker {
        static WORKER: OnceLock<Worker> = OnceLock::new();
        WORKER.get_or_init(Worker::start)
    }

    /// A sandbox worker of its own for the tests that ask for it by `name`, started on first
    /// use and shared by them alone: for tests that other tests on one worker would disturb or
    /// be disturbed by (its database written directly, its queue held up, its cron run, its
    /// rows counted, a limit used up). tests/README.md lists who has one and why.
    pub fn own(name: &'static str) -> &'static Worker {
        type Cell = &'static OnceLock<Worker>;
        static WORKERS: Mutex<Vec<(&'static str, Cell)>> = Mutex::new(Vec::new());
        let cell = {
            let mut workers = WORKERS.lock().unwrap_or_else(|e| e.into_inner());
            match workers.iter().find(|(n, _)| *n == name) {
                Some((_, cell)) => *cell,
                None => {
                    let cell: Cell = Box::leak(Box::default());
                    workers.push((name, cell));
                    cell
                }
            }
        };
        // Started outside the list's lock, so workers of different names start side by side.
        cell.get_or_init(Worker::start)
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
    /// `time_scale`: migrations, demo data and fixtures, `wrangler dev`.
    pub fn start_with(mode: &str, time_scale: u64) -> Worker {
        Worker::start_with_vars(mode, time_scale, &[])
    }

    /// The same with more `--var NAME:value` settings (a value must not contain `'`).
    pub fn start_with_vars(mode: &str, time_scale: u64, vars: &[(&str, &str)]) -> Worker {
        Worker::start_with_cron(mode, time_scale, vars, None)
    }

    /// The same, and when `cron_period` is given, with the cron trigger fired by itself every
    /// that many seconds by `scripts/local-cron`, the loop `scripts/dev` runs every minute; it
    /// stops with the worker. (Without it, a test runs the cron with [`Worker::cron`].)
    pub fn start_with_cron(
        mode: &str,
        time_scale: u64,
        vars: &[(&str, &str)],
        cron_period: Option<u64>,
    ) -> Worker {
        // A port found free can be taken by another process before wrangler binds it (the
        // tests of a binary start their workers in parallel, and each wrangler opens ports of
        // its own): then it starts again on other ports.
        for _ in 0..3 {
            if let Some(worker) = Worker::try_start(mode, time_scale, vars, cron_period) {
                return worker;
            }
        }
        panic!("wrangler dev lost its port to another process three times");
    }

    /// One start; `None` when another process holds the port chosen.
    fn try_start(
        mode: &str,
        time_scale: u64,
        vars: &[(&str, &str)],
        cron_period: Option<u64>,
    ) -> Option<Worker> {
        let root = root();
        let port = free_port();
        let base_url = format!("http://127.0.0.1:{port}");
        let persist_to = root
            .join("target/payrail-tests")
            .join(format!("{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&persist_to);
        std::fs::create_dir_all(&persist_to).expect("create persist dir");

        copy_tree(migrated(), &persist_to).expect("copy the migrated database");
        let conn =
            Connection::open(xtask::localdb::database_file(&persist_to).expect("local database"))
                .expect("open local database");
        let (credentials, fixtures) = fixtures::seed(conn, &base_url);

        let log = persist_to.join("wrangler.log");
        let key = std::env::var("PAYRAIL_DEV_ENCRYPTION_KEY").expect(
            "PAYRAIL_DEV_ENCRYPTION_KEY is set by scripts/env.sh (run through scripts/test)",
        );
        // Receivers in tests listen on ports the system hands out (and dead endpoints point at
        // the discard port): a test worker lets webhook endpoints use any port of this machine
        // unless the test says otherwise.
        let loopback = ("PAYRAIL_LOOPBACK_PORTS", "1-65535");
        let defaults = (!vars.iter().any(|(name, _)| *name == loopback.0)).then_some(&loopback);
        let extra: String = defaults
            .into_iter()
            .chain(vars.iter())
            .map(|(name, value)| {
                assert!(
                    !value.contains('\''),
                    "{name} must not contain a single quote"
                );
                format!(" --var '{name}:{value}'")
            })
            .collect();
        // The local cron's loop is a child of the watchdog, so it stops with it.
        let cron = cron_period.map_or(String::new(), |period| {
            format!(
                "bash scripts/local-cron {base_url} {period} 2>'{}' & c=$!; ",
                persist_to.join("local-cron.log").display()
            )
        });
        let stop_cron = if cron_period.is_some() { " $c" } else { "" };
        let script = format!(
            "PAYRAIL_SKIP_BUILD=1 wrangler dev --ip 127.0.0.1 --port {port} --inspector-port {} \
             --persist-to '{}' --var PAYRAIL_MODE:{mode} --var PAYRAIL_ENCRYPTION_KEY:{key} \
             --var PAYRAIL_WEBHOOK_TIME_SCALE:{time_scale}{extra} --test-scheduled \
             --show-interactive-dev-session=false >'{}' 2>&1 & w=$!; {cron}cat >/dev/null; \
             kill $w{stop_cron}; wait $w",
            free_port(),
            persist_to.display(),
            log.display()
        );
        let http = Client::builder()
            .timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("http client");
        let watchdog = launch(&script, &http, &base_url, &log)?;
        Some(Worker {
            base_url,
            credentials,
            fixtures,
            http,
            institution_tokens: Mutex::default(),
            persist_to,
            vars: vars
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
                .collect(),
            script,
            watchdog: Mutex::new(watchdog),
        })
    }

    /// Kills the worker as a crash or an eviction would (SIGKILL to wrangler and workerd, in
    /// the middle of whatever it is doing: nothing flushed, no request finished), then starts
    /// it again on the same port and the same local D1 and objects, as they were left.
    pub fn kill_and_restart(&self) {
        let mut watchdog = self.watchdog.lock().unwrap_or_else(|e| e.into_inner());
        // The watchdog first, so it says nothing of its children's deaths.
        let mut tree = vec![watchdog.0.id()];
        tree.extend(descendants(watchdog.0.id()));
        // Bash's own `kill`: a fresh machine need not have procps's.
        let pids: Vec<String> = tree.iter().map(u32::to_string).collect();
        let status = Command::new("bash")
            .args(["-c", &format!("kill -KILL {}", pids.join(" "))])
            .status()
            .expect("run bash");
        assert!(status.success(), "SIGKILL to {tree:?}");
        let _ = watchdog.0.wait();
        let log = self.persist_to.join("wrangler.log");
        // The killed run's log is kept beside the new one's.
        let kept = (1..)
            .map(|n| self.persist_to.join(format!("wrangler-killed-{n}.log")))
            .find(|path| !path.exists())
            .expect("a free name");
        let _ = std::fs::rename(&log, kept);
        // The port is free again once the killed workerd's socket is closed.
        let deadline = Instant::now() + Duration::from_secs(30);
        *watchdog = loop {
            if let Some(started) = launch(&self.script, &self.http, &self.base_url, &log) {
                break started;
            }
            assert!(
                Instant::now() < deadline,
                "the killed worker's port not free in 30 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        };
    }

    /// Session `session`'s deposit address (lower case) and the base units it asks for, as the
    /// worker stored them.
    pub fn deposit(&self, session: &str) -> (String, u128) {
        let (address, units): (String, String) = self
            .database()
            .query_row(
                "SELECT w.address, w.base_units FROM checkout_sessions s \
                 JOIN deposit_watches w ON w.address = lower(s.deposit_address) WHERE s.id = ?1",
                [session],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("the session's deposit address");
        (address, units.parse().expect("base units"))
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

    /// Institution `institution`'s object's SQLite file (the one whose `object_identity` names
    /// it); `None` before the object has stored anything.
    pub fn object_file(&self, institution: i64) -> Option<PathBuf> {
        xtask::localdb::object_files(&self.persist_to)
            .expect("the objects' directory")
            .into_iter()
            .find(|file| {
                Connection::open_with_flags(file, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                    .and_then(|conn| {
                        // The worker may be writing it: wait for its lock.
                        conn.busy_timeout(Duration::from_secs(10))?;
                        conn.query_row("SELECT institution_id FROM object_identity", [], |r| {
                            r.get::<_, i64>(0)
                        })
                    })
                    .is_ok_and(|held| held == institution)
            })
    }

    /// Opens the local SQLite file of institution `institution`'s object, to check what the
    /// worker stored there; `None` before the object has stored anything. Read only, like
    /// [`Worker::database`].
    pub fn object_database(&self, institution: i64) -> Option<Connection> {
        let conn = Connection::open_with_flags(
            self.object_file(institution)?,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .ok()?;
        conn.busy_timeout(Duration::from_secs(10)).ok()?;
        Some(conn)
    }

    /// Runs `sql` on institution `institution`'s object's database behind the worker's back, as
    /// tests do on D1's (making a watch due now instead of in half an hour): its rows changed.
    pub fn object_execute(&self, institution: i64, sql: &str, params: &[&str]) -> usize {
        let file = self
            .object_file(institution)
            .unwrap_or_else(|| panic!("no object holds institution {institution}"));
        let conn = Connection::open(file).unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        conn.execute(sql, rusqlite::params_from_iter(params))
            .unwrap()
    }

    /// Wrangler's persist directory of this worker.
    pub fn persist_to(&self) -> &Path {
        &self.persist_to
    }

    /// The value of the `--var` `name` it was started with, if any.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Runs the watchdog `script` and waits until the worker answers on `base_url` (`log` is
/// wrangler's output): its process and pipe, or `None` when another process holds the port.
fn launch(script: &str, http: &Client, base_url: &str, log: &Path) -> Option<(Child, ChildStdin)> {
    let mut child = Command::new("bash")
        .args(["-c", script])
        // wrangler's local trace store (spans of every D1 call, kept in SQLite for the local
        // explorer) costs CPU on the one workerd thread and nothing here reads it.
        .env("X_LOCAL_OBSERVABILITY", "false")
        .current_dir(root())
        .stdin(Stdio::piped())
        .spawn()
        .expect("start wrangler dev");
    let stdin = child.stdin.take().expect("piped stdin");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        // Ready when the port answers with our own OpenAPI document: any other answer is
        // another process on the port.
        match http.get(format!("{base_url}/openapi.json")).send() {
            Ok(reply) if reply.status() == 200 => {
                if reply.text().is_ok_and(|body| body.contains("\"openapi\"")) {
                    return Some((child, stdin));
                }
                return stop(child, stdin);
            }
            Ok(_) => return stop(child, stdin),
            Err(_) => {}
        }
        let log_text = read_log(log);
        if log_text.contains("EADDRINUSE") || log_text.contains("Address already in use") {
            return stop(child, stdin);
        }
        if let Ok(Some(exit)) = child.try_wait() {
            panic!("wrangler dev exited ({exit}):\n{log_text}");
        }
        assert!(
            Instant::now() < deadline,
            "wrangler dev not ready in 90 s:\n{log_text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every process below `pid`, read from `/proc` (each process's parent is field 4 of its
/// `stat`, after the parenthesised name).
fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .expect("read /proc")
        .flatten()
        .filter_map(|entry| {
            let child: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let parent = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
            Some((child, parent.parse().ok()?))
        })
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    found.split_off(1)
}

/// A local D1 with every migration applied by `wrangler d1 migrations apply`, made once per
/// test process: each worker starts from a copy of it (applying the migrations costs wrangler
/// about ten seconds of CPU, copying the files a few milliseconds).
fn migrated() -> &'static Path {
    static MIGRATED: OnceLock<PathBuf> = OnceLock::new();
    MIGRATED.get_or_init(|| {
        let root = root();
        let dir = root
            .join("target/payrail-tests")
            .join(format!("{}-migrated", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the migrated database's dir");
        let status = Command::new("wrangler")
            .args(["d1", "migrations", "apply", "DB", "--local", "--persist-to"])
            .arg(&dir)
            .current_dir(&root)
            .env("CI", "true")
            .stdout(Stdio::null())
            .status()
            .expect("run wrangler (is scripts/env.sh sourced? use scripts/test)");
        assert!(status.success(), "migrations failed");
        dir
    })
}

/// Copies the directory tree `from` into `to` (which exists).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            std::fs::create_dir_all(&target)?;
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Stops a wrangler that did not come up as ours: closing the pipe makes its watchdog kill it.
fn stop<T>(mut child: Child, stdin: ChildStdin) -> Option<T> {
    drop(stdin);
    let _ = child.wait();
    None
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
