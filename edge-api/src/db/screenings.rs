//! Sanctions screening's tables (migration 0037): the operator's own list of sanctioned
//! addresses (`sanctioned_addresses`, the directory's) and every screening decision
//! (`screenings`, in the store of what it gated: D1's or an institution's object for money, D1
//! for a settlement wallet). Written only here.

use serde::{Deserialize, Serialize};
use shared_types::ids::{InstitutionId, Scoped};

use super::{all, batch, first, run, stmt, Db, DbResult, Stmt, Value};

/// Most entries one load of the operator's list carries.
pub const MAX_LOAD: usize = 5_000;

/// What the operator's list says of one address: the first entry naming it that is not taken
/// off, and the list's version (the time of its last change, 0 when it never had an entry).
#[derive(Debug, Clone, Deserialize)]
pub struct ListRead {
    /// The version of the whole list when it was read.
    pub version: i64,
    /// The list that names the address, if any.
    pub source: Option<String>,
    /// Its entry.
    pub entry: Option<String>,
    /// When the list published it.
    pub listed_on: Option<String>,
}

/// What the operator's list says of `address` (lower case), in one statement.
pub async fn list_says(db: &Db, address: &str) -> DbResult<ListRead> {
    let read: Option<ListRead> = first(
        db,
        "SELECT (SELECT COALESCE(MAX(MAX(added_at, COALESCE(removed_at, 0))), 0) \
                 FROM sanctioned_addresses) AS version, \
                l.source, l.entry, l.listed_on \
         FROM (SELECT 1) LEFT JOIN (SELECT source, entry, listed_on FROM sanctioned_addresses \
             WHERE address = ?1 AND removed_at IS NULL ORDER BY source LIMIT 1) AS l",
        &[address.into()],
    )
    .await?;
    Ok(read.unwrap_or(ListRead {
        version: 0,
        source: None,
        entry: None,
        listed_on: None,
    }))
}

pub use shared_types::screening::ListedEntry as ListEntry;

/// The list's entries, newest first, at most `limit`; those taken off too when `all`.
pub async fn entries(db: &Db, include_removed: bool, limit: i64) -> DbResult<Vec<ListEntry>> {
    all(
        db,
        "SELECT address, source, entry, listed_on, added_at, added_by, removed_at, removed_by \
         FROM sanctioned_addresses WHERE ?1 OR removed_at IS NULL \
         ORDER BY added_at DESC, source, address LIMIT ?2",
        &[i64::from(include_removed).into(), limit.into()],
    )
    .await
}

/// One address of a load.
#[derive(Debug, Clone, Deserialize)]
pub struct Loaded {
    /// Lower case.
    pub address: String,
    /// The entry naming it.
    pub entry: String,
}

/// What a load changed.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct LoadReport {
    /// Entries new to the list (or back on it).
    pub added: usize,
    /// Entries it had already.
    pub kept: usize,
    /// The source's entries absent from a load that replaces it, taken off.
    pub removed: usize,
}

/// Adds `entries` (at most [`MAX_LOAD`]) to the list under `source`, published `listed_on`, by
/// `who` at `now`, in one batch; with `replace`, the source's entries that are not among them
/// are taken off in the same batch. An entry already there is kept as it was (its first date
/// stands); one taken off before is put back.
pub async fn load(
    db: &Db,
    (source, listed_on): (&str, &str),
    entries: &[Loaded],
    replace: bool,
    (who, now): (&str, i64),
) -> DbResult<LoadReport> {
    let listed: Vec<String> = super::strings(
        db,
        "SELECT address FROM sanctioned_addresses WHERE source = ?1 AND removed_at IS NULL",
        &[source.into()],
    )
    .await?;
    let listed: std::collections::BTreeSet<&str> = listed.iter().map(String::as_str).collect();
    let mut report = LoadReport::default();
    let mut statements: Vec<Stmt> = Vec::with_capacity(entries.len() + 2);
    for e in entries {
        if listed.contains(e.address.as_str()) {
            report.kept += 1;
            continue;
        }
        report.added += 1;
        statements.push(stmt(
            "INSERT INTO sanctioned_addresses (address, source, entry, listed_on, added_at, \
             added_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
             ON CONFLICT (address, source) DO UPDATE SET entry = excluded.entry, \
             listed_on = excluded.listed_on, added_at = excluded.added_at, \
             added_by = excluded.added_by, removed_at = NULL, removed_by = NULL",
            &[
                e.address.as_str().into(),
                source.into(),
                e.entry.as_str().into(),
                listed_on.into(),
                now.into(),
                who.into(),
            ],
        )?);
    }
    if replace {
        let keep: std::collections::BTreeSet<&str> =
            entries.iter().map(|e| e.address.as_str()).collect();
        let gone: Vec<&str> = listed.difference(&keep).copied().collect();
        report.removed = gone.len();
        for address in gone {
            statements.push(take_off(address, source, (who, now))?);
        }
    }
    batch(db, statements).await?;
    Ok(report)
}

