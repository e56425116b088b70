//! `GET /v1/transactions` (spec §4.2).

use shared_types::{List, Scope};
use worker::{Env, Request, Response, Url};

use crate::db::transactions;
use crate::error::{ApiError, OrInternal};
use crate::http;
use crate::query::TransactionFilter;

pub async fn list(req: &Request, env: &Env, url: &Url) -> Result<Response, ApiError> {
    let (db, caller) = super::caller(req, env, Scope::TransactionsRead).await?;
    let filter = TransactionFilter::parse(url.query().unwrap_or(""))
        .map_err(|e| ApiError::invalid_request(e.0))?;
    let rows = transactions::list(&db, caller.institution_id, &filter)
        .await
        .or_internal("list transactions")?;
    let page = List::from_overfetch(rows, filter.limit as usize, |t| t.id);
    http::json(200, &page).or_internal("build response")
}
