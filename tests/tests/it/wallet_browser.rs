//! The hosted page's second way to pay, a wallet in the customer's browser (EIP-1193, found by
//! EIP-6963), on a real local chain in headless Chromium: the test plays two injected wallets,
//! forwarding one's requests to anvil from an unlocked account and declining with the other. A
//! refusal, the wrong chain and too little balance each get their message; the payments made, an
//! ERC-20 transfer and then ether, are credited and settled like QR payments, and the books
//! match the chain. Then the page for everyone: in German by `Accept-Language`, in French by the
//! `locale` option and in Spanish by checkout.js's `locale` option (amounts and dates the
//! language's way), by keyboard alone in order with a visible focus, and with no serious
//! axe-core violation — as the demo shop.

use std::cell::RefCell;
use std::time::Duration;

use payrail_tests::browser::{exclusive, shop_site, Browser};
use payrail_tests::chain::{chains, Anvil, TEST_XPUB};
use payrail_tests::wallet::{WalletRequest, Wallets};
use payrail_tests::{eventually, Worker};
use reqwest::Method;
use serde_json::{json, Value};

const PAYING: &str = "Anvil Wallet";
const DECLINING: &str = "Declining Wallet";

/// What the played wallet does: its chain and account, whether it refuses the next switch of
/// chain, the chain a page asked it to add, and the transaction it sent.
struct Played {
    chain: String,
    account: String,
    refuse_switch: bool,
    added: Option<Value>,
    sent: Option<(Value, String)>,
}

/// Text as a reader sees it: the narrow and plain no-break spaces a language puts in numbers
/// read as spaces.
fn plain(text: &str) -> String {
    text.replace(['\u{a0}', '\u{202f}'], " ")
}

fn no_serious_violations(browser: &Browser, what: &str) {
    let found = browser.serious_accessibility_violations();
    assert!(found.is_empty(), "{what}: {found:#?}");
}

