//! Checkout sessions: the rules of starting one (which deployment and merchant may take the
//! payment, the limits, the return origin, the idempotency key, the first way to pay that can be
//! quoted, the deposit address, the one batch that writes it all), of changing its way to pay,
//! and of what the hosted page's sandbox controls act out. The routes (`routes/checkout`) keep
//! the HTTP: bodies, JSON, pages and redirects.

use std::str::FromStr;

use rust_decimal::Decimal;
use shared_types::checkout::{currency_digits, CheckoutOptions};
use shared_types::ids::Scoped;
use shared_types::lifecycle::Action;
use shared_types::{quote, ErrorCode, RawStatus};
use worker::Url;

use crate::ctx::{timestamp, Ctx};
use crate::db::sessions::{self, Admitted, NewSession, Probe, SessionView, StoredKey, KEY_SECONDS};
use crate::db::sessions::{Always, KeyFree};
use crate::db::throttle::{Counted, Failures, Within};
use crate::db::transactions::{self, NewPayment};
use crate::db::wallets::Payout;
use crate::db::watches::{self, NewWatch};
use crate::db::{
    deposits::{self, Purpose},
    merchants, origins, wallets, AfterChange, And, Batch, BatchResults, Handle, MoneyStore, Stmt,
};
use crate::error::{ApiError, OrInternal};
use crate::{chain, crypto, money, payments, throttle};

mod known;

use known::Known;

/// How long a checkout stays payable: its quote's window, shown as a countdown (as BTCPay's
/// invoices, fifteen minutes).
pub const SESSION_SECONDS: i64 = 15 * 60;

/// A checkout session started by [`create`].
#[derive(Debug)]
pub struct Session {
    /// Its id (`cs_…`), which names its hosted page.
    pub id: String,
    /// Its pending transaction.
    pub transaction_id: i64,
    /// False when the idempotency key's earlier request (with the same options) made it.
    pub created: bool,
}

/// Why [`create`] started no session.
#[derive(Debug)]
pub enum Refusal {
    /// The options break a checkout rule (shared-types' validation, the browser's too): what.
    Invalid(String),
    /// The deployment offers no way to pay at all (it watches no chain yet).
    NoWayToPay,
    /// No merchant has this publishable key (nor had it within a roll's grace period).
    UnknownKey,
    /// The merchant cannot take payments: why.
    MerchantUnavailable(String),
    /// `redirectUrl`'s origin is not one of the merchant's return origins.
    RedirectNotAllowed {
        /// The origin asked for.
        origin: String,
    },
    /// The idempotency key was used for this merchant with other options.
    KeyReused,
    /// None of the merchant's ways to pay can be quoted now: why not, for each.
    NoQuote(Vec<String>),
    /// Already an API error: the per-key or per-address limit's refusal (429 with its
    /// `Retry-After`), or a failure on our side (the configuration, the database, a deposit
    /// address), logged.
    Api(ApiError),
}

impl From<ApiError> for Refusal {
    fn from(err: ApiError) -> Self {
        Refusal::Api(err)
    }
}

/// Starts a checkout session for `options`, counted against the limits of its publishable key
/// and of the caller's address (the context's): the pending transaction, its session with the
/// first way to pay that can be quoted now, the deposit address's watch and the idempotency key,
/// written in one atomic batch with the attempt's counts, and only if those counts are within
/// their limits. The same idempotency key with the same options answers the session it made
/// (also to a concurrent request that lost the race to write it). `locale` is the hosted page's
/// language (`None`: the customer's browser's); it changes no payment, so it is not part of what
/// the idempotency key guards, and a replay keeps the first session's.
///
/// Every attempt that gets past the options' own rules is counted against its caller's address:
/// in the batch that stores its session, or that would have (on a remembered key, a refusal or a
/// replay too), and anything else (a refusal or a replay found by the full read) in a round trip
/// of its own after its answer is known (not the hot path). Only a session stored is counted
/// against its merchant's key, so attempts that create nothing cannot lock its customers out.
pub async fn create(
    ctx: &Ctx,
    options: &CheckoutOptions,
    locale: Option<&str>,
) -> Result<Session, Refusal> {
    options
        .validate()
        .map_err(|e| Refusal::Invalid(e.message))?;
    if chain::methods(ctx)?.is_empty() {
        return Err(Refusal::NoWayToPay);
    }
    let mut counted = false;
    let outcome = attempt(ctx, options, locale, &mut counted).await;
    if !counted {
        // Nothing was stored for it (a refusal, or a replay of a session that exists): a count
        // that fails is logged and changes no answer.
        if let Err(err) = throttle::count_checkout_alone(ctx).await {
            err.log_with("count a checkout attempt");
        }
    }
    outcome
}

/// How many times [`attempt`] makes a session on facts that a batch then finds changed (each
/// time read afresh) before it gives up: only a merchant changed again and again within those
/// few milliseconds could use them all.
const TRIES: usize = 3;

