//! Deposit watches (one per deposit address given out, with its quote and how far its chain was
//! read) and the chain transfers seen to them.

use payrail_evm::{Address, Token, TxHash};
use rust_decimal::Decimal;
use serde::Deserialize;
use shared_types::ids::{InstitutionId, Scoped};
use shared_types::time::UnixTime;
use shared_types::RawStatus;

use super::ledger::When;
use super::{all, run, stmt, Db, DbResult, Returning, Stmt, MONEY_IN_D1};

/// What a transfer seen to a watched address is to its session (`chain_transfers.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TransferKind {
    /// The quoted asset with a value: it counts toward the payment.
    Payment,
    /// The quoted asset with no value (or none readable): recorded, never credited (address
    /// poisoning sends these).
    NoValue,
    /// Another contract's transfer: recorded for review, never credited.
    UnexpectedToken,
}

impl TransferKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            TransferKind::Payment => "payment",
            TransferKind::NoValue => "no_value",
            TransferKind::UnexpectedToken => "unexpected_token",
        }
    }
}

/// A watch to create, in the batch that gives the address to its session.
pub struct NewWatch<'a> {
    /// The deposit address (any case; stored lower case).
    pub address: &'a str,
    /// The BIP32 index it was derived at.
    pub derivation_index: i64,
    /// Its session.
    pub session_id: &'a str,
    /// The session's institution.
    pub institution_id: InstitutionId,
    /// Network name.
    pub network: &'a str,
    /// Asset code.
    pub asset: &'a str,
    /// Token contract (any case; stored lower case).
    pub token: Token,
    /// Token decimals.
    pub decimals: u32,
    /// The quoted amount, decimal text.
    pub crypto_amount: &'a str,
    /// The same in base units.
    pub base_units: &'a str,
    /// Order currency per unit of the asset, decimal text.
    pub rate: &'a str,
    /// Where the rate came from.
    pub rate_source: &'a str,
    /// The newest block when quoted: logs are read from it.
    pub from_block: u64,
    /// Unix seconds.
    pub now: i64,
    /// Watched until then.
    pub watch_until: i64,
}

/// The watch row, for the batch that stores its session (or the session's new way to pay).
pub fn insert(w: &NewWatch<'_>) -> DbResult<Stmt> {
    let block = i64::try_from(w.from_block).unwrap_or(i64::MAX);
    stmt(
        "INSERT INTO deposit_watches (address, session_id, transaction_id, network, asset, token, \
         decimals, crypto_amount, base_units, rate, rate_source, quoted_at, from_block, \
         scanned_to, head_block, watch_until, created_at, derivation_index, institution_id) \
         SELECT lower(?1), ?2, s.transaction_id, ?3, ?4, lower(?5), ?6, ?7, ?8, ?9, ?10, ?11, ?12, \
         ?12 - 1, ?12, ?13, ?11, ?14, s.institution_id FROM checkout_sessions s \
         WHERE s.id = ?2 AND s.institution_id = ?15",
        &[
            w.address.into(),
            w.session_id.into(),
            w.network.into(),
            w.asset.into(),
            w.token.into(),
            i64::from(w.decimals).into(),
            w.crypto_amount.into(),
            w.base_units.into(),
            w.rate.into(),
            w.rate_source.into(),
            w.now.into(),
            block.into(),
            w.watch_until.into(),
            w.derivation_index.into(),
            w.institution_id.into(),
        ],
    )
}

/// A watch as the watcher reads it, with its session's state.
#[derive(Debug, Clone, Deserialize)]
pub struct Watch {
    /// Deposit address, lower case.
    pub address: String,
    /// The BIP32 index it was derived at.
    pub derivation_index: i64,
    /// Its session.
    pub session_id: String,
    /// The session's institution.
    pub institution_id: InstitutionId,
    /// Network name.
    pub network: String,
    /// Asset code.
    pub asset: String,
    /// Token contract, lower case.
    pub token: Token,
    /// Token decimals.
    pub decimals: u32,
    /// The quoted amount, decimal text.
    pub crypto_amount: Decimal,
    /// The same in base units.
    pub base_units: String,
    /// Every block up to this one has been read and its transfers stored as final.
    pub scanned_to: i64,
    /// The newest block at the last check.
    pub head_block: i64,
    /// Why the last check could not read the node.
    pub node_error: Option<String>,
    /// The last check that read the chain, Unix seconds.
    pub read_at: i64,
    /// When the last check was taken (by the cron or a poll), Unix seconds: [`claim`] takes the
    /// next one only a gap after it.
    pub checked_at: i64,
    /// The checkout's end, Unix seconds.
    pub expires_at: i64,
    /// The payment's status.
    pub raw_status: RawStatus,
    /// The payment.
    pub transaction_id: i64,
}

