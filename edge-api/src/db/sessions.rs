//! Checkout sessions and their idempotency keys.

use rust_decimal::Decimal;
use serde::Deserialize;
use shared_types::ids::{InstitutionId, Scoped};
use shared_types::RawStatus;

use super::{first, run, stmt, Condition, Db, DbResult, Returning, Stmt, Value};

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
    db: &Db,
    Scoped {
        institution: institution_id,
        id: merchant_id,
    }: Scoped<i64>,
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
    public_key: &str,
    now: i64,
    key: &str,
    not_before: i64,
) -> DbResult<Returning<StoredKey>> {
    stmt(
        &format!(
            "{STORED_KEY} WHERE k.merchant_id = {} AND k.key = ?3 AND k.created_at >= ?4",
            super::merchants::BY_KEY
        ),
        &[public_key.into(), now.into(), key.into(), not_before.into()],
    )
    .map(Returning::new)
}

/// The most wallet networks [`Admitted`] binds: one parameter each, and D1 takes 100 a
/// statement. Wallets can be set on seven networks, so this is a bound, never a rule a merchant
/// meets.
pub const MAX_NETWORKS: usize = 32;

/// The facts a checkout session for a publishable key is made on (what checkout's memo or its
/// full read of the key found), as a condition of the writes that store it: the merchant still
/// has that key (or has it in the grace period of a roll), still takes payments, has wallets on
/// exactly these networks (at most [`MAX_NETWORKS`]), allows the return origin, and the
/// idempotency key, if any, made nothing live; and its institution's money is still where it was
/// (so a session is stored in D1 or in the institution's object, never in the wrong one). Any
/// fact changed: nothing is stored.
#[derive(Debug, Clone, Copy)]
pub struct Admitted<'a> {
    /// The merchant the key named.
    pub merchant_id: i64,
    /// Its institution.
    pub institution_id: InstitutionId,
    /// The publishable key.
    pub public_key: &'a str,
    /// Unix seconds (the key roll's grace period is judged at it).
    pub now: i64,
    /// The networks of the merchant's wallets.
    pub networks: &'a [String],
    /// The return origin asked for.
    pub origin: &'a str,
    /// The idempotency key, and the age a live one has (created at or after this).
    pub idempotency_key: Option<(&'a str, i64)>,
    /// Where its institution's money lives.
    pub store: super::MoneyStore,
}

impl Admitted<'_> {
    /// Every fact but the idempotency key's: SQL and parameters from `?first`.
    fn facts(&self, first: usize) -> (String, Vec<Value>) {
        let [merchant, institution, key, now, count, origin] =
            [0, 1, 2, 3, 4, 5].map(|n| first + n);
        let listed: Vec<String> = (0..self.networks.len())
            .map(|n| format!("?{}", first + 6 + n))
            .collect();
        let store = first + 6 + self.networks.len();
        let sql = format!(
            "EXISTS (SELECT 1 FROM merchants WHERE id = ?{merchant} \
             AND institution_id = ?{institution} AND (public_key = ?{key} \
             OR (previous_public_key = ?{key} AND previous_key_expires_at > ?{now})) \
             AND {}) \
             AND (SELECT count(*) = ?{count} AND sum(network IN ({})) = ?{count} \
                  FROM merchant_wallets WHERE merchant_id = ?{merchant}) \
             AND EXISTS (SELECT 1 FROM merchant_origins WHERE merchant_id = ?{merchant} \
                         AND origin = ?{origin}) \
             AND (SELECT store FROM institutions WHERE id = ?{institution}) = ?{store}",
            super::merchants::TAKES_PAYMENTS,
            listed.join(", ")
        );
        let mut params: Vec<Value> = vec![
            self.merchant_id.into(),
            self.institution_id.into(),
            self.public_key.into(),
            self.now.into(),
            (self.networks.len() as i64).into(),
            self.origin.into(),
        ];
        params.extend(self.networks.iter().map(|n| Value::from(n.as_str())));
        params.push(self.store.as_str().into());
        (sql, params)
    }
}

