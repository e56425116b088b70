//! Every money query is scoped by its institution: the schema is ready for the sharding plan of
//! `docs/SCALING.md`, where each institution's money tables move, rows and statements unchanged,
//! into that institution's own database (a Durable Object named by it).
//!
//! Every SQL text of `db/` (each string literal, with the `{CONST}`s it formats in substituted)
//! is read, and each reference to a money table in it must carry the institution in its key:
//!
//! - a read, update or delete (`FROM`, `JOIN`, `UPDATE`, `DELETE FROM`) compares the table's
//!   `institution_id` with a parameter, a value or a column of a row already read
//!   (`t.institution_id = ?2`, `w.institution_id = t.institution_id` when `t` is read before
//!   `w` or in a query around it, or a bare `institution_id = …` within the reference's own
//!   parentheses when it has no alias); a table keyed only through one joined after it, or
//!   through a subquery inside it, is read whole, and fails;
//! - an insert names `institution_id` among its columns (and migration 0025's triggers refuse a
//!   row without one).
//!
//! The few statements that must cross institutions are allowed by name in [`ALLOWED`], each
//! with why: the cron's and the watchers' fan-out reads (each row they find carries its
//! institution, and every statement that follows is keyed by it; sharded, each institution's
//! object runs them over its own rows), the hosted page's lookup by checkout id (the
//! directory's, in the plan), the transaction id sequence's clock, and the treasury's own
//! reads.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::visit::Visit;

/// The tables of an institution's money state (migration 0025 gives each an
/// `institution_id`). What stays with a (network, treasury) or in the directory is not here:
/// the treasury's signed transactions and nonces (`chain_sends`), custody sweeps, the
/// treasury's, custody's and the world's ledger accounts, reconciliations and node heads
/// (docs/SCALING.md, "Schema readiness").
const MONEY_TABLES: &[&str] = &[
    "transactions",
    "checkout_sessions",
    "deposit_watches",
    "chain_transfers",
    "settlements",
    "settlement_claims",
    "settlement_items",
    "settlement_holds",
    "refunds",
    "payment_parts",
    "topup_addresses",
    "topup_watches",
    "topup_transfers",
];

/// Statements allowed to read across institutions: a fragment that names the statement, and
/// why. Each must still match a statement (a stale entry fails the test).
const ALLOWED: &[(&str, &str)] = &[
    // The cron's fan-out reads: each finds due rows of every institution, each row carrying its
    // institution, and every statement that follows is keyed by it. Sharded, each
    // institution's object runs the same read over its own rows (from its alarm).
    (
        "SELECT DISTINCT address FROM deposit_watches WHERE network = ?1",
        "passes::watched_in_d1, which of the addresses the watcher's pass found money for D1 \
         watches (of the institutions the directory's index names; only whether, no row)",
    ),
    (
        "w.watch_until > ?1 AND w.checked_at < CASE",
        "watches::due, the deposit watcher's due watches",
    ),
    (
        "ORDER BY held_at, t.id, p.part LIMIT ?1",
        "settlements::due: grouped per institution, merchant, network and asset by the cron",
    ),
    (
        "FROM settlements WHERE state = 'sending'",
        "settlements::sending_groups, per institution, merchant, network and asset",
    ),
    (
        "ORDER BY i.transaction_id, i.part LIMIT ?1",
        "settlements::to_finish, payments of confirmed settlements to mark paid",
    ),
    (
        "ORDER BY f.created_at LIMIT ?1",
        "refunds::to_send and refunds::confirmed, refunds to sign or to show",
    ),
    (
        "INDEXED BY transactions_pending",
        "transactions::pending_past_end, checkouts to expire",
    ),
    (
        "INDEXED BY checkout_sessions_by_expiry",
        "sessions::purge_ended, retention (each shard prunes its own)",
    ),
    // A lookup by a key the directory holds: the hosted page and its polls name only the
    // checkout's id (a capability), which the directory maps to its institution in the plan.
    (
        "JOIN merchants m ON m.id = s.merchant_id WHERE s.id = ?1",
        "sessions::get, the hosted page's checkout by its id",
    ),
    (
        "WHERE w.session_id = ?1 ORDER BY w.created_at",
        "watches::of_session_in_batch, the status poll's and the page's watches by checkout id",
    ),
    (
        "FROM chain_transfers WHERE session_id = ?1 ORDER",
        "watches::transfers_of_session_in_batch, the status poll's transfers by checkout id",
    ),
    (
        "(SELECT merchant_id FROM checkout_sessions WHERE id = ?1)",
        "wallets: the hosted page's wallet networks by checkout id",
    ),
    // The (network, treasury)'s own reads: custody addresses to reconcile (every deposit and
    // top-up address of the network, whoever's), and what a treasury transaction pays (its
    // token and wallet, which the send request carries once sharded).
    ("WITH candidates AS", "reconciliations: custody addresses"),
    (
        "COALESCE(s.wallet, r.to_address, f.mint_recipient) AS wallet",
        "sends: the treasury's transactions with what they pay",
    ),
    (
        "SELECT COALESCE(s.token, r.token, f.token) AS token, c.units",
        "sends: the treasury's live transactions' amounts",
    ),
    // Transaction ids are allocated in one sequence across institutions today, in creation
    // order: a new payment's created_at never goes below the newest one's, and a date filter
    // becomes an id bound by the first id created at or after it (the list itself is keyed by
    // its institution). Sharded, each institution's object allocates its own ids (from the
    // institution's id times 2^32: `transactions::first_id`, unique across institutions), and
    // these read only its rows.
    (
        "coalesce((SELECT max(created_at) FROM transactions), ?8)",
        "transactions::insert_pending, the id sequence and its clock",
    ),
    (
        "INDEXED BY transactions_by_created WHERE created_at",
        "transactions::list_query, a date as an id bound",
    ),
];

