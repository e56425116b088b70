//! The books' rules, pure: accounts, transfers and the limits they keep, in the model
//! TigerBeetle uses (debits and credits posted and pending per account, two-phase transfers,
//! `debits_must_not_exceed_credits` and its mirror), and the transfers each event of a
//! payment's life posts ([`postings`]).
//!
//! A ledger is one network and one asset; amounts are integer base units of it. Every account
//! belongs to one ledger, and a transfer moves an amount from one account to another of the
//! same ledger, so each ledger's debits always equal its credits.
//!
//! | account | normal side | limit | what its balance is |
//! | --- | --- | --- | --- |
//! | `custody:{address}` | debit | never below zero | what a deposit address (or the custody gas address) holds |
//! | `unallocated:{address}` | credit | never below zero | received at a deposit address, owed to no payment yet |
//! | `merchant:{id}` | credit | down to minus its debt limit | what Payrail owes the merchant |
//! | `fees:{institution}` | credit | never below zero | the institution's PSP fees |
//! | `network_fees` | credit | never below zero | network fees charged to merchants |
//! | `treasury` | debit | never below zero | what the treasury address holds |
//! | `gas` | debit | none | coin spent on gas |
//! | `world` | credit | none | money from outside: the operator's funding |

use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use core::fmt;

/// One network and one asset: what a ledger's amounts are in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ledger {
    /// The network's name.
    pub network: String,
    /// The token contract (lower-case hex) or `native`.
    pub token: String,
}

impl Ledger {
    /// The ledger of `token` on `network`.
    pub fn new(network: &str, token: &str) -> Self {
        Ledger {
            network: network.to_owned(),
            token: token.to_ascii_lowercase(),
        }
    }

    /// The id of this ledger's account of `kind` owned by `owner` (`""` for a kind with one
    /// account a ledger).
    pub fn account(&self, kind: Kind, owner: &str) -> String {
        if owner.is_empty() {
            format!("{}:{}:{}", self.network, self.token, kind.as_str())
        } else {
            format!(
                "{}:{}:{}:{}",
                self.network,
                self.token,
                kind.as_str(),
                owner
            )
        }
    }
}

/// What an account is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// What a deposit address, or the custody gas address, holds.
    Custody,
    /// Received at a deposit address, owed to no payment yet.
    Unallocated,
    /// What Payrail owes a merchant.
    Merchant,
    /// An institution's PSP fees.
    Fees,
    /// Network fees charged to merchants.
    NetworkFees,
    /// What the treasury address holds.
    Treasury,
    /// Coin spent on gas.
    Gas,
    /// Money from outside: the operator's funding.
    World,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 8] = [
        Kind::Custody,
        Kind::Unallocated,
        Kind::Merchant,
        Kind::Fees,
        Kind::NetworkFees,
        Kind::Treasury,
        Kind::Gas,
        Kind::World,
    ];

    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Custody => "custody",
            Kind::Unallocated => "unallocated",
            Kind::Merchant => "merchant",
            Kind::Fees => "fees",
            Kind::NetworkFees => "network_fees",
            Kind::Treasury => "treasury",
            Kind::Gas => "gas",
            Kind::World => "world",
        }
    }

    /// The kind stored as `text`.
    pub fn parse(text: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == text)
    }

    /// Whether its balance is debits less credits (money held, or spent); otherwise credits
    /// less debits (money owed).
    pub fn debit_normal(self) -> bool {
        matches!(self, Kind::Custody | Kind::Treasury | Kind::Gas)
    }

    /// Whether its balance is kept from going below zero (below its debt limit).
    pub fn bounded(self) -> bool {
        !matches!(self, Kind::Gas | Kind::World)
    }
}

/// An account's running totals, in base units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Debits posted.
    pub debits_posted: u128,
    /// Credits posted.
    pub credits_posted: u128,
    /// Debits reserved by pending transfers.
    pub debits_pending: u128,
    /// Credits reserved by pending transfers.
    pub credits_pending: u128,
    /// How far below zero its balance may go (a merchant's allowed debt).
    pub debt_limit: u128,
}

