//! The portal's overview, the page an admin lands on: the last 30 days' gross volume per day and
//! currency and the payments per status (server-rendered SVG, their figures in words and
//! tables) against payments seeded at known days, the treasury's float per network and asset
//! with its warning when it is below what the institution's merchants are owed, and the webhook
//! endpoints that fail or were disabled. Then the overview and the payments list in Chromium at
//! 1280 px and 390 px: login lands on the overview, search, quick ranges, badges and names;
//! screenshots in tests/artifacts/, no serious accessibility violation.
//!
//! Payments and the books' rows are seeded straight into the worker's database (what posts
//! them is tested where it is built), so every figure on the page is known.

use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use payrail_tests::browser::{exclusive, Browser};
use payrail_tests::{eventually, PortalSession, Worker};
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::json;
use shared_types::time::format_unix;

/// Polygon's USDC.
const USDC: &str = "0x3c499c542cef5e3811e1192ce70d8cc03d5c3359";

/// One seeded payment: days back, currency, status, raw status, amount status, gross, the
/// institution (index), its reference and source hash.
struct Seeded {
    back: i64,
    currency: &'static str,
    status: &'static str,
    raw: &'static str,
    amount_status: Option<&'static str>,
    gross: Option<&'static str>,
    institution: usize,
    reference: &'static str,
}

/// Oldest first, so their ids follow their creation times among themselves (as the worker
/// allocates them; the date filters turn date bounds into id bounds).
const SEEDED: &[Seeded] = &[
    // Outside the 30 days: counted nowhere.
    Seeded {
        back: 31,
        currency: "EUR",
        status: "paid",
        raw: "paid",
        amount_status: Some("EXACT"),
        gross: Some("99.00"),
        institution: 0,
        reference: "OV-OLD",
    },
    Seeded {
        back: 29,
        currency: "EUR",
        status: "partially_refunded",
        raw: "partially_refunded",
        amount_status: Some("EXACT"),
        gross: Some("7.25"),
        institution: 0,
        reference: "OV-29",
    },
    Seeded {
        back: 10,
        currency: "JPY",
        status: "paid",
        raw: "paid",
        amount_status: Some("OVERPAID"),
        gross: Some("1200"),
        institution: 0,
        reference: "OV-JPY",
    },
    Seeded {
        back: 5,
        currency: "EUR",
        status: "pending",
        raw: "pending",
        amount_status: None,
        gross: None,
        institution: 0,
        reference: "OV-PENDING",
    },
    Seeded {
        back: 3,
        currency: "EUR",
        status: "refunded",
        raw: "refunded",
        amount_status: Some("EXACT"),
        gross: Some("20.00"),
        institution: 0,
        reference: "OV-REFUNDED",
    },
    Seeded {
        back: 0,
        currency: "EUR",
        status: "paid",
        raw: "paid",
        amount_status: Some("EXACT"),
        gross: Some("10.00"),
        institution: 0,
        reference: "OV-TODAY-1",
    },
    Seeded {
        back: 0,
        currency: "EUR",
        status: "paid",
        raw: "succeeded",
        amount_status: Some("UNDERPAID"),
        gross: Some("5.50"),
        institution: 0,
        reference: "OV-TODAY-2",
    },
    // Another institution's: never on the first one's overview.
    Seeded {
        back: 0,
        currency: "EUR",
        status: "paid",
        raw: "paid",
        amount_status: Some("EXACT"),
        gross: Some("1000.00"),
        institution: 1,
        reference: "OV-OTHER",
    },
];

/// The day `back` days before today (UTC).
fn day(back: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    format_unix(now - back * 86_400).unwrap()[..10].to_owned()
}