/// Takes `address` off `source`'s list, by `who` at `now`: whether it was on it.
pub async fn remove(
    db: &Db,
    address: &str,
    source: &str,
    (who, now): (&str, i64),
) -> DbResult<bool> {
    Ok(run(db, TAKE_OFF, &take_off_params(address, source, (who, now))).await? == 1)
}

const TAKE_OFF: &str = "UPDATE sanctioned_addresses SET removed_at = ?3, removed_by = ?4 \
                        WHERE address = ?1 AND source = ?2 AND removed_at IS NULL";

fn take_off_params(address: &str, source: &str, (who, now): (&str, i64)) -> [Value; 4] {
    [address.into(), source.into(), now.into(), who.into()]
}

fn take_off(address: &str, source: &str, (who, now): (&str, i64)) -> DbResult<Stmt> {
    stmt(TAKE_OFF, &take_off_params(address, source, (who, now)))
}

/// What a screening gated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    /// A payment's sender.
    Payment,
    /// A settlement wallet, when it was set.
    Wallet,
    /// A payout's wallet, before it was signed.
    Payout,
    /// A refund's address.
    Refund,
    /// A return's address.
    Return,
    /// A merchant's top-up's sender.
    Topup,
}

impl Subject {
    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Subject::Payment => "payment",
            Subject::Wallet => "wallet",
            Subject::Payout => "payout",
            Subject::Refund => "refund",
            Subject::Return => "return",
            Subject::Topup => "topup",
        }
    }
}

/// A screening decision to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewScreening {
    /// Its id (`scr_…`).
    pub id: String,
    /// Whose money or wallet it was.
    pub institution_id: InstitutionId,
    /// What it gated.
    pub subject: Subject,
    /// Its id.
    pub subject_id: String,
    /// The network.
    pub network: String,
    /// The address, lower case.
    pub address: String,
    /// Whether a list names it.
    pub listed: bool,
    /// The oracle read and the block it answered at.
    pub oracle: Option<(String, u64)>,
    /// The operator's list's version.
    pub list_version: i64,
    /// The list that names it, and its entry.
    pub listed_by: Option<String>,
    /// When.
    pub screened_at: i64,
}

/// The statement storing `s`, to commit with what it gates.
pub fn insert(s: &NewScreening) -> DbResult<Stmt> {
    insert_as(
        s,
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        None,
    )
}

/// The statement storing `s`, the decision about a refund or return whose id is its
/// `subject_id`, written only if that refund is stored (in the same batch, before it).
pub fn insert_for_refund(s: &NewScreening) -> DbResult<Stmt> {
    insert_as(
        s,
        "SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12 \
         WHERE EXISTS (SELECT 1 FROM refunds WHERE id = ?4 AND institution_id = ?2)",
        None,
    )
}

/// Stores `s` alone: a refusal's decision, nothing else being written.
pub async fn record(db: &Db, s: &NewScreening) -> DbResult<()> {
    batch(db, vec![insert(s)?]).await
}

/// The statement storing `s`, a decision about a sender of payment `transaction_id`, written
/// only if the payment's guarded change to `version` applied in the same batch (a credit or a
/// hold that lost its race records nothing).
pub fn insert_with_payment(s: &NewScreening, version: i64) -> DbResult<Stmt> {
    insert_as(
        s,
        "SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12 \
         WHERE (SELECT version FROM transactions WHERE id = CAST(?4 AS INTEGER) \
             AND institution_id = ?2) = ?13",
        Some(version.into()),
    )
}

