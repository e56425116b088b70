//! Moving money: what arrives in custody and is credited (`watch`, `topup`), the books that
//! record every unit (`ledger` for the postings of each flow, `books` for the funding and the
//! reconciliation against the chain), and what leaves the treasury (`treasury` holds its key and
//! signs, `sends` stores, broadcasts, replaces and follows every transaction it signs, `settle`
//! pays merchants (across networks with CCTP too, `bridge_reads` reading what the chains say of
//! it), `refund` pays customers back, `sweeps` follows custody's sweeps into the
//! treasury, `payee` judges who may be paid at all, `screening` whether an address is on a
//! sanctions list).
//!
//! Talking to nodes (JSON-RPC, logs and balances, prices, heads, the networks' configuration,
//! deposit addresses) is `chain`'s: this module decides what the answers mean for the money and
//! writes it, always through `db` in batches guarded on what they read.
//!
//! Where to start: `watch::poll` and `watch::sweep` (money in), `settle::run` (money out to
//! merchants), `ledger` (how each of those is booked), [LEDGER.md](../../docs/LEDGER.md).

pub mod books;
pub mod bridge_reads;
pub mod float_moves;
pub mod ledger;
pub mod payee;
pub mod refund;
pub mod requests;
pub mod screening;
pub mod sends;
pub mod settle;
pub mod sweeps;
pub mod topup;
pub mod treasury;
pub mod watch;
