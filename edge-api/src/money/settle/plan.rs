//! Pricing a settlement batch, pure: each payment's PSP fee, its share of the gas (converted
//! with the network coin's price in the order currency) and its net, in the order currency and
//! in the asset's base units at the payment's own quote, rounded down.

use std::collections::BTreeMap;
use std::str::FromStr;

use rust_decimal::{Decimal, RoundingStrategy};
use shared_types::checkout::currency_digits;

use crate::chain::config::NATIVE_DECIMALS;
use crate::chain::evm;
use crate::db::settlements::{Item, Settleable};

/// Why a payment cannot settle in a batch, in words that may be shown.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held(String);

/// What a batch pays: each payment's part, the units sent in all, and the payments left out
/// (with why).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The parts.
    pub items: Vec<Item>,
    /// Base units transferred.
    pub units: u128,
    /// Payments that cannot settle in it.
    pub held: Vec<(i64, String)>,
}

/// Prices a batch: `gas_wei` (limit × price) shared evenly (the first takes the remainder),
/// converted with `coin_rates` (order-currency units per coin, by currency). A payment whose
/// fees leave nothing is left out and the gas shared again among the rest. Pure.
pub fn plan(due: &[Settleable], gas_wei: u128, coin_rates: &BTreeMap<String, Decimal>) -> Plan {
    plan_legs(due, &[(gas_wei, coin_rates)])
}

/// [`plan`] for a batch whose transfer takes several transactions, each paying its gas in its
/// own network's coin (a bridge's burn and mint): each leg's `(gas_wei, coin_rates)` is shared
/// as [`plan`] shares one, and a payment's gas fee is the sum of its shares, converted before
/// rounding. Pure.
pub fn plan_legs(due: &[Settleable], legs: &[(u128, &BTreeMap<String, Decimal>)]) -> Plan {
    let mut held = Vec::new();
    let mut included: Vec<&Settleable> = due.iter().collect();
    while !included.is_empty() {
        let n = included.len() as u128;
        let mut items = Vec::new();
        let mut units = 0u128;
        let mut dropped = None;
        for (k, d) in included.iter().enumerate() {
            let shares: Vec<(u128, &BTreeMap<String, Decimal>)> = legs
                .iter()
                .map(|(gas_wei, rates)| {
                    (gas_wei / n + if k == 0 { gas_wei % n } else { 0 }, *rates)
                })
                .collect();
            match part(d, &shares) {
                Ok((item, u)) => {
                    units += u;
                    items.push(item);
                }
                Err(Held(why)) => {
                    dropped = Some((k, why));
                    break;
                }
            }
        }
        match dropped {
            Some((k, why)) => {
                held.push((included[k].transaction_id, why));
                included.remove(k);
            }
            None => return Plan { items, units, held },
        }
    }
    Plan {
        items: Vec::new(),
        units: 0,
        held,
    }
}

