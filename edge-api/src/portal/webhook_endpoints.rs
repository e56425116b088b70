//! Webhook endpoints, as an admin manages them from the pages and the JSON API: list, create,
//! edit, delete, reveal and rotate the signing secret. Every function is scoped to the portal
//! session's institution: another institution's endpoint is `not_found`, like an unknown one.

use serde::{Deserialize, Serialize};
use shared_types::ids::EndpointId;
use shared_types::lifecycle::EventType;
use shared_types::{time, EndpointStatus, ErrorCode};

use super::fields::check_text;
use super::Portal;
use crate::crypto;
use crate::ctx::timestamp;
use crate::db::endpoints::{self, Changes, EndpointRow, Rotation};
use crate::db::{deliveries, Batch};
use crate::error::{ApiError, OrInternal};
use crate::webhook_url::{self, Checked};

/// Default grace period of a rotated signing secret.
pub const DEFAULT_GRACE_SECONDS: i64 = 24 * 60 * 60;
/// Longest grace period.
pub const MAX_GRACE_SECONDS: i64 = 7 * 24 * 60 * 60;
/// A DNS-over-HTTPS answer must come within this, and is read up to this many bytes.
const DNS_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);
const DNS_ANSWER_MAX: usize = 64 * 1024;
/// Most webhook endpoints an institution may have (each event fans out to every one).
pub const MAX_ENDPOINTS: i64 = 20;

/// A webhook endpoint as the portal shows it (the secret only on demand).
#[derive(Debug, Serialize)]
pub struct Endpoint {
    /// Always `webhook_endpoint`.
    pub object: &'static str,
    /// `ep_…`.
    pub id: String,
    /// Receiver URL.
    pub url: String,
    /// Free text.
    pub description: String,
    /// Event types received; `null` means every type.
    pub event_types: Option<Vec<String>>,
    /// Enabled or disabled.
    pub status: EndpointStatus,
    /// Creation time.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
    /// While a rotated secret still signs: until when.
    pub previous_secret_expires_at: Option<String>,
    /// Why Payrail disabled it, when it did (continuous failure).
    pub disabled_reason: Option<String>,
}

impl Endpoint {
    fn from_row(row: &EndpointRow, now: i64) -> Self {
        Endpoint {
            object: "webhook_endpoint",
            id: row.id.clone(),
            url: row.url.clone(),
            description: row.description.clone(),
            event_types: row
                .event_types
                .as_ref()
                .map(|t| t.split(' ').map(str::to_owned).collect()),
            status: row.status,
            created_at: row.created_at.clone(),
            updated_at: row.updated_at.clone(),
            previous_secret_expires_at: row
                .previous_secret_expires_at
                .filter(|end| *end > now)
                .and_then(time::format_unix),
            disabled_reason: row.disabled_reason.clone(),
        }
    }
}

/// The institution's webhook endpoints, newest first.
pub async fn list(portal: &Portal<'_>) -> Result<Vec<Endpoint>, ApiError> {
    Ok(endpoints::list(portal.db(), portal.institution_id())
        .await
        .or_internal("list endpoints")?
        .iter()
        .map(|row| Endpoint::from_row(row, portal.now))
        .collect())
}

fn no_endpoint() -> ApiError {
    ApiError::not_found("no such webhook endpoint")
}

async fn endpoint_row(portal: &Portal<'_>, id: &str) -> Result<EndpointRow, ApiError> {
    endpoints::get(portal.db(), portal.institution_id(), id)
        .await
        .or_internal("read endpoint")?
        .ok_or_else(no_endpoint)
}

/// One endpoint.
pub async fn get(portal: &Portal<'_>, id: &str) -> Result<Endpoint, ApiError> {
    Ok(Endpoint::from_row(
        &endpoint_row(portal, id).await?,
        portal.now,
    ))
}

/// Checks a webhook URL against the SSRF policy (with a DNS check in production).
async fn check_url(portal: &Portal<'_>, url: &str) -> Result<String, ApiError> {
    match webhook_url::check(url.trim(), portal.ctx.sandbox()).map_err(ApiError::invalid_request)? {
        Checked::Ready(url) => {
            if let Some(port) = webhook_url::loopback_port(&url) {
                let allowed = portal.ctx.loopback_ports()?;
                if !allowed.allows(port) {
                    return Err(ApiError::invalid_request(format!(
                        "url may point at this machine only on the ports the operator allows \
                         for receivers ({}); {port} is not one",
                        allowed.describe()
                    )));
                }
            }
            Ok(url.to_string())
        }
        Checked::NeedsDns(url, host) => {
            resolve_public(&host).await?;
            Ok(url.to_string())
        }
    }
}

