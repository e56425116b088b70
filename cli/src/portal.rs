//! The portal's session API, which `login` and `events resend` call (the SDK covers the partner
//! API only).

use std::time::Duration;

use crate::config::PortalLogin;
use crate::http;
use crate::output::Failure;

/// The name of the portal's session cookie.
const SESSION_COOKIE: &str = "payrail_portal";

/// A portal answer.
pub(crate) struct Answer {
    /// The HTTP status.
    pub(crate) status: u16,
    /// The session cookie's value, when the answer sets one.
    pub(crate) session: Option<String>,
    /// The JSON body (read up to the SDK's limit); `null` when it has none.
    pub(crate) body: serde_json::Value,
}

impl Answer {
    /// The failure the answer's error ends the command with.
    pub(crate) fn failure(&self) -> Failure {
        let code = self.body["error"].as_str().unwrap_or("error");
        let description = self.body["error_description"].as_str().unwrap_or("");
        let hint = match code {
            "login_required" => "\nhint: the portal session ended; run payrail login again",
            _ => "",
        };
        Failure::failed(format!("{code} ({}): {description}{hint}", self.status))
    }
}

/// POSTs to `path` under `api_url`, with what `request` adds.
pub(crate) async fn post(
    api_url: &str,
    path: &str,
    request: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
) -> Result<Answer, Failure> {
    let http = http::client(Duration::from_secs(30))?;
    let url = http::join(api_url, path)?;
    let response = request(http.post(url))
        .send()
        .await
        .map_err(payrail::Error::from)?;
    let status = response.status().as_u16();
    let session = response
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| {
            v.split(';')
                .next()?
                .strip_prefix(SESSION_COOKIE)?
                .strip_prefix('=')
        })
        .map(str::to_owned);
    let body = payrail::read_limited(response, payrail::MAX_ANSWER_BYTES)
        .await
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    Ok(Answer {
        status,
        session,
        body,
    })
}

/// Adds a login's session cookie and CSRF token to a request.
pub(crate) fn with_session(
    request: reqwest::RequestBuilder,
    login: &PortalLogin,
) -> reqwest::RequestBuilder {
    request
        .header(
            reqwest::header::COOKIE,
            format!("{SESSION_COOKIE}={}", login.cookie),
        )
        .header("X-CSRF-Token", &login.csrf)
}
