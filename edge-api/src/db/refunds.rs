//! Refunds on chain: what an admin asked for (amount, address, idempotency key), the payment's
//! quote it is paid at, and its state. Their transactions are `chain_sends` rows (see
//! `db::sends`). See migration 0011.

use payrail_evm::Token;
use rust_decimal::Decimal;
use serde::Deserialize;
use shared_types::ids::{InstitutionId, Scoped};
use shared_types::time::UnixTime;
use shared_types::RefundState;

use super::ledger::{Carried, When};
use super::{all, first, run, stmt, Db, DbResult, Stmt, MONEY_IN_D1};

/// A part of a payment made on chain (all of it, for a payment made in one way to pay) and the
/// rate it was paid at: what a refund of it is paid at.
#[derive(Debug, Clone, Deserialize)]
pub struct PaymentQuote {
    /// The part ([`super::parts`]).
    pub part: i64,
    /// Its share of the payment's gross, in the order currency.
    pub gross: Decimal,
    /// Network it was paid on.
    pub network: String,
    /// Asset it was paid in.
    pub asset: String,
    /// Token contract (lower case) or `native`.
    pub token: Token,
    /// The asset's decimals.
    pub decimals: u32,
    /// With `expected`, its rate: `expected` of the order currency is worth `crypto_amount` of
    /// the asset (the quote it came under; or its value over its amount and 1 when some of it
    /// came after the checkout's end, or under more than one quote).
    pub crypto_amount: Decimal,
    /// See `crypto_amount`.
    pub expected: Decimal,
    /// When its first quote was taken (none: its address's watch is gone).
    pub quoted_at: Option<UnixTime>,
    /// Where the rate came from when it is not the quote (the rate when late money arrived,
    /// or its value over its amount).
    pub late_rate_source: Option<String>,
}

/// The parts of payment `transaction_id`, in order, with their rates; none when it was not
/// paid on a watched chain.
pub async fn quotes_of(
    db: &Db,
    institution_id: InstitutionId,
    transaction_id: i64,
) -> DbResult<Vec<PaymentQuote>> {
    all(
        db,
        "SELECT p.part, p.gross, p.network, p.asset, p.token, p.decimals, p.crypto_amount, \
         p.expected, p.rate_source AS late_rate_source, \
         (SELECT MIN(w.quoted_at) FROM deposit_watches w \
          WHERE w.transaction_id = p.transaction_id AND w.institution_id = p.institution_id \
          AND w.network = p.network AND w.asset = p.asset) AS quoted_at \
         FROM payment_parts p WHERE p.transaction_id = ?1 AND p.institution_id = ?2 \
         ORDER BY p.part",
        &[transaction_id.into(), institution_id.into()],
    )
    .await
}

/// A refund to store.
pub struct NewRefund<'a> {
    /// Its id.
    pub id: &'a str,
    /// The institution.
    pub institution_id: InstitutionId,
    /// The payment.
    pub transaction_id: i64,
    /// The Idempotency-Key.
    pub key: &'a str,
    /// Order currency, decimal text.
    pub amount: &'a str,
    /// The same in minor units.
    pub amount_minor: i64,
    /// Minor units per major unit of the currency (100, or 1 for JPY).
    pub minor_per_major: i64,
    /// The payment's quote.
    pub quote: &'a PaymentQuote,
    /// Base units sent.
    pub units: &'a str,
    /// Order currency per unit of the asset.
    pub rate: &'a str,
    /// The customer's address, lower case.
    pub to_address: &'a str,
    /// Who asked.
    pub requested_by: &'a str,
    /// Unix seconds.
    pub now: i64,
}