/// [`create`] past the options' rules; sets `counted` once a batch that counts the attempt has
/// committed. The facts a session is made on (the merchant the key names, its wallets' networks,
/// the return origin, the idempotency key) come from the key's fresh memo ([`known`]) without
/// reading anything first, or else from the full read (then remembered); either way every batch
/// that writes is conditioned on them still holding, and one that finds a fact changed stores
/// nothing: the memo is forgotten and the facts are read again.
async fn attempt(
    ctx: &Ctx,
    options: &CheckoutOptions,
    locale: Option<&str>,
    counted: &mut bool,
) -> Result<Session, Refusal> {
    let key = &options.public_key;
    let now = ctx.now();
    // The hosted page is ours: it may only send the customer back to the merchant's own sites.
    // The rules passed, but a URL parser may still find no host in it (`https://[`): the same
    // refusal, never a server error (given where the origin is judged, in `read`).
    let origin = Url::parse(&options.redirect_url)
        .ok()
        .map(|u| u.origin().ascii_serialization());
    // A memo is used only with an origin to hold it to; without one, the full read refuses.
    let mut memo = origin
        .clone()
        .and_then(|origin| known::recall(key, now).map(|known| (known, origin)));
    for _ in 0..TRIES {
        let (known, origin) = match memo.take() {
            Some(memo) => memo,
            None => match read(ctx, options, origin.clone(), *counted).await? {
                Read::Replay(session) => return Ok(session),
                Read::Admitted(known, origin) => {
                    known::remember(key, known.clone());
                    (known, origin)
                }
            },
        };
        let admitted = Admitted {
            merchant_id: known.merchant_id,
            institution_id: known.institution_id,
            public_key: key,
            now,
            networks: &known.payout.networks,
            origin: &origin,
            idempotency_key: options
                .idempotency_key
                .as_deref()
                .map(|k| (k, now - KEY_SECONDS)),
            store: known.store,
        };
        match make(ctx, options, locale, counted, &known, &admitted).await {
            Ok(Some(session)) => return Ok(session),
            // A fact changed: nothing was stored; the facts are read again.
            Ok(None) => known::forget(key),
            Err(refusal) => {
                known::forget(key);
                return Err(refusal);
            }
        }
    }
    Err(ApiError::internal(
        "create session",
        format!("the merchant's facts changed under each of {TRIES} tries"),
    )
    .into())
}

/// What [`read`] found.
enum Read {
    /// The key's merchant can take this session (its limits, if the attempt was not counted
    /// yet, had room for it as they stood), with the return origin it allows.
    Admitted(Known, String),
    /// The idempotency key's earlier session, with the same options.
    Replay(Session),
}

/// One round trip, which only reads, reads all a session needs: the windows of both limits as
/// they stand (unless the attempt was `counted` already, by a batch that judged them), the
/// merchant the key names, its wallets' networks, whether the return origin is its, and what
/// the idempotency key made before. Each is judged in this order, as if read one by one.
async fn read(
    ctx: &Ctx,
    options: &CheckoutOptions,
    origin: Option<String>,
    counted: bool,
) -> Result<Read, Refusal> {
    let database = &ctx.db;
    let now = ctx.now();
    let key = &options.public_key;
    let mut reads = Batch::new();
    // The merchant's window always (a session made on a retry is still held to it); the
    // caller's only if the attempt was not counted there yet (its count holds this attempt).
    let (per_key, per_address) = throttle::read_checkout(ctx, key)?;
    let per_key = reads.push(per_key);
    let per_address = (!counted).then(|| reads.push(per_address));
    let gate = reads.push(merchants::gate_by_key(key, now).or_internal("read merchant")?);
    let networks = reads.push(wallets::networks_by_key(key, now).or_internal("read wallets")?);
    let allowed = match &origin {
        Some(origin) => {
            Some(reads.push(origins::allows_by_key(key, now, origin).or_internal("read origins")?))
        }
        None => None,
    };
    let stored = match &options.idempotency_key {
        Some(idempotency_key) => Some(
            reads.push(
                sessions::find_key_by_public_key(key, now, idempotency_key, now - KEY_SECONDS)
                    .or_internal("read idempotency key")?,
            ),
        ),
        None => None,
    };
    let read = reads.run(database).await.or_internal("read checkout")?;
    // A window full already refuses the attempt before anything is quoted or allocated for it.
    let per_address = per_address
        .map(|h| read.rows(h))
        .transpose()
        .or_internal("read attempts")?;
    throttle::refuse_checkout_before(
        ctx,
        read.rows(per_key).or_internal("read attempts")?.first(),
        per_address.as_deref().and_then(<[_]>::first),
    )?;
    let merchant = read
        .rows(gate)
        .or_internal("read merchant")?
        .into_iter()
        .next()
        .ok_or(Refusal::UnknownKey)?;
    if let Some(why) = merchant.refusal() {
        return Err(Refusal::MerchantUnavailable(why));
    }
    let payout = Payout::from_rows(read.rows(networks).or_internal("read wallets")?);
    // USDC is settled across only for institutions whose money is in D1 (docs/CCTP.md).
    let payout = match merchant.store {
        MoneyStore::D1 => payout,
        MoneyStore::Object => payout.held(),
    };
    if chain::methods_for(ctx, &payout)?.is_empty() {
        return Err(Refusal::MerchantUnavailable(
            "it has no settlement wallet on a network Payrail offers".to_owned(),
        ));
    }
    if payout.networks.len() > sessions::MAX_NETWORKS {
        return Err(ApiError::internal(
            "create session",
            format!(
                "merchant {} has wallets on {} networks, more than a session's condition binds",
                merchant.id,
                payout.networks.len()
            ),
        )
        .into());
    }
    let (Some(origin), Some(allowed)) = (origin, allowed) else {
        return Err(Refusal::Invalid(
            "redirectUrl must be an absolute https:// URL (http:// only for localhost)".to_owned(),
        ));
    };
    let allowed = read.rows(allowed).or_internal("read origins")?;
    if !allowed.iter().any(|row| row.found == 1) {
        return Err(Refusal::RedirectNotAllowed { origin });
    }
    if let Some(stored) = stored {
        if let Some(stored) = read
            .rows(stored)
            .or_internal("read idempotency key")?
            .into_iter()
            .next()
        {
            return replay(options, stored).map(Read::Replay);
        }
    }
    Ok(Read::Admitted(
        Known {
            merchant_id: merchant.id,
            institution_id: merchant.institution_id,
            payout,
            store: merchant.store,
            read_at: now,
        },
        origin,
    ))
}

