//! `payrail events list|resend`.

use std::io::Write;

use payrail::webhooks::Event;
use payrail::EventQuery;

use super::first;
use crate::args::{EventsCommand, EventsListArgs, ResendArgs};
use crate::context::Context;
use crate::output::{cell, print_list, print_one, Failure, Outcome};
use crate::{portal, Io};

pub(super) async fn run(cx: &Context<'_>, io: &mut Io, action: EventsCommand) -> Outcome {
    match action {
        EventsCommand::List(args) => list(cx, io, args).await,
        EventsCommand::Resend(ResendArgs { delivery }) => resend(cx, io, &delivery).await,
    }
}

async fn list(cx: &Context<'_>, io: &mut Io, args: EventsListArgs) -> Outcome {
    let EventsListArgs {
        kind,
        transaction,
        limit,
    } = args;
    let client = cx.client()?;
    let mut query = EventQuery::new().limit(limit.page_size());
    if let Some(kind) = kind {
        query = query.kind(kind);
    }
    if let Some(transaction) = transaction {
        query = query.transaction_id(transaction);
    }
    let items = first(client.events(query), &limit).await?;
    print_list(io, cx.json, &items, &HEADER, row)
}

const HEADER: [&str; 4] = ["ID", "TYPE", "TRANSACTION", "CREATED"];

fn row(e: &Event) -> Vec<String> {
    vec![
        e.id.clone(),
        e.type_name().to_owned(),
        cell(e.transaction().map(|t| t.id)),
        cell(e.created_at()),
    ]
}

/// Asks the portal to deliver `delivery`'s event again (needs a portal session).
async fn resend(cx: &Context<'_>, io: &mut Io, delivery: &str) -> Outcome {
    if payrail::DeliveryId::parse(delivery).is_err() {
        return Err(Failure::from(format!(
            "{delivery:?} is not a delivery id ({}…)",
            payrail::DeliveryId::PREFIX
        )));
    }
    let Some(login) = &cx.config.portal else {
        return Err(Failure::from(
            "resending needs a portal session: run payrail login --email <you>".to_owned(),
        ));
    };
    let path = format!("portal/api/deliveries/{delivery}/resend");
    let answer = portal::post(&cx.api_url()?, &path, |request| {
        portal::with_session(request, login)
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
