//! Checkout sessions and their idempotency keys.

use rust_decimal::Decimal;
use serde::Deserialize;
use shared_types::RawStatus;
use worker::{D1Database, D1PreparedStatement};

use super::{bind, first, run, DbResult, Returning};

/// How long an idempotency key holds.
pub const KEY_SECONDS: i64 = 24 * 60 * 60;

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

/// SQL of a stored key and its session, for `WHERE k.merchant_id = … AND k.key = … AND
/// k.created_at >= …`: the session is read in its merchant's institution.
const STORED_KEY: &str = "SELECT k.fingerprint, k.session_id, s.transaction_id \
     FROM idempotency_keys k JOIN merchants km ON km.id = k.merchant_id \
     JOIN checkout_sessions s ON s.id = k.session_id AND s.institution_id = km.institution_id";

/// The session an idempotency key of a merchant (of an institution) created, if the key is
/// known and young enough.
pub async fn find_key(
    db: &D1Database,
    (institution_id, merchant_id): (i64, i64),
    key: &str,
    not_before: i64,
) -> DbResult<Option<StoredKey>> {
    first(
        db,
        &format!(
            "{STORED_KEY} WHERE k.merchant_id = ?1 AND km.institution_id = ?4 AND k.key = ?2 \
             AND k.created_at >= ?3"
        ),
        &[
            merchant_id.into(),
            key.into(),
            not_before.into(),
            institution_id.into(),
        ],
    )
    .await
}

/// [`find_key`] for the merchant with the publishable key `public_key` at `now` (see
/// [`super::merchants::BY_KEY`]), for checkout's read batch.
pub fn find_key_by_public_key(
    db: &D1Database,
    public_key: &str,
    now: i64,
    key: &str,
    not_before: i64,
) -> DbResult<Returning<StoredKey>> {
    bind(
        db,
        &format!(
            "{STORED_KEY} WHERE k.merchant_id = {} AND k.key = ?3 AND k.created_at >= ?4",
            super::merchants::BY_KEY
        ),
        &[public_key.into(), now.into(), key.into(), not_before.into()],
    )
    .map(Returning::new)
}

/// Deletes the merchant's key if it was created before `before` (so it can be used afresh): the
/// first statement of the batch that stores the key again.
pub fn forget_key(
    db: &D1Database,
    merchant_id: i64,
    key: &str,
    before: i64,
) -> DbResult<D1PreparedStatement> {
    bind(
        db,
        "DELETE FROM idempotency_keys WHERE merchant_id = ?1 AND key = ?2 AND created_at < ?3",
        &[merchant_id.into(), key.into(), before.into()],
    )
}

/// Deletes idempotency keys created before `before`, at most `limit` of them.
pub async fn purge_keys(db: &D1Database, before: i64, limit: i64) -> DbResult<usize> {
    run(
        db,
        "DELETE FROM idempotency_keys WHERE (merchant_id, key) IN (SELECT merchant_id, key \
         FROM idempotency_keys INDEXED BY idempotency_keys_by_age \
         WHERE created_at < ?1 ORDER BY created_at LIMIT ?2)",
        &[before.into(), limit.into()],
    )
    .await
}

/// Deletes checkout sessions that ended before `before` and that nothing needs any more: their
/// payment is no longer pending (the cron closes pending ones by their session's end), no
/// deposit address was given out for them (those are part of the payment's money record and
/// are kept with it) and no idempotency key names them. At most `limit`, oldest first.
pub async fn purge_ended(db: &D1Database, before: i64, limit: i64) -> DbResult<usize> {
    run(
        db,
        "DELETE FROM checkout_sessions WHERE id IN (SELECT s.id FROM checkout_sessions s \
         INDEXED BY checkout_sessions_by_expiry WHERE s.expires_at < ?1 \
         AND (SELECT raw_status FROM transactions t WHERE t.id = s.transaction_id) != 'pending' \
         AND NOT EXISTS (SELECT 1 FROM deposit_watches w WHERE w.session_id = s.id) \
         AND NOT EXISTS (SELECT 1 FROM idempotency_keys k WHERE k.session_id = s.id) \
         ORDER BY s.expires_at LIMIT ?2)",
        &[before.into(), limit.into()],
    )
    .await
}

/// A session to create, for the transaction inserted just before it in the same batch.
pub struct NewSession<'a> {
    /// `cs_…` id.
    pub id: &'a str,
    /// The merchant.
    pub merchant_id: i64,
    /// Its institution.
    pub institution_id: i64,
    /// Order title.
    pub title: &'a str,
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
    /// The BIP32 index the address was derived at, when it was.
    pub deposit_index: Option<i64>,
    /// Unix seconds.
    pub now: i64,
    /// Session lifetime end, Unix seconds.
    pub expires_at: i64,
    /// The hosted page's language (the `locale` option); `None`: the customer's browser's.
    pub locale: Option<&'a str>,
}

