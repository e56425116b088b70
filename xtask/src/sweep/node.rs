//! A network's JSON-RPC node, as the sweep uses it: blocking calls with a deadline. The node's
//! URL may carry a provider key, so no error here contains it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A node must answer within this.
const DEADLINE: Duration = Duration::from_secs(20);

/// One network's node.
pub struct Node {
    name: String,
    url: String,
    agent: ureq::Agent,
}

/// A quantity (`"0x1a"`) as a number.
pub fn quantity(value: &Value) -> Option<u128> {
    value
        .as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .filter(|hex| !hex.is_empty() && hex.len() <= 32)
        .and_then(|hex| u128::from_str_radix(hex, 16).ok())
}

/// A block number as a quantity.
fn block(number: u64) -> String {
    format!("{number:#x}")
}

impl Node {
    /// The node of network `name` at `url`.
    pub fn new(name: &str, url: &str) -> Result<Node, String> {
        let tls = ureq::native_tls::TlsConnector::new()
            .map_err(|e| format!("no TLS for the {name} node: {e}"))?;
        let agent = ureq::AgentBuilder::new()
            .timeout(DEADLINE)
            .tls_connector(Arc::new(tls))
            .build();
        Ok(Node {
            name: name.to_owned(),
            url: url.to_owned(),
            agent,
        })
    }

