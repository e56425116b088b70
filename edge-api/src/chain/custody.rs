//! Custody's addresses and the directory's index of them (`db::deposits`): every address derived
//! from the deposit key, at its index, with the institution it was given to. A checkout or a
//! top-up takes the next index and, in the same batch, its address derived ahead by the cron
//! ([`refill`]), so the address is in the index before anyone sees it; a settlement wallet is
//! checked against the index ([`holds`]), whichever store keeps the deposit. An index taken
//! before its address was derived is derived by its taker and filled in at once; the cron fills
//! any whose filling was lost, and derives a deployment's earlier addresses, a bounded number a
//! run.

use std::collections::HashSet;

use shared_types::ids::InstitutionId;
use shared_types::ErrorCode;

use super::Deriver;
use crate::ctx::Ctx;
use crate::db::deposits::{self, Given, Purpose};
use crate::db::{Batch, BatchResults, Handle, Stmt};
use crate::error::{ApiError, OrInternal};

/// Addresses kept derived ahead of the counter: about three minutes of one checkout a second.
pub const AHEAD: i64 = 200;

/// Most addresses one cron run derives (a deployment's earlier ones and the ones ahead).
pub const DERIVE_PER_RUN: i64 = 1_000;

/// Most addresses a settlement wallet check derives itself (given out but not yet indexed);
/// past that, the cron has fallen behind and the check waits for it (503).
pub const CHECK_DERIVES: i64 = 2_000;

/// A fresh address on `network` given to `institution` for `purpose`, and the index it was
/// derived at: derived by BIP32 at a newly taken index (never reused) on an EVM network with
/// `PAYRAIL_EVM_XPUB` configured; otherwise, in sandbox, a simulated one (no index).
pub async fn fresh(
    ctx: &Ctx,
    network: &str,
    institution: InstitutionId,
    purpose: Purpose,
) -> Result<(String, Option<i64>), ApiError> {
    let Some(deriver) = Deriver::for_network(ctx, network)? else {
        return Ok((super::simulated(network)?, None));
    };
    let mut batch = Batch::new();
    batch.push(deposits::allocate(deriver.family()).or_internal("allocate deposit index")?);
    let given = batch.push(
        deposits::give(deriver.family(), institution, purpose)
            .or_internal("allocate deposit index")?,
    );
    let taken = batch
        .run(&ctx.db)
        .await
        .or_internal("allocate deposit index")?;
    let given = given_in(&taken, given)?
        .ok_or_else(|| ApiError::internal("allocate deposit index", "no index was taken"))?;
    let address = indexed_address(ctx, &deriver, &given).await?;
    Ok((address, Some(given.index)))
}

/// The index a [`deposits::give`] of the batch that answered `taken` gave, if it gave one.
pub fn given_in(taken: &BatchResults, given: Handle<Given>) -> Result<Option<Given>, ApiError> {
    Ok(taken
        .rows(given)
        .or_internal("allocate deposit index")?
        .into_iter()
        .next())
}

/// The address (EIP-55) of index `given`, filled in the directory's index first (a D1
/// statement of its own) if it is derived just now.
pub async fn indexed_address(
    ctx: &Ctx,
    deriver: &Deriver,
    given: &Given,
) -> Result<String, ApiError> {
    let (address, fill) = address_of(deriver, given)?;
    if let Some(fill) = fill {
        crate::db::batch(&ctx.db, vec![fill])
            .await
            .or_internal("index deposit address")?;
    }
    Ok(address)
}

/// The address (EIP-55) of an index just taken: the one derived ahead, or derived now, with the
/// statement that fills it in the index (to run before the address is given out).
pub fn address_of(deriver: &Deriver, given: &Given) -> Result<(String, Option<Stmt>), ApiError> {
    match &given.address {
        Some(address) => Ok((crate::wallet_address::eip55(address), None)),
        None => {
            let address = deriver.address(given.index)?;
            let fill = deposits::fill(deriver.family(), given.index, &address)
                .or_internal("index deposit address")?;
            Ok((address, Some(fill)))
        }
    }
}

/// The cron's part: derives the addresses not yet in the index, from the first index without
/// one up to [`AHEAD`] past the counter, at most [`DERIVE_PER_RUN`] a run, and records how far
/// the index is whole. Concurrent runs derive the same addresses: harmless.
pub async fn refill(ctx: &Ctx) -> Result<(), ApiError> {
    let Some(deriver) = Deriver::deposit_key(ctx)? else {
        return Ok(());
    };
    let family = deriver.family();
    let counter = deposits::counter(&ctx.db, family)
        .await
        .or_internal("read the deposit counter")?;
    let end = (counter.next + AHEAD)
        .min(counter.indexed_to + DERIVE_PER_RUN)
        .min(payrail_evm::derive::MAX_INDEX);
    if end <= counter.indexed_to {
        return Ok(());
    }
    let range = counter.indexed_to..end;
    let have: HashSet<i64> = deposits::with_address(&ctx.db, family, range.clone())
        .await
        .or_internal("read indexed addresses")?
        .into_iter()
        .collect();
    let derived = range
        .filter(|i| !have.contains(i))
        .map(|i| Ok((i, deriver.address(i)?)))
        .collect::<Result<Vec<_>, ApiError>>()?;
    let mut batch = Batch::new();
    batch.extend(deposits::put(family, &derived).or_internal("index deposit addresses")?);
    batch.push(deposits::indexed(family, end).or_internal("index deposit addresses")?);
    batch
        .run(&ctx.db)
        .await
        .or_internal("index deposit addresses")?;
    Ok(())
}

/// Whether `address` (lower-case hex) is one of custody's addresses, given out or derived ahead,
/// whichever store keeps its deposit: in the directory's index, or given out and not yet indexed
/// (derived here and compared). 503 while the cron is too far behind to compare them all.
pub async fn holds(ctx: &Ctx, address: &str) -> Result<bool, ApiError> {
    let read = "read custody addresses";
    // The counter first, then the gap's rows, then the index: an address filled in between is
    // found by the last read.
    let gap = match Deriver::deposit_key(ctx)? {
        Some(deriver) => {
            let counter = deposits::counter(&ctx.db, deriver.family())
                .await
                .or_internal(read)?;
            let gap = counter.unindexed();
            if gap.end - gap.start > CHECK_DERIVES {
                return Err(ApiError::new(
                    ErrorCode::PaymentsUnavailable,
                    "custody's newest addresses are still being indexed, so the wallet cannot \
                     be checked against them now; try again in a minute",
                )
                .with_retry_after(60));
            }
            let have: HashSet<i64> = if gap.is_empty() {
                HashSet::new()
            } else {
                deposits::with_address(&ctx.db, deriver.family(), gap.clone())
                    .await
                    .or_internal(read)?
                    .into_iter()
                    .collect()
            };
            Some((deriver, gap, have))
        }
        None => None,
    };
    if deposits::in_index(&ctx.db, address)
        .await
        .or_internal(read)?
    {
        return Ok(true);
    }
    let Some((deriver, gap, have)) = gap else {
        return Ok(false);
    };
    for index in gap.filter(|i| !have.contains(i)) {
        if deriver.address(index)?.eq_ignore_ascii_case(address) {
            return Ok(true);
        }
    }
    Ok(false)
}
