//! The merchant pages: the list with search and a "new merchant" form, and one merchant's page
//! with its onboarding and account moves, its balances (`balances`), publishable key and embed
//! snippet, settlement wallets and their change log with its USDC settlement network
//! (`usdc_settlement`), top-up addresses (`topups`), and return origins. Plain forms; every change goes through the same
//! operations as the JSON API.

use maud::html;
use shared_types::ErrorCode;
use worker::Url;

use super::balances::{self as balance_section, Refused};
use super::layout::{csrf_field, error_box, layout, page, Call};
use crate::error::ApiError;
use crate::http::see_other;
use crate::portal::balances;
use crate::portal::merchants::{
    self, merchant_id, Merchant, MerchantDetail, MerchantPatch, NewMerchantBody,
};
use crate::portal::Portal;
use crate::route::Answer;
use crate::wallet_address::{is_evm, NETWORKS};

/// An error a form can show next to itself (a refusal of the user's input), rather than fail.
fn shown(err: &ApiError) -> bool {
    matches!(
        err.code,
        ErrorCode::InvalidRequest | ErrorCode::Conflict | ErrorCode::PaymentsUnavailable
    )
}

/// `GET /portal/merchants`: search, one page, and the form for a new merchant.
pub(super) async fn list(c: Call<'_>) -> Answer {
    list_page(&c.portal, c.url, None, None).await
}

/// `POST /portal/merchants`: the new merchant's page, or the form again saying why not.
pub(super) async fn create(c: Call<'_>) -> Answer {
    let new = NewMerchantBody {
        name: field(&c, "name"),
        legal_name: field(&c, "legal_name"),
        email: field(&c, "email"),
        psp_reference_id: field(&c, "psp_reference_id"),
        crypto_enabled: Some(c.form.get("crypto_enabled").is_some()),
    };
    match merchants::create(&c.portal, &new).await {
        Ok(m) => see_other(c.url, &format!("/portal/merchants/{}", m.merchant.id)),
        Err(err) if shown(&err) => {
            list_page(&c.portal, c.url, Some(&err.description), Some(&new)).await
        }
        Err(err) => Err(err),
    }
}

/// `GET /portal/merchants/{id}`.
pub(super) async fn show(c: Call<'_>, id: &str) -> Answer {
    detail_page(&c.portal, c.url, merchant_id(id)?, (None, None), 200).await
}

/// `POST /portal/merchants/{id}/edit`: names, e-mail, reference, crypto on or off.
pub(super) async fn edit(c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    let patch = MerchantPatch {
        name: Some(field(&c, "name")),
        legal_name: Some(field(&c, "legal_name")),
        email: Some(field(&c, "email")),
        psp_reference_id: Some(field(&c, "psp_reference_id")),
        crypto_enabled: Some(c.form.get("crypto_enabled").is_some()),
        ..MerchantPatch::default()
    };
    let done = merchants::update(&c.portal, id, &patch).await.map(drop);
    changed(&c, id, done).await
}

/// `POST /portal/merchants/{id}/status`: an account move.
pub(super) async fn set_status(c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    let patch = MerchantPatch {
        status: Some(field(&c, "status")),
        ..MerchantPatch::default()
    };
    let done = merchants::update(&c.portal, id, &patch).await.map(drop);
    changed(&c, id, done).await
}

/// `POST /portal/merchants/{id}/onboarding`: an onboarding move.
pub(super) async fn set_onboarding(c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    let patch = MerchantPatch {
        onboarding_status: Some(field(&c, "onboarding_status")),
        ..MerchantPatch::default()
    };
    let done = merchants::update(&c.portal, id, &patch).await.map(drop);
    changed(&c, id, done).await
}

/// `POST /portal/merchants/{id}/wallets`: a network's settlement wallet set, or removed when the
/// address is empty.
pub(super) async fn set_wallet(c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    let address = field(&c, "address");
    let address = address.trim();
    let done = merchants::set_wallet(
        &c.portal,
        id,
        &field(&c, "network"),
        (!address.is_empty()).then_some(address),
        c.form.get("contract_wallet") == Some("yes"),
    )
    .await
    .map(drop);
    changed(&c, id, done).await
}

/// `POST /portal/merchants/{id}/origins`: the return origins, one a line.
pub(super) async fn set_origins(c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    let origins: Vec<String> = field(&c, "origins")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    let done = merchants::set_origins(&c.portal, id, &origins)
        .await
        .map(drop);
    changed(&c, id, done).await
}

/// `POST /portal/merchants/{id}/roll-key`: a new publishable key, the old one valid for the hours
/// asked.
pub(super) async fn roll_key(c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    let hours = field(&c, "grace_hours");
    let done = match hours.trim().parse::<i64>() {
        Ok(h) if (0..=168).contains(&h) => merchants::roll_key(&c.portal, id, Some(h * 3600))
            .await
            .map(drop),
        _ => Err(ApiError::invalid_request(
            "the grace period must be a whole number of hours from 0 to 168",
        )),
    };
    changed(&c, id, done).await
}

