//! `POST /oauth/token` (spec §4.1).

use worker::Response;

use crate::error::{ApiError, OrInternal};
use crate::route::Incoming;
use crate::{auth, http};

/// Issues a token for the client credentials in the form body or the Basic header.
pub async fn issue(Incoming { mut req, ctx, url }: Incoming<'_>) -> Result<Response, ApiError> {
    // Spec §5.2: secrets never travel in a URL. Refuse any query rather than risk reading one.
    if url.query().is_some_and(|q| !q.is_empty()) {
        return Err(ApiError::invalid_request(
            "the token endpoint takes no query parameters; send the fields in an \
             application/x-www-form-urlencoded body",
        ));
    }
    let form = http::body_of_type(
        &mut req,
        "application/x-www-form-urlencoded",
        http::TOKEN_BODY_MAX,
    )
    .await?;
    let authorization = req
        .headers()
        .get("Authorization")
        .or_internal("read header")?;
    let token_request = auth::parse_token_request(&form, authorization.as_deref())?;
    let token = auth::issue_token(ctx, token_request).await?;
    let response = http::json(200, &token).or_internal("build response")?;
    // RFC 6749 §5.1.
    response
        .headers()
        .set("Pragma", "no-cache")
        .or_internal("set header")?;
    Ok(response)
}
