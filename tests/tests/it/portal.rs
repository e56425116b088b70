//! The portal's JSON API and pages over real HTTP: login, sessions, CSRF, API clients, webhook
//! endpoints, and every boundary between institutions.

use payrail_tests::{PortalSession, Worker};
use reqwest::Method;
use serde_json::{json, Value};

fn login_reply(worker: &Worker, email: &str, password: &str, source: &str) -> payrail_tests::Reply {
    worker.send(
        worker
            .request(Method::POST, "/portal/api/login")
            .header("CF-Connecting-IP", source)
            .json(&json!({"email": email, "password": password})),
        None,
    )
}

fn call(
    worker: &Worker,
    method: Method,
    path: &str,
    session: &PortalSession,
    body: Option<Value>,
) -> payrail_tests::Reply {
    worker.portal(method, path, Some(session), body.as_ref())
}

#[test]
fn login_sets_a_strict_session_cookie_and_returns_a_csrf_token() {
    let worker = Worker::shared();
    let admin = &worker.credentials.institutions[0];
    let reply = login_reply(
        worker,
        &admin.admin_email,
        &admin.admin_password,
        "198.51.100.1",
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    let cookie = reply.header("set-cookie").unwrap();
    for flag in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/portal"] {
        assert!(cookie.contains(flag), "{flag} missing: {cookie}");
    }
    assert!(reply.json()["csrf_token"].as_str().unwrap().len() >= 40);
    // The e-mail is case-insensitive.
    let upper = login_reply(
        worker,
        &admin.admin_email.to_uppercase(),
        &admin.admin_password,
        "198.51.100.1",
    );
    assert_eq!(upper.status, 200);

    let session = worker.portal_login(1);
    let me = call(worker, Method::GET, "/portal/api/session", &session, None);
    assert_eq!(me.status, 200);
    assert_eq!(
        me.json()["email"],
        worker.credentials.institutions[1].admin_email
    );
    assert_eq!(me.json()["institution"], "Globex Merchant Services");
}

#[test]
fn bad_logins_are_refused_alike_and_throttled_per_address() {
    let worker = Worker::shared();
    let admin = &worker.credentials.institutions[1];
    let wrong = login_reply(
        worker,
        &admin.admin_email,
        "not-the-password",
        "203.0.113.50",
    );
    wrong.assert_error(401, "invalid_credentials");
    let unknown = login_reply(
        worker,
        "nobody@example.com",
        "not-the-password",
        "203.0.113.51",
    );
    assert_eq!(unknown.text, wrong.text);
    for _ in 0..4 {
        login_reply(worker, &admin.admin_email, "guess", "203.0.113.50")
            .assert_error(401, "invalid_credentials");
    }
    let throttled = login_reply(
        worker,
        &admin.admin_email,
        &admin.admin_password,
        "203.0.113.50",
    );
    throttled.assert_error(429, "rate_limited");
    assert!(throttled.retry_after() <= 900);
    // The real admin, elsewhere, still gets in.
    assert_eq!(
        login_reply(
            worker,
            &admin.admin_email,
            &admin.admin_password,
            "198.51.100.9"
        )
        .status,
        200
    );

    for body in [
        json!({"email": admin.admin_email}),
        json!({"email": "", "password": ""}),
        json!({"user": "x", "password": "y"}),
    ] {
        let reply = worker.send(
            worker
                .request(Method::POST, "/portal/api/login")
                .json(&body),
            None,
        );
        reply.assert_error(400, "invalid_request");
    }
}

