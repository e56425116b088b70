//! Receiving webhooks: verify the `Payrail-Signature` header over the raw body, then parse the
//! event into [`Event`]. The verifier is the one the sender signs with ([`shared_types::webhook`]),
//! so the two sides cannot drift.
//!
//! ```
//! use payrail::webhooks::{signature_header, Event, EventKind, Webhooks};
//! let body = br#"{"id":"evt_1","type":"webhook.test","created":1795000000,"data":{
//!   "object":"transaction","id":1,"merchant_id":2,"status":"paid","raw_status":"paid",
//!   "amount_status":"EXACT","asset":"USDC","currency":"EUR","amount":{"gross":"10.00",
//!   "net":null,"expected":"10.00","psp_fee":null,"gas_fee":null,"bridge_fee":null},
//!   "networks":{"payment":null,"settlement":null},"tx_hashes":{"source":null,"bridge":null,
//!   "settlement":null},"customer_email":null,"external_reference":"order-1",
//!   "created_at":"2026-11-21T04:35:27Z","paid_at":null}}"#;
//! let header = signature_header(&["whsec_new"], 1795000000, body);
//! // During a rotation, accept the old secret and the new one.
//! let webhooks = Webhooks::new("whsec_old").also_accept("whsec_new");
//! let event = webhooks.verify_at(&header, body, 1795000060).unwrap();
//! assert_eq!(event.id, "evt_1");
//! assert!(matches!(event.kind, EventKind::Test(_)));
//! ```

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use shared_types::Transaction;

pub use shared_types::webhook::{
    sign, signature_header, Verifier, VerifyError, DEFAULT_TOLERANCE_SECONDS, EVENT_ID_HEADER,
    EVENT_TYPE_HEADER, SIGNATURE_HEADER, TEST_EVENT_TYPE,
};

/// An event, as a webhook delivers it and as the events feed lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// `evt_…`: deduplicate on it.
    pub id: String,
    /// Unix seconds the event was created.
    pub created: i64,
    /// The type, with the transaction as it stood when the event was created.
    pub kind: EventKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EventKind {
    /// `payment.succeeded`: the customer's payment is held in the custodial wallet.
    PaymentSucceeded(Transaction),
    /// `payment.paid`: settled to the merchant. Fulfil only after checking your order's amount
    /// against `amount.gross` (spec §1).
    PaymentPaid(Transaction),
    /// `payment.refunded`: refunded in full or in part.
    PaymentRefunded(Transaction),
    /// `webhook.test`: a test event sent from the portal, carrying a sample transaction.
    Test(Transaction),
    /// A type this version of the crate does not know yet: keep it, and acknowledge it.
    Other {
        /// The `type`.
        kind: String,
        /// The `data`, untouched.
        data: serde_json::Value,
    },
}

impl Event {
    /// Parses an event body (already verified).
    pub fn parse(body: &[u8]) -> Result<Event, serde_json::Error> {
        serde_json::from_slice(body)
    }

    /// The `type` as the wire names it.
    pub fn type_name(&self) -> &str {
        match &self.kind {
            EventKind::PaymentSucceeded(_) => "payment.succeeded",
            EventKind::PaymentPaid(_) => "payment.paid",
            EventKind::PaymentRefunded(_) => "payment.refunded",
            EventKind::Test(_) => TEST_EVENT_TYPE,
            EventKind::Other { kind, .. } => kind,
        }
    }

    /// `created` as the API writes timestamps (`2026-11-21T04:35:27Z`).
    pub fn created_at(&self) -> Option<String> {
        shared_types::time::format_unix(self.created)
    }

