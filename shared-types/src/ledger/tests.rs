use crate::ids::{InstitutionId, Scoped};
use std::collections::BTreeMap;

use proptest::prelude::*;

use super::postings::{self, Part};
use super::*;

fn usdc() -> Ledger {
    Ledger::new("polygon", "0xToken")
}

fn coin() -> Ledger {
    Ledger::new("polygon", "native")
}

/// Books with every account a test names, merchant 1 allowed `limit` of debt.
fn books(limit: u128) -> Books {
    let mut b = Books::default();
    for ledger in [usdc(), coin()] {
        for (kind, owner) in [
            (Kind::Custody, "0xd0"),
            (Kind::Custody, "0xd1"),
            (Kind::Custody, "0xd2"),
            (Kind::Custody, "0xgas"),
            (Kind::Unallocated, "0xd0"),
            (Kind::Unallocated, "0xd1"),
            (Kind::Unallocated, "0xd2"),
            (Kind::Merchant, "1"),
            (Kind::Fees, "7"),
            (Kind::NetworkFees, ""),
            (Kind::Treasury, ""),
            (Kind::Gas, ""),
            (Kind::World, ""),
        ] {
            let totals = Totals {
                debt_limit: if kind == Kind::Merchant { limit } else { 0 },
                ..Totals::default()
            };
            b.accounts
                .insert(ledger.account(kind, owner), (kind, totals));
        }
    }
    b
}

fn balance(b: &Books, id: &str) -> i128 {
    let (kind, totals) = b.accounts[id];
    totals.balance(kind)
}

#[test]
fn a_payment_settled_leaves_the_merchant_its_rounding_and_the_books_balanced() {
    let l = usdc();
    let mut b = books(0);
    b.apply(&postings::funding(
        &l,
        &l.account(Kind::Treasury, ""),
        5,
        100_000_000,
    ))
    .unwrap();
    b.apply(&postings::receipt(&l, "0xD0", ("0xaa", 0), 20_000_000))
        .unwrap();
    b.apply(&postings::credit(&l, "0xd0", (11, 1), 20_000_000))
        .unwrap();
    let parts = [Part {
        transaction_id: 11,
        psp_units: 200_000,
        gas_units: 3_000,
        net_units: 19_796_999,
    }];
    let merchant = l.account(Kind::Merchant, "1");
    let pay = postings::payout(b.accounts[&merchant].1.available(Kind::Merchant), &parts);
    assert_eq!(pay, 19_796_999);
    let pending = postings::settlement(
        &l,
        Scoped::new(InstitutionId(7), 1),
        "snd_1",
        &parts,
        pay,
        false,
    );
    for t in &pending {
        b.apply(t).unwrap();
    }
    // Reserved, not moved: the merchant's balance is unchanged, its available is not.
    assert_eq!(balance(&b, &merchant), 20_000_000);
    assert_eq!(b.accounts[&merchant].1.available(Kind::Merchant), 1);
    for t in postings::end(&pending, true) {
        b.apply(&t).unwrap();
    }
    assert_eq!(balance(&b, &merchant), 1);
    assert_eq!(balance(&b, &l.account(Kind::Fees, "7")), 200_000);
    assert_eq!(
        balance(&b, &l.account(Kind::Treasury, "")),
        100_000_000 - 19_796_999
    );
    assert!(b.open.is_empty());
    assert!(b.balanced());
}

#[test]
fn a_treasury_never_goes_below_zero_in_the_books() {
    let l = usdc();
    let mut b = books(0);
    b.apply(&postings::receipt(&l, "0xd0", ("0xaa", 0), 5))
        .unwrap();
    b.apply(&postings::credit(&l, "0xd0", (11, 1), 5)).unwrap();
    let refused = b.apply(&postings::refund(&l, (11, 1), "rfd_1", 5));
    assert!(matches!(
        refused,
        Err(Refusal::Exceeds {
            kind: Kind::Treasury,
            available: 0,
            amount: 5,
            ..
        })
    ));
    assert_eq!(books_unchanged(&b), 5);
}

