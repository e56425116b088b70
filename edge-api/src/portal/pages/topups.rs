//! The merchant page's "Top up balance" section: per watched network, the merchant's top-up
//! address with its QR code, the assets it accepts, and what arrived there; and the form by
//! which an admin gives the merchant its address (viewers see it, and cannot).

use maud::{html, Markup, PreEscaped};
use shared_types::{ErrorCode, PortalRole};

use super::layout::{csrf_field, error_box, layout, page, Call};
use crate::html::qr_svg;
use crate::http::see_other;
use crate::portal::merchants::merchant_id;
use crate::portal::topups::{self, TopupNetwork, Topups};
use crate::portal::Portal;
use crate::route::Answer;

/// `POST /portal/merchants/{id}/topup`: the merchant's top-up address on the form's network,
/// then back to its section; a refusal is a page saying why.
pub(super) async fn create(c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    let network = c.form.get("network").unwrap_or_default().to_owned();
    match topups::create(&c.portal, id, &network).await {
        Ok(_) => see_other(c.url, &format!("/portal/merchants/{id}#top-up")),
        Err(err)
            if matches!(
                err.code,
                ErrorCode::Conflict
                    | ErrorCode::NotFound
                    | ErrorCode::InvalidRequest
                    | ErrorCode::PaymentsUnavailable
            ) =>
        {
            page(
                err.code.http_status(),
                layout(
                    "Top-up address refused",
                    Some(&c.portal),
                    html! {
                        section {
                            h1 { "No top-up address" }
                            (error_box(Some(&err.description)))
                            p { a href=(format!("/portal/merchants/{id}#top-up")) { "← Back to the merchant" } }
                        }
                    },
                ),
            )
        }
        Err(err) => Err(err),
    }
}

/// A network's name as people write it.
fn network_name(network: &str) -> String {
    let mut chars = network.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The section, for the merchant page.
pub(super) fn section(portal: &Portal<'_>, topups: &Topups, status: &str) -> Markup {
    let admin = portal.session.role == PortalRole::Admin;
    html! {
        section #top-up aria-labelledby="top-up-title" {
            h2 #top-up-title { "Top up balance" }
            p.muted {
                "The merchant adds to its balance by sending money to its own top-up address, "
                "for instance so that a refund its balance does not cover can be paid now. "
                "What arrives is credited once it has the network's confirmations and its sender "
                "is screened clear of the sanctions lists (otherwise it waits for review). Send only the "
                "assets listed, on that network."
            }
            @if !topups.watched {
                p.warn role="status" #top-up-paused {
                    "Not watched while the merchant is " (status)
                    ": what arrives is credited once it is active again."
                }
            }
            @if topups.networks.is_empty() {
                p.muted { "No network's chain is watched by this deployment yet." }
            }
            @for n in &topups.networks {
                (network_part(portal, topups.merchant_id, n, admin && topups.watched))
            }
        }
    }
}

fn network_part(
    portal: &Portal<'_>,
    merchant_id: i64,
    n: &TopupNetwork,
    can_create: bool,
) -> Markup {
    let name = network_name(&n.network);
    let accepts = n
        .assets
        .iter()
        .map(|a| a.asset.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let node_errors: Vec<String> = n
        .assets
        .iter()
        .filter_map(|a| a.node_error.as_ref().map(|e| format!("{}: {e}", a.asset)))
        .collect();
    html! {
        div.topup-network data-network=(n.network) {
            h3 { (name) }
            @if let Some(address) = &n.address {
                div.topup {
                    @if let Some(uri) = &n.payment_uri {
                        @if let Some(svg) = qr_svg(uri) {
                            a.qr href=(uri) aria-label=(format!("The {name} top-up address for a wallet (EIP-681)")) {
                                (PreEscaped(svg))
                            }
                        }
                    }
                    dl.fields {
                        dt { "Address" } dd { code.topup-address { (address) } }
                        dt { "Accepts" } dd.topup-assets { (accepts) }
                        dt { "Credited after" } dd { (n.confirmations) " confirmations" }
                        @if let (Some(by), Some(at)) = (&n.created_by, &n.created_at) {
                            dt { "Given out" } dd { time datetime=(at) { (at) } " by " (by) }
                        }
                    }
                }
                @if !node_errors.is_empty() {
                    p.warn.topup-node role="status" {
                        "The " (name) " node could not be read at the last check ("
                        (node_errors.join("; ")) "); it is read again at the next."
                    }
                }
                @if n.transfers.is_empty() {
                    p.muted.topup-none { "Nothing received yet." }
                } @else {
                    div.topup-scroll {
                        table.topup-transfers {
                            caption.muted { "Received at this address, newest first" }
                            thead { tr { th { "Amount" } th { "Transaction" } th { "Status" } } }
                            tbody {
                                @for t in &n.transfers {
                                    tr data-tx=(t.tx_hash) {
                                        td.amount { (t.amount) " " (t.asset) }
                                        td { code { (t.tx_hash) } }
                                        td.status {
                                            @if t.credited {
                                                "credited"
                                            } @else if t.screening.as_deref() == Some("held") {
                                                a href="/portal/screening#topups" { "held for review" }
                                            } @else if t.screening.as_deref() == Some("blocked") {
                                                "blocked: frozen in custody"
                                            } @else {
                                                "confirming " (t.confirmations) "/" (n.confirmations)
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            } @else {
                p.muted { "Accepts " (accepts) "." }
                @if can_create {
                    form.topup-create method="post" action=(format!("/portal/merchants/{merchant_id}/topup")) {
                        (csrf_field(portal))
                        input type="hidden" name="network" value=(n.network);
                        button type="submit" { "Create a top-up address on " (name) }
                    }
                } @else {
                    p.muted.topup-none { "No top-up address yet: an admin of an active merchant can create one." }
                }
            }
        }
    }
}
