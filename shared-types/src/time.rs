//! Timestamps: ISO 8601 UTC with whole seconds on the wire (`2026-11-21T04:35:27Z`), so that
//! text order is time order. In storage, the partner API's first tables keep that text; the
//! newer ones keep Unix seconds, read and shown through [`UnixTime`].

use alloc::string::String;

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// An instant, as Unix seconds: what the database stores (an integer column, so that ranges and
/// order are arithmetic) and what the API shows as the canonical timestamp
/// (`2026-11-21T04:35:27Z`).
///
/// It reads either form, an integer (a database row) or a timestamp (an API body), and always
/// writes the timestamp: one struct serves as the row and as the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnixTime(pub i64);

impl UnixTime {
    /// The Unix seconds.
    pub fn seconds(self) -> i64 {
        self.0
    }

    /// The canonical timestamp, or `None` when out of chrono's range.
    pub fn to_timestamp(self) -> Option<String> {
        format_unix(self.0)
    }
}

/// The canonical timestamp (or the bare seconds, for a time out of chrono's range), as pages show
/// it.
impl core::fmt::Display for UnixTime {
    fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        match format_unix(self.0) {
            Some(text) => f.write_str(&text),
            None => write!(f, "{}", self.0),
        }
    }
}

impl From<i64> for UnixTime {
    fn from(seconds: i64) -> Self {
        UnixTime(seconds)
    }
}

impl Serialize for UnixTime {
    fn serialize<S: Serializer>(&self, to: S) -> Result<S::Ok, S::Error> {
        let text =
            format_unix(self.0).ok_or_else(|| serde::ser::Error::custom("a time out of range"))?;
        to.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for UnixTime {
    fn deserialize<D: Deserializer<'de>>(from: D) -> Result<Self, D::Error> {
        from.deserialize_any(UnixTimeVisitor)
    }
}

struct UnixTimeVisitor;

impl Visitor<'_> for UnixTimeVisitor {
    type Value = UnixTime;

