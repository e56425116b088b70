//! Merchants' top-ups, shared by the merchant page and the JSON API: per watched network, the
//! merchant's top-up address (given out by an admin, once), the assets it accepts, and what
//! arrived there: confirming, or credited to the merchant's balance. Scoped to the session's
//! institution like every merchant operation; see `money::topup` for how the addresses are
//! watched and posted to the books.

use serde::Serialize;
use shared_types::ids::Scoped;
use shared_types::{ErrorCode, MerchantStatus};

use super::merchants;
use super::Portal;
use crate::chain::config::Network;
use crate::chain::{self, evm, EVM_NETWORKS};
use crate::db::topups::{self, TopupTransfer, TopupWatch};
use crate::error::{ApiError, OrInternal};
use crate::money::{books, topup};
use crate::wallet_address::eip55;

/// Most transfers shown per network.
pub const MAX_SHOWN: i64 = 50;

/// A merchant's top-ups on every watched network.
#[derive(Debug, Serialize)]
pub struct Topups {
    /// `topups`.
    pub object: &'static str,
    /// The merchant.
    pub merchant_id: i64,
    /// Whether its addresses are watched now (only while the merchant is active).
    pub watched: bool,
    /// One per network whose chain is watched, in the order Payrail lists networks.
    pub networks: Vec<TopupNetwork>,
}

/// The merchant's top-up address on one network.
#[derive(Debug, Serialize)]
pub struct TopupNetwork {
    /// Network name.
    pub network: String,
    /// The address (EIP-55), or `null` until an admin asks for one.
    pub address: Option<String>,
    /// The address as an EIP-681 request (`ethereum:<address>@<chain id>`), for a wallet.
    pub payment_uri: Option<String>,
    /// Blocks on a transfer's block before it is credited.
    pub confirmations: u64,
    /// Who asked for the address, and when.
    pub created_by: Option<String>,
    /// ISO 8601.
    pub created_at: Option<String>,
    /// What the address accepts: the configured tokens and the network's coin.
    pub assets: Vec<TopupAsset>,
    /// What arrived, newest first (at most 50).
    pub transfers: Vec<TopupReceived>,
}

/// An asset a top-up address accepts.
#[derive(Debug, Serialize)]
pub struct TopupAsset {
    /// Symbol.
    pub asset: String,
    /// Token contract (EIP-55), or `native` for the network's coin.
    pub token: String,
    /// Decimals.
    pub decimals: u32,
    /// Why the last check of this asset could not read the node, if it could not.
    pub node_error: Option<String>,
}

/// One transfer to a top-up address.
#[derive(Debug, Serialize)]
pub struct TopupReceived {
    /// Symbol.
    pub asset: String,
    /// The amount in the asset.
    pub amount: String,
    /// The same in base units.
    pub base_units: String,
    /// The transaction (or, for coin sent from inside a contract call, its block's hash).
    pub tx_hash: String,
    /// Its block.
    pub block_number: i64,
    /// Blocks on it at the last check, counting its own (at most the depth).
    pub confirmations: u64,
    /// Credited to the merchant's balance (it reached the depth, and its sender's screening
    /// cleared it or an admin released it).
    pub credited: bool,
    /// `held` (its sender on a sanctions list, or not named: waits for an admin's review),
    /// `released` or `blocked` (frozen in custody); `null` when its sender was clear.
    pub screening: Option<String>,
}

/// The merchant's top-ups. Also watches its addresses for an asset configured since they were
/// given out (written only then).
pub async fn list(portal: &Portal<'_>, merchant_id: i64) -> Result<Topups, ApiError> {
    let merchant = merchants::get(portal, merchant_id).await?;
    let networks = chain::networks(portal.ctx)?;
    let addresses = topups::addresses_of(portal.money(), portal.institution_id(), merchant_id)
        .await
        .or_internal("read top-up addresses")?;
    let mut watches = topups::watches_of(portal.money(), portal.institution_id(), merchant_id)
        .await
        .or_internal("read top-up watches")?;
    let missing = addresses.iter().any(|a| {
        networks.get(&a.network).is_some_and(|n| {
            books::assets(&a.network, n).iter().any(|asset| {
                !watches
                    .iter()
                    .any(|w| w.address == a.address && w.token == asset.token)
            })
        })
    });
    if missing {
        topup::watch_assets(
            portal.ctx,
            portal.held(),
            Scoped::new(portal.institution_id(), merchant_id),
            &networks,
        )
        .await?;
        watches = topups::watches_of(portal.money(), portal.institution_id(), merchant_id)
            .await
            .or_internal("read top-up watches")?;
    }
    let transfers = topups::transfers_of(
        portal.money(),
        Scoped::new(portal.institution_id(), merchant_id),
        MAX_SHOWN * 4,
    )
    .await
    .or_internal("read top-ups")?;
    let shown = EVM_NETWORKS
        .iter()
        .filter_map(|name| networks.get(*name).map(|n| (*name, n)))
        .map(|(name, network)| {
            let address = addresses.iter().find(|a| a.network == name);
            view(
                (name, network),
                address.map(|a| (a.address.as_str(), a.created_by.as_str(), a.created_at)),
                &watches,
                &transfers,
            )
        })
        .collect();
    Ok(Topups {
        object: "topups",
        merchant_id,
        watched: merchant.merchant.status == MerchantStatus::Active,
        networks: shown,
    })
}

