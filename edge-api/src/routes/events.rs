//! `GET /v1/events`: the events feed. Every event Payrail created for the institution, whether
//! or not a delivery of it succeeded, newest first, each exactly as its deliveries send it: a
//! receiver catches up after an outage from here, without the portal. `GET /v1/events/{id}`:
//! one of them, as a receiver checks a delivery it got (by its `Payrail-Event-Id`).

use shared_types::ids::{EventId, InstitutionId};
use shared_types::Scope;
use worker::Response;

use crate::auth;
use crate::db::{events, Owner};
use crate::error::{ApiError, OrInternal};
use crate::http;
use crate::query::EventFilter;
use crate::route::Incoming;

use super::list::{read_page, read_session, with_bookmark, Freshness};

/// One page of the caller's events: the token's check and the page in one statement.
pub async fn list(Incoming { req, ctx, url }: Incoming<'_>) -> Result<Response, ApiError> {
    let (hash, filter) =
        super::list::request(&req, ctx, url, Scope::EventsRead, EventFilter::parse).await?;
    let owner = Owner::MoneyOfToken(&hash);
    let page = read_page(&req, ctx, Freshness::Replica, owner, async |db, owner| {
        events::feed(db, owner, &filter).await
    })
    .await?;
    super::list::response(page, Scope::EventsRead, filter.limit)
}

/// One of the caller's events, exactly as its deliveries send it: the token's check and the
/// read in one statement, on the primary (a receiver looks an event up right after its
/// delivery). An id that cannot be an event's, or another institution's event, reads exactly
/// like an unknown one.
pub async fn get(Incoming { req, ctx, .. }: Incoming<'_>, id: &str) -> Result<Response, ApiError> {
    let hash = auth::bearer_hash(req.headers())?;
    let not_found = || ApiError::not_found("no such event");
    let Ok(id) = EventId::parse(id) else {
        auth::authorize(ctx, req.headers(), Scope::EventsRead).await?;
        return Err(not_found());
    };
    let session = read_session(&req, ctx, Freshness::Primary)?;
    let mut read = events::get_json(&session, Owner::MoneyOfToken(&hash), &id)
        .await
        .or_internal("read event")?;
    auth::allowed(read.scopes.as_deref(), Scope::EventsRead)?;
    if let Some(institution) = read.object_institution {
        let object = ctx.institution_object(institution)?;
        read = events::get_json(&object, Owner::Institution(InstitutionId(institution)), &id)
            .await
            .or_internal("read event")?;
    }
    let event = read.event;
    with_bookmark(
        http::json_text(200, &event.ok_or_else(not_found)?).or_internal("build response")?,
        &session,
    )
}
