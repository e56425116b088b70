//! Merchants' top-ups: `topup_addresses` (one per merchant and network), `topup_watches` (one
//! per address and asset, with how far its chain was read), `topup_transfers` (what was seen
//! arriving there) and `topup_reviews` (the review of each top-up its sender's screening held,
//! opened with the transfer, decided once), written only here. See migrations 0018 and 0039.

use payrail_evm::Token;
use serde::{Deserialize, Serialize};
use shared_types::ids::{InstitutionId, Scoped};

use super::ledger::When;
use super::screenings::Decision;
use super::{all, first, run, stmt, Db, DbResult, Stmt, Value, MONEY_IN_D1};

/// A top-up address to store, in the batch that also creates its watches.
pub struct NewAddress<'a> {
    /// The address (any case; stored lower case).
    pub address: &'a str,
    /// The BIP32 index it was derived at.
    pub derivation_index: i64,
    /// Its merchant.
    pub merchant_id: i64,
    /// The merchant's institution.
    pub institution_id: InstitutionId,
    /// Network name.
    pub network: &'a str,
    /// The newest block when it was given out.
    pub from_block: u64,
    /// Who asked for it.
    pub created_by: &'a str,
    /// Unix seconds.
    pub now: i64,
}

/// An asset a top-up address is watched for.
pub struct WatchedAsset<'a> {
    /// Token contract (any case; stored lower case) or `native`.
    pub token: Token,
    /// Its symbol.
    pub asset: &'a str,
    /// Its decimals.
    pub decimals: u32,
}

/// The statement storing a new top-up address; it inserts nothing when the merchant already
/// has one on the network (a concurrent request made it first).
pub fn insert_address(a: &NewAddress<'_>) -> DbResult<Stmt> {
    stmt(
        "INSERT INTO topup_addresses (address, derivation_index, merchant_id, institution_id, \
         network, from_block, created_by, created_at) \
         VALUES (lower(?1), ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
         ON CONFLICT DO NOTHING",
        &[
            a.address.into(),
            a.derivation_index.into(),
            a.merchant_id.into(),
            a.institution_id.into(),
            a.network.into(),
            i64::try_from(a.from_block).unwrap_or(i64::MAX).into(),
            a.created_by.into(),
            a.now.into(),
        ],
    )
}

