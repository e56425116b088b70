//! What a browser does, in real headless Chromium: checkout.js on a merchant page, the hosted
//! page, the sandbox, and the way back to the merchant.

use std::sync::OnceLock;
use std::time::Duration;

use payrail_tests::browser::{exclusive, shop_site, Browser, Site};
use payrail_tests::{eventually, Worker};
use serde_json::{json, Value};

/// The worker of the browser tests of the demo institutions (this module and `portal_browser`):
/// every one holds the browser lock, so they run one at a time and each has the worker to
/// itself (`portal_browser` takes the newest client and delivery of the first institution as
/// its own).
fn worker() -> &'static Worker {
    Worker::own("browser")
}

const KEY: &str = "pk_live_demoAlpineOutfitters0000";

fn site() -> &'static Site {
    static SITE: OnceLock<Site> = OnceLock::new();
    SITE.get_or_init(|| {
        // The merchant lets its checkouts return the customer to this site.
        let worker = worker();
        let merchant = worker.credentials.institutions[0].merchants[0].id;
        let also = ["https://shop.example", worker.base_url.as_str()];
        shop_site(worker, &worker.portal_login(0), merchant, &also)
    })
}

fn options(reference: &str) -> Value {
    json!({
        "publicKey": KEY,
        "amount": 25.5,
        "currency": "EUR",
        "title": "Test order",
        "externalReference": reference,
        "idempotencyKey": reference,
        "redirectUrl": format!("{}/thanks?order={reference}", site().origin),
        "openInNewTab": false,
        "allowCrypto": true
    })
}

/// Transactions of the first demo institution with this reference, through the partner API.
fn transactions(worker: &Worker, reference: &str) -> Vec<Value> {
    let token = worker.institution_token(0);
    let reply = worker.get(
        &format!("/v1/transactions?external_reference={reference}"),
        Some(&token),
        "/v1/transactions",
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()["data"].as_array().unwrap().clone()
}

fn errors(browser: &Browser) -> Vec<String> {
    serde_json::from_value(browser.eval("return window.__errors || [];")).unwrap()
}

fn on_hosted_page(url: &str) -> bool {
    url.contains("/checkout/cs_")
}

#[test]
fn demo_shop_to_hosted_page_to_payment_and_back() {
    let _one = exclusive();
    let worker = worker();
    let browser = Browser::start();
    browser.goto(&format!("{}/shop/", worker.base_url));
    browser.screenshot("demo-shop");
    browser.click("#buy-boots");
    let hosted = browser.wait_for_url("the hosted page", on_hosted_page);
    assert!(hosted.starts_with(&worker.base_url), "{hosted}");
    let page = browser.text("main").unwrap_or_default();
    for shown in [
        "Alpine Outfitters",
        "Trail boots",
        "149.90 EUR",
        "USDC",
        "Polygon",
    ] {
        assert!(page.contains(shown), "{shown} missing from:\n{page}");
    }
    let address = browser.text("#deposit-address").unwrap_or_default();
    assert!(
        address.starts_with("0x") && address.len() == 42,
        "{address}"
    );
    browser.screenshot("hosted-page");

    browser.click("button[value=pay-exact]");
    let back = browser.wait_for_url("the shop's thank-you page", |u| {
        u.starts_with(&format!("{}/shop/thanks?order=", worker.base_url))
    });
    browser.screenshot("returned-to-shop");
    let order = back
        .split("order=")
        .nth(1)
        .expect("order in the redirect URL");
    let found = transactions(worker, order);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["status"], "paid");
    assert_eq!(found[0]["raw_status"], "succeeded");
    assert_eq!(found[0]["amount"]["gross"], "149.90");
    assert_eq!(found[0]["amount_status"], "EXACT");
}

