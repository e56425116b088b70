//! The reference webhook receiver: what contract §1 and §6.5 ask of a partner's backend, as
//! code to copy.
//!
//! - `POST /webhooks`: the signature is checked over the raw body; the event is stored by id
//!   (unique) *before* the 2xx; a repeat is acknowledged and changes nothing.
//! - Processing happens afterwards, in the background, each event in one SQLite transaction with
//!   its "processed" mark: a `payment.paid` fulfils the order found by `external_reference` only
//!   when `amount.gross` ≥ the order's amount in the order's currency; otherwise (unknown order,
//!   underpaid, another currency) the case goes to review. An order is fulfilled at most once.
//! - Reconciliation walks `GET /v1/transactions?status=paid` over everything created since the
//!   last checkpoint (minus the time a payment may take to settle) and applies the same rule,
//!   so a webhook that never arrived is repaired.
//! - `POST /orders` and `GET /orders/{reference}` stand in for the shop's own checkout.

mod store;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::TryStreamExt;
use payrail::webhooks::{Event, EventKind, Webhooks, SIGNATURE_HEADER};
use payrail::{Client, Status, Transaction, TransactionQuery};
use rust_decimal::Decimal;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Notify;

pub use store::{Order, Outcome, Review, Store, StoreError};

/// A webhook body larger than this is refused before it is read (ours are a few KB).
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// The checkpoint reconciliation starts from.
const RECONCILED_UNTIL: &str = "reconciled_until";
/// When the receiver first ran: reconciliation never looks further back (the shop had no
/// orders here before).
const FIRST_STARTED: &str = "first_started";

/// The receiver: its store, its endpoint's secret(s), and an API client for reconciliation.
pub struct Receiver {
    store: Store,
    webhooks: Webhooks,
    client: Option<Client>,
    settle_window: Duration,
    wake: Notify,
}

/// What one reconciliation run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Paid transactions looked at.
    pub seen: usize,
    /// Orders fulfilled by this run (their webhook had not been processed).
    pub fulfilled: usize,
    /// Cases opened for review by this run.
    pub reviews: usize,
}

/// Why reconciliation failed (the checkpoint stays where it was).
#[derive(Debug)]
pub enum ReconcileError {
    /// No API credentials were configured.
    NoClient,
    /// The API call failed.
    Api(payrail::Error),
    /// The database failed.
    Store(StoreError),
}

impl std::fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReconcileError::NoClient => f.write_str("no API credentials to reconcile with"),
            ReconcileError::Api(err) => write!(f, "reading transactions: {err}"),
            ReconcileError::Store(err) => write!(f, "database: {err}"),
        }
    }
}

impl std::error::Error for ReconcileError {}

impl Receiver {
    /// A receiver over `store` for deliveries signed with `webhooks`' secret(s); `client` reads
    /// transactions for reconciliation; `settle_window` is how long a payment may take from
    /// creation to `paid` (reconciliation looks that far back before its checkpoint).
    pub fn new(
        store: Store,
        webhooks: Webhooks,
        client: Option<Client>,
        settle_window: Duration,
    ) -> Result<Arc<Receiver>, StoreError> {
        // A new receiver reconciles from the moment it first started: older payments were
        // some earlier system's business.
        let now = store::now();
        store.set_checkpoint(FIRST_STARTED, now, true)?;
        store.set_checkpoint(RECONCILED_UNTIL, now, true)?;
        Ok(Arc::new(Receiver {
            store,
            webhooks,
            client,
            settle_window,
            wake: Notify::new(),
        }))
    }

