//! The one error type of the worker, rendered as the spec's error body (§2.5).

use std::panic::Location;

use shared_types::{ErrorBody, ErrorCode};

/// A request that failed, carrying everything its response needs, and for a failure on our side
/// what the log needs: where it was made and why.
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
    /// For a failure on our side: the source line that made it, what it was doing and the
    /// cause, for the log only (never in the response).
    internal: Option<Box<Internal>>,
}

/// Where and why a failure on our side happened.
#[derive(Debug)]
struct Internal {
    at: &'static Location<'static>,
    context: String,
    cause: String,
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
            internal: None,
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

    /// A failure on our side, made at the caller's source line (`#[track_caller]`), which the
    /// log line names with `context` and the cause. The client sees no internal detail. It is
    /// logged once, where it is answered or given up on ([`ApiError::log`]). One cause is no
    /// failure: D1 refusing a write while the institution's money moves into its object
    /// ([`MONEY_MOVING`]) is answered as a pause (503 with `Retry-After`).
    #[track_caller]
    pub fn internal(context: &str, cause: impl std::fmt::Display) -> Self {
        let cause = cause.to_string();
        // D1 refusing a write of an institution's money rows while they move into its object:
        // a pause of the move's seconds, not a failure.
        if cause.contains(MONEY_MOVING) {
            return moving();
        }
        let mut err = Self::new(
            ErrorCode::ServerError,
            "the request could not be completed; try again",
        );
        err.internal = Some(Box::new(Internal {
            at: Location::caller(),
            context: context.to_owned(),
            cause,
        }));
        err
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

    /// The log line of a failure on our side (`edge-api/src/x.rs:12: context: cause`); `None`
    /// for a refusal of the request, which is the client's to read, not ours.
    pub fn log_line(&self) -> Option<String> {
        self.internal.as_ref().map(|i| {
            format!(
                "{}:{}: {}: {}",
                i.at.file(),
                i.at.line(),
                i.context,
                i.cause
            )
        })
    }

    /// Logs a failure on our side, once: where it is answered (the request's boundary) or
    /// given up on (a cron task, a queue message). A refusal of the request logs nothing.
    pub fn log(&self) {
        if let Some(line) = self.log_line() {
            worker::console_error!("{line}");
        }
    }

    /// Logs it where it is given up on after `what` (a side effect whose failure changes no
    /// answer): a failure on our side with its source line, any other with its description.
    pub fn log_with(&self, what: impl std::fmt::Display) {
        match self.log_line() {
            Some(line) => worker::console_error!("{what}: {line}"),
            None => worker::console_warn!("{what}: {}", self.description),
        }
    }
}

/// Turns infrastructure failures into [`ApiError::internal`] with a short context, explicitly at
/// each call site rather than through a blanket `From`; the error carries the call site's file
/// and line.
pub trait OrInternal<T> {
    /// Maps the error to a 500 naming `context` and the caller's source line.
    #[track_caller]
    fn or_internal(self, context: &str) -> Result<T, ApiError>;
}

impl<T, E: std::fmt::Display> OrInternal<T> for Result<T, E> {
    #[track_caller]
    fn or_internal(self, context: &str) -> Result<T, ApiError> {
        // A `match`, not `map_err`: a closure would name this line instead of the caller's.
        match self {
            Ok(value) => Ok(value),
            Err(err) => Err(ApiError::internal(context, err)),
        }
    }
}

/// How D1 refuses a write of an institution's money rows while they move into its object, or
/// once they have (migration 0036's triggers).
pub const MONEY_MOVING: &str = "institution money moving";

/// The answer to a write D1 refused because the institution's money is moving into its object:
/// a pause of a few seconds, not a failure.
fn moving() -> ApiError {
    ApiError::new(
        ErrorCode::PaymentsUnavailable,
        "the institution's money is moving to its own store; try again in a few seconds",
    )
    .with_retry_after(5)
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

    #[test]
    fn an_internal_error_names_the_line_that_made_it() {
        use super::{ApiError, OrInternal};
        let failed: Result<(), &str> = Err("disk on fire");
        let line = line!() + 1;
        let err = failed.or_internal("read things").unwrap_err();
        assert_eq!(
            err.log_line().unwrap(),
            format!("{}:{line}: read things: disk on fire", file!())
        );
        assert_eq!(
            err.description,
            "the request could not be completed; try again"
        );
        assert_eq!(ApiError::not_found("no such thing").log_line(), None);
    }
}

#[cfg(test)]
mod moving_tests {
    use super::*;

    /// D1's refusal of a moving institution's writes (migration 0036's triggers) is answered as
    /// a pause with `Retry-After`, however the call site wraps it; the triggers' message is the
    /// one recognised.
    #[test]
    fn a_write_refused_by_a_move_is_a_pause_not_a_failure() {
        let migration = include_str!("../migrations/0036_money_moves.sql");
        let raised = migration
            .split("RAISE(ABORT, '")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .unwrap();
        assert!(raised.starts_with(MONEY_MOVING), "{raised}");
        let cause = format!("constraint: {raised}: SQLITE_CONSTRAINT");
        for err in [
            ApiError::internal("write", &cause),
            Err::<(), _>(cause.clone())
                .or_internal("write")
                .unwrap_err(),
        ] {
            assert_eq!(err.code, ErrorCode::PaymentsUnavailable);
            assert_eq!(err.retry_after, Some(5));
            assert!(err.internal.is_none());
        }
        assert_eq!(
            ApiError::internal("write", "constraint: UNIQUE").code,
            ErrorCode::ServerError
        );
    }
}