/// This module's worker, and its overview as it was before the payments below were seeded
/// (the demo data has payments of the last 30 days too): the seeded payments' figures are exact
/// only while nothing else pays, and its tests write the books' rows into its database
/// directly.
fn seeded() -> &'static (Worker, String) {
    static WORKER: OnceLock<(Worker, String)> = OnceLock::new();
    WORKER.get_or_init(|| {
        let worker = Worker::start();
        let before = overview(&worker, &worker.portal_login(0));
        let conn = worker.database();
        for s in SEEDED {
            let institution = &worker.credentials.institutions[s.institution];
            // Just after midnight: never in the future, whenever the test runs.
            let at = format!("{}T00:00:01Z", day(s.back));
            conn.execute(
                "INSERT INTO transactions (institution_id, merchant_id, status, raw_status, \
                 amount_status, asset, currency, amount_gross, amount_expected, network_payment, \
                 external_reference, created_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, 'USDC', ?6, ?7, coalesce(?7, '50.00'), 'polygon', \
                 ?8, ?9, ?9)",
                rusqlite::params![
                    s.institution as i64 + 1,
                    institution.merchant_ids[0],
                    s.status,
                    s.raw,
                    s.amount_status,
                    s.currency,
                    s.gross,
                    s.reference,
                    at,
                ],
            )
            .unwrap();
        }
        (worker, before)
    })
}

fn worker() -> &'static Worker {
    &seeded().0
}

/// One test at a time: workerd does not wait on SQLite's lock, so a request must never meet
/// another test's seeding.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn overview(worker: &Worker, session: &PortalSession) -> String {
    let reply = worker.portal_page(session, "/portal/");
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.text
}

/// The text between `start` (after the first `anchor`) and the next `<`.
fn text_after(html: &str, anchor: &str, start: &str) -> String {
    let from = html
        .find(anchor)
        .unwrap_or_else(|| panic!("{anchor} in {html}"));
    let rest = &html[from..];
    let at = rest
        .find(start)
        .unwrap_or_else(|| panic!("{start} after {anchor}"))
        + start.len();
    rest[at..].split('<').next().unwrap().to_owned()
}

/// The value of `attribute` after the first `anchor`; `None` without the anchor.
fn attribute_after(html: &str, anchor: &str, attribute: &str) -> Option<String> {
    let rest = &html[html.find(anchor)?..];
    let marker = format!("{attribute}=\"");
    let at = rest.find(&marker)? + marker.len();
    Some(rest[at..].split('"').next().unwrap().to_owned())
}

/// A currency chart's total (0 without a chart).
fn total(html: &str, currency: &str) -> Decimal {
    if !html.contains(&format!("data-currency=\"{currency}\"")) {
        return Decimal::ZERO;
    }
    text_after(
        html,
        &format!("data-currency=\"{currency}\""),
        "data-total>",
    )
    .parse()
    .unwrap()
}

/// A currency chart's bar of `day`.
fn bar(html: &str, currency: &str, day: &str) -> Decimal {
    let chart = match html.find(&format!("data-currency=\"{currency}\"")) {
        Some(at) => &html[at..],
        None => return Decimal::ZERO,
    };
    attribute_after(chart, &format!("data-day=\"{day}\""), "data-gross")
        .unwrap()
        .parse()
        .unwrap()
}

