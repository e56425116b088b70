//! What every portal page shares: the call a page's handler receives, the style, the layout with
//! its navigation, and the small pieces (CSRF field, error and secret boxes, the form reader).

use maud::{html, Markup};
use worker::{Request, Response, Url};

use crate::error::ApiError;
use crate::portal::Portal;

/// A request for a page on an authenticated session (a change's CSRF token and the caller's role
/// already checked).
pub(super) struct Call<'a> {
    /// The session.
    pub portal: Portal<'a>,
    /// The request's URL.
    pub url: &'a Url,
    /// The posted form (empty for a read).
    pub form: Form,
}

const STYLE: &str = "
body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1c2430;background:#f4f6f9}
header{background:#1c2430;color:#fff;padding:.6rem 1.5rem;display:flex;flex-wrap:wrap;gap:.5rem 1.5rem;align-items:center}
header a{color:#fff}header .who{margin-left:auto;opacity:.8}header form{display:inline}
header button{background:none;border:1px solid #8893a3;color:#fff}
main{max-width:72rem;margin:1.5rem auto;padding:0 1.5rem}
section{background:#fff;border-radius:8px;padding:1rem 1.5rem;margin-bottom:1.25rem;
box-shadow:0 1px 3px rgba(0,0,0,.06)}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.4rem .5rem;
border-bottom:1px solid #e3e7ee;vertical-align:top}td form{display:inline}
code{font:13px ui-monospace,monospace;word-break:break-all}h1 code{font-size:1.2rem}
button{font:inherit;padding:.3rem .8rem;border-radius:6px;border:1px solid #8893a3;background:#fff;cursor:pointer}
button.danger{border-color:#b42318;color:#b42318}
label{display:block;margin:.5rem 0 .2rem;font-weight:600}
input[type=text],input[type=email],input[type=password],input[type=url],input[type=number],select{
font:inherit;padding:.35rem .5rem;width:100%;max-width:32rem;box-sizing:border-box}
fieldset{border:0;padding:0;margin:.5rem 0}fieldset label{display:inline;font-weight:400;margin-right:1rem}
.secret{background:#e7f7ee;border:1px solid #7cc79a;border-radius:8px;padding:.75rem 1rem}
.error{background:#fdecec;border:1px solid #e8a1a1;border-radius:8px;padding:.75rem 1rem}
.topup{display:flex;flex-wrap:wrap;gap:.5rem 1.5rem;align-items:flex-start}.topup dl{flex:1 1 18rem;min-width:0}
.topup dl.fields{grid-template-columns:max-content minmax(0,1fr)}.topup dd{overflow-wrap:anywhere}
.topup .qr{display:block;flex:none;width:10rem;height:10rem}.topup .qr svg{width:100%;height:100%}
.topup-scroll{overflow-x:auto}.topup-scroll caption{text-align:left;padding:.25rem 0}
.topup-transfers th,.topup-transfers td{padding:.4rem .3rem}
@media (max-width:40rem){.topup dl.fields{grid-template-columns:minmax(0,1fr)}.topup dl.fields dd{margin-bottom:.4rem}}
.muted{color:#5b6677}.bad{color:#b42318}
.ok{background:#e7f7ee;border:1px solid #7cc79a;border-radius:8px;padding:.5rem 1rem}
.warn{background:#fff4d6;border:1px solid #e0c060;border-radius:8px;padding:.5rem 1rem}
textarea{font:13px ui-monospace,monospace;width:100%;box-sizing:border-box}
form.wallet{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center}form.wallet input[type=text]{flex:1 1 14rem;max-width:none}
form.wallet label.contract{display:inline;margin:0;font-weight:400;white-space:nowrap}
form.usdc-settlement .row{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center}
form.usdc-settlement select{flex:1 1 14rem;max-width:24rem}#usdc-settlement p.ok code{overflow-wrap:anywhere}
#usdc-settlement time{white-space:nowrap}#usdc-settlement-changes-title{margin-bottom:.25rem}
@media (max-width:40rem){table.wallets thead{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%);white-space:nowrap}
table.wallets,table.wallets tbody,table.wallets tr,table.wallets td{display:block}table.wallets tr{border-bottom:1px solid #e3e7ee;padding:.5rem 0}
table.wallets td{border:0;padding:.15rem 0}table.wallets td:first-child{font-weight:600}table.wallets td:empty{display:none}}
dl.fields{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}dl.fields dd{margin:0}
.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}.unit{color:#5b6677;font-size:.85em}
.scroll{overflow-x:auto}tbody th{font-weight:600}
.tag{font-size:.8em;padding:0 .4rem;border-radius:4px;background:#eef1f5;color:#3d4756}
.tag.pending{background:#fff4d6;color:#6b4e00}.warn-text{color:#7a4f00}
form.limit{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:flex-end}form.limit label{margin-top:0}
.badge{display:inline-block;font-size:.8em;font-weight:600;line-height:1.5;padding:0 .5rem;border-radius:999px;
border:1px solid currentColor;white-space:nowrap}
.s-paid,.a-exact{background:#e7f7ee;color:#0a5c2e}.s-pending,.a-under{background:#fff4d6;color:#6b4e00}
.s-failed{background:#fdecec;color:#9b1c1c}.s-refunded{background:#eef1f5;color:#3d4756}
.s-partially_refunded{background:#f1ecfe;color:#5b21b6}.s-held{background:#fdecec;color:#9b1c1c}
article.review{border-top:1px solid #e3e7ee;padding:.75rem 0}article.review h2{font-size:1.15rem;margin:.25rem 0}
article.review dd.reason,article.review td,#screening-hold p{overflow-wrap:anywhere}form.decide textarea{font:inherit;max-width:40rem}.a-over{background:#e6efff;color:#1e429f}
form.search .row{display:flex;gap:.5rem}form.search input{flex:1;min-width:0;max-width:none}
input[type=search],input[type=date]{font:inherit;padding:.35rem .5rem;box-sizing:border-box}
form.filters{display:flex;flex-wrap:wrap;gap:.5rem .75rem;align-items:flex-end;margin-top:.75rem}
form.filters .field{flex:1 1 9rem;min-width:0}form.filters .merchant{flex-basis:12rem}
form.filters .actions{flex:0 0 auto;padding-bottom:.3rem}
form.filters label{margin:0 0 .15rem;font-size:.85em}form.filters select,form.filters input{width:100%;max-width:none;height:2.3rem}
form.filters button{height:2.3rem}
.toolbar{display:flex;flex-wrap:wrap;gap:.5rem 1rem;justify-content:space-between;align-items:center;margin-top:.75rem}
.chip{display:inline-block;padding:.1rem .6rem;margin-right:.3rem;border:1px solid #8893a3;border-radius:999px;
color:#1c2430;text-decoration:none}.chip.on{background:#1c2430;color:#fff;border-color:#1c2430}
table.payments td,table.payments th{white-space:nowrap}table.payments td:nth-child(8){white-space:normal}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(24rem,1fr));gap:.5rem 2rem}
figure.chart{margin:.5rem 0;min-width:0}figure.chart svg{display:block;width:100%;height:auto;max-height:14rem}
figure.chart figcaption{margin-bottom:.25rem}svg.status-chart{display:block;width:100%;max-width:28rem;height:auto}
.axis{display:flex;justify-content:space-between;gap:.5rem;font-size:.8em;color:#5b6677;white-space:nowrap}
details summary{cursor:pointer;color:#1d4ed8}table.figures caption{text-align:left}
@media (max-width:40rem){h1{font-size:1.5rem}
dl.fields{grid-template-columns:1fr;gap:0}dl.fields dt{color:#5b6677;font-size:.9em;margin-top:.4rem}
table.stack thead{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%);white-space:nowrap}
table.stack,table.stack tbody,table.stack tr,table.stack th,table.stack td{display:block}
table.stack tr{border-bottom:1px solid #e3e7ee;padding:.5rem 0}table.stack th,table.stack td{border:0;padding:.1rem 0}
table.stack td[data-label]{text-align:right}table.stack td:empty{display:none}
table.stack td[data-label]::before{content:attr(data-label);float:left;font-weight:600;color:#5b6677}
.charts{grid-template-columns:minmax(0,1fr)}form.filters .field{flex:1 1 40%}form.filters .actions{flex:1 1 100%}
table.payments.stack td{white-space:normal}.axis .peak{display:none}}
";

pub(super) fn page(status: u16, markup: Markup) -> Result<Response, ApiError> {
    crate::html::page(status, markup, "same-origin")
}

pub(super) fn layout(title: &str, portal: Option<&Portal>, body: Markup) -> Markup {
    crate::html::document(
        &format!("{title} — Payrail portal"),
        STYLE,
        html! {},
        html! {
            header {
                strong { "Payrail portal" }
                @if let Some(p) = portal {
                    nav {
                        a href="/portal/" { "Overview" } " · "
                        a href="/portal/payments" { "Payments" } " · "
                        a href="/portal/screening" { "Screening" } " · "
                        a href="/portal/merchants" { "Merchants" } " · "
                        a href="/portal/developers" { "Developers" } " · "
                        a href="/portal/webhooks" { "Webhooks" } " · "
                        a href="/portal/users" { "Users" }
                    }
                    span.who { (p.session.email) " · " (p.session.institution_name) }
                    form method="post" action="/portal/logout" {
                        (csrf_field(p))
                        button type="submit" { "Log out" }
                    }
                }
            }
            main { (body) }
        },
    )
}

pub(super) fn csrf_field(portal: &Portal<'_>) -> Markup {
    html! { input type="hidden" name="csrf_token" value=(portal.session.csrf_token); }
}

pub(super) fn error_box(message: Option<&str>) -> Markup {
    html! { @if let Some(m) = message { p.error role="alert" { (m) } } }
}

pub(super) fn secret_box(label: &str, secret: &str, note: &str) -> Markup {
    html! {
        div.secret role="status" {
            strong { (label) } br;
            code #revealed-secret { (secret) } br;
            span.muted { (note) }
        }
    }
}

/// A parsed form body.
#[derive(Default)]
pub(super) struct Form(Vec<(String, String)>);

impl Form {
    pub(super) async fn read(req: &mut Request) -> Result<Form, ApiError> {
        let body = crate::http::body(req, crate::http::PORTAL_BODY_MAX).await?;
        Ok(Form(crate::http::form_fields(&body)?))
    }

    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }
}
