//! What can go wrong talking to the API.

use std::time::Duration;

/// An error from the client.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The API answered with an error body (spec §2.5): its status, `error` code and
    /// `error_description`. 4xx are never retried; 429 and 5xx were retried before this surfaced.
    Api {
        /// The HTTP status.
        status: u16,
        /// The `error` code, e.g. `invalid_request`, `insufficient_scope`, `rate_limited`.
        error: String,
        /// The `error_description`, naming the problem.
        description: String,
        /// The `Retry-After` the API asked for, when it did (429).
        retry_after: Option<Duration>,
        /// The answer's `Payrail-Request-Id`: quote it to Payrail's support.
        request_id: Option<String>,
    },
    /// The request did not complete: connection refused, timeout, TLS, a body cut short.
    Transport(reqwest::Error),
    /// The API answered something that is not what the contract says (a bug on one side).
    Decode {
        /// The HTTP status of the answer.
        status: u16,
        /// What did not parse.
        message: String,
    },
    /// The client was built with an unusable setting (e.g. a base URL that is not a URL).
    Config(String),
}

impl Error {
    /// The API's `error` code, when the API answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The answer's `Payrail-Request-Id`, when the API answered with an error body.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            Error::Api { request_id, .. } => request_id.as_deref(),
            _ => None,
        }
    }

    /// The HTTP status, when the API answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } | Error::Decode { status, .. } => Some(*status),
            Error::Transport(err) => err.status().map(|s| s.as_u16()),
            Error::Config(_) => None,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Api {
                status,
                error,
                description,
                request_id,
                ..
            } => {
                write!(f, "{error} ({status}): {description}")?;
                match request_id {
                    Some(id) => write!(f, " [{id}]"),
                    None => Ok(()),
                }
            }
            Error::Transport(err) => write!(f, "request failed: {err}"),
            Error::Decode { status, message } => {
                write!(f, "unexpected answer ({status}): {message}")
            }
            Error::Config(message) => write!(f, "bad client configuration: {message}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Transport(err) => Some(err),
            _ => None,
        }
    }
}

impl From<reqwest::Error> for Error {
    fn from(err: reqwest::Error) -> Self {
        Error::Transport(err)
    }
}

/// The result of every call.
pub type Result<T, E = Error> = std::result::Result<T, E>;