/// The SQL texts of a source file: every string literal outside doc comments and test modules,
/// in macros too, and the file's `&str` constants by name.
#[derive(Default)]
struct Texts {
    literals: Vec<String>,
    constants: BTreeMap<String, String>,
}

impl Texts {
    fn tokens(&mut self, tokens: TokenStream) {
        for tree in tokens {
            match tree {
                TokenTree::Group(group) => self.tokens(group.stream()),
                TokenTree::Literal(literal) => {
                    if let Ok(syn::Lit::Str(s)) = syn::parse_str::<syn::Lit>(&literal.to_string()) {
                        self.literals.push(s.value());
                    }
                }
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for Texts {
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        let test = item
            .attrs
            .iter()
            .any(|a| a.to_token_stream().to_string().contains("cfg (test)"));
        if !test {
            syn::visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_const(&mut self, item: &'ast syn::ItemConst) {
        if let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) = &*item.expr
        {
            self.constants.insert(item.ident.to_string(), s.value());
        }
        syn::visit::visit_item_const(self, item);
    }

    fn visit_lit_str(&mut self, s: &'ast syn::LitStr) {
        self.literals.push(s.value());
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
    }
}

/// `text` with each `{NAME}` of a constant replaced by its text (repeatedly: constants built of
/// constants).
fn substituted(text: &str, constants: &BTreeMap<String, String>) -> String {
    let mut text = text.to_owned();
    for _ in 0..4 {
        for (name, value) in constants {
            text = text.replace(&format!("{{{name}}}"), value);
        }
    }
    text
}

/// SQL's words and symbols, in order; `?N`, numbers and quoted strings are one token each.
pub(super) fn tokenize(sql: &str) -> Vec<String> {
    let chars: Vec<char> = sql.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == '_' || c == '?' {
            let start = i;
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == '\'' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            tokens.push(chars[start..i.min(chars.len())].iter().collect());
        } else {
            tokens.push(c.to_string());
            i += 1;
        }
    }
    tokens
}

/// Words that end a table reference rather than name its alias.
const NOT_ALIAS: &[&str] = &[
    "WHERE",
    "JOIN",
    "ON",
    "SET",
    "INDEXED",
    "LEFT",
    "INNER",
    "CROSS",
    "GROUP",
    "ORDER",
    "LIMIT",
    "USING",
    "NATURAL",
    "VALUES",
    "SELECT",
    "UNION",
    "AND",
    "OR",
    "RETURNING",
    "DEFAULT",
    "AS",
    "NOT",
    "WITH",
];

fn is_word(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
}

/// The money-table references of `sql` that do not carry the institution in their key, each
/// described.
fn unscoped(sql: &str) -> Vec<String> {
    let tokens = tokenize(sql);
    let upper: Vec<String> = tokens.iter().map(|t| t.to_ascii_uppercase()).collect();
    let mut found = Vec::new();
    for i in 0..tokens.len() {
        let Some(table) = tokens
            .get(i + 1)
            .filter(|t| MONEY_TABLES.contains(&t.as_str()))
        else {
            continue;
        };
        match upper[i].as_str() {
            "INTO" => {
                // The column list, up to its closing parenthesis.
                let columns: Vec<&String> = tokens[i + 2..]
                    .iter()
                    .skip_while(|t| *t != "(")
                    .take_while(|t| *t != ")")
                    .collect();
                if !columns.iter().any(|t| *t == "institution_id") {
                    found.push(format!("INSERT INTO {table} does not set institution_id"));
                }
            }
            "FROM" | "JOIN" | "UPDATE" => {
                let mut j = i + 2;
                if upper.get(j).is_some_and(|t| t == "AS") {
                    j += 1;
                }
                let alias = tokens
                    .get(j)
                    .filter(|t| is_word(t) && !NOT_ALIAS.contains(&upper[j].as_str()))
                    .cloned();
                if !keyed(&tokens, &upper, i + 1, table, alias.as_deref()) {
                    found.push(format!(
                        "{} {table}{} is not keyed by institution_id",
                        upper[i],
                        alias.map(|a| format!(" {a}")).unwrap_or_default()
                    ));
                }
            }
            _ => {}
        }
    }
    found
}

/// Where the parentheses around token `at` open (`None` at the top level).
fn scope(tokens: &[String], at: usize) -> Option<usize> {
    let mut depth = 0i32;
    for k in (0..at).rev() {
        match tokens[k].as_str() {
            ")" => depth += 1,
            "(" if depth == 0 => return Some(k),
            "(" => depth -= 1,
            _ => {}
        }
    }
    None
}

/// Where the table aliased (or named) `name` is referenced in `tokens`, if it is.
fn reference(tokens: &[String], upper: &[String], name: &str) -> Option<usize> {
    (0..tokens.len().saturating_sub(1)).find_map(|i| {
        if !matches!(upper[i].as_str(), "FROM" | "JOIN" | "UPDATE") {
            return None;
        }
        let table = i + 1;
        let mut j = i + 2;
        if upper.get(j).is_some_and(|t| t == "AS") {
            j += 1;
        }
        let aliased = tokens
            .get(j)
            .is_some_and(|t| is_word(t) && !NOT_ALIAS.contains(&upper[j].as_str()) && t == name);
        (tokens[table] == name || aliased).then_some(table)
    })
}

/// Whether the reference to `table` at `at` (aliased `alias`) is compared on its
/// `institution_id`: `alias.institution_id` (or `table.institution_id`, or a bare
/// `institution_id` within the parentheses that hold an unaliased reference) next to `=` or
/// before `IN`, with a value, a parameter or a column already bound on the other side. A column
/// of a table joined after it in the same query does not key it: `FROM w JOIN s ON
/// s.institution_id = w.institution_id` keys `s` by `w`, and leaves `w` a scan.
fn keyed(tokens: &[String], upper: &[String], at: usize, table: &str, alias: Option<&str>) -> bool {
    let own = scope(tokens, at);
    // The parentheses enclosing the reference, innermost first.
    let mut enclosing = vec![own];
    while let Some(Some(open)) = enclosing.last().copied() {
        enclosing.push(scope(tokens, open));
    }
    // Whether a column of `owner` is bound when the reference at `at` is read: `owner` is read
    // before it in its own query, or by a query around it; not by one inside it (a subquery
    // correlated with it) nor one joined after it.
    let bound = |owner: &str| match reference(tokens, upper, owner) {
        Some(q) => {
            let theirs = scope(tokens, q);
            (theirs == own && q < at) || (theirs != own && enclosing.contains(&theirs))
        }
        None => true, // an outer query's, outside this text
    };
    // Whether the other side of a comparison is bound: a column `x.c` is when `x` is.
    let other = |from: usize, to: usize| -> bool {
        match tokens.get(from..to) {
            Some([owner, dot, _]) if dot == "." => bound(owner),
            _ => true,
        }
    };
    let compared = |first: usize, last: usize| {
        (tokens.get(last + 1).is_some_and(|t| t == "=") && other(last + 2, last + 5))
            || upper.get(last + 1).is_some_and(|t| t == "IN")
            || (first > 0 && tokens[first - 1] == "=" && other(first.saturating_sub(4), first - 1))
    };
    // The end of the parentheses around the reference.
    let (mut end, mut depth) = (at, 0i32);
    while end < tokens.len() {
        match tokens[end].as_str() {
            "(" => depth += 1,
            ")" if depth == 0 => break,
            ")" => depth -= 1,
            _ => {}
        }
        end += 1;
    }
    let start = own.unwrap_or(0);
    (0..tokens.len()).any(|k| {
        if tokens[k] != "institution_id" {
            return false;
        }
        let qualified = k >= 2 && tokens[k - 1] == ".";
        if qualified {
            let owner = tokens[k - 2].as_str();
            (owner == table || Some(owner) == alias) && compared(k - 2, k)
        } else {
            alias.is_none() && (start..end).contains(&k) && compared(k, k)
        }
    })
}

/// Every SQL text of `db/` as `(file, text)`: each string literal with the constants it formats
/// in substituted (a constant formatted into statements is read there, as part of each; alone
/// it is a fragment, `SELECT … FROM refunds f` with its key to come). Shared by the store
/// test (`store_tests`).
pub(super) fn sql_texts() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/db");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            !name.ends_with("_tests.rs")
        })
        .collect();
    files.sort();
    let parsed: Vec<(String, Texts)> = files
        .iter()
        .map(|file| {
            let source = std::fs::read_to_string(file).unwrap();
            let mut texts = Texts::default();
            texts.visit_file(&syn::parse_file(&source).unwrap());
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            (name, texts)
        })
        .collect();
    // Constants are formatted in across modules (`watches::CREDITED_ON_CHAIN`); a module's own
    // come first (two modules have a `WATCH`).
    let shared: BTreeMap<String, String> = parsed
        .iter()
        .flat_map(|(_, texts)| texts.constants.clone())
        .collect();
    let mut all = Vec::new();
    for (name, texts) in &parsed {
        let mut constants = shared.clone();
        constants.extend(texts.constants.clone());
        let formatted: BTreeSet<&String> = texts
            .constants
            .iter()
            .filter(|(name, _)| {
                let mark = format!("{{{name}}}");
                texts.literals.iter().any(|l| l.contains(&mark))
            })
            .map(|(_, value)| value)
            .collect();
        for literal in texts.literals.iter().filter(|l| !formatted.contains(l)) {
            all.push((name.clone(), substituted(literal, &constants)));
        }
    }
    all
}

