//! Checkout sessions, idempotency keys, and payment state changes.

use serde::Deserialize;
use shared_types::lifecycle::Change;
use shared_types::RawStatus;
use worker::D1Database;

use super::{bind, Value};

/// What session creation needs to know about a merchant.
#[derive(Debug, Deserialize)]
pub struct MerchantGate {
    /// Merchant id.
    pub id: i64,
    /// Owning institution.
    pub institution_id: i64,
    /// Account status.
    pub status: String,
    /// Onboarding status.
    pub onboarding_status: String,
    /// 0 or 1.
    pub crypto_enabled: i64,
}

/// The merchant with this publishable key.
pub async fn merchant_by_key(
    db: &D1Database,
    public_key: &str,
) -> worker::Result<Option<MerchantGate>> {
    bind(
        db,
        "SELECT id, institution_id, status, onboarding_status, crypto_enabled FROM merchants \
         WHERE public_key = ?1",
        &[public_key.into()],
    )?
    .first(None)
    .await
}

/// A stored idempotency key and the session it created.
#[derive(Debug, Deserialize)]
pub struct StoredKey {
    /// Fingerprint of the options that created the session.
    pub fingerprint: String,
    /// The session.
    pub session_id: String,
    /// The session's transaction.
    pub transaction_id: i64,
}

/// The session an idempotency key created, if the key is known and young enough.
pub async fn find_key(
    db: &D1Database,
    merchant_id: i64,
    key: &str,
    not_before: i64,
) -> worker::Result<Option<StoredKey>> {
    bind(
        db,
        "SELECT k.fingerprint, k.session_id, s.transaction_id FROM idempotency_keys k \
         JOIN checkout_sessions s ON s.id = k.session_id \
         WHERE k.merchant_id = ?1 AND k.key = ?2 AND k.created_at >= ?3",
        &[merchant_id.into(), key.into(), not_before.into()],
    )?
    .first(None)
    .await
}

/// A session to create, with its pending transaction.
pub struct NewSession<'a> {
    /// `cs_…` id.
    pub id: &'a str,
    /// Merchant and institution.
    pub merchant: &'a MerchantGate,
    /// Order amount, decimal text.
    pub amount: &'a str,
    /// Order currency.
    pub currency: &'a str,
    /// Order title.
    pub title: &'a str,
    /// The PSP's order id.
    pub external_reference: &'a str,
    /// Where the customer returns.
    pub redirect_url: &'a str,
    /// Default way to pay.
    pub asset: &'a str,
    /// Its network.
    pub network: &'a str,
    /// Where to send the funds.
    pub deposit_address: &'a str,
    /// What to send.
    pub crypto_amount: &'a str,
    /// Unix seconds.
    pub now: i64,
    /// Canonical text of `now`.
    pub now_text: &'a str,
    /// Session lifetime end, Unix seconds.
    pub expires_at: i64,
    /// Idempotency key and fingerprint, when the merchant gave a key.
    pub key: Option<(&'a str, &'a str)>,
}

/// Creates the transaction, the session and the idempotency key in one atomic batch. Fails as a
/// whole when the key was taken meanwhile (a concurrent double click).
pub async fn create_session(db: &D1Database, s: &NewSession<'_>) -> worker::Result<()> {
    let mut statements = vec![
        bind(
            db,
            // created_at never goes below the newest row's, so id order stays creation order
            // even if clocks disagree (the list queries rely on it).
            "INSERT INTO transactions (institution_id, merchant_id, status, raw_status, asset, \
             currency, amount_expected, network_payment, external_reference, created_at, \
             updated_at) \
             VALUES (?1, ?2, 'pending', 'pending', ?3, ?4, ?5, ?6, ?7, \
             max(?8, coalesce((SELECT max(created_at) FROM transactions), ?8)), ?8)",
            &[
                s.merchant.institution_id.into(),
                s.merchant.id.into(),
                s.asset.into(),
                s.currency.into(),
                s.amount.into(),
                s.network.into(),
                s.external_reference.into(),
                s.now_text.into(),
            ],
        )?,
        bind(
            db,
            "INSERT INTO checkout_sessions (id, transaction_id, merchant_id, title, redirect_url, \
             asset, network, deposit_address, crypto_amount, created_at, expires_at) \
             VALUES (?1, last_insert_rowid(), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            &[
                s.id.into(),
                s.merchant.id.into(),
                s.title.into(),
                s.redirect_url.into(),
                s.asset.into(),
                s.network.into(),
                s.deposit_address.into(),
                s.crypto_amount.into(),
                s.now.into(),
                s.expires_at.into(),
            ],
        )?,
    ];
    if let Some((key, fingerprint)) = s.key {
        statements.push(bind(
            db,
            // A stale key (older than the retention) is replaced; a live one makes the batch fail.
            "INSERT INTO idempotency_keys (merchant_id, key, fingerprint, session_id, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
            &[
                s.merchant.id.into(),
                key.into(),
                fingerprint.into(),
                s.id.into(),
                s.now.into(),
            ],
        )?);
    }
    db.batch(statements).await.map(drop)
}

