//! Settlements (transfers of payments' net to merchant wallets), the claims that keep a payment
//! in one of them, every transaction the treasury signed (for them and for refunds), what each
//! payment was charged, and why a payment is held. See migration 0011.

use serde::Deserialize;
use worker::{D1Database, D1PreparedStatement};

use super::watches::CREDITED_ON_CHAIN;
use super::{all, bind, first, run, DbResult, Value};

/// A payment held in custody that no settlement carries yet, with what settling it needs.
#[derive(Debug, Clone, Deserialize)]
pub struct Due {
    /// The transaction.
    pub transaction_id: i64,
    /// Its institution.
    pub institution_id: i64,
    /// Its merchant.
    pub merchant_id: i64,
    /// Order currency.
    pub currency: String,
    /// What the customer paid, in the order currency (decimal text).
    pub gross: String,
    /// What was asked, in the order currency (decimal text).
    pub expected: String,
    /// The asset it was paid in.
    pub asset: String,
    /// The network it was paid on.
    pub network: String,
    /// The token contract (lower-case hex) or `native`.
    pub token: String,
    /// The asset's decimals.
    pub decimals: u32,
    /// The amount of the asset the order was quoted at (decimal text).
    pub crypto_amount: String,
    /// The institution's PSP fee, in basis points.
    pub psp_fee_bps: u32,
    /// When it was last found unable to settle (Unix seconds; 0: never): the least recently
    /// held go first, so held payments cannot crowd out the rest.
    pub held_at: i64,
}

const DUE_COLUMNS: &str = "SELECT t.id AS transaction_id, t.institution_id, t.merchant_id, \
     t.currency, t.amount_gross AS gross, t.amount_expected AS expected, t.asset, \
     t.network_payment AS network, w.token, w.decimals, w.crypto_amount, i.psp_fee_bps, \
     COALESCE((SELECT h.updated_at FROM settlement_holds h WHERE h.transaction_id = t.id), 0) \
     AS held_at \
     FROM transactions t \
     JOIN deposit_watches w ON w.transaction_id = t.id AND w.network = t.network_payment \
          AND w.asset = t.asset \
     JOIN institutions i ON i.id = t.institution_id";

/// Payments paid on a watched chain, held in custody (`succeeded`), in no settlement and with
/// no refund on its way, oldest first.
pub async fn due(db: &D1Database, limit: i64) -> DbResult<Vec<Due>> {
    all(
        db,
        &format!(
            "{DUE_COLUMNS} WHERE t.raw_status = 'succeeded' AND t.amount_gross IS NOT NULL \
             AND {CREDITED_ON_CHAIN} \
             AND NOT EXISTS (SELECT 1 FROM settlement_claims c WHERE c.transaction_id = t.id) \
             AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.transaction_id = t.id \
                             AND r.state IN ('sending', 'confirmed')) \
             ORDER BY t.id LIMIT ?1"
        ),
        &[limit.into()],
    )
    .await
}

/// The payments a settlement carries that are still held in custody (to price a replacement).
pub async fn claimed(db: &D1Database, settlement_id: &str) -> DbResult<Vec<Due>> {
    all(
        db,
        &format!(
            "{DUE_COLUMNS} JOIN settlement_claims c ON c.transaction_id = t.id \
             WHERE c.settlement_id = ?1 AND t.raw_status = 'succeeded' AND {CREDITED_ON_CHAIN} \
             ORDER BY t.id"
        ),
        &[settlement_id.into()],
    )
    .await
}

/// The (merchant, network, asset) groups with a settlement out: the next one for a group waits
/// for it (its gas was estimated on the state the earlier transfer changes).
pub async fn sending_groups(db: &D1Database) -> DbResult<Vec<(i64, String, String)>> {
    #[derive(Deserialize)]
    struct Row {
        merchant_id: i64,
        network: String,
        asset: String,
    }
    let rows: Vec<Row> = all(
        db,
        "SELECT DISTINCT merchant_id, network, asset FROM settlements WHERE state = 'sending'",
        &[],
    )
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.merchant_id, r.network, r.asset))
        .collect())
}

