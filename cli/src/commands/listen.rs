//! `payrail listen`: follows the events feed and forwards each new event to a local URL, signed
//! with a local secret; `--print-secret` prints that secret.

use std::future::Future;
use std::io::Write;
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use payrail::webhooks::{
    signature_header, Event, EVENT_ID_HEADER, EVENT_TYPE_HEADER, SIGNATURE_HEADER,
};
use payrail::{Client, EventQuery};

use super::random_hex;
use crate::args::ListenArgs;
use crate::context::Context;
use crate::output::{Failure, Outcome};
use crate::{http, Io};

pub(super) async fn run(
    cx: &mut Context<'_>,
    io: &mut Io,
    args: ListenArgs,
    shutdown: impl Future<Output = ()>,
) -> Outcome {
    match args.forward_to.filter(|_| !args.print_secret) {
        Some(target) => {
            let interval = Duration::from_millis(args.interval_ms);
            listen(cx, io, &target, interval, shutdown).await
        }
        None => {
            let secret = local_secret(cx)?;
            writeln!(io.out, "{secret}")?;
            Ok(())
        }
    }
}

/// The local signing secret: the saved one, or a new one (24 random bytes), saved.
fn local_secret(cx: &mut Context<'_>) -> Result<String, Failure> {
    if let Some(secret) = &cx.config.listen_secret {
        return Ok(secret.clone());
    }
    let secret = format!("whsec_local_{}", random_hex::<24>());
    cx.config.listen_secret = Some(secret.clone());
    cx.save()?;
    Ok(secret)
}

/// Forwards events newer than the newest so far to `forward_to`, reading the feed every
/// `interval`, until `shutdown`.
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
    let secret = local_secret(cx)?;
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