/// The statement storing `s` unless the same decision (subject, address, result, list) is
/// stored already: a payout held for a listed wallet is screened again at every run, and its
/// decision is recorded once.
pub fn insert_once(s: &NewScreening) -> DbResult<Stmt> {
    insert_as(
        s,
        "SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12 \
         WHERE NOT EXISTS (SELECT 1 FROM screenings WHERE institution_id = ?2 AND subject = ?3 \
             AND subject_id = ?4 AND address = ?6 AND result = ?7 AND listed_by IS ?11)",
        None,
    )
}

fn insert_as(s: &NewScreening, rows: &str, extra: Option<Value>) -> DbResult<Stmt> {
    let (oracle, block) = match &s.oracle {
        Some((address, block)) => (
            Value::from(address.as_str()),
            Value::from(i64::try_from(*block).unwrap_or(i64::MAX)),
        ),
        None => (Value::Null, Value::Null),
    };
    let mut params: Vec<Value> = vec![
        s.id.as_str().into(),
        s.institution_id.0.into(),
        s.subject.as_str().into(),
        s.subject_id.as_str().into(),
        s.network.as_str().into(),
        s.address.as_str().into(),
        if s.listed { "listed" } else { "clear" }.into(),
        oracle,
        block,
        s.list_version.into(),
        s.listed_by.as_deref().into(),
        s.screened_at.into(),
    ];
    params.extend(extra);
    stmt(
        &format!(
            "INSERT INTO screenings (id, institution_id, subject, subject_id, network, address, \
             result, oracle, oracle_block, list_version, listed_by, screened_at) {rows}"
        ),
        &params,
    )
}

/// Opens an outage of `network`'s oracle for `reason` at `now`, unless one is open: whether
/// this call opened it (then, and only then, the operator is told).
pub async fn outage_opened(db: &Db, network: &str, reason: &str, now: i64) -> DbResult<bool> {
    Ok(run(
        db,
        "INSERT OR IGNORE INTO screening_outages (network, started_at, reason, email_status) \
         VALUES (?1, ?2, ?3, 'pending')",
        &[network.into(), now.into(), reason.into()],
    )
    .await?
        == 1)
}

/// Records what became of the e-mail about `network`'s open outage.
pub async fn outage_told(db: &Db, network: &str, email_status: &str) -> DbResult<()> {
    run(
        db,
        "UPDATE screening_outages SET email_status = ?2 WHERE network = ?1 AND ended_at IS NULL",
        &[network.into(), email_status.into()],
    )
    .await
    .map(drop)
}

/// The networks whose oracle has an open outage, with when it started.
pub async fn open_outages(db: &Db) -> DbResult<Vec<Outage>> {
    all(
        db,
        "SELECT network, started_at, reason, email_status FROM screening_outages \
         WHERE ended_at IS NULL ORDER BY network",
        &[],
    )
    .await
}

/// An open outage.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Outage {
    /// The network.
    pub network: String,
    /// Since when (Unix seconds).
    pub started_at: i64,
    /// Why its oracle could not be read.
    pub reason: String,
    /// What became of the operator's e-mail.
    pub email_status: String,
}

/// Ends `network`'s open outage at `now`: whether one was open.
pub async fn outage_ended(db: &Db, network: &str, now: i64) -> DbResult<bool> {
    Ok(run(
        db,
        "UPDATE screening_outages SET ended_at = ?2 WHERE network = ?1 AND ended_at IS NULL",
        &[network.into(), now.into()],
    )
    .await?
        == 1)
}

/// Money held at one deposit address of a held payment: what its release credits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldFunds {
    /// The payment's part (way to pay) it belongs to.
    pub part: usize,
    /// The deposit address, lower case.
    pub address: String,
    /// Base units, decimal text.
    pub units: String,
}

/// The review a held payment opens.
#[derive(Debug, Clone)]
pub struct NewReview {
    /// Whose payment.
    pub institution_id: InstitutionId,
    /// The payment.
    pub transaction_id: i64,
    /// Why it is held, in words an admin reads.
    pub reason: String,
    /// What is held at each address.
    pub held: Vec<HeldFunds>,
    /// When.
    pub opened_at: i64,
}

