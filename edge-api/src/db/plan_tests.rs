//! Every list query, for every filter combination, is a bounded index range scan in id order:
//! checked with EXPLAIN QUERY PLAN against the real migrations.

use rusqlite::Connection;

use super::{events, merchants, transactions, Owner, Query, Value};
use crate::query::{EventFilter, MerchantFilter, TransactionFilter};

fn database() -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    xtask::localdb::apply_migrations(&conn).unwrap();
    conn
}

fn plan(conn: &Connection, query: &Query) -> Vec<String> {
    let mut stmt = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {}", query.sql))
        .unwrap();
    let params: Vec<Box<dyn rusqlite::ToSql>> = query
        .params
        .iter()
        .map(|p| -> Box<dyn rusqlite::ToSql> {
            match p {
                Value::Null => Box::new(rusqlite::types::Null),
                Value::Int(n) => Box::new(*n),
                Value::Text(s) => Box::new(s.clone()),
            }
        })
        .collect();
    let rows = stmt
        .query_map(rusqlite::params_from_iter(params.iter()), |row| {
            row.get::<_, String>(3)
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

fn assert_indexed(conn: &Connection, query: &Query) {
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
            &transactions::list_query(super::Owner::Institution(1), &filter),
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
            starting_after: on(0).then(|| "evt_abc".to_owned()),
            kind: on(1).then_some(shared_types::lifecycle::EventType::PaymentPaid),
            transaction_id: on(2).then_some(7),
            created_after: on(3).then_some(1_700_000_000),
            created_before: on(4).then_some(1_800_000_000),
        };
        assert_indexed(&conn, &events::feed_query(Owner::Token("ab12"), &filter));
    }
}

#[test]
fn the_overview_reads_one_range_of_a_covering_index() {
    let conn = database();
    let steps = plan(
        &conn,
        &transactions::volume_query(1, "2026-11-01T00:00:00Z"),
    );
    assert!(
        steps[0].starts_with("SEARCH")
            && steps[0].contains("COVERING INDEX transactions_by_institution_created")
            && steps[0].contains("institution_id=? AND created_at>?"),
        "{steps:?}"
    );
    assert!(!steps.iter().any(|s| s.starts_with("SCAN")), "{steps:?}");
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
            &merchants::list_query(super::Owner::Institution(1), &filter),
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
        &transactions::list_query(super::Owner::Institution(1), &filter),
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
        &transactions::list_query(super::Owner::Institution(1), &filter),
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