fn books_unchanged(b: &Books) -> i128 {
    balance(b, &usdc().account(Kind::Merchant, "1"))
}

#[test]
fn a_refund_after_settlement_is_refused_beyond_the_debt_limit_and_netted_within_it() {
    let l = usdc();
    let merchant = l.account(Kind::Merchant, "1");
    for (limit, allowed) in [(0u128, false), (10, true)] {
        let mut b = books(limit);
        b.apply(&postings::funding(
            &l,
            &l.account(Kind::Treasury, ""),
            1,
            100,
        ))
        .unwrap();
        b.apply(&postings::receipt(&l, "0xd0", ("0xaa", 0), 10))
            .unwrap();
        b.apply(&postings::credit(&l, "0xd0", (11, 1), 10)).unwrap();
        let parts = [Part {
            transaction_id: 11,
            psp_units: 0,
            gas_units: 0,
            net_units: 10,
        }];
        let pending = postings::settlement(
            &l,
            Scoped::new(InstitutionId(7), 1),
            "snd_1",
            &parts,
            10,
            false,
        );
        pending.iter().for_each(|t| b.apply(t).unwrap());
        postings::end(&pending, true)
            .iter()
            .for_each(|t| b.apply(t).unwrap());
        let refund = b.apply(&postings::refund(&l, (11, 1), "rfd_1", 10));
        assert_eq!(refund.is_ok(), allowed, "limit {limit}");
        if !allowed {
            continue;
        }
        // The debt comes out of the next settlement.
        b.apply(&postings::receipt(&l, "0xd1", ("0xbb", 0), 30))
            .unwrap();
        b.apply(&postings::credit(&l, "0xd1", (12, 1), 30)).unwrap();
        let next = [Part {
            transaction_id: 12,
            psp_units: 0,
            gas_units: 0,
            net_units: 30,
        }];
        let available = b.accounts[&merchant].1.available(Kind::Merchant);
        assert_eq!(available, 20);
        assert_eq!(postings::payout(available, &next), 20);
    }
}

#[test]
fn a_top_up_is_in_custody_at_its_address_and_owed_to_its_merchant_once() {
    let l = usdc();
    let merchant = l.account(Kind::Merchant, "1");
    let mut b = books(0);
    b.apply(&postings::funding(
        &l,
        &l.account(Kind::Treasury, ""),
        1,
        100,
    ))
    .unwrap();
    // A payment settled in full: nothing is left to refund it from.
    b.apply(&postings::receipt(&l, "0xd0", ("0xaa", 0), 10))
        .unwrap();
    b.apply(&postings::credit(&l, "0xd0", (11, 1), 10)).unwrap();
    let parts = [Part {
        transaction_id: 11,
        psp_units: 0,
        gas_units: 0,
        net_units: 10,
    }];
    let pending = postings::settlement(
        &l,
        Scoped::new(InstitutionId(7), 1),
        "snd_1",
        &parts,
        10,
        false,
    );
    pending.iter().for_each(|t| b.apply(t).unwrap());
    postings::end(&pending, true)
        .iter()
        .for_each(|t| b.apply(t).unwrap());
    assert!(b
        .apply(&postings::refund(&l, (11, 1), "rfd_1", 10))
        .is_err());

    // The merchant tops up 25 at its top-up address 0xD2 (any case).
    let chain_transfer = ("0xcc", 3);
    let receipt = postings::receipt(&l, "0xD2", chain_transfer, 25);
    let topup = postings::topup(&l, "0xD2", chain_transfer, 1, 25);
    assert_eq!(topup.id, "topup:polygon:0xcc:3:0xd2");
    assert_eq!(topup.code, Code::Topup);
    assert_eq!(topup.phase, Phase::Single);
    assert_eq!(
        (topup.debit.as_str(), topup.credit.as_str()),
        (receipt.credit.as_str(), merchant.as_str()),
        "what arrived at the address is moved to the merchant"
    );
    assert_eq!(topup, postings::topup(&l, "0xd2", chain_transfer, 1, 25));
    assert_ne!(topup.id, receipt.id);
    assert_ne!(
        topup.id,
        postings::topup(&l, "0xd2", ("0xcc", 4), 1, 25).id,
        "another log of the same transaction is another top-up"
    );
    b.apply(&receipt).unwrap();
    b.apply(&topup).unwrap();
    assert_eq!(balance(&b, &l.account(Kind::Custody, "0xd2")), 25);
    assert_eq!(balance(&b, &l.account(Kind::Unallocated, "0xd2")), 0);
    assert_eq!(balance(&b, &merchant), 25);
    assert!(b.balanced());
    // Now the refund is covered by the top-up.
    b.apply(&postings::refund(&l, (11, 1), "rfd_1", 10))
        .unwrap();
    assert_eq!(b.accounts[&merchant].1.available(Kind::Merchant), 15);
    // A top-up never moves more than arrived at its address.
    let mut again = postings::topup(&l, "0xd2", ("0xdd", 0), 1, 1);
    assert!(matches!(
        b.apply(&again),
        Err(Refusal::Exceeds {
            kind: Kind::Unallocated,
            ..
        })
    ));
    again.amount = 0;
    assert!(matches!(b.apply(&again), Err(Refusal::Zero(_))));
}