/// Deletes idempotency keys created before `before` (so the key can be used afresh).
pub async fn forget_key(
    db: &D1Database,
    merchant_id: i64,
    key: &str,
    before: i64,
) -> worker::Result<()> {
    bind(
        db,
        "DELETE FROM idempotency_keys WHERE merchant_id = ?1 AND key = ?2 AND created_at < ?3",
        &[merchant_id.into(), key.into(), before.into()],
    )?
    .run()
    .await
    .map(drop)
}

/// Everything the hosted page shows.
#[derive(Debug, Clone, Deserialize)]
pub struct SessionView {
    /// `cs_…` id.
    pub id: String,
    /// The transaction.
    pub transaction_id: i64,
    /// Merchant display name.
    pub merchant_name: String,
    /// Order title.
    pub title: String,
    /// Order amount.
    pub amount_expected: String,
    /// Order currency.
    pub currency: String,
    /// Internal status.
    pub raw_status: String,
    /// Where the customer returns.
    pub redirect_url: String,
    /// Quote: asset.
    pub asset: String,
    /// Quote: network.
    pub network: String,
    /// Quote: deposit address.
    pub deposit_address: String,
    /// Quote: crypto amount.
    pub crypto_amount: String,
    /// Unix seconds.
    pub expires_at: i64,
    /// Amount paid, once paid.
    pub amount_gross: Option<String>,
    /// Amount refunded so far.
    pub amount_refunded: Option<String>,
}

/// The session with this id.
pub async fn session(db: &D1Database, id: &str) -> worker::Result<Option<SessionView>> {
    bind(
        db,
        "SELECT s.id, s.transaction_id, m.name AS merchant_name, s.title, \
         t.amount_expected, t.currency, t.raw_status, s.redirect_url, s.asset, s.network, \
         s.deposit_address, s.crypto_amount, s.expires_at, t.amount_gross, t.amount_refunded \
         FROM checkout_sessions s JOIN transactions t ON t.id = s.transaction_id \
         JOIN merchants m ON m.id = s.merchant_id WHERE s.id = ?1",
        &[id.into()],
    )?
    .first(None)
    .await
}

/// Changes the way to pay of a pending session and its transaction, atomically. Returns whether
/// the payment was still pending.
pub async fn change_method(
    db: &D1Database,
    session: &SessionView,
    asset: &str,
    network: &str,
    deposit_address: &str,
    crypto_amount: &str,
    now_text: &str,
) -> worker::Result<bool> {
    let results = db
        .batch(vec![
            bind(
                db,
                "UPDATE transactions SET asset = ?1, network_payment = ?2, updated_at = ?3 \
                 WHERE id = ?4 AND raw_status = 'pending'",
                &[
                    asset.into(),
                    network.into(),
                    now_text.into(),
                    session.transaction_id.into(),
                ],
            )?,
            bind(
                db,
                "UPDATE checkout_sessions SET asset = ?1, network = ?2, deposit_address = ?3, \
                 crypto_amount = ?4 WHERE id = ?5 AND changes() = 1",
                &[
                    asset.into(),
                    network.into(),
                    deposit_address.into(),
                    crypto_amount.into(),
                    session.id.as_str().into(),
                ],
            )?,
        ])
        .await?;
    Ok(results.first().is_some_and(|r| super::changes(r) > 0))
}

/// What the lifecycle needs of a transaction.
#[derive(Debug, Deserialize)]
pub struct PaymentRow {
    /// Owning institution.
    pub institution_id: i64,
    /// Internal status.
    pub raw_status: String,
    /// Order amount.
    pub amount_expected: Option<String>,
    /// Amount paid.
    pub amount_gross: Option<String>,
    /// Amount refunded so far.
    pub amount_refunded: Option<String>,
    /// Order currency.
    pub currency: Option<String>,
    /// Payment network.
    pub network_payment: Option<String>,
}

