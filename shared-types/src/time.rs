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
/// Accepts an RFC 3339 date-time with an offset (`2026-11-21T04:35:27Z`,
/// `2026-11-21T05:35:27.250+01:00`) or a calendar date (`2026-11-21`, midnight UTC). A date-time
/// without an offset is refused: it names no instant.
pub fn parse_filter_bound(text: &str) -> Option<String> {
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
