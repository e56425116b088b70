//! The `payrail` command: what a partner's developer runs on a laptop.
//!
//! - `payrail listen --forward-to http://localhost:3000/webhooks`: follows the events feed and
//!   forwards each new event to a local URL, signed with a local secret it prints, so a receiver
//!   can be built on a machine Payrail cannot reach.
//! - `payrail trigger payment.paid`: drives a sandbox checkout to that event.
//! - `payrail transactions|merchants list|get`, `payrail events list`, `payrail events resend`.
//!
//! Credentials: flags, then `PAYRAIL_API_URL` / `PAYRAIL_CLIENT_ID` / `PAYRAIL_CLIENT_SECRET`,
//! then the config file written by `payrail configure` (mode 0600; see [`config`]).

mod args;
pub mod config;
mod context;
mod http;
mod output;
mod portal;

use std::future::Future;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt};
use payrail::webhooks::{
    signature_header, Event, EVENT_ID_HEADER, EVENT_TYPE_HEADER, SIGNATURE_HEADER,
};
use payrail::{
    CheckoutRequest, Client, EventQuery, Merchant, MerchantQuery, MerchantStatus, SandboxAction,
    Transaction, TransactionQuery,
};
use rand::RngCore;

use crate::args::{
    Cli, Command, EventsCommand, MerchantsCommand, TransactionsCommand, TriggerEvent,
};
use crate::config::{Env, PortalLogin};
use crate::context::Context;
use crate::output::{cell, print_list, print_one, Failure, Outcome};

/// Where the command reads and writes.
pub struct Io {
    /// Results.
    pub out: Box<dyn Write + Send>,
    /// Progress and errors.
    pub err: Box<dyn Write + Send>,
    /// Secrets read from a pipe.
    pub stdin: Box<dyn BufRead + Send>,
    /// Whether standard input is a terminal (then secrets are prompted for without echo).
    pub stdin_is_terminal: bool,
}

/// Runs the command line `args` (program name first); answers the exit code. `shutdown`
/// ends `listen`.
pub async fn run(
    args: Vec<String>,
    env: Env,
    io: &mut Io,
    shutdown: impl Future<Output = ()>,
) -> i32 {
    let cli = match args::parse(args, io) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match execute(cli, &env, io, shutdown).await {
        Ok(()) => 0,
        Err(failure) => failure.show(io),
    }
}

async fn execute(cli: Cli, env: &Env, io: &mut Io, shutdown: impl Future<Output = ()>) -> Outcome {
    let mut cx = Context::load(env, cli.api_url, cli.json)?;
    match cli.command {
        Command::Configure { client_id } => configure(&mut cx, io, client_id),
        Command::Login { email } => login(&mut cx, io, email).await,
        Command::Transactions { action } => transactions(&cx, io, action).await,
        Command::Merchants { action } => merchants(&cx, io, action).await,
        Command::Events { action } => events(&cx, io, action).await,
        Command::Listen {
            forward_to,
            interval_ms,
            print_secret,
        } => match forward_to.filter(|_| !print_secret) {
            Some(target) => {
                let interval = Duration::from_millis(interval_ms);
                listen(&mut cx, io, &target, interval, shutdown).await
            }
            None => {
                let secret = listen_secret(&mut cx)?;
                writeln!(io.out, "{secret}")?;
                Ok(())
            }
        },
        Command::Trigger {
            event,
            merchant,
            amount,
            currency,
            reference,
            redirect_url,
        } => {
            let order = Order {
                amount,
                currency,
                reference,
                redirect_url,
            };
            trigger(&cx, io, event, merchant, order).await
        }
    }
}

fn configure(cx: &mut Context<'_>, io: &mut Io, client_id: String) -> Outcome {
    let api_url = cx.api_url()?;
    let client_secret = cx.secret(io, "PAYRAIL_CLIENT_SECRET", "Client secret: ")?;
    cx.config.api_url = Some(api_url);
    cx.config.client_id = Some(client_id);
    cx.config.client_secret = Some(client_secret);
    cx.save()?;
    writeln!(
        io.err,
        "Saved to {} (readable by you only).",
        cx.path.display()
    )?;
    Ok(())
}

