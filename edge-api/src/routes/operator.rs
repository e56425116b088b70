//! The operator's API: what runs a deployment rather than an institution's business, for the
//! operator's own tools (`xtask`), with the operator's token (`PAYRAIL_OPERATOR_TOKEN`, a Worker
//! secret). Without that secret these paths do not exist.
//!
//! `POST /operator/institutions/{id}/copy`: copies the institution's money tables into its
//! object and compares both sides (`crate::shard`), answering the comparison (a rehearsal: the
//! institution keeps working from D1).
//! `POST /operator/institutions/{id}/move`: moves the institution's money into its object
//! (`shard::move_in`), answering what the move did.
//! `GET /operator/institutions/{id}/books?part=…[&after=N]` (accounts, transfers, watches,
//! deposits or topups): one part of the books an institution held in its object keeps (`shared_types::ledger::reads`),
//! for `xtask reconcile --remote` and `xtask sweep --remote` (production's objects cannot be
//! read any other way).
//! `POST /operator/sanctioned-addresses`: loads entries into the operator's own sanctions list
//! (`xtask screening-load` sends OFAC's SDN file this way), answering what changed;
//! `GET /operator/sanctioned-addresses`: the list (`?removed=true`: with the entries taken off);
//! `POST /operator/sanctioned-addresses/remove`: takes one entry off (kept, for the record).
//! `GET /operator/screening-outages`: the networks whose sanctions oracle cannot be read now.
//! `POST /operator/float-moves`: moves the treasury's USDC from one network to another with
//! CCTP (`money::float_moves`): 201 with the move made, 200 with the one its reference already
//! made, 409 naming why it cannot; `GET /operator/float-moves[?before=ID&limit=N]` lists them
//! newest first, `GET /operator/float-moves/{id}` reads one.
//! `GET /operator/held-deposits[?before=UNIX&limit=N]`: money that came to custody and that no
//! store credits (`money::watch::pass`), newest first.

use serde::Deserialize;
use shared_types::ledger::reads::Part;
use shared_types::ErrorCode;
use worker::Response;

use crate::ctx::Ctx;
use crate::db::screenings::{self, Loaded};
use crate::db::{moves, passes};
use crate::error::{ApiError, OrInternal};
use crate::http;
use crate::money::float_moves;
use crate::route::Incoming;
use crate::shard;
use crate::{auth, crypto};

/// The challenge a refused operator request carries.
const REALM: &str = "Bearer realm=\"payrail-operator\"";

/// Copies an institution's money into its object and answers the comparison (200 whether or not
/// every table matched: `verified` says).
pub async fn copy(Incoming { req, ctx, .. }: Incoming<'_>, id: &str) -> Result<Response, ApiError> {
    authorize(ctx, &req)?;
    let report = shard::copy(ctx, institution(id)?).await?;
    http::json(200, &report).or_internal("build response")
}

/// Moves an institution's money into its object and answers what the move did: 200 when the
/// directory now holds it there, 202 when the move goes on (call again: the institution stays
/// paused, and each call goes on from where the last stopped), 409 with the reason (and the
/// copy's comparison) when it works from D1 again.
pub async fn move_in(
    Incoming { req, ctx, .. }: Incoming<'_>,
    id: &str,
) -> Result<Response, ApiError> {
    authorize(ctx, &req)?;
    let report = shard::move_in(ctx, institution(id)?).await?;
    let status = match (report.moved, report.moving) {
        (true, _) => 200,
        (false, true) => 202,
        (false, false) => 409,
    };
    http::json(status, &report).or_internal("build response")
}

