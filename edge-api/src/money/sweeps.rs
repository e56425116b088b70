//! Custody sweeps, followed: the offline custody signer (`xtask sweep`) moves what a deposit
//! address holds, once its watch has ended, to the treasury, funding a token deposit's gas from
//! the custody gas address first, and stores each transaction (`custody_sweeps`) before it
//! broadcasts it. The worker holds no custody key; from the cron it follows those transactions
//! the way [`super::sends`] follows the treasury's:
//!
//! - **Final evidence only.** A sweep is `confirmed` (or `failed`: reverted) only from its
//!   receipt at the network's confirmation depth, and only once a second read shows the
//!   receipt's block is still the chain's block at that height.
//! - **The same bytes again.** Unknown to the node (restarted, evicted), it is broadcast again
//!   as it was signed; nothing is ever signed here.
//! - **Posted with its state.** The batch that makes it final posts it to the books
//!   ([`shared_types::ledger::postings::sweep`], or [`postings::gas_funding`] and the funding's
//!   own gas): the treasury receives what the deposit held, the gas comes out of the sender's
//!   coin, at the receipt's gas used × effective price, so the books match the chain to the wei.
//!   These are final facts of the chain, recorded whatever the limits: where the books held less
//!   at the sender (money at a deposit that no receipt booked, the gas address's funding not yet
//!   booked), reconciliation shows it.

use std::str::FromStr;

use payrail_evm::Token;
use serde_json::{json, Value};
use shared_types::ledger::split::{self, Side};
use shared_types::ledger::{postings, Kind, Ledger, Transfer};

use crate::chain::config::{self, Network, NATIVE_DECIMALS};
use crate::chain::error::{ChainError, ChainResult};
use crate::chain::native;
use crate::chain::rpc::{self, Budget};
use crate::ctx::Ctx;
use crate::db;
use crate::db::ledger::{self, Account, Book, When};
use crate::db::sweeps::{self, Outcome, Sweep};
use crate::db::Db;
use crate::error::{ApiError, OrInternal};

/// Most sweeps a run follows.
const LIVE_PER_RUN: i64 = 20;
/// The most node calls following one sweep makes: the head, its receipt, the block at the
/// receipt's height; or, with no receipt, the transaction and a broadcast.
pub(crate) const MOST_FOLLOW_CALLS: u32 = 1 + 1 + 1 + 2;

/// The cron's part: follows the sweeps still `sent` (at most [`LIVE_PER_RUN`] a run, within the
/// sweeps' share of the run's node calls), and makes each final, with its transfers in the
/// books, once its receipt is final.
pub async fn run(ctx: &Ctx) -> Result<(), ApiError> {
    let live = sweeps::live(&ctx.db, LIVE_PER_RUN)
        .await
        .or_internal("read custody sweeps")?;
    if live.is_empty() {
        return Ok(());
    }
    let budget = Budget::new(crate::chain::CronShares::configured(ctx).sweeps);
    let networks = crate::chain::networks_within(ctx, &budget)?;
    // Each network's node is asked its chain id once a run: one on another chain is not read.
    let mut chains = crate::chain::ChainChecks::default();
    for sweep in &live {
        let Some((name, network)) = networks.get_key_value(&sweep.network) else {
            worker::console_warn!(
                "{} is no longer configured: sweep {} waits",
                sweep.network,
                sweep.tx_hash
            );
            continue;
        };
        let right = chains.right(name, network, "custody sweeps").await;
        if !right || network.node.calls_left() < MOST_FOLLOW_CALLS {
            continue; // another chain, or this run's calls on it are spent: next run
        }
        // A held deposit's custody account is in its institution's object.
        let held = match sweep.held_by {
            Some(institution) => Some((institution, ctx.institution_object(institution)?)),
            None => None,
        };
        let held = held
            .as_ref()
            .map(|(institution, object)| (*institution, object));
        if let Err(e) = follow(ctx, network, sweep, held).await {
            if e.is_budget() {
                continue;
            }
            worker::console_warn!("following sweep {}: {e}", sweep.tx_hash);
            let why = match e {
                stale @ ChainError::StaleHead(_) => stale.public(),
                e => e.within(format!("the {name} node")).public(),
            };
            if let Err(e) = sweeps::note(&ctx.db, &sweep.tx_hash, Some(&why), ctx.now()).await {
                worker::console_warn!("record why sweep {} waits: {e}", sweep.tx_hash);
            }
        }
    }
    Ok(())
}

