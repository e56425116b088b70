//! `POST /checkout/sessions`, the hosted page and its controls, over real HTTP.

use payrail_tests::Worker;
use reqwest::Method;
use serde_json::{json, Value};

const SESSIONS: &str = "/checkout/sessions";

fn key_of(worker: &Worker, name: &str) -> String {
    worker
        .credentials
        .institutions
        .iter()
        .flat_map(|i| &i.merchants)
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("demo merchant {name}"))
        .public_key
        .clone()
}

fn options(worker: &Worker, reference: &str) -> Value {
    json!({
        "publicKey": key_of(worker, "Alpine Outfitters"),
        "amount": 25.5,
        "currency": "EUR",
        "title": "Two coffees & a <b>cake</b>",
        "externalReference": reference,
        "idempotencyKey": reference,
        "redirectUrl": "https://shop.example/thanks",
        "openInNewTab": false,
        "allowCrypto": true
    })
}

fn create(worker: &Worker, body: &Value) -> payrail_tests::Reply {
    worker.post_json(SESSIONS, body, None, SESSIONS)
}

#[test]
fn a_session_creates_a_pending_transaction_with_the_order() {
    let worker = Worker::shared();
    let session = worker.checkout_session(&options(worker, "CO-NEW-1"));
    let id = session["id"].as_str().unwrap();
    assert!(id.starts_with("cs_") && id.len() > 40, "{id}");
    assert_eq!(session["url"], format!("{}/checkout/{id}", worker.base_url));
    let t = worker.transaction(0, session["transaction_id"].as_i64().unwrap());
    assert_eq!(
        t["merchant_id"],
        worker.credentials.institutions[0].merchant_ids[0]
    );
    assert_eq!(t["status"], "pending");
    assert_eq!(t["raw_status"], "pending");
    assert_eq!(t["currency"], "EUR");
    assert_eq!(t["amount"]["expected"], "25.50");
    assert_eq!(t["external_reference"], "CO-NEW-1");
    assert_eq!(t["asset"], "USDC");
    assert_eq!(t["networks"]["payment"], "polygon");
    for (group, key) in [
        ("amount", "gross"),
        ("amount", "net"),
        ("tx_hashes", "source"),
    ] {
        assert_eq!(t[group][key], Value::Null);
    }
    assert_eq!(t["amount_status"], Value::Null);
    assert_eq!(t["paid_at"], Value::Null);
    // The other institution does not see it.
    let other = worker.get(
        &format!("/v1/transactions?id={}", session["transaction_id"]),
        Some(&worker.institution_token(1)),
        "/v1/transactions",
    );
    assert_eq!(other.json()["data"], json!([]));
}

#[test]
fn the_same_key_and_options_return_the_same_session_other_options_conflict() {
    let worker = Worker::shared();
    let first = worker.checkout_session(&options(worker, "CO-IDEM-1"));
    // The same amount written as text is the same order.
    let mut same = options(worker, "CO-IDEM-1");
    same["amount"] = json!("25.50");
    let again = create(worker, &same);
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json(), first);

    let mut other = options(worker, "CO-IDEM-1");
    other["amount"] = json!(26);
    let description = create(worker, &other).assert_error(409, "conflict");
    assert!(description.contains("idempotencyKey"), "{description}");

    // Without a key every request is a new payment.
    let mut keyless = options(worker, "CO-NOKEY-1");
    keyless.as_object_mut().unwrap().remove("idempotencyKey");
    let a = worker.checkout_session(&keyless);
    let b = worker.checkout_session(&keyless);
    assert_ne!(a["transaction_id"], b["transaction_id"]);
}

#[test]
fn the_endpoint_is_open_to_merchant_origins() {
    let worker = Worker::shared();
    let preflight = worker.send(
        worker
            .request(Method::OPTIONS, SESSIONS)
            .header("Origin", "https://shop.example")
            .header("Access-Control-Request-Method", "POST")
            .header("Access-Control-Request-Headers", "content-type"),
        None,
    );
    assert_eq!(preflight.status, 204);
    assert_eq!(preflight.header("access-control-allow-origin"), Some("*"));
    assert!(preflight
        .header("access-control-allow-methods")
        .unwrap_or_default()
        .contains("POST"));
    assert!(preflight
        .header("access-control-allow-headers")
        .unwrap_or_default()
        .to_ascii_lowercase()
        .contains("content-type"));
    let created = create(worker, &options(worker, "CO-CORS-1"));
    assert_eq!(created.header("access-control-allow-origin"), Some("*"));
    let refused = create(worker, &json!({}));
    assert_eq!(refused.header("access-control-allow-origin"), Some("*"));
}

