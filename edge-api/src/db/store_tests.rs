//! Every statement runs in one store: the sharding plan of `docs/SCALING.md` puts each table in
//! exactly one of three kinds of store (the directory in D1; each institution's object, holding
//! its money; each (network, treasury)'s object, holding its sends), and a statement can only
//! run where all of its tables are. This test gives every table its store and reads every SQL
//! text of `db/` (as the scope test reads them): a statement naming tables of two stores fails,
//! unless it is listed in [`CROSSING`] with how it will be split. The list is the remaining work
//! of the split, and only shrinks: an entry that no longer matches a statement fails too.
//!
//! The ledger's two tables are not placed yet: a posting between an institution's accounts and
//! the treasury's becomes two postings, one in each object (SCALING.md, "Not yet split"), so
//! statements naming them are left out of this check until then. Nor can it see the partner
//! lists' token check (`Owner::Token`, formatted in at run time: the list and the token's
//! institution in one statement); sharded, the directory checks the token and the object runs
//! the list keyed by `Owner::Institution`.

use std::collections::BTreeSet;

use super::scope_tests::{sql_texts, tokenize};

/// Where a table lives once sharded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Store {
    /// D1: who is who, routing, limits. No balance and no payment state.
    Directory,
    /// One object per institution: its payments and everything that moves or tells of them.
    Institution,
    /// One object per (network, treasury): its nonces, its signed transactions, its custody.
    Treasury,
    /// Split between an institution's object and a treasury's, not yet placed.
    Ledger,
}

/// Every table of the schema, with its store.
const TABLES: &[(&str, Store)] = &[
    ("institutions", Store::Directory),
    ("api_clients", Store::Directory),
    ("access_tokens", Store::Directory),
    ("auth_failures", Store::Directory),
    ("merchants", Store::Directory),
    ("merchant_wallets", Store::Directory),
    ("wallet_changes", Store::Directory),
    ("usdc_settlement_changes", Store::Directory),
    ("merchant_origins", Store::Directory),
    ("portal_admins", Store::Directory),
    ("portal_sessions", Store::Directory),
    ("webhook_endpoints", Store::Directory),
    ("deposit_indexes", Store::Directory),
    ("custody_addresses", Store::Directory),
    ("notifications", Store::Directory),
    ("checkout_index", Store::Directory),
    ("sanctioned_addresses", Store::Directory),
    ("screening_outages", Store::Directory),
    // The watcher's pass over each network and the money it found that no store credits.
    ("network_passes", Store::Directory),
    ("held_deposits", Store::Directory),
    ("transactions", Store::Institution),
    ("payment_parts", Store::Institution),
    ("checkout_sessions", Store::Institution),
    ("idempotency_keys", Store::Institution),
    ("deposit_watches", Store::Institution),
    ("chain_transfers", Store::Institution),
    ("settlements", Store::Institution),
    ("settlement_claims", Store::Institution),
    ("settlement_items", Store::Institution),
    ("settlement_holds", Store::Institution),
    ("refunds", Store::Institution),
    ("topup_addresses", Store::Institution),
    ("topup_watches", Store::Institution),
    ("topup_transfers", Store::Institution),
    ("events", Store::Institution),
    ("deliveries", Store::Institution),
    ("delivery_attempts", Store::Institution),
    // A settlement wallet's decision (subject 'wallet') is the directory's and stays in D1's
    // copy of the table; every other decision is the institution's money.
    ("screenings", Store::Institution),
    ("screening_reviews", Store::Institution),
    ("topup_reviews", Store::Institution),
    ("chain_sends", Store::Treasury),
    ("bridges", Store::Treasury),
    ("float_moves", Store::Treasury),
    ("custody_sweeps", Store::Treasury),
    ("reconciliations", Store::Treasury),
    ("reconciled_addresses", Store::Treasury),
    ("node_heads", Store::Treasury),
    ("ledger_accounts", Store::Ledger),
    ("ledger_transfers", Store::Ledger),
];