/// One step of one sweep: broadcast again if the node does not know it, or made final (and
/// posted) once its receipt is. `held`: the institution that keeps the deposit's custody
/// ([`Sweep::held_by`]), with its object.
async fn follow(
    ctx: &Ctx,
    network: &Network,
    sweep: &Sweep,
    held: Option<(i64, &Db)>,
) -> ChainResult<()> {
    let node = &network.node;
    let head = rpc::head(node).await?;
    // A node whose head stands still is not asked to decide anything.
    crate::chain::heads::fresh(ctx, &sweep.network, network, head).await?;
    let receipt = rpc::call(node, "eth_getTransactionReceipt", json!([sweep.tx_hash])).await?;
    if receipt.is_null() {
        let known = rpc::call(node, "eth_getTransactionByHash", json!([sweep.tx_hash])).await?;
        if known.is_null() {
            // The node does not have it (restarted, evicted, or the signer stopped before its
            // broadcast): the same bytes again.
            let error = rpc::call(node, "eth_sendRawTransaction", json!([sweep.raw]))
                .await
                .err()
                .map(|e| e.public());
            sweeps::note(&ctx.db, &sweep.tx_hash, error.as_deref(), ctx.now()).await?;
        }
        return Ok(());
    }
    let Some(outcome) = final_outcome(network, sweep, &receipt, head).await? else {
        return Ok(()); // mined, not yet final
    };
    post(ctx, sweep, &outcome, held).await
}

/// The sweep's outcome once its receipt is final: at depth, and its block still the chain's at
/// that height.
async fn final_outcome(
    network: &Network,
    sweep: &Sweep,
    receipt: &Value,
    head: u64,
) -> ChainResult<Option<Outcome>> {
    let Some(block) = crate::chain::final_block(network, receipt, head).await? else {
        return Ok(None);
    };
    let gas_used = native::wei(&receipt["gasUsed"])
        .ok_or_else(|| ChainError::answer("the receipt's gasUsed is not a quantity"))?;
    // Signed with max fee = tip, a transaction pays exactly its price per gas; the receipt's
    // effective price says so (a node too old to give it is taken at the signed price).
    let gas_paid = match &receipt["effectiveGasPrice"] {
        Value::Null => u128::from_str(&sweep.gas_price)
            .map_err(|_| ChainError::answer("a stored gas price is not a number"))?,
        price => native::wei(price).ok_or_else(|| {
            ChainError::answer("the receipt's effectiveGasPrice is not a quantity")
        })?,
    };
    let l1_fee = super::treasury::l1_fee_paid(receipt)?;
    Ok(Some(Outcome {
        succeeded: rpc::quantity(&receipt["status"])? == 1,
        block,
        gas_used,
        gas_paid,
        l1_fee,
    }))
}

