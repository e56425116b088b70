//! Webhook delivery: queue messages carry delivery ids (never payloads); the consumer re-reads
//! the rows, claims the attempt, signs, POSTs with a 10-second deadline, records the attempt,
//! and schedules the next one or applies the auto-disable rule.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use shared_types::ids::DeliveryId;
use shared_types::webhook::{self, EVENT_ID_HEADER, EVENT_TYPE_HEADER, SIGNATURE_HEADER};
use shared_types::{AttemptOutcome, DeliveryStatus, EndpointStatus};
use worker::{Headers, Method, Request, RequestInit, RequestRedirect};

use crate::ctx::{timestamp, Ctx};
use crate::db::deliveries::{self, Due, NewAttempt, NewDelivery};
use crate::db::events::{self, Guard, OutboxEvent};
use crate::db::notifications::NotificationKind;
use crate::db::{endpoints, Batch, BatchResults, Handle};
use crate::error::{ApiError, OrInternal};
use crate::http::{self, FetchFailure};
use crate::{crypto, db};

/// The queue binding.
/// A receiver must answer within this.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// Response body kept per attempt.
const BODY_KEPT: usize = 4096;
/// Most messages one `send_batch` takes (a Cloudflare Queues limit).
const SEND_BATCH_MAX: usize = 100;
/// `User-Agent` of deliveries.
pub const USER_AGENT: &str = "Payrail-Webhooks/1.0 (+https://payrail.example/docs/webhooks)";

/// A queue message. Tagged, so other tasks can join later.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "task", rename_all = "snake_case")]
pub enum Task {
    /// Attempt this delivery (if it is still due).
    Deliver {
        /// `dlv_…`: a message whose id is not of that shape is refused as unknown.
        delivery_id: DeliveryId,
        /// The institution whose object holds the delivery; absent: D1 holds it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        held_by: Option<i64>,
    },
}

/// Where a delivery lives: D1, or its institution's object.
enum Place {
    D1,
    Held { institution: i64, object: db::Db },
}

impl Place {
    /// The place of a delivery `held_by` names.
    fn of(ctx: &Ctx, held_by: Option<i64>) -> Result<Place, ApiError> {
        Ok(match held_by {
            None => Place::D1,
            Some(institution) => Place::Held {
                institution,
                object: ctx.institution_object(institution)?,
            },
        })
    }

    /// Where its statements run.
    fn db<'a>(&'a self, ctx: &'a Ctx) -> &'a db::Db {
        match self {
            Place::D1 => &ctx.db,
            Place::Held { object, .. } => object,
        }
    }

    /// What a queue message says of it.
    fn held_by(&self) -> Option<i64> {
        match self {
            Place::D1 => None,
            Place::Held { institution, .. } => Some(*institution),
        }
    }
}

/// The outbox: puts `event` on `batch` (guarded by `guard`) with one delivery per enabled
/// endpoint of its institution subscribed to its type, both committed with whatever else the
/// batch holds; the handle reads the new deliveries once it ran ([`dispatch`]).
pub fn publish(
    batch: &mut Batch,
    event: &OutboxEvent<'_>,
    guard: Guard,
) -> Result<Handle<NewDelivery>, ApiError> {
    batch.push(events::insert(event, guard).or_internal("write event")?);
    let fan_out = deliveries::fan_out(
        event.id,
        event.institution_id,
        event.kind,
        None,
        event.created,
    )
    .or_internal("write deliveries")?;
    Ok(batch.push(fan_out))
}

/// [`publish`] for an institution whose money is held in its object, which holds no
/// endpoints: the directory names the enabled endpoints subscribed to the event's type (read
/// here, before the batch), and the object's batch makes one delivery for each. An endpoint
/// turned off in between gets a delivery that its consumer gives up; one made in between misses
/// this event, as one made just after it would.
pub async fn publish_held(
    ctx: &Ctx,
    batch: &mut Batch,
    event: &OutboxEvent<'_>,
    guard: Guard,
) -> Result<Handle<NewDelivery>, ApiError> {
    let subscribed = endpoints::subscribed(&ctx.db, event.institution_id, event.kind)
        .await
        .or_internal("read endpoints")?;
    batch.push(events::insert(event, guard).or_internal("write event")?);
    let fan_out = deliveries::fan_out_to(
        event.id,
        event.institution_id,
        event.kind,
        &subscribed,
        event.created,
    )
    .or_internal("write deliveries")?;
    Ok(batch.push(fan_out))
}

