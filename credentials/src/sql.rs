//! The statements that change credentials, written once for both callers. The worker binds their
//! numbered placeholders through D1. xtask runs SQL through `wrangler d1 execute --command`,
//! which cannot bind, so it writes the values in as literals with [`render`]; that accepts only
//! values that cannot change a statement's meaning (integers, NULL, and text of a few safe
//! characters) and refuses everything else.

use std::fmt;

/// Replaces a client's secret hash and rotation time. Parameters: `?1` the new secret's
/// [`sha256_hex`](crate::sha256_hex), `?2` now (ISO 8601 UTC text), `?3` the `client_id`, `?4`
/// the institution the client must belong to, or NULL for any (operator commands).
///
/// Run it in one batch with [`REVOKE_CLIENT_TOKENS`], this one first, so no token outlives the
/// old secret.
pub const ROTATE_CLIENT_SECRET: &str = "UPDATE api_clients SET secret_hash = ?1, \
     secret_rotated_at = ?2 WHERE client_id = ?3 AND (?4 IS NULL OR institution_id = ?4)";

/// Deletes every access token issued to a client (on rotation). Parameters: `?1` the
/// `client_id`, `?2` the institution the client must belong to, or NULL for any.
pub const REVOKE_CLIENT_TOKENS: &str = "DELETE FROM access_tokens WHERE client_id IN \
     (SELECT id FROM api_clients WHERE client_id = ?1 AND (?2 IS NULL OR institution_id = ?2))";

/// Adds a portal admin, or nothing if the institution does not exist. Parameters: `?1` the
/// institution id, `?2` the lower-cased e-mail, `?3` the display name, `?4` the password's PHC
/// string ([`hash_password`](crate::hash_password)), `?5` now (ISO 8601 UTC text). A taken
/// e-mail fails the table's UNIQUE constraint.
pub const INSERT_PORTAL_ADMIN: &str = "INSERT INTO portal_admins \
     (institution_id, email, name, password_hash, created_at) \
     SELECT id, ?2, ?3, ?4, ?5 FROM institutions WHERE id = ?1";

/// The punctuation [`render`] accepts in text besides ASCII letters and digits: enough for
/// client ids, hex and PHC strings, e-mail addresses, timestamps and names with spaces, and
/// nothing that can end a string literal or a statement.
pub const SAFE_TEXT_PUNCTUATION: &str = "_-.:@+=,/$ ";

/// A value for [`render`] to write into a statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Literal<'a> {
    /// An integer, written in decimal (negative ones in parentheses).
    Integer(i64),
    /// SQL NULL.
    Null,
    /// Text, written in single quotes; only [`is_safe_text`] text is accepted.
    Text(&'a str),
}

/// Whether `text` consists only of ASCII letters, digits and [`SAFE_TEXT_PUNCTUATION`], and so
/// can be written between single quotes without changing a statement.
pub fn is_safe_text(text: &str) -> bool {
    text.bytes()
        .all(|b| b.is_ascii_alphanumeric() || SAFE_TEXT_PUNCTUATION.as_bytes().contains(&b))
}

/// Why [`render`] refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RenderError {
    /// A `?` not followed by a number from 1 up, at this byte offset of the statement.
    Placeholder {
        /// Byte offset of the `?`.
        offset: usize,
    },
    /// The statement names `?n` but fewer values were given.
    MissingValue {
        /// The placeholder's number.
        placeholder: usize,
    },
    /// A value that no placeholder names (a sign of binding the wrong statement).
    UnusedValue {
        /// The value's placeholder number (its position from 1).
        placeholder: usize,
    },
    /// Text with a character outside [`is_safe_text`]'s set.
    UnsafeText {
        /// The value's placeholder number.
        placeholder: usize,
    },
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Placeholder { offset } => {
                write!(f, "a '?' without a number from 1 up at byte {offset}")
            }
            Self::MissingValue { placeholder } => write!(f, "no value for ?{placeholder}"),
            Self::UnusedValue { placeholder } => {
                write!(
                    f,
                    "the value for ?{placeholder} is not used by the statement"
                )
            }
            Self::UnsafeText { placeholder } => write!(
                f,
                "the text for ?{placeholder} has characters other than ASCII letters, digits \
                 and {SAFE_TEXT_PUNCTUATION}, so it is not written into SQL"
            ),
        }
    }
}

impl std::error::Error for RenderError {}

