//! Webhook events (spec §6): the envelope, signing (`Payrail-Signature: t=<unix>,v1=<hex>`), the
//! receiver's verifier, the retry schedule and the auto-disable rule. The sender and every
//! receiver use this one module, so the two sides cannot drift.
//!
//! A receiver:
//!
//! ```
//! use shared_types::webhook::{sign, Verifier};
//! let secret = "whsec_example";
//! let body = br#"{"id":"evt_1","type":"payment.paid","created":1795000000,"data":{}}"#;
//! let header = format!("t=1795000000,v1={}", sign(secret, 1795000000, body));
//! let verifier = Verifier::new(secret);
//! assert!(verifier.verify(&header, body, 1795000100).is_ok());
//! ```

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::models::Transaction;

/// Header carrying the signature.
pub const SIGNATURE_HEADER: &str = "Payrail-Signature";
/// Header carrying the event id (deduplicate on it).
pub const EVENT_ID_HEADER: &str = "Payrail-Event-Id";
/// Header carrying the event type.
pub const EVENT_TYPE_HEADER: &str = "Payrail-Event-Type";
/// `type` of the test events an admin sends from the portal (carrying a sample transaction).
pub const TEST_EVENT_TYPE: &str = "webhook.test";
/// Default tolerance between the signature's timestamp and the receiver's clock.
pub const DEFAULT_TOLERANCE_SECONDS: i64 = 5 * 60;

/// The event envelope (spec §6.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// `evt_…`, unique.
    pub id: String,
    /// `payment.succeeded`, `payment.paid` or `payment.refunded`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Unix seconds the event was created.
    pub created: i64,
    /// The transaction exactly as the REST API showed it at that moment.
    pub data: Transaction,
}

/// Hex HMAC-SHA256 of `<timestamp>.<body>` keyed with the secret's UTF-8 bytes, prefix included.
pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// The `Payrail-Signature` value: one `v1=` per secret (two during a rotation's grace period).
pub fn signature_header(secrets: &[&str], timestamp: i64, body: &[u8]) -> String {
    let mut header = format!("t={timestamp}");
    for secret in secrets {
        header.push_str(",v1=");
        header.push_str(&sign(secret, timestamp, body));
    }
    header
}

/// Why a delivery was refused by the verifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// The header is missing its `t` or any `v1`, or is malformed.
    MalformedHeader,
    /// The timestamp is further from now than the tolerance.
    TimestampOutOfTolerance,
    /// No `v1` matches.
    NoMatchingSignature,
    /// The body is not an event.
    BadPayload,
}

impl core::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::MalformedHeader => "the Payrail-Signature header is malformed",
            Self::TimestampOutOfTolerance => "the signature's timestamp is outside the tolerance",
            Self::NoMatchingSignature => "no signature matches",
            Self::BadPayload => "the body is not a Payrail event",
        })
    }
}

impl core::error::Error for VerifyError {}

/// Verifies deliveries for one endpoint: its signing secret, or several while a rotation is under
/// way on the receiver's side (a delivery is accepted when any `v1` matches any secret).
#[derive(Clone)]
pub struct Verifier {
    secrets: Vec<String>,
    tolerance: i64,
}

impl core::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The secrets stay out of logs: how many there are is all it says of them.
        f.debug_struct("Verifier")
            .field("secrets", &self.secrets.len())
            .field("tolerance", &self.tolerance)
            .finish()
    }
}

impl Verifier {
    /// A verifier with the default 5-minute tolerance.
    pub fn new(secret: &str) -> Self {
        Verifier {
            secrets: vec![secret.to_owned()],
            tolerance: DEFAULT_TOLERANCE_SECONDS,
        }
    }

    /// The same, also accepting signatures made with `secret`: keep the old and the new secret
    /// while the receiver's configuration moves from one to the other.
    pub fn also_accept(mut self, secret: &str) -> Self {
        self.secrets.push(secret.to_owned());
        self
    }

    /// The same with another tolerance, in seconds.
    pub fn with_tolerance(mut self, seconds: i64) -> Self {
        self.tolerance = seconds;
        self
    }

