//! Transactions: the partner API's reads ("the transaction as the API shows it", once) and the
//! payment's writes (creation, the way to pay, lifecycle changes guarded on what they read).
//!
//! Every page is a range scan of one index in id order, whatever the filters: the index is
//! chosen by the filters' shape (equality columns first, then `id`), `starting_after` and the
//! date bounds become bounds on `id`, and `LIMIT` stops the scan. Date bounds become id bounds
//! through `transactions_by_created`, because ids are allocated in creation order.

use std::str::FromStr;

use rust_decimal::Decimal;
use serde::Deserialize;
use shared_types::ids::{InstitutionId, Scoped};
use shared_types::lifecycle::Change;
use shared_types::{
    Amount, AmountStatus, Networks, RawStatus, Status, Transaction, TransactionObject, TxHashes,
};

use super::ledger::When;
use super::{
    all, first, stmt, watches, Db, DbError, DbResult, Owner, Returning, Select, Stmt, Value,
    MONEY_IN_D1,
};
use crate::query::{TransactionFilter, MAX_ID};

/// A payment held by its screening reads `held` (stored as `pending`, `screening` `held`:
/// migration 0038).
const COLUMNS: &str = "id, merchant_id, status, \
    CASE WHEN screening = 'held' THEN 'held' ELSE raw_status END AS raw_status, amount_status, \
    asset, currency, \
    amount_gross, amount_net, amount_expected, psp_fee, gas_fee, bridge_fee, network_payment, \
    network_settlement, tx_hash_source, tx_hash_bridge, tx_hash_settlement, customer_email, \
    external_reference, created_at, paid_at";

/// SQL for the first id created at or after the bound in parameter `?n`; past every id when
/// nothing was, so that `id < ...` keeps everything and `id >= ...` keeps nothing.
fn first_id_created_from(n: usize) -> String {
    format!(
        "COALESCE((SELECT id FROM transactions INDEXED BY transactions_by_created \
         WHERE created_at >= ?{n} ORDER BY created_at, id LIMIT 1), {})",
        MAX_ID + 1
    )
}

/// A transactions row as D1 returns it.
#[derive(Debug, Deserialize)]
struct Row {
    id: i64,
    merchant_id: i64,
    status: Status,
    raw_status: RawStatus,
    amount_status: Option<AmountStatus>,
    asset: Option<String>,
    currency: Option<String>,
    amount_gross: Option<Decimal>,
    amount_net: Option<Decimal>,
    amount_expected: Option<Decimal>,
    psp_fee: Option<Decimal>,
    gas_fee: Option<Decimal>,
    bridge_fee: Option<Decimal>,
    network_payment: Option<String>,
    network_settlement: Option<String>,
    tx_hash_source: Option<String>,
    tx_hash_bridge: Option<String>,
    tx_hash_settlement: Option<String>,
    customer_email: Option<String>,
    external_reference: Option<String>,
    created_at: String,
    paid_at: Option<String>,
}

impl Row {
    fn into_transaction(self) -> DbResult<Transaction> {
        let id = self.id;
        Ok(Transaction {
            object: TransactionObject::Transaction,
            id,
            merchant_id: self.merchant_id,
            status: self.status,
            raw_status: self.raw_status,
            amount_status: self.amount_status,
            asset: self.asset,
            currency: self.currency,
            amount: Amount {
                gross: self.amount_gross,
                net: self.amount_net,
                expected: self.amount_expected,
                psp_fee: self.psp_fee,
                gas_fee: self.gas_fee,
                bridge_fee: self.bridge_fee,
            },
            networks: Networks {
                payment: self.network_payment,
                settlement: self.network_settlement,
            },
            tx_hashes: TxHashes {
                source: self.tx_hash_source,
                bridge: self.tx_hash_bridge,
                settlement: self.tx_hash_settlement,
            },
            customer_email: self.customer_email,
            external_reference: self.external_reference,
            created_at: Some(self.created_at),
            paid_at: self.paid_at,
        })
    }
}

