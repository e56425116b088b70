//! The books in D1: `ledger_accounts` and `ledger_transfers`, written only here. See migration
//! 0015 and `shared_types::ledger` for the rules.
//!
//! Posting is read → decide → guarded write: [`Book::load`] reads the accounts a change
//! touches (with their versions), the transfers already posted and the pending ones still open;
//! [`Book::post`] applies the rules in memory (limits included, with 128-bit sums: amounts
//! are decimal text in D1); [`Book::statements`] gives the statements that go into the same
//! batch as the state change they record. Each transfer's insert carries a guard that is NULL
//! (and fails the whole batch) unless its accounts are still at the versions the posting was
//! computed on, so two racing postings can never both land on the same figures.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use serde::Deserialize;
use shared_types::ids::{InstitutionId, Scoped};
use shared_types::ledger::{Books, Code, Kind, Ledger, Open, Phase, Refusal, Totals, Transfer};

use super::{all, stmt, Db, DbError, DbResult, Stmt, Value};

/// An account a posting may create: what it is, and what its ledger's amounts are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Its ledger.
    pub ledger: Ledger,
    /// The asset's symbol.
    pub asset: String,
    /// The asset's decimals.
    pub decimals: u32,
    /// Its kind.
    pub kind: Kind,
    /// Its owner (address, merchant id or institution id), `""` for none.
    pub owner: String,
    /// The merchant's institution (merchant accounts).
    pub institution_id: Option<InstitutionId>,
}

impl Account {
    /// The account of `kind` owned by `owner` in `ledger` of `asset` (`decimals`).
    pub fn new(ledger: &Ledger, (asset, decimals): (&str, u32), kind: Kind, owner: &str) -> Self {
        Account {
            ledger: ledger.clone(),
            asset: asset.to_owned(),
            decimals,
            kind,
            owner: owner.to_owned(),
            institution_id: None,
        }
    }

    /// The same, of the merchant's institution.
    pub fn of_institution(mut self, institution_id: InstitutionId) -> Self {
        self.institution_id = Some(institution_id);
        self
    }

    /// Its id.
    pub fn id(&self) -> String {
        self.ledger.account(self.kind, &self.owner)
    }
}

#[derive(Deserialize)]
struct AccountRow {
    id: String,
    kind: String,
    debits_posted: String,
    credits_posted: String,
    debits_pending: String,
    credits_pending: String,
    debt_limit: String,
    version: i64,
}

fn units(text: &str) -> DbResult<u128> {
    u128::from_str(text).map_err(|_| DbError::bad_row(format!("{text} is not an amount")))
}

impl AccountRow {
    fn totals(&self) -> DbResult<(Kind, Totals)> {
        let kind = Kind::parse(&self.kind)
            .ok_or_else(|| DbError::bad_row(format!("{} is not an account kind", self.kind)))?;
        Ok((
            kind,
            Totals {
                debits_posted: units(&self.debits_posted)?,
                credits_posted: units(&self.credits_posted)?,
                debits_pending: units(&self.debits_pending)?,
                credits_pending: units(&self.credits_pending)?,
                debt_limit: units(&self.debt_limit)?,
            },
        ))
    }
}

/// A stored transfer.
#[derive(Debug, Clone, Deserialize)]
pub struct TransferRow {
    /// Its id.
    pub id: String,
    /// Posting order.
    pub seq: i64,
    /// The account debited.
    pub debit_account: String,
    /// The account credited.
    pub credit_account: String,
    /// Base units (decimal text).
    pub amount: String,
    /// What it records.
    pub code: String,
    /// single, pending, post or void.
    pub phase: String,
    /// The pending transfer a post or void ends.
    pub pending_id: Option<String>,
    /// The payment.
    pub transaction_id: Option<i64>,
    /// The settlement, refund, sweep or chain transaction.
    pub reference: String,
    /// Unix seconds.
    pub created_at: i64,
}

impl TransferRow {
    /// As the rules see it.
    pub fn transfer(&self) -> DbResult<Transfer> {
        let code = Code::parse(&self.code)
            .ok_or_else(|| DbError::bad_row(format!("{} is not a transfer code", self.code)))?;
        let pending = || {
            self.pending_id
                .clone()
                .ok_or_else(|| DbError::bad_row(format!("{} ends no pending transfer", self.id)))
        };
        let phase = match self.phase.as_str() {
            "single" => Phase::Single,
            "pending" => Phase::Pending,
            "post" => Phase::Post(pending()?),
            "void" => Phase::Void(pending()?),
            other => return Err(DbError::bad_row(format!("{other} is not a phase"))),
        };
        Ok(Transfer {
            id: self.id.clone(),
            debit: self.debit_account.clone(),
            credit: self.credit_account.clone(),
            amount: units(&self.amount)?,
            code,
            phase,
            transaction_id: self.transaction_id,
            reference: self.reference.clone(),
        })
    }
}