    /// `method`'s result; an error names the network and the method, never the URL.
    pub fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let at = || format!("the {} node ({method})", self.name);
        let value: Value = self
            .agent
            .post(&self.url)
            .send_json(body)
            .map_err(|e| match e {
                ureq::Error::Status(status, _) => format!("{}: HTTP {status}", at()),
                // The kind only: a transport error's text names the URL.
                ureq::Error::Transport(t) => format!("{}: unreachable ({:?})", at(), t.kind()),
            })?
            .into_json()
            .map_err(|_| format!("{}: the answer is not JSON", at()))?;
        if let Some(error) = value.get("error") {
            let message: String = error["message"]
                .as_str()
                .unwrap_or("no message")
                .chars()
                .take(200)
                .collect();
            return Err(format!("{}: refused: {message}", at()));
        }
        value
            .get("result")
            .cloned()
            .ok_or_else(|| format!("{}: the answer has no result", at()))
    }

    fn number(&self, method: &str, params: Value) -> Result<u128, String> {
        let answer = self.call(method, params)?;
        quantity(&answer).ok_or_else(|| {
            format!(
                "the {} node ({method}): {answer} is not a quantity",
                self.name
            )
        })
    }

    /// The chain id it reports.
    pub fn chain_id(&self) -> Result<u64, String> {
        let id = self.number("eth_chainId", json!([]))?;
        u64::try_from(id).map_err(|_| "the chain id is out of range".to_owned())
    }

    /// Its newest block.
    pub fn head(&self) -> Result<u64, String> {
        let head = self.number("eth_blockNumber", json!([]))?;
        u64::try_from(head).map_err(|_| "the head is out of range".to_owned())
    }

    /// `owner`'s coin at block `at`.
    pub fn coin_balance(&self, owner: &str, at: u64) -> Result<u128, String> {
        self.number("eth_getBalance", json!([owner, block(at)]))
    }

    /// `owner`'s balance of `token` (ERC-20 `balanceOf`) at block `at`.
    pub fn token_balance(&self, token: &str, owner: &str, at: u64) -> Result<u128, String> {
        let call = json!({"to": token, "data": payrail_evm::balance_of_call(owner)});
        self.uint_call(&call, &block(at), &format!("{token}'s balanceOf"))
    }

    /// The most L1 data fee one transfer pays now on an OP Stack chain, by its
    /// `GasPriceOracle` at `oracle` (the worker's bound: the widest transfer it signs).
    pub fn l1_fee_bound(&self, oracle: &str) -> Result<u128, String> {
        let data = payrail_evm::l1_fee_upper_bound_call(payrail_evm::max_transfer_bytes());
        let call = json!({"to": oracle, "data": data});
        self.uint_call(&call, "latest", "the L1 fee oracle")
    }

    /// A call answering one 256-bit word that must fit 128 bits; `what` names it in errors.
    fn uint_call(&self, call: &Value, at: &str, what: &str) -> Result<u128, String> {
        let word = self.call("eth_call", json!([call, at]))?;
        let hex = word
            .as_str()
            .and_then(|s| s.strip_prefix("0x"))
            .unwrap_or("");
        match hex.len() {
            64 if hex[..32].bytes().all(|b| b == b'0') => u128::from_str_radix(&hex[32..], 16)
                .map_err(|_| format!("{what} answered a word that is not a number")),
            _ => Err(format!("{what} answered {word}")),
        }
    }

    /// Transactions `address` has had mined by block `at`: its next nonce there.
    pub fn nonce_at(&self, address: &str, at: u64) -> Result<u64, String> {
        let n = self.number("eth_getTransactionCount", json!([address, block(at)]))?;
        u64::try_from(n).map_err(|_| "a nonce is out of range".to_owned())
    }

    /// Its next nonce counting what the node holds unmined.
    pub fn pending_nonce(&self, address: &str) -> Result<u64, String> {
        let n = self.number("eth_getTransactionCount", json!([address, "pending"]))?;
        u64::try_from(n).map_err(|_| "a nonce is out of range".to_owned())
    }

    /// The price per gas to sign with now, as the worker prices the treasury's (5/4 of the
    /// newest block's base fee plus the node's tip, fixed: max fee = tip), and the least price
    /// still worth signing at (the base fee plus the tip).
    pub fn gas_price(&self) -> Result<(u128, u128), String> {
        let newest = self.call("eth_getBlockByNumber", json!(["latest", false]))?;
        let base = quantity(&newest["baseFeePerGas"])
            .ok_or_else(|| format!("the {} node's block has no base fee", self.name))?;
        let tip = self.number("eth_maxPriorityFeePerGas", json!([]))?;
        let price = base
            .checked_add(base / 4)
            .and_then(|p| p.checked_add(tip))
            .ok_or("the node's fees are out of range")?;
        Ok((price, base.saturating_add(tip)))
    }

    /// The gas `from` sending `value` and `data` to `to` needs now.
    pub fn estimate(&self, from: &str, to: &str, value: u128, data: &str) -> Result<u64, String> {
        let call = json!({"from": from, "to": to, "value": format!("{value:#x}"), "data": data});
        let gas = self.number("eth_estimateGas", json!([call]))?;
        u64::try_from(gas).map_err(|_| "the gas estimate is out of range".to_owned())
    }

    /// Broadcasts signed bytes.
    pub fn send_raw(&self, raw: &str) -> Result<(), String> {
        self.call("eth_sendRawTransaction", json!([raw])).map(drop)
    }

    /// A transaction's receipt, once mined.
    pub fn receipt(&self, hash: &str) -> Result<Option<Value>, String> {
        let receipt = self.call("eth_getTransactionReceipt", json!([hash]))?;
        Ok((!receipt.is_null()).then_some(receipt))
    }

    /// Whether the node has the transaction (mined or waiting).
    pub fn knows(&self, hash: &str) -> Result<bool, String> {
        Ok(!self
            .call("eth_getTransactionByHash", json!([hash]))?
            .is_null())
    }

    /// Waits until `hash` is mined (broadcasting `raw` again whenever the node does not have
    /// it), at most `wait`; its receipt, or `None` when it is still not mined.
    pub fn wait_mined(
        &self,
        hash: &str,
        raw: &str,
        wait: Duration,
    ) -> Result<Option<Value>, String> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(receipt) = self.receipt(hash)? {
                return Ok(Some(receipt));
            }
            if !self.knows(hash)? {
                // Lost (a restarted node), or never broadcast (a signer stopped before): the
                // same bytes again. A refusal is seen at the next look.
                let _ = self.send_raw(raw);
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(quantity(&json!("0x1b4")), Some(436));
        assert_eq!(quantity(&json!("0x")), None);
        assert_eq!(quantity(&json!(12)), None);
        assert_eq!(block(255), "0xff");
    }

    #[test]
    fn an_unreachable_node_is_named_without_its_url() {
        let node = Node::new("polygon", "http://127.0.0.1:1/SECRET-KEY").unwrap();
        let err = node.head().unwrap_err();
        assert!(err.contains("the polygon node"), "{err}");
        assert!(!err.contains("SECRET-KEY"), "{err}");
    }
}