async fn login(cx: &mut Context<'_>, io: &mut Io, email: String) -> Outcome {
    let api_url = cx.api_url()?;
    let password = cx.secret(io, "PAYRAIL_PORTAL_PASSWORD", "Portal password: ")?;
    let answer = portal::post(&api_url, "portal/api/login", |request| {
        request.json(&serde_json::json!({ "email": email, "password": password }))
    })
    .await?;
    if answer.status != 200 {
        return Err(answer.failure());
    }
    let (Some(cookie), Some(csrf)) = (answer.session, answer.body["csrf_token"].as_str()) else {
        return Err(Failure::from(
            "the portal answered a login without a session".to_owned(),
        ));
    };
    cx.config.portal = Some(PortalLogin {
        email: email.clone(),
        cookie,
        csrf: csrf.to_owned(),
    });
    cx.save()?;
    writeln!(io.err, "Logged in to the portal as {email}.")?;
    Ok(())
}

fn transaction_row(t: &Transaction) -> Vec<String> {
    vec![
        t.id.to_string(),
        t.status.to_string(),
        cell(t.amount.gross.or(t.amount.expected)),
        cell(t.currency.as_deref()),
        cell(t.asset.as_deref()),
        cell(t.external_reference.as_deref()),
        cell(t.created_at.as_deref()),
    ]
}

const TRANSACTION_HEADER: [&str; 7] = [
    "ID",
    "STATUS",
    "AMOUNT",
    "CURRENCY",
    "ASSET",
    "REFERENCE",
    "CREATED",
];

async fn transactions(cx: &Context<'_>, io: &mut Io, action: TransactionsCommand) -> Outcome {
    let client = cx.client()?;
    match action {
        TransactionsCommand::List {
            status,
            merchant,
            reference,
            created_after,
            created_before,
            limit,
        } => {
            let mut query = TransactionQuery::new().limit(limit.min(100) as u32);
            if let Some(status) = status {
                query = query.status(status);
            }
            if let Some(merchant) = merchant {
                query = query.merchant_id(merchant);
            }
            if let Some(reference) = reference {
                query = query.external_reference(reference);
            }
            if let Some(bound) = created_after {
                query = query.created_after(time_bound(bound));
            }
            if let Some(bound) = created_before {
                query = query.created_before(time_bound(bound));
            }
            let items = first(client.transactions(query), limit).await?;
            print_list(io, cx.json, &items, &TRANSACTION_HEADER, transaction_row)
        }
        TransactionsCommand::Get { id } => match client.transaction(id).await? {
            Some(t) => print_one(io, &t),
            None => Err(Failure::not_found("transaction", id)),
        },
    }
}

/// The first `limit` items of a list, following its pages.
async fn first<T>(
    items: futures_util::stream::BoxStream<'static, payrail::Result<T>>,
    limit: u64,
) -> Result<Vec<T>, Failure> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    Ok(items.take(limit).try_collect().await?)
}

/// Unix seconds given as digits, else the text as the API takes it.
fn time_bound(text: String) -> payrail::TimeBound {
    match text.parse::<i64>() {
        Ok(secs) => secs.into(),
        Err(_) => text.into(),
    }
}

fn merchant_row(m: &Merchant) -> Vec<String> {
    vec![
        m.id.to_string(),
        m.name.clone(),
        m.psp_reference_id.clone(),
        m.status.to_string(),
        m.onboarding_status.to_string(),
        m.crypto_enabled.to_string(),
        m.public_key.clone(),
    ]
}

async fn merchants(cx: &Context<'_>, io: &mut Io, action: MerchantsCommand) -> Outcome {
    let client = cx.client()?;
    match action {
        MerchantsCommand::List { reference, limit } => {
            let mut query = MerchantQuery::new().limit(limit.min(100) as u32);
            if let Some(reference) = reference {
                query = query.psp_reference_id(reference);
            }
            let items = first(client.merchants(query), limit).await?;
            print_list(
                io,
                cx.json,
                &items,
                &[
                    "ID",
                    "NAME",
                    "REFERENCE",
                    "STATUS",
                    "ONBOARDING",
                    "CRYPTO",
                    "PUBLIC KEY",
                ],
                merchant_row,
            )
        }
        MerchantsCommand::Get { id } => match client.merchant(id).await? {
            Some(m) => print_one(io, &m),
            None => Err(Failure::not_found("merchant", id)),
        },
    }
}

