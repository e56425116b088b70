//! Query-string validation for the list operations. Pure: tested natively.
//!
//! Every parameter is checked by name: unknown, repeated, empty or malformed parameters are
//! refused with a description that names the parameter, never ignored.

use std::collections::BTreeMap;

use shared_types::ids::{DeliveryId, EventId};
use shared_types::lifecycle::EventType;
use shared_types::webhook::TEST_EVENT_TYPE;
use shared_types::{time, DeliveryStatus, Status};

/// Largest id we accept: ids cross into JavaScript as f64, exact up to 2^53 - 1.
pub const MAX_ID: i64 = (1 << 53) - 1;
/// Page size when `limit` is absent.
pub const DEFAULT_LIMIT: u32 = 25;
/// Largest page size.
pub const MAX_LIMIT: u32 = 100;
/// Longest reference (`external_reference`, `psp_reference_id`) we accept in a filter.
pub const MAX_REFERENCE_LEN: usize = 255;

/// A refused query string; the text names the parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError(pub String);

/// Filters of `GET /v1/transactions` (spec §4.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TransactionFilter {
    /// Page size, 1 to 100.
    pub limit: u32,
    /// Only ids lower than this.
    pub starting_after: Option<i64>,
    /// Normalized status.
    pub status: Option<Status>,
    /// One merchant.
    pub merchant_id: Option<i64>,
    /// The PSP's order id.
    pub external_reference: Option<String>,
    /// One transaction.
    pub id: Option<i64>,
    /// Inclusive lower bound on `created_at`, canonical form.
    pub created_after: Option<String>,
    /// Exclusive upper bound on `created_at`, canonical form.
    pub created_before: Option<String>,
}

/// Filters of `GET /v1/merchants` (spec §4.3).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MerchantFilter {
    /// Page size, 1 to 100.
    pub limit: u32,
    /// Only ids lower than this.
    pub starting_after: Option<i64>,
    /// One merchant.
    pub id: Option<i64>,
    /// The institution's own reference.
    pub psp_reference_id: Option<String>,
}

/// Filters of `GET /v1/events`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventFilter {
    /// Page size, 1 to 100.
    pub limit: u32,
    /// Only events created before this one (its `evt_…` id): the next page.
    pub starting_after: Option<EventId>,
    /// One event type.
    pub kind: Option<EventType>,
    /// One transaction's events.
    pub transaction_id: Option<i64>,
    /// Created at or after (Unix seconds).
    pub created_after: Option<i64>,
    /// Created before (Unix seconds).
    pub created_before: Option<i64>,
}

impl EventFilter {
    /// Parses the raw query string (without `?`).
    pub fn parse(query: &str) -> Result<Self, QueryError> {
        let mut params = Params::parse(
            query,
            &[
                "limit",
                "starting_after",
                "type",
                "transaction_id",
                "created_after",
                "created_before",
            ],
        )?;
        let starting_after = params
            .take("starting_after")
            .map(|v| {
                EventId::parse(&v).map_err(|e| QueryError(format!("starting_after {e}; got {v:?}")))
            })
            .transpose()?;
        Ok(EventFilter {
            limit: params.limit()?,
            starting_after,
            kind: params
                .take("type")
                .map(|v| {
                    EventType::parse(&v).ok_or_else(|| {
                        QueryError(format!(
                            "type must be one of {}; got {v:?}",
                            one_of(EventType::ALL.iter().map(|t| t.as_str()))
                        ))
                    })
                })
                .transpose()?,
            transaction_id: params.id("transaction_id")?,
            created_after: params.unix("created_after")?,
            created_before: params.unix("created_before")?,
        })
    }
}

impl TransactionFilter {
    /// Parses the raw query string (without `?`).
    pub fn parse(query: &str) -> Result<Self, QueryError> {
        let mut params = Params::parse(
            query,
            &[
                "limit",
                "starting_after",
                "status",
                "merchant_id",
                "external_reference",
                "id",
                "created_after",
                "created_before",
            ],
        )?;
        let filter = TransactionFilter {
            limit: params.limit()?,
            starting_after: params.id("starting_after")?,
            status: params
                .take("status")
                .map(|v| {
                    v.parse::<Status>().map_err(|_| {
                        QueryError(format!(
                            "status must be one of {}; got {v:?}",
                            one_of(Status::ALL.iter().map(|s| s.as_str()))
                        ))
                    })
                })
                .transpose()?,
            merchant_id: params.id("merchant_id")?,
            external_reference: params.reference("external_reference")?,
            id: params.id("id")?,
            created_after: params.timestamp("created_after")?,
            created_before: params.timestamp("created_before")?,
        };
        Ok(filter)
    }
}

