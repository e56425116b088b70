//! Merchants: the partner API's reads and what checkout needs to know.

use serde::Deserialize;
use shared_types::{Merchant, MerchantObject, MerchantStatus, OnboardingStatus};
use worker::D1Database;

use super::{first, DbResult, Query, Value};
use crate::query::MerchantFilter;

const COLUMNS: &str = "id, name, legal_name, email, public_key, psp_reference_id, status, \
                       onboarding_status, crypto_enabled, created_at";

/// A merchants row as D1 returns it.
#[derive(Debug, Deserialize)]
struct Row {
    id: i64,
    name: String,
    legal_name: String,
    email: String,
    public_key: String,
    psp_reference_id: String,
    status: MerchantStatus,
    onboarding_status: OnboardingStatus,
    crypto_enabled: i64,
    created_at: String,
}

impl Row {
    fn into_merchant(self) -> Merchant {
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
            crypto_enabled: self.crypto_enabled != 0,
            created_at: self.created_at,
        }
    }
}

/// The query for one page of an institution's merchants, newest first, one row over `limit`.
pub fn list_query(institution_id: i64, filter: &MerchantFilter) -> Query {
    let mut params = vec![Value::Int(institution_id)];
    let mut sql = format!("SELECT {COLUMNS} FROM merchants WHERE institution_id = ?1");
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
    Query { sql, params }
}

/// One page of merchants, with one extra row when a further page exists.
pub async fn list(
    db: &D1Database,
    institution_id: i64,
    filter: &MerchantFilter,
) -> DbResult<Vec<Merchant>> {
    let rows: Vec<Row> = list_query(institution_id, filter).all(db).await?;
    Ok(rows.into_iter().map(Row::into_merchant).collect())
}

/// One merchant of the institution, or `None`: another institution's merchant is not found.
pub async fn get(db: &D1Database, institution_id: i64, id: i64) -> DbResult<Option<Merchant>> {
    let row: Option<Row> = first(
        db,
        &format!("SELECT {COLUMNS} FROM merchants WHERE id = ?1 AND institution_id = ?2"),
        &[id.into(), institution_id.into()],
    )
    .await?;
    Ok(row.map(Row::into_merchant))
}

/// What session creation needs to know about a merchant.
#[derive(Debug, Deserialize)]
pub struct Gate {
    /// Merchant id.
    pub id: i64,
    /// Owning institution.
    pub institution_id: i64,
    /// Account status.
    pub status: MerchantStatus,
    /// Onboarding status.
    pub onboarding_status: OnboardingStatus,
    /// 0 or 1.
    pub crypto_enabled: i64,
}

impl Gate {
    /// Why this merchant cannot take payments now, if it cannot.
    pub fn refusal(&self) -> Option<String> {
        if self.status != MerchantStatus::Active {
            return Some(format!("the account is {}", self.status));
        }
        if !self.onboarding_status.is_complete() {
            return Some("onboarding is not complete".to_owned());
        }
        if self.crypto_enabled == 0 {
            return Some("crypto payments are not enabled".to_owned());
        }
        None
    }
}

/// The merchant with this publishable key.
pub async fn gate_by_key(db: &D1Database, public_key: &str) -> DbResult<Option<Gate>> {
    first(
        db,
        "SELECT id, institution_id, status, onboarding_status, crypto_enabled FROM merchants \
         WHERE public_key = ?1",
        &[public_key.into()],
    )
    .await
}
