//! Plain HTTP, beside the SDK's client: the portal's API and forwarding to a local receiver.

use std::time::Duration;

use crate::output::Failure;

/// An HTTP client that gives up after `timeout` and follows no redirects.
pub(crate) fn client(timeout: Duration) -> Result<reqwest::Client, Failure> {
    reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|err| Failure::from(err.to_string()))
}

/// `path` under the base URL `base` (a base with a path keeps it).
pub(crate) fn join(base: &str, path: &str) -> Result<reqwest::Url, Failure> {
    let mut url = reqwest::Url::parse(base)
        .map_err(|err| Failure::from(format!("API URL {base:?}: {err}")))?;
    if !url.path().ends_with('/') {
        let with_slash = format!("{}/", url.path());
        url.set_path(&with_slash);
    }
    url.join(path).map_err(|err| Failure::from(err.to_string()))
}