/// The index whose equality columns match the filters; `None` when the id pins one row.
fn index_for(filter: &TransactionFilter) -> Option<&'static str> {
    if filter.id.is_some() {
        return None;
    }
    Some(
        match (
            &filter.external_reference,
            filter.merchant_id,
            filter.status,
        ) {
            (Some(_), _, _) => "transactions_by_reference",
            (None, Some(_), Some(_)) => "transactions_by_merchant_status",
            (None, Some(_), None) => "transactions_by_merchant",
            (None, None, Some(_)) => "transactions_by_status",
            (None, None, None) => "transactions_by_institution",
        },
    )
}

/// The query for one page of an institution's transactions, newest first, one row over `limit`.
pub fn list_query(owner: Owner<'_>, filter: &TransactionFilter) -> Select {
    let indexed = index_for(filter)
        .map(|index| format!(" INDEXED BY {index}"))
        .unwrap_or_default();
    let (institution, param) = owner.sql();
    let mut sql =
        format!("SELECT {COLUMNS} FROM transactions{indexed} WHERE institution_id = {institution}");
    let mut params = vec![param];
    let mut and = |clause: &dyn Fn(usize) -> String, value: Value| {
        params.push(value);
        sql.push_str(" AND ");
        sql.push_str(&clause(params.len()));
    };
    if let Some(merchant_id) = filter.merchant_id {
        and(&|n| format!("merchant_id = ?{n}"), merchant_id.into());
    }
    if let Some(status) = filter.status {
        and(&|n| format!("status = ?{n}"), status.as_str().into());
    }
    if let Some(reference) = &filter.external_reference {
        and(
            &|n| format!("external_reference = ?{n}"),
            reference.as_str().into(),
        );
    }
    if let Some(id) = filter.id {
        and(&|n| format!("id = ?{n}"), id.into());
    }
    if let Some(cursor) = filter.starting_after {
        and(&|n| format!("id < ?{n}"), cursor.into());
    }
    if let Some(after) = &filter.created_after {
        and(
            &|n| format!("created_at >= ?{n} AND id >= {}", first_id_created_from(n)),
            after.as_str().into(),
        );
    }
    if let Some(before) = &filter.created_before {
        and(
            &|n| format!("created_at < ?{n} AND id < {}", first_id_created_from(n)),
            before.as_str().into(),
        );
    }
    params.push(Value::Int(i64::from(filter.limit) + 1));
    sql.push_str(&format!(" ORDER BY id DESC LIMIT ?{}", params.len()));
    Select { sql, params }
}

/// A transaction row as the partner API's JSON object (spec §2.2), built by SQLite. Amounts
/// are stored as the canonical decimal text the typed path would print.
const TRANSACTION_JSON: &str = "json_object('object', 'transaction', 'id', id, \
     'merchant_id', merchant_id, 'status', status, 'raw_status', raw_status, \
     'amount_status', amount_status, 'asset', asset, 'currency', currency, \
     'amount', json_object('gross', amount_gross, 'net', amount_net, \
        'expected', amount_expected, 'psp_fee', psp_fee, 'gas_fee', gas_fee, \
        'bridge_fee', bridge_fee), \
     'networks', json_object('payment', network_payment, 'settlement', network_settlement), \
     'tx_hashes', json_object('source', tx_hash_source, 'bridge', tx_hash_bridge, \
        'settlement', tx_hash_settlement), \
     'customer_email', customer_email, 'external_reference', external_reference, \
     'created_at', created_at, 'paid_at', paid_at)";

/// One page of transactions as the partner API's JSON, built by SQLite.
pub async fn list_json(
    db: &super::Db,
    owner: Owner<'_>,
    filter: &TransactionFilter,
) -> DbResult<super::JsonPage> {
    super::json_page(
        db,
        owner,
        list_query(owner, filter),
        filter.limit,
        (TRANSACTION_JSON, super::BY_ID),
    )
    .await
}

