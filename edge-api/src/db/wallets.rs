//! Merchants' settlement wallets and the log of every change to them (who, when, old, new): the
//! most attacked field in payments, so nothing about it is ever overwritten without a trace.

use serde::{Deserialize, Serialize};

use super::{all, stmt, Batch, Db, DbResult, Returning, Stmt, Value};

/// A settlement wallet.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Wallet {
    /// Network it is paid out on.
    pub network: String,
    /// External address.
    pub address: String,
    /// Last change.
    pub updated_at: String,
    /// From when settlements use it (a cool-off after every change): Unix seconds, shown as
    /// an RFC 3339 time.
    #[serde(serialize_with = "rfc3339")]
    pub usable_from: i64,
}

/// Serializes Unix seconds as an RFC 3339 time.
pub fn rfc3339<S: serde::Serializer>(unix: &i64, to: S) -> Result<S::Ok, S::Error> {
    let text = shared_types::time::format_unix(*unix)
        .ok_or_else(|| serde::ser::Error::custom("a time out of range"))?;
    to.serialize_str(&text)
}

/// The merchant's wallets, by network.
pub async fn list(db: &Db, merchant_id: i64) -> DbResult<Vec<Wallet>> {
    all(
        db,
        "SELECT network, address, updated_at, usable_from FROM merchant_wallets \
         WHERE merchant_id = ?1 ORDER BY network",
        &[merchant_id.into()],
    )
    .await
}

/// A network where a merchant has a settlement wallet, with the merchant's choice of a network
/// to be paid USDC on (the same on each row).
#[derive(Debug, Deserialize)]
pub struct WalletNetwork {
    /// The network's name.
    pub network: String,
    /// `merchants.usdc_settlement_network`.
    pub usdc_settlement_network: Option<String>,
}

/// Where a merchant can be paid out, as checkout reads it: the networks of its settlement
/// wallets, and the network it chose to be paid USDC on from every network with CCTP (which
/// counts only while it has a wallet there: `chain::methods_for` judges it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Payout {
    /// The networks of its wallets, by name.
    pub networks: Vec<String>,
    /// Its USDC settlement network, if it chose one.
    pub usdc_settlement_network: Option<String>,
}

impl Payout {
    /// From the rows of one of the statements below (no rows: no wallet, and so nothing to be
    /// paid out to, whatever was chosen).
    pub fn from_rows(rows: Vec<WalletNetwork>) -> Payout {
        let usdc_settlement_network = rows.first().and_then(|r| r.usdc_settlement_network.clone());
        Payout {
            networks: rows.into_iter().map(|r| r.network).collect(),
            usdc_settlement_network,
        }
    }

    /// The same without the USDC settlement network: for a merchant of an institution whose
    /// money is held in its object, whose USDC is not settled across yet (docs/CCTP.md).
    pub fn held(self) -> Payout {
        Payout {
            usdc_settlement_network: None,
            ..self
        }
    }
}

/// The columns of a [`WalletNetwork`], over `merchant_wallets w JOIN merchants m`.
const WALLET_NETWORK: &str = "SELECT w.network, m.usdc_settlement_network \
     FROM merchant_wallets w JOIN merchants m ON m.id = w.merchant_id";

/// The networks of the wallets of the merchant with the publishable key `public_key` at `now`
/// (see [`super::merchants::BY_KEY`]), with its USDC settlement network, for checkout's read
/// batch.
pub fn networks_by_key(public_key: &str, now: i64) -> DbResult<Returning<WalletNetwork>> {
    stmt(
        &format!(
            "{WALLET_NETWORK} WHERE w.merchant_id = {} ORDER BY w.network",
            super::merchants::BY_KEY
        ),
        &[public_key.into(), now.into()],
    )
    .map(Returning::new)
}

/// The networks of the wallets of the merchant of checkout session `session_id`, with its USDC
/// settlement network, for the hosted page's read batch.
pub fn networks_of_session(session_id: &str) -> DbResult<Returning<WalletNetwork>> {
    stmt(
        &format!(
            "{WALLET_NETWORK} WHERE w.merchant_id = \
             (SELECT merchant_id FROM checkout_sessions WHERE id = ?1) ORDER BY w.network"
        ),
        &[session_id.into()],
    )
    .map(Returning::new)
}

/// [`networks_of_session`] for a checkout held in its institution's object: its merchant from
/// the directory's index entry.
pub fn networks_of_indexed(session_id: &str) -> DbResult<Returning<WalletNetwork>> {
    stmt(
        &format!(
            "{WALLET_NETWORK} WHERE w.merchant_id = \
             (SELECT merchant_id FROM checkout_index WHERE session_id = ?1) ORDER BY w.network"
        ),
        &[session_id.into()],
    )
    .map(Returning::new)
}

