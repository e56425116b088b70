//! The API client: client credentials with a token cache, retries, and the list operations.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{self, BoxStream, StreamExt};
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{Method, RequestBuilder, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use shared_types::{List, Merchant, TokenResponse, Transaction};
use tokio::sync::Mutex;

use crate::error::{Error, Result};
use crate::query::{EventQuery, MerchantQuery, Params, TransactionQuery};
use crate::retry::RetryPolicy;
use crate::webhooks::Event;

/// A token is refreshed this long before the API says it expires, so a request never leaves
/// with a token that dies on the way.
const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// Builds a [`Client`].
#[derive(Clone)]
pub struct ClientBuilder {
    base_url: String,
    client_id: String,
    client_secret: String,
    scope: Option<String>,
    timeout: Duration,
    connect_timeout: Duration,
    retry: RetryPolicy,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret stays out of logs, as the client's does.
        f.debug_struct("ClientBuilder")
            .field("base_url", &self.base_url)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("scope", &self.scope)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("retry", &self.retry)
            .finish()
    }
}

impl ClientBuilder {
    /// Scopes to ask for, space-separated (default: everything the client was granted).
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    /// Time limit of one request, connection included (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Time limit to connect (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How 429s, 5xx and connection failures are retried.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The client.
    pub fn build(self) -> Result<Client> {
        let mut base = Url::parse(&self.base_url)
            .map_err(|err| Error::Config(format!("base URL {:?}: {err}", self.base_url)))?;
        if !matches!(base.scheme(), "https" | "http") {
            return Err(Error::Config(format!(
                "base URL {:?} is not http(s)",
                self.base_url
            )));
        }
        // The client's id and secret go to the token endpoint in the clear over plain HTTP:
        // only to this machine (a local worker under `wrangler dev`).
        if base.scheme() == "http" && !is_loopback(&base) {
            return Err(Error::Config(format!(
                "base URL {:?} is plain http to another machine: use https (http is for \
                 127.0.0.1, ::1 and localhost only)",
                self.base_url
            )));
        }
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let http = reqwest::Client::builder()
            .timeout(self.timeout)
            .connect_timeout(self.connect_timeout)
            .user_agent(concat!("payrail-rust/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|err| Error::Config(format!("HTTP client: {err}")))?;
        Ok(Client {
            inner: Arc::new(Inner {
                http,
                base,
                client_id: self.client_id,
                client_secret: self.client_secret,
                scope: self.scope,
                retry: self.retry,
                token: Mutex::new(None),
                bookmark: std::sync::Mutex::new(None),
            }),
        })
    }
}

/// A client of the Payrail partner API. Cheap to clone (one connection pool and one token
/// cache, shared); safe to use from many tasks at once.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret and the token stay out of logs.
        f.debug_struct("Client")
            .field("base_url", &self.inner.base.as_str())
            .field("client_id", &self.inner.client_id)
            .finish_non_exhaustive()
    }
}

struct Inner {
    http: reqwest::Client,
    base: Url,
    client_id: String,
    client_secret: String,
    scope: Option<String>,
    retry: RetryPolicy,
    token: Mutex<Option<CachedToken>>,
    /// The last `Payrail-Bookmark` an answer carried, sent with the next read.
    bookmark: std::sync::Mutex<Option<String>>,
}

#[derive(Clone)]
struct CachedToken {
    value: String,
    refresh_at: Instant,
}

/// A checkout session (sandbox helpers).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CheckoutSession {
    /// `cs_…`.
    pub id: String,
    /// The transaction it created.
    pub transaction_id: i64,
    /// The hosted checkout page.
    pub url: String,
}

/// What [`Client::create_checkout`] sends: the browser script's options (spec §1).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckoutRequest {
    /// The merchant's publishable key.
    pub public_key: String,
    /// Decimal amount, e.g. `"25.00"`.
    pub amount: String,
    /// Currency code, e.g. `EUR`.
    pub currency: String,
    /// What the order is.
    pub title: String,
    /// Your order id.
    pub external_reference: String,
    /// A retry with the same key for the same order creates no second payment.
    pub idempotency_key: Option<String>,
    /// Where the customer returns after paying.
    pub redirect_url: String,
    /// Always true: crypto is what Payrail takes.
    pub allow_crypto: bool,
}

/// A lifecycle action of the sandbox (`POST /sandbox/transactions/{id}/{action}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxAction {
    /// The customer pays this decimal amount in the order currency.
    Pay(String),
    /// Settle to the merchant.
    Settle,
    /// Refund this decimal amount.
    Refund(String),
    /// The payment fails.
    Fail,
}