const WATCH: &str = "SELECT w.address, w.derivation_index, w.session_id, w.institution_id, \
                     w.network, w.asset, w.token, w.decimals, w.crypto_amount, w.base_units, \
                     w.scanned_to, w.head_block, w.node_error, w.read_at, w.checked_at, s.expires_at, \
                     CASE WHEN t.screening = 'held' THEN 'held' ELSE t.raw_status END AS raw_status, \
                     w.transaction_id \
                     FROM deposit_watches w JOIN checkout_sessions s ON s.id = w.session_id \
                     AND s.institution_id = w.institution_id \
                     JOIN transactions t ON t.id = w.transaction_id \
                     AND t.institution_id = w.institution_id";

/// How long after a checkout's end its addresses must have been read before the end is
/// decided (an underpayment credited, or the checkout expired): time for a transfer sent at the
/// last second to be in a block that was read.
pub const END_GRACE_SECONDS: i64 = 60;

/// Seconds between the cron's checks of a watch whose payment is pending, expired within the
/// hour (late money is likeliest then), or anything else (credited or long expired: only extra
/// transfers to record).
pub const SWEEP_GAPS: [i64; 3] = [5, 60, 1800];

/// The gap between the cron's checks of `watch` (see [`SWEEP_GAPS`]).
pub fn sweep_gap(watch: &Watch, now: i64) -> i64 {
    match watch.raw_status {
        RawStatus::Pending => SWEEP_GAPS[0],
        RawStatus::Expired if watch.expires_at > now - 3600 => SWEEP_GAPS[1],
        _ => SWEEP_GAPS[2],
    }
}

/// How much longer than [`SWEEP_GAPS`] an object's token watch waits for the cron's check: the
/// watcher's pass reads every token transfer of the network each run and checks the watches it
/// went to at once, so this check only catches up what a pass could not route (the node failed
/// it, or the run's calls ran out). The coin's watches are read as before: a payment in it
/// leaves no log.
pub const PASS_SLACK_SECONDS: i64 = 300;

/// The open watches due a cron check: pending payments first, then recently expired ones, then
/// the rest, each oldest check first; at most `limit`. In D1, only institutions whose money is
/// there ([`super::MONEY_IN_D1`]); in an object, its token watches [`PASS_SLACK_SECONDS`] later.
pub async fn due(db: &Db, now: i64, limit: i64) -> DbResult<Vec<Watch>> {
    all(
        db,
        &if db.is_object() {
            format!(
                "{WATCH} WHERE w.watch_until > ?1 AND w.checked_at < CASE \
                 WHEN t.raw_status = 'pending' AND t.screening IS NULL THEN ?1 - ?2 \
                 WHEN t.raw_status = 'expired' AND s.expires_at > ?1 - 3600 THEN ?1 - ?3 \
                 ELSE ?1 - ?4 END - CASE WHEN w.token = 'native' THEN 0 ELSE ?6 END \
                 ORDER BY CASE WHEN t.raw_status = 'pending' AND t.screening IS NULL THEN 0 \
                 WHEN t.raw_status = 'expired' AND s.expires_at > ?1 - 3600 THEN 1 ELSE 2 END, \
                 w.checked_at LIMIT ?5"
            )
        } else {
            format!(
                "{WATCH} WHERE w.watch_until > ?1 AND w.checked_at < CASE \
                 WHEN t.raw_status = 'pending' AND t.screening IS NULL THEN ?1 - ?2 \
                 WHEN t.raw_status = 'expired' AND s.expires_at > ?1 - 3600 THEN ?1 - ?3 \
                 ELSE ?1 - ?4 END AND w.{MONEY_IN_D1} \
                 ORDER BY CASE WHEN t.raw_status = 'pending' AND t.screening IS NULL THEN 0 \
                 WHEN t.raw_status = 'expired' AND s.expires_at > ?1 - 3600 THEN 1 ELSE 2 END, \
                 w.checked_at LIMIT ?5"
            )
        },
        &[
            now.into(),
            SWEEP_GAPS[0].into(),
            SWEEP_GAPS[1].into(),
            SWEEP_GAPS[2].into(),
            limit.into(),
            PASS_SLACK_SECONDS.into(),
        ][..if db.is_object() { 6 } else { 5 }],
    )
    .await
}