/// The guarded insert of a refund: it stores nothing unless the payment may be refunded this
/// amount now — held or settled (`succeeded`, `paid`, `partially_refunded`), not being settled,
/// the amount within what is left after every refund not failed (so concurrent requests can
/// never exceed the gross), and within what is left of the part it names; before settlement,
/// the whole of it (a part refunded before settlement would leave the rest unsettleable), and
/// only for a payment made in one way to pay (one made in several is refunded part by part
/// once every part is settled). One statement: D1 runs it alone.
pub fn insert(r: &NewRefund<'_>) -> DbResult<Stmt> {
    stmt("INSERT INTO refunds (id, institution_id, transaction_id, idempotency_key, amount, \
         amount_minor, network, asset, token, decimals, units, rate, to_address, state, \
         requested_by, created_at, updated_at, part) \
         SELECT ?1, ?2, t.id, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 'sending', ?14, ?15, ?15, \
         ?17 \
         FROM transactions t, \
         (SELECT CAST(round(CAST(amount_gross AS REAL) * ?16) AS INTEGER) AS gross_minor \
          FROM transactions WHERE id = ?3 AND institution_id = ?2) g, \
         (SELECT COALESCE(SUM(amount_minor), 0) AS taken FROM refunds \
          WHERE transaction_id = ?3 AND institution_id = ?2 AND state <> 'failed' \
          AND extra = 0) r, \
         (SELECT CAST(round(CAST(gross AS REAL) * ?16) AS INTEGER) AS gross_minor, \
          (SELECT COUNT(*) FROM payment_parts WHERE transaction_id = ?3 \
           AND institution_id = ?2) AS parts \
          FROM payment_parts WHERE transaction_id = ?3 AND institution_id = ?2 \
          AND part = ?17) pg, \
         (SELECT COALESCE(SUM(amount_minor), 0) AS taken FROM refunds \
          WHERE transaction_id = ?3 AND institution_id = ?2 AND part = ?17 \
          AND state <> 'failed' AND extra = 0) pr \
         WHERE t.id = ?3 AND t.institution_id = ?2 \
         AND t.raw_status IN ('succeeded', 'paid', 'partially_refunded') \
         AND ?6 <= g.gross_minor - r.taken \
         AND ?6 <= pg.gross_minor - pr.taken \
         AND (t.raw_status <> 'succeeded' OR (?6 = g.gross_minor - r.taken AND pg.parts = 1)) \
         AND NOT EXISTS (SELECT 1 FROM settlement_claims c JOIN settlements s \
                         ON s.id = c.settlement_id AND s.institution_id = c.institution_id \
                         WHERE c.transaction_id = t.id AND c.institution_id = t.institution_id \
                         AND s.state <> 'failed' \
                         AND t.raw_status = 'succeeded')",
        &[
            r.id.into(),
            r.institution_id.into(),
            r.transaction_id.into(),
            r.key.into(),
            r.amount.into(),
            r.amount_minor.into(),
            r.quote.network.as_str().into(),
            r.quote.asset.as_str().into(),
            r.quote.token.into(),
            i64::from(r.quote.decimals).into(),
            r.units.into(),
            r.rate.into(),
            r.to_address.into(),
            r.requested_by.into(),
            r.now.into(),
            r.minor_per_major.into(),
            r.quote.part.into(),
        ],
    )
}

/// A return to store: everything left of money that reached a payment's deposit address
/// after the payment was credited, sent back to the customer.
pub struct NewReturn<'a> {
    /// Its id.
    pub id: &'a str,
    /// The institution.
    pub institution_id: InstitutionId,
    /// The payment.
    pub transaction_id: i64,
    /// The Idempotency-Key.
    pub key: &'a str,
    /// What it is worth at the address's quote, in the order currency (decimal text), and the
    /// same in minor units (at least one): for people to read, never counted against the
    /// payment.
    pub amount: (&'a str, i64),
    /// The deposit address (lower case), its network, asset, token and decimals.
    pub from: (&'a str, &'a str, &'a str, &'a str, u32),
    /// Base units sent.
    pub units: &'a str,
    /// Order currency per unit of the asset (the address's quote).
    pub rate: &'a str,
    /// The customer's address, lower case.
    pub to_address: &'a str,
    /// Who asked.
    pub requested_by: &'a str,
    /// Unix seconds.
    pub now: i64,
}

/// The guarded insert of a return: it stores nothing unless the payment was credited and the
/// address is one of its deposits. What may be returned is the address's unallocated balance,
/// which the books' batch beside it checks.
pub fn insert_return(r: &NewReturn<'_>) -> DbResult<Stmt> {
    let (from, network, asset, token, decimals) = r.from;
    stmt("INSERT INTO refunds (id, institution_id, transaction_id, idempotency_key, amount, \
         amount_minor, network, asset, token, decimals, units, rate, to_address, state, \
         requested_by, created_at, updated_at, extra, from_address) \
         SELECT ?1, ?2, t.id, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 'sending', ?14, ?15, ?15, \
         1, ?16 FROM transactions t \
         WHERE t.id = ?3 AND t.institution_id = ?2 \
         AND t.raw_status IN ('succeeded', 'paid', 'partially_refunded', 'refunded') \
         AND EXISTS (SELECT 1 FROM deposit_watches w WHERE w.address = ?16 \
                     AND w.transaction_id = t.id AND w.institution_id = t.institution_id)",
        &[
            r.id.into(),
            r.institution_id.into(),
            r.transaction_id.into(),
            r.key.into(),
            r.amount.0.into(),
            r.amount.1.into(),
            network.into(),
            asset.into(),
            token.into(),
            i64::from(decimals).into(),
            r.units.into(),
            r.rate.into(),
            r.to_address.into(),
            r.requested_by.into(),
            r.now.into(),
            from.into(),
        ],
    )
}

