//! Applies lifecycle actions to stored payments: load, decide (shared-types), write atomically
//! with the event it causes (the outbox), then queue the event's deliveries.

use shared_types::checkout::currency_digits;
use shared_types::ids::Scoped;
use shared_types::lifecycle::{self, Action, Change, Payment, Refusal};
use shared_types::webhook::Event;
use shared_types::{ErrorCode, RawStatus, Transaction};

use crate::ctx::{timestamp, Ctx};
use crate::db::events::{Guard, OutboxEvent};
use crate::db::refunds;
use crate::db::transactions::{self, Stamps};
use crate::db::{self, Batch, MoneyStore};
use crate::error::{ApiError, OrInternal};
use crate::{chain, crypto, money, webhooks};

/// Most expired checkouts one cron run closes in D1 (the next run takes the rest).
pub const EXPIRE_PER_RUN: i64 = 200;

/// Applies `action` to transaction `id`, with its webhook event in the same write, then queues
/// the event's deliveries; the transaction as the API shows it afterwards. A transaction of
/// another institution than `institution_id` is not found, exactly like an unknown one. A
/// sandbox payment gets a simulated source hash; a payment made on chain is
/// never settled or refunded this way.
pub async fn act(
    ctx: &Ctx,
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<i64>,
    action: &Action,
) -> Result<Transaction, ApiError> {
    apply(
        ctx,
        Scoped::new(institution_id, id),
        action,
        OnChain::Nothing,
    )
    .await
}

/// [`act`] on a payment of an institution whose money lives in `store`: in its object, the
/// payment is read and changed there, with its event and its deliveries (to the endpoints the
/// directory has subscribed, `webhooks::publish_held`), in one transaction of the object.
/// Nothing on chain reaches an object yet, so this is the sandbox's and the hosted page's
/// controls alone.
pub async fn act_in(
    ctx: &Ctx,
    store: MoneyStore,
    payment: Scoped<i64>,
    action: &Action,
) -> Result<Transaction, ApiError> {
    match store {
        MoneyStore::D1 => act(ctx, payment, action).await,
        MoneyStore::Object => {
            let held = ctx.institution_object(payment.institution.0)?;
            apply_in(ctx, Some(&held), payment, action, OnChain::Nothing).await
        }
    }
}

use crate::db::parts::Part;

