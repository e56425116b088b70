//! The contract, exact: schemathesis (a property-based fuzzer, from PyPI, installed by
//! scripts/setup) reads the worker's own `/openapi.json` and sends requests the document calls
//! valid and requests it calls invalid, with a fixed seed and a bounded number of examples, to
//! every operation of the partner API (token, transactions, the events feed and an event by
//! id, merchants, checkout sessions and their status, the sandbox) and to the portal's login.
//! Zero failures: every request the document admits is accepted, every one it refuses is
//! refused with a status the document names, no response breaks its schema, and nothing
//! answers 5xx.
//!
//! The rest of the portal's JSON API is left out: its session is one cookie that the fuzzer's
//! stateful phase would log out, and its changes (rotations, deletions) would pull the fuzzer's
//! own credentials away; every test that calls it checks each answer against the document.

use std::process::Command;

use payrail_tests::Worker;

/// The seed: the same requests on every run.
const SEED: &str = "20261123";
/// Examples per operation and phase: about a minute on two cores.
const EXAMPLES: &str = "25";

/// A worker of its own: the fuzzer creates checkout sessions by the hundred and guesses
/// logins, which would use up the checkout and login limits of the address every test shares.
fn worker() -> &'static Worker {
    Worker::own("contract")
}

#[test]
fn the_fuzzer_finds_the_document_and_the_server_in_agreement() {
    let worker = worker();
    let (client_id, client_secret) = worker.new_client(
        0,
        "contract fuzzer",
        &["transactions:read", "merchants:read", "events:read"],
    );
    let token = worker.token(&client_id, &client_secret);
    let sandbox = worker.sandbox_token(0);
    let basic = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("{client_id}:{client_secret}"),
    );
    // Each operation with the credentials its security scheme asks for: a bearer token with
    // every read scope on /v1, a sandbox client's on /sandbox, the client's id and secret at
    // the token endpoint; checkout and login are public. (Environment variables, so no secret
    // is written to a file or shows on a command line.)
    let config = worker.persist_to().join("schemathesis.toml");
    std::fs::write(
        &config,
        r#"[[operations]]
include-path-regex = "^/v1/"
headers = { Authorization = "Bearer ${FUZZ_TOKEN}" }
[[operations]]
include-path-regex = "^/sandbox/"
headers = { Authorization = "Bearer ${FUZZ_SANDBOX_TOKEN}" }
[[operations]]
include-path = "/oauth/token"
headers = { Authorization = "Basic ${FUZZ_BASIC}" }
"#,
    )
    .expect("write the fuzzer's configuration");
    let bin = std::env::var("SCHEMATHESIS_BIN")
        .expect("SCHEMATHESIS_BIN is set by scripts/env.sh (run through scripts/test)");
    let output = Command::new(&bin)
        .arg("--config-file")
        .arg(&config)
        .args(["run", &format!("{}/openapi.json", worker.base_url)])
        .args(["--url", &worker.base_url])
        .args([
            "--include-path-regex",
            "^/(oauth|v1|checkout|sandbox)/|^/portal/api/login$",
        ])
        .args(["--seed", SEED, "--max-examples", EXAMPLES])
        .args([
            "--checks",
            "all",
            "--no-color",
            "--generation-database",
            "none",
        ])
        .args(["--request-timeout", "30"])
        .env("FUZZ_TOKEN", &token)
        .env("FUZZ_SANDBOX_TOKEN", &sandbox)
        .env("FUZZ_BASIC", &basic)
        .current_dir(worker.persist_to())
        .output()
        .unwrap_or_else(|e| panic!("run {bin} (scripts/setup installs it): {e}"));
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // The figures, in the test's output (`--nocapture`) and in a failure's message.
    let summary: Vec<&str> = report
        .lines()
        .filter(|l| {
            l.contains("generated")
                || l.contains("Selected:")
                || l.contains("Tested:")
                || l.contains("passed")
                || l.contains("failed")
        })
        .collect();
    println!("schemathesis, seed {SEED}:\n{}", summary.join("\n"));
    assert!(
        output.status.success(),
        "schemathesis found the document and the server apart:\n{report}"
    );
    // It did test: every selected operation, and requests by the hundred.
    assert!(
        report.contains("Tested: 10"),
        "ten operations tested:\n{report}"
    );
    // "1021 generated, 1021 passed"
    let generated: u64 = report
        .lines()
        .find_map(|l| l.trim().split_once(" generated, "))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("a count of test cases:\n{report}"));
    assert!(generated >= 500, "{generated} test cases:\n{report}");
}
