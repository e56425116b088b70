//! Merchant onboarding, shared by the pages and the JSON API: create and edit merchants, move
//! them through onboarding and account states (only the moves `shared-types` allows), set their
//! settlement wallets (every change recorded), their allowed return origins, and roll their
//! publishable key. Every function is scoped to the session's institution: another
//! institution's merchant is `not_found`, like an unknown one.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use shared_types::{ErrorCode, List, MerchantStatus, OnboardingStatus};
use worker::Url;

use super::fields::{check_email, check_text};
use super::Portal;
use crate::ctx::{timestamp, Ctx};
use crate::db::merchants::{self, Changes, Edited, NewMerchant, Row, UsdcSettlementChange};
use crate::db::wallets::{self, Wallet};
use crate::db::{origins, wallets::Change};
use crate::error::{ApiError, OrInternal};
use crate::query::{parse_id, MerchantSearch};
use crate::{chain, crypto, money, wallet_address};

/// Most return origins a merchant may list.
pub const MAX_ORIGINS: usize = 10;
/// Default grace period of a rolled publishable key: a day to update the merchant's pages.
pub const DEFAULT_KEY_GRACE_SECONDS: i64 = 24 * 60 * 60;
/// Longest grace period of a rolled key.
pub const MAX_KEY_GRACE_SECONDS: i64 = 7 * 24 * 60 * 60;

/// A merchant as the portal shows it.
#[derive(Debug, Serialize)]
pub struct Merchant {
    /// Every member the partner API shows.
    #[serde(flatten)]
    pub merchant: shared_types::Merchant,
    /// Where the account status may go next.
    pub status_next: &'static [MerchantStatus],
    /// Where onboarding may go next.
    pub onboarding_next: &'static [OnboardingStatus],
    /// Whether a checkout can be created for it now.
    pub can_take_payments: bool,
    /// Why it cannot, when it cannot.
    pub cannot_take_payments_because: Option<String>,
    /// Settlement wallets, by network.
    pub wallets: Vec<Wallet>,
    /// The network its USDC is settled on from every network with CCTP, to its wallet there
    /// (`None`: each payment settles on the network it was paid on).
    pub usdc_settlement_network: Option<String>,
    /// From when the last change of that choice applies (RFC 3339; `None`: never changed).
    pub usdc_settlement_usable_from: Option<String>,
    /// Allowed return origins.
    pub return_origins: Vec<String>,
    /// While the previous key still works after a roll: until when.
    pub previous_key_expires_at: Option<String>,
    /// Last change.
    pub updated_at: Option<String>,
}

/// A merchant with the logs of its settlement wallet changes and of its USDC settlement network.
#[derive(Debug, Serialize)]
pub struct MerchantDetail {
    /// The merchant.
    #[serde(flatten)]
    pub merchant: Merchant,
    /// Every wallet change, newest first.
    pub wallet_changes: Vec<Change>,
    /// Every change of the USDC settlement network, newest first.
    pub usdc_settlement_changes: Vec<UsdcSettlementChange>,
}

fn no_merchant() -> ApiError {
    ApiError::not_found("no such merchant")
}

/// A merchant id from a path segment (an id that cannot exist reads like an unknown one).
pub fn merchant_id(text: &str) -> Result<i64, ApiError> {
    parse_id(text).ok_or_else(no_merchant)
}

