//! Moving the treasury's float between networks (docs/CCTP.md, "Moving float"): the operator
//! asks for an amount of USDC to leave the treasury on one network and arrive at the treasury
//! on another, and the treasury burns it there with CCTP, minting it to its own address on the
//! destination. The burn is signed, stored and sent here, in one batch with the move's row and
//! the books' reservations; from then on the move is a bridge like a settlement's
//! ([`crate::money::settle::bridge`] reads its attestation and mints, [`crate::money::sends`]
//! follows both legs, [`ledger`] books them: the amount into flight, then out to CCTP on the
//! source and in from it on the destination, CCTP's fee and both legs' gas as the platform's
//! expenses).
//!
//! A move is refused (409, naming the figures) when it would leave the source's treasury
//! below what its settlements owe (the merchants' balances there and what the treasury owes
//! the institutions held in their objects), beyond what the treasury holds less what is in
//! flight, or without the gas for both legs. The operator's reference makes a repeat the same
//! move: the same reference again answers the move it made, whoever asked first.

use std::collections::BTreeMap;
use std::str::FromStr;

use payrail_evm::Token;
use rust_decimal::Decimal;
use serde::Serialize;
use shared_types::ledger::Kind;
use shared_types::{ErrorCode, SendState};

use crate::chain::config::{Network, NATIVE_DECIMALS};
use crate::chain::error::ChainError;
use crate::chain::{evm, rpc};
use crate::ctx::{timestamp, Ctx};
use crate::db::bridges::BurnTerms;
use crate::db::float_moves::{self, FloatMove, NewFloatMove};
use crate::db::ledger as books;
use crate::db::sends::{self as db_sends, Call, Leg, Purpose};
use crate::error::{ApiError, OrInternal};
use crate::money::bridge_reads::{self, cctp_of, BurnAsked, USDC};
use crate::money::ledger;
use crate::money::sends::{self, Transfer};
use crate::money::settle::bridge::fee_for;
use crate::money::settle::group::{NotNow, MINT_GAS};
use crate::money::treasury::{self, Treasury};

/// The longest reference.
pub const MAX_REFERENCE: usize = 100;

/// A move as the operator asks for it.
pub struct Ask<'a> {
    /// The network the USDC leaves.
    pub from: &'a str,
    /// The network it arrives on.
    pub to: &'a str,
    /// USDC, decimal text.
    pub amount: &'a str,
    /// The operator's reference: the same again is the same move.
    pub reference: &'a str,
}

/// A move as the operator API answers it.
#[derive(Debug, Clone, Serialize)]
pub struct View {
    /// `fm_…`.
    pub id: String,
    /// The operator's reference.
    pub reference: String,
    /// The network the USDC leaves.
    pub from: String,
    /// The network it arrives on.
    pub to: String,
    /// USDC burnt on `from`.
    pub amount: String,
    /// `fast` (a fee, minutes) or `standard` (no fee, the source's finality).
    pub transfer: &'static str,
    /// The most fee a fast transfer accepted, in USDC ("0" for standard).
    pub max_fee: String,
    /// `burning`, `attesting`, `minting`, `moved` or `failed` (the burn reverted: nothing
    /// moved but its gas).
    pub state: &'static str,
    /// The fee CCTP kept, in USDC, once moved.
    pub fee: Option<String>,
    /// What reached the treasury on `to`, in USDC, once moved.
    pub received: Option<String>,
    /// The burn on `from`, once final.
    pub burn_tx_hash: Option<String>,
    /// The transaction that minted on `to`, once final.
    pub mint_tx_hash: Option<String>,
    /// Why it waits, when it does.
    pub note: Option<String>,
    /// Who asked.
    pub requested_by: String,
    /// ISO 8601.
    pub created_at: String,
    /// ISO 8601.
    pub updated_at: String,
}

/// USDC's decimals on every network CCTP serves.
const USDC_DECIMALS: u32 = 6;

