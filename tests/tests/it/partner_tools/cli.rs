//! The `payrail` command against the running worker, run in-process with its own config file:
//! configure, list and get as tables or `--json`, `listen` forwarding triggered events signed
//! with its local secret, and `events resend` through a portal login.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use payrail::webhooks::Webhooks;
use payrail_tests::hooks::{endpoint, log};
use payrail_tests::{eventually, Worker};
use serde_json::Value;

use super::{runtime, TempDir, ALL_SCOPES};

/// Output captured from the command.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// The `payrail` command with its own config file, run in-process.
struct Cli {
    env: std::collections::HashMap<String, String>,
    config: PathBuf,
    _dir: TempDir,
}

/// What a run printed and how it ended.
struct Ran {
    code: i32,
    out: String,
    err: String,
}

impl Cli {
    fn new(worker: &Worker) -> Cli {
        let dir = std::env::temp_dir().join(format!(
            "payrail-cli-{}-{}",
            std::process::id(),
            payrail_tests::worker::free_port()
        ));
        let config = dir.join("payrail").join("config.toml");
        let env = [
            ("PAYRAIL_CONFIG", config.to_str().unwrap()),
            ("PAYRAIL_API_URL", worker.base_url.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        Cli {
            env,
            config,
            _dir: TempDir(dir),
        }
    }

    fn io(stdin: &str) -> (payrail_cli::Io, Captured, Captured) {
        let (out, err) = (Captured::default(), Captured::default());
        let io = payrail_cli::Io {
            out: Box::new(out.clone()),
            err: Box::new(err.clone()),
            stdin: Box::new(std::io::Cursor::new(stdin.as_bytes().to_vec())),
            stdin_is_terminal: false,
        };
        (io, out, err)
    }

    fn args(args: &[&str]) -> Vec<String> {
        std::iter::once("payrail")
            .chain(args.iter().copied())
            .map(str::to_owned)
            .collect()
    }

    fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Ran {
        let (mut io, out, err) = Cli::io(stdin);
        let code = runtime().block_on(payrail_cli::run(
            Cli::args(args),
            self.env.clone(),
            &mut io,
            std::future::pending(),
        ));
        Ran {
            code,
            out: out.text(),
            err: err.text(),
        }
    }

    fn run(&self, args: &[&str]) -> Ran {
        self.run_with_stdin(args, "")
    }

    fn ok(&self, args: &[&str]) -> String {
        let ran = self.run(args);
        assert_eq!(ran.code, 0, "{args:?}: {}", ran.err);
        ran.out
    }

    /// A CLI configured with a new client of institution `index` with every scope.
    fn configured(worker: &Worker, index: usize) -> Cli {
        let cli = Cli::new(worker);
        let (id, secret) = worker.new_client(index, "CLI test", ALL_SCOPES);
        let ran = cli.run_with_stdin(
            &[
                "configure",
                "--api-url",
                &worker.base_url,
                "--client-id",
                &id,
            ],
            &format!("{secret}\n"),
        );
        assert_eq!(ran.code, 0, "{}", ran.err);
        cli
    }
}

#[test]
fn the_cli_reads_lists_and_single_items_as_tables_or_json() {
    use std::os::unix::fs::PermissionsExt;
    let worker = Worker::shared();
    let cli = Cli::configured(worker, 0);
    let mode = std::fs::metadata(&cli.config).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the config file is private");

    let json: Value =
        serde_json::from_str(&cli.ok(&["transactions", "list", "--limit", "3", "--json"])).unwrap();
    let ids: Vec<i64> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|w| w[0] > w[1]));

