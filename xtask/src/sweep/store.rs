//! What the sweep reads and writes in D1, with the same statements as the other operator
//! commands (through `wrangler d1 execute --remote` in production, on the local D1's file
//! locally): the deposits
//! whose watch has ended, the sweeps already stored, and each new transaction, stored before it
//! is broadcast. The insert is what makes two sweeps at once safe: a transaction takes its
//! sender's nonce (`custody_sweeps_nonce` is unique), and a gas funding is refused while an
//! earlier one to the same deposit is not yet spent by a sweep.

use std::collections::BTreeMap;

use payrail_credentials::sql::Literal;
use serde::Deserialize;
use serde_json::Value;

use shared_types::ledger::reads::{Part, PAGE};

use crate::reconcile::Books;
use crate::secrets::{execute, render_batch, Target};

/// A deposit whose watch has ended, or an asset of a merchant's top-up address.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Deposit {
    /// Its address, lower case.
    pub address: String,
    /// The custody account's child it was derived at.
    pub derivation_index: i64,
    /// Network name.
    pub network: String,
    /// Asset code.
    pub asset: String,
    /// The token contract (lower case) or `native`.
    pub token: String,
    /// Its decimals.
    pub decimals: u32,
    /// For a merchant's top-up address (which stays watched): what the books hold there in the
    /// asset, posted (its custody account's debits and credits, decimal text). `None` for a
    /// checkout's deposit.
    #[serde(default)]
    pub booked: Option<(String, String)>,
    /// The institution whose object keeps its books (its custody account); `None` for D1's.
    #[serde(default)]
    pub held_by: Option<i64>,
}

impl Deposit {
    /// Whether it is a merchant's top-up address.
    pub fn is_topup(&self) -> bool {
        self.booked.is_some()
    }

    /// What the books hold at a top-up address, at least 0 (`None` for a checkout's deposit).
    pub fn booked_units(&self) -> Result<Option<u128>, String> {
        let Some((debits, credits)) = &self.booked else {
            return Ok(None);
        };
        let number = |text: &str| {
            text.parse::<i128>()
                .map_err(|_| format!("the books hold {text:?}, not an amount"))
        };
        let held = number(debits)? - number(credits)?;
        Ok(Some(u128::try_from(held).unwrap_or(0)))
    }
}

/// A top-up watch's row, as read.
#[derive(Deserialize)]
struct TopupRow {
    address: String,
    derivation_index: i64,
    network: String,
    asset: String,
    token: String,
    decimals: u32,
    debits_posted: String,
    credits_posted: String,
}

impl TopupRow {
    /// The top-up address's asset to sweep, its books' figures with it; `held_by` the
    /// institution whose object keeps them (`None`: D1).
    fn deposit(self, held_by: Option<i64>) -> Deposit {
        Deposit {
            address: self.address,
            derivation_index: self.derivation_index,
            network: self.network,
            asset: self.asset,
            token: self.token,
            decimals: self.decimals,
            booked: Some((self.debits_posted, self.credits_posted)),
            held_by,
        }
    }
}

/// A stored sweep transaction.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Stored {
    /// Its hash.
    pub tx_hash: String,
    /// `sweep` or `gas`.
    pub kind: String,
    /// The token contract (lower case) or `native`.
    pub token: String,
    /// Sender, lower case.
    pub from_address: String,
    /// Receiver, lower case.
    pub to_address: String,
    /// Its nonce.
    pub nonce: i64,
    /// Base units (or wei) moved, decimal text.
    pub units: String,
    /// Gas limit.
    pub gas_limit: i64,
    /// Wei per gas, decimal text.
    pub gas_price: String,
    /// The signed bytes.
    pub raw: String,
    /// `sent`, `confirmed` or `failed`.
    pub state: String,
    /// Unix seconds.
    pub created_at: i64,
}

