//! `payrail merchants list|get`.

use payrail::{Merchant, MerchantQuery};

use super::first;
use crate::args::{GetArgs, MerchantsCommand, MerchantsListArgs};
use crate::context::Context;
use crate::output::{print_list, print_one, Failure, Outcome};
use crate::Io;

pub(super) async fn run(cx: &Context<'_>, io: &mut Io, action: MerchantsCommand) -> Outcome {
    let client = cx.client()?;
    match action {
        MerchantsCommand::List(MerchantsListArgs { reference, limit }) => {
            let mut query = MerchantQuery::new().limit(limit.page_size());
            if let Some(reference) = reference {
                query = query.psp_reference_id(reference);
            }
            let items = first(client.merchants(query), &limit).await?;
            print_list(io, cx.json, &items, &HEADER, row)
        }
        MerchantsCommand::Get(GetArgs { id }) => {
            let merchant = client
                .merchant(id)
                .await?
                .ok_or_else(|| Failure::not_found("merchant", id))?;
            print_one(io, &merchant)
        }
    }
}

const HEADER: [&str; 7] = [
    "ID",
    "NAME",
    "REFERENCE",
    "STATUS",
    "ONBOARDING",
    "CRYPTO",
    "PUBLIC KEY",
];

fn row(m: &Merchant) -> Vec<String> {
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
