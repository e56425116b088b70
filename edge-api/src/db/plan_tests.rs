//! Every list query, for every filter combination, is a bounded index range scan in id order:
//! checked with EXPLAIN QUERY PLAN against the real migrations. And queries whose order is a
//! rule (which payments settle first) or whose arithmetic must be exact (a statement's running
//! balance) run against the real migrations and demo data.

use rusqlite::Connection;
use shared_types::ids::InstitutionId;

use super::{events, ledger, merchants, settlements, transactions, Owner, Select};
use crate::query::{EventFilter, MerchantFilter, TransactionFilter};

fn database() -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    xtask::localdb::apply_migrations(&conn).unwrap();
    // D1's own limit (SQLite's default is 500): a statement over it fails there, and here.
    conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_COMPOUND_SELECT, 5);
    conn
}

fn plan(conn: &Connection, query: &Select) -> Vec<String> {
    let mut stmt = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {}", query.sql))
        .unwrap();
    let params = &query.params;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(params.iter()), |row| {
            row.get::<_, String>(3)
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

fn assert_indexed(conn: &Connection, query: &Select) {
    let steps = plan(conn, query);
    for step in &steps {
        assert!(
            !step.starts_with("SCAN") && !step.contains("TEMP B-TREE"),
            "full scan or sort in {steps:?} for {}",
            query.sql
        );
    }
    assert!(
        steps.iter().any(|s| s.starts_with("SEARCH")),
        "no index search in {steps:?}"
    );
}

#[test]
fn every_transaction_filter_combination_is_an_index_range_scan() {
    let conn = database();
    // Every subset of the seven filters.
    for mask in 0u32..(1 << 7) {
        let on = |bit: u32| mask & (1 << bit) != 0;
        let filter = TransactionFilter {
            limit: 25,
            starting_after: on(0).then_some(1000),
            status: on(1).then_some(shared_types::Status::Paid),
            merchant_id: on(2).then_some(3),
            external_reference: on(3).then(|| "order-1".to_owned()),
            id: on(4).then_some(12),
            created_after: on(5).then(|| "2026-01-01T00:00:00Z".to_owned()),
            created_before: on(6).then(|| "2026-06-01T00:00:00Z".to_owned()),
        };
        assert_indexed(
            &conn,
            &transactions::list_query(super::Owner::Institution(InstitutionId(1)), &filter),
        );
        // The partner API's form: the institution is the bearer token's, in the same statement.
        assert_indexed(
            &conn,
            &transactions::list_query(super::Owner::Token("ab12"), &filter),
        );
    }
}

#[test]
fn every_events_feed_filter_combination_is_an_index_range_scan() {
    let conn = database();
    for mask in 0u32..(1 << 5) {
        let on = |bit: u32| mask & (1 << bit) != 0;
        let filter = EventFilter {
            limit: 25,
            starting_after: on(0).then(|| shared_types::ids::EventId::parse("evt_abc").unwrap()),
            kind: on(1).then_some(shared_types::lifecycle::EventType::PaymentPaid),
            transaction_id: on(2).then_some(7),
            created_after: on(3).then_some(1_700_000_000),
            created_before: on(4).then_some(1_800_000_000),
        };
        assert_indexed(&conn, &events::feed_query(Owner::Token("ab12"), &filter));
    }
}

#[test]
fn the_overview_and_its_chart_read_one_range_of_a_covering_index() {
    let conn = database();
    for query in [
        transactions::volume_query(InstitutionId(1), "2026-11-01T00:00:00Z"),
        transactions::daily_volume_query(InstitutionId(1), "2026-10-25T00:00:00Z"),
    ] {
        let steps = plan(&conn, &query);
        assert!(
            steps[0].starts_with("SEARCH")
                && steps[0].contains("COVERING INDEX transactions_by_institution_created")
                && steps[0].contains("institution_id=? AND created_at>?"),
            "{steps:?} for {}",
            query.sql
        );
        assert!(!steps.iter().any(|s| s.starts_with("SCAN")), "{steps:?}");
    }
}

#[test]
fn the_overviews_sums_never_fail_on_a_stored_amount() {
    let conn = database();
    // The rows' institution and merchant need not exist for the sums.
    conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    // The largest amount a decimal can hold, twice, beside an ordinary one: `sum` over integers
    // raised an overflow here (a 500 on the overview); the sums are held at 2^53 instead.
    for (id, gross) in [
        (1, "79228162514264337593543950335"),
        (2, "79228162514264337593543950335"),
        (3, "19.99"),
    ] {
        conn.execute(
            "INSERT INTO transactions (id, institution_id, merchant_id, status, raw_status, \
             currency, amount_gross, created_at, updated_at) \
             VALUES (?1, 1, 1, 'pending', 'succeeded', 'EUR', ?2, '2026-11-20T00:00:00Z', \
             '2026-11-20T00:00:00Z')",
            rusqlite::params![id, gross],
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO transactions (id, institution_id, merchant_id, status, raw_status, \
         currency, amount_gross, created_at, updated_at) \
         VALUES (4, 1, 1, 'paid', 'paid', 'EUR', '19.99', '2026-11-20T00:00:00Z', \
         '2026-11-20T00:00:00Z')",
        [],
    )
    .unwrap();
    for query in [
        transactions::volume_query(InstitutionId(1), "2026-11-01T00:00:00Z"),
        transactions::daily_volume_query(InstitutionId(1), "2026-10-25T00:00:00Z"),
    ] {
        let mut statement = conn.prepare(&query.sql).unwrap();
        let sums: Vec<i64> = statement
            .query_map(rusqlite::params_from_iter(query.params.iter()), |row| {
                row.get::<_, i64>("gross_minor")
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(sums.contains(&9_007_199_254_740_991), "{sums:?}");
        assert!(sums.iter().all(|s| *s <= 9_007_199_254_740_991), "{sums:?}");
        if sums.len() == 2 {
            assert!(sums.contains(&1999), "exact below the cap: {sums:?}");
        }
    }
}

#[test]
fn every_key_of_the_payment_search_is_an_index_search() {
    let conn = database();
    let query = transactions::search_query(
        InstitutionId(1),
        &transactions::SearchKeys {
            id: Some(12),
            reference: "order-1",
            chain: "0xabc",
        },
    );
    let steps = plan(&conn, &query);
    // The union of seven index searches, never a table scan; only the few rows found are
    // grouped and sorted.
    let searches: Vec<&String> = steps.iter().filter(|s| s.starts_with("SEARCH")).collect();
    assert!(searches.len() >= 7, "{steps:?}");
    for step in &steps {
        assert!(
            !(step.starts_with("SCAN")
                && !step.contains("SUBQUERY")
                && !step.contains("(subquery")),
            "a table scan in {steps:?}"
        );
    }
    for index in [
        "transactions_by_reference",
        "transactions_by_source_hash",
        "transactions_by_settlement_hash",
        "chain_transfers_by_hash",
        "checkout_sessions_by_deposit_address",
    ] {
        assert!(
            steps.iter().any(|s| s.contains(index)),
            "{index} in {steps:?}"
        );
    }
}

#[test]
fn every_merchant_filter_combination_is_an_index_range_scan() {
    let conn = database();
    for mask in 0u32..(1 << 3) {
        let on = |bit: u32| mask & (1 << bit) != 0;
        let filter = MerchantFilter {
            limit: 25,
            starting_after: on(0).then_some(50),
            id: on(1).then_some(4),
            psp_reference_id: on(2).then(|| "m-1".to_owned()),
        };
        assert_indexed(
            &conn,
            &merchants::list_query(super::Owner::Institution(InstitutionId(1)), &filter),
        );
    }
}

#[test]
fn transaction_pages_use_the_index_of_their_filters() {
    let conn = database();
    let filter = TransactionFilter {
        limit: 25,
        merchant_id: Some(3),
        status: Some(shared_types::Status::Refunded),
        ..Default::default()
    };
    let steps = plan(
        &conn,
        &transactions::list_query(super::Owner::Institution(InstitutionId(1)), &filter),
    );
    assert!(
        steps[0].contains("transactions_by_merchant_status")
            && steps[0].contains("merchant_id=?")
            && steps[0].contains("status=?"),
        "{steps:?}"
    );
}
#[test]
fn date_bounds_and_cursor_bound_the_id_range() {
    let conn = database();
    let filter = TransactionFilter {
        limit: 25,
        created_after: Some("2026-01-01T00:00:00Z".into()),
        created_before: Some("2026-02-01T00:00:00Z".into()),
        status: Some(shared_types::Status::Paid),
        ..Default::default()
    };
    let steps = plan(
        &conn,
        &transactions::list_query(super::Owner::Institution(InstitutionId(1)), &filter),
    );
    assert!(
        steps[0].contains("transactions_by_status") && steps[0].contains("id>? AND id<?"),
        "{steps:?}"
    );
    assert!(
        steps[1..]
            .iter()
            .filter(|s| s.starts_with("SEARCH"))
            .all(|s| s.contains("transactions_by_created (created_at>?)")),
        "{steps:?}"
    );
}

#[test]
fn payments_that_cannot_settle_never_crowd_out_one_that_can() {
    let mut conn = database();
    xtask::demo::seed(&mut conn, "http://127.0.0.1:8787").unwrap();
    // The watches below stand for checkouts the demo data does not have: only the order of
    // what is due is under test here.
    conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    // Every held-in-custody demo payment made on chain (a watch, a confirmed transfer), and all
    // but the newest held (no wallet, say), each re-held at a different time.
    let ids: Vec<i64> = conn
        .prepare(
            "SELECT id FROM transactions WHERE raw_status = 'succeeded' \
             AND amount_gross IS NOT NULL ORDER BY id",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(ids.len() > 3, "{ids:?}");
    for (k, id) in ids.iter().enumerate() {
        let address = format!("0x{k:040x}");
        conn.execute(
            "INSERT INTO deposit_watches (address, derivation_index, session_id, transaction_id, \
             network, asset, token, decimals, crypto_amount, base_units, rate, rate_source, \
             quoted_at, from_block, scanned_to, head_block, watch_until, created_at, \
             institution_id) \
             SELECT ?1, ?2, 'cs_' || ?2, id, network_payment, asset, 'native', 18, '1', '1', \
             '1', 'peg', 0, 0, 0, 0, 0, 0, institution_id FROM transactions WHERE id = ?3",
            rusqlite::params![address, k, id],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO chain_transfers (network, tx_hash, log_index, address, session_id, \
             token, amount, block_number, confirmed, kind, after_expiry, seen_at, institution_id) \
             SELECT network, '0x' || ?2, 0, address, session_id, token, '1', 1, 1, 'payment', 0, 0, \
             institution_id FROM deposit_watches WHERE address = ?1",
            rusqlite::params![address, k],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO payment_parts (institution_id, transaction_id, part, network, asset, \
             token, decimals, gross, expected, crypto_amount) \
             SELECT institution_id, id, 0, network_payment, asset, 'native', 18, amount_gross, \
             amount_expected, '1' FROM transactions WHERE id = ?1",
            rusqlite::params![id],
        )
        .unwrap();
    }
    let (held, newest) = ids.split_at(ids.len() - 1);
    for (k, id) in held.iter().enumerate() {
        conn.execute(
            "INSERT INTO settlement_holds (transaction_id, reason, since, updated_at, \
             institution_id) SELECT id, 'no settlement wallet', 100, ?2, institution_id \
             FROM transactions WHERE id = ?1",
            rusqlite::params![id, 1000 - k as i64],
        )
        .unwrap();
    }
    let due = |limit: usize| -> Vec<i64> {
        let query = settlements::due_query(limit as i64);
        let params = &query.params;
        conn.prepare(&query.sql)
            .unwrap()
            .query_map(rusqlite::params_from_iter(params.iter()), |r| {
                r.get("transaction_id")
            })
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    // Fewer than are due: the one that was never held comes first.
    let some = due(2);
    assert_eq!(some[0], newest[0], "{some:?}");
    // Then the least recently held (the last one held above, at 1000 - k).
    assert_eq!(some[1], *held.last().unwrap(), "{some:?}");
    assert_eq!(due(ids.len()).len(), ids.len());
}

/// A statement line's running balance, read in SQL, is exact with amounts far past SQLite's and
/// JavaScript's integers (18 decimals), counts posted transfers only, and is one indexed read.
#[test]
fn the_running_balance_after_a_line_is_exact() {
    let conn = database();
    let m = "base:native:merchant:1";
    let wei: u128 = 1_000_000_000_000_000_000;
    // Oldest first: (debit, credit, amount, phase, pending_id).
    let transfers: Vec<(&str, &str, u128, &str, Option<&str>)> = vec![
        ("u", m, 40 * wei + 7, "single", None),
        (m, "t", 12 * wei, "pending", None),
        (m, "t", 12 * wei, "post", Some("t2")),
        ("u", m, 3 * wei + 999_999_999, "single", None),
        (m, "t", 30 * wei, "pending", None),
        (m, "t", 30 * wei, "void", Some("t5")),
        (m, "t", 31 * wei + 1, "single", None),
    ];
    let mut posted: (u128, u128) = (0, 0);
    let mut expected = Vec::new();
    for (debit, credit, amount, phase, _) in &transfers {
        if matches!(*phase, "single" | "post") {
            if *credit == m {
                posted.1 += amount;
            } else if *debit == m {
                posted.0 += amount;
            }
        }
        expected.push(i128::try_from(posted.1).unwrap() - i128::try_from(posted.0).unwrap());
    }
    for (id, kind) in [(m, "merchant"), ("u", "unallocated"), ("t", "treasury")] {
        conn.execute(
            "INSERT INTO ledger_accounts (id, network, token, asset, decimals, kind, owner, \
             debits_posted, credits_posted, created_at, updated_at) \
             VALUES (?1, 'base', 'native', 'ETH', 18, ?2, '', ?3, ?4, 0, 0)",
            rusqlite::params![
                id,
                kind,
                if id == m {
                    posted.0.to_string()
                } else {
                    "0".into()
                },
                if id == m {
                    posted.1.to_string()
                } else {
                    "0".into()
                }
            ],
        )
        .unwrap();
    }
    for (k, (debit, credit, amount, phase, pending)) in transfers.iter().enumerate() {
        conn.execute(
            "INSERT INTO ledger_transfers (id, seq, network, token, debit_account, \
             credit_account, amount, code, phase, pending_id, reference, guard, created_at) \
             VALUES (?1, ?2, 'base', 'native', ?3, ?4, ?5, 'credit', ?6, ?7, '', 1, 0)",
            rusqlite::params![
                format!("t{}", k + 1),
                k as i64 + 1,
                debit,
                credit,
                amount.to_string(),
                phase,
                pending
            ],
        )
        .unwrap();
    }
    let after = |seq: i64| -> i128 {
        let query = ledger::balance_after_query(m, seq);
        let params = &query.params;
        let row: ledger::BalanceAfterRow = conn
            .query_row(&query.sql, rusqlite::params_from_iter(params.iter()), |r| {
                let mut object = serde_json::Map::new();
                for (i, name) in r.as_ref().column_names().iter().enumerate() {
                    object.insert((*name).to_owned(), r.get::<_, String>(i)?.into());
                }
                Ok(serde_json::Value::Object(object))
            })
            .map(|v| serde_json::from_value(v).unwrap())
            .unwrap();
        row.balance().unwrap()
    };
    for (k, want) in expected.iter().enumerate() {
        assert_eq!(after(k as i64 + 1), *want, "after line {}", k + 1);
    }
    assert_eq!(after(0), 0, "before the first line");
    // 40 - 12 + 3 - 31 ether, and 7 + 999999999 - 1 wei; the debits posted pass 2^63.
    assert_eq!(expected.last().copied(), Some(1_000_000_005));
    for step in plan(&conn, &ledger::balance_after_query(m, 1)) {
        assert!(!step.starts_with("SCAN"), "{step}");
    }
}

/// A statement page reads two bounded index ranges (the account's debits and its credits, each
/// in `seq` order), never the account's whole history, and gives the newest lines of both.
#[test]
fn a_statement_page_is_two_bounded_index_ranges() {
    let conn = database();
    let steps = plan(&conn, &ledger::statement_page_query("a", Some(10), 26));
    assert!(
        steps
            .iter()
            .any(|s| s.contains("INDEX ledger_transfers_by_debit (debit_account=? AND seq<?)")),
        "{steps:?}"
    );
    assert!(
        steps
            .iter()
            .any(|s| s.contains("INDEX ledger_transfers_by_credit (credit_account=? AND seq<?)")),
        "{steps:?}"
    );
    assert!(!steps.iter().any(|s| s.starts_with("SCAN t")), "{steps:?}");
    for (id, kind) in [("a", "merchant"), ("b", "treasury")] {
        conn.execute(
            "INSERT INTO ledger_accounts (id, network, token, asset, decimals, kind, owner, \
             created_at, updated_at) VALUES (?1, 'n', 't', 'X', 0, ?2, '', 0, 0)",
            rusqlite::params![id, kind],
        )
        .unwrap();
    }
    // Seq 1 to 9: odd ones credit `a`, even ones debit it.
    for seq in 1..10i64 {
        let (debit, credit) = if seq % 2 == 0 { ("a", "b") } else { ("b", "a") };
        conn.execute(
            "INSERT INTO ledger_transfers (id, seq, network, token, debit_account, \
             credit_account, amount, code, phase, reference, guard, created_at) \
             VALUES (?1, ?1, 'n', 't', ?2, ?3, '1', 'credit', 'single', '', 1, 0)",
            rusqlite::params![seq, debit, credit],
        )
        .unwrap();
    }
    let page = |before: Option<i64>, limit: i64| -> Vec<i64> {
        let query = ledger::statement_page_query("a", before, limit);
        let params = &query.params;
        conn.prepare(&query.sql)
            .unwrap()
            .query_map(rusqlite::params_from_iter(params.iter()), |r| r.get("seq"))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(page(None, 4), [9, 8, 7, 6]);
    assert_eq!(page(Some(6), 4), [5, 4, 3, 2]);
    assert_eq!(page(Some(2), 4), [1]);
    assert_eq!(page(None, 20), (1..10).rev().collect::<Vec<_>>());
}

#[test]
fn what_is_in_flight_on_a_network_and_its_newest_final_block_are_found_without_a_scan() {
    let conn = database();
    let query = Select {
        sql: super::reconciliations::IN_FLIGHT.to_owned(),
        params: vec!["polygon".into(), "0xtreasury".into()],
    };
    let steps = plan(&conn, &query);
    assert!(
        steps.iter().any(|s| s.contains("chain_sends_final"))
            && steps.iter().any(|s| s.contains("custody_sweeps_final")),
        "the final blocks are read from their indexes: {steps:?}"
    );
    // The one row of the answer is a constant row; every table is searched, never scanned.
    assert!(
        steps
            .iter()
            .all(|s| s == "SCAN CONSTANT ROW" || !s.starts_with("SCAN")),
        "{steps:?}"
    );
}
