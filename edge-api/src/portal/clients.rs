//! API clients, as an admin manages them from the pages and the JSON API: list, create, rotate
//! the secret, delete. Every function is scoped to the portal session's institution: another
//! institution's client is `not_found`, like an unknown one.

use serde::Serialize;
use shared_types::{Scope, ScopeSet};

use super::fields::check_text;
use super::Portal;
use crate::crypto;
use crate::ctx::timestamp;
use crate::db::clients::{self, ClientRow, NewClient};
use crate::error::{ApiError, OrInternal};

/// An API client as the portal shows it (never its secret).
#[derive(Debug, Serialize)]
pub struct Client {
    /// Always `api_client`.
    pub object: &'static str,
    /// Public id.
    pub client_id: String,
    /// Display name.
    pub name: String,
    /// Granted scopes.
    pub scopes: Vec<String>,
    /// Creation time.
    pub created_at: String,
    /// When a token was last issued.
    pub last_used_at: Option<String>,
    /// When the secret was last rotated.
    pub secret_rotated_at: Option<String>,
}

impl From<ClientRow> for Client {
    fn from(row: ClientRow) -> Self {
        Client {
            object: "api_client",
            client_id: row.client_id,
            name: row.name,
            scopes: row.scopes.split(' ').map(str::to_owned).collect(),
            created_at: row.created_at,
            last_used_at: row.last_used_at,
            secret_rotated_at: row.secret_rotated_at,
        }
    }
}

/// The institution's API clients, newest first.
pub async fn list(portal: &Portal<'_>) -> Result<Vec<Client>, ApiError> {
    Ok(clients::list(portal.db(), portal.institution_id())
        .await
        .or_internal("list clients")?
        .into_iter()
        .map(Client::from)
        .collect())
}

/// Creates a client; returns it and its secret, which is shown this once.
pub async fn create(
    portal: &Portal<'_>,
    name: &str,
    scopes: &[String],
) -> Result<(Client, String), ApiError> {
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
        "cli_{}",
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
    Ok((client.into(), secret))
}

fn no_client() -> ApiError {
    ApiError::not_found("no such API client")
}

/// New secret for a client; the old one and its tokens stop working now.
pub async fn rotate(portal: &Portal<'_>, client_id: &str) -> Result<(Client, String), ApiError> {
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
    Ok((client.into(), secret))
}

/// Deletes a client and its tokens.
pub async fn delete(portal: &Portal<'_>, client_id: &str) -> Result<(), ApiError> {
    match clients::delete(portal.db(), portal.institution_id(), client_id)
        .await
        .or_internal("delete client")?
    {
        true => Ok(()),
        false => Err(no_client()),
    }
}
