//! Merchant balances in the portal: each asset's balance on the merchant page (an empty state
//! before there is any), its statement newest first with the running balance and a cursor, the
//! CSV export of all of it, the debt limit an admin sets through the form or the JSON API (CSRF,
//! viewers refused, bad amounts refused naming the field, every change e-mailed), and the same
//! pages in Chromium at desktop and phone widths with no serious accessibility violation.
//!
//! The books' rows are seeded straight into the worker's database: what posts them (payments,
//! settlements, refunds) is tested where it is built.

use std::sync::{Mutex, MutexGuard, OnceLock};

use payrail_tests::browser::{exclusive, Browser};
use payrail_tests::chain::TEST_XPUB;
use payrail_tests::{PortalSession, Reply, Worker};
use reqwest::Method;
use serde_json::{json, Value};

/// Polygon's USDC (6 decimals) and Base's ether (18), on a node nobody runs: nothing here reads
/// a chain, but these are the assets the deployment takes, so a debt limit can be set in them.
const USDC: &str = "0x3c499c542cef5e3811e1192ce70d8cc03d5c3359";
const CHAINS: &str = r#"{"polygon": {"rpc_url": "http://127.0.0.1:9/none", "chain_id": 137, "tokens": {"USDC": {"address": "0x3c499c542cef5e3811e1192ce70d8cc03d5c3359"}}}, "base": {"rpc_url": "http://127.0.0.1:9/none", "chain_id": 8453, "native": "ETH", "l1_fee_oracle": "0x420000000000000000000000000000000000000F"}}"#;

/// This module's worker: its tests write the books' rows into its database directly, with its
/// chains configured.
fn worker() -> &'static Worker {
    static WORKER: OnceLock<Worker> = OnceLock::new();
    WORKER.get_or_init(|| {
        Worker::start_with_vars(
            "sandbox",
            3600,
            &[("PAYRAIL_CHAINS", CHAINS), ("PAYRAIL_EVM_XPUB", TEST_XPUB)],
        )
    })
}

/// One test at a time: workerd does not wait on SQLite's lock, so a request must never meet
/// another test's seeding.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new merchant of the first institution: its id.
fn merchant(worker: &Worker, admin: &PortalSession, reference: &str) -> i64 {
    let reply = worker.portal(
        Method::POST,
        "/portal/api/merchants",
        Some(admin),
        Some(&json!({
            "name": format!("Balances {reference}"), "legal_name": "Balances Ltd",
            "email": "books@shop.example", "psp_reference_id": reference,
        })),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.json()["id"].as_i64().unwrap()
}

/// A viewer of the first institution, invited once.
fn viewer(worker: &'static Worker) -> PortalSession {
    static PASSWORD: OnceLock<String> = OnceLock::new();
    let password = PASSWORD.get_or_init(|| {
        let admin = worker.portal_login(0);
        let invited = worker.portal(
            Method::POST,
            "/portal/api/users",
            Some(&admin),
            Some(&json!({"email": "books-viewer@northwind.example", "role": "viewer"})),
        );
        assert_eq!(invited.status, 201, "{}", invited.text);
        invited.json()["password"].as_str().unwrap().to_owned()
    });
    worker.portal_login_as("books-viewer@northwind.example", password)
}

fn page(worker: &Worker, session: &PortalSession, path: &str) -> Reply {
    worker.portal_page(session, path)
}

fn post_form(
    worker: &Worker,
    session: &PortalSession,
    path: &str,
    pairs: &[(&str, &str)],
) -> Reply {
    worker.portal_form(session, path, pairs)
}

/// One transfer to seed: code, whether it takes from the merchant (debit) or adds (credit), base
/// units, phase, the index of the pending transfer a post or void ends, payment, reference.
type Seeded<'a> = (
    &'a str,
    bool,
    u128,
    &'a str,
    Option<usize>,
    Option<i64>,
    &'a str,
);

