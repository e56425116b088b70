//! What surrounds the API: the OpenAPI document, unknown paths and methods, the cron trigger.

use std::time::Duration;

use payrail_tests::{eventually, Worker};
use reqwest::Method;
use serde_json::json;

#[test]
fn serves_the_openapi_document() {
    let worker = Worker::shared();
    let reply = worker.send(worker.request(Method::GET, "/openapi.json"), None);
    assert_eq!(reply.status, 200);
    assert!(reply
        .header("content-type")
        .unwrap_or_default()
        .starts_with("application/json"));
    let doc = reply.json();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], "1.0.0");
    for path in [
        "/oauth/token",
        "/v1/transactions",
        "/v1/merchants",
        "/v1/merchants/{id}",
    ] {
        assert!(doc["paths"][path].is_object(), "{path}");
    }
    assert_eq!(&doc, payrail_tests::openapi::document());
}

#[test]
fn unknown_paths_are_404_and_wrong_methods_405_in_the_error_shape() {
    let worker = Worker::shared();
    let token = worker.institution_token(0);
    let missing = worker.send(
        worker
            .request(Method::GET, "/v1/payouts")
            .bearer_auth(&token),
        None,
    );
    missing.assert_error(404, "not_found");
    for (method, path) in [
        (Method::POST, "/v1/transactions"),
        (Method::DELETE, "/v1/merchants/1"),
        (Method::GET, "/oauth/token"),
    ] {
        let reply = worker.send(
            worker.request(method.clone(), path).bearer_auth(&token),
            None,
        );
        reply.assert_error(405, "method_not_allowed");
    }
}

