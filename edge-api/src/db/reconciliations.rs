//! Reconciliation of the books with the chain (`money::books`): the `reconciliations` table (each
//! comparison of a network's treasury or custody in one asset with the chain, at a confirmed
//! block) and `reconciled_addresses` (each address's last comparison), written only here; and
//! what the comparison reads besides the books: what is in flight on a network, and which
//! custody addresses to read. See migrations 0015 and 0017.

use serde::{Deserialize, Serialize};

use super::notifications::EmailStatus;
use super::{all, first, run, stmt, Db, DbError, DbResult, Returning, Stmt};

/// What is under way on a network that the books post only once it is final.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct InFlight {
    /// A transaction of the treasury is live (signed, not yet final): its amount and gas may
    /// have left the treasury on chain already; or a move of its float to this network is not
    /// yet minted (anyone may mint it, so it may have arrived on chain already).
    pub sends: bool,
    /// A custody sweep is sent and not yet final: money may have moved between custody and
    /// the treasury on chain already.
    pub sweeps: bool,
    /// The newest block in which a transaction of the treasury or a custody sweep ended (was
    /// mined and booked): a balance read at an older block still holds what has left since.
    pub final_block: u64,
}

/// The SQL of [`in_flight`]: `?1` the network, `?2` the treasury's address (lower case).
pub const IN_FLIGHT: &str = "SELECT \
     (EXISTS (SELECT 1 FROM chain_sends WHERE state = 'live' AND network = ?1 AND sender = ?2) \
       OR EXISTS (SELECT 1 FROM float_moves WHERE destination_network = ?1 \
       AND state IN ('burning', 'attesting', 'minting'))) AS sends, \
     EXISTS (SELECT 1 FROM custody_sweeps WHERE state = 'sent' AND network = ?1) AS sweeps, \
     max(COALESCE((SELECT max(block_number) FROM chain_sends WHERE network = ?1 \
       AND sender = ?2 AND state IN ('confirmed', 'failed')), 0), \
       COALESCE((SELECT max(block_number) FROM custody_sweeps WHERE network = ?1 \
       AND state IN ('confirmed', 'failed')), 0)) AS final_block";

#[derive(Deserialize)]
struct InFlightRow {
    sends: i64,
    sweeps: i64,
    final_block: i64,
}

/// Whether the treasury (`treasury`, lower case; `""` for none) has a transaction live on
/// `network`, whether a custody sweep is under way there, and the newest block either ended in.
pub async fn in_flight(db: &Db, network: &str, treasury: &str) -> DbResult<InFlight> {
    let row: InFlightRow = first(db, IN_FLIGHT, &[network.into(), treasury.into()])
        .await?
        .ok_or_else(|| DbError::bad_row("the in-flight query returned no row"))?;
    Ok(InFlight {
        sends: row.sends != 0,
        sweeps: row.sweeps != 0,
        final_block: u64::try_from(row.final_block).unwrap_or(0),
    })
}

/// The SQL of [`custody`]: `?1` network, `?2` token, `?3` now, `?4` the custody gas address
/// (`''` for none), `?5` how many. The watched addresses are those of institutions whose money
/// is in D1 (`super::MONEY_IN_D1`, written out: a constant cannot format another); a held
/// institution's are compared from its object.
const CUSTODY: &str = "WITH candidates AS ( \
       SELECT owner AS address FROM ledger_accounts \
        WHERE kind = 'custody' AND network = ?1 AND token = ?2 \
          AND (debits_posted <> credits_posted OR debits_pending <> '0' \
               OR credits_pending <> '0') \
       UNION SELECT address FROM deposit_watches \
        WHERE watch_until > ?3 AND network = ?1 AND token = ?2 \
        AND institution_id IN (SELECT id FROM institutions WHERE store = 'd1' \
          AND moving_since IS NULL) \
       UNION SELECT address FROM topup_watches WHERE network = ?1 AND token = ?2 \
        AND institution_id IN (SELECT id FROM institutions WHERE store = 'd1' \
          AND moving_since IS NULL) \
       UNION SELECT ?4 WHERE ?4 <> '') \
     SELECT c.address, \
       COALESCE(a.debits_posted, '0') AS debits_posted, \
       COALESCE(a.credits_posted, '0') AS credits_posted, \
       COALESCE((SELECT w.scanned_to FROM deposit_watches w WHERE w.address = c.address \
         AND w.network = ?1 AND w.token = ?2 AND w.watch_until > ?3), \
         (SELECT t.scanned_to FROM topup_watches t WHERE t.address = c.address \
         AND t.network = ?1 AND t.token = ?2)) AS watched_to, \
       COALESCE(r.checked_at, 0) AS reconciled_at \
     FROM candidates c \
     LEFT JOIN ledger_accounts a ON a.id = ?1 || ':' || ?2 || ':custody:' || c.address \
     LEFT JOIN reconciled_addresses r ON r.network = ?1 AND r.token = ?2 \
       AND r.address = c.address \
     WHERE NOT EXISTS (SELECT 1 FROM custody_sweeps s WHERE s.state = 'sent' \
       AND s.network = ?1 AND (s.from_address = c.address OR s.to_address = c.address)) \
     AND NOT EXISTS (SELECT 1 FROM custody_sweeps s JOIN topup_watches t \
       ON t.address = c.address AND t.network = ?1 AND t.token = ?2 \
       WHERE s.network = ?1 AND s.state <> 'sent' AND s.block_number > t.scanned_to \
       AND (s.from_address = c.address OR s.to_address = c.address)) \
     ORDER BY reconciled_at, c.address LIMIT ?5";

