//! Status enums of transactions and merchants (spec §2.2, §2.3, §3) and of webhook deliveries,
//! endpoints and attempts: read straight from rows, compared as types, never as strings.

use core::fmt;
use core::str::FromStr;

use serde::{Deserialize, Serialize};

/// Declares a string enum whose wire names, `as_str`, `FromStr` and `ALL` cannot drift apart.
macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The wire name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }
        }

        impl FromStr for $name {
            type Err = UnknownValue;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok(Self::$variant),)+
                    _ => Err(UnknownValue),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// A string that is not one of an enum's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownValue;

string_enum! {
    /// Normalized transaction status (spec §3): what partners filter and branch on.
    Status {
        /// Payment not completed.
        Pending = "pending",
        /// Paid by the customer (held or settled to the merchant).
        Paid = "paid",
        /// Payment failed or expired.
        Failed = "failed",
        /// Fully refunded.
        Refunded = "refunded",
        /// Partly refunded.
        PartiallyRefunded = "partially_refunded",
    }
}

string_enum! {
    /// Internal transaction status (spec §3, full set decided in docs/API.md).
    RawStatus {
        /// Created, waiting for the customer's on-chain payment.
        Pending = "pending",
        /// The customer's payment landed in the custodial wallet.
        Succeeded = "succeeded",
        /// Funds were transferred to the merchant's external wallet.
        Paid = "paid",
        /// The payment failed.
        Failed = "failed",
        /// No payment arrived before the checkout expired.
        Expired = "expired",
        /// Fully refunded to the customer.
        Refunded = "refunded",
        /// Partly refunded to the customer.
        PartiallyRefunded = "partially_refunded",
        /// The customer's payment landed in custody from an address on a sanctions list (or
        /// one the chain does not name): held for the institution's review, never settled or
        /// refunded until an admin releases it.
        Held = "held",
    }
}

impl RawStatus {
    /// The normalized status partners see for this internal status.
    pub fn normalized(self) -> Status {
        match self {
            // A payment held for screening is not paid yet to partners: its money waits on
            // the institution's review.
            Self::Pending | Self::Held => Status::Pending,
            // Spec §3/§6.1: funds held in custody already read as `paid` to partners.
            Self::Succeeded | Self::Paid => Status::Paid,
            Self::Failed | Self::Expired => Status::Failed,
            Self::Refunded => Status::Refunded,
            Self::PartiallyRefunded => Status::PartiallyRefunded,
        }
    }
}

string_enum! {
    /// How the amount paid compares with the amount requested.
    AmountStatus {
        /// Paid exactly the expected amount.
        Exact = "EXACT",
        /// Paid less than expected.
        Underpaid = "UNDERPAID",
        /// Paid more than expected.
        Overpaid = "OVERPAID",
    }
}

string_enum! {
    /// Merchant account status.
    MerchantStatus {
        /// May take payments (given onboarding is complete and crypto is enabled).
        Active = "active",
        /// Temporarily barred from taking payments.
        Suspended = "suspended",
        /// Closed for good.
        Disabled = "disabled",
    }
}

string_enum! {
    /// Where the merchant is in onboarding.
    OnboardingStatus {
        /// Onboarding started; information outstanding.
        Pending = "pending",
        /// Submitted and under review.
        InReview = "in_review",
        /// Approved; `onboarding_complete` is true only here.
        Completed = "completed",
        /// Rejected.
        Rejected = "rejected",
    }
}

impl OnboardingStatus {
    /// Whether onboarding is complete (the merchant's `onboarding_complete`).
    pub fn is_complete(self) -> bool {
        self == Self::Completed
    }

    /// Where onboarding may go from here: submitted for review; approved, rejected, or sent back
    /// for more information; a rejected merchant may resubmit. Completed is final: a merchant
    /// that must stop taking payments is suspended or disabled instead.
    pub fn next(self) -> &'static [OnboardingStatus] {
        match self {
            Self::Pending => &[Self::InReview],
            Self::InReview => &[Self::Completed, Self::Rejected, Self::Pending],
            Self::Rejected => &[Self::InReview],
            Self::Completed => &[],
        }
    }
}

