//! What checkout's last full read found for a publishable key (the merchant it names and its
//! wallets' networks), kept in this isolate for a minute, so the next session for the key is
//! made without reading them first: in one batch, or two when its address is derived.
//!
//! A memo is a prediction, never a decision. The batches that store a session made on one are
//! conditioned on every fact of it still holding ([`crate::db::sessions::Admitted`]), and on the
//! request's own (its return origin allowed, its idempotency key new), as they are on a full
//! read's; when any fact has gone stale they store nothing, the memo is forgotten and the
//! session takes the full read. So a
//! merchant suspended, a wallet removed, an origin withdrawn or a key rolled past its grace
//! period is seen by the very next session, as without the memo. What a memo can hold back for
//! its minute is only a preference: a wallet added on a network Payrail offers before the one
//! chosen is the default way to pay from the next full read on. The merchant's USDC settlement
//! network is not among the facts held either: a change of it reaches the sessions made from the
//! next full read on, within the minute, and a session made on a choice just cleared is like
//! one made just before the change (paid after it, as a customer may, it waits for the treasury
//! with the reason).

use std::cell::RefCell;
use std::collections::HashMap;

use shared_types::ids::InstitutionId;

use crate::db::wallets::Payout;
use crate::db::MoneyStore;

/// How long a memo is used after its read, in seconds.
pub const KEEP_SECONDS: i64 = 60;

/// How many keys an isolate keeps memos of: past it, stale memos go, then all of them.
const MAX_KEYS: usize = 1024;

/// What the full read of a publishable key found, for a merchant that could take payments.
#[derive(Debug, Clone, PartialEq)]
pub struct Known {
    /// The merchant the key names.
    pub merchant_id: i64,
    /// Its institution.
    pub institution_id: InstitutionId,
    /// Where it can be paid out: its wallets' networks, in the read's order, and its USDC
    /// settlement network (left out for an institution held in its object).
    pub payout: Payout,
    /// Where its institution's money lives (a session is stored there).
    pub store: MoneyStore,
    /// Unix seconds of the read.
    pub read_at: i64,
}

thread_local! {
    /// This isolate's memos, by publishable key. Its requests interleave only at awaits, and
    /// the map is never borrowed across one.
    static KNOWN: RefCell<HashMap<String, Known>> = RefCell::new(HashMap::new());
}

/// The memo of `public_key`, if there is one read less than [`KEEP_SECONDS`] before `now`.
pub fn recall(public_key: &str, now: i64) -> Option<Known> {
    KNOWN.with(|known| {
        known
            .borrow()
            .get(public_key)
            .filter(|k| fresh(k, now))
            .cloned()
    })
}

/// Keeps `known` as the memo of `public_key`, making room when the isolate keeps
/// [`MAX_KEYS`] already.
pub fn remember(public_key: &str, known: Known) {
    KNOWN.with(|memos| {
        let mut memos = memos.borrow_mut();
        if memos.len() >= MAX_KEYS && !memos.contains_key(public_key) {
            let now = known.read_at;
            memos.retain(|_, k| fresh(k, now));
            if memos.len() >= MAX_KEYS {
                memos.clear();
            }
        }
        memos.insert(public_key.to_owned(), known);
    });
}

/// Forgets the memo of `public_key`: a fact of it was stale, or the key's attempt was refused
/// (its next one is read in full, so a window that filled up is refused before anything is
/// quoted for it).
pub fn forget(public_key: &str) {
    KNOWN.with(|known| {
        known.borrow_mut().remove(public_key);
    });
}

fn fresh(known: &Known, now: i64) -> bool {
    (0..KEEP_SECONDS).contains(&(now - known.read_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(merchant_id: i64, read_at: i64) -> Known {
        Known {
            merchant_id,
            institution_id: InstitutionId(1),
            payout: Payout {
                networks: vec!["polygon".to_owned()],
                usdc_settlement_network: None,
            },
            store: MoneyStore::D1,
            read_at,
        }
    }

    #[test]
    fn a_memo_is_used_for_its_minute_and_never_from_a_read_in_the_future() {
        remember("pk_a", known(7, 1_000));
        assert_eq!(recall("pk_a", 1_000), Some(known(7, 1_000)));
        assert_eq!(recall("pk_a", 1_059), Some(known(7, 1_000)));
        assert_eq!(recall("pk_a", 1_060), None);
        // A clock that went back: the memo is not trusted to be fresh.
        assert_eq!(recall("pk_a", 999), None);
        assert_eq!(recall("pk_b", 1_000), None);
        forget("pk_a");
        assert_eq!(recall("pk_a", 1_000), None);
    }

    #[test]
    fn an_isolate_keeps_a_bounded_number_of_memos_dropping_stale_ones_first() {
        for n in 0..MAX_KEYS {
            remember(&format!("pk_old_{n}"), known(n as i64, 0));
        }
        remember("pk_new", known(1, 10));
        // The old ones were still fresh at 10: all went, the new one stays.
        assert_eq!(KNOWN.with(|k| k.borrow().len()), 1);
        for n in 0..MAX_KEYS - 1 {
            remember(&format!("pk_more_{n}"), known(n as i64, 100));
        }
        remember("pk_last", known(2, 100));
        // pk_new (read at 10) was stale at 100 and made room; the rest were kept.
        assert_eq!(KNOWN.with(|k| k.borrow().len()), MAX_KEYS);
        assert_eq!(recall("pk_new", 100), None);
        assert_eq!(recall("pk_last", 100), Some(known(2, 100)));
    }
}
