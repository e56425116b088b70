//! Checkout's HTTP: `POST /checkout/sessions` (public, publishable key, CORS), the hosted page
//! `GET /checkout/{id}`, its way-to-pay form, and its sandbox controls. What they do (start a
//! session, change its way to pay, act out a payment) is the checkout service's
//! (`crate::checkout`); here are bodies, JSON, pages and redirects.

use payrail_evm::Token;
use shared_types::checkout::CheckoutOptions;
use shared_types::ids::SessionId;
use shared_types::{ErrorCode, RawStatus};
use worker::{Request, Response, Url};

use super::hosted_page;
use crate::checkout::{self, MethodChange, Refusal, Simulation};
use crate::ctx::Ctx;
use crate::db::{sessions, watches};
use crate::error::{check_json_depth, from_json, ApiError, OrInternal};
use crate::locale::{self, Catalogue};
use crate::route::Incoming;
use crate::{chain, http, money};

/// What the hosted page says above itself when an action could not be taken.
enum Notice {
    /// The checkout no longer waits for a payment, so its way to pay cannot change.
    Closed,
    /// The chosen way to pay cannot be quoted now.
    Unquoted(shared_types::quote::Method),
    /// A sandbox control's answer (the developer's, in English).
    Sandbox(String),
}

impl Notice {
    fn text(&self, lang: &Catalogue) -> String {
        match self {
            Notice::Closed => lang.page.closed.clone(),
            Notice::Unquoted(method) => hosted_page::unquoted(lang, method),
            Notice::Sandbox(text) => text.clone(),
        }
    }
}

/// The request's `Accept-Language`, for a session created without a `locale`.
fn accept_language(req: &Request) -> Option<String> {
    req.headers().get("Accept-Language").ok().flatten()
}

/// The page's language: the session's `locale` option, else the browser's preference.
fn language(session: Option<&sessions::SessionView>, accept: Option<&str>) -> &'static Catalogue {
    session
        .and_then(|s| s.locale.as_deref())
        .and_then(locale::catalogue)
        .unwrap_or_else(|| locale::negotiate(accept))
}

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
        // Answered here (with CORS), so logged here: the boundary sees an answer, not an error.
        Err(err) => {
            err.log();
            http::error(&err)
        }
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

/// Reads the options: a JSON object whose `amount` may be a number or decimal text (checked
/// against the checkout rules by the service, as is the `locale`). Returns the options and the
/// language chosen (`None`: follow the customer's browser).
fn parse_options(body: &str) -> Result<(CheckoutOptions, Option<&'static str>), ApiError> {
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
    if object
        .get("locale")
        .is_some_and(|locale| !locale.is_string() && !locale.is_null())
    {
        return Err(ApiError::invalid_request(
            "locale must be a string: \"auto\" or a language tag such as \"de\"",
        ));
    }
    let options: CheckoutOptions = from_json(&value.to_string())?;
    let language = options.language();
    Ok((options, language))
}

async fn create(req: &mut Request, ctx: &Ctx, url: &Url) -> Result<(u16, Created), ApiError> {
    let body = http::body_of_type(req, "application/json", http::CHECKOUT_BODY_MAX).await?;
    let (options, language) = parse_options(&body)?;
    let session = checkout::create(ctx, &options, language)
        .await
        .map_err(refused)?;
    Ok((
        if session.created { 201 } else { 200 },
        Created {
            url: hosted_url(url, &session.id),
            id: session.id,
            transaction_id: session.transaction_id,
        },
    ))
}

