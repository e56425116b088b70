//! Which institution's object holds a checkout, as this isolate last learned it (from the
//! directory's index, or by making the checkout there): a checkout never moves between stores
//! once stored in an object, so a poll of a checkout known to be held goes straight to its
//! object, without a D1 read. Bounded: past [`MAX_CHECKOUTS`] entries the memo starts afresh.

use std::cell::RefCell;
use std::collections::HashMap;

use shared_types::ids::InstitutionId;

/// How many checkouts an isolate remembers.
const MAX_CHECKOUTS: usize = 4096;

thread_local! {
    /// By checkout id. Requests interleave only at awaits, and the map is never borrowed
    /// across one.
    static HELD: RefCell<HashMap<String, InstitutionId>> = RefCell::new(HashMap::new());
}

/// The institution whose object holds checkout `id`, if this isolate has learned it.
pub fn recall(id: &str) -> Option<InstitutionId> {
    HELD.with(|held| held.borrow().get(id).copied())
}

/// Remembers that `institution`'s object holds checkout `id`.
pub fn remember(id: &str, institution: InstitutionId) {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        if held.len() >= MAX_CHECKOUTS && !held.contains_key(id) {
            held.clear();
        }
        held.insert(id.to_owned(), institution);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_checkout_is_remembered_within_the_bound() {
        assert_eq!(recall("cs_a"), None);
        remember("cs_a", InstitutionId(7));
        assert_eq!(recall("cs_a"), Some(InstitutionId(7)));
        for n in 0..MAX_CHECKOUTS {
            remember(&format!("cs_{n}"), InstitutionId(1));
        }
        HELD.with(|held| assert!(held.borrow().len() <= MAX_CHECKOUTS));
    }
}
