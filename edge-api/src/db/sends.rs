//! Every transaction the treasury signed, as signed (the raw bytes, to broadcast again), for a
//! settlement, a refund or a move of its float: the `chain_sends` table, written only here.
//! What a transaction pays is its purpose's own table (`settlements`, `refunds`,
//! `float_moves`); the statements that move both are committed together by `money::sends`. See
//! migrations 0011 and 0043.

use payrail_evm::Token;
use payrail_evm::{Address, TxHash};
use serde::{Deserialize, Serialize};
use shared_types::ids::InstitutionId;
use shared_types::time::UnixTime;
use shared_types::SendState;

use super::ledger::When;
use super::{all, first, run, stmt, Db, DbResult, Stmt, Value};

/// What a signed transaction pays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose<'a> {
    /// A settlement, by id.
    Settlement(&'a str),
    /// A refund, by id.
    Refund(&'a str),
    /// A move of the treasury's float between networks (`db::float_moves`), by id.
    FloatMove(&'a str),
}

impl Purpose<'_> {
    /// The `(settlement_id, refund_id, float_move_id)` columns.
    fn ids(self) -> (Value, Value, Value) {
        match self {
            Purpose::Settlement(id) => (id.into(), Value::Null, Value::Null),
            Purpose::Refund(id) => (Value::Null, id.into(), Value::Null),
            Purpose::FloatMove(id) => (Value::Null, Value::Null, id.into()),
        }
    }
}

/// Which leg of a settlement across networks a transaction is (see `db::bridges`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leg {
    /// The burn on the network the payments were made on.
    Burn,
    /// The mint to the merchant's wallet on the network it chose.
    Mint,
}

impl Leg {
    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Leg::Burn => "burn",
            Leg::Mint => "mint",
        }
    }
}

/// A contract call a transaction makes instead of paying a wallet: the contract, and the call
/// data (`0x` hex).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call<'a> {
    /// The contract called.
    pub to: &'a str,
    /// The call data.
    pub data: &'a str,
}

/// A signed transaction to store.
pub struct NewSend<'a> {
    /// Its id.
    pub id: &'a str,
    /// What it pays.
    pub purpose: Purpose<'a>,
    /// Network.
    pub network: &'a str,
    /// The treasury address, lower case.
    pub sender: &'a str,
    /// Nonce.
    pub nonce: u64,
    /// Gas limit.
    pub gas_limit: u64,
    /// Wei per gas.
    pub gas_price: u128,
    /// The most L1 data fee it pays besides its gas, in wei (0 where there is none).
    pub l1_fee: u128,
    /// Where the gas's rate came from.
    pub rate_source: &'a str,
    /// Base units transferred.
    pub units: u128,
    /// What a settlement pays less than its payments' net (the merchant's debt netted).
    pub netted: u128,
    /// Hash.
    pub tx_hash: &'a str,
    /// Raw signed bytes, `0x` hex.
    pub raw: &'a str,
    /// The newest block now.
    pub head: u64,
    /// Unix seconds.
    pub now: i64,
    /// A contract call (a bridge's leg) rather than a payment to a wallet, and which leg.
    pub call: Option<(Call<'a>, Leg)>,
}

fn big(n: u64) -> Value {
    i64::try_from(n).unwrap_or(i64::MAX).into()
}

/// The statement storing a signed transaction, live: its nonce unique among those that can be
/// mined (a second one with the nonce fails its batch), and, for a refund, only if the refund
/// has no other transaction out or mined (it changes no row then, and nothing may be sent).
pub fn insert(s: &NewSend<'_>) -> DbResult<Stmt> {
    insert_if(s, "1")
}

/// [`insert`], only if the statement just before it in its batch changed a row (the guard of
/// what it pays: a bridge's move to `minting`).
pub fn insert_after_change(s: &NewSend<'_>) -> DbResult<Stmt> {
    insert_if(s, "changes() = 1")
}