/// `institution_id`'s open watches of those of `addresses` (lower case) on `network`: the
/// watches the watcher's pass found money for.
pub async fn open_at(
    db: &Db,
    institution_id: InstitutionId,
    network: &str,
    addresses: &[&str],
    now: i64,
) -> DbResult<Vec<Watch>> {
    if addresses.is_empty() {
        return Ok(Vec::new());
    }
    all(
        db,
        &format!(
            "{WATCH} WHERE w.institution_id = ?1 AND w.network = ?2 AND w.watch_until > ?3 \
             AND w.address IN (SELECT value FROM json_each(?4))"
        ),
        &[
            institution_id.into(),
            network.into(),
            now.into(),
            serde_json::to_string(addresses).unwrap_or_default().into(),
        ],
    )
    .await
}

/// Every watch of a session (of `institution_id`), oldest first.
pub async fn of_session(
    db: &Db,
    institution_id: InstitutionId,
    session_id: &str,
) -> DbResult<Vec<Watch>> {
    all(
        db,
        &format!(
            "{WATCH} WHERE w.session_id = ?1 AND w.institution_id = ?2 \
             ORDER BY w.created_at, w.address"
        ),
        &[session_id.into(), institution_id.into()],
    )
    .await
}

/// [`of_session`] as a statement of a batch.
pub fn of_session_in_batch(session_id: &str) -> DbResult<Returning<Watch>> {
    stmt(
        &format!("{WATCH} WHERE w.session_id = ?1 ORDER BY w.created_at, w.address"),
        &[session_id.into()],
    )
    .map(Returning::new)
}

/// Takes the watch's next check, unless it was checked after `checked_before` (by a
/// concurrent poll or the cron). (Two checks may still overlap when one outlasts the gap:
/// [`record`] then keeps only the first to finish.)
pub async fn claim(db: &Db, watch: &Watch, checked_before: i64, now: i64) -> DbResult<bool> {
    run(
        db,
        "UPDATE deposit_watches SET checked_at = ?3 WHERE address = ?1 AND institution_id = ?4 \
         AND checked_at < ?2",
        &[
            watch.address.as_str().into(),
            checked_before.into(),
            now.into(),
            watch.institution_id.into(),
        ],
    )
    .await
    .map(|changed| changed == 1)
}

/// Records a check that found nothing new to read (the node is not past what was read): its
/// head, and that it answered.
pub async fn touch(db: &Db, watch: &Watch, head: u64, now: i64) -> DbResult<()> {
    run(
        db,
        "UPDATE deposit_watches SET head_block = ?2, node_error = NULL, read_at = ?3 \
         WHERE address = ?1 AND institution_id = ?4",
        &[
            watch.address.as_str().into(),
            i64::try_from(head).unwrap_or(i64::MAX).into(),
            now.into(),
            watch.institution_id.into(),
        ],
    )
    .await
    .map(drop)
}

/// SQL, true when the watch `w` was paid on chain: a confirmed transfer to its address counted
/// as a payment. A payment the sandbox simulated on a watched checkout has none, so the
/// treasury never settles or refunds money that never arrived.
pub const CREDITED_ON_CHAIN: &str = "EXISTS (SELECT 1 FROM chain_transfers ct \
     WHERE ct.address = w.address AND ct.institution_id = w.institution_id \
     AND ct.confirmed = 1 AND ct.kind = 'payment')";