impl MerchantFilter {
    /// Parses the raw query string (without `?`).
    pub fn parse(query: &str) -> Result<Self, QueryError> {
        let mut params = Params::parse(
            query,
            &["limit", "starting_after", "id", "psp_reference_id"],
        )?;
        Ok(MerchantFilter {
            limit: params.limit()?,
            starting_after: params.id("starting_after")?,
            id: params.id("id")?,
            psp_reference_id: params.reference("psp_reference_id")?,
        })
    }
}

/// The portal's merchant list: a search and cursor paging.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MerchantSearch {
    /// Page size, 1 to 100.
    pub limit: u32,
    /// Only ids lower than this.
    pub starting_after: Option<i64>,
    /// A name prefix (any case) or an exact `psp_reference_id`.
    pub q: Option<String>,
}

impl MerchantSearch {
    /// Parses the raw query string (without `?`).
    pub fn parse(query: &str) -> Result<Self, QueryError> {
        let mut params = Params::parse(query, &["limit", "starting_after", "q"])?;
        Ok(MerchantSearch {
            limit: params.limit()?,
            starting_after: params.id("starting_after")?,
            q: params.reference("q")?,
        })
    }
}

/// A page of a merchant's statement (`/portal/…/balance/{network}/{token}`): newest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatementQuery {
    /// Page size, 1 to 100.
    pub limit: u32,
    /// Only transfers posted before this one (its `seq`).
    pub starting_after: Option<i64>,
}

impl StatementQuery {
    /// Parses the raw query string (without `?`).
    pub fn parse(query: &str) -> Result<Self, QueryError> {
        let mut params = Params::parse(query, &["limit", "starting_after"])?;
        Ok(StatementQuery {
            limit: params.limit()?,
            starting_after: params.id("starting_after")?,
        })
    }
}

/// Filters of an endpoint's delivery log (`GET /portal/api/webhook-endpoints/{id}/deliveries`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeliveryLogQuery {
    /// Page size, 1 to 100.
    pub limit: u32,
    /// Only deliveries older than this one (a delivery id).
    pub starting_after: Option<DeliveryId>,
    /// One status.
    pub status: Option<DeliveryStatus>,
    /// One event type (`webhook.test` included).
    pub event_type: Option<String>,
    /// Created at or after, Unix seconds.
    pub created_after: Option<i64>,
    /// Created before, Unix seconds.
    pub created_before: Option<i64>,
}

impl DeliveryLogQuery {
    /// Parses the raw query string (without `?`).
    pub fn parse(query: &str) -> Result<Self, QueryError> {
        let mut params = Params::parse(
            query,
            &[
                "limit",
                "starting_after",
                "status",
                "event_type",
                "created_after",
                "created_before",
            ],
        )?;
        Ok(DeliveryLogQuery {
            limit: params.limit()?,
            starting_after: params
                .take("starting_after")
                .map(|v| {
                    DeliveryId::parse(&v)
                        .map_err(|e| QueryError(format!("starting_after {e}; got {v:?}")))
                })
                .transpose()?,
            status: params
                .take("status")
                .map(|v| {
                    v.parse::<DeliveryStatus>().map_err(|_| {
                        QueryError(format!(
                            "status must be one of {}; got {v:?}",
                            one_of(DeliveryStatus::ALL.iter().map(|s| s.as_str()))
                        ))
                    })
                })
                .transpose()?,
            event_type: params
                .take("event_type")
                .map(|v| {
                    if EventType::parse(&v).is_some() || v == TEST_EVENT_TYPE {
                        Ok(v)
                    } else {
                        Err(QueryError(format!(
                            "event_type {v:?} is not an event type; the types are {}, {}",
                            one_of(EventType::ALL.iter().map(|t| t.as_str())),
                            TEST_EVENT_TYPE
                        )))
                    }
                })
                .transpose()?,
            created_after: params.unix("created_after")?,
            created_before: params.unix("created_before")?,
        })
    }
}

