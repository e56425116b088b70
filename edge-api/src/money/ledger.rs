//! Posting the chain's money movements to the books (`shared_types::ledger`, stored by
//! `db::ledger`): money arriving at deposit addresses, payments credited to merchants,
//! merchants' top-ups,
//! settlements and refunds reserved when signed and posted or voided once final, and the gas
//! every treasury transaction spends. Each function returns the statements that go into the
//! same D1 batch as the state change they record, so the books and the state never disagree.

use std::str::FromStr;

use payrail_evm::Token;
use shared_types::ids::{InstitutionId, Scoped};
use shared_types::ledger::postings::{self, Part as PaymentShare};
use shared_types::ledger::{split, Code, Kind, Ledger, Refusal, Transfer};

use crate::chain::config::{self, NATIVE_DECIMALS};
use crate::chain::error::{ChainError, ChainResult};
use crate::chain::evm;
use crate::ctx::Ctx;
use crate::db::bridges::{Bridge, Carrier};
use crate::db::ledger::{Account, Book, Carried, When};
use crate::db::parts::Part;
use crate::db::sends::{self, Leg, Outgoing, Purpose};
use crate::db::topups::{SeenTopup, TopupReview, TopupWatch};
use crate::db::watches::TransferKind;
use crate::db::watches::{SeenTransfer, Watch};
use crate::db::{refunds, settlements, Db, Stmt};
use crate::error::{ApiError, OrInternal};

/// An asset on a network, as the books name its accounts.
#[derive(Debug, Clone)]
pub struct Asset<'a> {
    /// The network.
    pub network: &'a str,
    /// The token contract or the coin.
    pub token: Token,
    /// Its symbol.
    pub symbol: &'a str,
    /// Its decimals.
    pub decimals: u32,
}

impl Asset<'_> {
    /// Its ledger.
    pub fn ledger(&self) -> Ledger {
        Ledger::new(self.network, &self.token.lower())
    }

    /// Its account of `kind` owned by `owner`.
    pub fn account(&self, kind: Kind, owner: &str) -> Account {
        Account::new(&self.ledger(), (self.symbol, self.decimals), kind, owner)
    }
}

/// The network's coin (what gas is paid in).
pub fn coin(network: &str) -> Asset<'_> {
    Asset {
        network,
        token: Token::Native,
        symbol: config::coin(network),
        decimals: NATIVE_DECIMALS,
    }
}

/// An amount of base units in words: the asset amount and its symbol.
pub fn words(units: i128, asset: &Asset<'_>) -> String {
    let magnitude = evm::from_units(units.unsigned_abs(), asset.decimals).map_or_else(
        || units.unsigned_abs().to_string(),
        |d| d.normalize().to_string(),
    );
    let sign = if units < 0 { "-" } else { "" };
    format!("{sign}{magnitude} {}", asset.symbol)
}

