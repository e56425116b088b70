//! Merchants' top-ups: a merchant adds to its balance by sending money to a top-up address of
//! its own on a network, so that a refund its balance does not cover can be paid now.
//!
//! Each merchant has at most one top-up address per network, derived from the deposit key
//! (`PAYRAIL_EVM_XPUB`) at a fresh index of the same allocator as checkout deposits, so it is
//! never reused and never a checkout's. It is watched for every asset of its network (the
//! configured tokens and the network's coin) while its merchant is active, by the cron, within
//! the watcher's share of the run's node calls, read the way a checkout's address is
//! ([`crate::chain::scan`]): a transfer counts once it is at the network's depth, and one reorged away
//! before that disappears. Its sender is screened then, like a payment's (docs/SCREENING.md):
//! one on a sanctions list, or not named by the chain, is held for an admin's review (its
//! receipt booked, not the top-up); a sender that cannot be screened now makes the check wait.
//! Each confirmed transfer is posted to the books in the batch that stores it: its receipt
//! (custody ← unallocated at the address) and the top-up (unallocated → the merchant), ids
//! derived from the chain transfer, so nothing is posted twice. As for a
//! checkout's address, nothing is credited from a token's logs alone: the address's
//! `balanceOf` at the last final block must cover every unit confirmed to it (the watch keeps
//! the running total), and one check records at most `transfers_per_check` transfers.

use std::collections::BTreeMap;
use std::str::FromStr;

use payrail_evm::Token;
use shared_types::ids::{InstitutionId, Scoped, TopupReviewId};
use shared_types::ErrorCode;

use super::books;
use crate::chain::config::Network;
use crate::chain::error::{ChainError, ChainResult};
use crate::chain::rpc::{self, Budget};
use crate::chain::scan::{self, Scan};
use crate::ctx::Ctx;
use crate::db;
use crate::db::deposits::Purpose;
use crate::db::merchants;
use crate::db::notifications::NotificationKind;
use crate::db::screenings::{self, NewScreening, Subject};
use crate::db::topups::{
    self, Hold, NewAddress, SeenTopup, TopupAddress, TopupWatch, WatchedAsset,
};
use crate::error::{ApiError, OrInternal};
use crate::money::screening;
use crate::{crypto, notify};

/// Least time between two checks of one top-up watch.
pub const CHECK_GAP_SECONDS: i64 = 5;
/// Most top-up watches one cron run checks.
const PER_RUN: i64 = 25;
/// The least node calls one check of a token at a top-up address makes that finds one final
/// transfer (its logs, the balance that must cover them, and its sender's screening): the
/// checkout watches leave at least this of the watcher's share to the top-ups, so they are never
/// starved. (Each more sender screened is one more call; a check that runs out waits, whole,
/// for the next run.)
pub const MOST_TOKEN_CHECK_CALLS: u32 = scan::MOST_TOKEN_CALLS + 1 + 1;

/// The node calls one check of `token` at a top-up address needs before it starts.
fn most_calls(token: Token) -> u32 {
    if token == Token::Native {
        scan::MOST_NATIVE_CALLS + 1
    } else {
        MOST_TOKEN_CHECK_CALLS
    }
}

/// A top-up address as an EIP-681 request on chain `chain_id`: the address alone, no asset or
/// amount (a wallet asks for both). Pure.
pub fn uri(chain_id: u64, address: &str) -> String {
    format!("ethereum:{address}@{chain_id}")
}

/// The assets a top-up address on network `name` is watched for: the same ledgers as
/// reconciliation's ([`books::assets`]), each configured token and the network's coin.
fn watched(assets: &[books::Asset]) -> Vec<WatchedAsset<'_>> {
    assets
        .iter()
        .map(|a| WatchedAsset {
            token: a.token,
            asset: &a.symbol,
            decimals: a.decimals,
        })
        .collect()
}