/// `units` of USDC as decimal text.
fn usdc_text(units: &str) -> String {
    u128::from_str(units)
        .ok()
        .and_then(|u| evm::from_units(u, USDC_DECIMALS))
        .map_or_else(|| units.to_owned(), |d| d.to_string())
}

impl View {
    /// The stored move `m`, in the operator API's words.
    pub fn of(m: &FloatMove) -> Result<View, ApiError> {
        let minted = m.state == "minted";
        let received = match (&m.fee, minted) {
            (Some(fee), true) => {
                let amount = u128::from_str(&m.amount).unwrap_or(0);
                let fee = u128::from_str(fee).unwrap_or(0);
                Some(usdc_text(&amount.saturating_sub(fee).to_string()))
            }
            _ => None,
        };
        Ok(View {
            id: m.id.clone(),
            reference: m.reference.clone(),
            from: m.source_network.clone(),
            to: m.destination_network.clone(),
            amount: usdc_text(&m.amount),
            transfer: if m.min_finality < payrail_evm::cctp::FINALIZED_THRESHOLD {
                "fast"
            } else {
                "standard"
            },
            max_fee: usdc_text(&m.max_fee),
            state: match m.state.as_str() {
                "burning" => "burning",
                "attesting" => "attesting",
                "minting" => "minting",
                "minted" => "moved",
                _ => "failed",
            },
            fee: m.fee.as_deref().filter(|_| minted).map(usdc_text),
            received,
            burn_tx_hash: m.burn_tx_hash.clone(),
            mint_tx_hash: m.mint_tx_hash.clone(),
            note: m.note.clone(),
            requested_by: m.requested_by.clone(),
            created_at: timestamp(m.created_at)?,
            updated_at: timestamp(m.updated_at)?,
        })
    }
}

/// A refusal the operator can act on: 409 with `why`.
fn refused(why: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::Conflict, why)
}

/// A chain's answer turned into the operator's: a rule broken is a refusal naming it; a node
/// that cannot be read is a refusal to ask again (nothing was sent).
fn chain_refusal(e: ChainError) -> ApiError {
    match e {
        ChainError::Db(e) => ApiError::internal("float move", e),
        ChainError::Rule(why) => refused(why),
        other => {
            refused(format!("{}; nothing was sent: ask again", other.public())).with_retry_after(30)
        }
    }
}

/// Checks `ask` and, unless its reference already made a move, makes it: the burn signed,
/// stored with the move and its books' reservations in one batch, and sent. `(move, true)`
/// when this request made it, `(move, false)` when the reference had (a repeat).
pub async fn create(
    ctx: &Ctx,
    ask: &Ask<'_>,
    requested_by: &str,
) -> Result<(View, bool), ApiError> {
    let reference = ask.reference.trim();
    if reference.is_empty()
        || reference.len() > MAX_REFERENCE
        || !reference.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
    {
        return Err(ApiError::invalid_request(format!(
            "reference must be 1 to {MAX_REFERENCE} printable ASCII characters: it makes a \
             repeat of the request the same move"
        )));
    }
    if ask.from == ask.to {
        return Err(ApiError::invalid_request(
            "from and to must be two different networks",
        ));
    }
    let amount = Decimal::from_str(ask.amount.trim())
        .ok()
        .filter(|a| *a > Decimal::ZERO && a.scale() <= USDC_DECIMALS)
        .and_then(|a| evm::to_units(a, USDC_DECIMALS))
        .filter(|u| *u > 0 && *u <= u128::from(u64::MAX))
        .ok_or_else(|| {
            ApiError::invalid_request(
                "amount must be a positive USDC amount with at most 6 decimals, as text (e.g. \
                 \"2500.00\")",
            )
        })?;
    if let Some(made) = float_moves::by_reference(&ctx.db, reference)
        .await
        .or_internal("read float moves")?
    {
        return repeat(&made, ask, amount);
    }
    let networks = crate::chain::networks(ctx)?;
    let (from, to) = (
        across_network(&networks, ask.from, "from")?,
        across_network(&networks, ask.to, "to")?,
    );
    let Some(treasury) = treasury::treasury(ctx)? else {
        return Err(refused(
            "this deployment has no treasury key: there is no float to move",
        ));
    };
    let made = burn(
        ctx,
        &treasury,
        (ask.from, from),
        (ask.to, to),
        amount,
        reference,
        requested_by,
    )
    .await?;
    match made {
        Some(id) => {
            let m = float_moves::get(&ctx.db, &id)
                .await
                .or_internal("read the float move")?
                .ok_or_else(|| ApiError::internal("float move", "the stored move is not found"))?;
            Ok((View::of(&m)?, true))
        }
        // Not stored: a request with the same reference was first, or another transaction of
        // the treasury took the nonce.
        None => match float_moves::by_reference(&ctx.db, reference)
            .await
            .or_internal("read float moves")?
        {
            Some(made) => repeat(&made, ask, amount),
            None => Err(refused(
                "the treasury was signing another transaction on the source network; nothing was \
                 sent: ask again",
            )
            .with_retry_after(5)),
        },
    }
}

