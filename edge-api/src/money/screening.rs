//! Sanctions screening: whether an address money comes from or goes to is on a sanctions list,
//! read from the network's on-chain oracle (`sanctions_oracle`, the interface Chainalysis
//! publishes: `isSanctioned(address)`) and from the operator's own list in the directory (other
//! authorities' lists, loaded from OFAC's SDN file or entered by hand). See docs/SCREENING.md.
//!
//! The rules:
//! - **Both sources, every time.** An address is listed when either names it; the decision
//!   records what was read (the oracle and the block it answered at, the list's version) and
//!   which list named it.
//! - **Fail closed.** An oracle that cannot be read (the node down or on another chain, no
//!   contract at the address, an answer that is not a yes or a no) is never taken as "not
//!   listed": the screening fails with 503 `payments_unavailable`, and what it gates waits.
//!   The operator is told once per outage; the cron's next read that gets an answer ends it.
//! - **Stored with what it gates.** A [`Read`] becomes a stored decision ([`Read::record`]) in
//!   the same batch as the change it allows or holds; a refusal stores it alone.

use std::collections::BTreeMap;

use serde_json::json;
use shared_types::ids::{InstitutionId, Scoped, ScreeningId, TopupReviewId};
use shared_types::{ErrorCode, Transaction};

use crate::chain::config::Network;
use crate::chain::rpc;
use crate::ctx::Ctx;
use crate::db::parts::Part;
use crate::db::refunds;
use crate::db::screenings::{self, HeldFunds, NewScreening, Review, Subject};
use crate::db::topups::{self, TopupReview};
use crate::error::{ApiError, OrInternal};
use crate::payments::{self, Decision};
use crate::{crypto, notify};

/// What screening one address on one network read and found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// The network.
    pub network: String,
    /// The address, lower case.
    pub address: String,
    /// The oracle read, and the block it answered at (none when the network has no oracle).
    pub oracle: Option<(String, u64)>,
    /// The operator's list's version when read.
    pub list_version: i64,
    /// The list that names the address, with its entry: `None` when it is clear.
    pub listed_by: Option<String>,
}

impl Read {
    /// Whether a list names the address.
    pub fn listed(&self) -> bool {
        self.listed_by.is_some()
    }

    /// The decision to store, about `subject` `subject_id` of `institution`, at `now`.
    pub fn record(
        &self,
        institution: InstitutionId,
        (subject, subject_id): (Subject, &str),
        now: i64,
    ) -> Result<NewScreening, ApiError> {
        Ok(NewScreening {
            id: crypto::random_token(ScreeningId::PREFIX).or_internal("make a screening id")?,
            institution_id: institution,
            subject,
            subject_id: subject_id.to_owned(),
            network: self.network.clone(),
            address: self.address.clone(),
            listed: self.listed(),
            oracle: self.oracle.clone(),
            list_version: self.list_version,
            listed_by: self.listed_by.clone(),
            screened_at: now,
        })
    }

    /// Why money to or from the address is stopped, in words an admin reads: the address, the
    /// network and the list that names it.
    pub fn reason(&self) -> String {
        format!(
            "address {} is on a sanctions list ({})",
            self.address,
            self.listed_by.as_deref().unwrap_or("listed")
        )
    }
}

/// Why a screening was not made.
#[derive(Debug)]
pub enum Unscreened {
    /// This request's or run's node calls are spent: nothing was asked (try again later; no
    /// outage).
    Budget,
    /// The oracle cannot be read (an outage, recorded and told): 503 `payments_unavailable`.
    Oracle(ApiError),
    /// Our side failed (the list could not be read).
    Internal(ApiError),
}

impl Unscreened {
    /// What a chain task that cannot go on without the screening (`doing`, in the log) waits
    /// with: the run's calls spent (read again next run, nothing to record), or the reason it
    /// waits, in words it records.
    pub fn waits(self, doing: &str) -> crate::chain::error::ChainError {
        use crate::chain::error::ChainError;
        match self {
            Unscreened::Budget => rpc::RpcError::Budget.into(),
            Unscreened::Oracle(err) => ChainError::rule(err.description),
            Unscreened::Internal(err) => {
                err.log_with(doing);
                ChainError::rule("the sanctions list could not be read")
            }
        }
    }
}

