//! The hosted checkout page, server-rendered (maud escapes every interpolated value), in the
//! customer's language ([`crate::locale`]). With a watched network it offers the QR code (an
//! EIP-681 payment request) and, through `/hosted.js`, the wallets the browser injects (EIP-1193,
//! discovered by EIP-6963): the data the script needs rides in one `data-page` attribute, so the
//! page keeps its strict CSP (no inline script).

use maud::{html, Markup, PreEscaped};
use serde_json::json;
use shared_types::{quote, RawStatus};
use worker::Response;

use crate::db::sessions::SessionView;
use crate::error::ApiError;
use crate::html::{document_in, qr_svg};
use crate::locale::{around, fill, Catalogue};

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
button{font:inherit;padding:.4rem .9rem;border-radius:6px;border:1px solid #6b7686;background:#fff;
color:#1c2430;cursor:pointer}.label{margin:0 0 .25rem;color:#4a5566}
.methods button{margin:0 .25rem .35rem 0;font-size:.9rem}
.methods button[aria-pressed=true]{border-color:#1d4ed8;background:#e8efff;font-weight:600}
:focus-visible{outline:3px solid #1d4ed8;outline-offset:2px}
.notice{background:#fff4d6;padding:.5rem 1rem;border-radius:6px}
.simulated{border:2px dashed #c59b00;border-radius:6px;padding:.4rem .8rem;font-size:.9rem}
.qr{display:block;width:13rem;height:13rem;margin:.5rem auto}.qr svg{width:100%;height:100%}
.hint{text-align:center;color:#4a5566;font-size:.9rem;margin:.25rem 0 .75rem}
.wallets{text-align:center;margin:0 0 .75rem}
.wallets button{background:#1d4ed8;border-color:#1d4ed8;color:#fff;font-weight:600;margin:.2rem}
.wallets button[disabled]{background:#6b7fb8;border-color:#6b7fb8;cursor:progress}
.wallet-state{margin:.25rem 0;word-break:break-word}.wallet-state:empty{display:none}
.wallet-error{background:#fdecec;padding:.5rem 1rem;border-radius:6px}.wallet-error:empty{display:none}
.copy{font-size:.8rem;padding:.15rem .6rem;margin-left:.4rem}.countdown{font-weight:600}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);
white-space:nowrap}
@media (max-width:34rem){main{margin:0;border-radius:0;padding:1rem 1.1rem}
dl{grid-template-columns:1fr}dt{margin-top:.4rem}.amount{font-size:1.6rem}}
";

/// What a wallet needs to pay a watched deposit address: the EIP-681 request the QR code holds,
/// and what a browser wallet is asked for (its chain, and how to add it).
#[derive(Debug, Clone)]
pub struct PaymentRequest {
    /// The token contract; `None` for the network's own coin.
    pub token: Option<payrail_evm::Address>,
    /// The network's chain id.
    pub chain_id: u64,
    /// The quoted amount in the token's base units.
    pub base_units: u128,
    /// The token's (or the coin's) decimals.
    pub decimals: u32,
    /// The confirmations the network needs.
    pub confirmations: u64,
    /// The coin the network's gas is paid in (`ETH`, `POL`).
    pub coin: &'static str,
    /// A public JSON-RPC endpoint a wallet may add the network with (never the worker's own
    /// node URL, which may carry a key); `None`: the wallet must know the network already.
    pub public_rpc_url: Option<String>,
}

impl PaymentRequest {
    /// `ethereum:<token>@<chain id>/transfer?address=<deposit>&uint256=<base units>`, or for
    /// the network's coin `ethereum:<deposit>@<chain id>?value=<wei>`.
    pub fn uri(&self, deposit: &str) -> String {
        match &self.token {
            Some(token) => crate::chain::evm::payment_uri(
                &token.checksummed(),
                self.chain_id,
                deposit,
                self.base_units,
            ),
            None => crate::chain::evm::native_payment_uri(self.chain_id, deposit, self.base_units),
        }
    }

    /// What `/hosted.js` needs to pay from a browser wallet: the transfer (to, token, amount)
    /// and the chain as `wallet_switchEthereumChain` and `wallet_addEthereumChain` take it.
    fn for_wallet(&self, session: &SessionView) -> serde_json::Value {
        json!({
            "chainId": format!("0x{:x}", self.chain_id),
            "chainName": network_name(&session.network),
            "nativeCurrency": {"name": self.coin, "symbol": self.coin, "decimals": 18},
            "rpcUrls": self.public_rpc_url.iter().collect::<Vec<_>>(),
            "to": session.deposit_address,
            "token": self.token.map(|t| t.checksummed()),
            "amount": self.base_units.to_string(),
            "decimals": self.decimals,
            "asset": session.asset,
        })
    }
}

/// A page response: the referrer is never sent.
pub fn respond(status: u16, markup: Markup) -> Result<Response, ApiError> {
    crate::html::page(status, markup, "no-referrer")
}

fn layout(lang: &Catalogue, title: &str, head: Markup, body: Markup) -> Markup {
    document_in(lang.code, title, STYLE, head, html! { main { (body) } })
}

/// The page for an unknown checkout.
pub fn not_found(lang: &Catalogue) -> Markup {
    let t = &lang.page;
    layout(
        lang,
        &t.not_found_title,
        html! {},
        html! {
            h1 { (t.not_found_heading) }
            p { (t.not_found_body) }
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

/// The notice for a way to pay that cannot be quoted now.
pub fn unquoted(lang: &Catalogue, method: &quote::Method) -> String {
    let named = format!("{} · {}", method.asset, network_name(method.network));
    fill(&lang.page.unquoted, &[("method", &named)])
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

/// `template` with `{merchant}` as the merchant's name in bold.
fn with_merchant(template: &str, merchant: &str) -> Markup {
    let (before, after) = around(template, "merchant");
    html! { (before) strong { (merchant) } (after) }
}

/// What the page's script reads: the language's script messages and number format, and the
/// payment a browser wallet would make (none once the time is up or without a watched chain).
fn script_data(lang: &Catalogue, currency: &str, wallet: Option<serde_json::Value>) -> String {
    json!({
        "lang": lang.code,
        "number": lang.number,
        "money": lang.money,
        "currency": currency,
        "messages": lang.script,
        "payment": wallet,
    })
    .to_string()
}

/// The hosted checkout page for `session`, as it stands, offering `methods` (none: payments are
/// unavailable, and no deposit address is shown), in `lang`.
#[allow(clippy::too_many_arguments)]
pub fn checkout(
    session: &SessionView,
    methods: &[quote::Method],
    sandbox: bool,
    now: i64,
    notice: Option<&str>,
    request: Option<&PaymentRequest>,
    demo_wallet: bool,
    lang: &Catalogue,
) -> Markup {
    let t = &lang.page;
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
    let wallet = request
        .filter(|_| pending && !time_up && !methods.is_empty())
        .map(|r| r.for_wallet(session));
    let head = html! {
        @if pending {
            noscript { meta http-equiv="refresh" content=(REFRESH_SECONDS); }
            script src="/hosted.js" defer {}
        } @else if received && session.late_rate.is_none() {
            // The return to the shop is the script's, with a way to stay: a timed meta refresh
            // could not be turned off (WCAG 2.2.1). Without scripts the link is the way back.
            script src="/hosted.js" defer {}
        }
    };
    let left = (session.expires_at - now).max(0);
    let title = fill(&t.title, &[("merchant", &session.merchant_name)]);
    let merchant = session.merchant_name.as_str();
    layout(
        lang,
        &title,
        head,
        html! {
            p.merchant { (with_merchant(&t.pay_merchant, merchant)) }
            h1 { (session.title) }
            p.amount #order-amount { (lang.money(&session.amount_expected.to_string(), &session.currency)) }
            @if let Some(notice) = notice {
                p.notice role="alert" { (notice) }
            }
            @if pending && methods.is_empty() {
                p.status.bad #status data-status="unavailable" {
                    (fill(&t.unavailable, &[("merchant", merchant)]))
                }
                p { a href=(session.redirect_url) { (fill(&t.return_to, &[("merchant", merchant)])) } }
            } @else if pending {
                div #checkout-data hidden data-page=(script_data(lang, &session.currency, wallet)) {}
                @if sandbox && request.is_none() {
                    p.simulated role="note" { (t.sandbox_note) }
                }
                // One button per way to pay: a click switches at once, so the page's own
                // refresh never loses a half-made choice.
                @if !time_up {
                    form.methods method="post" action=(action("method")) {
                        p.label #way-to-pay { (t.way_to_pay) }
                        div role="group" aria-labelledby="way-to-pay" {
                            @for m in methods {
                                @let value = format!("{}:{}", m.asset, m.network);
                                @let chosen = m.asset == session.asset && m.network == session.network;
                                button type="submit" name="method" value=(value) aria-pressed=(chosen) {
                                    (m.asset) " · " (network_name(m.network))
                                }
                            }
                        }
                    }
                }
                // Past the end nothing more should be sent: the page only waits for the chain.
                @if !time_up {
                    @if let Some(request) = request {
                        @let uri = request.uri(&session.deposit_address);
                        @if let Some(svg) = qr_svg(&uri) {
                            a.qr #payment-qr href=(uri) data-uri=(uri) aria-label=(t.qr_label) {
                                (PreEscaped(svg))
                            }
                        }
                        p.hint { (t.qr_hint) }
                        // Filled by the script with one button per wallet the browser has.
                        div.wallets #wallets role="group" aria-label=(t.browser_wallet) hidden {}
                        p.wallet-state #wallet-state role="status" {}
                        p.wallet-error #wallet-error role="alert" {}
                    }
                    dl {
                        dt { (t.send_exactly) } dd #crypto-amount { strong { (lang.money(&session.crypto_amount, &session.asset)) } }
                        dt { (t.network) } dd #network { (network_name(&session.network)) }
                        @if let Some(token) = request.and_then(|r| r.token.as_ref()) {
                            dt { (t.token_contract) } dd { code #token-contract { (token) } }
                        }
                        dt { (t.to_address) } dd {
                            code #deposit-address { (session.deposit_address) }
                            button.copy type="button" #copy-address data-copy=(session.deposit_address) hidden { (t.copy) }
                        }
                        dt { (t.time_left) } dd.countdown #countdown data-expires-at=(session.expires_at) {
                            (format!("{}:{:02}", left / 60, left % 60))
                        }
                        dt { (t.pay_by) } dd {
                            time #pay-by datetime=(shared_types::time::format_unix(session.expires_at).unwrap_or_default()) {
                                (lang.date(session.expires_at))
                            }
                        }
                    }
                }
                // The one polite live region: the chain's news, and the time left now and then.
                p.status #status role="status" data-status="pending" data-expires-at=(session.expires_at) data-seconds-left=(left) data-confirmations=[request.map(|r| r.confirmations)] {
                    span #chain-state {
                        @if time_up { (t.time_up) } @else { (t.waiting) }
                    }
                    " " span #time-note { (t.updates_itself) }
                    " " span.visually-hidden #time-announce {}
                }
            } @else if received {
                // Money after the end counts at the rate when it arrived, not the quote: the
                // page says so and stays (no automatic return) until the customer has read it.
                @if let (Some(rate), Some(asset), Some(gross)) = (&session.late_rate, &session.paid_asset, &session.amount_gross) {
                    p.status.ok #status role="status" data-status=(session.raw_status.as_str()) {
                        span #late-valuation {
                            (fill(&t.late_valued, &[
                                ("asset", asset),
                                ("rate", &lang.money(rate, &session.currency)),
                                ("value", &lang.money(gross, &session.currency)),
                            ]))
                        }
                    }
                } @else {
                    p.status.ok #status role="status" data-status=(session.raw_status.as_str()) {
                        (t.received)
                    }
                    div #auto-return hidden data-url=(session.redirect_url) data-seconds=(RETURN_SECONDS) {
                        p {
                            (fill(&t.returning, &[("merchant", merchant), ("seconds", &RETURN_SECONDS.to_string())]))
                            " "
                            button #stay type="button" { (t.stay) }
                        }
                    }
                }
                p { a #return-link href=(session.redirect_url) { (fill(&t.return_to, &[("merchant", merchant)])) } }
            } @else if raw == RawStatus::Held {
                // Held by its screening: received, and nothing more is said to the customer.
                p.status #status role="status" data-status="held" { (t.under_review) }
                p { a href=(session.redirect_url) { (fill(&t.return_to, &[("merchant", merchant)])) } }
            } @else if raw == RawStatus::Expired && session.late_seen {
                // Not "no funds were taken": money came after the end and is being valued.
                p.status #status role="status" data-status="valuing" { (t.late_arrived) }
                p { a href=(session.redirect_url) { (fill(&t.return_to, &[("merchant", merchant)])) } }
            } @else {
                @let why = if raw == RawStatus::Failed { &t.failed } else { &t.expired };
                p.status.bad #status role="status" data-status=(raw.as_str()) {
                    (why) " " (t.no_funds)
                }
                p { a href=(session.redirect_url) { (fill(&t.return_to, &[("merchant", merchant)])) } }
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
                    // The sandbox panel is the developer's, not the customer's: it stays English.
                    section.sandbox aria-label="Sandbox controls" lang="en" {
                        h2 { "Sandbox" }
                        @if request.is_some() {
                            p { "This checkout is paid on the local chain. The demo wallet sends a real transaction from a local account; settlement and refunds are acted out here." }
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
