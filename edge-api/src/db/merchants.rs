//! Merchants: the partner API's reads, what checkout needs to know, the portal's edits, and each
//! merchant's USDC settlement network with the log of every change to it
//! (`usdc_settlement_changes`, written in the batch that makes the change).

use serde::{Deserialize, Serialize};
use shared_types::ids::InstitutionId;
use shared_types::{Merchant, MerchantObject, MerchantStatus, OnboardingStatus};

use super::{all, first, run, stmt, Batch, Db, DbResult, Owner, Returning, Select, Value};
use crate::query::MerchantFilter;

const COLUMNS: &str = "id, name, legal_name, email, public_key, psp_reference_id, status, \
                       onboarding_status, crypto_enabled, created_at, updated_at, \
                       previous_key_expires_at";

/// The portal's columns: the partner API's ([`COLUMNS`]) and the choice of a USDC settlement
/// network (the partner lists do not read it).
const PORTAL_COLUMNS: &str = "id, name, legal_name, email, public_key, psp_reference_id, status, \
                              onboarding_status, crypto_enabled, created_at, updated_at, \
                              previous_key_expires_at, usdc_settlement_network, \
                              usdc_settlement_usable_from";

/// A merchants row as D1 returns it: the partner API's merchant, and what the portal adds.
#[derive(Debug, Clone, Deserialize)]
pub struct Row {
    /// Merchant id.
    pub id: i64,
    /// Display name.
    pub name: String,
    legal_name: String,
    email: String,
    /// Current publishable key.
    pub public_key: String,
    psp_reference_id: String,
    /// Account status.
    pub status: MerchantStatus,
    /// Onboarding status.
    pub onboarding_status: OnboardingStatus,
    /// Whether it may take crypto payments.
    #[serde(deserialize_with = "super::flag")]
    pub crypto_enabled: bool,
    created_at: String,
    /// Last change (merchants made before the portal could edit them have none).
    pub updated_at: Option<String>,
    /// End of the previous key's grace period after a roll, Unix seconds.
    pub previous_key_expires_at: Option<i64>,
    /// The network its USDC is settled on from every network with CCTP (`None`: each payment
    /// settles on the network it was paid on).
    pub usdc_settlement_network: Option<String>,
    /// From when the last change of that choice applies, Unix seconds (`None`: never changed).
    pub usdc_settlement_usable_from: Option<i64>,
}

impl Row {
    /// The merchant as the partner API shows it.
    pub fn into_merchant(self) -> Merchant {
        Merchant {
            object: MerchantObject::Merchant,
            id: self.id,
            name: self.name,
            legal_name: self.legal_name,
            email: self.email,
            public_key: self.public_key,
            psp_reference_id: self.psp_reference_id,
            status: self.status,
            onboarding_complete: self.onboarding_status.is_complete(),
            onboarding_status: self.onboarding_status,
            crypto_enabled: self.crypto_enabled,
            created_at: self.created_at,
        }
    }
}

/// The query for one page of an institution's merchants, newest first, one row over `limit`.
pub fn list_query(owner: Owner<'_>, filter: &MerchantFilter) -> Select {
    let (institution, param) = owner.sql();
    let mut params = vec![param];
    let mut sql = format!("SELECT {COLUMNS} FROM merchants WHERE institution_id = {institution}");
    let mut and = |clause: &str, value: Value| {
        params.push(value);
        sql.push_str(&format!(" AND {clause} ?{}", params.len()));
    };
    if let Some(id) = filter.id {
        and("id =", id.into());
    }
    if let Some(reference) = &filter.psp_reference_id {
        and("psp_reference_id =", reference.as_str().into());
    }
    if let Some(cursor) = filter.starting_after {
        and("id <", cursor.into());
    }
    params.push(Value::Int(i64::from(filter.limit) + 1));
    sql.push_str(&format!(" ORDER BY id DESC LIMIT ?{}", params.len()));
    Select { sql, params }
}

