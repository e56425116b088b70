//! Reconciliation of the books with the chain (`chain::books`): what is in flight on a network
//! (so that a difference the chain will soon explain is neither booked nor reported).

use serde::Deserialize;
use worker::D1Database;

use super::{first, DbError, DbResult};

/// What is under way on a network that the books post only once it is final.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct InFlight {
    /// A transaction of the treasury is live (signed, not yet final): its amount and gas may
    /// have left the treasury on chain already.
    pub sends: bool,
    /// A custody sweep is sent and not yet final: money may have moved between custody and
    /// the treasury on chain already.
    pub sweeps: bool,
}

/// The SQL of [`in_flight`]: `?1` the network, `?2` the treasury's address (lower case).
pub const IN_FLIGHT: &str = "SELECT \
     EXISTS (SELECT 1 FROM chain_sends WHERE state = 'live' AND network = ?1 AND sender = ?2) \
       AS sends, \
     EXISTS (SELECT 1 FROM custody_sweeps WHERE state = 'sent' AND network = ?1) AS sweeps";

#[derive(Deserialize)]
struct InFlightRow {
    sends: i64,
    sweeps: i64,
}

/// Whether the treasury (`treasury`, lower case; `""` for none) has a transaction live on
/// `network`, and whether a custody sweep is under way there.
pub async fn in_flight(db: &D1Database, network: &str, treasury: &str) -> DbResult<InFlight> {
    let row: InFlightRow = first(db, IN_FLIGHT, &[network.into(), treasury.into()])
        .await?
        .ok_or_else(|| DbError::bad_row("the in-flight query returned no row"))?;
    Ok(InFlight {
        sends: row.sends != 0,
        sweeps: row.sweeps != 0,
    })
}
