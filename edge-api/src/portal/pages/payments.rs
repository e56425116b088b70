//! The payments pages: the payments list with its search and the partner API's filters, one
//! payment with its timeline, and the CSV export.

use maud::{html, Markup};
use shared_types::ids::Scoped;
use shared_types::{ErrorCode, PortalRole, RawStatus, Status, Transaction};
use worker::Response;

use super::chart::{amount_badge, status_badge, status_label};
use super::layout::{csrf_field, error_box, layout, page, Call};
use crate::db::watches::TransferKind;
use crate::error::OrInternal;
use crate::http::see_other;
use crate::money::refund::{self, returns, RefundRequest};
use crate::portal::balances::{self, RefundEffect};
use crate::portal::payments::{self, payment_id, PaymentDetail};
use crate::portal::{overview, search};
use crate::route::Answer;

/// The filters the bar carries (`q` searches instead, on its own).
const FILTERS: &[&str] = &["status", "merchant_id", "created_after", "created_before"];

/// `GET /portal/payments`: the search box, the one-line filter bar with its quick ranges, one
/// page of payments (merchant names, status and amount badges), the next page and the export.
/// With `q`, the search's matches instead of a page.
pub(super) async fn list(c: Call<'_>) -> Answer {
    let (portal, url) = (&c.portal, c.url);
    let given = |name: &str| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    let q = given("q");
    // The filter bar sends every field, empty ones too: an empty field means no filter.
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (k, v) in url.query_pairs() {
        if !v.is_empty() && k != "q" {
            query.append_pair(&k, &v);
        }
    }
    let (rows, next, search, error) = if q.is_empty() {
        let found = payments::list(portal, &query.finish()).await?;
        let next = found.next_cursor;
        let rows: Vec<(Transaction, Option<String>)> =
            found.data.into_iter().map(|t| (t, None)).collect();
        (rows, next, None, None)
    } else {
        match search::search(portal, &q).await {
            Ok(found) => {
                let rows = found
                    .hits
                    .into_iter()
                    .map(|h| (h.transaction, Some(h.key)))
                    .collect();
                (rows, None, Some((found.text, found.more)), None)
            }
            Err(err) if err.code == ErrorCode::InvalidRequest => {
                (Vec::new(), None, None, Some(err.description))
            }
            Err(err) => return Err(err),
        }
    };
    let names = search::merchant_names(portal, rows.iter().map(|(t, _)| t.merchant_id)).await?;
    let choices = search::merchant_choices(portal).await?;
    // The same filters without the cursor, for the next page, the export and the quick ranges.
    let kept = |skip: &[&str]| {
        let mut out = form_urlencoded::Serializer::new(String::new());
        for (k, v) in url.query_pairs() {
            if FILTERS.contains(&k.as_ref()) && !skip.contains(&k.as_ref()) && !v.is_empty() {
                out.append_pair(&k, &v);
            }
        }
        out.finish()
    };
    let filters = kept(&[]);
    let and = |query: &str| {
        if query.is_empty() {
            String::new()
        } else {
            format!("{query}&")
        }
    };
    let next =
        next.map(|cursor| format!("/portal/payments?{}starting_after={cursor}", and(&filters)));
    let ranges = [("Today", 0), ("7 days", 6), ("30 days", 29)]
        .into_iter()
        .map(|(label, back)| {
            let from = overview::day_before(portal.now, back)?;
            let href = format!(
                "/portal/payments?{}created_after={from}",
                and(&kept(&["created_after", "created_before"]))
            );
            let active = given("created_after") == from && given("created_before").is_empty();
            Ok((label, href, active))
        })
        .collect::<Result<Vec<_>, crate::error::ApiError>>()?;
    let status = given("status");
    let merchant = given("merchant_id");
    let any_filter = !filters.is_empty();
    page(
        if error.is_some() { 400 } else { 200 },
        layout(
            "Payments",
            Some(portal),
            html! {
                section {
                    h1 { "Payments" }
                    form.search role="search" method="get" action="/portal/payments" {
                        label for="q" { "Find a payment" }
                        div.row {
                            input #q type="search" name="q" value=(q) maxlength="255" autocomplete="off"
                                placeholder="Payment id, reference, transaction hash or deposit address";
                            button type="submit" { "Search" }
                        }
                    }
                    (error_box(error.as_deref()))
                    form.filters method="get" action="/portal/payments" aria-label="Filters" {
                        div.field {
                            label for="status" { "Status" }
                            select #status name="status" {
                                option value="" { "Any" }
                                @for s in Status::ALL {
                                    option value=(s.as_str()) selected[status == s.as_str()] { (status_label(*s)) }
                                }
                            }
                        }
                        div.field.merchant {
                            label for="merchant_id" { "Merchant" }
                            @if let Some(choices) = &choices {
                                select #merchant_id name="merchant_id" {
                                    option value="" { "Any" }
                                    @for (id, name) in choices {
                                        option value=(id) selected[merchant == id.to_string()] { (name) }
                                    }
                                }
                            } @else {
                                input #merchant_id type="text" inputmode="numeric" name="merchant_id" value=(merchant) placeholder="Merchant id";
                            }
                        }
                        div.field {
                            label for="created_after" { "From" }
                            input #created_after type="date" name="created_after" value=(given("created_after"));
                        }
                        div.field {
                            label for="created_before" { "Before" }
                            input #created_before type="date" name="created_before" value=(given("created_before"));
                        }
                        div.field.actions {
                            button type="submit" { "Filter" }
                            @if any_filter { " " a href="/portal/payments" #clear { "Clear" } }
                        }
                    }
                    div.toolbar {
                        nav.quick aria-label="Quick date ranges" {
                            span.muted { "Created: " }
                            @for (label, href, active) in &ranges {
                                @if *active { a.chip.on href=(href) aria-current="page" { (label) } }
                                @else { a.chip href=(href) { (label) } }
                            }
                        }
                        a href=(format!("/portal/payments/export.csv?{filters}")) #export { "Export CSV" }
                    }
                }
                section {
                    @if let Some((text, more)) = &search {
                        p #search-result role="status" {
                            @if rows.is_empty() { "No payment matches " } @else if rows.len() == 1 { "1 payment matches " } @else { (rows.len()) " payments match " }
                            code { (text) } ". "
                            @if *more { "Only the newest " (rows.len()) " are shown. " }
                            a href="/portal/payments" { "All payments" }
                        }
                    }
                    @if rows.is_empty() {
                        @if search.is_none() && error.is_none() { p { "No payments match." } }
                    } @else {
                        div.scroll {
                            table #payments.payments.stack {
                                thead { tr {
                                    th scope="col" { "Payment" } th scope="col" { "Created (UTC)" } th scope="col" { "Merchant" }
                                    th scope="col" { "Status" } th.num scope="col" { "Amount" } th.num scope="col" { "Gross" }
                                    th scope="col" { "Received" } th scope="col" { "Reference" }
                                    @if search.is_some() { th scope="col" { "Matched by" } }
                                } }
                                tbody {
                                    @for (t, key) in &rows {
                                        tr data-payment=(t.id) data-merchant=(t.merchant_id) {
                                            td data-label="Payment" { a href=(format!("/portal/payments/{}", t.id)) { (t.id) } }
                                            td data-label="Created" { (created(t.created_at.as_deref())) }
                                            td data-label="Merchant" data-merchant-name {
                                                @match names.get(&t.merchant_id) {
                                                    Some(name) => { a href=(format!("/portal/merchants/{}", t.merchant_id)) { (name) } }
                                                    None => { "Merchant " (t.merchant_id) }
                                                }
                                            }
                                            td data-label="Status" { (status_badge(t.status)) }
                                            td.num data-label="Amount" { (t.amount.expected.map(|d| d.to_string()).unwrap_or_default()) " " span.unit { (t.currency.as_deref().unwrap_or("")) } }
                                            td.num data-label="Gross" { (t.amount.gross.map(|d| d.to_string()).unwrap_or_default()) }
                                            td data-label="Received" { (amount_badge(t.amount_status)) }
                                            td data-label="Reference" { code { (t.external_reference.as_deref().unwrap_or("")) } }
                                            @if let Some(key) = key { td data-label="Matched by" data-key=(key) { (key_label(key)) } }
                                        }
                                    }
                                }
                            }
                        }
                    }
                    @if let Some(next) = next { p { a href=(next) { "Next page →" } } }
                }
            },
        ),
    )
}

