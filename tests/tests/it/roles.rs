//! Portal users and roles: an admin invites a viewer (its first password shown once); the viewer
//! reads payments, merchants and the delivery log, but changes nothing and sees no secret; an
//! admin removes users (never itself, never the last admin), which ends their sessions.

use payrail_tests::hooks::endpoint;
use payrail_tests::Worker;
use reqwest::Method;
use serde_json::json;

#[test]
fn a_viewer_reads_but_changes_nothing_and_sees_no_secret() {
    let worker = Worker::shared();
    let admin = worker.portal_login(0);
    let (endpoint_id, _) = endpoint(worker, &admin, "http://127.0.0.1:9/roles", None);
    let invited = worker.portal(
        Method::POST,
        "/portal/api/users",
        Some(&admin),
        Some(&json!({"email": "Viewer@Northwind.example", "role": "viewer"})),
    );
    assert_eq!(invited.status, 201, "{}", invited.text);
    let invited = invited.json();
    assert_eq!(invited["email"], "viewer@northwind.example");
    assert_eq!(invited["role"], "viewer");
    let viewer = worker.portal_login_as(
        "viewer@northwind.example",
        invited["password"].as_str().unwrap(),
    );
    let me = worker.portal(Method::GET, "/portal/api/session", Some(&viewer), None);
    assert_eq!(me.json()["role"], "viewer");

    for path in [
        "/portal/api/payments?limit=3".to_owned(),
        "/portal/api/merchants".to_owned(),
        "/portal/api/overview".to_owned(),
        format!("/portal/api/webhook-endpoints/{endpoint_id}/deliveries"),
        "/portal/api/users".to_owned(),
    ] {
        let reply = worker.portal(Method::GET, &path, Some(&viewer), None);
        assert_eq!(reply.status, 200, "{path}: {}", reply.text);
    }
    worker
        .portal(
            Method::GET,
            &format!("/portal/api/webhook-endpoints/{endpoint_id}/secret"),
            Some(&viewer),
            None,
        )
        .assert_error(403, "admin_required");
    for (method, path, body) in [
        (
            Method::POST,
            "/portal/api/merchants".to_owned(),
            Some(
                json!({"name": "V", "legal_name": "V", "email": "v@v.example", "psp_reference_id": "V1"}),
            ),
        ),
        (
            Method::POST,
            "/portal/api/clients".to_owned(),
            Some(json!({"name": "V", "scopes": ["transactions:read"]})),
        ),
        (
            Method::POST,
            format!("/portal/api/webhook-endpoints/{endpoint_id}/rotate-secret"),
            None,
        ),
        (
            Method::POST,
            "/portal/api/users".to_owned(),
            Some(json!({"email": "x@northwind.example", "role": "admin"})),
        ),
    ] {
        worker
            .portal(method.clone(), &path, Some(&viewer), body.as_ref())
            .assert_error(403, "admin_required");
    }
    // A viewer may still log out.
    let out = worker.portal(Method::POST, "/portal/api/logout", Some(&viewer), None);
    assert_eq!(out.status, 200, "{}", out.text);
}

#[test]
fn admins_remove_users_but_never_themselves_or_the_last_admin() {
    let worker = Worker::shared();
    let admin = worker.portal_login(1);
    let invited = worker
        .portal(
            Method::POST,
            "/portal/api/users",
            Some(&admin),
            Some(&json!({"email": "second@globex.example", "role": "admin"})),
        )
        .json();
    let second = worker.portal_login_as(
        "second@globex.example",
        invited["password"].as_str().unwrap(),
    );
    let users = worker
        .portal(Method::GET, "/portal/api/users", Some(&admin), None)
        .json();
    let me = users["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["email"] == worker.credentials.institutions[1].admin_email.as_str())
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    worker
        .portal(
            Method::DELETE,
            &format!("/portal/api/users/{me}"),
            Some(&admin),
            None,
        )
        .assert_error(409, "conflict");
    worker
        .portal(
            Method::POST,
            "/portal/api/users",
            Some(&admin),
            Some(&json!({"email": "second@globex.example", "role": "viewer"})),
        )
        .assert_error(409, "conflict");
    worker
        .portal(
            Method::POST,
            "/portal/api/users",
            Some(&admin),
            Some(&json!({"email": "third@globex.example", "role": "owner"})),
        )
        .assert_error(400, "invalid_request");
    // Removing the second admin ends its session at once.
    let id = invited["id"].as_i64().unwrap();
    let removed = worker.portal(
        Method::DELETE,
        &format!("/portal/api/users/{id}"),
        Some(&admin),
        None,
    );
    assert_eq!(removed.status, 200, "{}", removed.text);
    worker
        .portal(Method::GET, "/portal/api/session", Some(&second), None)
        .assert_error(401, "login_required");
    // Another institution's user is not found.
    let northwind = worker.portal_login(0);
    worker
        .portal(
            Method::DELETE,
            &format!("/portal/api/users/{me}"),
            Some(&northwind),
            None,
        )
        .assert_error(404, "not_found");
}
