//! Secret rotation through the documented command (`xtask rotate-secret`), in a test binary of
//! its own: the command writes through a second wrangler process, and nothing else may write
//! to the local database meanwhile (workerd does not wait on SQLite's lock).

use payrail_tests::Worker;

const GRANT: (&str, &str) = ("grant_type", "client_credentials");

#[test]
fn rotating_a_secret_refuses_the_old_one_and_revokes_its_tokens_at_once() {
    let worker = Worker::shared();
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
