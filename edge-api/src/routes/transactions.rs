//! `GET /v1/transactions` (spec §4.2).

use shared_types::Scope;
use worker::{Request, Response, Url};

use crate::auth;
use crate::ctx::Ctx;
use crate::db::{transactions, Owner};
use crate::error::{ApiError, OrInternal};
use crate::http;
use crate::query::TransactionFilter;

/// One page of the caller's transactions: the token's check and the page in one statement.
pub async fn list(req: &Request, ctx: &Ctx, url: &Url) -> Result<Response, ApiError> {
    let hash = auth::bearer_hash(req.headers())?;
    let filter = match TransactionFilter::parse(url.query().unwrap_or("")) {
        Ok(filter) => filter,
        Err(e) => {
            // A bad token is refused before a bad parameter, as for every route.
            auth::authorize(ctx, req.headers(), Scope::TransactionsRead).await?;
            return Err(ApiError::invalid_request(e.0));
        }
    };
    let page = transactions::list_json(&ctx.db, Owner::Token(&hash), &filter)
        .await
        .or_internal("list transactions")?;
    auth::allowed(page.scopes.as_deref(), Scope::TransactionsRead)?;
    http::json_text(200, page.envelope(filter.limit)).or_internal("build response")
}
