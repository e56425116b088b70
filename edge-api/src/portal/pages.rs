//! The portal's server-rendered pages: login, developers (API clients), webhook endpoints. Plain
//! HTML forms, each carrying the session's CSRF token; no script.

use maud::{html, Markup, PreEscaped, DOCTYPE};
use shared_types::lifecycle::EventType;
use shared_types::{ErrorCode, Scope};
use worker::{Env, Method, Request, Response, Url};

use super::deliveries;
use super::ops::{self, Client, Endpoint, NewEndpoint, Secret};
use super::{Csrf, Portal};
use crate::error::{ApiError, OrInternal};
use crate::pages::html_with_referrer;

const STYLE: &str = "
body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1c2430;background:#f4f6f9}
header{background:#1c2430;color:#fff;padding:.6rem 1.5rem;display:flex;gap:1.5rem;align-items:center}
header a{color:#fff}header .who{margin-left:auto;opacity:.8}header form{display:inline}
header button{background:none;border:1px solid #8893a3;color:#fff}
main{max-width:60rem;margin:1.5rem auto;padding:0 1.5rem}
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
.muted{color:#5b6677}
";

fn page(status: u16, markup: Markup) -> Result<Response, ApiError> {
    html_with_referrer(status, markup, "same-origin")
}

fn layout(title: &str, portal: Option<&Portal>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="robots" content="noindex";
                title { (title) " — Payrail portal" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    strong { "Payrail portal" }
                    @if let Some(p) = portal {
                        nav {
                            a href="/portal/developers" { "Developers" } " · "
                            a href="/portal/webhooks" { "Webhooks" }
                        }
                        span.who { (p.session.email) " · " (p.session.institution_name) }
                        form method="post" action="/portal/logout" {
                            (csrf_field(p))
                            button type="submit" { "Log out" }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

fn csrf_field(portal: &Portal) -> Markup {
    html! { input type="hidden" name="csrf_token" value=(portal.session.csrf_token); }
}

fn error_box(message: Option<&str>) -> Markup {
    html! { @if let Some(m) = message { p.error role="alert" { (m) } } }
}

fn secret_box(label: &str, secret: &str, note: &str) -> Markup {
    html! {
        div.secret role="status" {
            strong { (label) } br;
            code #revealed-secret { (secret) } br;
            span.muted { (note) }
        }
    }
}

/// 303 to one of our paths. (Built by hand: `Response::redirect` has immutable headers, and
/// login and logout add a cookie.)
fn see_other(url: &Url, path: &str) -> Result<Response, ApiError> {
    let mut target = url.clone();
    target.set_path(path);
    target.set_query(None);
    let response = Response::empty()
        .or_internal("build redirect")?
        .with_status(303);
    response
        .headers()
        .set("Location", target.as_str())
        .or_internal("set header")?;
    Ok(response)
}

/// A parsed form body.
struct Form(Vec<(String, String)>);

impl Form {
    async fn read(req: &mut Request) -> Result<Form, ApiError> {
        let body = req.text().await.or_internal("read form")?;
        Ok(Form(
            form_urlencoded::parse(body.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        ))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// Routes `/portal` and its pages.
pub async fn handle(
    mut req: Request,
    env: &Env,
    url: &Url,
    rest: &[&str],
) -> Result<Response, ApiError> {
    let method = req.method();
    match (method.clone(), rest) {
        (Method::Get, [] | [""]) => see_other(url, "/portal/developers"),
        (Method::Get, ["login"]) => {
            if super::authenticate(&req, env, url, Csrf::NotNeeded)
                .await
                .is_ok()
            {
                return see_other(url, "/portal/developers");
            }
            page(200, login_page(None, ""))
        }
        (Method::Post, ["login"]) => {
            super::check_origin(&req, url)?;
            let form = Form::read(&mut req).await?;
            let email = form.get("email").unwrap_or_default().to_owned();
            let source = crate::routes::source(&req)?;
            match super::login(
                env,
                &source,
                &email,
                form.get("password").unwrap_or_default(),
            )
            .await
            {
                Ok(session) => {
                    let response = see_other(url, "/portal/developers")?;
                    response
                        .headers()
                        .set("Set-Cookie", &super::set_cookie(&session.token))
                        .or_internal("set cookie")?;
                    Ok(response)
                }
                Err(err) if err.code == ErrorCode::ServerError => Err(err),
                Err(err) => {
                    let response = page(
                        err.code.http_status(),
                        login_page(Some(&err.description), &email),
                    )?;
                    if let Some(seconds) = err.retry_after {
                        response
                            .headers()
                            .set("Retry-After", &seconds.to_string())
                            .or_internal("set header")?;
                    }
                    Ok(response)
                }
            }
        }
        (Method::Get, _) => match super::authenticate(&req, env, url, Csrf::NotNeeded).await {
            Ok(portal) => get(&portal, url, rest).await,
            Err(err) if err.code == ErrorCode::LoginRequired => see_other(url, "/portal/login"),
            Err(err) => Err(err),
        },
        (Method::Post, _) => {
            let form = Form::read(&mut req).await?;
            let portal = match super::authenticate(
                &req,
                env,
                url,
                Csrf::Form(form.get("csrf_token")),
            )
            .await
            {
                Ok(portal) => portal,
                Err(err) if err.code == ErrorCode::LoginRequired => {
                    return see_other(url, "/portal/login")
                }
                Err(err) if err.code == ErrorCode::CsrfFailed => {
                    return page(
                        403,
                        layout(
                            "Refused",
                            None,
                            html! {
                                section { h1 { "Request refused" } (error_box(Some(&err.description)))
                                    p { a href="/portal/developers" { "Back to the portal" } } }
                            },
                        ),
                    )
                }
                Err(err) => return Err(err),
            };
            post(&portal, env, url, rest, &form).await
        }
        _ => Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!("{method} {} is not supported", url.path()),
        )),
    }
}

async fn get(portal: &Portal, url: &Url, rest: &[&str]) -> Result<Response, ApiError> {
    match rest {
        ["developers"] => developers(portal, None, None).await,
        ["webhooks"] => webhooks(portal, None, None).await,
        ["webhooks", id] => endpoint_page(portal, ops::endpoint_id(id)?, None, None, 200).await,
        ["deliveries", id] => delivery_page(portal, id).await,
        _ => Err(ApiError::not_found(format!("no such page: {}", url.path()))),
    }
}

async fn post(
    portal: &Portal,
    env: &Env,
    url: &Url,
    rest: &[&str],
    form: &Form,
) -> Result<Response, ApiError> {
    match rest {
        ["logout"] => {
            super::logout(portal).await?;
            let response = see_other(url, "/portal/login")?;
            response
                .headers()
                .set("Set-Cookie", &super::clear_cookie())
                .or_internal("set cookie")?;
            Ok(response)
        }
        ["developers", "clients"] => {
            match ops::create_client(
                portal,
                form.get("name").unwrap_or_default(),
                &form.all("scope"),
            )
            .await
            {
                Ok((client, secret)) => developers(portal, Some((&client, &secret)), None).await,
                Err(err) if err.code == ErrorCode::InvalidRequest => {
                    developers(portal, None, Some(&err.description)).await
                }
                Err(err) => Err(err),
            }
        }
        ["developers", "clients", id, "rotate"] => {
            let (client, secret) = ops::rotate_client(portal, id).await?;
            developers(portal, Some((&client, &secret)), None).await
        }
        ["developers", "clients", id, "delete"] => {
            ops::delete_client(portal, id).await?;
            see_other(url, "/portal/developers")
        }
        ["webhooks"] => {
            let types = form.all("event_type");
            let new = NewEndpoint {
                url: form.get("url").unwrap_or_default().to_owned(),
                description: form.get("description").unwrap_or_default().to_owned(),
                // No box ticked means every type.
                event_types: (!types.is_empty()).then_some(types),
            };
            match ops::create_endpoint(portal, &new).await {
                Ok((endpoint, secret)) => {
                    let shown = Secret {
                        signing_secret: secret,
                        previous_secret_expires_at: None,
                    };
                    endpoint_page(portal, &endpoint.id, Some(&shown), None, 201).await
                }
                Err(err) if err.code == ErrorCode::InvalidRequest => {
                    webhooks(portal, Some(&err.description), Some(&new)).await
                }
                Err(err) => Err(err),
            }
        }
        ["webhooks", id] => {
            let id = ops::endpoint_id(id)?;
            let types = form.all("event_type");
            let patch = ops::EndpointPatch {
                url: form.get("url").map(str::to_owned),
                description: form.get("description").map(str::to_owned),
                event_types: Some((!types.is_empty()).then_some(types)),
                status: form.get("status").map(str::to_owned),
            };
            match ops::update_endpoint(portal, id, &patch).await {
                Ok(_) => see_other(url, &format!("/portal/webhooks/{id}")),
                Err(err) if err.code == ErrorCode::InvalidRequest => {
                    endpoint_page(portal, id, None, Some(&err.description), 400).await
                }
                Err(err) => Err(err),
            }
        }
        ["webhooks", id, "reveal"] => {
            let id = ops::endpoint_id(id)?;
            let secret = ops::reveal_secret(portal, id).await?;
            endpoint_page(portal, id, Some(&secret), None, 200).await
        }
        ["webhooks", id, "rotate"] => {
            let id = ops::endpoint_id(id)?;
            let hours = form.get("grace_hours").unwrap_or("24");
            let grace = hours
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|h| *h >= 0)
                .map(|h| h * 3600);
            match grace {
                None => {
                    endpoint_page(
                        portal,
                        id,
                        None,
                        Some("grace period must be a whole number of hours, 0 or more"),
                        400,
                    )
                    .await
                }
                Some(grace) => match ops::rotate_secret(portal, id, Some(grace)).await {
                    Ok(secret) => endpoint_page(portal, id, Some(&secret), None, 200).await,
                    Err(err) if err.code == ErrorCode::InvalidRequest => {
                        endpoint_page(portal, id, None, Some(&err.description), 400).await
                    }
                    Err(err) => Err(err),
                },
            }
        }
        ["webhooks", id, "delete"] => {
            ops::delete_endpoint(portal, ops::endpoint_id(id)?).await?;
            see_other(url, "/portal/webhooks")
        }
        ["webhooks", id, "enable"] => {
            let id = ops::endpoint_id(id)?;
            let since = form.get("resend_failed_since").filter(|s| !s.is_empty());
            match deliveries::enable(env, portal, id, since).await {
                Ok(_) => see_other(url, &format!("/portal/webhooks/{id}")),
                Err(err) if err.code == ErrorCode::InvalidRequest => {
                    endpoint_page(portal, id, None, Some(&err.description), 400).await
                }
                Err(err) => Err(err),
            }
        }
        ["webhooks", id, "test"] => {
            let id = ops::endpoint_id(id)?;
            match deliveries::send_test(env, portal, id).await {
                Ok(_) => see_other(url, &format!("/portal/webhooks/{id}")),
                Err(err) if err.code == ErrorCode::Conflict => {
                    endpoint_page(portal, id, None, Some(&err.description), 409).await
                }
                Err(err) => Err(err),
            }
        }
        ["deliveries", id, "resend"] => match deliveries::resend(env, portal, id).await {
            Ok(d) => see_other(url, &format!("/portal/webhooks/{}", d.endpoint_id)),
            Err(err) if err.code == ErrorCode::Conflict => page(
                409,
                layout(
                    "Resend refused",
                    Some(portal),
                    html! {
                        section { h1 { "Resend refused" } (error_box(Some(&err.description)))
                            p { a href="/portal/webhooks" { "Back to the endpoints" } } }
                    },
                ),
            ),
            Err(err) => Err(err),
        },
        _ => Err(ApiError::not_found(format!("no such page: {}", url.path()))),
    }
}

fn login_page(error: Option<&str>, email: &str) -> Markup {
    layout(
        "Log in",
        None,
        html! {
            section {
                h1 { "Log in" }
                (error_box(error))
                form method="post" action="/portal/login" {
                    label for="email" { "E-mail" }
                    input #email type="email" name="email" value=(email) required autocomplete="username";
                    label for="password" { "Password" }
                    input #password type="password" name="password" required autocomplete="current-password";
                    p { button type="submit" { "Log in" } }
                }
            }
        },
    )
}

async fn developers(
    portal: &Portal,
    shown: Option<(&Client, &str)>,
    error: Option<&str>,
) -> Result<Response, ApiError> {
    let clients = ops::clients(portal).await?;
    let status = match (shown, error) {
        (_, Some(_)) => 400,
        _ => 200,
    };
    page(
        status,
        layout(
            "Developers",
            Some(portal),
            html! {
                section {
                    h1 { "API clients" }
                    p.muted { "Exchange a client's id and secret for a token at " code { "POST /oauth/token" } "." }
                    @if let Some((client, secret)) = shown {
                        (secret_box(&format!("Secret of {} ({})", client.name, client.client_id), secret,
                            "Copy it now: it is shown once and stored only as a hash."))
                    }
                    @if clients.is_empty() { p { "No clients yet." } } @else {
                        table {
                            thead { tr { th { "Name" } th { "Client id" } th { "Scopes" } th { "Created" } th { "Last used" } th {} } }
                            tbody {
                                @for c in &clients {
                                    tr data-client=(c.client_id) {
                                        td { (c.name) }
                                        td { code { (c.client_id) } }
                                        td { (c.scopes.join(" ")) }
                                        td { (c.created_at) }
                                        td { (c.last_used_at.as_deref().unwrap_or("never")) }
                                        td {
                                            form method="post" action=(format!("/portal/developers/clients/{}/rotate", c.client_id)) {
                                                (csrf_field(portal)) button type="submit" name="rotate" { "Rotate secret" }
                                            }
                                            " "
                                            form method="post" action=(format!("/portal/developers/clients/{}/delete", c.client_id)) {
                                                (csrf_field(portal)) button.danger type="submit" name="delete" { "Delete" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                section {
                    h2 { "New client" }
                    (error_box(error))
                    form method="post" action="/portal/developers/clients" {
                        (csrf_field(portal))
                        label for="client-name" { "Name" }
                        input #client-name type="text" name="name" required maxlength="100";
                        fieldset {
                            legend { "Scopes" }
                            @for scope in Scope::ALL {
                                label { input type="checkbox" name="scope" value=(scope.as_str()) checked; " " (scope.as_str()) }
                            }
                        }
                        button type="submit" { "Create client" }
                    }
                }
            },
        ),
    )
}

fn event_checkboxes(chosen: Option<&[String]>) -> Markup {
    html! {
        fieldset {
            legend { "Event types (none ticked: every type)" }
            @for kind in EventType::ALL {
                @let on = chosen.is_some_and(|c| c.iter().any(|t| t == kind.as_str()));
                label { input type="checkbox" name="event_type" value=(kind.as_str()) checked[on]; " " (kind.as_str()) }
            }
        }
    }
}

async fn webhooks(
    portal: &Portal,
    error: Option<&str>,
    draft: Option<&NewEndpoint>,
) -> Result<Response, ApiError> {
    let endpoints = ops::endpoints(portal).await?;
    let notes = deliveries::notifications(portal).await?;
    let status = if error.is_some() { 400 } else { 200 };
    page(
        status,
        layout(
            "Webhooks",
            Some(portal),
            html! {
                section {
                    h1 { "Webhook endpoints" }
                    @if endpoints.is_empty() { p { "No endpoints yet." } } @else {
                        table {
                            thead { tr { th { "URL" } th { "Description" } th { "Events" } th { "Status" } } }
                            tbody {
                                @for e in &endpoints {
                                    tr {
                                        td { a href=(format!("/portal/webhooks/{}", e.id)) { (e.url) } }
                                        td { (e.description) }
                                        td { (types_text(e)) }
                                        td { (e.status) }
                                    }
                                }
                            }
                        }
                    }
                }
                @if !notes.is_empty() {
                    section {
                        h2 { "Notifications" }
                        @for n in &notes {
                            div.error {
                                strong { (n.subject) } br;
                                (n.body) br;
                                span.muted { (shared_types::time::format_unix(n.created_at).unwrap_or_default())
                                    " · e-mail: " (n.email_status) }
                            }
                        }
                    }
                }
                section {
                    h2 { "New endpoint" }
                    (error_box(error))
                    form method="post" action="/portal/webhooks" {
                        (csrf_field(portal))
                        label for="url" { "URL" }
                        input #url type="url" name="url" required value=(draft.map_or("", |d| d.url.as_str()))
                            placeholder="https://example.com/payrail/webhooks";
                        label for="description" { "Description" }
                        input #description type="text" name="description" maxlength="500"
                            value=(draft.map_or("", |d| d.description.as_str()));
                        (event_checkboxes(draft.and_then(|d| d.event_types.as_deref())))
                        button type="submit" { "Add endpoint" }
                    }
                }
            },
        ),
    )
}

fn types_text(e: &Endpoint) -> String {
    e.event_types
        .as_ref()
        .map_or_else(|| "all".to_owned(), |t| t.join(", "))
}

async fn endpoint_page(
    portal: &Portal,
    id: &str,
    secret: Option<&Secret>,
    error: Option<&str>,
    status: u16,
) -> Result<Response, ApiError> {
    let e = ops::endpoint(portal, id).await?;
    let log = deliveries::log(portal, id, "limit=25").await?;
    let action = |path: &str| format!("/portal/webhooks/{}{path}", e.id);
    page(
        status,
        layout(
            "Webhook endpoint",
            Some(portal),
            html! {
                section {
                    p { a href="/portal/webhooks" { "← All endpoints" } }
                    h1 { code { (e.url) } }
                    p.muted { "Id " code #endpoint-id { (e.id) } " · " (e.status) " · events: " (types_text(&e)) }
                    (error_box(error))
                    @if let Some(s) = secret {
                        (secret_box("Signing secret", &s.signing_secret,
                            "Verify Payrail-Signature with this value, prefix included."))
                        @if let Some(until) = &s.previous_secret_expires_at {
                            p.muted { "The previous secret also signs until " (until) "." }
                        }
                    }
                    form method="post" action=(action("/reveal")) {
                        (csrf_field(portal)) button type="submit" name="reveal" { "Reveal signing secret" }
                    }
                    " "
                    form method="post" action=(action("/test")) {
                        (csrf_field(portal)) button type="submit" name="test" { "Send a test event" }
                    }
                }
                @if e.status == "disabled" {
                    section {
                        h2 { "Disabled" }
                        @if let Some(reason) = &e.disabled_reason {
                            p.error { "Payrail disabled this endpoint: " (reason) "." }
                        }
                        form method="post" action=(action("/enable")) {
                            (csrf_field(portal))
                            label for="resend-since" { "Also resend deliveries that failed since (optional)" }
                            input #resend-since type="date" name="resend_failed_since";
                            p { button type="submit" name="enable" { "Enable endpoint" } }
                        }
                    }
                }
                section {
                    h2 { "Delivery log" }
                    @if log.data.is_empty() { p { "Nothing delivered yet." } } @else {
                        table {
                            thead { tr { th { "Created" } th { "Event" } th { "Status" } th { "Attempts" } th { "Next attempt" } th {} } }
                            tbody {
                                @for d in &log.data {
                                    tr data-delivery=(d.id) {
                                        td { a href=(format!("/portal/deliveries/{}", d.id)) { (d.created_at.as_deref().unwrap_or("")) } }
                                        td { (d.event_type) }
                                        td { (d.status) @if d.redelivery_of.is_some() { " (resent)" } }
                                        td { (d.attempts) }
                                        td { (d.next_attempt_at.as_deref().unwrap_or("—")) }
                                        td {
                                            form method="post" action=(format!("/portal/deliveries/{}/resend", d.id)) {
                                                (csrf_field(portal)) button type="submit" { "Resend" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                        @if log.has_more { p.muted { "Older deliveries: GET /portal/api/webhook-endpoints/" (e.id) "/deliveries" } }
                    }
                }
                section {
                    h2 { "Edit" }
                    form method="post" action=(action("")) {
                        (csrf_field(portal))
                        label for="url" { "URL" }
                        input #url type="url" name="url" required value=(e.url);
                        label for="description" { "Description" }
                        input #description type="text" name="description" maxlength="500" value=(e.description);
                        (event_checkboxes(e.event_types.as_deref()))
                        label for="status" { "Status" }
                        select #status name="status" {
                            option value="enabled" selected[e.status == "enabled"] { "enabled" }
                            option value="disabled" selected[e.status == "disabled"] { "disabled" }
                        }
                        p { button type="submit" { "Save" } }
                    }
                }
                section {
                    h2 { "Rotate signing secret" }
                    @if let Some(until) = &e.previous_secret_expires_at {
                        p.muted { "A previous secret signs too until " (until) "." }
                    }
                    form method="post" action=(action("/rotate")) {
                        (csrf_field(portal))
                        label for="grace" { "Keep the old secret valid for (hours, 0 ends it now)" }
                        input #grace type="number" name="grace_hours" min="0" max="168" value="24";
                        p { button type="submit" name="rotate" { "Rotate secret" } }
                    }
                }
                section {
                    h2 { "Delete" }
                    form method="post" action=(action("/delete")) {
                        (csrf_field(portal)) button.danger type="submit" { "Delete endpoint" }
                    }
                }
            },
        ),
    )
}

async fn delivery_page(portal: &Portal, id: &str) -> Result<Response, ApiError> {
    let d = deliveries::detail(portal, id).await?;
    let text = |v: &serde_json::Value| {
        v.as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| v.to_string())
    };
    page(
        200,
        layout(
            "Delivery",
            Some(portal),
            html! {
                section {
                    p { a href=(format!("/portal/webhooks/{}", text(&d["endpoint_id"]))) { "← Endpoint" } }
                    h1 { "Delivery " code { (text(&d["id"])) } }
                    p.muted { (text(&d["event_type"])) " · event " code { (text(&d["event_id"])) } " · " (text(&d["status"])) }
                    table {
                        thead { tr { th { "#" } th { "Started" } th { "Outcome" } th { "Status" } th { "Latency" } th { "Next attempt" } th { "Response (first 4 KB)" } } }
                        tbody {
                            @for a in d["attempts"].as_array().into_iter().flatten() {
                                tr {
                                    td { (text(&a["attempt"])) }
                                    td { (text(&a["started_at"])) }
                                    td { (text(&a["outcome"])) }
                                    td { (text(&a["status_code"])) }
                                    td { (text(&a["latency_ms"])) " ms" }
                                    td { (text(&a["next_attempt_at"])) }
                                    td { code { (text(&a["response_body"])) } }
                                }
                            }
                        }
                    }
                    h2 { "Body" }
                    pre { code { (text(&d["payload"])) } }
                }
            },
        ),
    )
}
