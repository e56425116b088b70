//! The books of an institution held in its own store (its Durable Object) beside the treasury's:
//! which account lives where, and how a transfer between the two becomes one in each.
//!
//! An institution's store keeps the accounts that are its alone: its deposit addresses'
//! custody and unallocated money, its merchants' balances, its PSP fees and the network fees it
//! charged. The treasury's books keep the treasury, gas and the world (the operator's funding).
//! A transfer between an account of each (a settlement's payout: merchant → treasury) is
//! posted as two halves under the same id, one in each store: each moves the amount between
//! its own account and the store's **link** to the other, a `world` account (to each store the
//! other is outside). Each store's ledgers then balance by themselves, each half keeps its
//! own account's limits (the merchant's debt limit in the institution's store, the treasury's
//! floor in the treasury's), and the two links mirror each other: the institution's link to the
//! treasury holds, credited, what the treasury's link to that institution holds debited.
//! Posting and voiding a pending transfer split this way ends each half in its own store.

use alloc::format;
use alloc::string::String;

use super::{Kind, Ledger, Transfer};

/// The owner of an institution store's link to the treasury's books.
pub const TREASURY_LINK: &str = "treasury";

/// The owner of the treasury books' link to institution `id`'s store.
pub fn institution_link(institution: i64) -> String {
    format!("institution:{institution}")
}

/// Where an account lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// In the institution's store.
    Institution,
    /// In the treasury's books.
    Treasury,
}

/// The ledger and kind of account `id` (`{network}:{token}:{kind}[:{owner}]`).
fn parts(id: &str) -> Option<(Ledger, Kind)> {
    let mut segments = id.splitn(4, ':');
    let network = segments.next()?;
    let token = segments.next()?;
    let kind = Kind::parse(segments.next()?)?;
    Some((Ledger::new(network, token), kind))
}

/// Where account `id` lives: the treasury, gas and the world in the treasury's books; every
/// other kind (a deposit's custody and unallocated money, merchants, fees) is an
/// institution's. `None` for an id that names no account.
pub fn side(id: &str) -> Option<Side> {
    parts(id).map(|(_, kind)| match kind {
        Kind::Treasury | Kind::Gas | Kind::World => Side::Treasury,
        _ => Side::Institution,
    })
}

/// What each store posts of one transfer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Halves {
    /// In institution's store.
    pub institution: Option<Transfer>,
    /// In the treasury's books.
    pub treasury: Option<Transfer>,
}

/// Transfer `t` as institution `institution`'s store and the treasury's books post it: whole
/// in the store of both its accounts, or as a half in each, both under `t`'s id (with `t`'s
/// phase: a post or void ends the pending half of the same id in its own store). `None` for a
/// transfer naming an account that is not one.
pub fn split(t: &Transfer, institution: i64) -> Option<Halves> {
    split_by(t, institution, side)
}

/// [`split`], with `side_of` saying where each account lives: for a transfer that names an
/// account of the treasury's that [`side`] cannot tell apart by its kind (the custody gas
/// address's custody, which pays a held deposit's gas, is the treasury's).
pub fn split_by(
    t: &Transfer,
    institution: i64,
    side_of: impl Fn(&str) -> Option<Side>,
) -> Option<Halves> {
    let (debit, credit) = (side_of(&t.debit)?, side_of(&t.credit)?);
    let (ledger, _) = parts(&t.debit)?;
    Some(match (debit, credit) {
        (Side::Institution, Side::Institution) => Halves {
            institution: Some(t.clone()),
            treasury: None,
        },
        (Side::Treasury, Side::Treasury) => Halves {
            institution: None,
            treasury: Some(t.clone()),
        },
        (Side::Institution, Side::Treasury) => Halves {
            institution: Some(Transfer {
                credit: ledger.account(Kind::World, TREASURY_LINK),
                ..t.clone()
            }),
            treasury: Some(Transfer {
                debit: ledger.account(Kind::World, &institution_link(institution)),
                ..t.clone()
            }),
        },
        (Side::Treasury, Side::Institution) => Halves {
            institution: Some(Transfer {
                debit: ledger.account(Kind::World, TREASURY_LINK),
                ..t.clone()
            }),
            treasury: Some(Transfer {
                credit: ledger.account(Kind::World, &institution_link(institution)),
                ..t.clone()
            }),
        },
    })
}

#[cfg(test)]
mod tests {
    use alloc::string::ToString;
    use alloc::vec::Vec;

    use super::super::postings::{self, Part};
    use super::super::{Books, Phase};
    use super::*;
    use crate::ids::Scoped;

    fn usdc() -> Ledger {
        Ledger::new("polygon", "0xusdc")
    }

    /// Posts `t` in `books`, opening its accounts first (as the store's book does).
    fn post(books: &mut Books, t: &Transfer, record: bool) -> Result<(), super::super::Refusal> {
        for id in [&t.debit, &t.credit] {
            let (_, kind) = parts(id).unwrap();
            books
                .accounts
                .entry(id.clone())
                .or_insert((kind, Default::default()));
        }
        if record {
            books.record(t)
        } else {
            books.apply(t)
        }
    }

