//! The institution portal: admins manage API clients and webhook endpoints. Server-rendered pages
//! (`pages.rs`) and a JSON API (`api.rs`) share one session model and one set of operations
//! (`ops.rs`); every operation is scoped to the session's institution.
//!
//! Sessions: a random cookie (`HttpOnly; Secure; SameSite=Strict; Path=/portal`), stored as its
//! SHA-256, idle end 30 minutes, absolute end 8 hours. Every state-changing request must carry
//! the session's CSRF token (form field `csrf_token` or header `X-CSRF-Token`) and, when the
//! browser sends an `Origin`, come from our own.

pub mod api;
pub mod deliveries;
pub mod ops;
pub mod pages;

use shared_types::ErrorCode;
use worker::{Env, Request, Url};

use crate::crypto;
use crate::db::clients as failures;
use crate::db::portal::{self as db, Session};
use crate::error::{ApiError, OrInternal};

/// Session cookie name.
pub const COOKIE: &str = "payrail_portal";
/// Idle lifetime of a session.
pub const IDLE_SECONDS: i64 = 30 * 60;
/// Absolute lifetime of a session.
pub const ABSOLUTE_SECONDS: i64 = 8 * 60 * 60;
/// Failed logins allowed per e-mail and address per window.
pub const MAX_LOGIN_FAILURES: i64 = 5;
/// Throttle window for logins.
pub const LOGIN_WINDOW_SECONDS: i64 = 15 * 60;

/// An authenticated portal request.
pub struct Portal {
    /// The database.
    pub db: worker::D1Database,
    /// The session (its institution scopes everything).
    pub session: Session,
    /// Hash of the cookie, to end the session.
    pub token_hash: String,
    /// Unix seconds.
    pub now: i64,
    /// Whether the deployment runs in sandbox mode.
    pub sandbox: bool,
    /// Key that seals webhook signing secrets, when configured.
    pub sealing_key: Option<[u8; 32]>,
}

/// The value of the session cookie, if the request has one.
pub fn session_cookie(req: &Request) -> Option<String> {
    let header = req.headers().get("Cookie").ok().flatten()?;
    header.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        (name == COOKIE && !value.is_empty()).then(|| value.to_owned())
    })
}

/// `Set-Cookie` for a new session.
pub fn set_cookie(token: &str) -> String {
    format!("{COOKIE}={token}; Path=/portal; HttpOnly; Secure; SameSite=Strict; Max-Age={ABSOLUTE_SECONDS}")
}

/// `Set-Cookie` that removes the session cookie.
pub fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/portal; HttpOnly; Secure; SameSite=Strict; Max-Age=0")
}

/// The 32-byte key in `PAYRAIL_ENCRYPTION_KEY` (base64), if set and well-formed.
pub fn sealing_key(env: &Env) -> Option<[u8; 32]> {
    use base64::Engine;
    let text = env
        .secret("PAYRAIL_ENCRYPTION_KEY")
        .map(|s| s.to_string())
        .or_else(|_| env.var("PAYRAIL_ENCRYPTION_KEY").map(|v| v.to_string()))
        .ok()?;
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()?
        .try_into()
        .ok()
}

/// Where a state-changing request carries its CSRF token.
pub enum Csrf<'a> {
    /// A read: no token needed.
    NotNeeded,
    /// The `X-CSRF-Token` header (JSON API).
    Header,
    /// A form field's value (pages).
    Form(Option<&'a str>),
}

