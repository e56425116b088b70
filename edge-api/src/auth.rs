//! OAuth 2.0 client credentials (RFC 6749 §2.3.1, §4.4, §5) and bearer tokens (RFC 6750).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use shared_types::ids::ClientId;
use shared_types::ids::InstitutionId;
use shared_types::{ErrorCode, Scope, ScopeSet, TokenResponse};
use worker::Headers;

use crate::crypto;
use crate::ctx::Ctx;
use crate::db::clients::{self, Issue};
use crate::error::{ApiError, OrInternal};
use crate::throttle::{self, CLIENT_AUTH};

/// Access-token lifetime (spec §2.4, §5.5).
pub const TOKEN_LIFETIME_SECONDS: u32 = 3600;
/// Prefix of access tokens, so that a leaked one is recognisable.
pub const TOKEN_PREFIX: &str = payrail_credentials::ACCESS_TOKEN_PREFIX;

const BASIC_CHALLENGE: &str = "Basic realm=\"payrail\", charset=\"UTF-8\"";
const BEARER_REALM: &str = "Bearer realm=\"payrail\"";

/// Where the client's credentials came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The public client id.
    pub client_id: String,
    /// The secret as sent.
    pub client_secret: String,
    /// Whether they came in an `Authorization: Basic` header.
    pub basic: bool,
}

/// The parsed token request (form fields of spec §4.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRequest {
    /// Client credentials.
    pub credentials: Credentials,
    /// Requested scopes, when the `scope` field was sent.
    pub scope: Option<ScopeSet>,
}

/// Parses a token request: the form body plus an optional `Authorization` header. Pure.
pub fn parse_token_request(
    form: &str,
    authorization: Option<&str>,
) -> Result<TokenRequest, ApiError> {
    let fields = crate::http::form_fields(form)?;
    // RFC 6749 §3.2: parameters must not repeat; unknown ones are ignored. (Linear: a set of
    // the names seen.)
    let mut seen = std::collections::HashSet::new();
    for (name, _) in &fields {
        if !seen.insert(name.as_str()) {
            return Err(ApiError::invalid_request(format!(
                "{name} must be given at most once"
            )));
        }
    }
    // RFC 6749 §3.2: a parameter sent without a value is treated as if it were left out.
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    };

    match field("grant_type") {
        None => return Err(ApiError::invalid_request("grant_type is required")),
        Some("client_credentials") => {}
        Some(other) => {
            return Err(ApiError::new(
                ErrorCode::UnsupportedGrantType,
                format!("grant_type must be client_credentials; got {other:?}"),
            ))
        }
    }

    let in_form = field("client_id").is_some() || field("client_secret").is_some();
    let credentials = match authorization {
        Some(header) => {
            if in_form {
                return Err(ApiError::invalid_request(
                    "send the client credentials either as HTTP Basic or in the form body, \
                     not both",
                ));
            }
            parse_basic(header)?
        }
        None => {
            let client_id = field("client_id");
            let client_secret = field("client_secret");
            match (client_id, client_secret) {
                (Some(id), Some(secret)) => Credentials {
                    client_id: id.to_owned(),
                    client_secret: secret.to_owned(),
                    basic: false,
                },
                (None, _) => {
                    return Err(ApiError::invalid_request(
                        "client_id is required (in the form body, or use HTTP Basic)",
                    ))
                }
                (Some(_), None) => {
                    return Err(ApiError::invalid_request(
                        "client_secret is required (in the form body, or use HTTP Basic)",
                    ))
                }
            }
        }
    };

    let scope = match field("scope") {
        None => None,
        Some(text) => Some(ScopeSet::parse(text).map_err(|err| {
            ApiError::new(
                ErrorCode::InvalidScope,
                match err {
                    shared_types::scope::ScopeError::Unknown(s) => format!(
                        "scope {s:?} is not known; scopes are {}",
                        Scope::ALL.map(Scope::as_str).join(", ")
                    ),
                    shared_types::scope::ScopeError::Empty => {
                        "scope must name at least one scope, or be left out".to_owned()
                    }
                },
            )
        })?),
    };
    Ok(TokenRequest { credentials, scope })
}

/// Decodes `Authorization: Basic` per RFC 6749 §2.3.1: base64 of the form-urlencoded client id
/// and secret joined by a colon.
fn parse_basic(header: &str) -> Result<Credentials, ApiError> {
    let bad = || {
        ApiError::new(
            ErrorCode::InvalidClient,
            "the Authorization header must be HTTP Basic with the client id and secret",
        )
        .with_challenge(BASIC_CHALLENGE)
    };
    let (scheme, encoded) = header.trim().split_once(' ').ok_or_else(bad)?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(bad());
    }
    let decoded = STANDARD.decode(encoded.trim()).map_err(|_| bad())?;
    let decoded = String::from_utf8(decoded).map_err(|_| bad())?;
    let (id, secret) = decoded.split_once(':').ok_or_else(bad)?;
    let unescape = |s: &str| {
        percent_encoding::percent_decode_str(&s.replace('+', " "))
            .decode_utf8()
            .map(|c| c.into_owned())
            .map_err(|_| bad())
    };
    let (client_id, client_secret) = (unescape(id)?, unescape(secret)?);
    if client_id.is_empty() || client_secret.is_empty() {
        return Err(bad());
    }
    Ok(Credentials {
        client_id,
        client_secret,
        basic: true,
    })
}