/// `POST /portal/merchants/{id}/debt-limit`: `ledger` (`{network}:{token}`) and `debt_limit`
/// (an amount of the asset); back to the merchant's balances, or its page again saying why not.
pub(super) async fn set_debt_limit(c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    let ledger = c.form.get("ledger").unwrap_or_default();
    let text = c.form.get("debt_limit").unwrap_or_default();
    let done = match ledger.split_once(':') {
        Some((network, token)) if !network.is_empty() && !token.is_empty() => {
            balances::debt_limit::set_debt_limit(&c.portal, id, (network, token), text)
                .await
                .map(drop)
        }
        _ => Err(ApiError::invalid_request(
            "ledger must name an asset on a network, as the form offers",
        )),
    };
    match done {
        Ok(()) => see_other(c.url, &format!("/portal/merchants/{id}#balance")),
        Err(err) if matches!(err.code, ErrorCode::InvalidRequest | ErrorCode::NotFound) => {
            let refused = Refused {
                ledger,
                debt_limit: text,
                why: &err.description,
            };
            detail_page(&c.portal, c.url, id, (None, Some(&refused)), 400).await
        }
        Err(err) => Err(err),
    }
}

/// A form field's value, empty when absent.
fn field(c: &Call<'_>, name: &str) -> String {
    c.form.get(name).unwrap_or_default().to_owned()
}

/// After a change to merchant `id`: back to its page, or the page again showing the refusal.
pub(super) async fn changed(c: &Call<'_>, id: i64, done: Result<(), ApiError>) -> Answer {
    match done {
        Ok(()) => see_other(c.url, &format!("/portal/merchants/{id}")),
        Err(err) if shown(&err) => {
            detail_page(
                &c.portal,
                c.url,
                id,
                (Some(&err.description), None),
                err.code.http_status(),
            )
            .await
        }
        Err(err) => Err(err),
    }
}

/// The list: search, one page, and the form for a new merchant (`draft`, refused for `error`).
async fn list_page(
    portal: &Portal<'_>,
    url: &Url,
    error: Option<&str>,
    draft: Option<&NewMerchantBody>,
) -> Answer {
    let query = url.query().unwrap_or("");
    let found = merchants::list(portal, query).await?;
    let search = url
        .query_pairs()
        .find(|(k, _)| k == "q")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let next = found.next_cursor.map(|cursor| {
        let mut query = form_urlencoded::Serializer::new(String::new());
        if !search.is_empty() {
            query.append_pair("q", &search);
        }
        query.append_pair("starting_after", &cursor.to_string());
        format!("/portal/merchants?{}", query.finish())
    });
    let value = |f: fn(&NewMerchantBody) -> &str| draft.map_or("", f).to_owned();
    page(
        if error.is_some() { 400 } else { 200 },
        layout(
            "Merchants",
            Some(portal),
            html! {
                section {
                    h1 { "Merchants" }
                    form method="get" action="/portal/merchants" {
                        label for="q" { "Search by name or PSP reference" }
                        input #q type="text" name="q" value=(search);
                        " " button type="submit" { "Search" }
                    }
                    @if found.data.is_empty() { p { "No merchants found." } } @else {
                        table {
                            thead { tr { th { "Name" } th { "PSP reference" } th { "Status" } th { "Onboarding" } th { "Payments" } } }
                            tbody {
                                @for m in &found.data {
                                    tr data-merchant=(m.merchant.id) {
                                        td { a href=(format!("/portal/merchants/{}", m.merchant.id)) { (m.merchant.name) } }
                                        td { code { (m.merchant.psp_reference_id) } }
                                        td { (m.merchant.status.as_str()) }
                                        td { (m.merchant.onboarding_status.as_str()) }
                                        td { @if m.can_take_payments { "ready" } @else { span.muted { "not yet" } } }
                                    }
                                }
                            }
                        }
                    }
                    @if let Some(next) = next { p { a href=(next) { "Next page →" } } }
                }
                section {
                    h2 { "New merchant" }
                    (error_box(error))
                    form method="post" action="/portal/merchants" {
                        (csrf_field(portal))
                        label for="name" { "Name (shown to customers)" }
                        input #name type="text" name="name" required maxlength="100" value=(value(|d| &d.name));
                        label for="legal_name" { "Legal name" }
                        input #legal_name type="text" name="legal_name" required maxlength="200" value=(value(|d| &d.legal_name));
                        label for="email" { "E-mail" }
                        input #email type="email" name="email" required value=(value(|d| &d.email));
                        label for="psp_reference_id" { "Your reference (unique)" }
                        input #psp_reference_id type="text" name="psp_reference_id" required maxlength="64" value=(value(|d| &d.psp_reference_id));
                        fieldset { label { input type="checkbox" name="crypto_enabled" value="true" checked; " Crypto payments enabled" } }
                        button type="submit" { "Create merchant" }
                    }
                }
            },
        ),
    )
}