/// Credits a payment found on chain: `action` is a payment (on time or late, or held by its
/// screening) whose source is the transaction `source_hash`; `parts` is what it brought per
/// way to pay, the one it is recorded in first: each is stored and (unless held) credited to
/// its merchant in the books, in the same write, with its senders' screening (`screened`).
/// `late_rate`: when some of the first part came after the checkout's end, the rate it was
/// valued at and its source (shown on the payment).
pub async fn credit(
    ctx: &Ctx,
    held: Option<&db::Db>,
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<i64>,
    (action, screened): (&Action, &Screened),
    source_hash: &str,
    parts: &[Part<'_>],
    late_rate: Option<(rust_decimal::Decimal, &str)>,
) -> Result<(), ApiError> {
    let Some(first) = parts.first() else {
        return Err(ApiError::internal("credit a payment", "it has no part"));
    };
    let found = OnChain::Payment {
        hash: source_hash,
        asset: first.asset,
        network: first.network,
        parts,
        late_rate,
        screened,
    };
    apply_in(ctx, held, Scoped::new(institution_id, id), action, found)
        .await
        .map(drop)
}

/// What the screening of a payment's senders decided, stored with its credit or its hold: each
/// decision, and for a payment held ([`Action::PayHeld`]) its review.
#[derive(Default)]
pub struct Screened {
    /// The decisions, one per sender screened.
    pub decisions: Vec<db::screenings::NewScreening>,
    /// Why it is held and what is held at each address, when it is.
    pub review: Option<db::screenings::NewReview>,
}

pub use crate::db::screenings::Decision;

/// Decides the review of held payment `payment` (in D1, or in the object `held`): released, it
/// is credited in the books exactly as its credit would have been (`parts`: the money held at
/// each of its addresses, per way to pay) and `payment.succeeded` goes out; blocked, it fails
/// and its money stays in custody, owed to no one. One write, guarded on the review being
/// undecided and the payment unchanged: of two decisions at once, one is made (the other is a
/// 409).
pub async fn decide(
    ctx: &Ctx,
    held: Option<&db::Db>,
    payment: Scoped<i64>,
    decision: &Decision<'_>,
    parts: &[Part<'_>],
) -> Result<Transaction, ApiError> {
    let action = if decision.release {
        Action::Release
    } else {
        Action::Block
    };
    apply_in(
        ctx,
        held,
        payment,
        &action,
        OnChain::Review { decision, parts },
    )
    .await
}

/// Marks a payment settled by the confirmed transaction `settlement_hash` (an
/// [`Action::SettleOnChain`]), in D1 or in the object that holds it (`held`).
pub async fn settle(
    ctx: &Ctx,
    held: Option<&db::Db>,
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<i64>,
    action: &Action,
    (settlement_hash, bridge_hash): (&str, Option<&str>),
) -> Result<(), ApiError> {
    apply_in(
        ctx,
        held,
        Scoped::new(institution_id, id),
        action,
        OnChain::Settlement {
            hash: settlement_hash,
            bridge: bridge_hash,
        },
    )
    .await
    .map(drop)
}

/// Records a refund confirmed on chain (an [`Action::Refund`]), in D1 or in the object that
/// holds the payment (`held`): its `payment.refunded` event takes an id derived from the
/// refund's, so the refund can never be recorded twice (a second write fails whole on the
/// event's key).
pub async fn refund(
    ctx: &Ctx,
    held: Option<&db::Db>,
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<i64>,
    action: &Action,
    refund_id: &str,
) -> Result<(), ApiError> {
    let event_id = refund_event_id(refund_id);
    apply_in(
        ctx,
        held,
        Scoped::new(institution_id, id),
        action,
        OnChain::Refund {
            refund_id,
            event_id: &event_id,
        },
    )
    .await
    .map(drop)
}

/// The id of the `payment.refunded` event of a refund.
pub fn refund_event_id(refund_id: &str) -> String {
    format!("evt_{refund_id}")
}

/// What the chain says about a change, when it was read there (sandbox changes get simulated
/// hashes instead).
#[derive(Clone, Copy)]
enum OnChain<'a> {
    Nothing,
    /// The customer's payment: its transaction, the asset and network it is recorded in, what
    /// it brought per way to pay, and the rate its late money was valued at.
    Payment {
        hash: &'a str,
        asset: &'a str,
        network: &'a str,
        parts: &'a [Part<'a>],
        late_rate: Option<(rust_decimal::Decimal, &'a str)>,
        screened: &'a Screened,
    },
    /// The settlement's transaction, and the burn that carried it across networks.
    Settlement {
        /// The transaction that paid the merchant (a bridge's mint).
        hash: &'a str,
        /// The burn, when it crossed networks.
        bridge: Option<&'a str>,
    },
    /// A confirmed refund's: the refund, and the id its event must have.
    Refund {
        refund_id: &'a str,
        event_id: &'a str,
    },
    /// An admin's decision on a held payment, and (to release it) the money held per part.
    Review {
        decision: &'a Decision<'a>,
        parts: &'a [Part<'a>],
    },
}

async fn apply(
    ctx: &Ctx,
    payment: Scoped<i64>,
    action: &Action,
    on_chain: OnChain<'_>,
) -> Result<Transaction, ApiError> {
    apply_in(ctx, None, payment, action, on_chain).await
}

