//! What starting a settlement takes, for D1's settlements and held institutions' alike: a
//! group of payments (one merchant, network and asset) priced for one transaction
//! ([`price_group`]), whether the treasury can send it ([`covers`]), and why it does not settle
//! now ([`NotNow`], [`hold`]).

use std::collections::BTreeMap;

use payrail_evm::Token;
use shared_types::ids::InstitutionId;

use super::plan;
use crate::chain::config::{self, Network, NATIVE_DECIMALS};
use crate::chain::error::{ChainError, ChainResult};
use crate::chain::{evm, rates, rpc};
use crate::crypto;
use crate::ctx::Ctx;
use crate::db::notifications::NotificationKind;
use crate::db::screenings::{self, Subject};
use crate::db::settlements::{self, Settleable};
use crate::db::{wallets, Db};
use crate::error::{ApiError, OrInternal};
use crate::money::sends;
use crate::money::treasury::{self, estimate, gas_price, Treasury};
use crate::money::{ledger, screening};

/// Most groups (merchant, network, asset) a run starts settling.
pub(super) const GROUPS_PER_RUN: usize = 5;
/// Most payments in one batch.
pub(super) const BATCH_LIMIT: usize = 50;

/// Why a group does not settle now.
pub(crate) enum NotNow {
    /// Shown on its payments, and told to the institution.
    Hold(String),
    /// Someone else is settling it (a concurrent run won the batch): nothing to record.
    Raced,
}

impl From<String> for NotNow {
    fn from(why: String) -> Self {
        NotNow::Hold(why)
    }
}

impl From<ChainError> for NotNow {
    fn from(e: ChainError) -> Self {
        worker::console_warn!("settlement: {e}");
        if e.is_budget() {
            // The run's calls are spent: nothing about these payments to record.
            return NotNow::Raced;
        }
        NotNow::Hold(e.public())
    }
}

/// The most node calls starting one group's settlement makes: the chain id, the wallet's
/// screening (the head and the oracle), the gas's rate in each of up to five currencies, the
/// head, the price, the L1 data fee's bound, the balances and nonce, two estimates, the nonce
/// and the broadcast.
pub(crate) const MOST_GROUP_CALLS: u32 = 1 + 2 + 5 * 5 + 1 + 2 + 1 + 3 + 2 + 1 + 1;

/// A group's key: institution, merchant, network, asset.
pub(super) type GroupKey = (InstitutionId, i64, String, String);

/// The groups `due` makes that have no settlement out (`sending`), at most [`BATCH_LIMIT`]
/// payments each and [`GROUPS_PER_RUN`] groups: never held first, then the least recently held.
/// Batches never mix institutions: each group is one institution's merchant, network and asset.
pub(super) fn groups(
    due: Vec<Settleable>,
    sending: &[GroupKey],
) -> Vec<(GroupKey, Vec<Settleable>)> {
    let mut groups: BTreeMap<GroupKey, Vec<Settleable>> = BTreeMap::new();
    for d in due {
        let key = (
            d.institution_id,
            d.merchant_id,
            d.network.clone(),
            d.asset.clone(),
        );
        if !sending.contains(&key) {
            let group = groups.entry(key).or_default();
            if group.len() < BATCH_LIMIT {
                group.push(d);
            }
        }
    }
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by_key(|(_, group)| group.iter().map(|d| d.held_at).max().unwrap_or(0));
    groups.truncate(GROUPS_PER_RUN);
    groups
}

