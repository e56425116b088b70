//! Reconciliation of the books with the chain, from the cron before settlement: for every
//! configured network, each of its tokens and its coin, at the confirmed block
//! `B = head + 1 − confirmations`.
//!
//! **Funding.** The operator funds the treasury (and the custody gas address, child
//! [`payrail_evm::derive::GAS_ADDRESS_INDEX`] of the deposit key, with the coin) by sending it money: the books learn
//! of it here. When the chain holds more there at `B` than the account's posted balance and
//! nothing is in flight (no live transaction of the treasury on the network, no sweep sent),
//! the excess is posted as funding from `world`
//! ([`shared_types::ledger::postings::funding`]). The accounts are read before the chain, and
//! the posting is guarded on the versions read ([`Book`]), so a transfer posted meanwhile can
//! never be taken for funding: the batch fails and the next run looks again.
//!
//! **Drift.** Every comparison is recorded (`db::reconciliations`): the treasury holding less
//! than its account, and custody: the addresses whose custody account holds something, those
//! still watched (as far as the watcher has read them) and the gas address, at most
//! [`ADDRESSES_PER_LEDGER`] a ledger a run, least recently compared first. An address that
//! differs from the books by another amount than at its last comparison is a new drift: the
//! operator (`PAYRAIL_OPERATOR_EMAIL`) is e-mailed once about it. Money that reaches a deposit
//! address after its watch ended is found by `xtask reconcile`, which reads every address.
//!
//! A node that does not answer (or the run's calls being spent) skips that network until the
//! next run: nothing is booked or recorded on a partial read, nor while something went into
//! flight during the read.

use payrail_evm::Token;
use serde_json::json;
use shared_types::ledger::{postings, units_text, Kind, Ledger};

use super::treasury;
use crate::chain::config::{self, Network, NATIVE_DECIMALS};
use crate::chain::error::{ChainError, ChainResult};
use crate::chain::rpc::{self, Budget, Node};
use crate::chain::{evm, native};
use crate::ctx::Ctx;
use crate::db::ledger::{self, Account, Book, When};
use crate::db::reconciliations::{self, NewReconciliation, Reading, Scope};
use crate::db::{moves, Batch, Db};
use crate::error::{ApiError, OrInternal};

/// The most node calls one network's funding step makes: the chain id, the head, the
/// treasury's balance of each token and of the coin, and the gas address's coin.
pub(crate) const MOST_NETWORK_CALLS: u32 = 2 + config::TOKENS.len() as u32 + 1 + 1;

/// One ledger of a network: a token (or the coin), what its amounts are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asset {
    /// The ledger (network and token contract, or `native`).
    pub ledger: Ledger,
    /// The token contract, or the coin.
    pub token: Token,
    /// The asset's symbol.
    pub symbol: String,
    /// Its decimals.
    pub decimals: u32,
}

impl Asset {
    /// Its account of `kind` owned by `owner`.
    pub fn account(&self, kind: Kind, owner: &str) -> Account {
        Account::new(&self.ledger, (&self.symbol, self.decimals), kind, owner)
    }

    /// Whether it is the network's coin.
    pub fn is_coin(&self) -> bool {
        self.token == Token::Native
    }
}

/// The ledgers of network `name`: each configured token, then its coin. Pure.
pub fn assets(name: &str, network: &Network) -> Vec<Asset> {
    let mut out: Vec<Asset> = config::TOKENS
        .iter()
        .filter_map(|symbol| {
            // The configuration's parser checked every contract's address.
            let token = network.tokens.get(*symbol)?;
            let contract = payrail_evm::Address::parse(&token.address).ok()?;
            Some(Asset {
                ledger: Ledger::new(name, &token.address),
                token: Token::Erc20(contract),
                symbol: (*symbol).to_owned(),
                decimals: token.decimals,
            })
        })
        .collect();
    out.push(Asset {
        ledger: Ledger::new(name, Token::NATIVE),
        token: Token::Native,
        symbol: config::coin(name).to_owned(),
        decimals: NATIVE_DECIMALS,
    });
    out
}

/// The confirmed block when the newest is `head`: the newest with `confirmations` blocks on
/// top of it, counting itself. Pure.
pub fn confirmed_block(head: u64, confirmations: u64) -> Option<u64> {
    (head + 1).checked_sub(confirmations)
}