#[test]
fn a_post_must_match_its_pending_transfer_and_ends_it_once() {
    let l = usdc();
    let mut b = books(0);
    b.apply(&postings::funding(
        &l,
        &l.account(Kind::Treasury, ""),
        1,
        100,
    ))
    .unwrap();
    b.apply(&postings::receipt(&l, "0xd0", ("0xaa", 0), 10))
        .unwrap();
    b.apply(&postings::credit(&l, "0xd0", (11, 1), 10)).unwrap();
    let pending = postings::refund(&l, (11, 1), "rfd_1", 10);
    b.apply(&pending).unwrap();
    let mut wrong = postings::end(std::slice::from_ref(&pending), true).remove(0);
    wrong.amount = 9;
    assert!(matches!(b.apply(&wrong), Err(Refusal::NotItsPending(_))));
    let void = postings::end(std::slice::from_ref(&pending), false).remove(0);
    b.apply(&void).unwrap();
    let post = postings::end(std::slice::from_ref(&pending), true).remove(0);
    assert!(matches!(b.apply(&post), Err(Refusal::NotPending(_))));
    assert_eq!(balance(&b, &l.account(Kind::Treasury, "")), 100);
}

/// One step of a random life of payments, against a model of the chain.
#[derive(Debug, Clone)]
enum Step {
    /// A customer pays `units` to deposit `d`.
    Pay { d: usize, units: u128 },
    /// The payment at `d` is credited (on time or late: the same rule).
    Credit { d: usize },
    /// The merchant's credited payments settle; the transaction succeeds or reverts.
    Settle {
        fee: u128,
        gas: u128,
        succeeds: bool,
    },
    /// A refund of `units` of the payment at `d`; its transaction succeeds or is given up.
    Refund {
        d: usize,
        units: u128,
        succeeds: bool,
    },
    /// Deposit `d` is swept to the treasury, with `gas` wei funded from the gas address.
    Sweep { d: usize, gas: u128 },
    /// The operator funds the treasury or the gas address.
    Fund { units: u128, coin: bool },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..3usize, 1..1_000u128).prop_map(|(d, units)| Step::Pay { d, units }),
        (0..3usize).prop_map(|d| Step::Credit { d }),
        (0..20u128, 0..20u128, any::<bool>()).prop_map(|(fee, gas, succeeds)| Step::Settle {
            fee,
            gas,
            succeeds
        }),
        (0..3usize, 1..1_000u128, any::<bool>()).prop_map(|(d, units, succeeds)| Step::Refund {
            d,
            units,
            succeeds
        }),
        (0..3usize, 1..50u128).prop_map(|(d, gas)| Step::Sweep { d, gas }),
        (1..2_000u128, any::<bool>()).prop_map(|(units, coin)| Step::Fund { units, coin }),
    ]
}

