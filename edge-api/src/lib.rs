//! The Payrail Cloudflare Worker. Entry points only: each builds the event's context once and
//! hands off at once.
//!
//! Layers, each importing only from its own and the ones below it, with no cycle between files
//! (a test checks this): entry points (this file) → handlers (`routes`, `portal`, `cron`) →
//! services (`auth`, `throttle`, `payments`, `checkout`, `webhooks`, `money`) → talking out
//! (`chain`: the nodes; `notify`: admins and the operator) → `db` → the bottom (`ctx`, `error`,
//! `sql`, `http`, `html`, `locale`, `query`, `crypto`, `webhook_url`, `wallet_address`, `route`) →
//! `shared-types` and `payrail-evm`.

mod auth;
mod chain;
mod checkout;
mod cron;
mod crypto;
mod ctx;
mod db;
mod error;
mod html;
mod http;
mod locale;
mod money;
mod notify;
mod objects;
mod payments;
mod portal;
mod query;
mod route;
mod routes;
mod shard;
mod sql;
mod throttle;
mod wallet_address;
mod webhook_url;
mod webhooks;

#[cfg(test)]
mod layers_test;

use worker::{
    durable_object, event, Context, DurableObject, Env, MessageBatch, MessageExt, Request,
    Response, ScheduleContext, ScheduledEvent, State,
};

use crate::ctx::Ctx;

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> worker::Result<Response> {
    match Ctx::new(env) {
        Ok(ctx) => {
            let ctx = ctx.with_caller_address(http::caller_address(&req));
            if !ctx.metered() {
                return routes::handle(req, &ctx).await;
            }
            sql::meter::start();
            let answer = routes::handle(req, &ctx).await;
            let counts = sql::meter::finish().unwrap_or_default();
            answer.and_then(|response| metered(response, &counts))
        }
        Err(err) => {
            err.log();
            http::error(&err)
        }
    }
}

#[event(scheduled)]
async fn scheduled(_event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    // Each task's failure is logged by `cron::run`, where it is given up on.
    match Ctx::new(env) {
        Ok(ctx) if ctx.metered() => {
            sql::meter::start();
            let _ = cron::run(&ctx).await;
            let counts = sql::meter::finish().unwrap_or_default();
            worker::console_log!("payrail-d1 cron {}", counts.render());
        }
        Ok(ctx) => {
            let _ = cron::run(&ctx).await;
        }
        Err(err) => err.log(),
    }
}

#[event(queue)]
async fn queue(
    batch: MessageBatch<serde_json::Value>,
    env: Env,
    _ctx: Context,
) -> worker::Result<()> {
    let ctx = Ctx::new(env).map_err(|err| {
        err.log();
        worker::Error::RustError(err.description)
    })?;
    // Messages of a batch are handled concurrently, so one receiver that takes its full ten
    // seconds does not hold up deliveries to the others. Every outcome is recorded in D1 and
    // anything unfinished is swept by the cron trigger, so each message is acknowledged once
    // handled, whatever happened.
    let messages = batch.messages()?;
    let metered = ctx.metered();
    if metered {
        sql::meter::start();
    }
    futures_util::future::join_all(messages.iter().map(|message| async {
        match serde_json::from_value::<webhooks::Task>(message.body().clone()) {
            Ok(task) => {
                if let Err(err) = webhooks::consume(&ctx, task).await {
                    err.log_with("delivery");
                }
            }
            Err(err) => worker::console_warn!("queue: unknown message {}: {err}", message.id()),
        }
        message.ack();
    }))
    .await;
    if metered {
        let counts = sql::meter::finish().unwrap_or_default();
        worker::console_log!(
            "payrail-d1 queue messages={};{}",
            messages.len(),
            counts.render()
        );
    }
    Ok(())
}

/// `response` with the D1 work that made it in `Payrail-D1` (see `sql::meter`); its headers are
/// copied into a new response, since a response's own may be immutable.
fn metered(response: Response, counts: &sql::meter::Counts) -> worker::Result<Response> {
    let headers = response.headers().clone();
    headers.set("Payrail-D1", &counts.render())?;
    Ok(response.with_headers(headers))
}

/// An institution's object (`objects`): its money tables in its own SQLite, run by the statements
/// the worker's executor sends it. Only the worker reaches it (through its binding); it answers
/// one path.
#[durable_object(fetch)]
pub struct Institution {
    store: objects::Store,
}

impl DurableObject for Institution {
    fn new(state: State, _env: Env) -> Self {
        Institution {
            store: objects::Store::new(state.storage()),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        self.store.fetch(req).await
    }
}
