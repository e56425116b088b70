//! The tools for partners' developers against the running worker: the `payrail` SDK (token,
//! typed lists as streams, filters, errors, the events feed, the sandbox) and the reference
//! webhook receiver (store before acknowledging, dedupe, fulfil only what was paid in full,
//! review the rest, repair a lost webhook by reconciliation, refuse forgeries).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::TryStreamExt;
use payrail::webhooks::{signature_header, EventKind, Webhooks};
use payrail::{Client, Error, EventQuery, MerchantQuery, SandboxAction, Status, TransactionQuery};
use payrail_receiver::{Receiver, Store};
use payrail_tests::hooks::{act, endpoint, log, payment, unix_now};
use payrail_tests::{eventually, Worker};
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{json, Value};

/// Every scope a sandbox client can have.
const ALL_SCOPES: &[&str] = &[
    "transactions:read",
    "merchants:read",
    "events:read",
    "sandbox:write",
];

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Runtime::new().expect("a tokio runtime"))
}

/// An SDK client of institution `index` with every scope.
fn sdk(worker: &Worker, index: usize) -> Client {
    let (id, secret) = worker.new_client(index, "SDK test", ALL_SCOPES);
    Client::new(&worker.base_url, id, secret).unwrap()
}

/// Every id of a list, paged by hand over raw HTTP.
fn raw_ids(worker: &Worker, path: &str, token: &str, spec: &str) -> Vec<i64> {
    let mut ids = Vec::new();
    let mut cursor: Option<i64> = None;
    loop {
        let after = cursor
            .map(|c| format!("&starting_after={c}"))
            .unwrap_or_default();
        let reply = worker.get(&format!("{path}?limit=100{after}"), Some(token), spec);
        assert_eq!(reply.status, 200, "{}", reply.text);
        let page = reply.json();
        ids.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_i64().unwrap()),
        );
        match page["next_cursor"].as_i64() {
            Some(next) => cursor = Some(next),
            None => return ids,
        }
    }
}

#[test]
fn sdk_streams_follow_every_page_and_filters_select() {
    let worker = Worker::shared();
    let client = sdk(worker, 0);
    let rt = runtime();
    let streamed: Vec<i64> = rt
        .block_on(
            client
                .transactions(TransactionQuery::new().limit(100))
                .map_ok(|t| t.id)
                .try_collect(),
        )
        .unwrap();
    let token = worker.institution_token(0);
    let raw = raw_ids(worker, "/v1/transactions", &token, "/v1/transactions");
    assert!(
        streamed.len() > 100,
        "more than one page: {}",
        streamed.len()
    );
    // Exactly what the raw walk saw, up to the newest the stream saw: transactions are never
    // removed and ids grow, so only newer ones (made by tests running alongside between the two
    // walks) may differ.
    let newest = streamed[0];
    assert_eq!(
        streamed,
        raw.iter()
            .copied()
            .filter(|id| *id <= newest)
            .collect::<Vec<_>>()
    );
    assert!(streamed.windows(2).all(|w| w[0] > w[1]), "newest first");

    let own_merchants = &worker.credentials.institutions[0].merchant_ids;
    let merchant = own_merchants[0];
    let paid: Vec<payrail::Transaction> = rt
        .block_on(
            client
                .transactions(
                    TransactionQuery::new()
                        .status(Status::Paid)
                        .merchant_id(merchant)
                        .limit(50),
                )
                .try_collect(),
        )
        .unwrap();
    assert!(!paid.is_empty());
    assert!(paid
        .iter()
        .all(|t| t.status == Status::Paid && t.merchant_id == merchant));

    let merchants: Vec<payrail::Merchant> = rt
        .block_on(
            client
                .merchants(MerchantQuery::new().limit(1))
                .try_collect(),
        )
        .unwrap();
    assert_eq!(
        merchants
            .iter()
            .map(|m| m.id)
            .collect::<std::collections::BTreeSet<_>>(),
        own_merchants.iter().copied().collect(),
        "exactly the institution's merchants, one page at a time"
    );
    let one = rt.block_on(client.merchant(merchants[0].id)).unwrap();
    assert_eq!(one.as_ref(), Some(&merchants[0]));
    let other = worker.credentials.institutions[1].merchant_ids[0];
    assert_eq!(
        rt.block_on(client.merchant(other)).unwrap(),
        None,
        "another institution's"
    );
    assert_eq!(
        rt.block_on(client.transaction(9_007_199_254_740_991))
            .unwrap(),
        None
    );
}

