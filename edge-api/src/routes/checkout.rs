//! Checkout: `POST /checkout/sessions` (public, publishable key, CORS), the hosted page
//! `GET /checkout/{id}`, its way-to-pay form, and its sandbox controls.

use std::str::FromStr;

use rust_decimal::Decimal;
use shared_types::checkout::CheckoutOptions;
use shared_types::lifecycle::Action;
use shared_types::{quote, time, ErrorCode};
use worker::{Env, Method, Request, Response, Url};

use crate::db::checkout::{self as db, NewSession};
use crate::error::{from_json, ApiError, OrInternal};
use crate::{chain, crypto, http, pages, payments};

/// How long a checkout stays payable.
pub const SESSION_SECONDS: i64 = 60 * 60;
/// How long an idempotency key holds.
pub const KEY_SECONDS: i64 = 24 * 60 * 60;

/// `/checkout/sessions`: OPTIONS (CORS preflight) or POST.
pub async fn sessions(mut req: Request, env: &Env, url: &Url) -> Result<Response, ApiError> {
    let response = match req.method() {
        Method::Options => Response::empty()
            .map(|r| r.with_status(204))
            .or_internal("build response"),
        Method::Post => match create(&mut req, env, url).await {
            Ok((status, body)) => http::json(status, &body).or_internal("build response"),
            Err(err) => http::error(&err).or_internal("build response"),
        },
        _ => Err(
            ApiError::new(ErrorCode::MethodNotAllowed, "use POST /checkout/sessions")
                .with_allow("POST, OPTIONS"),
        ),
    }?;
    // Public endpoint: any merchant origin may call it; no cookies are involved.
    let headers = response.headers();
    for (name, value) in [
        ("Access-Control-Allow-Origin", "*"),
        ("Access-Control-Allow-Methods", "POST, OPTIONS"),
        ("Access-Control-Allow-Headers", "Content-Type"),
        ("Access-Control-Max-Age", "600"),
    ] {
        headers.set(name, value).or_internal("set header")?;
    }
    Ok(response)
}

/// The session endpoint's answer.
#[derive(serde::Serialize)]
struct Created {
    id: String,
    transaction_id: i64,
    url: String,
}

fn hosted_url(url: &Url, session_id: &str) -> String {
    format!(
        "{}/checkout/{session_id}",
        url.origin().ascii_serialization()
    )
}

/// Reads the options: a JSON object whose `amount` may be a number or decimal text.
fn parse_options(body: &str) -> Result<CheckoutOptions, ApiError> {
    let not_object =
        || ApiError::invalid_request("the body must be a JSON object of checkout options");
    let mut value: serde_json::Value = serde_json::from_str(body).map_err(|_| not_object())?;
    let object = value.as_object_mut().ok_or_else(not_object)?;
    if let Some(serde_json::Value::Number(n)) = object.get("amount") {
        // The shortest text that reads back as the same number, as the browser sends it.
        let text = n.to_string();
        object.insert("amount".into(), serde_json::Value::String(text));
    }
    let options: CheckoutOptions = from_json(&value.to_string())?;
    options
        .validate()
        .map_err(|e| ApiError::invalid_request(e.message))?;
    Ok(options)
}

/// Fingerprint of everything but the key: the same key with other options is a conflict.
fn fingerprint(options: &CheckoutOptions) -> Result<String, ApiError> {
    let amount = Decimal::from_str(&options.amount).or_internal("parse amount")?;
    let canonical = CheckoutOptions {
        idempotency_key: None,
        amount: amount.normalize().to_string(),
        ..options.clone()
    };
    let text = serde_json::to_string(&canonical).or_internal("encode options")?;
    Ok(crypto::sha256_hex(&text))
}

