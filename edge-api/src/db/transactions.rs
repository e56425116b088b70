//! Transaction reads for the partner API.
//!
//! Every page is a range scan of one index in id order, whatever the filters: the index is
//! chosen by the filters' shape (equality columns first, then `id`), `starting_after` and the
//! date bounds become bounds on `id`, and `LIMIT` stops the scan. Date bounds become id bounds
//! through `transactions_by_created`, because ids are allocated in creation order.

use std::str::FromStr;

use rust_decimal::Decimal;
use serde::Deserialize;
use shared_types::{Amount, Networks, Transaction, TransactionObject, TxHashes};
use worker::D1Database;

use super::{Query, Value};
use crate::query::{TransactionFilter, MAX_ID};

const COLUMNS: &str = "id, merchant_id, status, raw_status, amount_status, asset, currency, \
    amount_gross, amount_net, amount_expected, psp_fee, gas_fee, bridge_fee, network_payment, \
    network_settlement, tx_hash_source, tx_hash_bridge, tx_hash_settlement, customer_email, \
    external_reference, created_at, paid_at";

/// SQL for the first id created at or after the bound in parameter `?n`; past every id when
/// nothing was, so that `id < ...` keeps everything and `id >= ...` keeps nothing.
fn first_id_created_from(n: usize) -> String {
    format!(
        "COALESCE((SELECT id FROM transactions INDEXED BY transactions_by_created \
         WHERE created_at >= ?{n} ORDER BY created_at, id LIMIT 1), {})",
        MAX_ID + 1
    )
}

/// A transactions row as D1 returns it.
#[derive(Debug, Deserialize)]
struct Row {
    id: i64,
    merchant_id: i64,
    status: String,
    raw_status: String,
    amount_status: Option<String>,
    asset: Option<String>,
    currency: Option<String>,
    amount_gross: Option<String>,
    amount_net: Option<String>,
    amount_expected: Option<String>,
    psp_fee: Option<String>,
    gas_fee: Option<String>,
    bridge_fee: Option<String>,
    network_payment: Option<String>,
    network_settlement: Option<String>,
    tx_hash_source: Option<String>,
    tx_hash_bridge: Option<String>,
    tx_hash_settlement: Option<String>,
    customer_email: Option<String>,
    external_reference: Option<String>,
    created_at: String,
    paid_at: Option<String>,
}

impl Row {
    fn into_transaction(self) -> Result<Transaction, String> {
        let id = self.id;
        let bad = |what: &str| format!("transaction {id}: bad {what}");
        let decimal = |value: Option<String>, what: &str| {
            value
                .map(|v| Decimal::from_str(&v).map_err(|_| bad(what)))
                .transpose()
        };
        Ok(Transaction {
            object: TransactionObject::Transaction,
            id,
            merchant_id: self.merchant_id,
            status: self.status.parse().map_err(|_| bad("status"))?,
            raw_status: self.raw_status.parse().map_err(|_| bad("raw_status"))?,
            amount_status: self
                .amount_status
                .map(|s| s.parse().map_err(|_| bad("amount_status")))
                .transpose()?,
            asset: self.asset,
            currency: self.currency,
            amount: Amount {
                gross: decimal(self.amount_gross, "amount_gross")?,
                net: decimal(self.amount_net, "amount_net")?,
                expected: decimal(self.amount_expected, "amount_expected")?,
                psp_fee: decimal(self.psp_fee, "psp_fee")?,
                gas_fee: decimal(self.gas_fee, "gas_fee")?,
                bridge_fee: decimal(self.bridge_fee, "bridge_fee")?,
            },
            networks: Networks {
                payment: self.network_payment,
                settlement: self.network_settlement,
            },
            tx_hashes: TxHashes {
                source: self.tx_hash_source,
                bridge: self.tx_hash_bridge,
                settlement: self.tx_hash_settlement,
            },
            customer_email: self.customer_email,
            external_reference: self.external_reference,
            created_at: Some(self.created_at),
            paid_at: self.paid_at,
        })
    }
}

/// The index whose equality columns match the filters; `None` when the id pins one row.
fn index_for(filter: &TransactionFilter) -> Option<&'static str> {
    if filter.id.is_some() {
        return None;
    }
    Some(
        match (
            &filter.external_reference,
            filter.merchant_id,
            filter.status,
        ) {
            (Some(_), _, _) => "transactions_by_reference",
            (None, Some(_), Some(_)) => "transactions_by_merchant_status",
            (None, Some(_), None) => "transactions_by_merchant",
            (None, None, Some(_)) => "transactions_by_status",
            (None, None, None) => "transactions_by_institution",
        },
    )
}

/// The query for one page of an institution's transactions, newest first, one row over `limit`.
pub fn list_query(institution_id: i64, filter: &TransactionFilter) -> Query {
    let mut sql = format!("SELECT {COLUMNS} FROM transactions");
    if let Some(index) = index_for(filter) {
        sql.push_str(&format!(" INDEXED BY {index}"));
    }
    sql.push_str(" WHERE institution_id = ?1");
    let mut params = vec![Value::Int(institution_id)];
    let mut and = |clause: &dyn Fn(usize) -> String, value: Value| {
        params.push(value);
        sql.push_str(" AND ");
        sql.push_str(&clause(params.len()));
    };
    if let Some(merchant_id) = filter.merchant_id {
        and(&|n| format!("merchant_id = ?{n}"), merchant_id.into());
    }
    if let Some(status) = filter.status {
        and(&|n| format!("status = ?{n}"), status.as_str().into());
    }
    if let Some(reference) = &filter.external_reference {
        and(
            &|n| format!("external_reference = ?{n}"),
            reference.as_str().into(),
        );
    }
    if let Some(id) = filter.id {
        and(&|n| format!("id = ?{n}"), id.into());
    }
    if let Some(cursor) = filter.starting_after {
        and(&|n| format!("id < ?{n}"), cursor.into());
    }
    if let Some(after) = &filter.created_after {
        and(
            &|n| format!("created_at >= ?{n} AND id >= {}", first_id_created_from(n)),
            after.as_str().into(),
        );
    }
    if let Some(before) = &filter.created_before {
        and(
            &|n| format!("created_at < ?{n} AND id < {}", first_id_created_from(n)),
            before.as_str().into(),
        );
    }
    params.push(Value::Int(i64::from(filter.limit) + 1));
    sql.push_str(&format!(" ORDER BY id DESC LIMIT ?{}", params.len()));
    Query { sql, params }
}

/// One page of transactions, with one extra row when a further page exists.
pub async fn list(
    db: &D1Database,
    institution_id: i64,
    filter: &TransactionFilter,
) -> Result<Vec<Transaction>, String> {
    let rows: Vec<Row> = list_query(institution_id, filter)
        .all(db)
        .await
        .map_err(|e| e.to_string())?;
    rows.into_iter().map(Row::into_transaction).collect()
}
