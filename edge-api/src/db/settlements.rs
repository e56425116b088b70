//! Settlements (transfers of payments' net to merchant wallets), the claims that keep a payment
//! in one of them, what each payment was charged in each transaction (`settlement_items`), and
//! why a payment is held. The transactions themselves are `db::sends`. See migration 0011.

use payrail_evm::Token;
use serde::Deserialize;
use shared_types::ids::{InstitutionId, Scoped};

use super::ledger::Carried;
use super::{all, first, run, stmt, Db, DbResult, Select, Stmt, MONEY_IN_D1};

/// A part of a payment held in custody (the money it received in one way to pay: all of it,
/// for a payment made in one) that no settlement carries yet, with what settling it needs.
#[derive(Debug, Clone, Deserialize)]
pub struct Settleable {
    /// The transaction.
    pub transaction_id: i64,
    /// Its part ([`super::parts`]).
    pub part: i64,
    /// Its institution.
    pub institution_id: InstitutionId,
    /// Its merchant.
    pub merchant_id: i64,
    /// Order currency.
    pub currency: String,
    /// What the customer paid in this part, in the order currency (decimal text).
    pub gross: String,
    /// With `crypto_amount`, the rate its net is paid at (`expected` of the order currency is
    /// worth `crypto_amount` of the asset): what was asked and the asset amount it was quoted at,
    /// or, when some of its money came after the checkout's end (valued at the rate when it
    /// arrived) or under more than one quote, its value over its amount for one unit of the
    /// asset (decimal text).
    pub expected: String,
    /// The asset it was paid in.
    pub asset: String,
    /// The network it was paid on.
    pub network: String,
    /// The token contract (lower-case hex) or `native`.
    pub token: Token,
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

const DUE_COLUMNS: &str = "SELECT t.id AS transaction_id, p.part, t.institution_id, \
     t.merchant_id, t.currency, p.gross, p.asset, p.expected, p.crypto_amount, p.network, \
     p.token, p.decimals, i.psp_fee_bps, \
     COALESCE((SELECT h.updated_at FROM settlement_holds h WHERE h.transaction_id = t.id \
               AND h.institution_id = t.institution_id), 0) AS held_at \
     FROM payment_parts p \
     JOIN transactions t ON t.id = p.transaction_id AND t.institution_id = p.institution_id \
     JOIN institutions i ON i.id = t.institution_id AND i.store = 'd1'";

/// [`DUE_COLUMNS`] in an institution's object, where the institution's fee (a fact of the
/// directory) is not known: the caller sets it ([`with_fee`]).
const HELD_DUE_COLUMNS: &str = "SELECT t.id AS transaction_id, p.part, t.institution_id, \
     t.merchant_id, t.currency, p.gross, p.asset, p.expected, p.crypto_amount, p.network, \
     p.token, p.decimals, 0 AS psp_fee_bps, \
     COALESCE((SELECT h.updated_at FROM settlement_holds h WHERE h.transaction_id = t.id \
               AND h.institution_id = t.institution_id), 0) AS held_at \
     FROM payment_parts p \
     JOIN transactions t ON t.id = p.transaction_id AND t.institution_id = p.institution_id";

/// `rows` with the institution's fee, `psp_fee_bps`.
fn with_fee(mut rows: Vec<Settleable>, psp_fee_bps: u32) -> Vec<Settleable> {
    for row in &mut rows {
        row.psp_fee_bps = psp_fee_bps;
    }
    rows
}

/// The conditions of [`due`].
const DUE_WHERE: &str = "WHERE t.raw_status = 'succeeded' AND t.amount_gross IS NOT NULL \
     AND NOT EXISTS (SELECT 1 FROM settlement_claims c WHERE c.transaction_id = t.id \
                     AND c.part = p.part AND c.institution_id = t.institution_id) \
     AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.transaction_id = t.id \
                     AND r.institution_id = t.institution_id \
                     AND r.state IN ('sending', 'confirmed')) \
     ORDER BY held_at, t.id, p.part LIMIT ?1";

/// Parts of payments paid on a watched chain, held in custody (`succeeded`), in no settlement
/// and with no refund on its way: never held first, then the least recently held, oldest first
/// within each, so payments that cannot settle (however many) never crowd out those that can.
pub async fn due(db: &Db, limit: i64) -> DbResult<Vec<Settleable>> {
    due_query(limit).all(db).await
}

/// The statement of [`due`].
pub fn due_query(limit: i64) -> Select {
    Select {
        sql: format!("{DUE_COLUMNS} {DUE_WHERE}"),
        params: vec![limit.into()],
    }
}

/// [`due`] in the object of an institution whose PSP fee is `psp_fee_bps` (read from the
/// directory).
pub async fn due_held(db: &Db, psp_fee_bps: u32, limit: i64) -> DbResult<Vec<Settleable>> {
    let rows = all(
        db,
        &format!("{HELD_DUE_COLUMNS} {DUE_WHERE}"),
        &[limit.into()],
    )
    .await?;
    Ok(with_fee(rows, psp_fee_bps))
}

/// The payment parts a settlement (of an institution) carries that are still held in custody
/// (to price a replacement).
pub async fn claimed(
    db: &Db,
    Scoped {
        institution: institution_id,
        id: settlement_id,
    }: Scoped<&str>,
) -> DbResult<Vec<Settleable>> {
    all(
        db,
        &format!(
            "{DUE_COLUMNS} JOIN settlement_claims c ON c.transaction_id = t.id \
             AND c.part = p.part AND c.institution_id = t.institution_id \
             WHERE c.settlement_id = ?1 AND t.institution_id = ?2 AND p.institution_id = ?2 \
             AND t.raw_status = 'succeeded' ORDER BY t.id"
        ),
        &[settlement_id.into(), institution_id.into()],
    )
    .await
}

/// [`claimed`] in the object of an institution whose PSP fee is `psp_fee_bps`.
pub async fn claimed_held(
    db: &Db,
    Scoped {
        institution: institution_id,
        id: settlement_id,
    }: Scoped<&str>,
    psp_fee_bps: u32,
) -> DbResult<Vec<Settleable>> {
    let rows = all(
        db,
        &format!(
            "{HELD_DUE_COLUMNS} JOIN settlement_claims c ON c.transaction_id = t.id \
             AND c.part = p.part AND c.institution_id = t.institution_id \
             WHERE c.settlement_id = ?1 AND t.institution_id = ?2 AND p.institution_id = ?2 \
             AND t.raw_status = 'succeeded' ORDER BY t.id"
        ),
        &[settlement_id.into(), institution_id.into()],
    )
    .await?;
    Ok(with_fee(rows, psp_fee_bps))
}

/// The (institution, merchant, network, asset) groups with a settlement out: the next one for a
/// group waits for it (its gas was estimated on the state the earlier transfer changes).
pub async fn sending_groups(db: &Db) -> DbResult<Vec<(InstitutionId, i64, String, String)>> {
    #[derive(Deserialize)]
    struct Row {
        institution_id: InstitutionId,
        merchant_id: i64,
        network: String,
        asset: String,
    }
    let rows: Vec<Row> = all(
        db,
        "SELECT DISTINCT institution_id, merchant_id, network, asset FROM settlements \
         WHERE state = 'sending'",
        &[],
    )
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.institution_id, r.merchant_id, r.network, r.asset))
        .collect())
}