/// The statements that watch `merchant_id`'s top-up address on `network` for each of `assets`
/// it is not watched for yet (from the block the address was given out at): nothing when it has
/// no address there.
pub fn watch_assets(
    (
        Scoped {
            institution: institution_id,
            id: merchant_id,
        },
        network,
    ): (Scoped<i64>, &str),
    assets: &[WatchedAsset<'_>],
    now: i64,
) -> DbResult<Vec<Stmt>> {
    assets
        .iter()
        .map(|w| {
            stmt(
                "INSERT INTO topup_watches (address, token, network, asset, decimals, from_block, \
                 scanned_to, head_block, created_at, institution_id) \
                 SELECT a.address, lower(?3), a.network, ?4, ?5, a.from_block, a.from_block - 1, \
                 a.from_block, ?6, a.institution_id FROM topup_addresses a \
                 WHERE a.merchant_id = ?1 AND a.network = ?2 AND a.institution_id = ?7 \
                 ON CONFLICT (address, token) DO NOTHING",
                &[
                    merchant_id.into(),
                    network.into(),
                    w.token.into(),
                    w.asset.into(),
                    i64::from(w.decimals).into(),
                    now.into(),
                    institution_id.into(),
                ],
            )
        })
        .collect()
}

/// A merchant's top-up address.
#[derive(Debug, Clone, Deserialize)]
pub struct TopupAddress {
    /// Lower case.
    pub address: String,
    /// Network name.
    pub network: String,
    /// Who asked for it.
    pub created_by: String,
    /// Unix seconds.
    pub created_at: i64,
}

/// The top-up addresses of `merchant_id` (of `institution_id`), by network.
pub async fn addresses_of(
    db: &Db,
    institution_id: InstitutionId,
    merchant_id: i64,
) -> DbResult<Vec<TopupAddress>> {
    all(
        db,
        "SELECT address, network, created_by, created_at FROM topup_addresses \
         WHERE merchant_id = ?1 AND institution_id = ?2 ORDER BY network",
        &[merchant_id.into(), institution_id.into()],
    )
    .await
}

/// The top-up address of `merchant_id` on `network`, if it has one.
pub async fn address_on(
    db: &Db,
    Scoped {
        institution: institution_id,
        id: merchant_id,
    }: Scoped<i64>,
    network: &str,
) -> DbResult<Option<TopupAddress>> {
    first(
        db,
        "SELECT address, network, created_by, created_at FROM topup_addresses \
         WHERE merchant_id = ?1 AND network = ?2 AND institution_id = ?3",
        &[merchant_id.into(), network.into(), institution_id.into()],
    )
    .await
}

/// A top-up watch as the watcher reads it, with its address's merchant.
#[derive(Debug, Clone, Deserialize)]
pub struct TopupWatch {
    /// The top-up address, lower case.
    pub address: String,
    /// Token contract, lower case, or `native`.
    pub token: Token,
    /// Network name.
    pub network: String,
    /// Asset symbol.
    pub asset: String,
    /// Decimals.
    pub decimals: u32,
    /// Every block up to this one has been read and its transfers stored (and posted) as final.
    pub scanned_to: i64,
    /// The newest block at the last check.
    pub head_block: i64,
    /// Why the last check could not read the node.
    pub node_error: Option<String>,
    /// The merchant it tops up.
    pub merchant_id: i64,
    /// Its institution.
    pub institution_id: InstitutionId,
    /// What its confirmed transfers add up to (base units, decimal text); `None` for a watch
    /// not totalled yet (from before migration 0028).
    pub confirmed_units: Option<String>,
}

impl TopupWatch {
    /// Its condition's value: where it was read to and its total (see [`unchanged`]).
    fn state(&self) -> String {
        format!(
            "{}/{}",
            self.scanned_to,
            self.confirmed_units.as_deref().unwrap_or("")
        )
    }
}

/// Most confirmed transfers a watch not yet totalled is totalled from in one check.
pub const MOST_TOTALLED: i64 = 10_000;

const WATCH: &str = "SELECT w.address, w.token, w.network, w.asset, w.decimals, w.scanned_to, \
                     w.head_block, w.node_error, a.merchant_id, a.institution_id, \
                     w.confirmed_units \
                     FROM topup_watches w JOIN topup_addresses a ON a.address = w.address \
                     AND a.institution_id = w.institution_id";

/// The watches of active merchants that nobody checked since `checked_before`, the least
/// recently checked first; at most `limit`. (A suspended or disabled merchant's address is not
/// read: it is caught up from where it stopped once the merchant is active again.)
pub async fn due(db: &Db, checked_before: i64, limit: i64) -> DbResult<Vec<TopupWatch>> {
    all(
        db,
        &format!(
            "{WATCH} JOIN merchants m ON m.id = a.merchant_id \
             WHERE w.checked_at < ?1 AND m.status = 'active' AND w.{MONEY_IN_D1} \
             ORDER BY w.checked_at LIMIT ?2"
        ),
        &[checked_before.into(), limit.into()],
    )
    .await
}

/// [`due`] in the object holding `institution`'s money, whose merchants are the directory's:
/// every watch nobody checked since `checked_before` (a token's
/// [`super::watches::PASS_SLACK_SECONDS`] earlier: the watcher's pass checks those money came
/// to at once), the least recently checked first; the caller keeps those of active merchants.
pub async fn due_held(
    db: &Db,
    institution: InstitutionId,
    checked_before: i64,
    limit: i64,
) -> DbResult<Vec<TopupWatch>> {
    all(
        db,
        &format!(
            "{WATCH} WHERE w.checked_at < ?1 - CASE WHEN w.token = 'native' THEN 0 ELSE ?4 END \
             AND w.institution_id = ?3 ORDER BY w.checked_at LIMIT ?2"
        ),
        &[
            checked_before.into(),
            limit.into(),
            institution.into(),
            super::watches::PASS_SLACK_SECONDS.into(),
        ],
    )
    .await
}

/// `institution`'s top-up watches of those of `addresses` (lower case) on `network`: the ones
/// the watcher's pass found money for.
pub async fn open_at(
    db: &Db,
    institution: InstitutionId,
    network: &str,
    addresses: &[&str],
) -> DbResult<Vec<TopupWatch>> {
    if addresses.is_empty() {
        return Ok(Vec::new());
    }
    all(
        db,
        &format!(
            "{WATCH} WHERE w.institution_id = ?1 AND w.network = ?2 \
             AND w.address IN (SELECT value FROM json_each(?3))"
        ),
        &[
            institution.into(),
            network.into(),
            serde_json::to_string(addresses).unwrap_or_default().into(),
        ],
    )
    .await
}

/// Every watch of `merchant_id`'s top-up addresses.
pub async fn watches_of(
    db: &Db,
    institution_id: InstitutionId,
    merchant_id: i64,
) -> DbResult<Vec<TopupWatch>> {
    all(
        db,
        &format!(
            "{WATCH} WHERE a.merchant_id = ?1 AND w.institution_id = ?2 \
             ORDER BY w.network, w.asset"
        ),
        &[merchant_id.into(), institution_id.into()],
    )
    .await
}

/// Takes the watch's next check, unless it was checked after `checked_before` (two overlapping
/// checks are kept apart by [`record`]).
pub async fn claim(db: &Db, watch: &TopupWatch, checked_before: i64, now: i64) -> DbResult<bool> {
    run(
        db,
        "UPDATE topup_watches SET checked_at = ?4 WHERE address = ?1 AND token = ?2 \
         AND institution_id = ?5 AND checked_at < ?3",
        &[
            watch.address.as_str().into(),
            watch.token.into(),
            checked_before.into(),
            now.into(),
            watch.institution_id.into(),
        ],
    )
    .await
    .map(|changed| changed == 1)
}

/// Records a check that found nothing new to read: its head, and that the node answered.
pub async fn touch(db: &Db, watch: &TopupWatch, head: u64, now: i64) -> DbResult<()> {
    run(
        db,
        "UPDATE topup_watches SET head_block = max(head_block, ?3), node_error = NULL, \
         read_at = ?4 WHERE address = ?1 AND token = ?2 AND institution_id = ?5",
        &[
            watch.address.as_str().into(),
            watch.token.into(),
            i64::try_from(head).unwrap_or(i64::MAX).into(),
            now.into(),
            watch.institution_id.into(),
        ],
    )
    .await
    .map(drop)
}

/// Records that the node could not be read (the text never holds its URL).
pub async fn failed(db: &Db, watch: &TopupWatch, error: &str) -> DbResult<()> {
    run(
        db,
        "UPDATE topup_watches SET node_error = ?3 WHERE address = ?1 AND token = ?2 \
         AND institution_id = ?4",
        &[
            watch.address.as_str().into(),
            watch.token.into(),
            error.into(),
            watch.institution_id.into(),
        ],
    )
    .await
    .map(drop)
}

/// One transfer to a top-up address as the watcher found it.
pub struct SeenTopup<'a> {
    /// Transaction hash (or block hash), lower case.
    pub tx_hash: &'a str,
    /// Log index (transaction index for coin).
    pub log_index: u64,
    /// Base units.
    pub units: u128,
    /// Its block.
    pub block_number: u64,
    /// At the confirmation depth.
    pub confirmed: bool,
    /// Who sent it (lower case); `None` for coin sent from inside a contract call.
    pub sender: Option<&'a str>,
    /// Held by its screening (confirmed, its sender listed or not named): the review to open.
    pub hold: Option<Hold>,
}

