//! What each event of a payment's life posts: pure functions from the event to its transfers,
//! with ids derived from what they record (so a retry posts nothing twice).
//!
//! | event | transfers |
//! | --- | --- |
//! | money confirmed at a deposit address | receipt: custody ← unallocated (its address's) |
//! | a payment credited (on time or late) | credit: unallocated → merchant |
//! | money confirmed at a merchant's top-up address | its receipt, and topup: unallocated → merchant |
//! | a settlement signed | pending: merchant → fees (each PSP fee), merchant → network fees (each gas share), merchant → treasury (the payout, less any debt netted) |
//! | its transaction replaced | the old transaction's pending transfers voided, the new one's pending |
//! | its transaction final and succeeded | its pending transfers posted (or, when a transaction it replaced was the one mined, those voided and the mined one's posted at once) |
//! | its transaction reverted | its pending transfers voided |
//! | a settlement across networks: its burn final | its fees posted, its payout voided; settlement: treasury (bridge) ← treasury, and pending: merchant → treasury (bridge) |
//! | its mint final (anyone's) | that pending transfer posted |
//! | any treasury transaction mined | gas: gas ← treasury, in the coin, at the receipt's gas used × price |
//! | a refund asked | pending: merchant → treasury |
//! | its transaction final | posted; given up after its attempts: voided |
//! | a sweep final | sweep: treasury ← custody; its gas: gas ← custody (coin); gas funding: custody (deposit) ← custody (gas address) |
//! | the operator's funding found by reconciliation | funding: treasury (or the custody gas address) ← world |

use crate::ids::Scoped;
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use super::{Code, Kind, Ledger, Phase, Transfer};

/// A transfer of `code` between two accounts.
fn transfer(
    id: String,
    (debit, credit): (String, String),
    amount: u128,
    (code, phase): (Code, Phase),
    transaction_id: Option<i64>,
    reference: &str,
) -> Transfer {
    Transfer {
        id,
        debit,
        credit,
        amount,
        code,
        phase,
        transaction_id,
        reference: reference.to_owned(),
    }
}

/// The id of the transfer that carries `account` of institution `institution` between the
/// stores ([`moved`]), the same on both sides.
pub fn moved_id(institution: i64, account: &str) -> String {
    format!("move:{institution}:{account}")
}

/// An account's posted `balance` (credits less debits, in base units) carried between the two
/// stores when institution `institution` moves into its own object: one transfer between
/// `account` and `link` (the store's link to the other), under the same id on both sides; in
/// the object it opens the account (`opening`), in the treasury's books it closes it. So each
/// store balances by itself and the links mirror each other. `None` for a zero balance.
pub fn moved(
    (account, link): (&str, &str),
    balance: i128,
    institution: i64,
    opening: bool,
) -> Option<Transfer> {
    if balance == 0 {
        return None;
    }
    // Opening a credit balance credits the account; closing it debits it.
    let (debit, credit) = if (balance > 0) == opening {
        (link, account)
    } else {
        (account, link)
    };
    Some(transfer(
        moved_id(institution, account),
        (debit.to_owned(), credit.to_owned()),
        balance.unsigned_abs(),
        (Code::Move, Phase::Single),
        None,
        &format!("institution {institution}"),
    ))
}

/// Money confirmed at a deposit address: the chain transfer `(tx_hash, log_index)`.
pub fn receipt(
    ledger: &Ledger,
    address: &str,
    (tx_hash, log_index): (&str, u64),
    units: u128,
) -> Transfer {
    let address = address.to_ascii_lowercase();
    transfer(
        format!("receipt:{}:{tx_hash}:{log_index}:{address}", ledger.network),
        (
            ledger.account(Kind::Custody, &address),
            ledger.account(Kind::Unallocated, &address),
        ),
        units,
        (Code::Receipt, Phase::Single),
        None,
        tx_hash,
    )
}

/// A payment credited: what arrived for it at `address` is owed to its merchant.
pub fn credit(
    ledger: &Ledger,
    address: &str,
    (transaction_id, merchant_id): (i64, i64),
    units: u128,
) -> Transfer {
    transfer(
        format!("credit:{transaction_id}"),
        (
            ledger.account(Kind::Unallocated, &address.to_ascii_lowercase()),
            ledger.account(Kind::Merchant, &merchant_id.to_string()),
        ),
        units,
        (Code::Credit, Phase::Single),
        Some(transaction_id),
        &format!("payment {transaction_id}"),
    )
}

