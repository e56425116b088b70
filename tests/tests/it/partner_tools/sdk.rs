//! The `payrail` SDK against the running worker: typed lists as streams that follow every page
//! (checked against raw paging), filters, errors carrying the API's, the sandbox and the events
//! feed.

use futures_util::TryStreamExt;
use payrail::webhooks::EventKind;
use payrail::{Client, Error, EventQuery, MerchantQuery, SandboxAction, Status, TransactionQuery};
use payrail_tests::Worker;
use rust_decimal::Decimal;

use super::{runtime, sdk_client};

/// Every id of a list, paged by hand over raw HTTP.
fn raw_ids(worker: &Worker, path: &str, token: &str, spec: &str) -> Vec<i64> {
    let mut ids = Vec::new();
    let mut cursor: Option<i64> = None;
    loop {
        let after = cursor
            .map(|c| format!("&starting_after={c}"))
            .unwrap_or_default();
        let reply = worker.get(&format!("{path}?limit=100{after}"), Some(token), spec);
        assert_eq!(reply.status, 200, "{}", reply.text);
        let page = reply.json();
        ids.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_i64().unwrap()),
        );
        match page["next_cursor"].as_i64() {
            Some(next) => cursor = Some(next),
            None => return ids,
        }
    }
}

#[test]
fn sdk_streams_follow_every_page_and_filters_select() {
    let worker = Worker::shared();
    let client = sdk_client(worker, 0);
    let rt = runtime();
    let streamed: Vec<i64> = rt
        .block_on(
            client
                .transactions(TransactionQuery::new().limit(100))
                .map_ok(|t| t.id)
                .try_collect(),
        )
        .unwrap();
    let token = worker.institution_token(0);
    let raw = raw_ids(worker, "/v1/transactions", &token, "/v1/transactions");
    assert!(
        streamed.len() > 100,
        "more than one page: {}",
        streamed.len()
    );
    // Exactly what the raw walk saw, up to the newest the stream saw: transactions are never
    // removed and ids grow, so only newer ones (made by tests running alongside between the two
    // walks) may differ.
    let newest = streamed[0];
    assert_eq!(
        streamed,
        raw.iter()
            .copied()
            .filter(|id| *id <= newest)
            .collect::<Vec<_>>()
    );
    assert!(streamed.windows(2).all(|w| w[0] > w[1]), "newest first");

    let own_merchants = &worker.credentials.institutions[0].merchant_ids;
    let merchant = own_merchants[0];
    let paid: Vec<payrail::Transaction> = rt
        .block_on(
            client
                .transactions(
                    TransactionQuery::new()
                        .status(Status::Paid)
                        .merchant_id(merchant)
                        .limit(50),
                )
                .try_collect(),
        )
        .unwrap();
    assert!(!paid.is_empty());
    assert!(paid
        .iter()
        .all(|t| t.status == Status::Paid && t.merchant_id == merchant));

    let merchants: Vec<payrail::Merchant> = rt
        .block_on(
            client
                .merchants(MerchantQuery::new().limit(1))
                .try_collect(),
        )
        .unwrap();
    assert_eq!(
        merchants
            .iter()
            .map(|m| m.id)
            .collect::<std::collections::BTreeSet<_>>(),
        own_merchants.iter().copied().collect(),
        "exactly the institution's merchants, one page at a time"
    );
    let one = rt.block_on(client.merchant(merchants[0].id)).unwrap();
    assert_eq!(one.as_ref(), Some(&merchants[0]));
    let other = worker.credentials.institutions[1].merchant_ids[0];
    assert_eq!(
        rt.block_on(client.merchant(other)).unwrap(),
        None,
        "another institution's"
    );
    assert_eq!(
        rt.block_on(client.transaction(9_007_199_254_740_991))
            .unwrap(),
        None
    );
}

