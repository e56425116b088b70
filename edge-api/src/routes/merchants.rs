//! `GET /v1/merchants` and `GET /v1/merchants/{id}` (spec §4.3, §4.4).

use shared_types::Scope;
use worker::Response;

use crate::auth;
use crate::db::{merchants, Owner};
use crate::error::{ApiError, OrInternal};
use crate::http;
use crate::query::{parse_id, MerchantFilter};
use crate::route::Incoming;

use super::list::{read_page, read_session, with_bookmark, Freshness};

/// One page of the caller's merchants: the token's check and the page in one statement.
pub async fn list(Incoming { req, ctx, url }: Incoming<'_>) -> Result<Response, ApiError> {
    let (hash, filter) =
        super::list::request(&req, ctx, url, Scope::MerchantsRead, MerchantFilter::parse).await?;
    let freshness = if filter.id.is_some() {
        Freshness::Primary
    } else {
        Freshness::Replica
    };
    let page = read_page(
        &req,
        ctx,
        freshness,
        Owner::Token(&hash),
        async |db, owner| merchants::list_json(db, owner, &filter).await,
    )
    .await?;
    super::list::response(page, Scope::MerchantsRead, filter.limit)
}

/// One of the caller's merchants: the token's check and the read in one statement.
pub async fn get(Incoming { req, ctx, .. }: Incoming<'_>, id: &str) -> Result<Response, ApiError> {
    let hash = auth::bearer_hash(req.headers())?;
    // An id that cannot exist and another institution's merchant read exactly like an unknown one.
    let not_found = || ApiError::not_found("no such merchant");
    let Some(id) = parse_id(id) else {
        auth::authorize(ctx, req.headers(), Scope::MerchantsRead).await?;
        return Err(not_found());
    };
    // A lookup: the primary answers it.
    let session = read_session(&req, ctx, Freshness::Primary)?;
    let (merchant, scopes) = merchants::get_json(&session, &hash, id)
        .await
        .or_internal("read merchant")?;
    auth::allowed(scopes.as_deref(), Scope::MerchantsRead)?;
    with_bookmark(
        http::json_text(200, &merchant.ok_or_else(not_found)?).or_internal("build response")?,
        &session,
    )
}