impl Totals {
    /// Its balance on its normal side, posted transfers only.
    pub fn balance(&self, kind: Kind) -> i128 {
        let (plus, minus) = if kind.debit_normal() {
            (self.debits_posted, self.credits_posted)
        } else {
            (self.credits_posted, self.debits_posted)
        };
        signed(plus) - signed(minus)
    }

    /// Its balance less what pending transfers reserve against it.
    pub fn available(&self, kind: Kind) -> i128 {
        let reserved = if kind.debit_normal() {
            self.credits_pending
        } else {
            self.debits_pending
        };
        self.balance(kind) - signed(reserved)
    }

    /// Whether it keeps its limit: a bounded account's balance less what is reserved against
    /// it never goes below minus its debt limit.
    pub fn within_limit(&self, kind: Kind) -> bool {
        !kind.bounded() || self.available(kind) >= -signed(self.debt_limit)
    }
}

/// `n` as a signed amount (base units never reach 2^127).
fn signed(n: u128) -> i128 {
    i128::try_from(n).unwrap_or(i128::MAX)
}

/// What a transfer records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Code {
    /// Money arrived at a deposit address (custody ← unallocated).
    Receipt,
    /// A payment was credited: what arrived for it is owed to its merchant.
    Credit,
    /// A PSP fee charged to a merchant.
    Fee,
    /// A network fee charged to a merchant.
    NetworkFee,
    /// A settlement paid from the treasury to a merchant's wallet.
    Settlement,
    /// A refund paid from the treasury to a customer, at the merchant's charge.
    Refund,
    /// Gas the treasury spent.
    Gas,
    /// A deposit swept to the treasury.
    Sweep,
    /// Gas a sweep spent.
    SweepGas,
    /// Coin sent from the custody gas address to a deposit, for its sweep's gas.
    GasFunding,
    /// The operator's funding of the treasury or of the custody gas address.
    Funding,
    /// A merchant's top-up of its balance.
    Topup,
    /// An account's balance carried between D1 and its institution's object when the
    /// institution moved into it (opened there, closed in D1).
    Move,
    /// The treasury's float moved between networks with CCTP: burnt into flight on one,
    /// handed to CCTP (its fee included), minted into the treasury on the other.
    FloatMove,
}

impl Code {
    /// Every code.
    pub const ALL: [Code; 14] = [
        Code::Receipt,
        Code::Credit,
        Code::Fee,
        Code::NetworkFee,
        Code::Settlement,
        Code::Refund,
        Code::Gas,
        Code::Sweep,
        Code::SweepGas,
        Code::GasFunding,
        Code::Funding,
        Code::Topup,
        Code::Move,
        Code::FloatMove,
    ];

    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Receipt => "receipt",
            Code::Credit => "credit",
            Code::Fee => "fee",
            Code::NetworkFee => "network_fee",
            Code::Settlement => "settlement",
            Code::Refund => "refund",
            Code::Gas => "gas",
            Code::Sweep => "sweep",
            Code::SweepGas => "sweep_gas",
            Code::GasFunding => "gas_funding",
            Code::Funding => "funding",
            Code::Topup => "topup",
            Code::Move => "move",
            Code::FloatMove => "float_move",
        }
    }

    /// The code stored as `text`.
    pub fn parse(text: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.as_str() == text)
    }
}

/// How a transfer moves its amount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Posted at once.
    Single,
    /// Reserved: counts against the limits, not yet moved.
    Pending,
    /// Moves what the pending transfer (by id) reserved.
    Post(String),
    /// Releases what the pending transfer (by id) reserved.
    Void(String),
}

impl Phase {
    /// As stored.
    pub fn as_str(&self) -> &'static str {
        match self {
            Phase::Single => "single",
            Phase::Pending => "pending",
            Phase::Post(_) => "post",
            Phase::Void(_) => "void",
        }
    }

    /// The pending transfer it ends.
    pub fn pending_id(&self) -> Option<&str> {
        match self {
            Phase::Post(id) | Phase::Void(id) => Some(id),
            Phase::Single | Phase::Pending => None,
        }
    }
}