/// The session an idempotency key made before, if `options` are the ones it was made with.
fn replay(options: &CheckoutOptions, stored: StoredKey) -> Result<Session, Refusal> {
    if stored.fingerprint == fingerprint(options)? {
        Ok(Session {
            id: stored.session_id,
            transaction_id: stored.transaction_id,
            created: false,
        })
    } else {
        Err(Refusal::KeyReused)
    }
}

/// The statements of a checkout attempt's counts in a batch.
#[derive(Clone, Copy)]
struct Counts {
    per_address: Option<Handle<Counted>>,
    key_window: Handle<Failures>,
    per_key: Handle<Counted>,
}

/// Adds the attempt's counts to `batch` ([`throttle::count_checkout`]): against the caller's
/// address unless the attempt was `counted` there already, and against the merchant, only if
/// the facts it is made on (`admitted`) hold and both windows have room. Answers their
/// statements and the condition the guarded statement after them carries (the merchant's count
/// taken), which must come right after them.
fn count_into(
    ctx: &Ctx,
    key: &str,
    counted: bool,
    admitted: &Admitted<'_>,
    batch: &mut Batch,
) -> Result<(Counts, Within), ApiError> {
    let (counts, within) = throttle::count_checkout(ctx, key, !counted, admitted)?;
    let counts = Counts {
        per_address: counts.per_address.map(|c| batch.push(c)),
        key_window: batch.push(counts.key_window),
        per_key: batch.push(counts.per_key),
    };
    Ok((counts, within))
}

/// Makes the session for the merchant `known` names: quotes the first of its ways to pay that
/// can be quoted now, gives it a deposit address, and stores it (see [`create`]). Each batch
/// that writes (the one taking a derived address's index, then the one storing the session) is
/// conditioned on the facts it is made on, `admitted`, still holding; `Ok(None)` answers that
/// one found a fact changed and stored nothing (a derived address's index, once taken, stays
/// used).
async fn make(
    ctx: &Ctx,
    options: &CheckoutOptions,
    locale: Option<&str>,
    counted: &mut bool,
    known: &Known,
    admitted: &Admitted<'_>,
) -> Result<Option<Session>, Refusal> {
    let database = &ctx.db;
    let now = ctx.now();
    let key = &options.public_key;
    // Stored with the currency's minor digits: "149.9" EUR becomes "149.90".
    let mut amount = Decimal::from_str(&options.amount).or_internal("parse amount")?;
    amount.rescale(currency_digits(&options.currency).unwrap_or(2));
    let amount_text = amount.to_string();
    // The first way to pay that can be quoted now is the default; none: no payment is taken.
    let mut unavailable = Vec::new();
    let mut chosen = None;
    for method in chain::methods_for(ctx, &known.payout)? {
        match chain::quote(ctx, method, amount, &options.currency).await {
            Ok(quote) => {
                chosen = Some((method, quote));
                break;
            }
            Err(why) => unavailable.push(why.public()),
        }
    }
    let Some((method, quote)) = chosen else {
        return Err(Refusal::NoQuote(unavailable));
    };
    let session_id = crypto::random_token(shared_types::ids::SessionId::PREFIX)
        .or_internal("generate session id")?;
    let quoted = Quoted {
        method,
        quote,
        session_id,
        amount: amount_text,
    };
    if known.store == MoneyStore::Object {
        return make_held(ctx, options, locale, counted, known, admitted, quoted).await;
    }
    let method = quoted.method;
    // A derived address takes a fresh index. It is taken in one batch with the attempt's
    // counts, only if both are within their limits and the facts still hold: an attempt past
    // its limits never uses up an index, even in a race. The merchant's count taken here holds
    // the session's place in its window; the write batch gives it back if it stores no session
    // (a replay of a key a racer stored first, a fact changed), so the window counts only the
    // sessions stored. A simulated address costs no round trip.
    let mut held = None;
    let mut filling = None;
    let (deposit_address, deposit_index) = match chain::Deriver::for_network(ctx, method.network)? {
        Some(deriver) => {
            let mut batch = Batch::new();
            let probe = probe_into(&mut batch, admitted)?;
            let (counts, within) = count_into(ctx, key, *counted, admitted, &mut batch)?;
            batch.push(
                deposits::allocate_within(deriver.family(), &And(&within, admitted))
                    .or_internal("allocate deposit index")?,
            );
            let given = batch.push(
                deposits::give(deriver.family(), known.institution_id, Purpose::Checkout)
                    .or_internal("allocate deposit index")?,
            );
            let taken = batch
                .run(database)
                .await
                .or_internal("allocate deposit index")?;
            *counted = true;
            let Some(given) = chain::custody::given_in(&taken, given)? else {
                return took_nothing(ctx, options, &taken, Some(counts), probe);
            };
            held = Some(now);
            let (address, fill) = chain::custody::address_of(&deriver, &given)?;
            filling = fill;
            (address, Some(given.index))
        }
        None => (chain::simulated(method.network)?, None),
    };
    // The attempt's counts (unless the index's batch took them), then the transaction, its
    // session, its watch and the idempotency key in one atomic batch. The merchant's count is
    // taken only if the caller's is within its limit, the merchant's window has room and the
    // facts still hold (a concurrent double click's key among them), and the transaction and
    // its session are inserted only if it was taken (of N racing attempts, exactly those the
    // limits allow); the watch and the key only with the session. A place held by the index's
    // batch is given back in this batch when it stores no session. A key older than its day is
    // forgotten first, in the same batch, so it can be used afresh.
    let mut writes = Batch::new();
    // An address derived just now goes into the directory's index whatever becomes of the
    // session: its index was given out.
    writes.extend(filling);
    let probe = probe_into(&mut writes, admitted)?;
    if let Some(key) = &options.idempotency_key {
        writes.push(
            sessions::forget_key(known.merchant_id, key, now - KEY_SECONDS)
                .or_internal("forget stale key")?,
        );
    }
    // The counts just before the insert their condition reads (`Within::just_counted`), unless
    // the index's batch took them.
    let (counts, within) = match held {
        Some(_) => (None, Within::new()),
        None => {
            let (counts, within) = count_into(ctx, key, *counted, admitted, &mut writes)?;
            (Some(counts), within)
        }
    };
    // The counts within their limits, and the facts still holding.
    let stored_if = And(&within, admitted);
    let created = push_session(
        ctx,
        &mut writes,
        (options, locale, known, now),
        (&quoted, &deposit_address, deposit_index, MoneyStore::D1),
        &stored_if,
    )?;
    if let Some(held_at) = held {
        writes.push(throttle::release_checkout(
            key,
            held_at,
            Scoped::new(known.institution_id, &quoted.session_id),
        )?);
    }
    let written = match writes.run(database).await {
        Ok(written) => written,
        Err(err) => {
            // A concurrent request with the same key won the race: answer as it did.
            if let Some(key) = &options.idempotency_key {
                if let Some(stored) = sessions::find_key(
                    database,
                    Scoped::new(known.institution_id, known.merchant_id),
                    key,
                    now - KEY_SECONDS,
                )
                .await
                .or_internal("read idempotency key")?
                {
                    return replay(options, stored).map(Some);
                }
            }
            return Err(ApiError::internal("create session", err).into());
        }
    };
    *counted = true;
    let transaction_id = written
        .rows(created)
        .or_internal("create session")?
        .first()
        .map(|row| row.id);
    let Some(transaction_id) = transaction_id else {
        return took_nothing(ctx, options, &written, counts, probe);
    };
    Ok(Some(Session {
        id: quoted.session_id,
        transaction_id,
        created: true,
    }))
}