/// Records that the node could not be read (the text never holds its URL).
pub async fn failed(db: &Db, watch: &Watch, error: &str) -> DbResult<()> {
    run(
        db,
        "UPDATE deposit_watches SET node_error = ?2 WHERE address = ?1 AND institution_id = ?3",
        &[
            watch.address.as_str().into(),
            error.into(),
            watch.institution_id.into(),
        ],
    )
    .await
    .map(drop)
}

/// One transfer as the watcher found it.
pub struct SeenTransfer<'a> {
    /// Transaction hash, lower case.
    pub tx_hash: &'a str,
    /// Log index.
    pub log_index: u64,
    /// Token contract, lower case.
    pub token: Token,
    /// Base units, decimal text (`None`: beyond 128 bits).
    pub amount: Option<String>,
    /// Its block.
    pub block_number: u64,
    /// At the confirmation depth.
    pub confirmed: bool,
    /// What the transfer is to its session.
    pub kind: TransferKind,
    /// Its block came after the checkout's end.
    pub after_expiry: bool,
    /// Who sent it, lower case (`None`: ether from inside a contract call).
    pub sender: Option<&'a str>,
}

/// The books' condition that a check of `watch` applies: the watch is still where it found it.
pub fn unchanged(watch: &Watch) -> When {
    When::holds(
        "(SELECT scanned_to FROM deposit_watches WHERE address = ?1 AND institution_id = ?3) = ?2",
        vec![
            watch.address.as_str().into(),
            watch.scanned_to.into(),
            watch.institution_id.into(),
        ],
    )
}