/// Resolves `host` over DNS-over-HTTPS and refuses it unless every address is public. This is
/// checked when the URL is saved; what protects deliveries from a name that later resolves to a
/// private address (DNS rebinding) is the platform: a Worker's `fetch` goes out through
/// Cloudflare's network and cannot reach private or loopback addresses.
async fn resolve_public(host: &str) -> Result<(), ApiError> {
    let mut addresses = Vec::new();
    for kind in ["A", "AAAA"] {
        // Built with the URL encoder, never by pasting the host into the query.
        let mut url = worker::Url::parse("https://cloudflare-dns.com/dns-query")
            .or_internal("build dns url")?;
        url.query_pairs_mut()
            .append_pair("name", host)
            .append_pair("type", kind);
        let url = url.to_string();
        let headers = worker::Headers::new();
        headers
            .set("Accept", "application/dns-json")
            .or_internal("set header")?;
        let request =
            worker::Request::new_with_init(&url, worker::RequestInit::new().with_headers(headers))
                .or_internal("build dns request")?;
        let unresolved = || ApiError::invalid_request(format!("url: could not resolve {host}"));
        let (status, bytes) = crate::http::fetch(request, DNS_DEADLINE, DNS_ANSWER_MAX)
            .await
            .map_err(|_| unresolved())?;
        // Only a whole answer counts: a failed lookup, or one cut short, never reads as a name
        // with no address of that kind (which would let the other kind's answer decide alone).
        let body: serde_json::Value = match status {
            200 => serde_json::from_slice(&bytes).map_err(|_| unresolved())?,
            _ => return Err(unresolved()),
        };
        // NOERROR, or NXDOMAIN (no such name: no addresses); anything else failed.
        if !matches!(body["Status"].as_u64(), Some(0 | 3)) {
            return Err(unresolved());
        }
        for answer in body["Answer"].as_array().into_iter().flatten() {
            if let Some(ip) = answer["data"]
                .as_str()
                .and_then(|d| d.parse::<std::net::IpAddr>().ok())
            {
                addresses.push(ip);
            }
        }
    }
    if addresses.is_empty() {
        return Err(ApiError::invalid_request(format!(
            "url: {host} does not resolve"
        )));
    }
    if let Some(private) = addresses.iter().find(|ip| !webhook_url::is_public(**ip)) {
        return Err(ApiError::invalid_request(format!(
            "url must point at a public address; {host} resolves to {private}"
        )));
    }
    Ok(())
}

fn event_types(list: Option<&[String]>) -> Result<Option<String>, ApiError> {
    let Some(list) = list else { return Ok(None) };
    if list.is_empty() {
        return Err(ApiError::invalid_request(
            "event_types must list at least one type, or be left out for every type",
        ));
    }
    let mut chosen: Vec<EventType> = Vec::new();
    for name in list {
        let kind = EventType::parse(name).ok_or_else(|| {
            ApiError::invalid_request(format!(
                "event_types: {name:?} is not an event type; the types are {}",
                EventType::ALL.map(EventType::as_str).join(", ")
            ))
        })?;
        if !chosen.contains(&kind) {
            chosen.push(kind);
        }
    }
    Ok(Some(
        EventType::ALL
            .into_iter()
            .filter(|k| chosen.contains(k))
            .map(EventType::as_str)
            .collect::<Vec<_>>()
            .join(" "),
    ))
}

fn new_secret() -> Result<String, ApiError> {
    crypto::random_token("whsec_").or_internal("generate signing secret")
}

/// What creating an endpoint takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewEndpoint {
    /// Receiver URL.
    pub url: String,
    /// Free text.
    #[serde(default)]
    pub description: String,
    /// Types to receive; absent or null for every type.
    #[serde(default)]
    pub event_types: Option<Vec<String>>,
}

/// Creates an endpoint (enabled); returns it and its signing secret.
pub async fn create(
    portal: &Portal<'_>,
    new: &NewEndpoint,
) -> Result<(Endpoint, String), ApiError> {
    if endpoints::count(portal.db(), portal.institution_id())
        .await
        .or_internal("count endpoints")?
        >= MAX_ENDPOINTS
    {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!(
                "an institution may have at most {MAX_ENDPOINTS} webhook endpoints; delete one \
                 first"
            ),
        ));
    }
    let url = check_url(portal, &new.url).await?;
    let description = check_text("description", &new.description, 0, 500)?;
    let event_types = event_types(new.event_types.as_deref())?;
    let id = format!(
        "ep_{}",
        hex::encode(crypto::random_bytes::<12>().or_internal("generate id")?)
    );
    let secret = new_secret()?;
    let now = timestamp(portal.now)?;
    let row = EndpointRow {
        secret_encrypted: crypto::seal(&portal.ctx.sealing_key()?, &id, &secret)
            .or_internal("seal secret")?,
        id,
        url,
        description,
        event_types,
        status: EndpointStatus::Enabled,
        previous_secret_expires_at: None,
        created_at: now.clone(),
        updated_at: now,
        disabled_reason: None,
    };
    endpoints::insert(portal.db(), portal.institution_id(), &row)
        .await
        .or_internal("create endpoint")?;
    Ok((Endpoint::from_row(&row, portal.now), secret))
}

/// Changes to an endpoint; absent fields stay as they are.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointPatch {
    /// New URL.
    pub url: Option<String>,
    /// New description.
    pub description: Option<String>,
    /// New event types; `null` for every type.
    #[serde(default, deserialize_with = "some_or_null")]
    pub event_types: Option<Option<Vec<String>>>,
    /// `enabled` or `disabled`.
    pub status: Option<String>,
}

