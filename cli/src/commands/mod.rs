//! The commands, one module each (a resource's `list`, `get` and the like share its module), and
//! what several of them use.

mod configure;
mod events;
mod listen;
mod login;
mod merchants;
mod transactions;
mod trigger;

use std::future::Future;

use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use rand::RngCore;

use crate::args::{Cli, Command, Limit};
use crate::config::Env;
use crate::context::Context;
use crate::output::{Failure, Outcome};
use crate::Io;

/// Runs the parsed command line. `shutdown` ends `listen`.
pub(crate) async fn execute(
    cli: Cli,
    env: &Env,
    io: &mut Io,
    shutdown: impl Future<Output = ()>,
) -> Outcome {
    let mut cx = Context::load(env, cli.api_url, cli.json)?;
    match cli.command {
        Command::Configure(args) => configure::run(&mut cx, io, args),
        Command::Login(args) => login::run(&mut cx, io, args).await,
        Command::Transactions { action } => transactions::run(&cx, io, action).await,
        Command::Merchants { action } => merchants::run(&cx, io, action).await,
        Command::Events { action } => events::run(&cx, io, action).await,
        Command::Listen(args) => listen::run(&mut cx, io, args, shutdown).await,
        Command::Trigger(args) => trigger::run(&cx, io, args).await,
    }
}

/// The first `limit` items of a list, following its pages.
async fn first<T>(
    items: BoxStream<'static, payrail::Result<T>>,
    limit: &Limit,
) -> Result<Vec<T>, Failure> {
    let limit = usize::try_from(limit.limit).unwrap_or(usize::MAX);
    Ok(items.take(limit).try_collect().await?)
}

/// `BYTES` random bytes, hex.
fn random_hex<const BYTES: usize>() -> String {
    let mut bytes = [0u8; BYTES];
    rand::thread_rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}
