//! What the partner API's lists share: the token refused before a bad parameter, and the scope
//! checked on what the list's own statement read.

use shared_types::Scope;
use worker::{Request, Response, Url};

use crate::auth;
use crate::ctx::Ctx;
use crate::db::JsonPage;
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

/// The page a list statement built, once the token it read holds `scope`.
pub fn response(page: JsonPage, scope: Scope, limit: u32) -> Result<Response, ApiError> {
    auth::allowed(page.scopes.as_deref(), scope)?;
    let body = page.envelope(limit).or_internal("read page")?;
    http::json_js(200, &body).or_internal("build response")
}