/// A custody address to compare with the chain, as the books hold it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Custody {
    /// The address, lower case.
    pub address: String,
    /// Its custody account's debits posted (decimal text; '0' when it has none).
    pub debits_posted: String,
    /// Its credits posted.
    pub credits_posted: String,
    /// While its watch is open: the last block the watcher has read to (what the books can
    /// know of).
    pub watched_to: Option<i64>,
    /// When it was last compared (Unix seconds; 0 never).
    pub reconciled_at: i64,
}

/// The custody addresses of a ledger to compare, at most `limit`, least recently compared
/// first: those whose account holds something, those still watched (checkout deposits and
/// merchants' top-up addresses, which stay watched), and the custody gas address (`gas`, `""` for none); none that a sweep in flight moves money from or to, and no top-up address whose watcher has not yet read past custody's last final transaction of it (the books hold that transaction, the chain at the watcher's block does not yet).
pub async fn custody(
    db: &Db,
    (network, token): (&str, &str),
    gas: &str,
    now: i64,
    limit: i64,
) -> DbResult<Vec<Custody>> {
    all(
        db,
        CUSTODY,
        &[
            network.into(),
            token.into(),
            now.into(),
            gas.into(),
            limit.into(),
        ],
    )
    .await
}

/// [`custody`] in the object of institution `institution`: its custody accounts that hold
/// something, its open deposit watches and its merchants' top-up addresses, at most `limit`, in
/// address order (the caller orders them with D1's by when each was last compared,
/// [`last_compared`], which also says which of them a custody sweep `sent` is moving: those
/// wait). A held institution's top-up addresses are not swept yet.
pub async fn held_custody(
    db: &Db,
    institution: i64,
    (network, token): (&str, &str),
    now: i64,
    limit: i64,
) -> DbResult<Vec<Custody>> {
    all(
        db,
        "WITH candidates AS ( \
           SELECT owner AS address FROM ledger_accounts \
            WHERE kind = 'custody' AND network = ?1 AND token = ?2 \
              AND (debits_posted <> credits_posted OR debits_pending <> '0' \
                   OR credits_pending <> '0') \
           UNION SELECT address FROM deposit_watches \
            WHERE watch_until > ?3 AND network = ?1 AND token = ?2 AND institution_id = ?4 \
           UNION SELECT address FROM topup_watches \
            WHERE network = ?1 AND token = ?2 AND institution_id = ?4) \
         SELECT c.address, \
           COALESCE(a.debits_posted, '0') AS debits_posted, \
           COALESCE(a.credits_posted, '0') AS credits_posted, \
           COALESCE((SELECT w.scanned_to FROM deposit_watches w WHERE w.address = c.address \
             AND w.network = ?1 AND w.token = ?2 AND w.watch_until > ?3 \
             AND w.institution_id = ?4), \
             (SELECT t.scanned_to FROM topup_watches t WHERE t.address = c.address \
             AND t.network = ?1 AND t.token = ?2 AND t.institution_id = ?4)) AS watched_to, \
           0 AS reconciled_at \
         FROM candidates c \
         LEFT JOIN ledger_accounts a ON a.id = ?1 || ':' || ?2 || ':custody:' || c.address \
         ORDER BY c.address LIMIT ?5",
        &[
            network.into(),
            token.into(),
            now.into(),
            institution.into(),
            limit.into(),
        ],
    )
    .await
}