    /// The store, to add orders and read outcomes.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The HTTP routes.
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new()
            .route("/webhooks", post(receive))
            .route("/orders", post(add_order))
            .route("/orders/{reference}", get(order))
            .route("/reviews", get(reviews))
            .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
            .with_state(self.clone())
    }

    /// Serves on `listener` and processes events as they arrive; reconciles every
    /// `reconcile_every` when a client is configured. Runs until the task is dropped.
    pub async fn run(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
        reconcile_every: Option<Duration>,
    ) -> std::io::Result<()> {
        let processor = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(err) = processor.process_pending() {
                    eprintln!("processing events: {err}");
                }
                // Woken by each new event; a timer as well, for events left by a failure.
                let _ =
                    tokio::time::timeout(Duration::from_secs(5), processor.wake.notified()).await;
            }
        });
        if let (Some(every), Some(_)) = (reconcile_every, &self.client) {
            let reconciler = self.clone();
            tokio::spawn(async move {
                let mut ticks = tokio::time::interval(every);
                loop {
                    ticks.tick().await;
                    match reconciler.reconcile().await {
                        Ok(done) if done.fulfilled + done.reviews > 0 => eprintln!(
                            "reconciled {} paid transactions: {} fulfilled, {} for review",
                            done.seen, done.fulfilled, done.reviews
                        ),
                        Ok(_) => {}
                        Err(err) => eprintln!("reconciliation failed: {err}"),
                    }
                }
            });
        }
        axum::serve(listener, self.router()).await
    }

    /// Processes every stored event not processed yet, oldest first; answers how many.
    pub fn process_pending(&self) -> Result<usize, StoreError> {
        let mut done = 0;
        loop {
            let batch = self.store.unprocessed(100)?;
            if batch.is_empty() {
                return Ok(done);
            }
            for (id, body) in batch {
                self.store.process_event(&id, |tx| {
                    // Stored events were verified and parsed on receipt.
                    if let Ok(event) = Event::parse(&body) {
                        apply(tx, &event, "webhook")?;
                    }
                    Ok(())
                })?;
                done += 1;
            }
        }
    }

    /// One reconciliation run: every paid transaction created since the checkpoint minus the
    /// settle window (never before the receiver first ran), through the same rule as
    /// `payment.paid`. The checkpoint moves to the
    /// run's start only when the whole walk succeeded.
    pub async fn reconcile(&self) -> Result<Reconciled, ReconcileError> {
        let client = self.client.as_ref().ok_or(ReconcileError::NoClient)?;
        let started = store::now();
        let checkpoint = |name| {
            self.store
                .checkpoint(name)
                .map_err(ReconcileError::Store)
                .map(|value| value.unwrap_or(started))
        };
        let since = checkpoint(RECONCILED_UNTIL)?
            .saturating_sub(self.settle_window.as_secs() as i64)
            .max(checkpoint(FIRST_STARTED)?);
        let query = TransactionQuery::new()
            .status(Status::Paid)
            .created_after(since)
            .limit(100);
        let mut paid = client.transactions(query);
        let mut report = Reconciled::default();
        while let Some(transaction) = paid.try_next().await.map_err(ReconcileError::Api)? {
            report.seen += 1;
            let outcome = self
                .store
                .atomically(|tx| settle_paid(tx, &transaction, "reconcile"))
                .map_err(ReconcileError::Store)?;
            match outcome {
                Outcome::Fulfilled => report.fulfilled += 1,
                Outcome::Review(_) => report.reviews += 1,
                Outcome::AlreadyFulfilled => {}
            }
        }
        self.store
            .set_checkpoint(RECONCILED_UNTIL, started, false)
            .map_err(ReconcileError::Store)?;
        Ok(report)
    }
}