/// Watches `merchant_id`'s top-up addresses for every asset now configured on their networks
/// (an asset configured after the address was given out is read from the address's first
/// block), where its money lives (`held`: the object of an institution held there). Writes
/// nothing when they all are.
pub async fn watch_assets(
    ctx: &Ctx,
    held: Option<&db::Db>,
    Scoped {
        institution: institution_id,
        id: merchant_id,
    }: Scoped<i64>,
    networks: &BTreeMap<String, Network>,
) -> Result<(), ApiError> {
    let mut statements = Vec::new();
    for (name, network) in networks {
        let assets = books::assets(name, network);
        statements.extend(
            topups::watch_assets(
                (Scoped::new(institution_id, merchant_id), name),
                &watched(&assets),
                ctx.now(),
            )
            .or_internal("watch top-up assets")?,
        );
    }
    if statements.is_empty() {
        return Ok(());
    }
    db::batch(held.unwrap_or(&ctx.db), statements)
        .await
        .or_internal("watch top-up assets")
}

/// The top-up address of `merchant_id` (of `institution_id`) on `network`, given out now if it
/// has none (`created_by` asked), and watched from the node's newest block. 404 for a network
/// not configured (or no deposit key); 503 when its node cannot say its newest block. For an
/// institution held in its object (`held`), the address is stored and watched there (its index
/// is the directory's allocator's, as every deposit address's).
pub async fn create(
    ctx: &Ctx,
    held: Option<&db::Db>,
    Scoped {
        institution: institution_id,
        id: merchant_id,
    }: Scoped<i64>,
    name: &str,
    created_by: &str,
) -> Result<TopupAddress, ApiError> {
    let networks = crate::chain::networks(ctx)?;
    let Some(network) = networks.get(name) else {
        return Err(ApiError::not_found(format!(
            "top-ups are taken only on the networks whose chain is watched; {name:?} is not one"
        )));
    };
    let store = held.unwrap_or(&ctx.db);
    if let Some(existing) =
        topups::address_on(store, Scoped::new(institution_id, merchant_id), name)
            .await
            .or_internal("read top-up address")?
    {
        return Ok(existing);
    }
    let head = async {
        crate::chain::check_chain(name, network).await?;
        ChainResult::Ok(rpc::head(&network.node).await?)
    }
    .await
    .map_err(|e| {
        worker::console_warn!("no top-up address on {name}: {e}");
        ApiError::new(
            ErrorCode::PaymentsUnavailable,
            format!(
                "the {name} node cannot be read now ({}); try again shortly",
                e.public()
            ),
        )
    })?;
    let (address, index) =
        crate::chain::custody::fresh(ctx, name, institution_id, Purpose::Topup).await?;
    let index = index.ok_or_else(|| ApiError::internal("top-up address", "no deposit key"))?;
    let assets = books::assets(name, network);
    let mut statements = vec![topups::insert_address(&NewAddress {
        address: &address,
        derivation_index: index,
        merchant_id,
        institution_id,
        network: name,
        from_block: head,
        created_by,
        now: ctx.now(),
    })
    .or_internal("store top-up address")?];
    statements.extend(
        topups::watch_assets(
            (Scoped::new(institution_id, merchant_id), name),
            &watched(&assets),
            ctx.now(),
        )
        .or_internal("watch top-up address")?,
    );
    db::batch(store, statements)
        .await
        .or_internal("store top-up address")?;
    // Of two given out at once, the first stored is the merchant's (the other index stays
    // unused: indexes are never reused).
    topups::address_on(store, Scoped::new(institution_id, merchant_id), name)
        .await
        .or_internal("read top-up address")?
        .ok_or_else(|| ApiError::internal("top-up address", "not stored"))
}

