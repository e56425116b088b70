//! The treasury: the hot wallet settlements and refunds are paid from, and what paying from it
//! takes on an EVM chain — its key (sealed in `PAYRAIL_TREASURY_KEY`, opened only to sign), the
//! price per gas, the gas a transfer needs, balances and signing a transfer. Used by
//! [`super::sends`], which stores, broadcasts and follows what is signed here.

use k256::ecdsa::SigningKey;
use payrail_evm::{Address, Token};
use serde_json::json;

use crate::chain::config::Network;
use crate::chain::error::{ChainError, ChainResult};
use crate::chain::rpc::Node;
use crate::chain::{evm, native, rpc, tx};
use crate::crypto;
use crate::ctx::Ctx;
use crate::db::sends::Call;
use crate::error::ApiError;

/// The treasury: the hot wallet settlements and refunds are paid from.
pub struct Treasury {
    key: SigningKey,
    /// Its address, lower case.
    pub address: String,
}

/// The treasury, when `PAYRAIL_TREASURY_KEY` is configured. The key is opened with the
/// encryption key; no error names or shows it.
pub fn treasury(ctx: &Ctx) -> Result<Option<Treasury>, ApiError> {
    let Some(sealed) = ctx.treasury_key() else {
        return Ok(None);
    };
    let opened = crypto::open(
        &ctx.sealing_key()?,
        payrail_credentials::sealed::TREASURY_KEY_CONTEXT,
        &sealed,
    )
    .map_err(|_| {
        ApiError::internal(
            "PAYRAIL_TREASURY_KEY",
            "cannot be opened with PAYRAIL_ENCRYPTION_KEY (seal it with xtask seal-treasury-key)",
        )
    })?;
    let key = tx::parse_key(&opened)
        .map_err(|e| ApiError::internal("PAYRAIL_TREASURY_KEY", e.to_string()))?;
    let address = tx::address_of(key.verifying_key());
    Ok(Some(Treasury { key, address }))
}

/// The price per gas to sign with now: 5/4 of the newest block's base fee (room for two blocks
/// of its rise) plus the node's suggested tip; fixed (max fee = tip), so it is what is paid.
pub async fn gas_price(node: &Node) -> ChainResult<u128> {
    let block = rpc::call(node, "eth_getBlockByNumber", json!(["latest", false])).await?;
    let base = native::wei(&block["baseFeePerGas"])
        .ok_or_else(|| ChainError::answer("the node's block has no base fee"))?;
    let tip = native::wei(&rpc::call(node, "eth_maxPriorityFeePerGas", json!([])).await?)
        .ok_or_else(|| ChainError::answer("the node's tip is not a quantity"))?;
    base.checked_add(base / 4)
        .and_then(|p| p.checked_add(tip))
        .ok_or_else(|| ChainError::answer("the node's fees are out of range"))
}

/// The most L1 data fee one of the treasury's transfers pays on `network` besides its gas, in
/// wei: nothing where the network names no L1 fee oracle; on an OP Stack chain (Base), the
/// `GasPriceOracle`'s `getL1FeeUpperBound` for the widest transfer the treasury signs. Reserved
/// and counted in flight with the gas; the receipt's `l1Fee` is what was paid.
pub async fn l1_fee_bound(network: &Network) -> ChainResult<u128> {
    let Some(oracle) = &network.l1_fee_oracle else {
        return Ok(0);
    };
    let call = json!({
        "to": oracle,
        "data": payrail_evm::l1_fee_upper_bound_call(payrail_evm::max_transfer_bytes()),
    });
    let word = rpc::call(&network.node, "eth_call", json!([call, "latest"])).await?;
    evm::uint(&word).ok_or_else(|| ChainError::answer("the L1 fee oracle's answer is unreadable"))
}

/// What the gas of a transaction of `gas` at `price` and its L1 data fee (`l1_fee`) cost at
/// most, in wei; `None` past 128 bits (an absurd answer, refused by the caller).
pub fn most_fee(gas: u64, price: u128, l1_fee: u128) -> Option<u128> {
    u128::from(gas).checked_mul(price)?.checked_add(l1_fee)
}

/// What a mined transaction paid for its gas and L1 data fee, in wei, from its `receipt`: gas
/// used at the receipt's effective price (`signed_price` when a node does not give it), plus
/// the receipt's `l1Fee` on an OP Stack chain.
pub fn fee_paid(receipt: &serde_json::Value, signed_price: u128) -> ChainResult<u128> {
    let gas_used = native::wei(&receipt["gasUsed"])
        .ok_or_else(|| ChainError::answer("the receipt's gasUsed is not a quantity"))?;
    let price = match &receipt["effectiveGasPrice"] {
        serde_json::Value::Null => signed_price,
        price => native::wei(price).ok_or_else(|| {
            ChainError::answer("the receipt's effectiveGasPrice is not a quantity")
        })?,
    };
    let l1_fee = l1_fee_paid(receipt)?;
    gas_used
        .checked_mul(price)
        .and_then(|gas| gas.checked_add(l1_fee))
        .ok_or_else(|| ChainError::answer("the receipt's fees are out of range"))
}

/// The L1 data fee a mined transaction paid besides its gas: its receipt's `l1Fee` on an OP
/// Stack chain, nothing where a receipt has none.
pub fn l1_fee_paid(receipt: &serde_json::Value) -> ChainResult<u128> {
    native::l1_fee_paid(receipt)
}

/// The call paying `units` of the settlement's asset to `to`: (receiver, value, data).
fn payment_call(token: Token, to: Address, units: u128) -> ([u8; 20], u128, String) {
    match token {
        Token::Native => (to.0, units, "0x".to_owned()),
        Token::Erc20(contract) => (contract.0, 0, evm::transfer_call(&to.lower(), units)),
    }
}