#[test]
fn sdk_errors_carry_the_api_error_and_name_the_problem() {
    let worker = Worker::shared();
    let rt = runtime();
    let client = sdk(worker, 0);
    let err = rt
        .block_on(client.transactions_page(&TransactionQuery::new().created_after("yesterday")))
        .unwrap_err();
    assert_eq!(
        (err.status(), err.code()),
        (Some(400), Some("invalid_request"))
    );
    assert!(err.to_string().contains("created_after"), "{err}");

    let (id, _) = worker.new_client(0, "SDK test", &["transactions:read"]);
    let wrong = Client::new(&worker.base_url, id.clone(), "sk_wrong").unwrap();
    let err = rt
        .block_on(wrong.transactions_page(&TransactionQuery::new()))
        .unwrap_err();
    assert_eq!(
        (err.status(), err.code()),
        (Some(401), Some("invalid_client"))
    );

    let (id, secret) = worker.new_client(0, "SDK test", &["transactions:read"]);
    let limited = Client::new(&worker.base_url, id, secret).unwrap();
    let err = rt
        .block_on(limited.merchants_page(&MerchantQuery::new()))
        .unwrap_err();
    assert!(matches!(err, Error::Api { status: 403, .. }), "{err:?}");
    assert_eq!(err.code(), Some("insufficient_scope"));
}

#[test]
fn sdk_drives_the_sandbox_and_reads_the_events_it_made() {
    let worker = Worker::shared();
    let rt = runtime();
    let client = sdk(worker, 0);
    let key = worker.credentials.institutions[0].merchants[0]
        .public_key
        .clone();
    let session = rt
        .block_on(client.create_checkout(&payrail::CheckoutRequest {
            public_key: key,
            amount: "12.34".into(),
            currency: "EUR".into(),
            title: "SDK order".into(),
            external_reference: "SDK-1".into(),
            idempotency_key: Some("SDK-1".into()),
            redirect_url: "https://shop.example/done".into(),
            allow_crypto: true,
        }))
        .unwrap();
    assert!(session.id.starts_with("cs_"));
    let id = session.transaction_id;
    let paid = rt
        .block_on(client.sandbox(id, &SandboxAction::Pay("12.34".into())))
        .unwrap();
    assert_eq!(paid.status, Status::Paid);
    rt.block_on(client.sandbox(id, &SandboxAction::Settle))
        .unwrap();
    let events: Vec<payrail::webhooks::Event> = rt
        .block_on(
            client
                .events(EventQuery::new().transaction_id(id))
                .try_collect(),
        )
        .unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.type_name()).collect();
    assert_eq!(kinds, ["payment.paid", "payment.succeeded"], "newest first");
    match &events[0].kind {
        EventKind::PaymentPaid(t) => {
            assert_eq!(t.id, id);
            assert_eq!(t.amount.gross, Some(Decimal::new(1234, 2)));
            assert_eq!(t.external_reference.as_deref(), Some("SDK-1"));
        }
        other => panic!("{other:?}"),
    }
    // A second settle is an illegal transition: 409, not retried.
    let err = rt
        .block_on(client.sandbox(id, &SandboxAction::Settle))
        .unwrap_err();
    assert_eq!(err.code(), Some("conflict"));
}