/// [`insert`], only if `condition` (SQL without parameters) holds too.
fn insert_if(s: &NewSend<'_>, condition: &str) -> DbResult<Stmt> {
    let (settlement, refund, float_move) = s.purpose.ids();
    stmt(
        &format!(
            "INSERT INTO chain_sends (id, settlement_id, network, sender, nonce, gas_limit, \
             gas_price, rate_source, units, tx_hash, raw, state, sent_block, created_at, \
             updated_at, refund_id, netted, l1_fee, call_to, call_data, leg, float_move_id) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'live', ?12, ?13, ?13, ?14, ?15, \
             ?16, ?17, ?18, ?19, ?20 WHERE NOT EXISTS (SELECT 1 FROM chain_sends WHERE refund_id = ?14 \
             AND state IN ('live', 'confirmed')) AND {condition}"
        ),
        &[
            s.id.into(),
            settlement,
            s.network.into(),
            s.sender.into(),
            big(s.nonce),
            big(s.gas_limit),
            s.gas_price.to_string().into(),
            s.rate_source.into(),
            s.units.to_string().into(),
            s.tx_hash.into(),
            s.raw.into(),
            big(s.head),
            s.now.into(),
            refund,
            s.netted.to_string().into(),
            s.l1_fee.to_string().into(),
            s.call.map(|(c, _)| c.to).into(),
            s.call.map(|(c, _)| c.data).into(),
            s.call.map(|(_, leg)| leg.as_str()).into(),
            float_move,
        ],
    )
}

/// The statements that replace the live transaction `old_id` with `send` (the same nonce, a
/// higher price), in this order: the old one retired, then the new one stored, only if that
/// retired it (`changes() = 1`). Of two replacements of one transaction, the second stores
/// nothing (a settlement's also fails its batch on the nonce), and what is not stored may not be
/// sent: the caller broadcasts only when the insert changed a row.
pub fn replace(old_id: &str, send: &NewSend<'_>) -> DbResult<[Stmt; 2]> {
    Ok([
        stmt(
            "UPDATE chain_sends SET state = 'replaced', updated_at = ?2 \
             WHERE id = ?1 AND state = 'live'",
            &[old_id.into(), send.now.into()],
        )?,
        insert_if(send, "changes() = 1")?,
    ])
}

/// The books' condition that the transaction `send_id` is in `state` (`live`: just stored).
pub fn in_state(send_id: &str, state: SendState) -> When {
    When::holds(
        "(SELECT state FROM chain_sends WHERE id = ?1) = ?2",
        vec![send_id.into(), state.as_str().into()],
    )
}

/// The next nonce by what the treasury has signed on `network`: one past the highest that was or
/// may still be mined.
pub async fn next_nonce(db: &Db, network: &str, sender: &str) -> DbResult<u64> {
    #[derive(Deserialize)]
    struct Row {
        next: Option<i64>,
    }
    let row: Option<Row> = first(
        db,
        "SELECT max(nonce) + 1 AS next FROM chain_sends WHERE network = ?1 AND sender = ?2 \
         AND state IN ('live', 'confirmed', 'failed')",
        &[network.into(), sender.into()],
    )
    .await?;
    Ok(row
        .and_then(|r| r.next)
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0))
}