/// Statements that still name tables of two stores: a fragment that finds the statement, and
/// how it splits. Each must still match a statement (a stale entry fails the test).
const CROSSING: &[(&str, &str)] = &[
    // The outbox's delivery path reads the endpoint beside the delivery.
    (
        "FROM webhook_endpoints e WHERE e.institution_id = ?2 AND e.status = 'enabled'",
        "deliveries::fan_out, the endpoints an event goes to: the object keeps a copy of its \
         endpoints (id, status, event types), sent by the directory's outbox on each change, \
         and fans out from it in the event's own transaction",
    ),
    (
        "e.secret_encrypted, e.previous_secret_encrypted",
        "deliveries: a delivery with its endpoint's URL and sealed secrets, for the queue \
         consumer: two reads, the delivery from the object and the endpoint from the directory",
    ),
    (
        "SET attempts = attempts + 1, next_attempt_at = NULL",
        "deliveries::claim, only while the endpoint is enabled: the consumer checks the \
         endpoint in the directory, and the claim in the object is guarded by the delivery",
    ),
    // The treasury's reads of what it pays, and the reports of what it sent.
    (
        "WITH candidates AS",
        "reconciliations: custody addresses holding money, every institution's deposit and \
         top-up addresses of a network: the directory's deposit-address index lists them",
    ),
    (
        "(SELECT c.tx_hash FROM chain_sends c WHERE c.refund_id = f.id",
        "refunds: a refund's latest transaction hash: the treasury's object reports each hash \
         back (keyed by send id) and the refund keeps it",
    ),
    (
        "UPDATE refunds SET state = 'confirmed'",
        "refunds::confirm once its send is: the treasury's report of the confirmation is the \
         message the object applies",
    ),
    (
        "COALESCE(s.token, r.token, f.token) AS token",
        "sends: the treasury's transactions with what they pay (token, wallet, institution): \
         the send request carries them, stored with the send in the treasury's object",
    ),
    (
        "i.units AS net_base_units, s.wallet",
        "sends: a settlement's transactions for its page: the object's items with the hashes \
         and fees the treasury reports back",
    ),
    (
        "JOIN chain_sends c ON c.settlement_id = s.id AND c.state = 'confirmed'",
        "settlements::to_finish, payments of confirmed settlements: the treasury's report of \
         the confirmation is the message the object applies",
    ),
    (
        "COALESCE((SELECT p.decimals FROM chain_sends c",
        "settlements: what a settlement sent: from the treasury's reports, kept by the object",
    ),
    (
        "UPDATE settlements SET state = 'confirmed'",
        "settlements::confirm once its send is: the treasury's report, applied by the object",
    ),
    // D1's cron reads over every institution keep those whose money is in D1 (`MONEY_IN_D1`);
    // the same reads in an institution's object have no such condition.
    (
        "AND moving_since IS NULL) LIMIT 500",
        "deliveries::overdue in D1: only institutions whose money is there; each object \
         sweeps its own",
    ),
    (
        "ELSE ?1 - ?4 END AND w.institution_id IN (SELECT id FROM institutions",
        "watches::due in D1: only institutions whose money is there; each object checks its own",
    ),
    (
        "AS sends, (SELECT count(*) FROM ledger_accounts WHERE",
        "moves::in_flight, what a move waits for (its settlements' and refunds' transactions \
         out, its accounts' pending transfers): the move's own check, in D1, before the \
         institution's money leaves it",
    ),
    // Directory facts a money statement reads: copied into the object, or read first.
    (
        "i.psp_fee_bps",
        "settlements::due, the institution's fee rate: the object keeps its institution's \
         rate, sent by the directory's outbox when it changes",
    ),
    (
        "m.name AS merchant_name",
        "sessions::get, the hosted page's merchant name: copied into the session when it is \
         created (its key's merchant is read from the directory then)",
    ),
    (
        "FROM idempotency_keys k JOIN merchants km",
        "sessions: a checkout's idempotency key, keyed by institution through its merchant: \
         the key row carries its institution in the object, no join",
    ),
    (
        "NOT EXISTS (SELECT 1 FROM checkout_sessions WHERE id = ?4",
        "throttle::release_checkout, an attempt given back when no session was stored: the \
         worker gives it back after the object answers that it stored none",
    ),
    (
        "WHERE w.checked_at < ?1 AND m.status = 'active'",
        "topups::due, only active merchants' top-up addresses: the object keeps its merchants' \
         status, from the directory's outbox",
    ),
    (
        "(SELECT merchant_id FROM checkout_sessions WHERE id = ?1)",
        "wallets, the hosted page's networks by checkout id: the session names its merchant, \
         whose wallets the worker reads from the directory",
    ),
];