/// A creation time as the list shows it: `2026-11-23 14:05` (UTC).
fn created(at: Option<&str>) -> String {
    at.map(|t| t.get(..16).unwrap_or(t).replacen('T', " ", 1))
        .unwrap_or_default()
}

/// What a search matched, in words.
fn key_label(key: &str) -> &'static str {
    match key {
        "id" => "Payment id",
        "external_reference" => "External reference",
        "tx_hash" => "Transaction hash",
        _ => "Deposit address",
    }
}

/// `GET /portal/payments/{id}`: every field and the timeline.
pub(super) async fn show(c: Call<'_>, id: &str) -> Answer {
    let portal = &c.portal;
    let id = payment_id(id)?;
    let PaymentDetail {
        transaction: t,
        timeline,
        deposits,
        chain_transfers,
        settlement_hold,
        settlement_transactions,
        refunds,
        parts,
        uncredited,
        screening,
    } = payments::detail(portal, id).await?;
    let refundable = t.amount.gross.map(|gross| {
        shared_types::refundable(
            gross,
            refunds
                .iter()
                .filter(|r| !r.extra)
                .map(|r| (r.amount, r.state)),
        )
    });
    let refundable_now = portal.session.role == PortalRole::Admin
        && !deposits.is_empty()
        && matches!(
            t.raw_status,
            RawStatus::Succeeded | RawStatus::Paid | RawStatus::PartiallyRefunded
        )
        && refundable.is_some_and(|r| r > rust_decimal::Decimal::ZERO)
        // A payment made in several ways to pay is refunded part by part once every part is
        // settled.
        && (parts.len() < 2 || t.raw_status != RawStatus::Succeeded);
    let may_refund = refundable_now;
    let may_return = portal.session.role == PortalRole::Admin;
    // One key for the page's return forms: a second submit of the same form is the same return.
    let return_key = crate::crypto::random_token("rtk_").or_internal("draw a return key")?;
    let merchant = search::merchant_names(portal, [t.merchant_id])
        .await?
        .remove(&t.merchant_id);
    let money =
        |d: Option<rust_decimal::Decimal>| d.map(|d| d.to_string()).unwrap_or_else(|| "—".into());
    let text = |v: &Option<String>| v.clone().unwrap_or_else(|| "—".into());
    page(
        200,
        layout(
            &format!("Payment {}", t.id),
            Some(portal),
            html! {
                section {
                    p { a href="/portal/payments" { "← Payments" } }
                    h1 { "Payment " (t.id) }
                    dl.fields {
                        dt { "Status" } dd #status { (t.status.as_str()) " (" (t.raw_status.as_str()) ")" }
                        dt { "Merchant" } dd #merchant {
                            a href=(format!("/portal/merchants/{}", t.merchant_id)) { (merchant.as_deref().unwrap_or("")) }
                            " " span.muted { "(" (t.merchant_id) ")" }
                        }
                        dt { "External reference" } dd { code { (text(&t.external_reference)) } }
                        dt { "Expected" } dd { (money(t.amount.expected)) " " (text(&t.currency)) }
                        dt { "Gross" } dd { (money(t.amount.gross)) }
                        dt { "Amount status" } dd {
                            @if t.amount_status.is_some() { (amount_badge(t.amount_status)) } @else { "—" }
                        }
                        dt { "PSP fee" } dd { (money(t.amount.psp_fee)) }
                        dt { "Gas fee" } dd { (money(t.amount.gas_fee)) }
                        dt { "Bridge fee" } dd { (money(t.amount.bridge_fee)) }
                        dt { "Net" } dd { (money(t.amount.net)) }
                        dt { "Asset" } dd { (text(&t.asset)) }
                        dt { "Payment network" } dd { (text(&t.networks.payment)) }
                        dt { "Settlement network" } dd { (text(&t.networks.settlement)) }
                        dt { "Source hash" } dd { code { (text(&t.tx_hashes.source)) } }
                        dt { "Settlement hash" } dd { code { (text(&t.tx_hashes.settlement)) } }
                        dt { "Bridge hash" } dd { code { (text(&t.tx_hashes.bridge)) } }
                        dt { "Customer e-mail" } dd { (text(&t.customer_email)) }
                        dt { "Created" } dd { (text(&t.created_at)) }
                        dt { "Paid" } dd { (text(&t.paid_at)) }
                    }
                }
                @if let Some(review) = &screening {
                    section #screening-hold {
                        h2 { "Screening" }
                        @match review.decision.as_deref() {
                            None => div.warn {
                                p { strong { "Held for review." } " " (review.reason) "." }
                                p { "It is neither settled nor refunded until an admin decides on the "
                                    a href=(format!("/portal/screening#review-{}", t.id)) { "Screening page" } "." }
                            },
                            Some(decision) => p {
                                "It was held (" (review.reason) "), then " strong { (decision) } " by "
                                (review.decided_by.as_deref().unwrap_or("")) " at " (review.decided_at.as_deref().unwrap_or(""))
                                ": " (review.note.as_deref().unwrap_or(""))
                            },
                        }
                    }
                }
                @if !deposits.is_empty() {
                    section #on-chain {
                        h2 { "On chain" }
                        table.stack {
                            thead { tr { th { "Deposit address" } th { "Quote" } th { "Rate" } th { "Node" } } }
                            tbody {
                                @for d in &deposits {
                                    tr {
                                        td data-label="Deposit address" { code { (d.address) } br; (d.asset) " · " (d.network) }
                                        td data-label="Quote" { (d.crypto_amount) " " (d.asset) br; small { (d.quoted_at) } }
                                        td data-label="Rate" { "1 " (d.asset) " = " (d.rate) " " (text(&t.currency)) br; small { (d.rate_source) } }
                                        td data-label="Node" {
                                            @if let Some(error) = &d.node_error { span.bad { (error) } }
                                            @else { "block " (d.head_block) }
                                        }
                                    }
                                }
                            }
                        }
                        @if chain_transfers.is_empty() {
                            p { "No transfer seen yet." }
                        } @else {
                            table.stack #chain-transfers {
                                thead { tr { th { "Transaction" } th { "Amount" } th { "Block" } th { "State" } } }
                                tbody {
                                    @for c in &chain_transfers {
                                        tr data-kind=(c.kind.as_str()) {
                                            td data-label="Transaction" { code { (c.tx_hash) } }
                                            td data-label="Amount" {
                                                @if let Some(amount) = &c.amount { (amount) " " (text(&c.asset)) }
                                                @else { (c.base_units.as_deref().unwrap_or("—")) " base units of " code { (c.token) } }
                                            }
                                            td data-label="Block" { (c.block_number) }
                                            td data-label="State" {
                                                (if c.confirmed { "confirmed" } else { "confirming" })
                                                @if c.kind == TransferKind::UnexpectedToken { " · " strong { "another token: for review" } }
                                                @if c.after_expiry { " · after the checkout ended" }
                                                @if let (Some(rate), Some(source)) = (&c.rate, &c.rate_source) {
                                                    " · valued at the rate when it arrived: 1 " (text(&t.asset)) " = " (rate) " " (text(&t.currency)) " (" (source) ")"
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                @if parts.len() > 1 {
                    section #parts {
                        h2 { "Parts" }
                        p.muted { "The customer paid in more than one way. Each part is settled to the merchant and refunded in the asset it came in, at its own rate; the payment is paid once every part is settled." }
                        table #payment-parts {
                            thead { tr { th scope="col" { "Part" } th scope="col" { "Paid in" } th scope="col" { "Share" } th scope="col" { "Rate" } th scope="col" { "Left to refund" } } }
                            tbody {
                                @for p in &parts {
                                    tr {
                                        td data-label="Part" { (p.part) }
                                        td data-label="Paid in" { (p.asset) " on " (p.network) }
                                        td data-label="Share" { (p.gross) " " (text(&t.currency)) }
                                        td data-label="Rate" { "1 " (p.asset) " = " (p.rate) " " (text(&t.currency)) }
                                        td data-label="Left to refund" { (p.refundable) " " (text(&t.currency)) }
                                    }
                                }
                            }
                        }
                    }
                }
                @if !uncredited.is_empty() {
                    section #uncredited {
                        h2 { "Received after the credit" }
                        p.muted { "This money reached the payment's addresses after the payment was credited. It is not part of the payment and is owed to nobody: send it back to the customer." }
                        table #uncredited-list.stack {
                            thead { tr { th scope="col" { "Address" } th scope="col" { "Left there" } @if may_return { th scope="col" { "Return it to" } } } }
                            tbody {
                                @for (k, u) in uncredited.iter().enumerate() {
                                    tr {
                                        td data-label="Address" { code { (u.address) } br; small { (u.asset) " · " (u.network) } }
                                        td data-label="Left there" { strong { (u.amount) " " (u.asset) } br; small { (u.base_units) " base units" } }
                                        @if may_return {
                                            td data-label="Return it to" {
                                                form.return method="post" action=(format!("/portal/payments/{}/return", t.id)) {
                                                    (csrf_field(portal))
                                                    input type="hidden" name="deposit" value=(u.address);
                                                    input type="hidden" name="key" value=(return_key);
                                                    label for=(format!("return-address-{k}")) { "Customer's address" }
                                                    input id=(format!("return-address-{k}")) type="text" name="address" required autocomplete="off" spellcheck="false" placeholder="0x…";
                                                    button type="submit" { "Return " (u.amount) " " (u.asset) }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                @if settlement_hold.is_some() || !settlement_transactions.is_empty() {
                    section #settlement {
                        h2 { "Settlement" }
                        @if let Some(hold) = &settlement_hold {
                            p.warn #settlement-hold {
                                strong { "Held in custody: " } (hold.reason) " (since " (hold.since) "). "
                                "It settles by itself once this is fixed."
                            }
                        }
                        @if !settlement_transactions.is_empty() {
                            table.stack #settlement-transactions {
                                thead { tr { th { "Transaction" } th { "Pays" } th { "Gas" } th { "State" } } }
                                tbody {
                                    @for c in &settlement_transactions {
                                        tr data-state=(c.state) {
                                            td data-label="Transaction" {
                                                code { (c.tx_hash) } br;
                                                small.leg {
                                                    @match c.leg.as_deref() {
                                                        Some("burn") => { "Burn on " (c.network) " (CCTP)" }
                                                        Some("mint") => { "Mint on " (c.network) " (CCTP)" }
                                                        _ => { "On " (c.network) }
                                                    }
                                                    " · nonce " (c.nonce) " · " (c.created_at)
                                                }
                                            }
                                            td data-label="Pays" {
                                                @if c.leg.as_deref() == Some("burn") { (c.net) " " (text(&t.currency)) " burnt for " code { (c.wallet) } }
                                                @else if c.leg.as_deref() == Some("mint") { (c.net) " " (text(&t.currency)) " minted to " code { (c.wallet) } }
                                                @else { (c.net) " " (text(&t.currency)) " to " code { (c.wallet) } }
                                                br; small { (c.net_base_units) " base units" }
                                            }
                                            td data-label="Gas" {
                                                @match &c.gas_fee {
                                                    Some(fee) => { (fee) " " (text(&t.currency)) }
                                                    None => { "Counted with the burn" }
                                                }
                                                br;
                                                small { (c.gas_limit) " gas at " (c.gas_price) " wei"
                                                    @if let Some(used) = &c.gas_used { " · used " (used) } }
                                                br; small { (c.rate_source) }
                                            }
                                            td data-label="State" {
                                                (c.state)
                                                @if let Some(block) = c.block_number { " · block " (block) }
                                                @if let Some(error) = &c.error { br; span.bad { (error) } }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                @if may_refund || !refunds.is_empty() {
                    section #refunds {
                        h2 { "Refunds" }
                        @if !refunds.is_empty() {
                            table #refund-list.stack {
                                thead { tr { th scope="col" { "Amount" } th scope="col" { "Sent" } th scope="col" { "To" } th scope="col" { "State" } } }
                                tbody {
                                    @for r in &refunds {
                                        tr data-state=(r.state) {
                                            td data-label="Amount" {
                                                @if r.extra { "Return of money received after the credit" br; small { "worth " (r.amount) " " (text(&t.currency)) " at its address's quote · by " (r.requested_by) " · " (r.created_at) } }
                                                @else { (r.amount) " " (text(&t.currency)) br; small { "by " (r.requested_by) " · " (r.created_at) } }
                                            }
                                            td data-label="Sent" { (r.crypto_amount) " " (r.asset) " on " (r.network) br; small { "at 1 " (r.asset) " = " (r.rate) " " (text(&t.currency)) } }
                                            td data-label="To" { code { (r.address) } }
                                            td data-label="State" {
                                                (r.state)
                                                @if let Some(hash) = &r.tx_hash { br; code { (hash) } }
                                                @if let Some(error) = &r.error { br; span.bad { (error) } }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                        @if may_refund {
                            form.refund method="post" action=(format!("/portal/payments/{}/refund", t.id)) {
                                (csrf_field(portal))
                                input type="hidden" name="step" value="preview";
                                @if parts.len() > 1 {
                                    p.muted {
                                        "Each part is sent back from the treasury in the asset it came in, at its own rate, to an address the customer gave. "
                                        "You see what is sent before confirming."
                                    }
                                    label for="refund-part-input" { "Part" }
                                    select #refund-part-input name="part" {
                                        @for p in &parts {
                                            option value=(p.part) { "Part " (p.part) ": " (p.asset) " on " (p.network) " (" (p.refundable) " " (text(&t.currency)) " left)" }
                                        }
                                    }
                                } @else {
                                    p.muted {
                                        "Sent from the treasury in " (text(&t.asset)) " on " (text(&t.networks.payment))
                                        ", at the payment's own quote, to an address the customer gave. "
                                        @if t.raw_status == RawStatus::Succeeded { "Not yet settled: it is refunded in full. " }
                                        "You see what is sent before confirming."
                                    }
                                }
                                label for="refund-amount-input" { "Amount (" (text(&t.currency)) ")" }
                                input #refund-amount-input type="text" name="amount" required inputmode="decimal" value=(money(if parts.len() > 1 { parts.first().map(|p| p.refundable) } else { refundable }));
                                label for="refund-address-input" { "Customer's address" }
                                input #refund-address-input type="text" name="address" required autocomplete="off" spellcheck="false" placeholder="0x…";
                                p { button type="submit" { "Review the refund" } }
                            }
                        }
                    }
                }
                section {
                    h2 { "Timeline" }
                    ol #timeline {
                        @for entry in &timeline {
                            li {
                                strong { (entry.what) } " · " (entry.at.as_deref().unwrap_or(""))
                                @if let Some(event) = &entry.event_id { " · " code { (event) } }
                                @if !entry.deliveries.is_empty() {
                                    table {
                                        thead { tr { th { "Endpoint" } th { "Delivery" } th { "Attempts" } th {} } }
                                        tbody {
                                            @for d in &entry.deliveries {
                                                tr {
                                                    td { code { (d.delivery.endpoint_id) } }
                                                    td { a href=(format!("/portal/deliveries/{}", d.delivery.id)) { (d.delivery.status.as_str()) } }
                                                    td {
                                                        @for a in &d.attempt_log {
                                                            (a.attempt) ". " (a.outcome.as_str())
                                                            @if let Some(code) = a.status_code { " " (code) }
                                                            " · " (a.started_at) br;
                                                        }
                                                    }
                                                    td {
                                                        form method="post" action=(format!("/portal/deliveries/{}/resend", d.delivery.id)) {
                                                            (csrf_field(portal)) button type="submit" { "Resend" }
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
            },
        ),
    )
}

/// `GET /portal/payments/export.csv`: every matching payment, streamed.
pub(super) async fn export(c: Call<'_>) -> Answer {
    let stream = payments::export(&c.portal, c.url.query().unwrap_or(""))?;
    let response = Response::from_stream(stream).or_internal("build export")?;
    let headers = response.headers();
    for (name, value) in [
        ("Content-Type", "text/csv; charset=utf-8"),
        (
            "Content-Disposition",
            "attachment; filename=\"payments.csv\"",
        ),
        ("Cache-Control", "no-store"),
        ("X-Content-Type-Options", "nosniff"),
    ] {
        headers.set(name, value).or_internal("set header")?;
    }
    Ok(response)
}

/// `POST /portal/payments/{id}/return`: sends back what reached a deposit address after the
/// payment was credited (the form names the address and carries the key the page drew, so a
/// second submit is the same return), then shows the payment's refunds; a refusal is shown
/// with a way back.
pub(super) async fn return_extra(c: Call<'_>, id: &str) -> Answer {
    let (portal, url, form) = (&c.portal, c.url, &c.form);
    let id = payment_id(id)?;
    let made = returns::return_extra(
        portal.ctx,
        portal.held(),
        Scoped::new(portal.institution_id(), id),
        (
            form.get("deposit").unwrap_or_default(),
            form.get("address").unwrap_or_default(),
        ),
        form.get("key").unwrap_or_default(),
        &portal.session.email,
    )
    .await;
    let error = match made {
        Ok(_) => return see_other(url, &format!("/portal/payments/{id}#refunds")),
        Err(err) if matches!(err.code, ErrorCode::InvalidRequest | ErrorCode::Conflict) => {
            err.description
        }
        Err(err) => return Err(err),
    };
    page(
        400,
        layout(
            "Return",
            Some(portal),
            html! {
                section #return-refused {
                    p { a href=(format!("/portal/payments/{id}")) { "← Payment " (id) } }
                    h1 { "Return" }
                    (error_box(Some(&error)))
                    p { a href=(format!("/portal/payments/{id}#uncredited")) { "Back to the payment" } }
                }
            },
        ),
    )
}

/// `POST /portal/payments/{id}/refund`: `step=preview` shows what the refund sends (amount,
/// asset, rate, address) and asks to confirm; `step=confirm` makes it, under the key the preview
/// drew (a second submit is the same refund), and returns to the payment.
pub(super) async fn refund(c: Call<'_>, id: &str) -> Answer {
    let (portal, url, form) = (&c.portal, c.url, &c.form);
    let id = payment_id(id)?;
    let part = match form.get("part").filter(|p| !p.is_empty()) {
        None => None,
        Some(text) => Some(text.parse::<i64>().map_err(|_| {
            crate::error::ApiError::invalid_request(
                "part must be the number of a part of the payment",
            )
        })?),
    };
    let request = RefundRequest {
        amount: form.get("amount").unwrap_or_default(),
        address: form.get("address").unwrap_or_default(),
        part,
    };
    let institution = portal.institution_id();
    let outcome = match form.get("step") {
        Some("confirm") => {
            let key = form.get("key").unwrap_or_default();
            let made = refund::request(
                portal.ctx,
                portal.held(),
                institution,
                id,
                &request,
                key,
                &portal.session.email,
            )
            .await;
            match made {
                Ok(_) => return see_other(url, &format!("/portal/payments/{id}#refunds")),
                Err(err) => Err(err),
            }
        }
        _ => refund::preview(portal.ctx, portal.held(), institution, id, &request).await,
    };
    let (preview, error) = match outcome {
        Ok(preview) => (Some(preview), None),
        Err(err) if matches!(err.code, ErrorCode::InvalidRequest | ErrorCode::Conflict) => {
            (None, Some(err.description))
        }
        Err(err) => return Err(err),
    };
    let effect = match &preview {
        Some(p) => balances::refund_effect(portal, (id, p.part), &p.base_units).await?,
        None => None,
    };
    let key = crate::crypto::random_token("rfk_").or_internal("draw a refund key")?;
    page(
        if error.is_some() { 400 } else { 200 },
        layout(
            "Refund",
            Some(portal),
            html! {
                section #refund-review {
                    p { a href=(format!("/portal/payments/{id}")) { "← Payment " (id) } }
                    h1 { "Refund" }
                    (error_box(error.as_deref()))
                    @if let Some(p) = &preview {
                        dl.fields {
                            dt { "Refund" } dd #refund-amount { strong { (p.amount) " " (p.currency) } " of " (p.refundable) " left" }
                            @if p.parts > 1 { dt { "Part" } dd #refund-part { "Part " (p.part) " of the payment's " (p.parts) " (each way to pay is refunded in its own asset)" } }
                            dt { "Sends" } dd #refund-crypto { strong { (p.crypto_amount) " " (p.asset) } " on " (p.network) br; small { (p.base_units) " base units" } }
                            dt { "Rate" } dd { "1 " (p.asset) " = " (p.rate) " " (p.currency) br; small { (p.rate_source) } }
                            dt { "To" } dd { code #refund-address { (p.address) } }
                            @if let Some(e) = &effect { (balance_effect(e)) }
                        }
                        @if effect.as_ref().is_some_and(|e| !e.within_limit) {
                            // The books would refuse it (409): no button that cannot work.
                            p #refund-refused {
                                "This refund cannot be sent now. "
                                a href=(format!("/portal/payments/{id}#refunds")) { "Back to the payment" }
                            }
                        } @else {
                            form method="post" action=(format!("/portal/payments/{id}/refund")) {
                                (csrf_field(portal))
                                input type="hidden" name="step" value="confirm";
                                input type="hidden" name="key" value=(key);
                                input type="hidden" name="amount" value=(p.amount);
                                input type="hidden" name="address" value=(p.address);
                                @if p.parts > 1 { input type="hidden" name="part" value=(p.part); }
                                button.danger type="submit" { "Confirm and send the refund" }
                                " " a href=(format!("/portal/payments/{id}")) { "Cancel" }
                            }
                        }
                    } @else {
                        p { a href=(format!("/portal/payments/{id}#refunds")) { "Back to the payment" } }
                    }
                }
            },
        ),
    )
}

/// A refund's effect on its merchant's balance, in the review step: available before and after,
/// and whether it goes into debt, within or over the debt limit.
fn balance_effect(e: &RefundEffect) -> Markup {
    let minus = |a: &str| match a.strip_prefix('-') {
        Some(rest) => format!("\u{2212}{rest}"),
        None => a.to_owned(),
    };
    html! {
        dt { "Merchant's balance" }
        dd #refund-balance {
            "Available " (minus(&e.available_before)) " → " strong.bad[e.into_debt] { (minus(&e.available_after)) } " " (e.asset) " on " (e.network)
            br;
            @if !e.into_debt {
                small { "Within what the merchant has available." }
            } @else if e.within_limit {
                span.warn-text #refund-debt {
                    "Goes into debt, within its debt limit of " (e.debt_limit) " " (e.asset)
                    ": the debt is taken from the merchant's next settlements."
                }
            } @else {
                span.bad #refund-over-limit {
                    "Over its debt limit of " (e.debt_limit) " " (e.asset)
                    ": the refund is refused until the merchant's payments cover it, or an admin "
                    "raises the limit on "
                    a href=(format!("/portal/merchants/{}#balance", e.merchant_id)) { "the merchant's page" }
                    "."
                }
            }
        }
    }
}