#[test]
fn without_a_live_session_everything_is_401() {
    let worker = Worker::shared();
    let expired = PortalSession {
        cookie: payrail_tests::EXPIRED_PORTAL_SESSION.to_owned(),
        csrf: "csrf".to_owned(),
    };
    let bogus = PortalSession {
        cookie: "made-up".into(),
        csrf: "x".into(),
    };
    for (method, path) in [
        (Method::GET, "/portal/api/session"),
        (Method::GET, "/portal/api/clients"),
        (Method::POST, "/portal/api/clients"),
        (
            Method::POST,
            "/portal/api/clients/cli_demo_northwind/rotate",
        ),
        (Method::DELETE, "/portal/api/clients/cli_demo_northwind"),
        (Method::GET, "/portal/api/webhook-endpoints"),
        (Method::POST, "/portal/api/webhook-endpoints"),
        (Method::POST, "/portal/api/logout"),
    ] {
        worker
            .portal(method.clone(), path, None, None)
            .assert_error(401, "login_required");
        worker
            .portal(method.clone(), path, Some(&expired), None)
            .assert_error(401, "login_required");
        worker
            .portal(method, path, Some(&bogus), None)
            .assert_error(401, "login_required");
    }
}

#[test]
fn changes_need_the_csrf_token_and_our_origin() {
    let worker = Worker::shared();
    let session = worker.portal_login(0);
    let wrong = PortalSession {
        csrf: "wrong".into(),
        ..session.clone()
    };
    let body = json!({"name": "csrf test", "scopes": ["transactions:read"]});
    call(
        worker,
        Method::POST,
        "/portal/api/clients",
        &wrong,
        Some(body.clone()),
    )
    .assert_error(403, "csrf_failed");
    let missing = worker.send(
        worker
            .request(Method::POST, "/portal/api/clients")
            .header("Cookie", format!("payrail_portal={}", session.cookie))
            .json(&body),
        None,
    );
    missing.assert_error(403, "csrf_failed");
    let cross = worker.send(
        worker
            .request(Method::POST, "/portal/api/clients")
            .header("Cookie", format!("payrail_portal={}", session.cookie))
            .header("X-CSRF-Token", &session.csrf)
            .header("Origin", "https://evil.example")
            .json(&body),
        None,
    );
    cross.assert_error(403, "csrf_failed");
    // Reads need no token.
    let reads = worker.send(
        worker
            .request(Method::GET, "/portal/api/clients")
            .header("Cookie", format!("payrail_portal={}", session.cookie)),
        None,
    );
    assert_eq!(reads.status, 200);
    // Nothing was created.
    let names: Vec<String> = reads.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(!names.contains(&"csrf test".to_owned()));
}

