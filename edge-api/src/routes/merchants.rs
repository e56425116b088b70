//! `GET /v1/merchants` and `GET /v1/merchants/{id}` (spec §4.3, §4.4).

use shared_types::{List, Scope};
use worker::{Env, Request, Response, Url};

use crate::db::merchants;
use crate::error::{ApiError, OrInternal};
use crate::http;
use crate::query::{parse_id, MerchantFilter};

pub async fn list(req: &Request, env: &Env, url: &Url) -> Result<Response, ApiError> {
    let (db, caller) = super::caller(req, env, Scope::MerchantsRead).await?;
    let filter = MerchantFilter::parse(url.query().unwrap_or(""))
        .map_err(|e| ApiError::invalid_request(e.0))?;
    let rows = merchants::list(&db, caller.institution_id, &filter)
        .await
        .or_internal("list merchants")?;
    let page = List::from_overfetch(rows, filter.limit as usize, |m| m.id);
    http::json(200, &page).or_internal("build response")
}

pub async fn get(req: &Request, env: &Env, id: &str) -> Result<Response, ApiError> {
    let (db, caller) = super::caller(req, env, Scope::MerchantsRead).await?;
    // An id that cannot exist and another institution's merchant read exactly like an unknown one.
    let not_found = || ApiError::not_found("no such merchant");
    let id = parse_id(id).ok_or_else(not_found)?;
    let merchant = merchants::get(&db, caller.institution_id, id)
        .await
        .or_internal("read merchant")?
        .ok_or_else(not_found)?;
    http::json(200, &merchant).or_internal("build response")
}