async fn create(req: &mut Request, env: &Env, url: &Url) -> Result<(u16, Created), ApiError> {
    let body = http::body_of_type(req, "application/json").await?;
    let options = parse_options(&body)?;
    let database = super::database(env)?;

    let merchant = db::merchant_by_key(&database, &options.public_key)
        .await
        .or_internal("read merchant")?
        .ok_or_else(|| {
            ApiError::invalid_request("publicKey is not the publishable key of any merchant")
        })?;
    let unavailable = |why: &str| {
        Err(ApiError::new(
            ErrorCode::MerchantUnavailable,
            format!("this merchant cannot take payments: {why}"),
        ))
    };
    if merchant.status != "active" {
        return unavailable(&format!("the account is {}", merchant.status));
    }
    if merchant.onboarding_status != "completed" {
        return unavailable("onboarding is not complete");
    }
    if merchant.crypto_enabled == 0 {
        return unavailable("crypto payments are not enabled");
    }

    let now = super::now();
    let fingerprint = fingerprint(&options)?;
    let replay = |stored: db::StoredKey| {
        if stored.fingerprint == fingerprint {
            Ok((
                200,
                Created {
                    url: hosted_url(url, &stored.session_id),
                    id: stored.session_id,
                    transaction_id: stored.transaction_id,
                },
            ))
        } else {
            Err(ApiError::new(
                ErrorCode::Conflict,
                "idempotencyKey was already used for another payment of this merchant with \
                 different options; use a new key for a new order",
            ))
        }
    };
    if let Some(key) = &options.idempotency_key {
        if let Some(stored) = db::find_key(&database, merchant.id, key, now - KEY_SECONDS)
            .await
            .or_internal("read idempotency key")?
        {
            return replay(stored);
        }
        db::forget_key(&database, merchant.id, key, now - KEY_SECONDS)
            .await
            .or_internal("forget stale key")?;
    }

    let method = quote::METHODS[0];
    // Stored with the currency's minor digits: "149.9" EUR becomes "149.90".
    let mut amount = Decimal::from_str(&options.amount).or_internal("parse amount")?;
    amount.rescale(shared_types::checkout::currency_digits(&options.currency).unwrap_or(2));
    let amount_text = amount.to_string();
    let crypto_amount = quote::crypto_amount(amount, &options.currency, method)
        .ok_or("no rate")
        .or_internal("quote")?;
    let session_id = crypto::random_token("cs_").or_internal("generate session id")?;
    let deposit_address = chain::deposit_address(method.network).or_internal("generate address")?;
    let now_text = time::format_unix(now)
        .ok_or("time out of range")
        .or_internal("format now")?;
    let new = NewSession {
        id: &session_id,
        merchant: &merchant,
        amount: &amount_text,
        currency: &options.currency,
        title: options.title.trim(),
        external_reference: &options.external_reference,
        redirect_url: &options.redirect_url,
        asset: method.asset,
        network: method.network,
        deposit_address: &deposit_address,
        crypto_amount: &crypto_amount.to_string(),
        now,
        now_text: &now_text,
        expires_at: now + SESSION_SECONDS,
        key: options
            .idempotency_key
            .as_deref()
            .map(|k| (k, fingerprint.as_str())),
    };
    if let Err(err) = db::create_session(&database, &new).await {
        // A concurrent request with the same key won the race: answer as it did.
        if let Some(key) = &options.idempotency_key {
            if let Some(stored) = db::find_key(&database, merchant.id, key, now - KEY_SECONDS)
                .await
                .or_internal("read idempotency key")?
            {
                return replay(stored);
            }
        }
        return Err(ApiError::internal("create session", err));
    }
    let session = db::session(&database, &session_id)
        .await
        .or_internal("read session")?
        .ok_or("session vanished")
        .or_internal("read session")?;
    Ok((
        201,
        Created {
            url: hosted_url(url, &session_id),
            id: session_id,
            transaction_id: session.transaction_id,
        },
    ))
}

/// `GET /checkout/{id}`: the hosted page.
pub async fn page(env: &Env, id: &str, notice: Option<String>) -> Result<Response, ApiError> {
    let database = super::database(env)?;
    let session = db::session(&database, id)
        .await
        .or_internal("read session")?;
    let sandbox = super::sandbox(env);
    match session {
        None => pages::html(404, pages::not_found()),
        Some(session) => {
            let status = if notice.is_some() { 409 } else { 200 };
            pages::html(
                status,
                pages::checkout(&session, sandbox, super::now(), notice.as_deref()),
            )
        }
    }
}