impl Client {
    /// A builder for the API at `base_url` (e.g. `https://api.payrail.example`) with a client's
    /// credentials from the portal.
    pub fn builder(
        base_url: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> ClientBuilder {
        ClientBuilder {
            base_url: base_url.into(),
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            scope: None,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
        }
    }

    /// A client with the default settings.
    pub fn new(
        base_url: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> Result<Client> {
        Client::builder(base_url, client_id, client_secret).build()
    }

    /// The API's base URL.
    pub fn base_url(&self) -> &Url {
        &self.inner.base
    }

    /// One page of transactions.
    pub async fn transactions_page(&self, query: &TransactionQuery) -> Result<List<Transaction>> {
        self.get_json("v1/transactions", query.params()).await
    }

    /// Every transaction the query selects, newest first, following `next_cursor` page by page
    /// (a page is fetched only when the previous one is consumed).
    pub fn transactions(&self, query: TransactionQuery) -> BoxStream<'static, Result<Transaction>> {
        self.paginate::<Transaction, i64>("v1/transactions", query.params().clone())
    }

    /// One transaction, or `None` when the institution has none with this id.
    pub async fn transaction(&self, id: i64) -> Result<Option<Transaction>> {
        let page = self
            .transactions_page(&TransactionQuery::new().id(id))
            .await?;
        Ok(page.data.into_iter().next())
    }

    /// One page of merchants.
    pub async fn merchants_page(&self, query: &MerchantQuery) -> Result<List<Merchant>> {
        self.get_json("v1/merchants", query.params()).await
    }

    /// Every merchant the query selects, newest first, page by page.
    pub fn merchants(&self, query: MerchantQuery) -> BoxStream<'static, Result<Merchant>> {
        self.paginate::<Merchant, i64>("v1/merchants", query.params().clone())
    }

