//! The checkout options (spec §1, and the hosted page's `locale`) and the one set of rules that
//! checks them, used alike by the browser script (before any request) and by
//! `POST /checkout/sessions`.

use alloc::string::String;

use serde::{Deserialize, Serialize};

/// Currencies an order may be priced in, with their minor-unit digits (ISO 4217).
pub const CURRENCIES: &[(&str, u32)] =
    &[("EUR", 2), ("USD", 2), ("GBP", 2), ("CHF", 2), ("JPY", 0)];
/// The most minor-unit digits of any currency in [`CURRENCIES`].
pub const MOST_CURRENCY_DIGITS: u32 = 2;
/// Largest order amount, in major units.
pub const MAX_AMOUNT_MAJOR: u64 = 1_000_000;
/// Longest title.
pub const MAX_TITLE_CHARS: usize = 200;
/// Longest external reference or idempotency key.
pub const MAX_REFERENCE_CHARS: usize = 255;
/// Longest redirect URL.
pub const MAX_URL_CHARS: usize = 2048;
/// The languages the hosted page speaks (the catalogues under `edge-api/locales/`, which the
/// worker's tests hold to this list), in order.
pub const LANGUAGES: &[&str] = &["de", "en", "es", "fr"];
/// The `locale` option's value that follows the customer's browser (`Accept-Language`).
pub const LOCALE_AUTO: &str = "auto";
/// Longest `locale` option (BCP 47 tags are short).
pub const MAX_LOCALE_CHARS: usize = 35;

/// The options as the session endpoint receives them (camelCase, as in the spec). `amount` is
/// the decimal text of the number the merchant passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckoutOptions {
    /// The merchant's publishable key.
    pub public_key: String,
    /// Order amount, decimal text in major units (`"19.99"`).
    pub amount: String,
    /// ISO 4217 code of the amount.
    pub currency: String,
    /// What the order is.
    pub title: String,
    /// The PSP's order id; comes back as `external_reference`.
    pub external_reference: String,
    /// Deduplicates retries of the same order for 24 hours.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Where the customer returns after paying.
    pub redirect_url: String,
    /// Open the hosted checkout in a new tab.
    #[serde(default)]
    pub open_in_new_tab: bool,
    /// Enables crypto payment; must be true, as crypto is the only method offered.
    pub allow_crypto: bool,
    /// The hosted page's language: `auto` (or absent) follows the customer's browser; else a
    /// language tag in one of [`LANGUAGES`] (`de`, `fr-CA`). Left out of the wire form when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
}

/// The option names, as the merchant writes them.
pub const OPTION_NAMES: [&str; 10] = [
    "publicKey",
    "amount",
    "currency",
    "title",
    "externalReference",
    "idempotencyKey",
    "redirectUrl",
    "openInNewTab",
    "allowCrypto",
    "locale",
];

/// Joins message pieces. The browser script runs these rules, so they build messages without
/// `format!` or `concat` (whose panic paths bring `core::fmt` into the module) and without
/// any other code that can panic: see the crate's docs.
fn text(pieces: &[&str]) -> String {
    let mut text = String::new();
    for piece in pieces {
        text.push_str(piece);
    }
    text
}

/// The decimal text of a number, without `core::fmt`.
fn decimal(n: u64) -> String {
    let mut text = if n >= 10 {
        decimal(n / 10)
    } else {
        String::new()
    };
    text.push(char::from(b'0' + (n % 10) as u8));
    text
}

/// An option that failed its rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError {
    /// The option's name (camelCase).
    pub option: &'static str,
    /// What is wrong, naming the option.
    pub message: String,
}

impl core::fmt::Display for OptionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.message)
    }
}

fn fail(option: &'static str, message: impl Into<String>) -> Result<(), OptionError> {
    Err(OptionError {
        option,
        message: message.into(),
    })
}

