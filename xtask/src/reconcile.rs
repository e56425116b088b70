//! `xtask reconcile`: the books in D1 against the chain, every address, for an operator (and for
//! the black-box tests, which run it against their workers).
//!
//! 1. **The books hold together.** Each ledger (network and asset) balances: its accounts'
//!    debits equal their credits, posted and pending; and every account's kept totals equal the
//!    totals recomputed from its transfers ([`shared_types::ledger::recompute`]).
//! 2. **The books match the chain**, at each network's confirmed block
//!    `B = head + 1 − confirmations`, for each configured token and the coin: the treasury's
//!    balance against its account, and every deposit address ever given out (and every
//!    merchant's top-up address, plus the custody gas address and any other address with a
//!    custody account) against its custody account.
//!    Money that reached a deposit address after its watch ended is on chain and not in the
//!    books: drift. A watched address is compared as far as its watcher has read it.
//!
//! The books are read from the local D1 file (`--local`) or through `wrangler d1 execute
//! --remote`, the chain over JSON-RPC (batched) with a small blocking HTTP client. Any drift or
//! imbalance makes the command exit non-zero, naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::{json, Map, Value};
use shared_types::ledger::reads::{self, Part};
use shared_types::ledger::{self, units_text, Code, Kind, Phase, Totals, Transfer};

use crate::secrets::{self, Target};

pub use payrail_evm::chains::{coin, Network, Token};

/// A node must answer a batch within this.
const NODE_DEADLINE: Duration = Duration::from_secs(30);
/// Calls in one JSON-RPC batch.
const BATCH: usize = 50;

/// What to reconcile: the networks, and the treasury's and custody's keys.
#[derive(Debug, Clone)]
pub struct Config {
    /// Networks by name (`PAYRAIL_CHAINS`).
    pub networks: BTreeMap<String, Network>,
    /// The treasury's address, when there is one.
    pub treasury: Option<String>,
    /// The deposit key (`PAYRAIL_EVM_XPUB`), whose last child is the custody
    /// gas address.
    pub xpub: Option<String>,
}

impl Config {
    /// From `PAYRAIL_CHAINS` text, the treasury's address and the deposit key.
    pub fn new(chains: &str, treasury: Option<&str>, xpub: Option<&str>) -> Result<Self, String> {
        let networks = payrail_evm::chains::parse(chains)?;
        let treasury = treasury
            .map(|t| t.trim().to_ascii_lowercase())
            .filter(|t| !t.is_empty());
        if let Some(t) = &treasury {
            if !is_address(t) {
                return Err(format!("{t} is not an address"));
            }
        }
        Ok(Config {
            networks,
            treasury,
            xpub: xpub.map(str::to_owned).filter(|x| !x.trim().is_empty()),
        })
    }

    /// The custody gas address, lower case.
    pub fn gas_address(&self) -> Result<Option<String>, String> {
        self.xpub.as_deref().map(gas_address).transpose()
    }
}