/// The review a held top-up opens.
#[derive(Debug, Clone)]
pub struct Hold {
    /// Its id (`tpr_…`).
    pub review_id: String,
    /// Why it is held, in words an admin reads.
    pub reason: String,
}

/// Whether the watch is still where a check found it: read to the same block, with the same
/// confirmed total (`?1` address, `?2` token, `?3` [`TopupWatch::state`]).
const UNCHANGED: &str = "(SELECT scanned_to || '/' || COALESCE(confirmed_units, '') \
                         FROM topup_watches WHERE address = ?1 AND token = ?2 \
                         AND institution_id = ?4) = ?3";

/// The condition of everything a check of `watch` writes: the watch is still where the check
/// found it, so of two overlapping checks the later to finish writes nothing (and its total is
/// never added twice).
pub fn unchanged(watch: &TopupWatch) -> When {
    When::holds(UNCHANGED, watch_params(watch))
}

/// The watch's key and state, `?1` to `?4` of every statement of a check: its address, token,
/// state (as [`UNCHANGED`] compares it) and institution.
fn watch_params(watch: &TopupWatch) -> Vec<Value> {
    vec![
        watch.address.as_str().into(),
        watch.token.into(),
        watch.state().into(),
        watch.institution_id.into(),
    ]
}

/// The amounts of `watch`'s confirmed transfers (decimal text), at most [`MOST_TOTALLED`] + 1:
/// what a watch not yet totalled is totalled from.
pub async fn confirmed_amounts(db: &Db, watch: &TopupWatch) -> DbResult<Vec<String>> {
    #[derive(Deserialize)]
    struct Row {
        amount: String,
    }
    let rows: Vec<Row> = all(
        db,
        "SELECT amount FROM topup_transfers WHERE address = ?1 AND token = ?2 \
         AND institution_id = ?4 AND confirmed = 1 LIMIT ?3",
        &[
            watch.address.as_str().into(),
            watch.token.into(),
            (MOST_TOTALLED + 1).into(),
            watch.institution_id.into(),
        ],
    )
    .await?;
    Ok(rows.into_iter().map(|r| r.amount).collect())
}

