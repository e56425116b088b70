//! Settlement of institutions held in their own objects (docs/SCALING.md): the object decides
//! what is due, the merchant's balance, the fees and its half of the books, and asks the
//! treasury for the payout in the same transaction ([`crate::money::requests`], which sends,
//! reads back and records it).

use std::collections::BTreeMap;

use shared_types::ids::Scoped;

use super::group::{asset_of, covers, new_id, price_group, screening_of, NotNow};
use crate::chain::config::Network;
use crate::chain::error::ChainError;
use crate::ctx::Ctx;
use crate::db::object_sends::{self, NewRequest, Paying};
use crate::db::settlements::{self, NewSettlement, Settleable};
use crate::db::{Batch, Db};
use crate::money::ledger;
use crate::money::requests;
use crate::money::sends;
use crate::money::treasury::Treasury;

/// Steps 1 and 2 for `group`, due in `object`: priced as D1's groups are, asked in one
/// transaction of the object, then sent.
pub(super) async fn settle_group(
    ctx: &Ctx,
    object: &Db,
    networks: &BTreeMap<String, Network>,
    treasury: &Treasury,
    group: &[Settleable],
) -> Result<(), NotNow> {
    let first = &group[0];
    let priced = price_group(ctx, Some(object), networks, treasury, group).await?;
    let now = ctx.now();
    let settlement_id = new_id(shared_types::ids::SettlementId::PREFIX)?;
    let send_id = sends::new_id()?;
    let asset = asset_of(first);
    let owners = Scoped::new(first.institution_id, first.merchant_id);
    let parts = ledger::parts(&priced.plan.items)?;
    let reserved =
        ledger::reserve_held_settlement(object, &asset, owners, &send_id, &parts).await?;
    covers(first, &priced, reserved.payout)?;
    // The treasury's books must take their half too before anything is asked (they are read
    // again when it is sent).
    ledger::reserve_held_payout(
        ctx,
        &asset,
        owners,
        &send_id,
        reserved.payout,
        priced.gas_cost,
    )
    .await?;
    let token = first.token.lower();
    let request = NewRequest {
        id: &send_id,
        institution_id: first.institution_id,
        paying: Paying::Settlement(&settlement_id),
        network: priced.name,
        token: &token,
        asset: &first.asset,
        decimals: first.decimals,
        wallet: &priced.wallet_text,
        units: reserved.payout,
        netted: priced.plan.units - reserved.payout,
        gas_limit: priced.gas,
        gas_price: priced.price,
        l1_fee: priced.l1_fee,
        rate_source: &priced.rate_source,
    };
    let settlement = NewSettlement {
        id: &settlement_id,
        institution_id: first.institution_id,
        merchant_id: first.merchant_id,
        network: priced.name,
        asset: &first.asset,
        token: first.token,
        wallet: &priced.wallet_text,
    };
    let mut batch = Batch::new();
    batch.extend(
        settlements::start(&settlement, &priced.plan.items, now).map_err(ChainError::from)?,
    );
    batch.extend(settlements::items(&send_id, &priced.plan.items).map_err(ChainError::from)?);
    batch.push(screening_of(&priced, first, &settlement_id, now)?);
    batch.push(object_sends::request(&request, now).map_err(ChainError::from)?);
    batch.extend(
        reserved
            .institution
            .statements(&object_sends::in_state(&send_id, "requested"), now)
            .map_err(ChainError::from)?,
    );
    if let Err(e) = batch.run(object).await {
        // Another run claimed one of these payments first: nothing was asked.
        worker::console_warn!("settlement {settlement_id} not asked ({e}): another run is");
        return Err(NotNow::Raced);
    }
    let request = request.stored(first.merchant_id, None, now);
    requests::send(ctx, object, networks, treasury, &request).await
}
