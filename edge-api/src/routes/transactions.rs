//! `GET /v1/transactions` (spec §4.2).

use shared_types::Scope;
use worker::Response;

use crate::db::{transactions, Owner};
use crate::error::ApiError;
use crate::query::TransactionFilter;
use crate::route::Incoming;

use super::list::{read_page, Freshness};

/// One page of the caller's transactions: the token's check and the page in one statement (or,
/// when the institution's money is in its object, the page read there).
pub async fn list(Incoming { req, ctx, url }: Incoming<'_>) -> Result<Response, ApiError> {
    let (hash, filter) = super::list::request(
        &req,
        ctx,
        url,
        Scope::TransactionsRead,
        TransactionFilter::parse,
    )
    .await?;
    // A lookup by id is what a receiver makes right after a webhook: the primary answers it.
    let freshness = if filter.id.is_some() {
        Freshness::Primary
    } else {
        Freshness::Replica
    };
    let owner = Owner::MoneyOfToken(&hash);
    let page = read_page(&req, ctx, freshness, owner, async |db, owner| {
        transactions::list_json(db, owner, &filter).await
    })
    .await?;
    super::list::response(page, Scope::TransactionsRead, filter.limit)
}
