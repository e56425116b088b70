//! What every side of Payrail agrees on and must never drift: the resource models of the partner
//! API, status enums, decimal amounts, the error body, scopes and timestamps.
//!
//! Pure Rust with no platform dependencies, so it builds for the worker (wasm32), the browser
//! script and native receivers alike, and is tested natively with `cargo test`.
//!
//! `no_std` + `alloc`: the browser script links no std (its panic and formatting machinery would
//! be most of `checkout.js`'s size), so these rules may use only `core` and `alloc`. The `std`
//! feature (default) turns on the dependencies' std parts for the worker and native tools; the
//! code is the same either way. The checkout rules ([`checkout`]) build their messages without
//! `format!`, which would pull `core::fmt` into the browser script.

#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod checkout;
pub mod error;
pub mod ids;
pub mod ledger;
pub mod lifecycle;
pub mod models;
pub mod quote;
pub mod scope;
pub mod screening;
pub mod status;
pub mod time;
pub mod webhook;

pub use error::{ErrorBody, ErrorCode};
pub use models::{
    Amount, ApiClientObject, DeliveryObject, List, ListObject, Merchant, MerchantObject, Networks,
    TokenResponse, Transaction, TransactionObject, TxHashes,
};
pub use scope::{Scope, ScopeSet};
pub use status::{
    refundable, AmountStatus, AttemptOutcome, DeliveryStatus, EndpointStatus, MerchantStatus,
    OnboardingStatus, PortalRole, RawStatus, RefundState, SendState, Status,
};