/// A transfer between two accounts of one ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    /// Derived from what it records, so a retry cannot post it twice.
    pub id: String,
    /// The account debited.
    pub debit: String,
    /// The account credited.
    pub credit: String,
    /// Base units.
    pub amount: u128,
    /// What it records.
    pub code: Code,
    /// How it moves.
    pub phase: Phase,
    /// The payment it belongs to.
    pub transaction_id: Option<i64>,
    /// The settlement, refund, sweep or chain transaction it belongs to.
    pub reference: String,
}

/// Why a transfer cannot be posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// It would take an account beyond its limit: the account, its kind, what it has
    /// available (base units, after what is reserved), its debt limit and the amount.
    Exceeds {
        /// The account.
        account: String,
        /// Its kind.
        kind: Kind,
        /// Its balance less what is reserved, before this transfer.
        available: i128,
        /// Its debt limit.
        debt_limit: u128,
        /// The transfer's amount.
        amount: u128,
    },
    /// An account it names does not exist here.
    UnknownAccount(String),
    /// The pending transfer it posts or voids is unknown or already ended.
    NotPending(String),
    /// A post or void names other accounts or another amount than its pending transfer.
    NotItsPending(String),
    /// The amount is zero.
    Zero(String),
    /// It debits and credits the same account.
    SameAccount(String),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Exceeds {
                account,
                available,
                debt_limit,
                amount,
                ..
            } => write!(
                f,
                "{account} has {available} base units available (debt limit {debt_limit}); \
                 {amount} are needed"
            ),
            Refusal::UnknownAccount(id) => write!(f, "no account {id}"),
            Refusal::NotPending(id) => write!(f, "{id} is not a pending transfer"),
            Refusal::NotItsPending(id) => {
                write!(f, "{id} does not match the pending transfer it ends")
            }
            Refusal::Zero(id) => write!(f, "{id} moves nothing"),
            Refusal::SameAccount(id) => write!(f, "{id} debits and credits one account"),
        }
    }
}

/// A pending transfer still open: what its post or void moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Open {
    /// The account it debits.
    pub debit: String,
    /// The account it credits.
    pub credit: String,
    /// Base units.
    pub amount: u128,
}

/// Accounts and their totals, with the pending transfers still open: what posting checks and
/// changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Books {
    /// Each account's kind and totals.
    pub accounts: BTreeMap<String, (Kind, Totals)>,
    /// Pending transfers not yet posted or voided, by id.
    pub open: BTreeMap<String, Open>,
}

impl Books {
    /// Posts `t`: every limit still holds afterwards, or nothing changes.
    pub fn apply(&mut self, t: &Transfer) -> Result<(), Refusal> {
        self.apply_with(t, true)
    }

    /// Posts `t`, a fact the chain made final (a transaction mined, its gas spent), whatever
    /// the limits: the books must say what happened; reconciliation shows any shortfall.
    pub fn record(&mut self, t: &Transfer) -> Result<(), Refusal> {
        self.apply_with(t, false)
    }

    fn apply_with(&mut self, t: &Transfer, limits: bool) -> Result<(), Refusal> {
        if t.amount == 0 {
            return Err(Refusal::Zero(t.id.clone()));
        }
        if t.debit == t.credit {
            return Err(Refusal::SameAccount(t.id.clone()));
        }
        for id in [&t.debit, &t.credit] {
            if !self.accounts.contains_key(id) {
                return Err(Refusal::UnknownAccount(id.clone()));
            }
        }
        if let Some(pending) = t.phase.pending_id() {
            let open = self
                .open
                .get(pending)
                .ok_or_else(|| Refusal::NotPending(pending.to_owned()))?;
            if open.debit != t.debit || open.credit != t.credit || open.amount != t.amount {
                return Err(Refusal::NotItsPending(t.id.clone()));
            }
        }
        let mut debit = self.accounts[&t.debit];
        let mut credit = self.accounts[&t.credit];
        let before = debit.1;
        let a = t.amount;
        match &t.phase {
            Phase::Single => {
                debit.1.debits_posted += a;
                credit.1.credits_posted += a;
            }
            Phase::Pending => {
                debit.1.debits_pending += a;
                credit.1.credits_pending += a;
            }
            Phase::Post(_) => {
                debit.1.debits_pending -= a;
                credit.1.credits_pending -= a;
                debit.1.debits_posted += a;
                credit.1.credits_posted += a;
            }
            Phase::Void(_) => {
                debit.1.debits_pending -= a;
                credit.1.credits_pending -= a;
            }
        }
        // A void only ever releases; a post moves what was already counted against the limit.
        let checks = limits && matches!(t.phase, Phase::Single | Phase::Pending);
        for ((kind, totals), id, prior) in [
            (&debit, &t.debit, before),
            (&credit, &t.credit, self.accounts[&t.credit].1),
        ] {
            if checks && !totals.within_limit(*kind) {
                return Err(Refusal::Exceeds {
                    account: id.clone(),
                    kind: *kind,
                    available: prior.available(*kind),
                    debt_limit: prior.debt_limit,
                    amount: a,
                });
            }
        }
        self.accounts.insert(t.debit.clone(), debit);
        self.accounts.insert(t.credit.clone(), credit);
        match &t.phase {
            Phase::Pending => {
                self.open.insert(
                    t.id.clone(),
                    Open {
                        debit: t.debit.clone(),
                        credit: t.credit.clone(),
                        amount: a,
                    },
                );
            }
            Phase::Post(id) | Phase::Void(id) => {
                self.open.remove(id);
            }
            Phase::Single => {}
        }
        Ok(())
    }