    /// Checks the header against the raw body (bytes as received, before any JSON parsing) at
    /// Unix time `now`: any matching `v1` is accepted, compared in constant time.
    pub fn verify(&self, header: &str, body: &[u8], now: i64) -> Result<(), VerifyError> {
        let mut timestamp = None;
        let mut candidates = Vec::new();
        for part in header.split(',') {
            match part.trim().split_once('=') {
                Some(("t", value)) => {
                    timestamp = Some(
                        value
                            .parse::<i64>()
                            .map_err(|_| VerifyError::MalformedHeader)?,
                    )
                }
                Some(("v1", value)) => candidates.push(value),
                // Other schemes may be added later; ignore them.
                Some(_) => {}
                None => return Err(VerifyError::MalformedHeader),
            }
        }
        let timestamp = timestamp.ok_or(VerifyError::MalformedHeader)?;
        if candidates.is_empty() {
            return Err(VerifyError::MalformedHeader);
        }
        if now.abs_diff(timestamp) > self.tolerance.unsigned_abs() {
            return Err(VerifyError::TimestampOutOfTolerance);
        }
        // Every pair is compared, in constant time, whatever matched first.
        let matched = self.secrets.iter().fold(false, |found, secret| {
            let expected = sign(secret, timestamp, body);
            candidates.iter().fold(found, |found, candidate| {
                found | bool::from(candidate.as_bytes().ct_eq(expected.as_bytes()))
            })
        });
        if matched {
            Ok(())
        } else {
            Err(VerifyError::NoMatchingSignature)
        }
    }

    /// Verifies, then parses the event.
    pub fn verify_event(&self, header: &str, body: &[u8], now: i64) -> Result<Event, VerifyError> {
        self.verify(header, body, now)?;
        serde_json::from_slice(body).map_err(|_| VerifyError::BadPayload)
    }
}

/// Delays before retries, in seconds: 1 m, 5 m, 15 m, 1 h, 3 h, 6 h, 12 h, then every 12 h.
pub const RETRY_SCHEDULE: [u64; 7] = [60, 300, 900, 3_600, 10_800, 21_600, 43_200];

/// How long after failed attempt number `attempt` (1-based) the next one is due, before jitter,
/// with the schedule divided by `scale` (1 in production; larger to watch the whole schedule in
/// tests and demos), never below one second.
pub fn retry_delay(attempt: u32, scale: u64) -> u64 {
    let index = (attempt.max(1) as usize - 1).min(RETRY_SCHEDULE.len() - 1);
    (RETRY_SCHEDULE[index] / scale.max(1)).max(1)
}

/// Adds up to ±10 % jitter to a delay; `unit` is a random number in [0, 1).
pub fn with_jitter(delay: u64, unit: f64) -> u64 {
    let spread = delay as f64 * 0.1;
    let jittered = (delay as f64) + spread * (2.0 * unit - 1.0);
    // Rounded half away from zero, as `f64::round` would (which `core` lacks): for a
    // non-negative value, taking the whole part away leaves the fraction exactly.
    let whole = jittered as u64;
    let rounded = whole + u64::from(jittered - whole as f64 >= 0.5);
    rounded.max(1)
}

/// Continuous failure that disables an endpoint: 5 days (divided by the same scale).
pub const DISABLE_AFTER_SECONDS: u64 = 5 * 24 * 60 * 60;

/// The auto-disable rule. An endpoint is failing continuously when it has had no successful
/// delivery since its first failed attempt (`first_failure_at`, cleared by any success); it is
/// disabled once that first failure is at least 5 days (scaled) old.
pub fn should_disable(first_failure_at: Option<i64>, now: i64, scale: u64) -> bool {
    first_failure_at.is_some_and(|first| now - first >= failure_window(scale))
}

/// The give-up rule for one delivery. After the schedule's end a delivery is retried every
/// 12 h; an endpoint that takes other deliveries meanwhile never trips [`should_disable`] (each
/// success clears its clock), so a delivery its receiver refuses would be retried for ever. A
/// delivery made at least 5 days (scaled) ago that fails again, to an endpoint that has taken a
/// delivery since it was made (`last_success_at`), is given up instead; it can still be resent
/// from the delivery log. An endpoint with no success since is failing as a whole, which is
/// [`should_disable`]'s to judge.
pub fn should_give_up(created_at: i64, last_success_at: Option<i64>, now: i64, scale: u64) -> bool {
    last_success_at.is_some_and(|success| success > created_at)
        && now - created_at >= failure_window(scale)
}

/// 5 days, divided by the scale, never below one second.
fn failure_window(scale: u64) -> i64 {
    (DISABLE_AFTER_SECONDS / scale.max(1)).max(1) as i64
}