/// `statement` with each numbered placeholder `?n` replaced by `values[n - 1]` written as a SQL
/// literal, for running where values cannot be bound. Every value must be used. Quoted parts of
/// the statement (`'…'`, `"…"`, `` `…` ``) are copied as they are. Refuses text outside
/// [`is_safe_text`] rather than escaping it.
pub fn render(statement: &str, values: &[Literal<'_>]) -> Result<String, RenderError> {
    let bytes = statement.as_bytes();
    let mut out = String::with_capacity(statement.len() + 128);
    let mut used = vec![false; values.len()];
    let mut quote = None;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        match quote {
            Some(open) => {
                if byte == open {
                    quote = None;
                }
                i += 1;
            }
            None if matches!(byte, b'\'' | b'"' | b'`') => {
                quote = Some(byte);
                i += 1;
            }
            None if byte == b'?' => {
                let end = bytes[i + 1..]
                    .iter()
                    .position(|b| !b.is_ascii_digit())
                    .map_or(bytes.len(), |n| i + 1 + n);
                let number = statement[i + 1..end]
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or(RenderError::Placeholder { offset: i })?;
                let value = values.get(number - 1).ok_or(RenderError::MissingValue {
                    placeholder: number,
                })?;
                used[number - 1] = true;
                out.push_str(&statement[copied..i]);
                write_literal(&mut out, *value, number)?;
                copied = end;
                i = end;
            }
            None => i += 1,
        }
    }
    out.push_str(&statement[copied..]);
    match used.iter().position(|u| !u) {
        Some(unused) => Err(RenderError::UnusedValue {
            placeholder: unused + 1,
        }),
        None => Ok(out),
    }
}

/// Appends `value` as a SQL literal.
fn write_literal(
    out: &mut String,
    value: Literal<'_>,
    placeholder: usize,
) -> Result<(), RenderError> {
    match value {
        // In parentheses, so that `1 -?1` cannot become the comment `1 --5`.
        Literal::Integer(n) if n < 0 => out.push_str(&format!("({n})")),
        Literal::Integer(n) => out.push_str(&n.to_string()),
        Literal::Null => out.push_str("NULL"),
        Literal::Text(text) if is_safe_text(text) => {
            out.push('\'');
            out.push_str(text);
            out.push('\'');
        }
        Literal::Text(_) => return Err(RenderError::UnsafeText { placeholder }),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use Literal::{Integer, Null, Text};

    #[test]
    fn renders_the_rotation_with_literals() {
        assert_eq!(
            render(
                ROTATE_CLIENT_SECRET,
                &[
                    Text("ab12"),
                    Text("2026-11-21T04:35:27Z"),
                    Text("cli_acme-1"),
                    Null
                ]
            )
            .unwrap(),
            "UPDATE api_clients SET secret_hash = 'ab12', secret_rotated_at = \
             '2026-11-21T04:35:27Z' WHERE client_id = 'cli_acme-1' AND (NULL IS NULL OR \
             institution_id = NULL)"
        );
        assert_eq!(
            render(REVOKE_CLIENT_TOKENS, &[Text("cli_acme"), Integer(7)]).unwrap(),
            "DELETE FROM access_tokens WHERE client_id IN (SELECT id FROM api_clients WHERE \
             client_id = 'cli_acme' AND (7 IS NULL OR institution_id = 7))"
        );
    }

    #[test]
    fn refuses_a_quote_and_every_other_unsafe_character() {
        for text in [
            "x' OR 1=1 --",
            "'",
            "a;b",
            "a\\b",
            "a\nb",
            "a?1",
            "é",
            "a\0b",
            "a\"b",
        ] {
            assert_eq!(
                render("SELECT ?1", &[Text(text)]),
                Err(RenderError::UnsafeText { placeholder: 1 }),
                "{text:?}"
            );
        }
        // A space cannot end the literal: names with spaces are written as they are.
        assert_eq!(
            render("SELECT ?1", &[Text("Acme Payments")]).unwrap(),
            "SELECT 'Acme Payments'"
        );
        assert_eq!(
            render("SELECT ?1", &[Text("ops+1@globex.example")]).unwrap(),
            "SELECT 'ops+1@globex.example'"
        );
        assert_eq!(
            render(
                "SELECT ?1",
                &[Text("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA/+")]
            )
            .unwrap(),
            "SELECT '$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA/+'"
        );
    }

    #[test]
    fn placeholders_must_match_the_values() {
        assert_eq!(
            render("SELECT ?", &[]),
            Err(RenderError::Placeholder { offset: 7 })
        );
        assert_eq!(
            render("SELECT ?0", &[Null]),
            Err(RenderError::Placeholder { offset: 7 })
        );
        assert_eq!(
            render("SELECT ?2", &[Null]),
            Err(RenderError::MissingValue { placeholder: 2 })
        );
        assert_eq!(
            render("SELECT ?1", &[Null, Null]),
            Err(RenderError::UnusedValue { placeholder: 2 })
        );
        let many: Vec<_> = (1..=10).map(Integer).collect();
        assert_eq!(
            render("SELECT ?10, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9", &many).unwrap(),
            "SELECT 10, 1, 2, 3, 4, 5, 6, 7, 8, 9"
        );
    }

    #[test]
    fn quoted_parts_are_copied_and_negative_numbers_stay_numbers() {
        assert_eq!(
            render("SELECT '?1 it''s', \"?1\", ?1", &[Integer(3)]).unwrap(),
            "SELECT '?1 it''s', \"?1\", 3"
        );
        assert_eq!(
            render("SELECT 1 -?1", &[Integer(-5)]).unwrap(),
            "SELECT 1 -(-5)"
        );
    }
}