async fn events(cx: &Context<'_>, io: &mut Io, action: EventsCommand) -> Outcome {
    match action {
        EventsCommand::List {
            kind,
            transaction,
            limit,
        } => {
            let client = cx.client()?;
            let mut query = EventQuery::new().limit(limit.min(100) as u32);
            if let Some(kind) = kind {
                query = query.kind(kind);
            }
            if let Some(transaction) = transaction {
                query = query.transaction_id(transaction);
            }
            let items = first(client.events(query), limit).await?;
            print_list(
                io,
                cx.json,
                &items,
                &["ID", "TYPE", "TRANSACTION", "CREATED"],
                |e| {
                    vec![
                        e.id.clone(),
                        e.type_name().to_owned(),
                        cell(e.transaction().map(|t| t.id)),
                        cell(e.created_at()),
                    ]
                },
            )
        }
        EventsCommand::Resend { delivery } => resend(cx, io, &delivery).await,
    }
}

async fn resend(cx: &Context<'_>, io: &mut Io, delivery: &str) -> Outcome {
    let valid = delivery.len() <= 64
        && delivery.strip_prefix("dlv_").is_some_and(|rest| {
            !rest.is_empty()
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
    if !valid {
        return Err(Failure::from(format!(
            "{delivery:?} is not a delivery id (dlv_…)"
        )));
    }
    let Some(portal) = &cx.config.portal else {
        return Err(Failure::from(
            "resending needs a portal session: run payrail login --email <you>".to_owned(),
        ));
    };
    let path = format!("portal/api/deliveries/{delivery}/resend");
    let answer = portal::post(&cx.api_url()?, &path, |request| {
        portal::with_session(request, portal)
    })
    .await?;
    if !(200..300).contains(&answer.status) {
        return Err(answer.failure());
    }
    let body = answer.body;
    if cx.json {
        return print_one(io, &body);
    }
    writeln!(
        io.out,
        "Resent {} as {} ({}).",
        body["event_id"].as_str().unwrap_or("the event"),
        body["id"].as_str().unwrap_or("a new delivery"),
        body["status"].as_str().unwrap_or("queued")
    )?;
    Ok(())
}

/// A new local signing secret: 24 random bytes, hex.
fn new_secret() -> String {
    let mut bytes = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("whsec_local_{}", hex::encode(bytes))
}

/// The local signing secret: the saved one, or a new one, saved.
fn listen_secret(cx: &mut Context<'_>) -> Result<String, Failure> {
    if let Some(secret) = &cx.config.listen_secret {
        return Ok(secret.clone());
    }
    let secret = new_secret();
    cx.config.listen_secret = Some(secret.clone());
    cx.save()?;
    Ok(secret)
}

async fn listen(
    cx: &mut Context<'_>,
    io: &mut Io,
    forward_to: &str,
    interval: Duration,
    shutdown: impl Future<Output = ()>,
) -> Outcome {
    let target = reqwest::Url::parse(forward_to)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| {
            Failure::from(format!("--forward-to {forward_to:?} is not an http(s) URL"))
        })?;
    let client = cx.client()?;
    let secret = listen_secret(cx)?;
    // Only what happens from now on: the newest event so far marks where to start.
    let mut newest = client
        .events_page(&EventQuery::new().limit(1))
        .await?
        .data
        .into_iter()
        .next()
        .map(|e| e.id);
    let http = http::client(Duration::from_secs(10))?;
    writeln!(
        io.err,
        "Ready. Forwarding new events to {target}\nYour local webhook signing secret is {secret}\n(Ctrl-C to stop)"
    )?;
    io.err.flush()?;
    tokio::pin!(shutdown);
    loop {
        let fresh = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            fresh = new_events(&client, newest.as_deref()) => fresh,
        };
        match fresh {
            Ok(fresh) => {
                if let Some(first) = fresh.first() {
                    newest = Some(first.id.clone());
                }
                // Oldest first, as they happened.
                for event in fresh.iter().rev() {
                    let line = forward(&http, &target, &secret, event).await;
                    writeln!(io.out, "{line}")?;
                    io.out.flush()?;
                }
            }
            Err(err) => {
                writeln!(io.err, "reading the events feed failed (retrying): {err}")?;
            }
        }
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

/// Events newer than `newest`, newest first (at most 1,000 per read).
async fn new_events(client: &Client, newest: Option<&str>) -> payrail::Result<Vec<Event>> {
    let mut stream = client.events(EventQuery::new().limit(25));
    let mut fresh = Vec::new();
    while let Some(event) = stream.try_next().await? {
        if Some(event.id.as_str()) == newest || fresh.len() == 1000 {
            break;
        }
        fresh.push(event);
    }
    Ok(fresh)
}

/// POSTs one event as a Payrail delivery would (same body, same headers, signed with the local
/// secret); answers the line to print. Up to three tries when the receiver is not reachable or
/// answers 5xx.
async fn forward(
    http: &reqwest::Client,
    target: &reqwest::Url,
    secret: &str,
    event: &Event,
) -> String {
    let body = serde_json::to_vec(event).expect("an event serializes");
    let mut last = String::new();
    for attempt in 0..3u32 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let started = Instant::now();
        let sent = http
            .post(target.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, signature_header(&[secret], now, &body))
            .header(EVENT_ID_HEADER, &event.id)
            .header(EVENT_TYPE_HEADER, event.type_name())
            .body(body.clone())
            .send()
            .await;
        let took = started.elapsed().as_millis();
        match sent {
            Ok(response) if !response.status().is_server_error() => {
                return format!(
                    "{}  {}  → {} ({} ms)",
                    event.type_name(),
                    event.id,
                    response.status(),
                    took
                );
            }
            Ok(response) => last = format!("{}", response.status()),
            Err(err) => last = format!("not delivered: {err}"),
        }
    }
    format!(
        "{}  {}  → {last} (gave up after 3 tries)",
        event.type_name(),
        event.id
    )
}

/// The order `trigger` pays.
struct Order {
    amount: String,
    currency: String,
    reference: Option<String>,
    redirect_url: Option<String>,
}

async fn trigger(
    cx: &Context<'_>,
    io: &mut Io,
    event: TriggerEvent,
    merchant: Option<i64>,
    order: Order,
) -> Outcome {
    let Order {
        amount,
        currency,
        reference,
        redirect_url,
    } = order;
    let redirect_url = match redirect_url {
        Some(url) => url,
        None => http::join(&cx.api_url()?, "")?.to_string(),
    };
    let client = cx.client()?;
    let merchant = match merchant {
        Some(id) => client
            .merchant(id)
            .await?
            .ok_or_else(|| Failure::not_found("merchant", id))?,
        None => {
            let mut all = client.merchants(MerchantQuery::new().limit(100));
            let mut found = None;
            while let Some(m) = all.try_next().await? {
                if m.status == MerchantStatus::Active && m.crypto_enabled && m.onboarding_complete {
                    found = Some(m);
                    break;
                }
            }
            found.ok_or_else(|| {
                Failure::from(
                    "no merchant can take payments: onboard one in the portal, or pass --merchant"
                        .to_owned(),
                )
            })?
        }
    };
    let reference = reference.unwrap_or_else(|| {
        let mut bytes = [0u8; 4];
        rand::thread_rng().fill_bytes(&mut bytes);
        format!("trigger-{}", hex::encode(bytes))
    });
    writeln!(
        io.err,
        "Creating a checkout of {amount} {currency} for {} (order {reference})…",
        merchant.name
    )?;
    let session = client
        .create_checkout(&CheckoutRequest {
            public_key: merchant.public_key.clone(),
            amount: amount.clone(),
            currency,
            title: format!("payrail trigger {}", event_name(event)),
            external_reference: reference.clone(),
            idempotency_key: Some(reference.clone()),
            redirect_url,
            allow_crypto: true,
        })
        .await
        .map_err(|err| {
            let hint = if err.code() == Some("redirect_not_allowed") {
                "\nhint: pass --redirect-url with one of the merchant's return origins"
            } else {
                ""
            };
            Failure::api(err, hint)
        })?;
    let id = session.transaction_id;
    let mut steps = vec![("pay", SandboxAction::Pay(amount.clone()))];
    if event != TriggerEvent::Succeeded {
        steps.push(("settle", SandboxAction::Settle));
    }
    if event == TriggerEvent::Refunded {
        steps.push(("refund", SandboxAction::Refund(amount)));
    }
    let mut last = None;
    for (name, step) in steps {
        writeln!(io.err, "  {name} transaction {id}…")?;
        last = Some(client.sandbox(id, &step).await.map_err(|err| {
            if err.status() == Some(404) {
                Failure::api(
                    err,
                    "\nhint: trigger drives the sandbox; this API is not in sandbox mode",
                )
            } else {
                Failure::from(err)
            }
        })?);
    }
    let transaction = last.expect("at least one step");
    if cx.json {
        return print_one(io, &transaction);
    }
    writeln!(
        io.out,
        "{} for transaction {id} (order {reference}, status {}): delivered to your endpoints and shown by payrail listen.",
        event_name(event),
        transaction.status
    )?;
    Ok(())
}

fn event_name(event: TriggerEvent) -> &'static str {
    match event {
        TriggerEvent::Succeeded => "payment.succeeded",
        TriggerEvent::Paid => "payment.paid",
        TriggerEvent::Refunded => "payment.refunded",
    }
}
