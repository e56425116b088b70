//! The chain watcher: reads each watched deposit address's ERC-20 transfers (or, for a payment
//! in the network's own coin, what its balance grew by: [`crate::chain::native`]) from its network's
//! node, stores them (confirmed once at the network's depth; unconfirmed ones replaced at every
//! check, so a reorg's lost transfer disappears), and credits the payment once the confirmed
//! transfers cover it, through the lifecycle and the outbox like every other change.
//!
//! Each check reads the address's new blocks for its asset as every watch does
//! ([`crate::chain::scan`]), then what only a checkout needs: other tokens' transfers, for review, and
//! the times of the blocks.
//!
//! It runs from the cron for the open watches (pending payments first, a bounded number per
//! run; the merchants' top-up addresses after them, [`super::topup`]) and on demand when the hosted page polls a session's status (at most one check per watch
//! every [`POLL_GAP_SECONDS`]), so a customer sees their payment within seconds of its block.
//!
//! The rules that decide what the transfers read mean (credit, wait, hold the end, review) are
//! pure and live beside it in [`rules`].

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use payrail_evm::Address;
use payrail_evm::Token;
use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::json;
use shared_types::ids::{InstitutionId, Scoped};
use shared_types::lifecycle::Action;
use shared_types::{ErrorCode, RawStatus};

use super::{screening, topup};
use crate::chain::config::Network;
use crate::chain::error::{ChainError, ChainResult};
use crate::chain::rpc::Budget;
use crate::chain::scan::{self, Scan};
use crate::chain::{evm, networks, rates, rpc};
use crate::ctx::Ctx;
use crate::db::notifications::NotificationKind;
use crate::db::screenings::{HeldFunds, NewReview, Subject};
use crate::db::sessions::{self, SessionView};
use crate::db::watches::TransferKind;
use crate::db::watches::{self, SeenTransfer, StoredTransfer, Watch};
use crate::db::Db;
use crate::error::{ApiError, OrInternal};
use crate::{db, payments};

mod after_credit;
mod held;
pub mod pass;
pub mod rules;

/// Remembers in this isolate that `institution`'s object holds checkout `id` (learned where
/// the checkout is made or its page is read), so its polls go straight to the object.
pub use held::remember as remember_held;

use rules::{cap, end_read, verdict, Quoted, Verdict};

/// Least time between two on-demand checks of one watch.
pub const POLL_GAP_SECONDS: i64 = 2;
/// Most watches one cron run checks (each takes three or more node requests).
const SWEEP_PER_RUN: i64 = 25;
/// Most blocks whose time one check reads.
const MAX_BLOCK_TIMES: usize = 16;
/// Most transfers of other contracts, and most zero-value ones of the quoted token, one check
/// records.
const MAX_OTHER_TRANSFERS: usize = 50;
/// How long after its checkout ends an address is still watched for late payments.
pub const LATE_WINDOW_SECONDS: i64 = 7 * 24 * 60 * 60;