/// One page of transactions, with one extra row when a further page exists.
pub async fn list(
    db: &Db,
    institution_id: InstitutionId,
    filter: &TransactionFilter,
) -> DbResult<Vec<Transaction>> {
    let rows: Vec<Row> = list_query(Owner::Institution(institution_id), filter)
        .all(db)
        .await?;
    rows.into_iter().map(Row::into_transaction).collect()
}

/// One transaction of the institution, exactly as the partner API shows it; `None` for another
/// institution's.
pub async fn get(db: &Db, institution_id: InstitutionId, id: i64) -> DbResult<Option<Transaction>> {
    let filter = TransactionFilter {
        limit: 1,
        id: Some(id),
        ..TransactionFilter::default()
    };
    Ok(list(db, institution_id, &filter).await?.into_iter().next())
}

/// Count and gross volume of one status and currency.
#[derive(Debug, Clone, Deserialize)]
pub struct Volume {
    /// Normalized status.
    pub status: Status,
    /// Order currency.
    pub currency: Option<String>,
    /// Transactions.
    pub count: i64,
    /// Sum of `amount.gross` in minor units (cents; yen for JPY).
    pub gross_minor: i64,
}

/// The sum of a group's `amount.gross` in minor units (cents; yen for JPY). `total` sums as a
/// float and never fails where `sum` would raise an integer overflow, and a float holds every
/// whole number exactly up to 2^53 (90 trillion in a currency of cents), where the sum is held:
/// past it the overview could show no exact figure anyway, and a larger number would reach the
/// worker inexactly (D1 hands numbers over as JavaScript's). Every amount that enters is
/// bounded (checkout's rule), so only a sum of some 90 million largest orders comes near it.
const GROSS_MINOR: &str = "CAST(min(total(round(CAST(amount_gross AS REAL) * \
     CASE currency WHEN 'JPY' THEN 1 ELSE 100 END)), 9007199254740991) AS INTEGER)";

/// The overview's statement: the institution's transactions created since `since` (canonical
/// text), counted and summed per status and currency, from one range scan of a covering index.
/// Amounts are summed in minor units ([`GROSS_MINOR`]), exact below 2^53.
pub fn volume_query(institution_id: InstitutionId, since: &str) -> Select {
    Select {
        sql: format!(
            "SELECT status, currency, count(*) AS count, \
              {GROSS_MINOR} AS gross_minor \
              FROM transactions INDEXED BY transactions_by_institution_created \
              WHERE institution_id = ?1 AND created_at >= ?2 GROUP BY status, currency"
        ),
        params: vec![institution_id.into(), since.into()],
    }
}

/// Volume per status and currency since `since`.
pub async fn volume(db: &Db, institution_id: InstitutionId, since: &str) -> DbResult<Vec<Volume>> {
    volume_query(institution_id, since).all(db).await
}

/// Gross volume and count of one day (UTC, `YYYY-MM-DD`) and currency.
#[derive(Debug, Clone, Deserialize)]
pub struct DayVolume {
    /// The day the payments were created.
    pub day: String,
    /// Order currency.
    pub currency: String,
    /// Payments with a gross amount (something was paid).
    pub count: i64,
    /// Sum of `amount.gross` in minor units, as [`Volume::gross_minor`].
    pub gross_minor: i64,
}

/// The overview's chart: the institution's gross volume per day and currency of the payments
/// created since `since` that received something, from the same covering index range as
/// [`volume_query`].
pub fn daily_volume_query(institution_id: InstitutionId, since: &str) -> Select {
    Select {
        sql: format!(
            "SELECT substr(created_at, 1, 10) AS day, currency, count(*) AS count, \
              {GROSS_MINOR} AS gross_minor \
              FROM transactions INDEXED BY transactions_by_institution_created \
              WHERE institution_id = ?1 AND created_at >= ?2 \
              AND amount_gross IS NOT NULL AND currency IS NOT NULL \
              GROUP BY day, currency"
        ),
        params: vec![institution_id.into(), since.into()],
    }
}

