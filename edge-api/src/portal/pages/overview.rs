//! `GET /portal/`: the overview, the page an admin lands on after logging in. What needs
//! attention first (a treasury float below what settlements need, webhook endpoints failing or
//! disabled), then the last 30 days' gross volume per currency and the payments per status as
//! charts with their figures, the 7- and 30-day tables, the treasury's float per network and
//! asset, and the networks' nodes and price feeds.

use maud::{html, Markup};
use payrail_evm::Token;
use shared_types::Status;

use super::chart::{status_badge, status_chart, volume_chart};
use super::layout::{layout, page, Call};
use crate::money::float_moves;
use crate::portal::networks::{self, NetworkStatus};
use crate::portal::overview::{self, Float, Health, Troubled};
use crate::portal::payments::{self, Overview};
use crate::route::Answer;

/// `GET /portal/`.
pub(super) async fn show(c: Call<'_>) -> Answer {
    let portal = &c.portal;
    let counts = payments::overview(portal).await?;
    let health = overview::health(portal).await?;
    let networks = networks::status_of(portal, false).await?;
    let short: Vec<&Float> = health.float.iter().filter(|f| f.short).collect();
    page(
        200,
        layout(
            "Overview",
            Some(portal),
            html! {
                section {
                    h1 { "Overview" }
                    @if short.is_empty() && health.endpoints.is_empty() {
                        p.ok #all-well role="status" { "Nothing needs attention: the treasury covers what settlements need and every webhook endpoint delivers." }
                    }
                    @for f in &short {
                        p.warn.float-warning role="alert" data-network=(f.network) data-asset=(f.asset) {
                            strong { "Treasury short on " (f.network) " " (f.asset) ": " }
                            "it can pay out " (f.available) " " (f.asset) " but your merchants are owed "
                            (f.owed) " " (f.asset) " (" (f.shortfall.as_deref().unwrap_or("")) " short). "
                            "Settlements wait until custody is swept to the treasury or the operator funds it. "
                            a href="#treasury-float" { "The float" }
                        }
                    }
                    @if !health.endpoints.is_empty() {
                        p.warn role="alert" {
                            strong { (health.endpoints.len()) " webhook endpoint" @if health.endpoints.len() > 1 { "s" } " failing or disabled. " }
                            a href="#webhook-health" { "See which" }
                        }
                    }
                }
                (volume_section(&health))
                (float_section(&health.float, health.treasury_address.as_deref(), &health.moving))
                (endpoints_section(&health.endpoints))
                (status_section(&counts))
                (networks_section(&networks))
            },
        ),
    )
}

fn volume_section(health: &Health) -> Markup {
    html! {
        section #volume {
            h2 { "Volume, last " (overview::CHART_DAYS) " days" }
            p.muted { "Gross received per day (UTC) from the payments created that day, one chart per currency." }
            @if health.volume.is_empty() { p { "No payments received anything in the last " (overview::CHART_DAYS) " days." } }
            div.charts { @for series in &health.volume { (volume_chart(series)) } }
        }
    }
}