/// What an event does to the shop.
fn apply(tx: &rusqlite::Transaction<'_>, event: &Event, source: &str) -> Result<(), StoreError> {
    match &event.kind {
        EventKind::PaymentPaid(transaction) => settle_paid(tx, transaction, source).map(drop),
        EventKind::PaymentRefunded(transaction) => {
            let Some(reference) = transaction.external_reference.as_deref() else {
                return Ok(());
            };
            // Money went back after the goods went out: a person decides what happens next.
            if store::find_order(tx, reference)?.is_some_and(|o| o.state == "fulfilled") {
                store::review(
                    tx,
                    transaction.id,
                    Some(reference),
                    "refunded_after_fulfilment",
                    &format!(
                        "status {} after the order was fulfilled",
                        transaction.status
                    ),
                    source,
                )?;
            }
            Ok(())
        }
        // Funds held but not yet settled, test events, and types this receiver does not know:
        // stored, nothing to do.
        _ => Ok(()),
    }
}

/// The rule of contract §1 for a paid transaction: find the order by `external_reference`,
/// fulfil only when `amount.gross` ≥ the order's amount in the order's currency; otherwise,
/// review. Never on the event type alone, and never twice.
fn settle_paid(
    tx: &rusqlite::Transaction<'_>,
    transaction: &Transaction,
    source: &str,
) -> Result<Outcome, StoreError> {
    let id = transaction.id;
    let Some(reference) = transaction.external_reference.as_deref() else {
        return store::review(
            tx,
            id,
            None,
            "no_reference",
            "the transaction names no order",
            source,
        );
    };
    let Some(order) = store::find_order(tx, reference)? else {
        return store::review(
            tx,
            id,
            Some(reference),
            "unknown_order",
            &format!("no order {reference:?}"),
            source,
        );
    };
    if transaction.currency.as_deref() != Some(order.currency.as_str()) {
        return store::review(
            tx,
            id,
            Some(reference),
            "currency_mismatch",
            &format!(
                "paid in {:?}, the order is in {}",
                transaction.currency, order.currency
            ),
            source,
        );
    }
    let gross = transaction.amount.gross.unwrap_or(Decimal::ZERO);
    if gross < order.amount {
        return store::review(
            tx,
            id,
            Some(reference),
            "underpaid",
            &format!("gross {gross} is less than the order's {}", order.amount),
            source,
        );
    }
    store::fulfil(tx, &order, id, gross, source)
}

fn error(status: StatusCode, code: &str, description: impl Into<String>) -> Response {
    (
        status,
        Json(json!({ "error": code, "error_description": description.into() })),
    )
        .into_response()
}

async fn receive(
    State(receiver): State<Arc<Receiver>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(signature) = headers.get(SIGNATURE_HEADER).and_then(|v| v.to_str().ok()) else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_signature",
            "no Payrail-Signature header",
        );
    };
    let event = match receiver.webhooks.verify(signature, &body) {
        Ok(event) => event,
        Err(err) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_signature",
                err.to_string(),
            )
        }
    };
    // Stored before the 2xx: once acknowledged, the event cannot be lost here.
    match receiver
        .store
        .insert_event(&event.id, event.type_name(), &body)
    {
        Ok(_) => {
            receiver.wake.notify_one();
            StatusCode::NO_CONTENT.into_response()
        }
        // Not acknowledged, so Payrail delivers it again.
        Err(_) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "storage_failed",
            "try again",
        ),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewOrder {
    reference: String,
    amount: Decimal,
    currency: String,
}

async fn add_order(State(receiver): State<Arc<Receiver>>, body: Bytes) -> Response {
    let order: NewOrder = match serde_json::from_slice(&body) {
        Ok(order) => order,
        Err(err) => return error(StatusCode::BAD_REQUEST, "invalid_request", err.to_string()),
    };
    if order.reference.is_empty() || order.reference.len() > 200 || order.amount <= Decimal::ZERO {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "reference must be 1 to 200 characters and amount positive",
        );
    }
    match receiver
        .store
        .add_order(&order.reference, order.amount, &order.currency)
    {
        Ok(()) => (
            StatusCode::CREATED,
            Json(json!({ "reference": order.reference })),
        )
            .into_response(),
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            error(
                StatusCode::CONFLICT,
                "conflict",
                "an order with this reference exists",
            )
        }
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "database failure",
        ),
    }
}

