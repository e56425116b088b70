//! The Rust client of the Payrail partner API.
//!
//! - [`Client`]: OAuth 2.0 client credentials with a token cache (refreshed before it expires,
//!   and once more on a 401), typed [`Transaction`] and [`Merchant`] lists as streams that follow
//!   `next_cursor`, typed filters ([`TransactionQuery`], [`MerchantQuery`], [`EventQuery`]),
//!   retries with backoff and jitter on 429 (honouring `Retry-After`) and 5xx, never on other
//!   4xx, timeouts, and errors that carry the API's `error` and `error_description`.
//! - [`webhooks`]: verify a delivery's signature over the raw body (several secrets during a
//!   rotation, a replay window) and parse it into a typed [`webhooks::Event`].
//!
//! ```no_run
//! use futures_util::TryStreamExt;
//! use payrail::{Client, Status, TransactionQuery};
//!
//! # async fn run() -> Result<(), payrail::Error> {
//! let client = Client::new("https://api.payrail.example", "cli_…", "sk_…")?;
//! let mut paid = client.transactions(TransactionQuery::new().status(Status::Paid).limit(100));
//! while let Some(transaction) = paid.try_next().await? {
//!     println!("{} {:?}", transaction.id, transaction.amount.gross);
//! }
//! # Ok(())
//! # }
//! ```

mod client;
mod error;
mod query;
mod retry;
pub mod webhooks;

pub use client::{
    read_limited, CheckoutRequest, CheckoutSession, Client, ClientBuilder, SandboxAction,
    MAX_ANSWER_BYTES,
};
pub use error::{Error, Result};
pub use query::{EventQuery, MerchantQuery, TimeBound, TransactionQuery};
pub use retry::RetryPolicy;
pub use shared_types::ids::{DeliveryId, EventId};
pub use shared_types::lifecycle::EventType;
pub use shared_types::{
    Amount, AmountStatus, List, Merchant, MerchantStatus, Networks, OnboardingStatus, RawStatus,
    Status, Transaction, TxHashes,
};