/// The move `made` under the reference asked again: the same move when it asks the same, 409
/// when it asks another.
fn repeat(made: &FloatMove, ask: &Ask<'_>, amount: u128) -> Result<(View, bool), ApiError> {
    if made.source_network != ask.from
        || made.destination_network != ask.to
        || made.amount != amount.to_string()
    {
        return Err(refused(format!(
            "the reference {:?} already made move {} ({} USDC from {} to {}): a reference names \
             one move",
            made.reference,
            made.id,
            usdc_text(&made.amount),
            made.source_network,
            made.destination_network
        )));
    }
    Ok((View::of(made)?, false))
}

/// The network `name` (the request's `field`), configured with CCTP and USDC: 400 naming what
/// is missing.
fn across_network<'a>(
    networks: &'a BTreeMap<String, Network>,
    name: &str,
    field: &str,
) -> Result<&'a Network, ApiError> {
    let network = networks.get(name).ok_or_else(|| {
        ApiError::invalid_request(format!(
            "{field} must be a configured network ({}); {name:?} is not",
            networks.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    })?;
    if network.cctp.is_none() || !network.tokens.contains_key(USDC) {
        return Err(ApiError::invalid_request(format!(
            "{field}: {name} has no CCTP contracts or no USDC configured, so no float moves \
             there"
        )));
    }
    Ok(network)
}

/// What the treasury's books say it can spare of `usdc` on its network: its available balance
/// (less what its transactions reserve) less what is owed there (each merchant's positive
/// available balance, and what the treasury owes each institution held in its object).
async fn spare(ctx: &Ctx, usdc: &ledger::Asset<'_>) -> Result<(i128, i128), ApiError> {
    let accounts = books::accounts_of_ledger(&ctx.db, usdc.network, &usdc.token.lower())
        .await
        .or_internal("read the treasury's books")?;
    let (mut available, mut owed) = (0i128, 0i128);
    for account in &accounts {
        let (kind, totals) = account.totals().or_internal("read an account's totals")?;
        match kind {
            Kind::Treasury if account.owner.is_empty() => available += totals.available(kind),
            Kind::Merchant => owed += totals.available(kind).max(0),
            Kind::World if account.owner.starts_with("institution:") => {
                owed += totals.balance(kind).max(0);
            }
            _ => {}
        }
    }
    Ok((available, owed))
}

/// [`chain_refusal`] of what the `name` node answered.
fn at(name: &str) -> impl Fn(ChainError) -> ApiError + '_ {
    move |e| chain_refusal(e.within(format!("the {name} node")))
}

