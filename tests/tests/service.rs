//! What surrounds the API: the OpenAPI document, unknown paths and methods, the cron trigger.

use std::time::Duration;

use payrail_tests::{eventually, Worker};
use reqwest::Method;

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