/// The status chart's count of `status`.
fn count(html: &str, status: &str) -> i64 {
    attribute_after(html, &format!("data-status=\"{status}\""), "data-count")
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn the_overview_charts_the_last_30_days_and_counts_by_status() {
    let _one = one_at_a_time();
    let worker = worker();
    let session = worker.portal_login(0);
    let html = overview(worker, &session);

    let before = &seeded().1;
    let dec = |text: &str| text.parse::<Decimal>().unwrap();

    // One chart per currency: its total, and a bar a day, grown by the seeded figures; the
    // payment of 31 days ago and the other institution's count nowhere here.
    assert_eq!(total(&html, "EUR") - total(before, "EUR"), dec("42.75"));
    assert_eq!(
        total(before, "JPY"),
        Decimal::ZERO,
        "the demo data has no yen"
    );
    assert_eq!(total(&html, "JPY"), dec("1200"));
    for (back, grown) in [(0, "15.50"), (3, "20.00"), (29, "7.25"), (1, "0")] {
        let d = day(back);
        assert_eq!(
            bar(&html, "EUR", &d) - bar(before, "EUR", &d),
            dec(grown),
            "{d}"
        );
    }
    let charts = html.matches("<figure class=\"chart\"").count();
    assert_eq!(
        html.matches("fill=\"#2563eb\" data-day=").count(),
        30 * charts
    );
    assert!(
        !html.contains(&format!("data-day=\"{}\"", day(30))),
        "31 days are too many"
    );
    // The figures for screen readers: the image's description, and a table.
    assert!(
        html.contains("1200 JPY from 1 payment over the last 30 days"),
        "{html}"
    );
    assert!(html.contains(&format!(
        "<tr><th scope=\"row\">{}</th><td class=\"num\">1</td><td class=\"num\">1200</td></tr>",
        day(10)
    )));

    // Counts by status over the 30 days, grown by the seeded ones, as the JSON overview counts.
    let mut sum = 0;
    for (status, grown) in [
        ("pending", 1),
        ("paid", 3),
        ("failed", 0),
        ("refunded", 1),
        ("partially_refunded", 1),
    ] {
        assert_eq!(
            count(&html, status) - count(before, status),
            grown,
            "{status}"
        );
        sum += count(&html, status);
    }
    assert!(
        html.contains(&format!(
            "<desc id=\"status-chart-desc\">{sum} payments: Pending {}",
            count(&html, "pending")
        )),
        "{html}"
    );
    let api = worker
        .portal(Method::GET, "/portal/api/overview", Some(&session), None)
        .json();
    let month: i64 = api["periods"][1]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["count"].as_i64().unwrap())
        .sum();
    assert_eq!(month, sum, "{api}");
}

/// Writes the treasury's and two merchants' accounts on Polygon's USDC: the treasury holds
/// `treasury` base units of which 1 USDC is reserved by a payout in flight; the first
/// institution's merchant is owed 7.5 USDC, the second's 100.
fn seed_books(worker: &Worker, treasury: u64) {
    let conn = worker.database();
    let ledger = format!("polygon:{USDC}");
    conn.execute(
        "INSERT INTO ledger_accounts (id, network, token, asset, decimals, kind, owner, \
         debits_posted, credits_pending, created_at, updated_at) \
         VALUES (?1, 'polygon', ?2, 'USDC', 6, 'treasury', '', ?3, '1000000', 0, 0) \
         ON CONFLICT (id) DO UPDATE SET debits_posted = excluded.debits_posted",
        rusqlite::params![format!("{ledger}:treasury"), USDC, treasury.to_string()],
    )
    .unwrap();
    for (index, owed) in [(0usize, "7500000"), (1, "100000000")] {
        let merchant = worker.credentials.institutions[index].merchant_ids[0];
        conn.execute(
            "INSERT OR IGNORE INTO ledger_accounts (id, network, token, asset, decimals, kind, \
             owner, institution_id, credits_posted, created_at, updated_at) \
             VALUES (?1, 'polygon', ?2, 'USDC', 6, 'merchant', ?3, ?4, ?5, 0, 0)",
            rusqlite::params![
                format!("{ledger}:merchant:{merchant}"),
                USDC,
                merchant.to_string(),
                index as i64 + 1,
                owed
            ],
        )
        .unwrap();
    }
}

#[test]
fn the_float_warns_when_the_treasury_cannot_pay_what_merchants_are_owed() {
    let _one = one_at_a_time();
    let worker = worker();
    let session = worker.portal_login(0);
    // 5 USDC, 1 reserved: 4 can be paid out against 7.5 owed (the other institution's 100 are
    // its own question).
    seed_books(worker, 5_000_000);
    let html = overview(worker, &session);
    assert!(html.contains("class=\"warn float-warning\" role=\"alert\" data-network=\"polygon\" data-asset=\"USDC\""), "{html}");
    assert!(html.contains("(3.5 short)"), "{html}");
    assert_eq!(text_after(&html, "id=\"float\"", "data-available>"), "4");
    assert_eq!(text_after(&html, "id=\"float\"", "data-owed>"), "7.5");
    assert!(html.contains("Short by 3.5"));

    // Funded: covered, no warning.
    seed_books(worker, 20_000_000);
    let html = overview(worker, &session);
    assert!(!html.contains("float-warning"), "{html}");
    assert_eq!(text_after(&html, "id=\"float\"", "data-available>"), "19");
    assert!(html.contains("Covered"));
    seed_books(worker, 5_000_000);
}

