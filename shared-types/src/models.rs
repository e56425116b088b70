//! Resource models of the partner REST API (spec §2), serialized exactly as the wire shows them.

use alloc::string::String;
use alloc::vec::Vec;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::status::{AmountStatus, MerchantStatus, OnboardingStatus, RawStatus, Status};

/// The list envelope (spec §2.1). The cursor is the last item's id: an integer for the partner
/// API's resources, text for the portal's (delivery ids).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct List<T, C = i64> {
    /// Always `list`.
    pub object: ListObject,
    /// The page, newest first.
    pub data: Vec<T>,
    /// Whether a further page exists.
    pub has_more: bool,
    /// The id to pass as `starting_after` for the next page; `None` exactly when `has_more` is false.
    pub next_cursor: Option<C>,
}

impl<T, C> List<T, C> {
    /// Builds a page from up to `limit + 1` rows fetched newest first: the extra row, if present,
    /// only proves that a further page exists.
    pub fn from_overfetch(mut rows: Vec<T>, limit: usize, id_of: impl Fn(&T) -> C) -> Self {
        let has_more = rows.len() > limit;
        rows.truncate(limit);
        let next_cursor = if has_more {
            rows.last().map(&id_of)
        } else {
            None
        };
        List {
            object: ListObject::List,
            data: rows,
            has_more,
            next_cursor,
        }
    }
}

/// The `object` tag of a list: always `list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ListObject {
    /// `list`
    #[default]
    #[serde(rename = "list")]
    List,
}

/// The `object` tag of a transaction: always `transaction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum TransactionObject {
    /// `transaction`
    #[default]
    #[serde(rename = "transaction")]
    Transaction,
}

/// The `object` tag of a merchant: always `merchant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum MerchantObject {
    /// `merchant`
    #[default]
    #[serde(rename = "merchant")]
    Merchant,
}

/// The `object` tag of a webhook delivery in the portal's API: always `webhook_delivery`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum DeliveryObject {
    /// `webhook_delivery`
    #[default]
    #[serde(rename = "webhook_delivery")]
    WebhookDelivery,
}

/// The `object` tag of an API client in the portal's API: always `api_client`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ApiClientObject {
    /// `api_client`
    #[default]
    #[serde(rename = "api_client")]
    ApiClient,
}

/// A transaction (spec §2.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transaction {
    /// Always `transaction`.
    pub object: TransactionObject,
    /// Transaction id; ids grow in creation order.
    pub id: i64,
    /// Owning merchant.
    pub merchant_id: i64,
    /// Normalized status.
    pub status: Status,
    /// Internal status.
    pub raw_status: RawStatus,
    /// Paid amount against expected amount, once paid.
    pub amount_status: Option<AmountStatus>,
    /// Crypto asset code, e.g. `USDC`.
    pub asset: Option<String>,
    /// Currency code of the order, e.g. `EUR`.
    pub currency: Option<String>,
    /// Amounts, as decimal strings.
    pub amount: Amount,
    /// Networks of the payment and the settlement.
    pub networks: Networks,
    /// Chain transaction hashes.
    pub tx_hashes: TxHashes,
    /// Customer's e-mail address.
    pub customer_email: Option<String>,
    /// The PSP's order id, from the checkout options.
    pub external_reference: Option<String>,
    /// Creation time.
    pub created_at: Option<String>,
    /// Time the customer's payment landed.
    pub paid_at: Option<String>,
}

/// Amounts of a transaction; every member a decimal string or null.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Amount {
    /// What the customer actually paid.
    pub gross: Option<Decimal>,
    /// What was credited to the merchant.
    pub net: Option<Decimal>,
    /// What was requested.
    pub expected: Option<Decimal>,
    /// PSP fee.
    pub psp_fee: Option<Decimal>,
    /// Network fee.
    pub gas_fee: Option<Decimal>,
    /// Bridge fee.
    pub bridge_fee: Option<Decimal>,
}