/// Records `reason` on the payments (in D1, or in the object that holds them) and tells the
/// institution when it is new for any of them.
pub(crate) async fn hold(
    ctx: &Ctx,
    held: Option<&Db>,
    institution_id: InstitutionId,
    ids: &[i64],
    reason: &str,
) -> Result<(), ApiError> {
    let new = settlements::hold(
        held.unwrap_or(&ctx.db),
        (institution_id, ids),
        reason,
        ctx.now(),
    )
    .await
    .or_internal("record settlement hold")?;
    if new.is_empty() {
        return Ok(());
    }
    let list = new
        .iter()
        .map(|id| id.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let subject = "Payrail is holding payments it cannot settle".to_owned();
    let body = format!(
        "These payments are held in custody and not settled yet: {list}. Reason: {reason}. \
         They settle by themselves once this is fixed; the portal shows the reason on each."
    );
    crate::notify::admins(
        ctx,
        institution_id,
        NotificationKind::SettlementHeld,
        &subject,
        &body,
    )
    .await
}

/// Screens the merchant's wallet `wallet` on network `name` before a payout to it is signed:
/// clear, its [`screening::Read`]; listed since it was set, the payout is held with the reason
/// (the decision stored once per payout, in D1 or in the object that holds it); an oracle that
/// cannot be read holds it too, never lets it through.
async fn screen_wallet(
    ctx: &Ctx,
    held: Option<&Db>,
    (name, network): (&str, &Network),
    wallet: &str,
    first: &Settleable,
) -> Result<screening::Read, NotNow> {
    let read = match screening::screen(ctx, (name, Some(network)), wallet, None).await {
        Ok(read) => read,
        // The run's calls are spent: next run, with nothing to tell.
        Err(screening::Unscreened::Budget) => return Err(NotNow::Raced),
        Err(screening::Unscreened::Oracle(err)) => return Err(NotNow::Hold(err.description)),
        Err(screening::Unscreened::Internal(err)) => {
            err.log_with("screening a payout's wallet");
            return Err(NotNow::Raced);
        }
    };
    if !read.listed() {
        return Ok(read);
    }
    let subject_id = first.transaction_id.to_string();
    let stored = async {
        let record = read.record(
            first.institution_id,
            (Subject::Payout, &subject_id),
            ctx.now(),
        )?;
        crate::db::batch(
            held.unwrap_or(&ctx.db),
            vec![screenings::insert_once(&record).or_internal("record a screening")?],
        )
        .await
        .or_internal("record a screening")
    };
    if let Err(err) = stored.await {
        err.log_with("the screening of a held payout");
    }
    Err(NotNow::Hold(format!(
        "{}: nothing is paid to it; set another settlement wallet for the merchant (it is \
         screened when set)",
        read.reason()
    )))
}

/// The statement storing the clear screening of `priced`'s wallet with settlement
/// `settlement_id` (of `first`'s institution), in the batch that starts it.
pub(super) fn screening_of(
    priced: &Priced<'_>,
    first: &Settleable,
    settlement_id: &str,
    now: i64,
) -> Result<crate::db::Stmt, NotNow> {
    let record = priced
        .screened
        .record(first.institution_id, (Subject::Payout, settlement_id), now)
        .map_err(|e| NotNow::Hold(e.description))?;
    screenings::insert(&record).map_err(|e| ChainError::from(e).into())
}

/// A group priced for one transaction: everything its books and its signing need.
pub(super) struct Priced<'a> {
    pub(super) name: &'a str,
    pub(super) network: &'a Network,
    pub(super) wallet: payrail_evm::Address,
    pub(super) wallet_text: String,
    pub(super) head: u64,
    pub(super) price: u128,
    pub(super) l1_fee: u128,
    pub(super) gas: u64,
    pub(super) gas_cost: u128,
    pub(super) have: u128,
    pub(super) coins: u128,
    pub(super) plan: plan::Plan,
    pub(super) rate_source: String,
    /// The wallet's screening, clear, to store with the settlement.
    pub(super) screened: screening::Read,
    /// Paid across networks: the mint's side.
    pub(super) bridge: Option<Across<'a>>,
}

/// The destination of a batch paid across networks, as priced.
pub(super) struct Across<'a> {
    /// Its name.
    pub(super) name: &'a str,
    /// Its configuration.
    pub(super) network: &'a Network,
    /// Its newest block before the burn is signed.
    pub(super) head: u64,
    /// The most the mint's gas and L1 data fee cost, in its coin's wei.
    pub(super) mint_cost: u128,
    /// The treasury's coin there, less what is in flight.
    pub(super) coins: u128,
    /// How much of the treasury's USDC the source's token messenger may burn.
    pub(super) allowed: u128,
}

/// The most gas a mint (`receiveMessage`: the attesters' signatures checked, the nonce spent,
/// the USDC minted) is priced at when its batch starts; the mint itself is estimated when it
/// is signed, and a difference is the treasury's.
pub(crate) const MINT_GAS: u64 = 300_000;

