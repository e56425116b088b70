//! Moves of the treasury's float between networks with CCTP (docs/CCTP.md, "Moving float"): the
//! `float_moves` table (migration 0043), written here and, for its bridge's states, in
//! `db::bridges` (the same columns as a settlement's bridge, followed by the same code). A move
//! is the platform's, not an institution's: the operator asks for it (`routes::operator`).

use serde::{Deserialize, Serialize};

use super::bridges::{BurnTerms, BURN_COLUMNS};
use super::{all, first, stmt, Db, DbResult, Stmt};

/// A move to store with its burn.
pub struct NewFloatMove<'a> {
    /// `fm_…`.
    pub id: &'a str,
    /// The operator's reference: the same reference again is the same move.
    pub reference: &'a str,
    /// Its burn (minted to the treasury's own address, the same on every network).
    pub burn: BurnTerms<'a>,
    /// Who asked.
    pub requested_by: &'a str,
    /// Unix seconds.
    pub now: i64,
}

/// The statement storing a new move, `burning`, unless its reference is taken (it changes no
/// row then: the burn's insert after it is guarded on it, so of two requests with one
/// reference, one move is made).
pub fn insert(m: &NewFloatMove<'_>) -> DbResult<Stmt> {
    let mut params = vec![m.id.into(), m.reference.into()];
    params.extend(m.burn.values());
    params.extend([m.requested_by.into(), m.now.into()]);
    stmt(
        &format!(
            "INSERT INTO float_moves (id, reference, {BURN_COLUMNS}, state, requested_by, \
             created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'burning', ?11, ?12, ?12) \
             ON CONFLICT (reference) DO NOTHING"
        ),
        &params,
    )
}

/// A move as the operator and the portal read it.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
pub struct FloatMove {
    /// `fm_…`.
    pub id: String,
    /// The operator's reference.
    pub reference: String,
    /// Where the USDC is burnt.
    pub source_network: String,
    /// Where it is minted.
    pub destination_network: String,
    /// Base units burnt (decimal text).
    pub amount: String,
    /// The most fee accepted (decimal text).
    pub max_fee: String,
    /// The finality asked: 1000 fast, 2000 standard.
    pub min_finality: u32,
    /// `burning`, `attesting`, `minting`, `minted` or `failed`.
    pub state: String,
    /// The burn, once final.
    pub burn_tx_hash: Option<String>,
    /// The transaction that received the message on the destination, once final.
    pub mint_tx_hash: Option<String>,
    /// The fee the mint collected (base units), once minted.
    pub fee: Option<String>,
    /// Why it waits, when it does.
    pub note: Option<String>,
    /// Who asked.
    pub requested_by: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub updated_at: i64,
}

const FLOAT_MOVE: &str = "SELECT id, reference, source_network, destination_network, amount, \
     max_fee, min_finality, state, burn_tx_hash, mint_tx_hash, fee, note, requested_by, \
     created_at, updated_at FROM float_moves";

/// The move `id`.
pub async fn get(db: &Db, id: &str) -> DbResult<Option<FloatMove>> {
    first(db, &format!("{FLOAT_MOVE} WHERE id = ?1"), &[id.into()]).await
}

/// The move with the operator's reference `reference`.
pub async fn by_reference(db: &Db, reference: &str) -> DbResult<Option<FloatMove>> {
    first(
        db,
        &format!("{FLOAT_MOVE} WHERE reference = ?1"),
        &[reference.into()],
    )
    .await
}

/// The newest `limit` moves, newest first; those created before `(created_at, id)` when given.
pub async fn list(db: &Db, before: Option<(i64, &str)>, limit: i64) -> DbResult<Vec<FloatMove>> {
    let (at, id) = before.unwrap_or((i64::MAX, ""));
    all(
        db,
        &format!(
            "{FLOAT_MOVE} WHERE (created_at, id) < (?1, ?2) \
             ORDER BY created_at DESC, id DESC LIMIT ?3"
        ),
        &[at.into(), id.into(), limit.into()],
    )
    .await
}

/// The moves not yet minted nor failed, oldest first (at most `limit`).
pub async fn in_flight(db: &Db, limit: i64) -> DbResult<Vec<FloatMove>> {
    all(
        db,
        &format!(
            "{FLOAT_MOVE} WHERE state IN ('burning', 'attesting', 'minting') \
             ORDER BY created_at, id LIMIT ?1"
        ),
        &[limit.into()],
    )
    .await
}