#[test]
fn a_new_tab_opens_from_the_click_and_pays() {
    let _one = exclusive();
    let worker = worker();
    let browser = Browser::start();
    let reference = "BT-NEWTAB-1";
    let mut opts = options(reference);
    opts["openInNewTab"] = json!(true);
    let merchant = site().checkout_page("/new-tab", &worker.base_url, &opts);
    browser.goto(&merchant);
    let first = browser.tabs();
    assert_eq!(first.len(), 1);
    browser.click("#pay");
    let tabs = eventually("a second tab", Duration::from_secs(15), || {
        let tabs = browser.tabs();
        (tabs.len() == 2).then_some(tabs)
    });
    let new_tab = tabs.into_iter().find(|t| *t != first[0]).expect("new tab");
    browser.switch_to(new_tab);
    browser.wait_for_url("the hosted page in the new tab", on_hosted_page);
    // The hosted page cannot reach back into the merchant's page.
    assert_eq!(browser.eval("return window.opener === null;"), json!(true));
    browser.click("button[value=pay-under]");
    browser.wait_for_url("the redirect", |u| {
        u.starts_with(&format!("{}/thanks", site().origin))
    });
    browser.switch_to(first[0].clone());
    assert_eq!(
        browser.url(),
        merchant,
        "the merchant page stays where it was"
    );
    let found = transactions(worker, reference);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["amount_status"], "UNDERPAID");
    assert_eq!(found[0]["amount"]["gross"], "22.95");
}

#[test]
fn invalid_options_log_one_error_naming_the_option_and_send_nothing() {
    let _one = exclusive();
    let worker = worker();
    let browser = Browser::start();
    // (option named in the error, field to change, new value or None to remove it)
    let cases: Vec<(&str, &str, Option<Value>)> = vec![
        ("publicKey", "publicKey", None),
        (
            "publicKey",
            "publicKey",
            Some(json!("sk_live_secret_not_a_key")),
        ),
        ("amount", "amount", Some(json!("25.50"))),
        ("amount", "amount", Some(json!(-3))),
        ("amount", "amount", Some(json!(10.555))),
        ("currency", "currency", Some(json!("eur"))),
        ("title", "title", Some(json!(""))),
        ("externalReference", "externalReference", Some(json!(42))),
        (
            "idempotencyKey",
            "idempotencyKey",
            Some(json!("has spaces")),
        ),
        (
            "redirectUrl",
            "redirectUrl",
            Some(json!("javascript:alert(1)")),
        ),
        ("openInNewTab", "openInNewTab", Some(json!("yes"))),
        ("allowCrypto", "allowCrypto", Some(json!(false))),
        ("locale", "locale", Some(json!("it"))),
        ("locale", "locale", Some(json!(5))),
        ("colour", "colour", Some(json!("blue"))),
    ];
    for (index, (option, field, value)) in cases.into_iter().enumerate() {
        let reference = format!("BT-BAD-{index}");
        let mut opts = options(&reference);
        match value {
            Some(value) => opts[field] = value,
            None => {
                opts.as_object_mut().unwrap().remove(field);
            }
        }
        let page = site().checkout_page(&format!("/bad-{index}"), &worker.base_url, &opts);
        browser.goto(&page);
        let logged = eventually("the console error", Duration::from_secs(10), || {
            let logged = errors(&browser);
            (!logged.is_empty()).then_some(logged)
        });
        browser.click("#pay");
        assert_eq!(logged.len(), 1, "{option}: {logged:?}");
        assert!(
            logged[0].starts_with("Payrail checkout: ") && logged[0].contains(option),
            "{option}: {logged:?}"
        );
        assert_eq!(errors(&browser).len(), 1, "clicking adds nothing: {option}");
        assert_eq!(
            browser.eval("return window.__requests.filter(function (u) { return u.indexOf('/checkout/sessions') >= 0; }).length;"),
            json!(0),
            "{option}: no session request"
        );
        assert_eq!(browser.url(), page, "{option}: the page stays");
        assert!(transactions(worker, &reference).is_empty(), "{option}");
    }
}

#[test]
fn calls_made_before_the_script_loads_are_queued() {
    let _one = exclusive();
    let worker = worker();
    let browser = Browser::start();
    // checkout.js is the page's last script and runs Payrail.checkout at once, long before the
    // wasm arrives: the call must wait, then bind.
    let merchant = site().checkout_page("/queued", &worker.base_url, &options("BT-QUEUE-1"));
    browser.goto(&merchant);
    browser.click("#pay");
    browser.wait_for_url("the hosted page", on_hosted_page);
    assert!(errors(&browser).is_empty());
}

