//! Applies lifecycle actions to stored payments: load, decide (shared-types), write atomically.

use std::str::FromStr;

use rust_decimal::Decimal;
use shared_types::checkout::currency_digits;
use shared_types::lifecycle::{self, Action, Change, Payment, Refusal};
use shared_types::webhook::Event;
use shared_types::{time, ErrorCode, RawStatus, Transaction};
use worker::{D1Database, Env};

use crate::db::checkout::{self as db, Stamps};
use crate::db::transactions;
use crate::db::webhooks::{self as webhooks_db, OutboxEvent};
use crate::error::{ApiError, OrInternal};
use crate::query::TransactionFilter;
use crate::{chain, crypto};

/// Applies `action` to transaction `id`, with its webhook event in the same write, then queues
/// the event's deliveries. With `institution_id`, a transaction of another institution is not
/// found, exactly like an unknown one.
pub async fn act(
    env: &Env,
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
    let event = match change.event {
        None => None,
        Some(kind) => {
            let filter = TransactionFilter {
                limit: 1,
                id: Some(id),
                ..TransactionFilter::default()
            };
            let before = transactions::list(database, row.institution_id, &filter)
                .await
                .or_internal("read transaction")?
                .pop()
                .ok_or("transaction vanished")
                .or_internal("read transaction")?;
            let envelope = Event {
                id: crypto::random_token("evt_").or_internal("generate event id")?,
                kind: kind.as_str().to_owned(),
                created: now,
                data: updated(before, &change, &stamps),
            };
            let payload = serde_json::to_string(&envelope).or_internal("encode event")?;
            Some((envelope.id, kind, payload))
        }
    };
    let outbox = event.as_ref().map(|(event_id, kind, payload)| OutboxEvent {
        id: event_id,
        institution_id: row.institution_id,
        kind: kind.as_str(),
        transaction_id: id,
        payload,
        created: now,
    });
    let written = db::apply_change(database, id, raw_status, &change, &stamps, outbox.as_ref())
        .await
        .or_internal("write payment change")?;
    if !written {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "the payment changed while this request ran; read it again and retry",
        ));
    }
    if let Some((event_id, _, _)) = &event {
        // Queued after the commit; a lost message is found by the cron sweep.
        let deliveries = webhooks_db::deliveries_of_event(database, event_id)
            .await
            .or_internal("read deliveries")?;
        if let Err(err) = crate::webhooks::enqueue(env, &deliveries, 0).await {
            worker::console_warn!(
                "deliveries of {event_id} left to the sweep: {}",
                err.description
            );
        }
    }
    Ok(())
}

/// The transaction after `change`: the same fields `apply_change` writes, so the event carries
/// exactly what the REST API shows once the change is committed.
fn updated(mut t: Transaction, change: &Change, stamps: &Stamps<'_>) -> Transaction {
    if let Some(raw) = change.raw_status {
        t.raw_status = raw;
        t.status = raw.normalized();
    }
    if change.amount_status.is_some() {
        t.amount_status = change.amount_status;
    }
    if change.gross.is_some() {
        t.amount.gross = change.gross;
        t.paid_at = Some(stamps.now_text.to_owned());
    }
    for (field, value) in [
        (&mut t.amount.psp_fee, change.psp_fee),
        (&mut t.amount.gas_fee, change.gas_fee),
        (&mut t.amount.bridge_fee, change.bridge_fee),
        (&mut t.amount.net, change.net),
    ] {
        if value.is_some() {
            *field = value;
        }
    }
    if change.settlement_network.is_some() {
        t.networks.settlement = change.settlement_network.clone();
    }
    for (field, value) in [
        (&mut t.tx_hashes.source, stamps.source_hash),
        (&mut t.tx_hashes.settlement, stamps.settlement_hash),
        (&mut t.tx_hashes.bridge, stamps.bridge_hash),
    ] {
        if let Some(value) = value {
            *field = Some(value.to_owned());
        }
    }
    t
}