const TRANSFER_COLUMNS: &str = "t.id, t.seq, t.debit_account, t.credit_account, t.amount, \
     t.code, t.phase, t.pending_id, t.transaction_id, t.reference, t.created_at";

/// A JSON array of `ids`, for `json_each`.
fn id_list(ids: &[String]) -> Value {
    Value::Text(serde_json::to_string(ids).unwrap_or_else(|_| "[]".to_owned()))
}

/// The pending transfers with `reference` (a settlement's transaction, a refund) that no post
/// or void has ended yet.
pub async fn open_of(db: &Db, reference: &str) -> DbResult<Vec<Transfer>> {
    let rows: Vec<TransferRow> = all(
        db,
        &format!(
            "SELECT {TRANSFER_COLUMNS} FROM ledger_transfers t WHERE t.reference = ?1 \
             AND t.phase = 'pending' AND NOT EXISTS (SELECT 1 FROM ledger_transfers e \
             WHERE e.pending_id = t.id) ORDER BY t.seq"
        ),
        &[reference.into()],
    )
    .await?;
    rows.iter().map(TransferRow::transfer).collect()
}

/// The condition a posting's transfers are written under (besides their own guard): the state
/// change they record happened. SQL over `?1`, `?2`, ... of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct When {
    sql: String,
    params: Vec<Value>,
}

impl When {
    /// Always (the posting is the whole change, or the batch fails whole without it).
    pub fn always() -> Self {
        When {
            sql: "1".to_owned(),
            params: Vec::new(),
        }
    }

    /// When `sql` (with its own `?1`, `?2`, ...) holds.
    pub fn holds(sql: &str, params: Vec<Value>) -> Self {
        When {
            sql: sql.to_owned(),
            params,
        }
    }

    /// The SQL with its placeholders moved past the first `offset` parameters.
    fn shifted(&self, offset: usize) -> String {
        let mut out = String::with_capacity(self.sql.len() + 8);
        let mut chars = self.sql.chars().peekable();
        while let Some(c) = chars.next() {
            out.push(c);
            if c == '?' {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if let Ok(n) = digits.parse::<usize>() {
                    out.push_str(&(n + offset).to_string());
                } else {
                    out.push_str(&digits);
                }
            }
        }
        out
    }
}

/// The accounts a change touches, as read, and what it posts.
pub struct Book {
    books: Books,
    /// Each account's version as read (0 for one not yet stored).
    read_versions: BTreeMap<String, i64>,
    /// Accounts not stored yet: created by the batch.
    new: BTreeMap<String, Account>,
    /// Transfers already posted, of those asked about.
    done: BTreeSet<String>,
    /// What this change posts, each with its accounts' versions before it and their totals
    /// after it.
    posted: Vec<Posted>,
}

struct Posted {
    transfer: Transfer,
    before: (i64, i64),
    after: (Totals, Totals),
}