/// Every unscoped money-table reference in the SQL of `db/`, as `file: what: statement`, and
/// the allow-list entries that matched.
fn findings() -> (Vec<String>, BTreeSet<&'static str>) {
    let mut found = Vec::new();
    let mut used = BTreeSet::new();
    for (name, sql) in sql_texts() {
        let problems = unscoped(&sql);
        if problems.is_empty() {
            continue;
        }
        let allowed = ALLOWED.iter().map(|(f, _)| *f).find(|f| sql.contains(f));
        if let Some(fragment) = allowed {
            used.insert(fragment);
            continue;
        }
        let flat = sql.split_whitespace().collect::<Vec<_>>().join(" ");
        for problem in problems {
            found.push(format!("{name}: {problem}: {flat}"));
        }
    }
    found.sort();
    found.dedup();
    (found, used)
}

#[test]
fn every_money_query_is_keyed_by_its_institution() {
    let (found, used) = findings();
    assert!(
        found.is_empty(),
        "{} money-table references without the institution in their key:\n{}",
        found.len(),
        found.join("\n")
    );
    let stale: Vec<&str> = ALLOWED
        .iter()
        .map(|(f, _)| *f)
        .filter(|f| !used.contains(f))
        .collect();
    assert!(stale.is_empty(), "allowed statements not found: {stale:?}");
}

