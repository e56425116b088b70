//! The watcher's rules, pure: what a session's transfers mean for its payment ([`verdict`]),
//! how a payment in several ways to pay is split into parts ([`split`]), what late money is
//! valued at ([`late_rate`]), how many transfers one check keeps ([`cap`]), and when a
//! checkout's end is known on chain ([`end_read`]). The watcher (`super`) reads the chain and
//! writes; nothing here does either, and native tests cover every rule.
//!
//! Rules:
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

use std::str::FromStr;

use payrail_evm::Address;
use rust_decimal::{Decimal, RoundingStrategy};
use serde::Serialize;
use shared_types::RawStatus;

use crate::chain::{evm, scan};
use crate::db::watches::TransferKind;
use crate::db::watches::{SeenTransfer, StoredTransfer, Watch, END_GRACE_SECONDS};

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
    for t in transfers.iter().filter(|t| t.kind == TransferKind::Payment) {
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

/// Keeps at most `limit` payments of `seen` ([`scan::cap`]).
pub fn cap(seen: &mut Vec<SeenTransfer<'_>>, limit: usize) -> Option<u64> {
    scan::cap(seen, limit, |t| {
        (t.block_number, t.log_index, t.kind == TransferKind::Payment)
    })
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
        kind: TransferKind,
    ) -> StoredTransfer {
        StoredTransfer {
            tx_hash: self::hash(hash),
            log_index: 0,
            address: deposit(),
            token: Token::Erc20(Address([0x70; 20])),
            amount: Some(units.into()),
            block_number: block,
            confirmed,
            kind,
            after_expiry: false,
            rate: None,
            rate_source: None,
            sender: None,
        }
    }

    fn judge(raw: RawStatus, ended: bool, transfers: &[StoredTransfer]) -> Verdict {
        verdict(raw, ended, d("10.00"), 2, &[quote()], transfers, 3)
    }

    #[test]
    fn an_exact_confirmed_payment_is_credited_at_the_order_amount() {
        let exact = [transfer("0x1", "10869566", 90, true, TransferKind::Payment)];
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
        let usdc = transfer("0x1", "5434783", 90, true, TransferKind::Payment);
        let eth = StoredTransfer {
            address: ether.address,
            token: Token::Native,
            ..transfer("0x2", "1500000000000000", 91, true, TransferKind::Payment)
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
            ..transfer(h, units, 90, true, TransferKind::Payment)
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
            ..transfer(hash, units, 95, true, TransferKind::Payment)
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
            transfer("0x1", "5434783", 90, true, TransferKind::Payment),
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
                &[transfer("0x1", "10869566", 90, true, TransferKind::Payment)]
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
            transfer(
                "0x1",
                &u128::MAX.to_string(),
                90,
                true,
                TransferKind::Payment,
            ),
            transfer(
                "0x2",
                "70000000000000000000000000000",
                90,
                true,
                TransferKind::Payment,
            ),
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
        let half = transfer("0x1", "5434783", 90, true, TransferKind::Payment);
        assert_eq!(
            judge(RawStatus::Pending, false, std::slice::from_ref(&half)),
            Verdict::Waiting {
                received: d("5.00")
            }
        );
        let rest = transfer("0x2", "5434783", 95, true, TransferKind::Payment);
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
        let fresh = [transfer(
            "0x1",
            "10869566",
            99,
            false,
            TransferKind::Payment,
        )];
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
        let late = [transfer("0x9", "10869566", 99, true, TransferKind::Payment)];
        assert!(matches!(
            judge(RawStatus::Expired, true, &late),
            Verdict::Credit { late: true, .. }
        ));
        let other = [transfer(
            "0x9",
            "10869566",
            90,
            true,
            TransferKind::UnexpectedToken,
        )];
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
            institution_id: shared_types::ids::InstitutionId(1),
            network: "polygon".into(),
            asset: "USDC".into(),
            token: Token::Erc20(Address([0x70; 20])),
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
            transaction_id: 1,
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
        let over = [transfer("0x1", "12000000", 90, true, TransferKind::Payment)];
        assert!(matches!(
            judge(RawStatus::Pending, false, &over),
            Verdict::Credit { gross, .. } if gross == d("11.04")
        ));
        // One base unit short rounds to the order amount: dust, not an underpayment.
        let dust = [transfer("0x1", "10869565", 90, true, TransferKind::Payment)];
        assert!(matches!(
            judge(RawStatus::Pending, false, &dust),
            Verdict::Credit { gross, .. } if gross == d("10.00")
        ));
    }
}
