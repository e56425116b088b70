//! The payments list's search box: one text that finds a payment by its id, its external
//! reference, a transaction hash (the customer's, the settlement's, or any transfer seen to its
//! deposit address) or a deposit address. Exact matches only, as Stripe's and BTCPay's id
//! searches are: every key is an index search, scoped to the session's institution in the same
//! statement, so another institution's payment is never found. And the list's merchant names:
//! a page's merchants by id, and the choices of its merchant filter.

use std::collections::{BTreeMap, BTreeSet};

use shared_types::Transaction;

use super::Portal;
use crate::db::merchants;
use crate::db::transactions::{self, SearchKeys, SEARCH_MAX};
use crate::error::{ApiError, OrInternal};
use crate::query::{parse_id, MAX_REFERENCE_LEN};

/// A payment found, and by which key.
#[derive(Debug)]
pub struct Hit {
    /// The payment.
    pub transaction: Transaction,
    /// `id`, `external_reference`, `tx_hash` or `deposit_address`.
    pub key: String,
}

/// What a search found.
#[derive(Debug)]
pub struct Found {
    /// The text searched for, trimmed.
    pub text: String,
    /// The payments, newest first, at most [`SEARCH_MAX`].
    pub hits: Vec<Hit>,
    /// More matched than are shown.
    pub more: bool,
}

/// How a typed text is compared with what is stored: EVM hex (`0x…`: hashes and addresses are
/// stored lower-case) in lower case, anything else as typed. Pure.
pub fn chain_key(text: &str) -> String {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            format!("0x{}", hex.to_ascii_lowercase())
        }
        _ => text.to_owned(),
    }
}

/// Checks the typed text: trimmed, not empty, at most 255 characters. Pure.
pub fn check(text: &str) -> Result<&str, ApiError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ApiError::invalid_request(
            "q must be a payment id, an external reference, a transaction hash or a deposit address",
        ));
    }
    if text.chars().count() > MAX_REFERENCE_LEN {
        return Err(ApiError::invalid_request(format!(
            "q is at most {MAX_REFERENCE_LEN} characters"
        )));
    }
    Ok(text)
}

/// Finds the institution's payments matching `text` exactly by any of the four keys.
pub async fn search(portal: &Portal<'_>, text: &str) -> Result<Found, ApiError> {
    let text = check(text)?;
    let chain = chain_key(text);
    let keys = SearchKeys {
        id: parse_id(text),
        reference: text,
        chain: &chain,
    };
    let mut found = transactions::search(portal.money(), portal.institution_id(), &keys)
        .await
        .or_internal("search payments")?;
    let more = found.len() as i64 > SEARCH_MAX;
    found.truncate(SEARCH_MAX as usize);
    let ids: Vec<i64> = found.iter().map(|f| f.id).collect();
    let rows = transactions::of_ids(portal.money(), portal.institution_id(), &ids)
        .await
        .or_internal("read payments")?;
    let hits = rows
        .into_iter()
        .map(|transaction| {
            let key = found
                .iter()
                .find(|f| f.id == transaction.id)
                .map(|f| f.key.clone())
                .unwrap_or_default();
            Hit { transaction, key }
        })
        .collect();
    Ok(Found {
        text: text.to_owned(),
        hits,
        more,
    })
}

/// The names of the page's merchants, by id (a merchant of another institution has none).
pub async fn merchant_names(
    portal: &Portal<'_>,
    ids: impl IntoIterator<Item = i64>,
) -> Result<BTreeMap<i64, String>, ApiError> {
    let ids: BTreeSet<i64> = ids.into_iter().collect();
    let ids: Vec<i64> = ids.into_iter().collect();
    let mut names = BTreeMap::new();
    // D1 binds at most 100 parameters a statement.
    for chunk in ids.chunks(50) {
        for n in merchants::names(portal.db(), portal.institution_id(), chunk)
            .await
            .or_internal("read merchant names")?
        {
            names.insert(n.id, n.name);
        }
    }
    Ok(names)
}

/// Most merchants the filter offers as a list; beyond, it takes an id.
pub const MERCHANT_CHOICES: u32 = 100;

/// The merchant filter's choices (id and name, by name), or `None` when the institution has
/// more than [`MERCHANT_CHOICES`] merchants.
pub async fn merchant_choices(portal: &Portal<'_>) -> Result<Option<Vec<(i64, String)>>, ApiError> {
    let rows = merchants::portal_page(
        portal.db(),
        portal.institution_id(),
        None,
        None,
        MERCHANT_CHOICES,
    )
    .await
    .or_internal("list merchants")?;
    if rows.len() > MERCHANT_CHOICES as usize {
        return Ok(None);
    }
    let mut choices: Vec<(i64, String)> = rows.into_iter().map(|r| (r.id, r.name)).collect();
    choices.sort_by(|a, b| {
        a.1.to_lowercase()
            .cmp(&b.1.to_lowercase())
            .then(a.0.cmp(&b.0))
    });
    Ok(Some(choices))
}

#[cfg(test)]
mod tests {
    use super::{chain_key, check};

    #[test]
    fn evm_hex_is_compared_in_lower_case_and_anything_else_as_typed() {
        assert_eq!(chain_key("0xABcd12"), "0xabcd12");
        assert_eq!(chain_key("0XAB"), "0xab");
        assert_eq!(chain_key("ORD-0xAB"), "ORD-0xAB");
        assert_eq!(chain_key("0xZZ"), "0xZZ");
        assert_eq!(chain_key("TXyz"), "TXyz");
    }

    #[test]
    fn the_text_is_bounded() {
        assert_eq!(check("  abc ").unwrap(), "abc");
        assert!(check("   ").is_err());
        assert!(check(&"x".repeat(255)).is_ok());
        let long = check(&"x".repeat(256)).unwrap_err();
        assert!(long.description.contains("255"), "{}", long.description);
    }
}