/// A time bound given as an ISO 8601 date-time with an offset or a date, in Unix seconds;
/// refused with a description naming `name`.
pub fn parse_time_bound(name: &str, value: &str) -> Result<i64, QueryError> {
    time::parse_filter_bound(value)
        .and_then(|t| time::parse_unix(&t))
        .ok_or_else(|| bad_time(name, value))
}

fn bad_time(name: &str, value: &str) -> QueryError {
    QueryError(format!(
        "{name} must be an ISO 8601 date-time with an offset, such as 2026-11-21T00:00:00Z, or a \
         date such as 2026-11-21, no later than 9999-12-31T23:59:59Z (percent-encode a \"+\" \
         offset as %2B); got {value:?}"
    ))
}

/// Parses a path segment as an id; `None` when it is not one.
pub fn parse_id(text: &str) -> Option<i64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<i64>()
        .ok()
        .filter(|id| (1..=MAX_ID).contains(id))
}

struct Params(BTreeMap<String, String>);

impl Params {
    fn parse(query: &str, known: &[&str]) -> Result<Self, QueryError> {
        let mut map = BTreeMap::new();
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            if !known.contains(&name.as_ref()) {
                return Err(QueryError(format!(
                    "unknown parameter {name:?}; this operation accepts {}",
                    one_of(known.iter().copied())
                )));
            }
            if value.is_empty() {
                return Err(QueryError(format!("{name} must not be empty")));
            }
            if map.insert(name.to_string(), value.into_owned()).is_some() {
                return Err(QueryError(format!("{name} must be given at most once")));
            }
        }
        Ok(Params(map))
    }

    fn take(&mut self, name: &str) -> Option<String> {
        self.0.remove(name)
    }

    fn limit(&mut self) -> Result<u32, QueryError> {
        match self.take("limit") {
            None => Ok(DEFAULT_LIMIT),
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|n| v.bytes().all(|b| b.is_ascii_digit()) && (1..=MAX_LIMIT).contains(n))
                .ok_or_else(|| {
                    QueryError(format!(
                        "limit must be an integer from 1 to {MAX_LIMIT}; got {v:?}"
                    ))
                }),
        }
    }

    fn id(&mut self, name: &str) -> Result<Option<i64>, QueryError> {
        self.take(name)
            .map(|v| {
                parse_id(&v).ok_or_else(|| {
                    QueryError(format!(
                        "{name} must be a positive integer no greater than {MAX_ID}; got {v:?}"
                    ))
                })
            })
            .transpose()
    }

    fn reference(&mut self, name: &str) -> Result<Option<String>, QueryError> {
        self.take(name)
            .map(|v| {
                if v.chars().count() > MAX_REFERENCE_LEN {
                    Err(QueryError(format!(
                        "{name} must be at most {MAX_REFERENCE_LEN} characters"
                    )))
                } else {
                    Ok(v)
                }
            })
            .transpose()
    }

    fn timestamp(&mut self, name: &str) -> Result<Option<String>, QueryError> {
        self.take(name)
            .map(|v| time::parse_filter_bound(&v).ok_or_else(|| bad_time(name, &v)))
            .transpose()
    }

    fn unix(&mut self, name: &str) -> Result<Option<i64>, QueryError> {
        self.take(name)
            .map(|v| parse_time_bound(name, &v))
            .transpose()
    }
}

