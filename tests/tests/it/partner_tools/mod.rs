//! The tools for partners' developers against the running worker, a module per tool: the
//! `payrail` SDK ([`sdk`]: token, typed lists as streams, filters, errors, the events feed, the
//! sandbox), the reference webhook receiver ([`receiver`]: store before acknowledging, dedupe,
//! fulfil only what was paid in full and only the paying merchant's order, review the rest,
//! repair a lost webhook by reconciliation, refuse forgeries), the `payrail` command ([`cli`]: configure, list and get, `listen`,
//! `events resend`) and the TypeScript and Python libraries ([`libraries`]: their own black-box
//! tests, run against the worker). Here: what they share.

mod cli;
mod libraries;
mod receiver;
mod sdk;

use std::path::PathBuf;
use std::sync::OnceLock;

use payrail::Client;
use payrail_tests::Worker;

/// Every scope a sandbox client can have.
const ALL_SCOPES: &[&str] = &[
    "transactions:read",
    "merchants:read",
    "events:read",
    "sandbox:write",
];

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Runtime::new().expect("a tokio runtime"))
}

/// An SDK client of institution `index` with every scope.
fn sdk_client(worker: &Worker, index: usize) -> Client {
    let (id, secret) = worker.new_client(index, "SDK test", ALL_SCOPES);
    Client::new(&worker.base_url, id, secret).unwrap()
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