#[test]
fn a_double_click_makes_one_payment() {
    let _one = exclusive();
    let worker = worker();
    let browser = Browser::start();
    let reference = "BT-DOUBLE-1";
    let mut opts = options(reference);
    // No idempotency key: only the disabled button stands between two clicks and two payments.
    opts.as_object_mut().unwrap().remove("idempotencyKey");
    let merchant = site().checkout_page("/double", &worker.base_url, &opts);
    browser.goto(&merchant);
    // Once checkout.js is ready, two clicks in the same task: the second finds the button
    // disabled.
    browser.eval(
        "Payrail.ready.then(function () { var b = document.querySelector('#pay'); \
         b.click(); b.click(); }); return null;",
    );
    browser.wait_for_url("the hosted page", on_hosted_page);
    assert_eq!(transactions(worker, reference).len(), 1);
}

#[test]
fn the_same_idempotency_key_gives_the_same_payment_and_other_options_a_conflict() {
    let _one = exclusive();
    let worker = worker();
    let browser = Browser::start();
    let reference = "BT-IDEM-1";
    let merchant = site().checkout_page("/idem", &worker.base_url, &options(reference));
    browser.goto(&merchant);
    browser.click("#pay");
    let first = browser.wait_for_url("the hosted page", on_hosted_page);
    browser.goto(&merchant);
    browser.click("#pay");
    let second = browser.wait_for_url("the hosted page again", on_hosted_page);
    assert_eq!(first, second, "a retry lands on the same checkout");
    assert_eq!(transactions(worker, reference).len(), 1);

    let mut other = options(reference);
    other["amount"] = json!(30);
    let changed = site().checkout_page("/idem-other", &worker.base_url, &other);
    browser.goto(&changed);
    browser.click("#pay");
    let logged = eventually(
        "the conflict in the console",
        Duration::from_secs(10),
        || {
            let logged = errors(&browser);
            (!logged.is_empty()).then_some(logged)
        },
    );
    assert!(logged[0].contains("idempotencyKey"), "{logged:?}");
    assert_eq!(browser.url(), changed, "no checkout opened");
    // The request went out (and through the page's fetch, as the invalid-options test assumes).
    assert_eq!(
        browser.eval("return window.__requests.filter(function (u) { return u.indexOf('/checkout/sessions') >= 0; }).length;"),
        json!(1)
    );
    let found = transactions(worker, reference);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["amount"]["expected"], "25.50");
    // The button works again after the refusal.
    assert_eq!(
        browser.eval("return document.querySelector('#pay').disabled;"),
        json!(false)
    );
}

/// A customer's clock that is 20 minutes fast, and status polls that fail: the hosted page
/// counts its 15 minutes from its own load (it used to read the countdown as over and reload
/// again and again), and a failed poll reloads nothing (a reload after a wallet send offered
/// the wallet buttons again).
#[test]
fn a_fast_clock_and_failing_polls_leave_the_hosted_page_as_it_is() {
    let _one = exclusive();
    let worker = worker();
    let session = worker.checkout_session(&options("BROWSER-CLOCK"));
    let url = session["url"].as_str().unwrap().to_owned();
    let browser = Browser::start();
    browser.inject_on_new_document(
        "(function () {
           var realNow = Date.now.bind(Date);
           Date.now = function () { return realNow() + 20 * 60 * 1000; };
           sessionStorage.setItem('loads', String(Number(sessionStorage.getItem('loads') || 0) + 1));
           var realFetch = window.fetch.bind(window);
           window.__polls = 0;
           window.fetch = function (target, init) {
             if (String(target).indexOf('/status') >= 0) {
               window.__polls += 1;
               return Promise.resolve(new Response('{\"error\":\"internal_error\"}',
                 { status: 500, headers: { 'Content-Type': 'application/json' } }));
             }
             return realFetch(target, init);
           };
         })();",
    );
    browser.goto(&url);
    let first = browser.wait_text("#countdown");
    assert!(first.starts_with("14:") || first == "15:00", "{first}");
    eventually("two failed polls", Duration::from_secs(20), || {
        (browser.eval("return window.__polls;").as_u64().unwrap_or(0) >= 2).then_some(())
    });
    let loads = browser.eval("return sessionStorage.getItem('loads');");
    assert_eq!(loads, json!("1"), "the page loaded once");
    let now = browser.text("#countdown").unwrap();
    assert!(now.starts_with("14:"), "{now}");
    assert!(errors(&browser).is_empty(), "{:?}", errors(&browser));
}
