//! `GET /v1/merchants` and `GET /v1/merchants/{id}` (spec §4.3, §4.4).

use shared_types::{List, Scope};
use worker::{Request, Response, Url};

use crate::auth;
use crate::ctx::Ctx;
use crate::db::merchants;
use crate::error::{ApiError, OrInternal};
use crate::http;
use crate::query::{parse_id, MerchantFilter};

/// One page of the caller's merchants.
pub async fn list(req: &Request, ctx: &Ctx, url: &Url) -> Result<Response, ApiError> {
    let caller = auth::authorize(ctx, req.headers(), Scope::MerchantsRead).await?;
    let filter = MerchantFilter::parse(url.query().unwrap_or(""))
        .map_err(|e| ApiError::invalid_request(e.0))?;
    let rows = merchants::list(&ctx.db, caller.institution_id, &filter)
        .await
        .or_internal("list merchants")?;
    let page = List::from_overfetch(rows, filter.limit as usize, |m| m.id);
    http::json(200, &page).or_internal("build response")
}

/// One of the caller's merchants.
pub async fn get(req: &Request, ctx: &Ctx, id: &str) -> Result<Response, ApiError> {
    let caller = auth::authorize(ctx, req.headers(), Scope::MerchantsRead).await?;
    // An id that cannot exist and another institution's merchant read exactly like an unknown one.
    let not_found = || ApiError::not_found("no such merchant");
    let id = parse_id(id).ok_or_else(not_found)?;
    let merchant = merchants::get(&ctx.db, caller.institution_id, id)
        .await
        .or_internal("read merchant")?
        .ok_or_else(not_found)?;
    http::json(200, &merchant).or_internal("build response")
}
