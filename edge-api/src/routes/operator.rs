//! The operator's API: what runs a deployment rather than an institution's business, for the
//! operator's own tools (`xtask`), with the operator's token (`PAYRAIL_OPERATOR_TOKEN`, a Worker
//! secret). Without that secret these paths do not exist.
//!
//! `POST /operator/institutions/{id}/copy`: copies the institution's money tables into its
//! object and compares both sides (`crate::shard`), answering the comparison (a rehearsal: the
//! institution keeps working from D1).
//! `POST /operator/institutions/{id}/move`: moves the institution's money into its object
//! (`shard::move_in`), answering what the move did.

use shared_types::ErrorCode;
use worker::Response;

use crate::ctx::Ctx;
use crate::error::{ApiError, OrInternal};
use crate::http;
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
/// directory now holds it there, 409 with the reason (and the copy's comparison) when it still
/// works from D1.
pub async fn move_in(
    Incoming { req, ctx, .. }: Incoming<'_>,
    id: &str,
) -> Result<Response, ApiError> {
    authorize(ctx, &req)?;
    let report = shard::move_in(ctx, institution(id)?).await?;
    http::json(if report.moved { 200 } else { 409 }, &report).or_internal("build response")
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