/// One part of the books of an institution held in its object, as its object holds them:
/// `{"data": [row, …]}`. 400 for a part or page not named right, 404 for no such institution,
/// 409 for one whose books are in D1 (read them there) or that is moving.
pub async fn books(
    Incoming { req, ctx, .. }: Incoming<'_>,
    id: &str,
) -> Result<Response, ApiError> {
    authorize(ctx, &req)?;
    let institution = institution(id)?;
    let url = req.url().or_internal("parse url")?;
    let (mut part, mut after) = (None, None);
    for (name, value) in url.query_pairs() {
        match name.as_ref() {
            "part" if part.is_none() => part = Some(value.into_owned()),
            "after" if after.is_none() => {
                after = Some(value.parse::<i64>().map_err(|_| {
                    ApiError::invalid_request(
                        "after must be a whole number: a sequence number or a derivation index",
                    )
                })?);
            }
            _ => {
                return Err(ApiError::invalid_request(
                    "unknown or repeated parameter: the books take part (accounts, transfers, \
                     watches, deposits or topups) and, for the last three, after",
                ))
            }
        }
    }
    let part =
        Part::named(part.as_deref().unwrap_or(""), after).map_err(ApiError::invalid_request)?;
    match moves::store_of(&ctx.db, institution)
        .await
        .or_internal("read the directory")?
        .as_deref()
    {
        None => return Err(ApiError::not_found("no such institution")),
        Some("object") => {}
        Some(_) => {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                "this institution's money is in D1: its books are read there",
            ))
        }
    }
    let object = ctx.institution_object(institution)?;
    let rows = moves::books(&object, &part)
        .await
        .or_internal("read the object's books")?;
    http::json(200, &serde_json::json!({ "data": rows })).or_internal("build response")
}

/// Most bytes of a load of the sanctions list (5,000 entries with room for their names).
const LOAD_BODY_MAX: usize = 2 * 1024 * 1024;
/// Most entries the list answers.
const LIST_MAX: i64 = 10_000;

/// A load of the operator's sanctions list.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Load {
    source: String,
    published: String,
    #[serde(default)]
    replace: bool,
    entries: Vec<LoadEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadEntry {
    address: String,
    entry: String,
}

/// Loads entries into the operator's sanctions list: 200 with what changed (`added`, `kept`,
/// `removed`); 422 naming the first thing wrong with the load, before anything is written.
pub async fn load_sanctions(
    Incoming { mut req, ctx, .. }: Incoming<'_>,
) -> Result<Response, ApiError> {
    authorize(ctx, &req)?;
    let body = http::json_body(&mut req, LOAD_BODY_MAX).await?;
    let load: Load = serde_json::from_str(&body)
        .map_err(|e| ApiError::invalid_request(format!("the load is not valid: {e}")))?;
    let source = load.source.trim();
    if source.is_empty() || source.chars().count() > 64 || source.chars().any(char::is_control) {
        return Err(ApiError::invalid_request(
            "source must be a list's name of 1 to 64 printable characters (e.g. \"OFAC SDN\")",
        ));
    }
    if !is_date(&load.published) {
        return Err(ApiError::invalid_request(
            "published must be the list's publication date, YYYY-MM-DD",
        ));
    }
    if load.entries.len() > screenings::MAX_LOAD {
        return Err(ApiError::invalid_request(format!(
            "a load carries at most {} entries; this one has {}",
            screenings::MAX_LOAD,
            load.entries.len()
        )));
    }
    if load.replace && load.entries.is_empty() {
        return Err(ApiError::invalid_request(
            "a load that replaces a source's entries must carry at least one: it would empty the \
             list",
        ));
    }
    let mut entries: Vec<Loaded> = Vec::with_capacity(load.entries.len());
    for (n, e) in load.entries.into_iter().enumerate() {
        let address = e.address.trim().to_ascii_lowercase();
        if payrail_evm::address_bytes(&address).is_none() || !address.starts_with("0x") {
            return Err(ApiError::invalid_request(format!(
                "entries[{n}].address must be an EVM address (0x and 40 hex digits)"
            )));
        }
        if e.entry.chars().count() > 300 || e.entry.chars().any(char::is_control) {
            return Err(ApiError::invalid_request(format!(
                "entries[{n}].entry must be at most 300 printable characters"
            )));
        }
        if entries.iter().all(|seen| seen.address != address) {
            entries.push(Loaded {
                address,
                entry: e.entry,
            });
        }
    }
    let report = screenings::load(
        &ctx.db,
        (source, &load.published),
        &entries,
        load.replace,
        ("operator", ctx.now()),
    )
    .await
    .or_internal("load the sanctions list")?;
    http::json(200, &report).or_internal("build response")
}

/// An entry to take off the operator's list.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Removal {
    address: String,
    source: String,
}

