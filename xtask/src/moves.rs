//! `xtask move`: moves institutions' money from the single D1 into their own objects, one at a
//! time, through the worker's operator API (`POST /operator/institutions/{id}/move`, the
//! operator's token from `PAYRAIL_OPERATOR_TOKEN`): the worker freezes the institution for the
//! move's seconds (new checkouts and its other writes answer 503 with `Retry-After`), copies and
//! compares every table, carries its books and points the directory at the object. The same
//! code moves a local deployment (`scripts/dev`'s worker) and production (its URL).

use std::io::Write;
use std::time::Duration;

use serde_json::Value;

/// One move's outcome as the worker reported it.
#[derive(Debug)]
pub struct Moved {
    /// The institution.
    pub institution: i64,
    /// Whether the directory now holds it in its object.
    pub moved: bool,
    /// The worker's report (what was copied and carried, or why it did not move).
    pub report: Value,
}

/// Moves each of `institutions` in turn at the worker `base_url` with the operator's `token`,
/// writing a line per move to `out`; stops at the first that does not move (it works from D1 as
/// before: the line says why). The moves made, in order.
pub fn run(
    base_url: &str,
    token: &str,
    institutions: &[i64],
    out: &mut impl Write,
) -> Result<Vec<Moved>, String> {
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(120))
        .build();
    let mut done = Vec::new();
    for &institution in institutions {
        let url = format!(
            "{}/operator/institutions/{institution}/move",
            base_url.trim_end_matches('/')
        );
        let answer = agent
            .post(&url)
            .set("Authorization", &format!("Bearer {token}"))
            .call();
        let (status, report): (u16, Value) = match answer {
            Ok(response) => (
                response.status(),
                response.into_json().map_err(|e| e.to_string())?,
            ),
            Err(ureq::Error::Status(status, response)) => {
                (status, response.into_json().unwrap_or(Value::Null))
            }
            Err(e) => return Err(format!("institution {institution}: {e}")),
        };
        let moved = status == 200 && report["moved"] == Value::Bool(true);
        let line = if moved {
            format!(
                "institution {institution}: moved ({} accounts carried)",
                report["accounts"].as_array().map_or(0, Vec::len)
            )
        } else {
            let why = report["reason"]
                .as_str()
                .or_else(|| report["error_description"].as_str())
                .unwrap_or("no reason given");
            format!("institution {institution}: not moved ({status}): {why}")
        };
        writeln!(out, "{line}").map_err(|e| e.to_string())?;
        done.push(Moved {
            institution,
            moved,
            report,
        });
        if !moved {
            break;
        }
    }
    Ok(done)
}