#[test]
fn a_customer_pays_from_the_browser_wallet_in_their_language_and_by_keyboard() {
    let _one = exclusive();
    let anvil = Anvil::start();
    let usdc = anvil.token("USD Coin", "USDC");
    let customer = anvil.account(1);
    let poor = anvil.account(2);
    anvil.mint(&usdc, &customer, 1_000_000_000);
    // The node URL the worker reads stays private; the public one is what a wallet may add.
    let mut config: Value =
        serde_json::from_str(&chains("polygon", &anvil.url, 3, &[("USDC", &usdc)], &[])).unwrap();
    config["polygon"]["public_rpc_url"] = json!(anvil.url);
    // Base on the same node, taking ether at 3,000 USD.
    let ether_usd = anvil.feed("ETH / USD", 300_000_000_000, anvil.time());
    config["base"] = json!({"rpc_url": anvil.url, "public_rpc_url": anvil.url, "chain_id": 31337,
        "confirmations": 3, "native": "ETH", "feeds": {"ETH/USD": {"address": ether_usd}}});
    let worker = Worker::start_with_vars(
        "sandbox",
        3600,
        &[
            ("PAYRAIL_EVM_XPUB", TEST_XPUB),
            ("PAYRAIL_CHAINS", &config.to_string()),
        ],
    );
    let portal = worker.portal_login(0);
    let merchant = &worker.credentials.institutions[0].merchants[0];
    let site = shop_site(&worker, &portal, merchant.id, &[]);
    let options = |reference: &str| {
        json!({
            "publicKey": merchant.public_key, "amount": 25.5, "currency": "USD",
            "title": "Rain jacket", "externalReference": reference,
            "redirectUrl": format!("{}/thanks", site.origin), "allowCrypto": true
        })
    };
    let page = site.checkout_page("/order", &worker.base_url, &options("WALLET-EN"));

    let browser = Browser::start();
    let wallets = Wallets::inject(&browser, &[PAYING, DECLINING]);
    browser.resize(1280, 900);
    browser.goto(&page);
    browser.click("#pay");
    browser.wait_for_url("the hosted page", |u| u.contains("/checkout/cs_"));
    let deposit = browser.wait_text("#deposit-address");
    let offered = eventually(
        "both wallets offered by name",
        Duration::from_secs(10),
        || {
            browser
                .text("#wallets")
                .filter(|t| t.contains("Pay with Anvil Wallet"))
        },
    );
    assert!(offered.contains("Pay with Declining Wallet"), "{offered}");
    no_serious_violations(&browser, "the hosted page with wallets");

    // By keyboard alone: Tab walks the ways to pay, the QR code, each wallet and the copy
    // button in the order they are shown, each with a visible focus ring.
    let methods: Vec<String> = browser
        .eval("return Array.from(document.querySelectorAll('.methods button'), b => b.textContent.trim());")
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("button {}", m.as_str().unwrap()))
        .collect();
    for method in ["button USDC · Polygon", "button ETH · Base"] {
        assert!(methods.contains(&method.to_owned()), "{methods:?}");
    }
    let mut expected = methods.clone();
    expected.extend(
        [
            "a payment-qr",
            "button Pay with Anvil Wallet",
            "button Pay with Declining Wallet",
            "button copy-address",
        ]
        .map(String::from),
    );
    let mut order = Vec::new();
    for _ in 0..expected.len() {
        browser.press_tab();
        let focused = browser.eval(
            "var e = document.activeElement; var s = getComputedStyle(e);
             return [e.tagName.toLowerCase(), e.id || e.textContent.trim(),
                     s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2];",
        );
        assert_eq!(focused[2], json!(true), "no visible focus on {focused}");
        order.push(format!(
            "{} {}",
            focused[0].as_str().unwrap(),
            focused[1].as_str().unwrap()
        ));
    }
    assert_eq!(order, expected);
    browser.resize(1280, 1300);
    browser.screenshot("wallet-hosted-en-1280");

    let state = RefCell::new(Played {
        chain: "0x1".to_owned(),
        account: poor.clone(),
        refuse_switch: true,
        added: None,
        sent: None,
    });
    let play = |r: &WalletRequest| -> Result<Value, (i64, String)> {
        let mut s = state.borrow_mut();
        let rejected = || Err((4001, "User rejected the request.".to_owned()));
        if r.wallet == DECLINING {
            return rejected();
        }
        match r.method.as_str() {
            "eth_requestAccounts" => Ok(json!([s.account])),
            "eth_chainId" => Ok(json!(s.chain)),
            "wallet_switchEthereumChain" if s.refuse_switch => {
                s.refuse_switch = false;
                rejected()
            }
            "wallet_switchEthereumChain" if s.added.is_none() => {
                Err((4902, "Unrecognized chain ID".to_owned()))
            }
            "wallet_switchEthereumChain" => {
                s.chain = r.params[0]["chainId"].as_str().unwrap().to_owned();
                Ok(Value::Null)
            }
            "wallet_addEthereumChain" => {
                s.added = Some(r.params[0].clone());
                s.chain = r.params[0]["chainId"].as_str().unwrap().to_owned();
                Ok(Value::Null)
            }
            method => {
                let result = anvil
                    .try_rpc(method, r.params.clone())
                    .ok_or((-32603, format!("{method} failed")))?;
                if method == "eth_sendTransaction" {
                    s.sent = Some((r.params[0].clone(), result.as_str().unwrap().to_owned()));
                }
                Ok(result)
            }
        }
    };
    let until = |what: &str, css: &str, shows: &str| -> String {
        eventually(what, Duration::from_secs(20), || {
            wallets.serve(&browser, &play);
            browser.text(css).filter(|t| plain(t).contains(shows))
        })
    };

    // Declined in the wallet.
    assert_eq!(
        browser.text("#wallets button:nth-child(2)").unwrap(),
        "Pay with Declining Wallet"
    );
    browser.click("#wallets button:nth-child(2)");
    let declined = until(
        "the refusal",
        "#wallet-error",
        "You declined the request in Declining Wallet",
    );
    assert!(declined.contains("Nothing was sent"), "{declined}");
    assert!(
        browser.element_png("#payment-qr").len() > 100,
        "the QR code stays"
    );

    // On another chain, and the switch refused.
    browser.click("#wallets button:nth-child(1)");
    until(
        "the wrong chain",
        "#wallet-error",
        "Anvil Wallet is on another network. Switch it to Polygon to pay",
    );
    // The wallet does not know the chain: the page adds it, then finds too little balance.
    browser.click("#wallets button:nth-child(1)");
    let low = until(
        "too little balance",
        "#wallet-error",
        "This account holds 0 USDC; the payment needs 25.5 USDC",
    );
    assert!(low.contains("QR code"), "{low}");
    let added = state.borrow().added.clone().expect("the chain added");
    assert_eq!(
        added,
        json!({"chainId": "0x7a69", "chainName": "Polygon", "rpcUrls": [anvil.url],
               "nativeCurrency": {"name": "POL", "symbol": "POL", "decimals": 18}})
    );
    assert!(state.borrow().sent.is_none());

    // From the funded account: exactly the quoted transfer, its hash, then the confirmations.
    state.borrow_mut().account = customer.clone();
    browser.click("#wallets button:nth-child(1)");
    let sent_text = until("the transaction sent", "#wallet-state", "transaction 0x");
    let (tx, hash) = state.borrow().sent.clone().expect("a transaction sent");
    assert!(sent_text.contains(&hash), "{sent_text}");
    assert_eq!(
        tx["to"].as_str().unwrap().to_ascii_lowercase(),
        usdc.to_ascii_lowercase()
    );
    assert_eq!(
        tx["data"].as_str().unwrap(),
        format!(
            "0xa9059cbb{:0>64}{:064x}",
            deposit.trim_start_matches("0x").to_ascii_lowercase(),
            25_500_000u128
        )
    );
    assert_eq!(anvil.balance_of(&usdc, &deposit), 25_500_000);
    let confirming = until("the confirmations", "#chain-state", "confirming");
    assert!(confirming.contains("confirming 1/3"), "{confirming}");
    assert!(
        browser.eval("return document.querySelectorAll('#wallets button:not([disabled])').length;")
            == json!(0),
        "no second payment while the first confirms"
    );
    browser.resize(390, 1700);
    browser.screenshot("wallet-hosted-sent-390");
    anvil.mine(2);
    until("the payment received", "#status", "Payment received");
    browser.wait_for_url("the merchant's thank-you page", |u| {
        u.starts_with(&format!("{}/thanks", site.origin))
    });
    let token = worker.institution_token(0);
    let list = worker.get(
        "/v1/transactions?external_reference=WALLET-EN",
        Some(&token),
        "/v1/transactions",
    );
    let t = &list.json()["data"][0];
    assert_eq!(t["raw_status"], "succeeded", "{t}");
    assert_eq!(t["tx_hashes"]["source"], json!(hash));
    assert_eq!(t["amount"]["gross"], "25.50");
    assert_eq!(t["amount_status"], "EXACT");

    // In ether: the same wallet sends exactly the quoted value to the deposit address, no call.
    let page = site.checkout_page("/order-ether", &worker.base_url, &options("WALLET-ETH"));
    browser.goto(&page);
    browser.click("#pay");
    browser.wait_for_url("the hosted page", |u| u.contains("/checkout/cs_"));
    browser.wait_text("#deposit-address");
    browser.click("button[value='ETH:base']");
    // 25.50 USD at 3,000 USD an ether.
    eventually("the ether quote", Duration::from_secs(10), || {
        browser
            .text("#crypto-amount")
            .filter(|t| t.as_str() == "0.0085 ETH")
    });
    let deposit = browser.wait_text("#deposit-address");
    state.borrow_mut().sent = None;
    eventually("the wallet offered", Duration::from_secs(10), || {
        browser
            .text("#wallets button:nth-child(1)")
            .filter(|t| t.as_str() == "Pay with Anvil Wallet")
    });
    browser.click("#wallets button:nth-child(1)");
    let sent_text = until("the ether sent", "#wallet-state", "transaction 0x");
    let (tx, hash) = state.borrow().sent.clone().expect("a transaction sent");
    assert!(sent_text.contains(&hash), "{sent_text}");
    assert_eq!(
        tx["to"].as_str().unwrap().to_ascii_lowercase(),
        deposit.to_ascii_lowercase()
    );
    assert_eq!(
        tx["value"],
        json!(format!("{:#x}", 8_500_000_000_000_000u128))
    );
    assert!(tx.get("data").is_none(), "{tx}");
    until("the ether confirming", "#chain-state", "confirming 1/3");
    anvil.mine(2);
    until("the ether received", "#status", "Payment received");
    let list = worker.get(
        "/v1/transactions?external_reference=WALLET-ETH",
        Some(&token),
        "/v1/transactions",
    );
    let t = &list.json()["data"][0];
    assert_eq!(t["raw_status"], "succeeded", "{t}");
    assert_eq!(t["tx_hashes"]["source"], json!(hash));
    assert_eq!(t["amount_status"], "EXACT");

    // In German, by the browser's Accept-Language (through checkout.js, as a shop does).
    browser.set_accept_language("de-DE,de;q=0.9,en;q=0.5");
    let page = site.checkout_page("/order-de", &worker.base_url, &options("WALLET-DE"));
    browser.goto(&page);
    browser.click("#pay");
    browser.wait_for_url("the hosted page", |u| u.contains("/checkout/cs_"));
    browser.wait_text("#deposit-address");
    let german = eventually("the wallets in German", Duration::from_secs(10), || {
        browser
            .text("main")
            .filter(|t| t.contains("Mit Anvil Wallet bezahlen"))
    });
    assert_eq!(browser.eval("return document.documentElement.lang;"), "de");
    for shown in [
        "Zahlung an",
        "25,50 USD",
        "Senden Sie genau",
        "25,5 USDC",
        "Netzwerk",
        "Verbleibende Zeit",
        "Zahlbar bis",
        "Wir warten auf Ihre Zahlung.",
    ] {
        assert!(
            plain(&german).contains(shown),
            "{shown} missing from:\n{german}"
        );
    }
    // The deadline in the customer's time zone, written the German way: 23.11.2026, 10:15.
    let deadline = browser.text("#pay-by").unwrap();
    let date = deadline.split(',').next().unwrap();
    let parts: Vec<&str> = date.split('.').collect();
    assert!(
        parts.len() == 3 && parts.iter().all(|p| p.chars().all(|c| c.is_ascii_digit())),
        "{deadline}"
    );
    no_serious_violations(&browser, "the hosted page in German");
    // Tall windows: the whole page in one picture.
    browser.resize(390, 1700);
    browser.screenshot("hosted-de-390");
    browser.resize(1280, 1300);
    browser.screenshot("hosted-de-1280");
    // A refusal in German.
    browser.click("#wallets button:nth-child(2)");
    until(
        "the refusal in German",
        "#wallet-error",
        "Sie haben die Anfrage in Declining Wallet abgelehnt",
    );

    // In French, by the locale option, whatever the browser prefers.
    let french = worker.checkout_session(&json!({
        "publicKey": merchant.public_key, "amount": 1234.5, "currency": "USD",
        "title": "Tente", "externalReference": "WALLET-FR",
        "redirectUrl": format!("{}/thanks", site.origin), "allowCrypto": true,
        "locale": "fr-FR"
    }));
    browser.goto(french["url"].as_str().unwrap());
    let shown = eventually("the page in French", Duration::from_secs(10), || {
        browser
            .text("main")
            .filter(|t| t.contains("Payer avec Anvil Wallet"))
    });
    assert_eq!(browser.eval("return document.documentElement.lang;"), "fr");
    let crypto = plain(&browser.text("#crypto-amount").unwrap());
    assert_eq!(crypto, "1 234,5 USDC");
    for shown_text in [
        "Paiement à",
        "1 234,50 USD",
        "Envoyez exactement",
        "Temps restant",
        "À payer avant le",
        "En attente de votre paiement.",
    ] {
        assert!(
            plain(&shown).contains(shown_text),
            "{shown_text} missing from:\n{shown}"
        );
    }
    no_serious_violations(&browser, "the hosted page in French");
    browser.screenshot("hosted-fr-1280");
    browser.resize(390, 1700);
    browser.screenshot("hosted-fr-390");

    // In Spanish, by checkout.js's locale option, whatever the browser prefers (German).
    let mut spanish = options("WALLET-ES");
    spanish["locale"] = json!("es-ES");
    let page = site.checkout_page("/order-es", &worker.base_url, &spanish);
    browser.goto(&page);
    browser.click("#pay");
    browser.wait_for_url("the hosted page", |u| u.contains("/checkout/cs_"));
    let shown = eventually("the page in Spanish", Duration::from_secs(10), || {
        browser
            .text("main")
            .filter(|t| t.contains("Pagar con Anvil Wallet"))
    });
    assert_eq!(browser.eval("return document.documentElement.lang;"), "es");
    for shown_text in [
        "Pago a",
        "25,50 USD",
        "Envíe exactamente",
        "25,5 USDC",
        "Tiempo restante",
        "Esperando su pago.",
    ] {
        assert!(
            plain(&shown).contains(shown_text),
            "{shown_text} missing from:\n{shown}"
        );
    }
    no_serious_violations(&browser, "the hosted page in Spanish");
    browser.screenshot("hosted-es-390");
    browser.resize(1280, 1300);
    browser.screenshot("hosted-es-1280");

    // The other two ways round, over plain HTTP: French by Accept-Language, German by option.
    let by_header = worker.checkout_session(&options("WALLET-FR-HEADER"));
    let reply = worker.send(
        worker
            .request(
                Method::GET,
                &by_header["url"].as_str().unwrap()[worker.base_url.len()..],
            )
            .header("Accept-Language", "it;q=0.9, fr-CA;q=0.8, en;q=0.1"),
        None,
    );
    assert!(reply.text.contains("<html lang=\"fr\""), "{}", reply.text);
    assert!(plain(&reply.text).contains("25,50 USD"));
    let mut german_option = options("WALLET-DE-OPTION");
    german_option["locale"] = json!("de");
    let by_option = worker.checkout_session(&german_option);
    let reply = worker.send(
        worker
            .request(
                Method::GET,
                &by_option["url"].as_str().unwrap()[worker.base_url.len()..],
            )
            .header("Accept-Language", "fr"),
        None,
    );
    assert!(reply.text.contains("<html lang=\"de\""));
    assert!(reply.text.contains("Senden Sie genau"));
    // A language the page does not speak is refused, naming the option and the choices.
    for bad in [json!("it"), json!(5), json!("de_DE<script>")] {
        let mut refused = options("WALLET-BAD-LOCALE");
        refused["locale"] = bad.clone();
        let why = worker
            .post_json("/checkout/sessions", &refused, None, "/checkout/sessions")
            .assert_error(400, "invalid_request");
        assert!(why.contains("locale must be"), "{bad}: {why}");
    }

    // The demo shop: no serious violation, and its buttons reached by keyboard in order.
    browser.set_accept_language("en");
    browser.goto(&format!("{}/shop/", worker.base_url));
    no_serious_violations(&browser, "the demo shop");
    let mut reached = Vec::new();
    for _ in 0..2 {
        browser.press_tab();
        reached.push(browser.eval("return document.activeElement.id;"));
    }
    assert_eq!(reached, [json!("buy-boots"), json!("buy-jacket")]);
    browser.screenshot("shop-390");
    browser.resize(1280, 900);
    browser.screenshot("shop-1280");

    // The books hold the wallet's payment in custody, owed to its merchant, as the chain does.
    payrail_tests::books::settle_and_assert_balanced(&worker, &anvil);
}