impl Book {
    /// Reads `accounts` (those missing are created with the posting), whether the transfers
    /// `ids` are already posted, and the pending transfers `open` still unended.
    pub async fn load(
        db: &Db,
        accounts: &[Account],
        ids: &[String],
        open: &[String],
    ) -> DbResult<Book> {
        let wanted: Vec<String> = accounts.iter().map(Account::id).collect();
        let rows: Vec<AccountRow> = all(
            db,
            "SELECT id, kind, debits_posted, credits_posted, debits_pending, credits_pending, \
             debt_limit, version FROM ledger_accounts \
             WHERE id IN (SELECT value FROM json_each(?1))",
            &[id_list(&wanted)],
        )
        .await?;
        let mut book = Book {
            books: Books::default(),
            read_versions: BTreeMap::new(),
            new: BTreeMap::new(),
            done: BTreeSet::new(),
            posted: Vec::new(),
        };
        for row in &rows {
            book.books.accounts.insert(row.id.clone(), row.totals()?);
            book.read_versions.insert(row.id.clone(), row.version);
        }
        for account in accounts {
            let id = account.id();
            if !book.books.accounts.contains_key(&id) {
                book.books
                    .accounts
                    .insert(id.clone(), (account.kind, Totals::default()));
                book.read_versions.insert(id.clone(), 0);
                book.new.insert(id, account.clone());
            }
        }
        let mut asked: Vec<String> = ids.to_vec();
        asked.extend(open.iter().cloned());
        if !asked.is_empty() {
            let rows: Vec<TransferRow> = all(
                db,
                &format!(
                    "SELECT {TRANSFER_COLUMNS} FROM ledger_transfers t \
                     WHERE t.id IN (SELECT value FROM json_each(?1)) \
                     OR t.pending_id IN (SELECT value FROM json_each(?1))"
                ),
                &[id_list(&asked)],
            )
            .await?;
            let ended: BTreeSet<&str> = rows
                .iter()
                .filter_map(|r| r.pending_id.as_deref())
                .collect();
            for row in &rows {
                book.done.insert(row.id.clone());
                if row.phase == "pending" && !ended.contains(row.id.as_str()) {
                    book.books.open.insert(
                        row.id.clone(),
                        Open {
                            debit: row.debit_account.clone(),
                            credit: row.credit_account.clone(),
                            amount: units(&row.amount)?,
                        },
                    );
                }
            }
        }
        Ok(book)
    }

    /// An account's totals as they stand in this book.
    pub fn totals(&self, id: &str) -> Option<(Kind, Totals)> {
        self.books.accounts.get(id).copied()
    }

    /// What `id` has available: its balance less what pending transfers reserve.
    pub fn available(&self, id: &str) -> i128 {
        self.totals(id).map_or(0, |(kind, t)| t.available(kind))
    }

    /// Reads the pending transfers of `reference` still open (a settlement's transaction, a
    /// refund), so they can be posted or voided; returns them.
    pub async fn open_of(&mut self, db: &Db, reference: &str) -> DbResult<Vec<Transfer>> {
        let open = open_of(db, reference).await?;
        for t in &open {
            self.done.insert(t.id.clone());
            self.books.open.insert(
                t.id.clone(),
                Open {
                    debit: t.debit.clone(),
                    credit: t.credit.clone(),
                    amount: t.amount,
                },
            );
        }
        Ok(open)
    }

    /// Posts `t` in memory unless it already is, within every limit; `Ok(false)`: it already
    /// was.
    pub fn post(&mut self, t: Transfer) -> Result<bool, Refusal> {
        self.post_with(t, true)
    }

    /// Posts `t`, a final fact of the chain, whatever the limits (see `Books::record`).
    pub fn record(&mut self, t: Transfer) -> Result<bool, Refusal> {
        self.post_with(t, false)
    }

    fn post_with(&mut self, t: Transfer, limits: bool) -> Result<bool, Refusal> {
        if self.done.contains(&t.id) {
            return Ok(false);
        }
        let version = |book: &Book, id: &str| {
            let read = book.read_versions.get(id).copied().unwrap_or(0);
            let written = book
                .posted
                .iter()
                .filter(|p| p.transfer.debit == id || p.transfer.credit == id)
                .count();
            read + i64::try_from(written).unwrap_or(i64::MAX)
        };
        let before = (version(self, &t.debit), version(self, &t.credit));
        if limits {
            self.books.apply(&t)?;
        } else {
            self.books.record(&t)?;
        }
        let after = (
            self.books.accounts[&t.debit].1,
            self.books.accounts[&t.credit].1,
        );
        self.done.insert(t.id.clone());
        self.posted.push(Posted {
            transfer: t,
            before,
            after,
        });
        Ok(true)
    }

    /// Posts every one of `transfers`, or none (the book is left as it was).
    pub fn post_all(&mut self, transfers: &[Transfer]) -> Result<(), Refusal> {
        let (books, done, count) = (self.books.clone(), self.done.clone(), self.posted.len());
        for t in transfers {
            if let Err(refusal) = self.post(t.clone()) {
                self.books = books;
                self.done = done;
                self.posted.truncate(count);
                return Err(refusal);
            }
        }
        Ok(())
    }