/// One page of merchants, with one extra row when a further page exists.
/// A merchant row as the partner API's JSON object (spec §2.3), built by SQLite.
const MERCHANT_JSON: &str = "json_object('object', 'merchant', 'id', id, 'name', name, \
     'legal_name', legal_name, 'email', email, 'public_key', public_key, \
     'psp_reference_id', psp_reference_id, 'status', status, \
     'onboarding_status', onboarding_status, \
     'crypto_enabled', json(CASE WHEN crypto_enabled THEN 'true' ELSE 'false' END), \
     'onboarding_complete', json(CASE WHEN onboarding_status = 'completed' THEN 'true' \
        ELSE 'false' END), \
     'created_at', created_at)";

/// One page of merchants as the partner API's JSON, built by SQLite.
pub async fn list_json(
    db: &super::Db,
    owner: Owner<'_>,
    filter: &MerchantFilter,
) -> DbResult<super::JsonPage> {
    super::json_page(
        db,
        owner,
        list_query(owner, filter),
        filter.limit,
        (MERCHANT_JSON, super::BY_ID),
    )
    .await
}

/// One merchant of the token's institution as the partner API's JSON, built by SQLite, and
/// the token's scopes (`None`: not a live token), in one statement.
pub async fn get_json(
    db: &super::Db,
    token_hash: &str,
    id: i64,
) -> DbResult<(Option<String>, Option<String>)> {
    #[derive(Deserialize)]
    struct Row {
        merchant: Option<String>,
        scopes: Option<String>,
    }
    let owner = Owner::Token(token_hash);
    let (institution, param) = owner.sql();
    let row: Option<Row> = first(
        db,
        &format!(
            "SELECT (SELECT {MERCHANT_JSON} FROM merchants WHERE id = ?2 \
             AND institution_id = {institution}) AS merchant, {} AS scopes",
            owner.scopes_sql()
        ),
        &[param, id.into()],
    )
    .await?;
    Ok(row.map_or((None, None), |r| (r.merchant, r.scopes)))
}

/// What session creation needs to know about a merchant.
#[derive(Debug, Deserialize)]
pub struct Gate {
    /// Merchant id.
    pub id: i64,
    /// Owning institution.
    pub institution_id: InstitutionId,
    /// Account status.
    pub status: MerchantStatus,
    /// Onboarding status.
    pub onboarding_status: OnboardingStatus,
    /// Whether it may take crypto payments.
    #[serde(deserialize_with = "super::flag")]
    pub crypto_enabled: bool,
    /// Where its institution's money lives.
    pub store: super::MoneyStore,
}

impl Gate {
    /// Why this merchant cannot take payments now, if it cannot.
    pub fn refusal(&self) -> Option<String> {
        refusal(self.status, self.onboarding_status, self.crypto_enabled)
    }
}

/// Why a merchant in this state cannot take payments, if it cannot: it must be active,
/// onboarded and crypto-enabled (and, checked by the caller, have a wallet on an offered
/// network).
pub fn refusal(
    status: MerchantStatus,
    onboarding: OnboardingStatus,
    crypto_enabled: bool,
) -> Option<String> {
    if status != MerchantStatus::Active {
        return Some(format!("the account is {status}"));
    }
    if !onboarding.is_complete() {
        return Some("onboarding is not complete".to_owned());
    }
    if !crypto_enabled {
        return Some("crypto payments are not enabled".to_owned());
    }
    None
}

/// SQL over a `merchants` row: whether the merchant can take payments, as [`refusal`] finds no
/// reason not to (a native test holds the two to each other).
pub const TAKES_PAYMENTS: &str =
    "status = 'active' AND onboarding_status = 'completed' AND crypto_enabled = 1";

/// SQL: the id of the merchant with the publishable key `?1` at `?2` (Unix seconds): its current
/// key, or the previous one while its grace period after a roll lasts; NULL for none. The
/// statements of checkout's read batch find their merchant with it, as [`gate_by_key`] does.
pub const BY_KEY: &str = "(SELECT id FROM merchants WHERE public_key = ?1 \
     UNION ALL SELECT id FROM merchants WHERE previous_public_key = ?1 \
     AND previous_key_expires_at > ?2 LIMIT 1)";

