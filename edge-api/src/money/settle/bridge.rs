//! Settlement across networks with CCTP V2 (docs/CCTP.md): a merchant that chose to be paid its
//! USDC on network B has its USDC payments made on network A settled by two transactions of the
//! treasury, one on each network:
//!
//! 1. **burn** on A: `depositForBurn` of the batch's payout to the merchant's wallet on B,
//!    receivable by anyone, stored and followed like any settlement transaction
//!    ([`super::settle_group`], [`crate::money::sends`]); final, the bridge waits for its
//!    attestation and the books hold the amount in flight;
//! 2. **attestation**: each run asks the network's attestation service for the burn's message
//!    ([`step`]), checks it field by field against the burn and its signers against the
//!    destination's attesters (`payrail_evm::bridge::check_attested`);
//! 3. **mint** on B: `receiveMessage` of the attested message, stored with the bridge's move to
//!    `minting` in one batch (so two runs sign one mint), followed like the burn; final, the fee
//!    it collected is read from its `MintAndWithdraw`, the settlement is confirmed and its
//!    payments are marked paid with both hashes.
//!
//! Anyone may receive an attested message. A message already received (its nonce used on B) is
//! the settlement's mint whoever sent it: its `MessageReceived` is looked up, and that
//! transaction, once final, is recorded as the settlement's mint ([`received_elsewhere`]).

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use payrail_evm::bridge as checks;
use payrail_evm::chains::{Cctp, CctpTransfer};
use payrail_evm::{cctp, Address, Token};
use shared_types::SendState;
use worker::{Method, Request, RequestInit};

use super::group::NotNow;
use crate::chain::config::Network;
use crate::chain::error::{ChainError, ChainResult};
use crate::chain::rpc;
use crate::ctx::Ctx;
use crate::db::bridges::{self, AttestedMessage, Bridge, Carrier};
use crate::db::sends::{self as db_sends, Call, Leg};
use crate::db::settlements;
use crate::error::ApiError;
use crate::http::{self, FetchFailure};
use crate::money::bridge_reads::{self as reads, burn, cctp_of, read_word, received, BurnAsked};
use crate::money::ledger;
use crate::money::sends::{self, Transfer};
use crate::money::treasury::{self, Treasury};

/// Most bridges a run asks the attestation service about and mints.
const PER_RUN: i64 = 10;
/// The attestation service's deadline.
const DEADLINE: Duration = Duration::from_secs(10);
/// Most node calls one bridge's step makes: the signers' checks (a few), the threshold, the
/// nonce, the log search and the receipt, block and head, then the mint's estimate, price, L1
/// fee, head, balances in flight, nonce and broadcast.
pub(crate) const MOST_STEP_CALLS: u32 = 8 + 1 + 1 + reads::MOST_LOG_CALLS + 3 + 10;
/// The finality a network's transfers ask for, and the most fee (base units) of a burn of
/// `amount` on it: nothing for a standard transfer; for a fast one, the attestation service's
/// quote for the route, never above the network's ceiling (then `Err` with why, and the batch
/// waits).
pub(crate) async fn fee_for(
    source: &Cctp,
    destination: &Cctp,
    amount: u128,
) -> Result<(u32, u128), NotNow> {
    let standard = cctp::FINALIZED_THRESHOLD;
    if source.transfer == CctpTransfer::Standard {
        return Ok((standard, 0));
    }
    let fast = cctp::Finality::Fast.threshold();
    let url = format!(
        "{}/v2/burn/USDC/fees/{}/{}",
        source.attestation_url.trim_end_matches('/'),
        source.domain,
        destination.domain
    );
    let body = match get(&url, checks::MAX_QUOTE_LEN).await {
        Ok(Some(body)) => body,
        Ok(None) => {
            return Err(NotNow::Hold(
                "the attestation service has no fee quote for the route".to_owned(),
            ))
        }
        Err(why) => return Err(why.into()),
    };
    let bps = checks::fee_quote(&body, fast)
        .map_err(|e| format!("the attestation service's fee quote is refused: {e}"))?;
    let fee = checks::max_fee(amount, bps, source.max_fast_fee_bps)
        .map_err(|e| format!("the fast transfer is not sent: {e}"))?;
    Ok((fast, fee))
}

/// A GET of the attestation service: `Ok(None)` on 404 (not seen yet), the body on 200, `Err`
/// with words otherwise. At most `max` bytes are read.
async fn get(url: &str, max: usize) -> Result<Option<Vec<u8>>, String> {
    let mut init = RequestInit::new();
    init.with_method(Method::Get);
    let request = Request::new_with_init(url, &init)
        .map_err(|_| "the attestation service's URL is unusable".to_owned())?;
    let (status, body) = match http::fetch(request, DEADLINE, max + 1).await {
        Ok(answer) => answer,
        Err(FetchFailure::Unreachable) => {
            return Err("the attestation service is unreachable".to_owned())
        }
        Err(FetchFailure::Timeout) => {
            return Err("the attestation service did not answer in time".to_owned())
        }
    };
    if body.len() > max {
        return Err(format!(
            "the attestation service's answer is over {max} bytes"
        ));
    }
    match status {
        200 => Ok(Some(body)),
        404 => Ok(None),
        other => Err(format!("the attestation service answered {other}")),
    }
}

