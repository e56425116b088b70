//! `scripts/bench`'s driver: latencies of Payrail's hot paths against a plain JavaScript Worker
//! doing the same on the same local D1 (`bench/reference`), measured interleaved so noise hits
//! both alike, each as a ratio to the floor (a route that touches no D1) and to the reference;
//! then checkout.js's size and its time to `Payrail.ready` in headless Chromium.
//!
//! Usage:
//! - `bench latency <ours> <reference> <persist_dir> <out.json>`: measures, prints a table,
//!   writes the p50s;
//! - `bench checkout <ours> <out.json>`: size (raw, gzip -9) and time to ready;
//! - `bench webhooks <ours> <persist_dir> <out.json>`: `BENCH_PAYMENTS` (default 2,000) payments driven
//!   through the sandbox lifecycle (two events each) into a loopback receiver: events per second
//!   delivered, lost and duplicated, against the receiver's raw rate; then a fifth of them again
//!   with a receiver that fails 20 % at random;
//! - `bench cost <ours> <persist_dir> <worker.log> <out.json>`: against a worker started with
//!   `PAYRAIL_METER=1`, the D1 cost of each step of a payment's life (from its `Payrail-D1`
//!   header, or the `payrail-d1` log lines of queue and cron work), the bytes each table grew
//!   by, and what follows for one database;
//! - `bench capacity <ours> <persist_dir> <out.json>`: checkout sessions and sandbox lifecycles
//!   at rising rates until p99 or errors break;
//! - `bench summary <small.json> [<large.json>] <checkout.json> [<webhooks.json>]`: one line per
//!   goal.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{json, Value};
use xtask::demo::INSTITUTIONS;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    match arg(0).as_str() {
        "latency" => latency(&arg(1), &arg(2), &arg(3), &arg(4), rounds()),
        "checkout" => checkout(&arg(1), &arg(2)),
        "webhooks" => webhooks(&arg(1), &arg(2), &arg(3)),
        "summary" => summary(&args[1..]),
        "cost" => cost(&arg(1), &arg(2), &arg(3), &arg(4)),
        "capacity" => capacity(&arg(1), &arg(2), &arg(3)),
        "objects" => objects(&arg(1), &arg(2), &arg(3)),
        _ => panic!("usage: bench latency|checkout|summary …"),
    }
}

/// Rounds per operation (`BENCH_ROUNDS`, default 60).
fn rounds() -> usize {
    std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|r| *r >= 5)
        .unwrap_or(60)
}

fn http() -> Client {
    Client::builder()
        .timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(4)
        .build()
        .expect("http client")
}

/// Makes one request of an operation.
type MakeRequest = Box<dyn Fn(&Client) -> RequestBuilder>;

/// One measured operation: how to make its request on ours, and on the reference when it has
/// one.
struct Operation {
    name: String,
    ours: MakeRequest,
    reference: Option<MakeRequest>,
    /// Part of the "lists and bearer check ≤ 1.0× the reference" goal.
    list_goal: bool,
}

fn p(times: &mut [f64], q: usize) -> f64 {
    times.sort_by(|a, b| a.total_cmp(b));
    times[(times.len() * q / 100).min(times.len() - 1)]
}

fn timed(request: RequestBuilder, what: &str) -> f64 {
    let started = Instant::now();
    let response = request.send().unwrap_or_else(|e| panic!("{what}: {e}"));
    let status = response.status();
    let body = response.bytes().unwrap_or_else(|e| panic!("{what}: {e}"));
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    assert!(
        status.is_success() || status.as_u16() == 404 || status.as_u16() == 303,
        "{what}: {status} {}",
        String::from_utf8_lossy(&body)
    );
    ms
}

