//! Webhook delivery: queue messages carry delivery ids (never payloads); the consumer re-reads
//! the rows, claims the attempt, signs, POSTs with a 10-second deadline, records the attempt,
//! and schedules the next one or applies the auto-disable rule.

use std::time::Duration;

use futures_util::future::{select, Either};
use serde::{Deserialize, Serialize};
use shared_types::webhook::{self, EVENT_ID_HEADER, EVENT_TYPE_HEADER, SIGNATURE_HEADER};
use worker::{
    AbortController, Delay, Env, Fetch, Headers, Method, Request, RequestInit, RequestRedirect,
};

use crate::crypto;
use crate::db::webhooks::{self as db, Attempt, Due};
use crate::error::{ApiError, OrInternal};

/// The queue binding.
const QUEUE: &str = "DELIVERIES";
/// A receiver must answer within this.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// Response body kept per attempt.
const BODY_KEPT: usize = 4096;
/// `User-Agent` of deliveries.
pub const USER_AGENT: &str = "Payrail-Webhooks/1.0 (+https://payrail.example/docs/webhooks)";

/// A queue message. Tagged, so other tasks can join later.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "task", rename_all = "snake_case")]
pub enum Task {
    /// Attempt this delivery (if it is still due).
    Deliver {
        /// `dlv_…`.
        delivery_id: String,
    },
}

/// The schedule's compression factor: `PAYRAIL_WEBHOOK_TIME_SCALE` (1 in production).
pub fn time_scale(env: &Env) -> u64 {
    env.var("PAYRAIL_WEBHOOK_TIME_SCALE")
        .ok()
        .and_then(|v| v.to_string().parse().ok())
        .filter(|s| *s >= 1)
        .unwrap_or(1)
}

/// Sends delivery ids to the queue, `delay` seconds from now. A lost message is harmless: the
/// cron sweep finds the overdue delivery.
pub async fn enqueue(env: &Env, ids: &[String], delay: u32) -> Result<(), ApiError> {
    if ids.is_empty() {
        return Ok(());
    }
    let queue = env.queue(QUEUE).or_internal("bind queue")?;
    let mut batch = worker::BatchMessageBuilder::new();
    for id in ids {
        batch = batch.message(Task::Deliver {
            delivery_id: id.clone(),
        });
    }
    queue
        .send_batch(batch.delay_seconds(delay).build())
        .await
        .or_internal("enqueue deliveries")
}

/// Handles one queue message. Every outcome is recorded in D1, so the message is always acked.
pub async fn consume(env: &Env, task: Task) -> Result<(), ApiError> {
    match task {
        Task::Deliver { delivery_id } => deliver(env, &delivery_id).await,
    }
}

fn now() -> i64 {
    crate::routes::now()
}

async fn deliver(env: &Env, id: &str) -> Result<(), ApiError> {
    let database = crate::routes::database(env)?;
    let Some(due) = db::due(&database, id).await.or_internal("read delivery")? else {
        return Ok(());
    };
    if due.status != "pending" {
        return Ok(()); // a repeated message
    }
    let started = now();
    if let Some(next) = due.next_attempt_at {
        if next > started + 1 {
            // Early (a duplicate, or a resend scheduled later): come back when it is due.
            return enqueue(env, std::slice::from_ref(&due.id), (next - started) as u32).await;
        }
    }
    if due.url.is_none() || due.endpoint_status.as_deref() != Some("enabled") {
        return db::give_up(&database, id)
            .await
            .or_internal("give up delivery");
    }
    if !db::claim(&database, id, due.attempts, started)
        .await
        .or_internal("claim delivery")?
    {
        return Ok(()); // another consumer has it
    }
    let attempt = due.attempts + 1;
    let (status_code, outcome, body, latency_ms) = post(env, &due, started).await?;
    let ok = outcome == "ok";
    let scale = time_scale(env);
    let mut record = Attempt {
        delivery_id: &due.id,
        endpoint_id: &due.endpoint_id,
        attempt,
        started_at: started,
        status_code,
        outcome,
        latency_ms,
        response_body: body.as_deref(),
        next_attempt_at: None,
    };
    if ok {
        return db::succeeded(&database, &record)
            .await
            .or_internal("record success");
    }
    let first_failure = due.first_failure_at.unwrap_or(started);
    if webhook::should_disable(Some(first_failure), started, scale) {
        return disable(env, &database, &due, &record, first_failure).await;
    }
    let unit = f64::from(crypto::random_bytes::<1>().or_internal("jitter")?[0]) / 256.0;
    let delay = webhook::with_jitter(webhook::retry_delay(attempt as u32, scale), unit);
    record.next_attempt_at = Some(started + delay as i64);
    db::failed(&database, &record)
        .await
        .or_internal("record failure")?;
    enqueue(env, std::slice::from_ref(&due.id), delay as u32).await
}