impl From<Unscreened> for ApiError {
    fn from(why: Unscreened) -> Self {
        match why {
            Unscreened::Budget => ApiError::new(
                ErrorCode::PaymentsUnavailable,
                "the screening could not be made now: try again shortly",
            ),
            Unscreened::Oracle(err) | Unscreened::Internal(err) => err,
        }
    }
}

/// Screens `address` on network `name` (`network`, its configuration; `None` when it has no
/// node configured, then against the operator's list alone): the operator's list, then the
/// oracle at block `at` (the node's head when `None`). Fails with 503 `payments_unavailable`,
/// naming the network, when the oracle cannot be read (the operator is told once per outage).
pub async fn screen(
    ctx: &Ctx,
    (name, network): (&str, Option<&Network>),
    address: &str,
    at: Option<u64>,
) -> Result<Read, Unscreened> {
    let address = address.to_ascii_lowercase();
    let list = screenings::list_says(&ctx.db, &address)
        .await
        .or_internal("read the sanctions list")
        .map_err(Unscreened::Internal)?;
    let mut listed_by = list.source.as_ref().map(|source| {
        format!(
            "{source}: {} (listed {})",
            list.entry.as_deref().unwrap_or(""),
            list.listed_on.as_deref().unwrap_or("")
        )
    });
    let oracle = match network.and_then(|n| Some((n, n.sanctions_oracle.as_ref()?))) {
        None => None,
        Some((network, oracle)) => match ask(network, oracle, &address, at).await {
            Ok((listed, block)) => {
                let oracle = oracle.to_ascii_lowercase();
                if listed && listed_by.is_none() {
                    listed_by = Some(format!("the sanctions oracle {oracle} on {name}"));
                }
                Some((oracle, block))
            }
            Err(Asked::Budget) => return Err(Unscreened::Budget),
            Err(Asked::Unreadable(why)) => {
                return Err(Unscreened::Oracle(outage(ctx, name, &why).await))
            }
        },
    };
    Ok(Read {
        network: name.to_owned(),
        address,
        oracle,
        list_version: list.version,
        listed_by,
    })
}

/// Why an oracle gave no answer.
enum Asked {
    /// The calls were spent before asking.
    Budget,
    /// It cannot be read: why.
    Unreadable(String),
}

/// Asks `oracle` whether `address` is sanctioned, at block `at` (the head when `None`): the
/// answer and its block, or why it cannot be read.
async fn ask(
    network: &Network,
    oracle: &str,
    address: &str,
    at: Option<u64>,
) -> Result<(bool, u64), Asked> {
    let node = &network.node;
    let failed = |e: rpc::RpcError| match e {
        rpc::RpcError::Budget => Asked::Budget,
        other => Asked::Unreadable(format!("its node did not answer ({})", other.public())),
    };
    let block = match at {
        Some(block) => block,
        None => rpc::head(node).await.map_err(failed)?,
    };
    let call = json!({
        "to": oracle.to_ascii_lowercase(),
        "data": payrail_evm::is_sanctioned_call(address)
    });
    let answer = rpc::call(node, "eth_call", json!([call, format!("{block:#x}")]))
        .await
        .map_err(failed)?;
    verdict(&answer)
        .map(|listed| (listed, block))
        .map_err(|why| Asked::Unreadable(why.to_owned()))
}

/// An `isSanctioned` answer read: true or false, or why it is neither
/// ([`payrail_evm::sanctioned_answer`]). Pure.
pub fn verdict(answer: &serde_json::Value) -> Result<bool, &'static str> {
    payrail_evm::sanctioned_answer(answer.as_str().ok_or("its answer is not hex data")?)
}