/// Makes the sweep final and posts it to the books, in one batch. A held deposit's sweep
/// ([`Sweep::held_by`]) is posted as a half in each store ([`held_halves`]): the object's half
/// first, once by its transfers' ids, then the state and the treasury's half in D1's batch; a
/// run stopped between the two posts the treasury's half next run, the object's found posted.
async fn post(
    ctx: &Ctx,
    sweep: &Sweep,
    outcome: &Outcome,
    held: Option<(i64, &Db)>,
) -> ChainResult<()> {
    let now = ctx.now();
    let (accounts, transfers) = posting(sweep, outcome)?;
    let (accounts, transfers) = match held {
        Some((institution, object)) => {
            let halves = held_halves(sweep, &accounts, &transfers, institution)?;
            if !post_in_object(ctx, sweep, (institution, object), halves.institution).await? {
                return Ok(()); // noted: next run
            }
            halves.treasury
        }
        None => (accounts, transfers),
    };
    let ids: Vec<String> = transfers.iter().map(|t| t.id.clone()).collect();
    let mut book = Book::load(&ctx.db, &accounts, &ids, &[]).await?;
    for t in transfers {
        // Already posted (another run made it final): the state alone, then unchanged.
        book.record(t).map_err(|refusal| {
            ChainError::rule(format!(
                "the books refuse sweep {}: {refusal}",
                sweep.tx_hash
            ))
        })?;
    }
    let mut statements = vec![sweeps::finish(&sweep.tx_hash, outcome, now)?];
    statements.extend(book.statements(&sweeps::turned_final(&sweep.tx_hash, now), now)?);
    match db::batch(&ctx.db, statements).await {
        Ok(()) => Ok(()),
        Err(e) if ledger::raced(&e) => {
            // The accounts moved while this was computed: nothing was written, next run.
            worker::console_warn!("sweep {}: the books moved meanwhile ({e})", sweep.tx_hash);
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// What each store posts of a held sweep: the accounts it names and its transfers.
#[derive(Debug, Default)]
struct HeldHalves {
    /// In the institution's object: the deposit's custody, against its link to the treasury.
    institution: (Vec<Account>, Vec<Transfer>),
    /// In the treasury's books: the treasury, the gas and the custody gas address, against
    /// their link to the institution.
    treasury: (Vec<Account>, Vec<Transfer>),
}

/// A held deposit's sweep (or gas funding) `transfers`, split between institution
/// `institution`'s object and the treasury's books ([`split::split_by`]): the deposit's custody
/// accounts are the institution's, the custody gas address's is the treasury's (which [`split`]
/// cannot tell by its kind). Pure.
fn held_halves(
    sweep: &Sweep,
    accounts: &[Account],
    transfers: &[Transfer],
    institution: i64,
) -> ChainResult<HeldHalves> {
    // The accounts a half may name: the sweep's own, and each ledger's links between stores.
    let mut known = accounts.to_vec();
    for a in accounts {
        for owner in [
            split::TREASURY_LINK.to_owned(),
            split::institution_link(institution),
        ] {
            known.push(Account::new(
                &a.ledger,
                (&a.asset, a.decimals),
                Kind::World,
                &owner,
            ));
        }
    }
    let gas_address = sweep.is_gas().then(|| {
        Ledger::new(&sweep.network, Token::NATIVE)
            .account(Kind::Custody, &sweep.from_address.to_ascii_lowercase())
    });
    let side_of = |id: &str| match &gas_address {
        Some(gas) if gas == id => Some(Side::Treasury),
        _ => split::side(id),
    };
    let mut halves = HeldHalves::default();
    for t in transfers {
        let split = split::split_by(t, institution, side_of)
            .ok_or_else(|| ChainError::rule(format!("{} names no account", t.id)))?;
        halves.institution.1.extend(split.institution);
        halves.treasury.1.extend(split.treasury);
    }
    for (named, transfers) in [
        (&mut halves.institution.0, &halves.institution.1),
        (&mut halves.treasury.0, &halves.treasury.1),
    ] {
        let mut seen = std::collections::BTreeSet::new();
        named.extend(
            known
                .iter()
                .filter(|a| {
                    let id = a.id();
                    transfers.iter().any(|t| t.debit == id || t.credit == id) && seen.insert(id)
                })
                .cloned(),
        );
    }
    Ok(halves)
}

/// Posts the object's half of a held sweep in institution `institution`'s `object`, once (by
/// its transfers' ids), if the object keeps the deposit (a checkout's deposit or a merchant's
/// top-up address of its own). `false` when the sweep must wait: the object does not keep it
/// (noted on the sweep), or its accounts moved meanwhile.
async fn post_in_object(
    ctx: &Ctx,
    sweep: &Sweep,
    (institution, object): (i64, &Db),
    (accounts, transfers): (Vec<Account>, Vec<Transfer>),
) -> ChainResult<bool> {
    let deposit = if sweep.is_gas() {
        &sweep.to_address
    } else {
        &sweep.from_address
    };
    if !db::deposits::store_holds(
        object,
        shared_types::ids::InstitutionId(institution),
        &deposit.to_ascii_lowercase(),
    )
    .await?
    {
        let why = format!("institution {institution} keeps no deposit at {deposit}");
        sweeps::note(&ctx.db, &sweep.tx_hash, Some(&why), ctx.now()).await?;
        return Ok(false);
    }
    let ids: Vec<String> = transfers.iter().map(|t| t.id.clone()).collect();
    let mut book = Book::load(object, &accounts, &ids, &[]).await?;
    for t in transfers {
        book.record(t).map_err(|refusal| {
            ChainError::rule(format!(
                "institution {institution}'s books refuse sweep {}: {refusal}",
                sweep.tx_hash
            ))
        })?;
    }
    match db::batch(object, book.statements(&When::always(), ctx.now())?).await {
        Ok(()) => Ok(true),
        Err(e) if ledger::raced(&e) => {
            worker::console_warn!(
                "sweep {}: institution {institution}'s books moved meanwhile ({e})",
                sweep.tx_hash
            );
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// What a final sweep posts: the accounts it names (each once) and its transfers, in order:
/// what it moved (nothing if it reverted) and its gas, from the sender's coin. Pure.
fn posting(sweep: &Sweep, outcome: &Outcome) -> ChainResult<(Vec<Account>, Vec<Transfer>)> {
    let network = sweep.network.as_str();
    let units = u128::from_str(&sweep.units)
        .map_err(|_| ChainError::answer("stored units are not a number"))?;
    let moved = if outcome.succeeded { units } else { 0 };
    let gas_wei = outcome
        .fee()
        .ok_or_else(|| ChainError::answer("the receipt's gas is out of range"))?;
    let coin = Ledger::new(network, Token::NATIVE);
    let coin_asset = (config::coin(network), NATIVE_DECIMALS);
    let asset = Ledger::new(network, &sweep.token.lower());
    let asset_of = (sweep.asset.as_str(), sweep.decimals);
    let (from, to) = (
        sweep.from_address.to_ascii_lowercase(),
        sweep.to_address.to_ascii_lowercase(),
    );
    let mut accounts = vec![
        Account::new(&coin, coin_asset, Kind::Custody, &from),
        Account::new(&coin, coin_asset, Kind::Gas, ""),
    ];
    let transfers = if sweep.is_gas() {
        accounts.push(Account::new(&coin, coin_asset, Kind::Custody, &to));
        let mut out: Vec<Transfer> =
            postings::gas_funding(&coin, (&from, &to), &sweep.tx_hash, moved)
                .into_iter()
                .collect();
        out.extend(postings::sweep(
            (&coin, &coin),
            &from,
            &sweep.tx_hash,
            0,
            gas_wei,
        ));
        out
    } else {
        accounts.push(Account::new(&asset, asset_of, Kind::Custody, &from));
        accounts.push(Account::new(&asset, asset_of, Kind::Treasury, ""));
        postings::sweep((&asset, &coin), &from, &sweep.tx_hash, moved, gas_wei)
    };
    let mut seen = std::collections::BTreeSet::new();
    accounts.retain(|a| seen.insert(a.id()));
    Ok((accounts, transfers))
}

#[cfg(test)]
mod tests {
    use shared_types::ledger::{Books, Code, Totals};

    use super::*;
    use crate::db::sweeps::SweepKind;

    const DEPOSIT: &str = "0x9858effd232b4033e47d90003d41ec34ecaeda94";
    const TREASURY: &str = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";
    const GAS: &str = "0x6fac4d18c912343bf86fa7049364dd4e424ab9c0";
    const USDC: &str = "0x5fbdb2315678afecb367f032d93f642f64180aa3";

    fn row(kind: &str, token: &str, (from, to): (&str, &str), units: u128) -> Sweep {
        Sweep {
            tx_hash: format!("0x{kind}"),
            network: "polygon".into(),
            token: Token::parse(token).unwrap(),
            asset: if token == Token::NATIVE {
                "POL"
            } else {
                "USDC"
            }
            .into(),
            decimals: if token == Token::NATIVE { 18 } else { 6 },
            kind: if kind == "gas" {
                SweepKind::Gas
            } else {
                SweepKind::Sweep
            },
            from_address: from.into(),
            to_address: to.into(),
            nonce: 0,
            units: units.to_string(),
            gas_limit: 60_000,
            gas_price: "30".into(),
            raw: "0x02".into(),
            created_at: 0,
            held_by: None,
        }
    }

    fn outcome(succeeded: bool, gas_used: u128) -> Outcome {
        Outcome {
            succeeded,
            block: 42,
            gas_used,
            gas_paid: 30,
            l1_fee: 0,
        }
    }

    /// Books with `accounts`, each custody one holding what `balances` says (a receipt from
    /// its unallocated account, so every ledger balances).
    fn books(accounts: &[Account], balances: &[(String, u128)]) -> Books {
        let mut books = Books::default();
        for a in accounts {
            let mut totals = Totals::default();
            if let Some((_, b)) = balances.iter().find(|(id, _)| *id == a.id()) {
                totals.debits_posted = *b;
                let other = a.ledger.account(Kind::Unallocated, &a.owner);
                let owed = Totals {
                    credits_posted: *b,
                    ..Totals::default()
                };
                books.accounts.insert(other, (Kind::Unallocated, owed));
            }
            books.accounts.insert(a.id(), (a.kind, totals));
        }
        books
    }

    fn custody(token: &str, owner: &str) -> String {
        Ledger::new("polygon", token).account(Kind::Custody, owner)
    }

    #[test]
    fn a_token_sweep_moves_the_deposit_to_the_treasury_and_its_gas_from_its_coin() {
        let sweep = row("sweep", USDC, (DEPOSIT, TREASURY), 12_500_000);
        let (accounts, transfers) = posting(&sweep, &outcome(true, 35_000)).unwrap();
        let codes: Vec<(Code, u128)> = transfers.iter().map(|t| (t.code, t.amount)).collect();
        assert_eq!(
            codes,
            [(Code::Sweep, 12_500_000), (Code::SweepGas, 35_000 * 30)]
        );
        assert_eq!(
            transfers[0].debit,
            Ledger::new("polygon", USDC).account(Kind::Treasury, "")
        );
        assert_eq!(transfers[1].credit, custody(Token::NATIVE, DEPOSIT));
        // Its books hold the payment and the funded gas: it posts within every limit, and
        // leaves the deposit's custody at what the chain holds.
        let mut book = books(
            &accounts,
            &[
                (custody(USDC, DEPOSIT), 12_500_000),
                (custody(Token::NATIVE, DEPOSIT), 60_000 * 30),
            ],
        );
        for t in &transfers {
            book.apply(t).unwrap();
        }
        assert!(book.balanced());
        let left = |id: &str| book.accounts[id].1.balance(Kind::Custody);
        assert_eq!(left(&custody(USDC, DEPOSIT)), 0);
        assert_eq!(
            left(&custody(Token::NATIVE, DEPOSIT)),
            25_000 * 30,
            "the gas not used"
        );
    }

    /// A held deposit's gas funding and its sweep, split: the deposit's custody moves in its
    /// institution's object against the link to the treasury, the treasury, its gas and the
    /// custody gas address in the treasury's books against the link to the institution; each
    /// store balances by itself, the links mirror each other, and the deposit ends empty.
    #[test]
    fn a_held_deposits_sweep_is_a_half_in_each_store_and_both_balance() {
        let funding = Sweep {
            held_by: Some(7),
            ..row("gas", Token::NATIVE, (GAS, DEPOSIT), 60_000 * 30)
        };
        let sweep = Sweep {
            held_by: Some(7),
            ..row("sweep", USDC, (DEPOSIT, TREASURY), 12_500_000)
        };
        let (mut object, mut treasury) = (Books::default(), Books::default());
        // What each store holds first: the payment at the deposit (its receipt, in the
        // object), the gas address's coin (the operator's funding, in the treasury's books).
        let receipt = Ledger::new("polygon", USDC).account(Kind::Unallocated, DEPOSIT);
        object.accounts.insert(
            custody(USDC, DEPOSIT),
            (
                Kind::Custody,
                Totals {
                    debits_posted: 12_500_000,
                    ..Totals::default()
                },
            ),
        );
        object.accounts.insert(
            receipt,
            (
                Kind::Unallocated,
                Totals {
                    credits_posted: 12_500_000,
                    ..Totals::default()
                },
            ),
        );
        let world = Ledger::new("polygon", Token::NATIVE).account(Kind::World, "");
        treasury.accounts.insert(
            custody(Token::NATIVE, GAS),
            (
                Kind::Custody,
                Totals {
                    debits_posted: 10u128.pow(18),
                    ..Totals::default()
                },
            ),
        );
        treasury.accounts.insert(
            world,
            (
                Kind::World,
                Totals {
                    credits_posted: 10u128.pow(18),
                    ..Totals::default()
                },
            ),
        );
        for (row, gas_used) in [(&funding, 21_000), (&sweep, 60_000)] {
            let (accounts, transfers) = posting(row, &outcome(true, gas_used)).unwrap();
            let halves = held_halves(row, &accounts, &transfers, 7).unwrap();
            for ((named, half), books) in [
                (&halves.institution, &mut object),
                (&halves.treasury, &mut treasury),
            ] {
                for a in named {
                    books
                        .accounts
                        .entry(a.id())
                        .or_insert((a.kind, Totals::default()));
                }
                for t in half {
                    assert!(
                        named.iter().any(|a| a.id() == t.debit)
                            && named.iter().any(|a| a.id() == t.credit),
                        "{t:?} names an account its store was not given"
                    );
                    books.apply(t).unwrap();
                }
            }
        }
        assert!(object.balanced() && treasury.balanced());
        let balance = |books: &Books, id: &str| books.accounts[id].1.balance(books.accounts[id].0);
        assert_eq!(balance(&object, &custody(USDC, DEPOSIT)), 0);
        assert_eq!(
            balance(&object, &custody(Token::NATIVE, DEPOSIT)),
            0,
            "the funded gas, spent"
        );
        assert!(
            object
                .accounts
                .keys()
                .all(|id| !id.contains(GAS) && !id.contains(":treasury:") && !id.contains(":gas:")),
            "the treasury's accounts stay in its books"
        );
        let usdc = Ledger::new("polygon", USDC);
        assert_eq!(
            balance(&treasury, &usdc.account(Kind::Treasury, "")),
            12_500_000
        );
        assert!(treasury.accounts.keys().all(|id| !id.contains(DEPOSIT)));
        // The links mirror each other, in both ledgers.
        for ledger in [usdc, Ledger::new("polygon", Token::NATIVE)] {
            let to_treasury = &object.accounts[&ledger.account(Kind::World, "treasury")].1;
            let to_institution =
                &treasury.accounts[&ledger.account(Kind::World, "institution:7")].1;
            assert_eq!(
                to_treasury.credits_posted as i128 - to_treasury.debits_posted as i128,
                to_institution.debits_posted as i128 - to_institution.credits_posted as i128
            );
        }
    }

    #[test]
    fn a_reverted_sweep_moves_nothing_but_its_gas() {
        let sweep = row("sweep", USDC, (DEPOSIT, TREASURY), 12_500_000);
        let (_, transfers) = posting(&sweep, &outcome(false, 40_000)).unwrap();
        assert_eq!(transfers.len(), 1);
        assert_eq!(transfers[0].code, Code::SweepGas);
    }

    #[test]
    fn a_gas_funding_moves_coin_between_custody_accounts_and_pays_its_own_gas() {
        let sweep = row("gas", Token::NATIVE, (GAS, DEPOSIT), 1_800_000);
        let (accounts, transfers) = posting(&sweep, &outcome(true, 21_000)).unwrap();
        let moves: Vec<(Code, &str, &str, u128)> = transfers
            .iter()
            .map(|t| (t.code, t.debit.as_str(), t.credit.as_str(), t.amount))
            .collect();
        let gas = Ledger::new("polygon", Token::NATIVE).account(Kind::Gas, "");
        assert_eq!(
            moves,
            [
                (
                    Code::GasFunding,
                    custody(Token::NATIVE, DEPOSIT).as_str(),
                    custody(Token::NATIVE, GAS).as_str(),
                    1_800_000
                ),
                (
                    Code::SweepGas,
                    gas.as_str(),
                    custody(Token::NATIVE, GAS).as_str(),
                    21_000 * 30
                ),
            ]
        );
        assert!(accounts
            .iter()
            .all(|a| a.asset == "POL" && a.decimals == 18));
        // Recorded whatever the books hold at the gas address (its funding not yet booked):
        // reconciliation shows the shortfall.
        let mut book = books(&accounts, &[]);
        for t in &transfers {
            book.record(t).unwrap();
        }
        assert!(book.balanced());
        assert_eq!(
            book.accounts[&custody(Token::NATIVE, GAS)]
                .1
                .balance(Kind::Custody),
            -(1_800_000 + 21_000 * 30)
        );
    }
}
