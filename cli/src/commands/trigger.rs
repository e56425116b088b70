//! `payrail trigger`: creates a sandbox checkout and drives it to an event.

use std::io::Write;

use futures_util::TryStreamExt;
use payrail::{CheckoutRequest, Client, Merchant, MerchantQuery, MerchantStatus, SandboxAction};

use super::random_hex;
use crate::args::{TriggerArgs, TriggerEvent};
use crate::context::Context;
use crate::output::{print_one, Failure, Outcome};
use crate::{http, Io};

pub(super) async fn run(cx: &Context<'_>, io: &mut Io, args: TriggerArgs) -> Outcome {
    let TriggerArgs {
        event,
        merchant,
        amount,
        currency,
        reference,
        redirect_url,
    } = args;
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
        None => payable_merchant(&client).await?,
    };
    let reference = reference.unwrap_or_else(|| format!("trigger-{}", random_hex::<4>()));
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
            title: format!("payrail trigger {}", event.name()),
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
        event.name(),
        transaction.status
    )?;
    Ok(())
}

/// The first merchant that can take payments: active, crypto enabled, onboarded.
async fn payable_merchant(client: &Client) -> Result<Merchant, Failure> {
    let mut all = client.merchants(MerchantQuery::new().limit(100));
    while let Some(m) = all.try_next().await? {
        if m.status == MerchantStatus::Active && m.crypto_enabled && m.onboarding_complete {
            return Ok(m);
        }
    }
    Err(Failure::from(
        "no merchant can take payments: onboard one in the portal, or pass --merchant".to_owned(),
    ))
}