/// The refusal of a screening that could not be made on `name` because its oracle could not be
/// read (`why`); the outage is recorded and, when it is new, the operator told.
async fn outage(ctx: &Ctx, name: &str, why: &str) -> ApiError {
    let reason = format!("the sanctions oracle on {name} cannot be read: {why}");
    worker::console_warn!("{reason}");
    let told = async {
        if screenings::outage_opened(&ctx.db, name, &reason, ctx.now()).await? {
            let status = notify::operator(
                ctx,
                &format!("Sanctions screening on {name} is stopped"),
                &format!(
                    "{reason}. Nothing on {name} is credited or paid as cleared until it can be \
                     read again: payments from customers wait, and payouts, refunds and new \
                     settlement wallets there are held or refused. Check the network's node and \
                     its sanctions_oracle in PAYRAIL_CHAINS. You are told once; the screening \
                     resumes by itself when the oracle answers."
                ),
            )
            .await;
            screenings::outage_told(&ctx.db, name, status.as_str()).await?;
        }
        Ok::<_, crate::db::DbError>(())
    };
    if let Err(e) = told.await {
        worker::console_error!("recording the screening outage on {name}: {e}");
    }
    ApiError::new(
        ErrorCode::PaymentsUnavailable,
        format!("{reason}; nothing is paid or credited there until it can be, try again shortly"),
    )
}

/// The cron's part: each network with an open outage is asked again (about the zero address);
/// one that answers ends its outage.
pub async fn recover(ctx: &Ctx, networks: &BTreeMap<String, Network>) -> Result<(), ApiError> {
    let open = screenings::open_outages(&ctx.db)
        .await
        .or_internal("read screening outages")?;
    for outage in open {
        let Some(network) = networks.get(&outage.network) else {
            continue;
        };
        let Some(oracle) = &network.sanctions_oracle else {
            // No oracle any more: nothing to wait for.
            screenings::outage_ended(&ctx.db, &outage.network, ctx.now())
                .await
                .or_internal("end a screening outage")?;
            continue;
        };
        if ask(network, oracle, &format!("0x{}", "0".repeat(40)), None)
            .await
            .is_ok()
        {
            screenings::outage_ended(&ctx.db, &outage.network, ctx.now())
                .await
                .or_internal("end a screening outage")?;
        }
    }
    Ok(())
}

/// Screens `address` on network `name` for `subject` `subject_id` of `institution`, storing a
/// listed address's decision in `db` alone (nothing else is written: the caller refuses).
async fn screened_or_refused(
    ctx: &Ctx,
    db: &crate::db::Db,
    (name, address): (&str, &str),
    (institution, subject, subject_id): (InstitutionId, Subject, &str),
) -> Result<Read, ApiError> {
    let networks = crate::chain::networks(ctx)?;
    let read = screen(ctx, (name, networks.get(name)), address, None).await?;
    if read.listed() {
        let record = read.record(institution, (subject, subject_id), ctx.now())?;
        screenings::record(db, &record)
            .await
            .or_internal("record a screening")?;
    }
    Ok(read)
}

/// Screens `address` on network `name` before money is sent to it for `subject` of
/// `institution` (`subject_id`: what a refusal's decision names, as nothing else is stored): a
/// listed address is refused (400 `invalid_request` naming the list), its decision stored in
/// `db` alone; a clear one's [`Read`] is returned, for its decision to be stored with what it
/// allowed.
pub async fn gate(
    ctx: &Ctx,
    db: &crate::db::Db,
    (name, address): (&str, &str),
    (institution, subject, subject_id): (InstitutionId, Subject, &str),
) -> Result<Read, ApiError> {
    let read =
        screened_or_refused(ctx, db, (name, address), (institution, subject, subject_id)).await?;
    if read.listed() {
        return Err(ApiError::invalid_request(format!(
            "{}: Payrail may not send money to it",
            read.reason()
        )));
    }
    Ok(read)
}

/// Screens a refund's or a return's address `to` on network `name` (at block `head`) again just
/// before its
/// transaction is signed (it was screened when asked, and a list may name it since, while the
/// refund waited for the treasury or the merchant's balance). Clear: the signing goes on. Listed:
/// nothing is signed, the decision is stored once in `db` (the store that holds the refund:
/// `subject`, `refund_id` of `institution`), and the refund waits with the reason, so it goes out
/// only if the listing is lifted. An oracle that cannot be read makes it wait too, never lets it
/// through.
pub async fn before_signing(
    ctx: &Ctx,
    db: &crate::db::Db,
    (name, network, head): (&str, &Network, u64),
    to: &str,
    (institution, subject, refund_id): (InstitutionId, Subject, &str),
) -> crate::chain::error::ChainResult<()> {
    use crate::chain::error::ChainError;
    let read = screen(ctx, (name, Some(network)), to, Some(head))
        .await
        .map_err(|why| why.waits("screening a refund's address before signing"))?;
    if !read.listed() {
        return Ok(());
    }
    let record = read
        .record(institution, (subject, refund_id), ctx.now())
        .map_err(|e| ChainError::Config(e.description))?;
    crate::db::batch(db, vec![screenings::insert_once(&record)?]).await?;
    Err(ChainError::rule(format!(
        "{}, named since the refund was asked: nothing is sent to it (it goes out only if the \
         listing is lifted)",
        read.reason()
    )))
}

