//! The chain watcher: reads each watched deposit address's ERC-20 transfers (or, for a payment
//! in the network's own coin, what its balance grew by: [`super::native`]) from its network's
//! node, stores them (confirmed once at the network's depth; unconfirmed ones replaced at every
//! check, so a reorg's lost transfer disappears), and credits the payment once the confirmed
//! transfers cover it, through the lifecycle and the outbox like every other change.
//!
//! Each check reads the address's new blocks for its asset as every watch does
//! ([`super::scan`]), then what only a checkout needs: other tokens' transfers, for review, and
//! the times of the blocks.
//!
//! It runs from the cron for the open watches (pending payments first, a bounded number per
//! run; the merchants' top-up addresses after them, [`super::topup`]) and on demand when the hosted page polls a session's status (at most one check per watch
//! every [`POLL_GAP_SECONDS`]), so a customer sees their payment within seconds of its block.
//!
//! Rules ([`verdict`], pure):
//! - several transfers to a session's addresses add up, each converted to the order currency at
//!   the quote its address was given under;
//! - while the checkout is open it is credited as soon as the confirmed sum covers the order
//!   (`EXACT`, or `OVERPAID`); less is shown as received so far, and the customer may send the
//!   rest;
//! - the end is decided only once it is known on chain ([`end_read`]: every address read without
//!   error a grace period after it); then a confirmed part payment is credited as `UNDERPAID`,
//!   and a transfer still confirming holds the end until it is final;
//! - a transfer after the payment was marked expired is still the customer's money: it is
//!   credited late (`expired` → `succeeded`);
//! - a transfer of another token, or of the quoted one with no value, is recorded for review,
//!   never credited or dropped;
//! - the amount status tolerates rounding dust: the converted sum is rounded to the currency's
//!   minor unit before it is compared with the order.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use payrail_evm::Address;
use rust_decimal::{Decimal, RoundingStrategy};
use serde::Serialize;
use serde_json::json;
use shared_types::lifecycle::Action;
use shared_types::{ErrorCode, RawStatus};

use super::config::{Network, NATIVE_TOKEN};
use super::error::{ChainError, ChainResult};
use super::rpc::Budget;
use super::scan::{self, Scan};
use super::{evm, networks, rates, rpc, topup};
use crate::ctx::Ctx;
use crate::db::sessions::{self, SessionView};
use crate::db::watches::{self, SeenTransfer, StoredTransfer, Watch};
use crate::error::{ApiError, OrInternal};
use crate::{db, payments};

/// Least time between two on-demand checks of one watch.
pub const POLL_GAP_SECONDS: i64 = 2;
/// Most watches one cron run checks (each takes three or more node requests).
const SWEEP_PER_RUN: i64 = 25;
pub use watches::END_GRACE_SECONDS;
/// Most blocks whose time one check reads.
const MAX_BLOCK_TIMES: usize = 16;
/// Most transfers of other contracts, and most zero-value ones of the quoted token, one check
/// records.
const MAX_OTHER_TRANSFERS: usize = 50;
/// How long after its checkout ends an address is still watched for late payments.
pub const LATE_WINDOW_SECONDS: i64 = 7 * 24 * 60 * 60;

/// What a session's transfers mean for its payment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Verdict {
    /// Nothing seen yet; `received` is what confirmed transfers covered so far (order
    /// currency), less than the order.
    Waiting {
        /// Confirmed so far, in the order currency.
        received: Decimal,
    },
    /// A transfer is in a block that is not yet deep enough.
    Confirming {
        /// The least-confirmed transfer's confirmations.
        confirmations: u64,
        /// The depth the network needs.
        required: u64,
    },
    /// Credit the payment.
    Credit {
        /// Sum of the confirmed transfers, in the order currency.
        gross: Decimal,
        /// The first confirmed transfer's transaction.
        source_hash: String,
        /// After the checkout expired.
        late: bool,
        /// The money per way to pay (asset and network) it came in, the first transfer's first:
        /// each part is booked, settled and refunded in its own asset.
        #[serde(skip)]
        parts: Vec<CreditPart>,
        /// When some of the first part's money came after the checkout's end: the rate it was
        /// all valued at (order currency per unit) and where it came from.
        #[serde(skip)]
        late_rate: Option<(Decimal, String)>,
    },
    /// Money arrived after the checkout's end, and the rate when it arrived could not be read
    /// yet: nothing is decided until it is (the next check tries again).
    Valuing {
        /// Late payments not yet valued.
        transfers: u32,
    },
    /// Nothing to do (already credited, failed, or ended with nothing received).
    Settled,
}

