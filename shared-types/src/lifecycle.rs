//! The payment lifecycle (spec §3): which action may follow which state, and what each changes.
//! Pure: the worker applies the returned change in one atomic D1 write, guarded by the state it
//! was computed from.
//!
//! ```text
//! pending ──pay──► succeeded ──settle──► paid
//!    │                 ▲  │                 │
//!    ├──fail──► failed │  └──refund──┐      └──refund──┐
//!    └──expire─► expired ─pay_late─┘ ▼                  ▼
//!                     partially_refunded ──refund──► refunded
//! ```
//!
//! `pay_late` is a payment found on chain after its checkout expired: money the customer sent,
//! credited like any other (only the chain watcher does it).
//!
//! Money from an address on a sanctions list lands in `held` instead of `succeeded`
//! (`pay_held`, from `pending` or `expired`); an admin's review then `release`s it (to
//! `succeeded`, exactly as its credit would have been) or `block`s it (to `failed`, its money
//! frozen in custody). See docs/SCREENING.md.

use alloc::format;
use alloc::string::String;

use rust_decimal::{Decimal, RoundingStrategy};

use crate::status::{AmountStatus, RawStatus};

/// PSP fee: 1 % of the amount paid.
pub const PSP_FEE_PERCENT: u32 = 1;
/// Bridge fee when settlement crosses networks, in major units of the order currency.
pub const BRIDGE_FEE: Decimal = Decimal::from_parts(75, 0, 0, false, 2);

/// Network fee of a settlement transfer on `network`, in major units of the order currency.
pub fn gas_fee(network: &str) -> Decimal {
    match network {
        "ethereum" => Decimal::new(250, 2),
        "bitcoin" => Decimal::new(120, 2),
        "arbitrum" | "base" => Decimal::new(8, 2),
        "tron" => Decimal::new(35, 2),
        _ => Decimal::new(2, 2),
    }
}

/// Something that happens to a payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The customer's payment of `amount` (order currency) landed in the custodial wallet.
    Pay {
        /// Amount paid, in the order currency.
        amount: Decimal,
    },
    /// A payment of `amount` landed after the checkout expired (still the customer's money).
    PayLate {
        /// Amount paid, in the order currency.
        amount: Decimal,
    },
    /// The funds were transferred to the merchant's wallet on `network` (the payment network
    /// when `None`; another network means a bridge).
    Settle {
        /// Settlement network.
        network: Option<String>,
    },
    /// The funds were transferred on chain to the merchant's wallet on the payment network, at
    /// these fees (order currency): the net is what is left of the gross.
    SettleOnChain {
        /// The PSP's fee.
        psp_fee: Decimal,
        /// The settlement transaction's gas (its share of a batch; both legs' when bridged).
        gas_fee: Decimal,
        /// Set when the settlement crossed to another network: that network and the bridge's
        /// fee (order currency), which the net is less too.
        bridge: Option<(String, Decimal)>,
    },
    /// `amount` (order currency) went back to the customer.
    Refund {
        /// Amount refunded.
        amount: Decimal,
    },
    /// The payment failed.
    Fail,
    /// The checkout expired without a payment.
    Expire,
    /// The customer's payment of `amount` (order currency) landed in custody from an address
    /// a sanctions screening stopped: held for review (only the chain watcher does it).
    PayHeld {
        /// Amount paid, in the order currency.
        amount: Decimal,
    },
    /// An admin released a held payment (a false positive): credited as it would have been.
    Release,
    /// An admin blocked a held payment: it fails, its money frozen in custody.
    Block,
}

impl Action {
    /// The action's name in the sandbox API.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Pay { .. } => "pay",
            Action::PayLate { .. } => "pay_late",
            Action::Settle { .. } | Action::SettleOnChain { .. } => "settle",
            Action::Refund { .. } => "refund",
            Action::Fail => "fail",
            Action::Expire => "expire",
            Action::PayHeld { .. } => "hold",
            Action::Release => "release",
            Action::Block => "block",
        }
    }
}

/// What a payment looks like before an action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    /// Current internal status.
    pub raw_status: RawStatus,
    /// Amount requested.
    pub expected: Decimal,
    /// Amount paid, once paid.
    pub gross: Option<Decimal>,
    /// Amount refunded so far.
    pub refunded: Decimal,
    /// Minor-unit digits of the order currency.
    pub currency_digits: u32,
    /// Network the customer pays on.
    pub payment_network: Option<String>,
}