/// The merchant with this publishable key at `now` (see [`BY_KEY`]), for a batch.
pub fn gate_by_key(public_key: &str, now: i64) -> DbResult<Returning<Gate>> {
    stmt(
        &format!(
            "SELECT id, institution_id, status, onboarding_status, crypto_enabled, \
             (SELECT store FROM institutions i WHERE i.id = merchants.institution_id) AS store \
             FROM merchants WHERE id = {BY_KEY}"
        ),
        &[public_key.into(), now.into()],
    )
    .map(Returning::new)
}

/// One page of the institution's merchants for the portal, newest first, one row over `limit`;
/// `search` matches a name prefix (any case) or a `psp_reference_id` exactly.
pub async fn portal_page(
    db: &Db,
    institution_id: InstitutionId,
    search: Option<&str>,
    starting_after: Option<i64>,
    limit: u32,
) -> DbResult<Vec<Row>> {
    let mut sql = format!("SELECT {PORTAL_COLUMNS} FROM merchants WHERE institution_id = ?1");
    let mut params = vec![Value::from(institution_id)];
    if let Some(search) = search {
        let prefix = format!(
            "{}%",
            search
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        params.push(search.into());
        params.push(prefix.into());
        sql.push_str(&format!(
            " AND (psp_reference_id = ?{} OR name LIKE ?{} ESCAPE '\\')",
            params.len() - 1,
            params.len()
        ));
    }
    if let Some(cursor) = starting_after {
        params.push(cursor.into());
        sql.push_str(&format!(" AND id < ?{}", params.len()));
    }
    params.push(Value::Int(i64::from(limit) + 1));
    sql.push_str(&format!(" ORDER BY id DESC LIMIT ?{}", params.len()));
    all(db, &sql, &params).await
}

/// A merchant's id and name.
#[derive(Debug, Clone, Deserialize)]
pub struct Name {
    /// Its id.
    pub id: i64,
    /// Its name.
    pub name: String,
}

/// Of `institution_id`'s merchants `ids`, those active.
pub async fn active_of(db: &Db, institution_id: InstitutionId, ids: &[i64]) -> DbResult<Vec<i64>> {
    #[derive(Deserialize)]
    struct Row {
        id: i64,
    }
    let rows: Vec<Row> = all(
        db,
        "SELECT id FROM merchants WHERE institution_id = ?1 AND status = 'active' \
         AND id IN (SELECT value FROM json_each(?2))",
        &[
            institution_id.into(),
            serde_json::to_string(ids).unwrap_or_default().into(),
        ],
    )
    .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// The names of the institution's merchants among `ids` (a page's: at most a hundred and one),
/// each a primary-key lookup; another institution's merchant is simply not among them.
pub async fn names(db: &Db, institution_id: InstitutionId, ids: &[i64]) -> DbResult<Vec<Name>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let marks: Vec<String> = (0..ids.len()).map(|i| format!("?{}", i + 2)).collect();
    let mut params = vec![Value::from(institution_id)];
    params.extend(ids.iter().map(|id| Value::Int(*id)));
    all(
        db,
        &format!(
            "SELECT id, name FROM merchants WHERE id IN ({}) AND institution_id = ?1",
            marks.join(", ")
        ),
        &params,
    )
    .await
}

/// One merchant of the institution, as the portal shows it.
pub async fn portal_get(db: &Db, institution_id: InstitutionId, id: i64) -> DbResult<Option<Row>> {
    first(
        db,
        &format!("SELECT {PORTAL_COLUMNS} FROM merchants WHERE institution_id = ?1 AND id = ?2"),
        &[institution_id.into(), id.into()],
    )
    .await
}

/// A merchant to create.
pub struct NewMerchant<'a> {
    /// Owning institution.
    pub institution_id: InstitutionId,
    /// Display name.
    pub name: &'a str,
    /// Registered name.
    pub legal_name: &'a str,
    /// Contact e-mail.
    pub email: &'a str,
    /// The institution's own reference (unique per institution).
    pub psp_reference_id: &'a str,
    /// Publishable key.
    pub public_key: &'a str,
    /// Whether it may take crypto payments.
    pub crypto_enabled: bool,
    /// Creation time.
    pub now_text: &'a str,
}