/// The cron's part, after the checkout watches and within the same `budget`: checks the
/// top-up watches that are due, least recently checked first, D1's then those of the
/// institutions held in their objects (`held`, the run's turn of them), at most [`PER_RUN`] in
/// all; one whose largest check no longer fits waits for the next run, while cheaper ones still
/// go. One object failing is logged; the others go on.
pub async fn sweep(
    ctx: &Ctx,
    budget: &Budget,
    networks: &BTreeMap<String, Network>,
    held: &[InstitutionId],
) -> Result<(), ApiError> {
    let checked_before = ctx.now() - CHECK_GAP_SECONDS;
    let due = topups::due(&ctx.db, checked_before, PER_RUN)
        .await
        .or_internal("read due top-up watches")?;
    let mut left = PER_RUN - i64::try_from(due.len()).unwrap_or(PER_RUN);
    // The coin it sends a top-up address is gas for a sweep, not the merchant's.
    let gas = books::gas_address(ctx)?;
    let checks = Checks {
        networks,
        budget,
        checked_before,
        gas: gas.as_deref(),
    };
    checks.run(ctx, None, &due).await?;
    for &institution in held {
        if left <= 0 {
            break;
        }
        let swept = async {
            let object = ctx.institution_object(institution.0)?;
            let due = topups::due_held(&object, institution, checked_before, left)
                .await
                .or_internal("read due top-up watches")?;
            let read = due.len();
            let due = of_active(ctx, institution, due).await?;
            checks.run(ctx, Some(&object), &due).await?;
            Ok::<_, ApiError>(read)
        };
        match swept.await {
            Ok(n) => left -= i64::try_from(n).unwrap_or(left),
            Err(err) => err.log_with(format!("top-ups of institution {}", institution.0)),
        }
    }
    Ok(())
}

/// The watcher's pass found money for `addresses` on `network`, top-up addresses of
/// `institution` held in its object: their watches of active merchants are checked now,
/// whenever they were last, within `budget`.
pub async fn check_routed(
    ctx: &Ctx,
    budget: &Budget,
    networks: &BTreeMap<String, Network>,
    (institution, network): (InstitutionId, &str),
    addresses: &[&str],
) -> Result<(), ApiError> {
    let object = ctx.institution_object(institution.0)?;
    let watches = topups::open_at(&object, institution, network, addresses)
        .await
        .or_internal("read the top-up watches money came to")?;
    let watches = of_active(ctx, institution, watches).await?;
    let gas = books::gas_address(ctx)?;
    let checks = Checks {
        networks,
        budget,
        checked_before: ctx.now() + 1,
        gas: gas.as_deref(),
    };
    checks.run(ctx, Some(&object), &watches).await
}

/// Those of `watches` (of `institution`, held in its object) whose merchants are active: a
/// suspended or disabled merchant's address is not read (the directory says which are active).
async fn of_active(
    ctx: &Ctx,
    institution: InstitutionId,
    watches: Vec<TopupWatch>,
) -> Result<Vec<TopupWatch>, ApiError> {
    let merchants: Vec<i64> = watches.iter().map(|w| w.merchant_id).collect();
    let active = merchants::active_of(&ctx.db, institution, &merchants)
        .await
        .or_internal("read merchants")?;
    Ok(watches
        .into_iter()
        .filter(|w| active.contains(&w.merchant_id))
        .collect())
}

/// What one run's checks of top-up watches share.
struct Checks<'a> {
    networks: &'a BTreeMap<String, Network>,
    budget: &'a Budget,
    checked_before: i64,
    /// Custody's gas address (what it sends a top-up address is gas, not the merchant's).
    gas: Option<&'a str>,
}

impl Checks<'_> {
    /// Checks the `due` watches of one store (D1, or the object `held`) within the budget.
    async fn run(
        &self,
        ctx: &Ctx,
        held: Option<&db::Db>,
        due: &[TopupWatch],
    ) -> Result<(), ApiError> {
        for watch in due {
            if self.budget.left() < most_calls(watch.token) {
                continue;
            }
            check(ctx, held, self, watch).await?;
        }
        Ok(())
    }
}