/// The webhook event a change causes (spec §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Funds held in the custodial wallet.
    PaymentSucceeded,
    /// Funds settled to the merchant.
    PaymentPaid,
    /// Refunded, fully or partly.
    PaymentRefunded,
}

impl EventType {
    /// Every event type.
    pub const ALL: [EventType; 3] = [
        EventType::PaymentSucceeded,
        EventType::PaymentPaid,
        EventType::PaymentRefunded,
    ];

    /// The event type named `text`, if any.
    pub fn parse(text: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == text)
    }

    /// The event's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PaymentSucceeded => "payment.succeeded",
            Self::PaymentPaid => "payment.paid",
            Self::PaymentRefunded => "payment.refunded",
        }
    }
}

/// The fields an action sets; `None` leaves a field as it is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Change {
    /// New internal status (the normalized one follows from it).
    pub raw_status: Option<RawStatus>,
    /// Set on payment.
    pub amount_status: Option<AmountStatus>,
    /// Set on payment.
    pub gross: Option<Decimal>,
    /// Set on settlement.
    pub psp_fee: Option<Decimal>,
    /// Set on settlement.
    pub gas_fee: Option<Decimal>,
    /// Set on a bridged settlement.
    pub bridge_fee: Option<Decimal>,
    /// Set on settlement.
    pub net: Option<Decimal>,
    /// Set on settlement.
    pub settlement_network: Option<String>,
    /// Whether the settlement crossed networks (a bridge hash is due).
    pub bridged: bool,
    /// Set on refund: the new refunded total.
    pub refunded: Option<Decimal>,
    /// The event this change causes, if any.
    pub event: Option<EventType>,
}

/// Why an action was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The action cannot follow the current status.
    IllegalTransition {
        /// The action.
        action: &'static str,
        /// The current status.
        from: RawStatus,
    },
    /// The amount is not acceptable; the text says why.
    BadAmount(String),
    /// A refund larger than what is left to refund: a conflict with the payment's current state
    /// (another refund may have taken the rest).
    ExceedsRefundable(Decimal),
}

impl core::fmt::Display for Refusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Refusal::IllegalTransition { action, from } => {
                write!(f, "cannot {action} a payment whose raw_status is {from}")
            }
            Refusal::BadAmount(text) => f.write_str(text),
            Refusal::ExceedsRefundable(left) => {
                write!(f, "amount exceeds what is left to refund ({left})")
            }
        }
    }
}

fn round(amount: Decimal, digits: u32) -> Decimal {
    amount.round_dp_with_strategy(digits, RoundingStrategy::MidpointAwayFromZero)
}

fn check_amount(amount: Decimal, digits: u32) -> Result<(), Refusal> {
    if amount <= Decimal::ZERO {
        return Err(Refusal::BadAmount(
            "amount must be greater than zero".into(),
        ));
    }
    if amount.normalize().scale() > digits {
        return Err(Refusal::BadAmount(format!(
            "amount must have at most {digits} decimal places"
        )));
    }
    Ok(())
}