/// A custody sweep of a top-up address's asset, as the watch counts it.
#[derive(Debug, Clone, Deserialize)]
pub struct SweptFrom {
    /// Base units it moved, decimal text.
    pub units: String,
    /// `sent` (may be mined, not yet final) or `confirmed`.
    pub state: String,
    /// Its block, once final.
    pub block_number: Option<i64>,
}

/// Custody's sweeps of `watch`'s asset from its address that moved (or may have moved) it: the
/// `sent` ones and the `confirmed` ones (a reverted sweep moved nothing), at most
/// [`MOST_TOTALLED`] + 1. The signer stores each before it broadcasts it, and the worker makes
/// it final from its receipt (`money::sweeps`), so this is every unit that ever left the
/// address. (`custody_sweeps` is custody's, not an institution's: the address is the
/// watch's own.)
pub async fn swept_from(db: &Db, watch: &TopupWatch) -> DbResult<Vec<SweptFrom>> {
    all(
        db,
        "SELECT units, state, block_number FROM custody_sweeps WHERE network = ?1 \
         AND from_address = ?2 AND token = ?3 AND kind = 'sweep' AND state <> 'failed' LIMIT ?4",
        &[
            watch.network.as_str().into(),
            watch.address.as_str().into(),
            watch.token.into(),
            (MOST_TOTALLED + 1).into(),
        ],
    )
    .await
}

/// The confirmed transfers stored for `watch` in blocks `from..=to` (a check reads its first
/// blocks again): (hash, log index), at most `limit`.
pub async fn confirmed_in(
    db: &Db,
    watch: &TopupWatch,
    (from, to): (u64, u64),
    limit: i64,
) -> DbResult<Vec<(String, u64)>> {
    #[derive(Deserialize)]
    struct Row {
        tx_hash: String,
        log_index: u64,
    }
    let block = |b: u64| Value::from(i64::try_from(b).unwrap_or(i64::MAX));
    let rows: Vec<Row> = all(
        db,
        "SELECT tx_hash, log_index FROM topup_transfers WHERE address = ?1 AND token = ?2 \
         AND institution_id = ?6 AND confirmed = 1 AND block_number BETWEEN ?3 AND ?4 LIMIT ?5",
        &[
            watch.address.as_str().into(),
            watch.token.into(),
            block(from),
            block(to),
            limit.into(),
            watch.institution_id.into(),
        ],
    )
    .await?;
    Ok(rows.into_iter().map(|r| (r.tx_hash, r.log_index)).collect())
}

