//! The reference webhook receiver: what contract §1 and §6.5 ask of a partner's backend, as
//! code to copy.
//!
//! - `POST /webhooks`: the signature is checked over the raw body; the event is stored by id
//!   (unique) *before* the 2xx; a repeat is acknowledged and changes nothing.
//! - Processing happens afterwards, in the background, each event in one SQLite transaction with
//!   its "processed" mark: a `payment.paid` fulfils the order found by the transaction's
//!   `merchant_id` and `external_reference` together only when `amount.gross` ≥ the order's
//!   amount in the order's currency; otherwise (no such order for that merchant, underpaid,
//!   another currency) the case goes to review. An order is fulfilled at most once.
//! - Orders are matched by merchant *and* reference because a Payrail institution receives the
//!   events of all its merchants, and an external reference is only unique within one
//!   merchant: by reference alone, merchant B's payment for its "ORD-1" would fulfil merchant
//!   A's "ORD-1".
//! - Reconciliation walks `GET /v1/transactions?status=paid` over everything created since the
//!   last checkpoint (minus the time a payment may take to settle) and applies the same rule,
//!   so a webhook that never arrived is repaired.
//! - `POST /orders` (`merchant_id`, `reference`, `amount`, `currency`) and
//!   `GET /orders/{merchant_id}/{reference}` stand in for the shop's own checkout.

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
            .route("/orders/{merchant_id}/{reference}", get(order))
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
            let merchant = transaction.merchant_id;
            let Some(order) = store::find_order(tx, merchant, reference)? else {
                return Ok(());
            };
            // Money went back after the goods went out: a person decides what happens next.
            // Before they went out, the order is held for a person too: events do not arrive
            // in the order they were made (a retried `payment.paid` can come after the
            // refund), and an order in review is never fulfilled by the rule.
            let (reason, when) = match order.state.as_str() {
                "fulfilled" => ("refunded_after_fulfilment", "after"),
                "open" => ("refunded_before_fulfilment", "before"),
                _ => return Ok(()),
            };
            store::review(
                tx,
                transaction.id,
                merchant,
                Some(reference),
                reason,
                &format!(
                    "status {} {when} the order was fulfilled",
                    transaction.status
                ),
                source,
            )
            .map(drop)
        }
        // Funds held but not yet settled, test events, and types this receiver does not know:
        // stored, nothing to do.
        _ => Ok(()),
    }
}