/// [`apply`] in D1, or in the institution's object (`held`).
async fn apply_in(
    ctx: &Ctx,
    held: Option<&db::Db>,
    Scoped {
        institution: institution_id,
        id,
    }: Scoped<i64>,
    action: &Action,
    on_chain: OnChain<'_>,
) -> Result<Transaction, ApiError> {
    let now = ctx.now();
    let source_hash = match on_chain {
        OnChain::Payment { hash, .. } => Some(hash),
        _ => None,
    };
    let database = held.unwrap_or(&ctx.db);
    let not_found = || ApiError::not_found("no such transaction");
    let row = transactions::payment(database, institution_id, id)
        .await
        .or_internal("read payment")?
        .ok_or_else(not_found)?;
    if matches!(on_chain, OnChain::Nothing)
        && matches!(action, Action::Settle { .. } | Action::Refund { .. })
        && row.paid_on_chain
    {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!(
                "this payment was made on chain: the treasury {} on chain",
                if matches!(action, Action::Settle { .. }) {
                    "settles it by itself"
                } else {
                    "refunds it (portal: the payment's refund form)"
                }
            ),
        ));
    }
    let before = &row.transaction;
    let raw_status = before.raw_status;
    // An ended checkout is closed even before the cron marks it: nothing but the expiry itself
    // may change a pending payment past its end, except money the chain shows arrived in time.
    if raw_status == RawStatus::Pending
        && !matches!(action, Action::Expire)
        && source_hash.is_none()
    {
        if let Some(end) = row.expires_at.filter(|end| *end <= now) {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!(
                    "the checkout ended at {}; this payment can no longer be made",
                    timestamp(end)?
                ),
            ));
        }
    }
    let payment = Payment {
        raw_status,
        expected: before.amount.expected.unwrap_or_default(),
        gross: before.amount.gross,
        refunded: row.refunded.unwrap_or_default(),
        currency_digits: before
            .currency
            .as_deref()
            .and_then(currency_digits)
            .unwrap_or(2),
        payment_network: before.networks.payment.clone(),
    };
    let change = lifecycle::apply(&payment, action).map_err(|refusal| match refusal {
        Refusal::IllegalTransition { .. } => {
            ApiError::new(ErrorCode::Conflict, refusal.to_string())
        }
        Refusal::ExceedsRefundable(_) => ApiError::new(ErrorCode::Conflict, refusal.to_string()),
        Refusal::BadAmount(text) => ApiError::invalid_request(text),
    })?;

    let network = before.networks.payment.as_deref().unwrap_or("ethereum");
    let hash = |network: &str| chain::tx_hash(network).or_internal("generate hash");
    let source_hash = match (action, source_hash) {
        (Action::Pay { .. } | Action::PayLate { .. } | Action::PayHeld { .. }, Some(known)) => {
            Some(known.to_owned())
        }
        (Action::Pay { .. }, None) => Some(hash(network)?),
        _ => None,
    };
    let settlement_hash = match on_chain {
        OnChain::Settlement { hash: known, .. } => Some(known.to_owned()),
        _ => change.settlement_network.as_deref().map(hash).transpose()?,
    };
    let bridge_hash = match on_chain {
        OnChain::Settlement { bridge, .. } => bridge.map(str::to_owned),
        _ => change.bridged.then(|| hash(network)).transpose()?,
    };
    let now_text = timestamp(now)?;
    let stamps = Stamps {
        now_text: &now_text,
        source_hash: source_hash.as_deref(),
        settlement_hash: settlement_hash.as_deref(),
        bridge_hash: bridge_hash.as_deref(),
        paid_with: match on_chain {
            OnChain::Payment { asset, network, .. } => Some((asset, network)),
            _ => None,
        }
        .filter(|(asset, network)| {
            before.asset.as_deref() != Some(*asset)
                || before.networks.payment.as_deref() != Some(*network)
        }),
        late_rate: match on_chain {
            OnChain::Payment {
                late_rate: Some((rate, source)),
                ..
            } => Some((rate.to_string(), source)),
            _ => None,
        },
        screening: match action {
            Action::PayHeld { .. } => Some("held"),
            Action::Release => Some("released"),
            Action::Block => Some("blocked"),
            _ => None,
        },
    };
    let after = updated(row.transaction.clone(), &change, &stamps);
    let event = match change.event {
        None => None,
        Some(kind) => {
            let id = match on_chain {
                OnChain::Refund { event_id, .. } => event_id.to_owned(),
                _ => crypto::random_token(shared_types::ids::EventId::PREFIX)
                    .or_internal("generate event id")?,
            };
            let envelope = Event {
                id,
                kind: kind.as_str().to_owned(),
                created: now,
                data: after.clone(),
            };
            let payload = serde_json::to_string(&envelope).or_internal("encode event")?;
            Some((envelope.id, kind, payload))
        }
    };
    let outbox = event.as_ref().map(|(event_id, kind, payload)| OutboxEvent {
        id: event_id,
        institution_id: row.institution_id,
        kind: kind.as_str(),
        transaction_id: id,
        payload,
        created: now,
        transaction_version: Some(row.version + 1),
    });
    // The guarded UPDATE, then (only if it wrote) the event and one delivery per subscribed
    // endpoint: all or nothing. A refund's change is also guarded on the refund not being
    // recorded yet, and marks it recorded right after.
    let unrecorded = match on_chain {
        OnChain::Refund { refund_id, .. } => Some(refunds::Unrecorded {
            institution_id,
            id: refund_id,
        }),
        _ => None,
    };
    // A decision is made on an undecided review only.
    let undecided = db::screenings::Undecided(Scoped::new(institution_id, id));
    let also: Option<&dyn db::Condition> = match on_chain {
        OnChain::Refund { .. } => unrecorded.as_ref().map(|u| u as &dyn db::Condition),
        OnChain::Review { .. } => Some(&undecided),
        _ => None,
    };
    let mut batch = Batch::new();
    let update = batch.push(
        transactions::apply_change(
            Scoped::new(institution_id, id),
            row.version,
            &change,
            &stamps,
            also,
        )
        .or_internal("write payment change")?,
    );
    let version = row.version + 1;
    match on_chain {
        // The screening's decisions, and a held payment's review, written only with the change.
        OnChain::Payment { screened, .. } => {
            for decision in &screened.decisions {
                batch.push(
                    db::screenings::insert_with_payment(decision, version)
                        .or_internal("record a screening")?,
                );
            }
            if let Some(review) = &screened.review {
                batch.push(
                    db::screenings::open_review(review, version)
                        .or_internal("open a screening review")?,
                );
            }
        }
        OnChain::Review { decision, .. } => {
            batch.push(
                db::screenings::decide_review(
                    Scoped::new(institution_id, id),
                    (decision, now),
                    version,
                )
                .or_internal("record the decision")?,
            );
        }
        _ => {}
    }
    if let OnChain::Refund { refund_id, .. } = on_chain {
        batch.push(
            refunds::recorded(Scoped::new(institution_id, refund_id), now)
                .or_internal("record refund")?,
        );
    }
    let fan_out = match (&outbox, held) {
        (None, _) => None,
        (Some(e), None) => Some(webhooks::publish(&mut batch, e, Guard::AfterChange)?),
        (Some(e), Some(_)) => {
            Some(webhooks::publish_held(ctx, &mut batch, e, Guard::AfterChange).await?)
        }
    };
    // The parts a payment found on chain brought are stored with its credit or its hold; the
    // books credit them to the merchant on its credit or its release (a hold books nothing:
    // its money stays at its addresses, owed to no one).
    let (parts, store_parts, book) = match on_chain {
        OnChain::Payment { parts, .. } => (
            parts,
            true,
            matches!(action, Action::Pay { .. } | Action::PayLate { .. }),
        ),
        OnChain::Review { parts, .. } => (parts, false, matches!(action, Action::Release)),
        _ => (&[][..], false, false),
    };
    if store_parts || book {
        let when = db::transactions::at_version(Scoped::new(institution_id, id), version);
        for (index, part) in parts.iter().enumerate() {
            if store_parts {
                batch.push(
                    db::parts::insert((Scoped::new(row.institution_id, id), version), index, part)
                        .or_internal("record a payment's part")?,
                );
            }
            if !book {
                continue;
            }
            batch.extend(
                money::ledger::credit(
                    ctx,
                    database,
                    (index, part),
                    (
                        Scoped::new(row.institution_id, id),
                        row.transaction.merchant_id,
                    ),
                    &when,
                )
                .await?,
            );
        }
    }
    let results = match batch.run(database).await {
        Ok(results) => results,
        Err(e) if db::ledger::raced(&e) => {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                "the books changed while this payment was credited; it is credited again at \
                 the next check",
            ))
        }
        Err(e) => return Err(e).or_internal("write payment change"),
    };
    if !results.changed(update) {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "the payment changed while this request ran; read it again and retry",
        ));
    }
    if let (Some((event_id, _, _)), Some(fan_out)) = (&event, fan_out) {
        let held_by = held.map(|_| institution_id.0);
        webhooks::dispatch(ctx, &results, fan_out, event_id, held_by).await;
    }
    Ok(after)
}

