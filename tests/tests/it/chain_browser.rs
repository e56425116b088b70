//! The whole customer path on a real local chain, in headless Chromium at a phone's size: the
//! merchant page's button, the hosted page's QR code (read from the screen, as a wallet's camera
//! would), a real token transfer to what it encodes, the page going waiting → confirming →
//! received, the partner API, and the signed `payment.succeeded` event at the receiver.
//!
//! Sandbox mode, because the loopback receiver is refused in production (webhook URLs must be
//! public https there); the watched network's path is the same in both modes, and sandbox's
//! simulated payments are refused for it (checked below).

use std::time::Duration;

use payrail_tests::browser::{exclusive, shop_site, Browser};
use payrail_tests::chain::{chains, Anvil, Relay, TEST_XPUB};
use payrail_tests::hooks::{assert_signed, endpoint, of_transaction, wait_for};
use payrail_tests::receiver::Receiver;
use payrail_tests::{eventually, Worker};
use reqwest::Method;
use serde_json::json;

/// Reads the QR code in a PNG.
fn decode_qr(png: &[u8]) -> String {
    let image = image::load_from_memory(png).expect("a PNG").to_luma8();
    let mut prepared = rqrr::PreparedImage::prepare(image);
    let grids = prepared.detect_grids();
    assert_eq!(grids.len(), 1, "one QR code on the screen");
    grids[0].decode().expect("a readable QR code").1
}