fn one_of<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(result: Result<impl std::fmt::Debug, QueryError>) -> String {
        result.expect_err("should be refused").0
    }

    #[test]
    fn a_statement_page_takes_a_limit_and_a_cursor() {
        assert_eq!(
            StatementQuery::parse("").unwrap(),
            StatementQuery {
                limit: 25,
                starting_after: None
            }
        );
        assert_eq!(
            StatementQuery::parse("limit=100&starting_after=42").unwrap(),
            StatementQuery {
                limit: 100,
                starting_after: Some(42)
            }
        );
        assert!(err(StatementQuery::parse("starting_after=-1")).contains("starting_after"));
        assert!(err(StatementQuery::parse("limit=0")).contains("limit"));
        assert!(err(StatementQuery::parse("status=paid")).contains("unknown parameter"));
    }

    #[test]
    fn defaults() {
        let f = TransactionFilter::parse("").unwrap();
        assert_eq!(f.limit, 25);
        assert_eq!(
            f,
            TransactionFilter {
                limit: 25,
                ..Default::default()
            }
        );
    }

    #[test]
    fn parses_every_transaction_filter() {
        let f = TransactionFilter::parse(
            "limit=100&starting_after=900&status=partially_refunded&merchant_id=3\
             &external_reference=order%2042&id=7&created_after=2026-11-01\
             &created_before=2026-11-21T10:00:00.5%2B01:00",
        )
        .unwrap();
        assert_eq!(f.limit, 100);
        assert_eq!(f.starting_after, Some(900));
        assert_eq!(f.status, Some(Status::PartiallyRefunded));
        assert_eq!(f.merchant_id, Some(3));
        assert_eq!(f.external_reference.as_deref(), Some("order 42"));
        assert_eq!(f.id, Some(7));
        assert_eq!(f.created_after.as_deref(), Some("2026-11-01T00:00:00Z"));
        assert_eq!(f.created_before.as_deref(), Some("2026-11-21T09:00:01Z"));
    }

    #[test]
    fn refusals_name_the_parameter() {
        for (query, name) in [
            ("limit=0", "limit"),
            ("limit=101", "limit"),
            ("limit=+5", "limit"),
            ("limit=ten", "limit"),
            ("id=abc", "id"),
            ("id=-1", "id"),
            ("id=0", "id"),
            ("id=9007199254740992", "id"),
            ("merchant_id=1.5", "merchant_id"),
            ("starting_after=", "starting_after"),
            ("status=PAID", "status"),
            ("status=succeeded", "status"),
            ("created_after=yesterday", "created_after"),
            ("created_before=2026-11-21T10:00:00", "created_before"),
            ("colour=blue", "colour"),
            ("status=paid&status=failed", "status"),
        ] {
            let message = err(TransactionFilter::parse(query));
            assert!(message.contains(name), "{query}: {message}");
        }
    }

    #[test]
    fn merchant_filters() {
        let f = MerchantFilter::parse("psp_reference_id=m-1&limit=5&starting_after=10").unwrap();
        assert_eq!(f.psp_reference_id.as_deref(), Some("m-1"));
        assert_eq!(f.limit, 5);
        assert_eq!(f.starting_after, Some(10));
        assert!(err(MerchantFilter::parse("status=paid")).contains("status"));
        let long = "x".repeat(256);
        assert!(
            err(MerchantFilter::parse(&format!("psp_reference_id={long}")))
                .contains("psp_reference_id")
        );
    }

    #[test]
    fn delivery_log_filters() {
        let q = DeliveryLogQuery::parse(
            "status=failed&event_type=webhook.test&created_after=2026-11-01&limit=5&starting_after=dlv_1",
        )
        .unwrap();
        assert_eq!(q.status, Some(DeliveryStatus::Failed));
        assert_eq!(q.event_type.as_deref(), Some("webhook.test"));
        assert_eq!(q.limit, 5);
        assert_eq!(q.starting_after.as_deref(), Some("dlv_1"));
        assert!(q.created_after.is_some());
        for (query, name) in [
            ("status=done", "status"),
            ("event_type=payment.lost", "event_type"),
            ("created_before=soon", "created_before"),
            ("limit=0", "limit"),
            ("colour=blue", "colour"),
            ("status=failed&status=pending", "status"),
        ] {
            let message = err(DeliveryLogQuery::parse(query));
            assert!(message.contains(name), "{query}: {message}");
        }
    }

    #[test]
    fn path_ids() {
        assert_eq!(parse_id("42"), Some(42));
        assert_eq!(parse_id("042"), Some(42));
        for bad in ["", "0", "-3", "4.0", "x", "9007199254740992", "+4"] {
            assert_eq!(parse_id(bad), None, "{bad}");
        }
    }
}