/// Closes pending payments whose checkout has ended, through the lifecycle like any other
/// change (one guarded write each: a payment that arrived meanwhile is left alone): D1's, or
/// those of an institution held in its object (`held`); at most `limit`. Answers how many it
/// found.
pub async fn expire_ended(ctx: &Ctx, held: Option<&db::Db>, limit: i64) -> Result<usize, ApiError> {
    let ended = transactions::pending_past_end(held.unwrap_or(&ctx.db), ctx.now(), limit)
        .await
        .or_internal("find ended checkouts")?;
    let found = ended.len();
    for owner in ended {
        let changed = match held {
            None => act(ctx, owner, &Action::Expire).await,
            Some(object) => {
                apply_in(ctx, Some(object), owner, &Action::Expire, OnChain::Nothing).await
            }
        };
        match changed {
            Ok(_) => {}
            Err(err) if err.code == ErrorCode::Conflict => {} // paid or changed meanwhile
            Err(err) => return Err(err),
        }
    }
    Ok(found)
}

/// The transaction after `change`: the same fields `apply_change` writes, so the event carries
/// exactly what the REST API shows once the change is committed.
fn updated(mut t: Transaction, change: &Change, stamps: &Stamps<'_>) -> Transaction {
    if let Some(raw) = change.raw_status {
        t.raw_status = raw;
        t.status = raw.normalized();
    }
    if change.amount_status.is_some() {
        t.amount_status = change.amount_status;
    }
    if change.gross.is_some() {
        t.amount.gross = change.gross;
        t.paid_at = Some(stamps.now_text.to_owned());
    }
    for (field, value) in [
        (&mut t.amount.psp_fee, change.psp_fee),
        (&mut t.amount.gas_fee, change.gas_fee),
        (&mut t.amount.bridge_fee, change.bridge_fee),
        (&mut t.amount.net, change.net),
    ] {
        if value.is_some() {
            *field = value;
        }
    }
    if change.settlement_network.is_some() {
        t.networks.settlement = change.settlement_network.clone();
    }
    if let Some((asset, network)) = stamps.paid_with {
        t.asset = Some(asset.to_owned());
        t.networks.payment = Some(network.to_owned());
    }
    for (field, value) in [
        (&mut t.tx_hashes.source, stamps.source_hash),
        (&mut t.tx_hashes.settlement, stamps.settlement_hash),
        (&mut t.tx_hashes.bridge, stamps.bridge_hash),
    ] {
        if let Some(value) = value {
            *field = Some(value.to_owned());
        }
    }
    t
}