/// What D1 keeps of a held custody address: when it was last compared, and its sweeps.
#[derive(Debug, Clone, Deserialize)]
pub struct Compared {
    /// The address.
    pub address: String,
    /// When it was last compared (Unix seconds; 0 for never).
    pub checked_at: i64,
    /// 1 while a custody sweep from or to it is `sent`: its chain balance moves before its
    /// books do, so it waits, as D1's own do in [`custody`].
    pub sweeping: i64,
    /// The newest block a sweep from or to it was final in (0 for none): a top-up address
    /// whose watch has not read that far yet waits, as D1's do.
    pub swept_in: i64,
}

/// What D1 keeps of each of `addresses` of a ledger held in institutions' objects
/// ([`Compared`]).
pub async fn last_compared(
    db: &Db,
    (network, token): (&str, &str),
    addresses: &[&str],
) -> DbResult<Vec<Compared>> {
    all(
        db,
        "SELECT j.value AS address, \
           COALESCE((SELECT r.checked_at FROM reconciled_addresses r WHERE r.network = ?1 \
             AND r.token = ?2 AND r.address = j.value), 0) AS checked_at, \
           EXISTS (SELECT 1 FROM custody_sweeps s WHERE s.state = 'sent' AND s.network = ?1 \
             AND (s.from_address = j.value OR s.to_address = j.value)) AS sweeping, \
           COALESCE((SELECT max(s.block_number) FROM custody_sweeps s WHERE s.network = ?1 \
             AND s.state <> 'sent' AND (s.from_address = j.value OR s.to_address = j.value)), \
             0) AS swept_in \
         FROM json_each(?3) j",
        &[
            network.into(),
            token.into(),
            serde_json::to_string(addresses).unwrap_or_default().into(),
        ],
    )
    .await
}

/// What a reconciliation compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The treasury's balance with its account.
    Treasury,
    /// Custody addresses' balances with their accounts.
    Custody,
}

impl Scope {
    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Treasury => "treasury",
            Scope::Custody => "custody",
        }
    }
}

/// One address compared: what the chain held at `block`, what the books held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// The address, lower case.
    pub address: String,
    /// The block read.
    pub block: u64,
    /// Base units on chain.
    pub chain: u128,
    /// Base units in the books (its account's posted balance).
    pub book: i128,
}

impl Reading {
    /// Chain minus books.
    pub fn drift(&self) -> i128 {
        i128::try_from(self.chain).unwrap_or(i128::MAX) - self.book
    }
}

#[derive(Serialize)]
struct ReadingJson<'a> {
    address: &'a str,
    block: u64,
    chain: String,
    book: String,
    drift: String,
}

/// A reconciliation to record.
#[derive(Debug, Clone)]
pub struct NewReconciliation<'a> {
    /// Network.
    pub network: &'a str,
    /// Token contract (lower case) or `native`.
    pub token: &'a str,
    /// The asset's symbol.
    pub asset: &'a str,
    /// Treasury or custody.
    pub scope: Scope,
    /// The confirmed block of the comparison.
    pub block: u64,
    /// The addresses read.
    pub readings: &'a [Reading],
    /// Unix seconds.
    pub now: i64,
}

impl NewReconciliation<'_> {
    /// What the chain holds at the addresses read.
    pub fn chain(&self) -> u128 {
        self.readings.iter().map(|r| r.chain).sum()
    }

    /// What the books hold for them.
    pub fn book(&self) -> i128 {
        self.readings.iter().map(|r| r.book).sum()
    }

    /// Chain minus books.
    pub fn drift(&self) -> i128 {
        self.readings.iter().map(Reading::drift).sum()
    }

    fn readings_json(&self) -> String {
        let list: Vec<ReadingJson<'_>> = self
            .readings
            .iter()
            .map(|r| ReadingJson {
                address: &r.address,
                block: r.block,
                chain: r.chain.to_string(),
                book: r.book.to_string(),
                drift: r.drift().to_string(),
            })
            .collect();
        serde_json::to_string(&list).unwrap_or_else(|_| "[]".to_owned())
    }
}