    /// The statements that write what was posted, under `when`: first the accounts to create
    /// (nothing if they exist by then), then each transfer (guarded on its accounts' versions)
    /// and its two accounts' new totals.
    pub fn statements(&self, when: &When, now: i64) -> DbResult<Vec<Stmt>> {
        let mut out = Vec::new();
        if self.posted.is_empty() {
            return Ok(out);
        }
        for (id, a) in &self.new {
            out.push(stmt(
                "INSERT INTO ledger_accounts (id, network, token, asset, decimals, kind, owner, \
                 institution_id, created_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9) ON CONFLICT (id) DO NOTHING",
                &[
                    id.as_str().into(),
                    a.ledger.network.as_str().into(),
                    a.ledger.token.as_str().into(),
                    a.asset.as_str().into(),
                    i64::from(a.decimals).into(),
                    a.kind.as_str().into(),
                    a.owner.as_str().into(),
                    a.institution_id.into(),
                    now.into(),
                ],
            )?);
        }
        let network = |account: &str| account.split(':').next().unwrap_or("").to_owned();
        let token = |account: &str| account.split(':').nth(1).unwrap_or("").to_owned();
        for p in &self.posted {
            let t = &p.transfer;
            let mut params: Vec<Value> = vec![
                t.id.as_str().into(),
                network(&t.debit).into(),
                token(&t.debit).into(),
                t.debit.as_str().into(),
                t.credit.as_str().into(),
                t.amount.to_string().into(),
                t.code.as_str().into(),
                t.phase.as_str().into(),
                t.phase.pending_id().into(),
                t.transaction_id.into(),
                t.reference.as_str().into(),
                p.before.0.into(),
                p.before.1.into(),
                now.into(),
            ];
            let offset = params.len();
            params.extend(when.params.iter().cloned());
            out.push(stmt(
                &format!(
                    "INSERT INTO ledger_transfers (id, seq, network, token, debit_account, \
                     credit_account, amount, code, phase, pending_id, transaction_id, reference, \
                     guard, created_at) \
                     SELECT ?1, (SELECT COALESCE(max(seq), 0) + 1 FROM ledger_transfers), ?2, ?3, \
                     ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, \
                     (SELECT 1 WHERE (SELECT version FROM ledger_accounts WHERE id = ?4) = ?12 \
                      AND (SELECT version FROM ledger_accounts WHERE id = ?5) = ?13), ?14 \
                     WHERE {}",
                    when.shifted(offset)
                ),
                &params,
            )?);
            for (account, version, totals) in [
                (&t.debit, p.before.0, p.after.0),
                (&t.credit, p.before.1, p.after.1),
            ] {
                out.push(stmt(
                    "UPDATE ledger_accounts SET debits_posted = ?3, credits_posted = ?4, \
                     debits_pending = ?5, credits_pending = ?6, version = version + 1, \
                     updated_at = ?7 \
                     WHERE id = ?1 AND version = ?2 \
                     AND EXISTS (SELECT 1 FROM ledger_transfers WHERE id = ?8)",
                    &[
                        account.as_str().into(),
                        version.into(),
                        totals.debits_posted.to_string().into(),
                        totals.credits_posted.to_string().into(),
                        totals.debits_pending.to_string().into(),
                        totals.credits_pending.to_string().into(),
                        now.into(),
                        t.id.as_str().into(),
                    ],
                )?);
            }
        }
        Ok(out)
    }
}

/// What a settlement's or a refund's transaction carries, as the books need it when it ends.
#[derive(Debug, Clone, Deserialize)]
pub struct Carried {
    /// Token contract or `native`.
    pub token: String,
    /// Asset symbol.
    pub symbol: String,
    /// Decimals.
    pub decimals: u32,
    /// The institution.
    pub institution_id: InstitutionId,
    /// The merchant.
    pub merchant_id: i64,
    /// For the return of money that reached a deposit after its payment was credited: that
    /// deposit address (its unallocated account pays it).
    #[serde(default)]
    pub from_address: Option<String>,
    /// A settlement held in its institution's object: that institution (the treasury posts
    /// only its half of what crosses, `shared_types::ledger::split`).
    #[serde(default)]
    pub held_by: Option<InstitutionId>,
}

impl Carried {
    /// The merchant, in its institution.
    pub fn owners(&self) -> Scoped<i64> {
        Scoped::new(self.institution_id, self.merchant_id)
    }
}

/// An account as a person reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct AccountView {
    /// Its id.
    pub id: String,
    /// Network.
    pub network: String,
    /// Token contract or `native`.
    pub token: String,
    /// Asset symbol.
    pub asset: String,
    /// Decimals.
    pub decimals: u32,
    /// Kind.
    pub kind: String,
    /// Owner (address, merchant id or institution id; `""` for none).
    pub owner: String,
    /// Debits posted (decimal text).
    pub debits_posted: String,
    /// Credits posted.
    pub credits_posted: String,
    /// Debits pending.
    pub debits_pending: String,
    /// Credits pending.
    pub credits_pending: String,
    /// Allowed debt.
    pub debt_limit: String,
}