#[test]
fn api_clients_create_use_rotate_delete() {
    let worker = Worker::shared();
    let session = worker.portal_login(0);
    let created = call(
        worker,
        Method::POST,
        "/portal/api/clients",
        &session,
        Some(json!({"name": "Reconciliation job", "scopes": ["transactions:read"]})),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    let client = created.json();
    let id = client["client_id"].as_str().unwrap().to_owned();
    let secret = client["client_secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("sk_live_") && secret.len() > 40);
    assert_eq!(client["scopes"], json!(["transactions:read"]));
    assert_eq!(client["last_used_at"], Value::Null);

    let token = worker.token(&id, &secret);
    let listed = call(worker, Method::GET, "/portal/api/clients", &session, None).json();
    let row = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["client_id"] == id.as_str())
        .unwrap()
        .clone();
    assert!(row["last_used_at"].is_string(), "last use recorded");
    assert!(
        row.get("client_secret").is_none(),
        "the secret is never listed"
    );

    let rotated = call(
        worker,
        Method::POST,
        &format!("/portal/api/clients/{id}/rotate"),
        &session,
        None,
    );
    assert_eq!(rotated.status, 200, "{}", rotated.text);
    let new_secret = rotated.json()["client_secret"].as_str().unwrap().to_owned();
    assert!(rotated.json()["secret_rotated_at"].is_string());
    worker
        .token_form(&[
            ("grant_type", "client_credentials"),
            ("client_id", &id),
            ("client_secret", &secret),
        ])
        .assert_error(401, "invalid_client");
    worker
        .get("/v1/transactions", Some(&token), "/v1/transactions")
        .assert_error(401, "invalid_client");
    let fresh = worker.token(&id, &new_secret);

    let deleted = call(
        worker,
        Method::DELETE,
        &format!("/portal/api/clients/{id}"),
        &session,
        None,
    );
    assert_eq!(deleted.status, 200);
    worker
        .get("/v1/transactions", Some(&fresh), "/v1/transactions")
        .assert_error(401, "invalid_client");
    worker
        .token_form(&[
            ("grant_type", "client_credentials"),
            ("client_id", &id),
            ("client_secret", &new_secret),
        ])
        .assert_error(401, "invalid_client");
    call(
        worker,
        Method::DELETE,
        &format!("/portal/api/clients/{id}"),
        &session,
        None,
    )
    .assert_error(404, "not_found");
}

#[test]
fn client_input_is_checked() {
    let worker = Worker::shared();
    let session = worker.portal_login(0);
    for (body, named) in [
        (json!({"name": "", "scopes": ["transactions:read"]}), "name"),
        (
            json!({"name": "x".repeat(101), "scopes": ["transactions:read"]}),
            "name",
        ),
        (json!({"name": "ok", "scopes": []}), "scopes"),
        (
            json!({"name": "ok", "scopes": ["admin:write"]}),
            "admin:write",
        ),
        (json!({"name": "ok"}), "scopes"),
        (
            json!({"name": "ok", "scopes": ["merchants:read"], "owner": "me"}),
            "owner",
        ),
        (json!({"name": 5, "scopes": ["merchants:read"]}), "name"),
    ] {
        let description = call(
            worker,
            Method::POST,
            "/portal/api/clients",
            &session,
            Some(body.clone()),
        )
        .assert_error(400, "invalid_request");
        assert!(description.contains(named), "{body}: {description}");
    }
}

#[test]
fn one_institution_never_touches_anothers_clients() {
    let worker = Worker::shared();
    let globex = worker.portal_login(1);
    let listed = call(worker, Method::GET, "/portal/api/clients", &globex, None).json();
    assert!(listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["client_id"] != "cli_demo_northwind"));
    call(
        worker,
        Method::POST,
        "/portal/api/clients/cli_demo_northwind/rotate",
        &globex,
        None,
    )
    .assert_error(404, "not_found");
    call(
        worker,
        Method::DELETE,
        "/portal/api/clients/cli_demo_northwind",
        &globex,
        None,
    )
    .assert_error(404, "not_found");
    // Northwind's demo secret still works.
    let n = &worker.credentials.institutions[0];
    worker.token(&n.client_id, &n.client_secret);
}

fn create_endpoint(worker: &Worker, session: &PortalSession, body: Value) -> Value {
    let reply = call(
        worker,
        Method::POST,
        "/portal/api/webhook-endpoints",
        session,
        Some(body),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.json()
}

#[test]
fn webhook_endpoints_create_read_edit_delete() {
    let worker = Worker::shared();
    let session = worker.portal_login(0);
    let endpoint = create_endpoint(
        worker,
        &session,
        json!({"url": "http://127.0.0.1:9/hooks", "description": "local receiver"}),
    );
    let id = endpoint["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("ep_"));
    assert_eq!(endpoint["status"], "enabled");
    assert_eq!(
        endpoint["event_types"],
        Value::Null,
        "every type by default"
    );
    let secret = endpoint["signing_secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_") && secret.len() > 40);

    let read = call(
        worker,
        Method::GET,
        &format!("/portal/api/webhook-endpoints/{id}"),
        &session,
        None,
    );
    assert_eq!(read.status, 200);
    assert!(
        read.json().get("signing_secret").is_none(),
        "secrets only on demand"
    );
    let revealed = call(
        worker,
        Method::GET,
        &format!("/portal/api/webhook-endpoints/{id}/secret"),
        &session,
        None,
    );
    assert_eq!(revealed.json()["signing_secret"], secret.as_str());

    let patched = call(
        worker,
        Method::PATCH,
        &format!("/portal/api/webhook-endpoints/{id}"),
        &session,
        Some(
            json!({"event_types": ["payment.paid", "payment.refunded"], "status": "disabled", "description": "renamed"}),
        ),
    );
    assert_eq!(patched.status, 200, "{}", patched.text);
    let p = patched.json();
    assert_eq!(
        p["event_types"],
        json!(["payment.paid", "payment.refunded"])
    );
    assert_eq!(p["status"], "disabled");
    assert_eq!(p["description"], "renamed");
    assert_eq!(p["url"], "http://127.0.0.1:9/hooks", "absent fields stay");
    let all_again = call(
        worker,
        Method::PATCH,
        &format!("/portal/api/webhook-endpoints/{id}"),
        &session,
        Some(json!({"event_types": null, "url": "http://localhost:9000/other"})),
    );
    assert_eq!(all_again.json()["event_types"], Value::Null);
    assert_eq!(all_again.json()["url"], "http://localhost:9000/other");

    let second = create_endpoint(
        worker,
        &session,
        json!({"url": "http://localhost:9/second", "event_types": ["payment.succeeded"]}),
    );
    let listed = call(
        worker,
        Method::GET,
        "/portal/api/webhook-endpoints",
        &session,
        None,
    )
    .json();
    let ids: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&id.as_str()) && ids.contains(&second["id"].as_str().unwrap()));

    assert_eq!(
        call(
            worker,
            Method::DELETE,
            &format!("/portal/api/webhook-endpoints/{id}"),
            &session,
            None
        )
        .status,
        200
    );
    call(
        worker,
        Method::GET,
        &format!("/portal/api/webhook-endpoints/{id}"),
        &session,
        None,
    )
    .assert_error(404, "not_found");
}

