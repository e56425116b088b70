//! The reads of an institution's books that reconciliation makes, one text for every reader:
//! the operator's `xtask reconcile` runs them on D1 and on each local object's file, and the
//! worker runs them inside an institution's object for the operator's endpoint
//! (`GET /operator/institutions/{id}/books`), which `xtask reconcile --remote` reads for the
//! institutions held in their objects (production's objects cannot be read any other way).

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;

/// Transfers read per page.
pub const PAGE: i64 = 5000;

/// One part of a store's books.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Every ledger account, by id.
    Accounts,
    /// The transfers after sequence number `after` (0 for the first page), at most [`PAGE`], by
    /// sequence.
    Transfers {
        /// The last sequence number read.
        after: i64,
    },
    /// The watched custody addresses of an institution's object: its checkout deposits (until
    /// their watch ends) and its merchants' top-up addresses (no end), with how far each is read.
    Watches,
    /// The object's checkout deposits after derivation index `after` (-1 for the first page: index
    /// 0 is a deposit's too), at most [`PAGE`], by index: what the
    /// custody sweep needs of each (its address, index, asset and when its watch ends).
    Deposits {
        /// The last derivation index read.
        after: i64,
    },
    /// Every asset of the object's merchants' top-up addresses derived after index `after`
    /// (-1 for the first page), at most [`TOPUP_ADDRESSES`] addresses with all their assets, by
    /// index (tokens before the coin), with what its books hold there (the custody account,
    /// posted): what the custody sweep sweeps of each. An empty page is the last.
    Topups {
        /// The last derivation index read.
        after: i64,
    },
}

/// Top-up addresses read per page (each with its assets).
pub const TOPUP_ADDRESSES: i64 = 1000;

impl Part {
    /// The part a request names (`part=accounts|transfers|watches`, `after` for transfers);
    /// why not, in words, otherwise.
    pub fn named(part: &str, after: Option<i64>) -> Result<Part, String> {
        match (part, after) {
            ("accounts", None) => Ok(Part::Accounts),
            ("watches", None) => Ok(Part::Watches),
            ("transfers", after) => match after.unwrap_or(0) {
                after if after >= 0 => Ok(Part::Transfers { after }),
                _ => Err("after must be a sequence number, 0 or more".to_owned()),
            },
            ("deposits" | "topups", after) => match after.unwrap_or(-1) {
                after if after < -1 => {
                    Err("after must be a derivation index, -1 or more".to_owned())
                }
                after if part == "deposits" => Ok(Part::Deposits { after }),
                after => Ok(Part::Topups { after }),
            },
            ("accounts" | "watches", Some(_)) => {
                Err("after is taken only with part=transfers, deposits or topups".to_owned())
            }
            (other, _) => Err(format!(
                "part must be accounts, transfers, watches, deposits or topups, not {:?}",
                other.chars().take(40).collect::<String>()
            )),
        }
    }

    /// Its statement, as it runs in an institution's object (whose tables are its own).
    pub fn sql(&self) -> String {
        match self {
            Part::Accounts => ACCOUNTS.to_owned(),
            Part::Transfers { after } => format!(
                "SELECT id, seq, debit_account, credit_account, amount, code, phase, pending_id \
                 FROM ledger_transfers WHERE seq > {after} ORDER BY seq LIMIT {PAGE}"
            ),
            Part::Watches => OBJECT_WATCHES.to_owned(),
            Part::Deposits { after } => format!(
                "SELECT address, derivation_index, network, asset, token, decimals, watch_until \
                 FROM deposit_watches WHERE derivation_index > {after} \
                 ORDER BY derivation_index LIMIT {PAGE}"
            ),
            Part::Topups { after } => format!(
                "SELECT w.address, a.derivation_index, w.network, w.asset, w.token, w.decimals, \
                 COALESCE(l.debits_posted, '0') AS debits_posted, \
                 COALESCE(l.credits_posted, '0') AS credits_posted \
                 FROM topup_watches w JOIN topup_addresses a ON a.address = w.address \
                  AND a.institution_id = w.institution_id \
                 LEFT JOIN ledger_accounts l \
                  ON l.id = w.network || ':' || w.token || ':custody:' || w.address \
                 WHERE a.derivation_index IN (SELECT derivation_index FROM topup_addresses \
                  WHERE derivation_index > {after} ORDER BY derivation_index \
                  LIMIT {TOPUP_ADDRESSES}) \
                 ORDER BY a.derivation_index, w.token = 'native', w.token"
            ),
        }
    }
}

/// Every ledger account of a store.
const ACCOUNTS: &str = "SELECT id, network, token, asset, decimals, kind, owner, debits_posted, \
     credits_posted, debits_pending, credits_pending, debt_limit FROM ledger_accounts ORDER BY id";

/// An object's watched addresses: its deposits, and its top-up addresses (watched for good).
const OBJECT_WATCHES: &str = "SELECT address, network, token, scanned_to, watch_until \
     FROM deposit_watches UNION ALL SELECT address, network, token, scanned_to, \
     9223372036854775807 FROM topup_watches";

#[cfg(test)]
mod tests {
    use super::Part;

    #[test]
    fn a_part_is_named_with_its_page_or_refused_in_words() {
        assert_eq!(Part::named("accounts", None), Ok(Part::Accounts));
        assert_eq!(Part::named("watches", None), Ok(Part::Watches));
        assert_eq!(
            Part::named("transfers", None),
            Ok(Part::Transfers { after: 0 })
        );
        assert_eq!(
            Part::named("transfers", Some(42)),
            Ok(Part::Transfers { after: 42 })
        );
        assert!(Part::named("transfers", Some(-1)).is_err());
        assert!(Part::named("accounts", Some(3)).is_err());
        let refused = Part::named("postings", None).unwrap_err();
        assert!(refused.contains("postings"), "{refused}");
        assert_eq!(
            Part::named("deposits", None),
            Ok(Part::Deposits { after: -1 })
        );
        assert!(Part::named("deposits", Some(-2)).is_err());
        assert_eq!(
            Part::named("topups", Some(12)),
            Ok(Part::Topups { after: 12 })
        );
        assert!(Part::named("topups", Some(-5)).is_err());
        assert!(Part::Deposits { after: 9 }
            .sql()
            .contains("WHERE derivation_index > 9 ORDER BY derivation_index LIMIT 5000"));
        assert!(Part::Transfers { after: 7 }
            .sql()
            .contains("WHERE seq > 7 ORDER BY seq LIMIT 5000"));
    }
}
