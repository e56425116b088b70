//! The parts of payments made on chain: the money confirmed in each way to pay (an asset on a
//! network) a payment received, written once with its credit. Each part is settled and
//! refunded in its own asset, at its own rate. See migration 0029.

use payrail_evm::Token;
use shared_types::ids::Scoped;

/// What a payment found on chain brought into custody in one way to pay (a part): the books
/// credit it to the merchant, and it is settled and refunded in its own asset.
#[derive(Debug, Clone)]
pub struct Part<'a> {
    /// The network.
    pub network: &'a str,
    /// The asset.
    pub asset: &'a str,
    /// Its token contract or `native`.
    pub token: Token,
    /// The asset's decimals.
    pub decimals: u32,
    /// Its share of the gross, in the order currency.
    pub gross: rust_decimal::Decimal,
    /// The rate it settles and refunds at: `.0` of the order currency is worth `.1` of the
    /// asset.
    pub rate: (rust_decimal::Decimal, rust_decimal::Decimal),
    /// Where that rate came from when it is not the quote.
    pub rate_source: Option<&'a str>,
    /// The base units confirmed at each of its deposit addresses (lower case).
    pub received: Vec<(&'a str, u128)>,
}

use super::{stmt, DbResult, Stmt};

/// The statement recording part `index` of payment `id` (of `institution_id`), written only if
/// the payment's guarded change to `version` applied in the same batch (a credit that lost its
/// race records nothing).
pub fn insert(
    (
        Scoped {
            institution: institution_id,
            id,
        },
        version,
    ): (Scoped<i64>, i64),
    index: usize,
    part: &Part<'_>,
) -> DbResult<Stmt> {
    stmt(
        "INSERT INTO payment_parts (institution_id, transaction_id, part, network, asset, token, \
         decimals, gross, expected, crypto_amount, rate_source) \
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11 \
         WHERE (SELECT version FROM transactions WHERE id = ?2 AND institution_id = ?1) = ?12",
        &[
            institution_id.into(),
            id.into(),
            i64::try_from(index).unwrap_or(i64::MAX).into(),
            part.network.into(),
            part.asset.into(),
            part.token.into(),
            i64::from(part.decimals).into(),
            part.gross.to_string().into(),
            part.rate.0.to_string().into(),
            part.rate.1.to_string().into(),
            part.rate_source.into(),
            version.into(),
        ],
    )
}