/// Volume per day and currency since `since`.
pub async fn daily_volume(
    db: &Db,
    institution_id: InstitutionId,
    since: &str,
) -> DbResult<Vec<DayVolume>> {
    daily_volume_query(institution_id, since).all(db).await
}

/// Most payments one search answers.
pub const SEARCH_MAX: i64 = 50;

/// What the portal's search box looks for, each compared exactly.
#[derive(Debug, Clone, Default)]
pub struct SearchKeys<'a> {
    /// A payment id.
    pub id: Option<i64>,
    /// An external reference, as typed.
    pub reference: &'a str,
    /// A transaction hash or a deposit address, as stored (lower-case for EVM hex).
    pub chain: &'a str,
}

/// A payment the search found, and by what.
#[derive(Debug, Clone, Deserialize)]
pub struct Found {
    /// The payment.
    pub id: i64,
    /// `id`, `external_reference`, `tx_hash` or `deposit_address`.
    pub key: String,
}

/// The search: the institution's payments whose id, external reference, hash (its own source or
/// settlement hash, or any transfer seen to its deposit address) or deposit address is exactly
/// the key; each arm an index search scoped to the institution; at most [`SEARCH_MAX`] + 1
/// rows, newest first.
pub fn search_query(institution_id: InstitutionId, keys: &SearchKeys<'_>) -> Select {
    Select {
        // Two compounds in a union of two: D1 allows at most five terms in one.
        sql: "SELECT id, key FROM (SELECT * FROM (\
              SELECT id, 'id' AS key FROM transactions WHERE id = ?2 AND institution_id = ?1 \
              UNION ALL SELECT id, 'external_reference' FROM transactions \
                INDEXED BY transactions_by_reference \
                WHERE institution_id = ?1 AND external_reference = ?3 \
              UNION ALL SELECT id, 'tx_hash' FROM transactions \
                INDEXED BY transactions_by_source_hash \
                WHERE institution_id = ?1 AND tx_hash_source = ?4 \
              UNION ALL SELECT id, 'tx_hash' FROM transactions \
                INDEXED BY transactions_by_settlement_hash \
                WHERE institution_id = ?1 AND tx_hash_settlement = ?4) \
              UNION ALL SELECT * FROM (\
              SELECT t.id, 'tx_hash' AS key FROM chain_transfers c \
                INDEXED BY chain_transfers_by_hash \
                JOIN deposit_watches w ON w.address = c.address AND w.institution_id = ?1 \
                JOIN transactions t ON t.id = w.transaction_id \
                WHERE c.tx_hash = ?4 AND c.institution_id = ?1 AND t.institution_id = ?1 \
              UNION ALL SELECT t.id, 'deposit_address' FROM deposit_watches w \
                JOIN transactions t ON t.id = w.transaction_id \
                WHERE w.address = ?4 AND w.institution_id = ?1 AND t.institution_id = ?1 \
              UNION ALL SELECT t.id, 'deposit_address' FROM checkout_sessions s \
                INDEXED BY checkout_sessions_by_deposit_address \
                JOIN transactions t ON t.id = s.transaction_id \
                WHERE s.deposit_address = ?4 AND s.institution_id = ?1 \
                AND t.institution_id = ?1)) \
              GROUP BY id ORDER BY id DESC LIMIT ?5"
            .to_owned(),
        params: vec![
            institution_id.into(),
            keys.id.into(),
            keys.reference.into(),
            keys.chain.into(),
            (SEARCH_MAX + 1).into(),
        ],
    }
}

/// The payments the search finds (see [`search_query`]).
pub async fn search(
    db: &Db,
    institution_id: InstitutionId,
    keys: &SearchKeys<'_>,
) -> DbResult<Vec<Found>> {
    search_query(institution_id, keys).all(db).await
}

