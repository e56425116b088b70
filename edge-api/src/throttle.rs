//! Throttling in fixed windows: checkout sessions counted per publishable key and per address
//! (every attempt), and failures of API client authentication and portal logins. Failures are
//! counted per subject (a client id, or `login:<e-mail>`) and caller address in fixed windows;
//! past the limit the subject is refused from that address until its window closes, while other
//! addresses are unaffected. Portal logins, whose passwords are guessable and whose check is a
//! slow Argon2id, count every attempt before verifying it (so parallel guesses cannot all pass
//! the check) and are also capped per e-mail across every address.

use shared_types::ErrorCode;

use crate::ctx::Ctx;
use crate::db::throttle as db;
use crate::db::Returning;
use crate::error::{ApiError, OrInternal};

/// How many failures a window allows, and what the refusal says.
pub struct Limit {
    /// Failures allowed per window.
    pub max_failures: i64,
    /// Length of the window.
    pub window_seconds: i64,
    /// The refusal's description.
    pub refusal: &'static str,
}

/// Client authentication at the token endpoint.
pub const CLIENT_AUTH: Limit = Limit {
    max_failures: 10,
    window_seconds: 15 * 60,
    refusal: "too many failed authentications for this client; retry later",
};

/// Portal logins.
pub const PORTAL_LOGIN: Limit = Limit {
    max_failures: 5,
    window_seconds: 15 * 60,
    refusal: "too many failed logins; try again later",
};

/// Portal logins of one e-mail from every address together.
pub const PORTAL_LOGIN_PER_EMAIL: Limit = Limit {
    max_failures: 20,
    window_seconds: 15 * 60,
    refusal: "too many failed logins for this account; try again later",
};

/// The source under which a subject's attempts from every address are counted.
const EVERY_ADDRESS: &str = "*";

/// The longest window: the cron forgets windows older than this.
pub const LONGEST_WINDOW_SECONDS: i64 = 15 * 60;

/// The refusal when `failures` (already read) are over `limit` at `now`.
pub fn refuse_over(
    failures: Option<&db::Failures>,
    limit: &Limit,
    now: i64,
) -> Result<(), ApiError> {
    if let Some(f) = failures {
        let window_end = f.window_start + limit.window_seconds;
        if f.failures >= limit.max_failures && window_end > now {
            return Err(ApiError::new(ErrorCode::RateLimited, limit.refusal)
                .with_retry_after((window_end - now) as u64));
        }
    }
    Ok(())
}

/// Creating checkout sessions, per publishable key (from every address).
pub const CHECKOUT_PER_KEY: Limit = Limit {
    max_failures: 600,
    window_seconds: 60,
    refusal: "too many checkouts for this merchant in the last minute; retry shortly",
};

/// Creating checkout sessions, per caller address (whatever the key).
pub const CHECKOUT_PER_ADDRESS: Limit = Limit {
    max_failures: 300,
    window_seconds: 60,
    refusal: "too many checkouts from this address in the last minute; retry shortly",
};

/// The two windows a checkout session for `public_key` from the caller is counted in: per key
/// from every address, then per address whatever the key, each with its limit.
fn checkout_windows<'a>(ctx: &'a Ctx, public_key: &str) -> [(String, &'a str, &'static Limit); 2] {
    [
        (
            format!("checkout:{public_key}"),
            EVERY_ADDRESS,
            &CHECKOUT_PER_KEY,
        ),
        (
            "checkout".to_owned(),
            ctx.caller_address(),
            &CHECKOUT_PER_ADDRESS,
        ),
    ]
}

/// The two windows of checkout sessions for `public_key` from the caller as they stand, counting
/// nothing, for the batch that reads what a session needs (a batch that only reads: no write
/// transaction on the hot path before the one that stores the session). Their rows go to
/// [`refuse_checkout_before`].
pub fn read_checkout(
    ctx: &Ctx,
    public_key: &str,
) -> Result<(Returning<db::Failures>, Returning<db::Failures>), ApiError> {
    let [(key_subject, key_source, _), (address_subject, address_source, _)] =
        checkout_windows(ctx, public_key);
    Ok((
        db::window(&ctx.db, &key_subject, key_source).or_internal("read attempts")?,
        db::window(&ctx.db, &address_subject, address_source).or_internal("read attempts")?,
    ))
}

/// The refusal of a checkout session whose windows ([`read_checkout`]'s rows, this attempt not
/// yet counted in them) are full already: the per-key limit's first. It is refused before
/// anything is quoted or allocated for it.
pub fn refuse_checkout_before(
    ctx: &Ctx,
    per_key: Option<&db::Failures>,
    per_address: Option<&db::Failures>,
) -> Result<(), ApiError> {
    refuse_over(per_key, &CHECKOUT_PER_KEY, ctx.now())?;
    refuse_over(per_address, &CHECKOUT_PER_ADDRESS, ctx.now())
}

