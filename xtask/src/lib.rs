//! Project commands as a library, so the black-box tests seed their databases with exactly the
//! code that `scripts/dev` uses (and derive the custody gas address the sweep uses).

pub mod attestation;
pub mod demo;
pub mod float;
pub mod localdb;
pub mod moves;
pub mod reconcile;
pub mod sdn;
pub mod secrets;
pub mod sweep;