/// A merchant as shown, from its row, its wallets and its return origins.
fn view(
    ctx: &Ctx,
    row: Row,
    wallets: Vec<Wallet>,
    return_origins: Vec<String>,
    now: i64,
) -> Merchant {
    let networks: Vec<String> = wallets.iter().map(|w| w.network.clone()).collect();
    // An unreadable chain configuration reads as nothing offered (the worker's log names it).
    let offered = chain::methods(ctx).unwrap_or_default();
    let because = merchants::refusal(row.status, row.onboarding_status, row.crypto_enabled)
        .or_else(|| {
            if offered.is_empty() {
                Some("this deployment offers no way to pay yet".to_owned())
            } else if !offered
                .iter()
                .any(|m| networks.iter().any(|n| n == m.network))
            {
                Some("it has no settlement wallet on a network Payrail offers".to_owned())
            } else if return_origins.is_empty() {
                Some("it has no allowed return origin".to_owned())
            } else {
                None
            }
        });
    Merchant {
        status_next: row.status.next(),
        onboarding_next: row.onboarding_status.next(),
        can_take_payments: because.is_none(),
        cannot_take_payments_because: because,
        wallets,
        return_origins,
        previous_key_expires_at: row
            .previous_key_expires_at
            .filter(|end| *end > now)
            .and_then(shared_types::time::format_unix),
        updated_at: row.updated_at.clone(),
        usdc_settlement_network: row.usdc_settlement_network.clone(),
        usdc_settlement_usable_from: row
            .usdc_settlement_usable_from
            .and_then(shared_types::time::format_unix),
        merchant: row.into_merchant(),
    }
}

/// The institution's merchant `id` as stored (`not_found` for another institution's).
pub async fn row(portal: &Portal<'_>, id: i64) -> Result<Row, ApiError> {
    merchants::portal_get(portal.db(), portal.institution_id(), id)
        .await
        .or_internal("read merchant")?
        .ok_or_else(no_merchant)
}

/// One merchant.
pub async fn get(portal: &Portal<'_>, id: i64) -> Result<Merchant, ApiError> {
    let row = row(portal, id).await?;
    let wallets = wallets::list(portal.db(), id)
        .await
        .or_internal("read wallets")?;
    let return_origins = origins::list(portal.db(), id)
        .await
        .or_internal("read origins")?;
    Ok(view(portal.ctx, row, wallets, return_origins, portal.now))
}

/// One merchant with its wallet change log.
pub async fn detail(portal: &Portal<'_>, id: i64) -> Result<MerchantDetail, ApiError> {
    let merchant = get(portal, id).await?;
    let wallet_changes = wallets::changes(portal.db(), id)
        .await
        .or_internal("read wallet changes")?;
    let usdc_settlement_changes = merchants::usdc_settlement_changes(portal.db(), id)
        .await
        .or_internal("read USDC settlement changes")?;
    Ok(MerchantDetail {
        merchant,
        wallet_changes,
        usdc_settlement_changes,
    })
}

/// A page of the institution's merchants: `q` (a name prefix or an exact `psp_reference_id`),
/// `limit`, `starting_after`.
pub async fn list(portal: &Portal<'_>, query: &str) -> Result<List<Merchant>, ApiError> {
    let q = MerchantSearch::parse(query).map_err(|e| ApiError::invalid_request(e.0))?;
    let rows = merchants::portal_page(
        portal.db(),
        portal.institution_id(),
        q.q.as_deref(),
        q.starting_after,
        q.limit,
    )
    .await
    .or_internal("list merchants")?;
    // One query each for the page's wallets and origins, not two per merchant.
    let page = List::from_overfetch(rows, q.limit as usize, |m| m.id);
    let ids: Vec<i64> = page.data.iter().map(|m| m.id).collect();
    let mut wallets_of: HashMap<i64, Vec<Wallet>> = HashMap::new();
    for (merchant, wallet) in wallets::of_merchants(portal.db(), &ids)
        .await
        .or_internal("read wallets")?
    {
        wallets_of.entry(merchant).or_default().push(wallet);
    }
    let mut origins_of: HashMap<i64, Vec<String>> = HashMap::new();
    for (merchant, origin) in origins::of_merchants(portal.db(), &ids)
        .await
        .or_internal("read origins")?
    {
        origins_of.entry(merchant).or_default().push(origin);
    }
    let data = page
        .data
        .into_iter()
        .map(|row| {
            let wallets = wallets_of.remove(&row.id).unwrap_or_default();
            let origins = origins_of.remove(&row.id).unwrap_or_default();
            view(portal.ctx, row, wallets, origins, portal.now)
        })
        .collect();
    Ok(List {
        object: page.object,
        data,
        has_more: page.has_more,
        next_cursor: page.next_cursor,
    })
}