/// Checks `watch` unless somebody did since `checked_before`; records why the node could not
/// be read.
async fn check(
    ctx: &Ctx,
    held: Option<&db::Db>,
    checks: &Checks<'_>,
    watch: &TopupWatch,
) -> Result<(), ApiError> {
    let store = held.unwrap_or(&ctx.db);
    let claimed = topups::claim(store, watch, checks.checked_before, ctx.now())
        .await
        .or_internal("claim top-up watch")?;
    if !claimed {
        return Ok(());
    }
    let outcome = match checks.networks.get(&watch.network) {
        Some(network) => read(ctx, store, network, watch, checks.gas).await,
        None => Err(ChainError::Config(format!(
            "{} is no longer configured",
            watch.network
        ))),
    };
    match outcome {
        Ok(()) => Ok(()),
        // Not the node's fault: read again next time (a batch that lost a race with another
        // check, or the run's node calls spent).
        Err(error @ ChainError::Db(_)) => {
            worker::console_warn!("top-up watch on {}: {error}", watch.network);
            Ok(())
        }
        Err(error) if error.is_budget() => Ok(()),
        Err(error) => {
            worker::console_warn!("top-up watch on {}: {error}", watch.network);
            topups::failed(store, watch, &error.public())
                .await
                .or_internal("record node failure")
        }
    }
}

/// Reads one top-up watch's new blocks and stores what arrived, with the postings of what is
/// now confirmed, in one batch that applies only while the watch is where it was read. Custody
/// sweeps the address while it is watched: its coin is read with its nonce, what custody's
/// gas address (`gas`) sends it told apart ([`crate::chain::native::Sent`]); a token's sweeps are no
/// transfers *to* it, and are taken off what its balance must cover.
async fn read(
    ctx: &Ctx,
    store: &db::Db,
    network: &Network,
    watch: &TopupWatch,
    gas: Option<&str>,
) -> ChainResult<()> {
    let target = scan::Target {
        network: &watch.network,
        address: &watch.address,
        token: watch.token,
        scanned_to: watch.scanned_to,
        sent: Some(crate::chain::native::Sent { gas }),
    };
    let fresh = match scan::read(ctx, network, &target).await? {
        Scan::Nothing { head } => {
            return Ok(topups::touch(store, watch, head, ctx.now()).await?);
        }
        Scan::Read(fresh) => fresh,
    };
    // Only what can be credited is recorded: a positive amount of the watched asset.
    let mut seen: Vec<SeenTopup<'_>> = fresh
        .transfers
        .iter()
        .filter(|t| t.to == watch.address && t.token == watch.token)
        .filter_map(|t| {
            let units = t.amount.filter(|units| *units > 0)?;
            Some(SeenTopup {
                tx_hash: &t.tx_hash,
                log_index: t.log_index,
                units,
                block_number: t.block_number,
                confirmed: t.block_number <= fresh.final_to,
                sender: t.from.as_deref(),
                hold: None,
            })
        })
        .collect();
    // The transfers already stored as final (the first blocks of a check are read again) are
    // left as they are, and not counted again. Every one of them in the blocks read must be among
    // what the node shows now; one more than that means the node no longer shows a final
    // transfer, and nothing is decided on its answer (so the read stays bounded by what the
    // check already holds, and none is ever counted twice).
    let stored = if seen.iter().any(|t| t.confirmed) {
        let read = (fresh.from, fresh.read_to);
        let most = i64::try_from(seen.len()).unwrap_or(i64::MAX);
        let stored = topups::confirmed_in(store, watch, read, most.saturating_add(1)).await?;
        if stored.len() > seen.len() {
            return Err(ChainError::answer(format!(
                "the node no longer shows every transfer stored as final between blocks {} and \
                 {}: nothing is recorded until it does",
                fresh.from, fresh.read_to
            )));
        }
        stored
    } else {
        Vec::new()
    };
    seen.retain(|t| {
        !(t.confirmed
            && stored
                .iter()
                .any(|(hash, log)| hash == t.tx_hash && *log == t.log_index))
    });
    // At most `transfers_per_check` a check; the rest, from the first block not wholly
    // recorded, at the next.
    let cut = scan::cap(
        &mut seen,
        usize::try_from(network.transfers_per_check).unwrap_or(usize::MAX),
        |t| (t.block_number, t.log_index, true),
    );
    let (read_to, final_to) = match cut {
        Some(block) => (
            fresh.read_to.min(block),
            fresh.final_to.min(block.saturating_sub(1)),
        ),
        None => (fresh.read_to, fresh.final_to),
    };
    // Nothing is credited from logs alone: a token's address must hold every unit confirmed to
    // it, before and now, at the last final block (the coin is read from the balance itself).
    let before = confirmed_total(store, watch).await?;
    let added = seen
        .iter()
        .filter(|t| t.confirmed)
        .try_fold(0u128, |sum, t| sum.checked_add(t.units))
        .ok_or_else(|| ChainError::answer("the node's transfers add up past 128 bits"))?;
    let total = before
        .checked_add(added)
        .ok_or_else(|| ChainError::answer("the top-ups add up past 128 bits"))?;
    if added > 0 && watch.token != Token::Native {
        let Some(swept) = swept_by(ctx, watch, fresh.final_to).await? else {
            // A sweep of it may be mined and is not final yet: what the balance must hold at
            // the block is not known until it is. Read again once the worker has made it final.
            worker::console_log!(
                "top-up watch {} on {} waits for custody's sweep of it to be final",
                watch.address,
                watch.network
            );
            return Ok(topups::touch(store, watch, fresh.head, ctx.now()).await?);
        };
        let asset = (watch.asset.as_str(), watch.decimals);
        scan::cover(network, &target, asset, (total, swept), fresh.final_to).await?;
    }
    // Each final transfer's sender is screened before the merchant is credited with it.
    let decisions = screen_senders(ctx, network, watch, &mut seen, fresh.head).await?;
    let scanned_to = u64::try_from(watch.scanned_to).unwrap_or(0);
    let mut statements = topups::record(
        watch,
        &seen,
        (fresh.from, read_to),
        (final_to.max(scanned_to), fresh.head, total),
        ctx.now(),
    )?;
    let postings =
        super::ledger::topups(ctx, store, watch, &seen, &topups::unchanged(watch)).await?;
    // The postings go before the watch moves on (the last statement): they apply under the same
    // condition as the rest of the check.
    let moves_on = statements.pop();
    statements.extend(postings);
    for decision in &decisions {
        statements.push(screenings::insert_once(decision)?);
    }
    statements.extend(moves_on);
    db::batch(store, statements).await?;
    for t in seen.iter().filter(|t| t.confirmed) {
        if let Some(hold) = &t.hold {
            tell_held(ctx, store, watch, t, hold).await;
        }
    }
    Ok(())
}

