//! API clients, as an admin manages them from the pages and the JSON API: list, create, rotate
//! the secret, delete. Every function is scoped to the portal session's institution: another
//! institution's client is `not_found`, like an unknown one.

use shared_types::ids::ClientId;
use shared_types::{Scope, ScopeSet};

use super::fields::check_text;
use super::Portal;
use crate::crypto;
use crate::ctx::timestamp;
pub use crate::db::clients::ApiClient;
use crate::db::clients::{self, NewClient};
use crate::error::{ApiError, OrInternal};

/// The institution's API clients, newest first.
pub async fn list(portal: &Portal<'_>) -> Result<Vec<ApiClient>, ApiError> {
    clients::list(portal.db(), portal.institution_id())
        .await
        .or_internal("list clients")
}

/// Creates a client; returns it and its secret, which is shown this once.
pub async fn create(
    portal: &Portal<'_>,
    name: &str,
    scopes: &[String],
) -> Result<(ApiClient, String), ApiError> {
    let name = check_text("name", name, 1, 100)?;
    if scopes.is_empty() {
        return Err(ApiError::invalid_request(
            "scopes must list at least one of transactions:read, merchants:read",
        ));
    }
    let scopes = ScopeSet::parse(&scopes.join(" ")).map_err(|e| {
        ApiError::invalid_request(format!(
            "scopes: {e}; the scopes are transactions:read, merchants:read (and sandbox:write \
             in sandbox mode)"
        ))
    })?;
    if scopes.contains(Scope::SandboxWrite) && !portal.ctx.sandbox() {
        return Err(ApiError::invalid_request(
            "scopes: sandbox:write is granted only in sandbox mode",
        ));
    }
    let client_id = format!(
        "{}{}",
        ClientId::PREFIX,
        hex::encode(crypto::random_bytes::<8>().or_internal("generate id")?)
    );
    let secret = crypto::random_token(payrail_credentials::CLIENT_SECRET_PREFIX)
        .or_internal("generate secret")?;
    clients::insert(
        portal.db(),
        &NewClient {
            institution_id: portal.institution_id(),
            client_id: &client_id,
            name: &name,
            secret_hash: &crypto::sha256_hex(&secret),
            scopes: &scopes.to_string(),
            now_text: &timestamp(portal.now)?,
        },
    )
    .await
    .or_internal("create client")?;
    let client = clients::get(portal.db(), portal.institution_id(), &client_id)
        .await
        .or_internal("read client")?
        .ok_or("client vanished")
        .or_internal("read client")?;
    Ok((client, secret))
}

fn no_client() -> ApiError {
    ApiError::not_found("no such API client")
}

/// New secret for a client; the old one and its tokens stop working now.
pub async fn rotate(portal: &Portal<'_>, client_id: &str) -> Result<(ApiClient, String), ApiError> {
    // An id not of a client's shape reads like an unknown one, without a query.
    ClientId::parse(client_id).map_err(|_| no_client())?;
    let secret = crypto::random_token(payrail_credentials::CLIENT_SECRET_PREFIX)
        .or_internal("generate secret")?;
    let rotated = clients::rotate(
        portal.db(),
        portal.institution_id(),
        client_id,
        &crypto::sha256_hex(&secret),
        &timestamp(portal.now)?,
    )
    .await
    .or_internal("rotate client")?;
    if !rotated {
        return Err(no_client());
    }
    let client = clients::get(portal.db(), portal.institution_id(), client_id)
        .await
        .or_internal("read client")?
        .ok_or_else(no_client)?;
    Ok((client, secret))
}

/// Deletes a client and its tokens.
pub async fn delete(portal: &Portal<'_>, client_id: &str) -> Result<(), ApiError> {
    ClientId::parse(client_id).map_err(|_| no_client())?;
    match clients::delete(portal.db(), portal.institution_id(), client_id)
        .await
        .or_internal("delete client")?
    {
        true => Ok(()),
        false => Err(no_client()),
    }
}