fn token(http: &Client, base: &str) -> String {
    let client = &INSTITUTIONS[0].client;
    let reply: Value = http
        .post(format!("{base}/oauth/token"))
        .basic_auth(client.client_id, Some(client.client_secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .and_then(|r| r.json())
        .expect("token");
    reply["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token from {base}: {reply}"))
        .to_owned()
}

fn latency(ours: &str, reference: &str, persist: &str, out: &str, rounds: usize) {
    let http = http();
    let conn = rusqlite::Connection::open(
        xtask::localdb::database_file(std::path::Path::new(persist)).expect("local database"),
    )
    .expect("open local database");
    let q = |sql: &str| -> String {
        conn.query_row(sql, [], |r| {
            Ok(match r.get_ref(0)? {
                rusqlite::types::ValueRef::Integer(n) => n.to_string(),
                rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                _ => String::new(),
            })
        })
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    };
    let total = q("SELECT count(*) FROM transactions");
    let institution =
        q("SELECT institution_id FROM api_clients WHERE client_id = 'cli_demo_northwind'");
    let mine = q(&format!(
        "SELECT count(*) FROM transactions WHERE institution_id = {institution}"
    ));
    let newest = q(&format!(
        "SELECT max(id) FROM transactions WHERE institution_id = {institution}"
    ));
    let oldest = q(&format!(
        "SELECT min(id) FROM transactions WHERE institution_id = {institution}"
    ));
    let merchant = q(&format!(
        "SELECT merchant_id FROM transactions WHERE institution_id = {institution} ORDER BY id DESC LIMIT 1"
    ));
    // The created window starts at the institution's middle row and ends 150 of its rows later
    // (or at its newest), so that it holds a full page of 100 on the demo data as on a million
    // rows: a window of a fixed length held 6 rows of the demo data and 100 of the million, and
    // the rows-vs-rows ratio then measured the page's size rather than the database's.
    let mine_count = mine.parse::<i64>().unwrap_or(0);
    let created_at_row = |offset: i64| {
        q(&format!(
            "SELECT created_at FROM transactions WHERE institution_id = {institution} ORDER BY id \
             LIMIT 1 OFFSET {offset}"
        ))
    };
    let middle = created_at_row(mine_count / 2);
    let window_end = created_at_row((mine_count / 2 + 150).min(mine_count - 1).max(0));
    let reference_id = q(&format!(
        "SELECT external_reference FROM transactions WHERE institution_id = {institution} \
         AND external_reference IS NOT NULL ORDER BY id LIMIT 1"
    ));
    let merchant_id = q(&format!(
        "SELECT id FROM merchants WHERE institution_id = {institution} ORDER BY id LIMIT 1"
    ));
    let public_key = q(&format!(
        "SELECT public_key FROM merchants WHERE institution_id = {institution} \
         AND status = 'active' AND onboarding_status = 'completed' AND crypto_enabled = 1 \
         ORDER BY id LIMIT 1"
    ));
    drop(conn);
    let deep = oldest.parse::<i64>().unwrap_or(1) + 60;
    let ours_token = token(&http, ours);
    let reference_token = token(&http, reference);
    // The same database and the same shapes: a page reads the same on both.
    for path in [
        "/v1/transactions?limit=100&status=paid".to_owned(),
        format!("/v1/merchants/{merchant_id}"),
    ] {
        let get = |base: &str, token: &str| -> Value {
            http.get(format!("{base}{path}"))
                .bearer_auth(token)
                .send()
                .and_then(|r| r.json())
                .expect("a page")
        };
        assert_eq!(
            get(ours, &ours_token),
            get(reference, &reference_token),
            "{path} differs between Payrail and the reference"
        );
    }

    let mut ops: Vec<Operation> = Vec::new();
    let list = |name: String, path: String, list_goal: bool| {
        let (o, r) = (format!("{ours}{path}"), format!("{reference}{path}"));
        let (ot, rt) = (ours_token.clone(), reference_token.clone());
        Operation {
            name,
            ours: Box::new(move |h: &Client| h.get(&o).bearer_auth(&ot)),
            reference: Some(Box::new(move |h: &Client| h.get(&r).bearer_auth(&rt))),
            list_goal,
        }
    };
    let client = &INSTITUTIONS[0].client;
    let token_request = |base: String| {
        move |h: &Client| {
            h.post(format!("{base}/oauth/token"))
                .basic_auth(client.client_id, Some(client.client_secret))
                .form(&[("grant_type", "client_credentials")])
        }
    };
    ops.push(Operation {
        name: "token issue".into(),
        ours: Box::new(token_request(ours.to_owned())),
        reference: Some(Box::new(token_request(reference.to_owned()))),
        list_goal: false,
    });
    ops.push(list(
        "bearer check + id= lookup".into(),
        format!("/v1/transactions?id={newest}"),
        true,
    ));
    for limit in [25, 100] {
        for (shape, query) in [
            ("all", String::new()),
            ("status", "&status=paid".to_owned()),
            ("merchant", format!("&merchant_id={merchant}")),
            (
                "merchant+status",
                format!("&merchant_id={merchant}&status=paid"),
            ),
            (
                "created window",
                format!("&created_after={middle}&created_before={window_end}"),
            ),
            ("deep cursor", format!("&starting_after={deep}")),
        ] {
            ops.push(list(
                format!("transactions {shape}, limit {limit}"),
                format!("/v1/transactions?limit={limit}{query}"),
                true,
            ));
        }
    }
    ops.push(list(
        "transactions external_reference".into(),
        format!("/v1/transactions?external_reference={reference_id}"),
        true,
    ));
    ops.push(list(
        "merchants list".into(),
        "/v1/merchants?limit=25".into(),
        true,
    ));
    ops.push(list(
        "merchant lookup".into(),
        format!("/v1/merchants/{merchant_id}"),
        true,
    ));
    // Ours only: checkout and the hosted page (a session made once for the page and the poll).
    ops.extend(checkout_operations(&http, ours, &public_key, "", true));

    // The same paths for an institution held in its object (when the worker has the operator's
    // API: `BENCH_OPERATOR_TOKEN`): the second demo institution copied into its object and the
    // directory pointed at it; its lists beside the reference's reading of D1's copy.
    if let Ok(operator) = std::env::var("BENCH_OPERATOR_TOKEN") {
        ops.extend(held_operations(&http, ours, reference, persist, &operator));
    }

    let floor_ours = format!("{ours}/v1/no-such-route");
    let floor_reference = format!("{reference}/v1/no-such-route");
    // Warm both sides (JIT, connections, SQLite pages).
    for op in &ops {
        for _ in 0..3 {
            timed((op.ours)(&http), &op.name);
            if let Some(r) = &op.reference {
                timed(r(&http), &op.name);
            }
        }
    }
    let mut floors = (Vec::new(), Vec::new());
    let mut samples: Vec<(Vec<f64>, Vec<f64>)> =
        ops.iter().map(|_| (Vec::new(), Vec::new())).collect();
    for round in 0..rounds {
        floors.0.push(timed(http.get(&floor_ours), "floor"));
        floors.1.push(timed(http.get(&floor_reference), "floor"));
        for (op, (o, r)) in ops.iter().zip(samples.iter_mut()) {
            // Alternate which side goes first, so neither always meets a warmer cache.
            let mut ours_then_reference = || {
                o.push(timed((op.ours)(&http), &op.name));
                if let Some(reference) = &op.reference {
                    r.push(timed(reference(&http), &op.name));
                }
            };
            if round % 2 == 0 || op.reference.is_none() {
                ours_then_reference();
            } else {
                if let Some(reference) = &op.reference {
                    r.push(timed(reference(&http), &op.name));
                }
                o.push(timed((op.ours)(&http), &op.name));
            }
        }
    }
    let floor = p(&mut floors.0, 50);
    let floor_reference = p(&mut floors.1, 50);
    println!(
        "transactions: {total} in all, {mine} for the measured institution; {rounds} rounds, \
         interleaved; floor (a 404 that reads no D1): ours {floor:.2} ms, reference \
         {floor_reference:.2} ms"
    );
    println!(
        "{:<42} {:>8} {:>8} {:>7} {:>8} {:>8} {:>8}",
        "operation", "p50 ms", "p95 ms", "×floor", "JS p50", "JS p95", "×JS"
    );
    let mut results = BTreeMap::new();
    for (op, (o, r)) in ops.iter().zip(samples.iter_mut()) {
        let (p50, p95) = (p(o, 50), p(o, 95));
        let js = (!r.is_empty()).then(|| (p(r, 50), p(r, 95)));
        println!(
            "{:<42} {p50:>8.2} {p95:>8.2} {:>7.2} {:>8} {:>8} {:>8}",
            op.name,
            p50 / floor,
            js.map_or("—".to_owned(), |j| format!("{:.2}", j.0)),
            js.map_or("—".to_owned(), |j| format!("{:.2}", j.1)),
            js.map_or("—".to_owned(), |j| format!("{:.2}", p50 / j.0)),
        );
        results.insert(
            op.name.clone(),
            json!({"p50": p50, "p95": p95, "floor": floor, "js_p50": js.map(|j| j.0),
                   "list_goal": op.list_goal}),
        );
    }
    let doc = json!({"rows": total, "floor": floor, "floor_reference": floor_reference,
                     "operations": results});
    std::fs::write(out, serde_json::to_vec_pretty(&doc).unwrap()).expect("write results");
}

/// The operations of [`latency`] for the second demo institution once held in its object
/// (named `held: …`): copied by the operator's API and compared (the bench stops if a table
/// differs), then the directory's entry pointed at the object.
fn held_operations(
    http: &Client,
    ours: &str,
    reference: &str,
    persist: &str,
    operator: &str,
) -> Vec<Operation> {
    let conn = rusqlite::Connection::open(
        xtask::localdb::database_file(std::path::Path::new(persist)).expect("local database"),
    )
    .expect("open local database");
    let demo = &INSTITUTIONS[1];
    let (institution, public_key, newest): (i64, String, i64) = conn
        .query_row(
            "SELECT c.institution_id, \
             (SELECT public_key FROM merchants m WHERE m.institution_id = c.institution_id \
              AND status = 'active' AND onboarding_status = 'completed' AND crypto_enabled = 1 \
              ORDER BY id LIMIT 1), \
             (SELECT max(id) FROM transactions t WHERE t.institution_id = c.institution_id) \
             FROM api_clients c WHERE c.client_id = ?1",
            [demo.client.client_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("the second demo institution");
    drop(conn);
    assert_eq!(
        hold_institution(http, ours, persist, operator, 1),
        institution
    );
    let token_of = |base: &str| -> String {
        let reply: Value = http
            .post(format!("{base}/oauth/token"))
            .basic_auth(demo.client.client_id, Some(demo.client.client_secret))
            .form(&[("grant_type", "client_credentials")])
            .send()
            .and_then(|r| r.json())
            .expect("token");
        reply["access_token"].as_str().expect("a token").to_owned()
    };
    let (ours_token, reference_token) = (token_of(ours), token_of(reference));
    let mut ops = Vec::new();
    for (name, path) in [
        (
            "held: bearer check + id= lookup",
            format!("/v1/transactions?id={newest}"),
        ),
        (
            "held: transactions all, limit 25",
            "/v1/transactions?limit=25".to_owned(),
        ),
        (
            "held: transactions status, limit 100",
            "/v1/transactions?limit=100&status=paid".to_owned(),
        ),
    ] {
        let (o, r) = (format!("{ours}{path}"), format!("{reference}{path}"));
        let (ot, rt) = (ours_token.clone(), reference_token.clone());
        ops.push(Operation {
            name: name.to_owned(),
            ours: Box::new(move |h: &Client| h.get(&o).bearer_auth(&ot)),
            reference: Some(Box::new(move |h: &Client| h.get(&r).bearer_auth(&rt))),
            list_goal: false,
        });
    }
    ops.extend(checkout_operations(
        http,
        ours,
        &public_key,
        "held: ",
        false,
    ));
    ops
}

/// Checkout's operations for the merchant with `public_key`, named after `prefix`: a session
/// created (and, with `idempotency`, created with a new idempotency key each time), and the
/// hosted page and status poll of a session made once for them.
fn checkout_operations(
    http: &Client,
    ours: &str,
    public_key: &str,
    prefix: &str,
    idempotency: bool,
) -> Vec<Operation> {
    let session: Value = http
        .post(format!("{ours}/checkout/sessions"))
        .json(&checkout_options(public_key))
        .send()
        .and_then(|r| r.json())
        .expect("checkout session");
    let session_id = session["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{session}"))
        .to_owned();
    let mut ops = Vec::new();
    let (o, key) = (ours.to_owned(), public_key.to_owned());
    ops.push(Operation {
        name: format!("{prefix}checkout session create"),
        ours: Box::new(move |h: &Client| {
            h.post(format!("{o}/checkout/sessions"))
                .json(&checkout_options(&key))
        }),
        reference: None,
        list_goal: false,
    });
    if idempotency {
        // A new key each time (a key seen before is a replay).
        let (o, key) = (ours.to_owned(), public_key.to_owned());
        let run = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let count = std::sync::atomic::AtomicU64::new(0);
        ops.push(Operation {
            name: format!("{prefix}checkout session create, idempotency key"),
            ours: Box::new(move |h: &Client| {
                let n = count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let mut options = checkout_options(&key);
                options["idempotencyKey"] = json!(format!("bench-{run}-{n}"));
                h.post(format!("{o}/checkout/sessions")).json(&options)
            }),
            reference: None,
            list_goal: false,
        });
    }
    let page = format!("{ours}/checkout/{session_id}");
    ops.push(Operation {
        name: format!("{prefix}hosted page render"),
        ours: Box::new(move |h: &Client| h.get(&page)),
        reference: None,
        list_goal: false,
    });
    let poll = format!("{ours}/checkout/{session_id}/status");
    ops.push(Operation {
        name: format!("{prefix}status poll"),
        ours: Box::new(move |h: &Client| h.get(&poll)),
        reference: None,
        list_goal: false,
    });
    ops
}

fn checkout_options(public_key: &str) -> Value {
    json!({
        "publicKey": public_key, "amount": "19.90", "currency": "EUR", "title": "Bench",
        "externalReference": "BENCH", "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    })
}

/// checkout.js and its wasm, raw and gzipped, and the median time from the script's load to
/// `Payrail.ready` over several fresh loads in headless Chromium.
fn checkout(ours: &str, out: &str) {
    let root = payrail_tests::root();
    let mut sizes = BTreeMap::new();
    for file in ["checkout.js", "checkout_bg.wasm"] {
        let path = root.join("www").join(file);
        let raw = std::fs::metadata(&path).expect("built file").len();
        let gz = Command::new("gzip")
            .args(["-9c"])
            .arg(&path)
            .output()
            .expect("gzip")
            .stdout
            .len();
        sizes.insert(file, (raw, gz as u64));
    }
    let (raw, gz) = sizes
        .values()
        .fold((0, 0), |(r, g), (raw, gz)| (r + raw, g + gz));
    let browser = payrail_tests::browser::Browser::start();
    browser.goto(&format!("{ours}/shop/"));
    let mut times: Vec<f64> = (0..15)
        .map(|i| {
            let script = format!(
                "return new Promise(function (done) {{
                   delete window.Payrail;
                   var s = document.createElement('script');
                   s.src = '/checkout.js?load={i}';
                   s.onload = function () {{
                     var t0 = performance.now();
                     window.Payrail.ready.then(function () {{ done(performance.now() - t0); }});
                   }};
                   document.head.appendChild(s);
                 }});"
            );
            browser.eval(&script).as_f64().expect("a time")
        })
        .collect();
    let ready = p(&mut times, 50);
    println!("{:<22} {:>10} {:>10}", "file", "raw", "gzip -9");
    for (file, (raw, gz)) in &sizes {
        println!("{file:<22} {raw:>10} {gz:>10}");
    }
    println!("{:<22} {raw:>10} {gz:>10}", "total");
    println!("script loaded → Payrail.ready, median of 15 loads: {ready:.1} ms");
    let doc = json!({"raw": raw, "gzip": gz, "ready_ms": ready});
    std::fs::write(out, serde_json::to_vec_pretty(&doc).unwrap()).expect("write results");
}

fn read(path: &str) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}")))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn verdict(holds: bool) -> &'static str {
    if holds {
        "holds"
    } else {
        "MISSED"
    }
}

