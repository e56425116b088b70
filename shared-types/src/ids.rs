//! Prefixed ids, as Stripe and Svix write them (`evt_…`, `dlv_…`): each kind its own type, so an
//! endpoint id cannot be passed where an event id is meant, and each checked for its prefix and
//! shape where it enters (a path, a cursor, a body), so a malformed one is refused by name
//! before any query.
//!
//! The shape: the kind's prefix, then 1 to 60 ASCII letters, digits, `-` or `_` (what hex and
//! unpadded base64url produce), 64 characters at most in all.

use alloc::borrow::ToOwned;
use alloc::string::String;
use core::fmt;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

/// Longest id of any kind.
pub const MAX_LEN: usize = 64;

/// Why a text is not an id of the kind asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAnId {
    /// What kind was asked for (`event`).
    pub kind: &'static str,
    /// Its prefix (`evt_`).
    pub prefix: &'static str,
}

impl fmt::Display for NotAnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "must be {} id ({}…)", article(self.kind), self.prefix)
    }
}

fn article(kind: &str) -> String {
    let an = kind.starts_with(['a', 'e', 'i', 'o', 'u', 'A', 'E', 'I', 'O', 'U']);
    alloc::format!("{} {kind}", if an { "an" } else { "a" })
}

/// Whether `text` is `prefix` and a body of the ids' shape.
pub fn shaped(text: &str, prefix: &str) -> bool {
    text.len() <= MAX_LEN
        && text.strip_prefix(prefix).is_some_and(|body| {
            !body.is_empty()
                && body
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// The prefix every id of this kind starts with.
            pub const PREFIX: &'static str = $prefix;

            /// The id, if `text` has this kind's prefix and the ids' shape.
            pub fn parse(text: &str) -> Result<Self, NotAnId> {
                if shaped(text, $prefix) {
                    Ok($name(text.to_owned()))
                } else {
                    Err(NotAnId { kind: $kind, prefix: $prefix })
                }
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        /// Read as the text it is, wherever text is taken.
        impl core::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, to: S) -> Result<S::Ok, S::Error> {
                to.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(from: D) -> Result<Self, D::Error> {
                let text = String::deserialize(from)?;
                $name::parse(&text).map_err(de::Error::custom)
            }
        }
    };
}

prefixed_id!(
    /// An event of the outbox and the webhook payloads.
    EventId, "evt_", "event"
);
prefixed_id!(
    /// One delivery of an event to one endpoint.
    DeliveryId, "dlv_", "delivery"
);
prefixed_id!(
    /// A webhook endpoint.
    EndpointId, "ep_", "endpoint"
);
prefixed_id!(
    /// A checkout session.
    SessionId, "cs_", "checkout session"
);
prefixed_id!(
    /// An API client (OAuth `client_id`).
    ClientId, "cli_", "API client"
);
prefixed_id!(
    /// A settlement: one payout to a merchant's wallet.
    SettlementId, "stl_", "settlement"
);
prefixed_id!(
    /// A refund.
    RefundId, "rfd_", "refund"
);
prefixed_id!(
    /// A transaction the treasury signed.
    SendId, "snd_", "send"
);
prefixed_id!(
    /// A sanctions screening decision.
    ScreeningId, "scr_", "screening"
);
prefixed_id!(
    /// The review of a merchant's top-up held by its screening.
    TopupReviewId, "tpr_", "top-up review"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_has_its_kinds_prefix_and_the_shape() {
        assert_eq!(EventId::parse("evt_1").unwrap().as_str(), "evt_1");
        assert!(EventId::parse("evt_AbC-_9").is_ok(), "base64url");
        for bad in [
            "", "evt_", "evt", "dlv_1", "EVT_1", "evt_1 ", "evt_1;", "evt_é",
        ] {
            assert!(EventId::parse(bad).is_err(), "{bad:?}");
        }
        let long = alloc::format!("evt_{}", "a".repeat(60));
        assert!(EventId::parse(&long).is_ok());
        assert!(
            EventId::parse(&alloc::format!("{long}a")).is_err(),
            "65 characters"
        );
    }

    #[test]
    fn a_refusal_names_the_kind_and_its_prefix() {
        assert_eq!(
            DeliveryId::parse("x").unwrap_err().to_string(),
            "must be a delivery id (dlv_…)"
        );
        assert_eq!(
            EndpointId::parse("x").unwrap_err().to_string(),
            "must be an endpoint id (ep_…)"
        );
        assert_eq!(
            ClientId::parse("x").unwrap_err().to_string(),
            "must be an API client id (cli_…)"
        );
    }

    #[test]
    fn ids_are_text_on_the_wire_and_checked_when_read() {
        let id = DeliveryId::parse("dlv_0a1b").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"dlv_0a1b\"");
        assert_eq!(
            serde_json::from_str::<DeliveryId>("\"dlv_0a1b\"").unwrap(),
            id
        );
        assert!(serde_json::from_str::<DeliveryId>("\"evt_0a1b\"").is_err());
    }
}

/// An institution's id: the key every row of its money is scoped by (and, sharded, what names
/// the object that holds it). Its own type, so an institution's id is never passed where a
/// merchant's or a payment's is meant. Written as the number it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InstitutionId(pub i64);

impl fmt::Display for InstitutionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A row of one institution's: its institution and its own id, which always travel together
/// (a statement is keyed by both, and sharded, the first says where the row lives).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scoped<T> {
    /// The institution the row belongs to.
    pub institution: InstitutionId,
    /// The row's own id.
    pub id: T,
}

impl<T> Scoped<T> {
    /// Row `id` of `institution`.
    pub fn new(institution: InstitutionId, id: T) -> Self {
        Scoped { institution, id }
    }
}
