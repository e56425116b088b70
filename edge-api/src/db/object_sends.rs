//! An institution's object's requests to the treasury (`object_sends`, object migration
//! 0003): one per settlement of a held institution, written in the transaction that starts the
//! settlement, and what the treasury's books said became of it. Written only here; runs only in
//! an institution's object.

use serde::Deserialize;
use shared_types::ids::InstitutionId;

use super::ledger::When;
use super::{all, stmt, Db, DbResult, Stmt};

/// A request as stored.
#[derive(Debug, Clone, Deserialize)]
pub struct Request {
    /// Its id: the send id the treasury stores its transaction under.
    pub id: String,
    /// The settlement it pays.
    pub settlement_id: String,
    /// Its institution (the object's).
    pub institution_id: InstitutionId,
    /// The merchant paid.
    pub merchant_id: i64,
    /// Network.
    pub network: String,
    /// Token contract (lower-case hex) or `native`.
    pub token: String,
    /// The asset's symbol.
    pub asset: String,
    /// Its decimals.
    pub decimals: u32,
    /// The merchant's wallet, lower case.
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

const COLUMNS: &str = "SELECT o.id, o.settlement_id, s.institution_id, s.merchant_id, o.network, \
     o.token, o.asset, o.decimals, o.wallet, o.units, o.netted, o.gas_limit, o.gas_price, \
     o.l1_fee, o.rate_source, o.state, o.updated_at \
     FROM object_sends o JOIN settlements s ON s.id = o.settlement_id";

/// A request to write.
pub struct NewRequest<'a> {
    /// Its send id.
    pub id: &'a str,
    /// The settlement.
    pub settlement_id: &'a str,
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
    /// The request as [`open`] reads it once written at `now`, for the settlement of
    /// `merchant_id` of `institution_id`.
    pub fn stored(&self, institution_id: InstitutionId, merchant_id: i64, now: i64) -> Request {
        Request {
            id: self.id.to_owned(),
            settlement_id: self.settlement_id.to_owned(),
            institution_id,
            merchant_id,
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

/// The statement writing request `r`, `requested`.
pub fn request(r: &NewRequest<'_>, now: i64) -> DbResult<Stmt> {
    stmt(
        "INSERT INTO object_sends (id, settlement_id, network, token, asset, decimals, wallet, \
         units, netted, gas_limit, gas_price, l1_fee, rate_source, state, created_at, \
         updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, \
         'requested', ?14, ?14)",
        &[
            r.id.into(),
            r.settlement_id.into(),
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
        ],
    )
}

/// `institution`'s open requests (`requested` or `sent`: no outcome recorded yet), oldest
/// first.
pub async fn open(db: &Db, institution: i64, limit: i64) -> DbResult<Vec<Request>> {
    all(
        db,
        &format!(
            "{COLUMNS} WHERE s.institution_id = ?2 AND o.state IN ('requested', 'sent') \
             ORDER BY o.created_at LIMIT ?1"
        ),
        &[limit.into(), institution.into()],
    )
    .await
}

/// The statement recording that the treasury stored request `id`.
pub fn sent(id: &str, now: i64) -> DbResult<Stmt> {
    stmt(
        "UPDATE object_sends SET state = 'sent', updated_at = ?2 \
         WHERE id = ?1 AND state = 'requested'",
        &[id.into(), now.into()],
    )
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
