//! The hosted checkout page, server-rendered (maud escapes every interpolated value).

use maud::{html, Markup, PreEscaped};
use shared_types::{quote, RawStatus};
use worker::Response;

use crate::db::sessions::SessionView;
use crate::error::ApiError;
use crate::html::{document, qr_svg};

/// Seconds between refreshes of a pending checkout page when scripts are off (with scripts,
/// `/hosted.js` polls the status and reloads only on a change, so no click is lost).
const REFRESH_SECONDS: u32 = 10;
/// Seconds the "payment received" page waits before returning the customer.
const RETURN_SECONDS: u32 = 5;

const STYLE: &str = "
body{font:16px/1.5 system-ui,sans-serif;background:#f4f6f9;color:#1c2430;margin:0}
main{max-width:30rem;margin:2rem auto;background:#fff;border-radius:10px;padding:1.5rem 2rem;
box-shadow:0 1px 4px rgba(0,0,0,.08)}
h1{font-size:1.3rem;margin:.25rem 0}.merchant{color:#4a5566;margin:0}
.amount{font-size:2rem;font-weight:600;margin:.5rem 0 1rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}dt{color:#4a5566}
dd{margin:0;word-break:break-all}code{font:14px ui-monospace,monospace}
.status{padding:.75rem 1rem;border-radius:6px;background:#eef4ff;margin:1rem 0}
.status.ok{background:#e7f7ee}.status.bad{background:#fdecec}
.sandbox{border:2px dashed #c59b00;border-radius:8px;padding:.75rem 1rem;margin-top:1.5rem}
.sandbox h2{font-size:1rem;margin:0 0 .5rem}.sandbox form{display:inline-block;margin:.2rem}
button{font:inherit;padding:.4rem .9rem;border-radius:6px;border:1px solid #8893a3;background:#fff;
cursor:pointer}.label{margin:0 0 .25rem}.methods button{margin:0 .25rem .35rem 0;font-size:.9rem}
.methods button[aria-pressed=true]{border-color:#1d4ed8;background:#e8efff;font-weight:600}
.notice{background:#fff4d6;padding:.5rem 1rem;border-radius:6px}
.simulated{border:2px dashed #c59b00;border-radius:6px;padding:.4rem .8rem;font-size:.9rem}
.qr{display:block;width:13rem;height:13rem;margin:.5rem auto}.qr svg{width:100%;height:100%}
.copy{font-size:.8rem;padding:.15rem .6rem;margin-left:.4rem}.countdown{font-weight:600}
@media (max-width:34rem){main{margin:0;border-radius:0;padding:1rem 1.1rem}
dl{grid-template-columns:1fr}dt{margin-top:.4rem}.amount{font-size:1.6rem}}
";

/// What a wallet needs to pay a watched deposit address: the EIP-681 request the QR code holds.
#[derive(Debug, Clone)]
pub struct PaymentRequest {
    /// The token contract (EIP-55); `None` for the network's own coin.
    pub token: Option<String>,
    /// The network's chain id.
    pub chain_id: u64,
    /// The quoted amount in the token's base units.
    pub base_units: u128,
    /// The confirmations the network needs.
    pub confirmations: u64,
}

impl PaymentRequest {
    /// `ethereum:<token>@<chain id>/transfer?address=<deposit>&uint256=<base units>`, or for
    /// the network's coin `ethereum:<deposit>@<chain id>?value=<wei>`.
    pub fn uri(&self, deposit: &str) -> String {
        match &self.token {
            Some(token) => {
                crate::chain::evm::payment_uri(token, self.chain_id, deposit, self.base_units)
            }
            None => crate::chain::evm::native_payment_uri(self.chain_id, deposit, self.base_units),
        }
    }
}

/// A page response: the referrer is never sent.
pub fn respond(status: u16, markup: Markup) -> Result<Response, ApiError> {
    crate::html::page(status, markup, "no-referrer")
}

fn layout(title: &str, head: Markup, body: Markup) -> Markup {
    document(title, STYLE, head, html! { main { (body) } })
}

/// The page for an unknown checkout.
pub fn not_found() -> Markup {
    layout(
        "Checkout not found — Payrail",
        html! {},
        html! {
            h1 { "This checkout does not exist" }
            p { "Check the link, or go back to the shop and start again." }
        },
    )
}

fn network_name(network: &str) -> String {
    let mut chars = network.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The status the page shows: the raw status, or `expired` for a pending checkout past its end
/// that the cron has not marked yet. On a `watched` network the page waits for the watcher to
/// decide instead: a transfer sent before the end may still be on its way.
pub fn shown_status(session: &SessionView, now: i64, watched: bool) -> RawStatus {
    if session.raw_status == RawStatus::Pending && session.expires_at <= now && !watched {
        RawStatus::Expired
    } else {
        session.raw_status
    }
}

/// The hosted checkout page for `session`, as it stands, offering `methods` (none: payments are
/// unavailable, and no deposit address is shown).
pub fn checkout(
    session: &SessionView,
    methods: &[quote::Method],
    sandbox: bool,
    now: i64,
    notice: Option<&str>,
    request: Option<&PaymentRequest>,
    demo_wallet: bool,
) -> Markup {
    let raw = shown_status(session, now, request.is_some());
    let pending = raw == RawStatus::Pending;
    let time_up = session.expires_at <= now;
    let received = matches!(
        raw,
        RawStatus::Succeeded | RawStatus::Paid | RawStatus::Refunded | RawStatus::PartiallyRefunded
    );
    let action = |path: &str| format!("/checkout/{}/{path}", session.id);
    // The simulated payments are for networks nobody watches; a watched one is paid on chain.
    let simulated_pending = pending && request.is_none();
    let head = html! {
        @if pending {
            noscript { meta http-equiv="refresh" content=(REFRESH_SECONDS); }
            script src="/hosted.js" defer {}
        } @else if received {
            meta http-equiv="refresh" content=(format!("{RETURN_SECONDS}; url={}", session.redirect_url));
        }
    };
    let title = format!("Pay {} — Payrail", session.merchant_name);
    layout(
        &title,
        head,
        html! {
            p.merchant { "Pay " strong { (session.merchant_name) } }
            h1 { (session.title) }
            p.amount { (session.amount_expected) " " (session.currency) }
            @if let Some(notice) = notice {
                p.notice role="alert" { (notice) }
            }
            @if pending && methods.is_empty() {
                p.status.bad #status data-status="unavailable" {
                    "Payments are unavailable right now. No funds can be taken: please return to "
                    (session.merchant_name) " and try again later."
                }
                p { a href=(session.redirect_url) { "Return to " (session.merchant_name) } }
            } @else if pending {
                @if sandbox && request.is_none() {
                    p.simulated role="note" {
                        strong { "Sandbox" } ": simulated networks. Do not send real funds to this address."
                    }
                }
                // One button per way to pay: a click switches at once, so the page's own
                // refresh never loses a half-made choice.
                @if !time_up {
                    form.methods method="post" action=(action("method")) {
                        p.label { "Pay with" }
                        @for m in methods {
                            @let value = format!("{}:{}", m.asset, m.network);
                            @let chosen = m.asset == session.asset && m.network == session.network;
                            button type="submit" name="method" value=(value) aria-pressed=(chosen) {
                                (m.asset) " · " (network_name(m.network))
                            }
                        }
                    }
                }
                // Past the end nothing more should be sent: the page only waits for the chain.
                @if !time_up {
                    @if let Some(request) = request {
                        @let uri = request.uri(&session.deposit_address);
                        @if let Some(svg) = qr_svg(&uri) {
                            a.qr #payment-qr href=(uri) data-uri=(uri) aria-label="Payment request for your wallet (EIP-681)" {
                                (PreEscaped(svg))
                            }
                        }
                    }
                    dl {
                        dt { "Send exactly" } dd #crypto-amount { strong { (session.crypto_amount) " " (session.asset) } }
                        dt { "Network" } dd #network { (network_name(&session.network)) }
                        @if let Some(token) = request.and_then(|r| r.token.as_ref()) {
                            dt { "Token contract" } dd { code #token-contract { (token) } }
                        }
                        dt { "To address" } dd {
                            code #deposit-address { (session.deposit_address) }
                            button.copy type="button" #copy-address data-copy=(session.deposit_address) hidden { "Copy" }
                        }
                        dt { "Time left" } dd.countdown #countdown data-expires-at=(session.expires_at) {
                            (format!("{}:{:02}", (session.expires_at - now).max(0) / 60, (session.expires_at - now).max(0) % 60))
                        }
                    }
                }
                p.status #status data-status="pending" data-expires-at=(session.expires_at) data-confirmations=[request.map(|r| r.confirmations)] {
                    span #chain-state {
                        @if time_up {
                            "The time to pay is up. Checking the network for a payment sent before the end."
                        } @else {
                            "Waiting for your payment."
                        }
                    }
                    " This page updates by itself."
                }
            } @else if received {
                p.status.ok #status data-status=(session.raw_status.as_str()) {
                    "Payment received. Returning you to " (session.merchant_name) "…"
                }
                p { a href=(session.redirect_url) { "Return to " (session.merchant_name) } }
            } @else {
                @let why = if raw == RawStatus::Failed { "This payment failed." } else { "This checkout has expired." };
                p.status.bad #status data-status=(raw.as_str()) {
                    (why) " No funds were taken."
                }
                p { a href=(session.redirect_url) { "Return to " (session.merchant_name) } }
            }
            @if sandbox {
                @let controls = [
                    ("pay-from-demo-wallet", "Pay from the demo wallet", pending && request.is_some() && demo_wallet && !time_up),
                    ("pay-exact", "Pay exactly", simulated_pending),
                    ("pay-under", "Underpay (90 %)", simulated_pending),
                    ("pay-over", "Overpay (110 %)", simulated_pending),
                    ("fail", "Fail", simulated_pending),
                    ("settle", "Settle to merchant", raw == RawStatus::Succeeded),
                    ("refund", "Refund the rest", received && raw != RawStatus::Refunded),
                ];
                @if controls.iter().any(|(_, _, allowed)| *allowed) {
                    section.sandbox aria-label="Sandbox controls" {
                        h2 { "Sandbox" }
                        @if request.is_some() {
                            p { "This checkout is paid on the local chain. Settlement and refunds are still acted out here." }
                        } @else {
                            p { "No real chain here: act out what the customer and the network would do." }
                        }
                        @for (control, label, allowed) in controls {
                            @if allowed {
                                form method="post" action=(action(&format!("sandbox/{control}"))) {
                                    button type="submit" name="control" value=(control) { (label) }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}
