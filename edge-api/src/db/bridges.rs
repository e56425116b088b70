//! Settlements paid across networks with CCTP: the `bridges` table (migration 0042), written
//! only here. A bridge follows one settlement's transfer from the burn on the network its
//! payments were made on to the mint on the merchant's chosen network; both legs are the
//! treasury's transactions (`chain_sends`, under the settlement, with their `leg`), committed
//! with the state changes here by `money::settle::bridge` and `money::sends`.

use serde::Deserialize;
use shared_types::ids::{InstitutionId, Scoped};

use super::{all, first, run, stmt, Db, DbResult, Stmt};

/// A bridge to store with its settlement and its burn.
pub struct NewBridge<'a> {
    /// The settlement it pays.
    pub settlement_id: &'a str,
    /// The settlement's institution.
    pub institution_id: InstitutionId,
    /// Where the payments were made (and the burn is).
    pub source_network: &'a str,
    /// Where the merchant is paid (and the mint is).
    pub destination_network: &'a str,
    /// The USDC contract burnt, lower case.
    pub token: &'a str,
    /// Base units burnt.
    pub amount: u128,
    /// The most fee accepted out of them.
    pub max_fee: u128,
    /// The finality asked: 1000 fast, 2000 standard.
    pub min_finality: u32,
    /// The merchant's wallet on the destination, lower case.
    pub mint_recipient: &'a str,
    /// The destination's newest block before the burn was signed: the message cannot be
    /// received before it (where its `MessageReceived` is looked for).
    pub destination_block: u64,
    /// Unix seconds.
    pub now: i64,
}

/// The statement storing a new bridge, `burning`.
pub fn insert(b: &NewBridge<'_>) -> DbResult<Stmt> {
    stmt(
        "INSERT INTO bridges (settlement_id, institution_id, source_network, \
         destination_network, amount, max_fee, min_finality, mint_recipient, destination_block, \
         token, state, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?10, ?11, 'burning', ?9, ?9)",
        &[
            b.settlement_id.into(),
            b.institution_id.into(),
            b.source_network.into(),
            b.destination_network.into(),
            b.amount.to_string().into(),
            b.max_fee.to_string().into(),
            i64::from(b.min_finality).into(),
            b.mint_recipient.into(),
            b.now.into(),
            i64::try_from(b.destination_block)
                .unwrap_or(i64::MAX)
                .into(),
            b.token.into(),
        ],
    )
}

/// A bridge as the treasury follows it.
#[derive(Debug, Clone, Deserialize)]
pub struct Bridge {
    /// Its settlement.
    pub settlement_id: String,
    /// The settlement's institution.
    pub institution_id: InstitutionId,
    /// Source network.
    pub source_network: String,
    /// Destination network.
    pub destination_network: String,
    /// Base units burnt (decimal text).
    pub amount: String,
    /// The most fee accepted (decimal text).
    pub max_fee: String,
    /// The finality asked.
    pub min_finality: u32,
    /// The merchant's wallet on the destination.
    pub mint_recipient: String,
    /// The destination's newest block before the burn was signed.
    pub destination_block: u64,
    /// The burn's hash, once final.
    pub burn_tx_hash: Option<String>,
    /// The message's nonce (`0x` hex).
    pub nonce: Option<String>,
    /// The USDC contract burnt on the source network.
    pub token: String,
    /// Why it waits.
    pub note: Option<String>,
}

const BRIDGE_FROM: &str = "SELECT b.settlement_id, b.institution_id, b.source_network, \
     b.destination_network, b.amount, b.max_fee, b.min_finality, b.mint_recipient, b.destination_block, \
     b.burn_tx_hash, b.nonce, b.token, b.note FROM bridges b";

/// The bridge of settlement `settlement`, if it is paid across.
pub async fn of_settlement(db: &Db, settlement: Scoped<&str>) -> DbResult<Option<Bridge>> {
    first(
        db,
        &format!("{BRIDGE_FROM} WHERE b.settlement_id = ?1 AND b.institution_id = ?2"),
        &[settlement.id.into(), settlement.institution.into()],
    )
    .await
}

/// Bridges whose burn is final and whose mint is not out: the attestation to read, the mint to
/// sign. Those waited on longest first.
pub async fn attesting(db: &Db, limit: i64) -> DbResult<Vec<Bridge>> {
    all(
        db,
        &format!("{BRIDGE_FROM} WHERE b.state = 'attesting' ORDER BY b.updated_at LIMIT ?1"),
        &[limit.into()],
    )
    .await
}