/// `GET /checkout/{id}/status`: what the hosted page's script polls.
pub async fn status(env: &Env, id: &str) -> Result<Response, ApiError> {
    let database = super::database(env)?;
    let session = db::session(&database, id)
        .await
        .or_internal("read session")?
        .ok_or_else(|| ApiError::not_found("no such checkout"))?;
    let body = serde_json::json!({ "status": pages::shown_status(&session, super::now()) });
    http::json(200, &body).or_internal("build response")
}

fn see_other(url: &Url, id: &str) -> Result<Response, ApiError> {
    let target = Url::parse(&hosted_url(url, id)).or_internal("build url")?;
    Response::redirect_with_status(target, 303).or_internal("build redirect")
}

/// `POST /checkout/{id}/method`: form field `method` = `ASSET:network`.
pub async fn choose_method(
    mut req: Request,
    env: &Env,
    url: &Url,
    id: &str,
) -> Result<Response, ApiError> {
    let form = req.text().await.or_internal("read body")?;
    let chosen = form_urlencoded::parse(form.as_bytes())
        .find(|(k, _)| k == "method")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let method = chosen
        .split_once(':')
        .and_then(|(asset, network)| quote::method(asset, network))
        .ok_or_else(|| {
            ApiError::invalid_request("method must be one of the offered ways to pay")
        })?;
    let database = super::database(env)?;
    let session = db::session(&database, id)
        .await
        .or_internal("read session")?
        .ok_or_else(|| ApiError::not_found("no such checkout"))?;
    let amount = Decimal::from_str(&session.amount_expected).or_internal("parse amount")?;
    let crypto_amount = quote::crypto_amount(amount, &session.currency, method)
        .ok_or("no rate")
        .or_internal("quote")?;
    let address = chain::deposit_address(method.network).or_internal("generate address")?;
    let now_text = time::format_unix(super::now())
        .ok_or("time out of range")
        .or_internal("format now")?;
    db::change_method(
        &database,
        &session,
        method.asset,
        method.network,
        &address,
        &crypto_amount.to_string(),
        &now_text,
    )
    .await
    .or_internal("change method")?;
    see_other(url, id)
}

/// `POST /checkout/{id}/sandbox/{control}`: the hosted page's sandbox buttons.
pub async fn sandbox_control(
    env: &Env,
    url: &Url,
    id: &str,
    control: &str,
) -> Result<Response, ApiError> {
    if !super::sandbox(env) {
        return Err(ApiError::not_found(format!(
            "no such endpoint: {}",
            url.path()
        )));
    }
    let database = super::database(env)?;
    let session = db::session(&database, id)
        .await
        .or_internal("read session")?
        .ok_or_else(|| ApiError::not_found("no such checkout"))?;
    let expected = Decimal::from_str(&session.amount_expected).or_internal("parse amount")?;
    let digits = shared_types::checkout::currency_digits(&session.currency).unwrap_or(2);
    let share = |percent: i64| (expected * Decimal::new(percent, 2)).round_dp(digits);
    let action = match control {
        "pay-exact" => Action::Pay { amount: expected },
        "pay-under" => Action::Pay { amount: share(90) },
        "pay-over" => Action::Pay { amount: share(110) },
        "settle" => Action::Settle { network: None },
        "refund" => {
            let amount = |value: &Option<String>| {
                value
                    .as_deref()
                    .map(Decimal::from_str)
                    .transpose()
                    .or_internal("parse amount")
            };
            let gross = amount(&session.amount_gross)?.unwrap_or(expected);
            let refunded = amount(&session.amount_refunded)?.unwrap_or_default();
            // Everything not yet refunded.
            Action::Refund {
                amount: gross - refunded,
            }
        }
        "fail" => Action::Fail,
        _ => {
            return Err(ApiError::not_found(format!(
                "no such sandbox control: {control}"
            )))
        }
    };
    match payments::act(
        env,
        &database,
        session.transaction_id,
        None,
        &action,
        super::now(),
    )
    .await
    {
        Ok(()) => see_other(url, id),
        Err(err) if err.code == ErrorCode::Conflict || err.code == ErrorCode::InvalidRequest => {
            page(env, id, Some(err.description)).await
        }
        Err(err) => Err(err),
    }
}
