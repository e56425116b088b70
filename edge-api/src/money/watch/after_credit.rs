//! Money that reaches a credited payment's deposit address after its credit, screened as it
//! arrives (docs/SCREENING.md). Nothing is credited with it: it stays in the address's
//! `unallocated` account, owed to no one, until a return sends it back, and a return screens
//! its senders again and refuses a listed one's (`money::screening::frozen_sender`). Screening
//! it on arrival puts each sender's decision on the payment's record at once, and tells the
//! institution's admins when a list names one, before anybody asks for a return.
//!
//! What it gates is nothing but the record, so it never holds up the watch: a sender the chain
//! does not name, or one that cannot be screened now (the oracle unreadable, the run's node
//! calls spent), is left to the return's screening, and the check goes on.

use std::collections::BTreeMap;

use shared_types::RawStatus;

use super::super::screening::{self, Read};
use crate::chain::config::Network;
use crate::ctx::Ctx;
use crate::db::notifications::NotificationKind;
use crate::db::screenings::{self, NewScreening, Subject};
use crate::db::watches::{SeenTransfer, TransferKind, Watch};
use crate::db::{Db, Stmt};

/// Whether a payment in `status` has been credited (money arriving now is after its credit).
fn credited(status: RawStatus) -> bool {
    matches!(
        status,
        RawStatus::Succeeded | RawStatus::Paid | RawStatus::Refunded | RawStatus::PartiallyRefunded
    )
}

/// The screenings of the senders of the money after the credit that this check of `watch`
/// confirms (each sender once, at block `head`), to store with the check; the listed among them
/// come back in `listed` too, for [`tell`] once the check is stored. Empty when the payment is
/// not credited.
pub(super) async fn screen(
    ctx: &Ctx,
    network: &Network,
    watch: &Watch,
    seen: &[SeenTransfer<'_>],
    head: u64,
) -> Screened {
    let mut out = Screened::default();
    if !credited(watch.raw_status) {
        return out;
    }
    let mut reads: BTreeMap<&str, Read> = BTreeMap::new();
    for t in seen
        .iter()
        .filter(|t| t.kind == TransferKind::Payment && t.confirmed)
    {
        let Some(sender) = t.sender else { continue };
        if reads.contains_key(sender) {
            continue;
        }
        match screening::screen(ctx, (&watch.network, Some(network)), sender, Some(head)).await {
            Ok(read) => {
                reads.insert(sender, read);
            }
            // Left to the return's screening: this records, it gates nothing.
            Err(why) => {
                worker::console_warn!(
                    "money after the credit at {} not screened on arrival: {}",
                    watch.address,
                    crate::error::ApiError::from(why).description
                );
            }
        }
    }
    let payment = watch.transaction_id.to_string();
    for read in reads.into_values() {
        match read.record(
            watch.institution_id,
            (Subject::Payment, &payment),
            ctx.now(),
        ) {
            Ok(decision) => {
                if read.listed() {
                    out.listed.push(read);
                }
                out.decisions.push(decision);
            }
            Err(err) => err.log_with("a screening of money after the credit"),
        }
    }
    out
}

/// What [`screen`] found.
#[derive(Default)]
pub(super) struct Screened {
    /// The decisions, stored with the check.
    pub(super) decisions: Vec<NewScreening>,
    /// The listed senders.
    pub(super) listed: Vec<Read>,
}

impl Screened {
    /// The statements storing the decisions (each once: a check that reads the same blocks
    /// again stores nothing new).
    pub(super) fn statements(&self) -> Result<Vec<Stmt>, crate::db::DbError> {
        self.decisions.iter().map(screenings::insert_once).collect()
    }

    /// The listed senders whose listed decision about this payment is not stored yet in `db`:
    /// the ones the admins are told of once the check is stored.
    pub(super) async fn new_listings(&self, db: &Db, watch: &Watch) -> Vec<Read> {
        let mut new = Vec::new();
        for read in &self.listed {
            match screenings::listed_before(
                db,
                watch.institution_id,
                (Subject::Payment, &watch.transaction_id.to_string()),
                &read.address,
            )
            .await
            {
                Ok(false) => new.push(read.clone()),
                Ok(true) => {}
                Err(e) => worker::console_warn!("reading earlier screenings: {e}"),
            }
        }
        new
    }
}

/// Tells the institution's admins that money from the listed senders `new` (not yet on the
/// payment's record before the check) reached `watch`'s address after its payment's credit,
/// once the check has stored their decisions in `db` (a check that lost its race stored none,
/// and tells nothing). Logged if it cannot be: the decisions are stored.
pub(super) async fn tell(ctx: &Ctx, db: &Db, watch: &Watch, new: &[Read]) {
    let mut listed = Vec::new();
    for read in new {
        if matches!(
            screenings::listed_before(
                db,
                watch.institution_id,
                (Subject::Payment, &watch.transaction_id.to_string()),
                &read.address,
            )
            .await,
            Ok(true)
        ) {
            listed.push(read);
        }
    }
    if listed.is_empty() {
        return;
    }
    let reasons: Vec<String> = listed.iter().map(|r| r.reason()).collect();
    let told = crate::notify::admins(
        ctx,
        watch.institution_id,
        NotificationKind::ScreeningHold,
        &format!(
            "Money from a sanctioned sender reached payment {}'s address",
            watch.transaction_id
        ),
        &format!(
            "Payment {} was credited already, and money arrived at its deposit address {} on {} \
             afterwards from a sender on a sanctions list: {}. It is credited to no one and \
             stays frozen in custody: a return of it is refused.",
            watch.transaction_id,
            watch.address,
            watch.network,
            reasons.join("; ")
        ),
    )
    .await;
    if let Err(err) = told {
        err.log_with("money after the credit from a listed sender");
    }
}
