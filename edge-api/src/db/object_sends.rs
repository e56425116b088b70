//! An institution's object's requests to the treasury (`object_sends`, object migrations 0003
//! and 0004): one per settlement of a held institution, written in the transaction that starts
//! the settlement, and one per attempt of a refund, written with the refund (or with the
//! outcome of its failed attempt); and what the treasury's books said became of each. Written
//! only here; runs only in an institution's object.

use serde::Deserialize;
use shared_types::ids::InstitutionId;

use super::ledger::When;
use super::{all, first, stmt, Db, DbResult, Stmt, Value};

/// What a request pays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paying<'a> {
    /// A settlement, by id.
    Settlement(&'a str),
    /// An attempt of a refund, by the refund's id.
    Refund(&'a str),
}

/// A request as stored.
#[derive(Debug, Clone, Deserialize)]
pub struct Request {
    /// Its id: the send id the treasury stores its transaction under.
    pub id: String,
    /// The settlement it pays, if it pays one.
    pub settlement_id: Option<String>,
    /// The refund it pays an attempt of, if it pays one.
    pub refund_id: Option<String>,
    /// The id of the treasury's row of what it pays: the settlement's, or for a refund the
    /// request's own.
    pub payout_id: String,
    /// Its institution (the object's).
    pub institution_id: InstitutionId,
    /// The merchant whose settlement or refund it is.
    pub merchant_id: i64,
    /// For a refund: its payment.
    pub transaction_id: Option<i64>,
    /// For a return (a refund of money received after the credit): the deposit address it is
    /// paid from.
    pub from_address: Option<String>,
    /// Network.
    pub network: String,
    /// Token contract (lower-case hex) or `native`.
    pub token: String,
    /// The asset's symbol.
    pub asset: String,
    /// Its decimals.
    pub decimals: u32,
    /// The merchant's wallet, or the customer's address, lower case.
    pub wallet: String,
    /// Base units paid (decimal text).
    pub units: String,
    /// What the merchant's debt took of its payments' net (decimal text).
    pub netted: String,
    /// Gas limit.
    pub gas_limit: u64,
    /// Wei per gas (decimal text).
    pub gas_price: String,
    /// The most L1 data fee (decimal text).
    pub l1_fee: String,
    /// Where the gas's rate came from.
    pub rate_source: String,
    /// `requested` (not yet stored by the treasury) or `sent`.
    pub state: String,
    /// When its state last changed (Unix seconds).
    pub updated_at: i64,
}

impl Request {
    /// What it pays.
    pub fn paying(&self) -> Paying<'_> {
        match (&self.settlement_id, &self.refund_id) {
            (Some(id), _) => Paying::Settlement(id),
            (None, Some(id)) => Paying::Refund(id),
            // The table's check sets exactly one of the two.
            (None, None) => Paying::Settlement(&self.payout_id),
        }
    }
}

const COLUMNS: &str = "SELECT o.id, o.settlement_id, o.refund_id, o.payout_id, \
     COALESCE(s.institution_id, f.institution_id) AS institution_id, \
     COALESCE(s.merchant_id, t.merchant_id) AS merchant_id, f.transaction_id, f.from_address, \
     o.network, \
     o.token, o.asset, o.decimals, o.wallet, o.units, o.netted, o.gas_limit, o.gas_price, \
     o.l1_fee, o.rate_source, o.state, o.updated_at \
     FROM object_sends o LEFT JOIN settlements s ON s.id = o.settlement_id \
     AND s.institution_id = ?2 \
     LEFT JOIN refunds f ON f.id = o.refund_id AND f.institution_id = ?2 \
     LEFT JOIN transactions t ON t.id = f.transaction_id AND t.institution_id = f.institution_id";

/// A request to write.
pub struct NewRequest<'a> {
    /// Its send id.
    pub id: &'a str,
    /// Its institution (the object's).
    pub institution_id: InstitutionId,
    /// What it pays.
    pub paying: Paying<'a>,
    /// Network.
    pub network: &'a str,
    /// Token contract or `native`.
    pub token: &'a str,
    /// Symbol.
    pub asset: &'a str,
    /// Decimals.
    pub decimals: u32,
    /// Wallet, lower case.
    pub wallet: &'a str,
    /// Base units.
    pub units: u128,
    /// Netted.
    pub netted: u128,
    /// Gas limit.
    pub gas_limit: u64,
    /// Wei per gas.
    pub gas_price: u128,
    /// Most L1 data fee.
    pub l1_fee: u128,
    /// The gas rate's source.
    pub rate_source: &'a str,
}

impl NewRequest<'_> {
    /// The id of the treasury's row of what it pays.
    fn payout_id(&self) -> &str {
        match self.paying {
            Paying::Settlement(id) => id,
            Paying::Refund(_) => self.id,
        }
    }

    /// The request as [`open`] reads it once written at `now`, for the settlement or refund of
    /// `merchant_id` (a refund's of payment `transaction_id`).
    pub fn stored(&self, merchant_id: i64, transaction_id: Option<i64>, now: i64) -> Request {
        let (settlement_id, refund_id) = match self.paying {
            Paying::Settlement(id) => (Some(id.to_owned()), None),
            Paying::Refund(id) => (None, Some(id.to_owned())),
        };
        Request {
            id: self.id.to_owned(),
            settlement_id,
            refund_id,
            payout_id: self.payout_id().to_owned(),
            institution_id: self.institution_id,
            merchant_id,
            transaction_id,
            from_address: None,
            network: self.network.to_owned(),
            token: self.token.to_owned(),
            asset: self.asset.to_owned(),
            decimals: self.decimals,
            wallet: self.wallet.to_owned(),
            units: self.units.to_string(),
            netted: self.netted.to_string(),
            gas_limit: self.gas_limit,
            gas_price: self.gas_price.to_string(),
            l1_fee: self.l1_fee.to_string(),
            rate_source: self.rate_source.to_owned(),
            state: "requested".to_owned(),
            updated_at: now,
        }
    }
}