/// Creates a merchant (active, onboarding pending); returns its id, or `None` when the
/// institution already has a merchant with this `psp_reference_id`.
pub async fn insert(db: &Db, m: &NewMerchant<'_>) -> DbResult<Option<i64>> {
    #[derive(Deserialize)]
    struct Id {
        id: i64,
    }
    let row: Option<Id> = first(
        db,
        "INSERT INTO merchants (institution_id, name, legal_name, email, public_key, \
         psp_reference_id, status, onboarding_status, crypto_enabled, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'active', 'pending', ?7, ?8, ?8) \
         ON CONFLICT (institution_id, psp_reference_id) DO NOTHING RETURNING id",
        &[
            m.institution_id.into(),
            m.name.into(),
            m.legal_name.into(),
            m.email.into(),
            m.public_key.into(),
            m.psp_reference_id.into(),
            i64::from(m.crypto_enabled).into(),
            m.now_text.into(),
        ],
    )
    .await?;
    Ok(row.map(|r| r.id))
}

/// The fields an edit sets; `None` leaves a field as it is. Status and onboarding moves are
/// guarded on the value they were checked against.
#[derive(Debug, Default)]
pub struct Changes {
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
    /// Account status: (from, to).
    pub status: Option<(MerchantStatus, MerchantStatus)>,
    /// Onboarding: (from, to).
    pub onboarding: Option<(OnboardingStatus, OnboardingStatus)>,
}

/// What an edit did.
#[derive(Debug, PartialEq, Eq)]
pub enum Edited {
    /// Written.
    Done,
    /// No such merchant, or a status it was checked against changed meanwhile.
    NotWritten,
    /// Another merchant of the institution has that `psp_reference_id`.
    ReferenceTaken,
}

/// Writes only the fields `c` sets, guarded on the statuses it moves from.
pub async fn update(
    db: &Db,
    institution_id: InstitutionId,
    id: i64,
    c: &Changes,
    now_text: &str,
) -> DbResult<Edited> {
    let mut params: Vec<Value> = vec![institution_id.into(), id.into(), now_text.into()];
    let mut sets = vec!["updated_at = ?3".to_owned()];
    let mut guards = Vec::new();
    let push = |params: &mut Vec<Value>, value: Value| {
        params.push(value);
        params.len()
    };
    for (column, value) in [
        ("name", &c.name),
        ("legal_name", &c.legal_name),
        ("email", &c.email),
        ("psp_reference_id", &c.psp_reference_id),
    ] {
        if let Some(value) = value {
            let n = push(&mut params, value.as_str().into());
            sets.push(format!("{column} = ?{n}"));
        }
    }
    if let Some(enabled) = c.crypto_enabled {
        let n = push(&mut params, i64::from(enabled).into());
        sets.push(format!("crypto_enabled = ?{n}"));
    }
    if let Some((from, to)) = c.status {
        let n = push(&mut params, to.as_str().into());
        sets.push(format!("status = ?{n}"));
        let n = push(&mut params, from.as_str().into());
        guards.push(format!("status = ?{n}"));
    }
    if let Some((from, to)) = c.onboarding {
        let n = push(&mut params, to.as_str().into());
        sets.push(format!("onboarding_status = ?{n}"));
        let n = push(&mut params, from.as_str().into());
        guards.push(format!("onboarding_status = ?{n}"));
    }
    let mut sql = format!(
        "UPDATE merchants SET {} WHERE institution_id = ?1 AND id = ?2",
        sets.join(", ")
    );
    for guard in guards {
        sql.push_str(" AND ");
        sql.push_str(&guard);
    }
    match run(db, &sql, &params).await {
        Ok(0) => Ok(Edited::NotWritten),
        Ok(_) => Ok(Edited::Done),
        Err(err) if err.violates("merchants.psp_reference_id") => Ok(Edited::ReferenceTaken),
        Err(err) => Err(err),
    }
}

