//! Merchant reads for the partner API.

use serde::Deserialize;
use shared_types::{Merchant, MerchantObject};
use worker::D1Database;

use super::{Query, Value};
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
    status: String,
    onboarding_status: String,
    crypto_enabled: i64,
    created_at: String,
}

impl Row {
    fn into_merchant(self) -> Result<Merchant, String> {
        let onboarding_status = self
            .onboarding_status
            .parse()
            .map_err(|_| format!("merchant {}: bad onboarding_status", self.id))?;
        Ok(Merchant {
            object: MerchantObject::Merchant,
            id: self.id,
            name: self.name,
            legal_name: self.legal_name,
            email: self.email,
            public_key: self.public_key,
            psp_reference_id: self.psp_reference_id,
            status: self
                .status
                .parse()
                .map_err(|_| format!("merchant {}: bad status", self.id))?,
            onboarding_complete: shared_types::OnboardingStatus::is_complete(onboarding_status),
            onboarding_status,
            crypto_enabled: self.crypto_enabled != 0,
            created_at: self.created_at,
        })
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
) -> Result<Vec<Merchant>, String> {
    let rows: Vec<Row> = list_query(institution_id, filter)
        .all(db)
        .await
        .map_err(|e| e.to_string())?;
    rows.into_iter().map(Row::into_merchant).collect()
}

/// One merchant of the institution, or `None`: another institution's merchant is not found.
pub async fn get(
    db: &D1Database,
    institution_id: i64,
    id: i64,
) -> Result<Option<Merchant>, String> {
    let row: Option<Row> = super::bind(
        db,
        &format!("SELECT {COLUMNS} FROM merchants WHERE id = ?1 AND institution_id = ?2"),
        &[id.into(), institution_id.into()],
    )
    .map_err(|e| e.to_string())?
    .first(None)
    .await
    .map_err(|e| e.to_string())?;
    row.map(Row::into_merchant).transpose()
}
