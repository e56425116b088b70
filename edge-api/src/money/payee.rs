//! Whether a settlement wallet can receive what the treasury sends it, judged when the wallet is
//! set: never one of Payrail's own addresses (the treasury, custody's gas address, a deposit or
//! top-up address given out to any institution: money sent there lands back in custody, booked
//! to nobody), never a contract the deployment is configured with (a token, a price feed, an
//! oracle: tokens sent to them are lost), and a contract at all only when an admin confirms it
//! is a contract wallet that can receive the assets (a multisig such as Safe can; most other
//! contracts cannot, and tokens sent to them are lost). The pure rules of an address's shape,
//! burn addresses among them, are `wallet_address`'s.

use serde_json::json;
use shared_types::ErrorCode;

use super::{books, treasury};
use crate::chain::{networks, rpc};
use crate::ctx::Ctx;
use crate::db::deposits;
use crate::error::{ApiError, OrInternal};

/// Refuses `address` (as `wallet_address` stored it) as the settlement wallet on `network`
/// unless it can receive what the treasury sends (see the module). `contract_wallet` is the
/// admin's word that a contract at the address is a wallet able to receive the assets. The
/// node of a watched network is asked for the address's code; a node that cannot answer refuses
/// the change for now (503), never lets an unchecked address through.
pub async fn check(
    ctx: &Ctx,
    network: &str,
    address: &str,
    contract_wallet: bool,
) -> Result<(), ApiError> {
    if !address.starts_with("0x") {
        return Ok(()); // not an EVM address: the treasury never pays one
    }
    let lower = address.to_ascii_lowercase();
    let own = |what: &str| {
        Err(ApiError::invalid_request(format!(
            "address {address} is {what}, not a merchant's wallet: money sent there would never \
             reach the merchant"
        )))
    };
    if treasury::treasury(ctx)?.is_some_and(|t| t.address == lower) {
        return own("Payrail's treasury");
    }
    if books::gas_address(ctx)?.is_some_and(|gas| gas == lower) {
        return own("Payrail's custody gas address");
    }
    if deposits::custody_holds(&ctx.db, &lower)
        .await
        .or_internal("read custody addresses")?
    {
        return own("one of Payrail's deposit addresses");
    }
    let configured = networks(ctx)?;
    for (name, n) in &configured {
        let contracts = n
            .tokens
            .iter()
            .map(|(asset, t)| (format!("the {asset} token contract"), &t.address))
            .chain(
                n.feeds
                    .iter()
                    .map(|(pair, f)| (format!("the {pair} price feed"), &f.address)),
            )
            .chain(
                n.sequencer_uptime_feed
                    .iter()
                    .map(|f| ("the sequencer uptime feed".to_owned(), &f.address)),
            )
            .chain(
                n.l1_fee_oracle
                    .iter()
                    .map(|a| ("the L1 fee oracle".to_owned(), a)),
            );
        for (what, contract) in contracts {
            if contract.eq_ignore_ascii_case(&lower) {
                return own(&format!("{what} on {name}"));
            }
        }
    }
    let Some(watched) = configured.get(network) else {
        return Ok(()); // no node: nothing is paid on this network until one is configured
    };
    let unreachable = || {
        ApiError::new(
            ErrorCode::PaymentsUnavailable,
            format!(
                "the wallet cannot be checked now: the node of {network} did not answer; try \
                 again shortly"
            ),
        )
    };
    let code = rpc::call(&watched.node, "eth_getCode", json!([lower, "latest"]))
        .await
        .map_err(|_| unreachable())?;
    let code = code.as_str().ok_or_else(unreachable)?;
    let has_code = code
        .strip_prefix("0x")
        .is_some_and(|hex| hex.bytes().any(|b| b != b'0'));
    if has_code && !contract_wallet {
        return Err(ApiError::invalid_request(format!(
            "address {address} is a contract on {network}, not an account: tokens and ether \
             sent to most contracts are lost. If it is a contract wallet (a multisig such as \
             Safe) that can receive what is settled to it, confirm it (contract_wallet)"
        )));
    }
    Ok(())
}
