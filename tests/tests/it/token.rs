//! `POST /oauth/token` and bearer authentication, over real HTTP against `wrangler dev`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use payrail_tests::{form, Worker};
use reqwest::Method;

const GRANT: (&str, &str) = ("grant_type", "client_credentials");

fn northwind(worker: &Worker) -> (&str, &str) {
    let i = &worker.credentials.institutions[0];
    (&i.client_id, &i.client_secret)
}

fn basic(id: &str, secret: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{id}:{secret}")))
}

/// `POST /oauth/token` with HTTP Basic credentials and a form body.
fn token_with_basic(
    worker: &Worker,
    id: &str,
    secret: &str,
    pairs: &[(&str, &str)],
) -> payrail_tests::Reply {
    worker.send(
        worker
            .request(Method::POST, "/oauth/token")
            .header("Authorization", basic(id, secret))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form(pairs)),
        Some("/oauth/token"),
    )
}

#[test]
fn form_credentials_issue_a_token_with_every_granted_scope() {
    let worker = Worker::shared();
    let (id, secret) = northwind(worker);
    let reply = worker.token_form(&[GRANT, ("client_id", id), ("client_secret", secret)]);
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    assert_eq!(reply.header("pragma"), Some("no-cache"));
    let body = reply.json();
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 3600);
    assert_eq!(body["scope"], "transactions:read merchants:read");
    let token = body["access_token"].as_str().unwrap();
    assert!(token.len() >= 40, "{token}");
    let list = worker.get("/v1/merchants", Some(token), "/v1/merchants");
    assert_eq!(list.status, 200);
}

#[test]
fn http_basic_credentials_issue_a_token() {
    let worker = Worker::shared();
    let (id, secret) = northwind(worker);
    let reply = token_with_basic(worker, id, secret, &[GRANT, ("scope", "merchants:read")]);
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["scope"], "merchants:read");
}

#[test]
fn both_authentication_methods_at_once_are_refused() {
    let worker = Worker::shared();
    let (id, secret) = northwind(worker);
    let reply = token_with_basic(
        worker,
        id,
        secret,
        &[GRANT, ("client_id", id), ("client_secret", secret)],
    );
    let description = reply.assert_error(400, "invalid_request");
    assert!(description.contains("not both"), "{description}");
}

#[test]
fn missing_fields_are_invalid_requests_naming_the_field() {
    let worker = Worker::shared();
    let (id, secret) = northwind(worker);
    for (pairs, field) in [
        (
            vec![("client_id", id), ("client_secret", secret)],
            "grant_type",
        ),
        (vec![GRANT, ("client_secret", secret)], "client_id"),
        (vec![GRANT, ("client_id", id)], "client_secret"),
        (vec![GRANT], "client_id"),
        (
            vec![GRANT, GRANT, ("client_id", id), ("client_secret", secret)],
            "grant_type",
        ),
    ] {
        let reply = worker.token_form(&pairs);
        let description = reply.assert_error(400, "invalid_request");
        assert!(description.contains(field), "{pairs:?}: {description}");
    }
}

#[test]
fn other_grant_types_are_unsupported() {
    let worker = Worker::shared();
    let (id, secret) = northwind(worker);
    for grant in ["password", "authorization_code", "refresh_token"] {
        let reply = worker.token_form(&[
            ("grant_type", grant),
            ("client_id", id),
            ("client_secret", secret),
        ]);
        reply.assert_error(400, "unsupported_grant_type");
    }
}

#[test]
fn bad_credentials_are_invalid_client_with_a_basic_challenge_for_basic() {
    let worker = Worker::shared();
    let (id, _) = northwind(worker);
    let (other_id, other_secret) = worker.fixture_client("bad-credentials");

    let wrong = worker.token_form(&[GRANT, ("client_id", id), ("client_secret", "sk_live_wrong")]);
    wrong.assert_error(401, "invalid_client");
    let unknown = worker.token_form(&[
        GRANT,
        ("client_id", "cli_nobody"),
        ("client_secret", &other_secret),
    ]);
    assert_eq!(unknown.text, wrong.text, "unknown and wrong read alike");

    let basic_reply = token_with_basic(worker, &other_id, "sk_live_wrong", &[GRANT]);
    basic_reply.assert_error(401, "invalid_client");
    // Every 401 carries a challenge, whichever way the credentials came (RFC 9110).
    for reply in [&basic_reply, &wrong, &unknown] {
        let challenge = reply.header("www-authenticate").unwrap_or_default();
        assert!(challenge.starts_with("Basic "), "{challenge}");
    }

    // An id not shaped like one reads like an unknown one, and is counted toward no throttle
    // (its row would be keyed by up to the whole body): past the limit of failures it is still
    // a 401, never a 429.
    let long = "x".repeat(4000);
    for malformed in ["not-a-client", long.as_str()] {
        for _ in 0..12 {
            let reply = worker.token_form(&[
                GRANT,
                ("client_id", malformed),
                ("client_secret", &other_secret),
            ]);
            reply.assert_error(401, "invalid_client");
            assert_eq!(reply.text, wrong.text, "malformed and wrong read alike");
        }
    }
}