fn status_section(counts: &Overview) -> Markup {
    // The 30 days' counts per status, over every currency.
    let month = counts.periods.iter().find(|p| p.days == 30);
    let per_status: Vec<(Status, i64)> = Status::ALL
        .iter()
        .map(|s| {
            let n = month
                .map(|p| {
                    p.lines
                        .iter()
                        .filter(|l| l.status == *s)
                        .map(|l| l.count)
                        .sum()
                })
                .unwrap_or(0);
            (*s, n)
        })
        .collect();
    html! {
        section #by-status {
            h2 { "Payments by status" }
            p.muted { "Payments created in the last 30 days, by status; below, by status and currency over 7 and 30 days (gross is what customers paid)." }
            (status_chart(&per_status, 30))
            details #by-currency {
            summary { "By status and currency, last 7 and 30 days" }
            @for period in &counts.periods {
                h3 { "Last " (period.days) " days" }
                @if period.lines.is_empty() { p { "No payments." } } @else {
                    div.scroll role="region" aria-label={ "Payments, last " (period.days) " days" } tabindex="0" {
                        table data-days=(period.days) {
                            thead { tr { th scope="col" { "Status" } th scope="col" { "Currency" } th.num scope="col" { "Payments" } th.num scope="col" { "Gross" } } }
                            tbody {
                                @for line in &period.lines {
                                    tr {
                                        td data-label="Status" { a href=(format!("/portal/payments?status={}", line.status.as_str())) { (status_badge(line.status)) } }
                                        td data-label="Currency" { (line.currency.as_deref().unwrap_or("—")) }
                                        td.num data-label="Payments" { (line.count) }
                                        td.num data-label="Gross" { (line.gross) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            }
        }
    }
}

fn float_section(float: &[Float], address: Option<&str>, moving: &[float_moves::View]) -> Markup {
    html! {
        section #treasury-float {
            h2 { "Treasury float" }
            p.muted {
                "What the treasury (the hot wallet settlements and refunds are paid from) holds by the books, "
                "per network and asset, against what your merchants are owed and not yet paid out. "
                "The books are compared with the chain by every cron run; a drift is e-mailed to the operator."
            }
            @if let Some(address) = address {
                p { "Treasury address (the same on every network): " code #treasury-address { (address) } }
            }
            @if float.is_empty() { p { "No treasury or merchant balance yet." } } @else {
                div.scroll role="region" aria-label="Treasury float" tabindex="0" {
                    table #float.stack {
                        thead { tr {
                            th scope="col" { "Network" } th scope="col" { "Asset" }
                            th.num scope="col" { "Treasury" } th.num scope="col" { "Can pay out now" }
                            th.num scope="col" { "Owed to merchants" } th scope="col" { "State" }
                        } }
                        tbody {
                            @for f in float {
                                tr data-network=(f.network) data-asset=(f.asset) {
                                    td data-label="Network" { (f.network) }
                                    td data-label="Asset" { (f.asset) }
                                    td.num data-label="Treasury" { (f.balance) }
                                    td.num data-label="Can pay out now" data-available { (f.available) }
                                    td.num data-label="Owed to merchants" data-owed { (f.owed) }
                                    td data-label="State" {
                                        @if f.short { span.badge.s-failed { "Short by " (f.shortfall.as_deref().unwrap_or("")) } }
                                        @else { span.badge.s-paid { "Covered" } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if !moving.is_empty() {
                h3 #float-moves-heading { "Moving between networks" }
                p.muted {
                    "The operator is moving the treasury's USDC from one network to another with CCTP "
                    "(burnt on the first, minted on the second). It leaves what the first can pay out "
                    "when its burn is signed, and counts on the second once it is minted."
                }
                div.scroll role="region" aria-label="Float moving between networks" tabindex="0" {
                    table #float-moves.stack aria-labelledby="float-moves-heading" {
                        thead { tr {
                            th scope="col" { "From" } th scope="col" { "To" }
                            th.num scope="col" { "USDC" } th scope="col" { "State" } th scope="col" { "Since" }
                        } }
                        tbody {
                            @for m in moving {
                                tr data-float-move=(m.id) {
                                    td data-label="From" { (m.from) }
                                    td data-label="To" { (m.to) }
                                    td.num data-label="USDC" { (m.amount) }
                                    td data-label="State" {
                                        span.badge.s-pending { (match m.state {
                                            "burning" => "Burning",
                                            "attesting" => "Awaiting attestation",
                                            _ => "Minting",
                                        }) }
                                        @if let Some(note) = &m.note { " " span.muted { (note) } }
                                    }
                                    td data-label="Since" { (m.created_at) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn endpoints_section(endpoints: &[Troubled]) -> Markup {
    html! {
        section #webhook-health {
            h2 { "Webhook endpoints failing or disabled" }
            @if endpoints.is_empty() { p #endpoints-healthy { "None: every endpoint delivers." } } @else {
                div.scroll role="region" aria-label="Webhook endpoints failing or disabled" tabindex="0" {
                    table #troubled-endpoints.stack {
                        thead { tr { th scope="col" { "Endpoint" } th scope="col" { "State" } th scope="col" { "Last success" } } }
                        tbody {
                            @for e in endpoints {
                                tr data-endpoint=(e.id) {
                                    td data-label="Endpoint" {
                                        a href=(format!("/portal/webhooks/{}", e.id)) { code { (e.url) } }
                                        @if !e.description.is_empty() { br; span.muted { (e.description) } }
                                    }
                                    td data-label="State" {
                                        @if e.disabled {
                                            span.badge.s-failed { "Disabled" }
                                            @if let Some(why) = &e.disabled_reason { br; small { (why) } }
                                        } @else {
                                            span.badge.s-pending { "Failing" }
                                            @if let Some(since) = &e.failing_since { br; small { "since " (since) } }
                                        }
                                    }
                                    td data-label="Last success" { (e.last_success.as_deref().unwrap_or("never")) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn networks_section(networks: &[NetworkStatus]) -> Markup {
    html! {
        @if !networks.is_empty() {
            section {
                h2 { "Networks" }
                p.muted { "The nodes this deployment reads its EVM networks from." }
                div.scroll role="region" aria-label="Networks" tabindex="0" {
                    table #networks {
                        thead { tr { th { "Network" } th { "Chain id" } th { "Confirmations" } th { "Node" } th { "Newest block" } th { "Tokens" } } }
                        tbody {
                            @for n in networks {
                                tr data-network=(n.network) {
                                    td { (n.network) }
                                    td { (n.chain_id) }
                                    td { (n.confirmations) }
                                    td {
                                        @if n.status == "ok" { span.ok { "ok" } }
                                        @else { span.warn { (n.status) ": " (n.error.as_deref().unwrap_or("")) } }
                                    }
                                    td { (n.head_block.map(|b| b.to_string()).unwrap_or_else(|| "—".into())) }
                                    td {
                                        @if n.tokens.is_empty() { "none: no way to pay is offered" }
                                        @for t in &n.tokens {
                                            (t.asset) " "
                                            @if t.address == Token::NATIVE { "(the network's own coin)" }
                                            @else { code { (t.address) } }
                                            br;
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                @if networks.iter().any(|n| !n.feeds.is_empty()) {
                    h3 { "Price feeds" }
                    p.muted { "Quotes in ether and in other currencies than USD, and settlement gas, are priced from these; a stale or unreadable feed withdraws the ways to pay that need it and holds the settlements that need it." }
                    div.scroll role="region" aria-label="Price feeds" tabindex="0" {
                        table #feeds {
                            thead { tr { th { "Network" } th { "Pair" } th { "State" } th { "Answer (USD)" } th { "Updated" } } }
                            tbody {
                                @for n in networks {
                                    @for f in &n.feeds {
                                        tr data-feed=(format!("{}:{}", n.network, f.pair)) {
                                            td { (n.network) }
                                            td { (f.pair) br; code { (f.address) } }
                                            td {
                                                @if f.status == "ok" { span.ok { "ok" } }
                                                @else { span.warn { (f.status) ": " (f.error.as_deref().unwrap_or("")) } }
                                            }
                                            td { (f.answer.as_deref().unwrap_or("—")) }
                                            td { (f.updated_at.as_deref().unwrap_or("—")) br; small { "at most " (f.max_age_seconds) " s old" } }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