fn is_address(text: &str) -> bool {
    text.len() == 42 && text.starts_with("0x") && text[2..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// The custody gas address of the deposit key `xpub`, lower case (the worker's derivation).
pub fn gas_address(xpub: &str) -> Result<String, String> {
    payrail_evm::derive::gas_address(xpub).map_err(|e| e.0)
}

/// What `scripts/dev` writes beside the local D1 (under the persist directory): the local
/// chain's `PAYRAIL_CHAINS`, the treasury's address and the deposit key, so that `reconcile
/// --local` needs no arguments.
pub const LOCAL_SETTINGS: &str = "payrail-local.json";

/// The local settings `scripts/dev` wrote under `persist_to`, if any.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct LocalSettings {
    /// `PAYRAIL_CHAINS` (a JSON object).
    pub chains: Option<Value>,
    /// The treasury's address.
    pub treasury: Option<String>,
    /// `PAYRAIL_EVM_XPUB`.
    pub xpub: Option<String>,
}

impl LocalSettings {
    /// Reads them, when the file exists.
    pub fn read(persist_to: &Path) -> Result<Option<LocalSettings>, String> {
        let file = persist_to.join(LOCAL_SETTINGS);
        match std::fs::read_to_string(&file) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| format!("{}: {e}", file.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", file.display())),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The books

/// Where the books are read.
#[derive(Debug, Clone)]
pub enum Books {
    /// The local D1 file (read only), with the local objects of the institutions held in them.
    Local(PathBuf),
    /// One local object's SQLite file (read only): an institution's books.
    Object(PathBuf),
    /// The production D1, through `wrangler d1 execute --remote`; the institutions held in their
    /// objects through the worker's operator endpoint, when it is given.
    Remote(Option<Operator>),
    /// One institution's object, through the worker's operator endpoint
    /// (`GET /operator/institutions/{id}/books`): production's objects are read only this way.
    Served(Operator, i64),
}

/// The worker's operator API: its base URL and the operator's token.
#[derive(Clone)]
pub struct Operator {
    /// The worker's base URL.
    pub url: String,
    /// The operator's token (`PAYRAIL_OPERATOR_TOKEN`).
    pub token: String,
}

impl std::fmt::Debug for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("Operator").field("url", &self.url).finish()
    }
}

/// The watched addresses of the institutions whose money is in D1 (D1's rows of an institution
/// held in its object are a copy: its object's watch reads on, and counts from the object).
const D1_WATCHES: &str = "SELECT address, network, token, scanned_to, watch_until \
     FROM deposit_watches \
     WHERE institution_id IN (SELECT id FROM institutions WHERE store = 'd1' AND moving_since IS NULL) \
     UNION ALL SELECT address, network, token, scanned_to, 9223372036854775807 \
     FROM topup_watches \
     WHERE institution_id IN (SELECT id FROM institutions WHERE store = 'd1' AND moving_since IS NULL)";

impl Books {
    /// The books of `target` (remotely, D1's alone: see [`Books::Remote`]).
    pub fn of(target: &Target) -> Self {
        match target {
            Target::Local(persist_to) => Books::Local(persist_to.clone()),
            Target::Remote => Books::Remote(None),
        }
    }

    /// The rows of `sql`, as JSON objects (D1 and local files; an object the worker serves
    /// answers only the parts of its books, [`Books::part`]).
    pub fn rows(&self, sql: &str) -> Result<Vec<Map<String, Value>>, String> {
        match self {
            Books::Local(persist_to) => file_rows(&crate::localdb::database_file(persist_to)?, sql),
            Books::Object(file) => file_rows(file, sql),
            Books::Remote(_) => wrangler_rows(&secrets::execute(sql, &Target::Remote)?),
            Books::Served(_, institution) => Err(format!(
                "institution {institution}'s object answers only the parts of its books"
            )),
        }
    }

    /// One part of this store's books, row by row.
    pub fn part(&self, part: &Part) -> Result<Vec<Map<String, Value>>, String> {
        match (self, part) {
            (Books::Served(operator, institution), part) => served(operator, *institution, part),
            (Books::Local(_) | Books::Remote(_), Part::Watches) => self.rows(D1_WATCHES),
            (store, part) => store.rows(&part.sql()),
        }
    }

    /// Every store that holds books: D1, and each institution's object (an institution held in
    /// its object keeps its deposits' and merchants' accounts there): locally its file,
    /// remotely through the worker's operator endpoint, which must then be given.
    pub(crate) fn stores(&self) -> Result<Vec<Books>, String> {
        let mut stores = vec![self.clone()];
        match self {
            Books::Local(persist_to) => stores.extend(
                crate::localdb::object_files(persist_to)?
                    .into_iter()
                    .map(Books::Object),
            ),
            Books::Remote(operator) => {
                let held =
                    self.rows("SELECT id FROM institutions WHERE store = 'object' ORDER BY id")?;
                let ids: Vec<i64> = held.iter().filter_map(|r| r["id"].as_i64()).collect();
                match operator {
                    Some(operator) => stores.extend(
                        ids.into_iter()
                            .map(|id| Books::Served(operator.clone(), id)),
                    ),
                    None if !ids.is_empty() => {
                        return Err(format!(
                            "{} institutions keep their books in their objects, which only the \
                             worker can read: give --url URL (the worker) with \
                             PAYRAIL_OPERATOR_TOKEN in the environment",
                            ids.len()
                        ))
                    }
                    None => {}
                }
            }
            Books::Object(_) | Books::Served(..) => {}
        }
        Ok(stores)
    }
}

impl Books {
    /// The institution whose object this store is (read from a local object's file); `None`
    /// for D1.
    pub fn institution(&self) -> Result<Option<i64>, String> {
        match self {
            Books::Served(_, institution) => Ok(Some(*institution)),
            Books::Object(file) => {
                let rows = self.rows("SELECT institution_id FROM object_identity")?;
                rows.first()
                    .and_then(|r| r["institution_id"].as_i64())
                    .map(Some)
                    .ok_or_else(|| format!("{}: the object names no institution", file.display()))
            }
            Books::Local(_) | Books::Remote(_) => Ok(None),
        }
    }
}

/// One part of institution `institution`'s books, as the worker's operator endpoint serves
/// them from its object.
fn served(
    operator: &Operator,
    institution: i64,
    part: &Part,
) -> Result<Vec<Map<String, Value>>, String> {
    let (name, after) = match part {
        Part::Accounts => ("accounts", None),
        Part::Transfers { after } => ("transfers", Some(*after)),
        Part::Watches => ("watches", None),
        Part::Deposits { after } => ("deposits", Some(*after)),
        Part::Topups { after } => ("topups", Some(*after)),
    };
    let mut url = format!(
        "{}/operator/institutions/{institution}/books?part={name}",
        operator.url.trim_end_matches('/')
    );
    if let Some(after) = after {
        let _ = write!(url, "&after={after}");
    }
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(120))
        .build();
    let answer = agent
        .get(&url)
        .set("Authorization", &format!("Bearer {}", operator.token))
        .call();
    let text = match answer {
        Ok(response) => response
            .into_string()
            .map_err(|e| format!("{url}: the answer could not be read: {e}"))?,
        Err(ureq::Error::Status(status, response)) => {
            let body = response.into_string().unwrap_or_default();
            let why: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            return Err(format!(
                "{url}: the worker refused ({status}): {}",
                why["error_description"]
                    .as_str()
                    .unwrap_or("no reason given")
            ));
        }
        // Names the URL (never the token).
        Err(e) => return Err(format!("{url}: {e}")),
    };
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|answer| answer["data"].as_array().cloned())
        .map(|rows| {
            rows.into_iter()
                .filter_map(|r| r.as_object().cloned())
                .collect()
        })
        .ok_or_else(|| format!("{url}: the answer is not the books' rows"))
}