impl AccountView {
    /// Its kind and totals.
    pub fn totals(&self) -> DbResult<(Kind, Totals)> {
        AccountRow {
            id: self.id.clone(),
            kind: self.kind.clone(),
            debits_posted: self.debits_posted.clone(),
            credits_posted: self.credits_posted.clone(),
            debits_pending: self.debits_pending.clone(),
            credits_pending: self.credits_pending.clone(),
            debt_limit: self.debt_limit.clone(),
            version: 0,
        }
        .totals()
    }
}

pub(crate) const VIEW_COLUMNS: &str = "id, network, token, asset, decimals, kind, owner, \
     debits_posted, credits_posted, debits_pending, credits_pending, debt_limit";

/// A merchant's accounts (one per network and asset it was ever paid in or allowed debt on), of
/// `institution_id`'s merchant.
pub async fn of_merchant(
    db: &Db,
    institution_id: InstitutionId,
    merchant_id: i64,
) -> DbResult<Vec<AccountView>> {
    all(
        db,
        &format!(
            "SELECT {VIEW_COLUMNS} FROM ledger_accounts WHERE kind = 'merchant' AND owner = ?1 \
             AND institution_id = ?2 ORDER BY network, asset"
        ),
        &[merchant_id.to_string().into(), institution_id.into()],
    )
    .await
}

/// The treasury's accounts, one per network and asset it has held or been reserved against.
pub async fn treasury_accounts(db: &Db) -> DbResult<Vec<AccountView>> {
    all(
        db,
        &format!(
            "SELECT {VIEW_COLUMNS} FROM ledger_accounts INDEXED BY ledger_accounts_by_kind \
             WHERE kind = 'treasury' AND owner = '' ORDER BY network, asset"
        ),
        &[],
    )
    .await
}

/// Every account of one ledger (`network`, `token`): what a move of the treasury's float
/// weighs (the treasury's balance against what is owed there).
pub async fn accounts_of_ledger(db: &Db, network: &str, token: &str) -> DbResult<Vec<AccountView>> {
    all(
        db,
        &format!("SELECT {VIEW_COLUMNS} FROM ledger_accounts WHERE network = ?1 AND token = ?2"),
        &[network.into(), token.into()],
    )
    .await
}

/// Every merchant account of the institution (what Payrail owes each of its merchants, per
/// network and asset).
pub async fn merchant_accounts_of(
    db: &Db,
    institution_id: InstitutionId,
) -> DbResult<Vec<AccountView>> {
    all(
        db,
        &format!(
            "SELECT {VIEW_COLUMNS} FROM ledger_accounts INDEXED BY ledger_accounts_by_institution \
             WHERE institution_id = ?1 AND kind = 'merchant'"
        ),
        &[institution_id.into()],
    )
    .await
}

/// The statement of [`statement_page`]: the newest `limit` transfers before `before_seq` that
/// debit the account and the newest `limit` that credit it, each a bounded range of its index
/// in `seq` order, merged (an `OR` of the two would read and sort every transfer of the account
/// on every page).
pub fn statement_page_query(account: &str, before_seq: Option<i64>, limit: i64) -> super::Select {
    let side = |column: &str| {
        format!(
            "SELECT * FROM (SELECT {TRANSFER_COLUMNS} FROM ledger_transfers t \
             WHERE t.{column} = ?1 AND t.seq < ?2 ORDER BY t.seq DESC LIMIT ?3)"
        )
    };
    super::Select {
        sql: format!(
            "{} UNION ALL {} ORDER BY seq DESC LIMIT ?3",
            side("debit_account"),
            side("credit_account")
        ),
        params: vec![
            account.into(),
            before_seq.unwrap_or(i64::MAX).into(),
            limit.into(),
        ],
    }
}

/// The transfers of `account`, newest first, `limit` of them before `before_seq` (exclusive;
/// `None`: from the newest), reading at most `2 × limit` index entries whatever the account's
/// history.
pub async fn statement_page(
    db: &Db,
    account: &str,
    before_seq: Option<i64>,
    limit: i64,
) -> DbResult<Vec<TransferRow>> {
    statement_page_query(account, before_seq, limit)
        .all(db)
        .await
}