impl MerchantStatus {
    /// Where the account status may go from here: active and suspended move both ways;
    /// disabled (closed) is final.
    pub fn next(self) -> &'static [MerchantStatus] {
        match self {
            Self::Active => &[Self::Suspended, Self::Disabled],
            Self::Suspended => &[Self::Active, Self::Disabled],
            Self::Disabled => &[],
        }
    }
}

string_enum! {
    /// What a portal user may do.
    PortalRole {
        /// Everything: merchants, credentials, webhooks, users.
        Admin = "admin",
        /// Reads payments, merchants and the delivery log; changes nothing, sees no secret.
        Viewer = "viewer",
    }
}

string_enum! {
    /// Where a webhook delivery stands (the delivery log's `status`).
    DeliveryStatus {
        /// Waiting for its next attempt.
        Pending = "pending",
        /// A receiver answered 2xx.
        Succeeded = "succeeded",
        /// Given up: out of attempts, or its endpoint was disabled or deleted.
        Failed = "failed",
    }
}

string_enum! {
    /// Whether a webhook endpoint receives deliveries.
    EndpointStatus {
        /// Receives deliveries.
        Enabled = "enabled",
        /// Receives nothing (by an admin, or after failing continuously).
        Disabled = "disabled",
    }
}

string_enum! {
    /// How one delivery attempt ended.
    AttemptOutcome {
        /// The receiver answered 2xx.
        Ok = "ok",
        /// The receiver answered another status (4xx, 5xx, 1xx).
        HttpStatus = "http_status",
        /// The receiver answered 3xx; redirects are not followed.
        Redirect = "redirect",
        /// No answer within the deadline.
        Timeout = "timeout",
        /// Refused connection, DNS failure, reset.
        Connection = "connection",
        /// The attempt could not be made on our side (the signing secret could not be opened, or
        /// the request could not be built); retried like any failure.
        Error = "error",
    }
}

impl AttemptOutcome {
    /// The outcome of an answer with this HTTP status.
    pub fn of_status(status: u16) -> Self {
        match status {
            200..=299 => Self::Ok,
            300..=399 => Self::Redirect,
            _ => Self::HttpStatus,
        }
    }
}

string_enum! {
    /// Where a refund on chain stands.
    RefundState {
        /// Its transaction is out, or about to be.
        Sending = "sending",
        /// Its transaction is final.
        Confirmed = "confirmed",
        /// The payment shows it (`payment.refunded` was written).
        Done = "done",
        /// Given up after its transactions failed.
        Failed = "failed",
    }
}

impl RefundState {
    /// Whether a refund in this state takes from what is left to refund: every one that has not
    /// failed (sent, final or recorded), so two refunds can never add up past the gross.
    pub fn counts(self) -> bool {
        self != Self::Failed
    }
}

/// What is left to refund of a payment of `gross` after the refunds asked so far (amount and
/// state): the one rule the refund check, the guarded insert's SQL (`state <> 'failed'`) and
/// the portal share.
pub fn refundable(
    gross: rust_decimal::Decimal,
    refunds: impl IntoIterator<Item = (rust_decimal::Decimal, RefundState)>,
) -> rust_decimal::Decimal {
    gross
        - refunds
            .into_iter()
            .filter(|(_, state)| state.counts())
            .map(|(amount, _)| amount)
            .sum::<rust_decimal::Decimal>()
}