/// Writes the merchant's USDC account on Polygon (with `debt_limit`) and `transfers`, oldest
/// first, with totals that agree with them, as the books would have posted them.
fn seed(worker: &Worker, merchant_id: i64, debt_limit: u128, transfers: &[Seeded<'_>]) {
    let ledger = format!("polygon:{USDC}");
    let account = format!("{ledger}:merchant:{merchant_id}");
    let (mut credits, mut debits, mut pending) = (0u128, 0u128, 0u128);
    for (_, debit, amount, phase, _, _, _) in transfers {
        match (*phase, *debit) {
            ("single" | "post", true) => debits += amount,
            ("single" | "post", false) => credits += amount,
            _ => {}
        }
        match *phase {
            "pending" => pending += amount,
            "post" | "void" => pending -= amount,
            _ => {}
        }
    }
    let conn = worker.database();
    for (id, kind, owner) in [
        (format!("{ledger}:treasury"), "treasury", ""),
        (
            format!("{ledger}:unallocated:0xdeposit"),
            "unallocated",
            "0xdeposit",
        ),
        (format!("{ledger}:fees:1"), "fees", "1"),
        (format!("{ledger}:network_fees"), "network_fees", ""),
    ] {
        // The treasury holds a float (the operator's funding), so a refund is the merchant's
        // balance's question alone.
        let float = if kind == "treasury" {
            "1000000000000"
        } else {
            "0"
        };
        conn.execute(
            "INSERT OR IGNORE INTO ledger_accounts (id, network, token, asset, decimals, kind, \
             owner, debits_posted, created_at, updated_at) \
             VALUES (?1, 'polygon', ?2, 'USDC', 6, ?3, ?4, ?5, 0, 0)",
            rusqlite::params![id, USDC, kind, owner, float],
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO ledger_accounts (id, network, token, asset, decimals, kind, owner, \
         institution_id, debits_posted, credits_posted, debits_pending, debt_limit, version, \
         created_at, updated_at) \
         VALUES (?1, 'polygon', ?2, 'USDC', 6, 'merchant', ?3, 1, ?4, ?5, ?6, ?7, ?8, 0, 0)",
        rusqlite::params![
            account,
            USDC,
            merchant_id.to_string(),
            debits.to_string(),
            credits.to_string(),
            pending.to_string(),
            debt_limit.to_string(),
            transfers.len() as i64,
        ],
    )
    .unwrap();
    let other = |code: &str| match code {
        "credit" => format!("{ledger}:unallocated:0xdeposit"),
        "fee" => format!("{ledger}:fees:1"),
        "network_fee" => format!("{ledger}:network_fees"),
        _ => format!("{ledger}:treasury"),
    };
    let ids: Vec<String> = (0..transfers.len())
        .map(|k| format!("seeded:{merchant_id}:{k}"))
        .collect();
    for (k, (code, debit, amount, phase, ends, payment, reference)) in transfers.iter().enumerate()
    {
        let (from, to) = if *debit {
            (account.clone(), other(code))
        } else {
            (other(code), account.clone())
        };
        conn.execute(
            "INSERT INTO ledger_transfers (id, seq, network, token, debit_account, \
             credit_account, amount, code, phase, pending_id, transaction_id, reference, guard, \
             created_at) VALUES (?1, (SELECT COALESCE(max(seq), 0) + 1 FROM ledger_transfers), \
             'polygon', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 1, ?11)",
            rusqlite::params![
                ids[k],
                USDC,
                from,
                to,
                amount.to_string(),
                code,
                phase,
                ends.map(|e| ids[e].clone()),
                payment,
                reference,
                1_790_000_000 + k as i64 * 3600,
            ],
        )
        .unwrap();
    }
}

/// A formula a spreadsheet would run, as a reference.
const FORMULA: &str = "=HYPERLINK(\"https://attacker.example\",\"Refund\")";

/// A merchant paid 100 USDC, settled (PSP fee 1, network fee 0.05, 98.95 paid out), a second
/// settlement's fee reserved then voided, paid 50 more, then a refund of 60 of the first payment
/// reserved: balance 50, reserved 60, available -10, within a debt limit of 20.
fn settled_and_refunded(worker: &Worker, merchant_id: i64) {
    seed(
        worker,
        merchant_id,
        20_000_000,
        &[
            (
                "credit",
                false,
                100_000_000,
                "single",
                None,
                Some(900_001),
                "payment 900001",
            ),
            (
                "fee",
                true,
                1_000_000,
                "pending",
                None,
                Some(900_001),
                "snd_first",
            ),
            (
                "network_fee",
                true,
                50_000,
                "pending",
                None,
                Some(900_001),
                "snd_first",
            ),
            (
                "settlement",
                true,
                98_950_000,
                "pending",
                None,
                None,
                "snd_first",
            ),
            (
                "fee",
                true,
                1_000_000,
                "post",
                Some(1),
                Some(900_001),
                "snd_first",
            ),
            (
                "network_fee",
                true,
                50_000,
                "post",
                Some(2),
                Some(900_001),
                "snd_first",
            ),
            (
                "settlement",
                true,
                98_950_000,
                "post",
                Some(3),
                None,
                "snd_first",
            ),
            (
                "network_fee",
                true,
                20_000,
                "pending",
                None,
                Some(900_002),
                "snd_second",
            ),
            (
                "network_fee",
                true,
                20_000,
                "void",
                Some(7),
                Some(900_002),
                "snd_second",
            ),
            (
                "credit",
                false,
                50_000_000,
                "single",
                None,
                Some(900_002),
                "payment 900002",
            ),
            (
                "refund",
                true,
                60_000_000,
                "pending",
                None,
                Some(900_001),
                FORMULA,
            ),
        ],
    );
}

/// The HTML of the element whose opening tag holds `marker`, up to its `</tag>`.
fn element<'a>(html: &'a str, marker: &str, tag: &str) -> &'a str {
    let start = html
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in {html}"));
    let start = html[..start].rfind('<').unwrap();
    let end = html[start..].find(&format!("</{tag}>")).unwrap() + start;
    &html[start..end]
}

fn strings(list: &Value, member: &str) -> Vec<String> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l[member].as_str().unwrap_or("null").to_owned())
        .collect()
}

