//! `payrail transactions list|get`.

use payrail::{Transaction, TransactionQuery};

use super::first;
use crate::args::{GetArgs, TransactionsCommand, TransactionsListArgs};
use crate::context::Context;
use crate::output::{cell, print_list, print_one, Failure, Outcome};
use crate::Io;

pub(super) async fn run(cx: &Context<'_>, io: &mut Io, action: TransactionsCommand) -> Outcome {
    let client = cx.client()?;
    match action {
        TransactionsCommand::List(args) => {
            let TransactionsListArgs {
                status,
                merchant,
                reference,
                created_after,
                created_before,
                limit,
            } = args;
            let mut query = TransactionQuery::new().limit(limit.page_size());
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
            let items = first(client.transactions(query), &limit).await?;
            print_list(io, cx.json, &items, &HEADER, row)
        }
        TransactionsCommand::Get(GetArgs { id }) => {
            let transaction = client
                .transaction(id)
                .await?
                .ok_or_else(|| Failure::not_found("transaction", id))?;
            print_one(io, &transaction)
        }
    }
}

const HEADER: [&str; 7] = [
    "ID",
    "STATUS",
    "AMOUNT",
    "CURRENCY",
    "ASSET",
    "REFERENCE",
    "CREATED",
];

fn row(t: &Transaction) -> Vec<String> {
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

/// Unix seconds given as digits, else the text as the API takes it.
fn time_bound(text: String) -> payrail::TimeBound {
    match text.parse::<i64>() {
        Ok(secs) => secs.into(),
        Err(_) => text.into(),
    }
}
