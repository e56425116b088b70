//! Ethereum JSON-RPC over `fetch`: one request, a deadline, a bounded answer, and a budget. The
//! node's URL may carry a provider key, so no error here ever contains it.
//!
//! **Budgets.** A Worker invocation may make a bounded number of subrequests (Cloudflare's paid
//! plan: 1,000 by default, which is what Payrail is designed for; the free plan's 50 is too few
//! for a cron run that settles), and one slow task must not use them all. So every [`Node`]
//! carries a budget of calls, shared by its clones: a request's reads get [`REQUEST_CALLS`]
//! per network, and each cron task gets its own share (`cron`), so the watcher can never
//! starve settlement or refunds. A call past the budget fails at once with
//! [`RpcError::Budget`], and the tasks check what is left before starting a unit of work they
//! could not finish.

use std::cell::Cell;
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use serde_json::{json, Value};
use worker::{Headers, Method, Request, RequestInit};

use crate::http::{self, FetchFailure};

/// A node must answer within this.
pub const DEADLINE: Duration = Duration::from_secs(5);
/// Largest answer read (a page of logs fits well within it).
pub const MAX_ANSWER: usize = 1024 * 1024;
/// Longest part of a node's refusal message kept (for the log only).
const MAX_MESSAGE: usize = 200;
/// Calls one network's node may take for one request (a status poll, a checkout, a portal
/// page), unless the caller gives it another budget: enough for the largest check of one
/// deposit address (ether's, about 175).
pub const REQUEST_CALLS: u32 = 200;

/// A budget of node calls, shared by every [`Node`] given it (one request's, or one cron
/// task's, on every network).
#[derive(Debug, Clone)]
pub struct Budget(Rc<Cell<u32>>);

impl Budget {
    /// A budget of `calls`.
    pub fn new(calls: u32) -> Budget {
        Budget(Rc::new(Cell::new(calls)))
    }

    /// Calls left.
    pub fn left(&self) -> u32 {
        self.0.get()
    }

    /// Takes one call, if any is left.
    fn take(&self) -> Result<(), RpcError> {
        let left = self.0.get();
        if left == 0 {
            return Err(RpcError::Budget);
        }
        self.0.set(left - 1);
        Ok(())
    }
}

/// One network's JSON-RPC node as one request or task uses it: its URL (never shown) and the
/// budget its calls take from.
#[derive(Clone)]
pub struct Node {
    url: String,
    budget: Budget,
}

impl Node {
    /// The node at `url` with a budget of `calls` of its own.
    pub fn new(url: impl Into<String>, calls: u32) -> Node {
        Node {
            url: url.into(),
            budget: Budget::new(calls),
        }
    }

    /// The same node, taking its calls from `budget`.
    #[must_use]
    pub fn with_budget(&self, budget: &Budget) -> Node {
        Node {
            url: self.url.clone(),
            budget: budget.clone(),
        }
    }

    /// Its URL (a secret: never logged or shown).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Calls left in its budget.
    pub fn calls_left(&self) -> u32 {
        self.budget.left()
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the URL.
        f.debug_struct("Node")
            .field("calls_left", &self.calls_left())
            .finish_non_exhaustive()
    }
}

impl PartialEq for Node {
    fn eq(&self, other: &Self) -> bool {
        self.url == other.url
    }
}

impl Eq for Node {}

/// Why a JSON-RPC call gave no result. None of them contains the node's URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcError {
    /// The node URL cannot make a request.
    Unusable,
    /// No connection, or it broke.
    Unreachable,
    /// No answer within [`DEADLINE`].
    Timeout,
    /// The answer is larger than the call allows.
    TooLarge,
    /// An HTTP status other than 2xx.
    Status(u16),
    /// A JSON-RPC error answer: its code, and its message (the node's words: logged, never
    /// shown).
    Refused {
        /// The JSON-RPC error code.
        code: i64,
        /// The node's message, at most 200 characters.
        message: String,
    },
    /// Not a JSON-RPC answer: what is wrong with it.
    Malformed(&'static str),
    /// The calls this request or task may make are spent (nothing was asked).
    Budget,
}

impl RpcError {
    /// The rendering that may be shown outside: a refusal is named, the node's words are not.
    pub fn public(&self) -> String {
        match self {
            RpcError::Refused { .. } => "the node refused a request".to_owned(),
            other => other.to_string(),
        }
    }