/// What a session is made with once quoted: the way to pay and its quote, the session's id and
/// the order's amount as stored.
struct Quoted {
    method: quote::Method,
    quote: chain::Quote,
    session_id: String,
    amount: String,
}

/// [`make`] for a merchant whose institution's money is held in its object: the directory judges
/// what it holds in one batch (the attempt's counts, the facts the session is made on, the
/// derived address's index) and writes the checkout's index entry with them, only if they hold;
/// then the object stores the transaction, its session, its watch and the idempotency key in one
/// transaction, only if the key made nothing live. When the object stores nothing (a racer
/// stored the key first), the directory gives the count back and drops the index entry, and
/// the key's session is answered. `Ok(None)`: a fact changed and nothing was stored.
async fn make_held(
    ctx: &Ctx,
    options: &CheckoutOptions,
    locale: Option<&str>,
    counted: &mut bool,
    known: &Known,
    admitted: &Admitted<'_>,
    quoted: Quoted,
) -> Result<Option<Session>, Refusal> {
    let method = quoted.method;
    let now = ctx.now();
    let key = &options.public_key;
    let merchant = Scoped::new(known.institution_id, known.merchant_id);
    // The idempotency key is the object's to judge.
    let facts = Admitted {
        idempotency_key: None,
        ..*admitted
    };
    let deriver = chain::Deriver::for_network(ctx, method.network)?;
    let mut directory = Batch::new();
    let (counts, within) = count_into(ctx, key, *counted, &facts, &mut directory)?;
    let admits = And(&within, &facts);
    // The index's row in the directory's index follows the index taken, and the checkout's
    // entry follows the row (each only after the statement before it changed one).
    let index = match &deriver {
        Some(deriver) => {
            directory.push(
                deposits::allocate_within(deriver.family(), &admits)
                    .or_internal("allocate deposit index")?,
            );
            Some(
                directory.push(
                    deposits::give(deriver.family(), known.institution_id, Purpose::Checkout)
                        .or_internal("allocate deposit index")?,
                ),
            )
        }
        None => None,
    };
    let entry = match index {
        Some(_) => sessions::index(&quoted.session_id, merchant, now, &AfterChange),
        None => sessions::index(&quoted.session_id, merchant, now, &admits),
    }
    .or_internal("index checkout")?;
    let indexed = directory.push(entry);
    let taken = directory.run(&ctx.db).await.or_internal("count checkout")?;
    *counted = true;
    if !taken.changed(indexed) {
        return took_nothing(ctx, options, &taken, Some(counts), None);
    }
    let (deposit_address, deposit_index) = match (deriver, index) {
        (Some(deriver), Some(index)) => {
            let given = chain::custody::given_in(&taken, index)?.ok_or_else(|| {
                ApiError::internal("allocate deposit index", "indexed without an index")
            })?;
            // Derived just now (none was ahead): into the directory's index before it is shown.
            let address = chain::custody::indexed_address(ctx, &deriver, &given).await?;
            (address, Some(given.index))
        }
        _ => (chain::simulated(method.network)?, None),
    };
    let held = ctx.institution_object(known.institution_id.0)?;
    let mut writes = Batch::new();
    if let Some(k) = &options.idempotency_key {
        writes.push(
            sessions::forget_key(known.merchant_id, k, now - KEY_SECONDS)
                .or_internal("forget stale key")?,
        );
    }
    // Stored only if the key made nothing live (the other facts were judged in the directory).
    let key_free = options.idempotency_key.as_deref().map(|k| KeyFree {
        merchant_id: known.merchant_id,
        key: k,
        not_before: now - KEY_SECONDS,
    });
    let stored_if: &dyn crate::db::Condition = match &key_free {
        Some(free) => free,
        None => &Always,
    };
    let created = push_session(
        ctx,
        &mut writes,
        (options, locale, known, now),
        (&quoted, &deposit_address, deposit_index, MoneyStore::Object),
        stored_if,
    )?;
    // The object's answer says whether it stored the session. A failed call may still have
    // committed (its answer lost on the way back): the session's own id, made for this request
    // alone, says whether it did; if even that cannot be read, nothing is given back (an index
    // entry whose object holds no session reads as no checkout).
    let (transaction_id, failure) = match writes.run(&held).await {
        Ok(written) => (
            written
                .rows(created)
                .or_internal("create session")?
                .first()
                .map(|row| row.id),
            None,
        ),
        Err(err) => {
            let stored = stored_transaction(&held, &quoted.session_id, known.institution_id)
                .await
                .map_err(|_| ApiError::internal("create session", &err))?;
            (stored, Some(err))
        }
    };
    if let Some(transaction_id) = transaction_id {
        money::watch::remember_held(&quoted.session_id, known.institution_id);
        return Ok(Some(Session {
            id: quoted.session_id,
            transaction_id,
            created: true,
        }));
    }
    // Nothing stored (a racer stored the key first, or the call failed before its commit): the
    // place in the key's window and the index entry are given back, and the key's session is
    // answered.
    let mut undo = Batch::new();
    undo.push(throttle::release_checkout(
        key,
        now,
        Scoped::new(known.institution_id, &quoted.session_id),
    )?);
    undo.push(
        sessions::unindex(Scoped::new(known.institution_id, &quoted.session_id))
            .or_internal("unindex checkout")?,
    );
    undo.run(&ctx.db).await.or_internal("release checkout")?;
    if let Some(k) = &options.idempotency_key {
        if let Some(stored) = sessions::find_held_key(&held, merchant, k, now - KEY_SECONDS)
            .await
            .or_internal("read idempotency key")?
        {
            return replay(options, stored).map(Some);
        }
    }
    Err(match failure {
        Some(err) => ApiError::internal("create session", err),
        None => ApiError::internal(
            "create session",
            "the object stored no session and holds no key for it",
        ),
    }
    .into())
}