#[test]
fn rotating_a_signing_secret_keeps_the_old_one_for_the_grace_period() {
    let worker = Worker::shared();
    let session = worker.portal_login(0);
    let endpoint = create_endpoint(
        worker,
        &session,
        json!({"url": "http://127.0.0.1:9/rotate"}),
    );
    let id = endpoint["id"].as_str().unwrap();
    let rotated = call(
        worker,
        Method::POST,
        &format!("/portal/api/webhook-endpoints/{id}/rotate-secret"),
        &session,
        None,
    );
    assert_eq!(rotated.status, 200, "{}", rotated.text);
    let body = rotated.json();
    assert_ne!(body["signing_secret"], endpoint["signing_secret"]);
    let until = body["previous_secret_expires_at"]
        .as_str()
        .expect("a grace period by default");
    let until = shared_types::time::parse_unix(until).unwrap();
    let created = shared_types::time::parse_unix(endpoint["created_at"].as_str().unwrap()).unwrap();
    assert!(
        (until - created - 86_400).abs() < 120,
        "24 hours by default"
    );
    assert_eq!(
        call(
            worker,
            Method::GET,
            &format!("/portal/api/webhook-endpoints/{id}/secret"),
            &session,
            None
        )
        .json()["signing_secret"],
        body["signing_secret"]
    );
    let now = call(
        worker,
        Method::POST,
        &format!("/portal/api/webhook-endpoints/{id}/rotate-secret"),
        &session,
        Some(json!({"grace_period_seconds": 0})),
    );
    assert_eq!(now.json()["previous_secret_expires_at"], Value::Null);
    for grace in [json!(-1), json!(604_801), json!("soon")] {
        call(
            worker,
            Method::POST,
            &format!("/portal/api/webhook-endpoints/{id}/rotate-secret"),
            &session,
            Some(json!({"grace_period_seconds": grace})),
        )
        .assert_error(400, "invalid_request");
    }
}