/// Reads one watch's new blocks and stores what it finds, in D1 or in the object of the
/// institution that holds the checkout (`held`). An error (the node unreachable, a bad answer,
/// a range that cannot be read) is returned, and the caller records it on the watch; nothing
/// else changes.
async fn read(ctx: &Ctx, held: Option<&Db>, network: &Network, watch: &Watch) -> ChainResult<()> {
    let db = held.unwrap_or(&ctx.db);
    let node = &network.node;
    let target = scan::Target {
        network: &watch.network,
        address: &watch.address,
        token: watch.token,
        scanned_to: watch.scanned_to,
        sent: None,
    };
    let scan::Fresh {
        head,
        from,
        read_to,
        final_to,
        transfers: mut found,
        mut times,
    } = match scan::read(ctx, network, &target).await? {
        // Nothing new (the node is not past what was read): only its head is recorded.
        Scan::Nothing { head } => return Ok(watches::touch(db, watch, head, ctx.now()).await?),
        Scan::Read(fresh) => fresh,
    };
    let scanned_to = u64::try_from(watch.scanned_to).unwrap_or(0);
    // Other contracts' transfers to the address, for review: best effort, one request (they
    // are never credited, so they never hold up the payment's own reading).
    match rpc::call(
        node,
        "eth_getLogs",
        evm::transfers_to(&watch.address, from, read_to, None),
    )
    .await
    .map_err(ChainError::from)
    .and_then(|logs| evm::transfers(&logs))
    {
        Ok(all) => found.extend(
            all.into_iter()
                .filter(|t| t.token != watch.token)
                .take(MAX_OTHER_TRANSFERS),
        ),
        Err(e) => worker::console_warn!("other tokens to a {} deposit: {e}", watch.network),
    }
    // The block time says whether a transfer came after the checkout's end; read for the
    // quoted token's transfers (at most MAX_BLOCK_TIMES blocks a check), the others are judged
    // by the time they were seen.
    for t in found.iter().filter(|t| t.token == watch.token) {
        if times.len() >= MAX_BLOCK_TIMES {
            break;
        }
        if let Entry::Vacant(slot) = times.entry(t.block_number) {
            let block = rpc::call(
                node,
                "eth_getBlockByNumber",
                json!([format!("{:#x}", t.block_number), false]),
            )
            .await?;
            slot.insert(rpc::quantity(&block["timestamp"])?);
        }
    }
    let now = ctx.now();
    // Zero-value spam of the quoted token is recorded too, but at most this many a check.
    let mut no_value = 0;
    let mut seen: Vec<SeenTransfer<'_>> = found
        .iter()
        .filter(|t| t.to == watch.address)
        .filter(|t| {
            let spam = t.token == watch.token && t.amount.is_none_or(|a| a == 0);
            no_value += usize::from(spam);
            !spam || no_value <= MAX_OTHER_TRANSFERS
        })
        .map(|t| SeenTransfer {
            tx_hash: &t.tx_hash,
            log_index: t.log_index,
            token: t.token,
            amount: t.amount.map(|a| a.to_string()),
            block_number: t.block_number,
            confirmed: t.block_number <= final_to,
            kind: match (t.token == watch.token, t.amount) {
                (true, Some(units)) if units > 0 => TransferKind::Payment,
                (true, _) => TransferKind::NoValue,
                (false, _) => TransferKind::UnexpectedToken,
            },
            after_expiry: times
                .get(&t.block_number)
                .map_or(now, |at| i64::try_from(*at).unwrap_or(i64::MAX))
                >= watch.expires_at,
            sender: t.from.as_deref(),
        })
        .collect();
    // The payments already stored as final: seen again (the first blocks of a check are read
    // again, in case a node behind a load balancer lagged), they are left as they are.
    let stored = if seen.iter().any(|t| t.kind == TransferKind::Payment) {
        watches::confirmed_payments(db, watch).await?
    } else {
        Vec::new()
    };
    seen.retain(|t| {
        !(t.kind == TransferKind::Payment
            && t.confirmed
            && stored
                .iter()
                .any(|s| s.tx_hash == t.tx_hash && s.log_index == block_number(t.log_index)))
    });
    // At most `transfers_per_check` payments a check (a flood of dust is recorded over several
    // checks, never as one batch): the rest, from the first block not wholly recorded, is read
    // again at the next check (what was recorded of that block is then left as it is).
    let cut = cap(
        &mut seen,
        usize::try_from(network.transfers_per_check).unwrap_or(usize::MAX),
    );
    // Nothing is credited from logs alone: the address must hold what they say it received, at
    // the last final block.
    cross_check(network, watch, &seen, &stored, final_to).await?;
    // Money after the credit: its senders screened as it arrives (it is credited to no one).
    let after = after_credit::screen(ctx, network, watch, &seen, head).await;
    let to_tell = after.new_listings(db, watch).await;
    let (read_to, final_to) = match cut {
        Some(block) => (read_to.min(block), final_to.min(block.saturating_sub(1))),
        None => (read_to, final_to),
    };
    let mut statements = watches::record(
        watch,
        &seen,
        (from, read_to),
        (final_to.max(scanned_to), head),
        // The check read up to the node's head: what it found is all there was (only then
        // may the checkout's end be decided on it).
        cut.is_none() && read_to >= head,
        now,
    )?;
    // The confirmed payments' receipts, in the books before the watch moves on (the last
    // statement), under the same condition as the rest of the check.
    let receipts =
        super::ledger::receipts(ctx, db, watch, &seen, &watches::unchanged(watch)).await?;
    let moves_on = statements.pop();
    statements.extend(receipts);
    statements.extend(after.statements()?);
    statements.extend(moves_on);
    db::batch(db, statements).await?;
    after_credit::tell(ctx, db, watch, &to_tell).await;
    Ok(())
}

