//! Timestamps: ISO 8601 UTC with whole seconds on the wire and in storage
//! (`2026-11-21T04:35:27Z`), so that text order is time order.

use alloc::string::String;

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};

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
    format_unix(whole)
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
        ] {
            assert_eq!(parse_filter_bound(bad), None, "{bad}");
        }
    }
}
