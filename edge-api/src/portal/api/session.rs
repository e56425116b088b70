//! `/portal/api/login`, `/portal/api/logout` and `/portal/api/session`: the session itself.

use serde::Deserialize;
use serde_json::json;

use super::call::{json_body, reply, Call};
use crate::error::from_json;
use crate::portal::{self, with_cookie, Cookie};
use crate::route::{Answer, Incoming};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    email: String,
    password: String,
}

/// `POST /portal/api/login`: a session cookie and its CSRF token.
pub async fn login(Incoming { mut req, ctx, url }: Incoming<'_>) -> Answer {
    portal::check_origin(&req, url)?;
    let body = json_body(&mut req).await?;
    let Login { email, password } = from_json(&body)?;
    let session = portal::login(ctx, &email, &password).await?;
    let response = reply(
        200,
        json!({
            "csrf_token": session.csrf_token,
            "expires_at": shared_types::time::format_unix(session.expires_at),
        }),
    )?;
    with_cookie(response, Cookie::Start(&session.token))
}

/// `POST /portal/api/logout`: ends the session.
pub async fn logout(c: Call<'_>) -> Answer {
    portal::logout(&c.portal).await?;
    with_cookie(reply(200, json!({"logged_out": true}))?, Cookie::End)
}

/// `GET /portal/api/session`: who is logged in, for how long, and the CSRF token.
pub async fn show(c: Call<'_>) -> Answer {
    let session = &c.portal.session;
    reply(
        200,
        json!({
            "email": session.email,
            "role": session.role,
            "institution": session.institution_name,
            "csrf_token": session.csrf_token,
            "expires_at": shared_types::time::format_unix(session.expires_at),
        }),
    )
}