/// A transaction the treasury signed, with what following it needs.
#[derive(Debug, Clone, Deserialize)]
pub struct Outgoing {
    /// Its id.
    pub id: String,
    /// Its settlement, when it pays one.
    pub settlement_id: Option<String>,
    /// Its refund, when it pays one.
    pub refund_id: Option<String>,
    /// Its float move, when it is one's leg.
    #[serde(default)]
    pub float_move_id: Option<String>,
    /// The institution of its settlement or refund (what it reports back is keyed by it); 0 for
    /// a float move's leg, which is the platform's.
    pub institution_id: InstitutionId,
    /// Network.
    pub network: String,
    /// Treasury address.
    pub sender: String,
    /// Nonce.
    pub nonce: u64,
    /// Gas limit.
    pub gas_limit: u64,
    /// Wei per gas (decimal text).
    pub gas_price: String,
    /// The most L1 data fee it pays besides its gas, in wei (decimal text).
    pub l1_fee: String,
    /// Base units transferred (decimal text).
    pub units: String,
    /// Hash.
    pub tx_hash: String,
    /// Raw signed bytes.
    pub raw: String,
    /// The newest block when it was last broadcast.
    pub sent_block: u64,
    /// The token contract or `native`.
    pub token: Token,
    /// The address it pays (the merchant's wallet, or the customer's refund address).
    pub wallet: Address,
    /// A settlement held in its institution's object: that institution.
    #[serde(default)]
    pub held_by: Option<InstitutionId>,
    /// What a settlement pays less than its payments' net (decimal text).
    pub netted: String,
    /// Where its gas's rate came from.
    pub rate_source: String,
    /// The contract it calls, when it is a bridge's leg.
    #[serde(default)]
    pub call_to: Option<String>,
    /// Its call data then (`0x` hex).
    #[serde(default)]
    pub call_data: Option<String>,
    /// Which leg of a settlement across networks it is (`burn` or `mint`).
    #[serde(default)]
    pub leg: Option<String>,
}

impl Outgoing {
    /// What it pays. The table's check makes exactly one of the three ids set.
    pub fn purpose(&self) -> Purpose<'_> {
        match (&self.settlement_id, &self.refund_id, &self.float_move_id) {
            (Some(id), ..) => Purpose::Settlement(id),
            (None, Some(id), _) => Purpose::Refund(id),
            (None, None, Some(id)) => Purpose::FloatMove(id),
            (None, None, None) => Purpose::Settlement(""),
        }
    }

    /// The bridge's leg it is, if it is one.
    pub fn leg(&self) -> Option<Leg> {
        match self.leg.as_deref() {
            Some("burn") => Some(Leg::Burn),
            Some("mint") => Some(Leg::Mint),
            _ => None,
        }
    }

    /// The contract call it makes, if it makes one.
    pub fn call(&self) -> Option<Call<'_>> {
        Some(Call {
            to: self.call_to.as_deref()?,
            data: self.call_data.as_deref()?,
        })
    }
}

const OUTGOING_FROM: &str = "SELECT c.id, c.settlement_id, c.refund_id, c.float_move_id, \
     c.network, c.sender, c.nonce, c.gas_limit, c.gas_price, c.l1_fee, c.units, c.tx_hash, c.raw, \
     c.sent_block, c.netted, c.rate_source, c.call_to, c.call_data, c.leg, \
     COALESCE(s.token, r.token, f.token) AS token, \
     COALESCE(s.wallet, r.to_address, f.mint_recipient) AS wallet, \
     COALESCE(s.institution_id, r.institution_id, 0) AS institution_id, s.held_by \
     FROM chain_sends c LEFT JOIN settlements s ON s.id = c.settlement_id \
     LEFT JOIN refunds r ON r.id = c.refund_id \
     LEFT JOIN float_moves f ON f.id = c.float_move_id";