/// The transaction of session `id` if `institution`'s object holds it.
async fn stored_transaction(
    held: &crate::db::Db,
    id: &str,
    institution: shared_types::ids::InstitutionId,
) -> crate::db::DbResult<Option<i64>> {
    let mut batch = Batch::new();
    let session = batch.push(sessions::get_held_in_batch(id, institution)?);
    let read = batch.run(held).await?;
    Ok(read.rows(session)?.first().map(|s| s.transaction_id))
}

/// Pushes on `writes` what stores a session, wherever its institution's money lives (`store`):
/// the pending transaction, only if `stored_if` holds (its handle is answered), its session and
/// the watch of its deposit address, only with it, and the idempotency key, only with the
/// session.
fn push_session(
    ctx: &Ctx,
    writes: &mut Batch,
    (options, locale, known, now): (&CheckoutOptions, Option<&str>, &Known, i64),
    (quoted, deposit_address, deposit_index, store): (&Quoted, &str, Option<i64>, MoneyStore),
    stored_if: &dyn crate::db::Condition,
) -> Result<Handle<transactions::CreatedId>, ApiError> {
    let now_text = timestamp(now)?;
    let crypto_amount = quoted.quote.crypto_amount.to_string();
    let payment = NewPayment {
        institution_id: known.institution_id,
        merchant_id: known.merchant_id,
        asset: quoted.method.asset,
        currency: &options.currency,
        amount: &quoted.amount,
        network: quoted.method.network,
        external_reference: &options.external_reference,
        now_text: &now_text,
        first_id: transactions::first_id(store, known.institution_id),
    };
    let session = NewSession {
        id: &quoted.session_id,
        merchant_id: known.merchant_id,
        institution_id: known.institution_id,
        title: options.title.trim(),
        redirect_url: &options.redirect_url,
        asset: quoted.method.asset,
        network: quoted.method.network,
        deposit_address,
        deposit_index,
        crypto_amount: &crypto_amount,
        now,
        expires_at: now + SESSION_SECONDS,
        locale,
    };
    let created = writes
        .push(transactions::insert_pending(&payment, stored_if).or_internal("create session")?);
    writes.push(sessions::insert(&session).or_internal("create session")?);
    writes.extend(watch_statement(
        ctx,
        Scoped::new(known.institution_id, &quoted.session_id),
        quoted.method,
        (deposit_address, deposit_index),
        &quoted.quote,
        now + SESSION_SECONDS,
    )?);
    if let Some(key) = &options.idempotency_key {
        writes.push(
            sessions::insert_key(
                Scoped::new(known.institution_id, known.merchant_id),
                key,
                &fingerprint(options)?,
                &quoted.session_id,
                now,
            )
            .or_internal("create session")?,
        );
    }
    Ok(created)
}