/// Authenticates the client and issues a token (spec §4.1), throttling failures per client id
/// and caller address.
pub async fn issue_token(ctx: &Ctx, request: TokenRequest) -> Result<TokenResponse, ApiError> {
    let creds = &request.credentials;
    // Every 401 carries a challenge (RFC 9110 §11.6.1), whichever way the credentials came.
    let failed = || {
        ApiError::new(ErrorCode::InvalidClient, "client authentication failed")
            .with_challenge(BASIC_CHALLENGE)
    };
    // A client id not shaped like one names no client and never will: refused as any unknown
    // id is, but without a round trip or a throttle row (the shape is public; an id of any
    // length up to the body's would otherwise be stored as a failure's key).
    if ClientId::parse(&creds.client_id).is_err() {
        return Err(failed());
    }
    // Everything a valid request needs in one round trip (see `clients::issue`): the batch
    // stores the token only if the checks below, made on what it read, all pass.
    let presented = crypto::sha256_hex(&creds.client_secret);
    let token = crypto::random_token(TOKEN_PREFIX).or_internal("generate token")?;
    let token_hash = crypto::sha256_hex(&token);
    let now = ctx.now();
    let asked: Option<Vec<&str>> = request
        .scope
        .map(|asked| asked.iter().map(Scope::as_str).collect());
    let issued = clients::issue(
        &ctx.db,
        &Issue {
            client_id: &creds.client_id,
            source: ctx.caller_address(),
            presented_hash: &presented,
            asked,
            token_hash: &token_hash,
            now,
            now_text: &crate::ctx::timestamp(now)?,
            expires_at: now + i64::from(TOKEN_LIFETIME_SECONDS),
            max_failures: CLIENT_AUTH.max_failures,
            window_seconds: CLIENT_AUTH.window_seconds,
        },
        throttle::clear_once_issued(ctx, &creds.client_id, &token_hash)?,
    )
    .await
    .or_internal("issue token")?;
    throttle::refuse_over(issued.failures.as_ref(), &CLIENT_AUTH, now)?;
    // Compare against a stand-in for unknown clients too, so timing says nothing about which
    // client ids exist.
    let stored = issued
        .client
        .as_ref()
        .map_or("0".repeat(64), |c| c.secret_hash.clone());
    let client = match issued.client {
        Some(client) if crypto::constant_time_eq(&presented, &stored) => client,
        _ => {
            throttle::record_failure(ctx, &creds.client_id, &CLIENT_AUTH).await?;
            return Err(failed());
        }
    };

    let granted = ScopeSet::parse(&client.scopes).or_internal("parse granted scopes")?;
    let scopes = match request.scope {
        None => granted,
        Some(asked) if asked.is_subset_of(granted) => asked,
        Some(asked) => {
            let extra: Vec<&str> = asked
                .iter()
                .filter(|s| !granted.contains(*s))
                .map(Scope::as_str)
                .collect();
            return Err(ApiError::new(
                ErrorCode::InvalidScope,
                format!(
                    "scope exceeds the client's grant: {} not granted",
                    extra.join(", ")
                ),
            ));
        }
    };
    if !issued.stored {
        // Cannot happen while the checks above and the batch's agree; never reveal a token
        // that was not stored.
        return Err(failed());
    }
    let scope_text = scopes.to_string();
    Ok(TokenResponse {
        access_token: token,
        token_type: "Bearer".to_owned(),
        expires_in: TOKEN_LIFETIME_SECONDS,
        scope: scope_text,
    })
}

/// Who a bearer token acts for.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    /// The institution whose data the request may see.
    pub institution_id: InstitutionId,
    /// Where its money lives.
    pub store: crate::db::MoneyStore,
}

/// Authenticates `Authorization: Bearer` and checks that the token carries `needed`.
pub async fn authorize(ctx: &Ctx, headers: &Headers, needed: Scope) -> Result<Caller, ApiError> {
    let hash = bearer_hash(headers)?;
    let found = clients::find_token(&ctx.db, &hash, ctx.now())
        .await
        .or_internal("read token")?;
    allowed(found.as_ref().map(|t| t.scopes.as_str()), needed)?;
    let found = found.ok_or_else(invalid_token)?;
    Ok(Caller {
        institution_id: found.institution_id,
        store: found.store,
    })
}