/// The money a payment received in one way to pay (an asset on a network), for its credit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreditPart {
    /// The asset.
    pub asset: String,
    /// The network.
    pub network: String,
    /// Its share of the payment's gross, in the order currency (the currency's minor unit; the
    /// parts add up to the gross).
    pub gross: Decimal,
    /// The rate it settles and refunds at: `.0` of the order currency is worth `.1` of the
    /// asset (its address's quote, or its value over its amount with 1).
    pub rate: (Decimal, Decimal),
    /// Where that rate came from when it is not the quote.
    pub rate_source: Option<String>,
    /// The base units confirmed at each of its addresses (lower case), in the order first seen.
    pub received: Vec<(String, u128)>,
}

/// A watch's quote, for converting its transfers.
#[derive(Debug, Clone)]
pub struct Quoted {
    /// Deposit address.
    pub address: Address,
    /// Its asset.
    pub asset: String,
    /// Its network.
    pub network: String,
    /// Token decimals.
    pub decimals: u32,
    /// The crypto amount the order was quoted at.
    pub crypto_amount: Decimal,
    /// The newest block at its last check.
    pub head_block: i64,
}

/// The payment's state after the transfers seen: pure.
pub fn verdict(
    raw_status: RawStatus,
    ended: bool,
    expected: Decimal,
    digits: u32,
    quotes: &[Quoted],
    transfers: &[StoredTransfer],
    depth: u64,
) -> Verdict {
    if !matches!(raw_status, RawStatus::Pending | RawStatus::Expired) {
        return Verdict::Settled;
    }
    // Each confirmed payment, valued in the order currency.
    let mut valued: Vec<Valued<'_>> = Vec::new();
    let mut confirmed = Decimal::ZERO;
    // The first confirmed transfer's transaction.
    let mut source: Option<String> = None;
    let mut least = None::<u64>;
    let mut unvalued = 0u32;
    for t in transfers.iter().filter(|t| t.kind == "payment") {
        let Some(quote) = quotes.iter().find(|q| q.address == t.address) else {
            continue;
        };
        if !t.confirmed {
            let confirmations = u64::try_from(quote.head_block - t.block_number + 1).unwrap_or(0);
            least = Some(least.map_or(confirmations, |l| l.min(confirmations)));
            continue;
        }
        let units = t.amount.as_deref().and_then(|a| u128::from_str(a).ok());
        let Some(amount) = units.and_then(|u| evm::from_units(u, quote.decimals)) else {
            continue; // beyond any real amount: left for review
        };
        // In the order currency: money that came in time at the quote its address was given
        // under; money that came after the checkout's end at the rate when it arrived (none
        // read yet: the decision waits, never the old quote). An absurd amount (beyond what a
        // decimal holds) is left for review, never a panic.
        let value = if t.after_expiry {
            let Some(rate) = t.rate else {
                unvalued += 1;
                continue;
            };
            amount.checked_mul(rate)
        } else if quote.crypto_amount > Decimal::ZERO {
            amount
                .checked_mul(expected)
                .and_then(|v| v.checked_div(quote.crypto_amount))
        } else {
            None
        };
        if let Some((value, sum)) = value.and_then(|v| Some((v, confirmed.checked_add(v)?))) {
            confirmed = sum;
            valued.push(Valued {
                quote,
                amount,
                value,
                late: t.after_expiry,
                rate_source: t.rate_source.as_deref(),
                address: t.address.lower(),
                units: units.unwrap_or_default(),
            });
            source.get_or_insert_with(|| t.tx_hash.to_string());
        }
    }
    // Shown with the currency's minor unit whatever the rate's places (12.5 × 1 is 12.50).
    let mut gross =
        confirmed.round_dp_with_strategy(digits, RoundingStrategy::MidpointAwayFromZero);
    gross.rescale(digits);
    let mut credit_parts = split(&valued, gross, digits, expected);
    for part in &mut credit_parts {
        if let Some((rate, source)) = late_rate(&valued, (&part.asset, &part.network)) {
            part.rate = (rate, Decimal::ONE);
            part.rate_source = Some(source);
        }
    }
    // The first part's (the way to pay the payment is recorded in), shown on the payment.
    let late_rate = credit_parts
        .first()
        .and_then(|p| late_rate(&valued, (&p.asset, &p.network)));
    let confirming = least.map(|confirmations| Verdict::Confirming {
        confirmations: confirmations.min(depth.saturating_sub(1)),
        required: depth,
    });
    if unvalued > 0 {
        return confirming.unwrap_or(Verdict::Valuing {
            transfers: unvalued,
        });
    }
    let credit = |late| match &source {
        Some(hash) if gross > Decimal::ZERO && !credit_parts.is_empty() => Some(Verdict::Credit {
            gross,
            source_hash: hash.clone(),
            late,
            parts: credit_parts.clone(),
            late_rate: late_rate.clone(),
        }),
        _ => None,
    };
    match (raw_status, ended) {
        (RawStatus::Pending, false) if gross >= expected => credit(false),
        (RawStatus::Pending, false) => confirming.or(Some(Verdict::Waiting { received: gross })),
        (RawStatus::Pending, true) => confirming.or_else(|| credit(false)),
        _ => confirming.or_else(|| credit(true)),
    }
    .unwrap_or(Verdict::Settled)
}

