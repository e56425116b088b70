//! OAuth scopes (spec §5.4) and space-separated scope sets (RFC 6749 §3.3).

use alloc::borrow::ToOwned;
use alloc::string::String;
use core::fmt;

use crate::status::UnknownValue;

/// One scope a client can be granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Read transactions.
    TransactionsRead,
    /// Read merchants.
    MerchantsRead,
    /// Read the events feed (`GET /v1/events`).
    EventsRead,
    /// Drive the sandbox lifecycle (`POST /sandbox/transactions/{id}/{action}`); granted only to
    /// sandbox clients.
    SandboxWrite,
}

impl Scope {
    /// Every scope, in canonical order.
    pub const ALL: [Scope; 4] = [
        Scope::TransactionsRead,
        Scope::MerchantsRead,
        Scope::EventsRead,
        Scope::SandboxWrite,
    ];

    /// The scope token.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TransactionsRead => "transactions:read",
            Self::MerchantsRead => "merchants:read",
            Self::EventsRead => "events:read",
            Self::SandboxWrite => "sandbox:write",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Self::TransactionsRead => 1,
            Self::MerchantsRead => 2,
            Self::SandboxWrite => 4,
            Self::EventsRead => 8,
        }
    }
}

impl core::str::FromStr for Scope {
    type Err = UnknownValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s)
            .ok_or(UnknownValue)
    }
}

/// A set of scopes; its text form is space-separated in canonical order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScopeSet(u8);

/// Why a scope string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeError {
    /// A token that is not a known scope.
    Unknown(String),
    /// The string has no scope in it.
    Empty,
}

impl fmt::Display for ScopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown(token) => write!(f, "unknown scope {token:?}"),
            Self::Empty => f.write_str("no scope given"),
        }
    }
}

impl core::error::Error for ScopeError {}

impl ScopeSet {
    /// Parses a space-separated scope list (RFC 6749 §3.3: `scope-token *( SP scope-token )`).
    /// Repeated scopes are accepted once; an empty list is refused.
    pub fn parse(text: &str) -> Result<Self, ScopeError> {
        let mut set = ScopeSet::default();
        for token in text.split(' ').filter(|t| !t.is_empty()) {
            let scope = token
                .parse::<Scope>()
                .map_err(|_| ScopeError::Unknown(token.to_owned()))?;
            set = set.with(scope);
        }
        if set.is_empty() {
            return Err(ScopeError::Empty);
        }
        Ok(set)
    }

    /// This set plus one scope.
    pub fn with(self, scope: Scope) -> Self {
        ScopeSet(self.0 | scope.bit())
    }

    /// Whether the set holds `scope`.
    pub fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    /// Whether every scope of `self` is in `other`.
    pub fn is_subset_of(self, other: ScopeSet) -> bool {
        self.0 & !other.0 == 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The scopes in canonical order.
    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.contains(*s))
    }
}

impl FromIterator<Scope> for ScopeSet {
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> Self {
        iter.into_iter().fold(ScopeSet::default(), ScopeSet::with)
    }
}

impl fmt::Display for ScopeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, scope) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            f.write_str(scope.as_str())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_canonically() {
        let set = ScopeSet::parse("merchants:read transactions:read merchants:read").unwrap();
        assert_eq!(set.to_string(), "transactions:read merchants:read");
        assert!(set.contains(Scope::MerchantsRead));
    }

    #[test]
    fn refuses_unknown_and_empty() {
        assert_eq!(
            ScopeSet::parse("transactions:write"),
            Err(ScopeError::Unknown("transactions:write".into()))
        );
        assert_eq!(ScopeSet::parse("  "), Err(ScopeError::Empty));
    }

    #[test]
    fn subset() {
        let t: ScopeSet = [Scope::TransactionsRead].into_iter().collect();
        let all: ScopeSet = Scope::ALL.into_iter().collect();
        assert!(t.is_subset_of(all));
        assert!(!all.is_subset_of(t));
    }
}