/// The statements that store one check of `watch`, which read blocks `read.0..=read.1`: the
/// unconfirmed transfers it found replace those stored there before (one reorged away
/// disappears), confirmed ones are kept for good (a held one with its review, opened once), and
/// (the last statement) the watch moves on
/// to `scanned_to` and `head` with its confirmed transfers adding up to `total`. Each applies
/// only while the watch is where this check found it: of two overlapping checks, the later to
/// finish writes nothing.
pub fn record(
    watch: &TopupWatch,
    seen: &[SeenTopup<'_>],
    read: (u64, u64),
    (scanned_to, head, total): (u64, u64, u128),
    now: i64,
) -> DbResult<Vec<Stmt>> {
    let block = |b: u64| Value::from(i64::try_from(b).unwrap_or(i64::MAX));
    // Every statement takes the watch's key, state and institution as ?1 to ?4.
    let unchanged = UNCHANGED;
    let watch_params = || watch_params(watch);
    let mut params = watch_params();
    params.extend([block(read.0), block(read.1)]);
    let mut statements = vec![stmt(
        &format!(
            "DELETE FROM topup_transfers WHERE address = ?1 AND token = ?2 AND institution_id = ?4 \
             AND confirmed = 0 AND block_number BETWEEN ?5 AND ?6 AND {unchanged}"
        ),
        &params,
    )?];
    for t in seen {
        let mut params = watch_params();
        params.extend([
            watch.network.as_str().into(),
            t.tx_hash.into(),
            block(t.log_index),
            t.units.to_string().into(),
            block(t.block_number),
            i64::from(t.confirmed).into(),
            now.into(),
            t.sender.into(),
            t.hold.as_ref().map(|_| "held").into(),
        ]);
        statements.push(stmt(
            &format!(
                "INSERT INTO topup_transfers (network, tx_hash, log_index, address, token, \
                 amount, block_number, confirmed, seen_at, institution_id, sender, screening) \
                 SELECT ?5, ?6, ?7, ?1, ?2, ?8, ?9, ?10, ?11, ?4, ?12, ?13 WHERE {unchanged} \
                 ON CONFLICT (network, tx_hash, log_index, address, token) DO UPDATE SET \
                 confirmed = max(confirmed, excluded.confirmed), \
                 block_number = excluded.block_number, sender = excluded.sender, \
                 screening = COALESCE(screening, excluded.screening)"
            ),
            &params,
        )?);
        let Some(hold) = t.hold.as_ref().filter(|_| t.confirmed) else {
            continue;
        };
        let mut params = watch_params();
        params.extend([
            hold.review_id.as_str().into(),
            watch.merchant_id.into(),
            watch.network.as_str().into(),
            t.tx_hash.into(),
            block(t.log_index),
            watch.asset.as_str().into(),
            i64::from(watch.decimals).into(),
            t.units.to_string().into(),
            t.sender.into(),
            hold.reason.as_str().into(),
            now.into(),
        ]);
        statements.push(stmt(
            &format!(
                "INSERT INTO topup_reviews (id, institution_id, merchant_id, network, tx_hash, \
                 log_index, address, token, asset, decimals, units, sender, reason, opened_at) \
                 SELECT ?5, ?4, ?6, ?7, ?8, ?9, ?1, ?2, ?10, ?11, ?12, ?13, ?14, ?15 \
                 WHERE {unchanged} \
                 ON CONFLICT (network, tx_hash, log_index, address, token) DO NOTHING"
            ),
            &params,
        )?);
    }
    let mut params = watch_params();
    params.extend([
        block(scanned_to),
        block(head),
        now.into(),
        total.to_string().into(),
    ]);
    statements.push(stmt(
        &format!(
            "UPDATE topup_watches SET scanned_to = max(scanned_to, ?5), \
             head_block = max(head_block, ?6), node_error = NULL, read_at = ?7, \
             confirmed_units = ?8 WHERE address = ?1 AND token = ?2 AND institution_id = ?4 \
             AND {unchanged}"
        ),
        &params,
    )?);
    Ok(statements)
}

/// A transfer seen to a top-up address.
#[derive(Debug, Clone, Deserialize)]
pub struct TopupTransfer {
    /// Transaction hash.
    pub tx_hash: String,
    /// The top-up address.
    pub address: String,
    /// Token contract or `native`.
    pub token: Token,
    /// Base units, decimal text.
    pub amount: String,
    /// Its block.
    pub block_number: i64,
    /// Once final (and credited, unless its screening held it).
    #[serde(deserialize_with = "super::flag")]
    pub confirmed: bool,
    /// `held` by its screening (not credited until released), `released` or `blocked`; `None`
    /// when its sender was clear.
    pub screening: Option<String>,
}

/// The transfers seen to `merchant_id`'s top-up addresses, newest first, at most `limit`.
pub async fn transfers_of(
    db: &Db,
    Scoped {
        institution: institution_id,
        id: merchant_id,
    }: Scoped<i64>,
    limit: i64,
) -> DbResult<Vec<TopupTransfer>> {
    all(
        db,
        "SELECT t.tx_hash, t.address, t.token, t.amount, t.block_number, t.confirmed, \
         t.screening FROM topup_transfers t \
         JOIN topup_addresses a ON a.address = t.address AND a.institution_id = t.institution_id \
         WHERE a.merchant_id = ?1 AND t.institution_id = ?3 \
         ORDER BY t.seen_at DESC, t.block_number DESC, t.log_index DESC LIMIT ?2",
        &[merchant_id.into(), limit.into(), institution_id.into()],
    )
    .await
}

// ---------------------------------------------------------------------------------------------
// Reviews of held top-ups

/// A held top-up's review.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TopupReview {
    /// Its id (`tpr_…`).
    pub id: String,
    /// The merchant the top-up is for.
    pub merchant_id: i64,
    /// The network.
    pub network: String,
    /// The transfer: its transaction and log index (the transaction's index for coin).
    pub tx_hash: String,
    /// Its log index.
    pub log_index: i64,
    /// The merchant's top-up address it reached, lower case.
    pub address: String,
    /// Token contract, or `native`.
    pub token: Token,
    /// The asset's symbol.
    pub asset: String,
    /// Its decimals.
    pub decimals: u32,
    /// Base units held, decimal text.
    pub units: String,
    /// Who sent it; `None` when the chain does not name the sender.
    pub sender: Option<String>,
    /// Why it is held.
    pub reason: String,
    /// When it was opened (Unix seconds).
    pub opened_at: i64,
    /// `released` or `blocked`, once decided.
    pub decision: Option<String>,
    /// The admin's note.
    pub note: Option<String>,
    /// Who decided.
    pub decided_by: Option<String>,
    /// When (Unix seconds).
    pub decided_at: Option<i64>,
}