/// Where merchant `merchant_id` can be paid out, in one statement.
pub async fn payout(db: &Db, merchant_id: i64) -> DbResult<Payout> {
    let rows: Vec<WalletNetwork> = all(
        db,
        &format!("{WALLET_NETWORK} WHERE w.merchant_id = ?1 ORDER BY w.network"),
        &[merchant_id.into()],
    )
    .await?;
    Ok(Payout::from_rows(rows))
}

/// The wallets of several merchants (at most 100), as (merchant id, wallet): one query for a
/// whole page of merchants.
pub async fn of_merchants(db: &Db, ids: &[i64]) -> DbResult<Vec<(i64, Wallet)>> {
    #[derive(Deserialize)]
    struct Row {
        merchant_id: i64,
        network: String,
        address: String,
        updated_at: String,
        usable_from: i64,
    }
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let placeholders: Vec<String> = (1..=ids.len()).map(|n| format!("?{n}")).collect();
    let params: Vec<Value> = ids.iter().map(|id| Value::from(*id)).collect();
    let rows: Vec<Row> = all(
        db,
        &format!(
            "SELECT merchant_id, network, address, updated_at, usable_from \
             FROM merchant_wallets WHERE merchant_id IN ({}) ORDER BY merchant_id, network",
            placeholders.join(", ")
        ),
        &params,
    )
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            (
                r.merchant_id,
                Wallet {
                    network: r.network,
                    address: r.address,
                    updated_at: r.updated_at,
                    usable_from: r.usable_from,
                },
            )
        })
        .collect())
}

/// One recorded change.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Change {
    /// Network.
    pub network: String,
    /// The address before (`None`: there was none).
    pub old_address: Option<String>,
    /// The address after (`None`: removed).
    pub new_address: Option<String>,
    /// The admin who changed it.
    pub changed_by: String,
    /// When.
    pub changed_at: String,
}

/// The merchant's wallet changes, newest first (at most 100).
pub async fn changes(db: &Db, merchant_id: i64) -> DbResult<Vec<Change>> {
    all(
        db,
        "SELECT network, old_address, new_address, changed_by, changed_at FROM wallet_changes \
         WHERE merchant_id = ?1 ORDER BY id DESC LIMIT 100",
        &[merchant_id.into()],
    )
    .await
}

/// Sets (`Some`) or removes (`None`) the wallet of `network`, only if it is still `old` (what
/// the caller read), usable by settlements from `usable_from` (Unix seconds), and records the
/// change in the same batch, with the new address's screening decision (`screened`). False if it
/// changed meanwhile.
pub async fn replace(
    db: &Db,
    merchant_id: i64,
    network: &str,
    (old, new): (Option<&str>, Option<&str>),
    (changed_by, now_text, usable_from): (&str, &str, i64),
    screened: Option<Stmt>,
) -> DbResult<bool> {
    let write = match (old, new) {
        (None, Some(new)) => stmt(
            "INSERT INTO merchant_wallets (merchant_id, network, address, updated_at, \
             usable_from) VALUES (?1, ?2, ?3, ?4, ?5) \
             ON CONFLICT (merchant_id, network) DO NOTHING",
            &[
                merchant_id.into(),
                network.into(),
                new.into(),
                now_text.into(),
                usable_from.into(),
            ],
        )?,
        (Some(old), Some(new)) => stmt(
            "UPDATE merchant_wallets SET address = ?4, updated_at = ?5, usable_from = ?6 \
             WHERE merchant_id = ?1 AND network = ?2 AND address = ?3",
            &[
                merchant_id.into(),
                network.into(),
                old.into(),
                new.into(),
                now_text.into(),
                usable_from.into(),
            ],
        )?,
        (Some(old), None) => stmt(
            "DELETE FROM merchant_wallets WHERE merchant_id = ?1 AND network = ?2 AND address = ?3",
            &[merchant_id.into(), network.into(), old.into()],
        )?,
        (None, None) => return Ok(true),
    };
    let record = stmt(
        "INSERT INTO wallet_changes (merchant_id, network, old_address, new_address, \
         changed_by, changed_at) SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE changes() = 1",
        &[
            merchant_id.into(),
            network.into(),
            old.into(),
            new.into(),
            changed_by.into(),
            now_text.into(),
        ],
    )?;
    let mut batch = Batch::new();
    let write = batch.push(write);
    batch.push(record);
    if let Some(screened) = screened {
        batch.push(screened);
    }
    Ok(batch.run(db).await?.changed(write))
}
