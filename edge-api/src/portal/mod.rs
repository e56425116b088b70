//! The institution portal: admins manage API clients and webhook endpoints. Server-rendered pages
//! (`pages.rs`) and a JSON API (`api.rs`) share one session model and one set of operations
//! (`clients`, `webhook_endpoints`, `deliveries`, `merchants`, `balances`, `payments`, `search`,
//! `overview`, `topups`, `usdc_settlement`, `users`, `networks`); every operation is scoped to the session's institution.
//!
//! Sessions: a random cookie (`HttpOnly; Secure; SameSite=Strict; Path=/portal`), stored as its
//! SHA-256, idle end 30 minutes, absolute end 8 hours. Every state-changing request must carry
//! the session's CSRF token (form field `csrf_token` or header `X-CSRF-Token`) and, when the
//! browser sends an `Origin`, come from our own.

pub mod api;
pub mod balances;
pub mod clients;
pub mod csv_cell;
pub mod deliveries;
pub mod fields;
pub mod merchants;
pub mod networks;
pub mod overview;
pub mod pages;
pub mod payments;
pub mod screening;
pub mod search;
pub mod topups;
pub mod usdc_settlement;
pub mod users;
pub mod webhook_endpoints;

use shared_types::ids::InstitutionId;
use shared_types::{ErrorCode, PortalRole};
use worker::{Request, Response, Url};

use crate::crypto;
use crate::ctx::Ctx;
use crate::db::portal::{self as db, Session};
use crate::error::{ApiError, OrInternal};
use crate::throttle::{self, PORTAL_LOGIN, PORTAL_LOGIN_PER_EMAIL};

/// Session cookie name.
pub const COOKIE: &str = "payrail_portal";
/// Idle lifetime of a session.
pub const IDLE_SECONDS: i64 = 30 * 60;
/// Absolute lifetime of a session.
pub const ABSOLUTE_SECONDS: i64 = 8 * 60 * 60;
/// An authenticated portal request: the event's context and the admin's session.
pub struct Portal<'a> {
    /// The request's context.
    pub ctx: &'a Ctx,
    /// The session (its institution scopes everything).
    pub session: Session,
    /// Hash of the cookie, to end the session.
    pub token_hash: String,
    /// Unix seconds, read once for the request.
    pub now: i64,
    /// The institution's object, when its money is held there.
    pub held: Option<crate::db::Db>,
}

/// The refusal of a change (or a secret) to a viewer.
pub fn admin_required() -> ApiError {
    ApiError::new(
        ErrorCode::AdminRequired,
        "only an admin of the institution may do this; ask one",
    )
}

impl Portal<'_> {
    /// Refuses a viewer (for reads that show secrets).
    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.session.role == PortalRole::Admin {
            Ok(())
        } else {
            Err(admin_required())
        }
    }

    /// The database.
    pub fn db(&self) -> &crate::db::Db {
        &self.ctx.db
    }

    /// Where the institution's money tables are read and written: its object when it is held
    /// there, else D1 (as [`Portal::db`]).
    pub fn money(&self) -> &crate::db::Db {
        self.held.as_ref().unwrap_or(&self.ctx.db)
    }

    /// Whether the institution's money is held in its object.
    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }

    /// The institution's object, when its money is held there.
    pub fn held(&self) -> Option<&crate::db::Db> {
        self.held.as_ref()
    }

    /// What a queue message says of where the institution's deliveries live.
    pub fn held_by(&self) -> Option<i64> {
        self.is_held().then_some(self.session.institution_id.0)
    }

    /// The session's institution: every portal query is scoped to it.
    pub fn institution_id(&self) -> InstitutionId {
        self.session.institution_id
    }
}

/// The value of the session cookie, if the request has one.
pub fn session_cookie(req: &Request) -> Option<String> {
    let header = req.headers().get("Cookie").ok().flatten()?;
    header.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        (name == COOKIE && !value.is_empty()).then(|| value.to_owned())
    })
}

/// What the session cookie becomes.
pub enum Cookie<'a> {
    /// A new session with this token.
    Start(&'a str),
    /// Removed (logout).
    End,
}

/// Sets or removes the session cookie on `response`.
pub fn with_cookie(response: Response, cookie: Cookie<'_>) -> Result<Response, ApiError> {
    let (value, max_age) = match cookie {
        Cookie::Start(token) => (token, ABSOLUTE_SECONDS),
        Cookie::End => ("", 0),
    };
    response
        .headers()
        .set(
            "Set-Cookie",
            &format!(
                "{COOKIE}={value}; Path=/portal; HttpOnly; Secure; SameSite=Strict; \
                 Max-Age={max_age}"
            ),
        )
        .or_internal("set cookie")?;
    Ok(response)
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
pub async fn authenticate<'a>(
    req: &Request,
    ctx: &'a Ctx,
    url: &Url,
    csrf: Csrf<'_>,
) -> Result<Portal<'a>, ApiError> {
    let login = || ApiError::new(ErrorCode::LoginRequired, "log in to the portal first");
    let token = session_cookie(req).ok_or_else(login)?;
    let token_hash = crypto::sha256_hex(&token);
    let now = ctx.now();
    let session = db::session(&ctx.db, &token_hash, now)
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
        // A viewer changes nothing but its own session.
        if session.role != PortalRole::Admin && !url.path().ends_with("/logout") {
            return Err(admin_required());
        }
    }

    // Move the idle end, at most once a minute.
    let idle_end = (now + IDLE_SECONDS).min(session.absolute_expires_at);
    if idle_end - session.expires_at >= 60 {
        db::extend_session(&ctx.db, &token_hash, idle_end)
            .await
            .or_internal("extend session")?;
    }
    let held = match session.store {
        crate::db::MoneyStore::D1 => None,
        crate::db::MoneyStore::Object => Some(ctx.institution_object(session.institution_id.0)?),
    };
    Ok(Portal {
        ctx,
        session,
        token_hash,
        now,
        held,
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
pub async fn login(ctx: &Ctx, email: &str, password: &str) -> Result<LoggedIn, ApiError> {
    let email = email.trim().to_ascii_lowercase();
    if email.is_empty() || password.is_empty() {
        return Err(ApiError::invalid_request("email and password are required"));
    }
    let now = ctx.now();
    let subject = format!("login:{email}");
    throttle::count_attempt(ctx, &subject, &PORTAL_LOGIN, &PORTAL_LOGIN_PER_EMAIL).await?;
    let admin = db::admin_by_email(&ctx.db, &email)
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
            return Err(ApiError::new(
                ErrorCode::InvalidCredentials,
                "the e-mail or password is wrong",
            ));
        }
    };
    crate::db::batch(
        &ctx.db,
        vec![
            throttle::clear(ctx, &subject)?,
            throttle::clear_everywhere(&subject)?,
        ],
    )
    .await
    .or_internal("clear login failures")?;
    let token = crypto::random_token("").or_internal("generate session")?;
    let csrf_token = crypto::random_token("").or_internal("generate csrf token")?;
    let expires_at = now + IDLE_SECONDS;
    db::insert_session(
        &ctx.db,
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
pub async fn logout(portal: &Portal<'_>) -> Result<(), ApiError> {
    db::delete_session(portal.db(), &portal.token_hash)
        .await
        .or_internal("end session")
}