#[test]
fn scopes_are_subsets_of_the_grant() {
    let worker = Worker::shared();
    let limited = &worker.credentials.limited_client;
    let pair = |scope| {
        worker.token_form(&[
            GRANT,
            ("client_id", &limited.client_id),
            ("client_secret", &limited.client_secret),
            ("scope", scope),
        ])
    };
    assert_eq!(pair("transactions:read").status, 200);
    let beyond = pair("transactions:read merchants:read").assert_error(400, "invalid_scope");
    assert!(beyond.contains("merchants:read"), "{beyond}");
    let unknown = pair("transactions:write").assert_error(400, "invalid_scope");
    assert!(unknown.contains("transactions:write"), "{unknown}");
    // A parameter sent without a value is left out (RFC 6749 §3.2): the whole grant.
    let empty = pair("");
    assert_eq!(empty.status, 200, "{}", empty.text);
    assert_eq!(empty.json()["scope"], "transactions:read");
    pair(" ").assert_error(400, "invalid_scope");

    let reply = worker.token_form(&[
        GRANT,
        ("client_id", &limited.client_id),
        ("client_secret", &limited.client_secret),
    ]);
    assert_eq!(reply.json()["scope"], "transactions:read");
}

#[test]
fn a_narrowed_token_cannot_exceed_its_scope() {
    let worker = Worker::shared();
    let (id, secret) = northwind(worker);
    let reply = worker.token_form(&[
        GRANT,
        ("client_id", id),
        ("client_secret", secret),
        ("scope", "transactions:read"),
    ]);
    let token = reply.json()["access_token"].as_str().unwrap().to_owned();
    assert_eq!(
        worker
            .get("/v1/transactions", Some(&token), "/v1/transactions")
            .status,
        200
    );
    for path in ["/v1/merchants", "/v1/merchants/1"] {
        let spec = if path == "/v1/merchants" {
            path
        } else {
            "/v1/merchants/{id}"
        };
        let reply = worker.get(path, Some(&token), spec);
        reply.assert_error(403, "insufficient_scope");
        let challenge = reply.header("www-authenticate").unwrap_or_default();
        assert!(
            challenge.contains("error=\"insufficient_scope\"")
                && challenge.contains("scope=\"merchants:read\""),
            "{challenge}"
        );
    }
}

#[test]
fn credentials_in_the_query_string_are_refused_even_when_right() {
    let worker = Worker::shared();
    let (id, secret) = northwind(worker);
    let query = form(&[GRANT, ("client_id", id), ("client_secret", secret)]);
    let reply = worker.send(
        worker
            .request(Method::POST, &format!("/oauth/token?{query}"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(""),
        Some("/oauth/token"),
    );
    let description = reply.assert_error(400, "invalid_request");
    assert!(description.contains("query"), "{description}");
    assert!(!reply.text.contains(secret));
}

#[test]
fn the_body_must_be_a_form() {
    let worker = Worker::shared();
    let (id, secret) = northwind(worker);
    let reply = worker.send(
        worker
            .request(Method::POST, "/oauth/token")
            .json(&serde_json::json!({
                "grant_type": "client_credentials", "client_id": id, "client_secret": secret
            })),
        Some("/oauth/token"),
    );
    let description = reply.assert_error(400, "invalid_request");
    assert!(description.contains("Content-Type"), "{description}");
}

#[test]
fn repeated_failures_are_throttled_per_source_without_locking_out_the_client() {
    let worker = Worker::shared();
    let (id, secret) = worker.fixture_client("throttle");
    let attempt = |source: &str, secret: &str| {
        worker.send(
            worker
                .request(Method::POST, "/oauth/token")
                .header("Content-Type", "application/x-www-form-urlencoded")
                .header("CF-Connecting-IP", source)
                .body(form(&[
                    GRANT,
                    ("client_id", &id),
                    ("client_secret", secret),
                ])),
            Some("/oauth/token"),
        )
    };
    for _ in 0..10 {
        attempt("203.0.113.7", "sk_live_guess").assert_error(401, "invalid_client");
    }
    // The attacker's address is now throttled, even with the right secret...
    let throttled = attempt("203.0.113.7", &secret);
    throttled.assert_error(429, "rate_limited");
    let retry_after = throttled.retry_after();
    assert!((1..=900).contains(&retry_after), "{retry_after}");
    // ...and that attempt stored nothing and cleared nothing: the address stays throttled...
    attempt("203.0.113.7", &secret).assert_error(429, "rate_limited");
    // ...while the real client, elsewhere, still gets its token.
    assert_eq!(attempt("198.51.100.20", &secret).status, 200);
}

#[test]
fn a_missing_or_bad_bearer_token_is_401_with_a_bearer_challenge() {
    let worker = Worker::shared();
    let none = worker.get("/v1/transactions", None, "/v1/transactions");
    none.assert_error(401, "invalid_client");
    assert_eq!(
        none.header("www-authenticate"),
        Some("Bearer realm=\"payrail\"")
    );
    for token in ["prt_not-a-real-token", "garbage"] {
        let bad = worker.get("/v1/merchants", Some(token), "/v1/merchants");
        bad.assert_error(401, "invalid_client");
        let challenge = bad.header("www-authenticate").unwrap_or_default();
        assert!(
            challenge.starts_with("Bearer") && challenge.contains("error=\"invalid_token\""),
            "{challenge}"
        );
    }
    let basic_scheme = worker.send(
        worker
            .request(Method::GET, "/v1/transactions")
            .header("Authorization", basic("a", "b")),
        Some("/v1/transactions"),
    );
    basic_scheme.assert_error(401, "invalid_client");
}

#[test]
fn an_expired_token_is_refused() {
    let worker = Worker::shared();
    let reply = worker.get(
        "/v1/transactions",
        Some(payrail_tests::EXPIRED_TOKEN),
        "/v1/transactions",
    );
    reply.assert_error(401, "invalid_client");
    assert!(reply
        .header("www-authenticate")
        .unwrap_or_default()
        .contains("invalid_token"));
}