/// What an account's comparison with the chain says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    /// The chain and the books agree.
    Agrees,
    /// The chain holds this much more, with nothing in flight: the operator's funding.
    Funding(u128),
    /// The chain holds less (negative) or, where more cannot be funding, more than the books:
    /// chain minus books.
    Drift(i128),
    /// Something is in flight that the books post only once it is final: look again later.
    Wait,
}

/// Compares what the chain holds (`chain`) with an account's posted balance (`book`); `busy`:
/// something in flight could explain a difference; `fundable`: more on chain is the operator's
/// funding (the treasury, the custody gas address). Pure.
pub fn judge(chain: u128, book: i128, busy: bool, fundable: bool) -> Finding {
    let chain = i128::try_from(chain).unwrap_or(i128::MAX);
    let drift = chain - book;
    match (drift, busy) {
        (0, _) => Finding::Agrees,
        (_, true) => Finding::Wait,
        (more, false) if more > 0 && fundable => {
            Finding::Funding(u128::try_from(more).unwrap_or(0))
        }
        (drift, false) => Finding::Drift(drift),
    }
}

/// The custody gas address of `ctx`'s deposit key, lower case, when one is configured.
pub fn gas_address(ctx: &Ctx) -> Result<Option<String>, ApiError> {
    ctx.evm_xpub()
        .map(|xpub| payrail_evm::derive::gas_address(&xpub))
        .transpose()
        .map_err(|e| ApiError::internal("derive the custody gas address", e.0))
}

/// `owner`'s balance of `token` (or of the coin) at `block`.
pub async fn balance_at(node: &Node, owner: &str, token: Token, block: u64) -> ChainResult<u128> {
    let tag = format!("{block:#x}");
    if token == Token::Native {
        let answer = rpc::call(node, "eth_getBalance", json!([owner, tag])).await?;
        native::wei(&answer)
            .ok_or_else(|| ChainError::answer("the node's balance is not a quantity"))
    } else {
        let call = json!({"to": token.lower(), "data": evm::balance_of_call(owner)});
        let word = rpc::call(node, "eth_call", json!([call, tag])).await?;
        evm::uint(&word).ok_or_else(|| ChainError::answer("the token's balance is unreadable"))
    }
}

/// Custody addresses compared a run, at most, per ledger (the least recently compared first).
pub const ADDRESSES_PER_LEDGER: i64 = 25;

/// The cron's part: reconciles every configured network, within the run's share of node calls.
pub async fn run(ctx: &Ctx) -> Result<(), ApiError> {
    let budget = Budget::new(crate::chain::CronShares::configured(ctx).books);
    let networks = crate::chain::networks_within(ctx, &budget)?;
    if networks.is_empty() {
        return Ok(());
    }
    let treasury = treasury::treasury(ctx)?.map(|t| t.address.to_ascii_lowercase());
    let gas = gas_address(ctx)?;
    let addresses = Addresses {
        treasury: treasury.as_deref(),
        gas: gas.as_deref(),
    };
    // The deposits of institutions held in their objects are compared with D1's, the objects
    // taken in turn like the cron's other work there.
    let held = moves::held(&ctx.db, moves::HELD_PER_RUN, ctx.now() / 60)
        .await
        .or_internal("list held institutions")?;
    let mut objects = Vec::with_capacity(held.len());
    for institution in held {
        objects.push((institution.id, ctx.institution_object(institution.id)?));
    }
    let count = networks.len();
    for (i, (name, network)) in networks.iter().enumerate() {
        if network.node.calls_left() < MOST_NETWORK_CALLS {
            worker::console_warn!(
                "reconciliation of {name} waits: this run's node calls are spent"
            );
            continue;
        }
        // Custody reads leave the networks after this one their funding step.
        let reserve = u32::try_from(count - i - 1).unwrap_or(u32::MAX) * MOST_NETWORK_CALLS;
        match reconcile(ctx, (name, network), addresses, &objects, reserve).await {
            Ok(found) => tell(ctx, name, found).await,
            Err(e) => worker::console_warn!("reconciliation of {name} skipped this run: {e}"),
        }
    }
    Ok(())
}

