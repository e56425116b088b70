//! Transfers across networks with CCTP, each followed from the burn on one network to the mint
//! on another: a settlement paid across (the `bridges` table, migration 0042) or a move of the
//! treasury's float (the `float_moves` table, migration 0043, with the same columns), written
//! only here and in `db::float_moves`. Both legs are the treasury's transactions
//! (`chain_sends`, under what they carry, with their `leg`), committed with the state changes
//! here by `money::settle::bridge` and `money::sends`.

use serde::Deserialize;
use shared_types::ids::{InstitutionId, Scoped};

use super::sends::{Outgoing, Purpose};
use super::{all, first, stmt, Db, DbResult, Stmt, Value};

/// What a bridge carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier<'a> {
    /// A settlement paid across, of its institution (a row of `bridges`).
    Settlement(Scoped<&'a str>),
    /// A move of the treasury's float, the platform's own (a row of `float_moves`).
    FloatMove(&'a str),
}

impl<'a> Carrier<'a> {
    /// What the leg `send` carries, when it is a bridge's leg.
    pub fn of_send(send: &'a Outgoing) -> Option<Carrier<'a>> {
        send.leg()?;
        match send.purpose() {
            Purpose::Settlement(id) => {
                Some(Carrier::Settlement(Scoped::new(send.institution_id, id)))
            }
            Purpose::FloatMove(id) => Some(Carrier::FloatMove(id)),
            Purpose::Refund(_) => None,
        }
    }

    /// What its legs pay, as `chain_sends` names it.
    pub fn purpose(self) -> Purpose<'a> {
        match self {
            Carrier::Settlement(s) => Purpose::Settlement(s.id),
            Carrier::FloatMove(id) => Purpose::FloatMove(id),
        }
    }

    /// Its row's table, the condition finding it (`?1` and `?2`), and those two parameters: a
    /// settlement's bridge by its settlement and institution, a float move by its id (`?2` is
    /// NULL: the platform's, no institution's).
    fn row(self) -> (&'static str, &'static str, [Value; 2]) {
        match self {
            Carrier::Settlement(s) => (
                "bridges",
                "settlement_id = ?1 AND institution_id = ?2",
                [s.id.into(), s.institution.into()],
            ),
            Carrier::FloatMove(id) => (
                "float_moves",
                "id = ?1 AND ?2 IS NULL",
                [id.into(), Value::Null],
            ),
        }
    }
}

/// A statement on `carrier`'s row: `set` (its own parameters from `?3`, `rest`) where `state`
/// (a condition on the row's state) holds.
fn update(carrier: Carrier<'_>, set: &str, state: &str, rest: Vec<Value>) -> DbResult<Stmt> {
    let (table, key, [first_key, second_key]) = carrier.row();
    let mut params = vec![first_key, second_key];
    params.extend(rest);
    stmt(
        &format!("UPDATE {table} SET {set} WHERE {key} AND {state}"),
        &params,
    )
}

/// What a burn asks of CCTP, stored alike with a settlement's bridge and a float move.
pub struct BurnTerms<'a> {
    /// Where the USDC is burnt.
    pub source_network: &'a str,
    /// Where it is minted.
    pub destination_network: &'a str,
    /// The USDC contract burnt, lower case.
    pub token: &'a str,
    /// Base units burnt.
    pub amount: u128,
    /// The most fee accepted out of them.
    pub max_fee: u128,
    /// The finality asked: 1000 fast, 2000 standard.
    pub min_finality: u32,
    /// Who is minted to on the destination (the merchant's wallet, or the treasury's own
    /// address), lower case.
    pub mint_recipient: &'a str,
    /// The destination's newest block before the burn was signed: the message cannot be
    /// received before it (where its `MessageReceived` is looked for).
    pub destination_block: u64,
}

/// The columns [`BurnTerms`] fill, in the order of [`BurnTerms::values`].
pub const BURN_COLUMNS: &str = "source_network, destination_network, token, amount, max_fee, \
     min_finality, mint_recipient, destination_block";

impl BurnTerms<'_> {
    /// Its values, for [`BURN_COLUMNS`].
    pub fn values(&self) -> [Value; 8] {
        [
            self.source_network.into(),
            self.destination_network.into(),
            self.token.into(),
            self.amount.to_string().into(),
            self.max_fee.to_string().into(),
            i64::from(self.min_finality).into(),
            self.mint_recipient.into(),
            i64::try_from(self.destination_block)
                .unwrap_or(i64::MAX)
                .into(),
        ]
    }
}

/// A bridge to store with its settlement and its burn.
pub struct NewBridge<'a> {
    /// The settlement it pays.
    pub settlement_id: &'a str,
    /// The settlement's institution.
    pub institution_id: InstitutionId,
    /// Its burn.
    pub burn: BurnTerms<'a>,
    /// Unix seconds.
    pub now: i64,
}

/// The statement storing a new bridge, `burning`.
pub fn insert(b: &NewBridge<'_>) -> DbResult<Stmt> {
    let mut params = vec![b.settlement_id.into(), b.institution_id.into()];
    params.extend(b.burn.values());
    params.push(b.now.into());
    stmt(
        &format!(
            "INSERT INTO bridges (settlement_id, institution_id, {BURN_COLUMNS}, state, \
             created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'burning', ?11, ?11)"
        ),
        &params,
    )
}