fn reference(value: &str) -> Result<String, ApiError> {
    let value = value.trim();
    if (1..=64).contains(&value.len())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
    {
        Ok(value.to_owned())
    } else {
        Err(ApiError::invalid_request(
            "psp_reference_id must be 1 to 64 letters, digits, dots, colons, hyphens or \
             underscores",
        ))
    }
}

fn taken(reference: &str) -> ApiError {
    ApiError::new(
        ErrorCode::Conflict,
        format!("psp_reference_id {reference:?} is already used by another of your merchants"),
    )
}

/// A new publishable key: `pk_live_` (`pk_test_` in sandbox) and 24 random letters and digits.
fn new_key(ctx: &Ctx) -> Result<String, ApiError> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let bytes = crypto::random_bytes::<24>().or_internal("generate key")?;
    // 256 is not a multiple of 62: draw again rather than bias the first letters.
    let mut key = String::from(if ctx.sandbox() {
        "pk_test_"
    } else {
        "pk_live_"
    });
    for b in bytes {
        let mut b = b;
        while b >= 248 {
            b = crypto::random_bytes::<1>().or_internal("generate key")?[0];
        }
        key.push(ALPHABET[usize::from(b) % ALPHABET.len()] as char);
    }
    Ok(key)
}

/// What creating a merchant takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewMerchantBody {
    /// Display name (what customers see on the hosted page).
    pub name: String,
    /// Registered name.
    pub legal_name: String,
    /// Contact e-mail.
    pub email: String,
    /// The institution's own reference, unique among its merchants.
    pub psp_reference_id: String,
    /// Whether crypto payments are on (default true).
    #[serde(default)]
    pub crypto_enabled: Option<bool>,
}

/// Creates a merchant: active, onboarding pending, with a new publishable key.
pub async fn create(portal: &Portal<'_>, new: &NewMerchantBody) -> Result<Merchant, ApiError> {
    let name = check_text("name", &new.name, 1, 100)?;
    let legal_name = check_text("legal_name", &new.legal_name, 1, 200)?;
    let email = check_email(&new.email)?;
    let psp_reference_id = reference(&new.psp_reference_id)?;
    let key = new_key(portal.ctx)?;
    let id = merchants::insert(
        portal.db(),
        &NewMerchant {
            institution_id: portal.institution_id(),
            name: &name,
            legal_name: &legal_name,
            email: &email,
            psp_reference_id: &psp_reference_id,
            public_key: &key,
            crypto_enabled: new.crypto_enabled.unwrap_or(true),
            now_text: &timestamp(portal.now)?,
        },
    )
    .await
    .or_internal("create merchant")?
    .ok_or_else(|| taken(&psp_reference_id))?;
    get(portal, id).await
}

/// Changes to a merchant; absent fields stay as they are.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MerchantPatch {
    /// Display name.
    pub name: Option<String>,
    /// Registered name.
    pub legal_name: Option<String>,
    /// Contact e-mail.
    pub email: Option<String>,
    /// The institution's own reference.
    pub psp_reference_id: Option<String>,
    /// Crypto payments on or off.
    pub crypto_enabled: Option<bool>,
    /// Account status: `active`, `suspended` or `disabled` (only the moves allowed from the
    /// current one).
    pub status: Option<String>,
    /// Onboarding status (only the moves allowed from the current one).
    pub onboarding_status: Option<String>,
}

fn refused_move(what: &str, from: &str, to: &str, allowed: Vec<&str>) -> ApiError {
    ApiError::new(
        ErrorCode::Conflict,
        if allowed.is_empty() {
            format!("{what} cannot change from {from}: it is final")
        } else {
            format!(
                "{what} cannot move from {from} to {to}; from {from} it can move to {}",
                allowed.join(" or ")
            )
        },
    )
}