/// The statement recording the burn `burn_tx_hash` final: the attestation is awaited next.
pub fn burnt(settlement: Scoped<&str>, burn_tx_hash: &str, now: i64) -> DbResult<Stmt> {
    stmt(
        "UPDATE bridges SET state = 'attesting', burn_tx_hash = ?3, note = NULL, updated_at = ?4 \
         WHERE settlement_id = ?1 AND institution_id = ?2 AND state = 'burning'",
        &[
            settlement.id.into(),
            settlement.institution.into(),
            burn_tx_hash.into(),
            now.into(),
        ],
    )
}

/// The statement recording the burn reverted (its settlement fails with it).
pub fn failed(settlement: Scoped<&str>, now: i64) -> DbResult<Stmt> {
    stmt(
        "UPDATE bridges SET state = 'failed', updated_at = ?3 \
         WHERE settlement_id = ?1 AND institution_id = ?2 AND state = 'burning'",
        &[
            settlement.id.into(),
            settlement.institution.into(),
            now.into(),
        ],
    )
}

/// The attested message, as stored with the mint.
pub struct AttestedMessage<'a> {
    /// The message, `0x` hex.
    pub message: &'a str,
    /// Its attestation, `0x` hex.
    pub attestation: &'a str,
    /// Its nonce, `0x` hex.
    pub nonce: &'a str,
}

/// The statement taking the bridge from `attesting` to `minting` with its attested message: the
/// mint's insert after it in the batch stores only if this changed a row (`changes() = 1`), so
/// of two runs signing a mint, one stores it.
pub fn minting(
    settlement: Scoped<&str>,
    attested: &AttestedMessage<'_>,
    now: i64,
) -> DbResult<Stmt> {
    stmt(
        "UPDATE bridges SET state = 'minting', message = ?3, attestation = ?4, nonce = ?5, \
         note = NULL, updated_at = ?6 \
         WHERE settlement_id = ?1 AND institution_id = ?2 AND state = 'attesting'",
        &[
            settlement.id.into(),
            settlement.institution.into(),
            attested.message.into(),
            attested.attestation.into(),
            attested.nonce.into(),
            now.into(),
        ],
    )
}

/// The statement recording the message received on the destination by `mint_tx_hash` (the
/// treasury's mint, or anyone's) with `fee` collected: guarded on the bridge not being minted
/// yet, so the settlement's confirmation after it in the batch follows it once.
pub fn minted(
    settlement: Scoped<&str>,
    (mint_tx_hash, fee): (&str, u128),
    now: i64,
) -> DbResult<Stmt> {
    stmt(
        "UPDATE bridges SET state = 'minted', mint_tx_hash = ?3, fee = ?4, note = NULL, \
         updated_at = ?5 \
         WHERE settlement_id = ?1 AND institution_id = ?2 AND state IN ('attesting', 'minting')",
        &[
            settlement.id.into(),
            settlement.institution.into(),
            mint_tx_hash.into(),
            fee.to_string().into(),
            now.into(),
        ],
    )
}

/// The statement sending a bridge whose mint reverted without the message being received back
/// to `attesting`, where a new mint is signed.
pub fn mint_failed(settlement: Scoped<&str>, why: &str, now: i64) -> DbResult<Stmt> {
    stmt(
        "UPDATE bridges SET state = 'attesting', note = ?3, updated_at = ?4 \
         WHERE settlement_id = ?1 AND institution_id = ?2 AND state = 'minting'",
        &[
            settlement.id.into(),
            settlement.institution.into(),
            why.into(),
            now.into(),
        ],
    )
}

/// Records why a bridge waits (shown with its payments' settlement).
pub async fn note(db: &Db, settlement: Scoped<&str>, why: &str, now: i64) -> DbResult<()> {
    run(
        db,
        "UPDATE bridges SET note = ?3, updated_at = ?4 \
         WHERE settlement_id = ?1 AND institution_id = ?2 AND state IN ('attesting', 'minting')",
        &[
            settlement.id.into(),
            settlement.institution.into(),
            why.into(),
            now.into(),
        ],
    )
    .await
    .map(drop)
}

/// A merchant's choice of the network its USDC is paid on (migration 0041), and from when
/// settlements use it.
#[derive(Debug, Clone, Deserialize)]
pub struct Choice {
    /// The network.
    pub network: String,
    /// From when (Unix seconds): the cool-off after its last change.
    pub usable_from: i64,
}

/// The USDC network merchant `merchant` chose, if it chose one.
pub async fn choice(db: &Db, merchant: Scoped<i64>) -> DbResult<Option<Choice>> {
    first(
        db,
        "SELECT usdc_settlement_network AS network, \
         COALESCE(usdc_settlement_usable_from, 0) AS usable_from FROM merchants \
         WHERE id = ?1 AND institution_id = ?2 AND usdc_settlement_network IS NOT NULL",
        &[merchant.id.into(), merchant.institution.into()],
    )
    .await
}