/// The statement that sets how far `account` (a merchant's, created if need be) may go into
/// debt; its version moves, so a posting computed on the old limit fails.
pub fn set_limit(account: &Account, limit: u128, now: i64) -> DbResult<Stmt> {
    stmt(
        "INSERT INTO ledger_accounts (id, network, token, asset, decimals, kind, owner, \
         institution_id, debt_limit, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10) \
         ON CONFLICT (id) DO UPDATE SET debt_limit = excluded.debt_limit, \
         version = version + 1, updated_at = excluded.updated_at",
        &[
            account.id().into(),
            account.ledger.network.as_str().into(),
            account.ledger.token.as_str().into(),
            account.asset.as_str().into(),
            i64::from(account.decimals).into(),
            account.kind.as_str().into(),
            account.owner.as_str().into(),
            account.institution_id.into(),
            limit.to_string().into(),
            now.into(),
        ],
    )
}

/// Whether a D1 error is a posting's guard failing (its accounts moved meanwhile).
pub fn raced(error: &DbError) -> bool {
    error.violates("ledger_transfers.guard") || error.violates("guard = 1")
}

/// What [`balance_after_query`] reads: an account's posted totals and what its transfers after
/// a line posted, each sum in two parts (see [`SPLIT`]); every column is text.
#[derive(Debug, Deserialize)]
pub struct BalanceAfterRow {
    kind: String,
    debits_posted: String,
    credits_posted: String,
    later_debits_high: String,
    later_debits_low: String,
    later_credits_high: String,
    later_credits_low: String,
}

/// Amounts are summed in SQL as their digits above and below the ninth, and read back as text:
/// SQLite's integers stop at 2^63 (an 18-decimal amount passes it at 9.2 units), and a number
/// D1 hands to JavaScript is exact only below 2^53.
const SPLIT: u128 = 1_000_000_000;

/// The statement of [`balance_after`]: one statement, so the totals and the sums are read at
/// one moment.
pub fn balance_after_query(account: &str, seq: i64) -> super::Select {
    // Posted moves only: pending and void move nothing posted; a post moves what it ends.
    let later = |side: &str, part: &str| {
        format!(
            "(SELECT CAST(COALESCE(sum(CAST({part} AS INTEGER)), 0) AS TEXT) \
             FROM ledger_transfers \
             WHERE {side}_account = ?1 AND seq > ?2 AND phase IN ('single', 'post'))"
        )
    };
    let high = "substr(amount, 1, max(length(amount) - 9, 0))";
    let low = "substr(amount, -9)";
    super::Select {
        sql: format!(
            "SELECT kind, debits_posted, credits_posted, {} AS later_debits_high, \
             {} AS later_debits_low, {} AS later_credits_high, {} AS later_credits_low \
             FROM ledger_accounts WHERE id = ?1",
            later("debit", high),
            later("debit", low),
            later("credit", high),
            later("credit", low)
        ),
        params: vec![account.into(), seq.into()],
    }
}

impl BalanceAfterRow {
    /// The posted balance it gives, on the account's normal side.
    pub fn balance(&self) -> DbResult<i128> {
        let kind = Kind::parse(&self.kind)
            .ok_or_else(|| DbError::bad_row(format!("{} is not an account kind", self.kind)))?;
        let joined = |high: &str, low: &str| -> DbResult<u128> {
            units(high)?
                .checked_mul(SPLIT)
                .and_then(|h| h.checked_add(units(low).ok()?))
                .ok_or_else(|| DbError::bad_row(format!("{high}, {low} is not a sum of amounts")))
        };
        let behind = || DbError::bad_row("an account's totals are behind its transfers");
        let totals = Totals {
            debits_posted: units(&self.debits_posted)?
                .checked_sub(joined(&self.later_debits_high, &self.later_debits_low)?)
                .ok_or_else(behind)?,
            credits_posted: units(&self.credits_posted)?
                .checked_sub(joined(&self.later_credits_high, &self.later_credits_low)?)
                .ok_or_else(behind)?,
            ..Totals::default()
        };
        Ok(totals.balance(kind))
    }
}

/// `account`'s posted balance just after its transfer `seq` (its posted totals less what the
/// transfers after `seq` posted): the running balance of a statement line. `None` when there is
/// no such account.
pub async fn balance_after(db: &Db, account: &str, seq: i64) -> DbResult<Option<i128>> {
    let query = balance_after_query(account, seq);
    let row: Option<BalanceAfterRow> = super::first(db, &query.sql, &query.params).await?;
    row.map(|r| r.balance()).transpose()
}
