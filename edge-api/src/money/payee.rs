//! Whether a settlement wallet can receive what the treasury sends it, judged when the wallet is
//! set: never one of Payrail's own addresses (the treasury, custody's gas address, a deposit or
//! top-up address given out to any institution: money sent there lands back in custody, booked
//! to nobody), never a contract the deployment is configured with (a token, a price feed, an
//! oracle, a CCTP contract: tokens sent to them are lost), and a contract at all only when an
//! admin confirms it is a contract wallet that can receive the assets (a multisig such as Safe
//! can; most other contracts cannot, and tokens sent to them are lost), and never an address on
//! a sanctions list ([`super::screening`]). The pure rules of an address's shape, burn addresses among them,
//! are `wallet_address`'s.

use serde_json::json;
use shared_types::ErrorCode;

use shared_types::ids::InstitutionId;

use super::{books, screening, treasury};
use crate::chain::{custody, networks, rpc};
use crate::ctx::Ctx;
use crate::db::screenings::{self, Subject};
use crate::db::Stmt;
use crate::error::{ApiError, OrInternal};

/// Refuses `address` (as `wallet_address` stored it) as the settlement wallet on `network`
/// unless it can receive what the treasury sends (see the module). `contract_wallet` is the
/// admin's word that a contract at the address is a wallet able to receive the assets. The
/// node of a watched network is asked for the address's code; a node that cannot answer refuses
/// the change for now (503), never lets an unchecked address through. The address is screened
/// for merchant `merchant_id` of `institution`: a listed one is refused (its decision stored);
/// a clear one's decision is returned, to store with the change.
pub async fn check(
    ctx: &Ctx,
    (network, address): (&str, &str),
    contract_wallet: bool,
    (institution, merchant_id): (InstitutionId, i64),
) -> Result<Option<Stmt>, ApiError> {
    if !address.starts_with("0x") {
        return Ok(None); // not an EVM address: the treasury never pays one
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
    if custody::holds(ctx, &lower).await? {
        return own("one of Payrail's deposit addresses");
    }
    let configured = networks(ctx)?;
    for (name, n) in &configured {
        for (what, contract) in n.contracts() {
            if contract.eq_ignore_ascii_case(&lower) {
                return own(&format!("{what} on {name}"));
            }
        }
    }
    let watched = configured.get(network);
    let merchant = merchant_id.to_string();
    let screened = screening::screen(ctx, (network, watched), &lower, None).await?;
    let decision = screened.record(institution, (Subject::Wallet, &merchant), ctx.now())?;
    if screened.listed() {
        screenings::record(&ctx.db, &decision)
            .await
            .or_internal("record a screening")?;
        return Err(ApiError::invalid_request(format!(
            "{}: Payrail may not pay it, so it cannot be a settlement wallet",
            screened.reason()
        )));
    }
    let decision = screenings::insert(&decision).or_internal("record a screening")?;
    let Some(watched) = watched else {
        // No node: nothing is paid on this network until one is configured (and every payout
        // is screened again before it is signed).
        return Ok(Some(decision));
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
    Ok(Some(decision))
}