impl Condition for Admitted<'_> {
    fn sql(&self, first: usize) -> (String, Vec<Value>) {
        let (facts, mut params) = self.facts(first);
        let Some((key, not_before)) = self.idempotency_key else {
            return (facts, params);
        };
        let n = first + params.len();
        params.extend([self.merchant_id.into(), key.into(), not_before.into()]);
        (
            format!(
                "{facts} AND NOT EXISTS (SELECT 1 FROM idempotency_keys WHERE merchant_id = ?{n} \
                 AND key = ?{} AND created_at >= ?{})",
                n + 1,
                n + 2
            ),
            params,
        )
    }
}

/// What [`probe`] found: whether the facts but the idempotency key's hold, and what that key
/// made before, if it is live.
#[derive(Debug, Deserialize)]
pub struct Probe {
    /// The facts but the key's hold.
    #[serde(deserialize_with = "super::flag")]
    pub admits: bool,
    /// The stored key's fingerprint.
    pub fingerprint: Option<String>,
    /// The session it made.
    pub session_id: Option<String>,
    /// That session's transaction.
    pub transaction_id: Option<i64>,
}

impl Probe {
    /// The live key's session, if the key is live.
    pub fn stored(self) -> Option<StoredKey> {
        Some(StoredKey {
            fingerprint: self.fingerprint?,
            session_id: self.session_id?,
            transaction_id: self.transaction_id?,
        })
    }
}

/// The first statement of a batch that stores a session on `admitted` facts with an
/// idempotency key (none without one): one row telling, when the batch stored nothing, whether
/// the key's earlier session is to be answered (the facts held) or a fact changed.
pub fn probe(admitted: &Admitted<'_>) -> DbResult<Option<Returning<Probe>>> {
    let Some((key, not_before)) = admitted.idempotency_key else {
        return Ok(None);
    };
    let (facts, params) = admitted.facts(4);
    let mut all: Vec<Value> = vec![admitted.merchant_id.into(), key.into(), not_before.into()];
    all.extend(params);
    all.push(admitted.institution_id.into());
    let institution = all.len();
    stmt(
        &format!(
            "SELECT ({facts}) AS admits, k.fingerprint, k.session_id, s.transaction_id \
             FROM (SELECT 1) LEFT JOIN idempotency_keys k ON k.merchant_id = ?1 AND k.key = ?2 \
             AND k.created_at >= ?3 LEFT JOIN checkout_sessions s ON s.id = k.session_id \
             AND s.institution_id = ?{institution}"
        ),
        &all,
    )
    .map(|statement| Some(Returning::new(statement)))
}

/// Deletes the merchant's key if it was created before `before` (so it can be used afresh): the
/// first statement of the batch that stores the key again.
pub fn forget_key(merchant_id: i64, key: &str, before: i64) -> DbResult<Stmt> {
    stmt(
        "DELETE FROM idempotency_keys WHERE merchant_id = ?1 AND key = ?2 AND created_at < ?3",
        &[merchant_id.into(), key.into(), before.into()],
    )
}