    // More than a page: the table has its header and exactly the rows asked for.
    let table = cli.ok(&["transactions", "list", "--status", "paid", "--limit", "150"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("REFERENCE"),
        "{}",
        lines[0]
    );
    assert_eq!(lines.len(), 151);
    assert!(lines[1..]
        .iter()
        .all(|l| l.split_whitespace().nth(1) == Some("paid")));

    let one: Value =
        serde_json::from_str(&cli.ok(&["transactions", "get", &ids[0].to_string()])).unwrap();
    assert_eq!(one["id"], ids[0]);
    let missing = cli.run(&["transactions", "get", "9007199254740991"]);
    assert_eq!(missing.code, 1);
    assert!(
        missing.err.contains("no transaction 9007199254740991"),
        "{}",
        missing.err
    );

    let merchants = cli.ok(&["merchants", "list"]);
    for m in &worker.credentials.institutions[0].merchants {
        assert!(
            merchants.contains(&m.name),
            "{} missing:\n{merchants}",
            m.name
        );
    }
    let id = worker.credentials.institutions[0].merchant_ids[0];
    let merchant: Value =
        serde_json::from_str(&cli.ok(&["merchants", "get", &id.to_string()])).unwrap();
    assert_eq!(merchant["id"], id);

    let bad = cli.run(&["transactions", "list", "--created-after", "soon"]);
    assert_eq!(bad.code, 1);
    assert!(
        bad.err.contains("invalid_request") && bad.err.contains("created_after"),
        "{}",
        bad.err
    );
    let bad = cli.run(&["transactions", "list", "--status", "lost"]);
    assert_eq!(bad.code, 2);
    assert!(bad.err.contains("the statuses are"), "{}", bad.err);
    // A base URL the client refuses is a configuration problem (exit code 2), as is plain
    // http to another machine (the secret would travel in the clear).
    for url in ["ftp://127.0.0.1", "http://api.example.com"] {
        let bad = cli.run(&["--api-url", url, "merchants", "list"]);
        assert_eq!(bad.code, 2, "{url}: {}", bad.err);
        assert!(bad.err.contains("base URL"), "{}", bad.err);
    }

    // A config file others can read is refused, naming the fix.
    std::fs::set_permissions(&cli.config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = cli.run(&["merchants", "list"]);
    assert_eq!(refused.code, 2);
    assert!(refused.err.contains("chmod 600"), "{}", refused.err);
}

#[test]
fn listen_forwards_triggered_events_signed_with_the_local_secret() {
    let worker = Worker::shared();
    let cli = Cli::configured(worker, 1);
    let target = payrail_tests::receiver::Receiver::start();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (mut io, out, err) = Cli::io("");
    let args = Cli::args(&[
        "listen",
        "--forward-to",
        &target.url("/hooks"),
        "--interval-ms",
        "200",
    ]);
    let env = cli.env.clone();
    let listening = runtime().spawn(async move {
        payrail_cli::run(args, env, &mut io, async {
            let _ = stopped.await;
        })
        .await
    });
    eventually("listen ready", Duration::from_secs(20), || {
        err.text().contains("Ready.").then_some(())
    });
    let secret = err
        .text()
        .lines()
        .find_map(|l| {
            l.strip_prefix("Your local webhook signing secret is ")
                .map(str::to_owned)
        })
        .expect("the secret is printed");
    assert_eq!(
        cli.ok(&["listen", "--print-secret"]).trim(),
        secret,
        "one secret, kept"
    );

    let triggered = cli.run(&[
        "trigger",
        "payment.paid",
        "--reference",
        "CLI-TRIGGER-1",
        "--json",
    ]);
    assert_eq!(triggered.code, 0, "{}", triggered.err);
    let transaction: Value = serde_json::from_str(&triggered.out).unwrap();
    assert_eq!(transaction["raw_status"], "paid");
    assert_eq!(transaction["external_reference"], "CLI-TRIGGER-1");
    let id = transaction["id"].as_i64().unwrap();

    let received = eventually("both events forwarded", Duration::from_secs(30), || {
        let mine: Vec<_> = target
            .received()
            .into_iter()
            .filter(|r| r.json()["data"]["id"] == id)
            .collect();
        (mine.len() == 2).then_some(mine)
    });
    let webhooks = Webhooks::new(&secret);
    let kinds: Vec<String> = received
        .iter()
        .map(|r| {
            let event = webhooks
                .verify(r.header("Payrail-Signature").unwrap(), &r.body)
                .expect("signed with the printed secret");
            assert_eq!(r.header("Payrail-Event-Id"), Some(event.id.as_str()));
            event.type_name().to_owned()
        })
        .collect();
    assert_eq!(kinds, ["payment.succeeded", "payment.paid"], "oldest first");
    // The CLI prints each forward once its receiver answered: the line may follow the
    // receiver's copy by a moment.
    eventually("the forwards printed", Duration::from_secs(10), || {
        let printed = out.text();
        (printed.contains("payment.paid") && printed.contains("200 OK")).then_some(())
    });

    stop.send(()).unwrap();
    assert_eq!(runtime().block_on(listening).unwrap(), 0);
    // The secret is kept for the next run.
    let config = std::fs::read_to_string(&cli.config).unwrap();
    assert!(config.contains(&secret));
}

#[test]
fn events_resend_uses_a_portal_session() {
    let worker = Worker::shared();
    let cli = Cli::configured(worker, 1);
    let institution = &worker.credentials.institutions[1];

    let no_session = cli.run(&["events", "resend", "dlv_abc"]);
    assert_eq!(no_session.code, 2);
    assert!(
        no_session.err.contains("payrail login"),
        "{}",
        no_session.err
    );
    let bad = cli.run(&["events", "resend", "../../oauth/token"]);
    assert_eq!(bad.code, 2);
    assert!(bad.err.contains("not a delivery id"), "{}", bad.err);
    let wrong = cli.run_with_stdin(
        &["login", "--email", &institution.admin_email],
        "wrong password\n",
    );
    assert_eq!(wrong.code, 1);
    assert!(wrong.err.contains("invalid_credentials"), "{}", wrong.err);
    let login = cli.run_with_stdin(
        &["login", "--email", &institution.admin_email],
        &format!("{}\n", institution.admin_password),
    );
    assert_eq!(login.code, 0, "{}", login.err);

    let session = worker.portal_login(1);
    let target = payrail_tests::receiver::Receiver::start();
    let (endpoint_id, _) = endpoint(
        worker,
        &session,
        &target.url("/resend"),
        Some(&["payment.succeeded"]),
    );
    let triggered = cli.run(&["trigger", "payment.succeeded", "--json"]);
    assert_eq!(triggered.code, 0, "{}", triggered.err);
    let id = serde_json::from_str::<Value>(&triggered.out).unwrap()["id"].clone();
    // Other tests' payments of this institution reach the endpoint too: only this one counts.
    let mine = || -> Vec<String> {
        target
            .received()
            .iter()
            .filter(|r| r.json()["data"]["id"] == id)
            .map(|r| r.header("Payrail-Event-Id").unwrap().to_owned())
            .collect()
    };
    let event_id = eventually("the event delivered", Duration::from_secs(30), || {
        mine().first().cloned()
    });
    let delivery = eventually("the delivery logged", Duration::from_secs(30), || {
        log(worker, &session, &endpoint_id, "status=succeeded")["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["event_id"] == event_id.as_str())
            .map(|d| d["id"].as_str().unwrap().to_owned())
    });
    let resent = cli.run(&["events", "resend", &delivery]);
    assert_eq!(resent.code, 0, "{}", resent.err);
    assert!(resent.out.starts_with("Resent evt_"), "{}", resent.out);
    eventually("delivered twice", Duration::from_secs(30), || {
        (mine() == [event_id.clone(), event_id.clone()]).then_some(())
    });
}