/// Where the rate of a part paid under more than one quote (all in time) comes from.
pub const MULTI_QUOTE: &str =
    "its value over its amount: it was paid under more than one quote, each part at its own";

/// One confirmed transfer valued in the order currency.
struct Valued<'a> {
    quote: &'a Quoted,
    amount: Decimal,
    value: Decimal,
    late: bool,
    /// Where its rate came from, when it was valued at arrival.
    rate_source: Option<&'a str>,
    address: String,
    units: u128,
}

/// The credit's parts: the valued transfers per way to pay (asset and network), in the order
/// their money came (the first transfer's first). Each part's gross is its value at the
/// currency's minor unit, the largest part taking what rounding leaves, so the parts add up to
/// `gross` exactly; its rate is its address's quote when all of it came in time under one
/// quote, else its value over its amount. Empty when a part's share cannot be told (an amount
/// beyond range). Pure.
fn split(valued: &[Valued<'_>], gross: Decimal, digits: u32, expected: Decimal) -> Vec<CreditPart> {
    let mut groups: Vec<(&Quoted, Vec<&Valued<'_>>)> = Vec::new();
    for v in valued {
        let way = (&v.quote.asset, &v.quote.network);
        match groups
            .iter_mut()
            .find(|(q, _)| (&q.asset, &q.network) == way)
        {
            Some((_, members)) => members.push(v),
            None => groups.push((v.quote, vec![v])),
        }
    }
    let round = |x: Decimal| {
        let mut r = x.round_dp_with_strategy(digits, RoundingStrategy::MidpointAwayFromZero);
        r.rescale(digits);
        r
    };
    let mut parts = Vec::new();
    for (quote, members) in &groups {
        let sum = members
            .iter()
            .try_fold((Decimal::ZERO, Decimal::ZERO), |(a, v), m| {
                Some((a.checked_add(m.amount)?, v.checked_add(m.value)?))
            });
        let Some((amount, value)) = sum else {
            return Vec::new();
        };
        let one_quote = members
            .iter()
            .all(|m| !m.late && m.quote.crypto_amount == quote.crypto_amount);
        let rate = if one_quote {
            (expected, quote.crypto_amount)
        } else {
            match value.checked_div(amount) {
                Some(r) if amount > Decimal::ZERO => (r.round_dp(12).normalize(), Decimal::ONE),
                _ => return Vec::new(),
            }
        };
        let mut received: Vec<(String, u128)> = Vec::new();
        for m in members {
            match received.iter_mut().find(|(a, _)| *a == m.address) {
                Some((_, units)) => *units = units.saturating_add(m.units),
                None => received.push((m.address.clone(), m.units)),
            }
        }
        parts.push(CreditPart {
            asset: quote.asset.clone(),
            network: quote.network.clone(),
            gross: round(value),
            rate,
            rate_source: (!one_quote).then(|| MULTI_QUOTE.to_owned()),
            received,
        });
    }
    let shares: Decimal = parts.iter().map(|p| p.gross).sum();
    if let Some(largest) = parts.iter_mut().max_by_key(|p| p.gross) {
        largest.gross = round(largest.gross + (gross - shares));
    }
    parts
}

/// When some of the money in one way to pay (`asset` on `network`) was valued at the rate when
/// it arrived: the rate all of that money was valued at (its value over its amount, 12
/// places), which its settlement and refunds are paid at, and where it came from. Pure.
fn late_rate(valued: &[Valued<'_>], (asset, network): (&str, &str)) -> Option<(Decimal, String)> {
    let mine = || {
        valued
            .iter()
            .filter(|v| (v.quote.asset.as_str(), v.quote.network.as_str()) == (asset, network))
    };
    let sources: Vec<&str> = mine().filter_map(|v| v.rate_source).collect();
    let first = sources.first()?;
    let (amount, value) = mine().try_fold((Decimal::ZERO, Decimal::ZERO), |(a, v), part| {
        Some((a.checked_add(part.amount)?, v.checked_add(part.value)?))
    })?;
    let rate = value.checked_div(amount)?.round_dp(12).normalize();
    let source = match (sources.len(), mine().count()) {
        (1, 1) => (*first).to_owned(),
        (late, all) if late == all => {
            format!("{all} payments, each valued at the rate when it arrived (the first: {first})")
        }
        (late, all) => format!(
            "{late} of {all} payments valued at the rate when each arrived (the first: {first}), \
             the rest at the quote"
        ),
    };
    Some((rate, source))
}

/// Reads one watch's new blocks and stores what it finds. An error (the node unreachable, a
/// bad answer, a range that cannot be read) is returned, and the caller records it on the
/// watch; nothing else changes.
async fn read(ctx: &Ctx, network: &Network, watch: &Watch) -> ChainResult<()> {
    let node = &network.node;
    let target = scan::Target {
        network: &watch.network,
        address: &watch.address,
        token: &watch.token,
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
        Scan::Nothing { head } => return Ok(watches::touch(&ctx.db, watch, head, ctx.now()).await?),
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
            token: &t.token,
            amount: t.amount.map(|a| a.to_string()),
            block_number: t.block_number,
            confirmed: t.block_number <= final_to,
            kind: match (t.token == watch.token, t.amount) {
                (true, Some(units)) if units > 0 => "payment",
                (true, _) => "no_value",
                (false, _) => "unexpected_token",
            },
            after_expiry: times
                .get(&t.block_number)
                .map_or(now, |at| i64::try_from(*at).unwrap_or(i64::MAX))
                >= watch.expires_at,
        })
        .collect();
    // The payments already stored as final: seen again (the first blocks of a check are read
    // again, in case a node behind a load balancer lagged), they are left as they are.
    let stored = if seen.iter().any(|t| t.kind == "payment") {
        watches::confirmed_payments(&ctx.db, watch).await?
    } else {
        Vec::new()
    };
    seen.retain(|t| {
        !(t.kind == "payment"
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
    let (read_to, final_to) = match cut {
        Some(block) => (read_to.min(block), final_to.min(block.saturating_sub(1))),
        None => (read_to, final_to),
    };
    let mut statements = watches::record(
        &ctx.db,
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
    let receipts = super::ledger::receipts(ctx, watch, &seen, &watches::unchanged(watch)).await?;
    let moves_on = statements.pop();
    statements.extend(receipts);
    statements.extend(moves_on);
    db::batch(&ctx.db, statements).await?;
    Ok(())
}

fn block_number(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Keeps at most `limit` payments of `seen` ([`scan::cap`]).
pub fn cap(seen: &mut Vec<SeenTransfer<'_>>, limit: usize) -> Option<u64> {
    scan::cap(seen, limit, |t| {
        (t.block_number, t.log_index, t.kind == "payment")
    })
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
    if watch.token == NATIVE_TOKEN {
        return Ok(()); // ether is read from the balance itself
    }
    let units = |amount: &str| {
        u128::from_str(amount).map_err(|_| ChainError::answer("a stored amount is not a number"))
    };
    let mut claimed = 0u128;
    let mut new = false;
    for amount in seen
        .iter()
        .filter(|t| t.kind == "payment" && t.confirmed)
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
        token: &watch.token,
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
    if watch.token == NATIVE_TOKEN {
        scan::MOST_NATIVE_CALLS + 1
    } else {
        MOST_TOKEN_CHECK_CALLS
    }
}

/// The most node calls one check of a token's deposit address makes: its logs, the other
/// tokens' logs, the blocks' times and the balance that must cover the logs.
pub(crate) const MOST_TOKEN_CHECK_CALLS: u32 =
    scan::MOST_TOKEN_CALLS + 1 + MAX_BLOCK_TIMES as u32 + 1;

/// Checks `watch` if nobody did since `checked_before`: reads its chain, records a node failure.
async fn check(
    ctx: &Ctx,
    networks: &BTreeMap<String, Network>,
    watch: &Watch,
    checked_before: i64,
) -> Result<(), ApiError> {
    let claimed = watches::claim(&ctx.db, watch, checked_before, ctx.now())
        .await
        .or_internal("claim watch")?;
    if !claimed {
        return Ok(());
    }
    let outcome = match networks.get(&watch.network) {
        Some(network) => read(ctx, network, watch).await,
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
        watches::failed(&ctx.db, watch, &error.public())
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
/// One round trip reads the session, its watches and their transfers. A watch is read from its
/// chain only when its last check (the cron's or a poll's) is more than `gap` seconds old, and
/// only while the payment is pending or expired; otherwise the poll answers from what that check
/// stored, with no node call and no further round trip. Either way the verdict is taken from the
/// stored transfers, and a payment they cover is credited (guarded as every credit is).
pub async fn poll(ctx: &Ctx, id: &str, gap: i64) -> Result<Option<Polled>, ApiError> {
    let mut batch = db::Batch::new();
    let session = batch.push(sessions::get_in_batch(&ctx.db, id).or_internal("read session")?);
    let watched =
        batch.push(watches::of_session_in_batch(&ctx.db, id).or_internal("read watches")?);
    let transfers = batch
        .push(watches::transfers_of_session_in_batch(&ctx.db, id).or_internal("read transfers")?);
    let read = batch.run(&ctx.db).await.or_internal("read session")?;
    let Some(session) = read.rows(session).or_internal("read session")?.pop() else {
        return Ok(None);
    };
    let list = read.rows(watched).or_internal("read watches")?;
    if list.is_empty() {
        return Ok(Some(Polled {
            session,
            chain: None,
        }));
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
        let transfers = read.rows(transfers).or_internal("read transfers")?;
        judge(ctx, &session, &networks, &list, transfers).await?
    } else {
        for watch in due {
            check(ctx, &networks, watch, now - gap).await?;
        }
        evaluate(ctx, &session, &networks).await?
    };
    let session = match &state.verdict {
        // The credit changed the payment: the page is shown it as it now stands.
        Verdict::Credit { .. } => sessions::get(&ctx.db, id)
            .await
            .or_internal("read session")?
            .unwrap_or(session),
        _ => session,
    };
    Ok(Some(Polled {
        session,
        chain: Some(state),
    }))
}

/// Reads `session`'s watches and transfers as they are now (one round trip) and [`judge`]s them.
async fn evaluate(
    ctx: &Ctx,
    session: &SessionView,
    networks: &BTreeMap<String, Network>,
) -> Result<ChainState, ApiError> {
    let mut batch = db::Batch::new();
    let watched =
        batch.push(watches::of_session_in_batch(&ctx.db, &session.id).or_internal("read watches")?);
    let transfers = batch.push(
        watches::transfers_of_session(&ctx.db, session.institution_id, &session.id)
            .or_internal("read transfers")?,
    );
    let read = batch.run(&ctx.db).await.or_internal("read watches")?;
    let list = read.rows(watched).or_internal("read watches")?;
    let transfers = read.rows(transfers).or_internal("read transfers")?;
    judge(ctx, session, networks, &list, transfers).await
}

/// The verdict on `session`'s stored watches `list` and `transfers` (late money among them
/// valued first, at the rate when it arrived); a credit is made through the lifecycle (a
/// payment credited or expired meanwhile is left to the next look).
async fn judge(
    ctx: &Ctx,
    session: &SessionView,
    networks: &BTreeMap<String, Network>,
    list: &[Watch],
    mut transfers: Vec<StoredTransfer>,
) -> Result<ChainState, ApiError> {
    let valuation_error = if matches!(session.raw_status, RawStatus::Pending | RawStatus::Expired) {
        value_late(ctx, session, list, networks, &mut transfers).await?
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
        .unwrap_or(super::config::DEFAULT_CONFIRMATIONS);
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
        let action = if *late {
            Action::PayLate { amount: *gross }
        } else {
            Action::Pay { amount: *gross }
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
            books.push(payments::Part {
                network: &part.network,
                asset: &part.asset,
                token: &watch.token,
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
            (session.institution_id, session.transaction_id),
            &action,
            source_hash,
            &books,
            late_rate
                .as_ref()
                .map(|(rate, source)| (*rate, source.as_str())),
        )
        .await
        {
            Ok(()) => {}
            // Credited or expired meanwhile: the next check sees the new state.
            Err(err) if err.code == ErrorCode::Conflict => {}
            Err(err) => return Err(err),
        }
    }
    Ok(ChainState {
        valuation_error: valuation_error.filter(|_| matches!(verdict, Verdict::Valuing { .. })),
        verdict,
        node_unreachable: list.iter().any(|w| w.node_error.is_some()),
    })
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
    session: &SessionView,
    watches: &[Watch],
    networks: &BTreeMap<String, Network>,
    transfers: &mut [StoredTransfer],
) -> Result<Option<String>, ApiError> {
    let mut failure = None;
    let unvalued = transfers
        .iter_mut()
        .filter(|t| t.kind == "payment" && t.confirmed && t.after_expiry && t.rate.is_none())
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
                    &ctx.db,
                    (watch.institution_id, &watch.network),
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

/// Whether a checkout's end is known on chain: its time is up, and every address of it was
/// read without error at least [`END_GRACE_SECONDS`] after it (so a transfer sent just before
/// the end is in a block that was read). Until then nothing is decided on the end: no
/// underpayment credited, no expiry.
pub fn end_read(expires_at: i64, watches: &[Watch], now: i64) -> bool {
    expires_at <= now
        && watches
            .iter()
            .all(|w| w.node_error.is_none() && w.read_at >= expires_at + END_GRACE_SECONDS)
}

/// The cron's part: checks the open watches that are due (pending payments first), and settles
/// their sessions' payments; then the merchants' top-up addresses ([`super::topup`]).
pub async fn sweep(ctx: &Ctx) -> Result<(), ApiError> {
    let now = ctx.now();
    // The watcher's share of the run's node calls, for both: a check starts only when what it
    // could take at most is left, and the checkout watches leave the top-ups enough for one
    // check of a token; the watches after it wait for the next run (the least recently checked
    // go first).
    let budget = Budget::new(super::CronShares::configured(ctx).watcher);
    let networks = super::networks_within(ctx, &budget)?;
    if networks.is_empty() {
        return Ok(());
    }
    let due = watches::due(&ctx.db, now, SWEEP_PER_RUN)
        .await
        .or_internal("read due watches")?;
    let mut sessions = BTreeSet::new();
    for watch in &due {
        if budget.left() < most_calls(watch) + topup::MOST_TOKEN_CHECK_CALLS {
            break;
        }
        check(ctx, &networks, watch, now - watches::sweep_gap(watch, now)).await?;
        sessions.insert(watch.session_id.clone());
    }
    for id in sessions {
        if let Some(session) = crate::db::sessions::get(&ctx.db, &id)
            .await
            .or_internal("read session")?
        {
            evaluate(ctx, &session, &networks).await?;
        }
    }
    topup::sweep(ctx, &budget, &networks).await
}

#[cfg(test)]
mod tests {
    use payrail_evm::{Token, TxHash};

    use super::*;

    fn d(text: &str) -> Decimal {
        Decimal::from_str(text).unwrap()
    }

    /// The test's deposit address.
    fn deposit() -> Address {
        Address([0xab; 20])
    }

    /// A transaction hash from a short hex number (`0x1`).
    fn hash(short: &str) -> TxHash {
        TxHash::parse(&format!("0x{:0>64}", short.trim_start_matches("0x"))).unwrap()
    }

    fn quote() -> Quoted {
        Quoted {
            address: deposit(),
            asset: "USDC".into(),
            network: "polygon".into(),
            decimals: 6,
            crypto_amount: d("10.869566"),
            head_block: 100,
        }
    }

    fn transfer(
        hash: &str,
        units: &str,
        block: i64,
        confirmed: bool,
        kind: &str,
    ) -> StoredTransfer {
        StoredTransfer {
            tx_hash: self::hash(hash),
            log_index: 0,
            address: deposit(),
            token: Token::Erc20(Address([0x70; 20])),
            amount: Some(units.into()),
            block_number: block,
            confirmed,
            kind: kind.into(),
            after_expiry: false,
            rate: None,
            rate_source: None,
        }
    }

    fn judge(raw: RawStatus, ended: bool, transfers: &[StoredTransfer]) -> Verdict {
        verdict(raw, ended, d("10.00"), 2, &[quote()], transfers, 3)
    }

    #[test]
    fn an_exact_confirmed_payment_is_credited_at_the_order_amount() {
        let exact = [transfer("0x1", "10869566", 90, true, "payment")];
        assert_eq!(
            judge(RawStatus::Pending, false, &exact),
            Verdict::Credit {
                gross: d("10.00"),
                source_hash: hash("0x1").to_string(),
                late: false,
                parts: vec![CreditPart {
                    asset: "USDC".into(),
                    network: "polygon".into(),
                    gross: d("10.00"),
                    rate: (d("10.00"), d("10.869566")),
                    rate_source: None,
                    received: vec![(exact[0].address.lower(), 10_869_566)],
                }],
                late_rate: None,
            }
        );
    }

    #[test]
    fn money_in_two_ways_to_pay_is_credited_in_two_parts_that_add_up() {
        // Half in USDC on polygon at its quote; the customer changed the way to pay and sent
        // the rest in ether on base, quoted 0.003 ETH for the order (3,333.33... each).
        let ether = Quoted {
            address: Address([0xcd; 20]),
            asset: "ETH".into(),
            network: "base".into(),
            decimals: 18,
            crypto_amount: d("0.003"),
            head_block: 100,
        };
        let usdc = transfer("0x1", "5434783", 90, true, "payment");
        let eth = StoredTransfer {
            address: ether.address,
            token: Token::Native,
            ..transfer("0x2", "1500000000000000", 91, true, "payment")
        };
        let credit = verdict(
            RawStatus::Pending,
            false,
            d("10.00"),
            2,
            &[quote(), ether.clone()],
            &[usdc, eth],
            3,
        );
        let Verdict::Credit { gross, parts, .. } = credit else {
            panic!("{credit:?}");
        };
        assert_eq!(gross, d("10.00"));
        assert_eq!(parts.len(), 2, "{parts:?}");
        assert_eq!(
            (parts[0].asset.as_str(), parts[0].gross, parts[0].rate),
            ("USDC", d("5.00"), (d("10.00"), d("10.869566")))
        );
        assert_eq!(
            (parts[1].asset.as_str(), parts[1].gross, parts[1].rate),
            ("ETH", d("5.00"), (d("10.00"), d("0.003")))
        );
        assert_eq!(
            parts[1].received,
            vec![(ether.address.lower(), 1_500_000_000_000_000)]
        );
        assert_eq!(parts.iter().map(|p| p.gross).sum::<Decimal>(), gross);
    }

    #[test]
    fn rounding_leaves_the_parts_adding_up_to_the_gross() {
        // Three thirds of 10.00 round to 3.33 each: the largest part takes the cent.
        let at = |byte: u8, asset: &str| Quoted {
            address: Address([byte; 20]),
            asset: asset.into(),
            network: "polygon".into(),
            decimals: 6,
            crypto_amount: d("10"),
            head_block: 100,
        };
        let quotes = [at(1, "USDC"), at(2, "USDT"), at(3, "DAI")];
        let third = |q: &Quoted, h: &str, units: &str| StoredTransfer {
            address: q.address,
            ..transfer(h, units, 90, true, "payment")
        };
        let transfers = [
            third(&quotes[0], "0x1", "3333333"),
            third(&quotes[1], "0x2", "3333333"),
            third(&quotes[2], "0x3", "3333334"),
        ];
        let credit = verdict(
            RawStatus::Pending,
            false,
            d("10.00"),
            2,
            &quotes,
            &transfers,
            3,
        );
        let Verdict::Credit { gross, parts, .. } = credit else {
            panic!("{credit:?}");
        };
        assert_eq!(gross, d("10.00"));
        let shares: Vec<String> = parts.iter().map(|p| p.gross.to_string()).collect();
        assert_eq!(shares, ["3.33", "3.33", "3.34"]);
    }

    /// A transfer after the end, valued at `rate` (none: not yet).
    fn late(hash: &str, units: &str, rate: Option<&str>) -> StoredTransfer {
        StoredTransfer {
            after_expiry: true,
            rate: rate.map(d),
            rate_source: rate.map(|r| format!("feed: {r}")),
            ..transfer(hash, units, 95, true, "payment")
        }
    }

    #[test]
    fn late_money_is_valued_at_the_rate_when_it_arrived_never_the_quote() {
        // Quoted 10.869566 USDC for 10.00 (0.92 each); it arrived late, when one was worth
        // 0.50: 5.43, underpaid, and the payment's rate is that one.
        let valued = [late("0x1", "10869566", Some("0.5"))];
        // Two places whatever the rate's: 10 at 1 is 10.00.
        assert!(matches!(
            judge(RawStatus::Expired, true, &[late("0x1", "10000000", Some("1"))]),
            Verdict::Credit { gross, .. } if gross.to_string() == "10.00"
        ));
        match judge(RawStatus::Expired, true, &valued) {
            Verdict::Credit {
                gross,
                late: true,
                late_rate: Some((rate, source)),
                ..
            } => {
                assert_eq!(gross.to_string(), "5.43");
                assert_eq!(rate, d("0.5"));
                assert_eq!(source, "feed: 0.5");
            }
            other => panic!("{other:?}"),
        }
        // No rate read yet: nothing is decided, whatever the quote says.
        let unvalued = [late("0x1", "10869566", None)];
        assert_eq!(
            judge(RawStatus::Expired, true, &unvalued),
            Verdict::Valuing { transfers: 1 }
        );
        // Money in time at the quote, the rest late at its own rate: the payment's rate is
        // what it all was worth over what it all was.
        let mixed = [
            transfer("0x1", "5434783", 90, true, "payment"),
            late("0x2", "5434783", Some("1")),
        ];
        match judge(RawStatus::Pending, true, &mixed) {
            Verdict::Credit {
                gross,
                late: false,
                late_rate: Some((rate, source)),
                ..
            } => {
                // 5.00 at the quote and 5.434783 at 1.
                assert_eq!(gross, d("10.43"));
                assert_eq!(rate, d("0.95999996688"));
                assert!(source.starts_with("1 of 2 payments"), "{source}");
            }
            other => panic!("{other:?}"),
        }
        // Money in time only: no late rate, the quote stands.
        assert!(matches!(
            judge(
                RawStatus::Pending,
                false,
                &[transfer("0x1", "10869566", 90, true, "payment")]
            ),
            Verdict::Credit {
                late_rate: None,
                ..
            }
        ));
    }

    #[test]
    fn an_absurd_amount_from_the_node_is_left_for_review_not_a_panic() {
        // 2^128 - 1 base units fits no decimal; 7·10^28 units (7·10^22 tokens) does, but its
        // value in a billion-unit order overflows one: both ignored, never a panic.
        let absurd = [
            transfer("0x1", &u128::MAX.to_string(), 90, true, "payment"),
            transfer("0x2", "70000000000000000000000000000", 90, true, "payment"),
        ];
        assert_eq!(
            verdict(
                RawStatus::Pending,
                false,
                d("1000000000"),
                0,
                &[quote()],
                &absurd,
                3
            ),
            Verdict::Waiting {
                received: Decimal::ZERO
            }
        );
    }

    #[test]
    fn parts_add_up_and_a_shortfall_waits_for_the_end() {
        let half = transfer("0x1", "5434783", 90, true, "payment");
        assert_eq!(
            judge(RawStatus::Pending, false, std::slice::from_ref(&half)),
            Verdict::Waiting {
                received: d("5.00")
            }
        );
        let rest = transfer("0x2", "5434783", 95, true, "payment");
        assert!(matches!(
            judge(RawStatus::Pending, false, &[half.clone(), rest]),
            Verdict::Credit { gross, ref source_hash, .. } if gross == d("10.00") && *source_hash == hash("0x1").to_string()
        ));
        // At the end, the part is credited (underpaid).
        assert!(matches!(
            judge(RawStatus::Pending, true, std::slice::from_ref(&half)),
            Verdict::Credit { gross, late: false, .. } if gross == d("5.00")
        ));
    }

    #[test]
    fn unconfirmed_transfers_show_their_depth_and_hold_the_end() {
        let fresh = [transfer("0x1", "10869566", 99, false, "payment")];
        let confirming = Verdict::Confirming {
            confirmations: 2,
            required: 3,
        };
        assert_eq!(judge(RawStatus::Pending, false, &fresh), confirming);
        assert_eq!(judge(RawStatus::Pending, true, &fresh), confirming);
        assert_eq!(judge(RawStatus::Expired, true, &fresh), confirming);
    }

    #[test]
    fn late_money_is_credited_and_other_tokens_never_are() {
        let late = [transfer("0x9", "10869566", 99, true, "payment")];
        assert!(matches!(
            judge(RawStatus::Expired, true, &late),
            Verdict::Credit { late: true, .. }
        ));
        let other = [transfer("0x9", "10869566", 90, true, "unexpected_token")];
        assert_eq!(
            judge(RawStatus::Pending, false, &other),
            Verdict::Waiting {
                received: Decimal::ZERO
            }
        );
        assert_eq!(judge(RawStatus::Expired, true, &other), Verdict::Settled);
        assert_eq!(judge(RawStatus::Succeeded, false, &late), Verdict::Settled);
    }

    fn watch(read_at: i64, node_error: Option<&str>) -> Watch {
        Watch {
            address: "0xabc".into(),
            derivation_index: 0,
            session_id: "cs_1".into(),
            institution_id: 1,
            network: "polygon".into(),
            asset: "USDC".into(),
            token: "0xtoken".into(),
            decimals: 6,
            crypto_amount: d("10"),
            base_units: "10000000".into(),
            scanned_to: 99,
            head_block: 100,
            node_error: node_error.map(str::to_owned),
            read_at,
            checked_at: read_at,
            expires_at: 1_000,
            raw_status: RawStatus::Pending,
        }
    }

    #[test]
    fn the_end_is_known_only_once_every_address_was_read_after_it() {
        let after = 1_000 + END_GRACE_SECONDS;
        assert!(end_read(1_000, &[watch(after, None)], after));
        assert!(
            !end_read(1_000, &[watch(after, None)], 999),
            "not yet ended"
        );
        assert!(
            !end_read(1_000, &[watch(after - 1, None)], after + 100),
            "read too soon after the end"
        );
        assert!(
            !end_read(
                1_000,
                &[watch(after, None), watch(after, Some("unreachable"))],
                after
            ),
            "one address could not be read"
        );
    }

    #[test]
    fn overpayment_and_dust() {
        let over = [transfer("0x1", "12000000", 90, true, "payment")];
        assert!(matches!(
            judge(RawStatus::Pending, false, &over),
            Verdict::Credit { gross, .. } if gross == d("11.04")
        ));
        // One base unit short rounds to the order amount: dust, not an underpayment.
        let dust = [transfer("0x1", "10869565", 90, true, "payment")];
        assert!(matches!(
            judge(RawStatus::Pending, false, &dust),
            Verdict::Credit { gross, .. } if gross == d("10.00")
        ));
    }
}