/// One payment's part of a transfer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Item {
    /// The payment.
    pub transaction_id: i64,
    /// Which part of it ([`super::parts`]).
    pub part: i64,
    /// Its institution.
    pub institution_id: InstitutionId,
    /// PSP fee, order currency (decimal text).
    pub psp_fee: String,
    /// Its share of the gas, order currency (decimal text).
    pub gas_fee: String,
    /// What it pays the merchant, order currency (decimal text).
    pub net: String,
    /// The same in the asset's base units (decimal text).
    pub units: String,
    /// The PSP fee in the asset's base units, at the payment's quote (decimal text).
    pub psp_units: String,
    /// The gas share in the asset's base units, at the payment's quote (decimal text).
    pub gas_units: String,
}

/// Each payment's part of the transaction `send_id` (paying a settlement of `institution_id`).
pub async fn items_of(
    db: &Db,
    Scoped {
        institution: institution_id,
        id: send_id,
    }: Scoped<&str>,
) -> DbResult<Vec<Item>> {
    all(
        db,
        "SELECT transaction_id, part, institution_id, psp_fee, gas_fee, net, units, psp_units, \
         gas_units \
         FROM settlement_items WHERE send_id = ?1 AND institution_id = ?2 ORDER BY transaction_id",
        &[send_id.into(), institution_id.into()],
    )
    .await
}