/// The credit of the money a payment received at another of its addresses than its first
/// (another way to pay, or the same again under a new quote): like [`credit`], its id also
/// names the address, so each address's money is credited once.
pub fn credit_at(
    ledger: &Ledger,
    address: &str,
    (transaction_id, merchant_id): (i64, i64),
    units: u128,
) -> Transfer {
    let address = address.to_ascii_lowercase();
    Transfer {
        id: format!("credit:{transaction_id}:{}:{address}", ledger.network),
        ..credit(ledger, &address, (transaction_id, merchant_id), units)
    }
}

/// A merchant's top-up: the chain transfer `(tx_hash, log_index)` confirmed at its top-up
/// address (whose [`receipt`] is posted with it) is owed to `merchant_id`. Its id is derived
/// from the same chain transfer as the receipt's, so neither is ever posted twice.
pub fn topup(
    ledger: &Ledger,
    address: &str,
    (tx_hash, log_index): (&str, u64),
    merchant_id: i64,
    units: u128,
) -> Transfer {
    let address = address.to_ascii_lowercase();
    transfer(
        format!("topup:{}:{tx_hash}:{log_index}:{address}", ledger.network),
        (
            ledger.account(Kind::Unallocated, &address),
            ledger.account(Kind::Merchant, &merchant_id.to_string()),
        ),
        units,
        (Code::Topup, Phase::Single),
        None,
        tx_hash,
    )
}

/// One payment's part of a settlement transaction, in base units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The payment.
    pub transaction_id: i64,
    /// Its PSP fee.
    pub psp_units: u128,
    /// Its share of the gas.
    pub gas_units: u128,
    /// Its net (gross less both fees, at its quote).
    pub net_units: u128,
}

/// What a settlement pays out when the merchant has `available` (its balance less what is
/// reserved, in base units, before this settlement): its parts' net, less whatever the
/// merchant owes (a refund after settlement took it below what these payments brought), never
/// below zero.
pub fn payout(available: i128, parts: &[Part]) -> u128 {
    let fees: u128 = parts.iter().map(|p| p.psp_units + p.gas_units).sum();
    let net: u128 = parts.iter().map(|p| p.net_units).sum();
    let left = available - i128::try_from(fees).unwrap_or(i128::MAX);
    u128::try_from(left.max(0)).unwrap_or(0).min(net)
}

/// A settlement transaction `send_id` of `merchant` (in its institution): each part's fees and
/// the payout, pending until the transaction is final. With `phase` [`Phase::Single`]: posted
/// at once (a replaced transaction that was mined after all).
pub fn settlement(
    ledger: &Ledger,
    merchant: Scoped<i64>,
    send_id: &str,
    parts: &[Part],
    payout: u128,
    single: bool,
) -> Vec<Transfer> {
    let (institution_id, merchant) = (
        merchant.institution,
        ledger.account(Kind::Merchant, &merchant.id.to_string()),
    );
    let phase = || {
        if single {
            Phase::Single
        } else {
            Phase::Pending
        }
    };
    let suffix = if single { ":mined" } else { "" };
    let mut out = Vec::new();
    for p in parts {
        let tid = Some(p.transaction_id);
        if p.psp_units > 0 {
            out.push(transfer(
                format!("fee:{send_id}:{}{suffix}", p.transaction_id),
                (
                    merchant.clone(),
                    ledger.account(Kind::Fees, &institution_id.to_string()),
                ),
                p.psp_units,
                (Code::Fee, phase()),
                tid,
                send_id,
            ));
        }
        if p.gas_units > 0 {
            out.push(transfer(
                format!("network_fee:{send_id}:{}{suffix}", p.transaction_id),
                (merchant.clone(), ledger.account(Kind::NetworkFees, "")),
                p.gas_units,
                (Code::NetworkFee, phase()),
                tid,
                send_id,
            ));
        }
    }
    if payout > 0 {
        out.push(transfer(
            format!("settlement:{send_id}{suffix}"),
            (merchant, ledger.account(Kind::Treasury, "")),
            payout,
            (Code::Settlement, phase()),
            None,
            send_id,
        ));
    }
    out
}

/// The account holding the treasury's USDC burnt on `ledger`'s network and not yet minted on
/// the destination: the treasury's money in flight over the bridge. A treasury account (money
/// held) that no address holds, so it is never compared with the chain.
pub fn in_flight(ledger: &Ledger) -> String {
    ledger.account(Kind::Treasury, "bridge")
}

