//! The institution's portal users: admins invite users (admin or viewer) with a password shown
//! once, and remove them. An admin cannot remove itself, and the last admin cannot be removed.

use serde::{Deserialize, Serialize};
use shared_types::{ErrorCode, PortalRole};

use super::Portal;
use crate::crypto;
use crate::ctx::timestamp;
use crate::db::portal::{self as db, User};
use crate::error::{ApiError, OrInternal};
use crate::query::parse_id;

/// What inviting a user takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Invite {
    /// Their e-mail (their login).
    pub email: String,
    /// `admin` or `viewer`.
    pub role: String,
}

/// A new user with the password they log in with, shown this once.
#[derive(Debug, Serialize)]
pub struct Invited {
    /// The user.
    #[serde(flatten)]
    pub user: User,
    /// Their first password: hand it over securely; it is stored only as Argon2id.
    pub password: String,
}

/// The institution's users.
pub async fn list(portal: &Portal<'_>) -> Result<Vec<User>, ApiError> {
    db::users(portal.db(), portal.institution_id())
        .await
        .or_internal("read users")
}

/// Adds a user with a random password (shown once).
pub async fn invite(portal: &Portal<'_>, invite: &Invite) -> Result<Invited, ApiError> {
    portal.require_admin()?;
    let email = super::fields::check_email(&invite.email)?.to_ascii_lowercase();
    let role: PortalRole = invite.role.parse().map_err(|_| {
        ApiError::invalid_request(format!(
            "role must be admin or viewer; got {:?}",
            invite.role
        ))
    })?;
    let password = crypto::random_token("").or_internal("generate password")?;
    let hash = crypto::hash_password(&password).or_internal("hash password")?;
    let id = db::insert_user(
        portal.db(),
        portal.institution_id(),
        &email,
        role,
        &hash,
        &timestamp(portal.now)?,
    )
    .await
    .or_internal("add user")?
    .ok_or_else(|| {
        ApiError::new(
            ErrorCode::Conflict,
            format!("{email} already has a portal login"),
        )
    })?;
    let user = list(portal)
        .await?
        .into_iter()
        .find(|u| u.id == id)
        .ok_or("user vanished")
        .or_internal("read user")?;
    Ok(Invited { user, password })
}

/// Removes a user and ends their sessions.
pub async fn remove(portal: &Portal<'_>, id: &str) -> Result<(), ApiError> {
    portal.require_admin()?;
    let not_found = || ApiError::not_found("no such user");
    let id = parse_id(id).ok_or_else(not_found)?;
    if id == portal.session.admin_id {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "you cannot remove yourself; ask another admin",
        ));
    }
    let user = list(portal)
        .await?
        .into_iter()
        .find(|u| u.id == id)
        .ok_or_else(not_found)?;
    if db::delete_user(
        portal.db(),
        portal.institution_id(),
        id,
        portal.session.admin_id,
    )
    .await
    .or_internal("remove user")?
    {
        Ok(())
    } else if user.role == PortalRole::Admin {
        Err(ApiError::new(
            ErrorCode::Conflict,
            "the last admin of the institution cannot be removed",
        ))
    } else {
        Err(not_found())
    }
}