/// Most custody addresses read from one held object per ledger and run, before all are
/// ordered by when each was last compared.
const HELD_ADDRESSES_PER_OBJECT: i64 = 200;

/// Adds the custody addresses of the held institutions' `objects` to D1's `list` of a ledger,
/// and keeps the [`ADDRESSES_PER_LEDGER`] least recently compared of them all (D1 keeps when
/// each was compared). An object that cannot be read is logged and left for the next run.
async fn held_custody(
    ctx: &Ctx,
    objects: &[(i64, Db)],
    ledger: (&str, &str),
    list: &mut Vec<reconciliations::Custody>,
) -> ChainResult<()> {
    let mut more = Vec::new();
    for (institution, object) in objects {
        match reconciliations::held_custody(
            object,
            *institution,
            ledger,
            ctx.now(),
            HELD_ADDRESSES_PER_OBJECT,
        )
        .await
        {
            Ok(found) => more.extend(found),
            Err(e) => worker::console_warn!(
                "reconciliation: institution {institution}'s deposits not read this run: {e}"
            ),
        }
    }
    if more.is_empty() {
        return Ok(());
    }
    let addresses: Vec<&str> = more.iter().map(|c| c.address.as_str()).collect();
    let last = reconciliations::last_compared(&ctx.db, ledger, &addresses).await?;
    let known = |address: &str| last.iter().find(|k| k.address == address);
    // An address being swept waits (its chain balance moves before its books do), and so does
    // a watched one whose watch has not yet read as far as its last sweep (the top-ups the
    // watcher has yet to book would read as the sweep's shortfall).
    more.retain(|c| {
        !known(&c.address)
            .is_some_and(|k| k.sweeping != 0 || c.watched_to.is_some_and(|to| k.swept_in > to))
    });
    for c in &mut more {
        c.reconciled_at = known(&c.address).map_or(0, |k| k.checked_at);
    }
    list.extend(more);
    list.sort_by(|a, b| (a.reconciled_at, &a.address).cmp(&(b.reconciled_at, &b.address)));
    list.truncate(usize::try_from(ADDRESSES_PER_LEDGER).unwrap_or(usize::MAX));
    Ok(())
}

/// The addresses whose balances are the operator's to fund.
#[derive(Debug, Clone, Copy)]
struct Addresses<'a> {
    /// The treasury, lower case.
    treasury: Option<&'a str>,
    /// The custody gas address, lower case.
    gas: Option<&'a str>,
}

/// One account funded by the operator, as read from the books and from the chain.
struct Funded {
    asset: Asset,
    account: Account,
    address: String,
    chain: u128,
}

/// One comparison to record: an asset, a scope and the addresses read.
struct Compared {
    asset: Asset,
    scope: Scope,
    block: u64,
    readings: Vec<Reading>,
}

/// A recorded comparison that found a new drift: what to tell the operator.
struct NewDrift {
    id: i64,
    compared: Compared,
}