/// A settlement `settlement_id` of `merchant` paid across networks, once its burn of `amount`
/// is final on `ledger`'s network: the amount moves from the treasury into [`in_flight`] at once
/// (the chain holds it no more), and the merchant's payout from its balance to there is pending
/// until the mint on the destination is final (posted then, and the settlement is paid).
pub fn bridge_burnt(
    ledger: &Ledger,
    merchant: Scoped<i64>,
    settlement_id: &str,
    amount: u128,
) -> Vec<Transfer> {
    if amount == 0 {
        return Vec::new();
    }
    let flight = in_flight(ledger);
    vec![
        transfer(
            format!("bridge_burn:{settlement_id}"),
            (flight.clone(), ledger.account(Kind::Treasury, "")),
            amount,
            (Code::Settlement, Phase::Single),
            None,
            settlement_id,
        ),
        transfer(
            format!("bridge_payout:{settlement_id}"),
            (
                ledger.account(Kind::Merchant, &merchant.id.to_string()),
                flight,
            ),
            amount,
            (Code::Settlement, Phase::Pending),
            None,
            settlement_id,
        ),
    ]
}

/// The account a move of the treasury's float hands its USDC to (and, on the destination,
/// receives it from): CCTP, outside the books. On the source it ends at minus what was minted
/// across, on the destination at plus the same: the two mirror each other.
pub const CCTP: &str = "cctp";

/// The account CCTP's fee on a fast transfer of the treasury's float is booked to: the
/// platform's expense.
pub const CCTP_FEE: &str = "cctp_fee";

/// A move `move_id` of the treasury's float: `amount` of `source`'s USDC burnt, reserved from
/// the treasury into [`in_flight`] when the burn is signed, posted once it is final (voided if
/// it reverts).
pub fn float_burn(source: &Ledger, move_id: &str, amount: u128) -> Option<Transfer> {
    (amount > 0).then(|| {
        transfer(
            format!("float_burn:{move_id}"),
            (in_flight(source), source.account(Kind::Treasury, "")),
            amount,
            (Code::FloatMove, Phase::Pending),
            None,
            move_id,
        )
    })
}

/// A move `move_id` of the treasury's float received on `destination`: of the `amount` burnt,
/// `fee` went to CCTP's fee recipient and the rest was minted to the treasury there. Both leave
/// the source's [`in_flight`] account to CCTP ([`CCTP`], [`CCTP_FEE`]), and the destination's
/// treasury receives what was minted from CCTP.
pub fn float_minted(
    (source, destination): (&Ledger, &Ledger),
    move_id: &str,
    amount: u128,
    fee: u128,
) -> Vec<Transfer> {
    let minted = amount.saturating_sub(fee);
    let out = [
        (
            format!("float_out:{move_id}"),
            source.account(Kind::World, CCTP),
            minted,
        ),
        (
            format!("float_fee:{move_id}"),
            source.account(Kind::World, CCTP_FEE),
            fee.min(amount),
        ),
    ];
    let mut transfers: Vec<Transfer> = out
        .into_iter()
        .filter(|(_, _, amount)| *amount > 0)
        .map(|(id, world, amount)| {
            transfer(
                id,
                (world, in_flight(source)),
                amount,
                (Code::FloatMove, Phase::Single),
                None,
                move_id,
            )
        })
        .collect();
    if minted > 0 {
        transfers.push(transfer(
            format!("float_in:{move_id}"),
            (
                destination.account(Kind::Treasury, ""),
                destination.account(Kind::World, CCTP),
            ),
            minted,
            (Code::FloatMove, Phase::Single),
            None,
            move_id,
        ));
    }
    transfers
}

/// The post (or void) of each pending transfer of `pending`, by id with its accounts and
/// amount.
pub fn end(pending: &[Transfer], post: bool) -> Vec<Transfer> {
    pending
        .iter()
        .filter(|t| t.phase == Phase::Pending)
        .map(|t| Transfer {
            id: format!("{}:{}", if post { "post" } else { "void" }, t.id),
            phase: if post {
                Phase::Post(t.id.clone())
            } else {
                Phase::Void(t.id.clone())
            },
            ..t.clone()
        })
        .collect()
}

/// Gas the treasury's transaction `send_id` spent (`coin` is the network's coin ledger).
pub fn gas(coin: &Ledger, send_id: &str, wei: u128) -> Option<Transfer> {
    (wei > 0).then(|| {
        transfer(
            format!("gas:{send_id}"),
            (
                coin.account(Kind::Gas, ""),
                coin.account(Kind::Treasury, ""),
            ),
            wei,
            (Code::Gas, Phase::Single),
            None,
            send_id,
        )
    })
}