/// The rows of the one statement `wrangler d1 execute --json` ran, from its output.
fn wrangler_rows(stdout: &str) -> Result<Vec<Map<String, Value>>, String> {
    serde_json::from_str::<Value>(stdout)
        .ok()
        .as_ref()
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(|r| r["results"].as_array())
        .map(|rows| rows.iter().filter_map(|r| r.as_object().cloned()).collect())
        .ok_or_else(|| format!("unexpected output from wrangler:\n{stdout}"))
}

fn file_rows(file: &Path, sql: &str) -> Result<Vec<Map<String, Value>>, String> {
    use rusqlite::types::ValueRef;
    let conn = rusqlite::Connection::open_with_flags(
        file,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| format!("{}: {e}", file.display()))?;
    conn.busy_timeout(Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    let mut statement = conn.prepare(sql).map_err(|e| format!("{e}: {sql}"))?;
    let names: Vec<String> = statement
        .column_names()
        .iter()
        .map(|n| (*n).to_owned())
        .collect();
    let mut rows = statement.query([]).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(|e| e.to_string())? {
        let mut object = Map::new();
        for (i, name) in names.iter().enumerate() {
            let value = match row.get_ref(i).map_err(|e| e.to_string())? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(n) => json!(n),
                ValueRef::Real(x) => json!(x),
                ValueRef::Text(t) | ValueRef::Blob(t) => {
                    Value::String(String::from_utf8_lossy(t).into_owned())
                }
            };
            object.insert(name.clone(), value);
        }
        out.push(object);
    }
    Ok(out)
}

/// An account as stored.
#[derive(Debug, Clone, Deserialize)]
pub struct Account {
    /// Its id.
    pub id: String,
    /// Network.
    pub network: String,
    /// Token contract or `native`.
    pub token: String,
    /// The asset's symbol.
    pub asset: String,
    /// Its decimals.
    pub decimals: u32,
    /// Kind.
    pub kind: String,
    /// Owner.
    pub owner: String,
    debits_posted: String,
    credits_posted: String,
    debits_pending: String,
    credits_pending: String,
    debt_limit: String,
}

/// `accounts` (sorted by id) with each id once: an account an institution's move carried into
/// its object is in both stores (closed in D1, opened in the object), and its totals are both
/// sides' added up, as its transfers are.
fn merged(accounts: Vec<Account>) -> Result<Vec<Account>, String> {
    let add = |a: &str, b: &str| -> Result<String, String> {
        let (a, b) = (
            a.parse::<u128>().map_err(|e| e.to_string())?,
            b.parse::<u128>().map_err(|e| e.to_string())?,
        );
        a.checked_add(b)
            .map(|sum| sum.to_string())
            .ok_or_else(|| "an account's totals past 128 bits".to_owned())
    };
    let mut out: Vec<Account> = Vec::with_capacity(accounts.len());
    for account in accounts {
        match out.last_mut() {
            Some(last) if last.id == account.id => {
                last.debits_posted = add(&last.debits_posted, &account.debits_posted)?;
                last.credits_posted = add(&last.credits_posted, &account.credits_posted)?;
                last.debits_pending = add(&last.debits_pending, &account.debits_pending)?;
                last.credits_pending = add(&last.credits_pending, &account.credits_pending)?;
            }
            _ => out.push(account),
        }
    }
    Ok(out)
}

impl Account {
    fn kind(&self) -> Result<Kind, String> {
        Kind::parse(&self.kind).ok_or_else(|| format!("{}: no kind {}", self.id, self.kind))
    }

    /// Its kept totals.
    pub fn totals(&self) -> Result<Totals, String> {
        Ok(Totals {
            debits_posted: amount(&self.debits_posted)?,
            credits_posted: amount(&self.credits_posted)?,
            debits_pending: amount(&self.debits_pending)?,
            credits_pending: amount(&self.credits_pending)?,
            debt_limit: amount(&self.debt_limit)?,
        })
    }

    /// Its posted balance on its normal side.
    pub fn balance(&self) -> Result<i128, String> {
        Ok(self.totals()?.balance(self.kind()?))
    }
}

fn amount(text: &str) -> Result<u128, String> {
    u128::from_str(text).map_err(|_| format!("{text} is not an amount"))
}

#[derive(Debug, Clone, Deserialize)]
struct TransferRow {
    id: String,
    seq: i64,
    debit_account: String,
    credit_account: String,
    amount: String,
    code: String,
    phase: String,
    pending_id: Option<String>,
}