/// Where a batch's USDC is paid when its merchant chose a network for it (`Some`: another one,
/// with CCTP on both): that network. `None`: on the network paid on, as every other asset.
async fn destination<'a>(
    ctx: &Ctx,
    held: Option<&Db>,
    networks: &'a BTreeMap<String, Network>,
    first: &Settleable,
) -> Result<Option<(&'a str, &'a Network)>, NotNow> {
    if first.asset != crate::money::bridge_reads::USDC {
        return Ok(None);
    }
    let choice = crate::db::bridges::choice(
        &ctx.db,
        shared_types::ids::Scoped::new(first.institution_id, first.merchant_id),
    )
    .await
    .map_err(|e| ChainError::from(e).within("the merchant's USDC network"))?;
    let Some(choice) = choice.filter(|c| c.network != first.network) else {
        return Ok(None);
    };
    let name = first.network.as_str();
    let source = networks
        .get(name)
        .ok_or_else(|| format!("{name} is no longer configured"))?;
    if source.cctp.is_none() {
        // Nothing carries it across from here: it settles where it was paid.
        return Ok(None);
    }
    if held.is_some() {
        return Err(format!(
            "the merchant is paid its USDC on {}, and settlement across networks runs only for              institutions whose money is in D1",
            choice.network
        )
        .into());
    }
    let Some((to, network)) = networks.get_key_value(&choice.network) else {
        return Err(format!(
            "the merchant is paid its USDC on {}, which is no longer configured",
            choice.network
        )
        .into());
    };
    if network.cctp.is_none()
        || !network
            .tokens
            .contains_key(crate::money::bridge_reads::USDC)
    {
        return Err(format!(
            "the merchant is paid its USDC on {to}, which has no CCTP contracts or USDC configured"
        )
        .into());
    }
    if choice.usable_from > ctx.now() {
        return Err(format!(
            "the merchant chose to be paid its USDC on {to}; settlements use the choice from {} \
             (a cool-off after every change)",
            crate::ctx::timestamp(choice.usable_from).unwrap_or_default()
        )
        .into());
    }
    Ok(Some((to.as_str(), network)))
}

/// Prices `group` (of one merchant, network and asset) for one transaction from the treasury:
/// the merchant's wallet (past its cool-off), the chain, the gas and its rate in each order
/// currency, what the treasury can send. Payments the plan cannot settle are held (in D1, or in
/// the object `held`); `Err(Raced)` when none is left.
pub(super) async fn price_group<'a>(
    ctx: &Ctx,
    held: Option<&Db>,
    networks: &'a BTreeMap<String, Network>,
    treasury: &Treasury,
    group: &'a [Settleable],
) -> Result<Priced<'a>, NotNow> {
    let first = &group[0];
    let name = first.network.as_str();
    let network = networks
        .get(name)
        .ok_or_else(|| format!("{name} is no longer configured"))?;
    // The wallet is on the network paid on, or on the one the merchant chose for its USDC.
    let across = destination(ctx, held, networks, first).await?;
    let (paid_on, paid_network) = across.unwrap_or((name, network));
    let wallet = wallets::list(&ctx.db, first.merchant_id)
        .await
        .map_err(|e| ChainError::from(e).within("the merchant's wallets"))?
        .into_iter()
        .find(|w| w.network == paid_on)
        .ok_or_else(|| format!("the merchant has no settlement wallet on {paid_on}"))?;
    if wallet.usable_from > ctx.now() {
        return Err(format!(
            "the merchant's settlement wallet on {paid_on} was changed at {}; settlements use \
             it from {} (a cool-off after every change)",
            wallet.updated_at,
            crate::ctx::timestamp(wallet.usable_from).unwrap_or_default()
        )
        .into());
    }
    let wallet = payrail_evm::Address::parse(&wallet.address)
        .map_err(|_| format!("the merchant's settlement wallet on {paid_on} is not an address"))?;
    let wallet_text = wallet.lower();
    crate::chain::check_chain(name, network).await?;
    if let Some((to, destination)) = across {
        crate::chain::check_chain(to, destination).await?;
    }
    let screened = screen_wallet(ctx, held, (paid_on, paid_network), &wallet_text, first).await?;
    let node = &network.node;
    let token = first.token;
    let coin = config::coin(name);
    let now = ctx.now();
    let (coin_rates, mut sources) = gas_rates((name, network), group, now)
        .await
        .map_err(|e| e.within("no rate prices the gas"))?;
    let at_node = |e: ChainError| e.within(format!("the {name} node"));
    let head = rpc::head(node).await.map_err(|e| at_node(e.into()))?;
    let price = gas_price(node).await.map_err(at_node)?;
    // On an OP Stack chain each transaction also pays an L1 data fee, shared like the gas.
    let l1_fee = treasury::l1_fee_bound(network).await.map_err(at_node)?;
    let fees = |gas: u64| {
        treasury::most_fee(gas, price, l1_fee)
            .ok_or_else(|| at_node(ChainError::answer("the gas and L1 fees are out of range")))
    };
    // What is left once the transactions already out are counted.
    let (have, coins) = sends::available(ctx, (name, network), treasury, token).await?;
    if have == 0 {
        return Err(format!("the treasury holds no {} on {name} to send", first.asset).into());
    }
    if coins == 0 {
        return Err(format!("the treasury holds no {coin} on {name} for gas").into());
    }
    // Across networks: the mint's gas on the destination, in its coin, and the burn's
    // allowance here.
    let mut bridge = match across {
        None => None,
        Some((to, destination)) => {
            let (priced, rates, rate_sources) =
                across_priced(ctx, (to, destination), treasury, group)
                    .await
                    .map_err(|e| e.within(format!("the {to} node")))?;
            sources.extend(rate_sources);
            Some((priced, rates))
        }
    };
    if let (Some((across, _)), Token::Erc20(usdc)) = (&mut bridge, token) {
        let messenger = &crate::money::bridge_reads::cctp_of(name, network)?.token_messenger;
        across.allowed = treasury::allowance(node, usdc, &treasury.address, messenger)
            .await
            .map_err(at_node)?;
        if across.allowed == 0 {
            return Err(not_allowed(name, across.name).into());
        }
    }
    let legs = |gas: u64| -> Result<plan::Plan, ChainError> {
        let burn = fees(gas)?;
        Ok(match &bridge {
            Some((across, rates)) => {
                plan::plan_legs(group, &[(burn, &coin_rates), (across.mint_cost, rates)])
            }
            None => plan::plan(group, burn, &coin_rates),
        })
    };
    // Priced with the gas of a small transfer, then again with the real amount's, in case it
    // differs.
    let cannot = |e: ChainError| {
        e.within(format!(
            "the treasury cannot send {} on {name}",
            first.asset
        ))
    };
    let across = bridge.as_ref().map(|(a, _)| (a.name, a.network));
    let payout = (network, treasury, first, wallet);
    let mut gas = estimate_payout(payout, across, 1).await.map_err(cannot)?;
    let mut priced = legs(gas)?;
    if priced.units > 0 {
        let again = estimate_payout(payout, across, priced.units.min(have))
            .await
            .map_err(cannot)?;
        if again != gas {
            gas = again;
            priced = legs(gas)?;
        }
    }
    for (id, why) in &priced.held {
        if let Err(err) = hold(ctx, held, first.institution_id, &[*id], why).await {
            err.log_with(format!("hold of payment {id}"));
        }
    }
    if priced.items.is_empty() {
        return Err(NotNow::Raced);
    }
    let gas_cost = fees(gas)?;
    Ok(Priced {
        name,
        network,
        wallet,
        wallet_text,
        head,
        price,
        l1_fee,
        gas,
        gas_cost,
        have,
        coins,
        plan: priced,
        screened,
        rate_source: sources.join("; "),
        bridge: bridge.map(|(across, _)| across),
    })
}