/// A reference receiver on a free port with its own database, running on the shared runtime.
struct RunningReceiver {
    url: String,
    receiver: Arc<Receiver>,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start_receiver(secret: &str, client: Option<Client>) -> RunningReceiver {
    let dir = std::env::temp_dir().join(format!(
        "payrail-receiver-{}-{}",
        std::process::id(),
        payrail_tests::worker::free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let store = Store::open(&dir.join("shop.db")).unwrap();
    let receiver = Receiver::new(store, Webhooks::new(secret), client, Duration::ZERO).unwrap();
    let listener = runtime()
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    runtime().spawn(receiver.clone().run(listener, None));
    RunningReceiver {
        url,
        receiver,
        _dir: TempDir(dir),
    }
}

fn order(receiver: &RunningReceiver, reference: &str, amount: &str) {
    let reply = reqwest::blocking::Client::new()
        .post(format!("{}/orders", receiver.url))
        .json(&json!({"reference": reference, "amount": amount, "currency": "EUR"}))
        .send()
        .unwrap();
    assert_eq!(reply.status(), 201);
}

fn reviews_of(receiver: &RunningReceiver, reason: &str, reference: &str) -> usize {
    receiver
        .receiver
        .store()
        .reviews()
        .unwrap()
        .iter()
        .filter(|r| r.reason == reason && r.reference.as_deref() == Some(reference))
        .count()
}

#[test]
fn the_receiver_fulfils_once_and_sends_the_rest_to_review() {
    let worker = Worker::shared();
    let session = worker.portal_login(0);
    // A receiver with a placeholder secret cannot exist before the endpoint does: register the
    // endpoint at a reserved port first, then start the receiver there with its secret.
    let port = payrail_tests::worker::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let (endpoint_id, secret) = endpoint(worker, &session, &format!("{url}/webhooks"), None);
    let dir = std::env::temp_dir().join(format!("payrail-receiver-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let receiver = Receiver::new(
        Store::open(&dir.join("shop.db")).unwrap(),
        Webhooks::new(&secret),
        None,
        Duration::ZERO,
    )
    .unwrap();
    let listener = runtime()
        .block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))
        .unwrap();
    runtime().spawn(receiver.clone().run(listener, None));
    let running = RunningReceiver {
        url,
        receiver,
        _dir: TempDir(dir),
    };

    order(&running, "RCV-PAID", "40.00");
    order(&running, "RCV-UNDER", "40.00");
    let paid = payment(worker, 0, "RCV-PAID");
    let under = payment(worker, 0, "RCV-UNDER");
    let unknown = payment(worker, 0, "RCV-UNKNOWN");
    for (id, amount) in [(paid, "40.00"), (under, "30.00"), (unknown, "40.00")] {
        act(worker, 0, id, "pay", json!({ "amount": amount }));
        act(worker, 0, id, "settle", json!({}));
    }
    let store = running.receiver.store();
    eventually("the paid order fulfilled", Duration::from_secs(40), || {
        store.fulfilment("RCV-PAID").unwrap()
    });
    eventually(
        "the underpaid order in review",
        Duration::from_secs(40),
        || (reviews_of(&running, "underpaid", "RCV-UNDER") == 1).then_some(()),
    );
    eventually(
        "the unknown order in review",
        Duration::from_secs(40),
        || (reviews_of(&running, "unknown_order", "RCV-UNKNOWN") == 1).then_some(()),
    );
    assert_eq!(store.order("RCV-UNDER").unwrap().unwrap().state, "review");
    assert_eq!(store.fulfilment("RCV-UNDER").unwrap(), None);

    // The same payment.paid delivered again (a resend from the portal): acknowledged, stored
    // once, fulfilled once.
    let client = sdk(worker, 0);
    let events: Vec<payrail::webhooks::Event> = runtime()
        .block_on(
            client
                .events(
                    EventQuery::new()
                        .transaction_id(paid)
                        .kind(payrail::EventType::PaymentPaid),
                )
                .try_collect(),
        )
        .unwrap();
    let event_id = events[0].id.clone();
    assert_eq!(store.event_status(&event_id).unwrap(), Some((1, true)));
    let delivery = eventually("the paid delivery logged", Duration::from_secs(20), || {
        log(worker, &session, &endpoint_id, "event_type=payment.paid")["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["event_id"] == event_id.as_str() && d["status"] == "succeeded")
            .map(|d| d["id"].as_str().unwrap().to_owned())
    });
    let reply = worker.portal(
        Method::POST,
        &format!("/portal/api/deliveries/{delivery}/resend"),
        Some(&session),
        None,
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    eventually("the repeat delivered", Duration::from_secs(40), || {
        (store.event_status(&event_id).unwrap() == Some((2, true))).then_some(())
    });
    assert_eq!(
        store.fulfilment("RCV-PAID").unwrap(),
        Some((paid, "webhook".to_owned()))
    );
    assert_eq!(store.order("RCV-PAID").unwrap().unwrap().state, "fulfilled");
    assert_eq!(reviews_of(&running, "unknown_order", "RCV-PAID"), 0);
}

#[test]
fn a_lost_webhook_is_repaired_by_reconciliation() {
    let worker = Worker::shared();
    // This receiver has no endpoint: every webhook for its order is lost.
    let running = start_receiver("whsec_never_used", Some(sdk(worker, 0)));
    order(&running, "RCV-LOST", "25.00");
    let id = payment(worker, 0, "RCV-LOST");
    act(worker, 0, id, "pay", json!({"amount": "25.00"}));
    act(worker, 0, id, "settle", json!({}));
    let store = running.receiver.store();
    assert_eq!(store.fulfilment("RCV-LOST").unwrap(), None);

    let report = runtime().block_on(running.receiver.reconcile()).unwrap();
    assert!(report.seen >= 1 && report.fulfilled == 1, "{report:?}");
    assert_eq!(
        store.fulfilment("RCV-LOST").unwrap(),
        Some((id, "reconcile".to_owned()))
    );
    assert_eq!(store.order("RCV-LOST").unwrap().unwrap().state, "fulfilled");
    // Again: nothing new to repair, and nothing fulfilled twice.
    let again = runtime().block_on(running.receiver.reconcile()).unwrap();
    assert_eq!(again.fulfilled, 0, "{again:?}");
}

#[test]
fn racing_deliveries_of_one_event_are_stored_once_and_fulfil_once() {
    let running = start_receiver("whsec_race", None);
    order(&running, "RCV-RACE", "12.00");
    let body = json!({"id": "evt_race", "type": "payment.paid", "created": unix_now(),
        "data": {"object": "transaction", "id": 91, "merchant_id": 1, "status": "paid",
            "raw_status": "paid", "amount_status": "EXACT", "asset": "USDC", "currency": "EUR",
            "amount": {"gross": "12.00", "net": "11.88", "expected": "12.00", "psp_fee": "0.12",
                       "gas_fee": "0.00", "bridge_fee": null},
            "networks": {"payment": "polygon", "settlement": "polygon"},
            "tx_hashes": {"source": "0x1", "bridge": null, "settlement": "0x2"},
            "customer_email": null, "external_reference": "RCV-RACE",
            "created_at": "2026-11-22T00:00:00Z", "paid_at": "2026-11-22T00:00:05Z"}})
    .to_string();
    let signature = signature_header(&["whsec_race"], unix_now(), body.as_bytes());
    let http = reqwest::blocking::Client::new();
    let barrier = std::sync::Barrier::new(8);
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let racers: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    http.post(format!("{}/webhooks", running.url))
                        .header("Payrail-Signature", &signature)
                        .body(body.clone())
                        .send()
                        .unwrap()
                        .status()
                        .as_u16()
                })
            })
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert_eq!(statuses, [204; 8], "every delivery is acknowledged");
    let store = running.receiver.store();
    eventually("the event processed", Duration::from_secs(20), || {
        (store.event_status("evt_race").unwrap() == Some((8, true))).then_some(())
    });
    assert_eq!(
        store.fulfilment("RCV-RACE").unwrap(),
        Some((91, "webhook".to_owned()))
    );
    assert_eq!(store.order("RCV-RACE").unwrap().unwrap().state, "fulfilled");
}