#[test]
fn the_check_sees_each_way_a_query_can_miss_its_institution() {
    let scoped = [
        "SELECT id FROM transactions WHERE institution_id = ?1 AND id = ?2",
        "SELECT t.id FROM transactions t JOIN deposit_watches w ON w.transaction_id = t.id \
         AND w.institution_id = t.institution_id WHERE t.institution_id = ?1",
        "UPDATE refunds SET state = 'done' WHERE institution_id = ?3 AND id = ?1",
        "INSERT INTO settlement_holds (institution_id, transaction_id) VALUES (?1, ?2)",
        "SELECT 1 FROM events WHERE id = ?1",
        "DELETE FROM chain_transfers WHERE ?2 = institution_id AND address = ?1",
        // Correlated with the outer query's institution.
        "SELECT (SELECT expires_at FROM checkout_sessions WHERE transaction_id = transactions.id \
         AND institution_id = transactions.institution_id) FROM transactions \
         WHERE id = ?1 AND institution_id = ?2",
    ];
    for sql in scoped {
        assert_eq!(unscoped(sql), Vec::<String>::new(), "{sql}");
    }
    let unscoped_ones = [
        "SELECT id FROM transactions WHERE id = ?2",
        // The join's table is not keyed: only the outer one is.
        "SELECT t.id FROM transactions t JOIN deposit_watches w ON w.transaction_id = t.id \
         WHERE t.institution_id = ?1",
        // Read, not compared.
        "SELECT institution_id FROM refunds WHERE id = ?1",
        // Another table's institution, outside the subquery's parentheses.
        "SELECT 1 FROM merchants WHERE institution_id = ?1 AND EXISTS \
         (SELECT 1 FROM settlement_holds WHERE transaction_id = ?2)",
        "INSERT INTO settlement_holds (transaction_id, reason) VALUES (?1, ?2)",
        "UPDATE deposit_watches SET checked_at = ?2 WHERE address = ?1",
        // Joined on the institution, but the driving table itself is read whole.
        "SELECT w.address FROM deposit_watches w JOIN merchants m \
         ON m.institution_id = w.institution_id WHERE w.checked_at < ?1",
    ];
    for sql in unscoped_ones {
        assert_eq!(unscoped(sql).len(), 1, "{sql}: {:?}", unscoped(sql));
    }
}