/// Refuses to send back money that `sender` paid in on network `name` when a list names the
/// sender (400 `invalid_request`: the money stays frozen in custody), storing that decision in
/// `db` (what it gated: a return, `subject_id`); a clear sender passes with nothing stored.
pub async fn frozen_sender(
    ctx: &Ctx,
    db: &crate::db::Db,
    (name, sender): (&str, &str),
    (institution, subject_id): (InstitutionId, &str),
) -> Result<(), ApiError> {
    let read = screened_or_refused(
        ctx,
        db,
        (name, sender),
        (institution, Subject::Return, subject_id),
    )
    .await?;
    if read.listed() {
        return Err(ApiError::invalid_request(format!(
            "money at this address came from a sender on a sanctions list ({}): it stays \
             frozen in custody and is never sent back",
            read.reason()
        )));
    }
    Ok(())
}

/// Longest note on a review's decision.
pub const MAX_NOTE: usize = 2000;

/// Decides the review of held payment `payment` (in D1, or in the object `held` that holds the
/// institution's money) as `decision`: released, it is credited exactly as its credit would
/// have been (the money held at each of its addresses) and `payment.succeeded` goes out;
/// blocked, it fails and its money stays in custody, owed to no one. Refused before anything
/// is written: a payment never held (404), a review already decided (409 naming the decision,
/// who and when), a note missing or too long (400). Of two decisions at once, one is made.
pub async fn decide(
    ctx: &Ctx,
    held: Option<&crate::db::Db>,
    payment: Scoped<i64>,
    decision: &Decision<'_>,
) -> Result<Transaction, ApiError> {
    let db = held.unwrap_or(&ctx.db);
    let note = decision.note.trim();
    if note.is_empty() || note.chars().count() > MAX_NOTE {
        return Err(ApiError::invalid_request(format!(
            "note: say why, in 1 to {MAX_NOTE} characters (it is kept with the decision)"
        )));
    }
    let review = screenings::review(db, payment)
        .await
        .or_internal("read the review")?
        .ok_or_else(|| ApiError::not_found("this payment was never held by its screening"))?;
    if let Some(done) = decided(&review) {
        return Err(done);
    }
    let funds: Vec<HeldFunds> =
        serde_json::from_str(&review.held).or_internal("read the money held")?;
    let quotes = refunds::quotes_of(db, payment.institution, payment.id)
        .await
        .or_internal("read the payment's parts")?;
    let mut parts = Vec::with_capacity(quotes.len());
    for q in &quotes {
        let mut received = Vec::new();
        for f in funds
            .iter()
            .filter(|f| i64::try_from(f.part).is_ok_and(|p| p == q.part))
        {
            let units = f.units.parse::<u128>().or_internal("read the money held")?;
            received.push((f.address.as_str(), units));
        }
        parts.push(Part {
            network: &q.network,
            asset: &q.asset,
            token: q.token,
            decimals: q.decimals,
            gross: q.gross,
            rate: (q.expected, q.crypto_amount),
            rate_source: q.late_rate_source.as_deref(),
            received,
        });
    }
    let decision = Decision { note, ..*decision };
    match payments::decide(ctx, held, payment, &decision, &parts).await {
        Ok(after) => Ok(after),
        // Another decision (or change) came first: say which, when it is a decision.
        Err(err) if err.code == ErrorCode::Conflict => {
            let now = screenings::review(db, payment)
                .await
                .or_internal("read the review")?;
            Err(now.as_ref().and_then(decided).unwrap_or(err))
        }
        Err(err) => Err(err),
    }
}