/// The rule of contract §1 for a paid transaction: find the order by the transaction's
/// `merchant_id` and `external_reference` (a reference is unique only within its merchant),
/// fulfil only when `amount.gross` ≥ the order's amount in the order's currency; otherwise,
/// review. Never on the event type alone, and never twice.
fn settle_paid(
    tx: &rusqlite::Transaction<'_>,
    transaction: &Transaction,
    source: &str,
) -> Result<Outcome, StoreError> {
    let id = transaction.id;
    let merchant = transaction.merchant_id;
    let Some(reference) = transaction.external_reference.as_deref() else {
        return store::review(
            tx,
            id,
            merchant,
            None,
            "no_reference",
            "the transaction names no order",
            source,
        );
    };
    let Some(order) = store::find_order(tx, merchant, reference)? else {
        return store::review(
            tx,
            id,
            merchant,
            Some(reference),
            "unknown_order",
            &format!("merchant {merchant} has no order {reference:?}"),
            source,
        );
    };
    if transaction.currency.as_deref() != Some(order.currency.as_str()) {
        return store::review(
            tx,
            id,
            merchant,
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
            merchant,
            Some(reference),
            "underpaid",
            &format!("gross {gross} is less than the order's {}", order.amount),
            source,
        );
    }
    if order.state == "review" {
        // Held for a person (a refund, an earlier payment short of it): the rule does not
        // decide over them.
        return store::review(
            tx,
            id,
            merchant,
            Some(reference),
            "order_in_review",
            &format!("paid {gross} while the order is in review"),
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
    /// The Payrail merchant id. Any JSON is taken here and checked by [`positive_id`], so
    /// every wrong value (a string, a fraction, zero) gets the same answer.
    merchant_id: serde_json::Value,
    reference: String,
    amount: Decimal,
    currency: String,
}

/// The answer to a merchant id that is not one.
const BAD_MERCHANT: &str = "merchant_id must be a positive integer (the Payrail merchant id)";

/// A merchant id: a positive integer.
fn positive_id(id: Option<i64>) -> Option<i64> {
    id.filter(|id| *id > 0)
}

async fn add_order(State(receiver): State<Arc<Receiver>>, body: Bytes) -> Response {
    let order: NewOrder = match serde_json::from_slice(&body) {
        Ok(order) => order,
        Err(err) => return error(StatusCode::BAD_REQUEST, "invalid_request", err.to_string()),
    };
    let Some(merchant) = positive_id(order.merchant_id.as_i64()) else {
        return error(StatusCode::BAD_REQUEST, "invalid_request", BAD_MERCHANT);
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
        .add_order(merchant, &order.reference, order.amount, &order.currency)
    {
        Ok(()) => (
            StatusCode::CREATED,
            Json(json!({ "merchant_id": merchant, "reference": order.reference })),
        )
            .into_response(),
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            error(
                StatusCode::CONFLICT,
                "conflict",
                "this merchant has an order with this reference",
            )
        }
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "database failure",
        ),
    }
}

async fn order(
    State(receiver): State<Arc<Receiver>>,
    Path((merchant, reference)): Path<(String, String)>,
) -> Response {
    // Parsed here rather than by the extractor, so a bad id gets the same JSON error as
    // `POST /orders`.
    let Some(merchant) = positive_id(merchant.parse().ok()) else {
        return error(StatusCode::BAD_REQUEST, "invalid_request", BAD_MERCHANT);
    };
    match receiver.store.order(merchant, &reference) {
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

    /// Merchants A and B of one institution: the receiver gets both their events.
    const A: i64 = 1;
    const B: i64 = 2;

    fn transaction(
        id: i64,
        merchant: i64,
        status: &str,
        reference: Option<&str>,
        gross: &str,
        currency: &str,
    ) -> serde_json::Value {
        json!({
            "object": "transaction", "id": id, "merchant_id": merchant, "status": status,
            "raw_status": status, "amount_status": "EXACT", "asset": "USDC",
            "currency": currency,
            "amount": {"gross": gross, "net": null, "expected": gross, "psp_fee": null,
                       "gas_fee": null, "bridge_fee": null},
            "networks": {"payment": null, "settlement": null},
            "tx_hashes": {"source": null, "bridge": null, "settlement": null},
            "customer_email": null, "external_reference": reference,
            "created_at": "2026-11-22T00:00:00Z", "paid_at": null
        })
    }

    /// A paid transaction of merchant A.
    fn paid(id: i64, reference: Option<&str>, gross: &str, currency: &str) -> Transaction {
        paid_to(A, id, reference, gross, currency)
    }

    fn paid_to(
        merchant: i64,
        id: i64,
        reference: Option<&str>,
        gross: &str,
        currency: &str,
    ) -> Transaction {
        serde_json::from_value(transaction(
            id, merchant, "paid", reference, gross, currency,
        ))
        .unwrap()
    }

    /// Merchant A's order "A" of 40.00 EUR.
    fn store() -> Store {
        let store = Store::open(std::path::Path::new(":memory:")).unwrap();
        store
            .add_order(A, "A", Decimal::new(4000, 2), "EUR")
            .unwrap();
        store
    }

    fn rule(store: &Store, t: &Transaction) -> Outcome {
        store
            .atomically(|tx| settle_paid(tx, t, "webhook"))
            .unwrap()
    }

    fn receiver(store: Store) -> Arc<Receiver> {
        Receiver::new(store, Webhooks::new("whsec_test"), None, Duration::ZERO).unwrap()
    }

    /// Stores an event as `POST /webhooks` does after verifying it, and processes it.
    fn deliver(receiver: &Receiver, id: &str, kind: &str, transaction: serde_json::Value) {
        let body = json!({"id": id, "type": kind, "created": 1_795_000_000, "data": transaction});
        let body = serde_json::to_vec(&body).unwrap();
        assert!(receiver.store().insert_event(id, kind, &body).unwrap());
        assert_eq!(receiver.process_pending().unwrap(), 1);
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
        assert_eq!(
            store.fulfilment(A, "A").unwrap(),
            Some((1, "webhook".into()))
        );
        assert_eq!(store.order(A, "A").unwrap().unwrap().state, "fulfilled");
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
        let reviews = store.reviews().unwrap();
        let reasons: Vec<&str> = reviews.iter().map(|r| r.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "underpaid",
                "currency_mismatch",
                "unknown_order",
                "no_reference"
            ]
        );
        assert!(reviews.iter().all(|r| r.merchant_id == A));
        assert_eq!(reviews[2].detail, "merchant 1 has no order \"B\"");
        assert_eq!(store.fulfilment(A, "A").unwrap(), None);
        assert_eq!(store.order(A, "A").unwrap().unwrap().state, "review");
    }

    /// The defect this guards against: orders matched by `external_reference` alone let
    /// merchant B's payment for its "ORD-1" fulfil merchant A's "ORD-1".
    #[test]
    fn another_merchants_payment_with_the_same_reference_fulfils_nothing() {
        let store = Store::open(std::path::Path::new(":memory:")).unwrap();
        store
            .add_order(A, "ORD-1", Decimal::new(4000, 2), "EUR")
            .unwrap();
        let receiver = receiver(store);
        let store = receiver.store();

        // B has no order "ORD-1": its payment is a case for review, and A's order stays open.
        let b_paid = transaction(10, B, "paid", Some("ORD-1"), "40.00", "EUR");
        deliver(&receiver, "evt_b_paid", "payment.paid", b_paid);
        assert_eq!(store.fulfilment(A, "ORD-1").unwrap(), None);
        assert_eq!(store.order(A, "ORD-1").unwrap().unwrap().state, "open");
        let reviews = store.reviews().unwrap();
        assert_eq!(reviews.len(), 1, "{reviews:?}");
        assert_eq!(
            (
                reviews[0].transaction_id,
                reviews[0].merchant_id,
                reviews[0].reference.as_deref(),
                reviews[0].reason.as_str(),
                reviews[0].detail.as_str()
            ),
            (
                10,
                B,
                Some("ORD-1"),
                "unknown_order",
                "merchant 2 has no order \"ORD-1\""
            )
        );

        // Once B has its own "ORD-1", B's payment fulfils that one, and only that one.
        store
            .add_order(B, "ORD-1", Decimal::new(2500, 2), "EUR")
            .unwrap();
        let b_paid_again = transaction(11, B, "paid", Some("ORD-1"), "25.00", "EUR");
        deliver(&receiver, "evt_b_paid_again", "payment.paid", b_paid_again);
        assert_eq!(
            store.fulfilment(B, "ORD-1").unwrap(),
            Some((11, "webhook".into()))
        );
        assert_eq!(store.fulfilment(A, "ORD-1").unwrap(), None);
        assert_eq!(store.order(A, "ORD-1").unwrap().unwrap().state, "open");

        // A's own payment fulfils A's order.
        let a_paid = transaction(12, A, "paid", Some("ORD-1"), "40.00", "EUR");
        deliver(&receiver, "evt_a_paid", "payment.paid", a_paid);
        assert_eq!(
            store.fulfilment(A, "ORD-1").unwrap(),
            Some((12, "webhook".into()))
        );
        assert_eq!(store.order(A, "ORD-1").unwrap().unwrap().state, "fulfilled");
        assert_eq!(store.reviews().unwrap().len(), 1);
    }

    #[test]
    fn a_refund_concerns_its_own_merchants_order() {
        let receiver = receiver(store());
        let store = receiver.store();
        rule(store, &paid(1, Some("A"), "40.00", "EUR"));
        // B refunding a payment that names "A" says nothing about A's fulfilled order.
        let b_refund = transaction(2, B, "refunded", Some("A"), "40.00", "EUR");
        deliver(&receiver, "evt_b_refund", "payment.refunded", b_refund);
        assert_eq!(store.reviews().unwrap(), []);
        let a_refund = transaction(1, A, "refunded", Some("A"), "40.00", "EUR");
        deliver(&receiver, "evt_a_refund", "payment.refunded", a_refund);
        let reviews = store.reviews().unwrap();
        assert_eq!(reviews.len(), 1, "{reviews:?}");
        assert_eq!(
            (reviews[0].merchant_id, reviews[0].reason.as_str()),
            (A, "refunded_after_fulfilment")
        );
    }

    /// Events arrive in any order: a refund delivered before the retried `payment.paid` of
    /// the same payment holds the order, and the late `paid` fulfils nothing.
    #[test]
    fn a_refund_that_arrives_before_the_payment_holds_the_order() {
        let receiver = receiver(store());
        let store = receiver.store();
        let refunded = transaction(1, A, "refunded", Some("A"), "40.00", "EUR");
        deliver(&receiver, "evt_refund", "payment.refunded", refunded);
        assert_eq!(store.order(A, "A").unwrap().unwrap().state, "review");
        let paid = transaction(1, A, "paid", Some("A"), "40.00", "EUR");
        deliver(&receiver, "evt_paid", "payment.paid", paid);
        assert_eq!(store.fulfilment(A, "A").unwrap(), None);
        assert_eq!(store.order(A, "A").unwrap().unwrap().state, "review");
        let reasons: Vec<String> = store
            .reviews()
            .unwrap()
            .into_iter()
            .map(|r| r.reason)
            .collect();
        assert_eq!(reasons, ["refunded_before_fulfilment", "order_in_review"]);
    }

    #[test]
    fn a_repeated_event_is_stored_once_and_counted() {
        let store = store();
        assert!(store.insert_event("evt_1", "payment.paid", b"{}").unwrap());
        assert!(!store.insert_event("evt_1", "payment.paid", b"{}").unwrap());
        assert_eq!(store.event_status("evt_1").unwrap(), Some((2, false)));
        assert_eq!(store.unprocessed(10).unwrap().len(), 1);
    }

    /// One request through the routes: (status, JSON body).
    async fn call(
        router: &Router,
        method: &str,
        uri: &str,
        body: Option<serde_json::Value>,
    ) -> (StatusCode, serde_json::Value) {
        use tower::ServiceExt;
        let request = axum::http::Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(
                body.map(|b| b.to_string()).unwrap_or_default(),
            ))
            .unwrap();
        let reply = router.clone().oneshot(request).await.unwrap();
        let status = reply.status();
        let bytes = axum::body::to_bytes(reply.into_body(), MAX_BODY_BYTES)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap_or_default())
    }

    #[tokio::test]
    async fn orders_are_added_and_read_per_merchant() {
        let receiver = receiver(Store::open(std::path::Path::new(":memory:")).unwrap());
        let router = receiver.router();
        let order = |merchant: serde_json::Value| {
            json!({"merchant_id": merchant, "reference": "ORD-1", "amount": "40.00",
                   "currency": "EUR"})
        };

        for bad in [json!(0), json!(-3), json!("1"), json!(1.5), json!(null)] {
            let (status, answer) = call(&router, "POST", "/orders", Some(order(bad))).await;
            assert_eq!(status, StatusCode::BAD_REQUEST);
            assert_eq!(answer["error"], "invalid_request");
            assert_eq!(answer["error_description"], BAD_MERCHANT);
        }
        let missing = json!({"reference": "ORD-1", "amount": "40.00", "currency": "EUR"});
        let (status, answer) = call(&router, "POST", "/orders", Some(missing)).await;
        assert_eq!(
            (status, &answer["error"]),
            (StatusCode::BAD_REQUEST, &json!("invalid_request"))
        );
        assert!(
            answer["error_description"]
                .as_str()
                .unwrap()
                .contains("merchant_id"),
            "{answer}"
        );

        let (status, answer) = call(&router, "POST", "/orders", Some(order(json!(A)))).await;
        assert_eq!(status, StatusCode::CREATED);
        assert_eq!(answer, json!({"merchant_id": A, "reference": "ORD-1"}));
        let (status, answer) = call(&router, "POST", "/orders", Some(order(json!(A)))).await;
        assert_eq!(
            (status, &answer["error"]),
            (StatusCode::CONFLICT, &json!("conflict"))
        );
        // The same reference at another merchant is another order.
        let (status, _) = call(&router, "POST", "/orders", Some(order(json!(B)))).await;
        assert_eq!(status, StatusCode::CREATED);

        let (status, answer) = call(&router, "GET", "/orders/1/ORD-1", None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            answer,
            json!({"merchant_id": A, "reference": "ORD-1", "amount": "40.00",
                   "currency": "EUR", "state": "open"})
        );
        let (status, answer) = call(&router, "GET", "/orders/3/ORD-1", None).await;
        assert_eq!(
            (status, &answer["error"]),
            (StatusCode::NOT_FOUND, &json!("not_found"))
        );
        for bad in ["/orders/0/ORD-1", "/orders/abc/ORD-1", "/orders/-1/ORD-1"] {
            let (status, answer) = call(&router, "GET", bad, None).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
            assert_eq!(answer["error_description"], BAD_MERCHANT, "{bad}");
        }
        // The old route, by reference alone, is gone.
        let (status, _) = call(&router, "GET", "/orders/ORD-1", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}
