//! `GET /v1/events`: the events feed. Every event Payrail created for the institution, whether
//! or not a delivery of it succeeded, newest first, each exactly as its deliveries send it: a
//! receiver catches up after an outage from here, without the portal.

use shared_types::Scope;
use worker::Response;

use crate::db::{events, Owner};
use crate::error::{ApiError, OrInternal};
use crate::query::EventFilter;
use crate::route::Incoming;

/// One page of the caller's events: the token's check and the page in one statement.
pub async fn list(Incoming { req, ctx, url }: Incoming<'_>) -> Result<Response, ApiError> {
    let (hash, filter) =
        super::list::request(&req, ctx, url, Scope::EventsRead, EventFilter::parse).await?;
    let page = events::feed(&ctx.db, Owner::Token(&hash), &filter)
        .await
        .or_internal("list events")?;
    super::list::response(page, Scope::EventsRead, filter.limit)
}