/// The SQL of [`insert`]: `?1` network, `?2` token, `?3` asset, `?4` scope, `?5` block, `?6`
/// chain, `?7` books, `?8` drift, `?9` the readings (JSON), `?10` now. A new drift: an address
/// read differs from the books, by another amount than at its last comparison.
pub const INSERT: &str = "INSERT INTO reconciliations (network, token, asset, scope, \
     block_number, chain_units, book_units, drift, addresses, address_list, new_drift, \
     checked_at) \
     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, json_array_length(?9), \
       (SELECT json_group_array(json_extract(value, '$.address')) FROM json_each(?9)), \
       EXISTS (SELECT 1 FROM json_each(?9) j LEFT JOIN reconciled_addresses a \
         ON a.network = ?1 AND a.token = ?2 AND a.address = json_extract(j.value, '$.address') \
         WHERE json_extract(j.value, '$.drift') <> '0' \
           AND COALESCE(a.drift, '0') <> json_extract(j.value, '$.drift')), \
       ?10 \
     RETURNING id, new_drift";

/// The SQL of [`remember`]: `?1` network, `?2` token, `?3` the readings (JSON), `?4` now.
pub const REMEMBER: &str = "INSERT INTO reconciled_addresses (network, token, address, \
     block_number, chain_units, book_units, drift, checked_at) \
     SELECT ?1, ?2, json_extract(value, '$.address'), json_extract(value, '$.block'), \
       json_extract(value, '$.chain'), json_extract(value, '$.book'), \
       json_extract(value, '$.drift'), ?4 FROM json_each(?3) WHERE true \
     ON CONFLICT (network, token, address) DO UPDATE SET \
       block_number = excluded.block_number, chain_units = excluded.chain_units, \
       book_units = excluded.book_units, drift = excluded.drift, checked_at = excluded.checked_at";

/// Rows kept per network, token and scope besides those that found a new drift.
pub const KEPT: i64 = 100;

/// The SQL of [`prune`]: `?1` network, `?2` token, `?3` scope, `?4` rows kept.
pub const PRUNE: &str = "DELETE FROM reconciliations WHERE network = ?1 AND token = ?2 \
     AND scope = ?3 AND new_drift = 0 AND id <= (SELECT id FROM reconciliations \
       WHERE network = ?1 AND token = ?2 AND scope = ?3 ORDER BY id DESC LIMIT 1 OFFSET ?4)";

/// A recorded reconciliation: its id, and whether it found a new drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Recorded {
    /// Row id.
    pub id: i64,
    /// Whether an address read drifted anew.
    #[serde(deserialize_with = "super::flag")]
    pub new_drift: bool,
}

/// The statement recording `r` (before [`remember`] in its batch: it compares with each
/// address's last comparison).
pub fn insert(r: &NewReconciliation<'_>) -> DbResult<Returning<Recorded>> {
    stmt(
        INSERT,
        &[
            r.network.into(),
            r.token.into(),
            r.asset.into(),
            r.scope.as_str().into(),
            i64::try_from(r.block).unwrap_or(i64::MAX).into(),
            r.chain().to_string().into(),
            r.book().to_string().into(),
            r.drift().to_string().into(),
            r.readings_json().into(),
            r.now.into(),
        ],
    )
    .map(Returning::new)
}

/// The statement remembering each address's comparison in `r`.
pub fn remember(r: &NewReconciliation<'_>) -> DbResult<Stmt> {
    stmt(
        REMEMBER,
        &[
            r.network.into(),
            r.token.into(),
            r.readings_json().into(),
            r.now.into(),
        ],
    )
}

/// The statement forgetting `r`'s network, token and scope's rows beyond the newest [`KEPT`],
/// except those that found a new drift.
pub fn prune(r: &NewReconciliation<'_>) -> DbResult<Stmt> {
    stmt(
        PRUNE,
        &[
            r.network.into(),
            r.token.into(),
            r.scope.as_str().into(),
            KEPT.into(),
        ],
    )
}

/// Records what became of the e-mail about reconciliation `id`'s new drift.
pub async fn emailed(db: &Db, id: i64, status: EmailStatus) -> DbResult<()> {
    run(
        db,
        "UPDATE reconciliations SET email_status = ?2 WHERE id = ?1",
        &[id.into(), status.as_str().into()],
    )
    .await
    .map(drop)
}

#[cfg(test)]
mod tests {
    use rusqlite::{params, Connection};

    use super::*;