/// Applies a patch, writing only the fields it names; status and onboarding moves are checked
/// against the allowed moves and guarded on the state they were checked against.
pub async fn update(
    portal: &Portal<'_>,
    id: i64,
    patch: &MerchantPatch,
) -> Result<Merchant, ApiError> {
    let current = row(portal, id).await?;
    let mut changes = Changes {
        name: patch
            .name
            .as_deref()
            .map(|v| check_text("name", v, 1, 100))
            .transpose()?,
        legal_name: patch
            .legal_name
            .as_deref()
            .map(|v| check_text("legal_name", v, 1, 200))
            .transpose()?,
        email: patch.email.as_deref().map(check_email).transpose()?,
        psp_reference_id: patch
            .psp_reference_id
            .as_deref()
            .map(reference)
            .transpose()?,
        crypto_enabled: patch.crypto_enabled,
        ..Changes::default()
    };
    if let Some(to) = &patch.status {
        let to: MerchantStatus = to.parse().map_err(|_| {
            ApiError::invalid_request(format!(
                "status must be active, suspended or disabled; got {to:?}"
            ))
        })?;
        if to != current.status {
            if !current.status.next().contains(&to) {
                return Err(refused_move(
                    "status",
                    current.status.as_str(),
                    to.as_str(),
                    current.status.next().iter().map(|s| s.as_str()).collect(),
                ));
            }
            changes.status = Some((current.status, to));
        }
    }
    if let Some(to) = &patch.onboarding_status {
        let to: OnboardingStatus = to.parse().map_err(|_| {
            ApiError::invalid_request(format!(
                "onboarding_status must be pending, in_review, completed or rejected; got {to:?}"
            ))
        })?;
        if to != current.onboarding_status {
            let next = current.onboarding_status.next();
            if !next.contains(&to) {
                return Err(refused_move(
                    "onboarding",
                    current.onboarding_status.as_str(),
                    to.as_str(),
                    next.iter().map(|s| s.as_str()).collect(),
                ));
            }
            changes.onboarding = Some((current.onboarding_status, to));
        }
    }
    match merchants::update(
        portal.db(),
        portal.institution_id(),
        id,
        &changes,
        &timestamp(portal.now)?,
    )
    .await
    .or_internal("update merchant")?
    {
        Edited::Done => get(portal, id).await,
        Edited::ReferenceTaken => Err(taken(changes.psp_reference_id.as_deref().unwrap_or(""))),
        Edited::NotWritten => Err(ApiError::new(
            ErrorCode::Conflict,
            "the merchant changed while this request ran; read it again and retry",
        )),
    }
}

/// Sets the settlement wallet of `network` (`None`: removes it), recording who changed it. A new
/// address must be able to receive what the treasury sends ([`money::payee::check`]);
/// `contract_wallet` is the admin's word that a contract there is a wallet that can.
pub async fn set_wallet(
    portal: &Portal<'_>,
    id: i64,
    network: &str,
    address: Option<&str>,
    contract_wallet: bool,
) -> Result<Merchant, ApiError> {
    let merchant = row(portal, id).await?;
    if !wallet_address::NETWORKS.contains(&network) {
        return Err(ApiError::not_found(format!(
            "no such network {network:?}; networks are {}",
            wallet_address::NETWORKS.join(", ")
        )));
    }
    let address = address
        .map(|a| wallet_address::check(network, a))
        .transpose()
        .map_err(ApiError::invalid_request)?;
    let old = wallets::list(portal.db(), id)
        .await
        .or_internal("read wallets")?
        .into_iter()
        .find(|w| w.network == network)
        .map(|w| w.address);
    if old == address {
        return get(portal, id).await;
    }
    let screened = match &address {
        Some(new) => {
            money::payee::check(
                portal.ctx,
                (network, new),
                contract_wallet,
                (portal.institution_id(), id),
            )
            .await?
        }
        None => None,
    };
    let cool_off = portal.ctx.wallet_cool_off_seconds();
    let usable_from = portal.now.saturating_add(cool_off);
    if !wallets::replace(
        portal.db(),
        id,
        network,
        (old.as_deref(), address.as_deref()),
        (&portal.session.email, &timestamp(portal.now)?, usable_from),
        screened,
    )
    .await
    .or_internal("set wallet")?
    {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "the wallet changed while this request ran; read it again and retry",
        ));
    }
    // Every admin hears of it at once: the most attacked field in payments.
    let subject = format!(
        "The settlement wallet of {} on {network} changed",
        merchant.name
    );
    let change = match (&old, &address) {
        (None, Some(new)) => format!("was set to {new}"),
        (Some(old), Some(new)) => format!("changed from {old} to {new}"),
        (Some(old), None) => format!("{old} was removed"),
        (None, None) => String::new(),
    };
    let usable = match &address {
        Some(_) => format!(
            " Settlements use it from {} (a cool-off of {} hours after every change); until \
             then the merchant's payments on {network} wait.",
            timestamp(usable_from)?,
            cool_off / 3600
        ),
        None => String::new(),
    };
    let body = format!(
        "The settlement wallet of merchant {} ({id}) on {network} {change} by {} at {}.{usable} \
         If nobody at your company made this change, remove the wallet in the portal and \
         change your admins' passwords now.",
        merchant.name,
        portal.session.email,
        timestamp(portal.now)?
    );
    crate::notify::admins(
        portal.ctx,
        portal.institution_id(),
        crate::db::notifications::NotificationKind::WalletChanged,
        &subject,
        &body,
    )
    .await?;
    get(portal, id).await
}