/// The two counts of one checkout session for `public_key` from the caller (per key from every
/// address, then per address whatever the key), as one statement of the batch that stores the
/// session, and the condition its inserts carry ([`db::Within`]): both counts, as that batch
/// just took them, within their limits. Its rows go to [`refuse_checkout`].
pub fn count_checkout(
    ctx: &Ctx,
    public_key: &str,
) -> Result<(Returning<db::Counted>, db::Within), ApiError> {
    let windows = checkout_windows(ctx, public_key);
    let counted = db::count_attempts_in_batch(
        &ctx.db,
        &windows
            .each_ref()
            .map(|(subject, source, limit)| (subject.as_str(), *source, limit.window_seconds)),
        ctx.now(),
    )
    .or_internal("count attempt")?;
    let within = windows
        .iter()
        .fold(db::Within::new(), |within, (subject, source, limit)| {
            within.at_most(subject, source, limit.max_failures)
        });
    Ok((counted, within))
}

/// Counts a checkout attempt that stored nothing (refused after its read, or answered from its
/// idempotency key) against both limits, in a round trip of its own: every attempt counts, and
/// only the one that stores a session is counted in the batch that stores it.
pub async fn count_checkout_alone(ctx: &Ctx, public_key: &str) -> Result<(), ApiError> {
    let (counted, _) = count_checkout(ctx, public_key)?;
    let mut batch = crate::db::Batch::new();
    batch.push(counted);
    batch.run(&ctx.db).await.or_internal("count attempt")?;
    Ok(())
}

/// The refusal of a checkout session for `public_key` past either limit, from the windows
/// [`count_checkout`]'s statement answered (the per-key limit's first).
pub fn refuse_checkout(
    ctx: &Ctx,
    public_key: &str,
    counted: &[db::Counted],
) -> Result<(), ApiError> {
    for (subject, source, limit) in checkout_windows(ctx, public_key) {
        let window = counted
            .iter()
            .find(|c| c.client_id == subject && c.source == source)
            .ok_or_else(|| {
                ApiError::internal("count attempt", "the attempt count returned no row")
            })?;
        over(&window.window(), limit, ctx.now())?;
    }
    Ok(())
}

/// Counts one event of `subject` from `source`, atomically; refuses it past the limit.
async fn count_one(ctx: &Ctx, subject: &str, source: &str, limit: &Limit) -> Result<(), ApiError> {
    let now = ctx.now();
    let f = db::count_attempt(&ctx.db, subject, source, now, limit.window_seconds)
        .await
        .or_internal("count attempt")?;
    over(&f, limit, now)
}

/// The refusal when the window `f`, this attempt counted, is past `limit`.
fn over(f: &db::Failures, limit: &Limit, now: i64) -> Result<(), ApiError> {
    if f.failures > limit.max_failures {
        let window_end = f.window_start + limit.window_seconds;
        return Err(ApiError::new(ErrorCode::RateLimited, limit.refusal)
            .with_retry_after((window_end - now).max(1) as u64));
    }
    Ok(())
}

/// Counts this attempt of `subject` before it is checked, from the caller and from every address,
/// and refuses it when either count is past its limit. A success must then [`clear`] the
/// caller's count (the per-e-mail count is cleared with [`clear_everywhere`]).
pub async fn count_attempt(
    ctx: &Ctx,
    subject: &str,
    per_address: &Limit,
    everywhere: &Limit,
) -> Result<(), ApiError> {
    count_one(ctx, subject, ctx.caller_address(), per_address).await?;
    count_one(ctx, subject, EVERY_ADDRESS, everywhere).await
}

/// The statement that forgets `subject`'s attempts counted across every address.
pub fn clear_everywhere(ctx: &Ctx, subject: &str) -> Result<worker::D1PreparedStatement, ApiError> {
    db::clear(&ctx.db, subject, EVERY_ADDRESS, None).or_internal("clear failures")
}

/// Counts one failure of `subject` from the caller.
pub async fn record_failure(ctx: &Ctx, subject: &str, limit: &Limit) -> Result<(), ApiError> {
    db::record_failure(
        &ctx.db,
        subject,
        ctx.caller_address(),
        ctx.now(),
        limit.window_seconds,
    )
    .await
    .or_internal("record failure")
}

/// The statement that forgets `subject`'s failures from the caller, for the success's batch.
pub fn clear(ctx: &Ctx, subject: &str) -> Result<worker::D1PreparedStatement, ApiError> {
    db::clear(&ctx.db, subject, ctx.caller_address(), None).or_internal("clear failures")
}

/// [`clear`] for a token request's batch: only once the token with hash `token_hash` is stored.
pub fn clear_once_issued(
    ctx: &Ctx,
    subject: &str,
    token_hash: &str,
) -> Result<worker::D1PreparedStatement, ApiError> {
    db::clear(&ctx.db, subject, ctx.caller_address(), Some(token_hash))
        .or_internal("clear failures")
}