/// The longest delay a queue message can be sent with (Cloudflare Queues: 12 hours); a later
/// attempt is sent at this delay and sent on again when it arrives early.
pub const MAX_QUEUE_DELAY_SECONDS: u64 = 43_200;

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinned vector: secret, timestamp and body to hex. Computed independently with
    /// `printf '1795000000.{"id":"evt_test"}' | openssl dgst -sha256 -hmac whsec_test_vector`.
    #[test]
    fn signature_matches_the_fixed_vector() {
        assert_eq!(
            sign("whsec_test_vector", 1_795_000_000, br#"{"id":"evt_test"}"#),
            "7db82c656460b4b83e356204b9ea010d49e6edd59ee218bdb4fdb4e9f2177822"
        );
    }

    #[test]
    fn extreme_timestamps_are_refused_without_overflow() {
        let body = br#"{"id":"evt_1"}"#;
        let verifier = Verifier::new("whsec_x");
        for (t, now) in [
            (i64::MIN, 1_795_000_000),
            (i64::MAX, 1_795_000_000),
            (i64::MIN, i64::MAX),
            (i64::MAX, i64::MIN),
        ] {
            let header = signature_header(&["whsec_x"], t, body);
            assert_eq!(
                verifier.verify(&header, body, now),
                Err(VerifyError::TimestampOutOfTolerance),
                "t={t} now={now}"
            );
        }
        let header = signature_header(&["whsec_x"], i64::MIN, body);
        assert!(verifier.verify(&header, body, i64::MIN).is_ok());
    }

    #[test]
    fn a_verifier_with_two_secrets_accepts_either_during_a_rotation() {
        let body = br#"{"id":"evt_1"}"#;
        let verifier = Verifier::new("whsec_old").also_accept("whsec_new");
        for secret in ["whsec_old", "whsec_new"] {
            let header = signature_header(&[secret], 1000, body);
            assert!(verifier.verify(&header, body, 1000).is_ok(), "{secret}");
        }
        let header = signature_header(&["whsec_other"], 1000, body);
        assert_eq!(
            verifier.verify(&header, body, 1000),
            Err(VerifyError::NoMatchingSignature)
        );
    }

    #[test]
    fn verifier_accepts_any_valid_v1_and_refuses_the_rest() {
        let body = br#"{"id":"evt_1"}"#;
        let header = signature_header(&["whsec_new", "whsec_old"], 1000, body);
        assert!(header.starts_with("t=1000,v1=") && header.matches("v1=").count() == 2);
        assert!(Verifier::new("whsec_new")
            .verify(&header, body, 1000)
            .is_ok());
        assert!(Verifier::new("whsec_old")
            .verify(&header, body, 1200)
            .is_ok());
        assert_eq!(
            Verifier::new("whsec_other").verify(&header, body, 1000),
            Err(VerifyError::NoMatchingSignature)
        );
        assert_eq!(
            Verifier::new("whsec_new").verify(&header, br#"{"id":"evt_2"}"#, 1000),
            Err(VerifyError::NoMatchingSignature)
        );
        assert_eq!(
            Verifier::new("whsec_new").verify(&header, body, 1000 + 301),
            Err(VerifyError::TimestampOutOfTolerance)
        );
        assert!(Verifier::new("whsec_new")
            .with_tolerance(600)
            .verify(&header, body, 1000 + 301)
            .is_ok());
        for bad in ["", "v1=abc", "t=abc,v1=00", "t=1000", "garbage"] {
            assert_eq!(
                Verifier::new("whsec_new").verify(bad, body, 1000),
                Err(VerifyError::MalformedHeader),
                "{bad}"
            );
        }
    }

    #[test]
    fn schedule_and_jitter() {
        let real: Vec<u64> = (1..=9).map(|a| retry_delay(a, 1)).collect();
        assert_eq!(
            real,
            [60, 300, 900, 3600, 10800, 21600, 43200, 43200, 43200]
        );
        assert_eq!(retry_delay(1, 3600), 1);
        assert_eq!(retry_delay(6, 3600), 6);
        for unit in [0.0, 0.5, 0.999] {
            let d = with_jitter(3600, unit);
            assert!((3240..=3960).contains(&d), "{d}");
        }
    }

    #[test]
    fn disable_rule() {
        let day = 86_400;
        assert!(!should_disable(None, 10 * day, 1));
        assert!(!should_disable(Some(0), 5 * day - 1, 1));
        assert!(should_disable(Some(0), 5 * day, 1));
        assert!(should_disable(Some(0), 5, 86_400));
    }

    #[test]
    fn a_delivery_refused_for_five_days_by_a_working_endpoint_is_given_up() {
        let day = 86_400;
        assert!(!should_give_up(0, Some(1), 5 * day - 1, 1));
        assert!(should_give_up(0, Some(1), 5 * day, 1));
        assert!(should_give_up(100, Some(101), 105, 86_400));
        assert!(!should_give_up(100, Some(101), 104, 86_400));
        // No success since it was made: the endpoint as a whole is failing.
        assert!(!should_give_up(100, Some(100), 10 * day, 1));
        assert!(!should_give_up(100, None, 10 * day, 1));
    }
}
