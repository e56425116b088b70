//! The portal's server-rendered pages: login, developers (API clients), webhook endpoints. Plain
//! HTML forms, each carrying the session's CSRF token; no script.

use maud::{html, Markup};
use shared_types::{ErrorCode, Scope};
use worker::{Env, Method, Request, Response, Url};

mod webhooks;

use webhooks::{delivery_page, endpoint_page};

use super::deliveries;
use super::ops::{self, Client, NewEndpoint, Secret};
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
    crate::pages::document(
        &format!("{title} — Payrail portal"),
        STYLE,
        html! {},
        html! {
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
        },
    )
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
        ["webhooks"] => webhooks::webhooks(portal, None, None).await,
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
                    webhooks::webhooks(portal, Some(&err.description), Some(&new)).await
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
