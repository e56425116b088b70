//! The customer's language on the hosted checkout page: the message catalogues (one JSON file per
//! language under `edge-api/locales/`, compiled in by `build.rs`, so adding a language is adding
//! a file), which one a request gets (the session's `locale` option, checked by shared-types'
//! rule, else `Accept-Language`, else English), and amounts and dates written the language's
//! way. Pure; tested natively.
//!
//! Amounts are decimal text and stay so: formatting only swaps the separators and groups the
//! whole part, never rounds or drops a digit (a crypto amount must be sent exactly).

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

include!(concat!(env!("OUT_DIR"), "/locales.rs"));

/// The language a page falls back to, and whose catalogue every other must match.
pub const DEFAULT_LANGUAGE: &str = "en";
/// Longest `Accept-Language` entry read (BCP 47 tags are short).
const MAX_TAG_CHARS: usize = 35;
/// Most `Accept-Language` bytes read; browsers send a few dozen.
const MAX_ACCEPT_LANGUAGE: usize = 1024;

/// One language's catalogue: its messages and how it writes numbers and dates.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalogue {
    /// The language's code (the file's name): `en`, `de`…
    #[serde(skip)]
    pub code: &'static str,
    /// How numbers are written.
    pub number: NumberFormat,
    /// An amount with its currency or asset: `{amount}` and `{currency}`.
    pub money: String,
    /// How an instant is written.
    pub date: DateFormat,
    /// The page's messages.
    pub page: PageMessages,
    /// The messages the page's script shows, handed to it as they are.
    pub script: ScriptMessages,
}

/// Separators and grouping (CLDR's `decimal`, `group`, `minimumGroupingDigits`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NumberFormat {
    /// Between the whole part and the fraction.
    pub decimal: String,
    /// Between groups of three digits of the whole part.
    pub group: String,
    /// Group the whole part only when it has at least 3 + this many digits (1: from 1,000;
    /// 2: from 10.000).
    pub min_grouping: usize,
}

/// An instant, in UTC (the page's script rewrites it in the customer's own time zone).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DateFormat {
    /// With `{day}`, `{month}` (01–12), `{month_name}`, `{year}`, `{hour}`, `{minute}`.
    pub pattern: String,
    /// Short month names, January first.
    pub months: [String; 12],
}

/// What the hosted page says, server-rendered.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct PageMessages {
    pub title: String,
    pub pay_merchant: String,
    pub not_found_title: String,
    pub not_found_heading: String,
    pub not_found_body: String,
    pub unavailable: String,
    pub return_to: String,
    pub sandbox_note: String,
    pub way_to_pay: String,
    pub qr_label: String,
    pub qr_hint: String,
    pub browser_wallet: String,
    pub send_exactly: String,
    pub network: String,
    pub token_contract: String,
    pub to_address: String,
    pub copy: String,
    pub time_left: String,
    pub pay_by: String,
    pub waiting: String,
    pub time_up: String,
    pub updates_itself: String,
    pub received: String,
    pub returning: String,
    pub stay: String,
    pub late_valued: String,
    pub late_arrived: String,
    pub under_review: String,
    pub failed: String,
    pub expired: String,
    pub no_funds: String,
    pub closed: String,
    pub unquoted: String,
}

/// What the page's script says (status updates, the browser wallet's steps and errors).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct ScriptMessages {
    pub waiting: String,
    pub time_up: String,
    pub minutes_left: String,
    pub one_minute_left: String,
    pub checking: String,
    pub confirming: String,
    pub valuing: String,
    pub partial: String,
    pub copied: String,
    pub pay_with: String,
    pub a_browser_wallet: String,
    pub asking: String,
    pub rejected: String,
    pub busy: String,
    pub no_account: String,
    pub wrong_chain: String,
    pub unknown_chain: String,
    pub low_balance: String,
    pub low_fee: String,
    pub sent: String,
    pub failed: String,
}

/// Every catalogue, read once. A file that does not read is a build defect the native tests
/// catch; here it is left out rather than taking the page down.
fn catalogues() -> &'static [Catalogue] {
    static ALL: OnceLock<Vec<Catalogue>> = OnceLock::new();
    ALL.get_or_init(|| {
        LOCALE_FILES
            .iter()
            .filter_map(|(code, text)| {
                let mut catalogue: Catalogue = serde_json::from_str(text).ok()?;
                catalogue.code = code;
                Some(catalogue)
            })
            .collect()
    })
}

/// The catalogue of `language` (a primary language subtag, lower case).
pub fn catalogue(language: &str) -> Option<&'static Catalogue> {
    catalogues().iter().find(|c| c.code == language)
}

/// The English catalogue.
pub fn default() -> &'static Catalogue {
    catalogue(DEFAULT_LANGUAGE)
        .or_else(|| catalogues().first())
        .expect("edge-api/locales holds at least the default language")
}

/// The codes of the languages the page speaks, in order (held to shared-types' list by a test).
#[cfg(test)]
pub fn languages() -> Vec<&'static str> {
    catalogues().iter().map(|c| c.code).collect()
}