/// A transaction to store before it is broadcast.
pub struct NewSweep<'a> {
    /// Its hash.
    pub tx_hash: &'a str,
    /// Network name.
    pub network: &'a str,
    /// The token contract or `native`.
    pub token: &'a str,
    /// The asset's symbol.
    pub asset: &'a str,
    /// Its decimals.
    pub decimals: u32,
    /// `sweep` or `gas`.
    pub kind: &'a str,
    /// Sender, lower case.
    pub from: &'a str,
    /// Receiver, lower case.
    pub to: &'a str,
    /// Its nonce.
    pub nonce: u64,
    /// Base units (or wei) moved.
    pub units: u128,
    /// Gas limit.
    pub gas_limit: u64,
    /// Wei per gas.
    pub gas_price: u128,
    /// The signed bytes.
    pub raw: &'a str,
    /// Unix seconds.
    pub now: i64,
    /// For a gas funding: how many sweeps from its deposit the signer saw when it decided the
    /// deposit needs gas. Stored only if that is still so: a sweep stored since (another
    /// signer's) makes the funding needless, and the signer looks again.
    pub sweeps_seen: usize,
    /// For a sweep: its destination's (the treasury's) screening, clear, kept with it.
    pub screened: Option<&'a Screened>,
    /// The institution whose object keeps the deposit's books: the worker posts the
    /// transaction as a half in that object and a half in the treasury's books.
    pub held_by: Option<i64>,
}

/// What screening the treasury on one network read, clear: the sanctions oracle and the block
/// it answered at (none where the network has no oracle), and the operator's list's version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screened {
    /// The oracle read and its block.
    pub oracle: Option<(String, u64)>,
    /// The operator's list's version.
    pub list_version: i64,
}

/// What the operator's list says of the treasury: its version, and the entry naming the
/// treasury (`source: entry (listed date)`) if one does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListRead {
    /// The list's version (the time of its last change; 0 when it never had an entry).
    pub version: i64,
    /// The entry naming the treasury.
    pub named_by: Option<String>,
}

/// Each statement's rows of wrangler's `--json` answer.
fn all_rows(stdout: &str) -> Result<Vec<Value>, String> {
    let answer: Value = serde_json::from_str(stdout)
        .map_err(|_| format!("unexpected output from wrangler:\n{stdout}"))?;
    answer
        .as_array()
        .map(|all| all.iter().map(|r| r["results"].clone()).collect())
        .ok_or_else(|| format!("unexpected output from wrangler:\n{stdout}"))
}

/// The rows of statement `n` of an answer, as `R`.
fn nth<R: for<'de> Deserialize<'de>>(answers: &[Value], n: usize) -> Result<Vec<R>, String> {
    let rows = answers
        .get(n)
        .cloned()
        .ok_or("wrangler answered fewer statements than it was given")?;
    serde_json::from_value(rows).map_err(|e| format!("unexpected rows from wrangler: {e}"))
}

/// The rows of the last statement of wrangler's `--json` answer.
fn rows<R: for<'de> Deserialize<'de>>(stdout: &str) -> Result<Vec<R>, String> {
    let answers = all_rows(stdout)?;
    nth(&answers, answers.len().saturating_sub(1))
}

fn integer(n: u64) -> Result<i64, String> {
    i64::try_from(n).map_err(|_| format!("{n} is out of range"))
}

/// The deposits whose watch has ended, of the institutions whose money is in D1 (D1's rows of
/// an institution held in its object are the copy it was made from: its object keeps the
/// deposits' books, [`held_deposits`]; a moving institution's wait for its move to end).
const ENDED: &str = "SELECT address, derivation_index, network, asset, token, decimals \
     FROM deposit_watches WHERE watch_until < ?1 \
     AND institution_id IN (SELECT id FROM institutions WHERE store = 'd1' \
      AND moving_since IS NULL) \
     ORDER BY network, derivation_index";