impl TransferRow {
    fn transfer(&self) -> Result<Transfer, String> {
        let pending = || {
            self.pending_id
                .clone()
                .ok_or_else(|| format!("{} ends no pending transfer", self.id))
        };
        Ok(Transfer {
            id: self.id.clone(),
            debit: self.debit_account.clone(),
            credit: self.credit_account.clone(),
            amount: amount(&self.amount)?,
            code: Code::parse(&self.code).ok_or_else(|| format!("{}: no code", self.id))?,
            phase: match self.phase.as_str() {
                "single" => Phase::Single,
                "pending" => Phase::Pending,
                "post" => Phase::Post(pending()?),
                "void" => Phase::Void(pending()?),
                other => return Err(format!("{}: no phase {other}", self.id)),
            },
            transaction_id: None,
            reference: String::new(),
        })
    }
}

/// A deposit address given out.
#[derive(Debug, Clone, Deserialize)]
struct Watch {
    address: String,
    network: String,
    token: String,
    scanned_to: i64,
    watch_until: i64,
}

/// The block of custody's last final transaction from or to an address (a sweep, a gas
/// funding).
#[derive(Debug, Clone, Deserialize)]
struct CustodyFinal {
    network: String,
    address: String,
    block: i64,
}

#[derive(Debug, Clone, Deserialize)]
struct InFlightRow {
    network: String,
    sends: i64,
    sweeps: i64,
}

fn parse<T: serde::de::DeserializeOwned>(rows: Vec<Map<String, Value>>) -> Result<Vec<T>, String> {
    rows.into_iter()
        .map(|r| serde_json::from_value(Value::Object(r)).map_err(|e| e.to_string()))
        .collect()
}

/// What the books hold, as read.
pub struct Snapshot {
    accounts: Vec<Account>,
    transfers: Vec<Transfer>,
    watches: Vec<Watch>,
    in_flight: Vec<InFlightRow>,
    custody_final: Vec<CustodyFinal>,
}