/// Reconciles one network: books its funding and records its comparisons in one batch;
/// returns the new drifts found. An error skips the network this run (nothing is recorded).
async fn reconcile(
    ctx: &Ctx,
    (name, network): (&str, &Network),
    addresses: Addresses<'_>,
    objects: &[(i64, Db)],
    reserve: u32,
) -> ChainResult<Vec<NewDrift>> {
    let treasury = addresses.treasury.unwrap_or("");
    let before = reconciliations::in_flight(&ctx.db, name, treasury).await?;
    crate::chain::check_chain(name, network).await?;
    let node = &network.node;
    let at_node = |e: ChainError| e.within(format!("the {name} node"));
    let head = rpc::head(node).await.map_err(|e| at_node(e.into()))?;
    let Some(block) = confirmed_block(head, network.confirmations) else {
        return Ok(Vec::new()); // a chain younger than its depth holds nothing final
    };
    // A node behind what the books already hold final (a lagging backend behind a load
    // balancer) shows money that has left as still there, which would pass for funding: it is
    // compared with nothing and books nothing this run.
    if block < before.final_block {
        worker::console_warn!(
            "{name}: the node's confirmed block {block} is behind block {}, where the books \
             already hold a transaction final: not reconciled this run",
            before.final_block
        );
        return Ok(Vec::new());
    }
    let assets = assets(name, network);

    // The books first: the accounts the operator funds, and the custody addresses to compare.
    let mut funded: Vec<Funded> = Vec::new();
    for asset in &assets {
        if let Some(treasury) = addresses.treasury {
            funded.push(Funded {
                account: asset.account(Kind::Treasury, ""),
                address: treasury.to_owned(),
                asset: asset.clone(),
                chain: 0,
            });
        }
        if let (Some(gas), true) = (addresses.gas, asset.is_coin()) {
            funded.push(Funded {
                account: asset.account(Kind::Custody, gas),
                address: gas.to_owned(),
                asset: asset.clone(),
                chain: 0,
            });
        }
    }
    let mut accounts: Vec<Account> = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    for f in &funded {
        accounts.push(f.account.clone());
        accounts.push(f.asset.account(Kind::World, ""));
        ids.push(postings::funding(&f.asset.ledger, &f.account.id(), block, 1).id);
    }
    let mut book = Book::load(&ctx.db, &accounts, &ids, &[]).await?;
    let now = ctx.now();
    let mut custody = Vec::new();
    for asset in &assets {
        let gas = if asset.is_coin() {
            addresses.gas.unwrap_or("")
        } else {
            ""
        };
        let mut list = reconciliations::custody(
            &ctx.db,
            (name, &asset.ledger.token),
            gas,
            now,
            ADDRESSES_PER_LEDGER,
        )
        .await?;
        held_custody(ctx, objects, (name, &asset.ledger.token), &mut list).await?;
        custody.push((asset, list));
    }

    // Then the chain, at the confirmed block.
    for f in &mut funded {
        f.chain = balance_at(node, &f.address, f.asset.token, block)
            .await
            .map_err(at_node)?;
    }
    let mut compared: Vec<Compared> = Vec::new();
    for (asset, list) in custody {
        let mut readings = Vec::new();
        for c in list {
            if funded
                .iter()
                .any(|f| f.address == c.address && f.asset == *asset)
            {
                continue; // the gas address: read above, compared below on its funding's figures
            }
            if node.calls_left() <= reserve {
                break; // the rest are read first next run
            }
            // A watched address is compared as far as the watcher has read it.
            let at = c
                .watched_to
                .map_or(block, |to| block.min(u64::try_from(to).unwrap_or(0)));
            let chain = balance_at(node, &c.address, asset.token, at)
                .await
                .map_err(at_node)?;
            let held = |text: &str| {
                text.parse::<i128>()
                    .map_err(|_| ChainError::answer(format!("{text} is not an amount")))
            };
            readings.push(Reading {
                book: held(&c.debits_posted)? - held(&c.credits_posted)?,
                address: c.address,
                block: at,
                chain,
            });
        }
        compared.push(Compared {
            asset: asset.clone(),
            scope: Scope::Custody,
            block,
            readings,
        });
    }

    // Anything put in flight while the chain was read is seen now: look again next run.
    let after = reconciliations::in_flight(&ctx.db, name, treasury).await?;
    if after != before {
        return Ok(Vec::new());
    }

    // Funding, and the treasury's comparisons.
    let mut booked = Vec::new();
    for f in &funded {
        let id = f.account.id();
        let balance = book.totals(&id).map_or(0, |(kind, t)| t.balance(kind));
        let is_treasury = f.account.kind == Kind::Treasury;
        // A sweep moves money into the treasury (and out of the gas address), a transaction
        // of the treasury out of it: either, in flight, could pass for funding or drift.
        let busy = if is_treasury {
            before.sends || before.sweeps
        } else {
            before.sweeps
        };
        let finding = judge(f.chain, balance, busy, true);
        let mut book_after = Some(balance);
        if let Finding::Funding(excess) = finding {
            let transfer = postings::funding(&f.asset.ledger, &id, block, excess);
            book_after = match book.post(transfer) {
                Ok(true) => {
                    booked.push((id.clone(), excess));
                    i128::try_from(excess).ok().map(|e| balance + e)
                }
                Ok(false) => None,
                Err(refusal) => {
                    worker::console_warn!("funding of {id} refused: {refusal}");
                    None
                }
            };
        }
        if finding == Finding::Wait {
            book_after = None;
        }
        if is_treasury {
            if let Some(book) = book_after {
                compared.push(Compared {
                    asset: f.asset.clone(),
                    scope: Scope::Treasury,
                    block,
                    readings: vec![Reading {
                        address: f.address.clone(),
                        block,
                        chain: f.chain,
                        book,
                    }],
                });
            }
        } else {
            // The gas address is compared with the custody of its coin, on the figures its
            // funding was decided on; not at all while funding or a sweep is pending.
            for c in compared
                .iter_mut()
                .filter(|c| c.scope == Scope::Custody && c.asset == f.asset)
            {
                c.readings.retain(|r| r.address != f.address);
                if let Some(book) = book_after {
                    c.readings.push(Reading {
                        address: f.address.clone(),
                        block,
                        chain: f.chain,
                        book,
                    });
                }
            }
        }
    }
    compared.retain(|c| !c.readings.is_empty());

    // One batch: the funding and every comparison.
    let mut batch = Batch::new();
    batch.extend(book.statements(&When::always(), now)?);
    let mut handles = Vec::new();
    for c in &compared {
        let row = NewReconciliation {
            network: name,
            token: &c.asset.ledger.token,
            asset: &c.asset.symbol,
            scope: c.scope,
            block: c.block,
            readings: &c.readings,
            now,
        };
        handles.push(batch.push(reconciliations::insert(&row)?));
        batch.push(reconciliations::remember(&row)?);
        batch.push(reconciliations::prune(&row)?);
    }
    let results = match batch.run(&ctx.db).await {
        Ok(results) => results,
        // Another posting landed on these accounts meanwhile (or another run booked the same
        // funding): the next run looks again.
        Err(e) if ledger::raced(&e) || e.violates("ledger_transfers.id") => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    for (id, excess) in booked {
        worker::console_log!("funding of {id} booked at block {block}: {excess} base units");
    }
    let mut found = Vec::new();
    for (c, handle) in compared.into_iter().zip(handles) {
        let drift: i128 = c.readings.iter().map(Reading::drift).sum();
        if drift != 0 {
            worker::console_warn!(
                "the books differ from the chain: {} {} on {name} at block {block}: {drift}",
                c.asset.symbol,
                c.scope.as_str()
            );
        }
        if let Some(row) = results.rows(handle)?.first().filter(|r| r.new_drift) {
            found.push(NewDrift {
                id: row.id,
                compared: c,
            });
        }
    }
    Ok(found)
}

/// E-mails the operator about each new drift on network `name`, and records what became of
/// the e-mail.
async fn tell(ctx: &Ctx, name: &str, found: Vec<NewDrift>) {
    for NewDrift { id, compared } in found {
        let (subject, body) = drift_message(name, &compared);
        let status = crate::notify::operator(ctx, &subject, &body).await;
        if let Err(e) = reconciliations::emailed(&ctx.db, id, status).await {
            worker::console_warn!("record the e-mail about reconciliation {id}: {e}");
        }
    }
}

/// The operator's e-mail about a new drift on network `name`: subject and text. Pure.
fn drift_message(name: &str, c: &Compared) -> (String, String) {
    let symbol = &c.asset.symbol;
    let decimals = c.asset.decimals;
    let amount = |units: i128| format!("{} {symbol}", units_text(units, decimals));
    let chain: i128 = c
        .readings
        .iter()
        .map(|r| i128::try_from(r.chain).unwrap_or(i128::MAX))
        .sum();
    let book: i128 = c.readings.iter().map(|r| r.book).sum();
    let what = match c.scope {
        Scope::Treasury => "treasury",
        Scope::Custody => "custody (deposit addresses)",
    };
    let subject = format!("Payrail: the books and the chain differ ({symbol} {what} on {name})");
    let mut body = format!(
        "At block {} on {name}, the chain holds {} in the {what}; the books hold {}. \
         Drift (chain minus books): {}.\n\nAddresses read:\n",
        c.block,
        amount(chain),
        amount(book),
        amount(chain - book)
    );
    for r in &c.readings {
        body.push_str(&format!(
            "  {} at block {}: chain {}, books {}, drift {}\n",
            r.address,
            r.block,
            amount(i128::try_from(r.chain).unwrap_or(i128::MAX)),
            amount(r.book),
            amount(r.drift())
        ));
    }
    body.push_str(
        "\nThis drift is e-mailed once; it stays recorded in the reconciliations table, and \
         `cargo run -p xtask -- reconcile --remote` reads every address.\n",
    );
    (subject, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_confirmed_block_has_its_depth_on_top() {
        assert_eq!(confirmed_block(100, 1), Some(100));
        assert_eq!(confirmed_block(100, 2), Some(99));
        assert_eq!(confirmed_block(100, 64), Some(37));
        assert_eq!(confirmed_block(0, 1), Some(0));
        assert_eq!(confirmed_block(0, 2), None);
    }

    #[test]
    fn more_on_chain_is_funding_only_with_nothing_in_flight() {
        assert_eq!(judge(10, 10, false, true), Finding::Agrees);
        assert_eq!(judge(10, 10, true, true), Finding::Agrees);
        assert_eq!(judge(15, 10, false, true), Finding::Funding(5));
        assert_eq!(judge(15, 10, true, true), Finding::Wait);
        assert_eq!(judge(15, 10, false, false), Finding::Drift(5));
        assert_eq!(judge(5, 10, false, true), Finding::Drift(-5));
        assert_eq!(judge(5, 10, true, true), Finding::Wait);
        assert_eq!(
            judge(u128::MAX, 0, false, true),
            Finding::Funding(i128::MAX as u128)
        );
    }

    #[test]
    fn amounts_read_in_their_decimals() {
        assert_eq!(units_text(0, 6), "0");
        assert_eq!(units_text(1_500_000, 6), "1.5");
        assert_eq!(units_text(-250, 6), "-0.00025");
        assert_eq!(units_text(3 * 10i128.pow(18), 18), "3");
        assert_eq!(units_text(42, 0), "42");
    }

    #[test]
    fn the_operator_is_told_every_figure_of_a_drift() {
        let networks = config::parse(
            r#"{"polygon": {"rpc_url": "http://127.0.0.1:8545", "chain_id": 31337,
                "tokens": {"USDC": {"address": "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"}}}}"#,
        )
        .unwrap();
        let asset = assets("polygon", &networks["polygon"]).remove(0);
        let c = Compared {
            asset,
            scope: Scope::Treasury,
            block: 120,
            readings: vec![Reading {
                address: "0xtreasury".into(),
                block: 120,
                chain: 4_000_000,
                book: 5_250_000,
            }],
        };
        let (subject, body) = drift_message("polygon", &c);
        assert_eq!(
            subject,
            "Payrail: the books and the chain differ (USDC treasury on polygon)"
        );
        assert!(
            body.starts_with(
                "At block 120 on polygon, the chain holds 4 USDC in the treasury; the books \
                 hold 5.25 USDC. Drift (chain minus books): -1.25 USDC."
            ),
            "{body}"
        );
        assert!(body.contains("0xtreasury at block 120"), "{body}");
    }

    #[test]
    fn a_network_has_a_ledger_per_token_and_its_coin() {
        let networks = config::parse(
            r#"{"polygon": {"rpc_url": "http://127.0.0.1:8545", "chain_id": 31337,
                "tokens": {"USDT": {"address": "0xc2132d05d31c914a87c6611c10748aeb04b58e8f"},
                           "USDC": {"address": "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"}}}}"#,
        )
        .unwrap();
        let list = assets("polygon", &networks["polygon"]);
        let ids: Vec<String> = list
            .iter()
            .map(|a| a.account(Kind::Treasury, "").id())
            .collect();
        assert_eq!(
            ids,
            [
                "polygon:0x3c499c542cef5e3811e1192ce70d8cc03d5c3359:treasury",
                "polygon:0xc2132d05d31c914a87c6611c10748aeb04b58e8f:treasury",
                "polygon:native:treasury",
            ]
        );
        assert_eq!(list[2].symbol, "POL");
        assert_eq!(list[2].decimals, 18);
        assert!(list[2].is_coin() && !list[0].is_coin());
    }
}