/// The institutions held in their objects.
const HELD: &str = "SELECT id FROM institutions WHERE store = 'object' ORDER BY id";
/// Every asset of every merchant's top-up address, with what the books hold there (posted):
/// top-up addresses stay watched, and only what the watcher has booked, final at its depth, is
/// swept. Its tokens before its coin, so a token's gas can come from its coin.
const TOPUPS: &str = "SELECT w.address, a.derivation_index, w.network, w.asset, w.token, \
     w.decimals, COALESCE(l.debits_posted, '0') AS debits_posted, \
     COALESCE(l.credits_posted, '0') AS credits_posted \
     FROM topup_watches w JOIN topup_addresses a ON a.address = w.address \
      AND a.institution_id = w.institution_id \
     LEFT JOIN ledger_accounts l ON l.id = w.network || ':' || w.token || ':custody:' || w.address \
     WHERE w.institution_id IN (SELECT id FROM institutions WHERE store = 'd1' \
      AND moving_since IS NULL) \
     ORDER BY w.network, a.derivation_index, w.token = 'native', w.token";
/// The sweeps that still matter to them: those that may still be mined (`sent`), and gas
/// fundings no sweep has spent yet.
const OPEN: &str =
    "SELECT tx_hash, kind, token, from_address, to_address, nonce, units, gas_limit, \
     gas_price, raw, state, created_at FROM custody_sweeps g WHERE (g.state = 'sent' \
     OR (g.kind = 'gas' AND g.state <> 'failed' AND NOT EXISTS (SELECT 1 FROM custody_sweeps s \
      WHERE s.network = g.network AND s.kind = 'sweep' AND s.from_address = g.to_address \
      AND s.created_at >= g.created_at))) \
     AND (g.held_by IS NOT NULL OR EXISTS (SELECT 1 FROM deposit_watches w WHERE w.watch_until < ?1 \
      AND w.network = g.network \
      AND w.address = CASE g.kind WHEN 'sweep' THEN g.from_address ELSE g.to_address END) \
      OR EXISTS (SELECT 1 FROM topup_watches t WHERE t.network = g.network \
      AND t.address = CASE g.kind WHEN 'sweep' THEN g.from_address ELSE g.to_address END)) \
     ORDER BY created_at, nonce";
/// One deposit's sweeps and fundings, as [`OPEN`] and after.
const OF_DEPOSIT: &str = "SELECT tx_hash, kind, token, from_address, to_address, nonce, units, \
     gas_limit, gas_price, raw, state, created_at FROM custody_sweeps WHERE network = ?1 \
     AND ((kind = 'sweep' AND from_address = ?2) OR (kind = 'gas' AND to_address = ?2)) \
     ORDER BY created_at, nonce";
/// The highest nonce of the gas address's transactions that may still be mined, per network.
const GAS_NONCES: &str = "SELECT network, max(nonce) AS nonce FROM custody_sweeps \
     WHERE from_address = ?1 AND state = 'sent' GROUP BY network";
/// The addresses the treasury's transactions were sent from (the worker's treasury), per
/// network.
/// What the operator's list says of the treasury (`?1`), as the worker reads it for any address
/// (`db::screenings::list_says`): the list's version and the first entry naming it.
const TREASURY_LISTED: &str =
    "SELECT (SELECT COALESCE(MAX(MAX(added_at, COALESCE(removed_at, 0))), 0) \
     FROM sanctioned_addresses) AS version, l.source, l.entry, l.listed_on \
     FROM (SELECT 1) LEFT JOIN (SELECT source, entry, listed_on FROM sanctioned_addresses \
     WHERE address = ?1 AND removed_at IS NULL ORDER BY source LIMIT 1) AS l";
const TREASURY_SENDERS: &str =
    "SELECT DISTINCT network, lower(sender) AS sender FROM chain_sends ORDER BY network";

/// What a sweep starts from, read in one go.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The deposits whose watch has ended, by network and index, then every asset of the
    /// merchants' top-up addresses.
    pub deposits: Vec<Deposit>,
    /// Their sweeps still `sent`, and their gas fundings not yet spent by a sweep.
    pub open: Vec<Stored>,
    /// The next nonce stored transactions leave the custody gas address, per network.
    pub gas_next: BTreeMap<String, u64>,
    /// The treasury's address as the worker sends from it, per network (where it has sent).
    pub treasury: BTreeMap<String, Vec<String>>,
    /// What the operator's list says of the treasury.
    pub list: ListRead,
    /// The institutions held in their objects, by id.
    pub held: Vec<i64>,
}

