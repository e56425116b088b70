//! Outside sandbox mode (production), the sandbox does not exist.

use payrail_tests::Worker;
use reqwest::Method;
use serde_json::json;

#[test]
fn sandbox_routes_are_404_and_the_page_has_no_controls() {
    let worker = Worker::start_in("production");
    let key = &worker.credentials.institutions[0].merchants[0].public_key;
    let session = worker.checkout_session(&json!({
        "publicKey": key, "amount": 10, "currency": "USD", "title": "Real order",
        "externalReference": "PROD-1", "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    }));
    let id = session["transaction_id"].as_i64().unwrap();
    let token = worker.institution_token(0);
    let reply = worker.send(
        worker
            .request(Method::POST, &format!("/sandbox/transactions/{id}/pay"))
            .bearer_auth(&token)
            .json(&json!({"amount": "10"})),
        None,
    );
    reply.assert_error(404, "not_found");

    let page = worker.send(worker.http_get(session["url"].as_str().unwrap()), None);
    assert_eq!(page.status, 200);
    assert!(page.text.contains("id=\"deposit-address\""));
    assert!(
        !page.text.contains("Sandbox"),
        "no sandbox controls in production"
    );
    let control = worker.send(
        worker.request(
            Method::POST,
            &format!(
                "/checkout/{}/sandbox/pay-exact",
                session["id"].as_str().unwrap()
            ),
        ),
        None,
    );
    control.assert_error(404, "not_found");
    assert_eq!(worker.transaction(0, id)["raw_status"], "pending");
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