/// Tells an absent field (`None`) from an explicit `null` (`Some(None)`).
fn some_or_null<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<Vec<String>>>, D::Error> {
    Option::<Vec<String>>::deserialize(d).map(Some)
}

/// Applies a patch, writing only the fields it names. `status: enabled` goes through the one
/// enable operation (which also clears the failure clock); `disabled` turns deliveries off.
pub async fn update(
    portal: &Portal<'_>,
    id: &str,
    patch: &EndpointPatch,
) -> Result<Endpoint, ApiError> {
    let mut changes = Changes::default();
    if let Some(url) = &patch.url {
        changes.url = Some(check_url(portal, url).await?);
    }
    if let Some(description) = &patch.description {
        changes.description = Some(check_text("description", description, 0, 500)?);
    }
    if let Some(types) = &patch.event_types {
        changes.event_types = Some(event_types(types.as_deref())?);
    }
    let status = patch
        .status
        .as_deref()
        .map(|status| {
            status.parse::<EndpointStatus>().map_err(|_| {
                ApiError::invalid_request(format!(
                    "status must be enabled or disabled; got {status:?}"
                ))
            })
        })
        .transpose()?;
    changes.disable = status == Some(EndpointStatus::Disabled);
    let now = timestamp(portal.now)?;
    if !endpoints::update(portal.db(), portal.institution_id(), id, &changes, &now)
        .await
        .or_internal("update endpoint")?
    {
        return Err(no_endpoint());
    }
    if status == Some(EndpointStatus::Enabled) {
        endpoints::enable(portal.db(), portal.institution_id(), id, &now)
            .await
            .or_internal("enable endpoint")?;
    }
    get(portal, id).await
}

/// Deletes an endpoint; its pending deliveries fail with it.
pub async fn delete(portal: &Portal<'_>, id: &str) -> Result<(), ApiError> {
    let mut batch = Batch::new();
    batch.push(
        deliveries::fail_pending_of_endpoint(portal.institution_id(), id)
            .or_internal("delete endpoint")?,
    );
    let delete =
        batch.push(endpoints::delete(portal.institution_id(), id).or_internal("delete endpoint")?);
    let results = batch
        .run(portal.db())
        .await
        .or_internal("delete endpoint")?;
    if results.changed(delete) {
        Ok(())
    } else {
        Err(no_endpoint())
    }
}

/// An endpoint's signing secret, revealed.
#[derive(Debug, Serialize)]
pub struct Secret {
    /// The current secret (`whsec_…`), exactly as receivers must use it.
    pub signing_secret: String,
    /// While the previous secret still signs too: until when.
    pub previous_secret_expires_at: Option<String>,
}

/// Reveals the current signing secret.
pub async fn reveal_secret(portal: &Portal<'_>, id: &str) -> Result<Secret, ApiError> {
    portal.require_admin()?;
    let row = endpoint_row(portal, id).await?;
    Ok(Secret {
        signing_secret: crypto::open(&portal.ctx.sealing_key()?, &row.id, &row.secret_encrypted)
            .or_internal("open signing secret")?,
        previous_secret_expires_at: Endpoint::from_row(&row, portal.now).previous_secret_expires_at,
    })
}

/// Replaces the signing secret; the old one keeps signing for `grace_seconds` (0 ends it now).
pub async fn rotate_secret(
    portal: &Portal<'_>,
    id: &str,
    grace_seconds: Option<i64>,
) -> Result<Secret, ApiError> {
    let grace = grace_seconds.unwrap_or(DEFAULT_GRACE_SECONDS);
    if !(0..=MAX_GRACE_SECONDS).contains(&grace) {
        return Err(ApiError::invalid_request(format!(
            "grace_period_seconds must be from 0 to {MAX_GRACE_SECONDS} (7 days)"
        )));
    }
    let row = endpoint_row(portal, id).await?;
    let key = portal.ctx.sealing_key()?;
    let secret = new_secret()?;
    let until = (grace > 0).then_some(portal.now + grace);
    let sealed = crypto::seal(&key, &row.id, &secret).or_internal("seal secret")?;
    let rotation = Rotation {
        replaces: &row.secret_encrypted,
        secret_encrypted: &sealed,
        previous_secret_encrypted: until.map(|_| row.secret_encrypted.as_str()),
        previous_secret_expires_at: until,
    };
    if !endpoints::rotate_secret(
        portal.db(),
        portal.institution_id(),
        id,
        &rotation,
        &timestamp(portal.now)?,
    )
    .await
    .or_internal("rotate secret")?
    {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "the signing secret was rotated by another request meanwhile; reveal it to see the \
             current one",
        ));
    }
    Ok(Secret {
        signing_secret: secret,
        previous_secret_expires_at: until.and_then(time::format_unix),
    })
}

/// Refuses an id that is not one of ours in shape (saves a query, reads like unknown).
pub fn endpoint_id(id: &str) -> Result<&str, ApiError> {
    EndpointId::parse(id).map(|_| id).map_err(|_| no_endpoint())
}
