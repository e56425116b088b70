//! The error body of every failed request (spec §2.5) and the codes it can carry.

use alloc::string::String;

use serde::{Deserialize, Serialize};

/// Every `error` code the service answers with. The OAuth codes come from RFC 6749 §5.2 and
/// RFC 6750 §3.1; the rest are ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// A parameter is missing, repeated, unknown or malformed.
    InvalidRequest,
    /// Client authentication failed at the token endpoint.
    InvalidClient,
    /// The grant type is not `client_credentials`.
    UnsupportedGrantType,
    /// The client may not use this grant type.
    UnauthorizedClient,
    /// A requested scope is unknown or exceeds the client's grant.
    InvalidScope,
    /// The bearer token is missing, expired, revoked or malformed.
    InvalidToken,
    /// The bearer token lacks the scope the operation needs.
    InsufficientScope,
    /// The resource does not exist for this institution.
    NotFound,
    /// The merchant cannot take payments now (status, onboarding or crypto disabled).
    MerchantUnavailable,
    /// The method is not allowed on this path.
    MethodNotAllowed,
    /// Portal login: the e-mail or password is wrong.
    InvalidCredentials,
    /// Portal: no live session; log in.
    LoginRequired,
    /// Portal: the CSRF token is missing or wrong, or the request came from another origin.
    CsrfFailed,
    /// Too many failed attempts; retry after the `Retry-After` header.
    RateLimited,
    /// The request conflicts with the resource's current state.
    Conflict,
    /// Portal: the change needs an admin; the session's user is a viewer.
    AdminRequired,
    /// A checkout's `redirectUrl` is not one of the merchant's allowed return origins.
    RedirectNotAllowed,
    /// The request body is larger than the operation accepts.
    PayloadTooLarge,
    /// The request body did not arrive in time (it was declared longer than what was sent, or
    /// sent too slowly).
    RequestTimeout,
    /// Payments cannot be taken now: no way to pay is available on this deployment.
    PaymentsUnavailable,
    /// Something failed on our side; the description carries no internal detail.
    ServerError,
}

impl ErrorCode {
    /// The code as it appears in the `error` member.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::InvalidClient => "invalid_client",
            Self::UnsupportedGrantType => "unsupported_grant_type",
            Self::UnauthorizedClient => "unauthorized_client",
            Self::InvalidScope => "invalid_scope",
            Self::InvalidToken => "invalid_token",
            Self::InsufficientScope => "insufficient_scope",
            Self::NotFound => "not_found",
            Self::MerchantUnavailable => "merchant_unavailable",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::InvalidCredentials => "invalid_credentials",
            Self::LoginRequired => "login_required",
            Self::CsrfFailed => "csrf_failed",
            Self::RateLimited => "rate_limited",
            Self::Conflict => "conflict",
            Self::PayloadTooLarge => "payload_too_large",
            Self::RequestTimeout => "request_timeout",
            Self::RedirectNotAllowed => "redirect_not_allowed",
            Self::AdminRequired => "admin_required",
            Self::PaymentsUnavailable => "payments_unavailable",
            Self::ServerError => "server_error",
        }
    }

    /// The HTTP status that goes with the code (RFC 6749 §5.2, RFC 6750 §3.1).
    pub fn http_status(self) -> u16 {
        match self {
            Self::InvalidRequest
            | Self::UnsupportedGrantType
            | Self::UnauthorizedClient
            | Self::InvalidScope => 400,
            Self::InvalidClient
            | Self::InvalidToken
            | Self::InvalidCredentials
            | Self::LoginRequired => 401,
            Self::InsufficientScope
            | Self::MerchantUnavailable
            | Self::CsrfFailed
            | Self::RedirectNotAllowed
            | Self::AdminRequired => 403,
            Self::NotFound => 404,
            Self::MethodNotAllowed => 405,
            Self::RequestTimeout => 408,
            Self::Conflict => 409,
            Self::PayloadTooLarge => 413,
            Self::RateLimited => 429,
            Self::ServerError => 500,
            Self::PaymentsUnavailable => 503,
        }
    }
}

/// The error body (spec §2.5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Stable machine-readable code.
    pub error: ErrorCode,
    /// Human-readable text naming the problem; never internal detail.
    pub error_description: Option<String>,
}

impl ErrorBody {
    /// An error with a description.
    pub fn new(error: ErrorCode, description: impl Into<String>) -> Self {
        Self {
            error,
            error_description: Some(description.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_code_and_nullable_description() {
        let body = ErrorBody {
            error: ErrorCode::InsufficientScope,
            error_description: None,
        };
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"error":"insufficient_scope","error_description":null}"#
        );
    }

    #[test]
    fn as_str_matches_serde() {
        for code in [
            ErrorCode::InvalidRequest,
            ErrorCode::InvalidClient,
            ErrorCode::UnsupportedGrantType,
            ErrorCode::UnauthorizedClient,
            ErrorCode::InvalidScope,
            ErrorCode::InvalidToken,
            ErrorCode::InsufficientScope,
            ErrorCode::NotFound,
            ErrorCode::MerchantUnavailable,
            ErrorCode::MethodNotAllowed,
            ErrorCode::InvalidCredentials,
            ErrorCode::LoginRequired,
            ErrorCode::CsrfFailed,
            ErrorCode::RateLimited,
            ErrorCode::Conflict,
            ErrorCode::PayloadTooLarge,
            ErrorCode::RequestTimeout,
            ErrorCode::ServerError,
        ] {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::Value::String(code.as_str().to_owned())
            );
        }
    }

    #[test]
    fn oauth_statuses_follow_rfc_6749() {
        assert_eq!(ErrorCode::InvalidClient.http_status(), 401);
        assert_eq!(ErrorCode::InvalidScope.http_status(), 400);
        assert_eq!(ErrorCode::UnsupportedGrantType.http_status(), 400);
        assert_eq!(ErrorCode::InsufficientScope.http_status(), 403);
    }
}
