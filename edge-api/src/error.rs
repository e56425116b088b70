//! The one error type of the worker, rendered as the spec's error body (§2.5).

use shared_types::{ErrorBody, ErrorCode};

/// A request that failed, carrying everything its response needs.
#[derive(Debug)]
pub struct ApiError {
    /// Machine code; decides the HTTP status.
    pub code: ErrorCode,
    /// Human-readable text naming the problem.
    pub description: String,
    /// `WWW-Authenticate` challenge, for 401 and 403.
    pub challenge: Option<String>,
    /// `Retry-After` seconds, for 429.
    pub retry_after: Option<u64>,
    /// `Allow`, for 405.
    pub allow: Option<String>,
}

impl ApiError {
    /// An error with the status its code implies.
    pub fn new(code: ErrorCode, description: impl Into<String>) -> Self {
        Self {
            code,
            description: description.into(),
            challenge: None,
            retry_after: None,
            allow: None,
        }
    }

    /// `invalid_request`: the description must name the parameter at fault.
    pub fn invalid_request(description: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, description)
    }

    /// `not_found`.
    pub fn not_found(description: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, description)
    }

    /// A failure on our side. The cause is logged; the client sees no internal detail.
    pub fn internal(context: &str, cause: impl std::fmt::Display) -> Self {
        worker::console_error!("{context}: {cause}");
        Self::new(
            ErrorCode::ServerError,
            "the request could not be completed; try again",
        )
    }

    /// Adds a `WWW-Authenticate` challenge.
    pub fn with_challenge(mut self, challenge: impl Into<String>) -> Self {
        self.challenge = Some(challenge.into());
        self
    }

    /// Adds the `Allow` header of a 405.
    pub fn with_allow(mut self, methods: impl Into<String>) -> Self {
        self.allow = Some(methods.into());
        self
    }

    /// Adds a `Retry-After` delay.
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// The body (§2.5).
    pub fn body(&self) -> ErrorBody {
        ErrorBody::new(self.code, self.description.clone())
    }
}

/// Turns infrastructure failures into [`ApiError::internal`] with a short context, explicitly at
/// each call site rather than through a blanket `From`.
pub trait OrInternal<T> {
    /// Maps the error to a logged 500 naming `context`.
    fn or_internal(self, context: &str) -> Result<T, ApiError>;
}

impl<T, E: std::fmt::Display> OrInternal<T> for Result<T, E> {
    fn or_internal(self, context: &str) -> Result<T, ApiError> {
        self.map_err(|err| ApiError::internal(context, err))
    }
}

/// Deepest nesting a JSON body may have.
pub const JSON_DEPTH_MAX: usize = 16;

/// Refuses JSON nested deeper than [`JSON_DEPTH_MAX`], before any parser builds a tree of it.
/// (A linear scan that counts brackets outside strings.)
pub fn check_json_depth(text: &str) -> Result<(), ApiError> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > JSON_DEPTH_MAX {
                    return Err(ApiError::invalid_request(format!(
                        "the JSON body must be nested at most {JSON_DEPTH_MAX} levels deep"
                    )));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Reads a JSON body into `T`; a failure names the field at fault (`amount: invalid type: …`),
/// without serde's line and column noise.
pub fn from_json<T: serde::de::DeserializeOwned>(body: &str) -> Result<T, ApiError> {
    check_json_depth(body)?;
    let mut deserializer = serde_json::Deserializer::from_str(body);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner().to_string();
        let inner = inner.split(" at line").next().unwrap_or(&inner).to_owned();
        ApiError::invalid_request(if path == "." {
            format!("the body must be a JSON object: {inner}")
        } else {
            format!("{path}: {inner}")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::{check_json_depth, JSON_DEPTH_MAX};

    #[test]
    fn json_depth_is_bounded_outside_strings_only() {
        let deep = format!(
            "{}{}",
            "[".repeat(JSON_DEPTH_MAX + 1),
            "]".repeat(JSON_DEPTH_MAX + 1)
        );
        assert!(check_json_depth(&deep).is_err());
        let ok = format!(
            "{}{}",
            "[".repeat(JSON_DEPTH_MAX),
            "]".repeat(JSON_DEPTH_MAX)
        );
        assert!(check_json_depth(&ok).is_ok());
        let in_string = format!(r#"{{"a": "{}\" [[["}}"#, "[".repeat(100));
        assert!(check_json_depth(&in_string).is_ok());
    }
}
