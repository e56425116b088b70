//! A merchant's USDC settlement network: the one network (B) its USDC is paid out on, to its
//! settlement wallet there, from every network with CCTP (the treasury burns it where it was
//! paid and mints it on B: docs/CCTP.md). USDT, ether, and USDC on a network without CCTP still
//! settle on the network they were paid on. Shared by the pages and the JSON API.
//!
//! Set and cleared like a settlement wallet, since it decides where money goes: only by admins
//! (the portal's role check on every change), guarded on the choice read, recorded with who,
//! when, old and new (`usdc_settlement_changes`), and e-mailed at once to every admin. A network
//! chosen is used only after the wallet cool-off, as a wallet set is; clearing applies at once,
//! as removing a wallet does (it sends nothing anywhere new: each payment settles on the network
//! it was paid on). Refused for an institution whose money is held in its object: the treasury
//! settles across only for institutions whose money is in D1 for now.

use shared_types::ErrorCode;

use super::merchants::{self, Merchant};
use super::Portal;
use crate::chain;
use crate::ctx::timestamp;
use crate::db::merchants::{self as rows, UsdcSettlement};
use crate::db::notifications::NotificationKind;
use crate::db::wallets;
use crate::error::{ApiError, OrInternal};
use crate::wallet_address;

/// The body member (and the merchant's) that names the choice.
pub const FIELD: &str = "usdc_settlement_network";

/// The refusal of a choice for an institution held in its object.
pub fn held_refusal() -> ApiError {
    ApiError::new(
        ErrorCode::Conflict,
        "cross-network settlement runs only for institutions whose money is still in D1; your \
         institution's money is held in its own store, so a USDC settlement network cannot be \
         chosen for now (each payment settles on the network it was paid on)",
    )
}

fn listed(cctp: &[&str]) -> String {
    if cctp.is_empty() {
        "no network here has CCTP configured".to_owned()
    } else {
        format!("the networks with CCTP here are {}", cctp.join(", "))
    }
}

/// Why `network` cannot be the USDC settlement network of a merchant with wallets on
/// `wallet_networks`, in a deployment configured with `configured` networks, of which `cctp`
/// have CCTP; `None`: it can. Pure.
pub fn refusal(
    network: &str,
    configured: &[&str],
    cctp: &[&str],
    wallet_networks: &[&str],
) -> Option<String> {
    if !wallet_address::NETWORKS.contains(&network) {
        return Some(format!(
            "{FIELD}: no such network {network:?}; {}",
            listed(cctp)
        ));
    }
    if !configured.contains(&network) {
        return Some(format!(
            "{FIELD}: {network} is not configured in this deployment, so nothing can be settled \
             there; {}",
            listed(cctp)
        ));
    }
    if !cctp.contains(&network) {
        return Some(format!(
            "{FIELD}: {network} has no CCTP configured, so USDC cannot be settled to it from \
             another network; {}",
            listed(cctp)
        ));
    }
    if !wallet_networks.contains(&network) {
        return Some(format!(
            "{FIELD}: the merchant has no settlement wallet on {network}; set one there first"
        ));
    }
    None
}

/// From when a change applies: a network chosen after the wallet cool-off, as a new wallet; a
/// clear at once, as a wallet removed. Pure.
pub fn usable_from(chosen: bool, now: i64, cool_off: i64) -> i64 {
    if chosen {
        now.saturating_add(cool_off)
    } else {
        now
    }
}

/// What a form or a body names: a network, or nothing (empty or blank: clear the choice).
pub fn chosen(text: Option<&str>) -> Option<&str> {
    text.map(str::trim).filter(|t| !t.is_empty())
}