/// One network's part. Pure.
fn view(
    (name, network): (&str, &Network),
    address: Option<(&str, &str, i64)>,
    watches: &[TopupWatch],
    transfers: &[TopupTransfer],
) -> TopupNetwork {
    let accepted = books::assets(name, network);
    let of_address = |w: &&TopupWatch| address.is_some_and(|(a, _, _)| w.address == a);
    let assets = accepted
        .iter()
        .map(|a| TopupAsset {
            asset: a.symbol.clone(),
            token: eip55(&a.ledger.token),
            decimals: a.decimals,
            node_error: watches
                .iter()
                .filter(of_address)
                .find(|w| w.token == a.token)
                .and_then(|w| w.node_error.clone()),
        })
        .collect();
    let received = transfers
        .iter()
        .filter(|t| address.is_some_and(|(a, _, _)| t.address == a))
        .take(usize::try_from(MAX_SHOWN).unwrap_or(50))
        .map(|t| {
            let watch = watches
                .iter()
                .filter(of_address)
                .find(|w| w.token == t.token);
            let (asset, decimals) =
                watch.map_or_else(|| (t.token.lower(), 0), |w| (w.asset.clone(), w.decimals));
            let units: u128 = t.amount.parse().unwrap_or(0);
            let head = watch.map_or(t.block_number, |w| w.head_block);
            let final_ = t.confirmed;
            let credited = final_ && matches!(t.screening.as_deref(), None | Some("released"));
            TopupReceived {
                asset,
                amount: evm::from_units(units, decimals)
                    .map_or_else(|| t.amount.clone(), |d| d.to_string()),
                base_units: t.amount.clone(),
                tx_hash: t.tx_hash.clone(),
                block_number: t.block_number,
                confirmations: if final_ {
                    network.confirmations
                } else {
                    u64::try_from(head - t.block_number + 1)
                        .unwrap_or(0)
                        .min(network.confirmations.saturating_sub(1))
                },
                credited,
                screening: t.screening.clone(),
            }
        })
        .collect();
    TopupNetwork {
        network: name.to_owned(),
        address: address.map(|(a, _, _)| eip55(a)),
        payment_uri: address.map(|(a, _, _)| topup::uri(network.chain_id, &eip55(a))),
        confirmations: network.confirmations,
        created_by: address.map(|(_, by, _)| by.to_owned()),
        created_at: address.and_then(|(_, _, at)| shared_types::time::format_unix(at)),
        assets,
        transfers: received,
    }
}

/// Gives the merchant its top-up address on `network` (an admin's change; the address it
/// already has, if it has one). Refused (409) while the merchant is not active: its address
/// would not be watched.
pub async fn create(
    portal: &Portal<'_>,
    merchant_id: i64,
    network: &str,
) -> Result<TopupNetwork, ApiError> {
    portal.require_admin()?;
    let merchant = merchants::get(portal, merchant_id).await?;
    if merchant.merchant.status != MerchantStatus::Active {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!(
                "the merchant is {}: a top-up address is watched only while it is active",
                merchant.merchant.status.as_str()
            ),
        ));
    }
    topup::create(
        portal.ctx,
        portal.held(),
        Scoped::new(portal.institution_id(), merchant_id),
        network,
        &portal.session.email,
    )
    .await?;
    list(portal, merchant_id)
        .await?
        .networks
        .into_iter()
        .find(|n| n.network == network)
        .ok_or_else(|| ApiError::internal("top-up address", "not listed"))
}