/// Why the books refuse a transfer, in words an institution can act on.
pub fn refusal_words(refusal: &Refusal, asset: &Asset<'_>) -> String {
    match refusal {
        Refusal::Exceeds {
            kind: Kind::Merchant,
            available,
            debt_limit,
            amount,
            ..
        } => format!(
            "the merchant's balance of {} on {} (after what is reserved) does not cover {}; \
             its debt limit is {}",
            words(*available, asset),
            asset.network,
            words(i128::try_from(*amount).unwrap_or(i128::MAX), asset),
            words(i128::try_from(*debt_limit).unwrap_or(i128::MAX), asset),
        ),
        Refusal::Exceeds {
            kind: Kind::Treasury,
            available,
            amount,
            ..
        } => format!(
            "the treasury's books hold {} on {} (after what is reserved); {} are needed",
            words(*available, asset),
            asset.network,
            words(i128::try_from(*amount).unwrap_or(i128::MAX), asset),
        ),
        other => other.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Money arriving

/// The receipts of the confirmed payments among `seen` at `watch`'s address (posted once:
/// a transfer seen again is skipped), written `when` the check's batch applies.
pub async fn receipts(
    ctx: &Ctx,
    db: &Db,
    watch: &Watch,
    seen: &[SeenTransfer<'_>],
    when: &When,
) -> ChainResult<Vec<Stmt>> {
    let asset = Asset {
        network: &watch.network,
        token: watch.token,
        symbol: &watch.asset,
        decimals: watch.decimals,
    };
    let ledger = asset.ledger();
    let transfers: Vec<Transfer> = seen
        .iter()
        .filter(|t| t.confirmed && t.kind == TransferKind::Payment)
        .filter_map(|t| {
            let units = t.amount.as_deref().and_then(|a| u128::from_str(a).ok())?;
            (units > 0).then(|| {
                postings::receipt(&ledger, &watch.address, (t.tx_hash, t.log_index), units)
            })
        })
        .collect();
    if transfers.is_empty() {
        return Ok(Vec::new());
    }
    let accounts = [
        asset.account(Kind::Custody, &watch.address),
        asset.account(Kind::Unallocated, &watch.address),
    ];
    let ids: Vec<String> = transfers.iter().map(|t| t.id.clone()).collect();
    let mut book = Book::load(db, &accounts, &ids, &[]).await?;
    // A receipt is a fact of the chain: recorded whatever the limits.
    record(&mut book, transfers)?;
    Ok(book.statements(when, ctx.now())?)
}

/// The credit of one part of payment `transaction_id` (of `merchant_id`, of
/// `institution_id`): what arrived for it at each of the part's addresses moves from
/// unallocated there to what the merchant is owed, in the part's asset. The first address of
/// the first part keeps the id a payment's credit always had (`credit:{transaction}`).
pub async fn credit(
    ctx: &Ctx,
    db: &Db,
    (index, part): (usize, &Part<'_>),
    (
        Scoped {
            institution: institution_id,
            id: transaction_id,
        },
        merchant_id,
    ): (Scoped<i64>, i64),
    when: &When,
) -> Result<Vec<Stmt>, ApiError> {
    let asset = Asset {
        network: part.network,
        token: part.token,
        symbol: part.asset,
        decimals: part.decimals,
    };
    let ledger = asset.ledger();
    let merchant = asset
        .account(Kind::Merchant, &merchant_id.to_string())
        .of_institution(institution_id);
    let mut accounts = vec![merchant];
    let mut transfers = Vec::new();
    for (address, units) in part.received.iter().filter(|(_, units)| *units > 0) {
        let key = (transaction_id, merchant_id);
        let first = transfers.is_empty() && index == 0;
        transfers.push(if first {
            postings::credit(&ledger, address, key, *units)
        } else {
            postings::credit_at(&ledger, address, key, *units)
        });
        accounts.push(asset.account(Kind::Unallocated, address));
    }
    if transfers.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = transfers.iter().map(|t| t.id.clone()).collect();
    let mut book = Book::load(db, &accounts, &ids, &[])
        .await
        .or_internal("read the books")?;
    for t in transfers {
        // Money that arrived is the merchant's once credited; the unallocated account was
        // credited by the same confirmed transfers, so this never overdraws it.
        book.record(t).or_internal("post a credit")?;
    }
    book.statements(when, ctx.now())
        .or_internal("post a credit")
}

/// The postings of the confirmed transfers among `seen` at the top-up address of `watch`: each
/// one's receipt (custody ← unallocated at the address) and its top-up (unallocated → the
/// merchant), both ids derived from the chain transfer, so one seen again (a later check, a
/// racing cron run) is never posted twice, in `db` (D1, or the object of the institution held
/// there). Written `when` the check's batch applies.
pub async fn topups(
    ctx: &Ctx,
    db: &Db,
    watch: &TopupWatch,
    seen: &[SeenTopup<'_>],
    when: &When,
) -> ChainResult<Vec<Stmt>> {
    let asset = Asset {
        network: &watch.network,
        token: watch.token,
        symbol: &watch.asset,
        decimals: watch.decimals,
    };
    let ledger = asset.ledger();
    let transfers: Vec<Transfer> = seen
        .iter()
        .filter(|t| t.confirmed && t.units > 0)
        .flat_map(|t| {
            let key = (t.tx_hash, t.log_index);
            // One held by its screening is received, not the merchant's: it stays in the
            // address's unallocated account until an admin releases it.
            let topup = t
                .hold
                .is_none()
                .then(|| postings::topup(&ledger, &watch.address, key, watch.merchant_id, t.units));
            std::iter::once(postings::receipt(&ledger, &watch.address, key, t.units)).chain(topup)
        })
        .collect();
    if transfers.is_empty() {
        return Ok(Vec::new());
    }
    let accounts = [
        asset.account(Kind::Custody, &watch.address),
        asset.account(Kind::Unallocated, &watch.address),
        asset
            .account(Kind::Merchant, &watch.merchant_id.to_string())
            .of_institution(watch.institution_id),
    ];
    let ids: Vec<String> = transfers.iter().map(|t| t.id.clone()).collect();
    let mut book = Book::load(db, &accounts, &ids, &[]).await?;
    // Money that arrived is a fact of the chain, and the merchant's once it is final: its
    // receipt credited the unallocated account just before, so the top-up never overdraws it.
    record(&mut book, transfers)?;
    Ok(book.statements(when, ctx.now())?)
}

/// The posting that releases top-up review `r` of `institution` (held by its screening): its
/// top-up (unallocated at the address → the merchant), with the id its credit would have had,
/// so it is posted once whatever happens; in `db` (D1, or the institution's object), written
/// `when` the decision applies.
pub async fn release_topup(
    ctx: &Ctx,
    db: &Db,
    institution: InstitutionId,
    r: &TopupReview,
    when: &When,
) -> Result<Vec<Stmt>, ApiError> {
    let asset = Asset {
        network: &r.network,
        token: r.token,
        symbol: &r.asset,
        decimals: r.decimals,
    };
    let ledger = asset.ledger();
    let units = r.units.parse::<u128>().or_internal("read the units held")?;
    let log_index = u64::try_from(r.log_index).or_internal("read the units held")?;
    let transfer = postings::topup(
        &ledger,
        &r.address,
        (&r.tx_hash, log_index),
        r.merchant_id,
        units,
    );
    let accounts = [
        asset.account(Kind::Unallocated, &r.address),
        asset
            .account(Kind::Merchant, &r.merchant_id.to_string())
            .of_institution(institution),
    ];
    let mut book = Book::load(db, &accounts, std::slice::from_ref(&transfer.id), &[])
        .await
        .or_internal("read the books")?;
    // Its receipt credited the unallocated account when it arrived, and nothing else takes
    // held money from it, so this never overdraws it.
    book.record(transfer)
        .or_internal("post a released top-up")?;
    book.statements(when, ctx.now())
        .or_internal("post a released top-up")
}

// ---------------------------------------------------------------------------------------------
// Settlements and refunds

/// The institution's accounts a settlement of `owners`' merchant in `asset` touches: the
/// merchant (first), its institution's fees and the network fees.
fn merchant_side(
    asset: &Asset<'_>,
    Scoped {
        institution: institution_id,
        id: merchant_id,
    }: Scoped<i64>,
) -> Vec<Account> {
    vec![
        asset
            .account(Kind::Merchant, &merchant_id.to_string())
            .of_institution(institution_id),
        asset.account(Kind::Fees, &institution_id.to_string()),
        asset.account(Kind::NetworkFees, ""),
    ]
}

/// The accounts a settlement of `owners`' merchant in `asset` touches, with the coin's for its
/// gas.
fn settlement_accounts(asset: &Asset<'_>, owners: Scoped<i64>) -> Vec<Account> {
    let gas = coin(asset.network);
    let mut accounts = merchant_side(asset, owners);
    accounts.extend([
        asset.account(Kind::Treasury, ""),
        gas.account(Kind::Treasury, ""),
        gas.account(Kind::Gas, ""),
    ]);
    accounts
}

/// Each payment's part of a settlement transaction, in base units, from its items.
pub fn parts(items: &[settlements::Item]) -> ChainResult<Vec<PaymentShare>> {
    let units = |text: &str| {
        u128::from_str(text).map_err(|_| ChainError::answer(format!("{text} is not an amount")))
    };
    items
        .iter()
        .map(|i| {
            Ok(PaymentShare {
                transaction_id: i.transaction_id,
                psp_units: units(&i.psp_units)?,
                gas_units: units(&i.gas_units)?,
                net_units: units(&i.units)?,
            })
        })
        .collect()
}

/// A settlement about to be signed, reserved in the books.
pub struct Reserved {
    /// The book, to be written with the transaction's batch.
    pub book: Book,
    /// What the transaction pays the merchant: its parts' net less any debt netted.
    pub payout: u128,
}

/// Reserves a settlement transaction `send_id` of `parts` for `merchant_id` (of
/// `institution_id`), signed with at most `gas_wei` of gas: its fees and payout (the parts'
/// net less what the merchant owes) and its gas. `Err` with words when the books cannot cover
/// it (the treasury's, or the merchant's balance is owed to refunds already paid).
pub async fn reserve_settlement(
    ctx: &Ctx,
    asset: &Asset<'_>,
    Scoped {
        institution: institution_id,
        id: merchant_id,
    }: Scoped<i64>,
    send_id: &str,
    parts: &[PaymentShare],
    gas_wei: u128,
) -> ChainResult<Reserved> {
    let accounts = settlement_accounts(asset, Scoped::new(institution_id, merchant_id));
    let mut book = Book::load(&ctx.db, &accounts, &[], &[]).await?;
    let merchant = accounts[0].id();
    let payout = payout_of(book.available(&merchant), parts, asset)?;
    let mut transfers = postings::settlement(
        &asset.ledger(),
        Scoped::new(institution_id, merchant_id),
        send_id,
        parts,
        payout,
        false,
    );
    transfers.extend(postings::gas_reserve(
        &coin(asset.network).ledger(),
        send_id,
        gas_wei,
    ));
    book.post_all(&transfers)
        .map_err(|r| settlement_refusal(&r, asset))?;
    Ok(Reserved { book, payout })
}

/// A settlement of an institution held in its object, reserved in the object.
pub struct HeldReserved {
    /// The institution's half: the fees and the payout against the merchant's balance, to the
    /// object's link to the treasury.
    pub institution: Book,
    /// What the transaction pays the merchant.
    pub payout: u128,
}

/// The institution's accounts a settlement of `owners`' merchant touches in its object: the
/// merchant, the fees, the network fees and the link to the treasury's books.
fn held_accounts(asset: &Asset<'_>, owners: Scoped<i64>) -> Vec<Account> {
    let mut accounts = merchant_side(asset, owners);
    accounts.push(asset.account(Kind::World, split::TREASURY_LINK));
    accounts
}

/// The treasury's accounts a settlement of a held institution touches: its link to the
/// institution, the treasury, and the coin's treasury and gas.
fn treasury_accounts(asset: &Asset<'_>, institution_id: InstitutionId) -> Vec<Account> {
    let gas = coin(asset.network);
    vec![
        asset.account(Kind::World, &split::institution_link(institution_id.0)),
        asset.account(Kind::Treasury, ""),
        gas.account(Kind::Treasury, ""),
        gas.account(Kind::Gas, ""),
    ]
}

/// The halves `side` posts of `transfers` split for `institution` ([`split::split`]).
fn halves(
    transfers: &[Transfer],
    institution: InstitutionId,
    side: split::Side,
) -> ChainResult<Vec<Transfer>> {
    let mut out = Vec::new();
    for t in transfers {
        let halves = split::split(t, institution.0)
            .ok_or_else(|| ChainError::rule(format!("{} names no account", t.id)))?;
        out.extend(match side {
            split::Side::Institution => halves.institution,
            split::Side::Treasury => halves.treasury,
        });
    }
    Ok(out)
}

/// The words for a refusal of a settlement's transfers in `asset` (or its gas, in the coin).
fn settlement_refusal(r: &Refusal, asset: &Asset<'_>) -> ChainError {
    let on = if transfers_of(r, Code::Gas) {
        coin(asset.network)
    } else {
        asset.clone()
    };
    ChainError::rule(refusal_words(r, &on))
}

/// [`reserve_settlement`] of an institution held in its object (`object`), the institution's
/// half: the fees and the payout against the merchant's balance ([`split::split`]); the
/// treasury's half is [`reserve_held_payout`].
pub async fn reserve_held_settlement(
    object: &Db,
    asset: &Asset<'_>,
    owners: Scoped<i64>,
    send_id: &str,
    parts: &[PaymentShare],
) -> ChainResult<HeldReserved> {
    let accounts = held_accounts(asset, owners);
    let mut institution = Book::load(object, &accounts, &[], &[]).await?;
    let payout = payout_of(institution.available(&accounts[0].id()), parts, asset)?;
    let transfers = postings::settlement(&asset.ledger(), owners, send_id, parts, payout, false);
    institution
        .post_all(&halves(
            &transfers,
            owners.institution,
            split::Side::Institution,
        )?)
        .map_err(|r| settlement_refusal(&r, asset))?;
    Ok(HeldReserved {
        institution,
        payout,
    })
}

/// The treasury's half of a held institution's settlement transaction `send_id`: the payout
/// `units` from its link to the institution, against the treasury, and the gas (at most
/// `gas_wei`), in the treasury's books.
pub async fn reserve_held_payout(
    ctx: &Ctx,
    asset: &Asset<'_>,
    owners: Scoped<i64>,
    send_id: &str,
    units: u128,
    gas_wei: u128,
) -> ChainResult<Book> {
    let payout = postings::settlement(&asset.ledger(), owners, send_id, &[], units, false);
    treasury_half(ctx, asset, owners.institution, (payout, send_id, gas_wei)).await
}

/// The treasury's half of `transfers` of held institution `institution` (what its transaction
/// `send_id` pays out), with the transaction's gas (at most `gas_wei`), posted pending in the
/// treasury's books; `Err` with words when they cannot cover it.
async fn treasury_half(
    ctx: &Ctx,
    asset: &Asset<'_>,
    institution: InstitutionId,
    (mut transfers, send_id, gas_wei): (Vec<Transfer>, &str, u128),
) -> ChainResult<Book> {
    let mut book = Book::load(&ctx.db, &treasury_accounts(asset, institution), &[], &[]).await?;
    transfers.extend(postings::gas_reserve(
        &coin(asset.network).ledger(),
        send_id,
        gas_wei,
    ));
    book.post_all(&halves(&transfers, institution, split::Side::Treasury)?)
        .map_err(|r| settlement_refusal(&r, asset))?;
    Ok(book)
}

/// A refund `refund_id` of payment `transaction_id` of `owners`' merchant, held in its
/// institution's object (`object`), reserved there: the institution's half, against the
/// merchant's balance and debt limit ([`split::split`]); the treasury's half is
/// [`reserve_held_refund_payout`], one per attempt. `Err` (409) with words when the merchant's
/// balance cannot cover it.
pub async fn reserve_held_refund(
    object: &Db,
    asset: &Asset<'_>,
    (owners, transaction_id): (Scoped<i64>, i64),
    refund_id: &str,
    units: u128,
) -> Result<Book, ApiError> {
    let accounts = held_accounts(asset, owners);
    let mut book = Book::load(object, &accounts, &[], &[])
        .await
        .or_internal("read the books")?;
    let t = postings::refund(
        &asset.ledger(),
        (transaction_id, owners.id),
        refund_id,
        units,
    );
    let half =
        halves(&[t], owners.institution, split::Side::Institution).or_internal("split a refund")?;
    book.post_all(&half).map_err(|r| {
        ApiError::new(
            shared_types::ErrorCode::Conflict,
            format!("cannot refund now: {}", refusal_words(&r, asset)),
        )
    })?;
    Ok(book)
}

/// The treasury's half of one attempt (`request_id`, the object's request) of a held refund of
/// payment `transaction_id` of `owners`' merchant (a return's `from` its deposit address): the
/// `units` from its link to the institution against the treasury, and the gas (at most
/// `gas_wei`), in the treasury's books.
pub async fn reserve_held_refund_payout(
    ctx: &Ctx,
    asset: &Asset<'_>,
    (owners, transaction_id, from): (Scoped<i64>, i64, Option<&str>),
    request_id: &str,
    (units, gas_wei): (u128, u128),
) -> ChainResult<Book> {
    let ledger = asset.ledger();
    let payout = match from {
        Some(address) => {
            postings::return_extra(&ledger, address, transaction_id, request_id, units)
        }
        None => postings::refund(&ledger, (transaction_id, owners.id), request_id, units),
    };
    treasury_half(
        ctx,
        asset,
        owners.institution,
        (vec![payout], request_id, gas_wei),
    )
    .await
}

/// The statements ending, in the object, the institution's half of what `reference` reserved
/// (a settlement's request, or a refund: a return's `from` its deposit address): posted when its
/// transaction (whichever of its replacements was mined: they all pay the same) succeeded,
/// voided when it failed or the refund was given up; written `when` the request's outcome is
/// recorded.
pub async fn end_held_request(
    ctx: &Ctx,
    object: &Db,
    (asset, owners, from): (&Asset<'_>, Scoped<i64>, Option<&str>),
    reference: &str,
    succeeded: bool,
    when: &When,
) -> ChainResult<Vec<Stmt>> {
    let mut accounts = held_accounts(asset, owners);
    // A return is paid from its deposit address's unallocated money.
    if let Some(address) = from {
        accounts.push(asset.account(Kind::Unallocated, address));
    }
    let mut book = Book::load(object, &accounts, &[], &[]).await?;
    let open = book.open_of(object, reference).await?;
    record(&mut book, postings::end(&open, succeeded))?;
    Ok(book.statements(when, ctx.now())?)
}

/// [`end_send`] of a settlement held in its institution's object: the treasury's half. The
/// payout reserved by the settlement's first transaction (replacements pay the same, and never
/// move it) is posted when one of them succeeded, or voided; the live transaction's gas
/// reservation is voided and the mined one's gas posted.
async fn end_held_send(
    ctx: &Ctx,
    (live, carrier): (&Outgoing, &Outgoing),
    (asset, institution_id): (&Asset<'_>, InstitutionId),
    succeeded: bool,
    gas_wei: u128,
    when: &When,
) -> ChainResult<Vec<Stmt>> {
    let gas = coin(live.network.as_str());
    let mut book = Book::load(&ctx.db, &treasury_accounts(asset, institution_id), &[], &[]).await?;
    let Purpose::Settlement(settlement_id) = live.purpose() else {
        return Err(ChainError::rule("a refund is never held in an object"));
    };
    let mut open = Vec::new();
    for id in crate::db::sends::of_settlement(&ctx.db, settlement_id).await? {
        open.extend(book.open_of(&ctx.db, &id).await?);
    }
    let (reserve, payout): (Vec<Transfer>, Vec<Transfer>) =
        open.into_iter().partition(|t| t.code == Code::Gas);
    let mut ends = postings::end(&reserve, false);
    ends.extend(postings::end(&payout, succeeded));
    ends.extend(postings::gas(&gas.ledger(), &carrier.id, gas_wei));
    record(&mut book, ends)?;
    Ok(book.statements(when, ctx.now())?)
}

/// What a settlement of `parts` pays out when the merchant has `available`: `Err` with words
/// when its debt takes all of it.
fn payout_of(available: i128, parts: &[PaymentShare], asset: &Asset<'_>) -> ChainResult<u128> {
    match postings::payout(available, parts) {
        0 => Err(ChainError::rule(format!(
            "the merchant's balance of {} on {} is owed to refunds already paid; these payments \
             pay that debt first and settle once its balance covers more",
            words(available, asset),
            asset.network
        ))),
        payout => Ok(payout),
    }
}

/// Whether the refusal is about the coin's ledger (gas) rather than the asset's.
fn transfers_of(refusal: &Refusal, code: Code) -> bool {
    code == Code::Gas
        && matches!(refusal, Refusal::Exceeds { account, .. } if account.contains(&format!(":{}:", Token::NATIVE)))
}

/// Reserves a refund `refund_id` of payment `transaction_id` of `merchant_id` (of
/// `institution_id`): `Err` with words when the merchant's balance and debt limit, or the
/// treasury's books, cannot cover it.
pub async fn reserve_refund(
    ctx: &Ctx,
    asset: &Asset<'_>,
    (
        Scoped {
            institution: institution_id,
            id: merchant_id,
        },
        transaction_id,
    ): (Scoped<i64>, i64),
    refund_id: &str,
    units: u128,
) -> Result<Book, ApiError> {
    let accounts = [
        asset
            .account(Kind::Merchant, &merchant_id.to_string())
            .of_institution(institution_id),
        asset.account(Kind::Treasury, ""),
    ];
    let mut book = Book::load(&ctx.db, &accounts, &[], &[])
        .await
        .or_internal("read the books")?;
    let t = postings::refund(
        &asset.ledger(),
        (transaction_id, merchant_id),
        refund_id,
        units,
    );
    book.post(t).map_err(|r| {
        ApiError::new(
            shared_types::ErrorCode::Conflict,
            format!("cannot refund now: {}", refusal_words(&r, asset)),
        )
    })?;
    Ok(book)
}

/// Reserves the return of everything left in deposit `address`'s unallocated account (money
/// that reached it after payment `transaction_id` was credited) as refund `refund_id`: against
/// the treasury in D1, or (`held`: the object holding the institution's money, and the
/// institution) the institution's half in its object, to its link to the treasury (the
/// treasury's half is [`reserve_held_refund_payout`], one per attempt). The book and the units;
/// `Err` (409) when nothing is left there, or the books cannot cover it.
pub async fn reserve_return(
    ctx: &Ctx,
    held: Option<(&Db, InstitutionId)>,
    asset: &Asset<'_>,
    (address, transaction_id): (&str, i64),
    refund_id: &str,
) -> Result<(Book, u128), ApiError> {
    let unallocated = asset.account(Kind::Unallocated, address);
    let (db, other) = match held {
        None => (&ctx.db, asset.account(Kind::Treasury, "")),
        Some((object, _)) => (object, asset.account(Kind::World, split::TREASURY_LINK)),
    };
    let mut book = Book::load(db, &[unallocated.clone(), other], &[], &[])
        .await
        .or_internal("read the books")?;
    let left = u128::try_from(book.available(&unallocated.id())).unwrap_or(0);
    if left == 0 {
        return Err(ApiError::new(
            shared_types::ErrorCode::Conflict,
            format!(
                "nothing that reached {address} after the payment was credited is left to return"
            ),
        ));
    }
    let t = postings::return_extra(&asset.ledger(), address, transaction_id, refund_id, left);
    let posted = match held {
        None => vec![t],
        Some((_, institution)) => {
            halves(&[t], institution, split::Side::Institution).or_internal("split a return")?
        }
    };
    book.post_all(&posted).map_err(|r| {
        ApiError::new(
            shared_types::ErrorCode::Conflict,
            format!("cannot return it now: {}", refusal_words(&r, asset)),
        )
    })?;
    Ok((book, left))
}

/// Reserves the gas of a refund's transaction `send_id` (at most `gas_wei`).
pub async fn reserve_gas(
    ctx: &Ctx,
    network: &str,
    send_id: &str,
    gas_wei: u128,
) -> ChainResult<Book> {
    let gas = coin(network);
    let accounts = [gas.account(Kind::Treasury, ""), gas.account(Kind::Gas, "")];
    let mut book = Book::load(&ctx.db, &accounts, &[], &[]).await?;
    if let Some(t) = postings::gas_reserve(&gas.ledger(), send_id, gas_wei) {
        book.post(t)
            .map_err(|r| ChainError::rule(refusal_words(&r, &gas)))?;
    }
    Ok(book)
}

/// The statements posting a treasury transaction's end, `when` its state change applies: the
/// live transaction's reservations posted (succeeded, and it is the one mined) or voided, a
/// replaced one that was mined after all posted at its own figures, and the gas the mined one
/// spent (`gas_wei`, read from its receipt). A refund's own reservation is posted when it
/// succeeded, and voided when `refund_given_up`.
#[allow(clippy::too_many_arguments)]
pub async fn end_send(
    ctx: &Ctx,
    (live, carrier): (&Outgoing, &Outgoing),
    succeeded: bool,
    gas_wei: u128,
    refund_given_up: bool,
    when: &When,
) -> ChainResult<Vec<Stmt>> {
    let network = live.network.as_str();
    let gas = coin(network);
    let mut accounts = vec![gas.account(Kind::Treasury, ""), gas.account(Kind::Gas, "")];
    let carried = match live.purpose() {
        Purpose::Settlement(id) => {
            settlements::carried(&ctx.db, Scoped::new(live.institution_id, id)).await?
        }
        Purpose::Refund(id) => {
            refunds::carried(&ctx.db, Scoped::new(live.institution_id, id)).await?
        }
        Purpose::FloatMove(id) => {
            return end_float_burn(ctx, (live, carrier), id, succeeded, gas_wei, when).await;
        }
    };
    let asset = match &carried {
        Some(c) => Some(Asset {
            network,
            token: Token::parse(&c.token)
                .map_err(|_| ChainError::answer("a carried asset's token is not an address"))?,
            symbol: &c.symbol,
            decimals: c.decimals,
        }),
        None => None,
    };
    match (live.leg(), &asset, &carried) {
        (Some(Leg::Burn), Some(asset), Some(c)) => {
            return end_burn(
                ctx,
                (live, carrier),
                (asset, c.owners()),
                succeeded,
                gas_wei,
                when,
            )
            .await;
        }
        (Some(Leg::Mint), ..) => {
            return Err(ChainError::answer(
                "a mint's end is recorded with its bridge (ledger::end_mint)",
            ));
        }
        _ => {}
    }
    if let (
        Some(asset),
        Some(Carried {
            held_by: Some(institution),
            ..
        }),
    ) = (&asset, &carried)
    {
        return end_held_send(
            ctx,
            (live, carrier),
            (asset, *institution),
            succeeded,
            gas_wei,
            when,
        )
        .await;
    }
    if let (Some(asset), Some(c)) = (&asset, &carried) {
        accounts.extend(settlement_accounts(asset, c.owners()));
        // A return of money owed to nobody takes it from the deposit's unallocated account.
        if let Some(from) = &c.from_address {
            accounts.push(asset.account(Kind::Unallocated, from));
        }
    }
    let mut book = Book::load(&ctx.db, &accounts, &[], &[]).await?;
    let mut open = book.open_of(&ctx.db, &live.id).await?;
    let refund = match live.purpose() {
        Purpose::Refund(id) => book.open_of(&ctx.db, id).await?,
        Purpose::Settlement(_) | Purpose::FloatMove(_) => Vec::new(),
    };
    let carrier_is_live = carrier.id == live.id;
    // The gas reservation always ends void: the real gas is posted below.
    let (reserve, rest): (Vec<Transfer>, Vec<Transfer>) =
        open.drain(..).partition(|t| t.code == Code::Gas);
    record(&mut book, postings::end(&reserve, false))?;
    record(
        &mut book,
        postings::end(&rest, succeeded && carrier_is_live),
    )?;
    if succeeded && !carrier_is_live {
        if let (Some(asset), Some(c), Purpose::Settlement(_)) =
            (&asset, &carried, carrier.purpose())
        {
            // A transaction it replaced was mined after all: its own figures, posted at once.
            let items =
                settlements::items_of(&ctx.db, Scoped::new(carrier.institution_id, &carrier.id))
                    .await?;
            let parts = parts(&items)?;
            let payout = u128::from_str(&carrier.units).unwrap_or(0);
            record(
                &mut book,
                postings::settlement(
                    &asset.ledger(),
                    c.owners(),
                    &carrier.id,
                    &parts,
                    payout,
                    true,
                ),
            )?;
        }
    }
    if succeeded || refund_given_up {
        record(&mut book, postings::end(&refund, succeeded))?;
    }
    record(
        &mut book,
        postings::gas(&gas.ledger(), &carrier.id, gas_wei),
    )?;
    Ok(book.statements(when, ctx.now())?)
}

/// Records `transfers` in `book` (a chain's facts, a treasury transaction's end: the posts and
/// voids of what it reserved, and what is posted at once); a transfer the book refuses is an
/// `Err` naming why.
fn record(book: &mut Book, transfers: impl IntoIterator<Item = Transfer>) -> ChainResult<()> {
    for t in transfers {
        book.record(t)
            .map_err(|r| ChainError::rule(r.to_string()))?;
    }
    Ok(())
}

/// The open transfers of every transaction of `carrier` (a settlement or a float move) on
/// `network` (a bridge's leg and its replacements, whose reservations stay under the first).
async fn open_of_legs(
    ctx: &Ctx,
    book: &mut Book,
    carrier: Purpose<'_>,
    network: &str,
) -> ChainResult<Vec<Transfer>> {
    let mut open = Vec::new();
    for id in sends::legs_on(&ctx.db, carrier, network).await? {
        open.extend(book.open_of(&ctx.db, &id).await?);
    }
    Ok(open)
}

/// The statements posting the end of a settlement's burn (the first leg of a settlement across
/// networks), `when` its state change applies. Final and succeeded: its fees posted, its payout
/// voided and, in its place, the amount moved from the treasury into the bridge's in-flight
/// account, with the merchant's payout to there pending until the mint ([`end_mint`]).
/// Reverted: everything it reserved voided. Either way its real gas is posted.
async fn end_burn(
    ctx: &Ctx,
    (live, carrier): (&Outgoing, &Outgoing),
    (asset, owners): (&Asset<'_>, Scoped<i64>),
    succeeded: bool,
    gas_wei: u128,
    when: &When,
) -> ChainResult<Vec<Stmt>> {
    let Purpose::Settlement(settlement_id) = live.purpose() else {
        return Err(ChainError::answer("a burn pays no settlement"));
    };
    let gas = coin(&live.network);
    let mut accounts = settlement_accounts(asset, owners);
    accounts.push(asset.account(Kind::Treasury, "bridge"));
    let mut book = Book::load(&ctx.db, &accounts, &[], &[]).await?;
    let open = open_of_legs(ctx, &mut book, live.purpose(), &live.network).await?;
    let (reserve, rest): (Vec<Transfer>, Vec<Transfer>) =
        open.into_iter().partition(|t| t.code == Code::Gas);
    record(&mut book, postings::end(&reserve, false))?;
    if succeeded {
        let (payout, fees): (Vec<Transfer>, Vec<Transfer>) =
            rest.into_iter().partition(|t| t.code == Code::Settlement);
        record(&mut book, postings::end(&fees, true))?;
        record(&mut book, postings::end(&payout, false))?;
        let amount = payout
            .iter()
            .filter(|t| t.phase == shared_types::ledger::Phase::Pending)
            .map(|t| t.amount)
            .sum();
        record(
            &mut book,
            postings::bridge_burnt(&asset.ledger(), owners, settlement_id, amount),
        )?;
    } else {
        record(&mut book, postings::end(&rest, false))?;
    }
    record(
        &mut book,
        postings::gas(&gas.ledger(), &carrier.id, gas_wei),
    )?;
    Ok(book.statements(when, ctx.now())?)
}

/// The treasury's own mint of a bridge, ended: its live transaction, the one of its nonce
/// that was mined, and the gas that one spent (wei, from its receipt).
pub struct MintEnd<'a> {
    /// The live transaction.
    pub live: &'a Outgoing,
    /// The one mined.
    pub carrier: &'a Outgoing,
    /// Its gas and L1 data fee.
    pub gas_wei: u128,
}

/// The statements posting the end of a bridge's second leg, `when` its state change applies:
/// the treasury's mint transaction's gas reservations voided and its real gas posted (`mint`,
/// when the treasury sent one), and, once the message was received on the destination
/// (`received`: by the treasury's mint or anyone's, with the fee it collected), what it carried
/// posted: a settlement's payout into the bridge's in-flight account (the merchant is paid, and
/// nothing of it is in flight any more), or a float move's amount out of flight to CCTP and
/// what was minted into the treasury on the destination ([`postings::float_minted`]).
pub async fn end_mint(
    ctx: &Ctx,
    bridge: &Bridge,
    mint: Option<MintEnd<'_>>,
    received: Option<u128>,
    when: &When,
) -> ChainResult<Vec<Stmt>> {
    let carrier = bridge.carrier();
    let carried = match carrier {
        Carrier::Settlement(settlement) => Some(
            settlements::carried(&ctx.db, settlement)
                .await?
                .ok_or_else(|| ChainError::answer("a bridge's settlement is not stored"))?,
        ),
        Carrier::FloatMove(_) => None,
    };
    // What was burnt: the settlement's asset, or USDC for a float move, which also arrives in
    // the treasury on the destination.
    let (asset, destination) = match &carried {
        Some(c) => (
            Asset {
                network: &bridge.source_network,
                token: Token::parse(&c.token)
                    .map_err(|_| ChainError::answer("a carried asset's token is not an address"))?,
                symbol: &c.symbol,
                decimals: c.decimals,
            },
            None,
        ),
        None => (
            usdc(ctx, &bridge.source_network)?,
            Some(usdc(ctx, &bridge.destination_network)?),
        ),
    };
    let mut accounts = vec![asset.account(Kind::Treasury, "bridge")];
    match (&carried, &destination) {
        (Some(c), _) => accounts.extend(merchant_side(&asset, c.owners())),
        (None, Some(destination)) => accounts.extend([
            asset.account(Kind::World, postings::CCTP),
            asset.account(Kind::World, postings::CCTP_FEE),
            destination.account(Kind::Treasury, ""),
            destination.account(Kind::World, postings::CCTP),
        ]),
        (None, None) => {}
    }
    let gas = coin(&bridge.destination_network);
    if mint.is_some() {
        accounts.extend([gas.account(Kind::Treasury, ""), gas.account(Kind::Gas, "")]);
    }
    let mut book = Book::load(&ctx.db, &accounts, &[], &[]).await?;
    let mut transfers = Vec::new();
    if let Some(MintEnd {
        live,
        carrier: mined,
        gas_wei,
    }) = &mint
    {
        let open = open_of_legs(ctx, &mut book, carrier.purpose(), &live.network).await?;
        transfers.extend(postings::end(&open, false));
        transfers.extend(postings::gas(&gas.ledger(), &mined.id, *gas_wei));
    }
    match (received, carrier) {
        (None, _) => {}
        (Some(_), Carrier::Settlement(settlement)) => {
            let payout = book.open_of(&ctx.db, settlement.id).await?;
            transfers.extend(postings::end(&payout, true));
        }
        (Some(fee), Carrier::FloatMove(id)) => {
            let amount = u128::from_str(&bridge.amount)
                .map_err(|_| ChainError::answer("a stored amount is not a number"))?;
            let destination = destination
                .as_ref()
                .ok_or_else(|| ChainError::answer("a float move's destination has no USDC"))?;
            transfers.extend(postings::float_minted(
                (&asset.ledger(), &destination.ledger()),
                id,
                amount,
                fee,
            ));
        }
    }
    record(&mut book, transfers)?;
    Ok(book.statements(when, ctx.now())?)
}

// ---------------------------------------------------------------------------------------------
// Moves of the treasury's float

/// USDC on `network`, as the books name it (what a float move carries, and a settlement's
/// bridge mints).
pub fn usdc<'a>(ctx: &Ctx, network: &'a str) -> ChainResult<Asset<'a>> {
    let symbol = crate::money::bridge_reads::USDC;
    let chains = ctx
        .chains()
        .map_err(|_| ChainError::Config("PAYRAIL_CHAINS cannot be read".to_owned()))?
        .ok_or_else(|| ChainError::Config("no networks are configured".to_owned()))?;
    let token = chains
        .get(network)
        .and_then(|n| n.tokens.get(symbol))
        .ok_or_else(|| ChainError::rule(format!("{network} has no USDC configured")))?;
    Ok(Asset {
        network,
        token: Token::parse(&token.address)
            .map_err(|_| ChainError::Config(format!("{network}'s USDC is not an address")))?,
        symbol,
        decimals: token.decimals,
    })
}

/// The accounts a float move's burn of `usdc` touches: the treasury's USDC and its in-flight
/// account, the coin's treasury and gas.
fn burn_accounts(usdc: &Asset<'_>) -> [Account; 4] {
    let gas = coin(usdc.network);
    [
        usdc.account(Kind::Treasury, ""),
        usdc.account(Kind::Treasury, "bridge"),
        gas.account(Kind::Treasury, ""),
        gas.account(Kind::Gas, ""),
    ]
}

/// Reserves a float move's burn (`send_id`, of move `move_id`): `amount` of `usdc` from the
/// treasury into flight, and at most `gas_wei` of the network's coin for its gas. `Err` with
/// words when the books cannot cover either (the treasury's balance less what its other
/// transactions reserve).
pub async fn reserve_float_burn(
    ctx: &Ctx,
    usdc: &Asset<'_>,
    (move_id, send_id): (&str, &str),
    amount: u128,
    gas_wei: u128,
) -> ChainResult<Book> {
    let gas = coin(usdc.network);
    let mut book = Book::load(&ctx.db, &burn_accounts(usdc), &[], &[]).await?;
    if let Some(t) = postings::float_burn(&usdc.ledger(), move_id, amount) {
        book.post(t)
            .map_err(|r| ChainError::rule(refusal_words(&r, usdc)))?;
    }
    if let Some(t) = postings::gas_reserve(&gas.ledger(), send_id, gas_wei) {
        book.post(t)
            .map_err(|r| ChainError::rule(refusal_words(&r, &gas)))?;
    }
    Ok(book)
}

/// The statements posting the end of a float move's burn, `when` its state change applies:
/// final and succeeded, the amount it reserved moved into flight; reverted, voided (nothing
/// moved). Either way the legs' gas reservations are voided and the mined one's real gas
/// posted.
async fn end_float_burn(
    ctx: &Ctx,
    (live, carrier): (&Outgoing, &Outgoing),
    move_id: &str,
    succeeded: bool,
    gas_wei: u128,
    when: &When,
) -> ChainResult<Vec<Stmt>> {
    let usdc = usdc(ctx, &live.network)?;
    let gas = coin(&live.network);
    let mut book = Book::load(&ctx.db, &burn_accounts(&usdc), &[], &[]).await?;
    let reserves = open_of_legs(ctx, &mut book, live.purpose(), &live.network).await?;
    record(&mut book, postings::end(&reserves, false))?;
    let amount = book.open_of(&ctx.db, move_id).await?;
    record(&mut book, postings::end(&amount, succeeded))?;
    record(
        &mut book,
        postings::gas(&gas.ledger(), &carrier.id, gas_wei),
    )?;
    Ok(book.statements(when, ctx.now())?)
}

/// The statements moving a replaced transaction's reservations to its replacement `new_id`:
/// the old ones voided; a settlement's fees and payout reserved again at the new `parts` (the
/// payout netted as before), and the gas at its new price `gas_wei`. `Err` with words when the
/// books cannot cover the replacement.
pub async fn replace_send(
    ctx: &Ctx,
    old: &Outgoing,
    new_id: &str,
    parts: Option<&[PaymentShare]>,
    gas_wei: u128,
    when: &When,
) -> ChainResult<(Vec<Stmt>, u128)> {
    let network = old.network.as_str();
    let gas = coin(network);
    let mut accounts = vec![gas.account(Kind::Treasury, ""), gas.account(Kind::Gas, "")];
    let carried = match old.purpose() {
        Purpose::Settlement(id) => {
            settlements::carried(&ctx.db, Scoped::new(old.institution_id, id)).await?
        }
        Purpose::Refund(_) | Purpose::FloatMove(_) => None,
    };
    let asset = match &carried {
        Some(c) => Some(Asset {
            network,
            token: Token::parse(&c.token)
                .map_err(|_| ChainError::answer("a carried asset's token is not an address"))?,
            symbol: &c.symbol,
            decimals: c.decimals,
        }),
        None => None,
    };
    // A settlement held in its institution's object keeps the payout its first transaction
    // reserved (on both sides): a replacement pays the same, and only its gas moves. So does a
    // bridge's leg (its amount is signed into its call); a burn's reservations stay under its
    // first transaction, where its end finds them ([`end_burn`]).
    let held = carried.as_ref().is_some_and(|c| c.held_by.is_some()) || old.leg().is_some();
    if let (Some(asset), Some(c), false) = (&asset, &carried, held) {
        accounts.extend(settlement_accounts(asset, c.owners()));
    }
    let mut book = Book::load(&ctx.db, &accounts, &[], &[]).await?;
    let mut open = book.open_of(&ctx.db, &old.id).await?;
    if held {
        open.retain(|t| t.code == Code::Gas);
    }
    for t in postings::end(&open, false) {
        book.record(t)
            .map_err(|r| ChainError::rule(r.to_string()))?;
    }
    let mut payout = u128::from_str(&old.units).unwrap_or(0);
    let mut transfers = Vec::new();
    if let (Some(asset), Some(c), Some(parts), false) = (&asset, &carried, parts, held) {
        let merchant = asset
            .account(Kind::Merchant, &c.owners().id.to_string())
            .id();
        payout = postings::payout(book.available(&merchant), parts);
        if payout == 0 {
            return Err(ChainError::rule(
                "a replacement would leave the merchant nothing once its debt is netted",
            ));
        }
        transfers = postings::settlement(&asset.ledger(), c.owners(), new_id, parts, payout, false);
    }
    transfers.extend(postings::gas_reserve(&gas.ledger(), new_id, gas_wei));
    book.post_all(&transfers)
        .map_err(|r| ChainError::rule(refusal_words(&r, asset.as_ref().unwrap_or(&gas))))?;
    Ok((book.statements(when, ctx.now())?, payout))
}