/// After the batch committed: sends the deliveries [`publish`] made to the queue (`held_by`:
/// the institution whose object holds them). A message lost here is found by the cron sweep, so
/// a failure is only logged.
pub async fn dispatch(
    ctx: &Ctx,
    results: &BatchResults,
    deliveries: Handle<NewDelivery>,
    event_id: &str,
    held_by: Option<i64>,
) {
    let sent = match deliveries::created(results, deliveries) {
        Ok(ids) => enqueue(ctx, &ids, 0, held_by).await,
        Err(e) => Err(ApiError::internal("read deliveries", e.to_string())),
    };
    if let Err(err) = sent {
        err.log_with(format!("deliveries of {event_id} left to the sweep"));
    }
}

/// Sends delivery ids to the queue, `delay` seconds from now, in batches the queue accepts
/// (`held_by`: the institution whose object holds them). A lost message is harmless: the cron
/// sweep finds the overdue delivery.
pub async fn enqueue(
    ctx: &Ctx,
    ids: &[DeliveryId],
    delay: u32,
    held_by: Option<i64>,
) -> Result<(), ApiError> {
    if ids.is_empty() {
        return Ok(());
    }
    let queue = ctx.delivery_queue()?;
    for chunk in ids.chunks(SEND_BATCH_MAX) {
        let mut batch = worker::BatchMessageBuilder::new();
        for id in chunk {
            batch = batch.message(Task::Deliver {
                delivery_id: id.clone(),
                held_by,
            });
        }
        queue
            .send_batch(batch.delay_seconds(delay).build())
            .await
            .or_internal("enqueue deliveries")?;
    }
    Ok(())
}

/// Handles one queue message. Every outcome is recorded where the delivery lives (D1, or its
/// institution's object), so the message is always acked.
pub async fn consume(ctx: &Ctx, task: Task) -> Result<(), ApiError> {
    match task {
        Task::Deliver {
            delivery_id,
            held_by,
        } => deliver(ctx, &delivery_id, &Place::of(ctx, held_by)?).await,
    }
}