/// The statements that store one check of `watch`, which read blocks `read.0..=read.1`: the
/// unconfirmed transfers it found there replace the ones stored there before (a transfer
/// reorged away disappears), confirmed ones are kept for good, and the watch moves on to
/// `scanned_to` and `head`; it counts as read now (`read_at`, which the checkout's end waits
/// for) only when the check was `caught_up`: it read up to the node's head and recorded all it
/// found. One batch, in which every statement applies only if the watch is
/// still where this check found it: of two overlapping checks, the later to finish writes
/// nothing.
pub fn record(
    watch: &Watch,
    seen: &[SeenTransfer<'_>],
    read: (u64, u64),
    (scanned_to, head): (u64, u64),
    caught_up: bool,
    now: i64,
) -> DbResult<Vec<Stmt>> {
    let block = |b: u64| i64::try_from(b).unwrap_or(i64::MAX);
    // The institution is ?5 in every statement below.
    let unchanged =
        "(SELECT scanned_to FROM deposit_watches WHERE address = ?1 AND institution_id = ?5) = ?4";
    let mut statements = vec![stmt(
        &format!(
            "DELETE FROM chain_transfers WHERE address = ?1 AND institution_id = ?5 \
             AND confirmed = 0 AND block_number BETWEEN ?2 AND ?3 AND {unchanged}"
        ),
        &[
            watch.address.as_str().into(),
            block(read.0).into(),
            block(read.1).into(),
            watch.scanned_to.into(),
            watch.institution_id.into(),
        ],
    )?];
    for t in seen {
        statements.push(stmt(
            &format!(
                "INSERT INTO chain_transfers (network, tx_hash, log_index, address, session_id, \
                 token, amount, block_number, confirmed, kind, after_expiry, seen_at, \
                 institution_id, sender) \
                 SELECT ?13, ?2, ?3, ?1, ?14, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?5, ?15 \
                 WHERE {unchanged} \
                 ON CONFLICT (network, tx_hash, log_index, address) DO UPDATE SET \
                 confirmed = max(confirmed, excluded.confirmed), \
                 block_number = excluded.block_number"
            ),
            &[
                watch.address.as_str().into(),
                t.tx_hash.into(),
                block(t.log_index).into(),
                watch.scanned_to.into(),
                watch.institution_id.into(),
                t.token.into(),
                t.amount.clone().into(),
                block(t.block_number).into(),
                i64::from(t.confirmed).into(),
                t.kind.as_str().into(),
                i64::from(t.after_expiry).into(),
                now.into(),
                watch.network.as_str().into(),
                watch.session_id.as_str().into(),
                t.sender.into(),
            ],
        )?);
    }
    statements.push(stmt(
        "UPDATE deposit_watches SET scanned_to = max(scanned_to, ?2), \
         head_block = max(head_block, ?3), node_error = NULL, \
         read_at = CASE WHEN ?6 THEN ?5 ELSE read_at END \
         WHERE address = ?1 AND institution_id = ?7 AND scanned_to = ?4",
        &[
            watch.address.as_str().into(),
            block(scanned_to).into(),
            block(head).into(),
            watch.scanned_to.into(),
            now.into(),
            i64::from(caught_up).into(),
            watch.institution_id.into(),
        ],
    )?);
    Ok(statements)
}

/// Most final payments to one address read at once; beyond it the address is not credited
/// from its logs (the cross-check would not be complete).
pub const MAX_CONFIRMED_PAYMENTS: i64 = 10_000;

/// A payment to a watched address stored as final.
#[derive(Debug, Clone, Deserialize)]
pub struct ConfirmedPayment {
    /// Transaction hash.
    pub tx_hash: String,
    /// Log index.
    pub log_index: i64,
    /// Base units, decimal text.
    pub amount: String,
}

/// Every payment stored as final to `address` (at most [`MAX_CONFIRMED_PAYMENTS`]; more is an
/// error).
pub async fn confirmed_payments(db: &Db, watch: &Watch) -> DbResult<Vec<ConfirmedPayment>> {
    let rows: Vec<ConfirmedPayment> = all(
        db,
        "SELECT tx_hash, log_index, amount FROM chain_transfers \
         WHERE address = ?1 AND institution_id = ?3 AND confirmed = 1 AND kind = 'payment' \
         AND amount IS NOT NULL LIMIT ?2",
        &[
            watch.address.as_str().into(),
            (MAX_CONFIRMED_PAYMENTS + 1).into(),
            watch.institution_id.into(),
        ],
    )
    .await?;
    if rows.len() > usize::try_from(MAX_CONFIRMED_PAYMENTS).unwrap_or(usize::MAX) {
        return Err(super::DbError::bad_row(format!(
            "more than {MAX_CONFIRMED_PAYMENTS} final payments to one address"
        )));
    }
    Ok(rows)
}

/// A stored transfer.
#[derive(Debug, Clone, Deserialize)]
pub struct StoredTransfer {
    /// Transaction hash.
    pub tx_hash: TxHash,
    /// Log index.
    pub log_index: i64,
    /// The watched address.
    pub address: Address,
    /// What moved.
    pub token: Token,
    /// Base units, decimal text.
    pub amount: Option<String>,
    /// Its block.
    pub block_number: i64,
    /// Once final.
    #[serde(deserialize_with = "super::flag")]
    pub confirmed: bool,
    /// What the transfer is to its session.
    pub kind: TransferKind,
    /// In a block after the checkout's end.
    #[serde(deserialize_with = "super::flag")]
    pub after_expiry: bool,
    /// For a late payment: the rate it was valued at (order currency per unit of the asset),
    /// once read.
    #[serde(default)]
    pub rate: Option<Decimal>,
    /// Where that rate came from.
    #[serde(default)]
    pub rate_source: Option<String>,
    /// Who sent it, lower case (`None`: ether from inside a contract call, or seen before
    /// senders were kept).
    #[serde(default)]
    pub sender: Option<String>,
}

/// Records the rate a late payment transfer was valued at: only once (a
/// valuation already recorded stays), and only on a final payment. Whether it wrote.
pub async fn set_rate(
    db: &Db,
    Scoped {
        institution: institution_id,
        id: network,
    }: Scoped<&str>,
    transfer: &StoredTransfer,
    rate: Decimal,
    source: &str,
) -> DbResult<bool> {
    run(
        db,
        "UPDATE chain_transfers SET rate = ?5, rate_source = ?6 WHERE network = ?1 \
         AND tx_hash = ?2 AND log_index = ?3 AND address = ?4 AND rate IS NULL \
         AND confirmed = 1 AND kind = 'payment' AND after_expiry = 1 AND institution_id = ?7",
        &[
            network.into(),
            transfer.tx_hash.to_string().into(),
            transfer.log_index.into(),
            transfer.address.lower().into(),
            rate.to_string().into(),
            source.into(),
            institution_id.into(),
        ],
    )
    .await
    .map(|changed| changed == 1)
}

/// A deposit address given out for a transaction, with its quote and watch state.
#[derive(Debug, Clone, Deserialize)]
pub struct Deposit {
    /// Deposit address.
    pub address: Address,
    /// Network name.
    pub network: String,
    /// Asset code.
    pub asset: String,
    /// What it is paid in.
    pub token: Token,
    /// Token decimals.
    pub decimals: u32,
    /// The quoted amount, decimal text.
    pub crypto_amount: String,
    /// Order currency per unit of the asset.
    pub rate: String,
    /// Where the rate came from.
    pub rate_source: String,
    /// When quoted.
    pub quoted_at: UnixTime,
    /// The newest block at the last check.
    pub head_block: i64,
    /// Why the last check could not read the node.
    pub node_error: Option<String>,
}

/// The senders (lower case) of the payments confirmed at deposit `address` of
/// `institution_id`, each once, those the chain names (at most 100).
pub async fn senders_at(
    db: &Db,
    institution_id: InstitutionId,
    address: &str,
) -> DbResult<Vec<String>> {
    super::strings(
        db,
        "SELECT DISTINCT sender FROM chain_transfers WHERE institution_id = ?1 \
         AND address = ?2 AND kind = 'payment' AND confirmed = 1 AND sender IS NOT NULL \
         ORDER BY sender LIMIT 100",
        &[institution_id.into(), address.into()],
    )
    .await
}

/// The deposit addresses given out for transaction `id`, oldest first.
pub async fn deposits_of_transaction(
    db: &Db,
    institution_id: InstitutionId,
    id: i64,
) -> DbResult<Vec<Deposit>> {
    all(
        db,
        "SELECT address, network, asset, token, decimals, crypto_amount, rate, rate_source, \
         quoted_at, head_block, node_error FROM deposit_watches WHERE transaction_id = ?1 \
         AND institution_id = ?2 ORDER BY created_at, address",
        &[id.into(), institution_id.into()],
    )
    .await
}

/// Every transfer seen to the deposit addresses of transaction `id`, in chain order.
pub async fn transfers_of_transaction(
    db: &Db,
    institution_id: InstitutionId,
    id: i64,
) -> DbResult<Vec<StoredTransfer>> {
    all(
        db,
        "SELECT c.tx_hash, c.log_index, c.address, c.token, c.amount, c.block_number, \
         c.confirmed, c.kind, c.after_expiry, c.rate, c.rate_source FROM chain_transfers c \
         JOIN deposit_watches w ON w.address = c.address AND w.institution_id = c.institution_id \
         WHERE w.transaction_id = ?1 AND w.institution_id = ?2 AND c.institution_id = ?2 \
         ORDER BY c.block_number, c.log_index",
        &[id.into(), institution_id.into()],
    )
    .await
}

/// Every transfer seen for checkout `session_id`, in chain order, as a statement of the status
/// poll's batch, which names only the checkout (its institution is read in the same batch).
pub fn transfers_of_session_in_batch(session_id: &str) -> DbResult<Returning<StoredTransfer>> {
    stmt(
        "SELECT tx_hash, log_index, address, token, amount, block_number, confirmed, kind, \
         after_expiry, rate, rate_source, sender FROM chain_transfers WHERE session_id = ?1 \
         ORDER BY block_number, log_index",
        &[session_id.into()],
    )
    .map(Returning::new)
}

/// Every transfer seen for a session, in chain order, as a statement of a batch.
pub fn transfers_of_session(
    institution_id: InstitutionId,
    session_id: &str,
) -> DbResult<Returning<StoredTransfer>> {
    stmt(
        "SELECT tx_hash, log_index, address, token, amount, block_number, confirmed, kind, \
         after_expiry, rate, rate_source, sender FROM chain_transfers \
         WHERE session_id = ?1 AND institution_id = ?2 \
         ORDER BY block_number, log_index",
        &[session_id.into(), institution_id.into()],
    )
    .map(Returning::new)
}
