//! What the operator's sanctions list looks like on the wire (the worker's operator API, and
//! `xtask screening-list` reading it): shared so both sides read one shape. See
//! docs/SCREENING.md.

use alloc::string::String;

use serde::{Deserialize, Serialize};

/// One entry of the operator's own sanctions list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedEntry {
    /// `0x` and 40 lower-case hex digits.
    pub address: String,
    /// The list that names it, e.g. `OFAC SDN`.
    pub source: String,
    /// The entry naming it, e.g. `SDN 12345: LAZARUS GROUP`.
    pub entry: String,
    /// When the list published it, `YYYY-MM-DD`.
    pub listed_on: String,
    /// When it was added (Unix seconds).
    pub added_at: i64,
    /// Who added it.
    pub added_by: String,
    /// When it was taken off (Unix seconds), if it was: it is no longer screened against, and
    /// kept for the record.
    pub removed_at: Option<i64>,
    /// Who took it off.
    pub removed_by: Option<String>,
}