/// Adds the probe of the facts to a batch storing a session with an idempotency key, as its
/// first statement: when the batch stores nothing, it tells an earlier session of the key from
/// a changed fact.
fn probe_into(
    batch: &mut Batch,
    admitted: &Admitted<'_>,
) -> Result<Option<Handle<Probe>>, ApiError> {
    Ok(sessions::probe(admitted)
        .or_internal("probe checkout")?
        .map(|probe| batch.push(probe)))
}

/// A batch that was to store a session (or take its address's index) took nothing: past a
/// limit by the counts it took, the limit's refusal; else the idempotency key's earlier session
/// if the facts held (its probe found it), else `None` (a fact changed: read them again).
fn took_nothing(
    ctx: &Ctx,
    options: &CheckoutOptions,
    batch: &BatchResults,
    counts: Option<Counts>,
    probe: Option<Handle<Probe>>,
) -> Result<Option<Session>, Refusal> {
    if let Some(counts) = counts {
        let rows = throttle::CheckoutRows {
            per_address: counts
                .per_address
                .map(|c| batch.rows(c))
                .transpose()
                .or_internal("count attempt")?,
            key_window: batch.rows(counts.key_window).or_internal("count attempt")?,
            per_key: batch.rows(counts.per_key).or_internal("count attempt")?,
        };
        throttle::refuse_checkout(ctx, &rows)?;
    }
    let found = match probe {
        Some(probe) => batch
            .rows(probe)
            .or_internal("probe checkout")?
            .into_iter()
            .next(),
        None => None,
    };
    match found {
        Some(found) if found.admits => match found.stored() {
            Some(stored) => replay(options, stored).map(Some),
            None => Ok(None),
        },
        _ => Ok(None),
    }
}

/// Fingerprint of everything but the key and the page's language: the same key with other
/// options is a conflict.
fn fingerprint(options: &CheckoutOptions) -> Result<String, ApiError> {
    let amount = Decimal::from_str(&options.amount).or_internal("parse amount")?;
    let canonical = CheckoutOptions {
        idempotency_key: None,
        locale: None,
        amount: amount.normalize().to_string(),
        ..options.clone()
    };
    let text = serde_json::to_string(&canonical).or_internal("encode options")?;
    Ok(crypto::sha256_hex(&text))
}

/// What became of a customer's choice of another way to pay ([`change_method`]).
#[derive(Debug)]
pub enum MethodChange {
    /// The session shows the chosen way to pay, or stays open as another choice made meanwhile
    /// left it.
    Changed,
    /// The choice is not one of the ways to pay offered to this merchant.
    NotOffered,
    /// The checkout no longer waits for a payment (paid, expired, ended), so its way to pay
    /// cannot change.
    Closed,
    /// The chosen way to pay cannot be quoted right now: which, and why not.
    Unquoted {
        /// The way to pay chosen.
        method: quote::Method,
        /// Why it cannot be quoted (fit to show).
        why: String,
    },
}

/// Moves `session` to the way to pay `chosen` (`ASSET:network`). A way to pay chosen before on a
/// watched network keeps its address and quote; a new one is quoted and given a fresh deposit
/// address. The transaction and session change in one batch, guarded on the transaction still
/// being pending at the version read.
pub async fn change_method(
    ctx: &Ctx,
    located: &Located,
    chosen: &str,
) -> Result<MethodChange, ApiError> {
    let session = &located.session;
    let money = located.money(ctx);
    let offered = offered_methods(ctx, session.merchant_id, located.store()).await?;
    let Some(method) = chosen
        .split_once(':')
        .and_then(|(asset, network)| chain::method(&offered, asset, network))
    else {
        return Ok(MethodChange::NotOffered);
    };
    let now = ctx.now();
    if session.raw_status != RawStatus::Pending || session.expires_at <= now {
        return Ok(MethodChange::Closed);
    }
    // A way to pay chosen before on a watched network keeps its address and quote: the customer
    // may have paid it already, and a session never gets more addresses than ways to pay.
    let earlier = watches::of_session(money, session.institution_id, &session.id)
        .await
        .or_internal("read watches")?
        .into_iter()
        .find(|w| w.network == method.network && w.asset == method.asset);
    let (address, deposit_index, crypto_amount, watch) = match earlier {
        Some(w) => (
            crate::wallet_address::eip55(&w.address),
            Some(w.derivation_index),
            w.crypto_amount.to_string(),
            None,
        ),
        None => {
            let amount = session.amount_expected;
            let quote = match chain::quote(ctx, method, amount, &session.currency).await {
                Ok(quote) => quote,
                Err(why) => {
                    return Ok(MethodChange::Unquoted {
                        method,
                        why: why.public(),
                    })
                }
            };
            let (address, deposit_index) = chain::custody::fresh(
                ctx,
                method.network,
                session.institution_id,
                Purpose::Checkout,
            )
            .await?;
            let watch = watch_statement(
                ctx,
                Scoped::new(session.institution_id, &session.id),
                method,
                (&address, deposit_index),
                &quote,
                session.expires_at,
            )?;
            (
                address,
                deposit_index,
                quote.crypto_amount.to_string(),
                watch,
            )
        }
    };
    // The session follows only if the transaction was still pending at the version read.
    let mut batch = Batch::new();
    let change = batch.push(
        transactions::change_method(
            Scoped::new(session.institution_id, session.transaction_id),
            session.version,
            method.asset,
            method.network,
            &timestamp(now)?,
        )
        .or_internal("change method")?,
    );
    batch.push(
        sessions::change_method(
            Scoped::new(session.institution_id, &session.id),
            method.asset,
            method.network,
            &address,
            deposit_index,
            &crypto_amount,
        )
        .or_internal("change method")?,
    );
    batch.extend(watch);
    let results = match batch.run(money).await {
        Ok(results) => results,
        Err(err) => {
            // A concurrent choice of the same way to pay gave it its address first (one address
            // per way to pay): the session is as that left it.
            let taken = watches::of_session(money, session.institution_id, &session.id)
                .await
                .or_internal("read watches")?
                .iter()
                .any(|w| w.network == method.network && w.asset == method.asset);
            if taken {
                return Ok(MethodChange::Changed);
            }
            return Err(ApiError::internal("change method", err));
        }
    };
    if !results.changed(change) {
        // The payment changed since it was read: closed (paid, expired), or only another choice
        // made meanwhile, after which the page simply shows where it stands.
        let now_open = located
            .reread(ctx)
            .await
            .ok()
            .flatten()
            .is_some_and(|s| s.raw_status == RawStatus::Pending && s.expires_at > ctx.now());
        if !now_open {
            return Ok(MethodChange::Closed);
        }
    }
    Ok(MethodChange::Changed)
}