/// Decides review `review` of a merchant's top-up held by its screening (in D1, or in the
/// object `held` that holds the institution's money) as `decision`: released, the top-up is
/// posted to the merchant's balance exactly as its credit would have been; blocked, it stays in
/// the address's unallocated account, frozen. Refused before anything is written: no such
/// review (404), one decided already (409 naming the decision, who and when), a note missing
/// or too long (400). Of two decisions at once, one is made.
pub async fn decide_topup(
    ctx: &Ctx,
    held: Option<&crate::db::Db>,
    review: Scoped<&str>,
    decision: &Decision<'_>,
) -> Result<TopupReview, ApiError> {
    let db = held.unwrap_or(&ctx.db);
    let note = decision.note.trim();
    if note.is_empty() || note.chars().count() > MAX_NOTE {
        return Err(ApiError::invalid_request(format!(
            "note: say why, in 1 to {MAX_NOTE} characters (it is kept with the decision)"
        )));
    }
    let not_found = || ApiError::not_found("no top-up held by its screening has this id");
    if TopupReviewId::parse(review.id).is_err() {
        return Err(not_found());
    }
    let r = topups::review(db, review)
        .await
        .or_internal("read the review")?
        .ok_or_else(not_found)?;
    if let Some(done) = decided_topup(&r) {
        return Err(done);
    }
    let decision = Decision { note, ..*decision };
    let now = ctx.now();
    let mut batch = crate::db::Batch::new();
    if decision.release {
        let when = topups::review_undecided(review);
        for s in crate::money::ledger::release_topup(ctx, db, review.institution, &r, &when).await?
        {
            batch.push(s);
        }
    }
    let mut decided = None;
    for s in topups::decide_review(&r, review.institution, (&decision, now))
        .or_internal("record the decision")?
    {
        decided = Some(batch.push(s));
    }
    let results = batch.run(db).await.or_internal("record the decision")?;
    let after = topups::review(db, review)
        .await
        .or_internal("read the review")?
        .ok_or_else(not_found)?;
    if decided.is_some_and(|h| results.changed(h)) {
        return Ok(after);
    }
    // Another decision came first: say which.
    Err(decided_topup(&after).unwrap_or_else(|| {
        ApiError::new(
            ErrorCode::Conflict,
            "the review changed meanwhile: try again",
        )
    }))
}

/// The refusal of a decision on top-up review `r` when it was decided already.
fn decided_topup(r: &TopupReview) -> Option<ApiError> {
    let done = r.decision.as_deref()?;
    Some(ApiError::new(
        ErrorCode::Conflict,
        format!(
            "this top-up's review was decided already: {done} by {} at {}",
            r.decided_by.as_deref().unwrap_or("an admin"),
            r.decided_at
                .and_then(shared_types::time::format_unix)
                .unwrap_or_default()
        ),
    ))
}

/// The refusal of a decision on `review` when it was decided already.
fn decided(review: &Review) -> Option<ApiError> {
    let done = review.decision.as_deref()?;
    Some(ApiError::new(
        ErrorCode::Conflict,
        format!(
            "this payment's review was decided already: {done} by {} at {}",
            review.decided_by.as_deref().unwrap_or("an admin"),
            review
                .decided_at
                .and_then(shared_types::time::format_unix)
                .unwrap_or_default()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::verdict;
    use serde_json::json;

    #[test]
    fn an_oracle_answer_is_a_yes_a_no_or_refused() {
        let word = |last: &str| json!(format!("0x{}{last}", "0".repeat(63)));
        assert_eq!(verdict(&word("0")), Ok(false));
        assert_eq!(verdict(&word("1")), Ok(true));
        assert!(verdict(&word("2")).is_err(), "not a bool");
        assert!(verdict(&json!(format!("0x1{}", "0".repeat(63)))).is_err());
        assert_eq!(
            verdict(&json!("0x")),
            Err("no contract answers at the configured address")
        );
        assert!(verdict(&json!("0x01")).is_err(), "short");
        assert!(
            verdict(&json!(format!("0x{}", "0".repeat(128)))).is_err(),
            "two words"
        );
        assert!(verdict(&json!(null)).is_err());
        assert!(verdict(&json!(format!("0x{}zz", "0".repeat(62)))).is_err());
    }
}
