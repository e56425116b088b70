//! The cron trigger's work, every minute: forget expired tokens, closed throttle windows, ended
//! portal sessions and idempotency keys past their retention, and prune events (with their
//! deliveries and attempts) and ended checkout sessions past theirs, each in bounded batches; read the watched chains and credit
//! what arrived; close checkouts that ended unpaid; follow custody's sweeps into the treasury and
//! post them to the books; reconcile the books with the chain (booking the operator's funding);
//! settle what is held in custody to the merchants (and follow those transactions); send
//! deliveries whose queue message was lost back to the queue; and the same housekeeping inside
//! the objects of institutions held there, a bounded number a run; derive custody's addresses
//! ahead of the checkouts that will take them (`chain::custody`); and give up moves into objects
//! that no request went on with.

use crate::ctx::Ctx;
use crate::db::{clients, moves, portal, sessions, throttle as throttle_db};
use crate::error::{ApiError, OrInternal};
use crate::{money, payments, throttle, webhooks};

/// Most rows one pruning statement deletes in a run: a run stays short whatever has piled up,
/// and what is left goes in the next minute's.
pub const PRUNE_ROWS: i64 = 1_000;

/// Most events pruned in a run, each with its deliveries and their attempts.
pub const PRUNE_EVENTS: i64 = 200;

/// Runs every task. They are independent, so each runs even if one before it failed; the first
/// failure is reported.
pub async fn run(ctx: &Ctx) -> Result<(), ApiError> {
    let now = ctx.now();
    let results = [
        clients::purge_expired_tokens(&ctx.db, now, PRUNE_ROWS)
            .await
            .or_internal("purge expired tokens")
            .map(drop),
        throttle_db::purge(&ctx.db, now - throttle::LONGEST_WINDOW_SECONDS, PRUNE_ROWS)
            .await
            .or_internal("purge throttle windows")
            .map(drop),
        // A network whose sanctions oracle could not be read is asked again first: once it
        // answers, what waited on it goes on in this run.
        screening_recovers(ctx).await,
        // Custody's addresses derived ahead of the checkouts that will take them.
        crate::chain::custody::refill(ctx).await,
        // Chains first: a payment that arrived is credited before its checkout could expire.
        money::watch::sweep(ctx).await,
        payments::expire_ended(ctx, None, payments::EXPIRE_PER_RUN)
            .await
            .map(drop),
        // Custody's sweeps into the treasury, made final and posted to the books, so the
        // reconciliation after them finds nothing in flight.
        money::sweeps::run(ctx).await,
        // The books meet the chain before anything is paid out: the operator's funding of the
        // treasury is booked, and drift recorded.
        money::books::run(ctx).await,
        // Then what is held in custody goes to the merchants.
        money::settle::run(ctx).await,
        money::refund::send::run(ctx).await,
        // Keys are honoured for a day and kept a day longer.
        sessions::purge_keys(&ctx.db, now - 2 * sessions::KEY_SECONDS, PRUNE_ROWS)
            .await
            .or_internal("purge idempotency keys")
            .map(drop),
        sessions::purge_ended(&ctx.db, now - ctx.retention_seconds(), PRUNE_ROWS)
            .await
            .or_internal("purge ended checkout sessions")
            .map(drop),
        // A held checkout's index entry goes with the same retention as an ended session.
        sessions::purge_index(&ctx.db, now - ctx.retention_seconds(), PRUNE_ROWS)
            .await
            .or_internal("purge the checkout index")
            .map(drop),
        portal::purge_sessions(&ctx.db, now, PRUNE_ROWS)
            .await
            .or_internal("purge portal sessions"),
        webhooks::prune(&ctx.db, now - ctx.retention_seconds(), PRUNE_EVENTS).await,
        webhooks::sweep(ctx).await,
        tend_held(ctx).await,
        // A move no request went on with for five minutes is given up: its institution works
        // from D1 again.
        give_up_stale_moves(ctx, now).await,
    ];
    // Each task's failure is logged here, where it is given up on until the next run; the
    // first is the run's answer.
    let mut first = None;
    for (task, result) in results.into_iter().enumerate() {
        if let Err(err) = result {
            err.log_with(format!("cron task {task}"));
            first.get_or_insert(err);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Gives up every move into an object that no request went on with for five minutes
/// ([`moves::give_up_stale`]).
async fn give_up_stale_moves(ctx: &Ctx, now: i64) -> Result<(), ApiError> {
    let stale = moves::give_up_stale(now).or_internal("give up stale moves")?;
    crate::db::batch(&ctx.db, vec![stale])
        .await
        .or_internal("give up stale moves")
}

/// [`money::screening::recover`] over the configured networks.
async fn screening_recovers(ctx: &Ctx) -> Result<(), ApiError> {
    let networks = crate::chain::networks(ctx)?;
    money::screening::recover(ctx, &networks).await
}

/// Most ended checkouts one run closes across all held objects (each a read and a write in its
/// object, and the directory's endpoints read): with [`moves::HELD_PER_RUN`] objects' other work, a
/// run stays within a few hundred calls.
const HELD_EXPIRE_PER_RUN: i64 = 100;

/// The run's work inside the objects of institutions held there (up to [`HELD_PER_RUN`] a run,
/// taken in turn by the minute): what the run does in D1 for the others. One object that fails
/// is logged and the others go on.
async fn tend_held(ctx: &Ctx) -> Result<(), ApiError> {
    let now = ctx.now();
    let held = moves::held(&ctx.db, moves::HELD_PER_RUN, now / 60)
        .await
        .or_internal("list held institutions")?;
    let mut expirations = HELD_EXPIRE_PER_RUN;
    for institution in held.iter().map(|h| h.id) {
        match tend(ctx, institution, now, expirations).await {
            Ok(closed) => expirations = (expirations - closed as i64).max(0),
            Err(err) => err.log_with(format!("the cron in institution {institution}'s object")),
        }
    }
    Ok(())
}

/// One held institution's object: its ended checkouts closed (at most `expirations`), its
/// idempotency keys, ended sessions and events (with their deliveries and attempts) past their
/// retention pruned, and its overdue deliveries sent to the queue again. Each step runs even if
/// one before it failed; answers how many checkouts it closed.
async fn tend(ctx: &Ctx, institution: i64, now: i64, expirations: i64) -> Result<usize, ApiError> {
    let object = ctx.institution_object(institution)?;
    let retention = now - ctx.retention_seconds();
    let closed = if expirations > 0 {
        payments::expire_ended(ctx, Some(&object), expirations).await
    } else {
        Ok(0)
    };
    let results = [
        sessions::purge_keys(&object, now - 2 * sessions::KEY_SECONDS, PRUNE_ROWS)
            .await
            .or_internal("purge idempotency keys")
            .map(drop),
        sessions::purge_ended(&object, retention, PRUNE_ROWS)
            .await
            .or_internal("purge ended checkout sessions")
            .map(drop),
        webhooks::prune(&object, retention, PRUNE_EVENTS).await,
        webhooks::sweep_held(ctx, institution).await,
    ];
    let closed = closed?;
    results
        .into_iter()
        .find(Result::is_err)
        .unwrap_or(Ok(()))
        .map(|()| closed)
}
