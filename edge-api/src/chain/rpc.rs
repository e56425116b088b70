//! Ethereum JSON-RPC over `fetch`: one request, a deadline, a bounded answer. The node's URL may
//! carry a provider key, so no error here ever contains it.

use std::time::Duration;

use serde_json::{json, Value};
use worker::{Headers, Method, Request, RequestInit};

use crate::http::{self, FetchFailure};

/// The error of an answer larger than [`MAX_ANSWER`].
pub const TOO_LARGE: &str = "the node's answer is too large";
/// The start of the error of a JSON-RPC error answer.
pub const REFUSED: &str = "the node refused";

/// A node must answer within this.
pub const DEADLINE: Duration = Duration::from_secs(5);
/// Largest answer read (a page of logs fits well within it).
pub const MAX_ANSWER: usize = 1024 * 1024;

/// Calls `method` with `params`; the result, or why there is none.
pub async fn call(url: &str, method: &str, params: Value) -> Result<Value, String> {
    call_capped(url, method, params, MAX_ANSWER).await
}

/// The same, reading at most `max` bytes of answer (logs of a crowded block need more than
/// [`MAX_ANSWER`]).
pub async fn call_capped(
    url: &str,
    method: &str,
    params: Value,
    max: usize,
) -> Result<Value, String> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let headers = Headers::new();
    headers
        .set("Content-Type", "application/json")
        .map_err(|_| "could not build the request".to_owned())?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(body.to_string().into()));
    let request =
        Request::new_with_init(url, &init).map_err(|_| "the node URL is not usable".to_owned())?;
    let (status, bytes) = match http::fetch(request, DEADLINE, max + 1).await {
        Ok(answer) => answer,
        Err(FetchFailure::Unreachable) => return Err("the node is unreachable".to_owned()),
        Err(FetchFailure::Timeout) => {
            return Err(format!(
                "the node did not answer within {} s",
                DEADLINE.as_secs()
            ))
        }
    };
    if bytes.len() > max {
        return Err(TOO_LARGE.to_owned());
    }
    if !(200..300).contains(&status) {
        return Err(format!("the node answered HTTP {status}"));
    }
    answer(&bytes)
}

/// The `result` of a JSON-RPC answer, or its `error.message`. Pure.
pub fn answer(bytes: &[u8]) -> Result<Value, String> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|_| "the node's answer is not JSON".to_owned())?;
    if let Some(error) = value.get("error") {
        let message = error["message"].as_str().unwrap_or("no message");
        let message: String = message.chars().take(200).collect();
        return Err(format!("{REFUSED}: {message}"));
    }
    value
        .get("result")
        .cloned()
        .ok_or_else(|| "the node's answer has no result".to_owned())
}

/// A JSON-RPC quantity (`"0x1a"`) as a number. Pure.
pub fn quantity(value: &Value) -> Result<u64, String> {
    value
        .as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .filter(|hex| !hex.is_empty() && hex.len() <= 16)
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .ok_or_else(|| "the node's answer is not a quantity".to_owned())
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
        assert!(refused.contains("no such method"));
        assert!(answer(b"<html>").is_err());
        assert!(answer(br#"{"jsonrpc":"2.0","id":1}"#).is_err());
    }
}