/// What the settlement's transactions carry, for the books.
pub async fn carried(
    db: &Db,
    Scoped {
        institution: institution_id,
        id: settlement_id,
    }: Scoped<&str>,
) -> DbResult<Option<Carried>> {
    first(
        db,
        "SELECT s.token, s.asset AS symbol, s.institution_id, s.merchant_id, \
         COALESCE((SELECT p.decimals FROM chain_sends c \
                   JOIN settlement_items i ON i.send_id = c.id \
                   AND i.institution_id = s.institution_id \
                   JOIN payment_parts p ON p.transaction_id = i.transaction_id \
                   AND p.part = i.part AND p.institution_id = i.institution_id \
                   WHERE c.settlement_id = s.id LIMIT 1), s.decimals, 18) AS decimals, \
         s.held_by \
         FROM settlements s WHERE s.id = ?1 AND s.institution_id = ?2",
        &[settlement_id.into(), institution_id.into()],
    )
    .await
}

/// A settlement to start.
pub struct NewSettlement<'a> {
    /// Its id.
    pub id: &'a str,
    /// Institution.
    pub institution_id: InstitutionId,
    /// Merchant.
    pub merchant_id: i64,
    /// Network.
    pub network: &'a str,
    /// Asset.
    pub asset: &'a str,
    /// Token contract or `native`.
    pub token: Token,
    /// The merchant's wallet, lower case.
    pub wallet: &'a str,
}

/// The statements recording each payment's part of the transaction `send_id`.
pub fn items(send_id: &str, items: &[Item]) -> DbResult<Vec<Stmt>> {
    items
        .iter()
        .map(|i| {
            stmt(
                "INSERT INTO settlement_items (send_id, transaction_id, psp_fee, gas_fee, net, \
                 units, psp_units, gas_units, institution_id, part) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                &[
                    send_id.into(),
                    i.transaction_id.into(),
                    i.psp_fee.as_str().into(),
                    i.gas_fee.as_str().into(),
                    i.net.as_str().into(),
                    i.units.as_str().into(),
                    i.psp_units.as_str().into(),
                    i.gas_units.as_str().into(),
                    i.institution_id.into(),
                    i.part.into(),
                ],
            )
        })
        .collect()
}

/// The statements that start a settlement: the settlement and a claim on each payment (its
/// first transaction and each payment's part of it, [`items`], follow in the same batch). The
/// batch fails whole if any payment is no longer held in custody or is already claimed (a
/// claim's settlement id is then NULL, or its key taken): then nothing was stored and nothing
/// may be sent.
pub fn start(settlement: &NewSettlement<'_>, items: &[Item], now: i64) -> DbResult<Vec<Stmt>> {
    let mut statements = vec![stmt(
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
            now.into(),
        ],
    )?];
    for item in items {
        statements.push(stmt(
            "INSERT INTO settlement_claims (transaction_id, part, settlement_id, institution_id) \
             VALUES (?1, ?4, (SELECT ?2 FROM transactions WHERE id = ?1 AND institution_id = ?3 \
              AND raw_status = 'succeeded' \
              AND NOT EXISTS (SELECT 1 FROM refunds WHERE transaction_id = ?1 \
                              AND institution_id = ?3 AND state IN ('sending', 'confirmed'))), \
             ?3)",
            &[
                item.transaction_id.into(),
                settlement.id.into(),
                settlement.institution_id.into(),
                item.part.into(),
            ],
        )?);
        statements.push(stmt(
            "DELETE FROM settlement_holds WHERE transaction_id = ?1 AND institution_id = ?2",
            &[item.transaction_id.into(), settlement.institution_id.into()],
        )?);
    }
    Ok(statements)
}