/// The most gas the treasury's transaction `send_id` can spend (its limit × price), reserved
/// while it is out so two transactions cannot count on the same coin; voided once its real gas
/// is known ([`gas`]).
pub fn gas_reserve(coin: &Ledger, send_id: &str, wei: u128) -> Option<Transfer> {
    (wei > 0).then(|| {
        transfer(
            format!("gas_reserve:{send_id}"),
            (
                coin.account(Kind::Gas, ""),
                coin.account(Kind::Treasury, ""),
            ),
            wei,
            (Code::Gas, Phase::Pending),
            None,
            send_id,
        )
    })
}

/// A refund `refund_id` of payment `transaction_id` of `merchant_id`: reserved when asked.
pub fn refund(
    ledger: &Ledger,
    (transaction_id, merchant_id): (i64, i64),
    refund_id: &str,
    units: u128,
) -> Transfer {
    transfer(
        format!("refund:{refund_id}"),
        (
            ledger.account(Kind::Merchant, &merchant_id.to_string()),
            ledger.account(Kind::Treasury, ""),
        ),
        units,
        (Code::Refund, Phase::Pending),
        Some(transaction_id),
        refund_id,
    )
}

/// The return to the customer of money that reached deposit `address` of payment
/// `transaction_id` after the payment was credited (owed to nobody: it stayed in the address's
/// unallocated account): reserved like a refund, paid from the treasury, posted or voided when
/// its transaction is final. The same id as a refund's, so it is reserved once.
pub fn return_extra(
    ledger: &Ledger,
    address: &str,
    transaction_id: i64,
    refund_id: &str,
    units: u128,
) -> Transfer {
    transfer(
        format!("refund:{refund_id}"),
        (
            ledger.account(Kind::Unallocated, &address.to_ascii_lowercase()),
            ledger.account(Kind::Treasury, ""),
        ),
        units,
        (Code::Refund, Phase::Pending),
        Some(transaction_id),
        refund_id,
    )
}

/// A sweep transaction `tx_hash` final: what it moved from the deposit `from` to the treasury
/// (`units` of `ledger`), and the coin its gas cost (`gas_wei`, of `coin`). A reverted sweep
/// moved nothing but its gas.
pub fn sweep(
    (ledger, coin): (&Ledger, &Ledger),
    from: &str,
    tx_hash: &str,
    units: u128,
    gas_wei: u128,
) -> Vec<Transfer> {
    let from = from.to_ascii_lowercase();
    let mut out = Vec::new();
    if units > 0 {
        out.push(transfer(
            format!("sweep:{}:{tx_hash}", ledger.network),
            (
                ledger.account(Kind::Treasury, ""),
                ledger.account(Kind::Custody, &from),
            ),
            units,
            (Code::Sweep, Phase::Single),
            None,
            tx_hash,
        ));
    }
    if gas_wei > 0 {
        out.push(transfer(
            format!("sweep_gas:{}:{tx_hash}", coin.network),
            (
                coin.account(Kind::Gas, ""),
                coin.account(Kind::Custody, &from),
            ),
            gas_wei,
            (Code::SweepGas, Phase::Single),
            None,
            tx_hash,
        ));
    }
    out
}

/// Coin sent by the custody gas address `from` to the deposit `to` for its sweep's gas, final
/// (its own gas is a [`sweep`] with no units).
pub fn gas_funding(
    coin: &Ledger,
    (from, to): (&str, &str),
    tx_hash: &str,
    wei: u128,
) -> Option<Transfer> {
    (wei > 0).then(|| {
        transfer(
            format!("gas_funding:{}:{tx_hash}", coin.network),
            (
                coin.account(Kind::Custody, &to.to_ascii_lowercase()),
                coin.account(Kind::Custody, &from.to_ascii_lowercase()),
            ),
            wei,
            (Code::GasFunding, Phase::Single),
            None,
            tx_hash,
        )
    })
}

/// The operator's funding of `account` (the treasury, or the custody gas address), found at
/// `block`: what the chain holds there beyond the books, with nothing in flight.
pub fn funding(ledger: &Ledger, account: &str, block: u64, units: u128) -> Transfer {
    transfer(
        format!("funding:{account}:{block}"),
        (account.to_owned(), ledger.account(Kind::World, "")),
        units,
        (Code::Funding, Phase::Single),
        None,
        &format!("block {block}"),
    )
}
