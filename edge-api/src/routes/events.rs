//! `GET /v1/events`: the events feed. Every event Payrail created for the institution, whether
//! or not a delivery of it succeeded, newest first, each exactly as its deliveries send it: a
//! receiver catches up after an outage from here, without the portal.

use shared_types::Scope;
use worker::{Request, Response, Url};

use crate::auth;
use crate::ctx::Ctx;
use crate::db::{events, Owner};
use crate::error::{ApiError, OrInternal};
use crate::http;
use crate::query::EventFilter;

/// One page of the caller's events: the token's check and the page in one statement.
pub async fn list(req: &Request, ctx: &Ctx, url: &Url) -> Result<Response, ApiError> {
    let hash = auth::bearer_hash(req.headers())?;
    let filter = match EventFilter::parse(url.query().unwrap_or("")) {
        Ok(filter) => filter,
        Err(e) => {
            // A bad token is refused before a bad parameter, as for every route.
            auth::authorize(ctx, req.headers(), Scope::EventsRead).await?;
            return Err(ApiError::invalid_request(e.0));
        }
    };
    let page = events::feed(&ctx.db, Owner::Token(&hash), &filter)
        .await
        .or_internal("list events")?;
    auth::allowed(page.scopes.as_deref(), Scope::EventsRead)?;
    http::json_text(200, page.envelope(filter.limit)).or_internal("build response")
}