/// The treasury's row of a payout of an institution held in its object: a settlement (the
/// object holds its payments, claims and items), or one attempt of the object's refund
/// `refund_of` (it pays the customer's address); what the transaction pays, in the batch that
/// stores the transaction.
pub fn held(
    settlement: &NewSettlement<'_>,
    (decimals, refund_of): (u32, Option<&str>),
    now: i64,
) -> DbResult<Stmt> {
    stmt(
        "INSERT INTO settlements (id, institution_id, merchant_id, network, asset, token, wallet, \
         state, created_at, updated_at, held_by, decimals, refund_of) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'sending', ?8, ?8, ?2, ?9, ?10)",
        &[
            settlement.id.into(),
            settlement.institution_id.into(),
            settlement.merchant_id.into(),
            settlement.network.into(),
            settlement.asset.into(),
            settlement.token.into(),
            settlement.wallet.into(),
            now.into(),
            i64::from(decimals).into(),
            refund_of.into(),
        ],
    )
}

/// The statements that confirm the settlement once one of its transactions is confirmed (in
/// the same batch, before them), and clear its payments' holds (a reason it waited).
pub fn confirm(
    Scoped {
        institution: institution_id,
        id: settlement_id,
    }: Scoped<&str>,
    now: i64,
) -> DbResult<Vec<Stmt>> {
    Ok(vec![
        stmt(
            "UPDATE settlements SET state = 'confirmed', error = NULL, updated_at = ?2 \
             WHERE id = ?1 AND institution_id = ?3 AND state = 'sending' \
             AND EXISTS (SELECT 1 FROM chain_sends \
             WHERE settlement_id = ?1 AND state = 'confirmed')",
            &[settlement_id.into(), now.into(), institution_id.into()],
        )?,
        holds_cleared(Scoped::new(institution_id, settlement_id))?,
    ])
}

/// The statement clearing the holds of the settlement's payments once it is confirmed (a
/// reason they waited).
fn holds_cleared(
    Scoped {
        institution: institution_id,
        id: settlement_id,
    }: Scoped<&str>,
) -> DbResult<Stmt> {
    stmt(
        "DELETE FROM settlement_holds WHERE institution_id = ?2 \
         AND transaction_id IN (SELECT transaction_id \
         FROM settlement_claims WHERE settlement_id = ?1 AND institution_id = ?2) \
         AND (SELECT state FROM settlements WHERE id = ?1 AND institution_id = ?2) \
         = 'confirmed'",
        &[settlement_id.into(), institution_id.into()],
    )
}

/// [`confirm`] in the object that holds the settlement: once its request is recorded
/// confirmed (`db::object_sends`).
pub fn confirm_held(
    Scoped {
        institution: institution_id,
        id: settlement_id,
    }: Scoped<&str>,
    now: i64,
) -> DbResult<Vec<Stmt>> {
    Ok(vec![
        stmt(
            "UPDATE settlements SET state = 'confirmed', error = NULL, updated_at = ?2 \
             WHERE id = ?1 AND institution_id = ?3 AND state = 'sending' \
             AND EXISTS (SELECT 1 FROM object_sends \
             WHERE settlement_id = ?1 AND state = 'confirmed')",
            &[settlement_id.into(), now.into(), institution_id.into()],
        )?,
        holds_cleared(Scoped::new(institution_id, settlement_id))?,
    ])
}

