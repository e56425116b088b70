//! Outside sandbox mode (production), the sandbox does not exist, and no payment is offered on a
//! chain nobody watches.

use payrail_tests::Worker;
use reqwest::Method;
use serde_json::json;

#[test]
fn production_takes_no_payment_it_cannot_see() {
    let worker = Worker::start_in("production");
    let key = &worker.credentials.institutions[0].merchants[0].public_key;
    // No chain is watched yet: no way to pay is offered, so no session is created.
    let refused = worker.post_json(
        "/checkout/sessions",
        &json!({
            "publicKey": key, "amount": 10, "currency": "USD", "title": "Real order",
            "externalReference": "PROD-1", "redirectUrl": "https://shop.example/done",
            "allowCrypto": true
        }),
        None,
        "/checkout/sessions",
    );
    assert!(refused
        .assert_error(503, "payments_unavailable")
        .contains("no way to pay"));

    // A pending checkout from before (written while the worker is idle) shows no address.
    let db = worker.database();
    db.execute(
        "INSERT INTO transactions (institution_id, merchant_id, status, raw_status, asset, \
         currency, amount_expected, network_payment, external_reference, created_at, updated_at) \
         VALUES (1, ?1, 'pending', 'pending', 'USDC', 'USD', '10.00', 'polygon', 'PROD-OLD', \
         strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
        [worker.credentials.institutions[0].merchants[0].id],
    )
    .unwrap();
    db.execute(
        "INSERT INTO checkout_sessions (id, transaction_id, merchant_id, title, redirect_url, \
         asset, network, deposit_address, crypto_amount, created_at, expires_at, \
         institution_id) \
         VALUES ('cs_prod_old', last_insert_rowid(), ?1, 'Old order', 'https://shop.example/done', \
         'USDC', 'polygon', '0x00000000000000000000000000000000000000aa', '10.000000', \
         unixepoch(), unixepoch() + 3600, 1)",
        [worker.credentials.institutions[0].merchants[0].id],
    )
    .unwrap();
    drop(db);
    let page = worker.send(worker.request(Method::GET, "/checkout/cs_prod_old"), None);
    assert_eq!(page.status, 200);
    assert!(
        page.text.contains("Payments are unavailable"),
        "{}",
        page.text
    );
    assert!(!page.text.contains("deposit-address"));
    assert!(!page
        .text
        .contains("0x00000000000000000000000000000000000000aa"));
    assert!(
        !page.text.contains("Sandbox"),
        "no sandbox controls in production"
    );
    let method = worker.send(
        worker
            .request(Method::POST, "/checkout/cs_prod_old/method")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body("method=USDC%3Apolygon"),
        None,
    );
    method.assert_error(400, "invalid_request");

    let token = worker.institution_token(0);
    let reply = worker.send(
        worker
            .request(Method::POST, "/sandbox/transactions/1/pay")
            .bearer_auth(&token)
            .json(&json!({"amount": "10"})),
        None,
    );
    reply.assert_error(404, "not_found");
    let control = worker.send(
        worker.request(Method::POST, "/checkout/cs_prod_old/sandbox/pay-exact"),
        None,
    );
    control.assert_error(404, "not_found");
}

#[test]
fn production_accepts_only_public_https_webhook_urls() {
    let worker = Worker::start_in("production");
    let session = worker.portal_login(0);
    for url in [
        "http://127.0.0.1:9000/hook",
        "https://localhost/hook",
        "https://10.0.0.1/hook",
    ] {
        worker
            .portal(
                Method::POST,
                "/portal/api/webhook-endpoints",
                Some(&session),
                Some(&json!({"url": url})),
            )
            .assert_error(400, "invalid_request");
    }
    // A public address needs no DNS lookup and is accepted.
    let created = worker.portal(
        Method::POST,
        "/portal/api/webhook-endpoints",
        Some(&session),
        Some(&json!({"url": "https://93.184.216.34/payrail"})),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    // Each test here has a worker of its own; the other one's token would be refused.
    let token = worker.institution_token(0);
    let merchants = worker.get("/v1/merchants", Some(&token), "/v1/merchants");
    assert_eq!(merchants.status, 200, "{}", merchants.text);
}