/// The statement opening `review`, written only if the payment's hold (its change to
/// `version`) applied in the same batch.
pub fn open_review(review: &NewReview, version: i64) -> DbResult<Stmt> {
    let held = serde_json::to_string(&review.held)
        .map_err(|e| super::DbError::bad_row(format!("held funds: {e}")))?;
    stmt(
        "INSERT INTO screening_reviews (transaction_id, institution_id, reason, held, opened_at) \
         SELECT ?1, ?2, ?3, ?4, ?5 \
         WHERE (SELECT version FROM transactions WHERE id = ?1 AND institution_id = ?2) = ?6",
        &[
            review.transaction_id.into(),
            review.institution_id.into(),
            review.reason.as_str().into(),
            held.into(),
            review.opened_at.into(),
            version.into(),
        ],
    )
}

/// The condition that the review of a payment is still undecided: what a decision's change is
/// guarded on.
pub struct Undecided(pub Scoped<i64>);

impl super::Condition for Undecided {
    fn sql(&self, first: usize) -> (String, Vec<Value>) {
        (
            format!(
                "EXISTS (SELECT 1 FROM screening_reviews WHERE transaction_id = ?{first} \
                 AND institution_id = ?{} AND decision IS NULL)",
                first + 1
            ),
            vec![self.0.id.into(), self.0.institution.into()],
        )
    }
}

/// An admin's decision on a payment held by its screening.
#[derive(Debug, Clone, Copy)]
pub struct Decision<'a> {
    /// Release it (credited as it would have been) or block it (failed, its money frozen).
    pub release: bool,
    /// Why, in the admin's words (required).
    pub note: &'a str,
    /// Who decided (the portal user's e-mail).
    pub by: &'a str,
}

/// The statement recording `decision` on the review of `payment` at `now`, written only if the
/// payment's change to `version` applied in the same batch, and only once.
pub fn decide_review(
    payment: Scoped<i64>,
    (decision, now): (&Decision<'_>, i64),
    version: i64,
) -> DbResult<Stmt> {
    stmt(
        "UPDATE screening_reviews SET decision = ?3, note = ?4, decided_by = ?5, \
         decided_at = ?6 WHERE transaction_id = ?1 AND institution_id = ?2 \
         AND decision IS NULL \
         AND (SELECT version FROM transactions WHERE id = ?1 AND institution_id = ?2) = ?7",
        &[
            payment.id.into(),
            payment.institution.into(),
            if decision.release {
                "released"
            } else {
                "blocked"
            }
            .into(),
            decision.note.into(),
            decision.by.into(),
            now.into(),
            version.into(),
        ],
    )
}

/// A review as the portal shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Review {
    /// The payment.
    pub transaction_id: i64,
    /// Why it is held.
    pub reason: String,
    /// What is held (JSON of [`HeldFunds`]).
    pub held: String,
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
    /// The payment's gross and currency.
    pub amount_gross: Option<String>,
    /// Its currency.
    pub currency: Option<String>,
    /// Its merchant.
    pub merchant_id: i64,
}

const REVIEW: &str = "SELECT r.transaction_id, r.reason, r.held, r.opened_at, r.decision, \
     r.note, r.decided_by, r.decided_at, t.amount_gross, t.currency, t.merchant_id \
     FROM screening_reviews r JOIN transactions t ON t.id = r.transaction_id \
     AND t.institution_id = r.institution_id";

/// The institution's reviews: undecided first (oldest first), then the decided (newest first),
/// at most `limit`.
pub async fn reviews(db: &Db, institution_id: InstitutionId, limit: i64) -> DbResult<Vec<Review>> {
    all(
        db,
        &format!(
            "{REVIEW} WHERE r.institution_id = ?1 \
             ORDER BY r.decision IS NOT NULL, \
             CASE WHEN r.decision IS NULL THEN r.opened_at ELSE -r.decided_at END LIMIT ?2"
        ),
        &[institution_id.into(), limit.into()],
    )
    .await
}

/// The review of payment `payment`, if it was ever held.
pub async fn review(db: &Db, payment: Scoped<i64>) -> DbResult<Option<Review>> {
    first(
        db,
        &format!("{REVIEW} WHERE r.transaction_id = ?1 AND r.institution_id = ?2"),
        &[payment.id.into(), payment.institution.into()],
    )
    .await
}