/// Screens the sender of each final transfer of `seen` (to `watch`'s address) on its network at
/// block `head`, each sender once: one on a sanctions list, or not named by the chain (coin
/// sent from inside a contract call), is held for review (its hold set); the decisions to store
/// with the check. A sender that cannot be screened now fails the check (nothing recorded: the
/// next check reads the blocks again), saying why.
async fn screen_senders(
    ctx: &Ctx,
    network: &Network,
    watch: &TopupWatch,
    seen: &mut [SeenTopup<'_>],
    head: u64,
) -> ChainResult<Vec<NewScreening>> {
    let mut reads: BTreeMap<String, screening::Read> = BTreeMap::new();
    let mut decisions = Vec::new();
    let now = ctx.now();
    let review_id = || {
        crypto::random_token(TopupReviewId::PREFIX).map_err(|e| ChainError::Config(e.to_string()))
    };
    for t in seen.iter_mut().filter(|t| t.confirmed) {
        let Some(sender) = t.sender else {
            t.hold = Some(Hold {
                review_id: review_id()?,
                reason: format!(
                    "{} reached {} on {} from inside a contract call: the chain does not name \
                     who sent it, so it could not be screened",
                    watch.asset, watch.address, watch.network
                ),
            });
            continue;
        };
        let read = match reads.get(sender) {
            Some(read) => read.clone(),
            None => {
                let read =
                    screening::screen(ctx, (&watch.network, Some(network)), sender, Some(head))
                        .await
                        .map_err(|why| why.waits("screening a top-up's sender"))?;
                reads.insert(sender.to_owned(), read.clone());
                read
            }
        };
        if read.listed() {
            t.hold = Some(Hold {
                review_id: review_id()?,
                reason: format!("the sender {}", read.reason()),
            });
        }
        let subject_id = format!("{}:{}", t.tx_hash, t.log_index);
        decisions.push(
            read.record(watch.institution_id, (Subject::Topup, &subject_id), now)
                .map_err(|e| ChainError::Config(e.description))?,
        );
    }
    Ok(decisions)
}

/// Tells the institution's admins, once (the first check to store the review), that top-up
/// `t` to `watch`'s address is held for review (logged if it cannot be: the review is stored).
async fn tell_held(ctx: &Ctx, store: &db::Db, watch: &TopupWatch, t: &SeenTopup<'_>, hold: &Hold) {
    let told = async {
        if !topups::review_told(
            store,
            watch.institution_id,
            (&watch.network, t.tx_hash, t.log_index),
            (&watch.address, watch.token),
            ctx.now(),
        )
        .await
        .or_internal("record the admins told")?
        {
            return Ok(());
        }
        let amount = crate::chain::evm::from_units(t.units, watch.decimals).unwrap_or_default();
        notify::admins(
            ctx,
            watch.institution_id,
            NotificationKind::ScreeningHold,
            &format!(
                "A top-up of {amount} {} for merchant {} is held: review its screening",
                watch.asset, watch.merchant_id
            ),
            &format!(
                "{amount} {} reached merchant {}'s top-up address {} on {} (transaction {}), but \
                 its screening held it: {}. It is not added to the merchant's balance until an \
                 admin releases it (a false positive) or blocks it (it stays frozen in custody), \
                 with a note, on the portal's Screening page.",
                watch.asset,
                watch.merchant_id,
                watch.address,
                watch.network,
                t.tx_hash,
                hold.reason
            ),
        )
        .await
    };
    if let Err(err) = told.await {
        err.log_with("telling the admins of a held top-up");
    }
}

/// What custody swept of `watch`'s asset from its address by block `final_to` (custody's sweeps
/// are the treasury's, in D1, whoever's the address is); `None` while that is not known (a sweep `sent` and not yet final, or one final in a later block than the
/// node's `final_to`: a node behind the one that made it final).
async fn swept_by(ctx: &Ctx, watch: &TopupWatch, final_to: u64) -> ChainResult<Option<u128>> {
    let sweeps = topups::swept_from(&ctx.db, watch).await?;
    if sweeps.len() > usize::try_from(topups::MOST_TOTALLED).unwrap_or(usize::MAX) {
        return Err(ChainError::Config(format!(
            "the top-up address has more than {} sweeps of {} to total",
            topups::MOST_TOTALLED,
            watch.asset
        )));
    }
    let mut swept = 0u128;
    for s in &sweeps {
        let block = s.block_number.and_then(|b| u64::try_from(b).ok());
        match block {
            Some(block) if s.state == "confirmed" && block <= final_to => {}
            _ => return Ok(None),
        }
        let units = u128::from_str(&s.units)
            .map_err(|_| ChainError::answer("a stored amount is not a number"))?;
        swept = swept
            .checked_add(units)
            .ok_or_else(|| ChainError::answer("the sweeps add up past 128 bits"))?;
    }
    Ok(Some(swept))
}

/// What `watch`'s confirmed transfers add up to: its stored total, or, for a watch from before
/// totals were kept, the sum of its stored transfers (refused past [`topups::MOST_TOTALLED`]).
async fn confirmed_total(store: &db::Db, watch: &TopupWatch) -> ChainResult<u128> {
    let number = |text: &str| {
        u128::from_str(text).map_err(|_| ChainError::answer("a stored amount is not a number"))
    };
    if let Some(total) = &watch.confirmed_units {
        return number(total);
    }
    let amounts = topups::confirmed_amounts(store, watch).await?;
    if amounts.len() > usize::try_from(topups::MOST_TOTALLED).unwrap_or(usize::MAX) {
        return Err(ChainError::Config(format!(
            "the top-up address has more than {} confirmed transfers of {} to total",
            topups::MOST_TOTALLED,
            watch.asset
        )));
    }
    amounts.iter().try_fold(0u128, |sum, a| {
        sum.checked_add(number(a)?)
            .ok_or_else(|| ChainError::answer("the top-ups add up past 128 bits"))
    })
}