#[test]
fn a_merchant_shows_its_balances_and_each_statement_with_its_running_balance() {
    let _one = one_at_a_time();
    let worker = worker();
    let admin = worker.portal_login(0);

    // Nothing in the books yet: the empty state.
    let new = merchant(worker, &admin, "BAL-EMPTY");
    let html = page(worker, &admin, &format!("/portal/merchants/{new}"));
    assert_eq!(html.status, 200, "{}", html.text);
    assert!(html.text.contains("id=\"balance-empty\""), "{}", html.text);
    let none = worker.portal(
        Method::GET,
        &format!("/portal/api/merchants/{new}/balances"),
        Some(&admin),
        None,
    );
    assert_eq!(none.status, 200, "{}", none.text);
    assert_eq!(none.json(), json!({"object": "list", "data": []}));
    // An asset Payrail takes but the merchant was never paid in reads as an empty statement.
    let empty = page(
        worker,
        &admin,
        &format!("/portal/merchants/{new}/balance/base/native"),
    );
    assert_eq!(empty.status, 200, "{}", empty.text);
    assert!(
        empty.text.contains("id=\"statement-empty\""),
        "{}",
        empty.text
    );

    let id = merchant(worker, &admin, "BAL-STATEMENT");
    settled_and_refunded(worker, id);

    // The merchant page: one row per asset, amounts of the asset.
    let html = page(worker, &admin, &format!("/portal/merchants/{id}"));
    assert_eq!(html.status, 200, "{}", html.text);
    let row = element(&html.text, &format!("data-ledger=\"polygon:{USDC}\""), "tr");
    for (class, shown) in [
        ("balance", "50.00"),
        ("reserved", "60.00"),
        ("available", "\u{2212}10.00"),
        ("limit", "20.00"),
    ] {
        let cell = element(row, &format!("class=\"num {class}"), "td");
        assert!(cell.contains(shown), "{class}: {cell}");
        assert!(cell.contains("USDC"), "{class}: {cell}");
    }
    assert!(row.contains("polygon"), "{row}");
    assert!(row.contains("in debt"), "{row}");
    assert!(row.contains(&format!("/portal/merchants/{id}/balance/polygon/{USDC}")));

    // The same through the JSON API.
    let balances = worker.portal(
        Method::GET,
        &format!("/portal/api/merchants/{id}/balances"),
        Some(&admin),
        None,
    );
    assert_eq!(balances.status, 200, "{}", balances.text);
    let b = &balances.json()["data"][0];
    assert_eq!(
        (&b["asset"], &b["network"], &b["token"], &b["decimals"]),
        (&json!("USDC"), &json!("polygon"), &json!(USDC), &json!(6))
    );
    assert_eq!(
        (
            &b["balance"],
            &b["reserved"],
            &b["available"],
            &b["debt_limit"]
        ),
        (
            &json!("50.00"),
            &json!("60.00"),
            &json!("-10.00"),
            &json!("20.00")
        )
    );
    assert_eq!(b["base_units"]["available"], "-10000000");
    assert_eq!(
        (&b["in_debt"], &b["over_limit"]),
        (&json!(true), &json!(false))
    );

    // The statement, newest first, four lines a page: every line with its running balance.
    let statement = |query: &str| {
        let reply = worker.portal(
            Method::GET,
            &format!("/portal/api/merchants/{id}/balances/polygon/{USDC}{query}"),
            Some(&admin),
            None,
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()
    };
    let first = statement("?limit=4");
    assert_eq!(first["balance"]["balance"], "50.00");
    assert_eq!(
        strings(&first, "balance_after"),
        ["50.00", "50.00", "0.00", "0.00"]
    );
    assert_eq!(
        strings(&first, "description"),
        ["Refund", "Payment credited", "Network fee", "Network fee"]
    );
    assert_eq!(
        strings(&first, "state"),
        ["pending", "posted", "voided", "pending"]
    );
    assert_eq!(
        strings(&first, "side"),
        ["debit", "credit", "debit", "debit"]
    );
    assert_eq!(
        strings(&first, "amount"),
        ["60.00", "50.00", "0.02", "0.02"]
    );
    assert_eq!(first["data"][0]["transaction_id"], 900_001);
    assert_eq!(first["has_more"], true);
    let cursor = first["next_cursor"].as_i64().unwrap();
    assert_eq!(first["data"][3]["seq"], cursor);
    let second = statement(&format!("?limit=4&starting_after={cursor}"));
    assert_eq!(
        strings(&second, "balance_after"),
        ["0.00", "98.95", "99.00", "100.00"]
    );
    assert_eq!(
        strings(&second, "description"),
        ["Settlement", "Network fee", "PSP fee", "Settlement"]
    );
    let cursor = second["next_cursor"].as_i64().unwrap();
    let third = statement(&format!("?limit=4&starting_after={cursor}"));
    assert_eq!(
        strings(&third, "balance_after"),
        ["100.00", "100.00", "100.00"]
    );
    assert_eq!(
        strings(&third, "description"),
        ["Network fee", "PSP fee", "Payment credited"]
    );
    assert_eq!(
        (&third["has_more"], &third["next_cursor"]),
        (&json!(false), &Value::Null)
    );
    // Without a limit: a page of 25, all of it.
    assert_eq!(statement("")["data"].as_array().unwrap().len(), 11);
    // The token in any case (as EIP-55 shows it) is the same balance.
    let mixed = worker.portal(
        Method::GET,
        &format!(
            "/portal/api/merchants/{id}/balances/polygon/0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359?limit=1"
        ),
        Some(&admin),
        None,
    );
    assert_eq!(mixed.status, 200, "{}", mixed.text);
    assert_eq!(mixed.json()["data"][0]["description"], "Refund");

    // The page: every line, the pending and voided ones marked, the payment linked.
    let html = page(
        worker,
        &admin,
        &format!("/portal/merchants/{id}/balance/polygon/{USDC}"),
    );
    assert_eq!(html.status, 200, "{}", html.text);
    let table = element(&html.text, "id=\"statement\"", "table");
    assert_eq!(table.matches("<tr data-seq=").count(), 11, "{table}");
    let newest = element(table, "<tr data-seq=", "tr");
    assert!(newest.contains("data-code=\"refund\""), "{newest}");
    assert!(newest.contains("data-state=\"pending\""), "{newest}");
    assert!(
        newest.contains("href=\"/portal/payments/900001\""),
        "{newest}"
    );
    assert!(newest.contains("60.00"), "{newest}");
    // The reference is shown as text, never as markup.
    assert!(newest.contains("=HYPERLINK(&quot;"), "{newest}");
    assert!(!html.text.contains("id=\"older\""));
    let paged = page(
        worker,
        &admin,
        &format!("/portal/merchants/{id}/balance/polygon/{USDC}?limit=4"),
    );
    assert!(paged.text.contains("id=\"older\""), "{}", paged.text);

    // The whole statement as CSV, newest first, a formula neutralised.
    let csv = page(
        worker,
        &admin,
        &format!("/portal/merchants/{id}/balance/polygon/{USDC}/export.csv"),
    );
    assert_eq!(csv.status, 200, "{}", csv.text);
    assert!(csv.header("content-type").unwrap().starts_with("text/csv"));
    assert!(
        csv.header("content-disposition")
            .unwrap()
            .contains(&format!("statement-{id}-polygon-USDC.csv")),
        "{:?}",
        csv.header("content-disposition")
    );
    let mut reader = csv::Reader::from_reader(csv.text.as_bytes());
    let headers = reader.headers().unwrap().clone();
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 11, "{}", csv.text);
    let newest = &rows[0];
    assert_eq!(&newest[column("code")], "refund");
    assert_eq!(&newest[column("description")], "Refund");
    assert_eq!(&newest[column("state")], "pending");
    assert_eq!(&newest[column("transaction_id")], "900001");
    assert_eq!(&newest[column("reference")], format!("'{FORMULA}"));
    assert_eq!(&newest[column("debit")], "60.00");
    assert_eq!(&newest[column("credit")], "");
    assert_eq!(&newest[column("balance")], "50.00");
    assert_eq!(&newest[column("debit_base_units")], "60000000");
    let balances: Vec<&str> = rows.iter().map(|r| &r[column("balance")]).collect();
    assert_eq!(
        balances,
        [
            "50.00", "50.00", "0.00", "0.00", "0.00", "98.95", "99.00", "100.00", "100.00",
            "100.00", "100.00"
        ]
    );
    assert_eq!(&rows[10][column("credit")], "100.00");

    // A viewer reads them too.
    let viewer = viewer(worker);
    let seen = page(
        worker,
        &viewer,
        &format!("/portal/merchants/{id}/balance/polygon/{USDC}"),
    );
    assert_eq!(seen.status, 200);
    let seen = page(worker, &viewer, &format!("/portal/merchants/{id}"));
    assert!(seen.text.contains("id=\"balances\""));
    assert!(
        !seen.text.contains("name=\"debt_limit\""),
        "no form for a viewer"
    );

    // Another institution's merchant, an asset Payrail does not take, a bad cursor.
    let globex = worker.portal_login(1);
    for path in [
        format!("/portal/api/merchants/{id}/balances"),
        format!("/portal/api/merchants/{id}/balances/polygon/{USDC}"),
    ] {
        worker
            .portal(Method::GET, &path, Some(&globex), None)
            .assert_error(404, "not_found");
    }
    assert_eq!(
        page(
            worker,
            &globex,
            &format!("/portal/merchants/{id}/balance/polygon/{USDC}")
        )
        .status,
        404
    );
    assert_eq!(
        page(
            worker,
            &globex,
            &format!("/portal/merchants/{id}/balance/polygon/{USDC}/export.csv")
        )
        .status,
        404
    );
    worker
        .portal(
            Method::GET,
            &format!("/portal/api/merchants/{id}/balances/ethereum/{USDC}"),
            Some(&admin),
            None,
        )
        .assert_error(404, "not_found");
    worker
        .portal(
            Method::GET,
            &format!("/portal/api/merchants/{id}/balances/polygon/{USDC}?starting_after=x"),
            Some(&admin),
            None,
        )
        .assert_error(400, "invalid_request");
}