    /// The transaction the event carries, for the known types.
    pub fn transaction(&self) -> Option<&Transaction> {
        match &self.kind {
            EventKind::PaymentSucceeded(t)
            | EventKind::PaymentPaid(t)
            | EventKind::PaymentRefunded(t)
            | EventKind::Test(t) => Some(t),
            EventKind::Other { .. } => None,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Envelope<D> {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    created: i64,
    data: D,
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Envelope::<serde_json::Value>::deserialize(deserializer)?;
        let transaction = |data: serde_json::Value| {
            serde_json::from_value::<Transaction>(data).map_err(D::Error::custom)
        };
        let kind = match raw.kind.as_str() {
            "payment.succeeded" => EventKind::PaymentSucceeded(transaction(raw.data)?),
            "payment.paid" => EventKind::PaymentPaid(transaction(raw.data)?),
            "payment.refunded" => EventKind::PaymentRefunded(transaction(raw.data)?),
            TEST_EVENT_TYPE => EventKind::Test(transaction(raw.data)?),
            _ => EventKind::Other {
                kind: raw.kind,
                data: raw.data,
            },
        };
        Ok(Event {
            id: raw.id,
            created: raw.created,
            kind,
        })
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let data = match &self.kind {
            EventKind::Other { data, .. } => data.clone(),
            _ => serde_json::to_value(self.transaction()).map_err(serde::ser::Error::custom)?,
        };
        Envelope {
            id: self.id.clone(),
            kind: self.type_name().to_owned(),
            created: self.created,
            data,
        }
        .serialize(serializer)
    }
}

/// Verifies and parses deliveries for one endpoint.
#[derive(Debug, Clone)]
pub struct Webhooks {
    verifier: Verifier,
}

impl Webhooks {
    /// For the endpoint's signing secret (`whsec_…`), with the default 5-minute replay window.
    pub fn new(secret: &str) -> Self {
        Webhooks {
            verifier: Verifier::new(secret),
        }
    }

    /// Also accept signatures made with another secret: keep the old and the new one while
    /// your configuration moves through a rotation.
    pub fn also_accept(mut self, secret: &str) -> Self {
        self.verifier = self.verifier.also_accept(secret);
        self
    }

    /// Another replay window, in seconds: deliveries signed further from now are refused.
    pub fn with_tolerance(mut self, seconds: i64) -> Self {
        self.verifier = self.verifier.with_tolerance(seconds);
        self
    }

    /// Verifies the `Payrail-Signature` header over the raw body (the bytes as received, before
    /// any JSON parsing) against the system clock, then parses the event.
    pub fn verify(&self, signature: &str, body: &[u8]) -> Result<Event, VerifyError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        self.verify_at(signature, body, now)
    }

    /// The same at Unix time `now`.
    pub fn verify_at(&self, signature: &str, body: &[u8], now: i64) -> Result<Event, VerifyError> {
        self.verifier.verify(signature, body, now)?;
        Event::parse(body).map_err(|_| VerifyError::BadPayload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(kind: &str) -> String {
        format!(
            r#"{{"id":"evt_7","type":"{kind}","created":1795000000,"data":{{"object":"transaction","id":7,"merchant_id":1,"status":"paid","raw_status":"paid","amount_status":"EXACT","asset":"USDC","currency":"EUR","amount":{{"gross":"40.00","net":"39.60","expected":"40.00","psp_fee":"0.40","gas_fee":"0.00","bridge_fee":null}},"networks":{{"payment":"polygon","settlement":"polygon"}},"tx_hashes":{{"source":"0x1","bridge":null,"settlement":"0x2"}},"customer_email":null,"external_reference":"order-7","created_at":"2026-11-21T04:35:27Z","paid_at":"2026-11-21T04:36:00Z"}}}}"#
        )
    }

    #[test]
    fn every_known_type_parses_into_its_variant_and_back() {
        for kind in [
            "payment.succeeded",
            "payment.paid",
            "payment.refunded",
            "webhook.test",
        ] {
            let event = Event::parse(body(kind).as_bytes()).unwrap();
            assert_eq!(event.type_name(), kind);
            let t = event.transaction().expect("a transaction");
            assert_eq!(t.external_reference.as_deref(), Some("order-7"));
            assert_eq!(t.amount.gross.unwrap().to_string(), "40.00");
            let again: serde_json::Value = serde_json::to_value(&event).unwrap();
            let original: serde_json::Value = serde_json::from_str(&body(kind)).unwrap();
            assert_eq!(again, original, "{kind} round trip");
        }
    }

    #[test]
    fn an_unknown_type_is_kept_not_refused() {
        let text = r#"{"id":"evt_8","type":"payout.created","created":1,"data":{"x":1}}"#;
        let event = Event::parse(text.as_bytes()).unwrap();
        assert_eq!(event.type_name(), "payout.created");
        assert!(event.transaction().is_none());
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            serde_json::from_str::<serde_json::Value>(text).unwrap()
        );
    }

    #[test]
    fn a_known_type_with_a_bad_transaction_is_refused() {
        let text = r#"{"id":"evt_8","type":"payment.paid","created":1,"data":{"x":1}}"#;
        assert!(Event::parse(text.as_bytes()).is_err());
    }

    #[test]
    fn verify_refuses_forgeries_stale_deliveries_and_bad_bodies() {
        let webhooks = Webhooks::new("whsec_a");
        let good = body("payment.paid");
        let header = signature_header(&["whsec_a"], 1000, good.as_bytes());
        assert_eq!(
            webhooks
                .verify_at(&header, good.as_bytes(), 1100)
                .unwrap()
                .id,
            "evt_7"
        );
        let forged = signature_header(&["whsec_b"], 1000, good.as_bytes());
        assert_eq!(
            webhooks.verify_at(&forged, good.as_bytes(), 1000),
            Err(VerifyError::NoMatchingSignature)
        );
        assert_eq!(
            webhooks.verify_at(&header, good.as_bytes(), 1000 + 301),
            Err(VerifyError::TimestampOutOfTolerance)
        );
        let junk = b"not json";
        let signed = signature_header(&["whsec_a"], 1000, junk);
        assert_eq!(
            webhooks.verify_at(&signed, junk, 1000),
            Err(VerifyError::BadPayload)
        );
    }
}