fn store_of(table: &str) -> Option<Store> {
    TABLES.iter().find(|(t, _)| *t == table).map(|(_, s)| *s)
}

/// The tables `sql` reads or writes (after `FROM`, `JOIN`, `UPDATE`, `INTO`), with their
/// stores; names that are no table (a common table expression's) are left out.
fn tables(sql: &str) -> BTreeSet<(String, Store)> {
    let tokens = tokenize(sql);
    tokens
        .windows(2)
        .filter(|pair| {
            matches!(
                pair[0].to_ascii_uppercase().as_str(),
                "FROM" | "JOIN" | "UPDATE" | "INTO"
            )
        })
        .filter_map(|pair| store_of(&pair[1]).map(|store| (pair[1].clone(), store)))
        .collect()
}

/// The stores `sql` spans, the ledger's left out.
fn stores(sql: &str) -> BTreeSet<Store> {
    tables(sql)
        .into_iter()
        .map(|(_, store)| store)
        .filter(|store| *store != Store::Ledger)
        .collect()
}

#[test]
fn every_statement_runs_in_one_store() {
    let mut found = Vec::new();
    let mut used = BTreeSet::new();
    for (file, sql) in sql_texts() {
        if stores(&sql).len() < 2 {
            continue;
        }
        if let Some((fragment, _)) = CROSSING.iter().find(|(f, _)| sql.contains(f)) {
            used.insert(*fragment);
            continue;
        }
        let named: Vec<String> = tables(&sql)
            .into_iter()
            .map(|(table, store)| format!("{table} ({store:?})"))
            .collect();
        let flat = sql.split_whitespace().collect::<Vec<_>>().join(" ");
        found.push(format!("{file}: {}: {flat}", named.join(", ")));
    }
    found.sort();
    found.dedup();
    assert!(
        found.is_empty(),
        "{} statements name tables of two stores:\n{}",
        found.len(),
        found.join("\n")
    );
    let stale: Vec<&str> = CROSSING
        .iter()
        .map(|(f, _)| *f)
        .filter(|f| !used.contains(f))
        .collect();
    assert!(stale.is_empty(), "crossing statements not found: {stale:?}");
}

/// Every table the migrations create has its store: a new table must say where it lives.
#[test]
fn every_table_has_its_store() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut created = BTreeSet::new();
    let mut gone = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "sql") {
            continue;
        }
        // Comments dropped first: an apostrophe in one would open a string.
        let text: String = std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|line| line.split("--").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        let tokens = tokenize(&text);
        let upper: Vec<String> = tokens.iter().map(|t| t.to_ascii_uppercase()).collect();
        for i in 0..tokens.len().saturating_sub(2) {
            let name = || {
                let at = if upper.get(i + 2).is_some_and(|t| t == "IF") {
                    i + 5
                } else {
                    i + 2
                };
                tokens.get(at).cloned().unwrap_or_default()
            };
            match (upper[i].as_str(), upper[i + 1].as_str()) {
                ("CREATE", "TABLE") => {
                    created.insert(name());
                }
                ("DROP", "TABLE") => {
                    gone.insert(name());
                }
                ("RENAME", "TO") => {
                    created.insert(tokens[i + 2].clone());
                }
                _ => {}
            }
        }
    }
    // A table dropped and made again (a rebuild) is still there; its new version or the copy
    // of its rows was only on the way.
    let renamed_from: BTreeSet<String> = created
        .iter()
        .filter(|t| t.ends_with("_new") || t.ends_with("_by_part") || t.ends_with("_copy"))
        .cloned()
        .collect();
    let missing: Vec<&String> = created
        .iter()
        .filter(|t| !renamed_from.contains(*t) && store_of(t).is_none())
        .collect();
    assert!(missing.is_empty(), "tables with no store: {missing:?}");
    let unknown: Vec<&str> = TABLES
        .iter()
        .map(|(t, _)| *t)
        .filter(|t| !created.contains(*t) || (gone.contains(*t) && !created.contains(*t)))
        .collect();
    assert!(
        unknown.is_empty(),
        "stores of tables no migration creates: {unknown:?}"
    );
}