fn block_number(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Refuses a check whose logs claim more of the token than the address holds: before the
/// payments it confirms are stored, the address's `balanceOf` at the last final block must
/// cover every payment confirmed to it, those stored before (`stored`) and these. A deposit
/// address never sends while it is watched (custody sweeps it only after), so a balance below
/// the logs means the node invented a transfer, or the token took the money back: the check is
/// refused with the reason (the watch shows it, nothing is credited and the checkout's end is
/// not decided) and read again at the next.
async fn cross_check(
    network: &Network,
    watch: &Watch,
    seen: &[SeenTransfer<'_>],
    stored: &[watches::ConfirmedPayment],
    final_to: u64,
) -> ChainResult<()> {
    if watch.token == Token::Native {
        return Ok(()); // ether is read from the balance itself
    }
    let units = |amount: &str| {
        u128::from_str(amount).map_err(|_| ChainError::answer("a stored amount is not a number"))
    };
    let mut claimed = 0u128;
    let mut new = false;
    for amount in seen
        .iter()
        .filter(|t| t.kind == TransferKind::Payment && t.confirmed)
        .filter_map(|t| t.amount.as_deref())
    {
        new = true;
        claimed = claimed.saturating_add(units(amount)?);
    }
    if !new {
        return Ok(());
    }
    for s in stored {
        claimed = claimed.saturating_add(units(&s.amount)?);
    }
    let target = scan::Target {
        network: &watch.network,
        address: &watch.address,
        token: watch.token,
        scanned_to: watch.scanned_to,
        sent: None,
    };
    scan::cover(
        network,
        &target,
        (&watch.asset, watch.decimals),
        (claimed, 0),
        final_to,
    )
    .await
}

/// The most node calls one check of `watch` makes: reading its asset, then the other tokens'
/// logs and, for a token, its blocks' times (ether's are read with its payments).
fn most_calls(watch: &Watch) -> u32 {
    if watch.token == Token::Native {
        scan::MOST_NATIVE_CALLS + 1
    } else {
        MOST_TOKEN_CHECK_CALLS
    }
}

/// The most node calls one check of a token's deposit address makes: its logs, the other
/// tokens' logs, the blocks' times and the balance that must cover the logs.
pub(crate) const MOST_TOKEN_CHECK_CALLS: u32 =
    scan::MOST_TOKEN_CALLS + 1 + MAX_BLOCK_TIMES as u32 + 1;

/// Checks `watch` (in D1, or in the object `held`) if nobody did since `checked_before`: reads
/// its chain, records a node failure.
async fn check(
    ctx: &Ctx,
    held: Option<&Db>,
    networks: &BTreeMap<String, Network>,
    watch: &Watch,
    checked_before: i64,
) -> Result<(), ApiError> {
    let db = held.unwrap_or(&ctx.db);
    let claimed = watches::claim(db, watch, checked_before, ctx.now())
        .await
        .or_internal("claim watch")?;
    if !claimed {
        return Ok(());
    }
    let outcome = match networks.get(&watch.network) {
        Some(network) => read(ctx, held, network, watch).await,
        None => Err(ChainError::Config(format!(
            "{} is no longer configured",
            watch.network
        ))),
    };
    if let Err(error) = outcome {
        worker::console_warn!("watch of a {} deposit: {error}", watch.network);
        if error.is_budget() {
            return Ok(()); // not the node's fault: read again next time
        }
        watches::failed(db, watch, &error.public())
            .await
            .or_internal("record node failure")?;
    }
    Ok(())
}

/// What the hosted page shows of a session's chain: its verdict and whether the node answered
/// at the last check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainState {
    /// The payment's state on chain.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The last check could not read the node (the page says it is checking).
    pub node_unreachable: bool,
    /// While late money waits for its valuation: why the rate when it arrived could not be
    /// read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valuation_error: Option<String>,
    /// While money waits for its senders' screening: why it could not be made (an oracle that
    /// cannot be read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screening_wait: Option<String>,
}

/// What a status poll found: the session (as it stands after any credit the poll made) and, when
/// it has a watched address, its chain.
pub struct Polled {
    /// The session.
    pub session: SessionView,
    /// Its chain, when an address of it is watched.
    pub chain: Option<ChainState>,
}

/// The hosted page's status poll of session `id`: `None` when there is no such session.
///
/// One round trip reads the session, its watches and their transfers (in D1, or in the object
/// of the institution that holds the checkout, found by the directory's index). A watch is
/// read from its chain only when its last check (the cron's or a poll's) is more than `gap`
/// seconds old, and only while the payment is pending or expired; otherwise the poll answers
/// from what that check stored, with no node call and no further round trip. Either way the
/// verdict is taken from the stored transfers, and a payment they cover is credited (guarded
/// as every credit is).
pub async fn poll(ctx: &Ctx, id: &str, gap: i64) -> Result<Option<Polled>, ApiError> {
    // A checkout this isolate knows its object holds: read there alone.
    if let Some(institution) = held::recall(id) {
        if let Some(polled) = held_poll(ctx, id, institution, gap).await? {
            return Ok(Some(polled));
        }
    }
    let mut batch = db::Batch::new();
    let session = batch.push(sessions::get_in_batch(id).or_internal("read session")?);
    let watched = batch.push(watches::of_session_in_batch(id).or_internal("read watches")?);
    let transfers =
        batch.push(watches::transfers_of_session_in_batch(id).or_internal("read transfers")?);
    let indexed = batch.push(sessions::indexed(id).or_internal("read session")?);
    let read = batch.run(&ctx.db).await.or_internal("read session")?;
    // Held in its institution's object: read there, even if D1 still has a copy of it.
    if let Some(entry) = read.rows(indexed).or_internal("read session")?.pop() {
        held::remember(id, entry.institution_id);
        return held_poll(ctx, id, entry.institution_id, gap).await;
    }
    let Some(session) = read.rows(session).or_internal("read session")?.pop() else {
        return Ok(None);
    };
    let list = read.rows(watched).or_internal("read watches")?;
    let transfers = read.rows(transfers).or_internal("read transfers")?;
    answer(ctx, None, session, list, transfers, gap)
        .await
        .map(Some)
}

/// [`poll`] of a checkout held in `institution`'s object: one call reads its session (what the
/// poll answers does not name the merchant, so the directory is not read), its watches and
/// their transfers there.
async fn held_poll(
    ctx: &Ctx,
    id: &str,
    institution: shared_types::ids::InstitutionId,
    gap: i64,
) -> Result<Option<Polled>, ApiError> {
    let object = ctx.institution_object(institution.0)?;
    let mut batch = db::Batch::new();
    let session =
        batch.push(sessions::get_held_in_batch(id, institution).or_internal("read session")?);
    let watched = batch.push(watches::of_session_in_batch(id).or_internal("read watches")?);
    let transfers =
        batch.push(watches::transfers_of_session_in_batch(id).or_internal("read transfers")?);
    let read = batch.run(&object).await.or_internal("read session")?;
    let Some(session) = read.rows(session).or_internal("read session")?.pop() else {
        return Ok(None);
    };
    let list = read.rows(watched).or_internal("read watches")?;
    let transfers = read.rows(transfers).or_internal("read transfers")?;
    answer(ctx, Some(&object), session, list, transfers, gap)
        .await
        .map(Some)
}

/// What a poll answers for `session` with its watches `list` and their `transfers` as read
/// (from D1, or from the object `held`): the chain checked where a watch is due, the verdict,
/// and the session as it stands after any credit.
async fn answer(
    ctx: &Ctx,
    held: Option<&Db>,
    session: SessionView,
    list: Vec<Watch>,
    transfers: Vec<StoredTransfer>,
    gap: i64,
) -> Result<Polled, ApiError> {
    if list.is_empty() {
        return Ok(Polled {
            session,
            chain: None,
        });
    }
    let networks = networks(ctx)?;
    let now = ctx.now();
    let due: Vec<&Watch> = if matches!(session.raw_status, RawStatus::Pending | RawStatus::Expired)
    {
        list.iter().filter(|w| w.checked_at < now - gap).collect()
    } else {
        Vec::new()
    };
    let state = if due.is_empty() {
        judge(ctx, held, &session, &networks, &list, transfers).await?
    } else {
        for watch in due {
            check(ctx, held, &networks, watch, now - gap).await?;
        }
        evaluate(ctx, held, &session, &networks).await?
    };
    let session = match &state.verdict {
        // The credit changed the payment: the page is shown it as it now stands.
        Verdict::Credit { .. } => again(ctx, held, &session)
            .await
            .or_internal("read session")?
            .unwrap_or(session),
        _ => session,
    };
    Ok(Polled {
        session,
        chain: Some(state),
    })
}

/// `session` read again, from where it is held.
async fn again(
    ctx: &Ctx,
    held: Option<&Db>,
    session: &SessionView,
) -> db::DbResult<Option<SessionView>> {
    match held {
        None => sessions::get(&ctx.db, &session.id).await,
        Some(object) => sessions::get_held(object, &session.id, session.institution_id).await,
    }
}

/// Reads `session`'s watches and transfers as they are now (one round trip, in D1 or in the
/// object `held`) and [`judge`]s them.
async fn evaluate(
    ctx: &Ctx,
    held: Option<&Db>,
    session: &SessionView,
    networks: &BTreeMap<String, Network>,
) -> Result<ChainState, ApiError> {
    let mut batch = db::Batch::new();
    let watched =
        batch.push(watches::of_session_in_batch(&session.id).or_internal("read watches")?);
    let transfers = batch.push(
        watches::transfers_of_session(session.institution_id, &session.id)
            .or_internal("read transfers")?,
    );
    let read = batch
        .run(held.unwrap_or(&ctx.db))
        .await
        .or_internal("read watches")?;
    let list = read.rows(watched).or_internal("read watches")?;
    let transfers = read.rows(transfers).or_internal("read transfers")?;
    judge(ctx, held, session, networks, &list, transfers).await
}

/// The verdict on `session`'s stored watches `list` and `transfers` (late money among them
/// valued first, at the rate when it arrived); a credit is made through the lifecycle, where
/// the payment is held (a payment credited or expired meanwhile is left to the next look).
async fn judge(
    ctx: &Ctx,
    held: Option<&Db>,
    session: &SessionView,
    networks: &BTreeMap<String, Network>,
    list: &[Watch],
    mut transfers: Vec<StoredTransfer>,
) -> Result<ChainState, ApiError> {
    let valuation_error = if matches!(session.raw_status, RawStatus::Pending | RawStatus::Expired) {
        value_late(ctx, held, session, list, networks, &mut transfers).await?
    } else {
        None
    };
    let quotes: Vec<Quoted> = list
        .iter()
        .map(|w| {
            Ok(Quoted {
                address: Address::parse(&w.address).or_internal("read a deposit address")?,
                asset: w.asset.clone(),
                network: w.network.clone(),
                decimals: w.decimals,
                crypto_amount: w.crypto_amount,
                head_block: w.head_block,
            })
        })
        .collect::<Result<_, ApiError>>()?;
    let depth = list
        .iter()
        .filter_map(|w| networks.get(&w.network))
        .map(|n| n.confirmations)
        .max()
        .unwrap_or(crate::chain::config::DEFAULT_CONFIRMATIONS);
    let expected = session.amount_expected;
    let digits = shared_types::checkout::currency_digits(&session.currency).unwrap_or(2);
    let verdict = verdict(
        session.raw_status,
        end_read(session.expires_at, list, ctx.now()),
        expected,
        digits,
        &quotes,
        &transfers,
        depth,
    );
    if let Verdict::Credit {
        gross,
        source_hash,
        late,
        parts,
        late_rate,
    } = &verdict
    {
        // Every sender of the money is screened before the credit (docs/SCREENING.md): one on a
        // sanctions list, or one the chain does not name, holds the payment for review; an
        // oracle that cannot be read leaves it uncredited until it can.
        let screened = match screen_senders(ctx, session, networks, list, &transfers, parts).await {
            Ok(screened) => screened,
            Err(why @ (screening::Unscreened::Budget | screening::Unscreened::Oracle(_))) => {
                return Ok(ChainState {
                    valuation_error: None,
                    verdict,
                    node_unreachable: list.iter().any(|w| w.node_error.is_some()),
                    screening_wait: Some(ApiError::from(why).description),
                });
            }
            Err(screening::Unscreened::Internal(err)) => return Err(err),
        };
        let action = match (&screened.review, late) {
            (Some(_), _) => Action::PayHeld { amount: *gross },
            (None, true) => Action::PayLate { amount: *gross },
            (None, false) => Action::Pay { amount: *gross },
        };
        // Each part with its asset's token and decimals, and the base units at each address.
        let mut books = Vec::with_capacity(parts.len());
        for part in parts {
            let Some(watch) = list
                .iter()
                .find(|w| w.asset == part.asset && w.network == part.network)
            else {
                return Err(ApiError::internal(
                    "credit a payment",
                    "a part's way to pay has no watch",
                ));
            };
            books.push(crate::db::parts::Part {
                network: &part.network,
                asset: &part.asset,
                token: watch.token,
                decimals: watch.decimals,
                gross: part.gross,
                rate: part.rate,
                rate_source: part.rate_source.as_deref(),
                received: part
                    .received
                    .iter()
                    .map(|(address, units)| (address.as_str(), *units))
                    .collect(),
            });
        }
        match payments::credit(
            ctx,
            held,
            Scoped::new(session.institution_id, session.transaction_id),
            (&action, &screened),
            source_hash,
            &books,
            late_rate
                .as_ref()
                .map(|(rate, source)| (*rate, source.as_str())),
        )
        .await
        {
            Ok(()) => {
                if let Some(review) = &screened.review {
                    tell_held(ctx, session, *gross, review).await;
                }
            }
            // Credited or expired meanwhile: the next check sees the new state.
            Err(err) if err.code == ErrorCode::Conflict => worker::console_warn!(
                "payment {} not credited now: {}",
                session.transaction_id,
                err.description
            ),
            Err(err) => return Err(err),
        }
    }
    Ok(ChainState {
        valuation_error: valuation_error.filter(|_| matches!(verdict, Verdict::Valuing { .. })),
        verdict,
        node_unreachable: list.iter().any(|w| w.node_error.is_some()),
        screening_wait: None,
    })
}

/// Screens the senders of `session`'s confirmed payments (`transfers` to its watched addresses
/// `list`) on their networks, for its credit (of `parts`): the decisions, and when a sender is
/// listed or not named by the chain, the review that holds it. Fails with 503 when an oracle
/// cannot be read.
async fn screen_senders(
    ctx: &Ctx,
    session: &SessionView,
    networks: &BTreeMap<String, Network>,
    list: &[Watch],
    transfers: &[StoredTransfer],
    parts: &[rules::CreditPart],
) -> Result<payments::Screened, screening::Unscreened> {
    let now = ctx.now();
    let payment = session.transaction_id.to_string();
    let mut senders: BTreeSet<(&str, Option<&str>, &str)> = BTreeSet::new();
    for t in transfers
        .iter()
        .filter(|t| t.kind == TransferKind::Payment && t.confirmed)
    {
        if let Some(watch) = list.iter().find(|w| t.address.lower() == w.address) {
            senders.insert((
                watch.network.as_str(),
                t.sender.as_deref(),
                watch.address.as_str(),
            ));
        }
    }
    let mut screened = payments::Screened::default();
    let mut reasons = Vec::new();
    let mut done: BTreeSet<(&str, &str)> = BTreeSet::new();
    for (network, sender, address) in senders {
        let Some(sender) = sender else {
            reasons.push(format!(
                "ether reached {address} on {network} from inside a contract call: the chain \
                 does not name who sent it, so it could not be screened"
            ));
            continue;
        };
        if !done.insert((network, sender)) {
            continue;
        }
        let read = screening::screen(ctx, (network, networks.get(network)), sender, None).await?;
        if read.listed() {
            reasons.push(format!("the sender {}", read.reason()));
        }
        screened.decisions.push(
            read.record(session.institution_id, (Subject::Payment, &payment), now)
                .map_err(screening::Unscreened::Internal)?,
        );
    }
    if !reasons.is_empty() {
        screened.review = Some(NewReview {
            institution_id: session.institution_id,
            transaction_id: session.transaction_id,
            reason: reasons.join("; "),
            held: parts
                .iter()
                .enumerate()
                .flat_map(|(part, p)| {
                    p.received.iter().map(move |(address, units)| HeldFunds {
                        part,
                        address: address.clone(),
                        units: units.to_string(),
                    })
                })
                .collect(),
            opened_at: now,
        });
    }
    Ok(screened)
}

/// Tells the institution's admins at once that `session`'s payment is held for review (logged
/// if it cannot be recorded: the review itself is stored).
async fn tell_held(ctx: &Ctx, session: &SessionView, gross: Decimal, review: &NewReview) {
    let subject = format!(
        "Payment {} is held: review its screening",
        session.transaction_id
    );
    let body = format!(
        "Payment {} ({} {}) reached custody, but its screening held it: {}. It is neither \
         settled nor refunded until an admin releases it (a false positive) or blocks it, with \
         a note, on the portal's Screening page.",
        session.transaction_id, gross, session.currency, review.reason
    );
    if let Err(err) = crate::notify::admins(
        ctx,
        session.institution_id,
        NotificationKind::ScreeningHold,
        &subject,
        &body,
    )
    .await
    {
        err.log_with("telling the admins of a screening hold");
    }
}

/// Most late payments one evaluation values (each takes a block's time and a rate: a few node
/// calls); the rest at the next.
const MAX_VALUED_PER_CHECK: usize = 4;

/// Values the session's final late payments that have no rate yet at the rate when each
/// arrived ([`arrival_rate`]), records it on the transfer (once: a rate recorded stays), and
/// sets it on `transfers`. A rate that cannot be read leaves the transfer unvalued (the verdict
/// then waits) and is returned, for the page: the next check tries again.
async fn value_late(
    ctx: &Ctx,
    held: Option<&Db>,
    session: &SessionView,
    watches: &[Watch],
    networks: &BTreeMap<String, Network>,
    transfers: &mut [StoredTransfer],
) -> Result<Option<String>, ApiError> {
    let mut failure = None;
    let unvalued = transfers
        .iter_mut()
        .filter(|t| {
            t.kind == TransferKind::Payment && t.confirmed && t.after_expiry && t.rate.is_none()
        })
        .take(MAX_VALUED_PER_CHECK);
    for t in unvalued {
        let Some(watch) = watches.iter().find(|w| t.address.lower() == w.address) else {
            continue;
        };
        let Some(network) = networks.get(&watch.network) else {
            continue;
        };
        let block = u64::try_from(t.block_number).unwrap_or(0);
        match arrival_rate(network, watch, &session.currency, block, ctx.now()).await {
            Ok((rate, source)) => {
                // Valued by another check meanwhile: its rate stands, read at the next check.
                if watches::set_rate(
                    held.unwrap_or(&ctx.db),
                    Scoped::new(watch.institution_id, &watch.network),
                    t,
                    rate,
                    &source,
                )
                .await
                .or_internal("value a late payment")?
                {
                    t.rate = Some(rate);
                    t.rate_source = Some(source);
                }
            }
            Err(error) => {
                worker::console_warn!("valuing a late {} payment: {error}", watch.network);
                failure.get_or_insert_with(|| error.public());
            }
        }
    }
    Ok(failure)
}

/// The rate (order currency per unit of `watch`'s asset) of money that arrived in `block`:
/// the feeds as they stood at that block, judged at its time; when the node cannot answer for
/// that block or the rules refuse its price there (a stale or out-of-bounds answer, a depeg, a
/// sequencer down), the first price read after it that the rules accept, now. Never the
/// address's quote. With where it came from.
pub async fn arrival_rate(
    network: &Network,
    watch: &Watch,
    currency: &str,
    block: u64,
    now: i64,
) -> ChainResult<(Decimal, String)> {
    let at_block = async {
        let header = rpc::call(
            &network.node,
            "eth_getBlockByNumber",
            json!([format!("{block:#x}"), false]),
        )
        .await?;
        let time = i64::try_from(rpc::quantity(&header["timestamp"])?).unwrap_or(i64::MAX);
        let at = rates::At {
            block: Some(block),
            time,
        };
        rates::rate_at(network, &watch.network, &watch.asset, currency, at).await
    };
    let rate = match at_block.await {
        Ok(rate) => Ok((
            rate.per_unit,
            format!("{} at block {block}, when it arrived", rate.source),
        )),
        Err(at_arrival) => rates::rate_at(
            network,
            &watch.network,
            &watch.asset,
            currency,
            rates::At::latest(now),
        )
        .await
        .map(|rate| {
            (
                rate.per_unit,
                format!(
                    "{}, the first price read after it arrived at block {block} (the price \
                         at that block could not be taken: {})",
                    rate.source,
                    at_arrival.public()
                ),
            )
        }),
    }?;
    let (per_unit, source) = rate;
    Ok((per_unit.round_dp(12).normalize(), source))
}

/// The cron's part: the pass over each network, which checks at once the watches of held
/// institutions that money came to ([`pass`]); then the open watches that are due (pending
/// payments first), and settles their sessions' payments, in D1 and then in the objects of the
/// institutions held there (taken in turn, [`db::moves::HELD_PER_RUN`] a run, their token
/// watches [`watches::PASS_SLACK_SECONDS`] later); then the merchants' top-up addresses
/// ([`super::topup`]).
pub async fn sweep(ctx: &Ctx) -> Result<(), ApiError> {
    let now = ctx.now();
    // The watcher's share of the run's node calls, for all: a check starts only when what it
    // could take at most is left, and the checkout watches leave the top-ups enough for one
    // check of a token; the watches after it wait for the next run (the least recently checked
    // go first).
    let budget = Budget::new(crate::chain::CronShares::configured(ctx).watcher);
    let networks = crate::chain::networks_within(ctx, &budget)?;
    if networks.is_empty() {
        return Ok(());
    }
    let gap = |watch: &Watch| now - watches::sweep_gap(watch, now);
    // First the pass over each network, which checks the held watches money came to.
    for (name, network) in &networks {
        if network.tokens.is_empty() {
            continue;
        }
        if budget.left() < pass::MOST_PASS_CALLS + MOST_TOKEN_CHECK_CALLS {
            break;
        }
        if let Err(error) = pass_over(ctx, name, network, &networks, &budget).await {
            pass::failed(ctx, name, &error).await?;
        }
    }
    let due = watches::due(&ctx.db, now, SWEEP_PER_RUN)
        .await
        .or_internal("read due watches")?;
    sweep_in(ctx, None, &networks, &budget, &due, &gap).await?;
    let held = db::moves::held(&ctx.db, db::moves::HELD_PER_RUN, now / 60)
        .await
        .or_internal("list held institutions")?;
    let mut left = SWEEP_PER_RUN;
    for institution in held.iter().map(|h| h.id) {
        if left == 0 || budget.left() < MOST_TOKEN_CHECK_CALLS + topup::MOST_TOKEN_CHECK_CALLS {
            break;
        }
        // One object failing is logged; the others go on.
        let swept = async {
            let object = ctx.institution_object(institution)?;
            let due = watches::due(&object, now, left)
                .await
                .or_internal("read due watches")?;
            sweep_in(ctx, Some(&object), &networks, &budget, &due, &gap).await?;
            Ok::<_, ApiError>(due.len())
        };
        match swept.await {
            Ok(n) => left = left.saturating_sub(i64::try_from(n).unwrap_or(left)),
            Err(err) => err.log_with(format!("watching institution {institution}'s deposits")),
        }
    }
    let held: Vec<_> = held.iter().map(|h| InstitutionId(h.id)).collect();
    topup::sweep(ctx, &budget, &networks, &held).await
}

/// One network's pass ([`pass`]): the open watches of held institutions that money came to are
/// checked now, whenever they were last; the error is the reason recorded on the pass. One
/// object failing is logged and its watches are caught up by the cron's own checks.
async fn pass_over(
    ctx: &Ctx,
    name: &str,
    network: &Network,
    networks: &BTreeMap<String, Network>,
    budget: &Budget,
) -> Result<(), String> {
    let Some(passed) = pass::start(ctx, name, network).await? else {
        return Ok(());
    };
    let now = ctx.now();
    let mut unwatched = Vec::new();
    for (&institution, addresses) in passed.held() {
        let addresses: Vec<&str> = addresses.iter().map(String::as_str).collect();
        let checked = async {
            let object = ctx.institution_object(institution.0)?;
            let mut open = Vec::new();
            for chunk in addresses.chunks(pass::LOOKUP) {
                open.extend(
                    watches::open_at(&object, institution, name, chunk, now)
                        .await
                        .or_internal("read the watches money came to")?,
                );
            }
            sweep_in(ctx, Some(&object), networks, budget, &open, &|_| now + 1).await?;
            Ok::<_, ApiError>(open)
        };
        match checked.await {
            Ok(open) => unwatched.extend(
                addresses
                    .iter()
                    .filter(|a| !open.iter().any(|w| w.address == **a))
                    .map(|a| (institution, (*a).to_owned())),
            ),
            Err(error) => error.log_with(format!(
                "the watcher's pass over {name}: institution {}'s deposits",
                institution.0
            )),
        }
    }
    for (&institution, addresses) in passed.held_topups() {
        let addresses: Vec<&str> = addresses.iter().map(String::as_str).collect();
        if let Err(error) =
            topup::check_routed(ctx, budget, networks, (institution, name), &addresses).await
        {
            error.log_with(format!(
                "the watcher's pass over {name}: institution {}'s top-ups",
                institution.0
            ));
        }
    }
    passed.finish(ctx, &unwatched).await
}

/// Checks the `due` watches of one store (D1, or the object `held`) within `budget`, each unless
/// it was checked after `checked_before` says, then judges their sessions.
async fn sweep_in(
    ctx: &Ctx,
    held: Option<&Db>,
    networks: &BTreeMap<String, Network>,
    budget: &Budget,
    due: &[Watch],
    checked_before: &dyn Fn(&Watch) -> i64,
) -> Result<(), ApiError> {
    let mut sessions = BTreeSet::new();
    for watch in due {
        if budget.left() < most_calls(watch) + topup::MOST_TOKEN_CHECK_CALLS {
            break;
        }
        check(ctx, held, networks, watch, checked_before(watch)).await?;
        sessions.insert((watch.institution_id, watch.session_id.clone()));
    }
    for (institution, id) in sessions {
        let session = match held {
            None => sessions::get(&ctx.db, &id).await,
            Some(object) => sessions::get_held(object, &id, institution).await,
        }
        .or_internal("read session")?;
        if let Some(session) = session {
            evaluate(ctx, held, &session, networks).await?;
        }
    }
    Ok(())
}
