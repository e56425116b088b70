//! Custody sweeps (`custody_sweeps`, migration 0015): the transactions the offline custody signer
//! (`xtask sweep`) stored before broadcasting them, which the worker follows until they are final
//! (`money::sweeps`). The signer inserts the rows through `wrangler d1 execute`; in the worker
//! this module is their only writer.

use payrail_evm::Token;
use serde::Deserialize;

use super::ledger::When;
use super::{all, run, stmt, Db, DbResult, Stmt};

/// A sweep transaction as stored.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Sweep {
    /// Its hash, lower-case hex.
    pub tx_hash: String,
    /// Network name.
    pub network: String,
    /// The token contract or `native`.
    pub token: Token,
    /// The asset's symbol.
    pub asset: String,
    /// Its decimals.
    pub decimals: u32,
    /// A deposit to the treasury, or gas from the custody gas address to a deposit.
    pub kind: SweepKind,
    /// The sender, lower case.
    pub from_address: String,
    /// The receiver (the treasury, or the deposit funded), lower case.
    pub to_address: String,
    /// Its nonce.
    pub nonce: i64,
    /// Base units moved, decimal text.
    pub units: String,
    /// Gas limit as signed.
    pub gas_limit: i64,
    /// Wei per gas as signed, decimal text.
    pub gas_price: String,
    /// The signed bytes, `0x` hex.
    pub raw: String,
    /// Unix seconds.
    pub created_at: i64,
    /// The institution whose object keeps the deposit's custody account (the sweep is posted
    /// as a half in its object and a half in the treasury's books); `None` for D1's.
    pub held_by: Option<i64>,
}

impl Sweep {
    /// Whether it funds a deposit's gas (rather than sweeping a deposit).
    pub fn is_gas(&self) -> bool {
        self.kind == SweepKind::Gas
    }
}

/// What a custody transaction does (`custody_sweeps.kind`; the offline signer writes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SweepKind {
    /// A deposit's money to the treasury.
    Sweep,
    /// The coin for a deposit's gas, from the custody gas address.
    Gas,
}

const COLUMNS: &str = "s.tx_hash, s.network, s.token, s.asset, s.decimals, s.kind, \
     s.from_address, s.to_address, s.nonce, s.units, s.gas_limit, s.gas_price, s.raw, s.created_at, \
     s.held_by";

/// The sweeps still `sent` that can be made final now, oldest first (a gas funding before the
/// sweep it pays for), at most `limit`: a deposit's sweep waits while a gas funding to it is
/// still `sent`, so the books see the coin arrive before it is spent.
pub async fn live(db: &Db, limit: i64) -> DbResult<Vec<Sweep>> {
    all(
        db,
        &format!(
            "SELECT {COLUMNS} FROM custody_sweeps s WHERE s.state = 'sent' \
             AND NOT (s.kind = 'sweep' AND EXISTS (SELECT 1 FROM custody_sweeps g \
              WHERE g.state = 'sent' AND g.kind = 'gas' AND g.network = s.network \
              AND g.to_address = s.from_address)) \
             ORDER BY s.created_at, CASE s.kind WHEN 'gas' THEN 0 ELSE 1 END, s.nonce LIMIT ?1"
        ),
        &[limit.into()],
    )
    .await
}

/// How a sweep transaction ended, from its final receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Whether it succeeded (`confirmed`) or reverted (`failed`).
    pub succeeded: bool,
    /// The block it is in.
    pub block: u64,
    /// Gas it used.
    pub gas_used: u128,
    /// Wei per gas it paid (the receipt's effective price).
    pub gas_paid: u128,
    /// The L1 data fee it paid besides its gas (the receipt's `l1Fee`; 0 where there is none).
    pub l1_fee: u128,
}

impl Outcome {
    /// What it paid in all, in wei: its gas and its L1 data fee; `None` past 128 bits.
    pub fn fee(&self) -> Option<u128> {
        self.gas_used
            .checked_mul(self.gas_paid)?
            .checked_add(self.l1_fee)
    }
}

/// The statement that makes a `sent` sweep final with `outcome` (nothing if it already is).
pub fn finish(tx_hash: &str, outcome: &Outcome, now: i64) -> DbResult<Stmt> {
    let (state, error) = if outcome.succeeded {
        ("confirmed", None)
    } else {
        (
            "failed",
            Some(format!("reverted in block {}", outcome.block)),
        )
    };
    stmt(
        "UPDATE custody_sweeps SET state = ?2, block_number = ?3, gas_used = ?4, gas_paid = ?5, \
         error = ?6, updated_at = ?7, l1_fee = ?8 WHERE tx_hash = ?1 AND state = 'sent'",
        &[
            tx_hash.into(),
            state.into(),
            i64::try_from(outcome.block).unwrap_or(i64::MAX).into(),
            outcome.gas_used.to_string().into(),
            outcome.gas_paid.to_string().into(),
            error.into(),
            now.into(),
            outcome.l1_fee.to_string().into(),
        ],
    )
}

/// The condition the books' transfers of a sweep are written under: the batch's [`finish`]
/// turned it final just now.
pub fn turned_final(tx_hash: &str, now: i64) -> When {
    When::holds(
        "EXISTS (SELECT 1 FROM custody_sweeps WHERE tx_hash = ?1 AND state <> 'sent' \
         AND updated_at = ?2)",
        vec![tx_hash.into(), now.into()],
    )
}

/// Records why a sweep waits (a broadcast the node refused), or that it no longer does.
pub async fn note(db: &Db, tx_hash: &str, error: Option<&str>, now: i64) -> DbResult<()> {
    run(
        db,
        "UPDATE custody_sweeps SET error = ?2, updated_at = ?3 WHERE tx_hash = ?1 \
         AND state = 'sent' AND error IS NOT ?2",
        &[tx_hash.into(), error.into(), now.into()],
    )
    .await
    .map(drop)
}