/// A bridge as the treasury follows it.
#[derive(Debug, Clone, Deserialize)]
pub struct Bridge {
    /// What it carries: the settlement's id, or the float move's.
    pub carrier_id: String,
    /// The settlement's institution; `None` for a float move.
    pub institution_id: Option<InstitutionId>,
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

impl Bridge {
    /// What it carries.
    pub fn carrier(&self) -> Carrier<'_> {
        match self.institution_id {
            Some(institution) => Carrier::Settlement(Scoped::new(institution, &self.carrier_id)),
            None => Carrier::FloatMove(&self.carrier_id),
        }
    }
}

/// The columns of [`Bridge`] both tables share.
macro_rules! bridge_columns {
    () => {
        "b.source_network, b.destination_network, b.amount, b.max_fee, b.min_finality, \
         b.mint_recipient, b.destination_block, b.burn_tx_hash, b.nonce, b.token, b.note, \
         b.updated_at"
    };
}

const BRIDGE_FROM: &str = concat!(
    "SELECT b.settlement_id AS carrier_id, b.institution_id, ",
    bridge_columns!(),
    " FROM bridges b"
);

const FLOAT_MOVE_FROM: &str = concat!(
    "SELECT b.id AS carrier_id, NULL AS institution_id, ",
    bridge_columns!(),
    " FROM float_moves b"
);

/// The bridge of `carrier`: a settlement's, if it is paid across; a float move's.
pub async fn of(db: &Db, carrier: Carrier<'_>) -> DbResult<Option<Bridge>> {
    let from = match carrier {
        Carrier::Settlement(_) => {
            format!("{BRIDGE_FROM} WHERE b.settlement_id = ?1 AND b.institution_id = ?2")
        }
        Carrier::FloatMove(_) => format!("{FLOAT_MOVE_FROM} WHERE b.id = ?1 AND ?2 IS NULL"),
    };
    let (_, _, key) = carrier.row();
    first(db, &from, &key).await
}

/// Bridges (settlements' and float moves') whose burn is final and whose mint is not out: the
/// attestation to read, the mint to sign. Those waited on longest first.
pub async fn attesting(db: &Db, limit: i64) -> DbResult<Vec<Bridge>> {
    all(
        db,
        &format!(
            "SELECT * FROM ({BRIDGE_FROM} WHERE b.state = 'attesting' UNION ALL \
             {FLOAT_MOVE_FROM} WHERE b.state = 'attesting') ORDER BY updated_at LIMIT ?1"
        ),
        &[limit.into()],
    )
    .await
}

/// The statement recording the burn `burn_tx_hash` final: the attestation is awaited next.
pub fn burnt(carrier: Carrier<'_>, burn_tx_hash: &str, now: i64) -> DbResult<Stmt> {
    update(
        carrier,
        "state = 'attesting', burn_tx_hash = ?3, note = NULL, updated_at = ?4",
        "state = 'burning'",
        vec![burn_tx_hash.into(), now.into()],
    )
}

/// The statement recording the burn reverted (a settlement fails with it; a float move moved
/// nothing).
pub fn failed(carrier: Carrier<'_>, now: i64) -> DbResult<Stmt> {
    update(
        carrier,
        "state = 'failed', updated_at = ?3",
        "state = 'burning'",
        vec![now.into()],
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
pub fn minting(carrier: Carrier<'_>, attested: &AttestedMessage<'_>, now: i64) -> DbResult<Stmt> {
    update(
        carrier,
        "state = 'minting', message = ?3, attestation = ?4, nonce = ?5, note = NULL, \
         updated_at = ?6",
        "state = 'attesting'",
        vec![
            attested.message.into(),
            attested.attestation.into(),
            attested.nonce.into(),
            now.into(),
        ],
    )
}

/// The statement recording the message received on the destination by `mint_tx_hash` (the
/// treasury's mint, or anyone's) with `fee` collected: guarded on the bridge not being minted
/// yet, so what follows it in the batch (a settlement's confirmation) follows it once.
pub fn minted(carrier: Carrier<'_>, (mint_tx_hash, fee): (&str, u128), now: i64) -> DbResult<Stmt> {
    update(
        carrier,
        "state = 'minted', mint_tx_hash = ?3, fee = ?4, note = NULL, updated_at = ?5",
        "state IN ('attesting', 'minting')",
        vec![mint_tx_hash.into(), fee.to_string().into(), now.into()],
    )
}

/// The statement sending a bridge whose mint reverted without the message being received back
/// to `attesting`, where a new mint is signed.
pub fn mint_failed(carrier: Carrier<'_>, why: &str, now: i64) -> DbResult<Stmt> {
    update(
        carrier,
        "state = 'attesting', note = ?3, updated_at = ?4",
        "state = 'minting'",
        vec![why.into(), now.into()],
    )
}

/// Records why a bridge waits (shown with its payments' settlement, or its float move).
pub async fn note(db: &Db, carrier: Carrier<'_>, why: &str, now: i64) -> DbResult<()> {
    let statement = update(
        carrier,
        "note = ?3, updated_at = ?4",
        "state IN ('burning', 'attesting', 'minting')",
        vec![why.into(), now.into()],
    )?;
    super::batch(db, vec![statement]).await
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