/// Signs, stores and sends the move's burn: `Ok(Some(id))` when stored, `Ok(None)` when the
/// batch stored nothing (the reference or the nonce was taken by a concurrent request).
async fn burn(
    ctx: &Ctx,
    treasury: &Treasury,
    (from_name, from): (&str, &Network),
    (to_name, to): (&str, &Network),
    amount: u128,
    reference: &str,
    requested_by: &str,
) -> Result<Option<String>, ApiError> {
    let usdc = ledger::usdc(ctx, from_name).map_err(chain_refusal)?;
    let Token::Erc20(usdc_address) = usdc.token else {
        return Err(refused(format!(
            "{from_name}'s USDC is not a token contract"
        )));
    };
    let words = |units: i128| ledger::words(units, &usdc);
    // 1. The books: what the treasury can spare once what is owed there stays.
    let (available, owed) = spare(ctx, &usdc).await?;
    let wanted = i128::try_from(amount).unwrap_or(i128::MAX);
    if available.saturating_sub(owed) < wanted {
        return Err(refused(format!(
            "the treasury's books hold {} on {from_name} (after what is reserved) and its \
             settlements owe {} there: at most {} can move, not {}",
            words(available),
            words(owed),
            words(available.saturating_sub(owed).max(0)),
            words(wanted)
        )));
    }
    // 2. The chain: the USDC and the coin the treasury has there less what is in flight, the
    //    token messenger's allowance, and the coin on the destination for the mint.
    let (source, destination) = (
        cctp_of(from_name, from).map_err(chain_refusal)?,
        cctp_of(to_name, to).map_err(chain_refusal)?,
    );
    crate::chain::check_chain(from_name, from)
        .await
        .map_err(at(from_name))?;
    crate::chain::check_chain(to_name, to)
        .await
        .map_err(at(to_name))?;
    let (have, coins) = sends::available(ctx, (from_name, from), treasury, usdc.token)
        .await
        .map_err(at(from_name))?;
    if have < amount {
        return Err(refused(format!(
            "the treasury can send {} on {from_name} (its balance less what is in flight); {} \
             asked",
            words(i128::try_from(have).unwrap_or(i128::MAX)),
            words(wanted)
        )));
    }
    let allowed = treasury::allowance(
        &from.node,
        usdc_address,
        &treasury.address,
        &source.token_messenger,
    )
    .await
    .map_err(at(from_name))?;
    if allowed < amount {
        return Err(refused(crate::money::settle::group::not_allowed(
            from_name, to_name,
        )));
    }
    let (finality, max_fee) = match fee_for(source, destination, amount).await {
        Ok(fee) => fee,
        Err(NotNow::Hold(why)) => return Err(refused(why)),
        Err(NotNow::Raced) => {
            return Err(refused(
                "the attestation service's fee quote cannot be read now: ask again",
            )
            .with_retry_after(30))
        }
    };
    let asked = BurnAsked {
        source,
        destination,
        token: &usdc_address.lower(),
        recipient: &treasury.address,
        amount,
        max_fee,
        min_finality: finality,
    };
    let data = bridge_reads::burn(&asked, &treasury.address)
        .map_err(chain_refusal)?
        .deposit_for_burn_call();
    let messenger = source.token_messenger.to_ascii_lowercase();
    let call = Call {
        to: &messenger,
        data: &data,
    };
    let node = &from.node;
    let gas = treasury::estimate_call(node, &treasury.address, call)
        .await
        .map_err(|e| at(from_name)(e.within("the burn cannot be sent")))?;
    let price = treasury::gas_price(node).await.map_err(at(from_name))?;
    let l1_fee = treasury::l1_fee_bound(from).await.map_err(at(from_name))?;
    let gas_wei = treasury::most_fee(gas, price, l1_fee)
        .ok_or_else(|| refused("the burn's fees are out of range"))?;
    let coin = |wei: u128| {
        evm::from_units(wei, NATIVE_DECIMALS).map_or_else(|| wei.to_string(), |d| d.to_string())
    };
    if coins < gas_wei {
        return Err(refused(format!(
            "the treasury can spend {} {} on {from_name} for gas (its balance less what is in \
             flight); the burn needs {}",
            coin(coins),
            crate::chain::config::coin(from_name),
            coin(gas_wei)
        )));
    }
    let to_node = &to.node;
    let mint_price = treasury::gas_price(to_node).await.map_err(at(to_name))?;
    let mint_l1 = treasury::l1_fee_bound(to).await.map_err(at(to_name))?;
    let mint_cost = treasury::most_fee(MINT_GAS, mint_price, mint_l1)
        .ok_or_else(|| refused("the mint's fees are out of range"))?;
    let (_, to_coins) = sends::available(ctx, (to_name, to), treasury, Token::Native)
        .await
        .map_err(at(to_name))?;
    if to_coins < mint_cost {
        return Err(refused(format!(
            "the treasury can spend {} {} on {to_name} for the mint's gas (its balance less \
             what is in flight); {} are needed",
            coin(to_coins),
            crate::chain::config::coin(to_name),
            coin(mint_cost)
        )));
    }
    let destination_block = rpc::head(to_node)
        .await
        .map_err(|e| at(to_name)(e.into()))?;
    let head = rpc::head(node).await.map_err(|e| at(from_name)(e.into()))?;
    // 3. Signed and stored with the move and the books' reservations, then sent.
    let id = crate::crypto::random_token("fm_").or_internal("make a float move id")?;
    let send_id = sends::new_id().map_err(chain_refusal)?;
    let book = ledger::reserve_float_burn(ctx, &usdc, (&id, &send_id), amount, gas_wei)
        .await
        .map_err(chain_refusal)?;
    let now = ctx.now();
    let before = vec![float_moves::insert(&NewFloatMove {
        id: &id,
        reference,
        burn: BurnTerms {
            source_network: from_name,
            destination_network: to_name,
            token: &usdc_address.lower(),
            amount,
            max_fee,
            min_finality: finality,
            mint_recipient: &treasury.address,
            destination_block,
        },
        requested_by,
        now,
    })
    .or_internal("store the float move")?];
    let after = book
        .statements(&db_sends::in_state(&send_id, SendState::Live), now)
        .or_internal("reserve the float move")?;
    let transfer = Transfer {
        purpose: Purpose::FloatMove(&id),
        token: usdc.token,
        to: payrail_evm::Address::parse(&treasury.address)
            .map_err(|_| ApiError::internal("float move", "the treasury is not an address"))?,
        units: amount,
        netted: 0,
        gas,
        price,
        l1_fee,
        rate_source: "",
        call: Some((call, Leg::Burn)),
        guarded: true,
    };
    let sent = sends::send(
        ctx,
        treasury,
        (from_name, from),
        head,
        (&send_id, &transfer),
        (before, after),
    )
    .await
    .map_err(chain_refusal)?;
    Ok(sent.map(|_| id))
}

