//! Server-rendered HTML (maud escapes every interpolated value): the hosted checkout page.

use maud::{html, Markup, PreEscaped, DOCTYPE};
use shared_types::{quote, RawStatus};
use worker::Response;

use crate::db::checkout::SessionView;
use crate::error::{ApiError, OrInternal};

/// Seconds between refreshes of a pending checkout page.
const REFRESH_SECONDS: u32 = 3;
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
cursor:pointer}label{display:block;margin-bottom:.25rem}select{font:inherit;padding:.3rem}
.notice{background:#fff4d6;padding:.5rem 1rem;border-radius:6px}
";

/// An HTML response with the headers every page gets.
pub fn html(status: u16, markup: Markup) -> Result<Response, ApiError> {
    let response = Response::from_html(markup.into_string())
        .or_internal("build page")?
        .with_status(status);
    let headers = response.headers();
    for (name, value) in [
        (
            "Content-Security-Policy",
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; \
             base-uri 'none'; frame-ancestors 'none'",
        ),
        ("X-Content-Type-Options", "nosniff"),
        // The page's URL is the customer's capability: never send it elsewhere.
        ("Referrer-Policy", "no-referrer"),
        ("Cache-Control", "no-store"),
    ] {
        headers.set(name, value).or_internal("set header")?;
    }
    Ok(response)
}

fn layout(title: &str, head: Markup, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="robots" content="noindex";
                title { (title) }
                style { (PreEscaped(STYLE)) }
                (head)
            }
            body { main { (body) } }
        }
    }
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

/// The hosted checkout page for `session`, as it stands.
pub fn checkout(session: &SessionView, sandbox: bool, now: i64, notice: Option<&str>) -> Markup {
    let raw: Option<RawStatus> = session.raw_status.parse().ok();
    let pending = raw == Some(RawStatus::Pending) && session.expires_at > now;
    let received = matches!(
        raw,
        Some(
            RawStatus::Succeeded
                | RawStatus::Paid
                | RawStatus::Refunded
                | RawStatus::PartiallyRefunded
        )
    );
    let action = |path: &str| format!("/checkout/{}/{path}", session.id);
    let head = html! {
        @if pending {
            meta http-equiv="refresh" content=(REFRESH_SECONDS);
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
            @if pending {
                form method="post" action=(action("method")) {
                    label for="method" { "Pay with" }
                    select id="method" name="method" {
                        @for m in quote::METHODS {
                            @let value = format!("{}:{}", m.asset, m.network);
                            @let selected = m.asset == session.asset && m.network == session.network;
                            option value=(value) selected[selected] {
                                (m.asset) " on " (network_name(m.network))
                            }
                        }
                    }
                    " " button type="submit" { "Use this" }
                }
                dl {
                    dt { "Send exactly" } dd #crypto-amount { strong { (session.crypto_amount) " " (session.asset) } }
                    dt { "Network" } dd #network { (network_name(&session.network)) }
                    dt { "To address" } dd { code #deposit-address { (session.deposit_address) } }
                }
                p.status #status data-status="pending" {
                    "Waiting for your payment. This page updates by itself."
                }
            } @else if received {
                p.status.ok #status data-status=(session.raw_status) {
                    "Payment received. Returning you to " (session.merchant_name) "…"
                }
                p { a href=(session.redirect_url) { "Return to " (session.merchant_name) } }
            } @else {
                @let why = if raw == Some(RawStatus::Failed) { "This payment failed." } else { "This checkout has expired." };
                @let shown = if raw == Some(RawStatus::Pending) { "expired" } else { session.raw_status.as_str() };
                p.status.bad #status data-status=(shown) {
                    (why) " No funds were taken."
                }
                p { a href=(session.redirect_url) { "Return to " (session.merchant_name) } }
            }
            @if sandbox {
                section.sandbox aria-label="Sandbox controls" {
                    h2 { "Sandbox" }
                    p { "No real chain here: act out what the customer and the network would do." }
                    @for (control, label, allowed) in [
                        ("pay-exact", "Pay exactly", pending),
                        ("pay-under", "Underpay (90 %)", pending),
                        ("pay-over", "Overpay (110 %)", pending),
                        ("fail", "Fail", pending),
                        ("settle", "Settle to merchant", raw == Some(RawStatus::Succeeded)),
                        ("refund", "Refund the rest", received && raw != Some(RawStatus::Refunded)),
                    ] {
                        @if allowed {
                            form method="post" action=(action(&format!("sandbox/{control}"))) {
                                button type="submit" name="control" value=(control) { (label) }
                            }
                        }
                    }
                }
            }
        },
    )
}