/// What a sandbox control of the hosted page did ([`simulate`]).
#[derive(Debug)]
pub enum Simulation {
    /// The payment changed as the control acts it out.
    Done,
    /// The checkout's network is watched: its payment is made on chain, not simulated.
    Watched,
    /// No such control.
    Unknown,
    /// The lifecycle refused the change (it conflicts with the payment's state, or the amount
    /// is wrong): why.
    Refused(String),
}

/// Acts out what the customer or the network would do to `session`'s payment, as the sandbox
/// control `control` says: `pay-exact`, `pay-under` (90 %), `pay-over` (110 %), `settle`,
/// `refund` (everything not yet refunded) or `fail`, through the lifecycle like any change. A
/// payment or failure is simulated only where no chain is watched.
pub async fn simulate(ctx: &Ctx, located: &Located, control: &str) -> Result<Simulation, ApiError> {
    let session = &located.session;
    if control.starts_with("pay-") || control == "fail" {
        let watched = !watches::of_session(located.money(ctx), session.institution_id, &session.id)
            .await
            .or_internal("read watches")?
            .is_empty();
        if watched {
            return Ok(Simulation::Watched);
        }
    }
    let expected = session.amount_expected;
    let digits = currency_digits(&session.currency).unwrap_or(2);
    let share = |percent: i64| (expected * Decimal::new(percent, 2)).round_dp(digits);
    let action = match control {
        "pay-exact" => Action::Pay { amount: expected },
        "pay-under" => Action::Pay { amount: share(90) },
        "pay-over" => Action::Pay { amount: share(110) },
        "settle" => Action::Settle { network: None },
        "refund" => {
            let amount = |value: &Option<String>| {
                value
                    .as_deref()
                    .map(Decimal::from_str)
                    .transpose()
                    .or_internal("parse amount")
            };
            let gross = amount(&session.amount_gross)?.unwrap_or(expected);
            let refunded = amount(&session.amount_refunded)?.unwrap_or_default();
            // Everything not yet refunded.
            Action::Refund {
                amount: gross - refunded,
            }
        }
        "fail" => Action::Fail,
        _ => return Ok(Simulation::Unknown),
    };
    match payments::act_in(
        ctx,
        located.store(),
        Scoped::new(session.institution_id, session.transaction_id),
        &action,
    )
    .await
    {
        Ok(_) => Ok(Simulation::Done),
        Err(err) if err.code == ErrorCode::Conflict || err.code == ErrorCode::InvalidRequest => {
            Ok(Simulation::Refused(err.description))
        }
        Err(err) => Err(err),
    }
}

/// The ways to pay the deployment offers where the merchant can be paid out
/// ([`chain::methods_for`]), its institution's money being in `store`.
pub async fn offered_methods(
    ctx: &Ctx,
    merchant_id: i64,
    store: MoneyStore,
) -> Result<Vec<quote::Method>, ApiError> {
    let payout = wallets::payout(&ctx.db, merchant_id)
        .await
        .or_internal("read wallets")?;
    let payout = match store {
        MoneyStore::D1 => payout,
        MoneyStore::Object => payout.held(),
    };
    chain::methods_for(ctx, &payout)
}

/// A checkout's session and where it lives: in D1, or in its institution's object (`held`).
pub struct Located {
    /// The session.
    pub session: SessionView,
    /// Its institution's object, when the session is held there.
    pub held: Option<crate::db::Db>,
}

impl Located {
    /// Where the session's money statements run.
    pub fn money<'a>(&'a self, ctx: &'a Ctx) -> &'a crate::db::Db {
        self.held.as_ref().unwrap_or(&ctx.db)
    }

    /// Where its institution's money lives.
    pub fn store(&self) -> MoneyStore {
        if self.held.is_some() {
            MoneyStore::Object
        } else {
            MoneyStore::D1
        }
    }

