//! Prints list-endpoint latencies against a running worker, per filter shape.
//!
//! `scripts/bench` starts the worker on the local D1 and runs this; after
//! `xtask bulk-data --transactions 1000000` the figures show whether a page's cost grows with the
//! table (it should not).
//!
//! Usage: `bench <base_url> [persist_dir]`.

use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use serde_json::Value;
use xtask::demo::INSTITUTIONS;

const ROUNDS: usize = 40;

fn main() {
    let mut args = std::env::args().skip(1);
    let base = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:8788".to_owned());
    let persist = args.next().unwrap_or_else(|| ".wrangler/state".to_owned());
    let http = Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client");

    let conn = rusqlite::Connection::open(
        xtask::localdb::database_file(std::path::Path::new(&persist)).expect("local database"),
    )
    .expect("open local database");
    let (total, mine, oldest, merchant): (i64, i64, i64, i64) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM transactions), \
                    (SELECT count(*) FROM transactions WHERE institution_id = 1), \
                    (SELECT min(id) FROM transactions WHERE institution_id = 1), \
                    (SELECT merchant_id FROM transactions WHERE institution_id = 1 \
                     ORDER BY id DESC LIMIT 1)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .expect("counts");
    // A one-day window and an early bound inside the data, whatever its dates.
    let (middle, early): (String, String) = conn
        .query_row(
            "SELECT (SELECT created_at FROM transactions WHERE institution_id = 1 \
                     ORDER BY id LIMIT 1 OFFSET (SELECT count(*) / 2 FROM transactions \
                     WHERE institution_id = 1)), \
                    (SELECT created_at FROM transactions WHERE institution_id = 1 \
                     ORDER BY id LIMIT 1 OFFSET 200)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("dates");
    let day_after = shared_types::time::format_unix(
        shared_types::time::parse_unix(&middle).expect("timestamp") + 86_400,
    )
    .expect("in range");
    let reference: String = conn
        .query_row(
            "SELECT external_reference FROM transactions WHERE institution_id = 1 \
             AND external_reference IS NOT NULL ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .expect("a reference");
    drop(conn);

    let client = &INSTITUTIONS[0].client;
    let token: Value = http
        .post(format!("{base}/oauth/token"))
        .basic_auth(client.client_id, Some(client.client_secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .and_then(|r| r.json())
        .expect("token");
    let token = token["access_token"]
        .as_str()
        .expect("access_token")
        .to_owned();

    println!("transactions: {total} in all, {mine} for the measured institution");
    println!(
        "{:<78} {:>8} {:>8} {:>8}",
        "GET /v1/transactions?…", "p50 ms", "p95 ms", "rows"
    );
    let deep = oldest + 50;
    let shapes = [
        "limit=100".to_owned(),
        "limit=100&status=refunded".to_owned(),
        format!("limit=100&merchant_id={merchant}"),
        format!("limit=100&merchant_id={merchant}&status=paid"),
        format!("limit=100&starting_after={deep}"),
        format!("limit=100&created_after={middle}&created_before={day_after}"),
        format!("external_reference={reference}"),
        format!("limit=100&status=pending&created_before={early}"),
    ];
    for query in shapes {
        let url = format!("{base}/v1/transactions?{query}");
        let mut times = Vec::with_capacity(ROUNDS);
        let mut rows = 0;
        for _ in 0..ROUNDS {
            let started = Instant::now();
            let body: Value = http
                .get(&url)
                .bearer_auth(&token)
                .send()
                .and_then(|r| r.error_for_status())
                .and_then(|r| r.json())
                .unwrap_or_else(|e| panic!("{query}: {e}"));
            times.push(started.elapsed());
            rows = body["data"].as_array().map_or(0, Vec::len);
        }
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "{query:<78} {:>8.2} {:>8.2} {rows:>8}",
            ms(times[ROUNDS / 2]),
            ms(times[ROUNDS * 95 / 100])
        );
    }
}