/// POSTs the event; returns (status, outcome, first 4 KB of the body, latency in ms).
async fn post(
    env: &Env,
    due: &Due,
    now: i64,
) -> Result<(Option<u16>, &'static str, Option<String>, i64), ApiError> {
    let key = crate::portal::sealing_key(env)
        .ok_or("PAYRAIL_ENCRYPTION_KEY is not set")
        .or_internal("open signing secret")?;
    let sealed = due.secret_encrypted.as_deref().unwrap_or_default();
    let mut secrets =
        vec![crypto::open(&key, &due.endpoint_id, sealed).or_internal("open signing secret")?];
    if let (Some(previous), Some(until)) = (
        &due.previous_secret_encrypted,
        due.previous_secret_expires_at,
    ) {
        if until > now {
            secrets.push(
                crypto::open(&key, &due.endpoint_id, previous)
                    .or_internal("open signing secret")?,
            );
        }
    }
    let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    let headers = Headers::new();
    for (name, value) in [
        ("Content-Type", "application/json"),
        ("User-Agent", USER_AGENT),
        (
            SIGNATURE_HEADER,
            &webhook::signature_header(&refs, now, due.payload.as_bytes()),
        ),
        (EVENT_ID_HEADER, &due.event_id),
        (EVENT_TYPE_HEADER, &due.event_type),
    ] {
        headers.set(name, value).or_internal("set header")?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(due.payload.clone().into()))
        .with_redirect(RequestRedirect::Manual);
    let request = Request::new_with_init(due.url.as_deref().unwrap_or_default(), &init)
        .or_internal("build delivery request")?;

    let started = js_sys::Date::now();
    let controller = AbortController::default();
    let signal = controller.signal();
    let exchange = async {
        let mut response = Fetch::Request(request).send_with_signal(&signal).await?;
        let status = response.status_code();
        let text = response.text().await.unwrap_or_default();
        Ok::<_, worker::Error>((status, text))
    };
    let outcome = select(Box::pin(exchange), Box::pin(Delay::from(DEADLINE))).await;
    let latency = (js_sys::Date::now() - started) as i64;
    Ok(match outcome {
        Either::Left((Ok((status, text)), _)) => {
            let kept: String = text.chars().take(BODY_KEPT).collect();
            let outcome = match status {
                200..=299 => "ok",
                300..=399 => "redirect",
                _ => "http_status",
            };
            (Some(status), outcome, Some(kept), latency)
        }
        // Refused connection, DNS failure, reset: Workers report them alike.
        Either::Left((Err(_), _)) => (None, "connection", None, latency),
        Either::Right(_) => {
            controller.abort();
            (None, "timeout", None, latency)
        }
    })
}

async fn disable(
    env: &Env,
    database: &worker::D1Database,
    due: &Due,
    record: &Attempt<'_>,
    first_failure: i64,
) -> Result<(), ApiError> {
    let since = shared_types::time::format_unix(first_failure).unwrap_or_default();
    let url = due.url.clone().unwrap_or_default();
    let reason = format!("every delivery has failed since {since}");
    let subject = format!("Payrail disabled your webhook endpoint {url}");
    let body = format!(
        "Payrail has disabled the webhook endpoint {url} ({}) because every delivery to it has \
         failed since {since}. Events are kept: fix the receiver, re-enable the endpoint in the \
         portal, and resend the failed deliveries from its delivery log.",
        due.endpoint_id
    );
    let recipients = db::admin_emails(database, due.institution_id)
        .await
        .or_internal("read admins")?;
    let email_status = send_email(env, &recipients, &subject, &body).await;
    db::failed_and_disabled(
        database,
        record,
        due.institution_id,
        &reason,
        &subject,
        &body,
        email_status,
    )
    .await
    .or_internal("disable endpoint")
}

/// Sends a plain-text e-mail through Cloudflare's send-email binding `EMAIL` when it is
/// configured (with `PAYRAIL_NOTIFY_FROM`); returns what happened, for the record.
async fn send_email(env: &Env, to: &[String], subject: &str, text: &str) -> &'static str {
    let (Ok(binding), Ok(from)) = (
        env.get_binding::<worker::SendEmail>("EMAIL"),
        env.var("PAYRAIL_NOTIFY_FROM"),
    ) else {
        return "not_configured";
    };
    if to.is_empty() {
        return "no_recipients";
    }
    let message = serde_json::json!({
        "from": from.to_string(), "to": to, "subject": subject, "text": text,
    });
    let Ok(message) = serde_wasm_bindgen::to_value(&message) else {
        return "failed";
    };
    let send = js_sys::Reflect::get(binding.as_ref(), &"send".into())
        .ok()
        .and_then(|f| wasm_bindgen::JsCast::dyn_into::<js_sys::Function>(f).ok());
    let Some(send) = send else { return "failed" };
    match send.call1(binding.as_ref(), &message) {
        Ok(promise) => {
            match wasm_bindgen_futures::JsFuture::from(js_sys::Promise::from(promise)).await {
                Ok(_) => "sent",
                Err(_) => "failed",
            }
        }
        Err(_) => "failed",
    }
}

/// The cron sweep: sends overdue and stale pending deliveries to the queue again.
pub async fn sweep(env: &Env) -> Result<(), ApiError> {
    let database = crate::routes::database(env)?;
    let now = now();
    let ids = db::overdue(&database, now - 30, now - 2 * DEADLINE.as_secs() as i64)
        .await
        .or_internal("find overdue deliveries")?;
    enqueue(env, &ids, 0).await
}
