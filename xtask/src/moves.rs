//! `xtask move`: moves institutions' money from the single D1 into their own objects, one at a
//! time, through the worker's operator API (`POST /operator/institutions/{id}/move`, the
//! operator's token from `PAYRAIL_OPERATOR_TOKEN`): the worker freezes the institution while it
//! moves (new checkouts and its other writes answer 503 with `Retry-After`), copies and compares
//! every table, carries its books and points the directory at the object. A move larger than one
//! request answers 202 with how far it came: the command calls again, and each call goes on from
//! where the last stopped (after a failed call too: the move loses nothing). The same code moves
//! a local deployment (`scripts/dev`'s worker) and production (its URL).

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
        let (status, report) = go_on(&agent, &url, token, institution, out)?;
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

/// Most calls one institution's move makes (each goes on with it, or waits its turn).
const CALLS_MAX: usize = 100_000;

/// Most calls in a row that fail or wait before the command gives up (the move stays paused
/// until the worker's cron gives it up, or the command is run again).
const FAILURES_MAX: u32 = 10;

/// Calls the move at `url` until it ends: moved, or refused with its report. A 202 goes on at
/// once (a line of progress to `out`); a call that failed, or was told to wait (`Retry-After`),
/// is made again after a pause. The last answer: its status and body.
fn go_on(
    agent: &ureq::Agent,
    url: &str,
    token: &str,
    institution: i64,
    out: &mut impl Write,
) -> Result<(u16, Value), String> {
    let mut failures = 0;
    for _ in 0..CALLS_MAX {
        let answer = agent
            .post(url)
            .set("Authorization", &format!("Bearer {token}"))
            .call();
        let (status, wait, report): (u16, Option<u64>, Value) = match answer {
            Ok(response) => (
                response.status(),
                None,
                response.into_json().map_err(|e| e.to_string())?,
            ),
            Err(ureq::Error::Status(status, response)) => {
                let wait = response
                    .header("Retry-After")
                    .and_then(|v| v.trim().parse().ok());
                (status, wait, response.into_json().unwrap_or(Value::Null))
            }
            Err(e) => {
                failures += 1;
                if failures >= FAILURES_MAX {
                    return Err(format!("institution {institution}: {e}"));
                }
                std::thread::sleep(Duration::from_secs(2));
                continue;
            }
        };
        if status == 202 {
            failures = 0;
            let progress = &report["progress"];
            writeln!(
                out,
                "institution {institution}: moving ({} rows copied, {} of {} tables)",
                progress["rows_copied"], progress["tables_copied"], progress["tables"]
            )
            .map_err(|e| e.to_string())?;
            continue;
        }
        // Told to wait (another call of the move is going on), or failed on the way: the move
        // is paused and loses nothing, so the command calls again.
        let again = wait.is_some() || status >= 500;
        if again && report.get("moved").is_none() {
            failures += 1;
            if failures < FAILURES_MAX {
                std::thread::sleep(Duration::from_secs(wait.unwrap_or(2).min(60)));
                continue;
            }
        }
        return Ok((status, report));
    }
    Err(format!(
        "institution {institution}: still moving after {CALLS_MAX} calls"
    ))
}
