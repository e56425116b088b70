//! `GET /v1/transactions` (spec §4.2).

use shared_types::{List, Scope};
use worker::{Request, Response, Url};

use crate::auth;
use crate::ctx::Ctx;
use crate::db::transactions;
use crate::error::{ApiError, OrInternal};
use crate::http;
use crate::query::TransactionFilter;

/// One page of the caller's transactions.
pub async fn list(req: &Request, ctx: &Ctx, url: &Url) -> Result<Response, ApiError> {
    let caller = auth::authorize(ctx, req.headers(), Scope::TransactionsRead).await?;
    let filter = TransactionFilter::parse(url.query().unwrap_or(""))
        .map_err(|e| ApiError::invalid_request(e.0))?;
    let rows = transactions::list(&ctx.db, caller.institution_id, &filter)
        .await
        .or_internal("list transactions")?;
    let page = List::from_overfetch(rows, filter.limit as usize, |t| t.id);
    http::json(200, &page).or_internal("build response")
}
