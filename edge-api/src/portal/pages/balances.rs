//! A merchant's balances: the "Balance" section of its page (each network and asset, with the
//! form that sets a debt limit, for admins; the form posts to the merchant pages), the statement
//! of one of them with its running balance, and that statement's CSV export.

use maud::{html, Markup};
use payrail_evm::Token;
use shared_types::PortalRole;
use worker::Response;

use super::layout::{csrf_field, error_box, layout, page, Call};
use crate::error::OrInternal;
use crate::portal::balances::{statement, Asset, Balance};
use crate::portal::merchants::{self, merchant_id};
use crate::portal::Portal;
use crate::route::Answer;

/// A debt limit the form sent and the operation refused: what was chosen and typed, and why.
pub(super) struct Refused<'a> {
    /// The `{network}:{token}` chosen.
    pub ledger: &'a str,
    /// What was typed.
    pub debt_limit: &'a str,
    /// Why it was refused.
    pub why: &'a str,
}

/// An amount as the page shows it: a true minus sign.
fn shown(amount: &str) -> String {
    match amount.strip_prefix('-') {
        Some(rest) => format!("\u{2212}{rest}"),
        None => amount.to_owned(),
    }
}

/// An amount of the asset in a table cell.
fn money(amount: &str, asset: &str) -> Markup {
    html! { (shown(amount)) " " span.unit { (asset) } }
}

/// Where a balance's statement is.
fn statement_path(merchant_id: i64, network: &str, token: &str) -> String {
    format!("/portal/merchants/{merchant_id}/balance/{network}/{token}")
}

