//! The `payrail` command: what a partner's developer runs on a laptop.
//!
//! - `payrail listen --forward-to http://localhost:3000/webhooks`: follows the events feed and
//!   forwards each new event to a local URL, signed with a local secret it prints, so a receiver
//!   can be built on a machine Payrail cannot reach.
//! - `payrail trigger payment.paid`: drives a sandbox checkout to that event.
//! - `payrail transactions|merchants list|get`, `payrail events list`, `payrail events resend`.
//!
//! Credentials: flags, then `PAYRAIL_API_URL` / `PAYRAIL_CLIENT_ID` / `PAYRAIL_CLIENT_SECRET`,
//! then the config file written by `payrail configure` (mode 0600; see [`config`]).
//!
//! The command line is defined in `args`, each command lives in `commands`, and what the user
//! sees (tables, JSON, errors) in `output`.

mod args;
mod commands;
pub mod config;
mod context;
mod http;
mod output;
mod portal;

use std::future::Future;
use std::io::{BufRead, Write};

use crate::config::Env;

/// Where the command reads and writes.
pub struct Io {
    /// Results.
    pub out: Box<dyn Write + Send>,
    /// Progress and errors.
    pub err: Box<dyn Write + Send>,
    /// Secrets read from a pipe.
    pub stdin: Box<dyn BufRead + Send>,
    /// Whether standard input is a terminal (then secrets are prompted for without echo).
    pub stdin_is_terminal: bool,
}

/// Runs the command line `args` (program name first); answers the exit code. `shutdown`
/// ends `listen`.
pub async fn run(
    args: Vec<String>,
    env: Env,
    io: &mut Io,
    shutdown: impl Future<Output = ()>,
) -> i32 {
    let cli = match args::parse(args, io) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match commands::execute(cli, &env, io, shutdown).await {
        Ok(()) => 0,
        Err(failure) => failure.show(io),
    }
}