const TOPUP_REVIEW: &str =
    "SELECT id, merchant_id, network, tx_hash, log_index, address, token, asset, \
     decimals, units, sender, reason, opened_at, decision, note, decided_by, decided_at \
     FROM topup_reviews";

/// The institution's top-up reviews: undecided first (oldest first), then the decided (newest
/// first), at most `limit`.
pub async fn reviews_of(
    db: &Db,
    institution_id: InstitutionId,
    limit: i64,
) -> DbResult<Vec<TopupReview>> {
    all(
        db,
        &format!(
            "{TOPUP_REVIEW} WHERE institution_id = ?1 ORDER BY decision IS NOT NULL, \
             CASE WHEN decision IS NULL THEN opened_at ELSE -decided_at END, id LIMIT ?2"
        ),
        &[institution_id.into(), limit.into()],
    )
    .await
}

/// Review `id` of the institution, if there is one.
pub async fn review(db: &Db, review: Scoped<&str>) -> DbResult<Option<TopupReview>> {
    first(
        db,
        &format!("{TOPUP_REVIEW} WHERE id = ?1 AND institution_id = ?2"),
        &[review.id.into(), review.institution.into()],
    )
    .await
}

/// The institution's top-up reviews decided from `from` to before `to` (Unix seconds).
pub async fn reviews_decided_between(
    db: &Db,
    institution_id: InstitutionId,
    (from, to): (i64, i64),
) -> DbResult<Vec<TopupReview>> {
    all(
        db,
        &format!(
            "{TOPUP_REVIEW} WHERE institution_id = ?1 AND decided_at >= ?2 AND decided_at < ?3 \
             ORDER BY decided_at, id"
        ),
        &[institution_id.into(), from.into(), to.into()],
    )
    .await
}