#[test]
fn an_admin_sets_a_debt_limit_and_every_admin_hears_of_it() {
    let _one = one_at_a_time();
    let worker = worker();
    let admin = worker.portal_login(0);
    let id = merchant(worker, &admin, "BAL-LIMIT");
    seed(
        worker,
        id,
        0,
        &[(
            "credit",
            false,
            10_000_000,
            "single",
            None,
            Some(900_100),
            "payment 900100",
        )],
    );
    let path = format!("/portal/merchants/{id}/debt-limit");
    let ledger = format!("polygon:{USDC}");
    let limit_of = |account: &str| -> String {
        worker
            .database()
            .query_row(
                "SELECT debt_limit FROM ledger_accounts WHERE id = ?1",
                [account],
                |r| r.get(0),
            )
            .unwrap()
    };
    let account = format!("{ledger}:merchant:{id}");
    let notifications = || -> Vec<Value> {
        let reply = worker.portal(Method::GET, "/portal/api/notifications", Some(&admin), None);
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["kind"] == "debt_limit_changed")
            .cloned()
            .collect()
    };
    let before = notifications().len();

    // The form is on the merchant page, for admins, with every asset Payrail takes.
    let html = page(worker, &admin, &format!("/portal/merchants/{id}"));
    let form_html = element(&html.text, "class=\"limit\"", "form");
    assert!(
        form_html.contains(&format!("value=\"{ledger}\"")),
        "{form_html}"
    );
    assert!(form_html.contains("value=\"base:native\""), "{form_html}");
    assert!(form_html.contains("name=\"csrf_token\""), "{form_html}");

    // No CSRF token, a wrong one: refused, nothing written.
    for token in [None, Some("not-the-token")] {
        let mut pairs = vec![("ledger", ledger.as_str()), ("debt_limit", "100")];
        if let Some(token) = token {
            pairs.push(("csrf_token", token));
        }
        let refused = post_form(worker, &admin, &path, &pairs);
        assert_eq!(refused.status, 403, "{}", refused.text);
        assert!(refused.text.contains("CSRF"), "{}", refused.text);
    }
    // A viewer, with its own good token: refused.
    let viewer = viewer(worker);
    let refused = post_form(
        worker,
        &viewer,
        &path,
        &[
            ("csrf_token", &viewer.csrf),
            ("ledger", &ledger),
            ("debt_limit", "100"),
        ],
    );
    assert_eq!(refused.status, 403, "{}", refused.text);
    assert!(refused.text.contains("admin"), "{}", refused.text);
    worker
        .portal(
            Method::PUT,
            &format!("/portal/api/merchants/{id}/balances/polygon/{USDC}/debt-limit"),
            Some(&viewer),
            Some(&json!({"debt_limit": "100"})),
        )
        .assert_error(403, "admin_required");
    assert_eq!(limit_of(&account), "0");

    // Bad amounts and assets: the page again, saying why, the field as typed; never a 500.
    for (ledger, typed, says) in [
        (ledger.as_str(), "-5", "debt_limit must not be negative"),
        (
            ledger.as_str(),
            "1.1234567",
            "debt_limit must have at most 6 decimal places",
        ),
        (
            ledger.as_str(),
            "abc",
            "debt_limit must be a number with at most 6 decimal places",
        ),
        (
            ledger.as_str(),
            "1,000",
            "debt_limit must be a number with at most 6 decimal places",
        ),
        (
            ledger.as_str(),
            "1e3",
            "debt_limit must be a number with at most 6 decimal places",
        ),
        (
            ledger.as_str(),
            "2000000000",
            "debt_limit must be at most 1000000000",
        ),
        (ledger.as_str(), "", "debt_limit is required"),
        ("nonsense", "10", "ledger must name an asset"),
        ("", "10", "ledger must name an asset"),
        ("ethereum:native", "10", "no balance in native on ethereum"),
    ] {
        let shown = post_form(
            worker,
            &admin,
            &path,
            &[
                ("csrf_token", &admin.csrf),
                ("ledger", ledger),
                ("debt_limit", typed),
            ],
        );
        assert_eq!(shown.status, 400, "{typed}: {}", shown.text);
        let section = element(&shown.text, "id=\"balance\"", "section");
        assert!(section.contains(says), "{typed}: {section}");
        assert!(section.contains("role=\"alert\""), "{typed}");
        if !typed.is_empty() && ledger.contains(':') {
            assert!(
                section.contains(&format!("value=\"{typed}\"")),
                "{typed}: {section}"
            );
        }
    }
    assert_eq!(limit_of(&account), "0");
    assert_eq!(notifications().len(), before);

    // A good one: back to the balance, the limit in base units, every admin told.
    let set = post_form(
        worker,
        &admin,
        &path,
        &[
            ("csrf_token", &admin.csrf),
            ("ledger", &ledger),
            ("debt_limit", "250.5"),
        ],
    );
    assert_eq!(set.status, 303, "{}", set.text);
    assert!(set
        .header("location")
        .unwrap()
        .ends_with(&format!("/portal/merchants/{id}#balance")));
    assert_eq!(limit_of(&account), "250500000");
    let html = page(worker, &admin, &format!("/portal/merchants/{id}"));
    let row = element(&html.text, &format!("data-ledger=\"{ledger}\""), "tr");
    assert!(
        element(row, "class=\"num limit", "td").contains("250.50"),
        "{row}"
    );
    let told = notifications();
    assert_eq!(told.len(), before + 1, "{told:?}");
    let body = told[0]["body"].as_str().unwrap();
    assert!(
        told[0]["subject"]
            .as_str()
            .unwrap()
            .contains("Balances BAL-LIMIT"),
        "{told:?}"
    );
    assert!(body.contains("from 0.00 USDC to 250.50 USDC"), "{body}");
    assert!(body.contains("admin@northwind.example"), "{body}");
    // The same limit again writes nothing and tells nobody.
    let again = post_form(
        worker,
        &admin,
        &path,
        &[
            ("csrf_token", &admin.csrf),
            ("ledger", &ledger),
            ("debt_limit", "250.50"),
        ],
    );
    assert_eq!(again.status, 303);
    assert_eq!(notifications().len(), before + 1);

    // An asset the merchant has no account in yet: created with the limit, in its decimals.
    let set = post_form(
        worker,
        &admin,
        &path,
        &[
            ("csrf_token", &admin.csrf),
            ("ledger", "base:native"),
            ("debt_limit", "0.5"),
        ],
    );
    assert_eq!(set.status, 303, "{}", set.text);
    assert_eq!(
        limit_of(&format!("base:native:merchant:{id}")),
        "500000000000000000"
    );

    // The JSON API: the same rules.
    let api = |body: Value| {
        worker.portal(
            Method::PUT,
            &format!("/portal/api/merchants/{id}/balances/polygon/{USDC}/debt-limit"),
            Some(&admin),
            Some(&body),
        )
    };
    let said = api(json!({"debt_limit": "-1"})).assert_error(400, "invalid_request");
    assert!(said.contains("debt_limit"), "{said}");
    api(json!({"limit": "1"})).assert_error(400, "invalid_request");
    let done = api(json!({"debt_limit": "0.000001"}));
    assert_eq!(done.status, 200, "{}", done.text);
    let done = done.json();
    assert_eq!(
        (&done["debt_limit"], &done["base_units"]["debt_limit"]),
        (&json!("0.000001"), &json!("1"))
    );
    assert_eq!(limit_of(&account), "1");
    worker
        .portal(
            Method::PUT,
            &format!("/portal/api/merchants/{id}/balances/polygon/{USDC}/debt-limit"),
            Some(&worker.portal_login(1)),
            Some(&json!({"debt_limit": "5"})),
        )
        .assert_error(404, "not_found");
    assert_eq!(notifications().len(), before + 3);
}