impl CheckoutOptions {
    /// Checks every option; the first failure names its option.
    pub fn validate(&self) -> Result<(), OptionError> {
        check_public_key(&self.public_key)?;
        check_currency(&self.currency)?;
        check_amount(&self.amount, &self.currency)?;
        check_text("title", &self.title, MAX_TITLE_CHARS)?;
        check_text(
            "externalReference",
            &self.external_reference,
            MAX_REFERENCE_CHARS,
        )?;
        if let Some(key) = &self.idempotency_key {
            check_idempotency_key(key)?;
        }
        check_redirect_url(&self.redirect_url)?;
        if !self.allow_crypto {
            return fail(
                "allowCrypto",
                "allowCrypto must be true: crypto is the only way to pay at Payrail checkout",
            );
        }
        if let Some(locale) = &self.locale {
            check_locale(locale)?;
        }
        Ok(())
    }

    /// The hosted page's language chosen by the `locale` option (one of [`LANGUAGES`]), or
    /// `None` to follow the customer's browser (also for a value [`check_locale`] refuses).
    pub fn language(&self) -> Option<&'static str> {
        self.locale.as_deref().and_then(locale_language)
    }
}

/// The language of a `locale` option: `None` for `auto`; else the tag's primary language when
/// the page speaks it (one of [`LANGUAGES`], in any case) and the tag is well formed: the
/// language, then any number of `-` or `_` and a subtag of 1 to 8 letters and digits, at most
/// [`MAX_LOCALE_CHARS`] in all. `FR-ca` is French.
pub fn locale_language(tag: &str) -> Option<&'static str> {
    if tag.len() > MAX_LOCALE_CHARS {
        return None;
    }
    // Read as bytes (see `text`): the language, then the subtags.
    LANGUAGES.iter().copied().find(|code| {
        tag.as_bytes()
            .split_at_checked(code.len())
            .is_some_and(|(language, rest)| {
                language.eq_ignore_ascii_case(code.as_bytes()) && subtags_well_formed(rest)
            })
    })
}

/// Empty, or `-`/`_`-led subtags of 1 to 8 letters and digits.
fn subtags_well_formed(rest: &[u8]) -> bool {
    // The length of the subtag being read; it starts "full", so that the first byte must be a
    // separator.
    let mut length = 8;
    for &b in rest {
        length = match b {
            b'-' | b'_' if length > 0 => 0,
            _ if b.is_ascii_alphanumeric() && length < 8 => length + 1,
            _ => return false,
        };
    }
    length > 0
}

/// `auto`, or a language tag in a language the hosted page speaks (see [`locale_language`]).
pub fn check_locale(tag: &str) -> Result<(), OptionError> {
    if tag == LOCALE_AUTO || locale_language(tag).is_some() {
        return Ok(());
    }
    let mut message = String::from(
        "locale must be \"auto\" or a language tag in one of the languages the checkout page \
         speaks (",
    );
    for (index, code) in LANGUAGES.iter().enumerate() {
        if index > 0 {
            message.push_str(", ");
        }
        message.push_str(code);
    }
    // What was given, when it is short enough to show.
    if tag.len() <= MAX_LOCALE_CHARS {
        message.push_str(&text(&["); got \"", tag, "\""]));
    } else {
        message.push_str(&text(&["); got ", &decimal(tag.len() as u64), " bytes"]));
    }
    fail("locale", message)
}

/// `pk_live_` or `pk_test_` followed by 16 to 64 letters and digits.
pub fn check_public_key(key: &str) -> Result<(), OptionError> {
    let rest = key
        .strip_prefix("pk_live_")
        .or_else(|| key.strip_prefix("pk_test_"));
    match rest {
        Some(rest)
            if (16..=64).contains(&rest.len())
                && rest.bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            Ok(())
        }
        _ => fail(
            "publicKey",
            "publicKey must be the merchant's publishable key (pk_live_…)",
        ),
    }
}

/// Minor-unit digits of a supported currency.
pub fn currency_digits(code: &str) -> Option<u32> {
    CURRENCIES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, digits)| *digits)
}

/// A supported ISO 4217 code, upper case.
pub fn check_currency(code: &str) -> Result<(), OptionError> {
    if currency_digits(code).is_some() {
        return Ok(());
    }
    let mut message = text(&["currency must be one of "]);
    for (index, (currency, _)) in CURRENCIES.iter().enumerate() {
        if index > 0 {
            message.push_str(", ");
        }
        message.push_str(currency);
    }
    message.push_str(&text(&["; got \"", code, "\""]));
    fail("currency", message)
}

