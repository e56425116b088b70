//! Throttling in fixed windows: checkout sessions counted per publishable key and per address
//! (every attempt), and failures of API client authentication and portal logins. Failures are
//! counted per subject (a client id, or `login:<e-mail>`) and caller address in fixed windows;
//! past the limit the subject is refused from that address until its window closes, while other
//! addresses are unaffected. Portal logins, whose passwords are guessable and whose check is a
//! slow Argon2id, count every attempt before verifying it (so parallel guesses cannot all pass
//! the check) and are also capped per e-mail across every address.

use shared_types::ids::{InstitutionId, Scoped};
use shared_types::ErrorCode;

use crate::ctx::Ctx;
use crate::db::throttle as db;
use crate::db::{And, Condition, Returning, Stmt};
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

/// Checkout sessions created per publishable key (from every address): only sessions stored
/// count, so requests that create nothing (refused, replayed) never use up the capacity a
/// merchant's customers need.
pub const CHECKOUT_PER_KEY: Limit = Limit {
    max_failures: 600,
    window_seconds: 60,
    refusal: "too many checkouts for this merchant in the last minute; retry shortly",
};

/// Checkout attempts per caller address (whatever the key): every attempt counts, refused or
/// not, so one source's flood is stopped at its source.
pub const CHECKOUT_PER_ADDRESS: Limit = Limit {
    max_failures: 300,
    window_seconds: 60,
    refusal: "too many checkouts from this address in the last minute; retry shortly",
};

/// The window of checkout sessions for `public_key`, counted from every address.
fn checkout_key_window(public_key: &str) -> String {
    format!("checkout:{public_key}")
}

/// The window of checkout attempts from an address, whatever the key.
const CHECKOUT_ADDRESS_WINDOW: &str = "checkout";

