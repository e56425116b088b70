//! The screening page: payments held because a sender is on a sanctions list (or could not be
//! screened), each with its evidence; an admin releases (a false positive) or blocks each one
//! with a required note, once; everyone may download the audit export of a date range.

use maud::{html, Markup};
use shared_types::{ErrorCode, PortalRole};
use worker::Response;

use super::layout::{csrf_field, error_box, layout, page, Call};
use crate::db::screenings::Screening;
use crate::error::{ApiError, OrInternal};
use crate::http::see_other;
use crate::portal::payments::payment_id;
use crate::portal::screening::{self, ReviewView, TopupReviewView};
use crate::portal::Portal;
use crate::route::Answer;

/// `GET /portal/screening`.
pub(super) async fn show(c: Call<'_>) -> Answer {
    queue_page(&c.portal, None).await
}

/// `POST /portal/screening/{id}`: the form's decision (`decision` release or block, `note`),
/// then the queue; a refusal (no note, decided already) is shown on it.
pub(super) async fn decide(c: Call<'_>, id: &str) -> Answer {
    let id = payment_id(id)?;
    let Some((release, note)) = chosen(&c) else {
        return queue_page(&c.portal, Some("choose release or block")).await;
    };
    let made = screening::decide(&c.portal, id, release, note).await;
    answer(&c, made.map(|_| format!("review-{id}"))).await
}

/// `POST /portal/screening/topups/{id}`: the form's decision on a held top-up, then the queue;
/// a refusal is shown on it.
pub(super) async fn decide_topup(c: Call<'_>, id: &str) -> Answer {
    let Some((release, note)) = chosen(&c) else {
        return queue_page(&c.portal, Some("choose release or block")).await;
    };
    let made = screening::decide_topup(&c.portal, id, release, note).await;
    answer(&c, made.map(|decided| decided.id)).await
}

/// The form's decision (release or not) and note; `None` when it chose neither.
fn chosen<'c>(c: &'c Call<'_>) -> Option<(bool, &'c str)> {
    let release = match c.form.get("decision") {
        Some("release") => true,
        Some("block") => false,
        _ => return None,
    };
    Some((release, c.form.get("note").unwrap_or_default()))
}

/// After a decision: back to the queue at the decided card (`anchor`), or the queue with the
/// refusal (no note, decided already) shown on it.
async fn answer(c: &Call<'_>, made: Result<String, ApiError>) -> Answer {
    match made {
        Ok(anchor) => see_other(c.url, &format!("/portal/screening#{anchor}")),
        Err(err) if matches!(err.code, ErrorCode::InvalidRequest | ErrorCode::Conflict) => {
            queue_page(&c.portal, Some(&err.description)).await
        }
        Err(err) => Err(err),
    }
}

/// `GET /portal/screening/export.csv?from=YYYY-MM-DD&to=YYYY-MM-DD`.
pub(super) async fn export(c: Call<'_>) -> Answer {
    let csv = screening::export(&c.portal, c.url.query().unwrap_or("")).await?;
    let response = Response::from_bytes(csv).or_internal("build export")?;
    let headers = response.headers();
    for (name, value) in [
        ("Content-Type", "text/csv; charset=utf-8"),
        (
            "Content-Disposition",
            "attachment; filename=\"screening.csv\"",
        ),
        ("Cache-Control", "no-store"),
        ("X-Content-Type-Options", "nosniff"),
    ] {
        headers.set(name, value).or_internal("set header")?;
    }
    Ok(response)
}

async fn queue_page(portal: &Portal<'_>, error: Option<&str>) -> Answer {
    let queue = screening::queue(portal).await?;
    let topups = screening::topup_queue(portal).await?;
    let admin = portal.session.role == PortalRole::Admin;
    let open = queue.iter().filter(|r| r.decision.is_none()).count()
        + topups.iter().filter(|r| r.decision.is_none()).count();
    let today = shared_types::time::format_unix(portal.now)
        .map(|t| t[..10].to_owned())
        .unwrap_or_default();
    page(
        if error.is_some() { 400 } else { 200 },
        layout(
            "Screening",
            Some(portal),
            html! {
                section {
                    h1 { "Screening" }
                    p.muted {
                        "Every address money comes from or goes to is screened against the sanctions lists. "
                        "A payment from a listed address, or from one the chain does not name, is held here: "
                        "it is neither settled nor refunded until an admin releases it (a false positive: it "
                        "continues as it would have) or blocks it (it fails and its money stays frozen in custody). "
                        "Each decision needs a note and is made once."
                    }
                    (error_box(error))
                    p #open-count { strong { (open) } " held for review" }
                    @if queue.is_empty() {
                        p.muted { "No payment was ever held." }
                    }
                    @for review in &queue {
                        (review_card(portal, review, admin))
                    }
                }
                section #topups {
                    h2 { "Merchants' top-ups" }
                    p.muted {
                        "Money a merchant sends to its top-up address is screened the same way. A held top-up "
                        "is not added to the merchant's balance until it is released; blocked, it stays frozen in custody."
                    }
                    @if topups.is_empty() {
                        p.muted { "No top-up was ever held." }
                    }
                    @for review in &topups {
                        (topup_card(portal, review, admin))
                    }
                }
                section #export {
                    h2 { "Audit export" }
                    p.muted { "Every screening decision (senders of payments and top-ups, settlement wallets, payouts, refunds and returns) and every review decision of a date range, as CSV." }
                    form.filters method="get" action="/portal/screening/export.csv" {
                        div.field { label for="export-from" { "From" } input #export-from type="date" name="from" required value=(today); }
                        div.field { label for="export-to" { "To" } input #export-to type="date" name="to" required value=(today); }
                        div.actions { button type="submit" { "Download CSV" } }
                    }
                }
            },
        ),
    )
}

