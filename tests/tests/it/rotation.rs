//! The documented commands that write through a second wrangler process (`xtask rotate-secret`,
//! `xtask add-admin`), on a worker of their own, one test at a time: nothing else may write to
//! the local database meanwhile (workerd does not wait on SQLite's lock).

use std::sync::Mutex;

use payrail_tests::Worker;

/// This module's own worker (see the module's doc).
fn worker() -> &'static Worker {
    Worker::own("rotation")
}

/// One test at a time on this worker.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const GRANT: (&str, &str) = ("grant_type", "client_credentials");

#[test]
fn rotating_a_secret_refuses_the_old_one_and_revokes_its_tokens_at_once() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let worker = worker();
    let (id, old_secret) = worker.fixture_client("rotate");
    let token = worker.token(&id, &old_secret);
    assert_eq!(
        worker
            .get("/v1/merchants", Some(&token), "/v1/merchants")
            .status,
        200
    );

    let new_secret = xtask::secrets::rotate(
        &id,
        &xtask::secrets::Target::Local(worker.persist_to().to_path_buf()),
    )
    .expect("rotate");
    assert_ne!(new_secret, old_secret);

    worker
        .token_form(&[GRANT, ("client_id", &id), ("client_secret", &old_secret)])
        .assert_error(401, "invalid_client");
    worker
        .get("/v1/merchants", Some(&token), "/v1/merchants")
        .assert_error(401, "invalid_client");
    let fresh = worker.token(&id, &new_secret);
    assert_eq!(
        worker
            .get("/v1/merchants", Some(&fresh), "/v1/merchants")
            .status,
        200
    );
    // Only the hash is stored.
    let stored: String = worker
        .database()
        .query_row(
            "SELECT secret_hash FROM api_clients WHERE client_id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored, xtask::secrets::secret_hash(&new_secret));

    // An unknown client id changes nothing and says so.
    let err = xtask::secrets::rotate(
        "cli_nobody",
        &xtask::secrets::Target::Local(worker.persist_to().to_path_buf()),
    )
    .expect_err("unknown client");
    assert!(err.contains("cli_nobody"), "{err}");
}

#[test]
fn a_new_admin_can_log_in_with_the_printed_password() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let worker = worker();
    let target = xtask::secrets::Target::Local(worker.persist_to().to_path_buf());
    let password = xtask::secrets::add_admin(2, "Ops@Globex.example", &target).expect("add admin");
    let reply = worker.send(
        worker
            .request(reqwest::Method::POST, "/portal/api/login")
            .json(&serde_json::json!({"email": "ops@globex.example", "password": password})),
        None,
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    let again = xtask::secrets::add_admin(2, "ops@globex.example", &target).expect_err("duplicate");
    assert!(again.contains("already exists"), "{again}");
    let nowhere =
        xtask::secrets::add_admin(99, "x@globex.example", &target).expect_err("no institution");
    assert!(nowhere.contains("99"), "{nowhere}");
}

#[test]
fn a_new_institution_starts_empty_with_its_first_admin() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let worker = worker();
    let target = xtask::secrets::Target::Local(worker.persist_to().to_path_buf());
    let (id, password) =
        xtask::secrets::add_institution("Initech Payments", "Admin@Initech.example", &target)
            .expect("add institution");
    assert!(id > 2, "{id}");
    let session = worker.portal_login_as("admin@initech.example", &password);
    let me = worker.portal(
        reqwest::Method::GET,
        "/portal/api/session",
        Some(&session),
        None,
    );
    assert_eq!(me.json()["institution"], "Initech Payments");
    assert_eq!(me.json()["role"], "admin");
    let merchants = worker.portal(
        reqwest::Method::GET,
        "/portal/api/merchants",
        Some(&session),
        None,
    );
    assert_eq!(
        merchants.json()["data"],
        serde_json::json!([]),
        "starts empty"
    );
    let bad = xtask::secrets::add_institution("Evil'; DROP TABLE x", "a@b.example", &target)
        .expect_err("a name with a quote");
    assert!(bad.contains("not a name"), "{bad}");
}