/// Takes one entry off the operator's sanctions list (its row is kept with when it was taken
/// off): 200 `{"removed": true}`, or 404 when the list has no such entry.
pub async fn remove_sanction(
    Incoming { mut req, ctx, .. }: Incoming<'_>,
) -> Result<Response, ApiError> {
    authorize(ctx, &req)?;
    let body = http::json_body(&mut req, 4096).await?;
    let removal: Removal = serde_json::from_str(&body)
        .map_err(|e| ApiError::invalid_request(format!("the removal is not valid: {e}")))?;
    let address = removal.address.trim().to_ascii_lowercase();
    if !screenings::remove(
        &ctx.db,
        &address,
        removal.source.trim(),
        ("operator", ctx.now()),
    )
    .await
    .or_internal("take an entry off the sanctions list")?
    {
        return Err(ApiError::not_found(format!(
            "{address} is not on the list {:?}",
            removal.source.trim()
        )));
    }
    http::json(200, &serde_json::json!({ "removed": true })).or_internal("build response")
}

/// The operator's sanctions list, newest first (`?removed=true`: with the entries taken off).
pub async fn sanctions(Incoming { req, ctx, .. }: Incoming<'_>) -> Result<Response, ApiError> {
    authorize(ctx, &req)?;
    let url = req.url().or_internal("parse url")?;
    let mut removed = false;
    for (name, value) in url.query_pairs() {
        match (name.as_ref(), value.as_ref()) {
            ("removed", "true") => removed = true,
            ("removed", "false") => removed = false,
            _ => {
                return Err(ApiError::invalid_request(format!(
                    "unknown parameter {name:?}: the list takes only removed=true|false"
                )))
            }
        }
    }
    let entries = screenings::entries(&ctx.db, removed, LIST_MAX)
        .await
        .or_internal("read the sanctions list")?;
    http::json(200, &serde_json::json!({ "data": entries })).or_internal("build response")
}

/// The networks whose sanctions oracle cannot be read now (nothing there is credited or paid
/// as cleared until it can).
pub async fn outages(Incoming { req, ctx, .. }: Incoming<'_>) -> Result<Response, ApiError> {
    authorize(ctx, &req)?;
    let open = screenings::open_outages(&ctx.db)
        .await
        .or_internal("read screening outages")?;
    http::json(200, &serde_json::json!({ "data": open })).or_internal("build response")
}

/// Whether `text` is a calendar date, `YYYY-MM-DD`.
fn is_date(text: &str) -> bool {
    text.len() == 10 && shared_types::time::parse_filter_bound(text).is_some()
}

/// The institution a path names.
fn institution(id: &str) -> Result<i64, ApiError> {
    id.parse::<i64>()
        .ok()
        .filter(|n| (1..1 << 53).contains(n))
        .ok_or_else(|| ApiError::not_found("no such institution"))
}

/// The operator's token, checked: without the secret configured the path does not exist; a
/// missing or wrong token is refused (compared as SHA-256 digests, in constant time).
/// The body of `POST /operator/float-moves`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MoveFloat {
    from: String,
    to: String,
    amount: String,
    reference: String,
    /// Who asks (the operator's tool names the person); "operator" when not said.
    #[serde(default)]
    requested_by: Option<String>,
}

/// Moves the treasury's float between networks: 201 with the move, 200 with the one its
/// reference already made.
pub async fn move_float(Incoming { mut req, ctx, .. }: Incoming<'_>) -> Result<Response, ApiError> {
    authorize(ctx, &req)?;
    let body = http::json_body(&mut req, 4096).await?;
    let ask: MoveFloat = serde_json::from_str(&body)
        .map_err(|e| ApiError::invalid_request(format!("the float move is not valid: {e}")))?;
    let requested_by = ask.requested_by.as_deref().unwrap_or("operator").trim();
    if requested_by.is_empty()
        || requested_by.chars().count() > 100
        || requested_by.chars().any(char::is_control)
    {
        return Err(ApiError::invalid_request(
            "requested_by must be 1 to 100 printable characters",
        ));
    }
    let (made, new) = float_moves::create(
        ctx,
        &float_moves::Ask {
            from: ask.from.trim(),
            to: ask.to.trim(),
            amount: &ask.amount,
            reference: &ask.reference,
        },
        requested_by,
    )
    .await?;
    http::json(if new { 201 } else { 200 }, &made).or_internal("build response")
}