/// The statements that fail the settlement when its transaction was just recorded failed (the
/// statement before them in the batch changed a row) and let go of its payments, which settle
/// again in a new one.
pub fn fail(
    Scoped {
        institution: institution_id,
        id: settlement_id,
    }: Scoped<&str>,
    error: &str,
    now: i64,
) -> DbResult<Vec<Stmt>> {
    Ok(vec![
        stmt(
            "UPDATE settlements SET state = 'failed', error = ?2, updated_at = ?3 \
             WHERE id = ?1 AND institution_id = ?4 AND state = 'sending' AND changes() = 1",
            &[
                settlement_id.into(),
                error.into(),
                now.into(),
                institution_id.into(),
            ],
        )?,
        stmt(
            "DELETE FROM settlement_claims WHERE settlement_id = ?1 AND institution_id = ?2 \
             AND (SELECT state FROM settlements WHERE id = ?1 AND institution_id = ?2) = 'failed'",
            &[settlement_id.into(), institution_id.into()],
        )?,
    ])
}

/// A payment part of a confirmed settlement whose payment is still to be marked paid.
#[derive(Debug, Clone, Deserialize)]
pub struct ToFinish {
    /// The payment.
    pub transaction_id: i64,
    /// Its institution.
    pub institution_id: InstitutionId,
    /// The confirmed transaction's hash.
    pub tx_hash: String,
    /// The part's PSP fee (decimal text).
    pub psp_fee: String,
    /// The part's gas share (decimal text).
    pub gas_fee: String,
    /// What the part pays the merchant before a bridge's fee: order currency (decimal text).
    #[serde(default)]
    pub net: String,
    /// A settlement across networks: the network paid on.
    #[serde(default)]
    pub destination_network: Option<String>,
    /// Its burn's hash.
    #[serde(default)]
    pub bridge_hash: Option<String>,
    /// The base units burnt (decimal text).
    #[serde(default)]
    pub bridge_amount: Option<String>,
    /// The fee the mint collected, base units (decimal text).
    #[serde(default)]
    pub bridge_fee: Option<String>,
    /// The payment's order currency.
    #[serde(default)]
    pub currency: String,
}

/// What [`to_finish`] asks of the items of confirmed settlements, wherever their transactions
/// are recorded: their payments still held in custody, every part of each in a confirmed
/// settlement.
const TO_FINISH: &str = "JOIN transactions t ON t.id = i.transaction_id \
     AND t.institution_id = s.institution_id AND t.raw_status = 'succeeded' \
     WHERE s.state = 'confirmed' \
     AND NOT EXISTS (SELECT 1 FROM payment_parts p \
         WHERE p.transaction_id = t.id AND p.institution_id = t.institution_id \
         AND NOT EXISTS (SELECT 1 FROM settlement_claims k JOIN settlements d \
             ON d.id = k.settlement_id AND d.institution_id = k.institution_id \
             WHERE k.transaction_id = p.transaction_id AND k.part = p.part \
             AND k.institution_id = p.institution_id AND d.state = 'confirmed')) \
     ORDER BY i.transaction_id, i.part LIMIT ?1";

/// The parts of payments still held in custody whose every part's settlement is confirmed on
/// chain, ordered by payment and part (a payment's parts come together; a payment cut by the
/// limit is the last).
pub async fn to_finish(db: &Db, limit: i64) -> DbResult<Vec<ToFinish>> {
    all(
        db,
        &format!(
            "SELECT i.transaction_id, i.institution_id, COALESCE(b.mint_tx_hash, c.tx_hash) \
             AS tx_hash, i.psp_fee, i.gas_fee, i.net, \
             b.destination_network, b.burn_tx_hash AS bridge_hash, b.amount AS bridge_amount, \
             b.fee AS bridge_fee, t.currency \
             FROM settlements s \
             JOIN chain_sends c ON c.settlement_id = s.id AND c.state = 'confirmed' \
             JOIN settlement_items i ON i.send_id = c.id AND i.institution_id = s.institution_id \
             AND s.{MONEY_IN_D1} \
             LEFT JOIN bridges b ON b.settlement_id = s.id AND b.institution_id = s.institution_id \
             AND b.state = 'minted' {TO_FINISH}"
        ),
        &[limit.into()],
    )
    .await
}

