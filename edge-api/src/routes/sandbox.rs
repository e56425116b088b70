//! `POST /sandbox/transactions/{id}/{action}`: the lifecycle actions for tests and scripts, in
//! sandbox mode only (404 otherwise), with a bearer token of the owning institution carrying
//! `sandbox:write` (granted only to sandbox clients).

use rust_decimal::Decimal;
use serde::Deserialize;
use shared_types::checkout::{parse_decimal, AmountRule, MAX_AMOUNT_MAJOR, MOST_CURRENCY_DIGITS};
use shared_types::ids::Scoped;
use shared_types::lifecycle::Action;
use shared_types::Scope;
use worker::Response;

use crate::auth;
use crate::error::{from_json, ApiError, OrInternal};
use crate::query::parse_id;
use crate::route::Incoming;
use crate::{http, payments};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AmountBody {
    amount: String,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SettleBody {
    network: Option<String>,
}

/// The amount paid or refunded, in the order's currency: checkout's rule for an order's amount
/// (no sign, exponent or spaces; at most 1,000,000), with the most decimal places any currency
/// has; the payment's own currency's places are checked once it is read (`payments::act`).
fn amount(body: &str) -> Result<Decimal, ApiError> {
    let AmountBody { amount } = from_json(body)?;
    parse_decimal(
        &amount,
        &AmountRule {
            field: "amount",
            digits: MOST_CURRENCY_DIGITS,
            unit: "the order's currency",
            max_major: MAX_AMOUNT_MAJOR,
            zero_allowed: false,
        },
    )
    .map_err(|e| ApiError::invalid_request(e.message))
}

/// Applies one lifecycle action to one of the caller's transactions; answers the transaction
/// as it stands afterwards.
pub async fn act(
    Incoming { mut req, ctx, .. }: Incoming<'_>,
    id: &str,
    action: &str,
) -> Result<Response, ApiError> {
    let caller = auth::authorize(ctx, req.headers(), Scope::SandboxWrite).await?;
    let id = parse_id(id).ok_or_else(|| ApiError::not_found("no such transaction"))?;
    let body = http::json_body(&mut req, http::CHECKOUT_BODY_MAX).await?;
    let body = if body.trim().is_empty() {
        "{}"
    } else {
        body.as_str()
    };
    let action = match action {
        "pay" => Action::Pay {
            amount: amount(body)?,
        },
        "refund" => Action::Refund {
            amount: amount(body)?,
        },
        "settle" => {
            let SettleBody { network } = from_json(body)?;
            if let Some(n) = &network {
                if !shared_types::quote::METHODS.iter().any(|m| m.network == n) {
                    return Err(ApiError::invalid_request(format!(
                        "network {n:?} is not one Payrail settles on"
                    )));
                }
            }
            Action::Settle { network }
        }
        "fail" => {
            from_json::<std::collections::BTreeMap<String, serde_json::Value>>(body)?
                .keys()
                .next()
                .map_or(Ok(()), |k| {
                    Err(ApiError::invalid_request(format!(
                        "fail takes no fields; got {k:?}"
                    )))
                })?;
            Action::Fail
        }
        other => {
            return Err(ApiError::not_found(format!(
                "no sandbox action {other:?}; actions are pay, settle, refund and fail"
            )))
        }
    };
    let transaction = payments::act_in(
        ctx,
        caller.store,
        Scoped::new(caller.institution_id, id),
        &action,
    )
    .await?;
    http::json(200, &transaction).or_internal("build response")
}