/// Applies `action` to `payment`, or says why it cannot be.
pub fn apply(payment: &Payment, action: &Action) -> Result<Change, Refusal> {
    use RawStatus as S;
    let illegal = || Refusal::IllegalTransition {
        action: action.name(),
        from: payment.raw_status,
    };
    let digits = payment.currency_digits;
    match (action, payment.raw_status) {
        (Action::Pay { amount }, S::Pending)
        | (Action::PayLate { amount }, S::Expired)
        | (Action::PayHeld { amount }, S::Pending | S::Expired) => {
            check_amount(*amount, digits)?;
            let amount_status = match amount.cmp(&payment.expected) {
                core::cmp::Ordering::Less => AmountStatus::Underpaid,
                core::cmp::Ordering::Equal => AmountStatus::Exact,
                core::cmp::Ordering::Greater => AmountStatus::Overpaid,
            };
            // Held money tells partners nothing yet: its `payment.succeeded` waits for the
            // release.
            let held = matches!(action, Action::PayHeld { .. });
            Ok(Change {
                raw_status: Some(if held { S::Held } else { S::Succeeded }),
                amount_status: Some(amount_status),
                gross: Some(round(*amount, digits)),
                event: (!held).then_some(EventType::PaymentSucceeded),
                ..Change::default()
            })
        }
        (Action::Release, S::Held) => Ok(Change {
            raw_status: Some(S::Succeeded),
            event: Some(EventType::PaymentSucceeded),
            ..Change::default()
        }),
        (Action::Block, S::Held) => Ok(Change {
            raw_status: Some(S::Failed),
            ..Change::default()
        }),
        (Action::Settle { network }, S::Succeeded) => {
            let gross = payment.gross.ok_or_else(illegal)?;
            let from = payment.payment_network.clone().unwrap_or_default();
            let to = network.clone().unwrap_or_else(|| from.clone());
            let bridged = to != from;
            let psp_fee = round(gross * Decimal::new(PSP_FEE_PERCENT.into(), 2), digits);
            let gas = round(gas_fee(&to), digits);
            let bridge = bridged.then(|| round(BRIDGE_FEE, digits));
            let net = (gross - psp_fee - gas - bridge.unwrap_or_default()).max(Decimal::ZERO);
            Ok(Change {
                raw_status: Some(S::Paid),
                psp_fee: Some(psp_fee),
                gas_fee: Some(gas),
                bridge_fee: bridge,
                net: Some(net),
                settlement_network: Some(to),
                bridged,
                event: Some(EventType::PaymentPaid),
                ..Change::default()
            })
        }
        (
            Action::SettleOnChain {
                psp_fee,
                gas_fee,
                bridge,
            },
            S::Succeeded,
        ) => {
            let gross = payment.gross.ok_or_else(illegal)?;
            let bridge_fee = bridge.as_ref().map(|(_, fee)| fee);
            for (name, fee) in [
                ("psp_fee", Some(psp_fee)),
                ("gas_fee", Some(gas_fee)),
                ("bridge_fee", bridge_fee),
            ] {
                let Some(fee) = fee else { continue };
                if *fee < Decimal::ZERO || fee.normalize().scale() > digits {
                    return Err(Refusal::BadAmount(format!(
                        "{name} must be a non-negative amount with at most {digits} decimal places"
                    )));
                }
            }
            let net = gross - psp_fee - gas_fee - bridge_fee.copied().unwrap_or_default();
            if net <= Decimal::ZERO {
                return Err(Refusal::BadAmount(
                    "the fees leave nothing to settle".into(),
                ));
            }
            let bridged = bridge
                .as_ref()
                .is_some_and(|(to, _)| Some(to) != payment.payment_network.as_ref());
            Ok(Change {
                raw_status: Some(S::Paid),
                psp_fee: Some(*psp_fee),
                gas_fee: Some(*gas_fee),
                bridge_fee: bridged.then(|| bridge_fee.copied()).flatten(),
                net: Some(net),
                settlement_network: match bridge {
                    Some((to, _)) if bridged => Some(to.clone()),
                    _ => payment.payment_network.clone(),
                },
                bridged,
                event: Some(EventType::PaymentPaid),
                ..Change::default()
            })
        }
        (Action::Refund { amount }, S::Succeeded | S::Paid | S::PartiallyRefunded) => {
            check_amount(*amount, digits)?;
            let gross = payment.gross.ok_or_else(illegal)?;
            let refundable = gross - payment.refunded;
            if *amount > refundable {
                return Err(Refusal::ExceedsRefundable(refundable));
            }
            let refunded = payment.refunded + *amount;
            let status = if refunded == gross {
                S::Refunded
            } else {
                S::PartiallyRefunded
            };
            Ok(Change {
                raw_status: Some(status),
                refunded: Some(refunded),
                event: Some(EventType::PaymentRefunded),
                ..Change::default()
            })
        }
        (Action::Fail, S::Pending) => Ok(Change {
            raw_status: Some(S::Failed),
            ..Change::default()
        }),
        (Action::Expire, S::Pending) => Ok(Change {
            raw_status: Some(S::Expired),
            ..Change::default()
        }),
        _ => Err(illegal()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::str::FromStr;

    fn d(text: &str) -> Decimal {
        Decimal::from_str(text).unwrap()
    }

    fn pending() -> Payment {
        Payment {
            raw_status: RawStatus::Pending,
            expected: d("100.00"),
            gross: None,
            refunded: Decimal::ZERO,
            currency_digits: 2,
            payment_network: Some("polygon".into()),
        }
    }

    fn after(payment: &Payment, change: &Change) -> Payment {
        Payment {
            raw_status: change.raw_status.unwrap_or(payment.raw_status),
            gross: change.gross.or(payment.gross),
            refunded: change.refunded.unwrap_or(payment.refunded),
            ..payment.clone()
        }
    }

    /// A pending payment of 100.00 after the customer paid exactly.
    fn paid_in_full() -> Payment {
        let pay = Action::Pay {
            amount: d("100.00"),
        };
        after(&pending(), &apply(&pending(), &pay).unwrap())
    }

    #[test]
    fn an_on_chain_settlement_keeps_net_plus_fees_equal_to_gross() {
        let settle = Action::SettleOnChain {
            psp_fee: d("1.00"),
            gas_fee: d("0.03"),
            bridge: None,
        };
        let change = apply(&paid_in_full(), &settle).unwrap();
        assert_eq!(change.raw_status, Some(RawStatus::Paid));
        assert_eq!(change.net, Some(d("98.97")));
        assert_eq!(change.bridge_fee, None);
        assert!(!change.bridged);
        assert_eq!(change.settlement_network.as_deref(), Some("polygon"));
        assert_eq!(change.event, Some(EventType::PaymentPaid));
        let too_much = Action::SettleOnChain {
            psp_fee: d("60"),
            gas_fee: d("40"),
            bridge: None,
        };
        assert!(matches!(
            apply(&paid_in_full(), &too_much),
            Err(Refusal::BadAmount(_))
        ));
        let fine = Action::SettleOnChain {
            psp_fee: d("1.001"),
            gas_fee: d("0"),
            bridge: None,
        };
        assert!(
            apply(&paid_in_full(), &fine).is_err(),
            "beyond the minor unit"
        );
        assert!(apply(&pending(), &settle).is_err());
    }

    #[test]
    fn a_settlement_across_networks_takes_the_bridge_fee_from_the_net_too() {
        let across = |fee: &str| Action::SettleOnChain {
            psp_fee: d("1.00"),
            gas_fee: d("0.05"),
            bridge: Some(("base".into(), d(fee))),
        };
        let change = apply(&paid_in_full(), &across("0.10")).unwrap();
        assert!(change.bridged);
        assert_eq!(change.bridge_fee, Some(d("0.10")));
        assert_eq!(change.net, Some(d("98.85")));
        assert_eq!(change.settlement_network.as_deref(), Some("base"));
        // A standard transfer collects nothing: the fee is zero, not absent.
        let free = apply(&paid_in_full(), &across("0")).unwrap();
        assert_eq!(free.bridge_fee, Some(d("0")));
        assert_eq!(free.net, Some(d("98.95")));
        assert!(apply(&paid_in_full(), &across("-1")).is_err());
        assert!(apply(&paid_in_full(), &across("0.001")).is_err());
        assert!(apply(&paid_in_full(), &across("98.95")).is_err());
        // "Across" to the network paid on is no bridge.
        let same = Action::SettleOnChain {
            psp_fee: d("1.00"),
            gas_fee: d("0.05"),
            bridge: Some(("polygon".into(), d("0"))),
        };
        let same = apply(&paid_in_full(), &same).unwrap();
        assert!(!same.bridged);
        assert_eq!(same.bridge_fee, None);
    }

    #[test]
    fn pay_compares_with_the_expected_amount() {
        for (paid, status) in [
            ("100", AmountStatus::Exact),
            ("90.00", AmountStatus::Underpaid),
            ("110.5", AmountStatus::Overpaid),
        ] {
            let change = apply(&pending(), &Action::Pay { amount: d(paid) }).unwrap();
            assert_eq!(change.amount_status, Some(status));
            assert_eq!(change.raw_status, Some(RawStatus::Succeeded));
            assert_eq!(change.event, Some(EventType::PaymentSucceeded));
        }
    }

    #[test]
    fn held_money_waits_for_a_review_that_releases_it_once_or_blocks_it() {
        let hold = Action::PayHeld { amount: d("90") };
        let change = apply(&pending(), &hold).unwrap();
        assert_eq!(change.raw_status, Some(RawStatus::Held));
        assert_eq!(change.amount_status, Some(AmountStatus::Underpaid));
        assert_eq!(change.gross, Some(d("90.00")));
        assert_eq!(change.event, None, "partners hear of it on release");
        assert_eq!(RawStatus::Held.normalized(), crate::Status::Pending);
        let expired = Payment {
            raw_status: RawStatus::Expired,
            ..pending()
        };
        assert!(apply(&expired, &hold).is_ok(), "late money is held too");
        let held = after(&pending(), &change);
        // Nothing but a decision follows: no settlement, refund, expiry or second hold.
        for action in [
            Action::Settle { network: None },
            Action::Refund { amount: d("1") },
            Action::Expire,
            Action::Fail,
            hold.clone(),
        ] {
            assert!(
                matches!(
                    apply(&held, &action),
                    Err(Refusal::IllegalTransition { .. })
                ),
                "{action:?}"
            );
        }
        let released = apply(&held, &Action::Release).unwrap();
        assert_eq!(released.raw_status, Some(RawStatus::Succeeded));
        assert_eq!(released.event, Some(EventType::PaymentSucceeded));
        assert_eq!(released.gross, None, "the gross held stands");
        let blocked = apply(&held, &Action::Block).unwrap();
        assert_eq!(blocked.raw_status, Some(RawStatus::Failed));
        assert_eq!(blocked.event, None);
        // Decided once: neither decision follows another, nor applies to a payment not held.
        let after_release = after(&held, &released);
        let after_block = after(&held, &blocked);
        for (payment, action) in [
            (&after_release, Action::Release),
            (&after_release, Action::Block),
            (&after_block, Action::Release),
            (&after_block, Action::Block),
            (&pending(), Action::Release),
            (&paid_in_full(), Action::Block),
        ] {
            assert!(apply(payment, &action).is_err(), "{action:?}");
        }
    }

    #[test]
    fn only_an_expired_payment_is_paid_late() {
        let expired = Payment {
            raw_status: RawStatus::Expired,
            ..pending()
        };
        let late = Action::PayLate { amount: d("100") };
        let change = apply(&expired, &late).unwrap();
        assert_eq!(change.raw_status, Some(RawStatus::Succeeded));
        assert_eq!(change.event, Some(EventType::PaymentSucceeded));
        assert!(apply(&pending(), &late).is_err());
        assert!(apply(&expired, &Action::Pay { amount: d("100") }).is_err());
    }

    #[test]
    fn settlement_computes_fees_and_net() {
        let paid = paid_in_full();
        let same = apply(&paid, &Action::Settle { network: None }).unwrap();
        assert_eq!(same.psp_fee, Some(d("1.00")));
        assert_eq!(same.gas_fee, Some(d("0.02")));
        assert_eq!(same.bridge_fee, None);
        assert_eq!(same.net, Some(d("98.98")));
        assert_eq!(same.settlement_network.as_deref(), Some("polygon"));
        assert!(!same.bridged);

        let bridged = apply(
            &paid,
            &Action::Settle {
                network: Some("ethereum".into()),
            },
        )
        .unwrap();
        assert!(bridged.bridged);
        assert_eq!(bridged.bridge_fee, Some(d("0.75")));
        assert_eq!(
            bridged.net,
            Some(d("100.00") - d("1.00") - d("2.50") - d("0.75"))
        );
        assert_eq!(bridged.event, Some(EventType::PaymentPaid));
    }

    #[test]
    fn refunds_partly_then_fully() {
        let paid = paid_in_full();
        let part = apply(&paid, &Action::Refund { amount: d("30") }).unwrap();
        assert_eq!(part.raw_status, Some(RawStatus::PartiallyRefunded));
        let partly = after(&paid, &part);
        assert!(matches!(
            apply(&partly, &Action::Refund { amount: d("70.01") }),
            Err(Refusal::ExceedsRefundable(_))
        ));
        let rest = apply(&partly, &Action::Refund { amount: d("70") }).unwrap();
        assert_eq!(rest.raw_status, Some(RawStatus::Refunded));
        assert_eq!(rest.refunded, Some(d("100")));
    }

    #[test]
    fn illegal_transitions_are_refused() {
        let failed = Payment {
            raw_status: RawStatus::Failed,
            ..pending()
        };
        for action in [
            Action::Pay { amount: d("1") },
            Action::Settle { network: None },
            Action::Refund { amount: d("1") },
            Action::Fail,
            Action::Expire,
        ] {
            assert!(matches!(
                apply(&failed, &action),
                Err(Refusal::IllegalTransition { .. })
            ));
        }
        assert!(apply(&pending(), &Action::Settle { network: None }).is_err());
        assert!(apply(&pending(), &Action::Refund { amount: d("1") }).is_err());
        let refunded = Payment {
            raw_status: RawStatus::Refunded,
            gross: Some(d("1")),
            ..pending()
        };
        assert!(apply(&refunded, &Action::Refund { amount: d("1") }).is_err());
    }

    #[test]
    fn amounts_must_fit_the_currency() {
        assert!(apply(&pending(), &Action::Pay { amount: d("0") }).is_err());
        assert!(apply(&pending(), &Action::Pay { amount: d("-1") }).is_err());
        assert!(apply(&pending(), &Action::Pay { amount: d("1.005") }).is_err());
        assert!(apply(&pending(), &Action::Pay { amount: d("1.500") }).is_ok());
    }
}