/// Positive decimal text (`19.99`), at most the currency's minor digits, at most
/// [`MAX_AMOUNT_MAJOR`]. No sign, exponent or spaces.
pub fn check_amount(amount: &str, currency: &str) -> Result<(), OptionError> {
    check_decimal(
        amount,
        &AmountRule {
            field: "amount",
            digits: currency_digits(currency).unwrap_or(2),
            unit: currency,
            max_major: MAX_AMOUNT_MAJOR,
            zero_allowed: false,
        },
    )
}

/// The one rule every amount that enters Payrail as text follows (checkout's options, the
/// sandbox's payments, refunds and returns, debt limits), each with its own bounds: digits with
/// at most one `.` inside them (`19.99`, `250`), at most `digits` decimal places once trailing
/// zeros are dropped, at most `max_major`, and greater than zero unless `zero_allowed`. No sign,
/// exponent, spaces, or any other character: what is accepted is exactly what is meant.
#[derive(Debug, Clone, Copy)]
pub struct AmountRule<'a> {
    /// The field the amount came in, named in every refusal.
    pub field: &'static str,
    /// Most decimal places.
    pub digits: u32,
    /// What the amount is of (a currency code, an asset's symbol), named when `digits` is 0.
    pub unit: &'a str,
    /// Largest amount, in whole units.
    pub max_major: u64,
    /// Whether zero is an amount here (a debt limit of none).
    pub zero_allowed: bool,
}

/// Checks `amount` against `rule` (see [`AmountRule`]); the refusal names the field.
pub fn check_decimal(amount: &str, rule: &AmountRule<'_>) -> Result<(), OptionError> {
    let AmountRule {
        field,
        digits,
        unit,
        max_major,
        zero_allowed,
    } = *rule;
    // The text as bytes, read with `get` and iterators: nothing here can panic (see `text`).
    let bytes = amount.as_bytes();
    let dot = bytes.iter().position(|&b| b == b'.');
    let (whole, fraction) = match dot {
        Some(at) => (
            bytes.get(..at).unwrap_or_default(),
            bytes.get(at + 1..).unwrap_or_default(),
        ),
        None => (bytes, &[][..]),
    };
    let well_formed = !whole.is_empty()
        && whole.iter().all(u8::is_ascii_digit)
        && fraction.iter().all(u8::is_ascii_digit)
        && (dot.is_some() <= !fraction.is_empty());
    let describe = || {
        if digits == 0 {
            text(&["a whole number of ", unit])
        } else {
            text(&["at most ", &decimal(digits.into()), " decimal places"])
        }
    };
    if !well_formed {
        let kind = if zero_allowed {
            " must be a number with "
        } else {
            " must be a positive number with "
        };
        return fail(
            field,
            text(&[field, kind, &describe(), "; got \"", amount, "\""]),
        );
    }
    // The fraction without its trailing zeros, and the whole part without its leading ones.
    let significant = fraction
        .iter()
        .rposition(|&b| b != b'0')
        .map_or(0, |at| at + 1);
    if significant > digits as usize {
        return fail(
            field,
            text(&[field, " must have ", &describe(), "; got ", amount]),
        );
    }
    let leading_zeros = whole.iter().take_while(|&&b| b == b'0').count();
    let whole_value = whole.get(leading_zeros..).unwrap_or_default();
    let zero = whole_value.is_empty() && significant == 0;
    // Nineteen digits at most, so the value cannot overflow a u64.
    let too_big = whole_value.len() > 19 || {
        let value = whole_value
            .iter()
            .fold(0u64, |value, &b| value * 10 + u64::from(b - b'0'));
        value > max_major || (value == max_major && significant > 0)
    };
    if zero && !zero_allowed {
        return fail(field, text(&[field, " must be greater than zero"]));
    }
    if too_big {
        return fail(
            field,
            text(&[
                field,
                " must be at most ",
                &decimal(max_major),
                "; got ",
                amount,
            ]),
        );
    }
    Ok(())
}

