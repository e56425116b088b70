//! Why a chain operation did not happen, as a type: what the node did ([`RpcError`]), what it
//! answered that cannot be used, a rule of ours, the configuration or the database. Callers
//! classify by variant, never by text. [`ChainError::public`] is the one rendering that may be
//! shown to an institution or a customer: a node's own words (which may name a provider account
//! or key) stay in the log rendering (`Display`).

use std::fmt;

use super::rpc::RpcError;
use crate::db::DbError;

/// Why a chain operation did not happen.
#[derive(Debug)]
pub enum ChainError {
    /// The node did not answer usefully: unreachable, too slow, too large, an HTTP error, a
    /// JSON-RPC refusal, not JSON-RPC.
    Node(RpcError),
    /// The node answered, but not with something that can be used (a malformed quantity or
    /// log, a value out of range): refused with what is wrong.
    Answer(String),
    /// A rule of ours says not now (the treasury is short, no wallet, no rate, a cap): words
    /// that may be shown as they are.
    Rule(String),
    /// A price feed's answer is older than its configured age.
    Stale(String),
    /// The node's head has not moved for longer than its network allows: its answers describe
    /// the past, and nothing is decided on them.
    StaleHead(String),
    /// The configuration (`PAYRAIL_CHAINS`, a key) cannot be used.
    Config(String),
    /// A database operation failed.
    Db(DbError),
    /// Another error, with what was being done.
    Within(String, Box<ChainError>),
}

/// The result of a chain operation.
pub type ChainResult<T> = Result<T, ChainError>;

impl ChainError {
    /// A rule of ours, in words that may be shown.
    pub fn rule(why: impl Into<String>) -> Self {
        ChainError::Rule(why.into())
    }

    /// An answer that cannot be used.
    pub fn answer(why: impl Into<String>) -> Self {
        ChainError::Answer(why.into())
    }

    /// The same error, saying what was being done (`"the polygon node"`).
    #[must_use]
    pub fn within(self, context: impl Into<String>) -> Self {
        ChainError::Within(context.into(), Box::new(self))
    }

    /// Whether this is the run's node calls being spent (nothing to do with the node).
    pub fn is_budget(&self) -> bool {
        match self {
            ChainError::Node(RpcError::Budget) => true,
            ChainError::Within(_, inner) => inner.is_budget(),
            _ => false,
        }
    }

    /// What may be shown to an institution or a customer: a node's refusal is named, its words
    /// are not.
    pub fn public(&self) -> String {
        match self {
            ChainError::Node(e) => e.public(),
            ChainError::Within(context, inner) => format!("{context}: {}", inner.public()),
            ChainError::Db(_) => "the database could not be read".to_owned(),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for ChainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChainError::Node(e) => e.fmt(f),
            ChainError::Answer(why)
            | ChainError::Rule(why)
            | ChainError::Stale(why)
            | ChainError::StaleHead(why)
            | ChainError::Config(why) => f.write_str(why),
            ChainError::Db(e) => write!(f, "the database: {e}"),
            ChainError::Within(context, inner) => write!(f, "{context}: {inner}"),
        }
    }
}

impl From<RpcError> for ChainError {
    fn from(e: RpcError) -> Self {
        ChainError::Node(e)
    }
}

impl From<DbError> for ChainError {
    fn from(e: DbError) -> Self {
        ChainError::Db(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_own_words_stay_in_the_log() {
        let refused = ChainError::from(RpcError::Refused {
            code: -32005,
            message: "rate limit for key abc123 exceeded".into(),
        })
        .within("the polygon node");
        assert_eq!(
            refused.public(),
            "the polygon node: the node refused a request"
        );
        assert!(refused.to_string().contains("abc123"), "{refused}");
        let rule = ChainError::rule("the treasury holds no USDC on polygon").within("settlement");
        assert_eq!(
            rule.public(),
            "settlement: the treasury holds no USDC on polygon"
        );
        assert_eq!(
            ChainError::from(RpcError::Timeout).public(),
            "the node did not answer within 5 s"
        );
        assert!(ChainError::from(RpcError::Budget)
            .within("settle")
            .is_budget());
        assert!(!refused.is_budget());
    }
}