/// The chain as the model sees it: each address's balance of the token and of the coin.
#[derive(Default)]
struct Chain {
    token: BTreeMap<String, u128>,
    coin: BTreeMap<String, u128>,
    /// What left the treasury for the merchant (settlements and refunds).
    paid_for_merchant: u128,
}

impl Chain {
    fn take(map: &mut BTreeMap<String, u128>, who: &str, n: u128) {
        let left = map[who] - n;
        map.insert(who.to_owned(), left);
    }
    fn add(map: &mut BTreeMap<String, u128>, who: &str, n: u128) {
        *map.entry(who.to_owned()).or_default() += n;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_lives_keep_the_books_balanced_and_equal_to_the_chain(
        limit in 0..200u128,
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        let (l, c) = (usdc(), coin());
        let mut b = books(limit);
        let mut chain = Chain::default();
        let mut posted: Vec<Transfer> = Vec::new();
        let mut credited = [false; 3];
        let mut settled_ids: Vec<i64> = Vec::new();
        let mut seq = 0u64;
        let deposits = ["0xd0", "0xd1", "0xd2"];
        let treasury = l.account(Kind::Treasury, "");
        let merchant = l.account(Kind::Merchant, "1");
        let mut merchant_in: u128 = 0;
        let mut fees_charged: u128 = 0;
        for s in steps {
            seq += 1;
            let mut batch: Vec<Transfer> = Vec::new();
            match s {
                Step::Pay { d, units } => {
                    Chain::add(&mut chain.token, deposits[d], units);
                    batch.push(postings::receipt(&l, deposits[d], (&format!("0x{seq}"), 0), units));
                }
                Step::Credit { d } => {
                    let unallocated = l.account(Kind::Unallocated, deposits[d]);
                    let units = u128::try_from(balance(&b, &unallocated)).unwrap();
                    if !credited[d] && units > 0 {
                        credited[d] = true;
                        batch.push(postings::credit(&l, deposits[d], (d as i64, 1), units));
                    }
                }
                Step::Settle { fee, gas, succeeds } => {
                    let ready: Vec<i64> = (0..3)
                        .filter(|d| credited[*d] && !settled_ids.contains(&(*d as i64)))
                        .map(|d| d as i64)
                        .collect();
                    if ready.is_empty() {
                        continue;
                    }
                    let parts: Vec<Part> = ready
                        .iter()
                        .map(|id| Part { transaction_id: *id, psp_units: fee, gas_units: gas, net_units: 1_000 })
                        .collect();
                    let available = b.accounts[&merchant].1.available(Kind::Merchant);
                    let pay = postings::payout(available, &parts);
                    let send = format!("snd_{seq}");
                    let pending = postings::settlement(&l, Scoped::new(InstitutionId(7), 1), &send, &parts, pay, false);
                    let mut trial = b.clone();
                    if pending.iter().try_for_each(|t| trial.apply(t)).is_err() {
                        continue; // refused whole: the treasury is short
                    }
                    b = trial;
                    posted.extend(pending.iter().cloned());
                    // The transaction costs gas either way; it moves money only if it succeeds.
                    let wei = 7u128;
                    if chain.coin.get("treasury").copied().unwrap_or(0) < wei
                        || (succeeds && chain.token.get("treasury").copied().unwrap_or(0) < pay)
                    {
                        // Not mined (the node refuses it): given up, nothing moved.
                        batch.extend(postings::end(&pending, false));
                    } else {
                        Chain::take(&mut chain.coin, "treasury", wei);
                        batch.extend(postings::gas(&c, &send, wei));
                        if succeeds {
                            Chain::take(&mut chain.token, "treasury", pay);
                            chain.paid_for_merchant += pay;
                            fees_charged += parts.iter().map(|p| p.psp_units + p.gas_units).sum::<u128>();
                            settled_ids.extend(&ready);
                        }
                        batch.extend(postings::end(&pending, succeeds));
                    }
                }
                Step::Refund { d, units, succeeds } => {
                    if !credited[d] {
                        continue;
                    }
                    let rid = format!("rfd_{seq}");
                    let pending = postings::refund(&l, (d as i64, 1), &rid, units);
                    if b.apply(&pending).is_err() {
                        continue; // refused: beyond the merchant's limit or the treasury
                    }
                    posted.push(pending.clone());
                    let ok = succeeds && chain.token.get("treasury").copied().unwrap_or(0) >= units;
                    if ok {
                        Chain::take(&mut chain.token, "treasury", units);
                        chain.paid_for_merchant += units;
                    }
                    batch.extend(postings::end(std::slice::from_ref(&pending), ok));
                }
                Step::Sweep { d, gas } => {
                    let held = chain.token.get(deposits[d]).copied().unwrap_or(0);
                    let fuel = chain.coin.get("0xgas").copied().unwrap_or(0);
                    if held == 0 || fuel < gas + 1 {
                        continue;
                    }
                    // Fund the gas (its own gas: 1 wei), then sweep everything; the sweep
                    // spends all of the funded gas.
                    let fund = format!("0xf{seq}");
                    Chain::take(&mut chain.coin, "0xgas", gas + 1);
                    Chain::add(&mut chain.coin, deposits[d], gas);
                    batch.extend(postings::gas_funding(&c, ("0xgas", deposits[d]), &fund, gas));
                    batch.extend(postings::sweep((&l, &c), "0xgas", &fund, 0, 1));
                    let tx = format!("0xs{seq}");
                    Chain::take(&mut chain.token, deposits[d], held);
                    Chain::add(&mut chain.token, "treasury", held);
                    Chain::take(&mut chain.coin, deposits[d], gas);
                    batch.extend(postings::sweep((&l, &c), deposits[d], &tx, held, gas));
                }
                Step::Fund { units, coin: is_coin } => {
                    let (ledger, map, account) = if is_coin {
                        (&c, &mut chain.coin, c.account(Kind::Custody, "0xgas"))
                    } else {
                        (&l, &mut chain.token, l.account(Kind::Treasury, ""))
                    };
                    Chain::add(map, if is_coin { "0xgas" } else { "treasury" }, units);
                    batch.push(postings::funding(ledger, &account, seq, units));
                    if !is_coin {
                        // The treasury's coin for gas, funded alongside.
                        Chain::add(&mut chain.coin, "treasury", units);
                        batch.push(postings::funding(&c, &c.account(Kind::Treasury, ""), seq, units));
                    }
                }
            }
            for t in &batch {
                prop_assert!(b.apply(t).is_ok(), "{t:?} refused: {:?}", b.apply(t));
                if t.code == Code::Credit {
                    merchant_in += t.amount;
                }
                posted.push(t.clone());
            }
            // Every asset balances, and matches the chain: the treasury, and custody (the
            // deposits plus the gas address).
            prop_assert!(b.balanced());
            for (ledger, map) in [(&l, &chain.token), (&c, &chain.coin)] {
                let on_chain_treasury = i128::try_from(map.get("treasury").copied().unwrap_or(0)).unwrap();
                prop_assert_eq!(balance(&b, &ledger.account(Kind::Treasury, "")), on_chain_treasury);
                for who in deposits.iter().chain(["0xgas"].iter()) {
                    let held = i128::try_from(map.get(*who).copied().unwrap_or(0)).unwrap();
                    prop_assert_eq!(balance(&b, &ledger.account(Kind::Custody, who)), held);
                }
            }
            // What left the treasury for the merchant never exceeds what its payments brought
            // in, less the fees it was charged, plus the debt it is allowed.
            prop_assert!(chain.paid_for_merchant + fees_charged <= merchant_in + limit);
        }
        // The kept totals are what the transfers alone give.
        let kinds: BTreeMap<String, Kind> = b.accounts.iter().map(|(id, (k, _))| (id.clone(), *k)).collect();
        let limits: BTreeMap<String, u128> = b.accounts.iter().map(|(id, (_, t))| (id.clone(), t.debt_limit)).collect();
        let again = recompute(&kinds, &limits, &posted);
        for (id, (_, kept)) in &b.accounts {
            prop_assert_eq!(&again[id], kept, "{}", id);
        }
        prop_assert_eq!(balance(&b, &treasury), i128::try_from(chain.token.get("treasury").copied().unwrap_or(0)).unwrap());
    }
}

/// A balance carried by a move opens the account in the object and closes it in D1 with the
/// same transfer mirrored: each store's account ends where the other began, and the two links
/// mirror each other.
#[test]
fn a_moved_balance_opens_in_one_store_what_it_closes_in_the_other() {
    let merchant = "polygon:0xusdc:merchant:7";
    for balance in [25_i128, -25] {
        let opening = postings::moved((merchant, "link:object"), balance, 3, true).unwrap();
        let closing = postings::moved((merchant, "link:d1"), balance, 3, false).unwrap();
        assert_eq!(opening.id, closing.id, "one id on both sides");
        assert_eq!((opening.amount, closing.amount), (25, 25));
        assert_eq!(opening.code, Code::Move);
        if balance > 0 {
            // A credit balance (owed to the merchant): credited in the object, debited in D1.
            assert_eq!(
                (opening.debit.as_str(), opening.credit.as_str()),
                ("link:object", merchant)
            );
            assert_eq!(
                (closing.debit.as_str(), closing.credit.as_str()),
                (merchant, "link:d1")
            );
        } else {
            assert_eq!(
                (opening.debit.as_str(), opening.credit.as_str()),
                (merchant, "link:object")
            );
            assert_eq!(
                (closing.debit.as_str(), closing.credit.as_str()),
                ("link:d1", merchant)
            );
        }
    }
    assert!(postings::moved((merchant, "link"), 0, 3, true).is_none());
}

/// A move of the treasury's float: the burn reserves the amount into flight (beyond the
/// treasury's balance it is refused), posted it leaves the source's treasury, and at the mint the
/// fee and what was minted leave flight for CCTP on the source while the destination's treasury
/// receives what was minted: nothing is left in flight and the two `world:cctp` accounts mirror.
#[test]
fn a_float_move_leaves_one_treasury_for_the_other_less_the_fee() {
    let (source, destination) = (usdc(), Ledger::new("base", "0xBaseToken"));
    let mut b = books(0);
    for (ledger, kind, owner) in [
        (&source, Kind::Treasury, "bridge"),
        (&source, Kind::World, postings::CCTP),
        (&source, Kind::World, postings::CCTP_FEE),
        (&destination, Kind::Treasury, ""),
        (&destination, Kind::World, postings::CCTP),
    ] {
        b.accounts
            .insert(ledger.account(kind, owner), (kind, Totals::default()));
    }
    b.apply(&postings::funding(
        &source,
        &source.account(Kind::Treasury, ""),
        5,
        100,
    ))
    .unwrap();
    let too_much = postings::float_burn(&source, "fm_0", 101).unwrap();
    assert!(matches!(
        b.apply(&too_much),
        Err(Refusal::Exceeds {
            kind: Kind::Treasury,
            ..
        })
    ));
    let burn = postings::float_burn(&source, "fm_1", 40).unwrap();
    b.apply(&burn).unwrap();
    for t in postings::end(&[burn], true) {
        b.apply(&t).unwrap();
    }
    assert_eq!(balance(&b, &source.account(Kind::Treasury, "")), 60);
    assert_eq!(balance(&b, &postings::in_flight(&source)), 40);
    for t in postings::float_minted((&source, &destination), "fm_1", 40, 3) {
        b.apply(&t).unwrap();
    }
    assert_eq!(balance(&b, &postings::in_flight(&source)), 0);
    assert_eq!(balance(&b, &destination.account(Kind::Treasury, "")), 37);
    let cctp = |ledger: &Ledger| balance(&b, &ledger.account(Kind::World, postings::CCTP));
    assert_eq!((cctp(&source), cctp(&destination)), (-37, 37));
    assert_eq!(
        balance(&b, &source.account(Kind::World, postings::CCTP_FEE)),
        -3
    );
    // Nothing minted (all of it a fee): the destination receives nothing.
    assert!(
        postings::float_minted((&source, &destination), "fm_2", 5, 5)
            .iter()
            .all(|t| !t.debit.starts_with("base"))
    );
}