/// The session row, for the transaction the previous statement of the batch inserted, under the
/// same condition `within` as that insert (so it is stored exactly when the transaction is).
pub fn insert(
    db: &D1Database,
    s: &NewSession<'_>,
    within: &super::throttle::Within,
) -> DbResult<D1PreparedStatement> {
    let (condition, guard) = within.sql(14);
    let mut params: Vec<super::Value> = vec![
        s.id.into(),
        s.merchant_id.into(),
        s.title.into(),
        s.redirect_url.into(),
        s.asset.into(),
        s.network.into(),
        s.deposit_address.into(),
        s.crypto_amount.into(),
        s.now.into(),
        s.expires_at.into(),
        s.deposit_index.into(),
        s.locale.into(),
        s.institution_id.into(),
    ];
    params.extend(guard);
    bind(
        db,
        &format!(
            "INSERT INTO checkout_sessions (id, transaction_id, merchant_id, title, redirect_url, \
             asset, network, deposit_address, crypto_amount, created_at, expires_at, \
             deposit_index, locale, institution_id) \
             SELECT ?1, last_insert_rowid(), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13 \
             WHERE {condition}"
        ),
        &params,
    )
}

/// The idempotency key of a new session, stored only with it (when the same batch stored the
/// session). A live key with the same value makes the whole batch fail (a concurrent double
/// click); stale ones were forgotten first.
pub fn insert_key(
    db: &D1Database,
    (institution_id, merchant_id): (i64, i64),
    key: &str,
    fingerprint: &str,
    session_id: &str,
    now: i64,
) -> DbResult<D1PreparedStatement> {
    bind(
        db,
        "INSERT INTO idempotency_keys (merchant_id, key, fingerprint, session_id, created_at) \
         SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM checkout_sessions \
         WHERE id = ?4 AND institution_id = ?6)",
        &[
            merchant_id.into(),
            key.into(),
            fingerprint.into(),
            session_id.into(),
            now.into(),
            institution_id.into(),
        ],
    )
}

/// Everything the hosted page shows.
#[derive(Debug, Clone, Deserialize)]
pub struct SessionView {
    /// `cs_…` id.
    pub id: String,
    /// The transaction.
    pub transaction_id: i64,
    /// The merchant.
    pub merchant_id: i64,
    /// Its institution.
    pub institution_id: i64,
    /// Merchant display name.
    pub merchant_name: String,
    /// Order title.
    pub title: String,
    /// Order amount.
    pub amount_expected: Decimal,
    /// Order currency.
    pub currency: String,
    /// Internal status.
    pub raw_status: RawStatus,
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
    /// The transaction's row version.
    pub version: i64,
    /// The hosted page's language (the `locale` option); `None`: the customer's browser's.
    pub locale: Option<String>,
    /// The asset the payment was made in, once paid.
    #[serde(default)]
    pub paid_asset: Option<String>,
    /// When money came after the checkout's end: the rate it was valued at (order currency
    /// per unit of `paid_asset`, the rate when it arrived).
    #[serde(default)]
    pub late_rate: Option<String>,
    /// Money came to its addresses after its end (credited, or waiting for its valuation).
    #[serde(default, deserialize_with = "super::flag")]
    pub late_seen: bool,
}

/// The session with this id: a primary-key read of it, its transaction and its merchant.
const SESSION: &str = "SELECT s.id, s.transaction_id, s.merchant_id, s.institution_id, \
     m.name AS merchant_name, \
     s.title, t.amount_expected, t.currency, t.raw_status, s.redirect_url, s.asset, s.network, \
     s.deposit_address, s.crypto_amount, s.expires_at, t.amount_gross, t.amount_refunded, \
     t.version, s.locale, t.asset AS paid_asset, t.late_rate, \
     EXISTS (SELECT 1 FROM chain_transfers c WHERE c.session_id = s.id \
             AND c.kind = 'payment' AND c.after_expiry = 1) AS late_seen \
     FROM checkout_sessions s JOIN transactions t ON t.id = s.transaction_id \
     JOIN merchants m ON m.id = s.merchant_id WHERE s.id = ?1";

/// The session with this id.
pub async fn get(db: &D1Database, id: &str) -> DbResult<Option<SessionView>> {
    first(db, SESSION, &[id.into()]).await
}

/// [`get`] as a statement of a batch (no row: no such session).
pub fn get_in_batch(db: &D1Database, id: &str) -> DbResult<Returning<SessionView>> {
    bind(db, SESSION, &[id.into()]).map(Returning::new)
}

/// The session's new way to pay, written only if the statement before it in the batch (the
/// transaction's, guarded on `pending`) changed a row.
pub fn change_method(
    db: &D1Database,
    (institution_id, id): (i64, &str),
    asset: &str,
    network: &str,
    deposit_address: &str,
    deposit_index: Option<i64>,
    crypto_amount: &str,
) -> DbResult<D1PreparedStatement> {
    bind(
        db,
        "UPDATE checkout_sessions SET asset = ?1, network = ?2, deposit_address = ?3, \
         crypto_amount = ?4, deposit_index = ?6 WHERE id = ?5 AND institution_id = ?7 \
         AND changes() = 1",
        &[
            asset.into(),
            network.into(),
            deposit_address.into(),
            crypto_amount.into(),
            id.into(),
            deposit_index.into(),
            institution_id.into(),
        ],
    )
}