/// Reads what a sweep at `now` (Unix seconds) to `treasury` starts from, with the custody gas
/// address `gas`: one batch of statements.
pub fn snapshot(target: &Target, now: i64, gas: &str, treasury: &str) -> Result<Snapshot, String> {
    #[derive(Deserialize)]
    struct Listed {
        version: i64,
        source: Option<String>,
        entry: Option<String>,
        listed_on: Option<String>,
    }
    #[derive(Deserialize)]
    struct Nonce {
        network: String,
        nonce: Option<i64>,
    }
    #[derive(Deserialize)]
    struct Sender {
        network: String,
        sender: String,
    }
    let when = [Literal::Integer(now)];
    let answers = all_rows(&execute(
        &render_batch(&[
            (ENDED, &when),
            (OPEN, &when),
            (GAS_NONCES, &[Literal::Text(gas)]),
            (TREASURY_SENDERS, &[]),
            (TOPUPS, &[]),
            (TREASURY_LISTED, &[Literal::Text(treasury)]),
            (HELD, &[]),
        ])?,
        target,
    )?)?;
    let mut snapshot = Snapshot {
        deposits: nth(&answers, 0)?,
        open: nth(&answers, 1)?,
        ..Snapshot::default()
    };
    for t in nth::<TopupRow>(&answers, 4)? {
        snapshot.deposits.push(t.deposit(None));
    }
    if let Some(listed) = nth::<Listed>(&answers, 5)?.into_iter().next() {
        snapshot.list = ListRead {
            version: listed.version,
            named_by: listed.source.map(|source| {
                format!(
                    "{source}: {} (listed {})",
                    listed.entry.unwrap_or_default(),
                    listed.listed_on.unwrap_or_default()
                )
            }),
        };
    }
    #[derive(Deserialize)]
    struct Held {
        id: i64,
    }
    snapshot.held = nth::<Held>(&answers, 6)?
        .into_iter()
        .map(|h| h.id)
        .collect();
    for n in nth::<Nonce>(&answers, 2)? {
        if let Some(nonce) = n.nonce.and_then(|n| u64::try_from(n).ok()) {
            snapshot.gas_next.insert(n.network, nonce + 1);
        }
    }
    for s in nth::<Sender>(&answers, 3)? {
        snapshot
            .treasury
            .entry(s.network)
            .or_default()
            .push(s.sender);
    }
    Ok(snapshot)
}

/// Every sweep from `address` on `network`, and every gas funding to it, oldest first (read
/// again when another signer took a nonce).
pub fn of_deposit(target: &Target, network: &str, address: &str) -> Result<Vec<Stored>, String> {
    rows(&execute(
        &render_batch(&[(
            OF_DEPOSIT,
            &[Literal::Text(network), Literal::Text(address)],
        )])?,
        target,
    )?)
}

/// A held deposit as its object's books list it ([`Part::Deposits`]).
#[derive(Deserialize)]
struct HeldRow {
    #[serde(flatten)]
    deposit: Deposit,
    watch_until: i64,
}

