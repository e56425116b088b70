//! The merchant page's "USDC settlement network" part, in its settlement wallets section: what
//! is chosen and from when it applies, in plain words what that does to each asset, the form by
//! which an admin chooses or clears it (viewers see it, and cannot), and every change of it.

use maud::{html, Markup};
use shared_types::PortalRole;

use super::layout::{csrf_field, Call};
use crate::portal::merchants::{merchant_id, Merchant};
use crate::portal::usdc_settlement::{self, FIELD};
use crate::portal::Portal;
use crate::route::Answer;

/// `POST /portal/merchants/{id}/usdc-settlement`: the form's network chosen, or the choice
/// cleared when it is empty; back to the merchant, or its page saying why not.
pub(super) async fn set(c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    let network = c.form.get(FIELD).unwrap_or_default().to_owned();
    let done = usdc_settlement::set(&c.portal, id, Some(&network))
        .await
        .map(drop);
    super::merchants::changed(&c, id, done).await
}

/// A list of names as a sentence: "a", "a and b", "a, b and c".
fn sentence(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The part, for the merchant page: `cctp` are the deployment's networks with CCTP, `changes`
/// the merchant's changes of the choice, newest first.
pub(super) fn part(
    portal: &Portal<'_>,
    m: &Merchant,
    cctp: &[&str],
    changes: &[crate::db::merchants::UsdcSettlementChange],
) -> Markup {
    let admin = portal.session.role == PortalRole::Admin;
    let chosen = m.usdc_settlement_network.as_deref();
    let wallet_on = |network: &str| m.wallets.iter().find(|w| w.network == network);
    let now = shared_types::time::format_unix(portal.now).unwrap_or_default();
    // The last change still in its cool-off: from when it applies.
    let cooling = m
        .usdc_settlement_usable_from
        .as_deref()
        .filter(|from| *from > now.as_str());
    let from_networks = sentence(cctp);
    html! {
        div #usdc-settlement {
            h3 #usdc-settlement-title { "USDC settlement network" }
            p {
                "Choose one network to pay all of this merchant's USDC out on. USDC paid on every "
                "network with CCTP (Circle's Cross-Chain Transfer Protocol"
                @if !cctp.is_empty() { ": " (from_networks) }
                ") is then settled to the merchant's wallet on that network, and checkouts offer "
                "USDC on each of them. USDT and ether always settle on the network they were paid "
                "on, and so does USDC paid on a network without CCTP."
            }
            @match chosen {
                Some(network) if portal.is_held() => {
                    p.warn role="status" #usdc-settlement-held {
                        (network) " is chosen, but cross-network settlement runs only for "
                        "institutions whose money is still in D1, and your institution's money is "
                        "held in its own store: each payment settles on the network it was paid "
                        "on for now."
                    }
                }
                Some(network) => {
                    p.ok role="status" #usdc-settlement-chosen {
                        "USDC from " (from_networks) " is settled to the wallet on "
                        strong { (network) }
                        @if let Some(wallet) = wallet_on(network) {
                            " (" code { (wallet.address) } ")"
                        }
                        "."
                        @if let Some(from) = cooling {
                            " Applies from " time datetime=(from) { (from) }
                            " (cool-off after a change); until then such payments wait."
                        } @else if let Some(from) = &m.usdc_settlement_usable_from {
                            " Applies since " time datetime=(from) { (from) } "."
                        }
                    }
                    @if wallet_on(network).is_none() {
                        p.warn role="status" #usdc-settlement-no-wallet {
                            "The merchant has no settlement wallet on " (network)
                            " now: USDC is not settled across, and checkouts do not offer it on "
                            "other networks, until one is set there."
                        }
                    }
                    @if !cctp.contains(&network) {
                        p.warn role="status" #usdc-settlement-no-cctp {
                            (network) " has no CCTP configured in this deployment now: USDC is "
                            "not settled across to it until it has again."
                        }
                    }
                }
                None => {
                    p.muted #usdc-settlement-none {
                        "Not chosen: each payment settles on the network it was paid on."
                    }
                    @if portal.is_held() {
                        p.warn role="status" #usdc-settlement-held {
                            "Cross-network settlement runs only for institutions whose money is "
                            "still in D1; your institution's money is held in its own store, so "
                            "a network cannot be chosen for now."
                        }
                    } @else if cctp.is_empty() {
                        p.muted { "No network of this deployment has CCTP configured, so USDC cannot be settled across networks." }
                    }
                }
            }
            @if !admin {
                p.muted { "Only an admin can change it." }
            } @else if (!portal.is_held() && !cctp.is_empty()) || chosen.is_some() {
                form.usdc-settlement method="post" action=(format!("/portal/merchants/{}/usdc-settlement", m.merchant.id)) {
                    (csrf_field(portal))
                    label for=(FIELD) { "Settle all USDC on" }
                    div.row {
                        select id=(FIELD) name=(FIELD) {
                            option value="" selected[chosen.is_none()] { "Where each payment was made" }
                            @if !portal.is_held() {
                                @for network in cctp {
                                    option value=(network) selected[chosen == Some(*network)] {
                                        (network)
                                        @if wallet_on(network).is_none() { " (no settlement wallet there yet)" }
                                    }
                                }
                            }
                        }
                        button type="submit" { "Save" }
                    }
                    p.muted {
                        "A network chosen applies after the same cool-off as a new wallet; "
                        "clearing the choice applies at once. Every change is recorded below "
                        "and e-mailed to every admin."
                    }
                }
            }
            @if !changes.is_empty() {
                p.muted #usdc-settlement-changes-title { "Changes of the USDC settlement network, newest first" }
                div.scroll {
                    table.stack #usdc-settlement-changes aria-labelledby="usdc-settlement-changes-title" {
                        thead { tr { th { "When" } th { "Who" } th { "Old" } th { "New" } th { "Applies from" } } }
                        tbody {
                            @for c in changes {
                                @let from = shared_types::time::format_unix(c.usable_from).unwrap_or_default();
                                tr {
                                    td data-label="When" { time datetime=(c.changed_at) { (c.changed_at) } }
                                    td data-label="Who" { (c.changed_by) }
                                    td data-label="Old" { (c.old_network.as_deref().unwrap_or("none")) }
                                    td data-label="New" { (c.new_network.as_deref().unwrap_or("none (cleared)")) }
                                    td data-label="Applies from" { time datetime=(from) { (from) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sentence;

    #[test]
    fn names_read_as_a_sentence() {
        assert_eq!(sentence(&[]), "");
        assert_eq!(sentence(&["base"]), "base");
        assert_eq!(sentence(&["polygon", "base"]), "polygon and base");
        assert_eq!(
            sentence(&["polygon", "base", "arbitrum"]),
            "polygon, base and arbitrum"
        );
    }
}