/// The transaction's lifecycle state.
pub async fn payment(db: &D1Database, id: i64) -> worker::Result<Option<PaymentRow>> {
    bind(
        db,
        "SELECT institution_id, raw_status, amount_expected, amount_gross, amount_refunded, \
         currency, network_payment FROM transactions WHERE id = ?1",
        &[id.into()],
    )?
    .first(None)
    .await
}

/// Hashes and time stamped on a change.
pub struct Stamps<'a> {
    /// Canonical now.
    pub now_text: &'a str,
    /// Source hash, on payment.
    pub source_hash: Option<&'a str>,
    /// Settlement hash, on settlement.
    pub settlement_hash: Option<&'a str>,
    /// Bridge hash, on a bridged settlement.
    pub bridge_hash: Option<&'a str>,
}

/// Writes a lifecycle change as one UPDATE guarded by the status it was computed from, and its
/// event and deliveries (the outbox) in the same atomic batch, conditioned on the UPDATE having
/// written. Returns false when the payment changed meanwhile (nothing written).
pub async fn apply_change(
    db: &D1Database,
    id: i64,
    from: RawStatus,
    change: &Change,
    stamps: &Stamps<'_>,
    outbox: Option<&super::webhooks::OutboxEvent<'_>>,
) -> worker::Result<bool> {
    let mut sets: Vec<(&str, Value)> = Vec::new();
    if let Some(raw) = change.raw_status {
        sets.push(("raw_status", raw.as_str().into()));
        sets.push(("status", raw.normalized().as_str().into()));
    }
    let mut text = |column: &'static str, value: Option<String>| {
        if let Some(value) = value {
            sets.push((column, Value::Text(value)));
        }
    };
    text(
        "amount_status",
        change.amount_status.map(|s| s.as_str().to_owned()),
    );
    text("amount_gross", change.gross.map(|d| d.to_string()));
    text("psp_fee", change.psp_fee.map(|d| d.to_string()));
    text("gas_fee", change.gas_fee.map(|d| d.to_string()));
    text("bridge_fee", change.bridge_fee.map(|d| d.to_string()));
    text("amount_net", change.net.map(|d| d.to_string()));
    text("network_settlement", change.settlement_network.clone());
    text("amount_refunded", change.refunded.map(|d| d.to_string()));
    text("tx_hash_source", stamps.source_hash.map(str::to_owned));
    text(
        "tx_hash_settlement",
        stamps.settlement_hash.map(str::to_owned),
    );
    text("tx_hash_bridge", stamps.bridge_hash.map(str::to_owned));
    if change.gross.is_some() {
        text("paid_at", Some(stamps.now_text.to_owned()));
    }
    text("updated_at", Some(stamps.now_text.to_owned()));

    let mut params: Vec<Value> = Vec::new();
    let assignments: Vec<String> = sets
        .into_iter()
        .map(|(column, value)| {
            params.push(value);
            format!("{column} = ?{}", params.len())
        })
        .collect();
    params.push(id.into());
    params.push(from.as_str().into());
    let sql = format!(
        "UPDATE transactions SET {} WHERE id = ?{} AND raw_status = ?{}",
        assignments.join(", "),
        params.len() - 1,
        params.len()
    );
    let mut statements = vec![bind(db, &sql, &params)?];
    if let Some(event) = outbox {
        statements.extend(super::webhooks::outbox_statements(db, event)?);
    }
    let results = db.batch(statements).await?;
    Ok(results.first().is_some_and(|r| super::changes(r) > 0))
}

/// Marks pending payments whose session expired in the last week as expired (the cron runs every
/// minute; the window keeps the scan short). Returns how many.
pub async fn expire_sessions(db: &D1Database, now: i64, now_text: &str) -> worker::Result<usize> {
    let result = bind(
        db,
        "UPDATE transactions SET raw_status = 'expired', status = 'failed', updated_at = ?2 \
         WHERE raw_status = 'pending' AND id IN (SELECT transaction_id FROM checkout_sessions \
         WHERE expires_at <= ?1 AND expires_at > ?1 - 7 * 86400)",
        &[now.into(), now_text.into()],
    )?
    .run()
    .await?;
    Ok(super::changes(&result))
}

/// Deletes idempotency keys created before `before`.
pub async fn purge_keys(db: &D1Database, before: i64) -> worker::Result<()> {
    bind(
        db,
        "DELETE FROM idempotency_keys WHERE created_at < ?1",
        &[Value::Int(before)],
    )?
    .run()
    .await
    .map(drop)
}