/// What the institutions `held` in their objects have to sweep, each naming its institution:
/// their deposits whose watch ended before `now`, then every asset of their merchants' top-up
/// addresses with what the object's books hold there. Read from each one's object (`books`'
/// stores: locally its file, remotely through the worker's operator endpoint), page by page.
pub fn held_deposits(books: &Books, held: &[i64], now: i64) -> Result<Vec<Deposit>, String> {
    let mut out = Vec::new();
    if held.is_empty() {
        return Ok(out);
    }
    for store in books.stores()? {
        let Some(institution) = store.institution()? else {
            continue; // D1 itself
        };
        if !held.contains(&institution) {
            continue; // an object the directory does not point at (a copy not yet flipped)
        }
        let mut after = -1;
        loop {
            let rows = store.part(&Part::Deposits { after })?;
            let page = rows.len();
            for row in rows {
                let HeldRow {
                    deposit,
                    watch_until,
                } = serde_json::from_value(Value::Object(row))
                    .map_err(|e| format!("institution {institution}'s deposits: {e}"))?;
                after = after.max(deposit.derivation_index);
                if watch_until < now {
                    out.push(Deposit {
                        held_by: Some(institution),
                        ..deposit
                    });
                }
            }
            if i64::try_from(page).unwrap_or(i64::MAX) < PAGE {
                break;
            }
        }
        let mut after = -1;
        loop {
            let rows = store.part(&Part::Topups { after })?;
            if rows.is_empty() {
                break;
            }
            for row in rows {
                let t: TopupRow = serde_json::from_value(Value::Object(row))
                    .map_err(|e| format!("institution {institution}'s top-ups: {e}"))?;
                after = after.max(t.derivation_index);
                out.push(t.deposit(Some(institution)));
            }
        }
    }
    Ok(out)
}

/// Stores `sweep` as `sent`, unless its sender's nonce is taken (by another transaction, or by
/// this one stored by another signer: signing is deterministic), or (a gas funding) an earlier
/// funding of its deposit is not yet spent by a sweep. Whether this call stored it: only then
/// may it broadcast it.
pub fn insert(target: &Target, sweep: &NewSweep<'_>) -> Result<bool, String> {
    #[derive(Deserialize)]
    struct Inserted {
        #[allow(dead_code)]
        tx_hash: String,
    }
    let inserted: Vec<Inserted> = rows(&execute(&insert_sql(sweep)?, target)?)?;
    Ok(!inserted.is_empty())
}