/// The checkout hot paths against the floor (p50 over it): session creation and the status
/// poll must stay within 2× it; the hosted page is shown beside them. Neither has a JavaScript
/// counterpart in the reference (`—`).
fn hot_paths(latency: &Value) {
    let ops = &latency["operations"];
    let ratio = |name: &str| -> Option<(f64, f64)> {
        let op = &ops[name];
        let p50 = op["p50"].as_f64()?;
        Some((p50, p50 / op["floor"].as_f64()?))
    };
    let mut holds = true;
    let mut parts = Vec::new();
    for (name, goal) in [
        ("checkout session create", true),
        ("status poll", true),
        ("hosted page render", false),
    ] {
        if let Some((p50, over)) = ratio(name) {
            if goal {
                holds &= over <= 2.0;
            }
            parts.push(format!("{name} {p50:.2} ms = {over:.2}×"));
        }
    }
    println!(
        "checkout hot paths ≤ 2× the floor ({:.2} ms; session create and status poll): {} → {}",
        latency["floor"].as_f64().unwrap_or(f64::NAN),
        parts.join(", "),
        verdict(holds)
    );
    // Held in its object: the shard's goals (session create ≤ 1.5×, status poll ≤ 1.3×).
    let held: Vec<(&str, f64)> = vec![
        ("held: checkout session create", 1.5),
        ("held: status poll", 1.3),
    ];
    let measured: Vec<(String, bool)> = held
        .iter()
        .filter_map(|(name, goal)| {
            ratio(name)
                .map(|(p50, over)| (format!("{name} {p50:.2} ms = {over:.2}×"), over <= *goal))
        })
        .collect();
    if !measured.is_empty() {
        println!(
            "held in its object: session create ≤ 1.5× and status poll ≤ 1.3× the floor: {} → {}",
            measured
                .iter()
                .map(|(text, _)| text.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            verdict(measured.iter().all(|(_, ok)| *ok))
        );
    }
}

/// One line per goal of the performance issue.
fn summary(files: &[String]) {
    let docs: Vec<Value> = files.iter().map(|f| read(f)).collect();
    let latency: Vec<&Value> = docs
        .iter()
        .filter(|d| d.get("operations").is_some())
        .collect();
    println!("summary (goal: figure → verdict)");
    if let Some(small) = latency.first() {
        let ops = small["operations"].as_object().unwrap();
        let worst = ops
            .iter()
            .filter(|(_, v)| v["list_goal"] == true)
            .filter_map(|(k, v)| Some((k, v["p50"].as_f64()? / v["js_p50"].as_f64()?)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((name, ratio)) = worst {
            println!(
                "lists and bearer check ≤ 1.0× the JS reference (p50): worst {ratio:.2}× ({name}) → {}",
                verdict(ratio <= 1.0)
            );
        }
        let token = &ops["token issue"];
        let vs_js = token["p50"].as_f64().unwrap() / token["js_p50"].as_f64().unwrap();
        let vs_floor = token["p50"].as_f64().unwrap() / token["floor"].as_f64().unwrap();
        println!(
            "token issue ≤ 1.0× the JS reference and ≤ 2× the floor: {vs_js:.2}× and {vs_floor:.2}× → {}",
            verdict(vs_js <= 1.0 && vs_floor <= 2.0)
        );
        hot_paths(small);
    }
    if let [small, large] = latency[..] {
        // The two sizes run minutes apart, on servers of their own: each p50 is taken over its
        // own run's floor, so a machine that is busier during one run than the other does not
        // read as growth.
        let growth = |op: &Value, large_op: &Value, (p50, floor): (&str, &str)| -> Option<f64> {
            let small_cost = op[p50].as_f64()? / small[floor].as_f64()?;
            let large_cost = large_op[p50].as_f64()? / large[floor].as_f64()?;
            Some(large_cost / small_cost)
        };
        let worst = small["operations"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, v)| v["list_goal"] == true)
            .filter_map(|(k, v)| {
                let large_op = &large["operations"][k];
                Some((
                    k,
                    growth(v, large_op, ("p50", "floor"))?,
                    growth(v, large_op, ("js_p50", "floor_reference")),
                ))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((name, ratio, js)) = worst {
            println!(
                "{} rows vs {} rows ≤ 1.2× on every shape (each over its run's floor): worst \
                 {ratio:.2}× ({name}; the JS reference {}) → {}",
                large["rows"].as_str().unwrap_or("?"),
                small["rows"].as_str().unwrap_or("?"),
                js.map_or("—".to_owned(), |j| format!("{j:.2}×")),
                verdict(ratio <= 1.2)
            );
        }
    }
    for d in &docs {
        if let Some(gz) = d.get("gzip").and_then(Value::as_u64) {
            println!(
                "checkout.js + wasm ≤ 12 KB gzipped: {:.1} KB → {}",
                gz as f64 / 1024.0,
                verdict(gz <= 12 * 1024)
            );
            let ready = d["ready_ms"].as_f64().unwrap_or(f64::MAX);
            println!(
                "ready ≤ 50 ms after load (median): {ready:.1} ms → {}",
                verdict(ready <= 50.0)
            );
        }
        if let Some(rate) = d.get("events_per_second").and_then(Value::as_f64) {
            println!(
                "webhooks ≥ 200 events/s delivered, none lost: {rate:.0}/s, {} lost, {} duplicates \
                 ({:.2}× the receiver's raw rate); with 20 % failures {} lost → {}",
                d["lost"],
                d["duplicates"],
                rate / d["raw_rate"].as_f64().unwrap_or(f64::NAN),
                d["flaky"]["lost"],
                verdict(rate >= 200.0 && d["lost"] == 0 && d["flaky"]["lost"] == 0)
            );
            println!(
                "  (bound: one workerd thread runs the driving API, D1, the queue and the \
                 consumer; the deliveries alone, after the driver stopped: {:.0}/s)",
                d["after_drive"]["events_per_second"]
                    .as_f64()
                    .unwrap_or(f64::NAN)
            );
        }
    }
}

/// Logs into the portal as institution 0's admin; the cookie and CSRF token.
fn portal_login(http: &Client, ours: &str) -> (String, String) {
    portal_login_of(http, ours, 0)
}

/// [`portal_login`] as demo institution `index`'s admin.
fn portal_login_of(http: &Client, ours: &str, index: usize) -> (String, String) {
    let (email, password) = INSTITUTIONS[index].admin;
    let reply = http
        .post(format!("{ours}/portal/api/login"))
        .json(&json!({"email": email, "password": password}))
        .send()
        .expect("login");
    let cookie = reply
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .expect("session cookie")
        .to_owned();
    let csrf = reply.json::<Value>().expect("login answer")["csrf_token"]
        .as_str()
        .expect("csrf")
        .to_owned();
    (cookie, csrf)
}

/// Adds `n` pending payments of 19.90 EUR for institution 0's first merchant straight to the
/// local D1 (checkout's own throttle would cap the rate at which a driver can create them, and
/// what is measured here is the events' delivery); their ids.
fn pending_payments(persist: &str, n: usize) -> Vec<i64> {
    let mut conn = rusqlite::Connection::open(
        xtask::localdb::database_file(std::path::Path::new(persist)).expect("local database"),
    )
    .expect("open local database");
    conn.busy_timeout(Duration::from_secs(10))
        .expect("busy timeout");
    let tx = conn.transaction().expect("transaction");
    let (institution, merchant, newest): (i64, i64, String) = tx
        .query_row(
            "SELECT m.institution_id, m.id, (SELECT COALESCE(max(created_at), '') FROM transactions) \
             FROM merchants m JOIN api_clients c ON c.institution_id = m.institution_id \
             AND c.client_id = ?1 ORDER BY m.id LIMIT 1",
            [INSTITUTIONS[0].client.client_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("a merchant");
    // Ids and creation times grow together: never before the newest row.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let created = shared_types::time::format_unix(now)
        .unwrap_or_default()
        .max(newest);
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        tx.execute(
            "INSERT INTO transactions (institution_id, merchant_id, status, raw_status, currency, \
             amount_expected, external_reference, created_at, updated_at) \
             VALUES (?1, ?2, 'pending', 'pending', 'EUR', '19.90', ?3, ?4, ?4)",
            rusqlite::params![institution, merchant, format!("BENCH-HOOK-{i}"), created],
        )
        .expect("insert payment");
        ids.push(tx.last_insert_rowid());
    }
    tx.commit().expect("commit");
    ids
}

/// Drives `ids` through pay and settle (two events each) from 8 threads.
fn drive(http: &Client, ours: &str, ids: &[i64]) {
    let client = &INSTITUTIONS[0].sandbox_client;
    let reply: Value = http
        .post(format!("{ours}/oauth/token"))
        .basic_auth(client.client_id, Some(client.client_secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .and_then(|r| r.json())
        .expect("sandbox token");
    let token = reply["access_token"].as_str().expect("token").to_owned();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(id) = ids.get(i) else {
                    break;
                };
                for (action, body) in [("pay", json!({"amount": "19.90"})), ("settle", json!({}))] {
                    let reply = http
                        .post(format!("{ours}/sandbox/transactions/{id}/{action}"))
                        .bearer_auth(&token)
                        .json(&body)
                        .send()
                        .expect("sandbox action");
                    assert!(reply.status().is_success(), "{action}: {}", reply.status());
                }
            });
        }
    });
}

/// Waits until the receiver has acknowledged (200) `expected` distinct event ids (or gives up);
/// when each distinct event was first acknowledged, and the duplicates (acknowledged again).
fn collect(
    receiver: &payrail_tests::receiver::Receiver,
    expected: usize,
    since: usize,
    deadline: Duration,
) -> (Vec<Instant>, usize) {
    let started = Instant::now();
    loop {
        let got = receiver.received();
        let mut seen = std::collections::HashSet::new();
        let mut firsts = Vec::new();
        let mut duplicates = 0;
        for r in got[since.min(got.len())..]
            .iter()
            .filter(|r| r.answered == 200)
        {
            let id = r.json()["id"].as_str().unwrap_or_default().to_owned();
            if seen.insert(id) {
                firsts.push(r.at);
            } else {
                duplicates += 1;
            }
        }
        if firsts.len() >= expected || started.elapsed() > deadline {
            return (firsts, duplicates);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Events per second over the arrivals from `from` (or the first arrival) to the last.
fn rate_since(arrivals: &[Instant], from: Option<Instant>) -> (usize, f64, f64) {
    let counted: Vec<Instant> = arrivals
        .iter()
        .copied()
        .filter(|at| from.is_none_or(|from| *at >= from))
        .collect();
    let start = from.or_else(|| counted.iter().min().copied());
    let seconds = match (start, counted.iter().max()) {
        (Some(a), Some(b)) => (*b - a).as_secs_f64().max(0.001),
        _ => f64::NAN,
    };
    (counted.len(), seconds, counted.len() as f64 / seconds)
}

fn webhooks(ours: &str, persist: &str, out: &str) {
    use payrail_tests::receiver::{Mode, Receiver};
    let n: usize = std::env::var("BENCH_PAYMENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let http = http();
    let receiver = Receiver::start();
    // The receiver's own rate for plain POSTs from one simple client.
    let raw_started = Instant::now();
    let raw_count = 500;
    for i in 0..raw_count {
        http.post(receiver.url("/raw"))
            .json(&json!({"id": format!("raw-{i}")}))
            .send()
            .expect("raw post");
    }
    let raw_rate = f64::from(raw_count) / raw_started.elapsed().as_secs_f64();
    let before = receiver.received().len();
    let (cookie, csrf) = portal_login(&http, ours);
    let endpoint: Value = http
        .post(format!("{ours}/portal/api/webhook-endpoints"))
        .header("Cookie", &cookie)
        .header("X-CSRF-Token", &csrf)
        .json(&json!({"url": receiver.url("/hooks"), "description": "bench receiver"}))
        .send()
        .and_then(|r| r.json())
        .expect("endpoint");
    assert!(endpoint["id"].is_string(), "{endpoint}");

    let driven = Instant::now();
    let ids = pending_payments(persist, n);
    drive(&http, ours, &ids);
    let drive_seconds = driven.elapsed().as_secs_f64();
    let drive_end = Instant::now();
    let expected = ids.len() * 2;
    let (arrivals, duplicates) = collect(&receiver, expected, before, Duration::from_secs(600));
    let got = arrivals.len();
    let (_, seconds, rate) = rate_since(&arrivals, None);
    // Once the driver stops, the one workerd thread serves the deliveries alone: the pipeline's
    // own rate (queue, claim, sign, POST, record) without the API requests that make the events.
    let (after, after_seconds, after_rate) = rate_since(&arrivals, Some(drive_end));
    println!(
        "webhooks: {n} payments driven in {drive_seconds:.1} s; {got} of {expected} events \
         delivered in {seconds:.1} s: {rate:.0} events/s ({} lost, {duplicates} duplicates); \
         the receiver alone takes {raw_rate:.0} plain POSTs/s from one client ({:.2}× of it); \
         after the driver stopped: {after} events in {after_seconds:.1} s, {after_rate:.0}/s",
        expected - got,
        rate / raw_rate
    );
    // A receiver that fails a fifth of the time: everything still arrives.
    receiver.set_mode(Mode::FailRandomly(20));
    let since = receiver.received().len();
    let flaky = pending_payments(persist, (n / 5).max(10));
    drive(&http, ours, &flaky);
    let flaky_expected = flaky.len() * 2;
    let (flaky_arrivals, flaky_duplicates) =
        collect(&receiver, flaky_expected, since, Duration::from_secs(600));
    let flaky_got = flaky_arrivals.len();
    let attempts = receiver.received().len() - since;
    println!(
        "with 20 % failures: {flaky_got} of {flaky_expected} events delivered ({} lost) in \
         {attempts} attempts, {flaky_duplicates} duplicates after dedupe on the event id",
        flaky_expected - flaky_got
    );
    let doc = json!({
        "events_per_second": rate, "events": got, "lost": expected - got,
        "duplicates": duplicates, "raw_rate": raw_rate, "drive_seconds": drive_seconds,
        "after_drive": {"events": after, "seconds": after_seconds, "events_per_second": after_rate},
        "flaky": {"events": flaky_got, "lost": flaky_expected - flaky_got,
                  "attempts": attempts, "duplicates": flaky_duplicates}
    });
    std::fs::write(out, serde_json::to_vec_pretty(&doc).unwrap()).expect("write results");
}

/// The `Payrail-D1` header's (or a `payrail-d1` log line's) counts.
#[derive(Debug, Default, Clone, Copy)]
struct D1Cost {
    trips: f64,
    statements: f64,
    rows_read: f64,
    rows_written: f64,
    duration_ms: f64,
    /// Calls to institutions' objects (an institution held in its object), and their
    /// statements.
    object_calls: f64,
    object_statements: f64,
}

impl D1Cost {
    fn parse(text: &str) -> Option<D1Cost> {
        let mut cost = D1Cost::default();
        let mut seen = false;
        for (k, v) in text.split(';').filter_map(|kv| kv.trim().split_once('=')) {
            let Ok(v) = v.parse::<f64>() else { continue };
            seen = true;
            match k {
                "trips" => cost.trips = v,
                "statements" => cost.statements = v,
                "rows_read" => cost.rows_read = v,
                "rows_written" => cost.rows_written = v,
                "duration_ms" => cost.duration_ms = v,
                "object_calls" => cost.object_calls = v,
                "object_statements" => cost.object_statements = v,
                _ => {}
            }
        }
        seen.then_some(cost)
    }

    fn add(&mut self, other: &D1Cost) {
        self.trips += other.trips;
        self.statements += other.statements;
        self.rows_read += other.rows_read;
        self.rows_written += other.rows_written;
        self.duration_ms += other.duration_ms;
        self.object_calls += other.object_calls;
        self.object_statements += other.object_statements;
    }

    fn scaled(&self, by: f64) -> D1Cost {
        D1Cost {
            trips: self.trips * by,
            statements: self.statements * by,
            rows_read: self.rows_read * by,
            rows_written: self.rows_written * by,
            duration_ms: self.duration_ms * by,
            object_calls: self.object_calls * by,
            object_statements: self.object_statements * by,
        }
    }
}

/// Sends a metered request; its status, body and D1 cost (the request fails the run when the
/// worker sent no `Payrail-D1`: it was not started metered).
fn metered(request: RequestBuilder, what: &str) -> (u16, Value, D1Cost) {
    let response = request.send().unwrap_or_else(|e| panic!("{what}: {e}"));
    let status = response.status().as_u16();
    let cost = response
        .headers()
        .get("payrail-d1")
        .and_then(|v| v.to_str().ok())
        .and_then(D1Cost::parse)
        .unwrap_or_else(|| panic!("{what}: no Payrail-D1 header; is PAYRAIL_METER=1 set?"));
    let text = response.text().unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body, cost)
}

/// Bytes per table (and its indexes, by `dbstat`'s `name`) in the local database.
fn table_bytes(persist: &str) -> BTreeMap<String, i64> {
    let conn = rusqlite::Connection::open(
        xtask::localdb::database_file(std::path::Path::new(persist)).expect("local database"),
    )
    .expect("open local database");
    conn.busy_timeout(Duration::from_secs(10))
        .expect("busy timeout");
    let mut statement = conn
        .prepare("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")
        .expect("dbstat (SQLite built with DBSTAT)");
    let rows = statement
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .expect("dbstat");
    rows.map(|r| r.expect("dbstat row")).collect()
}

/// The `payrail-d1 <kind>` lines the worker logged after byte `from` of `log`.
fn logged_costs(log: &str, from: usize, kind: &str) -> Vec<D1Cost> {
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&text[from.min(text.len())..]).into_owned();
    let marker = format!("payrail-d1 {kind} ");
    text.lines()
        .filter_map(|line| line.split_once(&marker).map(|(_, rest)| rest.to_owned()))
        .filter_map(|rest| {
            // `messages=N;` leads a queue line: counted per message below.
            let messages = rest
                .split(';')
                .find_map(|kv| kv.strip_prefix("messages="))
                .and_then(|n| n.trim().parse::<f64>().ok())
                .unwrap_or(1.0);
            D1Cost::parse(rest.trim_end_matches(|c: char| c.is_control()))
                .map(|c| c.scaled(1.0 / messages.max(1.0)))
        })
        .collect()
}

fn log_len(log: &str) -> usize {
    std::fs::metadata(log).map_or(0, |m| m.len() as usize)
}

/// Payments in the cost run (`BENCH_COST_PAYMENTS`, default 40).
fn cost_payments() -> usize {
    std::env::var("BENCH_COST_PAYMENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(40)
}

fn public_key(persist: &str, index: usize) -> String {
    let conn = rusqlite::Connection::open(
        xtask::localdb::database_file(std::path::Path::new(persist)).expect("local database"),
    )
    .expect("open local database");
    conn.query_row(
        "SELECT m.public_key FROM merchants m JOIN api_clients c \
         ON c.institution_id = m.institution_id AND c.client_id = ?1 \
         WHERE m.status = 'active' AND m.onboarding_status = 'completed' \
         AND m.crypto_enabled = 1 ORDER BY m.id LIMIT 1",
        [INSTITUTIONS[index].client.client_id],
        |r| r.get(0),
    )
    .expect("a merchant that takes crypto")
}

fn bearer(http: &Client, ours: &str, client: &xtask::demo::DemoClient) -> (String, D1Cost) {
    let (status, reply, cost) = metered(
        http.post(format!("{ours}/oauth/token"))
            .basic_auth(client.client_id, Some(client.client_secret))
            .form(&[("grant_type", "client_credentials")]),
        "token",
    );
    assert_eq!(status, 200, "token: {reply}");
    let token = reply["access_token"].as_str().expect("token").to_owned();
    (token, cost)
}

/// The D1 cost of each step of a payment's life, measured on a metered worker: for the first
/// demo institution, whose money is in D1, and (when the worker has the operator's API:
/// `BENCH_OPERATOR_TOKEN`) again for the second once held in its object, with the calls to
/// the object beside D1's.
fn cost(ours: &str, persist: &str, log: &str, out: &str) {
    let http = Client::builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("http client");
    let d1 = cost_pass(&http, ours, persist, log, 0);
    d1.print("D1 cost per step");
    let mut doc = d1.doc();
    if let Ok(operator) = std::env::var("BENCH_OPERATOR_TOKEN") {
        hold_institution(&http, ours, persist, &operator, 1);
        let held = cost_pass(&http, ours, persist, log, 1);
        held.print("held in its object: D1 cost per step, and the object's calls");
        doc["held"] = held.doc();
    }
    std::fs::write(out, serde_json::to_vec_pretty(&doc).unwrap()).expect("write results");
}

/// What one cost pass measured.
struct CostPass {
    payments: usize,
    steps: Vec<(String, Vec<D1Cost>)>,
    payment: D1Cost,
    growth: Vec<(String, f64)>,
    bytes_per_payment: f64,
    arrived: usize,
    expected_events: usize,
    unquoted: usize,
}

impl CostPass {
    /// The table, one payment's sum, the bytes and what follows for one database.
    fn print(&self, title: &str) {
        let n = self.payments;
        println!(
            "{title}, mean over {n} payments (3 events each; {} of {} delivered); from D1's own \
             meta under wrangler dev (workerd, local SQLite){}",
            self.arrived,
            self.expected_events,
            if self.unquoted > 0 {
                format!(
                    "; {} way-to-pay changes not quoted, left out",
                    self.unquoted
                )
            } else {
                String::new()
            }
        );
        println!(
            "{:<44} {:>6} {:>6} {:>10} {:>10} {:>10} {:>6} {:>6} {:>6}",
            "step", "trips", "stmts", "rows read", "rows wrtn", "D1 ms", "obj", "o.stm", "count"
        );
        for (name, costs) in &self.steps {
            let mean = mean_of(costs);
            println!(
                "{name:<44} {:>6.2} {:>6.2} {:>10.1} {:>10.1} {:>10.3} {:>6.2} {:>6.2} {:>6}",
                mean.trips,
                mean.statements,
                mean.rows_read,
                mean.rows_written,
                mean.duration_ms,
                mean.object_calls,
                mean.object_statements,
                costs.len()
            );
        }
        let payment = &self.payment;
        println!(
            "{:<44} {:>6.2} {:>6.2} {:>10.1} {:>10.1} {:>10.3} {:>6.2} {:>6.2}",
            "one payment (session … refund, 3 polls, 3 events)",
            payment.trips,
            payment.statements,
            payment.rows_read,
            payment.rows_written,
            payment.duration_ms,
            payment.object_calls,
            payment.object_statements
        );
        println!("bytes added to D1 per payment, by table or index (dbstat, pages in use):");
        for (name, bytes) in self.growth.iter().take(12) {
            println!("  {name:<52} {bytes:>9.0}");
        }
        println!("  {:<52} {:>9.0}", "all", self.bytes_per_payment.max(0.0));
        let (by_queries, by_time, ceiling) = self.ceiling();
        let days = |rate: f64| 10e9 / self.bytes_per_payment.max(1.0) / rate / 86_400.0;
        println!(
            "one database: {by_queries:.0} payments/s at 1,000 queries/s ({:.1} statements \
             each); {by_time:.0} payments/s by the D1 time measured here ({:.2} ms each); \
             ceiling {ceiling:.0} payments/s",
            payment.statements, payment.duration_ms
        );
        if self.bytes_per_payment < 1.0 {
            println!("D1 grew by no page per payment (what it writes updates rows it had)");
            return;
        }
        println!(
            "{:.0} payments per GB ({:.0} bytes each); 10 GB in {:.1} days at 10/s, {:.2} days \
             at 100/s, {:.3} days at 1,000/s (nothing pruned)",
            1e9 / self.bytes_per_payment.max(1.0),
            self.bytes_per_payment,
            days(10.0),
            days(100.0),
            days(1000.0)
        );
    }

    /// Payments/s one database takes by its query rate and by the D1 time measured, and the
    /// lower of the two.
    fn ceiling(&self) -> (f64, f64, f64) {
        // One database: D1 runs one query at a time (Cloudflare: about 1,000 queries/s at 1 ms).
        let by_queries = 1000.0 / self.payment.statements.max(1.0);
        let by_time = 1000.0 / self.payment.duration_ms.max(0.001);
        (by_queries, by_time, by_queries.min(by_time))
    }

    fn doc(&self) -> Value {
        let (by_queries, by_time, ceiling) = self.ceiling();
        let days = |rate: f64| 10e9 / self.bytes_per_payment.max(1.0) / rate / 86_400.0;
        let payment = &self.payment;
        let steps: BTreeMap<&String, Value> = self
            .steps
            .iter()
            .map(|(name, costs)| {
                let mean = mean_of(costs);
                (
                    name,
                    json!({"trips": mean.trips, "statements": mean.statements,
                           "rows_read": mean.rows_read, "rows_written": mean.rows_written,
                           "duration_ms": mean.duration_ms, "object_calls": mean.object_calls,
                           "object_statements": mean.object_statements,
                           "count": costs.len()}),
                )
            })
            .collect();
        json!({
            "payments": self.payments, "steps": steps,
            "payment": {"trips": payment.trips, "statements": payment.statements,
                        "rows_read": payment.rows_read, "rows_written": payment.rows_written,
                        "duration_ms": payment.duration_ms,
                        "object_calls": payment.object_calls,
                        "object_statements": payment.object_statements},
            "bytes_per_payment": self.bytes_per_payment,
            "growth": self.growth.iter().map(|(n, b)| json!({"name": n, "bytes": b}))
                .collect::<Vec<_>>(),
            "ceiling_per_second": ceiling, "by_queries": by_queries, "by_time": by_time,
            "payments_per_gb": 1e9 / self.bytes_per_payment.max(1.0),
            "days_to_10gb": {"10": days(10.0), "100": days(100.0), "1000": days(1000.0)}
        })
    }
}

/// The mean of `costs`.
fn mean_of(costs: &[D1Cost]) -> D1Cost {
    let mut sum = D1Cost::default();
    for c in costs {
        sum.add(c);
    }
    sum.scaled(1.0 / costs.len().max(1) as f64)
}

/// Moves demo institution `index`'s money into its object through the operator's API (frozen,
/// copied and compared, its books carried, the directory pointed at it: `xtask move`'s path;
/// the bench stops if it does not move); its id.
fn hold_institution(http: &Client, ours: &str, persist: &str, operator: &str, index: usize) -> i64 {
    let conn = rusqlite::Connection::open(
        xtask::localdb::database_file(std::path::Path::new(persist)).expect("local database"),
    )
    .expect("open local database");
    conn.busy_timeout(Duration::from_secs(10))
        .expect("busy timeout");
    let institution: i64 = conn
        .query_row(
            "SELECT institution_id FROM api_clients WHERE client_id = ?1",
            [INSTITUTIONS[index].client.client_id],
            |r| r.get(0),
        )
        .expect("the demo institution");
    let report: Value = http
        .post(format!("{ours}/operator/institutions/{institution}/move"))
        .bearer_auth(operator)
        .send()
        .and_then(|r| r.json())
        .expect("move into the object");
    assert_eq!(report["moved"], true, "the move did not happen: {report}");
    institution
}

/// One pass of [`cost`] for demo institution `index`.
fn cost_pass(http: &Client, ours: &str, persist: &str, log: &str, index: usize) -> CostPass {
    let n = cost_payments();
    let demo = &INSTITUTIONS[index];
    let key = public_key(persist, index);
    // The demo's partner client reads transactions and merchants; the feed needs events:read,
    // granted here on the bench's own copy of the demo data.
    rusqlite::Connection::open(
        xtask::localdb::database_file(std::path::Path::new(persist)).expect("local database"),
    )
    .and_then(|conn| {
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.execute(
            "UPDATE api_clients SET scopes = 'transactions:read merchants:read events:read' \
             WHERE client_id = ?1",
            [demo.client.client_id],
        )
    })
    .expect("grant events:read");
    let receiver = payrail_tests::receiver::Receiver::start();
    let (cookie, csrf) = portal_login_of(http, ours, index);
    let endpoint: Value = http
        .post(format!("{ours}/portal/api/webhook-endpoints"))
        .header("Cookie", &cookie)
        .header("X-CSRF-Token", &csrf)
        .json(&json!({"url": receiver.url("/hooks"), "description": "cost receiver"}))
        .send()
        .and_then(|r| r.json())
        .expect("endpoint");
    assert!(endpoint["id"].is_string(), "{endpoint}");
    let (api, token_cost) = bearer(http, ours, &demo.client);
    let (sandbox, _) = bearer(http, ours, &demo.sandbox_client);
    let mut steps: Vec<(String, Vec<D1Cost>)> = Vec::new();
    let mut add = |name: &str, cost: D1Cost| match steps.iter_mut().find(|(s, _)| s == name) {
        Some((_, costs)) => costs.push(cost),
        None => steps.push((name.to_owned(), vec![cost])),
    };
    add("token issue (one batch)", token_cost);
    let before = table_bytes(persist);
    let queue_from = log_len(log);
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut unquoted = 0;
    let mut sent_events = 0;
    for i in 0..n {
        let mut options = checkout_options(&key);
        options["externalReference"] = json!(format!("COST-{run}-{i}"));
        let (status, session, c) = metered(
            http.post(format!("{ours}/checkout/sessions"))
                .json(&options),
            "session",
        );
        assert_eq!(status, 201, "session: {session}");
        add("checkout session create", c);
        let id = session["id"].as_str().expect("session id").to_owned();
        let transaction = session["transaction_id"].as_i64().expect("transaction id");
        let (_, _, c) = metered(http.get(format!("{ours}/checkout/{id}")), "hosted page");
        add("hosted page render", c);
        let method = shared_types::quote::METHODS[(i + 1) % 2];
        let (status, _, c) = metered(
            http.post(format!("{ours}/checkout/{id}/method"))
                .form(&[("method", format!("{}:{}", method.asset, method.network))]),
            "way-to-pay change",
        );
        if status == 303 {
            add("way-to-pay change", c);
        } else {
            unquoted += 1;
        }
        for _ in 0..3 {
            let (status, _, c) = metered(
                http.get(format!("{ours}/checkout/{id}/status")),
                "status poll",
            );
            assert_eq!(status, 200, "status poll");
            add("status poll (each)", c);
        }
        for (action, body, step) in [
            (
                "pay",
                json!({"amount": "19.90"}),
                "detection + credit (sandbox pay)",
            ),
            (
                "settle",
                json!({}),
                "settlement + confirmation (sandbox settle)",
            ),
            (
                "refund",
                json!({"amount": "19.90"}),
                "refund (sandbox refund)",
            ),
        ] {
            let (status, reply, c) = metered(
                http.post(format!(
                    "{ours}/sandbox/transactions/{transaction}/{action}"
                ))
                .bearer_auth(&sandbox)
                .json(&body),
                action,
            );
            assert_eq!(status, 200, "{action}: {reply}");
            add(step, c);
            // Each action makes one event; its delivery (queue work, metered apart) is let
            // finish before the next request, so no request's figures carry a delivery's.
            sent_events += 1;
            collect(&receiver, sent_events, 0, Duration::from_secs(10));
        }
        let (status, _, c) = metered(
            http.get(format!("{ours}/v1/events?limit=25"))
                .bearer_auth(&api),
            "events",
        );
        assert_eq!(status, 200, "events feed");
        add("events feed read (25)", c);
        let (status, _, c) = metered(
            http.get(format!("{ours}/v1/transactions?limit=25"))
                .bearer_auth(&api),
            "list",
        );
        assert_eq!(status, 200, "transactions list");
        add("transactions list (25)", c);
    }
    // Every payment made events; wait until the receiver has them, so the queue's lines are in.
    let expected_events = n * 3;
    let (arrived, _) = collect(&receiver, expected_events, 0, Duration::from_secs(120));
    let deliveries = logged_costs(log, queue_from, "queue");
    for c in &deliveries {
        add("webhook delivery + attempt (per message)", *c);
    }
    // One cron run over what is left (sweeps, retries, watches): its own line.
    let cron_from = log_len(log);
    let _ = http
        .get(format!("{ours}/__scheduled?cron=*+*+*+*+*"))
        .send();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut cron = Vec::new();
    while cron.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        cron = logged_costs(log, cron_from, "cron");
    }
    for c in &cron {
        add("cron run (all due work)", *c);
    }
    let after = table_bytes(persist);
    let mut growth: Vec<(String, f64)> = after
        .iter()
        .map(|(name, bytes)| {
            let was = before.get(name).copied().unwrap_or(0);
            (name.clone(), (bytes - was) as f64 / n as f64)
        })
        .filter(|(_, b)| *b > 0.0)
        .collect();
    growth.sort_by(|a, b| b.1.total_cmp(&a.1));
    let bytes_per_payment: f64 = growth.iter().map(|(_, b)| b).sum();
    // A payment's life: everything but the token, the list and the cron run, whose costs are
    // not per payment; deliveries are per message, three per payment.
    let mut payment = D1Cost::default();
    for (name, costs) in &steps {
        let per_payment = match name.as_str() {
            "token issue (one batch)" | "transactions list (25)" | "cron run (all due work)" => 0.0,
            "status poll (each)" => 3.0,
            "webhook delivery + attempt (per message)" => 3.0,
            _ => 1.0,
        };
        payment.add(&mean_of(costs).scaled(per_payment));
    }
    CostPass {
        payments: n,
        steps,
        payment,
        growth,
        bytes_per_payment,
        arrived: arrived.len(),
        expected_events,
        unquoted,
    }
}

/// The p99 bound of the saturation run: past it a rate is over the ceiling.
const CAPACITY_P99_MS: f64 = 250.0;

/// The publishable keys of demo institution `index`'s merchants that take crypto and allow the
/// bench's return origin.
fn public_keys(persist: &str, index: usize) -> Vec<String> {
    let conn = rusqlite::Connection::open(
        xtask::localdb::database_file(std::path::Path::new(persist)).expect("local database"),
    )
    .expect("open local database");
    let mut statement = conn
        .prepare(
            "SELECT m.public_key FROM merchants m JOIN api_clients c \
             ON c.institution_id = m.institution_id AND c.client_id = ?1 \
             WHERE m.status = 'active' AND m.onboarding_status = 'completed' \
             AND m.crypto_enabled = 1 AND EXISTS (SELECT 1 FROM merchant_origins o \
             WHERE o.merchant_id = m.id AND o.origin = 'https://shop.example') ORDER BY m.id",
        )
        .expect("prepare");
    let keys: Vec<String> = statement
        .query_map([INSTITUTIONS[index].client.client_id], |r| r.get(0))
        .expect("merchants")
        .map(|k| k.expect("a key"))
        .collect();
    assert!(!keys.is_empty(), "no merchant takes crypto");
    keys
}

/// Forgets every throttle window of the local database (`auth_failures`), between the capacity
/// run's stages: each stage starts with the limits' windows empty, as a minute later would.
fn forget_windows(persist: &str) {
    let conn = rusqlite::Connection::open(
        xtask::localdb::database_file(std::path::Path::new(persist)).expect("local database"),
    )
    .expect("open local database");
    conn.busy_timeout(Duration::from_secs(10))
        .expect("busy timeout");
    conn.execute("DELETE FROM auth_failures", [])
        .expect("forget windows");
}

/// The saturation run. Its customers are many, as in production: each payment's requests come
/// from an address of their own (`CF-Connecting-IP`, which `wrangler dev` passes through and
/// Cloudflare sets), spread over the institution's merchants, and each stage starts with the
/// limits' windows empty; so what breaks it is load, not the per-address and per-key limits on
/// checkout sessions (300 and 600 a minute), which the tests cover. Run for the first demo
/// institution, whose money is in D1, and (when the worker has the operator's API:
/// `BENCH_OPERATOR_TOKEN`) again for the second once held in its object: what one institution's
/// object takes.
fn capacity(ours: &str, persist: &str, out: &str) {
    let http = Client::builder()
        .timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(64)
        .build()
        .expect("http client");
    let mut doc = capacity_pass(&http, ours, persist, 0);
    if let Ok(operator) = std::env::var("BENCH_OPERATOR_TOKEN") {
        hold_institution(&http, ours, persist, &operator, 1);
        println!("held in its object (the second demo institution):");
        doc["held"] = capacity_pass(&http, ours, persist, 1);
    }
    std::fs::write(out, serde_json::to_vec_pretty(&doc).unwrap()).expect("write results");
}

/// Payments of demo institution `index` (a checkout session, then sandbox pay and settle: three
/// requests, three steps of its money) at rising rates, each for a few seconds, open loop
/// (started on schedule whether or not earlier ones have answered), until p99 passes
/// [`CAPACITY_P99_MS`] or more than 1 % fail: each stage, where it broke and which step took
/// the most D1 time (from the meter's header), and the most steps per second a stage held.
fn capacity_pass(http: &Client, ours: &str, persist: &str, index: usize) -> Value {
    let keys = public_keys(persist, index);
    let (sandbox, _) = bearer(http, ours, &INSTITUTIONS[index].sandbox_client);
    let seconds_per_rate = 8.0;
    let rates = [2.0, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0];
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut stages = Vec::new();
    let mut broke = None;
    for (stage, rate) in rates.iter().enumerate() {
        let total = (rate * seconds_per_rate) as usize;
        let interval = Duration::from_secs_f64(1.0 / rate);
        forget_windows(persist);
        let started = Instant::now();
        // (latency ms of each request, failed, D1 cost by step)
        let results = std::sync::Mutex::new((Vec::new(), 0usize, BTreeMap::<&str, D1Cost>::new()));
        std::thread::scope(|scope| {
            for i in 0..total {
                let at = started + interval * i as u32;
                if let Some(wait) = at.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let (key, sandbox, results) = (&keys[i % keys.len()], &sandbox, &results);
                let customer = format!("10.{stage}.{}.{}", i / 250 % 250, i % 250 + 1);
                scope.spawn(move || {
                    let mut options = checkout_options(key);
                    options["externalReference"] = json!(format!("CAP-{run}-{stage}-{i}"));
                    let record = |step: &'static str, request: RequestBuilder| {
                        let t = Instant::now();
                        let reply = request.send();
                        let ms = t.elapsed().as_secs_f64() * 1000.0;
                        let mut r = results.lock().unwrap();
                        r.0.push(ms);
                        match reply {
                            Ok(reply) if reply.status().is_success() => {
                                if let Some(c) = reply
                                    .headers()
                                    .get("payrail-d1")
                                    .and_then(|v| v.to_str().ok())
                                    .and_then(D1Cost::parse)
                                {
                                    r.2.entry(step).or_default().add(&c);
                                }
                                reply.json::<Value>().ok()
                            }
                            _ => {
                                r.1 += 1;
                                None
                            }
                        }
                    };
                    let Some(session) = record(
                        "checkout session create",
                        http.post(format!("{ours}/checkout/sessions"))
                            .header("CF-Connecting-IP", &customer)
                            .json(&options),
                    ) else {
                        return;
                    };
                    let Some(id) = session["transaction_id"].as_i64() else {
                        return;
                    };
                    for (action, body) in
                        [("pay", json!({"amount": "19.90"})), ("settle", json!({}))]
                    {
                        let step = if action == "pay" {
                            "sandbox pay"
                        } else {
                            "sandbox settle"
                        };
                        record(
                            step,
                            http.post(format!("{ours}/sandbox/transactions/{id}/{action}"))
                                .header("CF-Connecting-IP", &customer)
                                .bearer_auth(sandbox)
                                .json(&body),
                        );
                    }
                });
            }
        });
        let elapsed = started.elapsed().as_secs_f64();
        let (mut times, failed, by_step) = results.into_inner().unwrap();
        let requests = times.len();
        let (p50, p99) = (p(&mut times, 50), p(&mut times, 99));
        let achieved = total as f64 / elapsed;
        let (dominant, d1_ms) = by_step
            .iter()
            .max_by(|a, b| a.1.duration_ms.total_cmp(&b.1.duration_ms))
            .map_or(("—", 0.0), |(s, c)| (*s, c.duration_ms));
        let d1_total: f64 = by_step.values().map(|c| c.duration_ms).sum();
        println!(
            "{rate:>5.0} payments/s offered, {achieved:>6.1} done: {requests} requests, p50 \
             {p50:.1} ms, p99 {p99:.1} ms, {failed} failed; D1 time {:.0} ms/s, most in \
             {dominant} ({:.0} %)",
            d1_total / elapsed,
            100.0 * d1_ms / d1_total.max(0.001)
        );
        stages.push(
            json!({"rate": rate, "achieved": achieved, "requests": requests,
                           "p50": p50, "p99": p99, "failed": failed,
                           "d1_ms_per_second": d1_total / elapsed, "dominant": dominant}),
        );
        let why = if failed * 100 > requests {
            Some(format!("{failed} of {requests} requests failed"))
        } else if p99 > CAPACITY_P99_MS {
            Some(format!("p99 {p99:.0} ms > {CAPACITY_P99_MS:.0} ms"))
        } else {
            None
        };
        if let Some(why) = why {
            broke = Some(json!({"rate": rate, "why": why, "dominant": dominant}));
            break;
        }
    }
    match &broke {
        Some(b) => println!(
            "broke at {} payments/s offered: {}; the step with the most D1 time: {}",
            b["rate"],
            b["why"].as_str().unwrap_or_default(),
            b["dominant"].as_str().unwrap_or_default()
        ),
        None => println!(
            "held every rate up to {} payments/s",
            rates[rates.len() - 1]
        ),
    }
    // The stages it held, at what they achieved: three steps a payment.
    let held = stages.len() - usize::from(broke.is_some());
    let steps = stages[..held]
        .iter()
        .filter_map(|s| s["achieved"].as_f64())
        .fold(0.0, f64::max)
        * 3.0;
    println!("most steps/s held within the bound: {steps:.0}");
    json!({"p99_bound_ms": CAPACITY_P99_MS, "stages": stages, "broke": broke,
           "steps_per_second": steps})
}

/// Checkouts polled in each institution's object by [`objects`].
const OBJECT_CHECKOUTS: usize = 8;
/// Rates offered by [`objects`], in polls a second, each for [`OBJECT_STAGE_SECONDS`].
const OBJECT_RATES: [f64; 8] = [50.0, 100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 800.0];
/// How long [`objects`] offers each rate.
const OBJECT_STAGE_SECONDS: f64 = 5.0;
/// Requests [`objects`] keeps in flight at most (past it, the run turns closed loop and its
/// p99 shows the backlog).
const OBJECT_CLIENTS: usize = 64;

/// One institution's object against several, over fetch (`scripts/bench --objects`, which
/// gives the worker the operator's API): every demo institution moved into its object and
/// [`OBJECT_CHECKOUTS`] checkouts made in each, then status polls of them (a held poll is one
/// call to its object and no D1 statement: the isolate knows where the checkout it made is
/// held) at rising rates, open loop, first all to the first institution's object, then spread
/// evenly over every institution's. Each prints the most steps (polls) a second held within
/// [`CAPACITY_P99_MS`], and the two are compared. Local workerd runs every object on one
/// thread, beside the worker: more objects cannot add capacity here, so the comparison says
/// whether a step costs more when it is spread over objects; scale-out shows only deployed.
fn objects(ours: &str, persist: &str, out: &str) {
    let operator = std::env::var("BENCH_OPERATOR_TOKEN")
        .expect("BENCH_OPERATOR_TOKEN (scripts/bench --objects sets it)");
    let http = Client::builder()
        .timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(OBJECT_CLIENTS)
        .build()
        .expect("http client");
    let mut polls: Vec<Vec<String>> = Vec::new();
    for index in 0..INSTITUTIONS.len() {
        hold_institution(&http, ours, persist, &operator, index);
        let keys = public_keys(persist, index);
        let urls = (0..OBJECT_CHECKOUTS)
            .map(|i| {
                let session: Value = http
                    .post(format!("{ours}/checkout/sessions"))
                    .json(&checkout_options(&keys[i % keys.len()]))
                    .send()
                    .and_then(|r| r.json())
                    .expect("checkout session");
                let id = session["id"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{session}"));
                format!("{ours}/checkout/{id}/status")
            })
            .collect();
        polls.push(urls);
    }
    println!("one institution's object:");
    let one = object_pass(&http, &polls[..1]);
    println!("{} institutions' objects, polled in turn:", polls.len());
    let all = object_pass(&http, &polls);
    let ratio = all / one.max(1.0);
    println!(
        "most steps/s within p99 {CAPACITY_P99_MS:.0} ms: one object {one:.0}, {} objects \
         {all:.0} ({ratio:.2}× one; the goal for one object: 400)",
        polls.len()
    );
    let doc = json!({"p99_bound_ms": CAPACITY_P99_MS, "one_object": one,
                     "objects": polls.len(), "all_objects": all, "ratio": ratio});
    std::fs::write(out, serde_json::to_vec_pretty(&doc).unwrap()).expect("write results");
}

/// Polls the checkouts of `groups` (one group an institution's) in turn at each of
/// [`OBJECT_RATES`] until p99 passes [`CAPACITY_P99_MS`] or more than 1 % fail; the most polls
/// a second a stage achieved within the bound.
fn object_pass(http: &Client, groups: &[Vec<String>]) -> f64 {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // In turn: institution by institution, then checkout by checkout.
    let order: Vec<&str> = (0..OBJECT_CHECKOUTS)
        .flat_map(|i| groups.iter().map(move |g| g[i].as_str()))
        .collect();
    let mut best: f64 = 0.0;
    for rate in OBJECT_RATES {
        let total = (rate * OBJECT_STAGE_SECONDS) as usize;
        let interval = Duration::from_secs_f64(1.0 / rate);
        let next = AtomicUsize::new(0);
        let results = std::sync::Mutex::new((Vec::with_capacity(total), 0usize));
        let started = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..OBJECT_CLIENTS {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        return;
                    }
                    let at = started + interval * i as u32;
                    if let Some(wait) = at.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let t = Instant::now();
                    let ok = http
                        .get(order[i % order.len()])
                        .send()
                        .is_ok_and(|r| r.status().is_success());
                    let ms = t.elapsed().as_secs_f64() * 1000.0;
                    let mut r = results.lock().unwrap();
                    r.0.push(ms);
                    r.1 += usize::from(!ok);
                });
            }
        });
        let elapsed = started.elapsed().as_secs_f64();
        let (mut times, failed) = results.into_inner().unwrap();
        let (p50, p99) = (p(&mut times, 50), p(&mut times, 99));
        let achieved = total as f64 / elapsed;
        println!(
            "  {rate:>5.0} polls/s offered, {achieved:>6.1} done: p50 {p50:.1} ms, p99 \
             {p99:.1} ms, {failed} failed"
        );
        if failed * 100 > total || p99 > CAPACITY_P99_MS {
            println!("  broke at {rate:.0} polls/s offered");
            return best;
        }
        best = best.max(achieved);
    }
    println!("  held every rate offered");
    best
}