impl Snapshot {
    /// Reads the books.
    pub fn read(books: &Books, treasury: Option<&str>) -> Result<Snapshot, String> {
        let mut accounts: Vec<Account> = Vec::new();
        let mut transfers = Vec::new();
        let mut watches = Vec::new();
        // Each store's accounts and transfers are its own (an account lives in one store), and
        // each store's ledgers balance by themselves.
        for store in books.stores()? {
            accounts.extend(parse(store.part(&Part::Accounts)?)?);
            let mut after = 0i64;
            loop {
                let page: Vec<TransferRow> = parse(store.part(&Part::Transfers { after })?)?;
                let full = page.len() as i64 == reads::PAGE;
                for row in &page {
                    transfers.push(row.transfer()?);
                    after = row.seq;
                }
                if !full {
                    break;
                }
            }
            // Checkout deposits, and merchants' top-up addresses, which stay watched (no end).
            watches.extend(parse(store.part(&Part::Watches)?)?);
        }
        accounts.sort_by(|a, b| a.id.cmp(&b.id));
        let accounts = merged(accounts)?;
        // The treasury's address is hex (checked): safe to write into the statement.
        let treasury = treasury.filter(|t| is_address(t)).unwrap_or("");
        let in_flight = parse(books.rows(&format!(
            "SELECT network, sum(sends) AS sends, sum(sweeps) AS sweeps FROM ( \
             SELECT network, 1 AS sends, 0 AS sweeps FROM chain_sends \
              WHERE state = 'live' AND sender = '{treasury}' \
             UNION ALL SELECT network, 0, 1 FROM custody_sweeps WHERE state = 'sent') \
             GROUP BY network"
        ))?)?;
        // Top-up addresses stay watched while custody sweeps them.
        let custody_final = parse(books.rows(
            "SELECT network, address, max(block_number) AS block FROM ( \
             SELECT network, from_address AS address, block_number FROM custody_sweeps \
              WHERE state <> 'sent' AND block_number IS NOT NULL \
             UNION ALL SELECT network, to_address, block_number FROM custody_sweeps \
              WHERE state <> 'sent' AND block_number IS NOT NULL) GROUP BY network, address",
        )?)?;
        Ok(Snapshot {
            accounts,
            transfers,
            watches,
            in_flight,
            custody_final,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The chain

/// JSON-RPC over HTTP, batched. Errors never name the node's URL.
pub struct Node {
    agent: ureq::Agent,
    url: String,
    name: String,
}

/// An HTTP client for JSON-RPC to a node (`what`, in its errors), over TLS where the URL says
/// so, each call bounded by `deadline`.
pub fn node_agent(what: &str, deadline: Duration) -> Result<ureq::Agent, String> {
    let tls =
        ureq::native_tls::TlsConnector::new().map_err(|e| format!("no TLS for {what}: {e}"))?;
    Ok(ureq::AgentBuilder::new()
        .timeout(deadline)
        .tls_connector(Arc::new(tls))
        .build())
}

impl Node {
    /// The node of network `name` at `url`.
    pub fn new(name: &str, url: &str) -> Result<Node, String> {
        Ok(Node {
            agent: node_agent(&format!("the {name} node"), NODE_DEADLINE)?,
            url: url.to_owned(),
            name: name.to_owned(),
        })
    }

    /// The results of `calls`, in order.
    pub fn batch(&self, calls: &[(&str, Value)]) -> Result<Vec<Value>, String> {
        let mut out = Vec::with_capacity(calls.len());
        for chunk in calls.chunks(BATCH) {
            let body: Vec<Value> = chunk
                .iter()
                .enumerate()
                .map(|(i, (method, params))| {
                    json!({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
                })
                .collect();
            let answer: Value = self
                .agent
                .post(&self.url)
                .send_json(Value::Array(body))
                .map_err(|e| match e {
                    ureq::Error::Status(status, _) => {
                        format!("the {} node answered HTTP {status}", self.name)
                    }
                    ureq::Error::Transport(t) => {
                        format!("the {} node is unreachable ({:?})", self.name, t.kind())
                    }
                })?
                .into_json()
                .map_err(|_| format!("the {} node's answer is not JSON", self.name))?;
            let mut results: Vec<Option<Value>> = vec![None; chunk.len()];
            for reply in answer.as_array().into_iter().flatten() {
                let Some(i) = reply["id"].as_u64().and_then(|i| usize::try_from(i).ok()) else {
                    continue;
                };
                if let Some(error) = reply.get("error") {
                    return Err(format!(
                        "the {} node refused {}: {}",
                        self.name,
                        chunk.get(i).map_or("a call", |c| c.0),
                        error["message"].as_str().unwrap_or("no message")
                    ));
                }
                if let Some(slot) = results.get_mut(i) {
                    *slot = reply.get("result").cloned();
                }
            }
            for result in results {
                out.push(result.ok_or_else(|| {
                    format!("the {} node left a call of a batch unanswered", self.name)
                })?);
            }
        }
        Ok(out)
    }

    fn head(&self) -> Result<u64, String> {
        let answer = self.batch(&[("eth_blockNumber", json!([]))])?;
        quantity(&answer[0])
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| format!("the {} node's head is not a number", self.name))
    }

    /// The balances of `(owner, token, block)`, in order (`token` a contract or `native`).
    fn balances(&self, asks: &[(String, String, u64)]) -> Result<Vec<u128>, String> {
        let calls: Vec<(&str, Value)> = asks
            .iter()
            .map(|(owner, token, block)| {
                let tag = format!("{block:#x}");
                if token == payrail_evm::Token::NATIVE {
                    ("eth_getBalance", json!([owner, tag]))
                } else {
                    let data = format!("0x70a08231{:0>64}", owner.trim_start_matches("0x"));
                    ("eth_call", json!([{"to": token, "data": data}, tag]))
                }
            })
            .collect();
        self.batch(&calls)?
            .iter()
            .map(|v| {
                quantity(v).ok_or_else(|| format!("the {} node's balance is unreadable", self.name))
            })
            .collect()
    }
}

/// A quantity or a 32-byte word as a number.
fn quantity(value: &Value) -> Option<u128> {
    let hex = value.as_str()?.strip_prefix("0x")?;
    let hex = hex.trim_start_matches('0');
    if hex.is_empty() {
        return Some(0);
    }
    (hex.len() <= 32)
        .then(|| u128::from_str_radix(hex, 16).ok())
        .flatten()
}

// ---------------------------------------------------------------------------------------------
// The report

/// One ledger's own checks.
#[derive(Debug, Clone)]
pub struct LedgerCheck {
    /// Network.
    pub network: String,
    /// Token contract or `native`.
    pub token: String,
    /// Asset symbol.
    pub asset: String,
    /// Sums over its accounts: debits and credits, posted and pending.
    pub sums: Totals,
    /// Accounts whose kept totals differ from those recomputed from the transfers.
    pub mismatched: Vec<String>,
}

impl LedgerCheck {
    /// Debits equal credits, posted and pending.
    pub fn balanced(&self) -> bool {
        self.sums.debits_posted == self.sums.credits_posted
            && self.sums.debits_pending == self.sums.credits_pending
    }

    /// Balanced, and every account's totals are those of its transfers.
    pub fn holds(&self) -> bool {
        self.balanced() && self.mismatched.is_empty()
    }
}

/// One address compared with the books.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressReading {
    /// The address, lower case.
    pub address: String,
    /// The block read.
    pub block: u64,
    /// What the chain held there.
    pub chain: u128,
    /// What its account held in the books.
    pub books: i128,
}

impl AddressReading {
    /// Chain minus books.
    pub fn drift(&self) -> i128 {
        i128::try_from(self.chain).unwrap_or(i128::MAX) - self.books
    }
}

/// The treasury or custody of one network and asset, against the chain.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// Network.
    pub network: String,
    /// Asset symbol.
    pub asset: String,
    /// Its decimals.
    pub decimals: u32,
    /// `treasury` or `custody`.
    pub scope: &'static str,
    /// The confirmed block.
    pub block: u64,
    /// Every address read.
    pub readings: Vec<AddressReading>,
}

impl Comparison {
    /// What the chain holds.
    pub fn chain(&self) -> u128 {
        self.readings.iter().map(|r| r.chain).sum()
    }

    /// What the books hold.
    pub fn books(&self) -> i128 {
        self.readings.iter().map(|r| r.books).sum()
    }

    /// The addresses that differ.
    pub fn drifting(&self) -> impl Iterator<Item = &AddressReading> {
        self.readings.iter().filter(|r| r.drift() != 0)
    }

    /// `network asset scope`.
    pub fn name(&self) -> String {
        format!("{} {} {}", self.network, self.asset, self.scope)
    }
}

/// What reconciling found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Each ledger's own checks.
    pub ledgers: Vec<LedgerCheck>,
    /// Each network's treasury and custody per asset against the chain.
    pub comparisons: Vec<Comparison>,
    /// What may explain a difference (transactions in flight), or what could not be read.
    pub notes: Vec<String>,
}

impl Report {
    /// The comparisons that drift.
    pub fn drifts(&self) -> Vec<&Comparison> {
        self.comparisons
            .iter()
            .filter(|c| c.drifting().next().is_some())
            .collect()
    }

    /// Whether every ledger holds together and nothing drifts.
    pub fn clean(&self) -> bool {
        self.ledgers.iter().all(LedgerCheck::holds) && self.drifts().is_empty()
    }

    /// What the command prints.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for l in &self.ledgers {
            let s = &l.sums;
            let _ = writeln!(
                out,
                "books {} {} ({}): {}; debits {} and credits {} posted, {} and {} pending{}",
                l.network,
                l.asset,
                l.token,
                if l.balanced() {
                    "balanced"
                } else {
                    "NOT BALANCED"
                },
                s.debits_posted,
                s.credits_posted,
                s.debits_pending,
                s.credits_pending,
                if l.mismatched.is_empty() {
                    "; totals match their transfers".to_owned()
                } else {
                    format!(
                        "; TOTALS DIFFER FROM THEIR TRANSFERS: {}",
                        l.mismatched.join(", ")
                    )
                }
            );
        }
        for c in &self.comparisons {
            let amount = |units: i128| format!("{} {}", units_text(units, c.decimals), c.asset);
            let chain = i128::try_from(c.chain()).unwrap_or(i128::MAX);
            let _ = writeln!(
                out,
                "chain {} at block {} ({} address{}): chain {}, books {}, drift {}",
                c.name(),
                c.block,
                c.readings.len(),
                if c.readings.len() == 1 { "" } else { "es" },
                amount(chain),
                amount(c.books()),
                amount(chain - c.books())
            );
            for r in c.drifting() {
                let _ = writeln!(
                    out,
                    "  DRIFT {} at block {}: chain {}, books {}, drift {} ({} base units)",
                    r.address,
                    r.block,
                    amount(i128::try_from(r.chain).unwrap_or(i128::MAX)),
                    amount(r.books),
                    amount(r.drift()),
                    r.drift()
                );
            }
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        let mut problems: Vec<String> = self
            .ledgers
            .iter()
            .filter(|l| !l.holds())
            .map(|l| format!("{} {} books", l.network, l.asset))
            .collect();
        problems.extend(self.drifts().iter().map(|c| c.name()));
        if problems.is_empty() {
            out.push_str("result: the books balance and match the chain\n");
        } else {
            let _ = writeln!(out, "result: DRIFT in {}", problems.join(", "));
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Reconciling

/// Each ledger's own checks. Pure.
pub fn check_ledgers(
    accounts: &[Account],
    transfers: &[Transfer],
) -> Result<Vec<LedgerCheck>, String> {
    let mut kinds = BTreeMap::new();
    let mut limits = BTreeMap::new();
    for a in accounts {
        kinds.insert(a.id.clone(), a.kind()?);
        limits.insert(a.id.clone(), a.totals()?.debt_limit);
    }
    let recomputed = ledger::recompute(&kinds, &limits, transfers);
    let mut checks: BTreeMap<(String, String), LedgerCheck> = BTreeMap::new();
    for a in accounts {
        let kept = a.totals()?;
        let check = checks
            .entry((a.network.clone(), a.token.clone()))
            .or_insert_with(|| LedgerCheck {
                network: a.network.clone(),
                token: a.token.clone(),
                asset: a.asset.clone(),
                sums: Totals::default(),
                mismatched: Vec::new(),
            });
        check.sums.debits_posted += kept.debits_posted;
        check.sums.credits_posted += kept.credits_posted;
        check.sums.debits_pending += kept.debits_pending;
        check.sums.credits_pending += kept.credits_pending;
        if recomputed.get(&a.id) != Some(&kept) {
            check.mismatched.push(a.id.clone());
        }
    }
    // A transfer naming an account that is not stored cannot be checked: name it.
    for t in transfers {
        for id in [&t.debit, &t.credit] {
            if !kinds.contains_key(id) {
                return Err(format!("transfer {} names no stored account {id}", t.id));
            }
        }
    }
    Ok(checks.into_values().collect())
}

/// Reconciles the books read from `books` with the chains of `config`.
pub fn reconcile(books: &Books, config: &Config) -> Result<Report, String> {
    let snapshot = Snapshot::read(books, config.treasury.as_deref())?;
    let gas = config.gas_address()?;
    let mut report = Report {
        ledgers: check_ledgers(&snapshot.accounts, &snapshot.transfers)?,
        ..Report::default()
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs();
    let now = i64::try_from(now).unwrap_or(i64::MAX);
    for (name, network) in &config.networks {
        let node = Node::new(name, &network.rpc_url)?;
        let head = node.head()?;
        let Some(block) = (head + 1).checked_sub(network.confirmations) else {
            report
                .notes
                .push(format!("{name}: the chain is younger than its depth"));
            continue;
        };
        if let Some(f) = snapshot.in_flight.iter().find(|f| &f.network == name) {
            if f.sends > 0 || f.sweeps > 0 {
                report.notes.push(format!(
                    "{name}: {} treasury transaction(s) and {} sweep(s) are in flight; the books \
                     post them once final, so the figures may differ until then",
                    f.sends, f.sweeps
                ));
            }
        }
        let mut assets: Vec<(String, String, u32)> = network
            .tokens
            .iter()
            .map(|(symbol, t)| (t.address.to_ascii_lowercase(), symbol.clone(), t.decimals))
            .collect();
        assets.push((
            payrail_evm::Token::NATIVE.to_owned(),
            coin(name).to_owned(),
            18,
        ));
        for (token, symbol, decimals) in assets {
            let account = |kind: &str, owner: &str| {
                let id = if owner.is_empty() {
                    format!("{name}:{token}:{kind}")
                } else {
                    format!("{name}:{token}:{kind}:{owner}")
                };
                snapshot.accounts.iter().find(|a| a.id == id)
            };
            let held = |kind: &str, owner: &str| -> Result<i128, String> {
                account(kind, owner).map_or(Ok(0), Account::balance)
            };
            if let Some(treasury) = &config.treasury {
                let chain = node.balances(&[(treasury.clone(), token.clone(), block)])?[0];
                report.comparisons.push(Comparison {
                    network: name.clone(),
                    asset: symbol.clone(),
                    decimals,
                    scope: "treasury",
                    block,
                    readings: vec![AddressReading {
                        address: treasury.clone(),
                        block,
                        chain,
                        books: held("treasury", "")?,
                    }],
                });
            }
            // Every deposit address of the network, every address with a custody account in
            // this ledger, and the custody gas address.
            let mut addresses: BTreeSet<String> = snapshot
                .watches
                .iter()
                .filter(|w| &w.network == name)
                .map(|w| w.address.to_ascii_lowercase())
                .collect();
            addresses.extend(
                snapshot
                    .accounts
                    .iter()
                    .filter(|a| &a.network == name && a.token == token && a.kind == "custody")
                    .map(|a| a.owner.clone()),
            );
            addresses.extend(gas.iter().cloned());
            // A top-up address whose watcher has not yet read past custody's last final
            // transaction of it (a sweep while it stays watched): the books hold that
            // transaction, the chain at the watcher's block does not yet. Compared once it has.
            addresses.retain(|address| {
                let Some(w) = snapshot.watches.iter().find(|w| {
                    w.address.eq_ignore_ascii_case(address)
                        && &w.network == name
                        && w.token.eq_ignore_ascii_case(&token)
                        && w.watch_until > now
                }) else {
                    return true;
                };
                let Some(last) = snapshot
                    .custody_final
                    .iter()
                    .find(|c| &c.network == name && c.address.eq_ignore_ascii_case(address))
                    .filter(|c| c.block > w.scanned_to)
                else {
                    return true;
                };
                report.notes.push(format!(
                    "{name}: {address}'s {symbol} watch has read to block {}, before custody's \
                     transaction of it in block {}: compared once it has read past it",
                    w.scanned_to, last.block
                ));
                false
            });
            let asks: Vec<(String, String, u64)> = addresses
                .iter()
                .map(|address| {
                    // A watched address, in its own token, as far as its watcher has read.
                    let at = snapshot
                        .watches
                        .iter()
                        .find(|w| {
                            w.address.eq_ignore_ascii_case(address)
                                && &w.network == name
                                && w.token.eq_ignore_ascii_case(&token)
                                && w.watch_until > now
                        })
                        .map_or(block, |w| {
                            block.min(u64::try_from(w.scanned_to).unwrap_or(0))
                        });
                    (address.clone(), token.clone(), at)
                })
                .collect();
            let chain = node.balances(&asks)?;
            let mut readings = Vec::new();
            for ((address, _, at), chain) in asks.into_iter().zip(chain) {
                readings.push(AddressReading {
                    books: held("custody", &address)?,
                    address,
                    block: at,
                    chain,
                });
            }
            report.comparisons.push(Comparison {
                network: name.clone(),
                asset: symbol,
                decimals,
                scope: "custody",
                block,
                readings,
            });
        }
    }
    let unread: BTreeSet<&String> = report
        .ledgers
        .iter()
        .map(|l| &l.network)
        .filter(|n| !config.networks.contains_key(*n))
        .collect();
    let notes: Vec<String> = unread
        .into_iter()
        .map(|n| format!("{n} is in the books but not configured here: its chain was not read"))
        .collect();
    report.notes.extend(notes);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `m/44'/60'/0'/0` of BIP39's "abandon … about" test mnemonic.
    const TEST_XPUB: &str = "xpub6EF8jXqFeFEW5bwMU7RpQtHkzE4KJxcqJtvkCjJumzW8CPpacXkb92ek4WzLQXjL93HycJwTPUAcuNxCqFPKKU5m5Z2Vq4nCyh5CyPeBFFr";

    fn account(id: &str, kind: &str, totals: [u128; 4]) -> Account {
        let parts: Vec<&str> = id.split(':').collect();
        Account {
            id: id.into(),
            network: parts[0].into(),
            token: parts[1].into(),
            asset: "USDC".into(),
            decimals: 6,
            kind: kind.into(),
            owner: parts.get(3).copied().unwrap_or("").into(),
            debits_posted: totals[0].to_string(),
            credits_posted: totals[1].to_string(),
            debits_pending: totals[2].to_string(),
            credits_pending: totals[3].to_string(),
            debt_limit: "0".into(),
        }
    }

    fn transfer(id: &str, debit: &str, credit: &str, amount: u128, phase: Phase) -> Transfer {
        Transfer {
            id: id.into(),
            debit: debit.into(),
            credit: credit.into(),
            amount,
            code: Code::Funding,
            phase,
            transaction_id: None,
            reference: String::new(),
        }
    }

    #[test]
    fn the_gas_address_is_the_last_child_of_the_deposit_key() {
        let gas = gas_address(TEST_XPUB).unwrap();
        assert!(is_address(&gas) && gas == gas.to_ascii_lowercase(), "{gas}");
        assert_ne!(
            gas, "0x9858effd232b4033e47d90003d41ec34ecaeda94",
            "not child 0"
        );
        assert!(gas_address("xpub-nothing").is_err());
    }

    #[test]
    fn a_ledger_holds_when_it_balances_and_its_totals_are_its_transfers() {
        let t = "p:u:treasury";
        let w = "p:u:world";
        let m = "p:u:merchant:1";
        let transfers = vec![
            transfer("f", t, w, 10, Phase::Single),
            transfer("r", m, t, 3, Phase::Pending),
        ];
        // The merchant's account is credit-normal: 3 pending debits against it.
        let good = vec![
            account(t, "treasury", [10, 0, 0, 3]),
            account(w, "world", [0, 10, 0, 0]),
            account(m, "merchant", [0, 0, 3, 0]),
        ];
        let checks = check_ledgers(&good, &transfers).unwrap();
        assert_eq!(checks.len(), 1);
        assert!(checks[0].holds(), "{checks:?}");
        // A kept total off by one: unbalanced, and named.
        let mut bad = good.clone();
        bad[0].debits_posted = "11".into();
        let checks = check_ledgers(&bad, &transfers).unwrap();
        assert!(!checks[0].balanced());
        assert_eq!(checks[0].mismatched, [t.to_owned()]);
        // Balanced, but not what the transfers say.
        let mut moved = good.clone();
        moved[0].debits_posted = "11".into();
        moved[1].credits_posted = "11".into();
        let checks = check_ledgers(&moved, &transfers).unwrap();
        assert!(checks[0].balanced() && !checks[0].holds());
        assert!(
            check_ledgers(&good[..1], &transfers).is_err(),
            "unknown account"
        );
    }

    #[test]
    fn the_report_names_each_drift() {
        let report = Report {
            ledgers: Vec::new(),
            comparisons: vec![Comparison {
                network: "polygon".into(),
                asset: "USDC".into(),
                decimals: 6,
                scope: "treasury",
                block: 9,
                readings: vec![AddressReading {
                    address: "0xt".into(),
                    block: 9,
                    chain: 1_000_000,
                    books: 1_500_000,
                }],
            }],
            notes: Vec::new(),
        };
        assert!(!report.clean());
        let text = report.render();
        assert!(
            text.contains(
                "chain polygon USDC treasury at block 9 (1 address): chain 1 USDC, books 1.5 \
                 USDC, drift -0.5 USDC"
            ),
            "{text}"
        );
        assert!(text.contains("DRIFT 0xt at block 9"), "{text}");
        assert!(
            text.ends_with("result: DRIFT in polygon USDC treasury\n"),
            "{text}"
        );
        assert_eq!(units_text(-5, 2), "-0.05");
    }

    #[test]
    fn rows_are_read_from_wranglers_json() {
        let stdout = r#"[{"results": [{"id": "a", "n": 1}, {"id": "b", "n": null}],
                          "success": true, "meta": {}}]"#;
        let rows = wrangler_rows(stdout).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["id"], "a");
        assert!(rows[1]["n"].is_null());
        assert!(wrangler_rows("not json").is_err());
        assert!(wrangler_rows("[]").is_err());
    }

    #[test]
    fn quantities_and_words_read_as_numbers() {
        assert_eq!(quantity(&json!("0x0")), Some(0));
        assert_eq!(quantity(&json!("0x1b4")), Some(436));
        assert_eq!(
            quantity(&json!(format!("0x{:064x}", 5_000_000u128))),
            Some(5_000_000)
        );
        assert_eq!(quantity(&json!(format!("0x1{:064x}", 0))), None);
        assert_eq!(quantity(&json!(12)), None);
    }
}