/// The next nonce by what the treasury has signed on `network`: one past the highest that was or
/// may still be mined.
pub async fn next_nonce(db: &D1Database, network: &str, sender: &str) -> DbResult<u64> {
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

/// A signed transaction to store.
pub struct NewSend<'a> {
    /// Its id.
    pub id: &'a str,
    /// What it pays: a settlement or a refund.
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
    /// Where the gas's rate came from.
    pub rate_source: &'a str,
    /// Base units transferred.
    pub units: u128,
    /// Hash.
    pub tx_hash: &'a str,
    /// Raw signed bytes, `0x` hex.
    pub raw: &'a str,
    /// The newest block now.
    pub head: u64,
    /// Unix seconds.
    pub now: i64,
}

/// One payment's part of a transfer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Item {
    /// The payment.
    pub transaction_id: i64,
    /// PSP fee, order currency (decimal text).
    pub psp_fee: String,
    /// Its share of the gas, order currency (decimal text).
    pub gas_fee: String,
    /// What it pays the merchant, order currency (decimal text).
    pub net: String,
    /// The same in the asset's base units (decimal text).
    pub units: String,
}

/// A settlement to start.
pub struct NewSettlement<'a> {
    /// Its id.
    pub id: &'a str,
    /// Institution.
    pub institution_id: i64,
    /// Merchant.
    pub merchant_id: i64,
    /// Network.
    pub network: &'a str,
    /// Asset.
    pub asset: &'a str,
    /// Token contract or `native`.
    pub token: &'a str,
    /// The merchant's wallet, lower case.
    pub wallet: &'a str,
}

fn big(n: u64) -> Value {
    i64::try_from(n).unwrap_or(i64::MAX).into()
}

/// What a signed transaction pays.
#[derive(Debug, Clone, Copy)]
pub enum Purpose<'a> {
    /// A settlement, by id.
    Settlement(&'a str),
    /// A refund, by id.
    Refund(&'a str),
}

impl Purpose<'_> {
    fn ids(self) -> (Value, Value) {
        match self {
            Purpose::Settlement(id) => (id.into(), Value::Null),
            Purpose::Refund(id) => (Value::Null, id.into()),
        }
    }
}

/// The statement storing a signed transaction, live: its nonce unique among those that can be
/// mined (a second one with the nonce fails its batch), and, for a refund, only if the refund
/// has no other transaction out or mined (it changes no row then, and nothing may be sent).
pub fn send_statement(db: &D1Database, s: &NewSend<'_>) -> DbResult<D1PreparedStatement> {
    let (settlement, refund) = s.purpose.ids();
    bind(
        db,
        "INSERT INTO chain_sends (id, settlement_id, network, sender, nonce, gas_limit, gas_price, \
         rate_source, units, tx_hash, raw, state, sent_block, created_at, updated_at, refund_id) \
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'live', ?12, ?13, ?13, ?14 \
         WHERE NOT EXISTS (SELECT 1 FROM chain_sends WHERE refund_id = ?14 \
                           AND state IN ('live', 'confirmed'))",
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
        ],
    )
}

fn item_statements(
    db: &D1Database,
    send_id: &str,
    items: &[Item],
) -> DbResult<Vec<D1PreparedStatement>> {
    items
        .iter()
        .map(|i| {
            bind(
                db,
                "INSERT INTO settlement_items (send_id, transaction_id, psp_fee, gas_fee, net, \
                 units) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                &[
                    send_id.into(),
                    i.transaction_id.into(),
                    i.psp_fee.as_str().into(),
                    i.gas_fee.as_str().into(),
                    i.net.as_str().into(),
                    i.units.as_str().into(),
                ],
            )
        })
        .collect()
}