#[test]
fn sdk_errors_carry_the_api_error_and_name_the_problem() {
    let worker = Worker::shared();
    let rt = runtime();
    let client = sdk_client(worker, 0);
    let err = rt
        .block_on(client.transactions_page(&TransactionQuery::new().created_after("yesterday")))
        .unwrap_err();
    assert_eq!(
        (err.status(), err.code()),
        (Some(400), Some("invalid_request"))
    );
    assert!(err.to_string().contains("created_after"), "{err}");

    let (id, _) = worker.new_client(0, "SDK test", &["transactions:read"]);
    let wrong = Client::new(&worker.base_url, id.clone(), "sk_wrong").unwrap();
    let err = rt
        .block_on(wrong.transactions_page(&TransactionQuery::new()))
        .unwrap_err();
    assert_eq!(
        (err.status(), err.code()),
        (Some(401), Some("invalid_client"))
    );

    let (id, secret) = worker.new_client(0, "SDK test", &["transactions:read"]);
    let limited = Client::new(&worker.base_url, id, secret).unwrap();
    let err = rt
        .block_on(limited.merchants_page(&MerchantQuery::new()))
        .unwrap_err();
    assert!(matches!(err, Error::Api { status: 403, .. }), "{err:?}");
    assert_eq!(err.code(), Some("insufficient_scope"));
    // The answer's request id, for support.
    let request_id = err.request_id().expect("a request id");
    assert!(request_id.starts_with("req_"), "{request_id}");
    assert!(err.to_string().contains(request_id), "{err}");
}

#[test]
fn sdk_reads_carry_the_bookmark_of_the_read_before() {
    let worker = Worker::shared();
    let rt = runtime();
    let client = sdk_client(worker, 0);
    assert_eq!(client.bookmark(), None);
    rt.block_on(client.merchants_page(&MerchantQuery::new()))
        .unwrap();
    client.bookmark().expect("a list answer carries a bookmark");
    // Sent back: the worker takes it (a value it refused would be a 400) and answers with one.
    rt.block_on(client.transactions_page(&TransactionQuery::new().limit(1)))
        .unwrap();
    client.bookmark().expect("a bookmark");
}

#[test]
fn sdk_drives_the_sandbox_and_reads_the_events_it_made() {
    let worker = Worker::shared();
    let rt = runtime();
    let client = sdk_client(worker, 0);
    let key = worker.credentials.institutions[0].merchants[0]
        .public_key
        .clone();
    let session = rt
        .block_on(client.create_checkout(&payrail::CheckoutRequest {
            public_key: key,
            amount: "12.34".into(),
            currency: "EUR".into(),
            title: "SDK order".into(),
            external_reference: "SDK-1".into(),
            idempotency_key: Some("SDK-1".into()),
            redirect_url: "https://shop.example/done".into(),
            allow_crypto: true,
        }))
        .unwrap();
    assert!(session.id.starts_with("cs_"));
    let id = session.transaction_id;
    let paid = rt
        .block_on(client.sandbox(id, &SandboxAction::Pay("12.34".into())))
        .unwrap();
    assert_eq!(paid.status, Status::Paid);
    rt.block_on(client.sandbox(id, &SandboxAction::Settle))
        .unwrap();
    let events: Vec<payrail::webhooks::Event> = rt
        .block_on(
            client
                .events(EventQuery::new().transaction_id(id))
                .try_collect(),
        )
        .unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.type_name()).collect();
    assert_eq!(kinds, ["payment.paid", "payment.succeeded"], "newest first");
    match &events[0].kind {
        EventKind::PaymentPaid(t) => {
            assert_eq!(t.id, id);
            assert_eq!(t.amount.gross, Some(Decimal::new(1234, 2)));
            assert_eq!(t.external_reference.as_deref(), Some("SDK-1"));
        }
        other => panic!("{other:?}"),
    }
    // One event by its id, as the feed lists it; an unknown id is `None`.
    let found = rt.block_on(client.event(&events[1].id)).unwrap();
    assert_eq!(found.as_ref(), Some(&events[1]));
    assert!(rt
        .block_on(client.event("evt_nosuchevent"))
        .unwrap()
        .is_none());
    assert!(rt.block_on(client.event("evt_/..")).unwrap().is_none());
    // A second settle is an illegal transition: 409, not retried.
    let err = rt
        .block_on(client.sandbox(id, &SandboxAction::Settle))
        .unwrap_err();
    assert_eq!(err.code(), Some("conflict"));
}