/// A payment of `gross` USD of merchant `merchant_id` paid in USDC on Polygon (at 1 USDC a
/// dollar) and settled, as the watch and the settlement leave it: its transaction id.
fn paid_on_chain(worker: &Worker, merchant_id: i64, (gross, units): (&str, u128), n: u32) -> i64 {
    let conn = worker.database();
    conn.execute(
        "INSERT INTO transactions (institution_id, merchant_id, status, raw_status, \
         amount_status, asset, currency, amount_gross, amount_net, amount_expected, psp_fee, \
         gas_fee, network_payment, network_settlement, created_at, paid_at, updated_at) \
         VALUES (1, ?1, 'paid', 'paid', 'EXACT', 'USDC', 'USD', ?2, ?2, ?2, '0.00', '0.00', \
         'polygon', 'polygon', '2026-09-21T10:00:00Z', '2026-09-21T10:05:00Z', \
         '2026-09-21T10:05:00Z')",
        rusqlite::params![merchant_id, gross],
    )
    .unwrap();
    let id = conn.last_insert_rowid();
    let address = format!("0x{:040x}", 0xbeef_0000u64 + u64::from(n));
    conn.execute(
        "INSERT INTO checkout_sessions (id, transaction_id, merchant_id, title, redirect_url, \
         asset, network, deposit_address, crypto_amount, created_at, expires_at, \
         institution_id) \
         VALUES (?1, ?2, ?3, 'Seeded', 'https://shop.example/done', 'USDC', 'polygon', ?4, ?5, \
         1790000000, 1790003600, 1)",
        rusqlite::params![format!("cs_seeded_{n}"), id, merchant_id, address, gross],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO deposit_watches (address, derivation_index, session_id, transaction_id, \
         network, asset, token, decimals, crypto_amount, base_units, rate, rate_source, \
         quoted_at, from_block, scanned_to, head_block, watch_until, created_at, \
         institution_id) \
         VALUES (?1, ?2, ?3, ?4, 'polygon', 'USDC', ?5, 6, ?6, ?7, '1', 'par', 1790000000, 1, \
         10, 10, 0, 1790000000, 1)",
        rusqlite::params![
            address,
            1000 + n,
            format!("cs_seeded_{n}"),
            id,
            USDC,
            gross,
            units.to_string()
        ],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO chain_transfers (network, tx_hash, log_index, address, session_id, token, \
         amount, block_number, confirmed, kind, after_expiry, seen_at, institution_id) \
         VALUES ('polygon', ?1, 0, ?2, ?3, ?4, '1', 5, 1, 'payment', 0, 1790000000, 1)",
        rusqlite::params![
            format!("0x{:064x}", n),
            address,
            format!("cs_seeded_{n}"),
            USDC
        ],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO payment_parts (institution_id, transaction_id, part, network, asset, token, \
         decimals, gross, expected, crypto_amount) \
         VALUES (1, ?1, 0, 'polygon', 'USDC', ?2, 6, ?3, ?3, ?3)",
        rusqlite::params![id, USDC, gross],
    )
    .unwrap();
    id
}

