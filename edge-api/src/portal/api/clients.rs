//! `/portal/api/clients`: the institution's API clients.

use serde::Deserialize;
use serde_json::json;

use super::call::{reply, to_json, with_member, Call};
use crate::portal::clients;
use crate::route::Answer;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewClient {
    name: String,
    scopes: Vec<String>,
}

/// `GET /portal/api/clients`.
pub async fn list(c: Call<'_>) -> Answer {
    let clients = clients::list(&c.portal).await?;
    reply(200, json!({"object": "list", "data": clients}))
}

/// `POST /portal/api/clients`: the new client with its secret, shown this once.
pub async fn create(mut c: Call<'_>) -> Answer {
    let NewClient { name, scopes } = c.json().await?;
    let (client, secret) = clients::create(&c.portal, &name, &scopes).await?;
    reply(201, with_member(to_json(&client)?, "client_secret", secret))
}

/// `POST /portal/api/clients/{id}/rotate`: a new secret, shown this once.
pub async fn rotate(c: Call<'_>, id: &str) -> Answer {
    let (client, secret) = clients::rotate(&c.portal, id).await?;
    reply(200, with_member(to_json(&client)?, "client_secret", secret))
}

/// `DELETE /portal/api/clients/{id}`.
pub async fn delete(c: Call<'_>, id: &str) -> Answer {
    clients::delete(&c.portal, id).await?;
    reply(200, json!({"deleted": true, "client_id": id}))
}