/// The only test on the shared worker that runs the cron, so the fixtures' expired token is
/// still there when it starts (a module whose tests run the cron has a worker of its own).
#[test]
fn the_cron_trigger_purges_expired_tokens() {
    let worker = Worker::shared();
    let expired = || -> i64 {
        worker
            .database()
            .query_row(
                "SELECT count(*) FROM access_tokens WHERE expires_at <= unixepoch()",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert!(expired() >= 1, "the fixtures hold an expired token");
    let reply = worker.send(
        worker.request(Method::GET, "/__scheduled?cron=*+*+*+*+*"),
        None,
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    eventually("expired tokens purged", Duration::from_secs(10), || {
        (expired() == 0).then_some(())
    });
}

/// The schema check itself must be able to fail: a merchant without `email` is refused.
#[test]
#[should_panic(expected = "does not match openapi.json")]
fn the_openapi_check_refuses_a_wrong_shape() {
    let reply = payrail_tests::Reply {
        status: 200,
        headers: [("content-type".to_owned(), "application/json".to_owned())].into(),
        text: r#"{"object":"merchant","id":1,"name":"A","legal_name":"A","public_key":"pk_live_x",
            "psp_reference_id":"r","status":"active","onboarding_status":"completed",
            "crypto_enabled":true,"onboarding_complete":true,"created_at":"2026-11-21T00:00:00Z"}"#
            .to_owned(),
    };
    payrail_tests::openapi::assert_conforms("/v1/merchants/{id}", "get", &reply);
}

/// An undocumented status is refused too.
#[test]
#[should_panic(expected = "does not document")]
fn the_openapi_check_refuses_an_undocumented_status() {
    let reply = payrail_tests::Reply {
        status: 418,
        headers: Default::default(),
        text: String::new(),
    };
    payrail_tests::openapi::assert_conforms("/v1/merchants", "get", &reply);
}

/// Every operation of the portal's JSON API (edge-api/src/portal/api.rs routes them).
const PORTAL_OPERATIONS: &[(&str, &str)] = &[
    ("post", "/portal/api/login"),
    ("get", "/portal/api/session"),
    ("post", "/portal/api/logout"),
    ("get", "/portal/api/clients"),
    ("post", "/portal/api/clients"),
    ("post", "/portal/api/clients/{id}/rotate"),
    ("delete", "/portal/api/clients/{id}"),
    ("get", "/portal/api/webhook-endpoints"),
    ("post", "/portal/api/webhook-endpoints"),
    ("get", "/portal/api/webhook-endpoints/{id}"),
    ("patch", "/portal/api/webhook-endpoints/{id}"),
    ("delete", "/portal/api/webhook-endpoints/{id}"),
    ("get", "/portal/api/webhook-endpoints/{id}/secret"),
    ("post", "/portal/api/webhook-endpoints/{id}/rotate-secret"),
    ("get", "/portal/api/webhook-endpoints/{id}/deliveries"),
    ("post", "/portal/api/webhook-endpoints/{id}/enable"),
    ("post", "/portal/api/webhook-endpoints/{id}/test"),
    ("get", "/portal/api/deliveries/{id}"),
    ("get", "/portal/api/screening"),
    ("post", "/portal/api/screening/{id}"),
    ("post", "/portal/api/screening/topups/{id}"),
    ("post", "/portal/api/deliveries/{id}/resend"),
    ("get", "/portal/api/notifications"),
    ("get", "/portal/api/merchants"),
    ("post", "/portal/api/merchants"),
    ("get", "/portal/api/merchants/{id}"),
    ("patch", "/portal/api/merchants/{id}"),
    ("put", "/portal/api/merchants/{id}/wallets/{network}"),
    ("delete", "/portal/api/merchants/{id}/wallets/{network}"),
    ("put", "/portal/api/merchants/{id}/usdc-settlement-network"),
    ("put", "/portal/api/merchants/{id}/return-origins"),
    ("post", "/portal/api/merchants/{id}/roll-key"),
    ("get", "/portal/api/merchants/{id}/balances"),
    (
        "get",
        "/portal/api/merchants/{id}/balances/{network}/{token}",
    ),
    (
        "put",
        "/portal/api/merchants/{id}/balances/{network}/{token}/debt-limit",
    ),
    ("get", "/portal/api/payments"),
    ("get", "/portal/api/payments/{id}"),
    ("post", "/portal/api/payments/{id}/refunds/preview"),
    ("post", "/portal/api/payments/{id}/refunds"),
    ("post", "/portal/api/payments/{id}/returns"),
    ("get", "/portal/api/overview"),
    ("get", "/portal/api/users"),
    ("post", "/portal/api/users"),
    ("delete", "/portal/api/users/{id}"),
    ("get", "/portal/api/networks"),
    ("get", "/portal/api/merchants/{id}/topup"),
    ("post", "/portal/api/merchants/{id}/topup/{network}"),
];

/// The document describes the portal's JSON API, and only what it has: each operation tagged
/// `portal`, on the session cookie (but the login), every change with the CSRF header.
#[test]
fn the_document_describes_the_portal_api() {
    let doc = payrail_tests::openapi::document();
    let scheme = &doc["components"]["securitySchemes"]["portalSession"];
    assert_eq!(
        (&scheme["type"], &scheme["in"], &scheme["name"]),
        (&json!("apiKey"), &json!("cookie"), &json!("payrail_portal"))
    );
    let csrf = &doc["components"]["parameters"]["CsrfToken"];
    assert_eq!(
        (&csrf["in"], &csrf["name"], &csrf["required"]),
        (&json!("header"), &json!("X-CSRF-Token"), &json!(true))
    );
    let mut documented = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if path.starts_with("/portal/") {
                documented.push((method.as_str(), path.as_str()));
            }
        }
    }
    documented.sort_unstable();
    let mut expected = PORTAL_OPERATIONS.to_vec();
    expected.sort_unstable();
    assert_eq!(documented, expected);
    for (method, path) in PORTAL_OPERATIONS {
        let operation = &doc["paths"][path][method];
        assert_eq!(operation["tags"], json!(["portal"]), "{method} {path}");
        let takes_csrf = operation["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["$ref"] == "#/components/parameters/CsrfToken");
        if *path == "/portal/api/login" {
            assert_eq!(operation["security"], json!([]));
            assert!(!takes_csrf);
        } else {
            assert_eq!(
                operation["security"],
                json!([{"portalSession": []}]),
                "{method} {path}"
            );
            assert_eq!(takes_csrf, *method != "get", "{method} {path}");
            assert!(operation["responses"]["401"].is_object(), "{method} {path}");
        }
    }
}

/// A portal reply is checked against the path template its request path falls under.
#[test]
fn portal_paths_resolve_to_their_templates() {
    use payrail_tests::openapi::template_of;
    assert_eq!(
        template_of("/portal/api/deliveries/dlv_1/resend"),
        Some("/portal/api/deliveries/{id}/resend")
    );
    assert_eq!(
        template_of("/portal/api/webhook-endpoints/ep_1/deliveries?limit=1"),
        Some("/portal/api/webhook-endpoints/{id}/deliveries")
    );
    assert_eq!(
        template_of("/portal/api/webhook-endpoints"),
        Some("/portal/api/webhook-endpoints")
    );
    assert_eq!(template_of("/portal/api/nothing"), None);
}

/// Portal shapes are closed as well: an endpoint that shows its signing secret where it must
/// not is refused.
#[test]
#[should_panic(expected = "does not match openapi.json")]
fn the_openapi_check_refuses_a_portal_reply_of_another_shape() {
    let reply = payrail_tests::Reply {
        status: 200,
        headers: [("content-type".to_owned(), "application/json".to_owned())].into(),
        text: r#"{"object":"webhook_endpoint","id":"ep_1","url":"https://a.example/",
            "description":"","event_types":null,"status":"enabled",
            "created_at":"2026-11-21T00:00:00Z","updated_at":"2026-11-21T00:00:00Z",
            "previous_secret_expires_at":null,"disabled_reason":null,"signing_secret":"whsec_x"}"#
            .to_owned(),
    };
    payrail_tests::openapi::assert_conforms("/portal/api/webhook-endpoints/{id}", "get", &reply);
}

