//! Typed filters of the list operations. Each builder sets the query parameters the API
//! documents; the server validates them and answers 400 `invalid_request` naming a bad one.

use shared_types::lifecycle::EventType;
use shared_types::Status;

/// A time bound of a `created_after` / `created_before` filter: Unix seconds, or a date-time
/// with an offset (`2026-11-21T04:35:27Z`) or a date (`2026-11-21`, midnight UTC) as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeBound {
    /// Unix seconds.
    Unix(i64),
    /// Text as the API accepts it.
    Text(String),
}

impl From<i64> for TimeBound {
    fn from(secs: i64) -> Self {
        TimeBound::Unix(secs)
    }
}

impl From<&str> for TimeBound {
    fn from(text: &str) -> Self {
        TimeBound::Text(text.to_owned())
    }
}

impl From<String> for TimeBound {
    fn from(text: String) -> Self {
        TimeBound::Text(text)
    }
}

impl TimeBound {
    fn to_param(&self) -> String {
        match self {
            // Out of range: sent as it is, so the API's error names the parameter.
            TimeBound::Unix(secs) => {
                shared_types::time::format_unix(*secs).unwrap_or_else(|| secs.to_string())
            }
            TimeBound::Text(text) => text.clone(),
        }
    }
}

/// Query parameters in the order they were set, one value per name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Params(Vec<(&'static str, String)>);

impl Params {
    fn set(&mut self, name: &'static str, value: String) {
        self.0.retain(|(n, _)| *n != name);
        self.0.push((name, value));
    }

    pub(crate) fn set_cursor(&mut self, cursor: String) {
        self.set("starting_after", cursor);
    }

    pub(crate) fn pairs(&self) -> &[(&'static str, String)] {
        &self.0
    }
}

macro_rules! common {
    ($cursor:ty) => {
        /// Page size, 1 to 100 (the API's default is 25). Streams fetch pages of this size.
        pub fn limit(mut self, limit: u32) -> Self {
            self.params.set("limit", limit.to_string());
            self
        }

        /// Start after this item (the previous page's `next_cursor`).
        pub fn starting_after(mut self, cursor: $cursor) -> Self {
            self.params.set("starting_after", cursor.to_string());
            self
        }

        pub(crate) fn params(&self) -> &Params {
            &self.params
        }
    };
}

macro_rules! created {
    () => {
        /// Created at or after (inclusive).
        pub fn created_after(mut self, bound: impl Into<TimeBound>) -> Self {
            self.params.set("created_after", bound.into().to_param());
            self
        }

        /// Created before (exclusive).
        pub fn created_before(mut self, bound: impl Into<TimeBound>) -> Self {
            self.params.set("created_before", bound.into().to_param());
            self
        }
    };
}

/// Filters of `GET /v1/transactions` (AND), newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransactionQuery {
    params: Params,
}

impl TransactionQuery {
    /// Every transaction.
    pub fn new() -> Self {
        Self::default()
    }

    common!(i64);

    /// One normalized status.
    pub fn status(mut self, status: Status) -> Self {
        self.params.set("status", status.as_str().to_owned());
        self
    }

    /// One merchant's transactions.
    pub fn merchant_id(mut self, id: i64) -> Self {
        self.params.set("merchant_id", id.to_string());
        self
    }

    /// The transactions of one order (your `externalReference`).
    pub fn external_reference(mut self, reference: impl Into<String>) -> Self {
        self.params.set("external_reference", reference.into());
        self
    }

    /// One transaction id.
    pub fn id(mut self, id: i64) -> Self {
        self.params.set("id", id.to_string());
        self
    }

    created!();
}

/// Filters of `GET /v1/merchants`, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MerchantQuery {
    params: Params,
}

impl MerchantQuery {
    /// Every merchant.
    pub fn new() -> Self {
        Self::default()
    }

    common!(i64);

    /// The merchant with your own reference, set at onboarding.
    pub fn psp_reference_id(mut self, reference: impl Into<String>) -> Self {
        self.params.set("psp_reference_id", reference.into());
        self
    }
}

/// Filters of `GET /v1/events`, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventQuery {
    params: Params,
}

impl EventQuery {
    /// Every event.
    pub fn new() -> Self {
        Self::default()
    }

    common!(&str);

    /// One event type.
    pub fn kind(mut self, kind: EventType) -> Self {
        self.params.set("type", kind.as_str().to_owned());
        self
    }

    /// One transaction's events.
    pub fn transaction_id(mut self, id: i64) -> Self {
        self.params.set("transaction_id", id.to_string());
        self
    }

    created!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_set_each_parameter_once_in_order() {
        let query = TransactionQuery::new()
            .status(Status::Paid)
            .limit(10)
            .created_after(0)
            .limit(100)
            .external_reference("order-1");
        assert_eq!(
            query.params().pairs(),
            [
                ("status", "paid".to_owned()),
                ("created_after", "1970-01-01T00:00:00Z".to_owned()),
                ("limit", "100".to_owned()),
                ("external_reference", "order-1".to_owned()),
            ]
        );
        let events = EventQuery::new()
            .kind(EventType::PaymentPaid)
            .starting_after("evt_9");
        assert_eq!(
            events.params().pairs(),
            [
                ("type", "payment.paid".to_owned()),
                ("starting_after", "evt_9".to_owned())
            ]
        );
    }

    #[test]
    fn an_unrepresentable_time_is_sent_as_given_for_the_api_to_refuse() {
        let query = TransactionQuery::new().created_before(i64::MAX);
        assert_eq!(
            query.params().pairs(),
            [("created_before", i64::MAX.to_string())]
        );
    }
}