/// The primary language of a BCP 47 tag (`de` of `de-CH`), lower case, when the tag is well
/// formed: letters for the language, then `-` or `_` separated letters and digits.
fn primary_language(tag: &str) -> Option<String> {
    if tag.is_empty() || tag.len() > MAX_TAG_CHARS {
        return None;
    }
    let mut parts = tag.split(['-', '_']);
    let language = parts.next()?;
    let language_ok =
        (2..=3).contains(&language.len()) && language.bytes().all(|b| b.is_ascii_alphabetic());
    let rest_ok =
        parts.all(|p| (1..=8).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_alphanumeric()));
    (language_ok && rest_ok).then(|| language.to_ascii_lowercase())
}

/// The catalogue for an `Accept-Language` header: the supported language the browser prefers
/// most (by `q`, then by order), else English.
pub fn negotiate(accept_language: Option<&str>) -> &'static Catalogue {
    let Some(header) = accept_language else {
        return default();
    };
    let header = match header.char_indices().nth(MAX_ACCEPT_LANGUAGE) {
        Some((cut, _)) => &header[..cut],
        None => header,
    };
    let mut best: Option<(u32, &'static Catalogue)> = None;
    for entry in header.split(',').take(32) {
        let mut fields = entry.split(';');
        let tag = fields.next().unwrap_or("").trim();
        // q in thousandths; a malformed q counts as absent (1), q=0 means "not this one".
        let q = fields
            .filter_map(|f| f.trim().strip_prefix("q="))
            .next()
            .map_or(1000, |q| {
                q.trim()
                    .parse::<f32>()
                    .ok()
                    .filter(|q| (0.0..=1.0).contains(q))
                    .map_or(1000, |q| (q * 1000.0).round() as u32)
            });
        if q == 0 {
            continue;
        }
        let found = if tag == "*" {
            Some(default())
        } else {
            primary_language(tag).and_then(|l| catalogue(&l))
        };
        if let Some(catalogue) = found {
            if best.is_none_or(|(best_q, _)| q > best_q) {
                best = Some((q, catalogue));
            }
        }
    }
    best.map_or_else(default, |(_, c)| c)
}

/// `template` with each `{name}` replaced by its value.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut text = template.to_owned();
    for (name, value) in values {
        text = text.replace(&format!("{{{name}}}"), value);
    }
    text
}

/// `template` split around `{name}`: the text before and after it (all of it before when the
/// placeholder is missing), for a value that is markup.
pub fn around<'t>(template: &'t str, name: &str) -> (&'t str, &'t str) {
    template
        .split_once(&format!("{{{name}}}"))
        .unwrap_or((template, ""))
}