/// The institution's payments of these ids (at most [`SEARCH_MAX`] + 1), newest first.
pub async fn of_ids(
    db: &Db,
    institution_id: InstitutionId,
    ids: &[i64],
) -> DbResult<Vec<Transaction>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let marks: Vec<String> = (0..ids.len()).map(|i| format!("?{}", i + 2)).collect();
    let mut params = vec![Value::from(institution_id)];
    params.extend(ids.iter().map(|id| Value::Int(*id)));
    let rows: Vec<Row> = all(
        db,
        &format!(
            "SELECT {COLUMNS} FROM transactions WHERE institution_id = ?1 AND id IN ({}) \
             ORDER BY id DESC",
            marks.join(", ")
        ),
        &params,
    )
    .await?;
    rows.into_iter().map(Row::into_transaction).collect()
}

/// The institution's newest transaction id (a sample for test events).
pub async fn newest_id(db: &Db, institution_id: InstitutionId) -> DbResult<Option<i64>> {
    #[derive(Deserialize)]
    struct Id {
        id: i64,
    }
    let row: Option<Id> = first(
        db,
        "SELECT id FROM transactions INDEXED BY transactions_by_institution \
         WHERE institution_id = ?1 ORDER BY id DESC LIMIT 1",
        &[institution_id.into()],
    )
    .await?;
    Ok(row.map(|r| r.id))
}

/// A pending transaction to create.
pub struct NewPayment<'a> {
    /// Owning institution.
    pub institution_id: InstitutionId,
    /// The merchant.
    pub merchant_id: i64,
    /// Default asset.
    pub asset: &'a str,
    /// Order currency.
    pub currency: &'a str,
    /// Order amount, decimal text.
    pub amount: &'a str,
    /// Payment network.
    pub network: &'a str,
    /// The PSP's order id.
    pub external_reference: &'a str,
    /// Canonical now.
    pub now_text: &'a str,
    /// The lowest id it may get ([`first_id`]).
    pub first_id: i64,
}

/// The lowest id a new payment gets where its institution's money lives: D1's ids are one
/// sequence from 1; an institution's object gives its new payments ids from the institution's
/// id times 2^32 up (below 2^53 for any institution id under 2^21), after the ids its moved
/// rows kept, so a payment id stays unique across institutions wherever it was made, and id
/// order stays creation order in each store.
pub fn first_id(store: super::MoneyStore, institution: InstitutionId) -> i64 {
    match store {
        super::MoneyStore::D1 => 1,
        super::MoneyStore::Object => institution.0 << 32,
    }
}

/// The id of a row a batch's statement created (`RETURNING id`).
#[derive(Debug, Deserialize)]
pub struct CreatedId {
    /// Its id.
    pub id: i64,
}

/// Creates a pending transaction and answers its id, when `within` holds (the attempt's counts,
/// taken earlier in the same batch, are within their limits, and the facts its session was made
/// on still hold: [`super::sessions::Admitted`]; otherwise it inserts nothing and answers no
/// row); the next statement of the batch finds it with `last_insert_rowid()`.
pub fn insert_pending(
    p: &NewPayment<'_>,
    within: &dyn super::Condition,
) -> DbResult<Returning<CreatedId>> {
    let (condition, guard) = within.sql(10);
    let mut params: Vec<Value> = vec![
        p.institution_id.into(),
        p.merchant_id.into(),
        p.asset.into(),
        p.currency.into(),
        p.amount.into(),
        p.network.into(),
        p.external_reference.into(),
        p.now_text.into(),
        p.first_id.into(),
    ];
    params.extend(guard);
    stmt(
        // created_at never goes below the newest row's, so id order stays creation order even if
        // clocks disagree (the list queries rely on it); the id is the next after the newest,
        // and at least the store's first ([`first_id`]).
        &format!(
            "INSERT INTO transactions (id, institution_id, merchant_id, status, raw_status, \
             asset, currency, amount_expected, network_payment, external_reference, created_at, \
             updated_at) \
             SELECT max(coalesce((SELECT max(id) FROM transactions), 0) + 1, ?9), \
             ?1, ?2, 'pending', 'pending', ?3, ?4, ?5, ?6, ?7, \
             max(?8, coalesce((SELECT max(created_at) FROM transactions), ?8)), ?8 \
             WHERE {condition} RETURNING id"
        ),
        &params,
    )
    .map(Returning::new)
}

