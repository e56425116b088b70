//! Checkout: `POST /checkout/sessions` (public, publishable key, CORS), the hosted page
//! `GET /checkout/{id}`, its way-to-pay form, and its sandbox controls.

use std::str::FromStr;

use rust_decimal::Decimal;
use shared_types::checkout::CheckoutOptions;
use shared_types::lifecycle::Action;
use shared_types::{quote, ErrorCode, RawStatus};
use worker::{Request, Response, Url};

use super::hosted_page;
use crate::ctx::{timestamp, Ctx};
use crate::db::sessions::{self, NewSession, StoredKey, KEY_SECONDS};
use crate::db::transactions::{self, NewPayment};
use crate::db::watches::{self, NewWatch};
use crate::db::{merchants, origins, wallets};
use crate::error::{check_json_depth, from_json, ApiError, OrInternal};
use crate::route::Incoming;
use crate::{chain, crypto, db, http, payments, throttle};

/// How long a checkout stays payable: its quote's window, shown as a countdown (as BTCPay's
/// invoices, fifteen minutes).
pub const SESSION_SECONDS: i64 = 15 * 60;
/// Why the way to pay cannot change any more.
const CLOSED: &str = "this checkout is no longer waiting for a payment, so its way to pay \
                      cannot change";

/// `OPTIONS /checkout/sessions`: the CORS preflight.
pub async fn preflight(_: Incoming<'_>) -> Result<Response, ApiError> {
    let response = Response::empty()
        .map(|r| r.with_status(204))
        .or_internal("build response")?;
    cors(response)
}

/// `POST /checkout/sessions`: a checkout for the options, answered with CORS headers whatever
/// the outcome.
pub async fn create_session(
    Incoming { mut req, ctx, url }: Incoming<'_>,
) -> Result<Response, ApiError> {
    let response = match create(&mut req, ctx, url).await {
        Ok((status, body)) => http::json(status, &body),
        Err(err) => http::error(&err),
    }
    .or_internal("build response")?;
    cors(response)
}

