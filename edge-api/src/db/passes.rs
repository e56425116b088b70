//! The watcher's pass over each network (`network_passes`, `held_deposits`; docs/SCALING.md, "The
//! watcher by the directory's index"): how far each network's token transfers were read, who
//! owns the addresses they went to (the directory's index of custody's addresses), and the money
//! that came to custody and that no store credits, held for the operator.

use serde::{Deserialize, Serialize};
use shared_types::ids::InstitutionId;

use super::{all, first, flag, stmt, Db, DbResult, Stmt};

/// Every block of `network` up to the one answered was read by a pass with the network's depth
/// on it; `None` before its first pass.
pub async fn scanned_to(db: &Db, network: &str) -> DbResult<Option<i64>> {
    #[derive(Deserialize)]
    struct Row {
        scanned_to: i64,
    }
    let row: Option<Row> = first(
        db,
        "SELECT scanned_to FROM network_passes WHERE network = ?1",
        &[network.into()],
    )
    .await?;
    Ok(row.map(|r| r.scanned_to))
}

/// Records a pass of `network` that started from `started` (what [`scanned_to`] answered) and
/// read every block up to `scanned_to` as final, the node's head then `head`: only if no other
/// pass recorded since (a racing run that read the same blocks records nothing).
pub fn record(
    network: &str,
    started: Option<i64>,
    scanned_to: i64,
    head: i64,
    now: i64,
) -> DbResult<Stmt> {
    match started {
        None => stmt(
            "INSERT INTO network_passes (network, scanned_to, head_block, passed_at) \
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT (network) DO NOTHING",
            &[network.into(), scanned_to.into(), head.into(), now.into()],
        ),
        Some(started) => stmt(
            "UPDATE network_passes SET scanned_to = ?2, head_block = ?3, passed_at = ?4, \
             error = NULL, error_at = NULL WHERE network = ?1 AND scanned_to = ?5",
            &[
                network.into(),
                scanned_to.into(),
                head.into(),
                now.into(),
                started.into(),
            ],
        ),
    }
}

/// Records why a pass of `network` could not read its node or route what it read (a network
/// never passed has no row: its error is only logged).
pub fn failed(network: &str, error: &str, now: i64) -> DbResult<Stmt> {
    let error: String = error.chars().take(500).collect();
    stmt(
        "UPDATE network_passes SET error = ?2, error_at = ?3 WHERE network = ?1",
        &[network.into(), error.into(), now.into()],
    )
}

/// Who owns one of custody's addresses, as the directory's index says.
#[derive(Debug, Clone, Deserialize)]
pub struct Owner {
    /// The address, lower case.
    pub address: String,
    /// Whether it was given out (below its family's counter); a free one was only derived ahead.
    #[serde(deserialize_with = "flag")]
    pub given: bool,
    /// The institution it was given to (none for an index given before the index was kept).
    pub institution_id: Option<InstitutionId>,
    /// What for: `checkout` or `topup`.
    pub purpose: Option<String>,
    /// Where that institution's money is: `d1` or `object`.
    pub store: Option<String>,
}

/// The owners of those of `addresses` (lower case) that are custody's, in one statement.
pub async fn owners(db: &Db, addresses: &[&str]) -> DbResult<Vec<Owner>> {
    if addresses.is_empty() {
        return Ok(Vec::new());
    }
    all(
        db,
        "SELECT c.address, c.derivation_index < d.next AS given, c.institution_id, c.purpose, \
         i.store FROM custody_addresses c JOIN deposit_indexes d ON d.family = c.family \
         LEFT JOIN institutions i ON i.id = c.institution_id \
         WHERE c.address IN (SELECT value FROM json_each(?1))",
        &[serde_json::to_string(addresses).unwrap_or_default().into()],
    )
    .await
}

/// Those of `addresses` (lower case) that D1 watches on `network` now.
pub async fn watched_in_d1(
    db: &Db,
    network: &str,
    addresses: &[&str],
    now: i64,
) -> DbResult<Vec<String>> {
    if addresses.is_empty() {
        return Ok(Vec::new());
    }
    super::strings(
        db,
        "SELECT DISTINCT address FROM deposit_watches WHERE network = ?1 AND watch_until > ?2 \
         AND address IN (SELECT value FROM json_each(?3))",
        &[
            network.into(),
            now.into(),
            serde_json::to_string(addresses).unwrap_or_default().into(),
        ],
    )
    .await
}

/// Why money held in custody is credited by no store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldReason {
    /// To an address derived ahead and never given out.
    NotGiven,
    /// To an address given out, which its store watches on no open checkout on this network.
    NotWatched,
}

impl HeldReason {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            HeldReason::NotGiven => "not_given",
            HeldReason::NotWatched => "not_watched",
        }
    }
}

/// A held deposit, as stored and as the operator's list shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeldDeposit {
    /// The network's name.
    pub network: String,
    /// The transaction's hash, lower case.
    pub tx_hash: String,
    /// The log's index in its block.
    pub log_index: i64,
    /// Custody's address it came to, lower case.
    pub address: String,
    /// The token contract, lower case.
    pub token: String,
    /// Who sent it, lower case.
    pub sender: Option<String>,
    /// Base units, decimal text (none when the log carries no readable amount).
    pub amount_units: Option<String>,
    /// Its block.
    pub block_number: i64,
    /// Why no store credits it.
    pub reason: HeldReason,
    /// Whose address it is (`not_watched`).
    pub institution_id: Option<InstitutionId>,
    /// When the pass found it final, Unix seconds.
    pub seen_at: i64,
}

/// Records `held`, unless it is already (one row per log).
pub fn hold(held: &HeldDeposit) -> DbResult<Stmt> {
    stmt(
        "INSERT INTO held_deposits (network, tx_hash, log_index, address, token, sender, \
         amount_units, block_number, reason, institution_id, seen_at) \
         VALUES (?1, lower(?2), ?3, lower(?4), lower(?5), lower(?6), ?7, ?8, ?9, ?10, ?11) \
         ON CONFLICT DO NOTHING",
        &[
            held.network.as_str().into(),
            held.tx_hash.as_str().into(),
            held.log_index.into(),
            held.address.as_str().into(),
            held.token.as_str().into(),
            held.sender
                .as_deref()
                .map_or(super::Value::Null, Into::into),
            held.amount_units
                .as_deref()
                .map_or(super::Value::Null, Into::into),
            held.block_number.into(),
            held.reason.as_str().into(),
            held.institution_id.map_or(super::Value::Null, Into::into),
            held.seen_at.into(),
        ],
    )
}

/// The held deposits found before `before` (Unix seconds; none: every one), newest first, at
/// most `limit`.
pub async fn list(db: &Db, before: Option<i64>, limit: i64) -> DbResult<Vec<HeldDeposit>> {
    all(
        db,
        "SELECT network, tx_hash, log_index, address, token, sender, amount_units, block_number, \
         reason, institution_id, seen_at FROM held_deposits \
         WHERE ?1 IS NULL OR seen_at < ?1 \
         ORDER BY seen_at DESC, network, tx_hash, log_index LIMIT ?2",
        &[
            before.map_or(super::Value::Null, super::Value::Int),
            limit.into(),
        ],
    )
    .await
}
