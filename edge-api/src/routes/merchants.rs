//! `GET /v1/merchants` and `GET /v1/merchants/{id}` (spec §4.3, §4.4).

use shared_types::Scope;
use worker::Response;

use crate::auth;
use crate::db::{merchants, Owner};
use crate::error::{ApiError, OrInternal};
use crate::http;
use crate::query::{parse_id, MerchantFilter};
use crate::route::Incoming;

/// One page of the caller's merchants: the token's check and the page in one statement.
pub async fn list(Incoming { req, ctx, url }: Incoming<'_>) -> Result<Response, ApiError> {
    let (hash, filter) =
        super::list::request(&req, ctx, url, Scope::MerchantsRead, MerchantFilter::parse).await?;
    let page = merchants::list_json(&ctx.db, Owner::Token(&hash), &filter)
        .await
        .or_internal("list merchants")?;
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
    let (merchant, scopes) = merchants::get_json(&ctx.db, &hash, id)
        .await
        .or_internal("read merchant")?;
    auth::allowed(scopes.as_deref(), Scope::MerchantsRead)?;
    http::json_text(200, &merchant.ok_or_else(not_found)?).or_internal("build response")
}
