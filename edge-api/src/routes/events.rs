//! `GET /v1/events`: the events feed. Every event Payrail created for the institution, whether
//! or not a delivery of it succeeded, newest first, each exactly as its deliveries send it: a
//! receiver catches up after an outage from here, without the portal.

use shared_types::Scope;
use worker::Response;

use crate::db::{events, Owner};
use crate::error::ApiError;
use crate::query::EventFilter;
use crate::route::Incoming;

use super::list::{read_page, Freshness};

/// One page of the caller's events: the token's check and the page in one statement.
pub async fn list(Incoming { req, ctx, url }: Incoming<'_>) -> Result<Response, ApiError> {
    let (hash, filter) =
        super::list::request(&req, ctx, url, Scope::EventsRead, EventFilter::parse).await?;
    let page = read_page(&req, ctx, Freshness::Replica, async |db| {
        events::feed(db, Owner::Token(&hash), &filter).await
    })
    .await?;
    super::list::response(page, Scope::EventsRead, filter.limit)
}