/// One payment's part when its gas shares are `shares` (wei of each leg, with its coin's
/// rates).
fn part(
    d: &Settleable,
    shares: &[(u128, &BTreeMap<String, Decimal>)],
) -> Result<(Item, u128), Held> {
    let number =
        |text: &str| Decimal::from_str(text).map_err(|_| Held(format!("{text} is not an amount")));
    let gross = number(&d.gross)?;
    let expected = number(&d.expected)?;
    let crypto_amount = number(&d.crypto_amount)?;
    let digits = currency_digits(&d.currency).unwrap_or(2);

    let round = |x: Decimal| {
        let mut rounded = x.round_dp_with_strategy(digits, RoundingStrategy::MidpointAwayFromZero);
        rounded.rescale(digits);
        rounded
    };
    let out_of_range = || {
        Held(format!(
            "the amounts of {gross} {} are out of range",
            d.currency
        ))
    };
    let mut gas = Decimal::ZERO;
    for (wei, coin_rates) in shares {
        let rate = coin_rates
            .get(&d.currency)
            .ok_or_else(|| Held(format!("no rate prices the gas in {}", d.currency)))?;
        let coin = evm::from_units(*wei, NATIVE_DECIMALS)
            .ok_or_else(|| Held("the gas cost is out of range".to_owned()))?;
        gas = coin
            .checked_mul(*rate)
            .and_then(|fee| gas.checked_add(fee))
            .ok_or_else(out_of_range)?;
    }
    let gas_fee = round(gas);
    let psp_fee = round(
        gross
            .checked_mul(Decimal::from(d.psp_fee_bps))
            .ok_or_else(out_of_range)?
            / Decimal::from(10_000),
    );
    let net = gross - psp_fee - gas_fee;
    if net <= Decimal::ZERO || expected <= Decimal::ZERO || crypto_amount <= Decimal::ZERO {
        return Err(Held(format!(
            "the fees ({psp_fee} PSP, {gas_fee} network) leave nothing of {gross} {} to settle",
            d.currency
        )));
    }
    let asset_net =
        evm::at_quote(net, (crypto_amount, expected), d.decimals).ok_or_else(out_of_range)?;
    let units = evm::to_units(asset_net, d.decimals)
        .filter(|u| *u > 0)
        .ok_or_else(|| {
            Held(format!(
                "{net} {} is less than one unit of {}",
                d.currency, d.asset
            ))
        })?;
    // The fees in base units at the same quote, rounded down: what the books charge.
    let fee_units = |fee: Decimal| {
        evm::at_quote(fee, (crypto_amount, expected), d.decimals)
            .and_then(|a| evm::to_units(a, d.decimals))
            .ok_or_else(out_of_range)
    };
    let item = Item {
        transaction_id: d.transaction_id,
        part: d.part,
        institution_id: d.institution_id,
        psp_fee: psp_fee.to_string(),
        gas_fee: gas_fee.to_string(),
        net: net.to_string(),
        units: units.to_string(),
        psp_units: fee_units(psp_fee)?.to_string(),
        gas_units: fee_units(gas_fee)?.to_string(),
    };
    Ok((item, units))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn due(id: i64, gross: &str, currency: &str) -> Settleable {
        Settleable {
            transaction_id: id,
            part: 0,
            institution_id: shared_types::ids::InstitutionId(1),
            merchant_id: 1,
            currency: currency.into(),
            gross: gross.into(),
            expected: gross.into(),
            asset: "USDC".into(),
            network: "polygon".into(),
            token: payrail_evm::Token::Erc20(payrail_evm::Address([0x70; 20])),
            decimals: 6,
            crypto_amount: gross.into(),
            psp_fee_bps: 100,
            held_at: 0,
        }
    }

    fn rates() -> BTreeMap<String, Decimal> {
        // 0.5 USD per coin.
        BTreeMap::from([("USD".to_owned(), Decimal::new(5, 1))])
    }

    #[test]
    fn fees_add_up_and_the_gas_is_shared() {
        // 0.2 coin of gas: 0.10 USD, 0.05 each.
        let batch = [due(1, "10.00", "USD"), due(2, "20.00", "USD")];
        let priced = plan(&batch, 200_000_000_000_000_000, &rates());
        assert!(priced.held.is_empty());
        let item = &priced.items[0];
        assert_eq!(
            (item.psp_fee.as_str(), item.gas_fee.as_str()),
            ("0.10", "0.05")
        );
        assert_eq!(item.net, "9.85");
        assert_eq!(item.units, "9850000");
        let second = &priced.items[1];
        assert_eq!(
            (second.psp_fee.as_str(), second.net.as_str()),
            ("0.20", "19.75")
        );
        assert_eq!(priced.units, 9_850_000 + 19_750_000);
        for (i, d) in priced.items.iter().zip(&batch) {
            let sum = Decimal::from_str(&i.psp_fee).unwrap()
                + Decimal::from_str(&i.gas_fee).unwrap()
                + Decimal::from_str(&i.net).unwrap();
            assert_eq!(sum, Decimal::from_str(&d.gross).unwrap());
        }
    }

    #[test]
    fn a_payment_the_fees_would_eat_is_held_and_the_rest_share_the_gas() {
        // 1 coin of gas: 0.50 USD; even half of it eats the 0.20 payment.
        let batch = [due(1, "0.20", "USD"), due(2, "50.00", "USD")];
        let priced = plan(&batch, 1_000_000_000_000_000_000, &rates());
        assert_eq!(priced.held.len(), 1);
        assert_eq!(priced.held[0].0, 1);
        assert!(
            priced.held[0].1.contains("leave nothing"),
            "{:?}",
            priced.held
        );
        assert_eq!(priced.items.len(), 1);
        assert_eq!(
            priced.items[0].gas_fee, "0.50",
            "the whole gas on the one left"
        );
        let alone = plan(&batch[..1], 1_000_000_000_000_000_000, &rates());
        assert!(alone.items.is_empty());
    }

    #[test]
    fn net_is_paid_at_the_payments_own_quote_rounded_down() {
        // 10.00 EUR quoted at 10.869566 USDC; no gas, 1 % fee: 9.90 EUR is 10.760870 USDC.
        let mut d = due(1, "10.00", "EUR");
        d.crypto_amount = "10.869566".into();
        let rates = BTreeMap::from([("EUR".to_owned(), Decimal::ONE)]);
        let priced = plan(&[d], 0, &rates);
        assert_eq!(priced.items[0].net, "9.90");
        assert_eq!(priced.units, 10_760_870);
        let unpriced = plan(&[due(2, "1.00", "GBP")], 0, &rates);
        assert!(unpriced.held[0].1.contains("GBP"));
    }

    #[test]
    fn a_bridged_batch_pays_both_legs_gas_each_in_its_own_coin() {
        // Burn: 0.2 coin at 0.5 USD (0.10); mint: 0.001 coin at 2,000 USD (2.00).
        let eth = BTreeMap::from([("USD".to_owned(), Decimal::from(2000))]);
        let batch = [due(1, "10.00", "USD"), due(2, "20.00", "USD")];
        let priced = plan_legs(
            &batch,
            &[
                (200_000_000_000_000_000, &rates()),
                (1_000_000_000_000_000, &eth),
            ],
        );
        assert!(priced.held.is_empty());
        assert_eq!(priced.items[0].gas_fee, "1.05");
        assert_eq!(priced.items[1].gas_fee, "1.05");
        assert_eq!(priced.items[0].net, "8.85");
        // One leg alone is the plain plan.
        assert_eq!(
            plan_legs(&batch, &[(200_000_000_000_000_000, &rates())]),
            plan(&batch, 200_000_000_000_000_000, &rates())
        );
        // A leg whose coin has no rate in the currency holds the payment.
        let none = BTreeMap::new();
        let unpriced = plan_legs(&batch[..1], &[(0, &rates()), (1, &none)]);
        assert!(unpriced.held[0].1.contains("no rate"));
    }
}