/// The network coin's rate in each of `group`'s currencies (what prices a transaction's gas on
/// `name`), and the feeds they came from.
async fn gas_rates(
    (name, network): (&str, &Network),
    group: &[Settleable],
    now: i64,
) -> ChainResult<(BTreeMap<String, rust_decimal::Decimal>, Vec<String>)> {
    let coin = config::coin(name);
    let mut rates = BTreeMap::new();
    let mut sources = Vec::new();
    for d in group {
        if !rates.contains_key(&d.currency) {
            let rate = rates::coin_rate(network, name, coin, &d.currency, now).await?;
            rates.insert(d.currency.clone(), rate.per_unit);
            sources.push(rate.source);
        }
    }
    Ok((rates, sources))
}

/// The destination's side of a batch paid across: its head, the mint's most cost (at
/// [`MINT_GAS`], its price and L1 data fee now) and the treasury's coin there, its coin's rate
/// in each of the group's currencies, and the feeds they came from.
async fn across_priced<'a>(
    ctx: &Ctx,
    (name, network): (&'a str, &'a Network),
    treasury: &Treasury,
    group: &[Settleable],
) -> ChainResult<(
    Across<'a>,
    BTreeMap<String, rust_decimal::Decimal>,
    Vec<String>,
)> {
    let node = &network.node;
    let (rates, sources) = gas_rates((name, network), group, ctx.now())
        .await
        .map_err(|e| e.within("no rate prices the mint's gas"))?;
    let head = rpc::head(node).await?;
    let price = gas_price(node).await?;
    let l1_fee = treasury::l1_fee_bound(network).await?;
    let mint_cost = treasury::most_fee(MINT_GAS, price, l1_fee)
        .ok_or_else(|| ChainError::answer("the mint's fees are out of range"))?;
    let (_, coins) = sends::available(ctx, (name, network), treasury, Token::Native).await?;
    Ok((
        Across {
            name,
            network,
            head,
            mint_cost,
            coins,
            allowed: 0,
        },
        rates,
        sources,
    ))
}