/// An origin as stored: `scheme://host[:port]`, https (http only for localhost and 127.0.0.1
/// in sandbox).
pub fn origin(ctx: &Ctx, text: &str) -> Result<String, ApiError> {
    let bad = || {
        ApiError::invalid_request(format!(
            "return origins must be like https://shop.example (scheme and host, no path); got \
             {text:?}"
        ))
    };
    let url = Url::parse(text.trim()).map_err(|_| bad())?;
    let origin = url.origin().ascii_serialization();
    let local = matches!(url.host_str(), Some("localhost" | "127.0.0.1"));
    let scheme_ok = url.scheme() == "https" || (url.scheme() == "http" && local && ctx.sandbox());
    if !scheme_ok || !url.username().is_empty() || url.password().is_some() {
        return Err(bad());
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err(bad());
    }
    Ok(origin)
}

/// Replaces the allowed return origins.
pub async fn set_origins(
    portal: &Portal<'_>,
    id: i64,
    list: &[String],
) -> Result<Merchant, ApiError> {
    row(portal, id).await?;
    if list.len() > MAX_ORIGINS {
        return Err(ApiError::invalid_request(format!(
            "return_origins may list at most {MAX_ORIGINS} origins"
        )));
    }
    let mut clean: Vec<String> = Vec::new();
    for text in list {
        let o = origin(portal.ctx, text)?;
        if !clean.contains(&o) {
            clean.push(o);
        }
    }
    origins::replace(portal.db(), id, &clean, &timestamp(portal.now)?)
        .await
        .or_internal("set origins")?;
    get(portal, id).await
}

/// Issues a new publishable key; the old one keeps creating sessions for `grace_seconds`.
pub async fn roll_key(
    portal: &Portal<'_>,
    id: i64,
    grace_seconds: Option<i64>,
) -> Result<Merchant, ApiError> {
    let grace = grace_seconds.unwrap_or(DEFAULT_KEY_GRACE_SECONDS);
    if !(0..=MAX_KEY_GRACE_SECONDS).contains(&grace) {
        return Err(ApiError::invalid_request(format!(
            "grace_period_seconds must be from 0 to {MAX_KEY_GRACE_SECONDS} (7 days)"
        )));
    }
    let current = row(portal, id).await?;
    let key = new_key(portal.ctx)?;
    let until = (grace > 0).then_some(portal.now + grace);
    if !merchants::roll_key(
        portal.db(),
        portal.institution_id(),
        id,
        &current.public_key,
        &key,
        until,
        &timestamp(portal.now)?,
    )
    .await
    .or_internal("roll key")?
    {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "the key was rolled by another request meanwhile; read the merchant again",
        ));
    }
    get(portal, id).await
}
