//! What the user sees: lists as tables or `--json`, single items as JSON, and failures as an
//! `error:` line with the exit code they end the command with.

use std::io::Write;

use serde::Serialize;

use crate::Io;

/// A failure, with the exit code it ends the command with: 1 when the operation failed, 2 when
/// what was asked or configured is wrong.
pub(crate) struct Failure {
    message: String,
    code: i32,
}

impl Failure {
    /// An operation that failed (exit code 1).
    pub(crate) fn failed(message: String) -> Self {
        Failure { message, code: 1 }
    }

    /// An API error, with `hint` (empty, or a line starting `\nhint: `) after it (exit code 1).
    pub(crate) fn api(err: payrail::Error, hint: &str) -> Self {
        Failure::failed(format!("{err}{hint}"))
    }

    /// Nothing with that id in the client's institution (exit code 1).
    pub(crate) fn not_found(what: &str, id: i64) -> Self {
        Failure::failed(format!("no {what} {id} in your institution"))
    }

    /// Prints the failure; answers the exit code.
    pub(crate) fn show(self, io: &mut Io) -> i32 {
        let _ = writeln!(io.err, "error: {}", self.message);
        self.code
    }
}

impl From<payrail::Error> for Failure {
    fn from(err: payrail::Error) -> Self {
        // A bad base URL is the command line's or the configuration's (exit code 2).
        if matches!(err, payrail::Error::Config(_)) {
            return Failure::from(err.to_string());
        }
        let hint = match err.code() {
            Some("insufficient_scope") => {
                "\nhint: give the client the scope this needs in the portal (Developers → API clients)"
            }
            Some("invalid_client") => "\nhint: check the client id and secret (payrail configure)",
            _ => "",
        };
        Failure::api(err, hint)
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure { message, code: 2 }
    }
}

impl From<std::io::Error> for Failure {
    fn from(err: std::io::Error) -> Self {
        Failure::failed(err.to_string())
    }
}

/// How a command ends.
pub(crate) type Outcome = Result<(), Failure>;

/// Prints `items` as JSON (an array) when `json`, else as a table under `header`, one `row` an
/// item.
pub(crate) fn print_list<T: Serialize>(
    io: &mut Io,
    json: bool,
    items: &[T],
    header: &[&str],
    row: impl Fn(&T) -> Vec<String>,
) -> Outcome {
    if json {
        return print_one(io, &items);
    }
    if items.is_empty() {
        writeln!(io.err, "Nothing found.")?;
        return Ok(());
    }
    let rows: Vec<Vec<String>> = items.iter().map(row).collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let head: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    writeln!(io.out, "{}", line(&head))?;
    for r in &rows {
        writeln!(io.out, "{}", line(r))?;
    }
    Ok(())
}

/// Prints `item` as JSON.
pub(crate) fn print_one<T: Serialize>(io: &mut Io, item: &T) -> Outcome {
    serde_json::to_writer_pretty(&mut io.out, item).map_err(|e| Failure::from(e.to_string()))?;
    writeln!(io.out)?;
    Ok(())
}

/// A table cell: the value, or `-` when there is none.
pub(crate) fn cell(value: Option<impl ToString>) -> String {
    value
        .map(|v| v.to_string())
        .unwrap_or_else(|| "-".to_owned())
}