async fn order(State(receiver): State<Arc<Receiver>>, Path(reference): Path<String>) -> Response {
    match receiver.store.order(&reference) {
        Ok(Some(order)) => Json(order).into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, "not_found", "no such order"),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "database failure",
        ),
    }
}

async fn reviews(State(receiver): State<Arc<Receiver>>) -> Response {
    match receiver.store.reviews() {
        Ok(reviews) => Json(reviews).into_response(),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "database failure",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paid(id: i64, reference: Option<&str>, gross: &str, currency: &str) -> Transaction {
        serde_json::from_value(json!({
            "object": "transaction", "id": id, "merchant_id": 1, "status": "paid",
            "raw_status": "paid", "amount_status": "EXACT", "asset": "USDC",
            "currency": currency,
            "amount": {"gross": gross, "net": null, "expected": gross, "psp_fee": null,
                       "gas_fee": null, "bridge_fee": null},
            "networks": {"payment": null, "settlement": null},
            "tx_hashes": {"source": null, "bridge": null, "settlement": null},
            "customer_email": null, "external_reference": reference,
            "created_at": "2026-11-22T00:00:00Z", "paid_at": null
        }))
        .unwrap()
    }

    fn store() -> Store {
        let store = Store::open(std::path::Path::new(":memory:")).unwrap();
        store.add_order("A", Decimal::new(4000, 2), "EUR").unwrap();
        store
    }

    fn rule(store: &Store, t: &Transaction) -> Outcome {
        store
            .atomically(|tx| settle_paid(tx, t, "webhook"))
            .unwrap()
    }

    #[test]
    fn gross_covering_the_order_fulfils_once() {
        let store = store();
        assert_eq!(
            rule(&store, &paid(1, Some("A"), "40.00", "EUR")),
            Outcome::Fulfilled
        );
        assert_eq!(
            rule(&store, &paid(1, Some("A"), "40.00", "EUR")),
            Outcome::AlreadyFulfilled
        );
        // Even a second, different payment for the same order fulfils nothing more.
        assert_eq!(
            rule(&store, &paid(2, Some("A"), "41.00", "EUR")),
            Outcome::AlreadyFulfilled
        );
        assert_eq!(store.fulfilment("A").unwrap(), Some((1, "webhook".into())));
        assert_eq!(store.order("A").unwrap().unwrap().state, "fulfilled");
    }

    #[test]
    fn anything_short_of_the_order_goes_to_review() {
        let store = store();
        for (t, reason) in [
            (paid(1, Some("A"), "39.99", "EUR"), "underpaid"),
            (paid(2, Some("A"), "40.00", "USD"), "currency_mismatch"),
            (paid(3, Some("B"), "40.00", "EUR"), "unknown_order"),
            (paid(4, None, "40.00", "EUR"), "no_reference"),
        ] {
            assert_eq!(rule(&store, &t), Outcome::Review(reason.into()));
            // The same case twice is one review.
            rule(&store, &t);
        }
        let reasons: Vec<String> = store
            .reviews()
            .unwrap()
            .into_iter()
            .map(|r| r.reason)
            .collect();
        assert_eq!(
            reasons,
            [
                "underpaid",
                "currency_mismatch",
                "unknown_order",
                "no_reference"
            ]
        );
        assert_eq!(store.fulfilment("A").unwrap(), None);
        assert_eq!(store.order("A").unwrap().unwrap().state, "review");
    }

    #[test]
    fn a_repeated_event_is_stored_once_and_counted() {
        let store = store();
        assert!(store.insert_event("evt_1", "payment.paid", b"{}").unwrap());
        assert!(!store.insert_event("evt_1", "payment.paid", b"{}").unwrap());
        assert_eq!(store.event_status("evt_1").unwrap(), Some((2, false)));
        assert_eq!(store.unprocessed(10).unwrap().len(), 1);
    }
}