/// A public endpoint's headers: any merchant origin may call it; no cookies are involved.
fn cors(response: Response) -> Result<Response, ApiError> {
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

fn hosted_path(session_id: &str) -> String {
    format!("/checkout/{session_id}")
}

fn hosted_url(url: &Url, session_id: &str) -> String {
    format!(
        "{}{}",
        url.origin().ascii_serialization(),
        hosted_path(session_id)
    )
}

/// Reads the options: a JSON object whose `amount` may be a number or decimal text.
fn parse_options(body: &str) -> Result<CheckoutOptions, ApiError> {
    let not_object =
        || ApiError::invalid_request("the body must be a JSON object of checkout options");
    check_json_depth(body)?;
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

async fn create(req: &mut Request, ctx: &Ctx, url: &Url) -> Result<(u16, Created), ApiError> {
    let body = http::body_of_type(req, "application/json", http::CHECKOUT_BODY_MAX).await?;
    let options = parse_options(&body)?;
    if chain::methods(ctx)?.is_empty() {
        return Err(ApiError::new(
            ErrorCode::PaymentsUnavailable,
            "payments are unavailable: this deployment does not watch any chain yet, so it \
             offers no way to pay",
        ));
    }
    throttle::count_checkout(ctx, &options.public_key).await?;
    let database = &ctx.db;
    let now = ctx.now();

    let merchant = merchants::gate_by_key(database, &options.public_key, now)
        .await
        .or_internal("read merchant")?
        .ok_or_else(|| {
            ApiError::invalid_request("publicKey is not the publishable key of any merchant")
        })?;
    if let Some(why) = merchant.refusal() {
        return Err(ApiError::new(
            ErrorCode::MerchantUnavailable,
            format!("this merchant cannot take payments: {why}"),
        ));
    }
    let offered = offered_methods(ctx, merchant.id).await?;
    if offered.is_empty() {
        return Err(ApiError::new(
            ErrorCode::MerchantUnavailable,
            "this merchant cannot take payments: it has no settlement wallet on a network \
             Payrail offers",
        ));
    }
    // The hosted page is ours: it may only send the customer back to the merchant's own sites.
    let origin = Url::parse(&options.redirect_url)
        .map(|u| u.origin().ascii_serialization())
        .or_internal("parse redirectUrl")?;
    if !origins::allows(database, merchant.id, &origin)
        .await
        .or_internal("read origins")?
    {
        return Err(ApiError::new(
            ErrorCode::RedirectNotAllowed,
            format!(
                "redirectUrl must point at one of this merchant's allowed return origins; \
                 {origin} is not one (add it in the portal)"
            ),
        ));
    }

    let fingerprint = fingerprint(&options)?;
    let replay = |stored: StoredKey| {
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
        if let Some(stored) = sessions::find_key(database, merchant.id, key, now - KEY_SECONDS)
            .await
            .or_internal("read idempotency key")?
        {
            return replay(stored);
        }
        sessions::forget_key(database, merchant.id, key, now - KEY_SECONDS)
            .await
            .or_internal("forget stale key")?;
    }

    // Stored with the currency's minor digits: "149.9" EUR becomes "149.90".
    let mut amount = Decimal::from_str(&options.amount).or_internal("parse amount")?;
    amount.rescale(shared_types::checkout::currency_digits(&options.currency).unwrap_or(2));
    let amount_text = amount.to_string();
    // The first way to pay that can be quoted now is the default; none: no payment is taken.
    let mut unavailable = Vec::new();
    let mut chosen = None;
    for method in &offered {
        match chain::quote(ctx, *method, amount, &options.currency).await {
            Ok(quote) => {
                chosen = Some((*method, quote));
                break;
            }
            Err(why) => unavailable.push(why.public()),
        }
    }
    let Some((method, quote)) = chosen else {
        return Err(ApiError::new(
            ErrorCode::PaymentsUnavailable,
            format!(
                "payments are unavailable right now: no way to pay can be quoted ({})",
                unavailable.join("; ")
            ),
        ));
    };
    let session_id = crypto::random_token("cs_").or_internal("generate session id")?;
    let (deposit_address, deposit_index) = chain::deposit_address(ctx, method.network).await?;
    let now_text = timestamp(now)?;
    let crypto_amount = quote.crypto_amount.to_string();
    let payment = NewPayment {
        institution_id: merchant.institution_id,
        merchant_id: merchant.id,
        asset: method.asset,
        currency: &options.currency,
        amount: &amount_text,
        network: method.network,
        external_reference: &options.external_reference,
        now_text: &now_text,
    };
    let session = NewSession {
        id: &session_id,
        merchant_id: merchant.id,
        title: options.title.trim(),
        redirect_url: &options.redirect_url,
        asset: method.asset,
        network: method.network,
        deposit_address: &deposit_address,
        deposit_index,
        crypto_amount: &crypto_amount,
        now,
        expires_at: now + SESSION_SECONDS,
    };
    // The transaction, its session and the idempotency key in one atomic batch: it fails as a
    // whole when the key was taken meanwhile (a concurrent double click).
    let mut statements = vec![
        transactions::insert_pending(database, &payment).or_internal("create session")?,
        sessions::insert(database, &session).or_internal("create session")?,
    ];
    if let Some(watch) = watch_statement(
        ctx,
        &session_id,
        method,
        (&deposit_address, deposit_index),
        &quote,
        now + SESSION_SECONDS,
    )? {
        statements.push(watch);
    }
    if let Some(key) = &options.idempotency_key {
        statements.push(
            sessions::insert_key(database, merchant.id, key, &fingerprint, &session_id, now)
                .or_internal("create session")?,
        );
    }
    if let Err(err) = db::batch(database, statements).await {
        // A concurrent request with the same key won the race: answer as it did.
        if let Some(key) = &options.idempotency_key {
            if let Some(stored) = sessions::find_key(database, merchant.id, key, now - KEY_SECONDS)
                .await
                .or_internal("read idempotency key")?
            {
                return replay(stored);
            }
        }
        return Err(ApiError::internal("create session", err));
    }
    let session = sessions::get(database, &session_id)
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
pub async fn show(Incoming { ctx, .. }: Incoming<'_>, id: &str) -> Result<Response, ApiError> {
    page(ctx, id, None).await
}

/// The hosted page, with `notice` above it when an action could not be taken.
pub async fn page(ctx: &Ctx, id: &str, notice: Option<String>) -> Result<Response, ApiError> {
    let session = sessions::get(&ctx.db, id)
        .await
        .or_internal("read session")?;
    match session {
        None => hosted_page::respond(404, hosted_page::not_found()),
        Some(session) => {
            let status = if notice.is_some() { 409 } else { 200 };
            let offered = offered_methods(ctx, session.merchant_id).await?;
            let request = payment_request(ctx, &session).await?;
            hosted_page::respond(
                status,
                hosted_page::checkout(
                    &session,
                    &offered,
                    ctx.sandbox(),
                    ctx.now(),
                    notice.as_deref(),
                    request.as_ref(),
                    ctx.demo_wallet().is_some(),
                ),
            )
        }
    }
}

/// The sandbox panel's "pay from the demo wallet": a real transfer on the local chain of exactly
/// what the page asks, then back to the page, which sees it arrive like any other payment.
async fn pay_from_demo_wallet(
    ctx: &Ctx,
    url: &Url,
    session: &sessions::SessionView,
) -> Result<Response, ApiError> {
    let request = payment_request(ctx, session).await?;
    let outcome = match (&request, session.raw_status) {
        (Some(request), RawStatus::Pending) if session.expires_at > ctx.now() => {
            chain::pay_from_demo_wallet(
                ctx,
                &session.network,
                request
                    .token
                    .as_deref()
                    .unwrap_or(chain::config::NATIVE_TOKEN),
                &session.deposit_address,
                request.base_units,
            )
            .await
        }
        _ => Err(chain::ChainError::rule(
            "this checkout is not waiting for a payment on a watched network",
        )),
    };
    match outcome {
        Ok(_) => http::see_other(url, &hosted_path(&session.id)),
        Err(why) => {
            page(
                ctx,
                &session.id,
                Some(format!("The demo wallet could not pay: {}", why.public())),
            )
            .await
        }
    }
}

/// The payment request of the session's current deposit address, when a chain watches it.
async fn payment_request(
    ctx: &Ctx,
    session: &sessions::SessionView,
) -> Result<Option<hosted_page::PaymentRequest>, ApiError> {
    let address = session.deposit_address.to_ascii_lowercase();
    let watch = watches::of_session(&ctx.db, &session.id)
        .await
        .or_internal("read watches")?
        .into_iter()
        .find(|w| w.address == address);
    let Some(watch) = watch else {
        return Ok(None);
    };
    let networks = chain::networks(ctx)?;
    let Some(network) = networks.get(&watch.network) else {
        return Ok(None);
    };
    let token = match network.tokens.get(&watch.asset) {
        Some(token) => Some(token.address.clone()),
        None if watch.token == chain::config::NATIVE_TOKEN => None,
        None => Some(crate::wallet_address::eip55(
            watch.token.trim_start_matches("0x"),
        )),
    };
    Ok(Some(hosted_page::PaymentRequest {
        token,
        chain_id: network.chain_id,
        base_units: watch.base_units.parse().or_internal("read base units")?,
        confirmations: network.confirmations,
    }))
}

/// The ways to pay the deployment offers on the networks where the merchant has a wallet.
async fn offered_methods(ctx: &Ctx, merchant_id: i64) -> Result<Vec<quote::Method>, ApiError> {
    let networks: Vec<String> = wallets::list(&ctx.db, merchant_id)
        .await
        .or_internal("read wallets")?
        .into_iter()
        .map(|w| w.network)
        .collect();
    chain::methods_for(ctx, &networks)
}

/// The watch of a deposit address quoted on a watched network, for the batch that gives the
/// address to the session; `None` for a simulated one.
fn watch_statement(
    ctx: &Ctx,
    session_id: &str,
    method: quote::Method,
    (address, derivation_index): (&str, Option<i64>),
    quote: &chain::Quote,
    checkout_end: i64,
) -> Result<Option<worker::D1PreparedStatement>, ApiError> {
    let Some(watched) = &quote.watched else {
        return Ok(None);
    };
    let derivation_index = derivation_index
        .ok_or("a watched address must be derived")
        .or_internal("watch deposit")?;
    let statement = watches::insert(
        &ctx.db,
        &NewWatch {
            address,
            derivation_index,
            session_id,
            network: method.network,
            asset: method.asset,
            token: &watched.token,
            decimals: watched.decimals,
            crypto_amount: &quote.crypto_amount.to_string(),
            base_units: &watched.base_units.to_string(),
            // Recorded to 12 places (the conversion itself uses the quoted amounts).
            rate: &quote.rate.round_dp(12).normalize().to_string(),
            rate_source: &quote.rate_source,
            from_block: watched.head_block,
            now: ctx.now(),
            watch_until: checkout_end + chain::watch::LATE_WINDOW_SECONDS,
        },
    )
    .or_internal("watch deposit")?;
    Ok(Some(statement))
}

async fn session(ctx: &Ctx, id: &str) -> Result<sessions::SessionView, ApiError> {
    sessions::get(&ctx.db, id)
        .await
        .or_internal("read session")?
        .ok_or_else(|| ApiError::not_found("no such checkout"))
}

/// `GET /checkout/{id}/status`: what the hosted page's script polls. On a watched network it
/// reads the chain first (at most once per watch every couple of seconds), so a payment shows
/// within seconds of its block.
pub async fn status(Incoming { ctx, .. }: Incoming<'_>, id: &str) -> Result<Response, ApiError> {
    let mut session = session(ctx, id).await?;
    let chain = chain::watch::check_session(ctx, &session, chain::watch::POLL_GAP_SECONDS).await?;
    if matches!(
        chain,
        Some(chain::watch::ChainState {
            verdict: chain::watch::Verdict::Credit { .. },
            ..
        })
    ) {
        session = self::session(ctx, id).await?;
    }
    let body = serde_json::json!({
        "status": hosted_page::shown_status(&session, ctx.now(), chain.is_some()),
        "chain": chain,
    });
    http::json(200, &body).or_internal("build response")
}

/// `POST /checkout/{id}/method`: form field `method` = `ASSET:network`.
pub async fn choose_method(
    Incoming { mut req, ctx, url }: Incoming<'_>,
    id: &str,
) -> Result<Response, ApiError> {
    let form = http::body(&mut req, http::CHECKOUT_BODY_MAX).await?;
    let chosen = http::form_fields(&form)?
        .into_iter()
        .find(|(k, _)| k == "method")
        .map(|(_, v)| v)
        .unwrap_or_default();
    let session = session(ctx, id).await?;
    let offered = offered_methods(ctx, session.merchant_id).await?;
    let method = chosen
        .split_once(':')
        .and_then(|(asset, network)| chain::method(&offered, asset, network))
        .ok_or_else(|| {
            ApiError::invalid_request("method must be one of the offered ways to pay")
        })?;
    let now = ctx.now();
    if session.raw_status != RawStatus::Pending || session.expires_at <= now {
        return page(ctx, id, Some(CLOSED.to_owned())).await;
    }
    // A way to pay chosen before on a watched network keeps its address and quote: the customer
    // may have paid it already, and a session never gets more addresses than ways to pay.
    let earlier = watches::of_session(&ctx.db, &session.id)
        .await
        .or_internal("read watches")?
        .into_iter()
        .find(|w| w.network == method.network && w.asset == method.asset);
    let (address, deposit_index, crypto_amount, watch) = match earlier {
        Some(w) => (
            crate::wallet_address::eip55(w.address.trim_start_matches("0x")),
            Some(w.derivation_index),
            w.crypto_amount,
            None,
        ),
        None => {
            let amount = Decimal::from_str(&session.amount_expected).or_internal("parse amount")?;
            let quote = match chain::quote(ctx, method, amount, &session.currency).await {
                Ok(quote) => quote,
                Err(why) => {
                    let notice = format!(
                        "{} on {} cannot be offered right now: {}. Choose another way to pay, \
                         or try again in a moment.",
                        method.asset,
                        method.network,
                        why.public()
                    );
                    return page(ctx, id, Some(notice)).await;
                }
            };
            let (address, deposit_index) = chain::deposit_address(ctx, method.network).await?;
            let watch = watch_statement(
                ctx,
                &session.id,
                method,
                (&address, deposit_index),
                &quote,
                session.expires_at,
            )?;
            (
                address,
                deposit_index,
                quote.crypto_amount.to_string(),
                watch,
            )
        }
    };
    // The session follows only if the transaction was still pending at the version read.
    let results = db::batch(
        &ctx.db,
        vec![
            transactions::change_method(
                &ctx.db,
                session.transaction_id,
                session.version,
                method.asset,
                method.network,
                &timestamp(now)?,
            )
            .or_internal("change method")?,
            sessions::change_method(
                &ctx.db,
                &session.id,
                method.asset,
                method.network,
                &address,
                deposit_index,
                &crypto_amount,
            )
            .or_internal("change method")?,
        ]
        .into_iter()
        .chain(watch)
        .collect(),
    )
    .await;
    let results = match results {
        Ok(results) => results,
        Err(err) => {
            // A concurrent choice of the same way to pay gave it its address first (one address
            // per way to pay): show the page as that left it.
            let taken = watches::of_session(&ctx.db, &session.id)
                .await
                .or_internal("read watches")?
                .iter()
                .any(|w| w.network == method.network && w.asset == method.asset);
            if taken {
                return http::see_other(url, &hosted_path(id));
            }
            return Err(ApiError::internal("change method", err));
        }
    };
    if !db::changed(&results, 0) {
        // The payment changed since it was read: closed (paid, expired), or only another choice
        // made meanwhile, after which the page simply shows where it stands.
        let now_open = self::session(ctx, id)
            .await
            .is_ok_and(|s| s.raw_status == RawStatus::Pending && s.expires_at > ctx.now());
        if !now_open {
            return page(ctx, id, Some(CLOSED.to_owned())).await;
        }
    }
    http::see_other(url, &hosted_path(id))
}

/// `POST /checkout/{id}/sandbox/{control}`: the hosted page's sandbox buttons.
pub async fn sandbox_control(
    Incoming { ctx, url, .. }: Incoming<'_>,
    id: &str,
    control: &str,
) -> Result<Response, ApiError> {
    if !ctx.sandbox() {
        return Err(ApiError::not_found(format!(
            "no such endpoint: {}",
            url.path()
        )));
    }
    let session = session(ctx, id).await?;
    if control == "pay-from-demo-wallet" {
        return pay_from_demo_wallet(ctx, url, &session).await;
    }
    if control.starts_with("pay-") || control == "fail" {
        let watched = !watches::of_session(&ctx.db, &session.id)
            .await
            .or_internal("read watches")?
            .is_empty();
        if watched {
            let notice = "this checkout's network is watched: its payment is made on chain \
                          (the simulated payments are for networks without a node)";
            return page(ctx, id, Some(notice.to_owned())).await;
        }
    }
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
    match payments::act(ctx, session.transaction_id, None, &action).await {
        Ok(_) => http::see_other(url, &hosted_path(id)),
        Err(err) if err.code == ErrorCode::Conflict || err.code == ErrorCode::InvalidRequest => {
            page(ctx, id, Some(err.description)).await
        }
        Err(err) => Err(err),
    }
}