/// The snippet a merchant pastes into its page: the script and one `Payrail.checkout` call.
pub fn embed_snippet(base: &str, m: &Merchant) -> String {
    let redirect = m
        .return_origins
        .first()
        .map_or("https://your-shop.example/thanks".to_owned(), |o| {
            format!("{o}/thanks")
        });
    format!(
        "<script src=\"{base}/checkout.js\"></script>\n\
         <button id=\"pay-with-crypto\">Pay with crypto</button>\n\
         <script>\n\
         \x20 Payrail.checkout({{\n\
         \x20   publicKey: \"{key}\",\n\
         \x20   amount: 19.99,\n\
         \x20   currency: \"EUR\",\n\
         \x20   title: \"Order 1001\",\n\
         \x20   externalReference: \"1001\",\n\
         \x20   redirectUrl: \"{redirect}\",\n\
         \x20   allowCrypto: true\n\
         \x20 }}, \"#pay-with-crypto\");\n\
         </script>",
        key = m.merchant.public_key,
    )
}

/// One merchant's page: `error` showing at the top why a change was refused, or `limit` a debt
/// limit refused, in its balance section.
async fn detail_page(
    portal: &Portal<'_>,
    url: &Url,
    id: i64,
    (error, limit): (Option<&str>, Option<&Refused<'_>>),
    status: u16,
) -> Answer {
    let MerchantDetail {
        merchant: m,
        wallet_changes,
        usdc_settlement_changes,
    } = merchants::detail(portal, id).await?;
    let cctp = crate::chain::cctp_networks(portal.ctx)?;
    let balances = balances::list(portal, id).await?;
    let choices = balances::limit_choices(&balances, &balances::configured(portal));
    let base = url.origin().ascii_serialization();
    let action = |path: &str| format!("/portal/merchants/{}/{path}", m.merchant.id);
    let wallet_of = |network: &str| {
        m.wallets
            .iter()
            .find(|w| w.network == network)
            .map(|w| w.address.clone())
    };
    // A wallet still in its cool-off after a change: when settlements start using it.
    let cooling = |network: &str| {
        m.wallets
            .iter()
            .find(|w| w.network == network && w.usable_from > portal.now)
            .and_then(|w| shared_types::time::format_unix(w.usable_from))
    };
    // Its top-up addresses, in a section of their own (`topups`).
    let topups = crate::portal::topups::list(portal, id).await?;
    page(
        status,
        layout(
            &m.merchant.name,
            Some(portal),
            html! {
                section {
                    p { a href="/portal/merchants" { "← Merchants" } }
                    h1 { (m.merchant.name) }
                    (error_box(error))
                    @if m.can_take_payments {
                        p.ok role="status" #payments-ready { "Ready to take payments." }
                    } @else {
                        p.warn role="status" #payments-blocked {
                            "Cannot take payments yet: " (m.cannot_take_payments_because.as_deref().unwrap_or(""))
                        }
                    }
                    dl.fields {
                        dt { "Account" } dd #status { (m.merchant.status.as_str()) }
                        dt { "Onboarding" } dd #onboarding { (m.merchant.onboarding_status.as_str()) }
                        dt { "Crypto payments" } dd { @if m.merchant.crypto_enabled { "enabled" } @else { "disabled" } }
                        dt { "USDC settled on" } dd #usdc-settled-on {
                            @match &m.usdc_settlement_network {
                                Some(network) => {
                                    (network) ", from every network with CCTP"
                                    @if let Some(from) = &m.usdc_settlement_usable_from { " (from " (from) ")" }
                                }
                                None => { "the network each payment was made on" }
                            }
                        }
                        dt { "Created" } dd { (m.merchant.created_at) }
                    }
                    @if !m.onboarding_next.is_empty() {
                        form method="post" action=(action("onboarding")) {
                            (csrf_field(portal))
                            "Move onboarding to: "
                            @for next in m.onboarding_next {
                                button type="submit" name="onboarding_status" value=(next.as_str()) { (next.as_str()) } " "
                            }
                        }
                    }
                    @if !m.status_next.is_empty() {
                        form method="post" action=(action("status")) {
                            (csrf_field(portal))
                            "Change account to: "
                            @for next in m.status_next {
                                @let danger = next.as_str() == "disabled";
                                button.danger[danger] type="submit" name="status" value=(next.as_str()) { (next.as_str()) } " "
                            }
                        }
                    }
                }
                (balance_section::section(portal, id, &balances, &choices, limit))
                section {
                    h2 { "Details" }
                    form method="post" action=(action("edit")) {
                        (csrf_field(portal))
                        label for="name" { "Name (shown to customers)" }
                        input #name type="text" name="name" required maxlength="100" value=(m.merchant.name);
                        label for="legal_name" { "Legal name" }
                        input #legal_name type="text" name="legal_name" required maxlength="200" value=(m.merchant.legal_name);
                        label for="email" { "E-mail" }
                        input #email type="email" name="email" required value=(m.merchant.email);
                        label for="psp_reference_id" { "Your reference (unique)" }
                        input #psp_reference_id type="text" name="psp_reference_id" required maxlength="64" value=(m.merchant.psp_reference_id);
                        fieldset { label { input type="checkbox" name="crypto_enabled" value="true" checked[m.merchant.crypto_enabled]; " Crypto payments enabled" } }
                        button type="submit" { "Save" }
                    }
                }
                section {
                    h2 { "Publishable key and embed snippet" }
                    p { "Publishable key: " code #public-key { (m.merchant.public_key) } }
                    @if let Some(until) = &m.previous_key_expires_at {
                        p.muted { "The previous key keeps working until " (until) "." }
                    }
                    label for="snippet" { "Paste this into the merchant's page (select it all to copy):" }
                    textarea #snippet rows="12" readonly { (embed_snippet(&base, &m)) }
                    form method="post" action=(action("roll-key")) {
                        (csrf_field(portal))
                        label for="grace_hours" { "Roll the key; the old one keeps working for (hours, 0 to 168)" }
                        input #grace_hours type="number" name="grace_hours" min="0" max="168" value="24";
                        " " button.danger type="submit" { "Roll key" }
                    }
                }
                section {
                    h2 { "Settlement wallets" }
                    p.muted { "Where the merchant is paid out, one address per network. Every change is recorded below and e-mailed to every admin, and a new address is used for settlements only after a cool-off." }
                    p.muted { "Payrail's own addresses and contracts are refused, and so is any other contract unless you tick “Contract wallet”: tick it only for a contract wallet (a multisig such as Safe) that can receive the assets settled on that network. Tokens and ether sent to most contracts are lost." }
                    table.wallets {
                        thead { tr { th { "Network" } th { "Address" } th {} } }
                        tbody {
                            @for network in NETWORKS {
                                @let current = wallet_of(network);
                                tr data-network=(network) {
                                    td { (network) }
                                    td {
                                        form.wallet method="post" action=(action("wallets")) {
                                            (csrf_field(portal))
                                            input type="hidden" name="network" value=(network);
                                            input type="text" name="address" value=(current.clone().unwrap_or_default()) aria-label=(format!("{network} address"));
                                            " " button type="submit" { "Save" }
                                            @if is_evm(network) {
                                                label.contract { input type="checkbox" name="contract_wallet" value="yes"; " Contract wallet" }
                                            }
                                        }
                                        @if let Some(from) = cooling(network) {
                                            p.muted.cooling { "Used for settlements from " time datetime=(from) { (from) } " (cool-off after a change); until then payments on " (network) " wait." }
                                        }
                                    }
                                    td {
                                        @if current.is_some() {
                                            form method="post" action=(action("wallets")) {
                                                (csrf_field(portal))
                                                input type="hidden" name="network" value=(network);
                                                input type="hidden" name="address" value="";
                                                button.danger type="submit" { "Remove" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                    (super::usdc_settlement::part(portal, &m, &cctp, &usdc_settlement_changes))
                    h3 { "Wallet changes" }
                    @if wallet_changes.is_empty() { p.muted { "No changes yet." } } @else {
                        table #wallet-changes {
                            thead { tr { th { "When" } th { "Who" } th { "Network" } th { "Old" } th { "New" } } }
                            tbody {
                                @for c in &wallet_changes {
                                    tr {
                                        td { (c.changed_at) }
                                        td { (c.changed_by) }
                                        td { (c.network) }
                                        td { code { (c.old_address.as_deref().unwrap_or("—")) } }
                                        td { code { (c.new_address.as_deref().unwrap_or("removed")) } }
                                    }
                                }
                            }
                        }
                    }
                }
                (super::topups::section(portal, &topups, m.merchant.status.as_str()))
                section {
                    h2 { "Allowed return origins" }
                    p.muted { "A checkout may send the customer back only to these sites (its redirectUrl's origin)." }
                    form method="post" action=(action("origins")) {
                        (csrf_field(portal))
                        label for="origins" { "One per line, like https://shop.example" }
                        textarea #origins name="origins" rows="4" { (m.return_origins.join("\n")) }
                        button type="submit" { "Save origins" }
                    }
                }
            },
        ),
    )
}