    /// A settlement of merchant 5 of institution 7: its fees stay in the institution's store,
    /// its gas in the treasury's, and its payout becomes a half in each, each store balanced by
    /// itself and keeping its own limits; posting it ends each half in its store.
    #[test]
    fn a_settlement_splits_into_halves_that_balance_in_each_store() {
        let ledger = usdc();
        let merchant = ledger.account(Kind::Merchant, "5");
        let treasury = ledger.account(Kind::Treasury, "");
        let parts = [Part {
            transaction_id: 1,
            psp_units: 10,
            gas_units: 5,
            net_units: 85,
        }];
        let pending = postings::settlement(
            &ledger,
            Scoped::new(crate::ids::InstitutionId(7), 5i64),
            "snd_1",
            &parts,
            85,
            false,
        );
        let mut institution = Books::default();
        let mut treasury_books = Books::default();
        // The merchant was credited 100, and the treasury holds 1000 (in their own stores).
        let credit = Transfer {
            id: "credit:1".to_string(),
            debit: ledger.account(Kind::Unallocated, "0xdep"),
            credit: merchant.clone(),
            amount: 100,
            code: super::super::Code::Credit,
            phase: Phase::Single,
            transaction_id: Some(1),
            reference: "payment 1".to_string(),
        };
        post(&mut institution, &credit, true).unwrap();
        let funding = postings::funding(&ledger, &treasury, 1, 1000);
        post(&mut treasury_books, &funding, true).unwrap();
        let mut halves = Vec::new();
        for t in &pending {
            let h = split(t, 7).unwrap();
            if let Some(i) = &h.institution {
                post(&mut institution, i, false).unwrap();
            }
            if let Some(tr) = &h.treasury {
                post(&mut treasury_books, tr, false).unwrap();
            }
            halves.push(h);
        }
        let payout = halves
            .iter()
            .find(|h| h.institution.is_some() && h.treasury.is_some())
            .expect("the payout crosses");
        let inst = payout.institution.as_ref().unwrap();
        let tr = payout.treasury.as_ref().unwrap();
        assert_eq!(inst.id, tr.id, "one id on both sides");
        assert_eq!(
            (inst.debit.as_str(), inst.credit.as_str()),
            (merchant.as_str(), "polygon:0xusdc:world:treasury")
        );
        assert_eq!(
            (tr.debit.as_str(), tr.credit.as_str()),
            ("polygon:0xusdc:world:institution:7", treasury.as_str())
        );
        assert!(
            halves
                .iter()
                .filter(|h| h.treasury.is_none())
                .all(|h| h.institution.is_some()),
            "the fees stay with the institution"
        );
        // Posted: each store ends its own half.
        for t in postings::end(&pending, true) {
            let h = split(&t, 7).unwrap();
            if let Some(i) = &h.institution {
                post(&mut institution, i, false).unwrap();
            }
            if let Some(tr) = &h.treasury {
                post(&mut treasury_books, tr, false).unwrap();
            }
        }
        for books in [&institution, &treasury_books] {
            let (debits, credits) = books
                .accounts
                .values()
                .fold((0u128, 0u128), |(d, c), (_, t)| {
                    (d + t.debits_posted, c + t.credits_posted)
                });
            assert_eq!(debits, credits, "each store balances by itself");
            assert!(books.open.is_empty(), "nothing left pending");
        }
        let link = |books: &Books, id: &str| books.accounts[id].1;
        let inst_link = link(&institution, "polygon:0xusdc:world:treasury");
        let tr_link = link(&treasury_books, "polygon:0xusdc:world:institution:7");
        assert_eq!(inst_link.credits_posted, 85);
        assert_eq!(tr_link.debits_posted, 85, "the links mirror each other");
        assert_eq!(institution.accounts[&merchant].1.balance(Kind::Merchant), 0);
    }

    /// The merchant's limit holds in its own store: a payout above its balance is refused by
    /// the institution's half, whatever the treasury holds.
    #[test]
    fn each_half_keeps_its_own_accounts_limits() {
        let ledger = usdc();
        let pending = postings::settlement(
            &ledger,
            Scoped::new(crate::ids::InstitutionId(7), 5i64),
            "snd_2",
            &[Part {
                transaction_id: 2,
                psp_units: 0,
                gas_units: 0,
                net_units: 50,
            }],
            50,
            false,
        );
        let mut institution = Books::default();
        let payout = pending
            .iter()
            .filter_map(|t| split(t, 7).unwrap().institution)
            .collect::<Vec<_>>();
        assert!(
            payout
                .iter()
                .any(|t| post(&mut institution, t, false).is_err()),
            "an empty merchant balance cannot pay out"
        );
        assert_eq!(
            split(&pending[0], 7).map(|h| h.institution.is_some()),
            Some(true)
        );
        assert_eq!(side("polygon:native:gas"), Some(Side::Treasury));
        assert_eq!(
            side("polygon:native:custody:0xdep"),
            Some(Side::Institution)
        );
        assert_eq!(side("nonsense"), None);
    }
}