    fn expecting(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        f.write_str("Unix seconds or an RFC 3339 timestamp")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<UnixTime, E> {
        Ok(UnixTime(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<UnixTime, E> {
        i64::try_from(v)
            .map(UnixTime)
            .map_err(|_| E::custom("a time out of range"))
    }

    /// A JavaScript number (how a D1 row carries an integer): whole and within ±2^53.
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<UnixTime, E> {
        const EXACT: f64 = 9_007_199_254_740_992.0;
        #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
        let whole = v as i64;
        #[allow(clippy::cast_precision_loss)]
        if (-EXACT..=EXACT).contains(&v) && whole as f64 == v {
            Ok(UnixTime(whole))
        } else {
            Err(E::custom("a time that is not whole Unix seconds"))
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<UnixTime, E> {
        parse_unix(v)
            .map(UnixTime)
            .ok_or_else(|| E::custom("a time that is not an RFC 3339 timestamp"))
    }
}

/// Formats Unix seconds as the canonical timestamp, or `None` when out of range.
pub fn format_unix(secs: i64) -> Option<String> {
    DateTime::<Utc>::from_timestamp(secs, 0).map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// Parses a canonical or any RFC 3339 timestamp into Unix seconds (fractions dropped).
pub fn parse_unix(text: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp())
}

/// Parses a date-time filter value into the canonical form of the first whole second at or after
/// it, so that `created_at >= bound` and `created_at < bound` stay exact over whole-second data.
///
/// Accepts an RFC 3339 date-time with an upper-case `T` and an offset (`2026-11-21T04:35:27Z`,
/// `2026-11-21T05:35:27.250+01:00`) or an RFC 3339 full-date (`2026-11-21`, midnight UTC), each
/// a day of the calendar and a time of the clock: exactly openapi.json's `TimeBound`. A
/// date-time without an offset is refused: it names no instant. A leap second (`23:59:60`)
/// rounds up to the next minute.
pub fn parse_filter_bound(text: &str) -> Option<String> {
    if !bound_shaped(text) {
        return None;
    }
    let instant = match DateTime::parse_from_rfc3339(text) {
        Ok(t) => t.with_timezone(&Utc),
        Err(_) => NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()
            .filter(|_| text.len() == 10)?
            .and_hms_opt(0, 0, 0)?
            .and_utc(),
    };
    let whole = instant.timestamp() + i64::from(instant.timestamp_subsec_nanos() > 0);
    // Past the year 9999 (a fraction or an offset can carry 9999-12-31 over) the canonical form
    // would be `+10000-…`, which sorts before every stored timestamp: refused, not compared.
    format_unix(whole).filter(|t| !t.starts_with('+'))
}

/// Whether `text` has the shape of `TimeBound`'s patterns:
/// `^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2}))?$` (chrono alone would
/// also take a lower-case `t` or `z`, or a space).
fn bound_shaped(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |range: core::ops::Range<usize>| {
        b.get(range)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    let date = digits(0..4) && at(4, b'-') && digits(5..7) && at(7, b'-') && digits(8..10);
    if !date {
        return false;
    }
    if b.len() == 10 {
        return true;
    }
    let time = at(10, b'T')
        && digits(11..13)
        && at(13, b':')
        && digits(14..16)
        && at(16, b':')
        && digits(17..19);
    if !time {
        return false;
    }
    let mut i = 19;
    if at(i, b'.') {
        let fraction = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if fraction == 0 {
            return false;
        }
        i += 1 + fraction;
    }
    match b.get(i) {
        Some(b'Z') => b.len() == i + 1,
        Some(b'+' | b'-') => {
            b.len() == i + 6 && digits(i + 1..i + 3) && at(i + 3, b':') && digits(i + 4..i + 6)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unix_time_reads_a_row_or_a_body_and_writes_the_timestamp() {
        let t: UnixTime = serde_json::from_str("1795000000").unwrap();
        assert_eq!(t, UnixTime(1_795_000_000));
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#""2026-11-18T11:06:40Z""#
        );
        let back: UnixTime = serde_json::from_str(r#""2026-11-18T11:06:40Z""#).unwrap();
        assert_eq!(back, t);
        let number: UnixTime = serde_json::from_str("1795000000.0").unwrap();
        assert_eq!(number, t, "a JavaScript number, as D1 gives it");
        assert!(serde_json::from_str::<UnixTime>("1795000000.5").is_err());
        assert!(serde_json::from_str::<UnixTime>(r#""yesterday""#).is_err());
        assert!(serde_json::to_string(&UnixTime(i64::MAX)).is_err());
        let none: Option<UnixTime> = serde_json::from_str("null").unwrap();
        assert_eq!(none, None);
    }

    #[test]
    fn formats_whole_seconds_in_utc() {
        assert_eq!(format_unix(0).unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(format_unix(1_795_000_000).unwrap(), "2026-11-18T11:06:40Z");
        assert_eq!(parse_unix("2026-11-18T11:06:40Z"), Some(1_795_000_000));
    }

    #[test]
    fn filter_bounds_are_exactly_the_documented_time_bounds() {
        for good in [
            "2026-11-21",
            "0001-01-01",
            "2024-02-29",
            "2026-11-21T00:00:00Z",
            "2026-11-21T23:59:59.999999999999-23:59",
            "2026-11-21T05:35:27.250+01:00",
        ] {
            assert!(parse_filter_bound(good).is_some(), "{good}");
        }
        assert_eq!(
            parse_filter_bound("2026-12-31T23:59:60Z").unwrap(),
            "2027-01-01T00:00:00Z",
            "a leap second rounds up to the next minute"
        );
        for bad in [
            "0000-00-00",
            "2026-13-01",
            "2026-04-31",
            "2025-02-29",
            "2026-11-21T24:00:00Z",
            "2026-11-21T00:60:00Z",
            "2026-11-21t00:00:00z",
            "2026-11-21 00:00:00Z",
            "2026-11-21T00:00:00",
            "2026-11-21T00:00:00.Z",
            "2026-11-21T00:00:00+01",
            "2026-11-21T00:00:00+24:00",
            "+2026-11-21",
            "2026-11-2",
            "",
        ] {
            assert!(parse_filter_bound(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn filter_bounds_normalise_to_utc_and_round_up() {
        assert_eq!(
            parse_filter_bound("2026-11-21T05:35:27+01:00").unwrap(),
            "2026-11-21T04:35:27Z"
        );
        assert_eq!(
            parse_filter_bound("2026-11-21T04:35:27.001Z").unwrap(),
            "2026-11-21T04:35:28Z"
        );
        assert_eq!(
            parse_filter_bound("2026-11-21").unwrap(),
            "2026-11-21T00:00:00Z"
        );
    }

    #[test]
    fn filter_bounds_refuse_what_names_no_instant() {
        for bad in [
            "",
            "yesterday",
            "2026-11-21T04:35:27",
            "2026-13-01",
            "2026-11-21 04:35:27 01:00",
            "1795000000",
            "2026-1-1",
            "9999-12-31T23:59:59.5Z",
            "9999-12-31T23:30:00-01:00",
        ] {
            assert_eq!(parse_filter_bound(bad), None, "{bad}");
        }
    }
}