/// Whether a listed decision about `subject` `subject_id` of `institution` already names
/// `address` (lower case).
pub async fn listed_before(
    db: &Db,
    institution: InstitutionId,
    (subject, subject_id): (Subject, &str),
    address: &str,
) -> DbResult<bool> {
    #[derive(Deserialize)]
    struct Found {
        found: i64,
    }
    let row: Option<Found> = first(
        db,
        "SELECT EXISTS (SELECT 1 FROM screenings WHERE institution_id = ?1 AND subject = ?2 \
         AND subject_id = ?3 AND address = ?4 AND result = 'listed') AS found",
        &[
            institution.into(),
            subject.as_str().into(),
            subject_id.into(),
            address.into(),
        ],
    )
    .await?;
    Ok(row.is_some_and(|r| r.found == 1))
}

/// The screening decisions about payment `payment`'s senders, in order.
pub async fn of_payment(db: &Db, payment: Scoped<i64>) -> DbResult<Vec<Screening>> {
    all(
        db,
        &format!(
            "{SCREENING} WHERE institution_id = ?1 AND subject = 'payment' \
             AND subject_id = ?2 ORDER BY screened_at, id"
        ),
        &[payment.institution.into(), payment.id.to_string().into()],
    )
    .await
}

/// A stored screening decision, as the portal and the audit export show it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Screening {
    /// Its id.
    pub id: String,
    /// What it gated.
    pub subject: String,
    /// Its id.
    pub subject_id: String,
    /// The network.
    pub network: String,
    /// The address.
    pub address: String,
    /// `clear` or `listed`.
    pub result: String,
    /// The oracle read.
    pub oracle: Option<String>,
    /// The block it answered at.
    pub oracle_block: Option<i64>,
    /// The operator's list's version.
    pub list_version: i64,
    /// The list that names it.
    pub listed_by: Option<String>,
    /// When (Unix seconds).
    pub screened_at: i64,
}

const SCREENING: &str = "SELECT id, subject, subject_id, network, address, result, oracle, \
     oracle_block, list_version, listed_by, screened_at FROM screenings";

/// The institution's screening decisions from `from` to before `to` (Unix seconds), oldest
/// first, at most `limit`: a settlement wallet's (D1's) when `wallets`, the others otherwise.
pub async fn of_institution(
    db: &Db,
    institution_id: InstitutionId,
    (from, to): (i64, i64),
    wallets: bool,
    limit: i64,
) -> DbResult<Vec<Screening>> {
    all(
        db,
        &format!(
            "{SCREENING} WHERE institution_id = ?1 AND screened_at >= ?2 AND screened_at < ?3 \
             AND (subject = 'wallet') = (?4 = 1) ORDER BY screened_at, id LIMIT ?5"
        ),
        &[
            institution_id.into(),
            from.into(),
            to.into(),
            i64::from(wallets).into(),
            limit.into(),
        ],
    )
    .await
}

/// The screening decisions about the senders of every payment the institution's screening
/// held (the queue's evidence), in one statement.
pub async fn of_reviews(db: &Db, institution_id: InstitutionId) -> DbResult<Vec<Screening>> {
    all(
        db,
        &format!(
            "{SCREENING} WHERE institution_id = ?1 AND subject = 'payment' AND subject_id IN \
             (SELECT CAST(transaction_id AS TEXT) FROM screening_reviews \
              WHERE institution_id = ?1) ORDER BY screened_at, id"
        ),
        &[institution_id.into()],
    )
    .await
}

/// The screening decisions about the senders of every top-up the institution's screening held
/// (the queue's evidence; each names its transfer, `tx_hash:log_index`), in one statement.
pub async fn of_topup_reviews(db: &Db, institution_id: InstitutionId) -> DbResult<Vec<Screening>> {
    all(
        db,
        &format!(
            "{SCREENING} WHERE institution_id = ?1 AND subject = 'topup' AND subject_id IN \
             (SELECT tx_hash || ':' || log_index FROM topup_reviews WHERE institution_id = ?1) \
             ORDER BY screened_at, id"
        ),
        &[institution_id.into()],
    )
    .await
}

/// The institution's reviews decided from `from` to before `to` (Unix seconds).
pub async fn decided_between(
    db: &Db,
    institution_id: InstitutionId,
    (from, to): (i64, i64),
) -> DbResult<Vec<Review>> {
    all(
        db,
        &format!(
            "{REVIEW} WHERE r.institution_id = ?1 AND r.decided_at >= ?2 AND r.decided_at < ?3 \
             ORDER BY r.decided_at"
        ),
        &[institution_id.into(), from.into(), to.into()],
    )
    .await
}