/// The error body of a refused session.
fn refused(refusal: Refusal) -> ApiError {
    match refusal {
        Refusal::Invalid(why) => ApiError::invalid_request(why),
        Refusal::NoWayToPay => ApiError::new(
            ErrorCode::PaymentsUnavailable,
            "payments are unavailable: this deployment does not watch any chain yet, so it \
             offers no way to pay",
        ),
        // Well formed but naming no merchant: the options are valid, what they name is not
        // there, as for an unknown merchant id.
        Refusal::UnknownKey => ApiError::new(
            ErrorCode::NotFound,
            "publicKey is not the publishable key of any merchant",
        ),
        Refusal::MerchantUnavailable(why) => ApiError::new(
            ErrorCode::MerchantUnavailable,
            format!("this merchant cannot take payments: {why}"),
        ),
        Refusal::RedirectNotAllowed { origin } => ApiError::new(
            ErrorCode::RedirectNotAllowed,
            format!(
                "redirectUrl must point at one of this merchant's allowed return origins; \
                 {origin} is not one (add it in the portal)"
            ),
        ),
        Refusal::KeyReused => ApiError::new(
            ErrorCode::Conflict,
            "idempotencyKey was already used for another payment of this merchant with \
             different options; use a new key for a new order",
        ),
        Refusal::NoQuote(unavailable) => ApiError::new(
            ErrorCode::PaymentsUnavailable,
            format!(
                "payments are unavailable right now: no way to pay can be quoted ({})",
                unavailable.join("; ")
            ),
        ),
        Refusal::Api(err) => err,
    }
}

/// `GET /checkout/{id}`: the hosted page.
pub async fn show(Incoming { ctx, req, .. }: Incoming<'_>, id: &str) -> Result<Response, ApiError> {
    page(ctx, id, None, accept_language(&req).as_deref()).await
}