/// Changes the way to pay of a transaction still pending at the version read (the session's
/// statement follows it in the batch, guarded on this one having written).
pub fn change_method(
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<i64>,
    version: i64,
    asset: &str,
    network: &str,
    now_text: &str,
) -> DbResult<Stmt> {
    stmt(
        "UPDATE transactions SET asset = ?1, network_payment = ?2, updated_at = ?3, \
         version = version + 1 WHERE id = ?4 AND institution_id = ?6 AND version = ?5 \
         AND raw_status = 'pending' AND screening IS NULL",
        &[
            asset.into(),
            network.into(),
            now_text.into(),
            id.into(),
            version.into(),
            institution_id.into(),
        ],
    )
}

/// Pending transactions whose checkout has ended with no transfer seen on chain (those the chain
/// watcher credits or holds), and whose every watched address was read without error after the
/// end and its grace (so the end is known), at most `limit`. Only open checkouts are
/// pending, and `transactions_pending` indexes exactly those, so the scan stays small without a
/// look-back window that could strand an old session.
pub async fn pending_past_end(db: &Db, now: i64, limit: i64) -> DbResult<Vec<Scoped<i64>>> {
    #[derive(Deserialize)]
    struct Id {
        institution_id: InstitutionId,
        id: i64,
    }
    // In D1, only institutions whose money is there (`MONEY_IN_D1`).
    let d1 = if db.is_object() {
        String::new()
    } else {
        format!("AND t.{MONEY_IN_D1}")
    };
    let rows: Vec<Id> = all(
        db,
        &format!(
            "SELECT t.institution_id, t.id FROM transactions t INDEXED BY transactions_pending \
         JOIN checkout_sessions s ON s.transaction_id = t.id \
         AND s.institution_id = t.institution_id \
         WHERE t.raw_status = 'pending' AND s.expires_at <= ?1 {d1} \
         AND NOT EXISTS (SELECT 1 FROM chain_transfers c WHERE c.session_id = s.id \
         AND c.institution_id = s.institution_id AND c.kind = 'payment') \
         AND NOT EXISTS (SELECT 1 FROM deposit_watches w WHERE w.session_id = s.id \
         AND w.institution_id = s.institution_id \
         AND (w.node_error IS NOT NULL OR w.read_at < s.expires_at + ?3)) \
         ORDER BY t.id LIMIT ?2"
        ),
        &[now.into(), limit.into(), watches::END_GRACE_SECONDS.into()],
    )
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Scoped::new(r.institution_id, r.id))
        .collect())
}

/// A payment as the lifecycle needs it and as the API shows it, from one read (one snapshot:
/// the version the change is guarded on is the version the event's data was built from).
#[derive(Debug)]
pub struct PaymentRow {
    /// Owning institution.
    pub institution_id: InstitutionId,
    /// Amount refunded so far.
    pub refunded: Option<Decimal>,
    /// Row version: every write is guarded on the one it read.
    pub version: i64,
    /// When its checkout ends (Unix seconds), for a transaction made by checkout.
    pub expires_at: Option<i64>,
    /// Whether it was paid on chain to its watched deposit address
    /// ([`watches::CREDITED_ON_CHAIN`]): its money is in custody, so it settles and refunds on
    /// chain, never by a simulated control.
    pub paid_on_chain: bool,
    /// The transaction exactly as the partner API shows it.
    pub transaction: Transaction,
}

/// [`PaymentRow`] as D1 returns it.
#[derive(Debug, Deserialize)]
struct PaymentColumns {
    institution_id: InstitutionId,
    amount_refunded: Option<String>,
    version: i64,
    expires_at: Option<i64>,
    #[serde(deserialize_with = "super::flag")]
    paid_on_chain: bool,
    #[serde(flatten)]
    view: Row,
}

