//! What the partner API's lists share: the token refused before a bad parameter, and the scope
//! checked on what the list's own statement read.

use shared_types::Scope;
use worker::{Request, Response, Url};

use crate::auth;
use crate::ctx::Ctx;
use shared_types::ids::InstitutionId;

use crate::db::{Db, JsonPage, Owner};
use crate::error::{ApiError, OrInternal};
use crate::http;
use crate::query::QueryError;

/// A partner list request: the bearer token's hash and the parsed filter. A bad token is refused
/// before a bad parameter, as for every route; a good one is checked later, in the list's own
/// statement ([`response`]).
pub async fn request<F>(
    req: &Request,
    ctx: &Ctx,
    url: &Url,
    scope: Scope,
    parse: fn(&str) -> Result<F, QueryError>,
) -> Result<(String, F), ApiError> {
    let hash = auth::bearer_hash(req.headers())?;
    match parse(url.query().unwrap_or("")) {
        Ok(filter) => Ok((hash, filter)),
        Err(e) => {
            auth::authorize(ctx, req.headers(), scope).await?;
            Err(ApiError::invalid_request(e.0))
        }
    }
}

/// The request header a client sends back the `Payrail-Bookmark` of an earlier answer in, to
/// read at least what that answer saw.
pub const BOOKMARK: &str = "Payrail-Bookmark";

/// Longest bookmark accepted (D1's are about 50 characters).
const BOOKMARK_MAX: usize = 128;

/// Where a read may be answered from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Any replica (D1's `first-unconstrained`): lists, which a client pages through and may
    /// read a moment behind.
    Replica,
    /// The primary (`first-primary`): lookups by id, which a receiver makes right after a
    /// webhook and must show what the webhook said.
    Primary,
}

/// A D1 session for a partner read: on the primary for [`Freshness::Primary`] (newer than any
/// bookmark), else from the request's `Payrail-Bookmark` when it carries one (a read at least as
/// new as that answer's), else on any replica. A `Payrail-Bookmark` that is not shaped like one
/// is refused by name. Writes and money decisions never use a session: they go to the database
/// itself, the primary.
pub fn read_session(req: &Request, ctx: &Ctx, freshness: Freshness) -> Result<Db, ApiError> {
    let bookmark = bookmark(req)?;
    let start = match (freshness, &bookmark) {
        (Freshness::Primary, _) => PRIMARY,
        (Freshness::Replica, Some(b)) => b.as_str(),
        (Freshness::Replica, None) => "first-unconstrained",
    };
    open_session(ctx, start)
}

/// A read session of the context's database, from `start` (a constraint or a bookmark).
fn open_session(ctx: &Ctx, start: &str) -> Result<Db, ApiError> {
    let Db::Primary(primary) = &ctx.db else {
        return Err(ApiError::internal(
            "open a read session",
            "already reading through one",
        ));
    };
    primary
        .with_session(Some(start))
        .map(Db::Session)
        .or_internal("open a read session")
}

/// D1's constraint for a session that starts on the primary.
const PRIMARY: &str = "first-primary";

/// The request's `Payrail-Bookmark`, if it sends one shaped like D1's.
fn bookmark(req: &Request) -> Result<Option<String>, ApiError> {
    let Some(b) = req.headers().get(BOOKMARK).ok().flatten() else {
        return Ok(None);
    };
    let shaped = !b.is_empty()
        && b.len() <= BOOKMARK_MAX
        && b.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-');
    if shaped {
        Ok(Some(b))
    } else {
        Err(ApiError::invalid_request(format!(
            "the {BOOKMARK} header must be a bookmark from an earlier answer's {BOOKMARK} header"
        )))
    }
}

/// Reads a page as [`read_session`] says, and again on the primary when the first session's
/// answer cannot be used: a replica that does not know the token (issued a moment ago, not yet
/// copied there: a new token never reads as a bad one), or a bookmark D1 does not take (the
/// primary is at least as new as any bookmark). A list of money whose institution the directory
/// holds in its object is read again there, keyed by that institution. Returns the page and the
/// session that answered the token.
pub async fn read_page(
    req: &Request,
    ctx: &Ctx,
    freshness: Freshness,
    owner: Owner<'_>,
    read: impl AsyncFn(&Db, Owner<'_>) -> crate::db::DbResult<JsonPage>,
) -> Result<(JsonPage, Db), ApiError> {
    let (page, session) = read_directory_page(req, ctx, freshness, owner, &read).await?;
    let Some(institution) = page.object_institution else {
        return Ok((page, session));
    };
    let object = ctx.institution_object(institution)?;
    let mut held = read(&object, Owner::Institution(InstitutionId(institution)))
        .await
        .or_internal("read page")?;
    held.scopes = page.scopes;
    Ok((held, session))
}

/// [`read_page`] in D1: the token, and the page when D1 holds it.
async fn read_directory_page(
    req: &Request,
    ctx: &Ctx,
    freshness: Freshness,
    owner: Owner<'_>,
    read: &impl AsyncFn(&Db, Owner<'_>) -> crate::db::DbResult<JsonPage>,
) -> Result<(JsonPage, Db), ApiError> {
    let session = read_session(req, ctx, freshness)?;
    if freshness == Freshness::Primary {
        let page = read(&session, owner).await.or_internal("read page")?;
        return Ok((page, session));
    }
    match read(&session, owner).await {
        Ok(page) if page.scopes.is_some() => return Ok((page, session)),
        Ok(_) => {}
        Err(e) if bookmark(req)?.is_none() => return Err(e).or_internal("read page"),
        Err(_) => {}
    }
    let primary = open_session(ctx, PRIMARY)?;
    let page = read(&primary, owner).await.or_internal("read page")?;
    Ok((page, primary))
}

/// Sets `Payrail-Bookmark` on `response`: where the session's reads stood, for the client's next
/// read.
pub fn with_bookmark(mut response: Response, session: &Db) -> Result<Response, ApiError> {
    if let Some(bookmark) = session.bookmark().or_internal("read the bookmark")? {
        response
            .headers_mut()
            .set(BOOKMARK, &bookmark)
            .or_internal("build response")?;
    }
    Ok(response)
}

/// The page a list statement built, once the token it read holds `scope`, with the session's
/// bookmark.
pub fn response(
    (page, session): (JsonPage, Db),
    scope: Scope,
    limit: u32,
) -> Result<Response, ApiError> {
    auth::allowed(page.scopes.as_deref(), scope)?;
    let body = page.envelope(limit).or_internal("read page")?;
    with_bookmark(
        http::json_js(200, &body).or_internal("build response")?,
        &session,
    )
}
