//! The Payrail Cloudflare Worker. Entry points only: each hands off at once.

mod auth;
mod chain;
mod crypto;
mod db;
mod error;
mod http;
mod pages;
mod payments;
mod portal;
mod query;
mod routes;
mod webhook_url;
mod webhooks;

use worker::{
    event, Context, Env, MessageBatch, MessageExt, Request, Response, ScheduleContext,
    ScheduledEvent,
};

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> worker::Result<Response> {
    routes::handle(req, &env).await
}

#[event(scheduled)]
async fn scheduled(event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    if let Err(err) = routes::housekeeping(&env, event.cron()).await {
        worker::console_error!("housekeeping failed: {}", err.description);
    }
}

#[event(queue)]
async fn queue(
    batch: MessageBatch<serde_json::Value>,
    env: Env,
    _ctx: Context,
) -> worker::Result<()> {
    // Messages of a batch are handled concurrently, so one receiver that takes its full ten
    // seconds does not hold up deliveries to the others. Every outcome is recorded in D1 and
    // anything unfinished is swept by the cron trigger, so each message is acknowledged once
    // handled, whatever happened.
    let messages = batch.messages()?;
    futures_util::future::join_all(messages.iter().map(|message| async {
        match serde_json::from_value::<webhooks::Task>(message.body().clone()) {
            Ok(task) => {
                if let Err(err) = webhooks::consume(&env, task).await {
                    worker::console_error!("delivery failed: {}", err.description);
                }
            }
            Err(err) => worker::console_warn!("queue: unknown message {}: {err}", message.id()),
        }
        message.ack();
    }))
    .await;
    Ok(())
}