/// The moves newest first, at most `limit`, those created before the move `before` when given.
pub async fn list(ctx: &Ctx, before: Option<&str>, limit: i64) -> Result<Vec<View>, ApiError> {
    let cursor = match before {
        None => None,
        Some(id) => {
            let m = float_moves::get(&ctx.db, id)
                .await
                .or_internal("read float moves")?
                .ok_or_else(|| {
                    ApiError::invalid_request(format!("before: no float move {id:?}"))
                })?;
            Some((m.created_at, m.id))
        }
    };
    float_moves::list(
        &ctx.db,
        cursor.as_ref().map(|(at, id)| (*at, id.as_str())),
        limit,
    )
    .await
    .or_internal("read float moves")?
    .iter()
    .map(View::of)
    .collect()
}

/// The move `id`.
pub async fn get(ctx: &Ctx, id: &str) -> Result<View, ApiError> {
    let m = float_moves::get(&ctx.db, id)
        .await
        .or_internal("read the float move")?
        .ok_or_else(|| ApiError::not_found(format!("no float move {id:?}")))?;
    View::of(&m)
}

/// The moves not yet moved nor failed, for the portal's overview: USDC leaving one network's
/// treasury for another's.
pub async fn in_flight(db: &crate::db::Db) -> Result<Vec<View>, ApiError> {
    float_moves::in_flight(db, 20)
        .await
        .or_internal("read float moves")?
        .iter()
        .map(View::of)
        .collect()
}