#[test]
fn webhook_input_is_checked_against_ssrf_and_types() {
    let worker = Worker::shared();
    let session = worker.portal_login(0);
    for (body, named) in [
        (json!({"url": "http://hooks.example.com/"}), "https"),
        (json!({"url": "https://10.0.0.8/hook"}), "public"),
        (json!({"url": "https://169.254.169.254/latest"}), "public"),
        (json!({"url": "https://[fd00::1]/x"}), "public"),
        (json!({"url": "https://printer.local/"}), "internal"),
        (json!({"url": "not a url"}), "url"),
        (
            json!({"url": "http://127.0.0.1:9/", "event_types": ["payment.failed"]}),
            "payment.failed",
        ),
        (
            json!({"url": "http://127.0.0.1:9/", "event_types": []}),
            "event_types",
        ),
        (
            json!({"url": "http://127.0.0.1:9/", "description": "x".repeat(501)}),
            "description",
        ),
        (
            json!({"url": "http://127.0.0.1:9/", "secret": "mine"}),
            "secret",
        ),
        (json!({"description": "no url"}), "url"),
    ] {
        let description = call(
            worker,
            Method::POST,
            "/portal/api/webhook-endpoints",
            &session,
            Some(body.clone()),
        )
        .assert_error(400, "invalid_request");
        assert!(description.contains(named), "{body}: {description}");
    }
    let endpoint = create_endpoint(worker, &session, json!({"url": "http://127.0.0.1:9/ok"}));
    let id = endpoint["id"].as_str().unwrap();
    for body in [
        json!({"status": "paused"}),
        json!({"url": "https://192.168.0.1/"}),
        json!({"event_types": ["nope"]}),
    ] {
        call(
            worker,
            Method::PATCH,
            &format!("/portal/api/webhook-endpoints/{id}"),
            &session,
            Some(body),
        )
        .assert_error(400, "invalid_request");
    }
}

#[test]
fn one_institution_never_touches_anothers_endpoints() {
    let worker = Worker::shared();
    let northwind = worker.portal_login(0);
    let globex = worker.portal_login(1);
    let endpoint = create_endpoint(
        worker,
        &northwind,
        json!({"url": "http://127.0.0.1:9/mine"}),
    );
    let id = endpoint["id"].as_str().unwrap();
    let listed = call(
        worker,
        Method::GET,
        "/portal/api/webhook-endpoints",
        &globex,
        None,
    )
    .json();
    assert!(listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["id"] != id));
    for (method, path, body) in [
        (
            Method::GET,
            format!("/portal/api/webhook-endpoints/{id}"),
            None,
        ),
        (
            Method::PATCH,
            format!("/portal/api/webhook-endpoints/{id}"),
            Some(json!({"status": "disabled"})),
        ),
        (
            Method::DELETE,
            format!("/portal/api/webhook-endpoints/{id}"),
            None,
        ),
        (
            Method::GET,
            format!("/portal/api/webhook-endpoints/{id}/secret"),
            None,
        ),
        (
            Method::POST,
            format!("/portal/api/webhook-endpoints/{id}/rotate-secret"),
            None,
        ),
    ] {
        call(worker, method, &path, &globex, body).assert_error(404, "not_found");
    }
    let mine = call(
        worker,
        Method::GET,
        &format!("/portal/api/webhook-endpoints/{id}"),
        &northwind,
        None,
    );
    assert_eq!(mine.json()["status"], "enabled", "untouched");
    assert_eq!(
        call(
            worker,
            Method::GET,
            &format!("/portal/api/webhook-endpoints/{id}/secret"),
            &northwind,
            None
        )
        .json()["signing_secret"],
        endpoint["signing_secret"]
    );
}

#[test]
fn logout_ends_the_session() {
    let worker = Worker::shared();
    let session = worker.portal_login(1);
    let out = call(worker, Method::POST, "/portal/api/logout", &session, None);
    assert_eq!(out.status, 200);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    call(worker, Method::GET, "/portal/api/session", &session, None)
        .assert_error(401, "login_required");
}