/// The books' condition that transaction `id` (of `institution_id`) is at `version` (its
/// change was written).
pub fn at_version(
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<i64>,
    version: i64,
) -> When {
    When::holds(
        "(SELECT version FROM transactions WHERE id = ?1 AND institution_id = ?3) = ?2",
        vec![id.into(), version.into(), institution_id.into()],
    )
}

/// The transaction's lifecycle state and API view, in one round trip; `None` when it is not
/// `institution_id`'s.
pub async fn payment(
    db: &Db,
    institution_id: InstitutionId,
    id: i64,
) -> DbResult<Option<PaymentRow>> {
    let sql = format!(
        "SELECT {COLUMNS}, institution_id, amount_refunded, version, \
         (SELECT expires_at FROM checkout_sessions WHERE transaction_id = transactions.id \
          AND institution_id = transactions.institution_id) AS expires_at, \
         EXISTS (SELECT 1 FROM deposit_watches w WHERE w.transaction_id = transactions.id \
         AND w.institution_id = transactions.institution_id \
         AND w.network = transactions.network_payment AND w.asset = transactions.asset AND {}) \
         AS paid_on_chain FROM transactions WHERE id = ?1 AND institution_id = ?2",
        watches::CREDITED_ON_CHAIN
    );
    let Some(row) = first::<PaymentColumns>(db, &sql, &[id.into(), institution_id.into()]).await?
    else {
        return Ok(None);
    };
    let refunded = row
        .amount_refunded
        .map(|v| Decimal::from_str(&v))
        .transpose()
        .map_err(|_| DbError::bad_row(format!("transaction {id}: bad amount_refunded")))?;
    Ok(Some(PaymentRow {
        institution_id: row.institution_id,
        refunded,
        version: row.version,
        expires_at: row.expires_at,
        paid_on_chain: row.paid_on_chain,
        transaction: row.view.into_transaction()?,
    }))
}

/// Hashes and time stamped on a change.
pub struct Stamps<'a> {
    /// Canonical now.
    pub now_text: &'a str,
    /// Source hash, on payment.
    pub source_hash: Option<&'a str>,
    /// Settlement hash, on settlement.
    pub settlement_hash: Option<&'a str>,
    /// Bridge hash, on a bridged settlement.
    pub bridge_hash: Option<&'a str>,
    /// The asset and network a payment found on chain came in, when they are not the checkout's
    /// current way to pay (the customer switched after paying an earlier address).
    pub paid_with: Option<(&'a str, &'a str)>,
    /// The rate a payment's late money was valued at (decimal text) and its source.
    pub late_rate: Option<(String, &'a str)>,
    /// Its screening state, when the change holds it or decides its review: `held`,
    /// `released` or `blocked`.
    pub screening: Option<&'static str>,
}