/// [`to_finish`] in the object that holds the settlements: the transaction that was final is
/// the one its request records.
pub async fn to_finish_held(db: &Db, limit: i64) -> DbResult<Vec<ToFinish>> {
    all(
        db,
        &format!(
            "SELECT i.transaction_id, i.institution_id, o.tx_hash, i.psp_fee, i.gas_fee \
             FROM settlements s \
             JOIN object_sends o ON o.settlement_id = s.id AND o.state = 'confirmed' \
             JOIN settlement_items i ON i.send_id = o.id AND i.institution_id = s.institution_id \
             {TO_FINISH}"
        ),
        &[limit.into()],
    )
    .await
}

/// A held payment's share of one of its settlements, as its object records it: what the portal
/// shows beside the treasury's transactions of that settlement.
#[derive(Debug, Clone, Deserialize)]
pub struct HeldItem {
    /// The settlement.
    pub settlement_id: String,
    /// The payment's share of the gas, order currency.
    pub gas_fee: String,
    /// What it pays the merchant for the payment, order currency.
    pub net: String,
    /// The same in base units.
    pub units: String,
    /// The merchant's wallet.
    pub wallet: String,
}

/// Payment `transaction_id`'s shares of its settlements, in the object that holds it.
pub async fn held_items_of(
    db: &Db,
    institution_id: InstitutionId,
    transaction_id: i64,
) -> DbResult<Vec<HeldItem>> {
    all(
        db,
        "SELECT o.settlement_id, i.gas_fee, i.net, i.units, o.wallet \
         FROM settlement_items i JOIN object_sends o ON o.id = i.send_id \
         JOIN settlements s ON s.id = o.settlement_id AND s.institution_id = i.institution_id \
         WHERE i.transaction_id = ?1 AND i.institution_id = ?2 ORDER BY o.created_at",
        &[transaction_id.into(), institution_id.into()],
    )
    .await
}

/// Records why each of `ids` is not settling (now, so it goes behind the others next time);
/// returns the ids whose reason is new (for the alert).
pub async fn hold(
    db: &Db,
    (institution_id, ids): (InstitutionId, &[i64]),
    reason: &str,
    now: i64,
) -> DbResult<Vec<i64>> {
    let mut new = Vec::new();
    for id in ids {
        let same = run(
            db,
            "UPDATE settlement_holds SET updated_at = ?3 WHERE transaction_id = ?1 \
             AND institution_id = ?4 AND reason = ?2",
            &[
                (*id).into(),
                reason.into(),
                now.into(),
                institution_id.into(),
            ],
        )
        .await?;
        if same > 0 {
            continue;
        }
        let changed = run(
            db,
            "INSERT INTO settlement_holds (transaction_id, reason, since, updated_at, \
             institution_id) \
             VALUES (?1, ?2, ?3, ?3, ?4) ON CONFLICT (transaction_id) DO UPDATE SET \
             reason = excluded.reason, since = excluded.since, updated_at = excluded.updated_at \
             WHERE settlement_holds.reason <> excluded.reason \
             AND settlement_holds.institution_id = excluded.institution_id",
            &[
                (*id).into(),
                reason.into(),
                now.into(),
                institution_id.into(),
            ],
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
pub async fn hold_of(
    db: &Db,
    institution_id: InstitutionId,
    transaction_id: i64,
) -> DbResult<Option<Hold>> {
    first(
        db,
        "SELECT reason, since FROM settlement_holds WHERE transaction_id = ?1 \
         AND institution_id = ?2",
        &[transaction_id.into(), institution_id.into()],
    )
    .await
}