/// Sets (`Some`) or clears (`None`) merchant `id`'s USDC settlement network. A network must be
/// configured here with CCTP, and the merchant must have a settlement wallet on it; the
/// institution's money must be in D1. A network chosen applies after the wallet cool-off, a
/// clear at once; each change is recorded and e-mailed to every admin; choosing what is already
/// chosen changes nothing.
pub async fn set(
    portal: &Portal<'_>,
    id: i64,
    network: Option<&str>,
) -> Result<Merchant, ApiError> {
    let merchant = merchants::row(portal, id).await?;
    let network = chosen(network);
    if network.is_some() && portal.is_held() {
        return Err(held_refusal());
    }
    let wallet_list = wallets::list(portal.db(), id)
        .await
        .or_internal("read wallets")?;
    let cctp = chain::cctp_networks(portal.ctx)?;
    if let Some(network) = network {
        let configured = chain::networks(portal.ctx)?;
        let configured: Vec<&str> = configured.keys().map(String::as_str).collect();
        let wallet_networks: Vec<&str> = wallet_list.iter().map(|w| w.network.as_str()).collect();
        if let Some(why) = refusal(network, &configured, &cctp, &wallet_networks) {
            return Err(ApiError::invalid_request(why));
        }
    }
    let old = merchant.usdc_settlement_network.as_deref();
    if old == network {
        return merchants::get(portal, id).await;
    }
    let cool_off = portal.ctx.wallet_cool_off_seconds();
    let usable_from = usable_from(network.is_some(), portal.now, cool_off);
    let now_text = timestamp(portal.now)?;
    if !rows::set_usdc_settlement(
        portal.db(),
        &UsdcSettlement {
            institution_id: portal.institution_id(),
            merchant_id: id,
            old,
            new: network,
            usable_from,
            changed_by: &portal.session.email,
            now_text: &now_text,
        },
    )
    .await
    .or_internal("set USDC settlement network")?
    {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "the merchant's USDC settlement network, its wallets or its institution changed \
             while this request ran; read the merchant again and retry",
        ));
    }
    // Every admin hears of it at once, as of a wallet change: it decides where money goes.
    let from = timestamp(usable_from)?;
    let others: Vec<&str> = cctp
        .iter()
        .copied()
        .filter(|n| Some(*n) != network)
        .collect();
    let across = if others.is_empty() {
        "any other network with CCTP (none is configured now)".to_owned()
    } else {
        others.join(", ")
    };
    let subject = format!("The USDC settlement network of {} changed", merchant.name);
    let change = match (old, network) {
        (None, Some(new)) => format!("was set to {new}"),
        (Some(old), Some(new)) => format!("changed from {old} to {new}"),
        (Some(old), None) => format!("({old}) was cleared"),
        (None, None) => String::new(),
    };
    let effect = match network {
        Some(new) => {
            let wallet = wallet_list
                .iter()
                .find(|w| w.network == new)
                .map_or(String::new(), |w| format!(" ({})", w.address));
            format!(
                "From {from} (a cool-off of {} hours after every change), USDC paid to this \
                 merchant on {across} is settled across to its wallet on {new}{wallet}; until \
                 then such payments wait. USDT and ether still settle on the network they were \
                 paid on.",
                cool_off / 3600
            )
        }
        None => "From now on each payment settles on the network it was paid on again, as \
                 without the choice."
            .to_owned(),
    };
    let body = format!(
        "The USDC settlement network of merchant {} ({id}) {change} by {} at {now_text}. \
         {effect} If nobody at your company made this change, clear it in the portal and change \
         your admins' passwords now.",
        merchant.name, portal.session.email
    );
    crate::notify::admins(
        portal.ctx,
        portal.institution_id(),
        NotificationKind::WalletChanged,
        &subject,
        &body,
    )
    .await?;
    merchants::get(portal, id).await
}

#[cfg(test)]
mod tests {
    use super::{chosen, refusal, usable_from};

    const CONFIGURED: &[&str] = &["ethereum", "polygon", "base"];
    const CCTP: &[&str] = &["polygon", "base"];

    #[test]
    fn a_network_with_cctp_and_a_wallet_of_the_merchant_may_be_chosen() {
        assert_eq!(refusal("base", CONFIGURED, CCTP, &["base"]), None);
        assert_eq!(
            refusal("polygon", CONFIGURED, CCTP, &["base", "polygon"]),
            None
        );
    }

    #[test]
    fn each_refusal_names_its_problem_and_the_networks_that_would_do() {
        let unknown = refusal("dogecoin", CONFIGURED, CCTP, &["base"]).unwrap();
        assert!(
            unknown.contains("no such network \"dogecoin\""),
            "{unknown}"
        );
        assert!(unknown.contains("polygon, base"), "{unknown}");
        let absent = refusal("arbitrum", CONFIGURED, CCTP, &["arbitrum"]).unwrap();
        assert!(absent.contains("arbitrum is not configured"), "{absent}");
        let plain = refusal("ethereum", CONFIGURED, CCTP, &["ethereum"]).unwrap();
        assert!(plain.contains("ethereum has no CCTP configured"), "{plain}");
        let walletless = refusal("base", CONFIGURED, CCTP, &["polygon"]).unwrap();
        assert!(
            walletless.contains("no settlement wallet on base"),
            "{walletless}"
        );
        // A network that is not even EVM: unknown to CCTP here.
        let bitcoin = refusal("bitcoin", CONFIGURED, CCTP, &["bitcoin"]).unwrap();
        assert!(bitcoin.contains("bitcoin is not configured"), "{bitcoin}");
        let none = refusal("base", &["base"], &[], &["base"]).unwrap();
        assert!(
            none.contains("no network here has CCTP configured"),
            "{none}"
        );
        for why in [unknown, absent, plain, walletless, bitcoin, none] {
            assert!(why.starts_with("usdc_settlement_network: "), "{why}");
        }
    }

    #[test]
    fn a_network_chosen_waits_the_cool_off_and_a_clear_applies_at_once() {
        assert_eq!(usable_from(true, 1_000, 7_200), 8_200);
        assert_eq!(usable_from(false, 1_000, 7_200), 1_000);
        assert_eq!(usable_from(true, i64::MAX, 7_200), i64::MAX);
    }

    #[test]
    fn an_empty_or_blank_choice_clears_it() {
        assert_eq!(chosen(None), None);
        assert_eq!(chosen(Some("")), None);
        assert_eq!(chosen(Some("  ")), None);
        assert_eq!(chosen(Some(" base ")), Some("base"));
    }
}