    /// Whether debits equal credits, posted and pending, over every account.
    pub fn balanced(&self) -> bool {
        let sum =
            |f: fn(&Totals) -> u128| -> u128 { self.accounts.values().map(|(_, t)| f(t)).sum() };
        sum(|t| t.debits_posted) == sum(|t| t.credits_posted)
            && sum(|t| t.debits_pending) == sum(|t| t.credits_pending)
    }
}

/// Every account's totals recomputed from its transfers alone (with the debt limits of
/// `limits`): what the kept totals must equal.
pub fn recompute(
    kinds: &BTreeMap<String, Kind>,
    limits: &BTreeMap<String, u128>,
    transfers: &[Transfer],
) -> BTreeMap<String, Totals> {
    let mut totals: BTreeMap<String, Totals> = kinds
        .keys()
        .map(|id| {
            let limit = limits.get(id).copied().unwrap_or(0);
            (
                id.clone(),
                Totals {
                    debt_limit: limit,
                    ..Totals::default()
                },
            )
        })
        .collect();
    let amounts: BTreeMap<&str, u128> = transfers
        .iter()
        .filter(|t| t.phase == Phase::Pending)
        .map(|t| (t.id.as_str(), t.amount))
        .collect();
    for t in transfers {
        let a = t.amount;
        let ended = t
            .phase
            .pending_id()
            .and_then(|id| amounts.get(id))
            .copied()
            .unwrap_or(0);
        if let Some(d) = totals.get_mut(&t.debit) {
            match t.phase {
                Phase::Single => d.debits_posted += a,
                Phase::Pending => d.debits_pending += a,
                Phase::Post(_) => {
                    d.debits_pending -= ended;
                    d.debits_posted += a;
                }
                Phase::Void(_) => d.debits_pending -= ended,
            }
        }
        if let Some(c) = totals.get_mut(&t.credit) {
            match t.phase {
                Phase::Single => c.credits_posted += a,
                Phase::Pending => c.credits_pending += a,
                Phase::Post(_) => {
                    c.credits_pending -= ended;
                    c.credits_posted += a;
                }
                Phase::Void(_) => c.credits_pending -= ended,
            }
        }
    }
    totals
}

/// `units` base units of an asset with `decimals` as decimal text. Pure.
pub fn units_text(units: i128, decimals: u32) -> String {
    let digits = units.unsigned_abs().to_string();
    let places = decimals as usize;
    let padded = format!("{digits:0>width$}", width = places + 1);
    let (whole, fraction) = padded.split_at(padded.len() - places);
    let fraction = fraction.trim_end_matches('0');
    let sign = if units < 0 { "-" } else { "" };
    if fraction.is_empty() {
        format!("{sign}{whole}")
    } else {
        format!("{sign}{whole}.{fraction}")
    }
}

pub mod postings;
pub mod reads;
pub mod split;

#[cfg(test)]
mod tests;