impl Catalogue {
    /// Decimal text (`1234.5`) written the language's way (`1.234,5`), every digit kept. Text
    /// that is not a plain decimal is returned as it is.
    pub fn number(&self, decimal: &str) -> String {
        let (whole, fraction) = decimal.split_once('.').unwrap_or((decimal, ""));
        if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
            return decimal.to_owned();
        }
        let mut text = String::new();
        let grouped = whole.len() >= 4 && whole.len() >= 3 + self.number.min_grouping;
        for (i, digit) in whole.chars().enumerate() {
            if grouped && i > 0 && (whole.len() - i) % 3 == 0 {
                text.push_str(&self.number.group);
            }
            text.push(digit);
        }
        if decimal.contains('.') {
            text.push_str(&self.number.decimal);
            text.push_str(fraction);
        }
        text
    }

    /// An amount with its currency or asset code: `25,50 EUR`.
    pub fn money(&self, decimal: &str, currency: &str) -> String {
        fill(
            &self.money,
            &[("amount", &self.number(decimal)), ("currency", currency)],
        )
    }

    /// An instant (Unix seconds) in UTC: `23.11.2026, 10:15 UTC`.
    pub fn date(&self, unix: i64) -> String {
        let Some(iso) = shared_types::time::format_unix(unix) else {
            return String::new();
        };
        // 2026-11-23T10:15:00Z
        let part = |from: usize, to: usize| iso.get(from..to).unwrap_or("");
        let month = part(5, 7);
        let month_name = month
            .parse::<usize>()
            .ok()
            .and_then(|m| self.date.months.get(m.wrapping_sub(1)))
            .map_or("", String::as_str);
        let day = part(8, 10);
        fill(
            &self.date.pattern,
            &[
                ("day", day.trim_start_matches('0')),
                ("month", month),
                ("month_name", month_name),
                ("year", part(0, 4)),
                ("hour", part(11, 13)),
                ("minute", part(14, 16)),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn placeholders(text: &str) -> BTreeSet<String> {
        text.split('{')
            .skip(1)
            .filter_map(|s| s.split_once('}').map(|(name, _)| name.to_owned()))
            .collect()
    }

    fn messages(value: &serde_json::Value, prefix: &str, out: &mut Vec<(String, String)>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    messages(value, &format!("{prefix}.{key}"), out);
                }
            }
            serde_json::Value::String(text) => out.push((prefix.to_owned(), text.clone())),
            _ => {}
        }
    }

    #[test]
    fn every_catalogue_reads_and_has_the_defaults_placeholders() {
        assert_eq!(
            LOCALE_FILES.len(),
            catalogues().len(),
            "a catalogue does not read"
        );
        for language in ["en", "de", "fr", "es"] {
            assert!(catalogue(language).is_some(), "{language}");
        }
        let english: serde_json::Value =
            serde_json::from_str(LOCALE_FILES.iter().find(|(c, _)| *c == "en").unwrap().1).unwrap();
        let mut expected = Vec::new();
        messages(&english, "", &mut expected);
        for (code, text) in LOCALE_FILES {
            let value: serde_json::Value = serde_json::from_str(text).unwrap();
            let mut found = Vec::new();
            messages(&value, "", &mut found);
            for ((key, english), (other_key, translated)) in expected.iter().zip(&found) {
                assert_eq!(key, other_key, "{code}");
                // A date pattern may use the month's number or its name.
                if !key.starts_with(".date.") {
                    assert_eq!(
                        placeholders(english),
                        placeholders(translated),
                        "{code}{key}"
                    );
                }
            }
            assert_eq!(expected.len(), found.len(), "{code}");
        }
    }

    #[test]
    fn amounts_keep_every_digit_in_each_language() {
        let de = catalogue("de").unwrap();
        let fr = catalogue("fr").unwrap();
        let es = catalogue("es").unwrap();
        let en = default();
        assert_eq!(en.money("25.50", "USD"), "25.50 USD");
        assert_eq!(en.number("1234567.000001"), "1,234,567.000001");
        assert_eq!(de.money("1234.50", "EUR"), "1.234,50 EUR");
        assert_eq!(de.number("0.123456789012345678"), "0,123456789012345678");
        assert_eq!(fr.money("1234.5", "USDC"), "1\u{202f}234,5\u{a0}USDC");
        assert_eq!(es.number("1234.5"), "1234,5");
        assert_eq!(es.number("12345.5"), "12.345,5");
        assert_eq!(de.number("25"), "25");
        assert_eq!(de.number("not a number"), "not a number");
    }

    #[test]
    fn dates_in_utc_the_languages_way() {
        // 2026-11-23T09:05:00Z
        let at = 1_795_424_700;
        assert_eq!(
            shared_types::time::format_unix(at).unwrap(),
            "2026-11-23T09:05:00Z"
        );
        assert_eq!(default().date(at), "23 Nov 2026, 09:05 UTC");
        assert_eq!(catalogue("de").unwrap().date(at), "23.11.2026, 09:05 UTC");
        assert_eq!(catalogue("fr").unwrap().date(at), "23/11/2026 09:05 UTC");
        assert_eq!(catalogue("es").unwrap().date(at), "23/11/2026, 09:05 UTC");
    }

    #[test]
    fn accept_language_picks_the_most_wanted_language_spoken() {
        let pick = |h: &str| negotiate(Some(h)).code;
        assert_eq!(negotiate(None).code, "en");
        assert_eq!(pick("de-DE,de;q=0.9,en;q=0.8"), "de");
        assert_eq!(pick("it-IT,fr;q=0.7,en;q=0.5"), "fr");
        assert_eq!(pick("en;q=0.4, es;q=0.9"), "es");
        assert_eq!(pick("fr;q=0, de"), "de");
        assert_eq!(pick("ja, zh-CN"), "en");
        assert_eq!(pick("*"), "en");
        assert_eq!(pick(""), "en");
        assert_eq!(pick(";;;,,,q=,de;q=abc"), "de");
        assert_eq!(pick(&"x".repeat(100_000)), "en");
        assert_eq!(pick(&"de;q=0.1,".repeat(10_000)), "de");
    }

    #[test]
    fn the_documented_locale_pattern_names_every_language_the_page_speaks() {
        let document: serde_json::Value =
            serde_json::from_str(include_str!("../openapi.json")).unwrap();
        let pattern = document["components"]["schemas"]
            .as_object()
            .unwrap()
            .values()
            .find_map(|schema| schema["properties"]["locale"]["pattern"].as_str())
            .expect("the locale option's pattern");
        let spoken: Vec<String> = languages()
            .iter()
            .map(|code| {
                code.chars()
                    .map(|c| format!("[{c}{}]", c.to_ascii_uppercase()))
                    .collect()
            })
            .collect();
        let documented = pattern
            .trim_start_matches("^(auto|(")
            .split(")(")
            .next()
            .unwrap();
        assert_eq!(documented, spoken.join("|"), "{pattern}");
    }

    #[test]
    fn the_shared_locale_rule_names_the_languages_the_page_speaks() {
        // The browser script checks the locale option with shared-types' list of languages
        // before any request: it must be the catalogues' list.
        assert_eq!(languages(), shared_types::checkout::LANGUAGES);
    }
}
