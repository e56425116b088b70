//! Onboarding as a person does it, in real headless Chromium: a brand-new institution's admin
//! creates a merchant, completes its onboarding, adds a settlement wallet and a return origin,
//! copies the embed snippet into a page on the merchant's own origin, pays there in sandbox, and
//! finds the payment and its timeline in the payments view. On a worker of its own: it adds the
//! institution through a second wrangler process, like the rotation tests, which is safe only
//! while nothing else uses the worker.

use payrail_tests::browser::{exclusive, Browser, Site};
use payrail_tests::{eventually, Worker};
use std::time::Duration;

/// This module's own worker (see the module's doc).
fn worker() -> &'static Worker {
    Worker::own("onboarding_browser")
}

#[test]
fn a_new_institution_onboards_a_merchant_and_takes_its_first_payment() {
    let _one = exclusive();
    let worker = worker();
    let target = xtask::secrets::Target::Local(worker.persist_to().to_path_buf());
    let (_, password) =
        xtask::secrets::add_institution("Browser Test PSP", "admin@browser-psp.example", &target)
            .expect("add institution");
    let site = Site::start();
    site.page(
        "/thanks",
        "<!doctype html><title>Thanks</title><h1>Thanks for your order</h1>".to_owned(),
    );
    let browser = Browser::start();

    browser.log_in(&worker.base_url, "admin@browser-psp.example", &password);

    // An empty institution: no merchant yet.
    browser.goto(&format!("{}/portal/merchants", worker.base_url));
    assert!(browser.wait_text("main").contains("No merchants found"));
    browser.fill("#name", "Tea Corner");
    browser.fill("#legal_name", "Tea Corner Ltd");
    browser.fill("#email", "payments@tea-corner.example");
    browser.fill("#psp_reference_id", "TEA-1");
    browser.click("form[method='post'][action='/portal/merchants'] button");
    let merchant_page = browser.wait_for_url("the merchant page", |u| {
        u.contains("/portal/merchants/") && !u.ends_with("/merchants")
    });
    assert!(browser
        .wait_text("#payments-blocked")
        .contains("onboarding"));

    let onboarding = |status: &str| {
        eventually(
            &format!("onboarding {status}"),
            Duration::from_secs(10),
            || browser.text("#onboarding").filter(|t| t == status),
        )
    };
    browser.click("button[value='in_review']");
    onboarding("in_review");
    browser.click("button[value='completed']");
    onboarding("completed");
    assert_eq!(browser.url(), merchant_page);
    browser.fill(
        "tr[data-network='polygon'] input[name='address']",
        "0xd1220a0cf47c7b9be7a2e6ba89f429762e7b9adb",
    );
    browser.click("tr[data-network='polygon'] form.wallet button");
    eventually(
        "the wallet change recorded",
        Duration::from_secs(10),
        || {
            browser
                .text("#wallet-changes")
                .filter(|t| t.contains("polygon"))
        },
    );
    // A new wallet waits out its cool-off, and the page says until when: as a desktop and a
    // phone show it.
    let notice = browser.wait_text("tr[data-network='polygon'] .cooling");
    assert!(notice.contains("Used for settlements from"), "{notice}");
    let artifacts = payrail_tests::root().join("tests/artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifacts dir");
    for (width, name) in [
        (1280, "merchant-wallet-cool-off-1280"),
        (390, "merchant-wallet-cool-off-390"),
    ] {
        browser.resize(width, 900);
        browser.eval(
            "document.querySelector(\"tr[data-network='polygon']\").scrollIntoView(); return 0",
        );
        let png = browser.element_png("tr[data-network='polygon']");
        std::fs::write(artifacts.join(format!("{name}.png")), png).expect("write screenshot");
    }
    browser.resize(1000, 1000);
    browser.fill("#origins", &site.origin);
    browser.click("form[action$='/origins'] button");
    assert!(browser.wait_text("#payments-ready").contains("Ready"));
    browser.screenshot("onboarding-merchant-ready");

    // The snippet, as the admin copies it, on a page of the merchant's own origin.
    let snippet = browser.eval("return document.querySelector('#snippet').value");
    let snippet = snippet.as_str().expect("the snippet").to_owned();
    assert!(snippet.contains(&format!("{}/checkout.js", worker.base_url)));
    assert!(snippet.contains(&format!("{}/thanks", site.origin)));
    let shop = site.page(
        "/shop",
        format!("<!doctype html><title>Tea Corner</title><h1>Tea Corner</h1>\n{snippet}"),
    );
    browser.goto(&shop);
    browser.eval("Payrail.ready.then(function () { window.__ready = true; }); return null;");
    eventually("checkout.js to be ready", Duration::from_secs(20), || {
        browser
            .eval("return window.__ready === true")
            .as_bool()
            .filter(|ready| *ready)
    });
    browser.click("#pay-with-crypto");
    browser.wait_for_url("the hosted page", |u| u.contains("/checkout/cs_"));
    assert!(browser.wait_text("main").contains("Tea Corner"));
    browser.click("button[value='pay-exact']");
    browser.wait_for_url("the merchant's thanks page", |u| {
        u.starts_with(&format!("{}/thanks", site.origin))
    });

    // The payment and its timeline, in the payments view.
    browser.goto(&format!("{}/portal/payments", worker.base_url));
    browser.click("#payments tbody tr a");
    browser.wait_for_url("the payment page", |u| u.contains("/portal/payments/"));
    assert!(browser.wait_text("#status").starts_with("paid"));
    assert!(browser.wait_text("#timeline").contains("payment.succeeded"));
    browser.screenshot("onboarding-payment-timeline");

    // The other new pages, to be looked at: the overview counts the payment.
    browser.goto(&format!("{}/portal/", worker.base_url));
    assert!(browser.wait_text("#volume").contains("19.99"));
    browser.click("#by-currency summary");
    assert!(browser.wait_text("table[data-days='7']").contains("19.99"));
    browser.screenshot("portal-overview");
    browser.goto(&format!("{}/portal/payments", worker.base_url));
    browser.wait_text("#payments");
    browser.screenshot("portal-payments");
    browser.goto(&format!("{}/portal/users", worker.base_url));
    assert!(browser
        .wait_text("#users")
        .contains("admin@browser-psp.example"));
    browser.screenshot("portal-users");
}