/// Deletes idempotency keys created before `before`, at most `limit` of them.
pub async fn purge_keys(db: &Db, before: i64, limit: i64) -> DbResult<usize> {
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
pub async fn purge_ended(db: &Db, before: i64, limit: i64) -> DbResult<usize> {
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
    pub institution_id: InstitutionId,
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

/// The session row, for the transaction the previous statement of the batch inserted, only if
/// it inserted one (so it is stored exactly when the transaction is).
pub fn insert(s: &NewSession<'_>) -> DbResult<Stmt> {
    stmt(
        "INSERT INTO checkout_sessions (id, transaction_id, merchant_id, title, redirect_url, \
         asset, network, deposit_address, crypto_amount, created_at, expires_at, \
         deposit_index, locale, institution_id) \
         SELECT ?1, last_insert_rowid(), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13 \
         WHERE changes() = 1",
        &[
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
        ],
    )
}

/// The idempotency key of a new session, stored only with it (when the same batch stored the
/// session). A live key with the same value makes the whole batch fail (a concurrent double
/// click); stale ones were forgotten first.
pub fn insert_key(
    Scoped {
        institution: institution_id,
        id: merchant_id,
    }: Scoped<i64>,
    key: &str,
    fingerprint: &str,
    session_id: &str,
    now: i64,
) -> DbResult<Stmt> {
    stmt(
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

/// The directory's index entry of a checkout held in its institution's object, written in the
/// batch that counts it (only if `admitted`: the counts within their limits and the facts still
/// holding, or the statement before it having taken the address's index).
pub fn index(
    session_id: &str,
    Scoped {
        institution: institution_id,
        id: merchant_id,
    }: Scoped<i64>,
    now: i64,
    admitted: &dyn Condition,
) -> DbResult<Stmt> {
    let (condition, guard) = admitted.sql(5);
    let mut params: Vec<Value> = vec![
        session_id.into(),
        institution_id.into(),
        merchant_id.into(),
        now.into(),
    ];
    params.extend(guard);
    stmt(
        &format!(
            "INSERT INTO checkout_index (session_id, institution_id, merchant_id, created_at) \
             SELECT ?1, ?2, ?3, ?4 WHERE {condition}"
        ),
        &params,
    )
}

/// The index entry of a checkout copied into its institution's object with the rest of its
/// money (nothing if it has one): counted only once the directory points at the object.
pub fn index_copied(
    session_id: &str,
    Scoped {
        institution: institution_id,
        id: merchant_id,
    }: Scoped<i64>,
    created_at: i64,
) -> DbResult<Stmt> {
    stmt(
        "INSERT INTO checkout_index (session_id, institution_id, merchant_id, created_at) \
         VALUES (?1, ?2, ?3, ?4) ON CONFLICT (session_id) DO NOTHING",
        &[
            session_id.into(),
            institution_id.into(),
            merchant_id.into(),
            created_at.into(),
        ],
    )
}

/// Removes a checkout's index entry when its object stored no session for it.
pub fn unindex(Scoped { institution, id }: Scoped<&str>) -> DbResult<Stmt> {
    stmt(
        "DELETE FROM checkout_index WHERE session_id = ?1 AND institution_id = ?2",
        &[id.into(), institution.into()],
    )
}

/// Deletes index entries older than `before` (their checkouts ended long since), at most
/// `limit` of them.
pub async fn purge_index(db: &Db, before: i64, limit: i64) -> DbResult<usize> {
    run(
        db,
        "DELETE FROM checkout_index WHERE session_id IN (SELECT session_id \
         FROM checkout_index INDEXED BY checkout_index_by_age WHERE created_at < ?1 LIMIT ?2)",
        &[before.into(), limit.into()],
    )
    .await
}

/// A checkout's entry in the directory's index: the institution whose object holds it, and
/// the name of its merchant, which the hosted page shows.
#[derive(Debug, Deserialize)]
pub struct Indexed {
    /// The institution.
    pub institution_id: InstitutionId,
    /// The merchant's display name.
    pub merchant_name: String,
}

/// The index entry of checkout `id` while its institution is held in its object, for a batch
/// (no row: not held in an object; an entry written by a copy before the directory points at
/// the object does not count yet).
pub fn indexed(id: &str) -> DbResult<Returning<Indexed>> {
    stmt(
        "SELECT x.institution_id, m.name AS merchant_name \
         FROM checkout_index x JOIN merchants m ON m.id = x.merchant_id \
         JOIN institutions i ON i.id = x.institution_id AND i.store = 'object' \
         WHERE x.session_id = ?1",
        &[id.into()],
    )
    .map(Returning::new)
}

/// No live idempotency key `key` of `merchant_id` (created at or after `not_before`): the
/// condition a session stored in its institution's object carries (its other facts are judged
/// in the directory).
pub struct KeyFree<'a> {
    /// The merchant.
    pub merchant_id: i64,
    /// The key.
    pub key: &'a str,
    /// The age a live key has.
    pub not_before: i64,
}

impl Condition for KeyFree<'_> {
    fn sql(&self, first: usize) -> (String, Vec<Value>) {
        (
            format!(
                "NOT EXISTS (SELECT 1 FROM idempotency_keys WHERE merchant_id = ?{first} \
                 AND key = ?{} AND created_at >= ?{})",
                first + 1,
                first + 2
            ),
            vec![
                self.merchant_id.into(),
                self.key.into(),
                self.not_before.into(),
            ],
        )
    }
}

/// Holds always: a session stored in an object without an idempotency key.
pub struct Always;

impl Condition for Always {
    fn sql(&self, _first: usize) -> (String, Vec<Value>) {
        ("1".to_owned(), Vec::new())
    }
}

/// [`find_key`] in an institution's object, which holds only its institution's keys and
/// sessions (the merchant's institution is the object's).
pub async fn find_held_key(
    db: &Db,
    Scoped {
        institution: institution_id,
        id: merchant_id,
    }: Scoped<i64>,
    key: &str,
    not_before: i64,
) -> DbResult<Option<StoredKey>> {
    first(
        db,
        "SELECT k.fingerprint, k.session_id, s.transaction_id FROM idempotency_keys k \
         JOIN checkout_sessions s ON s.id = k.session_id AND s.institution_id = ?4 \
         WHERE k.merchant_id = ?1 AND k.key = ?2 AND k.created_at >= ?3",
        &[
            merchant_id.into(),
            key.into(),
            not_before.into(),
            institution_id.into(),
        ],
    )
    .await
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
    pub institution_id: InstitutionId,
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
     s.title, t.amount_expected, t.currency, \
     CASE WHEN t.screening = 'held' THEN 'held' ELSE t.raw_status END AS raw_status, s.redirect_url, s.asset, s.network, \
     s.deposit_address, s.crypto_amount, s.expires_at, t.amount_gross, t.amount_refunded, \
     t.version, s.locale, t.asset AS paid_asset, t.late_rate, \
     EXISTS (SELECT 1 FROM chain_transfers c WHERE c.session_id = s.id \
             AND c.kind = 'payment' AND c.after_expiry = 1) AS late_seen \
     FROM checkout_sessions s JOIN transactions t ON t.id = s.transaction_id \
     JOIN merchants m ON m.id = s.merchant_id WHERE s.id = ?1";

/// The session with this id in its institution's object: [`SESSION`] without the merchant (a
/// directory row: its name comes from the checkout's index entry, [`indexed`]), its name left
/// empty here.
const HELD_SESSION: &str = "SELECT s.id, s.transaction_id, s.merchant_id, s.institution_id, \
     '' AS merchant_name, \
     s.title, t.amount_expected, t.currency, \
     CASE WHEN t.screening = 'held' THEN 'held' ELSE t.raw_status END AS raw_status, s.redirect_url, s.asset, s.network, \
     s.deposit_address, s.crypto_amount, s.expires_at, t.amount_gross, t.amount_refunded, \
     t.version, s.locale, t.asset AS paid_asset, t.late_rate, \
     EXISTS (SELECT 1 FROM chain_transfers c WHERE c.session_id = s.id \
             AND c.institution_id = s.institution_id \
             AND c.kind = 'payment' AND c.after_expiry = 1) AS late_seen \
     FROM checkout_sessions s JOIN transactions t ON t.id = s.transaction_id \
     AND t.institution_id = s.institution_id \
     WHERE s.id = ?1 AND s.institution_id = ?2";

/// [`get_in_batch`] in institution `institution_id`'s object (the merchant's name left empty:
/// [`named`] gives it from the checkout's index entry).
pub fn get_held_in_batch(
    id: &str,
    institution_id: InstitutionId,
) -> DbResult<Returning<SessionView>> {
    stmt(HELD_SESSION, &[id.into(), institution_id.into()]).map(Returning::new)
}

/// [`get_held_in_batch`] alone.
pub async fn get_held(
    db: &Db,
    id: &str,
    institution_id: InstitutionId,
) -> DbResult<Option<SessionView>> {
    first(db, HELD_SESSION, &[id.into(), institution_id.into()]).await
}

/// A session read from its object, with its merchant's name from its index entry.
pub fn named(session: SessionView, indexed: &Indexed) -> SessionView {
    SessionView {
        merchant_name: indexed.merchant_name.clone(),
        ..session
    }
}

/// The session with this id.
pub async fn get(db: &Db, id: &str) -> DbResult<Option<SessionView>> {
    first(db, SESSION, &[id.into()]).await
}

/// [`get`] as a statement of a batch (no row: no such session).
pub fn get_in_batch(id: &str) -> DbResult<Returning<SessionView>> {
    stmt(SESSION, &[id.into()]).map(Returning::new)
}

/// The session's new way to pay, written only if the statement before it in the batch (the
/// transaction's, guarded on `pending`) changed a row.
pub fn change_method(
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<&str>,
    asset: &str,
    network: &str,
    deposit_address: &str,
    deposit_index: Option<i64>,
    crypto_amount: &str,
) -> DbResult<Stmt> {
    stmt(
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

#[cfg(test)]
mod tests {
    use rusqlite::Connection;
    use shared_types::{MerchantStatus, OnboardingStatus};

    use super::*;
    use crate::db::holds;

    /// The demo data, and a merchant of it that takes payments: its id, institution, key,
    /// wallets' networks and one of its return origins.
    fn demo() -> (Connection, i64, i64, String, Vec<String>, String) {
        let mut conn = Connection::open_in_memory().unwrap();
        xtask::localdb::apply_migrations(&conn).unwrap();
        xtask::demo::seed(&mut conn, "http://127.0.0.1:8787").unwrap();
        // Only the condition is under test: rows it reads may name what the demo lacks.
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        let (id, institution, key): (i64, i64, String) = conn
            .query_row(
                &format!(
                    "SELECT id, institution_id, public_key FROM merchants m WHERE {} \
                     AND EXISTS (SELECT 1 FROM merchant_origins o WHERE o.merchant_id = m.id) \
                     AND (SELECT count(*) FROM merchant_wallets w WHERE w.merchant_id = m.id) > 1 \
                     ORDER BY id LIMIT 1",
                    super::super::merchants::TAKES_PAYMENTS
                ),
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        let networks = conn
            .prepare("SELECT network FROM merchant_wallets WHERE merchant_id = ?1 ORDER BY network")
            .unwrap()
            .query_map([id], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let origin = conn
            .query_row(
                "SELECT origin FROM merchant_origins WHERE merchant_id = ?1 LIMIT 1",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        (conn, id, institution, key, networks, origin)
    }

    #[test]
    fn a_session_on_remembered_facts_is_admitted_only_while_every_fact_holds() {
        let (conn, merchant_id, institution_id, key, networks, origin) = demo();
        let now = 2_000_000_000;
        let admitted = Admitted {
            merchant_id,
            institution_id: shared_types::ids::InstitutionId(institution_id),
            public_key: &key,
            now,
            networks: &networks,
            origin: &origin,
            idempotency_key: Some(("order-1", now - KEY_SECONDS)),
            store: crate::db::MoneyStore::D1,
        };
        assert!(holds(&conn, &admitted));
        // Each fact gone stale in turn (and restored): the condition fails.
        let stale = |change: &str, undo: &str| {
            conn.execute_batch(change).unwrap();
            assert!(!holds(&conn, &admitted), "still admitted after {change}");
            conn.execute_batch(undo).unwrap();
            assert!(holds(&conn, &admitted), "not admitted after {undo}");
        };
        let m = merchant_id;
        stale(
            &format!("UPDATE merchants SET status = 'suspended' WHERE id = {m}"),
            &format!("UPDATE merchants SET status = 'active' WHERE id = {m}"),
        );
        stale(
            &format!("UPDATE merchants SET crypto_enabled = 0 WHERE id = {m}"),
            &format!("UPDATE merchants SET crypto_enabled = 1 WHERE id = {m}"),
        );
        stale(
            &format!(
                "UPDATE merchants SET institution_id = (SELECT id FROM institutions \
                 WHERE id != {institution_id} LIMIT 1) WHERE id = {m}"
            ),
            &format!("UPDATE merchants SET institution_id = {institution_id} WHERE id = {m}"),
        );
        // A wallet removed, or one added: the networks are no longer these.
        let first = &networks[0];
        stale(
            &format!(
                "CREATE TEMP TABLE kept AS SELECT * FROM merchant_wallets WHERE merchant_id = {m} \
                 AND network = '{first}'; \
                 DELETE FROM merchant_wallets WHERE merchant_id = {m} AND network = '{first}'"
            ),
            "INSERT INTO merchant_wallets SELECT * FROM kept; DROP TABLE kept",
        );
        stale(
            &format!(
                "INSERT INTO merchant_wallets (merchant_id, network, address, updated_at) \
                 VALUES ({m}, 'another-network', '0x00', '')"
            ),
            &format!(
                "DELETE FROM merchant_wallets WHERE merchant_id = {m} \
                 AND network = 'another-network'"
            ),
        );
        stale(
            &format!(
                "DELETE FROM merchant_origins WHERE merchant_id = {m} AND origin = '{origin}'"
            ),
            &format!(
                "INSERT INTO merchant_origins (merchant_id, origin, created_at) \
                 VALUES ({m}, '{origin}', '')"
            ),
        );
        // The key rolled: admitted in its grace period, not after it.
        conn.execute_batch(&format!(
            "UPDATE merchants SET previous_public_key = public_key, public_key = 'pk_rolled', \
             previous_key_expires_at = {} WHERE id = {m}",
            now + 1
        ))
        .unwrap();
        assert!(holds(&conn, &admitted));
        conn.execute_batch(&format!(
            "UPDATE merchants SET previous_key_expires_at = {now} WHERE id = {m}"
        ))
        .unwrap();
        assert!(!holds(&conn, &admitted));
        conn.execute_batch(&format!(
            "UPDATE merchants SET public_key = previous_public_key, previous_public_key = NULL, \
             previous_key_expires_at = NULL WHERE id = {m}"
        ))
        .unwrap();
        assert!(holds(&conn, &admitted));
        // The idempotency key made something within its day: not admitted; a day older: it is.
        stale(
            &format!(
                "INSERT INTO idempotency_keys (merchant_id, key, fingerprint, session_id, \
                 created_at) VALUES ({m}, 'order-1', 'f', 'cs_x', {})",
                now - KEY_SECONDS
            ),
            &format!(
                "UPDATE idempotency_keys SET created_at = {} WHERE key = 'order-1'",
                now - KEY_SECONDS - 1
            ),
        );
        // Another merchant's key of the same value is not this one's.
        conn.execute_batch(&format!(
            "UPDATE idempotency_keys SET created_at = {now}, merchant_id = \
             (SELECT id FROM merchants WHERE id != {m} LIMIT 1) WHERE key = 'order-1'"
        ))
        .unwrap();
        assert!(holds(&conn, &admitted));
        // Without an idempotency key, none is looked at.
        let keyless = Admitted {
            idempotency_key: None,
            ..admitted
        };
        assert!(holds(&conn, &keyless));
        // The institution's money moved to its object since the facts were read: not admitted
        // here (the session would be stored in the wrong place), admitted for the object.
        conn.execute(
            "UPDATE institutions SET store = 'object' WHERE id = ?1",
            [institution_id],
        )
        .unwrap();
        assert!(!holds(&conn, &keyless));
        let moved = Admitted {
            store: crate::db::MoneyStore::Object,
            ..keyless
        };
        assert!(holds(&conn, &moved));
    }

    #[test]
    fn takes_payments_in_sql_is_the_refusal_rule() {
        let conn = Connection::open_in_memory().unwrap();
        for status in ["active", "suspended", "disabled"] {
            for onboarding in ["pending", "in_review", "completed", "rejected"] {
                for crypto in [0, 1] {
                    let in_sql: i64 = conn
                        .query_row(
                            &format!(
                                "SELECT {} FROM (SELECT ?1 AS status, ?2 AS onboarding_status, \
                                 ?3 AS crypto_enabled)",
                                super::super::merchants::TAKES_PAYMENTS
                            ),
                            rusqlite::params![status, onboarding, crypto],
                            |r| r.get(0),
                        )
                        .unwrap();
                    let status: MerchantStatus = serde_json::from_value(status.into()).unwrap();
                    let onboarding: OnboardingStatus =
                        serde_json::from_value(onboarding.into()).unwrap();
                    let rule = super::super::merchants::refusal(status, onboarding, crypto == 1);
                    assert_eq!(
                        in_sql == 1,
                        rule.is_none(),
                        "{status} {onboarding:?} {crypto}"
                    );
                }
            }
        }
    }
}