/// The most moves one list answers.
const FLOAT_MOVES_MAX: i64 = 100;

/// The treasury's float moves, newest first: `{"data": [move, …]}`.
pub async fn float_moves(Incoming { req, ctx, .. }: Incoming<'_>) -> Result<Response, ApiError> {
    authorize(ctx, &req)?;
    let url = req.url().or_internal("parse url")?;
    let (mut before, mut limit) = (None, None);
    for (name, value) in url.query_pairs() {
        match name.as_ref() {
            "before" if before.is_none() && value.len() <= 64 => before = Some(value.into_owned()),
            "limit" if limit.is_none() => {
                limit = Some(
                    value
                        .parse::<i64>()
                        .ok()
                        .filter(|n| (1..=FLOAT_MOVES_MAX).contains(n))
                        .ok_or_else(|| {
                            ApiError::invalid_request(format!(
                                "limit must be a number from 1 to {FLOAT_MOVES_MAX}"
                            ))
                        })?,
                );
            }
            _ => {
                return Err(ApiError::invalid_request(
                    "unknown or repeated parameter: float moves take before (a move's id) and \
                     limit",
                ))
            }
        }
    }
    let moves = float_moves::list(ctx, before.as_deref(), limit.unwrap_or(FLOAT_MOVES_MAX)).await?;
    http::json(200, &serde_json::json!({ "data": moves })).or_internal("build response")
}

/// One float move.
pub async fn float_move(
    Incoming { req, ctx, .. }: Incoming<'_>,
    id: &str,
) -> Result<Response, ApiError> {
    authorize(ctx, &req)?;
    if id.len() > 64 {
        return Err(ApiError::not_found("no such float move"));
    }
    let made = float_moves::get(ctx, id).await?;
    http::json(200, &made).or_internal("build response")
}

/// Most held deposits one page lists.
const HELD_DEPOSITS_MAX: i64 = 100;

/// The held deposits: money that came to custody and that no store credits, newest first.
pub async fn held_deposits(Incoming { req, ctx, .. }: Incoming<'_>) -> Result<Response, ApiError> {
    authorize(ctx, &req)?;
    let url = req.url().or_internal("parse url")?;
    let (mut before, mut limit) = (None, None);
    let number = |value: &str, name: &str, range: std::ops::RangeInclusive<i64>| {
        value
            .parse::<i64>()
            .ok()
            .filter(|n| range.contains(n))
            .ok_or_else(|| {
                ApiError::invalid_request(format!(
                    "{name} must be a number from {} to {}",
                    range.start(),
                    range.end()
                ))
            })
    };
    for (name, value) in url.query_pairs() {
        match name.as_ref() {
            "before" if before.is_none() => {
                before = Some(number(&value, "before", 0..=i64::from(u32::MAX))?);
            }
            "limit" if limit.is_none() => {
                limit = Some(number(&value, "limit", 1..=HELD_DEPOSITS_MAX)?);
            }
            _ => {
                return Err(ApiError::invalid_request(
                    "unknown or repeated parameter: held deposits take before (Unix seconds) \
                     and limit",
                ))
            }
        }
    }
    let held = passes::list(&ctx.db, before, limit.unwrap_or(HELD_DEPOSITS_MAX))
        .await
        .or_internal("read held deposits")?;
    http::json(200, &serde_json::json!({ "data": held })).or_internal("build response")
}

fn authorize(ctx: &Ctx, req: &worker::Request) -> Result<(), ApiError> {
    let Some(expected) = ctx.operator_token() else {
        return Err(ApiError::not_found("no such path"));
    };
    let refused = || {
        ApiError::new(
            ErrorCode::InvalidClient,
            "the operator's bearer token is required",
        )
        .with_challenge(REALM)
    };
    let presented = auth::bearer(req.headers()).ok_or_else(refused)?;
    if crypto::constant_time_eq(
        &crypto::sha256_hex(&presented),
        &crypto::sha256_hex(&expected),
    ) {
        Ok(())
    } else {
        Err(refused())
    }
}