    /// Whether asking for less (fewer blocks of logs) may succeed: the answer was too large, or
    /// the node refused the range (providers word their limits differently, so any refusal).
    pub fn ask_less(&self) -> bool {
        matches!(self, RpcError::TooLarge | RpcError::Refused { .. })
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RpcError::Unusable => f.write_str("the node URL is not usable"),
            RpcError::Unreachable => f.write_str("the node is unreachable"),
            RpcError::Timeout => {
                write!(f, "the node did not answer within {} s", DEADLINE.as_secs())
            }
            RpcError::TooLarge => f.write_str("the node's answer is too large"),
            RpcError::Status(status) => write!(f, "the node answered HTTP {status}"),
            RpcError::Refused { code, message } => {
                write!(f, "the node refused ({code}): {message}")
            }
            RpcError::Malformed(what) => write!(f, "the node's answer {what}"),
            RpcError::Budget => f.write_str("the node calls this run may make are spent"),
        }
    }
}

/// Calls `method` with `params`; the result, or why there is none.
pub async fn call(node: &Node, method: &str, params: Value) -> Result<Value, RpcError> {
    call_capped(node, method, params, MAX_ANSWER).await
}

/// The same, reading at most `max` bytes of answer (logs of a crowded block need more than
/// [`MAX_ANSWER`]).
pub async fn call_capped(
    node: &Node,
    method: &str,
    params: Value,
    max: usize,
) -> Result<Value, RpcError> {
    node.budget.take()?;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let headers = Headers::new();
    headers
        .set("Content-Type", "application/json")
        .map_err(|_| RpcError::Unusable)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(body.to_string().into()));
    let request = Request::new_with_init(node.url(), &init).map_err(|_| RpcError::Unusable)?;
    let (status, bytes) = match http::fetch(request, DEADLINE, max + 1).await {
        Ok(answer) => answer,
        Err(FetchFailure::Unreachable) => return Err(RpcError::Unreachable),
        Err(FetchFailure::Timeout) => return Err(RpcError::Timeout),
    };
    if bytes.len() > max {
        return Err(RpcError::TooLarge);
    }
    if !(200..300).contains(&status) {
        return Err(RpcError::Status(status));
    }
    answer(&bytes)
}

/// The `result` of a JSON-RPC answer, or its error. Pure.
pub fn answer(bytes: &[u8]) -> Result<Value, RpcError> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|_| RpcError::Malformed("is not JSON"))?;
    if let Some(error) = value.get("error") {
        let message = error["message"].as_str().unwrap_or("no message");
        return Err(RpcError::Refused {
            code: error["code"].as_i64().unwrap_or(0),
            message: message.chars().take(MAX_MESSAGE).collect(),
        });
    }
    value
        .get("result")
        .cloned()
        .ok_or(RpcError::Malformed("has no result"))
}

/// The node's newest block number (`eth_blockNumber`).
pub async fn head(node: &Node) -> Result<u64, RpcError> {
    quantity(&call(node, "eth_blockNumber", serde_json::json!([])).await?)
}

/// A JSON-RPC quantity (`"0x1a"`) as a number. Pure.
pub fn quantity(value: &Value) -> Result<u64, RpcError> {
    value
        .as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .filter(|hex| !hex.is_empty() && hex.len() <= 16)
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .ok_or(RpcError::Malformed("is not a quantity"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_and_quantities() {
        assert_eq!(
            answer(br#"{"jsonrpc":"2.0","id":1,"result":"0x1b4"}"#).unwrap(),
            json!("0x1b4")
        );
        assert_eq!(quantity(&json!("0x1b4")).unwrap(), 436);
        assert_eq!(quantity(&json!("0x0")).unwrap(), 0);
        for bad in [
            json!("1b4"),
            json!("0x"),
            json!(12),
            json!("0x1ffffffffffffffff"),
        ] {
            assert!(quantity(&bad).is_err(), "{bad}");
        }
        let refused = answer(
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no such method"}}"#,
        )
        .unwrap_err();
        assert_eq!(
            refused,
            RpcError::Refused {
                code: -32601,
                message: "no such method".into()
            }
        );
        assert_eq!(refused.public(), "the node refused a request");
        assert!(refused.ask_less() && RpcError::TooLarge.ask_less());
        assert!(!RpcError::Timeout.ask_less());
    }

    #[test]
    fn a_budget_is_shared_by_its_nodes_and_refuses_past_its_end() {
        let node = Node::new("https://node.example/KEY", 5);
        let budget = Budget::new(2);
        let (a, b) = (node.with_budget(&budget), node.with_budget(&budget));
        assert!(a.budget.take().is_ok());
        assert!(b.budget.take().is_ok());
        assert_eq!(a.budget.take(), Err(RpcError::Budget));
        assert_eq!(
            (b.calls_left(), budget.left(), node.calls_left()),
            (0, 0, 5)
        );
        assert!(
            !format!("{node:?}").contains("KEY"),
            "the URL is never shown"
        );
        assert!(answer(b"<html>").is_err());
        assert!(answer(br#"{"jsonrpc":"2.0","id":1}"#).is_err());
    }
}
