//! `xtask float-move` and `xtask float-moves`: the operator moves the treasury's USDC between
//! networks with CCTP, and reads the moves, through the worker's operator API (`POST` and `GET
//! /operator/float-moves[/{id}]`, the operator's token from `PAYRAIL_OPERATOR_TOKEN`). The worker
//! refuses a move that would leave the source's treasury below what its settlements owe, and a
//! repeat of a reference answers the move it already made (docs/OPERATIONS.md, "Moving float").

use serde_json::{json, Value};

use crate::sdn::{agent, endpoint, printable, refusal};

/// A move to ask for.
pub struct Ask<'a> {
    /// The network the USDC leaves.
    pub from: &'a str,
    /// The network it arrives on.
    pub to: &'a str,
    /// USDC, decimal text.
    pub amount: &'a str,
    /// The operator's reference: the same again is the same move.
    pub reference: &'a str,
    /// Who asks.
    pub requested_by: Option<&'a str>,
}

/// Asks the worker at `base_url` for the move `ask`: the move it made (or, for a reference
/// already used, the one it had made), and whether this request made it.
pub fn make(base_url: &str, token: &str, ask: &Ask<'_>) -> Result<(Value, bool), String> {
    let url = endpoint(base_url, "/operator/float-moves");
    let mut body = json!({
        "from": ask.from, "to": ask.to, "amount": ask.amount, "reference": ask.reference,
    });
    if let Some(who) = ask.requested_by {
        body["requested_by"] = json!(who);
    }
    match agent()
        .post(&url)
        .set("Authorization", &format!("Bearer {token}"))
        .send_json(body)
    {
        Ok(response) => {
            let made = response.status() == 201;
            let answer: Value = response
                .into_json()
                .map_err(|e| format!("{url}: the answer is not JSON: {e}"))?;
            Ok((answer, made))
        }
        Err(ureq::Error::Status(status, response)) => Err(refusal("the move", status, response)),
        // Names the URL (never the token).
        Err(e) => Err(e.to_string()),
    }
}

/// The moves the worker at `base_url` lists, newest first (at most 100), or the one `id`.
pub fn read(base_url: &str, token: &str, id: Option<&str>) -> Result<Vec<Value>, String> {
    let path = match id {
        Some(id) => format!("/operator/float-moves/{id}"),
        None => "/operator/float-moves".to_owned(),
    };
    let url = endpoint(base_url, &path);
    match agent()
        .get(&url)
        .set("Authorization", &format!("Bearer {token}"))
        .call()
    {
        Ok(response) => {
            let answer: Value = response
                .into_json()
                .map_err(|e| format!("{url}: the answer is not JSON: {e}"))?;
            Ok(match id {
                Some(_) => vec![answer],
                None => answer["data"].as_array().cloned().unwrap_or_default(),
            })
        }
        Err(ureq::Error::Status(status, response)) => {
            Err(refusal("the read of float moves", status, response))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// `moves` as lines: id, state, amount and route, fee, reference, then why one waits.
pub fn table(moves: &[Value]) -> String {
    let text = |v: &Value| printable(v.as_str().unwrap_or("-"));
    let mut out = String::new();
    for m in moves {
        out.push_str(&format!(
            "{}  {:<9}  {} USDC {} -> {}  fee {}  ref {}  {}\n",
            text(&m["id"]),
            text(&m["state"]),
            text(&m["amount"]),
            text(&m["from"]),
            text(&m["to"]),
            m["fee"].as_str().map_or_else(|| "-".to_owned(), printable),
            text(&m["reference"]),
            text(&m["created_at"]),
        ));
        if let Some(note) = m["note"].as_str() {
            out.push_str(&format!("    waits: {}\n", printable(note)));
        }
    }
    out.push_str(&format!("{} move(s)\n", moves.len()));
    out
}