/// The batch that starts a settlement: the settlement, a claim on each payment, the signed
/// transaction (its nonce unique among those that can be mined) and each payment's part. It
/// fails whole if any payment is no longer held in custody or is already claimed (a claim's
/// settlement id is then NULL, or its key taken), or if the nonce was taken meanwhile: then
/// nothing was stored and nothing may be sent.
pub fn start(
    db: &D1Database,
    settlement: &NewSettlement<'_>,
    send: &NewSend<'_>,
    items: &[Item],
) -> DbResult<Vec<D1PreparedStatement>> {
    let mut statements = vec![bind(
        db,
        "INSERT INTO settlements (id, institution_id, merchant_id, network, asset, token, wallet, \
         state, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'sending', ?8, ?8)",
        &[
            settlement.id.into(),
            settlement.institution_id.into(),
            settlement.merchant_id.into(),
            settlement.network.into(),
            settlement.asset.into(),
            settlement.token.into(),
            settlement.wallet.into(),
            send.now.into(),
        ],
    )?];
    for item in items {
        statements.push(bind(
            db,
            "INSERT INTO settlement_claims (transaction_id, settlement_id) VALUES (?1, \
             (SELECT ?2 FROM transactions WHERE id = ?1 AND raw_status = 'succeeded' \
              AND NOT EXISTS (SELECT 1 FROM refunds WHERE transaction_id = ?1 \
                              AND state IN ('sending', 'confirmed'))))",
            &[item.transaction_id.into(), settlement.id.into()],
        )?);
        statements.push(bind(
            db,
            "DELETE FROM settlement_holds WHERE transaction_id = ?1",
            &[item.transaction_id.into()],
        )?);
    }
    statements.push(send_statement(db, send)?);
    statements.extend(item_statements(db, send.id, items)?);
    Ok(statements)
}

/// The batch that replaces a live transaction with `send` (same nonce, a higher price) and its
/// payments' parts at that price. Of two replacements of one transaction, the second fails
/// whole on the nonce.
pub fn replace(
    db: &D1Database,
    old_id: &str,
    send: &NewSend<'_>,
    items: &[Item],
) -> DbResult<Vec<D1PreparedStatement>> {
    let mut statements = vec![bind(
        db,
        "UPDATE chain_sends SET state = 'replaced', updated_at = ?2 \
         WHERE id = ?1 AND state = 'live'",
        &[old_id.into(), send.now.into()],
    )?];
    statements.push(send_statement(db, send)?);
    statements.extend(item_statements(db, send.id, items)?);
    Ok(statements)
}

/// A transaction the treasury signed, with what following it needs.
#[derive(Debug, Clone, Deserialize)]
pub struct Send {
    /// Its id.
    pub id: String,
    /// Its settlement, when it pays one.
    pub settlement_id: Option<String>,
    /// Its refund, when it pays one.
    pub refund_id: Option<String>,
    /// Network.
    pub network: String,
    /// Treasury address.
    pub sender: String,
    /// Nonce.
    pub nonce: i64,
    /// Gas limit.
    pub gas_limit: i64,
    /// Wei per gas (decimal text).
    pub gas_price: String,
    /// Base units transferred (decimal text).
    pub units: String,
    /// Hash.
    pub tx_hash: String,
    /// Raw signed bytes.
    pub raw: String,
    /// The newest block when it was last broadcast.
    pub sent_block: i64,
    /// The token contract or `native`.
    pub token: String,
    /// The address it pays (the merchant's wallet, or the customer's refund address).
    pub wallet: String,
}

impl Send {
    /// What it pays.
    pub fn purpose(&self) -> Purpose<'_> {
        match (&self.settlement_id, &self.refund_id) {
            (Some(id), _) => Purpose::Settlement(id),
            (None, Some(id)) => Purpose::Refund(id),
            (None, None) => Purpose::Settlement(""),
        }
    }
}

const SEND_FROM: &str = "SELECT c.id, c.settlement_id, c.refund_id, c.network, c.sender, \
     c.nonce, c.gas_limit, c.gas_price, c.units, c.tx_hash, c.raw, c.sent_block, \
     COALESCE(s.token, r.token) AS token, COALESCE(s.wallet, r.to_address) AS wallet \
     FROM chain_sends c LEFT JOIN settlements s ON s.id = c.settlement_id \
     LEFT JOIN refunds r ON r.id = c.refund_id";

/// Transactions out and not yet at depth, oldest first.
pub async fn live(db: &D1Database, limit: i64) -> DbResult<Vec<Send>> {
    all(
        db,
        &format!("{SEND_FROM} WHERE c.state = 'live' ORDER BY c.created_at, c.nonce LIMIT ?1"),
        &[limit.into()],
    )
    .await
}