/// Of the send ids `ids`, those stored.
pub async fn stored(db: &Db, ids: &[&str]) -> DbResult<Vec<String>> {
    #[derive(Deserialize)]
    struct Row {
        id: String,
    }
    let rows: Vec<Row> = all(
        db,
        "SELECT id FROM chain_sends WHERE id IN (SELECT value FROM json_each(?1))",
        &[serde_json::to_string(ids).unwrap_or_default().into()],
    )
    .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// A settlement's transaction final on chain.
#[derive(Debug, Clone, Deserialize)]
pub struct Final {
    /// The settlement.
    pub settlement_id: String,
    /// `confirmed` or `failed`.
    pub state: String,
    /// Its hash.
    pub tx_hash: String,
    /// Why it failed.
    pub error: Option<String>,
}

/// The transactions final on chain of the settlements `ids` (at most one each: a settlement
/// whose transaction failed sends no other).
pub async fn final_of(db: &Db, ids: &[&str]) -> DbResult<Vec<Final>> {
    all(
        db,
        "SELECT settlement_id, state, tx_hash, error FROM chain_sends \
         WHERE settlement_id IN (SELECT value FROM json_each(?1)) \
         AND state IN ('confirmed', 'failed')",
        &[serde_json::to_string(ids).unwrap_or_default().into()],
    )
    .await
}

/// Every transaction of settlement `id` (its first and its replacements).
pub async fn of_settlement(db: &Db, id: &str) -> DbResult<Vec<String>> {
    #[derive(Deserialize)]
    struct Row {
        id: String,
    }
    let rows: Vec<Row> = all(
        db,
        "SELECT id FROM chain_sends WHERE settlement_id = ?1",
        &[id.into()],
    )
    .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// Every transaction of `carrier` (a settlement or a float move) on `network` (a bridge's leg
/// there, and its replacements), first signed first.
pub async fn legs_on(db: &Db, carrier: Purpose<'_>, network: &str) -> DbResult<Vec<String>> {
    #[derive(Deserialize)]
    struct Row {
        id: String,
    }
    let column = match carrier {
        Purpose::Settlement(_) => "settlement_id",
        Purpose::Refund(_) => "refund_id",
        Purpose::FloatMove(_) => "float_move_id",
    };
    let (Purpose::Settlement(id) | Purpose::Refund(id) | Purpose::FloatMove(id)) = carrier;
    let rows: Vec<Row> = all(
        db,
        &format!(
            "SELECT id FROM chain_sends WHERE {column} = ?1 AND network = ?2 \
             ORDER BY created_at, id"
        ),
        &[id.into(), network.into()],
    )
    .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// Transactions out and not yet at depth, oldest first.
pub async fn live(db: &Db, limit: i64) -> DbResult<Vec<Outgoing>> {
    all(
        db,
        &format!("{OUTGOING_FROM} WHERE c.state = 'live' ORDER BY c.created_at, c.nonce LIMIT ?1"),
        &[limit.into()],
    )
    .await
}

/// The transactions a live one replaced (the same nonce, a lower price): one of them may be
/// the one that is mined.
pub async fn replaced(db: &Db, live: &Outgoing) -> DbResult<Vec<Outgoing>> {
    all(
        db,
        &format!(
            "{OUTGOING_FROM} WHERE c.network = ?1 AND c.sender = ?2 AND c.nonce = ?3 \
             AND c.state = 'replaced'"
        ),
        &[
            live.network.as_str().into(),
            live.sender.as_str().into(),
            big(live.nonce),
        ],
    )
    .await
}

/// What the live transactions of `sender` on `network` will still take from it, per token
/// (`native` for the coin): their units, and for the coin also their most gas.
#[derive(Debug, Clone, Deserialize)]
pub struct InFlight {
    /// The token contract or `native`.
    pub token: Token,
    /// Base units (decimal text).
    pub units: String,
    /// Gas limit.
    pub gas_limit: u64,
    /// Wei per gas (decimal text).
    pub gas_price: String,
    /// The most L1 data fee it pays besides its gas, in wei (decimal text).
    pub l1_fee: String,
    /// Nonce (below the node's count of the sender's mined transactions: mined).
    pub nonce: u64,
}

/// The live transactions' amounts and gas (see [`InFlight`]).
pub async fn in_flight(db: &Db, network: &str, sender: &str) -> DbResult<Vec<InFlight>> {
    all(
        db,
        "SELECT COALESCE(s.token, r.token, f.token) AS token, c.units, c.gas_limit, c.gas_price, \
         c.l1_fee, c.nonce \
         FROM chain_sends c LEFT JOIN settlements s ON s.id = c.settlement_id \
         LEFT JOIN refunds r ON r.id = c.refund_id \
         LEFT JOIN float_moves f ON f.id = c.float_move_id \
         WHERE c.state = 'live' AND c.network = ?1 AND c.sender = ?2",
        &[network.into(), sender.into()],
    )
    .await
}

/// Records a new broadcast of a live transaction (or why it failed).
pub async fn broadcast(
    db: &Db,
    send_id: &str,
    head: u64,
    error: Option<&str>,
    now: i64,
) -> DbResult<()> {
    run(
        db,
        "UPDATE chain_sends SET sent_block = ?2, error = ?3, updated_at = ?4 WHERE id = ?1",
        &[send_id.into(), big(head), error.into(), now.into()],
    )
    .await
    .map(drop)
}

/// Records why a live transaction waits (shown with it), leaving when it was sent alone.
pub async fn note(db: &Db, send_id: &str, why: &str, now: i64) -> DbResult<()> {
    run(
        db,
        "UPDATE chain_sends SET error = ?2, updated_at = ?3 WHERE id = ?1 AND state = 'live'",
        &[send_id.into(), why.into(), now.into()],
    )
    .await
    .map(drop)
}

/// The statements that record `carrier` mined, succeeded and final: it is the one carrying its
/// purpose (a replaced one that was mined after all takes the live one's place).
pub fn confirm(
    carrier: &Outgoing,
    live_id: &str,
    block: u64,
    gas_used: u128,
    now: i64,
) -> DbResult<Vec<Stmt>> {
    Ok(vec![
        stmt(
            "UPDATE chain_sends SET state = 'replaced', updated_at = ?2 \
             WHERE id = ?1 AND state = 'live' AND ?1 <> ?3",
            &[live_id.into(), now.into(), carrier.id.as_str().into()],
        )?,
        stmt(
            "UPDATE chain_sends SET state = 'confirmed', block_number = ?2, gas_used = ?3, \
             error = NULL, updated_at = ?4 WHERE id = ?1 AND state IN ('live', 'replaced')",
            &[
                carrier.id.as_str().into(),
                big(block),
                gas_used.to_string().into(),
                now.into(),
            ],
        )?,
    ])
}

/// The statement that records the live transaction `send_id` mined and reverted in `block`, at
/// the network's depth (its nonce is used for good: nothing else with it can be mined). The
/// purpose's own statement that follows it in the batch runs only if this one changed a row
/// (`changes() = 1`).
pub fn fail(send_id: &str, block: u64, error: &str, now: i64) -> DbResult<Stmt> {
    stmt(
        "UPDATE chain_sends SET state = 'failed', block_number = ?2, error = ?3, updated_at = ?4 \
         WHERE id = ?1 AND state = 'live'",
        &[send_id.into(), big(block), error.into(), now.into()],
    )
}

/// A transaction the treasury signed for a payment's settlement (alone or in a batch), as the
/// portal shows it.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct SendView {
    /// Its hash.
    pub tx_hash: TxHash,
    /// `live` (out, not yet final), `replaced` (by one with the same nonce at a higher price),
    /// `confirmed`, `failed` (reverted), `dropped` (recorded before the final-evidence rule).
    pub state: SendState,
    /// The treasury's nonce.
    pub nonce: i64,
    /// Wei per gas (fixed when signed).
    pub gas_price: String,
    /// Gas limit.
    pub gas_limit: i64,
    /// Gas used, once mined.
    pub gas_used: Option<String>,
    /// Its block, once mined.
    pub block_number: Option<i64>,
    /// Why it failed, or why its last broadcast did, or why it waits.
    pub error: Option<String>,
    /// What the gas was converted to the order currency with.
    pub rate_source: String,
    /// This payment's share of its gas, in the order currency; `None` on a bridge's mint (the
    /// burn's share covers both legs).
    pub gas_fee: Option<String>,
    /// What it pays the merchant for this payment, in the order currency (for a bridge's legs:
    /// the net the mint delivers).
    pub net: String,
    /// The same in the asset's base units.
    pub net_base_units: String,
    /// The merchant wallet it pays.
    pub wallet: Address,
    /// When it was signed.
    pub created_at: UnixTime,
    /// The network it is on.
    pub network: String,
    /// Which leg of a settlement across networks it is (`burn`, `mint`), if it is one.
    pub leg: Option<String>,
}

/// A transaction the treasury signed for a settlement held in an institution's object.
#[derive(Debug, Clone, Deserialize)]
pub struct HeldSend {
    /// The settlement.
    pub settlement_id: String,
    /// Its hash.
    pub tx_hash: TxHash,
    /// Its state.
    pub state: SendState,
    /// Nonce.
    pub nonce: i64,
    /// Wei per gas.
    pub gas_price: String,
    /// Gas limit.
    pub gas_limit: i64,
    /// Gas used, once mined.
    pub gas_used: Option<String>,
    /// Its block, once mined.
    pub block_number: Option<i64>,
    /// Why it failed or waits.
    pub error: Option<String>,
    /// What priced its gas.
    pub rate_source: String,
    /// When it was signed.
    pub created_at: UnixTime,
    /// The network it is on.
    pub network: String,
}

/// The treasury's transactions for the settlements `ids` (as an institution's object names
/// its own), oldest first.
pub async fn of_held_settlements(db: &Db, ids: &[&str]) -> DbResult<Vec<HeldSend>> {
    all(
        db,
        "SELECT c.settlement_id, c.tx_hash, c.state, c.nonce, c.gas_price, c.gas_limit, \
         c.gas_used, c.block_number, c.error, c.rate_source, c.created_at, c.network \
         FROM chain_sends c WHERE c.settlement_id IN (SELECT value FROM json_each(?1)) \
         ORDER BY c.created_at, c.sent_block",
        &[serde_json::to_string(ids).unwrap_or_default().into()],
    )
    .await
}

/// Every transaction signed to settle the payment (of `institution_id`), oldest first: those
/// carrying its share, and for a settlement across networks the mints after its final burn.
pub async fn of_settled_payment(
    db: &Db,
    institution_id: InstitutionId,
    transaction_id: i64,
) -> DbResult<Vec<SendView>> {
    all(
        db,
        "SELECT c.tx_hash, c.state, c.nonce, c.gas_price, c.gas_limit, c.gas_used, \
         c.block_number, c.error, c.rate_source, i.gas_fee, i.net, i.units AS net_base_units, \
         s.wallet, c.created_at, c.network, c.leg, c.sent_block \
         FROM settlement_items i JOIN chain_sends c ON c.id = i.send_id \
         JOIN settlements s ON s.id = c.settlement_id AND s.institution_id = i.institution_id \
         WHERE i.transaction_id = ?1 AND i.institution_id = ?2 \
         UNION ALL \
         SELECT m.tx_hash, m.state, m.nonce, m.gas_price, m.gas_limit, m.gas_used, \
         m.block_number, m.error, m.rate_source, NULL, i.net, i.units, \
         s.wallet, m.created_at, m.network, m.leg, m.sent_block \
         FROM settlement_items i JOIN chain_sends b ON b.id = i.send_id \
         AND b.leg = 'burn' AND b.state = 'confirmed' \
         JOIN chain_sends m ON m.settlement_id = b.settlement_id AND m.leg = 'mint' \
         JOIN settlements s ON s.id = m.settlement_id AND s.institution_id = i.institution_id \
         WHERE i.transaction_id = ?1 AND i.institution_id = ?2 \
         ORDER BY 14, 17",
        &[transaction_id.into(), institution_id.into()],
    )
    .await
}