/// A refund as stored, with its newest transaction.
#[derive(Debug, Clone, Deserialize)]
pub struct Refund {
    /// Its id.
    pub id: String,
    /// Its institution.
    pub institution_id: InstitutionId,
    /// The payment.
    pub transaction_id: i64,
    /// The part of it refunded ([`super::parts`]).
    pub part: i64,
    /// Order currency.
    pub amount: Decimal,
    /// Network.
    pub network: String,
    /// Asset.
    pub asset: String,
    /// Token contract or `native`.
    pub token: Token,
    /// The asset's decimals.
    pub decimals: u32,
    /// Base units sent.
    pub units: String,
    /// Order currency per unit of the asset.
    pub rate: String,
    /// The customer's address, lower case.
    pub to_address: String,
    /// Where it stands.
    pub state: RefundState,
    /// Why the last transaction failed, or why none could be sent.
    pub error: Option<String>,
    /// Who asked.
    pub requested_by: String,
    /// Unix seconds.
    pub created_at: i64,
    /// The newest transaction's hash, once one was signed.
    pub tx_hash: Option<String>,
    /// A return of money that reached a deposit after the payment was credited (never counted
    /// against the payment), not a refund of the payment.
    #[serde(deserialize_with = "super::flag")]
    pub extra: bool,
    /// For a return: the deposit address it sends back from.
    pub from_address: Option<String>,
}

const REFUND_FROM: &str =
    "SELECT f.id, f.institution_id, f.transaction_id, f.part, f.amount, f.network, f.asset, \
     f.token, f.decimals, f.units, f.rate, f.to_address, f.state, f.error, f.requested_by, \
     f.created_at, f.extra, f.from_address, \
     (SELECT c.tx_hash FROM chain_sends c WHERE c.refund_id = f.id \
      ORDER BY c.created_at DESC, c.sent_block DESC LIMIT 1) AS tx_hash \
     FROM refunds f";

/// [`REFUND_FROM`] in an institution's object (`Db::is_object`): the newest hash its requests
/// learned back from the treasury.
const HELD_REFUND_FROM: &str =
    "SELECT f.id, f.institution_id, f.transaction_id, f.part, f.amount, f.network, f.asset, \
     f.token, f.decimals, f.units, f.rate, f.to_address, f.state, f.error, f.requested_by, \
     f.created_at, f.extra, f.from_address, \
     (SELECT o.tx_hash FROM object_sends o WHERE o.refund_id = f.id AND o.tx_hash IS NOT NULL \
      ORDER BY o.created_at DESC LIMIT 1) AS tx_hash \
     FROM refunds f";

/// The institution's refund asked with `key`, if any.
pub async fn by_key(db: &Db, institution_id: InstitutionId, key: &str) -> DbResult<Option<Refund>> {
    first(
        db,
        &if db.is_object() {
            format!("{HELD_REFUND_FROM} WHERE f.institution_id = ?1 AND f.idempotency_key = ?2")
        } else {
            format!("{REFUND_FROM} WHERE f.institution_id = ?1 AND f.idempotency_key = ?2")
        },
        &[institution_id.into(), key.into()],
    )
    .await
}

/// A payment's refunds, oldest first.
pub async fn of_transaction(
    db: &Db,
    institution_id: InstitutionId,
    transaction_id: i64,
) -> DbResult<Vec<Refund>> {
    all(
        db,
        &if db.is_object() {
            format!(
                "{HELD_REFUND_FROM} WHERE f.transaction_id = ?1 AND f.institution_id = ?2 \
                 ORDER BY f.created_at, f.id"
            )
        } else {
            format!(
                "{REFUND_FROM} WHERE f.transaction_id = ?1 AND f.institution_id = ?2 \
                 ORDER BY f.created_at, f.id"
            )
        },
        &[transaction_id.into(), institution_id.into()],
    )
    .await
}