/// A part's share of its bridge's fee, in its order currency: the fee the mint collected, out of
/// the amount burnt, in the proportion of the part's net (rounded to the currency's minor
/// unit). `None` when the part's figures are unreadable.
pub(crate) fn fee_share(part: &settlements::ToFinish) -> Option<rust_decimal::Decimal> {
    use rust_decimal::{Decimal, RoundingStrategy};
    let number = |text: Option<&str>| Decimal::from_str(text?).ok();
    let fee = number(part.bridge_fee.as_deref())?;
    let amount = number(part.bridge_amount.as_deref())?;
    let net = number(Some(&part.net))?;
    let digits = shared_types::checkout::currency_digits(&part.currency).unwrap_or(2);
    if amount <= Decimal::ZERO {
        return None;
    }
    let mut share = (net.checked_mul(fee)? / amount)
        .round_dp_with_strategy(digits, RoundingStrategy::AwayFromZero);
    share.rescale(digits);
    Some(share)
}

/// The cron's part: each bridge whose burn is final, its attestation read and its mint signed
/// (or, received by someone else, recorded), at most [`PER_RUN`] a run. One that cannot go on
/// records why and waits.
pub async fn run(
    ctx: &Ctx,
    networks: &BTreeMap<String, Network>,
    treasury: &Treasury,
) -> Result<(), ApiError> {
    let due = bridges::attesting(&ctx.db, PER_RUN)
        .await
        .map_err(|e| ApiError::internal("read bridges", e.to_string()))?;
    for bridge in due {
        let (Some(source), Some(destination)) = (
            networks.get(&bridge.source_network),
            networks.get(&bridge.destination_network),
        ) else {
            worker::console_warn!(
                "bridge of {}: its networks are no longer configured",
                bridge.carrier_id
            );
            continue;
        };
        if destination.node.calls_left() < MOST_STEP_CALLS {
            continue; // this run's calls on it are spent: next run
        }
        let carrier = bridge.carrier();
        let why = match step(ctx, (source, destination), treasury, &bridge).await {
            Ok(None) => continue,
            Ok(Some(why)) => why,
            Err(e) if e.is_budget() => continue,
            Err(e) => e.public(),
        };
        if bridge.note.as_deref() != Some(why.as_str()) {
            worker::console_warn!("bridge of {}: {why}", bridge.carrier_id);
        }
        if let Err(e) = bridges::note(&ctx.db, carrier, &why, ctx.now()).await {
            worker::console_warn!("record why the bridge of {} waits: {e}", bridge.carrier_id);
        }
    }
    Ok(())
}

