//! Black-box test harness: starts the built worker under `wrangler dev` (workerd, local D1) on a
//! free port with its own fresh database, and talks to it over real HTTP. Every JSON response
//! of the partner API and of the portal's JSON API is checked against `edge-api/openapi.json`
//! on the way.
//!
//! Run through `scripts/test`, which installs the tools, builds the worker once and puts Node 22
//! and wrangler first on PATH.
//!
//! By concern: [`worker`] runs the worker process and opens its database, [`fixtures`] is what
//! that database holds before it starts, [`http`] talks to it, [`openapi`] checks what it
//! answers, [`books`] checks its books against its chain. The items tests use most are re-exported here.

pub mod books;
pub mod browser;
pub mod chain;
pub mod faults;
pub mod fixtures;
pub mod hooks;
pub mod http;
pub mod openapi;
pub mod receiver;
pub mod wallet;
pub mod worker;

use std::time::{Duration, Instant};

pub use fixtures::{FixtureClient, EXPIRED_PORTAL_SESSION, EXPIRED_TOKEN, FIXTURE_CLIENTS};
pub use http::{form, PortalSession, Reply};
pub use worker::{free_port, root, Worker};

/// Today's date (UTC), `YYYY-MM-DD`, as the portal's date filters take it.
pub fn today() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_secs();
    shared_types::time::format_unix(i64::try_from(now).expect("a Unix time in range"))
        .expect("a date")[..10]
        .to_owned()
}

/// Polls `check` until it returns `Some`, or panics after `timeout` naming `what`.
pub fn eventually<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