/// Refunds with no transaction out or mined: to sign (a new one, or again after a failure).
pub async fn to_send(db: &Db, limit: i64) -> DbResult<Vec<Refund>> {
    all(
        db,
        &format!(
            "{REFUND_FROM} WHERE f.state = 'sending' AND f.{MONEY_IN_D1} \
             AND NOT EXISTS (SELECT 1 FROM chain_sends c \
             WHERE c.refund_id = f.id AND c.state IN ('live', 'confirmed')) \
             ORDER BY f.created_at LIMIT ?1"
        ),
        &[limit.into()],
    )
    .await
}

/// Refunds confirmed on chain that the payment does not show yet.
pub async fn confirmed(db: &Db, limit: i64) -> DbResult<Vec<Refund>> {
    all(
        db,
        &if db.is_object() {
            format!("{HELD_REFUND_FROM} WHERE f.state = 'confirmed' ORDER BY f.created_at LIMIT ?1")
        } else {
            format!(
                "{REFUND_FROM} WHERE f.state = 'confirmed' AND f.{MONEY_IN_D1} \
                 ORDER BY f.created_at LIMIT ?1"
            )
        },
        &[limit.into()],
    )
    .await
}

/// Records why no transaction could be sent for the refund now (it is tried again).
pub async fn note(
    db: &Db,
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<&str>,
    error: &str,
    now: i64,
) -> DbResult<()> {
    run(
        db,
        "UPDATE refunds SET error = ?2, updated_at = ?3 WHERE id = ?1 AND institution_id = ?4",
        &[id.into(), error.into(), now.into(), institution_id.into()],
    )
    .await
    .map(drop)
}

/// What the refund's transactions carry, for the books.
pub async fn carried(
    db: &Db,
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<&str>,
) -> DbResult<Option<Carried>> {
    first(
        db,
        "SELECT f.token, f.asset AS symbol, f.decimals, f.institution_id, t.merchant_id, \
         f.from_address FROM refunds f JOIN transactions t ON t.id = f.transaction_id \
         AND t.institution_id = f.institution_id WHERE f.id = ?1 AND f.institution_id = ?2",
        &[id.into(), institution_id.into()],
    )
    .await
}

/// How many of the refund's transactions failed.
pub async fn attempts(
    db: &Db,
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<&str>,
) -> DbResult<i64> {
    #[derive(Deserialize)]
    struct Row {
        attempts: i64,
    }
    let row: Option<Row> = first(
        db,
        "SELECT attempts FROM refunds WHERE id = ?1 AND institution_id = ?2",
        &[id.into(), institution_id.into()],
    )
    .await?;
    Ok(row.map_or(0, |r| r.attempts))
}

/// The books' condition that the refund `id` was stored.
pub fn stored(institution_id: InstitutionId, id: &str) -> When {
    When::holds(
        "EXISTS (SELECT 1 FROM refunds WHERE id = ?1 AND institution_id = ?2)",
        vec![id.into(), institution_id.into()],
    )
}

/// Transactions a refund may take before it is given up.
pub const ATTEMPTS: i64 = 3;

/// The statement that confirms the refund once its transaction is confirmed (in the same
/// batch, before it).
pub fn confirm(
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<&str>,
    now: i64,
) -> DbResult<Stmt> {
    stmt(
        "UPDATE refunds SET state = 'confirmed', error = NULL, updated_at = ?2 \
         WHERE id = ?1 AND institution_id = ?3 AND state = 'sending' \
         AND EXISTS (SELECT 1 FROM chain_sends WHERE refund_id = ?1 AND state = 'confirmed')",
        &[id.into(), now.into(), institution_id.into()],
    )
}

/// [`confirm`] of a refund held in its institution's object: confirmed once the request
/// whose outcome the statement before it in the batch records (`changes() = 1`) was.
pub fn confirm_held(
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<&str>,
    now: i64,
) -> DbResult<Stmt> {
    stmt(
        "UPDATE refunds SET state = 'confirmed', error = NULL, updated_at = ?2 \
         WHERE id = ?1 AND institution_id = ?3 AND state = 'sending' AND changes() = 1",
        &[id.into(), now.into(), institution_id.into()],
    )
}

/// The statement that counts a failed transaction of the refund, when the statement before it
/// in the batch recorded it failed (changed a row): the refund is signed again, up to
/// [`ATTEMPTS`] transactions, then fails.
pub fn attempt_failed(
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<&str>,
    error: &str,
    now: i64,
) -> DbResult<Stmt> {
    stmt(
        "UPDATE refunds SET attempts = attempts + 1, error = ?2, updated_at = ?3, \
         state = CASE WHEN attempts + 1 >= ?4 THEN 'failed' ELSE state END \
         WHERE id = ?1 AND institution_id = ?5 AND state = 'sending' AND changes() = 1",
        &[
            id.into(),
            error.into(),
            now.into(),
            ATTEMPTS.into(),
            institution_id.into(),
        ],
    )
}