/// Why a batch does not cross from `name` to `to`: the treasury's USDC there is not allowed
/// to the token messenger.
pub(crate) fn not_allowed(name: &str, to: &str) -> String {
    format!(
        "the treasury has not allowed {name}'s token messenger to burn its USDC, which settling \
         across to {to} takes (approve it once: OPERATIONS.md)"
    )
}

/// The gas the treasury's payout of `units` of `first`'s asset to `wallet` needs now: a
/// transfer, or across networks (`across`) the burn on `first`'s network.
async fn estimate_payout(
    (network, treasury, first, wallet): (&Network, &Treasury, &Settleable, payrail_evm::Address),
    across: Option<(&str, &Network)>,
    units: u128,
) -> ChainResult<u64> {
    let node = &network.node;
    match across {
        Some(destination) => {
            let data = burn_call(network, destination, first, &wallet.lower(), units)?;
            let messenger =
                &crate::money::bridge_reads::cctp_of(&first.network, network)?.token_messenger;
            let call = crate::db::sends::Call {
                to: messenger,
                data: &data,
            };
            treasury::estimate_call(node, &treasury.address, call).await
        }
        None => estimate(node, &treasury.address, first.token, wallet, units).await,
    }
}

/// The call data of a burn of `units` of `first`'s USDC on its network, to the merchant's
/// `wallet` on `to`, as the estimate prices it (no fee: the most fee does not change the gas).
fn burn_call(
    network: &Network,
    (to, destination): (&str, &Network),
    first: &Settleable,
    wallet: &str,
    units: u128,
) -> ChainResult<String> {
    let token = match first.token {
        Token::Erc20(contract) => contract.lower(),
        Token::Native => return Err(ChainError::rule("only USDC is carried across")),
    };
    let asked = crate::money::bridge_reads::BurnAsked {
        source: crate::money::bridge_reads::cctp_of(&first.network, network)?,
        destination: crate::money::bridge_reads::cctp_of(to, destination)?,
        token: &token,
        recipient: wallet,
        amount: units,
        max_fee: 0,
        min_finality: payrail_evm::cctp::FINALIZED_THRESHOLD,
    };
    // The depositor is not part of the call data.
    Ok(crate::money::bridge_reads::burn(&asked, asked.recipient)?.deposit_for_burn_call())
}

/// Whether the treasury can send `payout` of `first`'s asset and the gas `priced` needs, once
/// what is in flight is counted: `Err` with words when not.
pub(super) fn covers(first: &Settleable, priced: &Priced<'_>, payout: u128) -> Result<(), NotNow> {
    let (name, token) = (priced.name, first.token);
    let coin = config::coin(name);
    let needed = payout
        + if token == Token::Native {
            priced.gas_cost
        } else {
            0
        };
    let asset_units = |units: u128, decimals: u32| {
        evm::from_units(units, decimals).map_or_else(|| units.to_string(), |d| d.to_string())
    };
    if priced.have < needed {
        return Err(format!(
            "the treasury can send {} {} on {name} (its balance less what is in flight); {} \
             are needed",
            asset_units(priced.have, first.decimals),
            first.asset,
            asset_units(needed, first.decimals)
        )
        .into());
    }
    if let Some(across) = &priced.bridge {
        if across.allowed < payout {
            return Err(not_allowed(name, across.name).into());
        }
        if across.coins < across.mint_cost {
            return Err(format!(
                "the treasury can spend {} {} on {} for the mint's gas (its balance less what \
                 is in flight); {} are needed",
                asset_units(across.coins, NATIVE_DECIMALS),
                config::coin(across.name),
                across.name,
                asset_units(across.mint_cost, NATIVE_DECIMALS)
            )
            .into());
        }
    }
    if token != Token::Native && priced.coins < priced.gas_cost {
        return Err(format!(
            "the treasury can spend {} {coin} on {name} for gas (its balance less what is in \
             flight); {} are needed",
            asset_units(priced.coins, NATIVE_DECIMALS),
            asset_units(priced.gas_cost, NATIVE_DECIMALS)
        )
        .into());
    }
    Ok(())
}

/// The asset `d` is paid in, as the books name it.
pub(super) fn asset_of(d: &Settleable) -> ledger::Asset<'_> {
    ledger::Asset {
        network: &d.network,
        token: d.token,
        symbol: &d.asset,
        decimals: d.decimals,
    }
}

/// A new random id with `prefix`.
pub(super) fn new_id(prefix: &str) -> ChainResult<String> {
    crypto::random_token(prefix).map_err(|e| ChainError::Config(e.to_string()))
}