    fn database() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        xtask::localdb::apply_migrations(&conn).unwrap();
        conn
    }

    fn reading(address: &str, chain: u128, book: i128) -> Reading {
        Reading {
            address: address.into(),
            block: 7,
            chain,
            book,
        }
    }

    /// Records `readings` as the batch does (insert, remember, prune); whether it was a new
    /// drift.
    fn record(conn: &Connection, scope: Scope, readings: &[Reading], now: i64) -> bool {
        let r = NewReconciliation {
            network: "polygon",
            token: payrail_evm::Token::NATIVE,
            asset: "POL",
            scope,
            block: 7,
            readings,
            now,
        };
        let json = r.readings_json();
        let new: i64 = conn
            .query_row(
                INSERT,
                params![
                    r.network,
                    r.token,
                    r.asset,
                    scope.as_str(),
                    7,
                    r.chain().to_string(),
                    r.book().to_string(),
                    r.drift().to_string(),
                    json,
                    now
                ],
                |row| row.get(1),
            )
            .unwrap();
        conn.execute(REMEMBER, params![r.network, r.token, json, now])
            .unwrap();
        conn.execute(PRUNE, params![r.network, r.token, scope.as_str(), KEPT])
            .unwrap();
        new == 1
    }

    #[test]
    fn a_drift_is_new_once_until_it_changes() {
        let conn = database();
        let t = Scope::Treasury;
        assert!(!record(&conn, t, &[reading("0xt", 10, 10)], 1), "agrees");
        assert!(record(&conn, t, &[reading("0xt", 7, 10)], 2), "new drift");
        assert!(!record(&conn, t, &[reading("0xt", 7, 10)], 3), "the same");
        assert!(record(&conn, t, &[reading("0xt", 6, 10)], 4), "another");
        assert!(
            !record(&conn, t, &[reading("0xt", 10, 10)], 5),
            "agrees again"
        );
        assert!(record(&conn, t, &[reading("0xt", 6, 10)], 6), "new again");
        // Custody: any address drifting anew makes the row new, whatever the others do.
        let c = Scope::Custody;
        let a = reading("0xa", 5, 5);
        assert!(!record(&conn, c, &[a.clone(), reading("0xb", 0, 0)], 7));
        assert!(record(&conn, c, &[a.clone(), reading("0xb", 3, 0)], 8));
        assert!(!record(&conn, c, &[reading("0xb", 3, 0), a.clone()], 9));
        assert!(
            !record(&conn, c, std::slice::from_ref(&a), 10),
            "b not read: nothing new"
        );
        let row: (String, String, String, i64, String) = conn
            .query_row(
                "SELECT chain_units, book_units, drift, addresses, address_list \
                 FROM reconciliations WHERE scope = 'custody' AND new_drift = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .unwrap();
        assert_eq!(
            row,
            (
                "8".into(),
                "5".into(),
                "3".into(),
                2,
                r#"["0xa","0xb"]"#.into()
            )
        );
        let remembered: (String, i64) = conn
            .query_row(
                "SELECT drift, checked_at FROM reconciled_addresses WHERE address = '0xb'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(remembered, ("3".into(), 9));
    }

    #[test]
    fn old_rows_are_pruned_but_new_drifts_are_kept() {
        let conn = database();
        let t = Scope::Treasury;
        record(&conn, t, &[reading("0xt", 1, 2)], 0);
        for now in 1..=250 {
            record(&conn, t, &[reading("0xt", 2, 2)], now);
        }
        let (rows, new): (i64, i64) = conn
            .query_row(
                "SELECT count(*), sum(new_drift) FROM reconciliations",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((rows, new), (KEPT + 1, 1));
        let newest: i64 = conn
            .query_row("SELECT max(checked_at) FROM reconciliations", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(newest, 250);
    }

    #[test]
    fn custody_reads_held_and_watched_addresses_least_recently_compared_first() {
        let conn = database();
        // The watches' sessions and payments do not matter here.
        conn.execute_batch(
            "PRAGMA foreign_keys = OFF; \
             INSERT INTO ledger_accounts (id, network, token, asset, decimals, kind, owner, \
               debits_posted, credits_posted, created_at, updated_at) VALUES \
             ('polygon:native:custody:0xheld', 'polygon', 'native', 'POL', 18, 'custody', \
              '0xheld', '9', '4', 0, 0), \
             ('polygon:native:custody:0xempty', 'polygon', 'native', 'POL', 18, 'custody', \
              '0xempty', '4', '4', 0, 0), \
             ('polygon:native:custody:0xswept', 'polygon', 'native', 'POL', 18, 'custody', \
              '0xswept', '4', '0', 0, 0), \
             ('base:native:custody:0xother', 'base', 'native', 'ETH', 18, 'custody', \
              '0xother', '4', '0', 0, 0); \
             INSERT INTO custody_sweeps (tx_hash, network, token, asset, decimals, kind, \
               from_address, to_address, nonce, units, gas_limit, gas_price, raw, state, \
               created_at, updated_at) VALUES ('0xh', 'polygon', 'native', 'POL', 18, 'sweep', \
               '0xswept', '0xtreasury', 0, '4', 21000, '1', '0x', 'sent', 0, 0); \
             INSERT INTO custody_sweeps (tx_hash, network, token, asset, decimals, kind, \
               from_address, to_address, nonce, units, gas_limit, gas_price, raw, state, \
               block_number, created_at, updated_at) VALUES \
             ('0xs1', 'polygon', 'native', 'POL', 18, 'sweep', '0xlagging', '0xtreasury', 0, \
              '4', 21000, '1', '0x', 'confirmed', 39, 0, 0), \
             ('0xs2', 'polygon', 'native', 'POL', 18, 'sweep', '0xtopup', '0xtreasury', 0, \
              '4', 21000, '1', '0x', 'confirmed', 37, 0, 0); \
             INSERT INTO reconciled_addresses VALUES ('polygon', 'native', '0xheld', 1, '5', \
               '5', '0', 50); \
             INSERT INTO institutions (id, name, created_at, store) VALUES (1, 'one', '', 'd1'), \
               (2, 'held', '', 'd1'); \
             INSERT INTO deposit_watches (address, derivation_index, session_id, \
               transaction_id, network, asset, token, decimals, crypto_amount, base_units, rate, \
               rate_source, quoted_at, from_block, scanned_to, head_block, watch_until, \
               created_at, institution_id) VALUES \
             ('0xwatched', 1, 's1', 1, 'polygon', 'ETH', 'native', 18, '1', '1', '1', 'x', 0, \
              40, 42, 44, 200, 0, 1), \
             ('0xended', 2, 's2', 2, 'polygon', 'ETH', 'native', 18, '1', '1', '1', 'x', 0, \
              40, 42, 44, 50, 0, 1), \
             ('0xtoken', 3, 's3', 3, 'polygon', 'USDC', '0xusdc', 6, '1', '1', '1', 'x', 0, \
              40, 42, 44, 200, 0, 1), \
             ('0xheldcopy', 4, 's4', 4, 'polygon', 'ETH', 'native', 18, '1', '1', '1', 'x', 0, \
              40, 42, 44, 200, 0, 2); \
             INSERT INTO topup_watches (address, token, network, asset, decimals, from_block, \
               scanned_to, head_block, created_at, institution_id) VALUES \
             ('0xtopup', 'native', 'polygon', 'POL', 18, 30, 38, 40, 0, 1), \
             ('0xheldtopup', 'native', 'polygon', 'POL', 18, 30, 38, 40, 0, 2), \
             ('0xtopup', '0xusdc', 'polygon', 'USDC', 6, 30, 41, 44, 0, 1), \
             ('0xlagging', 'native', 'polygon', 'POL', 18, 30, 38, 40, 0, 1); \
             UPDATE institutions SET store = 'object' WHERE id = 2;",
        )
        .unwrap();
        let mut statement = conn.prepare(CUSTODY).unwrap();
        let rows: Vec<(String, String, Option<i64>, i64)> = statement
            .query_map(
                params!["polygon", payrail_evm::Token::NATIVE, 100, "0xgas", 25],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(3)?, r.get(4)?)),
            )
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            rows,
            [
                ("0xgas".into(), "0".into(), None, 0),
                // A top-up address is compared as far as its own asset's watch has read (past
                // its sweep in block 37); one whose watch has not read past its sweep in block
                // 39 waits: the books hold the sweep, the chain at block 38 does not.
                ("0xtopup".into(), "0".into(), Some(38), 0),
                ("0xwatched".into(), "0".into(), Some(42), 0),
                ("0xheld".into(), "9".into(), None, 50),
            ],
            "an institution held in its object is compared from there, not from D1's copy"
        );
    }
}