/// What the payment's change recording refund `id` is conditioned on: the refund is confirmed
/// on chain and not yet recorded (done). A change that records it is followed in its batch by
/// [`recorded`], so a refund is recorded on its payment once, whatever else was pruned since.
pub struct Unrecorded<'a> {
    /// The refund's institution.
    pub institution_id: InstitutionId,
    /// The refund.
    pub id: &'a str,
}

impl super::Condition for Unrecorded<'_> {
    fn sql(&self, first: usize) -> (String, Vec<super::Value>) {
        (
            format!(
                "EXISTS (SELECT 1 FROM refunds WHERE id = ?{first} AND institution_id = ?{} \
                 AND state = 'confirmed')",
                first + 1
            ),
            vec![self.id.into(), self.institution_id.into()],
        )
    }
}

/// Marks refund `id` done, in the batch of the payment's change that records it, as the
/// statement right after that change and only if it wrote (`changes() = 1`).
pub fn recorded(
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<&str>,
    now: i64,
) -> DbResult<Stmt> {
    stmt(RECORDED, &[id.into(), now.into(), institution_id.into()])
}

/// The SQL of [`recorded`]: `?1` the refund, `?2` now, `?3` its institution.
const RECORDED: &str = "UPDATE refunds SET state = 'done', updated_at = ?2 WHERE id = ?1 \
     AND institution_id = ?3 AND state = 'confirmed' AND changes() = 1";

/// Marks a confirmed refund shown on its payment.
pub async fn done(
    db: &Db,
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<&str>,
    now: i64,
) -> DbResult<()> {
    run(
        db,
        "UPDATE refunds SET state = 'done', updated_at = ?2 WHERE id = ?1 AND institution_id = ?3 \
         AND state = 'confirmed'",
        &[id.into(), now.into(), institution_id.into()],
    )
    .await
    .map(drop)
}

#[cfg(test)]
mod tests {
    use rusqlite::{params, Connection};

    use super::*;
    use crate::db::Condition;

    /// A refund is marked recorded only by the payment's change right before it, and only when
    /// that change wrote; and the change is conditioned on the refund not being recorded yet.
    #[test]
    fn a_refund_is_recorded_only_with_the_payments_change_that_records_it() {
        let conn = Connection::open_in_memory().unwrap();
        xtask::localdb::apply_migrations(&conn).unwrap();
        // Only the statements are under test: the rows they read may name what is not there.
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        conn.execute(
            "INSERT INTO refunds (id, institution_id, transaction_id, idempotency_key, amount, \
             amount_minor, network, asset, token, decimals, units, rate, to_address, state, \
             requested_by, created_at, updated_at) VALUES ('rf_1', 7, 1, 'k', '5.00', 500, \
             'polygon', 'USDC', '0xusdc', 6, '5000000', '1', '0xcustomer', 'confirmed', 'a', 0, 0)",
            [],
        )
        .unwrap();
        let state = || -> String {
            conn.query_row("SELECT state FROM refunds WHERE id = 'rf_1'", [], |r| {
                r.get(0)
            })
            .unwrap()
        };
        let unrecorded = Unrecorded {
            institution_id: shared_types::ids::InstitutionId(7),
            id: "rf_1",
        };
        let holds = |condition: &dyn Condition| crate::db::holds(&conn, condition);
        let record = || conn.execute(RECORDED, params!["rf_1", 9, 7]).unwrap();
        assert!(holds(&unrecorded));
        // The change before it wrote nothing (it raced): not recorded.
        conn.execute("UPDATE refunds SET error = 'x' WHERE id = 'none'", [])
            .unwrap();
        assert_eq!(record(), 0);
        assert_eq!(state(), "confirmed");
        // Another institution's refund of the same id: not this one.
        assert!(!holds(&Unrecorded {
            institution_id: shared_types::ids::InstitutionId(8),
            id: "rf_1"
        }));
        // The change wrote: recorded, and a second change is conditioned away.
        conn.execute("UPDATE refunds SET error = NULL WHERE id = 'rf_1'", [])
            .unwrap();
        assert_eq!(record(), 1);
        assert_eq!(state(), "done");
        assert!(!holds(&unrecorded));
    }
}