/// The "Balance" section of merchant `merchant_id`'s page: its balances (or that it has none
/// yet) and, for admins, the debt limit form (`refused`: what it sent and why it was refused).
pub(super) fn section(
    portal: &Portal<'_>,
    merchant_id: i64,
    balances: &[Balance],
    choices: &[Asset],
    refused: Option<&Refused<'_>>,
) -> Markup {
    let admin = portal.session.role == PortalRole::Admin;
    let chosen = refused.map_or("", |r| r.ledger);
    html! {
        section #balance aria-labelledby="balance-title" {
            h2 #balance-title { "Balance" }
            p.muted {
                "What Payrail owes the merchant in each asset: payments credited, less fees, "
                "settlements and refunds. Reserved is held by a settlement or refund on its way. "
                "A refund of a payment already settled may take the available balance below zero, "
                "down to the debt limit; the debt is taken from the merchant's next settlements."
            }
            @if balances.is_empty() {
                p #balance-empty { "No balance yet: the merchant has not been paid on a watched network." }
            } @else {
                div.scroll role="region" aria-label="Balances" tabindex="0" {
                    table.stack #balances {
                        thead {
                            tr {
                                th scope="col" { "Asset" }
                                th.num scope="col" { "Balance" }
                                th.num scope="col" { "Reserved" }
                                th.num scope="col" { "Available" }
                                th.num scope="col" { "Debt limit" }
                                th scope="col" { "Statement" }
                            }
                        }
                        tbody {
                            @for b in balances {
                                tr data-ledger=(format!("{}:{}", b.network, b.token)) {
                                    th scope="row" { (b.asset) br; span.muted.network { (b.network) } }
                                    td.num.balance data-label="Balance" { (money(&b.balance, &b.asset)) }
                                    td.num.reserved data-label="Reserved" { (money(&b.reserved, &b.asset)) }
                                    td.num.available.bad[b.in_debt] data-label="Available" {
                                        (money(&b.available, &b.asset))
                                        @if b.over_limit { br; small { "over the limit" } }
                                        @else if b.in_debt { br; small { "in debt" } }
                                    }
                                    td.num.limit data-label="Debt limit" { (money(&b.debt_limit, &b.asset)) }
                                    td {
                                        a href=(statement_path(merchant_id, &b.network, &b.token))
                                            aria-label=(format!("Statement of {} on {}", b.asset, b.network)) { "Statement" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if admin && !choices.is_empty() {
                h3 #debt-limit-title { "Debt limit" }
                (error_box(refused.map(|r| r.why)))
                form.limit method="post" action=(format!("/portal/merchants/{merchant_id}/debt-limit")) aria-labelledby="debt-limit-title" {
                    (csrf_field(portal))
                    div {
                        label for="debt-ledger" { "Asset" }
                        select #debt-ledger name="ledger" {
                            @for a in choices {
                                @let key = a.key();
                                option value=(key) selected[key == chosen] { (a.asset) " on " (a.network) }
                            }
                        }
                    }
                    div {
                        label for="debt-limit" { "How far into debt (an amount of the asset, 0 for none)" }
                        input #debt-limit type="text" name="debt_limit" required inputmode="decimal"
                            autocomplete="off" placeholder="0.00" value=(refused.map_or("", |r| r.debt_limit));
                    }
                    div { button type="submit" { "Set debt limit" } }
                }
                p.muted { "Every change is e-mailed to every admin of the institution." }
            }
        }
    }
}

/// `GET /portal/merchants/{id}/balance/{network}/{token}`: the balance and one page of its
/// statement, newest first, with the running balance.
pub(super) async fn statement(c: Call<'_>, id: &str, network: &str, token: &str) -> Answer {
    let (portal, url) = (&c.portal, c.url);
    let id = merchant_id(id)?;
    let merchant = merchants::row(portal, id).await?;
    let (b, lines) =
        statement::statement(portal, id, (network, token), url.query().unwrap_or("")).await?;
    let here = statement_path(id, &b.network, &b.token);
    let next = lines
        .next_cursor
        .map(|seq| format!("{here}?starting_after={seq}"));
    let later_page = url.query_pairs().any(|(k, _)| k == "starting_after");
    let title = format!("{} on {}", b.asset, b.network);
    page(
        200,
        layout(
            &format!("{title} · {}", merchant.name),
            Some(portal),
            html! {
                section #statement-summary {
                    p { a href=(format!("/portal/merchants/{id}#balance")) { "← " (merchant.name) } }
                    h1 { "Statement: " (title) }
                    dl.fields {
                        dt { "Balance" } dd #balance-now { (money(&b.balance, &b.asset)) }
                        dt { "Reserved" } dd { (money(&b.reserved, &b.asset)) }
                        dt { "Available" } dd.bad[b.in_debt] #available-now { (money(&b.available, &b.asset)) }
                        dt { "Debt limit" } dd #limit-now { (money(&b.debt_limit, &b.asset)) }
                        dt { "Token" } dd { @if b.token == Token::NATIVE { "the network's own coin" } @else { code { (b.token) } } }
                    }
                    p { a #export href=(format!("{here}/export.csv")) { "Export the whole statement (CSV)" } }
                }
                section #statement-lines aria-label="Transfers" {
                    @if lines.data.is_empty() {
                        p #statement-empty { @if later_page { "No older transfers." } @else { "No transfers yet." } }
                    } @else {
                        div.scroll role="region" aria-label="Statement lines" tabindex="0" {
                            table.stack #statement {
                                thead {
                                    tr {
                                        th scope="col" { "Date" }
                                        th scope="col" { "What" }
                                        th.num scope="col" { "Debit" }
                                        th.num scope="col" { "Credit" }
                                        th.num scope="col" { "Balance" }
                                    }
                                }
                                tbody {
                                    @for l in &lines.data {
                                        tr data-seq=(l.seq) data-code=(l.code) data-state=(l.state) {
                                            td.date { time datetime=(l.created_at) { (l.created_at.replacen('T', " ", 1).trim_end_matches('Z')) } }
                                            td {
                                                (l.description)
                                                @if l.state != "posted" { " " span class=(format!("tag {}", l.state)) { (l.state) } }
                                                br;
                                                small.muted {
                                                    @if let Some(t) = l.transaction_id {
                                                        a href=(format!("/portal/payments/{t}")) { "payment " (t) }
                                                        @if l.reference != format!("payment {t}") { " · " code { (l.reference) } }
                                                    } @else {
                                                        code { (l.reference) }
                                                    }
                                                }
                                            }
                                            td.num.debit data-label="Debit" { @if l.side == "debit" { (money(&l.amount, &b.asset)) } }
                                            td.num.credit data-label="Credit" { @if l.side == "credit" { (money(&l.amount, &b.asset)) } }
                                            td.num.running data-label="Balance" {
                                                @match &l.balance_after { Some(after) => { (money(after, &b.asset)) } None => { "—" } }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                        p.muted { "Pending transfers reserve their amount and voided ones release it; only posted transfers move the balance." }
                    }
                    p.pages {
                        @if later_page { a href=(here) { "← Newest" } " " }
                        @if let Some(next) = next { a #older href=(next) { "Older →" } }
                    }
                }
            },
        ),
    )
}

/// `GET /portal/merchants/{id}/balance/{network}/{token}/export.csv`: the whole statement,
/// streamed.
pub(super) async fn export(c: Call<'_>, id: &str, network: &str, token: &str) -> Answer {
    let id = merchant_id(id)?;
    let (asset, stream) = statement::export(&c.portal, id, (network, token)).await?;
    let response = Response::from_stream(stream).or_internal("build export")?;
    let headers = response.headers();
    for (name, value) in [
        ("Content-Type", "text/csv; charset=utf-8".to_owned()),
        (
            "Content-Disposition",
            format!(
                "attachment; filename=\"{}\"",
                statement::export_name(id, &asset)
            ),
        ),
        ("Cache-Control", "no-store".to_owned()),
        ("X-Content-Type-Options", "nosniff".to_owned()),
    ] {
        headers.set(name, &value).or_internal("set header")?;
    }
    Ok(response)
}