/// One bridge's step: `Ok(Some(why))` when it waits.
async fn step(
    ctx: &Ctx,
    (source, destination): (&Network, &Network),
    treasury: &Treasury,
    bridge: &Bridge,
) -> ChainResult<Option<String>> {
    let (from, to) = (
        cctp_of(&bridge.source_network, source)?,
        cctp_of(&bridge.destination_network, destination)?,
    );
    let number = |text: &str| {
        u128::from_str(text).map_err(|_| ChainError::answer("a stored amount is not a number"))
    };
    let asked = BurnAsked {
        source: from,
        destination: to,
        token: &bridge.token,
        recipient: &bridge.mint_recipient,
        amount: number(&bridge.amount)?,
        max_fee: number(&bridge.max_fee)?,
        min_finality: bridge.min_finality,
    };
    let burn = burn(&asked, &treasury.address)?;
    let Some(burn_hash) = bridge.burn_tx_hash.as_deref() else {
        return Err(ChainError::answer("a final burn has no hash"));
    };
    // 1. The attestation: 404 while the service has not seen the burn, pending until it is
    //    signed.
    let url = format!(
        "{}/v2/messages/{}?transactionHash={burn_hash}",
        from.attestation_url.trim_end_matches('/'),
        from.domain
    );
    let body = match get(&url, checks::MAX_MESSAGES_ANSWER_LEN).await {
        Ok(Some(body)) => body,
        Ok(None) => return Ok(Some("waiting for the attestation of the burn".to_owned())),
        Err(why) => return Ok(Some(why)),
    };
    let attested = match checks::attested(&body) {
        Ok(Some(attested)) => attested,
        Ok(None) => return Ok(Some("the attestation of the burn is pending".to_owned())),
        Err(e) => {
            return Ok(Some(format!(
                "the attestation service's answer is refused: {e}"
            )))
        }
    };
    // 2. Its signers, against the destination's attesters and threshold.
    let node = &destination.node;
    let transmitter = to.message_transmitter.to_ascii_lowercase();
    let signers = cctp::recover_signers(&attested.message, &attested.attestation)
        .map_err(|e| ChainError::rule(format!("the attestation is refused: {e}")))?;
    let mut attesters = Vec::new();
    for signer in signers.iter().take(cctp::MAX_SIGNATURES) {
        if read_word(node, &transmitter, cctp::is_enabled_attester_call(*signer)).await? == 1 {
            attesters.push(*signer);
        }
    }
    let threshold = read_word(node, &transmitter, cctp::signature_threshold_call()).await?;
    let threshold = usize::try_from(threshold).unwrap_or(usize::MAX);
    let checked = checks::check_attested(&burn, &attested, &attesters, threshold)
        .map_err(|m| ChainError::rule(format!("the attested message is refused: {m}")))?;
    let carrier = bridge.carrier();
    let now = ctx.now();
    // 3. Received already (anyone may): that transaction is the settlement's (or the float
    //    move's) mint.
    if let Some((hash, fee)) = received(destination, bridge, checked.nonce).await? {
        let mut statements = vec![bridges::minted(carrier, (&hash, fee), now)?];
        let when = match carrier {
            Carrier::Settlement(settlement) => {
                statements.extend(settlements::confirm(settlement, now)?);
                crate::db::ledger::When::holds(
                    "(SELECT mint_tx_hash FROM bridges WHERE settlement_id = ?1) = ?2 \
                     AND (SELECT state FROM settlements WHERE id = ?1) = 'confirmed'",
                    vec![bridge.carrier_id.as_str().into(), hash.as_str().into()],
                )
            }
            Carrier::FloatMove(id) => crate::db::ledger::When::holds(
                "(SELECT mint_tx_hash FROM float_moves WHERE id = ?1) = ?2",
                vec![id.into(), hash.as_str().into()],
            ),
        };
        statements.extend(ledger::end_mint(ctx, bridge, None, Some(fee), &when).await?);
        crate::db::batch(&ctx.db, statements).await?;
        return Ok(None);
    }
    // 4. The treasury's mint: the call, its gas and price on the destination, its gas reserved.
    let message = format!("0x{}", hex::encode(&attested.message));
    let attestation = format!("0x{}", hex::encode(&attested.attestation));
    let data = cctp::receive_message_call(&attested.message, &attested.attestation);
    let call = Call {
        to: &transmitter,
        data: &data,
    };
    let at_node = |e: ChainError| e.within(format!("the {} node", bridge.destination_network));
    let gas = treasury::estimate_call(node, &treasury.address, call)
        .await
        .map_err(|e| at_node(e).within("the mint cannot be sent"))?;
    // Room for the state to move between the estimate and the block.
    let gas = gas.saturating_add(gas / 5);
    let price = treasury::gas_price(node).await.map_err(at_node)?;
    let l1_fee = treasury::l1_fee_bound(destination).await.map_err(at_node)?;
    let gas_wei = treasury::most_fee(gas, price, l1_fee)
        .ok_or_else(|| ChainError::answer("the mint's fees are out of range"))?;
    let name = bridge.destination_network.as_str();
    let (_, coins) = sends::available(ctx, (name, destination), treasury, Token::Native).await?;
    if coins < gas_wei {
        return Ok(Some(format!(
            "the treasury can spend {} wei on {name} for gas (its balance less what is in \
             flight); the mint needs {gas_wei}",
            coins
        )));
    }
    let head = rpc::head(node).await.map_err(|e| at_node(e.into()))?;
    let send_id = sends::new_id()?;
    let book = ledger::reserve_gas(ctx, name, &send_id, gas_wei).await?;
    let recipient = Address::parse(&bridge.mint_recipient)
        .map_err(|_| ChainError::answer("the merchant's wallet is not an address"))?;
    let transfer = Transfer {
        purpose: carrier.purpose(),
        token: Token::Native,
        to: recipient,
        units: 0,
        netted: 0,
        gas,
        price,
        l1_fee,
        rate_source: "",
        call: Some((call, Leg::Mint)),
        guarded: true,
    };
    let nonce = format!("0x{}", hex::encode(checked.nonce));
    let before = vec![bridges::minting(
        carrier,
        &AttestedMessage {
            message: &message,
            attestation: &attestation,
            nonce: &nonce,
        },
        now,
    )?];
    let after = book.statements(&db_sends::in_state(&send_id, SendState::Live), now)?;
    sends::send(
        ctx,
        treasury,
        (name, destination),
        head,
        (&send_id, &transfer),
        (before, after),
    )
    .await?;
    Ok(None)
}
