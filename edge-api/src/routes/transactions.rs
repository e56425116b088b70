//! `GET /v1/transactions` (spec §4.2).

use shared_types::Scope;
use worker::Response;

use crate::db::{transactions, Owner};
use crate::error::{ApiError, OrInternal};
use crate::query::TransactionFilter;
use crate::route::Incoming;

/// One page of the caller's transactions: the token's check and the page in one statement.
pub async fn list(Incoming { req, ctx, url }: Incoming<'_>) -> Result<Response, ApiError> {
    let (hash, filter) = super::list::request(
        &req,
        ctx,
        url,
        Scope::TransactionsRead,
        TransactionFilter::parse,
    )
    .await?;
    let page = transactions::list_json(&ctx.db, Owner::Token(&hash), &filter)
        .await
        .or_internal("list transactions")?;
    super::list::response(page, Scope::TransactionsRead, filter.limit)
}