#[test]
fn bad_options_are_400_naming_the_option() {
    let worker = Worker::shared();
    let cases: Vec<(&str, &str, Option<Value>)> = vec![
        ("publicKey", "publicKey", None),
        ("title", "title", None),
        ("amount", "amount", Some(json!(0))),
        ("amount", "amount", Some(json!("1e3"))),
        ("amount", "amount", Some(json!(1.005))),
        ("amount", "amount", Some(json!(true))),
        ("currency", "currency", Some(json!("BTC"))),
        ("title", "title", Some(json!(5))),
        ("externalReference", "externalReference", Some(json!(""))),
        (
            "idempotencyKey",
            "idempotencyKey",
            Some(json!("no spaces please")),
        ),
        (
            "redirectUrl",
            "redirectUrl",
            Some(json!("http://shop.example/")),
        ),
        ("allowCrypto", "allowCrypto", Some(json!(false))),
        ("colour", "colour", Some(json!("red"))),
    ];
    for (named, field, value) in cases {
        let mut body = options(worker, "CO-BAD");
        match value {
            Some(v) => body[field] = v,
            None => {
                body.as_object_mut().unwrap().remove(field);
            }
        }
        let description = create(worker, &body).assert_error(400, "invalid_request");
        assert!(description.contains(named), "{field}: {description}");
    }
    for raw in ["not json", "[1, 2]", "null"] {
        let reply = worker.send(
            worker
                .request(Method::POST, SESSIONS)
                .header("Content-Type", "application/json")
                .body(raw),
            Some(SESSIONS),
        );
        reply.assert_error(400, "invalid_request");
    }
    let form = worker.send(
        worker
            .request(Method::POST, SESSIONS)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body("publicKey=x"),
        Some(SESSIONS),
    );
    assert!(form
        .assert_error(400, "invalid_request")
        .contains("Content-Type"));
    let mut unknown = options(worker, "CO-BAD");
    unknown["publicKey"] = json!("pk_live_nobodyhasthiskey000000");
    assert!(create(worker, &unknown)
        .assert_error(404, "not_found")
        .contains("publicKey"));
}

#[test]
fn merchants_that_cannot_take_payments_are_refused_clearly() {
    let worker = Worker::shared();
    for (merchant, why) in [
        ("Quartz Audio", "suspended"),
        ("Tern Electronics", "disabled"),
        ("Nimbus Travel", "onboarding"),
        ("Pixel Forge", "crypto"),
    ] {
        let mut body = options(worker, "CO-GATE");
        body["publicKey"] = json!(key_of(worker, merchant));
        let description = create(worker, &body).assert_error(403, "merchant_unavailable");
        assert!(description.contains(why), "{merchant}: {description}");
    }
}

fn page(worker: &Worker, url: &str) -> payrail_tests::Reply {
    worker.send(worker.http_get(url), None)
}

#[test]
fn the_hosted_page_shows_the_order_and_how_to_pay() {
    let worker = Worker::shared();
    let session = worker.checkout_session(&options(worker, "CO-PAGE-1"));
    let reply = page(worker, session["url"].as_str().unwrap());
    assert_eq!(reply.status, 200);
    assert!(reply
        .header("content-type")
        .unwrap_or_default()
        .starts_with("text/html"));
    let csp = reply.header("content-security-policy").unwrap_or_default();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert_eq!(reply.header("referrer-policy"), Some("no-referrer"));
    assert_eq!(reply.header("x-frame-options"), Some("DENY"));
    for shown in [
        "Alpine Outfitters",
        "25.50 EUR",
        "USDC",
        "Polygon",
        "id=\"deposit-address\">0x",
        "data-status=\"pending\"",
        "Sandbox",
    ] {
        assert!(reply.text.contains(shown), "{shown} missing");
    }
    // What the merchant sent is text, never markup.
    assert!(reply
        .text
        .contains("Two coffees &amp; a &lt;b&gt;cake&lt;/b&gt;"));
    assert!(!reply.text.contains("<b>cake"));

    let missing = page(
        worker,
        &format!("{}/checkout/cs_nosuchsession", worker.base_url),
    );
    assert_eq!(missing.status, 404);
    assert!(missing.text.contains("does not exist"));
}

