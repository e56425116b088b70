//! The portal in real headless Chromium: log in, create an API client and use it, rotate it, add
//! a webhook endpoint and reveal its secret. Screenshots land in tests/artifacts/.

use payrail_tests::browser::{exclusive, Browser};
use payrail_tests::Worker;

/// The worker of the browser tests of the demo institutions (this module and `browser`): every
/// one holds the browser lock, so they run one at a time and this test has the worker to itself
/// (it takes the newest client and delivery of the first institution as its own).
fn worker() -> &'static Worker {
    Worker::own("browser")
}

#[test]
fn an_admin_manages_clients_and_endpoints_in_the_browser() {
    let _one = exclusive();
    let worker = worker();
    let admin = &worker.credentials.institutions[0];
    let browser = Browser::start();

    browser.goto(&format!("{}/portal/developers", worker.base_url));
    browser.wait_for_url("the login page", |u| u.ends_with("/portal/login"));
    browser.fill("#email", &admin.admin_email);
    browser.fill("#password", "not the password");
    browser.click("form[action='/portal/login'] button");
    let refused = browser.wait_text(".error");
    assert!(refused.contains("wrong"), "{refused}");
    browser.fill("#password", &admin.admin_password);
    browser.screenshot("portal-login");
    browser.click("form[action='/portal/login'] button");
    // The admin lands on the overview, then goes to the developers page.
    browser.wait_for_url("the overview", |u| u.ends_with("/portal/"));
    assert!(browser
        .wait_text("header .who")
        .contains("Northwind Payments"));
    browser.click("a[href='/portal/developers']");
    browser.wait_for_url("the developers page", |u| u.ends_with("/portal/developers"));

    // A new client; its secret is shown once and works at the token endpoint.
    browser.fill("#client-name", "Browser-made client");
    browser.click("form[action='/portal/developers/clients'] button");
    let shown = browser.wait_text("#revealed-secret");
    browser.screenshot("portal-client-created");
    let client_id = browser
        .eval("return document.querySelector('tbody tr[data-client]').getAttribute('data-client');")
        .as_str()
        .expect("the newest client first")
        .to_owned();
    assert!(browser
        .text("main")
        .unwrap_or_default()
        .contains("Browser-made client"));
    let token = worker.token(&client_id, &shown);
    assert_eq!(
        worker
            .get("/v1/transactions", Some(&token), "/v1/transactions")
            .status,
        200
    );

    // Rotate: the old secret stops at once.
    browser.click(&format!(
        "tr[data-client='{client_id}'] button[name=rotate]"
    ));
    let rotated = payrail_tests::eventually(
        "the rotated secret",
        std::time::Duration::from_secs(15),
        || browser.text("#revealed-secret").filter(|s| *s != shown),
    );
    assert_ne!(rotated, shown);
    browser.screenshot("portal-client-rotated");
    worker
        .token_form(&[
            ("grant_type", "client_credentials"),
            ("client_id", &client_id),
            ("client_secret", &shown),
        ])
        .assert_error(401, "invalid_client");
    worker.token(&client_id, &rotated);

    // A webhook endpoint, then its secret on demand.
    browser.click("a[href='/portal/webhooks']");
    browser.wait_for_url("the webhooks page", |u| u.ends_with("/portal/webhooks"));
    browser.fill("#url", "http://127.0.0.1:9/payrail");
    browser.fill("#description", "Order system");
    browser.click("input[value='payment.paid']");
    browser.click("form[action='/portal/webhooks'] button[type=submit]");
    let created_secret = browser.wait_text("#revealed-secret");
    assert!(created_secret.starts_with("whsec_"), "{created_secret}");
    browser.screenshot("portal-endpoint-created");
    let detail = browser.wait_text("h1 code");
    assert_eq!(detail, "http://127.0.0.1:9/payrail");
    let endpoint_id = browser.wait_text("#endpoint-id");
    browser.goto(&format!(
        "{}/portal/webhooks/{endpoint_id}",
        worker.base_url
    ));
    browser.wait_text("button[name=reveal]");
    assert!(
        browser.text("#revealed-secret").is_none(),
        "not shown again unasked"
    );
    browser.click("button[name=reveal]");
    assert_eq!(browser.wait_text("#revealed-secret"), created_secret);
    browser.screenshot("portal-endpoint-secret");
    // A test event shows up in the endpoint's delivery log.
    browser.click("button[name=test]");
    let logged = browser.wait_text("tr[data-delivery]");
    assert!(logged.contains("webhook.test"), "{logged}");
    browser.screenshot("portal-delivery-log");
    browser.click("a[href='/portal/webhooks']");
    browser.wait_for_url("the endpoint list", |u| u.ends_with("/portal/webhooks"));
    assert!(browser.wait_text("main table").contains("payment.paid"));
    browser.screenshot("portal-webhooks");
}

/// Every page of the portal, at a desktop's and a phone's width, has no serious or critical
/// axe-core violation (the pages other modules check in their own states are among them).
#[test]
fn every_portal_page_passes_axe_core() {
    let _one = exclusive();
    let worker = worker();
    let admin = &worker.credentials.institutions[0];
    let browser = Browser::start();
    browser.goto(&format!("{}/portal/login", worker.base_url));
    check_page(&browser, "login");
    browser.fill("#email", &admin.admin_email);
    browser.fill("#password", &admin.admin_password);
    browser.click("form[action='/portal/login'] button");
    browser.wait_text("header .who");
    let mut paths: Vec<String> = [
        "/portal/",
        "/portal/payments",
        "/portal/merchants",
        "/portal/developers",
        "/portal/webhooks",
        "/portal/users",
        // A page's failure is a page too: a bad filter, an unknown page.
        "/portal/payments?status=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "/portal/no-such-page",
    ]
    .map(String::from)
    .to_vec();
    // One of each detail page, found from the lists.
    for (list, link) in [
        ("/portal/payments", "/portal/payments/"),
        ("/portal/merchants", "/portal/merchants/"),
    ] {
        browser.goto(&format!("{}{list}", worker.base_url));
        let href = browser.eval(&format!(
            "var a = document.querySelector(\"main a[href^='{link}']\"); \
             return a ? a.getAttribute('href') : null;"
        ));
        paths.push(href.as_str().expect("a detail link").to_owned());
    }
    for path in &paths {
        browser.goto(&format!("{}{path}", worker.base_url));
        browser.wait_text("main");
        check_page(&browser, path);
    }
    // The merchant page's settlement wallets, with their "Contract wallet" box, as a person
    // sees them at both widths.
    let merchant = paths.last().expect("a merchant's page");
    browser.goto(&format!("{}{merchant}", worker.base_url));
    for width in [1280, 390] {
        browser.resize(width, 900);
        browser.eval(
            "document.querySelector(\"tr[data-network='polygon']\").scrollIntoView(); return 1;",
        );
        browser.screenshot(&format!("portal-merchant-wallets-{width}"));
    }
}

/// axe-core at 1280 px and 390 px on the current page, and a screenshot at each width
/// (`tests/artifacts/axe-<page>-<width>.png`).
fn check_page(browser: &Browser, what: &str) {
    let name: String = what
        .trim_matches('/')
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    for width in [1280, 390] {
        browser.resize(width, 900);
        let violations = browser.serious_accessibility_violations();
        assert!(violations.is_empty(), "{what} at {width}: {violations:#?}");
        browser.screenshot(&format!("axe-{name}-{width}"));
    }
}