#[test]
fn a_customer_scans_the_qr_code_pays_on_chain_and_the_page_follows() {
    let _one = exclusive();
    let anvil = Anvil::start();
    // The worker reaches the node through a relay the test can switch off.
    let relay = Relay::start(&anvil.url);
    let usdc = anvil.token("USD Coin", "USDC");
    let customer = anvil.account(1);
    anvil.mint(&usdc, &customer, 1_000_000_000);
    let worker = Worker::start_with_vars(
        "sandbox",
        3600,
        &[
            ("PAYRAIL_EVM_XPUB", TEST_XPUB),
            (
                "PAYRAIL_CHAINS",
                &chains("polygon", &relay.url, 3, &[("USDC", &usdc)], &[]),
            ),
            ("PAYRAIL_DEMO_WALLET", &customer),
        ],
    );
    let receiver = Receiver::start();
    let portal = worker.portal_login(0);
    let (_, secret) = endpoint(&worker, &portal, &receiver.url("/hooks"), None);
    let merchant = &worker.credentials.institutions[0].merchants[0];
    let site = shop_site(&worker, &portal, merchant.id, &[]);
    let page = site.checkout_page(
        "/order",
        &worker.base_url,
        &json!({
            "publicKey": merchant.public_key, "amount": 25.5, "currency": "USD",
            "title": "Rain jacket", "externalReference": "CHAIN-BROWSER",
            "redirectUrl": format!("{}/thanks", site.origin), "allowCrypto": true
        }),
    );

    let browser = Browser::start();
    browser.resize(390, 844);
    browser.goto(&page);
    browser.click("#pay");
    browser.wait_for_url("the hosted page", |u| u.contains("/checkout/cs_"));
    let address = browser.wait_text("#deposit-address");
    let shown = browser.text("main").unwrap_or_default();
    for part in [
        "Rain jacket",
        "25.50 USD",
        "25.5 USDC",
        "Polygon",
        "Token contract",
    ] {
        assert!(shown.contains(part), "{part} missing from:\n{shown}");
    }
    assert!(!shown.contains("simulated"), "{shown}");
    assert_eq!(
        browser
            .text("#token-contract")
            .unwrap()
            .to_ascii_lowercase(),
        usdc.to_ascii_lowercase()
    );
    let left = browser.text("#countdown").unwrap();
    assert!(left.starts_with("14:") || left == "15:00", "{left}");
    // The page fits a phone: nothing wider than the screen.
    let width = browser.eval("return document.documentElement.scrollWidth;");
    assert!(width.as_u64().unwrap() <= 390, "page is {width} px wide");
    browser.screenshot("chain-hosted-waiting");

    // What a wallet's camera reads.
    let uri = decode_qr(&browser.element_png("#payment-qr"));
    let expected = format!("ethereum:{usdc}@31337/transfer?address={address}&uint256=25500000");
    assert_eq!(uri.to_ascii_lowercase(), expected.to_ascii_lowercase());
    let units: u128 = uri.rsplit("uint256=").next().unwrap().parse().unwrap();
    let to = uri
        .split("address=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap();

    // The simulated payment buttons are not there, and refused if posted.
    assert!(browser.text("button[value=pay-exact]").is_none());
    let session = browser.url().rsplit('/').next().unwrap().to_owned();
    let refused = worker.send(
        worker
            .request(
                Method::POST,
                &format!("/checkout/{session}/sandbox/pay-exact"),
            )
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body("control=pay-exact"),
        None,
    );
    assert_eq!(refused.status, 409);
    assert!(refused.text.contains("made on chain"), "{}", refused.text);

    // The node goes away for a moment: the page says it is checking, and carries on after.
    relay.set_up(false);
    let checking = eventually("the page to miss the node", Duration::from_secs(20), || {
        browser
            .text("#chain-state")
            .filter(|t| t.contains("Checking the network"))
    });
    assert!(checking.contains("for your payment"), "{checking}");
    relay.set_up(true);
    eventually(
        "the page to reach the node again",
        Duration::from_secs(20),
        || {
            browser
                .text("#chain-state")
                .filter(|t| t.starts_with("Waiting for your payment"))
        },
    );

    let hash = anvil.transfer(&usdc, &customer, to, units);
    let confirming = eventually(
        "the page to see the transfer",
        Duration::from_secs(20),
        || {
            browser
                .text("#chain-state")
                .filter(|t| t.contains("confirming"))
        },
    );
    assert!(confirming.contains("confirming 1/3"), "{confirming}");
    browser.eval("document.getElementById('status').scrollIntoView(false); return 0;");
    browser.screenshot("chain-hosted-confirming");

    anvil.mine(2);
    eventually(
        "the page to show the payment",
        Duration::from_secs(20),
        || {
            browser
                .text("#status")
                .filter(|t| t.contains("Payment received"))
        },
    );
    // It returns the customer to the shop by itself in a few seconds, unless asked to stay
    // (the time limit can be turned off: no meta refresh, WCAG 2.2.1).
    let returning = eventually("the return announced", Duration::from_secs(10), || {
        browser
            .text("#auto-return")
            .filter(|t| t.contains("Returning you to"))
    });
    let received_at = std::time::Instant::now();
    browser.click("#stay");
    assert!(returning.contains("in 5 seconds"), "{returning}");
    browser.screenshot("chain-hosted-received");
    let found = browser.serious_accessibility_violations();
    assert!(found.is_empty(), "the received page: {found:#?}");
    let hosted = browser.url();
    assert!(hosted.contains("/checkout/cs_"), "{hosted}");
    eventually(
        "the return's time to pass with the page kept",
        Duration::from_secs(20),
        || {
            assert_eq!(browser.url(), hosted, "it stayed");
            (received_at.elapsed() > Duration::from_secs(7)).then_some(())
        },
    );
    browser.click("#return-link");
    browser.wait_for_url("the merchant's thank-you page", |u| {
        u.starts_with(&format!("{}/thanks", site.origin))
    });

    let token = worker.institution_token(0);
    let list = worker.get(
        "/v1/transactions?external_reference=CHAIN-BROWSER",
        Some(&token),
        "/v1/transactions",
    );
    let t = list.json()["data"][0].clone();
    assert_eq!(t["raw_status"], "succeeded", "{t}");
    assert_eq!(t["tx_hashes"]["source"], json!(hash));
    assert_eq!(t["amount"]["gross"], "25.50");
    assert_eq!(t["amount_status"], "EXACT");
    let id = t["id"].as_i64().unwrap();
    let received = wait_for(&receiver, "payment.succeeded", 1);
    let mine = of_transaction(&received, id);
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].json()["type"], "payment.succeeded");
    assert_eq!(mine[0].json()["data"]["tx_hashes"]["source"], json!(hash));
    assert_signed(&mine[0], &secret);

    // The sandbox panel's demo wallet pays the next order with a real transaction.
    let next = site.checkout_page(
        "/order-2",
        &worker.base_url,
        &json!({
            "publicKey": merchant.public_key, "amount": 3, "currency": "USD",
            "title": "Socks", "externalReference": "CHAIN-DEMO-WALLET",
            "redirectUrl": format!("{}/thanks", site.origin), "allowCrypto": true
        }),
    );
    browser.goto(&next);
    browser.click("#pay");
    browser.wait_for_url("the hosted page", |u| u.contains("/checkout/cs_"));
    browser.click("button[value=pay-from-demo-wallet]");
    eventually(
        "the demo wallet's transfer",
        Duration::from_secs(20),
        || {
            browser
                .text("#chain-state")
                .filter(|t| t.contains("confirming"))
        },
    );
    anvil.mine(2);
    eventually("the demo payment received", Duration::from_secs(20), || {
        browser
            .text("#status")
            .filter(|t| t.contains("Payment received"))
    });
    let list = worker.get(
        "/v1/transactions?external_reference=CHAIN-DEMO-WALLET",
        Some(&token),
        "/v1/transactions",
    );
    let t = &list.json()["data"][0];
    assert_eq!(t["raw_status"], "succeeded", "{t}");
    assert_eq!(t["amount"]["gross"], "3.00");
    let source = t["tx_hashes"]["source"].as_str().unwrap();
    let receipt = anvil.rpc("eth_getTransactionReceipt", json!([source]));
    assert_eq!(receipt["status"], "0x1", "a real transaction: {receipt}");
    assert_eq!(
        receipt["from"].as_str().unwrap().to_ascii_lowercase(),
        customer.to_ascii_lowercase()
    );
    // The books hold the payment in custody, owed to its merchant, as the chain does.
    payrail_tests::books::settle_and_assert_balanced(&worker, &anvil);
}