/// An outside probe's finding: the static pages had no policy. Every file is served with
/// `nosniff`; the landing page and the demo shop with a strict policy and no framing (the shop's
/// is the one a merchant's page can use with checkout.js: scripts from here, WebAssembly
/// compiled); checkout.js stays loadable from any merchant's page.
#[test]
fn static_pages_carry_security_headers() {
    let worker = Worker::shared();
    let get = |path: &str| worker.send(worker.request(Method::GET, path), None);
    for path in [
        "/",
        "/shop/",
        "/shop/thanks",
        "/hosted.js",
        "/checkout.js",
        "/shop/shop.js",
    ] {
        let reply = get(path);
        assert_eq!(reply.status, 200, "{path}");
        assert_eq!(
            reply.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
    }
    for (path, scripts) in [
        ("/", None),
        ("/shop/", Some("script-src 'self' 'wasm-unsafe-eval'")),
    ] {
        let reply = get(path);
        let policy = reply.header("content-security-policy").unwrap_or_default();
        assert!(policy.starts_with("default-src 'none'"), "{path}: {policy}");
        assert!(
            policy.contains("frame-ancestors 'none'"),
            "{path}: {policy}"
        );
        match scripts {
            Some(scripts) => assert!(policy.contains(scripts), "{path}: {policy}"),
            None => assert!(!policy.contains("script-src"), "{path}: {policy}"),
        }
        assert_eq!(reply.header("x-frame-options"), Some("DENY"), "{path}");
        assert!(!reply.text.contains("<script>"), "{path}: no inline script");
    }
    let script = get("/checkout.js");
    assert_eq!(script.header("access-control-allow-origin"), Some("*"));
    assert_eq!(script.header("x-frame-options"), None);
    assert_eq!(script.header("content-security-policy"), None);
}

#[test]
fn every_answer_names_its_request_with_a_fresh_id() {
    let worker = Worker::shared();
    let token = worker.institution_token(0);
    let ids: Vec<String> = [
        worker.send(worker.request(Method::GET, "/v1/payouts"), None),
        worker.send(worker.request(Method::GET, "/openapi.json"), None),
        worker.get("/v1/merchants", Some(&token), "/v1/merchants"),
        worker.get("/v1/merchants", Some(&token), "/v1/merchants"),
        worker.send(worker.request(Method::GET, "/portal/login"), None),
    ]
    .iter()
    .map(|reply| {
        let id = reply
            .header("payrail-request-id")
            .unwrap_or_else(|| panic!("no Payrail-Request-Id: {}", reply.text))
            .to_owned();
        let hex = id.strip_prefix("req_").expect("req_ prefix");
        assert!(
            hex.len() == 24 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
        id
    })
    .collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
}