/// Migration 0025 on a database with money in it: every row of every money table gets the
/// institution of the row that owns it, and a new row without one is refused.
#[test]
fn migration_0025_fills_every_row_and_refuses_a_new_one_without_its_institution() {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    let (before, after): (Vec<_>, Vec<_>) = files
        .into_iter()
        .partition(|p| p.file_name().unwrap().to_string_lossy().as_ref() < "0025");
    assert!(
        after[0].ends_with("0025_institution_scope.sql"),
        "{after:?}"
    );
    // Each file in one transaction, as wrangler applies it (a rebuild defers its foreign keys
    // to the commit).
    let apply = |files: &[std::path::PathBuf]| {
        for file in files {
            let sql = std::fs::read_to_string(file).unwrap();
            conn.execute_batch(&format!("BEGIN;\n{sql}\nCOMMIT;"))
                .unwrap();
        }
    };
    apply(&before);
    // Two institutions, each with one payment's whole money record (ids and keys by `n`).
    for n in 1..=2 {
        conn.execute_batch(&format!(
            "INSERT INTO institutions (id, name, created_at) VALUES ({n}, 'PSP {n}', '');
             INSERT INTO merchants (id, institution_id, name, legal_name, email, public_key,
               psp_reference_id, status, onboarding_status, crypto_enabled, created_at)
               VALUES ({n}0, {n}, 'm', 'm', 'm@x', 'pk_{n}', 'r', 'active', 'completed', 1, '');
             INSERT INTO transactions (id, institution_id, merchant_id, status, raw_status,
               amount_gross, amount_expected, network_payment, asset, created_at, updated_at)
               VALUES ({n}00, {n}, {n}0, 'paid', 'paid', '1.00', '1.00', 'polygon', 'USDC', '',
               '');
             INSERT INTO checkout_sessions (id, transaction_id, merchant_id, title, redirect_url,
               asset, network, deposit_address, crypto_amount, created_at, expires_at)
               VALUES ('cs_{n}', {n}00, {n}0, 't', 'u', 'USDC', 'polygon', '0xd{n}', '1', 0, 0);
             INSERT INTO deposit_watches (address, derivation_index, session_id, transaction_id,
               network, asset, token, decimals, crypto_amount, base_units, rate, rate_source,
               quoted_at, from_block, scanned_to, head_block, watch_until, created_at)
               VALUES ('0xd{n}', {n}, 'cs_{n}', {n}00, 'polygon', 'USDC', '0xt', 6, '1', '1',
               '1', 'peg', 0, 0, 0, 0, 0, 0);
             INSERT INTO chain_transfers (network, tx_hash, log_index, address, session_id,
               token, amount, block_number, confirmed, kind, after_expiry, seen_at)
               VALUES ('polygon', '0xh{n}', 0, '0xd{n}', 'cs_{n}', '0xt', '1', 1, 1, 'payment',
               0, 0);
             INSERT INTO settlements (id, institution_id, merchant_id, network, asset, token,
               wallet, state, created_at, updated_at)
               VALUES ('st_{n}', {n}, {n}0, 'polygon', 'USDC', '0xt', '0xw', 'sending', 0, 0);
             INSERT INTO settlement_claims (transaction_id, settlement_id)
               VALUES ({n}00, 'st_{n}');
             INSERT INTO chain_sends (id, settlement_id, network, sender, nonce, gas_limit,
               gas_price, rate_source, units, tx_hash, raw, state, sent_block, created_at,
               updated_at) VALUES ('cs_send_{n}', 'st_{n}', 'polygon', '0xtr', {n}, 1, '1',
               'peg', '1', '0xs{n}', '0x', 'live', 0, 0, 0);
             INSERT INTO settlement_items (send_id, transaction_id, psp_fee, gas_fee, net, units)
               VALUES ('cs_send_{n}', {n}00, '0', '0', '1', '1');
             INSERT INTO settlement_holds (transaction_id, reason, since, updated_at)
               VALUES ({n}00, 'r', 0, 0);
             INSERT INTO refunds (id, institution_id, transaction_id, idempotency_key, amount,
               amount_minor, network, asset, token, decimals, units, rate, to_address, state,
               requested_by, created_at, updated_at) VALUES ('rf_{n}', {n}, {n}00, 'k', '1', 100,
               'polygon', 'USDC', '0xt', 6, '1', '1', '0xc', 'done', 'a', 0, 0);
             INSERT INTO topup_addresses (address, derivation_index, merchant_id,
               institution_id, network, from_block, created_by, created_at)
               VALUES ('0xp{n}', 10{n}, {n}0, {n}, 'polygon', 0, 'a', 0);
             INSERT INTO topup_watches (address, token, network, asset, decimals, from_block,
               scanned_to, head_block, created_at)
               VALUES ('0xp{n}', 'native', 'polygon', 'POL', 18, 0, 0, 0, 0);
             INSERT INTO topup_transfers (network, tx_hash, log_index, address, token, amount,
               block_number, confirmed, seen_at)
               VALUES ('polygon', '0xq{n}', 0, '0xp{n}', 'native', '1', 1, 1, 0);"
        ))
        .unwrap();
    }
    apply(&after);
    for table in MONEY_TABLES {
        let rows: Vec<Option<i64>> = conn
            .prepare(&format!(
                "SELECT institution_id FROM {table} ORDER BY institution_id"
            ))
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(rows, [Some(1), Some(2)], "{table}");
    }
    let refused = conn
        .execute(
            "INSERT INTO settlement_holds (transaction_id, reason, since, updated_at) \
             VALUES (300, 'r', 0, 0)",
            [],
        )
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("NOT NULL constraint failed: settlement_holds.institution_id"),
        "{refused}"
    );
}
