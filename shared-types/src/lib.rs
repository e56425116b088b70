//! What every side of Payrail agrees on and must never drift: the resource models of the partner
//! API, status enums, decimal amounts, the error body, scopes and timestamps.
//!
//! Pure Rust with no platform dependencies, so it builds for the worker (wasm32), the browser
//! script and native receivers alike, and is tested natively with `cargo test`.

pub mod checkout;
pub mod error;
pub mod ledger;
pub mod lifecycle;
pub mod models;
pub mod quote;
pub mod scope;
pub mod status;
pub mod time;
pub mod webhook;

pub use error::{ErrorBody, ErrorCode};
pub use models::{
    Amount, List, ListObject, Merchant, MerchantObject, Networks, TokenResponse, Transaction,
    TransactionObject, TxHashes,
};
pub use scope::{Scope, ScopeSet};
pub use status::{
    refundable, AmountStatus, AttemptOutcome, DeliveryStatus, EndpointStatus, MerchantStatus,
    OnboardingStatus, PortalRole, RawStatus, RefundState, SendState, Status,
};
