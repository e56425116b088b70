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
    _env: Env,
    _ctx: Context,
) -> worker::Result<()> {
    // Webhook delivery tasks arrive here once the webhook outbox exists; until then nothing is
    // produced, and anything that does arrive is acknowledged so it cannot loop.
    for message in batch.messages()? {
        worker::console_warn!("queue: no handler for message {}", message.id());
        message.ack();
    }
    Ok(())
}