/// Authenticates the session cookie, checks CSRF for changes, and moves the idle end forward.
pub async fn authenticate(
    req: &Request,
    env: &Env,
    url: &Url,
    csrf: Csrf<'_>,
) -> Result<Portal, ApiError> {
    let login = || ApiError::new(ErrorCode::LoginRequired, "log in to the portal first");
    let token = session_cookie(req).ok_or_else(login)?;
    let token_hash = crypto::sha256_hex(&token);
    let database = crate::routes::database(env)?;
    let now = crate::routes::now();
    let session = db::session(&database, &token_hash, now)
        .await
        .or_internal("read session")?
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::LoginRequired,
                "the session has ended; log in again",
            )
        })?;

    let presented = match csrf {
        Csrf::NotNeeded => None,
        Csrf::Header => Some(
            req.headers()
                .get("X-CSRF-Token")
                .or_internal("read header")?
                .unwrap_or_default(),
        ),
        Csrf::Form(value) => Some(value.unwrap_or_default().to_owned()),
    };
    if let Some(presented) = presented {
        check_origin(req, url)?;
        if !crypto::constant_time_eq(&presented, &session.csrf_token) {
            return Err(ApiError::new(
                ErrorCode::CsrfFailed,
                "the CSRF token is missing or wrong; reload the page and try again",
            ));
        }
    }

    // Move the idle end, at most once a minute.
    let idle_end = (now + IDLE_SECONDS).min(session.absolute_expires_at);
    if idle_end - session.expires_at >= 60 {
        db::extend_session(&database, &token_hash, idle_end)
            .await
            .or_internal("extend session")?;
    }
    Ok(Portal {
        db: database,
        session,
        token_hash,
        now,
        sandbox: crate::routes::sandbox(env),
        sealing_key: sealing_key(env),
    })
}

/// Refuses a request whose `Origin` (when the browser sends one) is not ours.
pub fn check_origin(req: &Request, url: &Url) -> Result<(), ApiError> {
    let origin = req.headers().get("Origin").or_internal("read header")?;
    match origin {
        Some(origin) if origin != url.origin().ascii_serialization() => Err(ApiError::new(
            ErrorCode::CsrfFailed,
            "cross-origin requests to the portal are refused",
        )),
        _ => Ok(()),
    }
}

/// A successful login: the cookie to set and the session's CSRF token.
pub struct LoggedIn {
    /// Cookie value.
    pub token: String,
    /// CSRF token.
    pub csrf_token: String,
    /// Unix seconds.
    pub expires_at: i64,
}

/// Checks e-mail and password, throttling failures per e-mail and address, and opens a session.
pub async fn login(
    env: &Env,
    source: &str,
    email: &str,
    password: &str,
) -> Result<LoggedIn, ApiError> {
    let email = email.trim().to_ascii_lowercase();
    if email.is_empty() || password.is_empty() {
        return Err(ApiError::invalid_request("email and password are required"));
    }
    let database = crate::routes::database(env)?;
    let now = crate::routes::now();
    let subject = format!("login:{email}");
    if let Some(f) = failures::failures(&database, &subject, source)
        .await
        .or_internal("read login failures")?
    {
        let window_end = f.window_start + LOGIN_WINDOW_SECONDS;
        if f.failures >= MAX_LOGIN_FAILURES && window_end > now {
            return Err(ApiError::new(
                ErrorCode::RateLimited,
                "too many failed logins; try again later",
            )
            .with_retry_after((window_end - now) as u64));
        }
    }
    let admin = db::admin_by_email(&database, &email)
        .await
        .or_internal("read admin")?;
    // Verify against a stand-in for unknown e-mails, so timing does not tell which exist.
    let phc = admin
        .as_ref()
        .map_or(crypto::DUMMY_PASSWORD_HASH, |a| a.password_hash.as_str());
    let verified = crypto::verify_password(password, phc);
    let admin = match admin {
        Some(admin) if verified => admin,
        _ => {
            failures::record_failure(&database, &subject, source, now, LOGIN_WINDOW_SECONDS)
                .await
                .or_internal("record login failure")?;
            return Err(ApiError::new(
                ErrorCode::InvalidCredentials,
                "the e-mail or password is wrong",
            ));
        }
    };
    failures::clear_failures(&database, &subject, source)
        .await
        .or_internal("clear login failures")?;
    let token = crypto::random_token("").or_internal("generate session")?;
    let csrf_token = crypto::random_token("").or_internal("generate csrf token")?;
    let expires_at = now + IDLE_SECONDS;
    db::insert_session(
        &database,
        &crypto::sha256_hex(&token),
        &admin,
        &csrf_token,
        now,
        expires_at,
        now + ABSOLUTE_SECONDS,
    )
    .await
    .or_internal("store session")?;
    Ok(LoggedIn {
        token,
        csrf_token,
        expires_at,
    })
}

/// Ends the session.
pub async fn logout(portal: &Portal) -> Result<(), ApiError> {
    db::delete_session(&portal.db, &portal.token_hash)
        .await
        .or_internal("end session")
}