/// [`insert`]'s statement, with its values written in: it returns the row it inserted.
fn insert_sql(sweep: &NewSweep<'_>) -> Result<String, String> {
    let units = sweep.units.to_string();
    let price = sweep.gas_price.to_string();
    let oracle = sweep
        .screened
        .and_then(|s| s.oracle.as_ref())
        .map(|(o, b)| (o.as_str(), b));
    let statements: [(&str, &[Literal<'_>]); 1] = [(
        "INSERT INTO custody_sweeps (tx_hash, network, token, asset, decimals, kind, \
             from_address, to_address, nonce, units, gas_limit, gas_price, raw, state, \
             created_at, updated_at, screened_oracle, screened_block, screened_list_version, \
             held_by) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 'sent', ?14, ?14, \
             ?16, ?17, ?18, ?19 \
             WHERE NOT EXISTS (SELECT 1 FROM custody_sweeps WHERE network = ?2 \
              AND from_address = ?7 AND nonce = ?9) \
             AND (?6 <> 'gas' OR NOT EXISTS (SELECT 1 FROM custody_sweeps g \
              WHERE g.network = ?2 AND g.kind = 'gas' AND g.to_address = ?8 \
              AND g.state <> 'failed' AND NOT EXISTS (SELECT 1 FROM custody_sweeps s \
               WHERE s.network = ?2 AND s.kind = 'sweep' AND s.from_address = ?8 \
               AND s.created_at >= g.created_at))) \
             AND (?6 <> 'gas' OR (SELECT count(*) FROM custody_sweeps s WHERE s.network = ?2 \
              AND s.kind = 'sweep' AND s.from_address = ?8) = ?15) \
             ON CONFLICT DO NOTHING RETURNING tx_hash",
        &[
            Literal::Text(sweep.tx_hash),
            Literal::Text(sweep.network),
            Literal::Text(sweep.token),
            Literal::Text(sweep.asset),
            Literal::Integer(i64::from(sweep.decimals)),
            Literal::Text(sweep.kind),
            Literal::Text(sweep.from),
            Literal::Text(sweep.to),
            Literal::Integer(integer(sweep.nonce)?),
            Literal::Text(&units),
            Literal::Integer(integer(sweep.gas_limit)?),
            Literal::Text(&price),
            Literal::Text(sweep.raw),
            Literal::Integer(sweep.now),
            Literal::Integer(integer(
                u64::try_from(sweep.sweeps_seen).unwrap_or(u64::MAX),
            )?),
            oracle.map_or(Literal::Null, |(o, _)| Literal::Text(o)),
            match oracle {
                Some((_, block)) => Literal::Integer(integer(*block)?),
                None => Literal::Null,
            },
            sweep
                .screened
                .map_or(Literal::Null, |s| Literal::Integer(s.list_version)),
            sweep.held_by.map_or(Literal::Null, Literal::Integer),
        ],
    )];
    render_batch(&statements)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_last_statements_rows() {
        let stdout = r#"[{"results": [], "success": true, "meta": {}},
                        {"results": [{"found": 1}], "success": true, "meta": {}}]"#;
        #[derive(Deserialize)]
        struct Found {
            found: i64,
        }
        let found: Vec<Found> = rows(stdout).unwrap();
        assert_eq!(found[0].found, 1);
        assert!(rows::<Found>("not json").is_err());
    }

    fn new_sweep<'a>(
        kind: &'a str,
        hash: &'a str,
        (from, to): (&'a str, &'a str),
        nonce: u64,
        now: i64,
    ) -> NewSweep<'a> {
        NewSweep {
            tx_hash: hash,
            network: "polygon",
            token: "native",
            asset: "POL",
            decimals: 18,
            kind,
            from,
            to,
            nonce,
            units: 1_000,
            gas_limit: 21_000,
            gas_price: 30,
            raw: "0x02ab",
            now,
            sweeps_seen: 0,
            screened: None,
            held_by: None,
        }
    }

    /// Runs [`insert`]'s statement on the real schema: whether it stored the row.
    fn stored(conn: &rusqlite::Connection, sweep: &NewSweep<'_>) -> bool {
        let sql = insert_sql(sweep).unwrap();
        let mut statement = conn.prepare(sql.trim_end_matches(";\n")).unwrap();
        let returned: Vec<String> = statement
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        !returned.is_empty()
    }

    #[test]
    fn a_nonce_is_taken_once_and_a_deposit_is_funded_once_until_its_sweep() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::localdb::apply_migrations(&conn).unwrap();
        let (gas, deposit, treasury) = ("0xgas", "0xdep", "0xtreasury");
        // Two signers fund the deposit with the gas address's same nonce: one is stored.
        assert!(stored(
            &conn,
            &new_sweep("gas", "0xa1", (gas, deposit), 0, 100)
        ));
        assert!(!stored(
            &conn,
            &new_sweep("gas", "0xa2", (gas, deposit), 0, 100)
        ));
        // The same signed bytes from another signer: stored once, broadcast by that one.
        assert!(!stored(
            &conn,
            &new_sweep("gas", "0xa1", (gas, deposit), 0, 100)
        ));
        // A second funding of the deposit, at the next nonce, waits for its sweep.
        assert!(!stored(
            &conn,
            &new_sweep("gas", "0xa3", (gas, deposit), 1, 101)
        ));
        // Its sweep takes the deposit's nonce once.
        assert!(stored(
            &conn,
            &new_sweep("sweep", "0xb1", (deposit, treasury), 0, 102)
        ));
        assert!(!stored(
            &conn,
            &new_sweep("sweep", "0xb2", (deposit, treasury), 0, 102)
        ));
        // A signer that decided before that sweep was stored (it saw none) funds nothing: the
        // sweep it did not see may have made the funding needless.
        assert!(!stored(
            &conn,
            &new_sweep("gas", "0xa4", (gas, deposit), 1, 103)
        ));
        // Spent by that sweep, the funding no longer holds back the next one, decided on it.
        assert!(stored(
            &conn,
            &NewSweep {
                sweeps_seen: 1,
                screened: None,
                ..new_sweep("gas", "0xa4", (gas, deposit), 1, 103)
            }
        ));
        let rows: i64 = conn
            .query_row(
                "SELECT count(*) FROM custody_sweeps WHERE state = 'sent'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(rows, 3);
    }

    #[test]
    fn top_up_addresses_are_swept_as_far_as_the_books_hold_them_tokens_first() {
        // Institution 2 is held in its object: D1's rows of its top-up address are a copy, and
        // are never read as D1's.
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::localdb::apply_migrations(&conn).unwrap();
        conn.execute_batch(
            "PRAGMA foreign_keys = OFF; \
             INSERT INTO institutions (id, name, created_at, store) VALUES \
               (1, 'In D1', '2026-11-28T00:00:00Z', 'd1'), \
               (2, 'Held', '2026-11-28T00:00:00Z', 'd1'); \
             INSERT INTO topup_addresses (address, derivation_index, merchant_id, institution_id, \
               network, from_block, created_by, created_at) \
               VALUES ('0xtop', 7, 1, 1, 'polygon', 10, 'a', 0), \
               ('0xheld', 8, 2, 2, 'polygon', 10, 'a', 0); \
             INSERT INTO topup_watches (address, token, network, asset, decimals, from_block, \
               scanned_to, head_block, created_at, institution_id) VALUES \
             ('0xtop', 'native', 'polygon', 'POL', 18, 10, 20, 22, 0, 1), \
             ('0xtop', '0xusdc', 'polygon', 'USDC', 6, 10, 20, 22, 0, 1), \
             ('0xheld', 'native', 'polygon', 'POL', 18, 10, 20, 22, 0, 2); \
             UPDATE institutions SET store = 'object' WHERE id = 2; \
             INSERT INTO ledger_accounts (id, network, token, asset, decimals, kind, owner, \
               debits_posted, credits_posted, created_at, updated_at) VALUES \
             ('polygon:0xusdc:custody:0xtop', 'polygon', '0xusdc', 'USDC', 6, 'custody', \
              '0xtop', '25000000', '20000000', 0, 0);",
        )
        .unwrap();
        let sql = render_batch(&[(TOPUPS, &[])]).unwrap();
        let mut statement = conn.prepare(sql.trim_end_matches(";\n")).unwrap();
        let rows: Vec<(String, i64, String, String)> = statement
            .query_map([], |r| Ok((r.get(4)?, r.get(1)?, r.get(6)?, r.get(7)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            rows,
            [
                ("0xusdc".into(), 7, "25000000".into(), "20000000".into()),
                ("native".into(), 7, "0".into(), "0".into()),
            ]
        );
        let deposit = |booked: Option<(&str, &str)>| Deposit {
            address: "0xtop".into(),
            derivation_index: 7,
            network: "polygon".into(),
            asset: "USDC".into(),
            token: "0xusdc".into(),
            decimals: 6,
            booked: booked.map(|(d, c)| (d.into(), c.into())),
            held_by: None,
        };
        assert_eq!(
            deposit(Some(("25000000", "20000000"))).booked_units(),
            Ok(Some(5_000_000))
        );
        // Books below zero (a sweep booked before its top-up): nothing to sweep.
        assert_eq!(deposit(Some(("1", "3"))).booked_units(), Ok(Some(0)));
        assert_eq!(deposit(None).booked_units(), Ok(None));
        assert!(!deposit(None).is_topup());
        assert!(deposit(Some(("x", "0"))).booked_units().is_err());
    }

    #[test]
    fn the_reads_run_on_the_real_schema() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::localdb::apply_migrations(&conn).unwrap();
        let (net, address) = (Literal::Text("polygon"), Literal::Text("0xdep"));
        let when = [Literal::Integer(5)];
        for sql in [
            render_batch(&[(ENDED, &when), (OPEN, &when)]),
            render_batch(&[(OF_DEPOSIT, &[net, address])]),
            render_batch(&[
                (GAS_NONCES, &[address]),
                (TREASURY_SENDERS, &[]),
                (TOPUPS, &[]),
            ]),
        ] {
            conn.execute_batch(&sql.unwrap()).unwrap();
        }
    }
}