/// Networks of a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Networks {
    /// Network the customer paid on.
    pub payment: Option<String>,
    /// Network of the transfer to the merchant.
    pub settlement: Option<String>,
}

/// Chain transaction hashes of a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TxHashes {
    /// The customer's payment.
    pub source: Option<String>,
    /// The bridge transfer, when the settlement crossed networks.
    pub bridge: Option<String>,
    /// The transfer to the merchant.
    pub settlement: Option<String>,
}

/// A merchant (spec §2.3). Every member is always present and non-null.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Merchant {
    /// Always `merchant`.
    pub object: MerchantObject,
    /// Service merchant id.
    pub id: i64,
    /// Display name.
    pub name: String,
    /// Legal name.
    pub legal_name: String,
    /// Contact e-mail.
    pub email: String,
    /// Publishable key for the browser script.
    pub public_key: String,
    /// The institution's own reference, set at onboarding.
    pub psp_reference_id: String,
    /// Account status.
    pub status: MerchantStatus,
    /// Onboarding status.
    pub onboarding_status: OnboardingStatus,
    /// Whether crypto payment is enabled.
    pub crypto_enabled: bool,
    /// Whether onboarding is complete.
    pub onboarding_complete: bool,
    /// Creation time.
    pub created_at: String,
}

/// The token response (spec §2.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenResponse {
    /// The bearer token.
    pub access_token: String,
    /// Always `Bearer`.
    pub token_type: String,
    /// Lifetime in seconds.
    pub expires_in: u32,
    /// Granted scopes, space-separated.
    pub scope: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::str::FromStr;

    fn transaction(id: i64) -> Transaction {
        Transaction {
            object: TransactionObject::Transaction,
            id,
            merchant_id: 7,
            status: Status::Paid,
            raw_status: RawStatus::Succeeded,
            amount_status: Some(AmountStatus::Exact),
            asset: Some("USDC".into()),
            currency: Some("EUR".into()),
            amount: Amount {
                gross: Some(Decimal::from_str("12.50").unwrap()),
                expected: Some(Decimal::from_str("12.50").unwrap()),
                ..Amount::default()
            },
            networks: Networks::default(),
            tx_hashes: TxHashes::default(),
            customer_email: None,
            external_reference: Some("order-1".into()),
            created_at: Some("2026-11-21T04:35:27Z".into()),
            paid_at: None,
        }
    }

    #[test]
    fn transaction_has_every_field_with_decimal_strings() {
        let value = serde_json::to_value(transaction(3)).unwrap();
        assert_eq!(value["object"], "transaction");
        assert_eq!(value["amount"]["gross"], "12.50");
        assert_eq!(value["amount"]["net"], serde_json::Value::Null);
        assert_eq!(value["amount_status"], "EXACT");
        for key in [
            "id",
            "merchant_id",
            "status",
            "raw_status",
            "amount_status",
            "asset",
            "currency",
            "amount",
            "networks",
            "tx_hashes",
            "customer_email",
            "external_reference",
            "created_at",
            "paid_at",
        ] {
            assert!(value.get(key).is_some(), "{key} missing");
        }
        assert_eq!(value["tx_hashes"].as_object().unwrap().len(), 3);
        assert_eq!(value["networks"].as_object().unwrap().len(), 2);
        assert_eq!(value["amount"].as_object().unwrap().len(), 6);
    }

    #[test]
    fn overfetch_sets_cursor_only_when_more_exist() {
        let page = List::from_overfetch(vec![9, 8, 7], 2, |id| *id);
        assert!(page.has_more);
        assert_eq!(page.data, vec![9, 8]);
        assert_eq!(page.next_cursor, Some(8));

        let last = List::from_overfetch(vec![9, 8], 2, |id| *id);
        assert!(!last.has_more);
        assert_eq!(last.next_cursor, None);
        assert_eq!(
            serde_json::to_value(&last).unwrap()["object"],
            serde_json::Value::String("list".into())
        );
    }
}
