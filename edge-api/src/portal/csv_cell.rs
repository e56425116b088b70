//! Cells of the portal's CSV exports (payments, balance statements, screening), written so a
//! spreadsheet never runs one.

/// A text cell a spreadsheet will not run: one that starts with `=`, `+`, `-`, `@`, a tab or a
/// carriage return (a formula, or what a spreadsheet reads as one) gets a leading `'`, as
/// OWASP's CSV injection guidance says. Customers and merchants write some of these fields
/// (`external_reference`, `customer_email`). Pure.
pub fn cell(text: &str) -> String {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{text}")
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::cell;

    #[test]
    fn a_cell_that_a_spreadsheet_would_run_is_neutralised() {
        for formula in [
            "=HYPERLINK(\"https://x.example\")",
            "+1",
            "-2+3",
            "@SUM(A1)",
            "\tx",
            "\rx",
        ] {
            assert_eq!(cell(formula), format!("'{formula}"));
        }
        for plain in ["ORD-1001", "a@b.example", "12.50", ""] {
            assert_eq!(cell(plain), plain);
        }
    }
}
