//! The checks of what an admin types, shared by every portal operation: short texts and e-mail
//! addresses.

use crate::error::ApiError;

/// Trimmed text of `min` to `max` characters and no control characters, or a refusal naming
/// `field`.
pub fn check_text(field: &str, text: &str, min: usize, max: usize) -> Result<String, ApiError> {
    let trimmed = text.trim();
    let count = trimmed.chars().count();
    if count < min || count > max {
        return Err(ApiError::invalid_request(if min > 0 {
            format!("{field} must be {min} to {max} characters")
        } else {
            format!("{field} must be at most {max} characters")
        }));
    }
    if trimmed.chars().any(char::is_control) {
        return Err(ApiError::invalid_request(format!(
            "{field} must not contain control characters"
        )));
    }
    Ok(trimmed.to_owned())
}

/// A trimmed e-mail address (one `@`, a dotted domain, no spaces, at most 254 bytes), or a
/// refusal naming `email`.
pub fn check_email(value: &str) -> Result<String, ApiError> {
    let value = value.trim();
    let ok = value.len() <= 254
        && value.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
        })
        && !value.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        Ok(value.to_owned())
    } else {
        Err(ApiError::invalid_request(
            "email must be an e-mail address such as payments@shop.example",
        ))
    }
}