/// The two windows of checkout sessions for `public_key` from the caller as they stand, counting
/// nothing, for the batch that reads what a session needs (a batch that only reads: no write
/// transaction on the hot path before the one that stores the session). Their rows go to
/// [`refuse_checkout_before`].
pub fn read_checkout(
    ctx: &Ctx,
    public_key: &str,
) -> Result<(Returning<db::Failures>, Returning<db::Failures>), ApiError> {
    Ok((
        db::window(&checkout_key_window(public_key), EVERY_ADDRESS).or_internal("read attempts")?,
        db::window(CHECKOUT_ADDRESS_WINDOW, ctx.caller_address()).or_internal("read attempts")?,
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

/// The counts of one checkout attempt for `public_key` from the caller, as statements of the
/// batch that takes its address's index or stores its session ([`count_checkout`]), in the order
/// they are added.
pub struct CheckoutCounts {
    /// The caller's attempt, counted whatever becomes of it (unless an earlier batch of the
    /// attempt counted it).
    pub per_address: Option<Returning<db::Counted>>,
    /// The merchant's window as it stands before the session is counted in it: full when the
    /// attempt is refused at its limit.
    pub key_window: Returning<db::Failures>,
    /// The session, counted against its merchant only while the facts it is made on hold
    /// (`stored_if`), the caller's count is within its limit and the merchant's window has
    /// room.
    pub per_key: Returning<db::Counted>,
}

/// What [`CheckoutCounts`]' statements answered.
pub struct CheckoutRows {
    /// The caller's window after the count, when this batch counted it.
    pub per_address: Option<Vec<db::Counted>>,
    /// The merchant's window before the session would be counted in it.
    pub key_window: Vec<db::Failures>,
    /// The merchant's window after the count; empty when the session was not counted.
    pub per_key: Vec<db::Counted>,
}

/// The counts of one checkout attempt for `public_key` from the caller ([`CheckoutCounts`]), as
/// statements of the batch that takes its address's index or stores its session, and the
/// condition the guarded statement right after them carries ([`db::Within`]): the merchant's
/// count taken. The caller's attempt is counted here when `count_address` (no earlier batch of
/// the attempt counted it); the merchant's only if `stored_if` (the facts the session is made
/// on) holds, the caller's count is within its limit and the merchant's window has room. So a
/// session is counted against its merchant only when it is to be stored, never past the limit;
/// a place taken by an index's batch for a session its write then stores not is given back
/// ([`release_checkout`]). Their rows go to [`refuse_checkout`].
pub fn count_checkout(
    ctx: &Ctx,
    public_key: &str,
    count_address: bool,
    stored_if: &dyn Condition,
) -> Result<(CheckoutCounts, db::Within), ApiError> {
    let key = checkout_key_window(public_key);
    let address = ctx.caller_address();
    let now = ctx.now();
    let mut address_within = db::Within::new();
    let per_address = if count_address {
        address_within = address_within.at_most(
            CHECKOUT_ADDRESS_WINDOW,
            address,
            CHECKOUT_PER_ADDRESS.max_failures,
        );
        Some(
            db::count_attempts_in_batch(
                &[(
                    CHECKOUT_ADDRESS_WINDOW,
                    address,
                    CHECKOUT_PER_ADDRESS.window_seconds,
                )],
                now,
            )
            .or_internal("count attempt")?,
        )
    } else {
        None
    };
    let key_window = db::window(&key, EVERY_ADDRESS).or_internal("read attempts")?;
    let room = db::Room {
        subject: &key,
        source: EVERY_ADDRESS,
        max: CHECKOUT_PER_KEY.max_failures,
        now,
        seconds: CHECKOUT_PER_KEY.window_seconds,
    };
    let per_key = db::count_attempt_if(
        (&key, EVERY_ADDRESS, CHECKOUT_PER_KEY.window_seconds),
        now,
        &And(&address_within, &And(&room, stored_if)),
    )
    .or_internal("count attempt")?;
    // Counted against the merchant only with room for it and within the caller's limit, so
    // "counted" is "within".
    Ok((
        CheckoutCounts {
            per_address,
            key_window,
            per_key,
        },
        db::Within::new().just_counted(),
    ))
}

/// The statement, for the batch that was to store `session` (of its institution),
/// giving back the place its address's index's batch took in `public_key`'s window at `held_at`
/// when the batch stored no session, so the window counts only sessions stored; nothing when
/// the window has started afresh since.
pub fn release_checkout(
    public_key: &str,
    held_at: i64,
    session: Scoped<&str>,
) -> Result<Stmt, ApiError> {
    db::release_unless_stored(
        (&checkout_key_window(public_key), EVERY_ADDRESS),
        held_at,
        session,
    )
    .or_internal("release checkout count")
}

/// Counts a checkout attempt that stored nothing (refused after its read, or answered from its
/// idempotency key) against its caller's limit, in a round trip of its own: every attempt counts
/// against its source, and only a stored session against its merchant.
pub async fn count_checkout_alone(ctx: &Ctx) -> Result<(), ApiError> {
    count_one(
        ctx,
        CHECKOUT_ADDRESS_WINDOW,
        ctx.caller_address(),
        &CHECKOUT_PER_ADDRESS,
    )
    .await
    .map(drop)
}

/// The refusal of a checkout attempt past either limit, from what [`count_checkout`]'s
/// statements answered (the per-key limit's first): the merchant's window full (the session was
/// not counted in it), or the caller's past its limit.
pub fn refuse_checkout(ctx: &Ctx, rows: &CheckoutRows) -> Result<(), ApiError> {
    let now = ctx.now();
    match rows.per_key.first() {
        Some(counted) => over(&counted.window(), &CHECKOUT_PER_KEY, now)?,
        None => refuse_over(rows.key_window.first(), &CHECKOUT_PER_KEY, now)?,
    }
    match &rows.per_address {
        Some(counted) => {
            let window = counted.first().ok_or_else(|| {
                ApiError::internal("count attempt", "the attempt count returned no row")
            })?;
            over(&window.window(), &CHECKOUT_PER_ADDRESS, now)
        }
        None => Ok(()),
    }
}

/// Webhook sends an admin asks for (a resend, a test event, a re-enable's bulk resend), per
/// endpoint: each makes Payrail send requests to a URL the institution chose.
pub const WEBHOOK_SENDS_PER_ENDPOINT: Limit = Limit {
    max_failures: 10,
    window_seconds: 60,
    refusal: "too many resends and test events to this endpoint in the last minute; retry shortly",
};

/// Webhook sends an admin asks for, per institution (over all its endpoints).
pub const WEBHOOK_SENDS_PER_INSTITUTION: Limit = Limit {
    max_failures: 30,
    window_seconds: 60,
    refusal: "too many resends and test events in the last minute; retry shortly",
};

/// Counts one send an admin of `institution_id` asks for to endpoint `endpoint_id`, before it
/// is made, against the endpoint's limit and then the institution's; refuses it (429 with
/// `Retry-After`) past either. Every request counts, so a flood is stopped whatever it asks.
pub async fn count_webhook_send(
    ctx: &Ctx,
    institution_id: InstitutionId,
    endpoint_id: &str,
) -> Result<(), ApiError> {
    count_one(
        ctx,
        &format!("webhook_send:{endpoint_id}"),
        EVERY_ADDRESS,
        &WEBHOOK_SENDS_PER_ENDPOINT,
    )
    .await?;
    count_one(
        ctx,
        &format!("webhook_send:institution:{institution_id}"),
        EVERY_ADDRESS,
        &WEBHOOK_SENDS_PER_INSTITUTION,
    )
    .await
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
pub fn clear_everywhere(subject: &str) -> Result<Stmt, ApiError> {
    db::clear(subject, EVERY_ADDRESS, None).or_internal("clear failures")
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
pub fn clear(ctx: &Ctx, subject: &str) -> Result<Stmt, ApiError> {
    db::clear(subject, ctx.caller_address(), None).or_internal("clear failures")
}

/// [`clear`] for a token request's batch: only once the token with hash `token_hash` is stored.
pub fn clear_once_issued(ctx: &Ctx, subject: &str, token_hash: &str) -> Result<Stmt, ApiError> {
    db::clear(subject, ctx.caller_address(), Some(token_hash)).or_internal("clear failures")
}