/// The hosted page, with `notice` above it when an action could not be taken, in the session's
/// language or else the one `accept` (the request's `Accept-Language`) prefers.
async fn page(
    ctx: &Ctx,
    id: &str,
    notice: Option<Notice>,
    accept: Option<&str>,
) -> Result<Response, ApiError> {
    // An id not of a session's shape is an unknown session, found without a query.
    let read = match SessionId::parse(id) {
        Ok(id) => checkout::locate(ctx, &id).await?,
        Err(_) => None,
    };
    let lang = language(read.as_ref().map(|(located, ..)| &located.session), accept);
    match read {
        None => hosted_page::respond(404, hosted_page::not_found(lang)),
        Some((located, networks, watched)) => {
            let status = if notice.is_some() { 409 } else { 200 };
            let offered = chain::methods_for(ctx, &networks)?;
            let session = located.session;
            let request = request_of(ctx, &session, watched)?;
            let notice = notice.map(|n| n.text(lang));
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
                    lang,
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
    located: &checkout::Located,
    accept: Option<&str>,
) -> Result<Response, ApiError> {
    let session = &located.session;
    let request = payment_request(ctx, located).await?;
    let outcome = match (&request, session.raw_status) {
        (Some(request), RawStatus::Pending) if session.expires_at > ctx.now() => {
            chain::pay_from_demo_wallet(
                ctx,
                &session.network,
                request.token.map_or(Token::Native, Token::Erc20),
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
            let why = format!("The demo wallet could not pay: {}", why.public());
            page(ctx, &session.id, Some(Notice::Sandbox(why)), accept).await
        }
    }
}

/// The payment request of the session's current deposit address, when a chain watches it.
async fn payment_request(
    ctx: &Ctx,
    located: &checkout::Located,
) -> Result<Option<hosted_page::PaymentRequest>, ApiError> {
    let session = &located.session;
    let watched = watches::of_session(located.money(ctx), session.institution_id, &session.id)
        .await
        .or_internal("read watches")?;
    request_of(ctx, session, watched)
}

/// The payment request of the session's current deposit address among its watches `watched`.
fn request_of(
    ctx: &Ctx,
    session: &sessions::SessionView,
    watched: Vec<watches::Watch>,
) -> Result<Option<hosted_page::PaymentRequest>, ApiError> {
    let address = session.deposit_address.to_ascii_lowercase();
    let watch = watched.into_iter().find(|w| w.address == address);
    let Some(watch) = watch else {
        return Ok(None);
    };
    let networks = chain::networks(ctx)?;
    let Some(network) = networks.get(&watch.network) else {
        return Ok(None);
    };
    let (token, decimals) = match network.tokens.get(&watch.asset) {
        Some(token) => (
            payrail_evm::Address::parse(&token.address).ok(),
            token.decimals,
        ),
        None => match watch.token {
            Token::Native => (None, chain::config::NATIVE_DECIMALS),
            Token::Erc20(contract) => (Some(contract), chain::config::DEFAULT_TOKEN_DECIMALS),
        },
    };
    Ok(Some(hosted_page::PaymentRequest {
        token,
        chain_id: network.chain_id,
        base_units: watch.base_units.parse().or_internal("read base units")?,
        decimals,
        confirmations: network.confirmations,
        coin: chain::config::coin(&watch.network),
        public_rpc_url: network.public_rpc_url.clone(),
    }))
}

/// The session a path names; an id not of a session's shape reads like an unknown one, without
/// a query.
async fn session(ctx: &Ctx, id: &str) -> Result<checkout::Located, ApiError> {
    let no_checkout = || ApiError::not_found("no such checkout");
    let id = SessionId::parse(id).map_err(|_| no_checkout())?;
    checkout::locate(ctx, &id)
        .await?
        .map(|(located, ..)| located)
        .ok_or_else(no_checkout)
}

/// `GET /checkout/{id}/status`: what the hosted page's script polls. One round trip reads the
/// session and what the watcher stored of its chain; on a watched network an address whose last
/// check is older than [`money::watch::POLL_GAP_SECONDS`] is read from the chain first, so a
/// payment shows within seconds of its block.
pub async fn status(Incoming { ctx, .. }: Incoming<'_>, id: &str) -> Result<Response, ApiError> {
    let no_checkout = || ApiError::not_found("no such checkout");
    let id = SessionId::parse(id).map_err(|_| no_checkout())?;
    let polled = money::watch::poll(ctx, &id, money::watch::POLL_GAP_SECONDS)
        .await?
        .ok_or_else(no_checkout)?;
    let body = serde_json::json!({
        "status": hosted_page::shown_status(&polled.session, ctx.now(), polled.chain.is_some()),
        "chain": polled.chain,
    });
    http::json(200, &body).or_internal("build response")
}

/// `POST /checkout/{id}/method`: form field `method` = `ASSET:network`.
pub async fn choose_method(
    Incoming { mut req, ctx, url }: Incoming<'_>,
    id: &str,
) -> Result<Response, ApiError> {
    let accept = accept_language(&req);
    let accept = accept.as_deref();
    let form = http::body(&mut req, http::CHECKOUT_BODY_MAX).await?;
    let chosen = http::form_fields(&form)?
        .into_iter()
        .find(|(k, _)| k == "method")
        .map(|(_, v)| v)
        .unwrap_or_default();
    let session = session(ctx, id).await?;
    match checkout::change_method(ctx, &session, &chosen).await? {
        MethodChange::Changed => http::see_other(url, &hosted_path(id)),
        MethodChange::NotOffered => Err(ApiError::invalid_request(
            "method must be one of the offered ways to pay",
        )),
        MethodChange::Closed => page(ctx, id, Some(Notice::Closed), accept).await,
        MethodChange::Unquoted { method, why } => {
            // Why is the operator's (a node or a price feed down), not the customer's.
            worker::console_warn!("checkout {id}: {method:?} not quoted: {why}");
            page(ctx, id, Some(Notice::Unquoted(method)), accept).await
        }
    }
}

/// `POST /checkout/{id}/sandbox/{control}`: the hosted page's sandbox buttons.
pub async fn sandbox_control(
    Incoming { ctx, url, req }: Incoming<'_>,
    id: &str,
    control: &str,
) -> Result<Response, ApiError> {
    let accept = accept_language(&req);
    let accept = accept.as_deref();
    if !ctx.sandbox() {
        return Err(ApiError::not_found(format!(
            "no such endpoint: {}",
            url.path()
        )));
    }
    let session = session(ctx, id).await?;
    if control == "pay-from-demo-wallet" {
        return pay_from_demo_wallet(ctx, url, &session, accept).await;
    }
    match checkout::simulate(ctx, &session, control).await? {
        Simulation::Done => http::see_other(url, &hosted_path(id)),
        Simulation::Watched => {
            let notice = "this checkout's network is watched: its payment is made on chain \
                          (the simulated payments are for networks without a node)";
            page(ctx, id, Some(Notice::Sandbox(notice.to_owned())), accept).await
        }
        Simulation::Unknown => Err(ApiError::not_found(format!(
            "no such sandbox control: {control}"
        ))),
        Simulation::Refused(why) => page(ctx, id, Some(Notice::Sandbox(why)), accept).await,
    }
}