/// `amount` as a decimal once it follows `rule` ([`check_decimal`]).
pub fn parse_decimal(
    amount: &str,
    rule: &AmountRule<'_>,
) -> Result<rust_decimal::Decimal, OptionError> {
    check_decimal(amount, rule)?;
    // The rule leaves at most 19 whole digits and `digits` decimal ones: a value Decimal holds
    // whenever the bounds chosen fit in its 28 digits, as every rule's do.
    core::str::FromStr::from_str(amount).map_err(|_| OptionError {
        option: rule.field,
        message: text(&[rule.field, " is out of range; got ", amount]),
    })
}

/// Non-blank text of at most `max` characters without control characters.
pub fn check_text(option: &'static str, value: &str, max: usize) -> Result<(), OptionError> {
    if value.chars().all(char::is_whitespace) {
        return fail(option, text(&[option, " must not be empty"]));
    }
    // Characters are the bytes that do not continue one (what `chars().count()` counts).
    let chars = value.bytes().filter(|&b| (b as i8) >= -0x40).count();
    if chars > max {
        return fail(
            option,
            text(&[
                option,
                " must be at most ",
                &decimal(max as u64),
                " characters",
            ]),
        );
    }
    if value.chars().any(char::is_control) {
        return fail(
            option,
            text(&[option, " must not contain control characters"]),
        );
    }
    Ok(())
}

/// 1 to 255 characters of `A–Z a–z 0–9 . _ : -`.
pub fn check_idempotency_key(key: &str) -> Result<(), OptionError> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-');
    if key.is_empty() || key.len() > MAX_REFERENCE_CHARS || !key.bytes().all(allowed) {
        return fail(
            "idempotencyKey",
            "idempotencyKey must be 1 to 255 characters of letters, digits, '.', '_', ':' and '-' \
             (the order id is a good key)",
        );
    }
    Ok(())
}