    /// The session as it stands now, read again where it lives.
    pub async fn reread(&self, ctx: &Ctx) -> Result<Option<SessionView>, ApiError> {
        let id = &self.session.id;
        let Some(held) = &self.held else {
            return sessions::get(&ctx.db, id).await.or_internal("read session");
        };
        let mut batch = Batch::new();
        let session = batch.push(
            sessions::get_held_in_batch(id, self.session.institution_id)
                .or_internal("read session")?,
        );
        let read = batch.run(held).await.or_internal("read session")?;
        Ok(read
            .rows(session)
            .or_internal("read session")?
            .pop()
            .map(|s| SessionView {
                merchant_name: self.session.merchant_name.clone(),
                ..s
            }))
    }
}

/// Checkout `id`'s session wherever it lives, with what the hosted page shows beside it (where
/// its merchant can be paid out, and its watches): one D1 round trip, which reads the session
/// there and, in the same batch, the directory's index entry of a checkout held in an object;
/// then, for such a checkout, one call to its object. `None`: no such checkout.
pub async fn locate(
    ctx: &Ctx,
    id: &str,
) -> Result<Option<(Located, Payout, Vec<watches::Watch>)>, ApiError> {
    let mut batch = Batch::new();
    let session = batch.push(sessions::get_in_batch(id).or_internal("read session")?);
    let networks = batch.push(wallets::networks_of_session(id).or_internal("read wallets")?);
    let watched = batch.push(watches::of_session_in_batch(id).or_internal("read watches")?);
    let indexed = batch.push(sessions::indexed(id).or_internal("read session")?);
    let held_networks = batch.push(wallets::networks_of_indexed(id).or_internal("read wallets")?);
    let read = batch.run(&ctx.db).await.or_internal("read session")?;
    // Held in its institution's object: read there, even if D1 still has a copy of it (a
    // checkout moved with its institution's money).
    let Some(entry) = read.rows(indexed).or_internal("read session")?.pop() else {
        let Some(session) = read.rows(session).or_internal("read session")?.pop() else {
            return Ok(None);
        };
        let networks = Payout::from_rows(read.rows(networks).or_internal("read wallets")?);
        let watched = read.rows(watched).or_internal("read watches")?;
        return Ok(Some((
            Located {
                session,
                held: None,
            },
            networks,
            watched,
        )));
    };
    // Held in its object: its USDC is not settled across yet (docs/CCTP.md).
    let networks = Payout::from_rows(read.rows(held_networks).or_internal("read wallets")?).held();
    let held = ctx.institution_object(entry.institution_id.0)?;
    let mut batch = Batch::new();
    let session = batch
        .push(sessions::get_held_in_batch(id, entry.institution_id).or_internal("read session")?);
    let watched = batch.push(watches::of_session_in_batch(id).or_internal("read watches")?);
    let read = batch.run(&held).await.or_internal("read session")?;
    let Some(session) = read.rows(session).or_internal("read session")?.pop() else {
        // Indexed, but its object stored nothing (yet): no such checkout.
        return Ok(None);
    };
    let watched = read.rows(watched).or_internal("read watches")?;
    money::watch::remember_held(id, entry.institution_id);
    Ok(Some((
        Located {
            session: sessions::named(session, &entry),
            held: Some(held),
        },
        networks,
        watched,
    )))
}

/// The watch of a deposit address quoted on a watched network, for the batch that gives the
/// address to the session; `None` for a simulated one.
fn watch_statement(
    ctx: &Ctx,
    Scoped {
        institution: institution_id,
        id: session_id,
    }: Scoped<&str>,
    method: quote::Method,
    (address, derivation_index): (&str, Option<i64>),
    quote: &chain::Quote,
    checkout_end: i64,
) -> Result<Option<Stmt>, ApiError> {
    let Some(watched) = &quote.watched else {
        return Ok(None);
    };
    let derivation_index = derivation_index
        .ok_or("a watched address must be derived")
        .or_internal("watch deposit")?;
    let statement = watches::insert(&NewWatch {
        address,
        derivation_index,
        session_id,
        institution_id,
        network: method.network,
        asset: method.asset,
        token: watched.token,
        decimals: watched.decimals,
        crypto_amount: &quote.crypto_amount.to_string(),
        base_units: &watched.base_units.to_string(),
        // Recorded to 12 places (the conversion itself uses the quoted amounts).
        rate: &quote.rate.round_dp(12).normalize().to_string(),
        rate_source: &quote.rate_source,
        from_block: watched.head_block,
        now: ctx.now(),
        watch_until: checkout_end + money::watch::LATE_WINDOW_SECONDS,
    })
    .or_internal("watch deposit")?;
    Ok(Some(statement))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> CheckoutOptions {
        CheckoutOptions {
            public_key: "pk_test_1".into(),
            amount: "149.9".into(),
            currency: "EUR".into(),
            title: "Order 7".into(),
            external_reference: "order-7".into(),
            idempotency_key: Some("key-1".into()),
            redirect_url: "https://shop.example/done".into(),
            open_in_new_tab: false,
            allow_crypto: true,
            locale: None,
        }
    }

    #[test]
    fn the_fingerprint_leaves_out_the_key_and_the_language_and_reads_the_amount_as_a_number() {
        let first = fingerprint(&options()).unwrap();
        let same = CheckoutOptions {
            amount: "149.90".into(),
            idempotency_key: Some("key-2".into()),
            locale: Some("de".into()),
            ..options()
        };
        assert_eq!(fingerprint(&same).unwrap(), first);
        for other in [
            CheckoutOptions {
                amount: "149.91".into(),
                ..options()
            },
            CheckoutOptions {
                title: "Order 8".into(),
                ..options()
            },
            CheckoutOptions {
                open_in_new_tab: true,
                ..options()
            },
        ] {
            assert_ne!(fingerprint(&other).unwrap(), first);
        }
    }
}
