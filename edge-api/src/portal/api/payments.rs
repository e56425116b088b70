//! `/portal/api/payments`: the institution's payments and their refunds.

use serde::Deserialize;
use shared_types::ids::Scoped;

use super::call::{reply, to_json, Call};
use crate::error::OrInternal;
use crate::money::refund::{self, returns, RefundRequest};
use crate::portal::balances;
use crate::portal::payments::{self, payment_id};
use crate::route::Answer;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefundBody {
    amount: String,
    address: String,
    /// For a payment made in more than one way to pay: the part refunded.
    #[serde(default)]
    part: Option<i64>,
}

/// `GET /portal/api/payments`.
pub async fn list(c: Call<'_>) -> Answer {
    reply(200, to_json(&payments::list(&c.portal, c.query()).await?)?)
}

/// `GET /portal/api/payments/{id}`.
pub async fn show(c: Call<'_>, id: &str) -> Answer {
    reply(
        200,
        to_json(&payments::detail(&c.portal, payment_id(id)?).await?)?,
    )
}

/// `POST /portal/api/payments/{id}/refunds/preview`: what the refund would send, and what it
/// would do to the merchant's balance (`balance`).
pub async fn preview_refund(mut c: Call<'_>, id: &str) -> Answer {
    let id = payment_id(id)?;
    let RefundBody {
        amount,
        address,
        part,
    } = c.json().await?;
    let request = RefundRequest {
        amount: &amount,
        address: &address,
        part,
    };
    let portal = &c.portal;
    let preview = refund::preview(
        portal.ctx,
        portal.held(),
        portal.institution_id(),
        id,
        &request,
    )
    .await?;
    let effect = balances::refund_effect(portal, (id, preview.part), &preview.base_units).await?;
    let mut body = to_json(&preview)?;
    body["balance"] = to_json(&effect)?;
    reply(200, body)
}

/// `POST /portal/api/payments/{id}/refunds`: a refund, once per `Idempotency-Key`.
pub async fn refund(mut c: Call<'_>, id: &str) -> Answer {
    let id = payment_id(id)?;
    let key = idempotency_key(&c)?;
    let RefundBody {
        amount,
        address,
        part,
    } = c.json().await?;
    let request = RefundRequest {
        amount: &amount,
        address: &address,
        part,
    };
    let portal = &c.portal;
    let (view, created) = refund::request(
        portal.ctx,
        portal.held(),
        portal.institution_id(),
        id,
        &request,
        &key,
        &portal.session.email,
    )
    .await?;
    reply(if created { 201 } else { 200 }, to_json(&view)?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReturnBody {
    /// The payment's deposit address the money reached.
    deposit: String,
    /// The customer's address to send it back to.
    address: String,
}

/// `POST /portal/api/payments/{id}/returns`: everything that reached a deposit address after
/// the payment was credited, sent back to the customer, once per `Idempotency-Key`.
pub async fn return_extra(mut c: Call<'_>, id: &str) -> Answer {
    let id = payment_id(id)?;
    let key = idempotency_key(&c)?;
    let ReturnBody { deposit, address } = c.json().await?;
    let portal = &c.portal;
    let (view, created) = returns::return_extra(
        portal.ctx,
        portal.held(),
        Scoped::new(portal.institution_id(), id),
        (&deposit, &address),
        &key,
        &portal.session.email,
    )
    .await?;
    reply(if created { 201 } else { 200 }, to_json(&view)?)
}

/// The request's `Idempotency-Key` header (empty when absent: the refund refuses that).
fn idempotency_key(c: &Call<'_>) -> Result<String, crate::error::ApiError> {
    Ok(c.req
        .headers()
        .get("Idempotency-Key")
        .or_internal("read header")?
        .unwrap_or_default())
}