string_enum! {
    /// Where a transaction the treasury signed stands.
    SendState {
        /// Out, not yet final.
        Live = "live",
        /// A higher-priced one with its nonce took over.
        Replaced = "replaced",
        /// Final, succeeded.
        Confirmed = "confirmed",
        /// Final, reverted (its nonce used).
        Failed = "failed",
        /// Recorded before the final-evidence rule: its nonce went to another transaction.
        Dropped = "dropped",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refund_but_a_failed_one_takes_from_what_is_left() {
        let d = |s: &str| s.parse::<rust_decimal::Decimal>().unwrap();
        let asked = [
            (d("10.00"), RefundState::Done),
            (d("5.00"), RefundState::Failed),
            (d("2.50"), RefundState::Sending),
            (d("1.00"), RefundState::Confirmed),
        ];
        assert_eq!(refundable(d("20.00"), asked), d("6.50"));
        assert_eq!(refundable(d("20.00"), []), d("20.00"));
        assert_eq!(RefundState::ALL.iter().filter(|s| s.counts()).count(), 3);
    }

    #[test]
    fn round_trips_every_value() {
        for s in Status::ALL {
            assert_eq!(s.as_str().parse::<Status>(), Ok(*s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for s in RawStatus::ALL {
            assert_eq!(s.as_str().parse::<RawStatus>(), Ok(*s));
        }
        for s in AmountStatus::ALL {
            assert_eq!(s.as_str().parse::<AmountStatus>(), Ok(*s));
        }
        for s in DeliveryStatus::ALL {
            assert_eq!(s.as_str().parse::<DeliveryStatus>(), Ok(*s));
        }
        for s in EndpointStatus::ALL {
            assert_eq!(s.as_str().parse::<EndpointStatus>(), Ok(*s));
        }
        for s in AttemptOutcome::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }

    #[test]
    fn onboarding_moves_and_account_moves() {
        use OnboardingStatus as O;
        assert_eq!(O::Pending.next(), &[O::InReview]);
        assert!(O::InReview.next().contains(&O::Completed));
        assert!(O::Completed.next().is_empty());
        assert!(
            !O::Pending.next().contains(&O::Completed),
            "no skipping review"
        );
        assert!(MerchantStatus::Disabled.next().is_empty());
        assert!(MerchantStatus::Suspended
            .next()
            .contains(&MerchantStatus::Active));
        // Every status can be reached from pending / active.
        for target in O::ALL {
            let mut seen = vec![O::Pending];
            let mut i = 0;
            while i < seen.len() {
                for n in seen[i].next() {
                    if !seen.contains(n) {
                        seen.push(*n);
                    }
                }
                i += 1;
            }
            assert!(seen.contains(target), "{target}");
        }
    }

    #[test]
    fn attempt_outcome_of_status() {
        assert_eq!(AttemptOutcome::of_status(204), AttemptOutcome::Ok);
        assert_eq!(AttemptOutcome::of_status(301), AttemptOutcome::Redirect);
        assert_eq!(AttemptOutcome::of_status(500), AttemptOutcome::HttpStatus);
        assert_eq!(AttemptOutcome::of_status(101), AttemptOutcome::HttpStatus);
    }

    #[test]
    fn unknown_values_are_refused() {
        assert_eq!("PAID".parse::<Status>(), Err(UnknownValue));
        assert_eq!("exact".parse::<AmountStatus>(), Err(UnknownValue));
        assert_eq!("".parse::<RawStatus>(), Err(UnknownValue));
    }

    #[test]
    fn raw_statuses_map_as_the_spec_says() {
        assert_eq!(RawStatus::Succeeded.normalized(), Status::Paid);
        assert_eq!(RawStatus::Paid.normalized(), Status::Paid);
        assert_eq!(RawStatus::Expired.normalized(), Status::Failed);
        assert_eq!(RawStatus::Pending.normalized(), Status::Pending);
        assert_eq!(
            RawStatus::PartiallyRefunded.normalized(),
            Status::PartiallyRefunded
        );
        // Every normalized status is reachable from some raw status.
        for s in Status::ALL {
            assert!(RawStatus::ALL.iter().any(|r| r.normalized() == *s), "{s}");
        }
    }
}