#[test]
fn the_refund_review_shows_what_the_refund_does_to_the_balance() {
    let _one = one_at_a_time();
    let worker = worker();
    let admin = worker.portal_login(0);
    let customer = "0x1111111111111111111111111111111111111111";
    let id = merchant(worker, &admin, "BAL-REFUND");
    // Paid 40 and settled in full: nothing left; it may owe up to 20.
    seed(
        worker,
        id,
        20_000_000,
        &[
            ("credit", false, 40_000_000, "single", None, None, "payment"),
            (
                "settlement",
                true,
                40_000_000,
                "single",
                None,
                None,
                "snd_refund",
            ),
        ],
    );
    let payment = paid_on_chain(worker, id, ("40", 40_000_000), 1);
    let preview = |amount: &str| {
        let reply = worker.portal(
            Method::POST,
            &format!("/portal/api/payments/{payment}/refunds/preview"),
            Some(&admin),
            Some(&json!({"amount": amount, "address": customer})),
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()["balance"].clone()
    };
    let within = preview("10.00");
    assert_eq!(
        within,
        json!({"merchant_id": id, "asset": "USDC", "network": "polygon",
            "available_before": "0.00", "available_after": "-10.00", "debt_limit": "20.00",
            "into_debt": true, "within_limit": true})
    );
    let over = preview("30.00");
    assert_eq!(
        (&over["into_debt"], &over["within_limit"]),
        (&json!(true), &json!(false))
    );
    assert_eq!(over["available_after"], "-30.00");

    // The page's review step says the same, in words.
    let review = |amount: &str| {
        let reply = post_form(
            worker,
            &admin,
            &format!("/portal/payments/{payment}/refund"),
            &[
                ("csrf_token", &admin.csrf),
                ("step", "preview"),
                ("amount", amount),
                ("address", customer),
            ],
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        let confirm = reply.text.contains("Confirm and send the refund");
        (
            element(&reply.text, "id=\"refund-balance\"", "dd").to_owned(),
            confirm,
        )
    };
    let (shown, confirm) = review("10.00");
    assert!(shown.contains("\u{2212}10.00"), "{shown}");
    assert!(shown.contains("id=\"refund-debt\""), "{shown}");
    assert!(shown.contains("20.00 USDC"), "{shown}");
    assert!(confirm, "a refund within the limit can be confirmed");
    // Over the limit, the page offers no button the books would refuse.
    let (shown, confirm) = review("30.00");
    assert!(shown.contains("id=\"refund-over-limit\""), "{shown}");
    assert!(!confirm, "a refund over the limit offers no confirm button");
    assert!(
        shown.contains(&format!("/portal/merchants/{id}#balance")),
        "{shown}"
    );

    // A merchant with money available: no debt.
    let rich = merchant(worker, &admin, "BAL-REFUND-RICH");
    seed(
        worker,
        rich,
        0,
        &[(
            "credit",
            false,
            100_000_000,
            "single",
            None,
            None,
            "payment",
        )],
    );
    let payment = paid_on_chain(worker, rich, ("25", 25_000_000), 2);
    let reply = worker.portal(
        Method::POST,
        &format!("/portal/api/payments/{payment}/refunds/preview"),
        Some(&admin),
        Some(&json!({"amount": "25.00", "address": customer})),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    let effect = &reply.json()["balance"];
    assert_eq!(
        (
            &effect["available_before"],
            &effect["available_after"],
            &effect["into_debt"]
        ),
        (&json!("100.00"), &json!("75.00"), &json!(false))
    );
}

/// Saves the PNG of the element matching `css` under tests/artifacts/.
fn save_element(browser: &Browser, css: &str, name: &str) {
    let dir = payrail_tests::root().join("tests/artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.png")), browser.element_png(css)).unwrap();
}

/// Saves the whole page at `width` (the window made as tall as the page, then put back to
/// `height`), and the element matching `css` within it.
pub(super) fn photograph(browser: &Browser, (width, height): (u32, u32), css: &str, name: &str) {
    let tall = browser
        .eval("return document.documentElement.scrollHeight;")
        .as_u64()
        .unwrap_or(u64::from(height));
    browser.resize(
        width,
        u32::try_from(tall).unwrap_or(height).max(height) + 100,
    );
    browser.screenshot(&format!("{name}-page-{width}"));
    save_element(browser, css, &format!("{name}-{width}"));
    browser.resize(width, height);
}

#[test]
fn the_balance_and_its_statement_in_chromium_at_desktop_and_phone_widths() {
    let _one = one_at_a_time();
    let _browser = exclusive();
    let worker = worker();
    let admin_session = worker.portal_login(0);
    let id = merchant(worker, &admin_session, "BAL-BROWSER");
    settled_and_refunded(worker, id);
    let admin = &worker.credentials.institutions[0];
    let browser = Browser::start();
    browser.log_in(&worker.base_url, &admin.admin_email, &admin.admin_password);

    for (width, height) in [(1280, 900), (390, 844)] {
        browser.resize(width, height);
        browser.goto(&format!(
            "{}/portal/merchants/{id}#balance",
            worker.base_url
        ));
        assert!(browser.wait_text("#balances").contains("USDC"));
        photograph(
            &browser,
            (width, height),
            "#balance",
            "portal-merchant-balance",
        );
        let violations = browser.serious_accessibility_violations();
        assert!(
            violations.is_empty(),
            "merchant page at {width}: {violations:#?}"
        );

        browser.click(&format!("tr[data-ledger='polygon:{USDC}'] a"));
        browser.wait_for_url("the statement", |u| u.contains("/balance/polygon/"));
        assert!(browser.wait_text("#statement").contains("Payment credited"));
        photograph(
            &browser,
            (width, height),
            "#statement-lines",
            "portal-statement",
        );
        let violations = browser.serious_accessibility_violations();
        assert!(
            violations.is_empty(),
            "statement at {width}: {violations:#?}"
        );
    }

    // The refund review step of a settled payment: what it does to the balance.
    let payment = paid_on_chain(worker, id, ("40", 40_000_000), 3);
    for (width, height) in [(1280, 900), (390, 844)] {
        browser.resize(width, height);
        browser.goto(&format!(
            "{}/portal/payments/{payment}#refunds",
            worker.base_url
        ));
        browser.fill("#refund-amount-input", "30.00");
        browser.fill(
            "#refund-address-input",
            "0x1111111111111111111111111111111111111111",
        );
        browser.click("form.refund button");
        assert!(browser.wait_text("#refund-balance").contains("debt"));
        photograph(
            &browser,
            (width, height),
            "#refund-review",
            "portal-refund-review",
        );
        let violations = browser.serious_accessibility_violations();
        assert!(
            violations.is_empty(),
            "refund review at {width}: {violations:#?}"
        );
    }

    // A payment made in two ways to pay (25.00 in USDC, the rest in USDT): its parts, and a
    // refund of the USDT part, reviewed in USDT.
    let conn = worker.database();
    conn.execute(
        "UPDATE payment_parts SET gross = '25.00' WHERE transaction_id = ?1",
        [payment],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO payment_parts (institution_id, transaction_id, part, network, asset, token, \
         decimals, gross, expected, crypto_amount) \
         VALUES (1, ?1, 1, 'polygon', 'USDT', '0xc2132d05d31c914a87c6611c10748aeb04b58e8f', 6, \
         '15.00', '15.00', '15.00')",
        [payment],
    )
    .unwrap();
    for (width, height) in [(1280, 900), (390, 844)] {
        browser.resize(width, height);
        browser.goto(&format!("{}/portal/payments/{payment}", worker.base_url));
        let parts = browser.wait_text("#payment-parts");
        assert!(
            parts.contains("USDT") && parts.contains("15.00") && parts.contains("25.00"),
            "{parts}"
        );
        photograph(&browser, (width, height), "#parts", "portal-payment-parts");
        let violations = browser.serious_accessibility_violations();
        assert!(
            violations.is_empty(),
            "payment parts at {width}: {violations:#?}"
        );
        browser.eval("document.querySelector('#refund-part-input').value = '1'; return true;");
        browser.fill("#refund-amount-input", "5.00");
        browser.fill(
            "#refund-address-input",
            "0x1111111111111111111111111111111111111111",
        );
        browser.click("form.refund button");
        assert!(browser.wait_text("#refund-part").contains("Part 1"));
        assert!(browser.wait_text("#refund-crypto").contains("5 USDT"));
        photograph(
            &browser,
            (width, height),
            "#refund-review",
            "portal-refund-review-part",
        );
        let violations = browser.serious_accessibility_violations();
        assert!(
            violations.is_empty(),
            "refund review of a part at {width}: {violations:#?}"
        );
    }

    // A refused debt limit, as a phone shows it.
    browser.goto(&format!(
        "{}/portal/merchants/{id}#balance",
        worker.base_url
    ));
    browser.fill("#debt-limit", "-3");
    browser.click("form.limit button");
    assert!(browser
        .wait_text("#balance .error")
        .contains("must not be negative"));
    photograph(
        &browser,
        (390, 844),
        "#balance",
        "portal-merchant-debt-limit-refused",
    );
    let violations = browser.serious_accessibility_violations();
    assert!(violations.is_empty(), "refused limit: {violations:#?}");
}