#[test]
fn the_customer_can_switch_the_way_to_pay() {
    let worker = Worker::shared();
    let session = worker.checkout_session(&options(worker, "CO-METHOD-1"));
    let url = session["url"].as_str().unwrap();
    let switch = |method: &str| {
        worker.send(
            worker
                .request(
                    Method::POST,
                    &format!("{}/method", &url[worker.base_url.len()..]),
                )
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(format!("method={method}")),
            None,
        )
    };
    let reply = switch("BTC%3Abitcoin");
    assert_eq!(reply.status, 303);
    assert_eq!(reply.header("location"), Some(url));
    let shown = page(worker, url).text;
    assert!(
        shown.contains("id=\"deposit-address\">bc1q"),
        "bitcoin address"
    );
    assert!(shown.contains("BTC</strong>"));
    let t = worker.transaction(0, session["transaction_id"].as_i64().unwrap());
    assert_eq!(t["asset"], "BTC");
    assert_eq!(t["networks"]["payment"], "bitcoin");
    assert!(switch("DOGE%3Adoge")
        .assert_error(400, "invalid_request")
        .contains("method"));
}

#[test]
fn the_status_endpoint_and_sandbox_controls_follow_the_payment() {
    let worker = Worker::shared();
    let session = worker.checkout_session(&options(worker, "CO-CONTROLS-1"));
    let id = session["id"].as_str().unwrap();
    let status = || {
        let reply = worker.send(
            worker.request(Method::GET, &format!("/checkout/{id}/status")),
            Some("/checkout/{id}/status"),
        );
        reply.json()["status"].as_str().unwrap().to_owned()
    };
    let control = |name: &str| {
        worker.send(
            worker.request(Method::POST, &format!("/checkout/{id}/sandbox/{name}")),
            None,
        )
    };
    assert_eq!(status(), "pending");
    assert_eq!(control("pay-over").status, 303);
    assert_eq!(status(), "succeeded");
    let t = worker.transaction(0, session["transaction_id"].as_i64().unwrap());
    assert_eq!(t["amount_status"], "OVERPAID");
    assert_eq!(t["amount"]["gross"], "28.05");
    // Once paid, the page sends the customer back to the merchant: its script, after a few
    // seconds the customer may cancel (no meta refresh), and a link.
    let shown = page(worker, session["url"].as_str().unwrap()).text;
    assert!(
        shown.contains(r#"id="auto-return" hidden data-url="https://shop.example/thanks""#),
        "{shown}"
    );
    assert!(
        shown.contains(r#"<script src="/hosted.js" defer>"#),
        "{shown}"
    );
    assert!(!shown.contains("http-equiv=\"refresh\""), "{shown}");
    assert!(
        shown.contains(r#"id="return-link" href="https://shop.example/thanks""#),
        "{shown}"
    );
    // A control that no longer applies says why.
    let again = control("pay-exact");
    assert_eq!(again.status, 409);
    assert!(again
        .text
        .contains("cannot pay a payment whose raw_status is succeeded"));
    assert_eq!(control("settle").status, 303);
    assert_eq!(status(), "paid");
    assert_eq!(control("refund").status, 303);
    assert_eq!(status(), "refunded");
    assert_eq!(control("explode").status, 404);
}

/// The limits on creating checkout sessions (sessions stored per publishable key from every
/// address, attempts per caller address whatever the key) refuse with 429 and `Retry-After` and
/// create nothing; the refused attempt is counted against its address, never against the
/// merchant. On a worker of its own: it fills the limits of the one address every test calls
/// from.
#[test]
fn checkout_limits_refuse_past_their_count_and_create_nothing() {
    let worker = Worker::own("checkout_limits");
    let mut body = options(worker, "CO-LIMIT-1");
    body["idempotencyKey"] = Value::Null;
    assert_eq!(create(worker, &body).status, 201);
    let db = worker.database();
    let per_key = format!("checkout:{}", body["publicKey"].as_str().unwrap());
    let count = |subject: &str, source: Option<&str>| -> i64 {
        db.query_row(
            "SELECT failures FROM auth_failures WHERE client_id = ?1 \
             AND (?2 IS NULL OR source = ?2) AND (?2 IS NOT NULL OR source != '*')",
            rusqlite::params![subject, source],
            |r| r.get(0),
        )
        .unwrap_or_else(|e| panic!("{subject}: {e}"))
    };
    let sessions = || -> i64 {
        db.query_row("SELECT count(*) FROM checkout_sessions", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(&per_key, Some("*")), 1);
    assert_eq!(count("checkout", None), 1);
    for (subject, source, full, says, counted) in [
        (per_key.as_str(), Some("*"), 600, "for this merchant", 0),
        ("checkout", None, 300, "from this address", 1),
    ] {
        db.execute(
            "UPDATE auth_failures SET failures = ?3, window_start = unixepoch() \
             WHERE client_id = ?1 AND (?2 IS NULL OR source = ?2) \
             AND (?2 IS NOT NULL OR source != '*')",
            rusqlite::params![subject, source, full],
        )
        .unwrap();
        let before = sessions();
        let refused = create(worker, &body);
        assert_eq!(refused.status, 429, "{}", refused.text);
        assert!(refused.text.contains(says), "{}", refused.text);
        let retry = refused.retry_after();
        assert!((1..=60).contains(&retry), "{retry}");
        assert_eq!(sessions(), before, "a refused attempt creates nothing");
        assert_eq!(
            count(subject, source),
            full + counted,
            "the refused attempt is counted against its address only"
        );
        db.execute(
            "UPDATE auth_failures SET failures = 0 WHERE client_id = ?1",
            rusqlite::params![subject],
        )
        .unwrap();
    }
    assert_eq!(create(worker, &body).status, 201, "under both limits again");
}

/// An outside probe's finding: attempts that create nothing (a `redirectUrl` the merchant does
/// not allow), flooded from three addresses, used to fill the merchant's window, and a real
/// customer from a new address was refused for the rest of the minute. Refusals count against
/// their source only: the customer is served, the merchant's window holds only stored sessions,
/// and a source that keeps flooding meets its own limit.
#[test]
fn attempts_that_create_nothing_never_lock_a_merchants_customers_out() {
    let worker = Worker::own("checkout_flood");
    let mut flood = options(worker, "CO-FLOOD");
    flood["idempotencyKey"] = Value::Null;
    flood["redirectUrl"] = json!("https://stranger.example/x");
    let from = |address: &str, body: &Value| {
        worker.send(
            worker
                .request(Method::POST, SESSIONS)
                .header("CF-Connecting-IP", address)
                .json(body),
            Some(SESSIONS),
        )
    };
    let sources = ["198.51.100.1", "198.51.100.2", "198.51.100.3"];
    std::thread::scope(|scope| {
        for source in sources {
            let (from, flood) = (&from, &flood);
            scope.spawn(move || {
                for _ in 0..201 {
                    let refused = from(source, flood);
                    assert_eq!(refused.status, 403, "{}", refused.text);
                    assert!(
                        refused.text.contains("stranger.example"),
                        "{}",
                        refused.text
                    );
                }
            });
        }
    });
    let mut customer = options(worker, "CO-FLOOD-CUSTOMER");
    customer["idempotencyKey"] = Value::Null;
    let served = from("203.0.113.9", &customer);
    assert_eq!(served.status, 201, "{}", served.text);
    let per_key: i64 = worker
        .database()
        .query_row(
            "SELECT failures FROM auth_failures WHERE client_id = ?1 AND source = '*'",
            [format!(
                "checkout:{}",
                customer["publicKey"].as_str().unwrap()
            )],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        per_key, 1,
        "only the stored session counts against the merchant"
    );
    // A source that keeps flooding meets its own limit (300 a minute), and only it.
    for _ in 0..99 {
        assert_eq!(from(sources[0], &flood).status, 403);
    }
    let stopped = from(sources[0], &flood);
    assert_eq!(stopped.status, 429, "{}", stopped.text);
    assert!(
        stopped.text.contains("from this address"),
        "{}",
        stopped.text
    );
    customer["externalReference"] = json!("CO-FLOOD-CUSTOMER-2");
    assert_eq!(from("203.0.113.9", &customer).status, 201);
}

/// A worker remembers what it read of a publishable key for a minute and makes the next
/// sessions for it in one batch, but a change to the merchant never waits for that minute:
/// each change below is made straight in the database (nothing the worker could hear of) right
/// after a session made on the memo, and the very next session sees it.
#[test]
fn a_remembered_key_sees_every_change_to_its_merchant_at_the_next_session() {
    let worker = Worker::own("checkout_memo");
    let db = worker.database();
    let key = key_of(worker, "Alpine Outfitters");
    let merchant: i64 = db
        .query_row(
            "SELECT id FROM merchants WHERE public_key = ?1",
            [&key],
            |r| r.get(0),
        )
        .unwrap();
    let sql = |statement: &str| {
        db.execute_batch(&statement.replace("{m}", &merchant.to_string()))
            .unwrap_or_else(|e| panic!("{statement}: {e}"))
    };
    let reference = std::cell::Cell::new(0);
    let body = || {
        reference.set(reference.get() + 1);
        options(worker, &format!("CO-MEMO-{}", reference.get()))
    };
    // A session made, and the network it is to be paid on.
    let made = |body: &Value| -> (Value, String) {
        let reply = create(worker, body);
        assert_eq!(reply.status, 201, "{}", reply.text);
        let session = reply.json();
        let t = worker.transaction(0, session["transaction_id"].as_i64().unwrap());
        let network = t["networks"]["payment"].as_str().unwrap().to_owned();
        (session, network)
    };
    assert_eq!(made(&body()).1, "polygon");
    assert_eq!(made(&body()).1, "polygon");

    sql("UPDATE merchants SET status = 'suspended' WHERE id = {m}");
    let why = create(worker, &body()).assert_error(403, "merchant_unavailable");
    assert!(why.contains("suspended"), "{why}");
    sql("UPDATE merchants SET status = 'active' WHERE id = {m}");
    made(&body());

    sql("UPDATE merchants SET crypto_enabled = 0 WHERE id = {m}");
    create(worker, &body()).assert_error(403, "merchant_unavailable");
    sql("UPDATE merchants SET crypto_enabled = 1 WHERE id = {m}");
    made(&body());

    sql("DELETE FROM merchant_origins WHERE merchant_id = {m} AND origin = 'https://shop.example'");
    create(worker, &body()).assert_error(403, "redirect_not_allowed");
    sql(
        "INSERT INTO merchant_origins (merchant_id, origin, created_at) \
         VALUES ({m}, 'https://shop.example', '2026-01-01T00:00:00Z')",
    );
    made(&body());

    // The wallet the default way to pay settles to, removed: the next session is to be paid on
    // another network; put back, on it again at once.
    let (address, updated_at, usable_from): (String, String, i64) = db
        .query_row(
            "SELECT address, updated_at, usable_from FROM merchant_wallets \
             WHERE merchant_id = ?1 AND network = 'polygon'",
            [merchant],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    sql("DELETE FROM merchant_wallets WHERE merchant_id = {m} AND network = 'polygon'");
    let elsewhere = made(&body()).1;
    assert_ne!(elsewhere, "polygon");
    assert_eq!(made(&body()).1, elsewhere);
    db.execute(
        "INSERT INTO merchant_wallets (merchant_id, network, address, updated_at, usable_from) \
         VALUES (?1, 'polygon', ?2, ?3, ?4)",
        rusqlite::params![merchant, address, updated_at, usable_from],
    )
    .unwrap();
    assert_eq!(made(&body()).1, "polygon");

    // The key rolled: still taken in its grace period; refused once that has ended.
    sql("UPDATE merchants SET previous_public_key = public_key, \
         public_key = 'pk_test_memorolledkey000000000', \
         previous_key_expires_at = unixepoch() + 3600 WHERE id = {m}");
    made(&body());
    sql("UPDATE merchants SET previous_key_expires_at = unixepoch() - 1 WHERE id = {m}");
    create(worker, &body()).assert_error(404, "not_found");
    sql(
        "UPDATE merchants SET public_key = previous_public_key, previous_public_key = NULL, \
         previous_key_expires_at = NULL WHERE id = {m}",
    );
    made(&body());

    // An idempotency key on a remembered key: the same options answer the same session, other
    // options conflict.
    let keyed = body();
    let (first, _) = made(&keyed);
    let again = create(worker, &keyed);
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json()["id"], first["id"]);
    assert_eq!(again.json()["transaction_id"], first["transaction_id"]);
    let mut other = keyed.clone();
    other["amount"] = json!(99);
    create(worker, &other).assert_error(409, "conflict");
}