#[test]
fn failing_and_disabled_webhook_endpoints_are_listed() {
    let _one = one_at_a_time();
    let worker = worker();
    let session = worker.portal_login(0);
    let create = |url: &str| {
        let reply = worker.portal(
            Method::POST,
            "/portal/api/webhook-endpoints",
            Some(&session),
            Some(&json!({"url": url, "description": "overview", "event_types": ["payment.paid"]})),
        );
        assert_eq!(reply.status, 201, "{}", reply.text);
        reply.json()["id"].as_str().unwrap().to_owned()
    };
    let healthy = create("http://127.0.0.1:9/healthy");
    let disabled = create("http://127.0.0.1:9/disabled");
    let failing = create("http://127.0.0.1:9/refused");
    let reply = worker.portal(
        Method::PATCH,
        &format!("/portal/api/webhook-endpoints/{disabled}"),
        Some(&session),
        Some(&json!({"status": "disabled"})),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    // A test event to a port nobody listens on: its delivery fails, the endpoint is failing.
    let reply = worker.portal(
        Method::POST,
        &format!("/portal/api/webhook-endpoints/{failing}/test"),
        Some(&session),
        None,
    );
    assert!(reply.status < 300, "{}", reply.text);
    let html = eventually("the failing endpoint", Duration::from_secs(30), || {
        let html = overview(worker, &session);
        html.contains(&format!("data-endpoint=\"{failing}\""))
            .then_some(html)
    });
    let row = |id: &str| text_after(&html, &format!("data-endpoint=\"{id}\""), "class=\"badge ");
    assert_eq!(row(&failing), "s-pending\">Failing");
    assert_eq!(row(&disabled), "s-failed\">Disabled");
    assert!(!html.contains(&format!("data-endpoint=\"{healthy}\"")));
    assert!(
        html.contains("webhook endpoints failing or disabled."),
        "{html}"
    );
    // Not another institution's concern.
    let other = overview(worker, &worker.portal_login(1));
    assert!(!other.contains(&format!("data-endpoint=\"{failing}\"")));
}

#[test]
fn the_overview_and_payments_list_in_chromium_at_both_widths() {
    let _browser = exclusive();
    let _one = one_at_a_time();
    let worker = worker();
    let admin = &worker.credentials.institutions[0];
    let merchant = admin
        .merchants
        .iter()
        .find(|m| m.id == admin.merchant_ids[0])
        .map(|m| m.name.clone())
        .expect("the seeded payments' merchant");
    // The treasury short, to be seen.
    seed_books(worker, 5_000_000);
    let browser = Browser::start();
    browser.resize(1280, 900);
    // The admin lands on the overview.
    browser.log_in(&worker.base_url, &admin.admin_email, &admin.admin_password);
    assert!(browser.wait_text("main h1").contains("Overview"));
    assert!(browser.wait_text("#volume").contains("EUR"));
    shoot(&browser, "portal-overview");

    // The list: names, badges, the filter bar on one line at 1280 px.
    browser.goto(&format!("{}/portal/payments", worker.base_url));
    let table = browser.wait_text("#payments");
    assert!(table.contains(&merchant), "{table}");
    assert!(
        table.contains("Partially refunded") && table.contains("Underpaid"),
        "{table}"
    );
    shoot(&browser, "portal-payments");
    let one_line = browser.eval(
        "const boxes = [...document.querySelectorAll('form.filters .field')] \
           .map(f => f.getBoundingClientRect()); \
         return boxes.every(b => b.top < boxes[0].bottom && b.bottom > boxes[0].top);",
    );
    assert_eq!(one_line, true, "the filter bar is one line at 1280 px");

    // A quick range: 7 days keeps the payments of the last 7 days only.
    browser.click("nav.quick a:nth-of-type(2)");
    browser.wait_for_url("the 7-day range", |u| {
        u.contains(&format!("created_after={}", day(6)))
    });
    let table = browser.wait_text("#payments");
    assert!(
        table.contains("OV-REFUNDED") && table.contains("OV-TODAY-1"),
        "{table}"
    );
    assert!(
        !table.contains("OV-JPY") && !table.contains("OV-29"),
        "{table}"
    );
    assert_eq!(
        browser.wait_text("nav.quick a[aria-current=page]"),
        "7 days"
    );
    shoot(&browser, "portal-payments-7-days");

    // The search box finds one payment by its reference.
    browser.fill("#q", "OV-JPY");
    browser.click("form.search button");
    let found = browser.wait_text("#search-result");
    assert!(found.starts_with("1 payment match"), "{found}");
    assert!(browser
        .wait_text("#payments")
        .contains("External reference"));
    shoot(&browser, "portal-payments-search");

    // The first payment's page: its merchant by name.
    browser.click("#payments tbody tr a");
    browser.wait_for_url("the payment", |u| u.contains("/portal/payments/"));
    assert!(browser.wait_text("#merchant").contains(&merchant));
}

/// Checks the current page with axe-core at 1280 px and 390 px and screenshots it at both, a
/// screenful at a time down the page (`{name}-{width}-{n}.png`), so each can be looked at.
fn shoot(browser: &Browser, name: &str) {
    for (width, height) in [(1280, 1000), (390, 844)] {
        browser.resize(width, height);
        let violations = browser.serious_accessibility_violations();
        assert!(violations.is_empty(), "{name} at {width}: {violations:#?}");
        let total = browser
            .eval("return document.documentElement.scrollHeight;")
            .as_u64()
            .unwrap_or(0);
        let inner = browser
            .eval("return window.innerHeight;")
            .as_u64()
            .unwrap_or(1)
            .max(1);
        for n in 0..total.div_ceil(inner).clamp(1, 8) {
            browser.eval(&format!("window.scrollTo(0, {}); return 0;", n * inner));
            browser.screenshot(&format!("{name}-{width}-{n}"));
        }
        browser.eval("window.scrollTo(0, 0); return 0;");
    }
    browser.resize(1280, 900);
}

/// An outside probe's finding: a sandbox payment of 7.9e28 EUR was stored (no path lets such an
/// amount in now), and the overview then answered 500 for the 30 days it showed the payment:
/// the sums overflowed. Amounts stored past every bound, twice, and the overview, its JSON and
/// the payments list all answer; the sum is held rather than failing. On a worker of its own:
/// the rows are written while nothing else uses its database.
#[test]
fn a_stored_amount_past_every_bound_never_fails_the_overview() {
    let worker = Worker::own("overview_huge");
    let merchant = worker.credentials.institutions[0].merchant_ids[0];
    let conn = worker.database();
    for reference in ["OV-HUGE-1", "OV-HUGE-2"] {
        conn.execute(
            "INSERT INTO transactions (institution_id, merchant_id, status, raw_status, \
             amount_status, asset, currency, amount_gross, amount_expected, network_payment, \
             external_reference, created_at, updated_at) \
             VALUES (1, ?1, 'pending', 'succeeded', 'OVERPAID', 'USDC', 'EUR', \
             '79228162514264337593543950335', '40.00', 'polygon', ?2, ?3, ?3)",
            rusqlite::params![merchant, reference, format!("{}T00:00:01Z", day(1))],
        )
        .unwrap();
    }
    drop(conn);
    let session = worker.portal_login(0);
    let page = overview(worker, &session);
    // The day's sum is held at 2^53 cents; the other days add to it.
    assert!(
        total(&page, "EUR") >= Decimal::new(9_007_199_254_740_991, 2),
        "the held sum is shown"
    );
    let api = worker.portal(Method::GET, "/portal/api/overview", Some(&session), None);
    assert_eq!(api.status, 200, "{}", api.text);
    let list = worker.portal_page(&session, "/portal/payments?status=pending");
    assert_eq!(list.status, 200, "{}", list.text);
}
