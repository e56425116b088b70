//! Applies lifecycle actions to stored payments: load, decide (shared-types), write atomically.

use std::str::FromStr;

use rust_decimal::Decimal;
use shared_types::checkout::currency_digits;
use shared_types::lifecycle::{self, Action, Payment, Refusal};
use shared_types::{time, ErrorCode, RawStatus};
use worker::D1Database;

use crate::chain;
use crate::db::checkout::{self as db, Stamps};
use crate::error::{ApiError, OrInternal};

/// Applies `action` to transaction `id`. With `institution_id`, a transaction of another
/// institution is not found, exactly like an unknown one.
pub async fn act(
    database: &D1Database,
    id: i64,
    institution_id: Option<i64>,
    action: &Action,
    now: i64,
) -> Result<(), ApiError> {
    let not_found = || ApiError::not_found("no such transaction");
    let row = db::payment(database, id)
        .await
        .or_internal("read payment")?
        .filter(|row| institution_id.is_none_or(|i| i == row.institution_id))
        .ok_or_else(not_found)?;
    let decimal = |value: &Option<String>| {
        value
            .as_deref()
            .map(Decimal::from_str)
            .transpose()
            .or_internal("parse stored amount")
    };
    let raw_status = RawStatus::from_str(&row.raw_status)
        .map_err(|_| "unknown raw_status")
        .or_internal("parse raw_status")?;
    let payment = Payment {
        raw_status,
        expected: decimal(&row.amount_expected)?.unwrap_or_default(),
        gross: decimal(&row.amount_gross)?,
        refunded: decimal(&row.amount_refunded)?.unwrap_or_default(),
        currency_digits: row
            .currency
            .as_deref()
            .and_then(currency_digits)
            .unwrap_or(2),
        payment_network: row.network_payment.clone(),
    };
    let change = lifecycle::apply(&payment, action).map_err(|refusal| match refusal {
        Refusal::IllegalTransition { .. } => {
            ApiError::new(ErrorCode::Conflict, refusal.to_string())
        }
        Refusal::BadAmount(text) => ApiError::invalid_request(text),
    })?;

    let network = row.network_payment.as_deref().unwrap_or("ethereum");
    let hash = |network: &str| chain::tx_hash(network).or_internal("generate hash");
    let source_hash = matches!(action, Action::Pay { .. })
        .then(|| hash(network))
        .transpose()?;
    let settlement_hash = change.settlement_network.as_deref().map(hash).transpose()?;
    let bridge_hash = change.bridged.then(|| hash(network)).transpose()?;
    let now_text = time::format_unix(now)
        .ok_or("time out of range")
        .or_internal("format now")?;
    let stamps = Stamps {
        now_text: &now_text,
        source_hash: source_hash.as_deref(),
        settlement_hash: settlement_hash.as_deref(),
        bridge_hash: bridge_hash.as_deref(),
    };
    let written = db::apply_change(database, id, raw_status, &change, &stamps)
        .await
        .or_internal("write payment change")?;
    if !written {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "the payment changed while this request ran; read it again and retry",
        ));
    }
    Ok(())
}