#[test]
fn pages_need_a_session_and_forms_need_the_token() {
    let worker = Worker::shared();
    let anonymous = worker.send(worker.request(Method::GET, "/portal/developers"), None);
    assert_eq!(anonymous.status, 303);
    assert!(anonymous
        .header("location")
        .unwrap()
        .ends_with("/portal/login"));
    let login = worker.send(worker.request(Method::GET, "/portal/login"), None);
    assert_eq!(login.status, 200);
    assert!(login.text.contains("name=\"password\""));

    let admin = &worker.credentials.institutions[0];
    let posted = worker.send(
        worker
            .request(Method::POST, "/portal/login")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(payrail_tests::form(&[
                ("email", &admin.admin_email),
                ("password", &admin.admin_password),
            ])),
        None,
    );
    assert_eq!(posted.status, 303);
    // An admin lands on the overview.
    assert!(
        posted
            .header("location")
            .is_some_and(|l| l.ends_with("/portal/")),
        "{:?}",
        posted.header("location")
    );
    let cookie = posted
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let page = worker.send(
        worker
            .request(Method::GET, "/portal/developers")
            .header("Cookie", &cookie),
        None,
    );
    assert_eq!(page.status, 200);
    assert!(page.text.contains("cli_demo_northwind"));
    assert!(
        !page.text.contains("cli_demo_globex"),
        "only our own clients"
    );
    let no_token = worker.send(
        worker
            .request(Method::POST, "/portal/developers/clients")
            .header("Cookie", &cookie)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body("name=sneaky&scope=transactions%3Aread"),
        None,
    );
    assert_eq!(no_token.status, 403);
    let bad = worker.send(
        worker
            .request(Method::POST, "/portal/login")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(payrail_tests::form(&[
                ("email", &admin.admin_email),
                ("password", "wrong"),
            ])),
        None,
    );
    assert_eq!(bad.status, 401);
    assert!(bad.text.contains("wrong"));
}

/// An outside probe's finding: a page's failure (a bad filter, an unknown page) answered the
/// API's JSON, the input in it unescaped, without the pages' policy. It is a page of the portal
/// now: HTML, escaped, with every page's headers.
#[test]
fn a_pages_failure_is_a_page_escaped_under_the_pages_policy() {
    let worker = Worker::shared();
    let session = worker.portal_login(0);
    let script = "<script>alert(1)</script>";
    let encoded = "%3Cscript%3Ealert(1)%3C%2Fscript%3E";
    for (path, status) in [
        (format!("/portal/payments?status={encoded}"), 400),
        (format!("/portal/payments?created_after={encoded}"), 400),
        (format!("/portal/payments?merchant_id={encoded}"), 400),
        (format!("/portal/{encoded}"), 404),
        ("/portal/payments/999999999".to_owned(), 404),
    ] {
        let reply = worker.portal_page(&session, &path);
        assert_eq!(reply.status, status, "{path}: {}", reply.text);
        assert!(
            reply
                .header("content-type")
                .unwrap_or_default()
                .starts_with("text/html"),
            "{path}: {:?}",
            reply.header("content-type")
        );
        assert!(
            !reply.text.contains(script),
            "{path}: unescaped: {}",
            reply.text
        );
        assert!(
            reply.text.contains("Back to the portal"),
            "{path}: {}",
            reply.text
        );
        let policy = reply.header("content-security-policy").unwrap_or_default();
        assert!(policy.contains("default-src 'none'"), "{path}: {policy}");
        assert!(
            policy.contains("frame-ancestors 'none'"),
            "{path}: {policy}"
        );
        assert_eq!(
            reply.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(reply.header("x-frame-options"), Some("DENY"), "{path}");
    }
    // What was wrong is said, escaped.
    let reply = worker.portal_page(&session, &format!("/portal/payments?status={encoded}"));
    assert!(reply.text.contains("&lt;script&gt;"), "{}", reply.text);
    // A wrong method on a page is a page too, with its `Allow`.
    let wrong = worker.send(
        worker
            .request(Method::DELETE, "/portal/payments")
            .header("Cookie", format!("payrail_portal={}", session.cookie)),
        None,
    );
    assert_eq!(wrong.status, 405, "{}", wrong.text);
    assert_eq!(wrong.header("allow"), Some("GET"));
    assert!(wrong
        .header("content-type")
        .unwrap_or_default()
        .starts_with("text/html"));
    // The JSON API keeps its JSON.
    call(
        worker,
        Method::GET,
        "/portal/api/webhook-endpoints/nope",
        &session,
        None,
    )
    .assert_error(404, "not_found");
}