/// The hash of the request's bearer token (what `access_tokens` stores), before it is looked
/// up: a missing, malformed or foreign token is refused here.
pub fn bearer_hash(headers: &Headers) -> Result<String, ApiError> {
    // Spec §7: the body says invalid_client for a missing or bad token; the challenge follows
    // RFC 6750 §3.
    let missing = || {
        ApiError::new(
            ErrorCode::InvalidClient,
            "a bearer token is required: Authorization: Bearer <access token>",
        )
        .with_challenge(BEARER_REALM)
    };
    let token = bearer(headers).ok_or_else(missing)?;
    if !token.starts_with(TOKEN_PREFIX) {
        return Err(invalid_token());
    }
    Ok(crypto::sha256_hex(&token))
}

/// The token of `Authorization: Bearer <token>`, if the request sends one.
pub fn bearer(headers: &Headers) -> Option<String> {
    let header = headers.get("Authorization").ok().flatten()?;
    match header.trim().split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
            Some(token.trim().to_owned())
        }
        _ => None,
    }
}

fn invalid_token() -> ApiError {
    ApiError::new(
        ErrorCode::InvalidClient,
        "the access token is invalid, expired or revoked; request a new one",
    )
    .with_challenge(format!(
        "{BEARER_REALM}, error=\"invalid_token\", error_description=\"the access token is \
         invalid, expired or revoked\""
    ))
}

/// Whether a token with `scopes` (`None`: no live token had the hash) may do what needs
/// `needed`.
pub fn allowed(scopes: Option<&str>, needed: Scope) -> Result<(), ApiError> {
    let scopes =
        ScopeSet::parse(scopes.ok_or_else(invalid_token)?).or_internal("parse token scopes")?;
    if !scopes.contains(needed) {
        return Err(ApiError::new(
            ErrorCode::InsufficientScope,
            format!("this operation needs the {} scope", needed.as_str()),
        )
        .with_challenge(format!(
            "{BEARER_REALM}, error=\"insufficient_scope\", scope=\"{}\"",
            needed.as_str()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(result: Result<TokenRequest, ApiError>) -> ErrorCode {
        result.expect_err("should be refused").code
    }

    #[test]
    fn form_credentials() {
        let req = parse_token_request(
            "grant_type=client_credentials&client_id=cli_1&client_secret=s%2B1&scope=merchants%3Aread",
            None,
        )
        .unwrap();
        assert_eq!(req.credentials.client_id, "cli_1");
        assert_eq!(req.credentials.client_secret, "s+1");
        assert!(!req.credentials.basic);
        assert_eq!(req.scope.unwrap().to_string(), "merchants:read");
    }

    #[test]
    fn basic_credentials_are_form_decoded() {
        let header = format!("Basic {}", STANDARD.encode("cli%3A1:se+cret%25"));
        let req = parse_token_request("grant_type=client_credentials", Some(&header)).unwrap();
        assert_eq!(req.credentials.client_id, "cli:1");
        assert_eq!(req.credentials.client_secret, "se cret%");
        assert!(req.credentials.basic);
    }

    #[test]
    fn parameters_without_a_value_are_left_out() {
        // RFC 6749 §3.2: an empty scope asks for the whole grant; empty body credentials
        // beside Basic are not a second set of credentials.
        let basic = format!("Basic {}", STANDARD.encode("cli_1:s"));
        let req = parse_token_request(
            "grant_type=client_credentials&scope=&client_id=&client_secret=",
            Some(&basic),
        )
        .unwrap();
        assert!(req.scope.is_none());
        assert!(req.credentials.basic);
        assert_eq!(req.credentials.client_id, "cli_1");
    }

    #[test]
    fn refusals() {
        let basic = format!("Basic {}", STANDARD.encode("a:b"));
        assert_eq!(
            code(parse_token_request("client_id=a&client_secret=b", None)),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code(parse_token_request(
                "grant_type=password&client_id=a&client_secret=b",
                None
            )),
            ErrorCode::UnsupportedGrantType
        );
        assert_eq!(
            code(parse_token_request(
                "grant_type=client_credentials&client_id=a",
                None
            )),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code(parse_token_request(
                "grant_type=client_credentials&client_id=a",
                Some(&basic)
            )),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code(parse_token_request(
                "grant_type=client_credentials&grant_type=client_credentials",
                Some(&basic)
            )),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code(parse_token_request(
                "grant_type=client_credentials&scope=admin",
                Some(&basic)
            )),
            ErrorCode::InvalidScope
        );
        assert_eq!(
            code(parse_token_request(
                "grant_type=&client_id=a&client_secret=b",
                None
            )),
            ErrorCode::InvalidRequest,
            "an empty grant_type is a missing one"
        );
        let malformed = parse_token_request("grant_type=client_credentials", Some("Basic !!!"))
            .expect_err("malformed basic");
        assert_eq!(malformed.code, ErrorCode::InvalidClient);
        assert!(malformed.challenge.unwrap().starts_with("Basic"));
    }
}
