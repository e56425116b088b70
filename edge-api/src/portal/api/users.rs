//! `/portal/api/users`: who has a portal login for the institution.

use serde_json::json;

use super::call::{reply, to_json, Call};
use crate::portal::users::{self, Invite};
use crate::route::Answer;

/// `GET /portal/api/users`.
pub async fn list(c: Call<'_>) -> Answer {
    let list = users::list(&c.portal).await?;
    reply(200, json!({"object": "list", "data": list}))
}

/// `POST /portal/api/users`: an invitation, with the first password shown once.
pub async fn invite(mut c: Call<'_>) -> Answer {
    let invite: Invite = c.json().await?;
    reply(201, to_json(&users::invite(&c.portal, &invite).await?)?)
}

/// `DELETE /portal/api/users/{id}`.
pub async fn remove(c: Call<'_>, id: &str) -> Answer {
    users::remove(&c.portal, id).await?;
    reply(200, json!({"deleted": true, "id": id}))
}