    /// One merchant, or `None` when the institution has none with this id.
    pub async fn merchant(&self, id: i64) -> Result<Option<Merchant>> {
        match self
            .get_json(&format!("v1/merchants/{id}"), &Params::default())
            .await
        {
            Ok(merchant) => Ok(Some(merchant)),
            Err(Error::Api { status: 404, .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// One page of the events feed.
    pub async fn events_page(&self, query: &EventQuery) -> Result<List<Event, String>> {
        self.get_json("v1/events", query.params()).await
    }

    /// Every event the query selects, newest first, page by page.
    pub fn events(&self, query: EventQuery) -> BoxStream<'static, Result<Event>> {
        self.paginate::<Event, String>("v1/events", query.params().clone())
    }

    /// One event by id (`evt_…`, as a delivery's `Payrail-Event-Id` carries it), exactly as its
    /// deliveries send it; `None` when the institution has none with this id.
    pub async fn event(&self, id: &str) -> Result<Option<Event>> {
        let path = format!("v1/events/{}", form_encoded(id));
        match self.get_json(&path, &Params::default()).await {
            Ok(event) => Ok(Some(event)),
            Err(Error::Api { status: 404, .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Sandbox only: creates a checkout session as the browser script does.
    pub async fn create_checkout(&self, request: &CheckoutRequest) -> Result<CheckoutSession> {
        let url = self.url("checkout/sessions", &Params::default());
        let response = self
            .send(false, false, || {
                self.inner.http.post(url.clone()).json(request)
            })
            .await?;
        decode(response).await
    }

    /// Sandbox only: applies a lifecycle action to a transaction (needs `sandbox:write`);
    /// answers the transaction afterwards.
    pub async fn sandbox(&self, id: i64, action: &SandboxAction) -> Result<Transaction> {
        let (name, body) = match action {
            SandboxAction::Pay(amount) => ("pay", serde_json::json!({ "amount": amount })),
            SandboxAction::Settle => ("settle", serde_json::json!({})),
            SandboxAction::Refund(amount) => ("refund", serde_json::json!({ "amount": amount })),
            SandboxAction::Fail => ("fail", serde_json::json!({})),
        };
        let url = self.url(
            &format!("sandbox/transactions/{id}/{name}"),
            &Params::default(),
        );
        let response = self
            .send(true, false, || {
                self.inner.http.post(url.clone()).json(&body)
            })
            .await?;
        decode(response).await
    }

    /// A valid access token: the cached one, or a new one when it is missing or about to expire.
    /// One task fetches while the others wait for it.
    pub async fn access_token(&self) -> Result<String> {
        let mut cached = self.inner.token.lock().await;
        if let Some(token) = cached.as_ref() {
            if Instant::now() < token.refresh_at {
                return Ok(token.value.clone());
            }
        }
        let issued = self.issue_token().await?;
        let lifetime = Duration::from_secs(u64::from(issued.expires_in));
        let token = CachedToken {
            value: issued.access_token,
            // A short-lived token is refreshed at half its life rather than never cached.
            refresh_at: Instant::now() + lifetime.saturating_sub(REFRESH_MARGIN.min(lifetime / 2)),
        };
        *cached = Some(token.clone());
        Ok(token.value)
    }

    async fn issue_token(&self) -> Result<TokenResponse> {
        let url = self.url("oauth/token", &Params::default());
        let mut form = vec![("grant_type", "client_credentials")];
        if let Some(scope) = &self.inner.scope {
            form.push(("scope", scope));
        }
        let response = self
            .with_retries(true, || {
                self.inner
                    .http
                    .post(url.clone())
                    // RFC 6749 §2.3.1: the id and secret are form-encoded before Basic.
                    .basic_auth(
                        form_encoded(&self.inner.client_id),
                        Some(form_encoded(&self.inner.client_secret)),
                    )
                    .form(&form)
            })
            .await?;
        if !response.status().is_success() {
            return Err(api_error(response, None).await);
        }
        decode(response).await
    }

    /// Drops the cached token if it is still `used` (another task may have refreshed already).
    async fn forget_token(&self, used: &str) {
        let mut cached = self.inner.token.lock().await;
        if cached.as_ref().is_some_and(|t| t.value == used) {
            *cached = None;
        }
    }

    fn url(&self, path: &str, params: &Params) -> Url {
        let mut url = self.inner.base.join(path).expect("our paths are relative");
        if !params.pairs().is_empty() {
            url.query_pairs_mut()
                .extend_pairs(params.pairs().iter().map(|(k, v)| (*k, v.as_str())));
        }
        url
    }

    /// A read (a list page, the feed, a merchant): it carries the last bookmark seen, so it
    /// sees at least what the reads before it saw, and keeps the one it answers with.
    async fn get_json<T: DeserializeOwned>(&self, path: &str, params: &Params) -> Result<T> {
        let url = self.url(path, params);
        let bookmark = self.bookmark();
        let response = self
            .send(true, true, || {
                let request = self.inner.http.request(Method::GET, url.clone());
                match &bookmark {
                    Some(bookmark) => request.header(BOOKMARK, bookmark),
                    None => request,
                }
            })
            .await?;
        if let Some(answered) = header(response.headers(), BOOKMARK).filter(|b| is_bookmark(b)) {
            *self
                .inner
                .bookmark
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(answered);
        }
        decode(response).await
    }

    /// The last `Payrail-Bookmark` an answer of this client (or a clone) carried: the next
    /// read sends it, so it sees at least as new (API.md, "Reads, replicas and bookmarks").
    pub fn bookmark(&self) -> Option<String> {
        self.inner
            .bookmark
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sends a request built by `build`, with the bearer token when `authorized`: a 401 gets a
    /// fresh token and one more try. Retries as [`Client::with_retries`] says; any other 4xx
    /// comes back at once as [`Error::Api`].
    async fn send(
        &self,
        authorized: bool,
        idempotent: bool,
        build: impl Fn() -> RequestBuilder,
    ) -> Result<reqwest::Response> {
        let mut refreshed = false;
        loop {
            let token = if authorized {
                Some(self.access_token().await?)
            } else {
                None
            };
            let response = self
                .with_retries(idempotent, || match &token {
                    Some(token) => build().bearer_auth(token),
                    None => build(),
                })
                .await?;
            match token {
                Some(token) if response.status() == StatusCode::UNAUTHORIZED && !refreshed => {
                    self.forget_token(&token).await;
                    refreshed = true;
                }
                _ if response.status().is_success() => return Ok(response),
                _ => return Err(api_error(response, None).await),
            }
        }
    }

    /// Sends until an answer is final: 429 is retried by the policy (honouring `Retry-After`),
    /// and so are 5xx, failures to connect and timeouts of `idempotent` requests. Answers the
    /// response when it succeeded or is a 401 (the caller decides about the token).
    async fn with_retries(
        &self,
        idempotent: bool,
        build: impl Fn() -> RequestBuilder,
    ) -> Result<reqwest::Response> {
        let mut attempt = 0;
        loop {
            let delay = match build().send().await {
                Ok(response)
                    if response.status().is_success()
                        || response.status() == StatusCode::UNAUTHORIZED =>
                {
                    return Ok(response)
                }
                Ok(response) => {
                    let status = response.status();
                    let retry_after = retry_after(response.headers());
                    let retryable = status == StatusCode::TOO_MANY_REQUESTS
                        || (status.is_server_error() && idempotent);
                    match self.inner.retry.delay(attempt, retry_after) {
                        Some(delay) if retryable => delay,
                        _ => return Err(api_error(response, retry_after).await),
                    }
                }
                Err(err) => {
                    let retryable = err.is_connect() || (idempotent && err.is_timeout());
                    match self.inner.retry.delay(attempt, None) {
                        Some(delay) if retryable => delay,
                        _ => return Err(Error::Transport(err)),
                    }
                }
            };
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    fn paginate<T, C>(&self, path: &'static str, params: Params) -> BoxStream<'static, Result<T>>
    where
        T: DeserializeOwned + Send + 'static,
        C: DeserializeOwned + ToString + Send + 'static,
    {
        struct State<T> {
            client: Client,
            params: Params,
            buffered: VecDeque<T>,
            done: bool,
            /// Every cursor followed: one seen before means pages going round in a loop.
            seen: std::collections::HashSet<String>,
        }
        let state = State {
            client: self.clone(),
            params,
            buffered: VecDeque::new(),
            done: false,
            seen: std::collections::HashSet::new(),
        };
        stream::try_unfold(state, move |mut state| async move {
            loop {
                if let Some(item) = state.buffered.pop_front() {
                    return Ok(Some((item, state)));
                }
                if state.done {
                    return Ok(None);
                }
                let page: List<T, C> = state.client.get_json(path, &state.params).await?;
                if page.has_more {
                    // A further page must be named by a cursor that moves on, after a page
                    // with rows; anything else would repeat pages or stop early unnoticed.
                    let cursor = page.next_cursor.as_ref().map(ToString::to_string);
                    let broken = match &cursor {
                        None => Some("has_more without a next_cursor"),
                        Some(_) if page.data.is_empty() => Some("has_more on an empty page"),
                        Some(next) if state.seen.contains(next) => {
                            Some("a next_cursor seen before")
                        }
                        Some(_) => None,
                    };
                    if let Some(problem) = broken {
                        return Err(Error::Decode {
                            status: 200,
                            message: format!("a list page that cannot be followed: {problem}"),
                        });
                    }
                    let next = cursor.unwrap_or_default();
                    state.params.set_cursor(next.clone());
                    state.seen.insert(next);
                } else {
                    state.done = true;
                }
                state.buffered.extend(page.data);
            }
        })
        .boxed()
    }
}

/// `text` form-encoded (`application/x-www-form-urlencoded`), as a Basic credential's parts are.
fn form_encoded(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// Whether `url`'s host is this machine.
fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => {
            let name = host.to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
    }
}

/// The answer header naming the request, which the API's errors carry.
const REQUEST_ID: &str = "payrail-request-id";

/// The header that says where an answer's reads stood, sent back to read at least as new.
const BOOKMARK: &str = "payrail-bookmark";

/// A header's value as text, when it is there and printable.
fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name)?.to_str().ok().map(str::to_owned)
}

/// Whether `value` is shaped as the API's bookmarks are (`^[A-Za-z0-9-]{1,128}$`): only such
/// a value is kept and sent back.
fn is_bookmark(value: &str) -> bool {
    (1..=128).contains(&value.len())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// `Retry-After` in seconds (the form the API sends).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// Most bytes of an answer the client reads: a page of 100 transactions is about 200 KB.
pub const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;

/// The body of an HTTP answer, refused as soon as it passes `limit` bytes (by its
/// `Content-Length`, or while it is read), so a broken or hostile server cannot exhaust memory.
pub async fn read_limited(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>> {
    let status = response.status().as_u16();
    let too_large = || Error::Decode {
        status,
        message: format!("the answer is larger than {limit} bytes"),
    };
    if response
        .content_length()
        .is_some_and(|length| length > limit as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

async fn api_error(response: reqwest::Response, retry_after: Option<Duration>) -> Error {
    #[derive(Deserialize)]
    struct Body {
        error: String,
        // Nullable in the contract (§2.5): absent and `null` read alike.
        #[serde(default)]
        error_description: Option<String>,
    }
    let status = response.status().as_u16();
    let request_id = header(response.headers(), REQUEST_ID);
    match read_limited(response, MAX_ANSWER_BYTES).await {
        Ok(bytes) => match serde_json::from_slice::<Body>(&bytes) {
            Ok(body) => Error::Api {
                status,
                error: body.error,
                description: body.error_description.unwrap_or_default(),
                retry_after,
                request_id,
            },
            Err(_) => Error::Decode {
                status,
                message: format!(
                    "an error answer without the error body: {}",
                    String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
                ),
            },
        },
        Err(err) => err,
    }
}

async fn decode<T: DeserializeOwned>(response: reqwest::Response) -> Result<T> {
    let status = response.status().as_u16();
    let bytes = read_limited(response, MAX_ANSWER_BYTES).await?;
    serde_json::from_slice(&bytes).map_err(|err| Error::Decode {
        status,
        message: err.to_string(),
    })
}