/// An absolute `https` URL, or `http` to `localhost` / `127.0.0.1` for development; no spaces,
/// no credentials, at most [`MAX_URL_CHARS`]. The scheme and host are compared without regard
/// to case; the host is what comes before any port (an IPv6 host in brackets as it is).
pub fn check_redirect_url(url: &str) -> Result<(), OptionError> {
    let bad = || {
        fail(
            "redirectUrl",
            "redirectUrl must be an absolute https:// URL (http:// only for localhost)",
        )
    };
    if url.len() > MAX_URL_CHARS || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad();
    }
    // Read as bytes with `get` and iterators: nothing here can panic (see `text`).
    let bytes = url.as_bytes();
    let after = |prefix: &str| {
        let (start, rest) = bytes.split_at_checked(prefix.len())?;
        start
            .eq_ignore_ascii_case(prefix.as_bytes())
            .then_some(rest)
    };
    let (secure, rest) = match (after("https://"), after("http://")) {
        (Some(rest), _) => (true, rest),
        (None, Some(rest)) => (false, rest),
        (None, None) => return bad(),
    };
    let end = rest
        .iter()
        .position(|b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    let authority = rest.get(..end).unwrap_or_default();
    if authority.is_empty() || authority.contains(&b'@') {
        return bad();
    }
    let until = |stop: u8| {
        let end = authority
            .iter()
            .position(|&b| b == stop)
            .unwrap_or(authority.len());
        authority.get(..end).unwrap_or_default()
    };
    // An IPv6 host runs to its closing bracket; any other to the port's colon.
    let (host_empty, local) = if authority.first() == Some(&b'[') {
        (false, until(b']') == b"[::1")
    } else {
        let host = until(b':');
        let local = [&b"localhost"[..], b"127.0.0.1"]
            .iter()
            .any(|name| host.eq_ignore_ascii_case(name));
        (host.is_empty(), local)
    };
    match secure {
        true if !host_empty => Ok(()),
        false if local => Ok(()),
        _ => bad(),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The rules as first written, with `str` methods and `format!`: the plainest statement of
    /// them. The ones above read bytes so that the browser script carries no panic path; they
    /// must agree with these on every input, messages included.
    mod plain {
        use super::super::{currency_digits, MAX_AMOUNT_MAJOR, MAX_URL_CHARS};

        pub fn amount(amount: &str, currency: &str) -> Result<(), String> {
            let digits = currency_digits(currency).unwrap_or(2);
            let (whole, fraction) = amount.split_once('.').unwrap_or((amount, ""));
            let well_formed = !whole.is_empty()
                && whole.bytes().all(|b| b.is_ascii_digit())
                && fraction.bytes().all(|b| b.is_ascii_digit())
                && (amount.contains('.') <= !fraction.is_empty());
            let describe = || {
                if digits == 0 {
                    format!("a whole number of {currency}")
                } else {
                    format!("at most {digits} decimal places")
                }
            };
            if !well_formed {
                return Err(format!(
                    "amount must be a positive number with {}; got \"{amount}\"",
                    describe()
                ));
            }
            let significant = fraction.trim_end_matches('0');
            if significant.len() > digits as usize {
                return Err(format!("amount must have {}; got {amount}", describe()));
            }
            let whole_value = whole.trim_start_matches('0');
            let zero = whole_value.is_empty() && significant.is_empty();
            let value = whole_value.parse::<u64>().unwrap_or(0);
            let too_big = whole_value.len() > 7
                || value > MAX_AMOUNT_MAJOR
                || (value == MAX_AMOUNT_MAJOR && !significant.is_empty());
            if zero {
                return Err("amount must be greater than zero".into());
            }
            if too_big {
                return Err(format!(
                    "amount must be at most {MAX_AMOUNT_MAJOR}; got {amount}"
                ));
            }
            Ok(())
        }

        pub fn text(option: &str, text: &str, max: usize) -> Result<(), String> {
            if text.trim().is_empty() {
                return Err(format!("{option} must not be empty"));
            }
            if text.chars().count() > max {
                return Err(format!("{option} must be at most {max} characters"));
            }
            if text.chars().any(char::is_control) {
                return Err(format!("{option} must not contain control characters"));
            }
            Ok(())
        }

        pub fn redirect_url(url: &str) -> bool {
            if url.len() > MAX_URL_CHARS || url.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return false;
            }
            let Some((scheme, rest)) = url.split_once("://") else {
                return false;
            };
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            if authority.is_empty() || authority.contains('@') {
                return false;
            }
            let host = if authority.starts_with('[') {
                authority
                    .split(']')
                    .next()
                    .map(|h| format!("{h}]"))
                    .unwrap_or_default()
            } else {
                authority
                    .split(':')
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase()
            };
            let local = matches!(host.as_str(), "localhost" | "127.0.0.1" | "[::1]");
            match scheme.to_ascii_lowercase().as_str() {
                "https" => !host.is_empty(),
                "http" => local,
                _ => false,
            }
        }
    }

    /// Text made of pieces that matter to the rules, and any characters at all.
    fn pieces(choices: &'static [&'static str]) -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::collection::vec(proptest::sample::select(choices), 0..8)
                .prop_map(|parts| parts.concat()),
            "\\PC{0,12}",
            any::<String>(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn amount_rule_agrees_with_its_plain_form(
            amount in prop_oneof![
                // Shaped like an amount, each part right or nearly so.
                (
                    proptest::sample::select(&["", "0", "00", "7", "1000000", "0999999", "10000000", "-1", "1e3"][..]),
                    proptest::sample::select(&["", ".", ".."][..]),
                    proptest::sample::select(&["", "0", "00", "5", "50", "05", "001", "x"][..]),
                )
                    .prop_map(|(a, b, c)| [a, b, c].concat()),
                pieces(&["0", "1", "9", "1000000", ".", "5", "-", "e", " ", "\u{e9}"]),
            ],
            currency in proptest::sample::select(&["EUR", "JPY", "BTC"][..]),
        ) {
            prop_assert_eq!(
                check_amount(&amount, currency).map_err(|e| e.message),
                plain::amount(&amount, currency)
            );
        }

        #[test]
        fn text_rule_agrees_with_its_plain_form(
            value in pieces(&["a", " ", "\t", "\u{a0}", "\u{e9}", "\u{1f600}", "\u{7}", "\u{85}", "xy"]),
            max in 0usize..6,
        ) {
            prop_assert_eq!(
                check_text("title", &value, max).map_err(|e| e.message),
                plain::text("title", &value, max)
            );
        }

        #[test]
        fn redirect_rule_agrees_with_its_plain_form(
            url in prop_oneof![
                // Shaped like a URL, each part right or nearly so.
                (
                    proptest::sample::select(&["https", "HTTPS", "http", "HtTp", "ftp", "", "https:"][..]),
                    proptest::sample::select(&["://", ":/", "//", ":///", ""][..]),
                    proptest::sample::select(&[
                        "localhost", "LocalHost", "127.0.0.1", "[::1]", "[::1", "[::1]x", "[", "",
                        "shop.example", "user@shop.example", ":8080", "\u{e9}.example",
                    ][..]),
                    proptest::sample::select(&["", ":8080", ":", "@x"][..]),
                    proptest::sample::select(&["", "/", "/a b", "?q=1", "#top", "/p?q#f"][..]),
                )
                    .prop_map(|(a, b, c, d, e)| [a, b, c, d, e].concat()),
                pieces(&[
                    "https", "http", "ftp", "://", ":", "/", "?", "#", "@", "localhost",
                    "127.0.0.1", "[::1]", "[", "]", "shop.example", " ", "\u{e9}",
                ]),
            ],
        ) {
            prop_assert_eq!(check_redirect_url(&url).is_ok(), plain::redirect_url(&url));
        }
    }

    fn options() -> CheckoutOptions {
        CheckoutOptions {
            public_key: "pk_live_abcdefghijklmnop1234".into(),
            amount: "19.99".into(),
            currency: "EUR".into(),
            title: "Two coffees".into(),
            external_reference: "ORD-1001".into(),
            idempotency_key: Some("ORD-1001".into()),
            redirect_url: "https://shop.example/thanks?order=1001".into(),
            open_in_new_tab: false,
            allow_crypto: true,
            locale: None,
        }
    }

    fn refused(change: impl FnOnce(&mut CheckoutOptions)) -> &'static str {
        let mut o = options();
        change(&mut o);
        let err = o.validate().expect_err("should be refused");
        assert!(err.message.contains(err.option), "{err:?}");
        err.option
    }

    #[test]
    fn valid_options_pass() {
        options().validate().unwrap();
        let mut o = options();
        o.idempotency_key = None;
        o.redirect_url = "http://localhost:8080/done".into();
        o.currency = "JPY".into();
        o.amount = "1500".into();
        o.validate().unwrap();
    }

    #[test]
    fn each_rule_names_its_option() {
        assert_eq!(
            refused(|o| o.public_key = "sk_live_abcdefghijklmnop".into()),
            "publicKey"
        );
        assert_eq!(
            refused(|o| o.public_key = "pk_live_short".into()),
            "publicKey"
        );
        assert_eq!(refused(|o| o.currency = "eur".into()), "currency");
        assert_eq!(refused(|o| o.currency = "BTC".into()), "currency");
        for bad in [
            "0",
            "0.00",
            "-5",
            "1e3",
            "19.999",
            "",
            ".5",
            "5.",
            " 5",
            "1000000.01",
            "NaN",
        ] {
            assert_eq!(refused(|o| o.amount = bad.into()), "amount", "{bad}");
        }
        assert_eq!(
            refused(|o| {
                o.currency = "JPY".into();
                o.amount = "10.5".into()
            }),
            "amount"
        );
        assert_eq!(refused(|o| o.title = "  ".into()), "title");
        assert_eq!(refused(|o| o.title = "x".repeat(201)), "title");
        assert_eq!(
            refused(|o| o.external_reference = String::new()),
            "externalReference"
        );
        assert_eq!(
            refused(|o| o.idempotency_key = Some("has space".into())),
            "idempotencyKey"
        );
        for bad in [
            "/relative",
            "javascript:alert(1)",
            "http://shop.example/",
            "https://user:pw@shop.example/",
            "https:///path",
            "ftp://shop.example",
        ] {
            assert_eq!(
                refused(|o| o.redirect_url = bad.into()),
                "redirectUrl",
                "{bad}"
            );
        }
        assert_eq!(refused(|o| o.allow_crypto = false), "allowCrypto");
        for bad in [
            "",
            "it",
            "klingon",
            "de-",
            "d",
            "de--CH",
            "en-verylongsubtag",
            "<b>",
            "AUTO",
        ] {
            assert_eq!(refused(|o| o.locale = Some(bad.into())), "locale", "{bad}");
        }
    }

    #[test]
    fn the_locale_option_is_auto_or_a_spoken_language() {
        // The rule is the contract's pattern (with its maxLength of 35):
        // ^(auto|(de|en|es|fr, any case)([-_][A-Za-z0-9]{1,8})*)$
        let plain = |tag: &str| {
            let lower = tag.to_ascii_lowercase();
            let Some(code) = LANGUAGES.iter().find(|c| lower.starts_with(**c)) else {
                return tag == "auto";
            };
            let rest = &tag[code.len()..];
            tag.len() <= 35
                && (rest.is_empty()
                    || (rest.starts_with(['-', '_'])
                        && rest[1..].split(['-', '_']).all(|p| {
                            (1..=8).contains(&p.len())
                                && p.bytes().all(|b| b.is_ascii_alphanumeric())
                        })))
        };
        for tag in [
            "auto",
            "de",
            "DE",
            "dE-ch",
            "de_CH",
            "des",
            "de-",
            "de--ch",
            "-de",
            "de-12345678",
            "de-123456789",
            "fr-ca-x-1",
            "it",
            "",
            "au",
            "en-\u{e9}",
            "es-419",
            "en-aaaaaaaa-bbbbbbbb-cccccccc-ddd",
            "en-aaaaaaaa-bbbbbbbb-cccccccc-dddd",
        ] {
            assert_eq!(check_locale(tag).is_ok(), plain(tag), "{tag}");
        }
        for (tag, language) in [
            ("auto", None),
            ("de", Some("de")),
            ("fr-CA", Some("fr")),
            ("ES", Some("es")),
            ("es_419", Some("es")),
            ("en-Latn-GB-x-private", Some("en")),
        ] {
            check_locale(tag).unwrap();
            let o = CheckoutOptions {
                locale: Some(tag.into()),
                ..options()
            };
            o.validate().unwrap();
            assert_eq!(o.language(), language, "{tag}");
        }
        assert_eq!(options().language(), None);
        let err = check_locale("it-IT").unwrap_err();
        assert_eq!(
            err.message,
            "locale must be \"auto\" or a language tag in one of the languages the checkout page \
             speaks (de, en, es, fr); got \"it-IT\""
        );
        let long = check_locale(&"x".repeat(100)).unwrap_err().message;
        assert!(long.ends_with("; got 100 bytes"), "{long}");
    }

    #[test]
    fn amounts_at_the_edges() {
        check_amount("1000000", "EUR").unwrap();
        check_amount("1000000.00", "EUR").unwrap();
        check_amount("0.01", "EUR").unwrap();
        check_amount("19.90", "EUR").unwrap();
        assert!(check_amount("0.001", "EUR").is_err());
        assert!(check_amount("99999999", "EUR").is_err());
    }

    #[test]
    fn wire_form_is_camel_case_and_strict() {
        let json = serde_json::to_value(options()).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        // Every option but an absent locale, which the wire form leaves out.
        for name in OPTION_NAMES.iter().filter(|&&n| n != "locale") {
            assert!(keys.contains(name), "{name}");
        }
        assert!(!keys.contains(&"locale"));
        let with_locale = CheckoutOptions {
            locale: Some("de".into()),
            ..options()
        };
        assert_eq!(serde_json::to_value(with_locale).unwrap()["locale"], "de");
        let unknown = r#"{"publicKey":"pk_live_abcdefghijklmnop1234","amount":"1","currency":"EUR",
            "title":"t","externalReference":"r","redirectUrl":"https://a.example","allowCrypto":true,
            "colour":"red"}"#;
        assert!(serde_json::from_str::<CheckoutOptions>(unknown).is_err());
    }
}