/// The transactions a live one replaced (the same nonce, a lower price): one of them may be
/// the one that is mined.
pub async fn replaced(db: &D1Database, live: &Send) -> DbResult<Vec<Send>> {
    all(
        db,
        &format!(
            "{SEND_FROM} WHERE c.network = ?1 AND c.sender = ?2 AND c.nonce = ?3 \
             AND c.state = 'replaced'"
        ),
        &[
            live.network.as_str().into(),
            live.sender.as_str().into(),
            live.nonce.into(),
        ],
    )
    .await
}

/// Records a new broadcast of a live transaction (or why it failed).
pub async fn broadcast(
    db: &D1Database,
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

/// The batch that records a transaction mined, succeeded and at depth: it is the one carrying
/// its settlement (a replaced one that was mined after all takes the live one's place), and the
/// settlement is confirmed.
pub fn confirm(
    db: &D1Database,
    send: &Send,
    live_id: &str,
    block: u64,
    gas_used: u128,
    now: i64,
) -> DbResult<Vec<D1PreparedStatement>> {
    Ok(vec![
        bind(
            db,
            "UPDATE chain_sends SET state = 'replaced', updated_at = ?2 \
             WHERE id = ?1 AND state = 'live' AND ?1 <> ?3",
            &[live_id.into(), now.into(), send.id.as_str().into()],
        )?,
        bind(
            db,
            "UPDATE chain_sends SET state = 'confirmed', block_number = ?2, gas_used = ?3, \
             error = NULL, updated_at = ?4 WHERE id = ?1 AND state IN ('live', 'replaced')",
            &[
                send.id.as_str().into(),
                big(block),
                gas_used.to_string().into(),
                now.into(),
            ],
        )?,
        bind(
            db,
            "UPDATE settlements SET state = 'confirmed', error = NULL, updated_at = ?2 \
             WHERE id = ?1 AND state = 'sending'",
            &[send.settlement_id.clone().into(), now.into()],
        )?,
        bind(
            db,
            "UPDATE refunds SET state = 'confirmed', error = NULL, updated_at = ?2 \
             WHERE id = ?1 AND state = 'sending'",
            &[send.refund_id.clone().into(), now.into()],
        )?,
    ])
}

/// The batch that records a transaction that will never pay (`failed`: mined and reverted;
/// `dropped`: its nonce went to another transaction): a settlement fails and lets go of its
/// payments, which settle again in a new one; a refund is signed again, up to
/// [`REFUND_ATTEMPTS`] transactions, then fails.
pub fn fail(
    db: &D1Database,
    send: &Send,
    state: &str,
    block: Option<u64>,
    error: &str,
    now: i64,
) -> DbResult<Vec<D1PreparedStatement>> {
    let block = block.map_or(Value::Null, big);
    Ok(vec![
        bind(
            db,
            "UPDATE chain_sends SET state = ?2, block_number = ?3, error = ?4, updated_at = ?5 \
             WHERE id = ?1 AND state = 'live'",
            &[
                send.id.as_str().into(),
                state.into(),
                block,
                error.into(),
                now.into(),
            ],
        )?,
        bind(
            db,
            "UPDATE settlements SET state = 'failed', error = ?2, updated_at = ?3 \
             WHERE id = ?1 AND state = 'sending'",
            &[send.settlement_id.clone().into(), error.into(), now.into()],
        )?,
        bind(
            db,
            "DELETE FROM settlement_claims WHERE settlement_id = ?1 \
             AND (SELECT state FROM settlements WHERE id = ?1) = 'failed'",
            &[send.settlement_id.clone().into()],
        )?,
        bind(
            db,
            "UPDATE refunds SET attempts = attempts + 1, error = ?2, updated_at = ?3, \
             state = CASE WHEN attempts + 1 >= ?4 THEN 'failed' ELSE state END \
             WHERE id = ?1 AND state = 'sending'",
            &[
                send.refund_id.clone().into(),
                error.into(),
                now.into(),
                REFUND_ATTEMPTS.into(),
            ],
        )?,
    ])
}

/// Transactions a refund may take before it is given up.
pub const REFUND_ATTEMPTS: i64 = 3;

/// A payment of a confirmed settlement still to be marked paid.
#[derive(Debug, Clone, Deserialize)]
pub struct ToFinish {
    /// The payment.
    pub transaction_id: i64,
    /// The confirmed transaction's hash.
    pub tx_hash: String,
    /// Its PSP fee (decimal text).
    pub psp_fee: String,
    /// Its gas share (decimal text).
    pub gas_fee: String,
}

/// Payments whose settlement is confirmed on chain but which are still held in custody.
pub async fn to_finish(db: &D1Database, limit: i64) -> DbResult<Vec<ToFinish>> {
    all(
        db,
        "SELECT i.transaction_id, c.tx_hash, i.psp_fee, i.gas_fee \
         FROM settlements s \
         JOIN chain_sends c ON c.settlement_id = s.id AND c.state = 'confirmed' \
         JOIN settlement_items i ON i.send_id = c.id \
         JOIN transactions t ON t.id = i.transaction_id AND t.raw_status = 'succeeded' \
         WHERE s.state = 'confirmed' LIMIT ?1",
        &[limit.into()],
    )
    .await
}

/// Records why each of `ids` is not settling (now, so it goes behind the others next time);
/// returns the ids whose reason is new (for the alert).
pub async fn hold(db: &D1Database, ids: &[i64], reason: &str, now: i64) -> DbResult<Vec<i64>> {
    let mut new = Vec::new();
    for id in ids {
        let same = run(
            db,
            "UPDATE settlement_holds SET updated_at = ?3 WHERE transaction_id = ?1 AND reason = ?2",
            &[(*id).into(), reason.into(), now.into()],
        )
        .await?;
        if same > 0 {
            continue;
        }
        let changed = run(
            db,
            "INSERT INTO settlement_holds (transaction_id, reason, since, updated_at) \
             VALUES (?1, ?2, ?3, ?3) ON CONFLICT (transaction_id) DO UPDATE SET \
             reason = excluded.reason, since = excluded.since, updated_at = excluded.updated_at \
             WHERE settlement_holds.reason <> excluded.reason",
            &[(*id).into(), reason.into(), now.into()],
        )
        .await?;
        if changed > 0 {
            new.push(*id);
        }
    }
    Ok(new)
}

/// Why a payment is not settling, if it is held.
#[derive(Debug, Clone, Deserialize)]
pub struct Hold {
    /// The reason.
    pub reason: String,
    /// Unix seconds since when.
    pub since: i64,
}

/// The payment's hold, if any.
pub async fn hold_of(db: &D1Database, transaction_id: i64) -> DbResult<Option<Hold>> {
    first(
        db,
        "SELECT reason, since FROM settlement_holds WHERE transaction_id = ?1",
        &[transaction_id.into()],
    )
    .await
}

/// A transaction the treasury signed for a payment, as the portal shows it.
#[derive(Debug, Clone, Deserialize)]
pub struct SendView {
    /// Hash.
    pub tx_hash: String,
    /// live, replaced, confirmed, failed, dropped.
    pub state: String,
    /// Nonce.
    pub nonce: i64,
    /// Wei per gas.
    pub gas_price: String,
    /// Gas limit.
    pub gas_limit: i64,
    /// Gas the receipt says it used, once mined.
    pub gas_used: Option<String>,
    /// Its block, once mined.
    pub block_number: Option<i64>,
    /// Why it failed, or why its last broadcast did.
    pub error: Option<String>,
    /// Where the gas's rate came from.
    pub rate_source: String,
    /// This payment's gas share and net (order currency), and net in base units.
    pub gas_fee: String,
    /// Net.
    pub net: String,
    /// Net in base units.
    pub units: String,
    /// The merchant wallet.
    pub wallet: String,
    /// Unix seconds.
    pub created_at: i64,
}

/// Every transaction signed to settle the payment, oldest first.
pub async fn sends_of(db: &D1Database, transaction_id: i64) -> DbResult<Vec<SendView>> {
    all(
        db,
        "SELECT c.tx_hash, c.state, c.nonce, c.gas_price, c.gas_limit, c.gas_used, \
         c.block_number, c.error, c.rate_source, i.gas_fee, i.net, i.units, s.wallet, \
         c.created_at \
         FROM settlement_items i JOIN chain_sends c ON c.id = i.send_id \
         JOIN settlements s ON s.id = c.settlement_id \
         WHERE i.transaction_id = ?1 ORDER BY c.created_at, c.sent_block",
        &[transaction_id.into()],
    )
    .await
}