/// The gas the treasury's transfer of `units` of `token` to `to` needs now.
pub async fn estimate(
    node: &Node,
    from: &str,
    token: Token,
    to: Address,
    units: u128,
) -> ChainResult<u64> {
    let (receiver, value, data) = payment_call(token, to, units);
    let call = json!({
        "from": from,
        "to": format!("0x{}", hex::encode(receiver)),
        "value": format!("{value:#x}"),
        "data": data,
    });
    Ok(rpc::quantity(
        &rpc::call(node, "eth_estimateGas", json!([call])).await?,
    )?)
}

/// The treasury's balance of the asset (`token`, or the coin) on the node.
pub async fn balance(node: &Node, owner: &str, token: Token) -> ChainResult<u128> {
    match token {
        Token::Native => {
            let answer = rpc::call(node, "eth_getBalance", json!([owner, "latest"])).await?;
            native::wei(&answer)
                .ok_or_else(|| ChainError::answer("the node's balance is not a quantity"))
        }
        Token::Erc20(contract) => {
            let call = json!({"to": contract.lower(), "data": evm::balance_of_call(owner)});
            let word = rpc::call(node, "eth_call", json!([call, "latest"])).await?;
            evm::uint(&word).ok_or_else(|| ChainError::answer("the token's balance is unreadable"))
        }
    }
}

/// Signs the transfer of `units` at `price` with `nonce`.
pub fn sign(
    treasury: &Treasury,
    network: &Network,
    (token, wallet): (Token, Address),
    (nonce, gas_limit, price): (u64, u64, u128),
    units: u128,
) -> ChainResult<tx::Signed> {
    let (to, value, data) = payment_call(token, wallet, units);
    sign_raw(
        treasury,
        network,
        (to, value, &data),
        (nonce, gas_limit, price),
    )
}

/// Signs the contract call `call` (a bridge's leg) at `price` with `nonce`.
pub fn sign_call(
    treasury: &Treasury,
    network: &Network,
    call: Call<'_>,
    (nonce, gas_limit, price): (u64, u64, u128),
) -> ChainResult<tx::Signed> {
    let to = Address::parse(call.to)
        .map_err(|_| ChainError::answer("a stored contract is not an address"))?;
    sign_raw(
        treasury,
        network,
        (to.0, 0, call.data),
        (nonce, gas_limit, price),
    )
}

fn sign_raw(
    treasury: &Treasury,
    network: &Network,
    (to, value, data): ([u8; 20], u128, &str),
    (nonce, gas_limit, price): (u64, u64, u128),
) -> ChainResult<tx::Signed> {
    if price > network.max_gas_price() {
        return Err(ChainError::rule(format!(
            "{} gwei per gas is above the network's cap of {} gwei",
            price / crate::chain::config::WEI_PER_GWEI,
            network.max_gas_price_gwei
        )));
    }
    let data = hex::decode(data.trim_start_matches("0x"))
        .map_err(|_| ChainError::answer("the call data is not hex"))?;
    let transaction = tx::Eip1559 {
        chain_id: network.chain_id,
        nonce,
        max_priority_fee_per_gas: price,
        max_fee_per_gas: price,
        gas_limit,
        to,
        value,
        data,
    };
    tx::sign(&transaction, &treasury.key)
}

/// The gas the treasury's contract call `call` needs now (the node runs it: a call that would
/// revert is refused here, with the node's reason).
pub async fn estimate_call(node: &Node, from: &str, call: Call<'_>) -> ChainResult<u64> {
    let call = json!({"from": from, "to": call.to, "value": "0x0", "data": call.data});
    Ok(rpc::quantity(
        &rpc::call(node, "eth_estimateGas", json!([call])).await?,
    )?)
}

/// How much of `token` `owner` allows `spender` to take (ERC-20 `allowance`); an allowance
/// above 128 bits (the usual unlimited approval) reads as `u128::MAX`.
pub async fn allowance(
    node: &Node,
    token: Address,
    owner: &str,
    spender: &str,
) -> ChainResult<u128> {
    let call = json!({"to": token.lower(), "data": payrail_evm::allowance_call(owner, spender)});
    let word = rpc::call(node, "eth_call", json!([call, "latest"])).await?;
    saturated_word(&word).ok_or_else(|| ChainError::answer("the token's allowance is unreadable"))
}

/// One ABI word (`0x` and 64 hex digits) as a `u128`, `u128::MAX` when it is larger.
fn saturated_word(word: &serde_json::Value) -> Option<u128> {
    let digits = word.as_str()?.strip_prefix("0x")?;
    if digits.len() != 64 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let (high, low) = digits.split_at(32);
    if high.bytes().any(|b| b != b'0') {
        return Some(u128::MAX);
    }
    u128::from_str_radix(low, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::saturated_word;
    use serde_json::json;

    #[test]
    fn an_allowance_word_saturates_above_128_bits_and_refuses_anything_else() {
        let word = |s: String| saturated_word(&json!(s));
        assert_eq!(word(format!("0x{:064x}", 5)), Some(5));
        assert_eq!(word(format!("0x{}", "f".repeat(64))), Some(u128::MAX));
        assert_eq!(word(format!("0x1{}", "0".repeat(63))), Some(u128::MAX));
        assert_eq!(word("0x".to_owned()), None);
        assert_eq!(word(format!("0x{}", "g".repeat(64))), None);
        assert_eq!(word("5".to_owned()), None);
    }
}