/// The statement writing request `r`, `requested`; a refund's only while the refund is
/// `sending` (the statement that stores it comes first in the batch).
pub fn request(r: &NewRequest<'_>, now: i64) -> DbResult<Stmt> {
    request_if(r, now, "1")
}

/// [`request`] asking again for a refund whose attempt failed: only when the statement right
/// before it in the batch (the one counting that attempt) changed a row, so the outcome
/// recorded twice at once asks once.
pub fn again(r: &NewRequest<'_>, now: i64) -> DbResult<Stmt> {
    request_if(r, now, "changes() = 1")
}

/// [`request`], only if `condition` (SQL without parameters) holds too.
fn request_if(r: &NewRequest<'_>, now: i64, condition: &str) -> DbResult<Stmt> {
    let (settlement, refund) = match r.paying {
        Paying::Settlement(id) => (Value::from(id), Value::Null),
        Paying::Refund(id) => (Value::Null, Value::from(id)),
    };
    stmt(
        &format!(
            "INSERT INTO object_sends (id, settlement_id, refund_id, payout_id, network, token, \
             asset, decimals, wallet, units, netted, gas_limit, gas_price, l1_fee, rate_source, \
             state, created_at, updated_at) SELECT ?1, ?2, ?15, ?16, ?3, ?4, ?5, ?6, ?7, ?8, \
             ?9, ?10, ?11, ?12, ?13, 'requested', ?14, ?14 \
             WHERE ({condition}) AND (?15 IS NULL OR EXISTS (SELECT 1 FROM refunds \
             WHERE id = ?15 AND state = 'sending' AND institution_id = ?17))"
        ),
        &[
            r.id.into(),
            settlement,
            r.network.into(),
            r.token.into(),
            r.asset.into(),
            i64::from(r.decimals).into(),
            r.wallet.into(),
            r.units.to_string().into(),
            r.netted.to_string().into(),
            i64::try_from(r.gas_limit).unwrap_or(i64::MAX).into(),
            r.gas_price.to_string().into(),
            r.l1_fee.to_string().into(),
            r.rate_source.into(),
            now.into(),
            refund,
            r.payout_id().into(),
            r.institution_id.into(),
        ],
    )
}

/// `institution`'s open requests (`requested` or `sent`: no outcome recorded yet), oldest
/// first.
pub async fn open(db: &Db, institution: i64, limit: i64) -> DbResult<Vec<Request>> {
    all(
        db,
        &format!(
            "{COLUMNS} WHERE COALESCE(s.institution_id, f.institution_id) = ?2 \
             AND o.state IN ('requested', 'sent') ORDER BY o.created_at LIMIT ?1"
        ),
        &[limit.into(), institution.into()],
    )
    .await
}

/// The statement recording that the treasury stored request `id` (signed as `tx_hash`, when
/// known).
pub fn sent(id: &str, tx_hash: Option<&str>, now: i64) -> DbResult<Stmt> {
    stmt(
        "UPDATE object_sends SET state = 'sent', updated_at = ?2, \
         tx_hash = COALESCE(?3, tx_hash) WHERE id = ?1 AND state = 'requested'",
        &[id.into(), now.into(), tx_hash.into()],
    )
}

/// The request of `institution` whose payout (the treasury's row) is `payout_id`.
pub async fn by_payout(
    db: &Db,
    institution: InstitutionId,
    payout_id: &str,
) -> DbResult<Option<Request>> {
    first(
        db,
        &format!(
            "{COLUMNS} WHERE o.payout_id = ?1 AND COALESCE(s.institution_id, f.institution_id) = ?2"
        ),
        &[payout_id.into(), institution.into()],
    )
    .await
}

/// The statement recording request `id` final on chain: confirmed by the transaction
/// `tx_hash`, or failed with `error`; it changes a row only once (what follows it in the batch
/// is guarded on that).
pub fn finished(
    id: &str,
    confirmed: bool,
    tx_hash: &str,
    error: Option<&str>,
    now: i64,
) -> DbResult<Stmt> {
    stmt(
        "UPDATE object_sends SET state = ?2, tx_hash = ?3, error = ?4, updated_at = ?5 \
         WHERE id = ?1 AND state IN ('requested', 'sent')",
        &[
            id.into(),
            if confirmed { "confirmed" } else { "failed" }.into(),
            tx_hash.into(),
            error.into(),
            now.into(),
        ],
    )
}

/// The condition that request `id` is in `state`, for the books written with it.
pub fn in_state(id: &str, state: &str) -> When {
    When::holds(
        "(SELECT state FROM object_sends WHERE id = ?1) = ?2",
        vec![id.into(), state.into()],
    )
}