#[test]
fn the_receiver_refuses_forgeries_and_stores_nothing() {
    let running = start_receiver("whsec_real", None);
    let http = reqwest::blocking::Client::new();
    let body = json!({"id": "evt_forged", "type": "payment.paid", "created": unix_now(),
                      "data": {}})
    .to_string();
    let post = |signature: Option<String>, body: String| {
        let mut request = http.post(format!("{}/webhooks", running.url)).body(body);
        if let Some(signature) = signature {
            request = request.header("Payrail-Signature", signature);
        }
        let reply = request.send().unwrap();
        let status = reply.status().as_u16();
        (status, reply.json::<Value>().unwrap_or(Value::Null))
    };
    let forged = signature_header(&["whsec_guess"], unix_now(), body.as_bytes());
    let (status, answer) = post(Some(forged), body.clone());
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("invalid_signature"))
    );
    assert_eq!(answer["error_description"], "no signature matches");
    let (status, answer) = post(None, body.clone());
    assert_eq!(
        (status, answer["error_description"].as_str()),
        (400, Some("no Payrail-Signature header"))
    );
    let stale = signature_header(&["whsec_real"], unix_now() - 3600, body.as_bytes());
    assert_eq!(post(Some(stale), body.clone()).0, 400);
    let huge = "x".repeat(payrail_receiver::MAX_BODY_BYTES + 1);
    let signed = signature_header(&["whsec_real"], unix_now(), huge.as_bytes());
    assert_eq!(post(Some(signed), huge).0, 413);
    assert_eq!(
        running.receiver.store().event_status("evt_forged").unwrap(),
        None
    );
}

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
    let printed = out.text();
    assert!(
        printed.contains("payment.paid") && printed.contains("200 OK"),
        "{printed}"
    );

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