/// Replaces the publishable key, only if it is still `old`; the old one keeps working until
/// `grace_until` (Unix seconds; `None`: stops now). False if nothing was written.
pub async fn roll_key(
    db: &Db,
    institution_id: InstitutionId,
    id: i64,
    old: &str,
    new: &str,
    grace_until: Option<i64>,
    now_text: &str,
) -> DbResult<bool> {
    let changed = run(
        db,
        "UPDATE merchants SET public_key = ?4, previous_public_key = ?5, \
         previous_key_expires_at = ?6, updated_at = ?7 \
         WHERE institution_id = ?1 AND id = ?2 AND public_key = ?3",
        &[
            institution_id.into(),
            id.into(),
            old.into(),
            new.into(),
            grace_until.map(|_| old).into(),
            grace_until.into(),
            now_text.into(),
        ],
    )
    .await?;
    Ok(changed > 0)
}

/// One change of a merchant's USDC settlement network, as recorded.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct UsdcSettlementChange {
    /// The network before (`None`: none was chosen).
    pub old_network: Option<String>,
    /// The network after (`None`: the choice was cleared).
    pub new_network: Option<String>,
    /// From when the change applies (Unix seconds, shown as an RFC 3339 time).
    #[serde(serialize_with = "super::wallets::rfc3339")]
    pub usable_from: i64,
    /// The admin who made it.
    pub changed_by: String,
    /// When.
    pub changed_at: String,
}

/// The merchant's changes of its USDC settlement network, newest first (at most 100).
pub async fn usdc_settlement_changes(
    db: &Db,
    merchant_id: i64,
) -> DbResult<Vec<UsdcSettlementChange>> {
    all(
        db,
        "SELECT old_network, new_network, usable_from, changed_by, changed_at \
         FROM usdc_settlement_changes WHERE merchant_id = ?1 ORDER BY id DESC LIMIT 100",
        &[merchant_id.into()],
    )
    .await
}

/// A change of a merchant's USDC settlement network.
#[derive(Debug, Clone, Copy)]
pub struct UsdcSettlement<'a> {
    /// The merchant's institution.
    pub institution_id: InstitutionId,
    /// The merchant.
    pub merchant_id: i64,
    /// The choice as read (the change is guarded on it).
    pub old: Option<&'a str>,
    /// The new choice (`None`: cleared).
    pub new: Option<&'a str>,
    /// From when it applies (Unix seconds).
    pub usable_from: i64,
    /// The admin making it.
    pub changed_by: &'a str,
    /// Now, as stored text.
    pub now_text: &'a str,
}

/// Writes a change of the USDC settlement network and records it, in one batch, only if the
/// choice is still `old`, and for a new network only while the merchant still has a settlement
/// wallet there and its institution's money is still in D1 (the checks the caller made on what
/// it read, held in SQL against a concurrent change). False if nothing was written.
pub async fn set_usdc_settlement(db: &Db, c: &UsdcSettlement<'_>) -> DbResult<bool> {
    let write = stmt(
        "UPDATE merchants SET usdc_settlement_network = ?4, usdc_settlement_usable_from = ?5, \
         updated_at = ?6 WHERE institution_id = ?1 AND id = ?2 \
         AND usdc_settlement_network IS ?3 \
         AND (?4 IS NULL OR (EXISTS (SELECT 1 FROM merchant_wallets \
                                     WHERE merchant_id = ?2 AND network = ?4) \
              AND (SELECT store FROM institutions WHERE id = ?1) = 'd1'))",
        &[
            c.institution_id.into(),
            c.merchant_id.into(),
            c.old.into(),
            c.new.into(),
            c.usable_from.into(),
            c.now_text.into(),
        ],
    )?;
    let record = stmt(
        "INSERT INTO usdc_settlement_changes (merchant_id, old_network, new_network, \
         usable_from, changed_by, changed_at) SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE changes() = 1",
        &[
            c.merchant_id.into(),
            c.old.into(),
            c.new.into(),
            c.usable_from.into(),
            c.changed_by.into(),
            c.now_text.into(),
        ],
    )?;
    let mut batch = Batch::new();
    let write = batch.push(write);
    batch.push(record);
    Ok(batch.run(db).await?.changed(write))
}