async fn deliver(ctx: &Ctx, id: &DeliveryId, place: &Place) -> Result<(), ApiError> {
    let started = ctx.now();
    let stale_before = started - 2 * DEADLINE.as_secs() as i64;
    let claimed = match place {
        // The common case, one round trip: due, claimed, and everything the attempt needs.
        Place::D1 => deliveries::claim_due(&ctx.db, id, started, stale_before)
            .await
            .or_internal("claim delivery")?,
        // Claimed in the object, then its endpoint read from the directory.
        Place::Held { object, .. } => {
            match deliveries::claim_held(object, id, started, stale_before)
                .await
                .or_internal("claim delivery")?
            {
                None => None,
                Some(claimed) => match with_endpoint(ctx, claimed).await? {
                    Some(due) => Some(due),
                    None => {
                        return deliveries::give_up(object, id)
                            .await
                            .or_internal("give up delivery")
                    }
                },
            }
        }
    };
    let Some(due) = claimed else {
        return not_claimed(ctx, place, id, started).await;
    };
    let attempt = due.attempts + 1;
    // Claimed: from here every outcome is recorded as an attempt, even one that could not be
    // made, so it is retried on the schedule and counts toward the disable rule.
    let (status_code, outcome, body, latency_ms) = match post(ctx, &due, started).await {
        Ok(result) => result,
        Err(err) => {
            err.log_with(format!("delivery {}: attempt not made", due.id));
            (None, AttemptOutcome::Error, None, 0)
        }
    };
    let scale = ctx.webhook_time_scale();
    let mut record = NewAttempt {
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
    if outcome == AttemptOutcome::Ok {
        return record_attempt(
            ctx,
            place,
            &record,
            deliveries::mark_succeeded(&due.id),
            endpoints::record_success(&due.endpoint_id, started),
        )
        .await;
    }
    let unit = f64::from(crypto::random_bytes::<1>().or_internal("jitter")?[0]) / 256.0;
    let delay = webhook::with_jitter(webhook::retry_delay(attempt as u32, scale), unit);
    let next = started + delay as i64;
    let disabling = due
        .first_failure_at
        .filter(|first| webhook::should_disable(Some(*first), started, scale));
    if let Some(first_failure) = disabling {
        if disable(ctx, place, &due, &record, first_failure, next).await? {
            return Ok(());
        }
    } else if webhook::should_give_up(due.created_at, due.last_success_at, started, scale) {
        return record_attempt(
            ctx,
            place,
            &record,
            deliveries::give_up_statement(&due.id),
            endpoints::record_failure(&due.endpoint_id, started),
        )
        .await;
    } else {
        record.next_attempt_at = Some(next);
        record_attempt(
            ctx,
            place,
            &record,
            deliveries::schedule(&due.id, Some(next)),
            endpoints::record_failure(&due.endpoint_id, started),
        )
        .await?;
    }
    // A message arriving before the attempt is due is sent on (`not_claimed`).
    let queued = delay.min(webhook::MAX_QUEUE_DELAY_SECONDS);
    enqueue(
        ctx,
        std::slice::from_ref(&due.id),
        queued as u32,
        place.held_by(),
    )
    .await
}

/// A delivery claimed in its institution's object, with its endpoint from the directory;
/// `None` when the endpoint is gone or not enabled (the delivery is then given up).
async fn with_endpoint(ctx: &Ctx, claimed: Due) -> Result<Option<Due>, ApiError> {
    let endpoint = endpoints::for_delivery(&ctx.db, claimed.institution_id, &claimed.endpoint_id)
        .await
        .or_internal("read endpoint")?;
    Ok(endpoint
        .filter(|e| e.status == EndpointStatus::Enabled && e.url.is_some())
        .map(|e| Due {
            url: e.url,
            endpoint_status: Some(e.status),
            secret_encrypted: e.secret_encrypted,
            previous_secret_encrypted: e.previous_secret_encrypted,
            previous_secret_expires_at: e.previous_secret_expires_at,
            first_failure_at: e.first_failure_at,
            last_success_at: e.last_success_at,
            ..claimed
        }))
}

/// A delivery that could not be claimed: gone or finished (a repeated message), early (a
/// duplicate, or a resend scheduled later: come back when it is due), its endpoint deleted or
/// disabled (given up), or in another consumer's hands.
async fn not_claimed(ctx: &Ctx, place: &Place, id: &DeliveryId, now: i64) -> Result<(), ApiError> {
    let read = match place {
        Place::D1 => deliveries::due(&ctx.db, id).await,
        Place::Held { object, .. } => deliveries::due_held(object, id).await,
    };
    let Some(due) = read.or_internal("read delivery")? else {
        return Ok(());
    };
    if due.status != DeliveryStatus::Pending {
        return Ok(());
    }
    if let Some(next) = due.next_attempt_at.filter(|next| *next > now + 1) {
        let delay = ((next - now) as u64).min(webhook::MAX_QUEUE_DELAY_SECONDS);
        return enqueue(
            ctx,
            std::slice::from_ref(&due.id),
            delay as u32,
            place.held_by(),
        )
        .await;
    }
    let usable = match place {
        Place::D1 => due.url.is_some() && due.endpoint_status == Some(EndpointStatus::Enabled),
        // In another consumer's hands, or its endpoint gone or off: the directory says which.
        Place::Held { .. } => with_endpoint(ctx, due).await?.is_some(),
    };
    if !usable {
        return deliveries::give_up(place.db(ctx), id)
            .await
            .or_internal("give up delivery");
    }
    Ok(())
}

/// Writes the attempt and what follows from it for the delivery and for its endpoint: in one
/// batch in D1; in an institution's object, the attempt and the delivery's change in one of the
/// object's transactions, then the endpoint's health in the directory.
async fn record_attempt(
    ctx: &Ctx,
    place: &Place,
    record: &NewAttempt<'_>,
    delivery: db::DbResult<db::Stmt>,
    endpoint: db::DbResult<db::Stmt>,
) -> Result<(), ApiError> {
    let attempt = deliveries::insert_attempt(record).or_internal("record attempt")?;
    let delivery = delivery.or_internal("record attempt")?;
    let endpoint = endpoint.or_internal("record attempt")?;
    match place {
        Place::D1 => db::batch(&ctx.db, vec![attempt, delivery, endpoint])
            .await
            .or_internal("record attempt"),
        // The endpoint's health first (a repeat of it changes nothing that matters), then the
        // attempt and the delivery's next step in the object; a health that could not be
        // written is logged and the attempt is still recorded.
        Place::Held { object, .. } => {
            if let Err(err) = db::batch(&ctx.db, vec![endpoint])
                .await
                .or_internal("record the endpoint's health")
            {
                err.log_with(format!("delivery {}", record.delivery_id));
            }
            db::batch(object, vec![attempt, delivery])
                .await
                .or_internal("record attempt")
        }
    }
}

/// POSTs the event; returns (status, outcome, first 4 KB of the body, latency in ms).
async fn post(
    ctx: &Ctx,
    due: &Due,
    now: i64,
) -> Result<(Option<u16>, AttemptOutcome, Option<String>, i64), ApiError> {
    let key = ctx.sealing_key()?;
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
    let outcome = http::fetch(request, DEADLINE, BODY_KEPT).await;
    let latency = (js_sys::Date::now() - started) as i64;
    Ok(match outcome {
        Ok((status, kept)) => (
            Some(status),
            AttemptOutcome::of_status(status),
            Some(String::from_utf8_lossy(&kept).into_owned()),
            latency,
        ),
        Err(FetchFailure::Unreachable) => (None, AttemptOutcome::Connection, None, latency),
        Err(FetchFailure::Timeout) => (None, AttemptOutcome::Timeout, None, latency),
    })
}

/// Records the failure that disables the endpoint, in one batch: the attempt, the delivery's
/// retry at `next` and the failure clock as for any failure, then the endpoint off, only while
/// it is still enabled and failing since `first_failure` (what the decision was made on: a
/// success meanwhile cleared the clock, an admin or another attempt may have turned it off
/// already), and, once off, its pending deliveries failed (this one with them). Only the attempt
/// that turned it off tells the admins. Returns whether it did; if not, the retry stands.
async fn disable(
    ctx: &Ctx,
    place: &Place,
    due: &Due,
    record: &NewAttempt<'_>,
    first_failure: i64,
    next: i64,
) -> Result<bool, ApiError> {
    let since = timestamp(first_failure)?;
    let reason = format!("every delivery has failed since {since}");
    let attempt = [
        deliveries::insert_attempt(record),
        deliveries::schedule(&due.id, Some(next)),
    ]
    .into_iter()
    .collect::<Result<Vec<_>, _>>()
    .or_internal("record attempt")?;
    let mut batch = Batch::new();
    if matches!(place, Place::D1) {
        batch.extend(attempt.clone());
    }
    batch.push(
        endpoints::record_failure(&due.endpoint_id, record.started_at)
            .or_internal("record attempt")?,
    );
    let off = batch.push(
        endpoints::disable(
            &due.endpoint_id,
            &reason,
            &timestamp(record.started_at)?,
            first_failure,
        )
        .or_internal("disable endpoint")?,
    );
    if matches!(place, Place::D1) {
        batch.push(
            deliveries::fail_pending_of_disabled_endpoint(due.institution_id, &due.endpoint_id)
                .or_internal("fail pending deliveries")?,
        );
    }
    let results = batch.run(&ctx.db).await.or_internal("record attempt")?;
    let turned_off = results.changed(off);
    // The directory turned the endpoint off (or not) first; the object then records the
    // attempt and, if it is off, fails the endpoint's pending deliveries (the object holds no
    // endpoints: the directory's answer is the condition). The admins are told even if that
    // write fails: only this attempt turned the endpoint off.
    let held = match place {
        Place::D1 => Ok(()),
        Place::Held { object, .. } => {
            let mut held = attempt;
            if turned_off {
                held.push(
                    deliveries::fail_pending_of_endpoint(due.institution_id, &due.endpoint_id)
                        .or_internal("fail pending deliveries")?,
                );
            }
            db::batch(object, held).await.or_internal("record attempt")
        }
    };
    if !turned_off {
        return held.map(|()| false);
    }
    let url = due.url.clone().unwrap_or_default();
    let subject = format!("Payrail disabled your webhook endpoint {url}");
    let body = format!(
        "Payrail has disabled the webhook endpoint {url} ({}) because every delivery to it has \
         failed since {since}. Events are kept: fix the receiver, re-enable the endpoint in the \
         portal, and resend the failed deliveries from its delivery log.",
        due.endpoint_id
    );
    crate::notify::admins(
        ctx,
        due.institution_id,
        NotificationKind::EndpointDisabled,
        &subject,
        &body,
    )
    .await?;
    held.map(|()| true)
}

/// The cron sweep: sends D1's overdue and stale pending deliveries to the queue again (an
/// institution's object's: [`sweep_held`]).
pub async fn sweep(ctx: &Ctx) -> Result<(), ApiError> {
    let now = ctx.now();
    let ids = deliveries::overdue(&ctx.db, now - 30, now - 2 * DEADLINE.as_secs() as i64)
        .await
        .or_internal("find overdue deliveries")?;
    enqueue(ctx, &ids, 0, None).await
}

/// [`sweep`] of institution `institution`'s object.
pub async fn sweep_held(ctx: &Ctx, institution: i64) -> Result<(), ApiError> {
    let now = ctx.now();
    let place = Place::of(ctx, Some(institution))?;
    let ids = deliveries::overdue(place.db(ctx), now - 30, now - 2 * DEADLINE.as_secs() as i64)
        .await
        .or_internal("find overdue deliveries")?;
    enqueue(ctx, &ids, 0, place.held_by()).await
}

/// Deletes up to `limit` events created before `before` with their deliveries and attempts, in
/// one batch, so an event never outlives or loses its deliveries halfway: in D1, or in an
/// institution's object (`db`).
pub async fn prune(db: &db::Db, before: i64, limit: i64) -> Result<(), ApiError> {
    let mut statements = deliveries::prune(before, limit).or_internal("prune events")?;
    statements.push(events::prune(before, limit).or_internal("prune events")?);
    db::batch(db, statements).await.or_internal("prune events")
}