/// Marks the review of the transfer (`network`, `tx_hash`, `log_index`) to `address` in
/// `token` told to the admins at `now`: whether this call did (the first caller tells them, so
/// two checks that both stored it tell once).
pub async fn review_told(
    db: &Db,
    institution_id: InstitutionId,
    (network, tx_hash, log_index): (&str, &str, u64),
    (address, token): (&str, Token),
    now: i64,
) -> DbResult<bool> {
    Ok(run(
        db,
        "UPDATE topup_reviews SET told_at = ?7 WHERE network = ?1 AND tx_hash = ?2 \
         AND log_index = ?3 AND address = ?4 AND token = ?5 AND institution_id = ?6 \
         AND told_at IS NULL",
        &[
            network.into(),
            tx_hash.into(),
            i64::try_from(log_index).unwrap_or(i64::MAX).into(),
            address.into(),
            token.into(),
            institution_id.into(),
            now.into(),
        ],
    )
    .await?
        == 1)
}

/// The condition every statement of a decision on review `id` is written under: it is still
/// undecided (so of two decisions at once, the first to commit is the only one written).
pub fn review_undecided(review: Scoped<&str>) -> When {
    When::holds(
        "EXISTS (SELECT 1 FROM topup_reviews WHERE id = ?1 AND institution_id = ?2 \
         AND decision IS NULL)",
        vec![review.id.into(), review.institution.into()],
    )
}

/// The statements recording `decision` on review `r` at `now`: the transfer's screening state,
/// then (last, as it ends what the others are conditioned on) the decision itself, each only
/// while the review is undecided.
pub fn decide_review(
    r: &TopupReview,
    institution_id: InstitutionId,
    (decision, now): (&Decision<'_>, i64),
) -> DbResult<Vec<Stmt>> {
    let state = if decision.release {
        "released"
    } else {
        "blocked"
    };
    let undecided = "EXISTS (SELECT 1 FROM topup_reviews WHERE id = ?1 AND institution_id = ?2 \
                     AND decision IS NULL)";
    Ok(vec![
        stmt(
            &format!(
                "UPDATE topup_transfers SET screening = ?3 WHERE network = ?4 AND tx_hash = ?5 \
                 AND log_index = ?6 AND address = ?7 AND token = ?8 AND institution_id = ?2 \
                 AND screening = 'held' AND {undecided}"
            ),
            &[
                r.id.as_str().into(),
                institution_id.into(),
                state.into(),
                r.network.as_str().into(),
                r.tx_hash.as_str().into(),
                r.log_index.into(),
                r.address.as_str().into(),
                r.token.into(),
            ],
        )?,
        stmt(
            "UPDATE topup_reviews SET decision = ?3, note = ?4, decided_by = ?5, \
             decided_at = ?6 WHERE id = ?1 AND institution_id = ?2 AND decision IS NULL",
            &[
                r.id.as_str().into(),
                institution_id.into(),
                state.into(),
                decision.note.into(),
                decision.by.into(),
                now.into(),
            ],
        )?,
    ])
}