fn review_card(portal: &Portal<'_>, r: &ReviewView, admin: bool) -> Markup {
    let id = r.transaction_id;
    html! {
        article.review id=(format!("review-{id}")) data-decision=(r.decision.as_deref().unwrap_or("open")) {
            h2 {
                a href=(format!("/portal/payments/{id}")) { "Payment " (id) }
                " "
                (badge(r.decision.as_deref()))
            }
            dl.fields {
                dt { "Amount" } dd { (r.amount_gross.as_deref().unwrap_or("")) " " (r.currency.as_deref().unwrap_or("")) }
                dt { "Merchant" } dd { a href=(format!("/portal/merchants/{}", r.merchant_id)) { (r.merchant_id) } }
                dt { "Held since" } dd { (r.opened_at) }
                dt { "Why" } dd.reason { (r.reason) }
                dt { "Money held" } dd {
                    @for h in &r.held { code { (h.units) } " base units at " code { (h.address) } br; }
                }
            }
            (evidence(&r.evidence, &format!("Screening of payment {id}'s senders")))
            (decision(portal, (&r.decision, &r.decided_by, &r.decided_at, &r.note), admin, (&id.to_string(), &format!("/portal/screening/{id}"))))
        }
    }
}

fn topup_card(portal: &Portal<'_>, r: &TopupReviewView, admin: bool) -> Markup {
    let id = r.id.as_str();
    html! {
        article.review id=(id) data-decision=(r.decision.as_deref().unwrap_or("open")) {
            h2 {
                "Top-up of " (r.amount) " " (r.asset) " on " (r.network)
                " "
                (badge(r.decision.as_deref()))
            }
            dl.fields {
                dt { "Merchant" } dd { a href=(format!("/portal/merchants/{}", r.merchant_id)) { (r.merchant_id) } }
                dt { "Sender" } dd { @if let Some(sender) = &r.sender { code { (sender) } } @else { "not named by the chain" } }
                dt { "Top-up address" } dd { code { (r.address) } }
                dt { "Transaction" } dd { code.hash { (r.tx_hash) } }
                dt { "Held since" } dd { (r.opened_at) }
                dt { "Why" } dd.reason { (r.reason) }
            }
            (evidence(&r.evidence, &format!("Screening of the sender of top-up {id}")))
            (decision(portal, (&r.decision, &r.decided_by, &r.decided_at, &r.note), admin, (id, &format!("/portal/screening/topups/{id}"))))
        }
    }
}

/// A review's state as a badge.
fn badge(decision: Option<&str>) -> Markup {
    html! {
        @match decision {
            Some("released") => span.badge.s-paid { "released" },
            Some(_) => span.badge.s-failed { "blocked" },
            None => span.badge.s-pending { "held" },
        }
    }
}

/// Each sender's screening, as a table (nothing when there is none).
fn evidence(screenings: &[Screening], label: &str) -> Markup {
    html! {
        @if !screenings.is_empty() {
            div.scroll tabindex="0" role="region" aria-label=(label) {
                table.stack.evidence {
                    caption.muted { "Each sender's screening" }
                    thead { tr { th { "Address" } th { "Network" } th { "Result" } th { "Listed by" } th { "Oracle read" } th { "When" } } }
                    tbody {
                        @for s in screenings {
                            tr {
                                td data-label="Address" { code { (s.address) } }
                                td data-label="Network" { (s.network) }
                                td data-label="Result" { (s.result) }
                                td data-label="Listed by" { (s.listed_by.as_deref().unwrap_or("")) }
                                td data-label="Oracle read" {
                                    @if let (Some(o), Some(b)) = (&s.oracle, s.oracle_block) { code { (o) } " at block " (b) } @else { "none on this network" }
                                }
                                td data-label="When" { (shared_types::time::format_unix(s.screened_at).unwrap_or_default()) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A review's decision once made, or (to an admin) the form that makes it, posted to `action`;
/// `key` names the form's fields.
fn decision(
    portal: &Portal<'_>,
    (decided, by, at, note): (
        &Option<String>,
        &Option<String>,
        &Option<String>,
        &Option<String>,
    ),
    admin: bool,
    (key, action): (&str, &str),
) -> Markup {
    html! {
        @match (decided, admin) {
            (Some(decided), _) => p.decided {
                strong { (decided) } " by " (by.as_deref().unwrap_or("")) " at " (at.as_deref().unwrap_or("")) ": " (note.as_deref().unwrap_or(""))
            },
            (None, true) => form.decide method="post" action=(action) {
                (csrf_field(portal))
                label for=(format!("note-{key}")) { "Note (required: why you decide so)" }
                textarea id=(format!("note-{key}")) name="note" rows="2" required maxlength="2000" {}
                p {
                    button type="submit" name="decision" value="release" { "Release" }
                    " "
                    button.danger type="submit" name="decision" value="block" { "Block" }
                }
            },
            (None, false) => p.muted { "An admin decides." },
        }
    }
}