/// A lifecycle change as one UPDATE guarded by the row version it was computed from (and by
/// `also`, when given): if anything wrote the row since (a racing refund, a settlement), it
/// changes nothing. (The outbox statements that follow it in the batch check `changes() = 1`.)
pub fn apply_change(
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<i64>,
    version: i64,
    change: &Change,
    stamps: &Stamps<'_>,
    also: Option<&dyn super::Condition>,
) -> DbResult<Stmt> {
    let mut sets: Vec<(&str, Value)> = Vec::new();
    if let Some(raw) = change.raw_status {
        // Held is stored as pending with the screening that holds it (migration 0038).
        let stored = if raw == RawStatus::Held {
            RawStatus::Pending
        } else {
            raw
        };
        sets.push(("raw_status", stored.as_str().into()));
        sets.push(("status", raw.normalized().as_str().into()));
    }
    if let Some(screening) = stamps.screening {
        sets.push(("screening", screening.into()));
    }
    let mut text = |column: &'static str, value: Option<String>| {
        if let Some(value) = value {
            sets.push((column, Value::Text(value)));
        }
    };
    text(
        "amount_status",
        change.amount_status.map(|s| s.as_str().to_owned()),
    );
    text("amount_gross", change.gross.map(|d| d.to_string()));
    text("psp_fee", change.psp_fee.map(|d| d.to_string()));
    text("gas_fee", change.gas_fee.map(|d| d.to_string()));
    text("bridge_fee", change.bridge_fee.map(|d| d.to_string()));
    text("amount_net", change.net.map(|d| d.to_string()));
    text("network_settlement", change.settlement_network.clone());
    text("amount_refunded", change.refunded.map(|d| d.to_string()));
    text("tx_hash_source", stamps.source_hash.map(str::to_owned));
    text(
        "tx_hash_settlement",
        stamps.settlement_hash.map(str::to_owned),
    );
    text("tx_hash_bridge", stamps.bridge_hash.map(str::to_owned));
    if let Some((asset, network)) = stamps.paid_with {
        text("asset", Some(asset.to_owned()));
        text("network_payment", Some(network.to_owned()));
    }
    if let Some((rate, source)) = &stamps.late_rate {
        text("late_rate", Some(rate.clone()));
        text("late_rate_source", Some((*source).to_owned()));
    }
    if change.gross.is_some() {
        text("paid_at", Some(stamps.now_text.to_owned()));
    }
    text("updated_at", Some(stamps.now_text.to_owned()));

    let mut params: Vec<Value> = Vec::new();
    let assignments: Vec<String> = sets
        .into_iter()
        .map(|(column, value)| {
            params.push(value);
            format!("{column} = ?{}", params.len())
        })
        .collect();
    params.push(id.into());
    params.push(institution_id.into());
    params.push(version.into());
    let (also, more) = match also {
        Some(condition) => condition.sql(params.len() + 1),
        None => ("1".to_owned(), Vec::new()),
    };
    let sql = format!(
        "UPDATE transactions SET {}, version = version + 1 WHERE id = ?{} \
         AND institution_id = ?{} AND version = ?{} AND {also}",
        assignments.join(", "),
        params.len() - 2,
        params.len() - 1,
        params.len()
    );
    params.extend(more);
    stmt(&sql, &params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::sessions::Always;
    use crate::db::MoneyStore;

    /// A new payment's id: the next after the newest, never below its store's first; an
    /// object's ids sit above every id D1 gives and every other institution's object's.
    #[test]
    fn payment_ids_stay_unique_across_institutions_and_in_creation_order() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        xtask::localdb::apply_migrations(&conn).unwrap();
        conn.execute_batch(
            "PRAGMA foreign_keys = OFF; \
             INSERT INTO transactions (id, institution_id, merchant_id, status, raw_status, \
             created_at, updated_at) VALUES (41, 3, 1, 'paid', 'paid', '2026-01-01T00:00:00Z', '')",
        )
        .unwrap();
        let insert = |store: MoneyStore| -> i64 {
            let payment = NewPayment {
                institution_id: InstitutionId(3),
                merchant_id: 1,
                asset: "USDC",
                currency: "EUR",
                amount: "1.00",
                network: "polygon",
                external_reference: "r",
                now_text: "2026-01-02T00:00:00Z",
                first_id: first_id(store, InstitutionId(3)),
            };
            let statement =
                crate::sql::Statement::statement(insert_pending(&payment, &Always).unwrap());
            let params: Vec<&dyn rusqlite::ToSql> = statement
                .params()
                .iter()
                .map(|v| v as &dyn rusqlite::ToSql)
                .collect();
            conn.query_row(statement.sql(), params.as_slice(), |r| r.get(0))
                .unwrap()
        };
        assert_eq!(insert(MoneyStore::D1), 42);
        let held = insert(MoneyStore::Object);
        assert_eq!(held, 3 << 32);
        assert_eq!(insert(MoneyStore::Object), (3 << 32) + 1);
        assert!(first_id(MoneyStore::Object, InstitutionId((1 << 21) - 1)) < 1 << 53);
        assert!(first_id(MoneyStore::Object, InstitutionId(4)) > held + 1);
    }
}