#[test]
fn the_check_sees_a_statement_across_two_stores() {
    assert_eq!(
        stores("SELECT t.id FROM transactions t WHERE t.institution_id = ?1"),
        BTreeSet::from([Store::Institution])
    );
    assert_eq!(
        stores(
            "SELECT t.id, m.name FROM transactions t JOIN merchants m ON m.id = t.merchant_id \
             WHERE t.institution_id = ?1"
        ),
        BTreeSet::from([Store::Directory, Store::Institution])
    );
    assert_eq!(
        stores(
            "UPDATE settlements SET state = 'confirmed' WHERE id = ?1 \
             AND EXISTS (SELECT 1 FROM chain_sends c WHERE c.settlement_id = settlements.id)"
        ),
        BTreeSet::from([Store::Institution, Store::Treasury])
    );
    // The ledger is not placed yet; a common table expression is no table.
    assert_eq!(
        stores(
            "WITH due AS (SELECT id FROM refunds) INSERT INTO ledger_transfers (id) \
             SELECT id FROM due"
        ),
        BTreeSet::from([Store::Institution])
    );
}

/// The money tables (an institution's object holds them), by name.
pub(super) fn institution_tables() -> Vec<&'static str> {
    let mut names: Vec<&str> = TABLES
        .iter()
        .filter(|(_, store)| *store == Store::Institution)
        .map(|(table, _)| *table)
        .collect();
    names.sort_unstable();
    names
}

/// An institution's object holds its money tables as they are in D1: the object's migrations
/// create exactly the institution store's tables, each with the same columns in the same order
/// (types, NOT NULL, defaults, key), the same indexes and the same foreign keys, less those
/// that point out of the object (to the directory's or a treasury's tables).
#[test]
fn the_objects_schema_is_the_money_tables_as_they_are() {
    let d1 = rusqlite::Connection::open_in_memory().unwrap();
    xtask::localdb::apply_migrations(&d1).unwrap();
    let object = rusqlite::Connection::open_in_memory().unwrap();
    for (_, text) in crate::objects::MIGRATIONS {
        object.execute_batch(text).unwrap();
    }
    let rows = |conn: &rusqlite::Connection, sql: &str| -> Vec<String> {
        let mut statement = conn.prepare(sql).unwrap();
        let n = statement.column_count();
        statement
            .query_map([], |row| {
                Ok((0..n)
                    .map(|i| match row.get_ref(i).unwrap() {
                        rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into(),
                        other => format!("{other:?}"),
                    })
                    .collect::<Vec<_>>()
                    .join("|"))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let object_tables: Vec<String> = rows(
        &object,
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'object_%' \
         ORDER BY name",
    );
    // Its money tables, and the books of what is the institution's alone (the ledger's
    // accounts of the treasury stay in the treasury's books).
    let mut held = institution_tables();
    held.extend(["ledger_accounts", "ledger_transfers"]);
    held.sort_unstable();
    assert_eq!(object_tables, held, "the object's tables");
    for table in &held {
        assert_eq!(
            rows(&object, &format!("PRAGMA table_xinfo({table})")),
            rows(&d1, &format!("PRAGMA table_xinfo({table})")),
            "{table}: columns"
        );
        let indexes = |conn: &rusqlite::Connection| -> Vec<String> {
            rows(
                conn,
                &format!(
                    "SELECT il.name, il.\"unique\", il.origin, il.partial, ii.seqno, ii.name \
                     FROM pragma_index_list('{table}') il, pragma_index_info(il.name) ii \
                     ORDER BY il.name, ii.seqno"
                ),
            )
        };
        assert_eq!(indexes(&object), indexes(&d1), "{table}: indexes");
        let keys = |conn: &rusqlite::Connection| -> Vec<String> {
            rows(
                conn,
                &format!(
                    "SELECT \"table\", \"from\", \"to\" FROM pragma_foreign_key_list('{table}') \
                     ORDER BY \"from\""
                ),
            )
        };
        let inside: Vec<String> = keys(&d1)
            .into_iter()
            .filter(|key| held.iter().any(|t| key.starts_with(&format!("{t}|"))))
            .collect();
        assert_eq!(keys(&object), inside, "{table}: foreign keys");
    }
}
