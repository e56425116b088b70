//! The client's own behaviour (token cache, refresh on 401, retries, paging) against a scripted
//! local HTTP server: what a real deployment does only under failure, made to happen on cue.
//! The same client against the real worker: `tests/tests/it/partner_tools/sdk.rs`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use futures_util::TryStreamExt;
use payrail::{Client, Error, RetryPolicy, TransactionQuery};
use serde_json::json;

/// An answer the server gives: status, extra headers, body.
type Answer = (u16, Vec<(&'static str, String)>, serde_json::Value);

#[derive(Default)]
struct Script {
    /// Answers to `/v1/…` requests, in order; when empty, an empty page.
    api: VecDeque<Answer>,
    /// `expires_in` of issued tokens.
    expires_in: u64,
    tokens_issued: usize,
    /// The `Authorization` header of every token request.
    token_auth: Vec<String>,
    /// (path and query, bearer token) of every API request.
    seen: Vec<(String, String)>,
    /// The `Payrail-Bookmark` every API request carried.
    bookmarks: Vec<Option<String>>,
}

struct Stub {
    base: String,
    script: Arc<Mutex<Script>>,
}

impl Stub {
    async fn start(expires_in: u64, api: Vec<Answer>) -> Stub {
        let script = Arc::new(Mutex::new(Script {
            api: api.into(),
            expires_in,
            ..Script::default()
        }));
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Stub { base, script }
    }

    fn client(&self) -> Client {
        Client::builder(&self.base, "cli_test", "sk_test")
            .retry(RetryPolicy {
                initial_backoff: Duration::from_millis(10),
                ..RetryPolicy::default()
            })
            .build()
            .unwrap()
    }

    fn tokens_issued(&self) -> usize {
        self.script.lock().unwrap().tokens_issued
    }

    fn seen(&self) -> Vec<(String, String)> {
        self.script.lock().unwrap().seen.clone()
    }
}

async fn answer(State(script): State<Arc<Mutex<Script>>>, request: Request) -> Response {
    let mut script = script.lock().unwrap();
    let path = request.uri().to_string();
    let (status, headers, body) = if path == "/oauth/token" {
        let auth = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        script.token_auth.push(auth);
        script.tokens_issued += 1;
        let token = format!("tok_{}", script.tokens_issued);
        (
            200,
            vec![],
            json!({"access_token": token, "token_type": "Bearer",
                   "expires_in": script.expires_in, "scope": "transactions:read"}),
        )
    } else {
        let bearer = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .trim_start_matches("Bearer ")
            .to_owned();
        let bookmark = request
            .headers()
            .get("payrail-bookmark")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        script.bookmarks.push(bookmark);
        script.seen.push((path, bearer));
        script.api.pop_front().unwrap_or((
            200,
            vec![],
            json!({"object": "list", "data": [], "has_more": false, "next_cursor": null}),
        ))
    };
    let mut response = Response::builder().status(status);
    for (name, value) in headers {
        response = response.header(name, value);
    }
    response
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn error(status: u16, code: &str) -> Answer {
    (
        status,
        vec![],
        json!({"error": code, "error_description": format!("{code} on purpose")}),
    )
}

fn transaction(id: i64) -> serde_json::Value {
    json!({"object":"transaction","id":id,"merchant_id":1,"status":"paid","raw_status":"paid",
      "amount_status":"EXACT","asset":"USDC","currency":"EUR","amount":{"gross":"10.00","net":null,
      "expected":"10.00","psp_fee":null,"gas_fee":null,"bridge_fee":null},
      "networks":{"payment":null,"settlement":null},
      "tx_hashes":{"source":null,"bridge":null,"settlement":null},"customer_email":null,
      "external_reference":format!("order-{id}"),"created_at":"2026-11-21T04:35:27Z","paid_at":null})
}

fn page(ids: &[i64], next: Option<i64>) -> Answer {
    (
        200,
        vec![],
        json!({"object": "list", "data": ids.iter().map(|id| transaction(*id)).collect::<Vec<_>>(),
               "has_more": next.is_some(), "next_cursor": next}),
    )
}

#[tokio::test]
async fn one_token_serves_many_calls_and_concurrent_callers_share_one_fetch() {
    let stub = Stub::start(3600, vec![]).await;
    let client = stub.client();
    let calls = (0..8).map(|_| {
        let client = client.clone();
        tokio::spawn(async move { client.transactions_page(&TransactionQuery::new()).await })
    });
    for call in calls {
        call.await.unwrap().unwrap();
    }
    client
        .transactions_page(&TransactionQuery::new())
        .await
        .unwrap();
    assert_eq!(stub.tokens_issued(), 1);
    assert!(stub.seen().iter().all(|(_, token)| token == "tok_1"));
}

#[tokio::test]
async fn a_token_about_to_expire_is_replaced_before_use() {
    // A token that lives 0 s is due for refresh at once: every call gets a new one.
    let stub = Stub::start(0, vec![]).await;
    let client = stub.client();
    for _ in 0..3 {
        client
            .transactions_page(&TransactionQuery::new())
            .await
            .unwrap();
    }
    assert_eq!(stub.tokens_issued(), 3);
    let tokens: Vec<_> = stub.seen().into_iter().map(|(_, t)| t).collect();
    assert_eq!(tokens, ["tok_1", "tok_2", "tok_3"]);
}

#[tokio::test]
async fn a_401_gets_one_fresh_token_and_one_more_try_only() {
    let stub = Stub::start(3600, vec![error(401, "invalid_client"), page(&[5], None)]).await;
    let client = stub.client();
    let list = client
        .transactions_page(&TransactionQuery::new())
        .await
        .unwrap();
    assert_eq!(list.data[0].id, 5);
    let tokens: Vec<_> = stub.seen().into_iter().map(|(_, t)| t).collect();
    assert_eq!(tokens, ["tok_1", "tok_2"]);

    let stub = Stub::start(
        3600,
        vec![error(401, "invalid_client"), error(401, "invalid_client")],
    )
    .await;
    let err = stub
        .client()
        .transactions_page(&TransactionQuery::new())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("invalid_client"));
    assert_eq!(stub.tokens_issued(), 2);
    assert_eq!(stub.seen().len(), 2);
}

#[tokio::test]
async fn rate_limits_wait_for_retry_after_and_server_errors_back_off() {
    let limited = (
        429,
        vec![("retry-after", "1".to_owned())],
        json!({"error": "rate_limited", "error_description": "slow down"}),
    );
    let stub = Stub::start(
        3600,
        vec![limited, error(500, "server_error"), page(&[3], None)],
    )
    .await;
    let started = Instant::now();
    let list = stub
        .client()
        .transactions_page(&TransactionQuery::new())
        .await
        .unwrap();
    assert_eq!(list.data[0].id, 3);
    assert_eq!(stub.seen().len(), 3);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After: 1 was not waited for"
    );
}

#[tokio::test]
async fn client_errors_are_never_retried_and_carry_the_api_error() {
    let stub = Stub::start(3600, vec![error(400, "invalid_request")]).await;
    let err = stub
        .client()
        .transactions_page(&TransactionQuery::new())
        .await
        .unwrap_err();
    match &err {
        Error::Api {
            status,
            error,
            description,
            ..
        } => {
            assert_eq!((*status, error.as_str()), (400, "invalid_request"));
            assert_eq!(description, "invalid_request on purpose");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(stub.seen().len(), 1);
    assert_eq!(
        err.to_string(),
        "invalid_request (400): invalid_request on purpose"
    );
}

#[tokio::test]
async fn retries_stop_after_the_policy_and_answer_the_last_error() {
    let stub = Stub::start(3600, (0..6).map(|_| error(503, "server_error")).collect()).await;
    let err = stub
        .client()
        .transactions_page(&TransactionQuery::new())
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(503));
    assert_eq!(stub.seen().len(), 4, "the first try and 3 retries");
}

#[tokio::test]
async fn an_answer_past_the_size_limit_is_refused_not_read_whole() {
    let huge = "x".repeat(payrail::MAX_ANSWER_BYTES);
    let stub = Stub::start(3600, vec![(200, vec![], json!({ "data": huge }))]).await;
    let err = stub
        .client()
        .transactions_page(&TransactionQuery::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Decode { message, .. } if message.contains("larger than")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_stream_follows_next_cursor_until_the_last_page() {
    let stub = Stub::start(
        3600,
        vec![
            page(&[9, 8], Some(8)),
            page(&[7, 6], Some(6)),
            page(&[5], None),
        ],
    )
    .await;
    let ids: Vec<i64> = stub
        .client()
        .transactions(TransactionQuery::new().limit(2).merchant_id(1))
        .map_ok(|t| t.id)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(ids, [9, 8, 7, 6, 5]);
    let paths: Vec<_> = stub.seen().into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        [
            "/v1/transactions?limit=2&merchant_id=1",
            "/v1/transactions?limit=2&merchant_id=1&starting_after=8",
            "/v1/transactions?limit=2&merchant_id=1&starting_after=6",
        ]
    );
}

#[tokio::test]
async fn an_error_mid_stream_ends_it_with_that_error() {
    let stub = Stub::start(
        3600,
        vec![page(&[9, 8], Some(8)), error(403, "insufficient_scope")],
    )
    .await;
    let mut stream = Box::pin(stub.client().transactions(TransactionQuery::new()));
    assert_eq!(stream.try_next().await.unwrap().unwrap().id, 9);
    assert_eq!(stream.try_next().await.unwrap().unwrap().id, 8);
    let err = stream.try_next().await.unwrap_err();
    assert_eq!(err.code(), Some("insufficient_scope"));
}

#[tokio::test]
async fn a_list_whose_cursor_does_not_move_on_ends_with_an_error_not_a_loop() {
    // The same cursor twice, or again after others (pages going round), `has_more` on an empty
    // page, `has_more` with no cursor: each would repeat pages for ever or stop early unnoticed.
    for (pages, problem) in [
        (
            vec![page(&[9, 8], Some(8)), page(&[7, 6], Some(8))],
            "a next_cursor seen before",
        ),
        (
            vec![
                page(&[9, 8], Some(8)),
                page(&[7, 6], Some(6)),
                page(&[9, 8], Some(8)),
            ],
            "a next_cursor seen before",
        ),
        (vec![page(&[], Some(8))], "has_more on an empty page"),
        (
            vec![(
                200,
                vec![],
                json!({"object": "list", "data": [transaction(9)], "has_more": true,
                       "next_cursor": null}),
            )],
            "has_more without a next_cursor",
        ),
    ] {
        let stub = Stub::start(3600, pages).await;
        let err = stub
            .client()
            .transactions(TransactionQuery::new().limit(2))
            .try_collect::<Vec<_>>()
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Decode { message, .. } if message.contains(problem)),
            "{problem}: {err:?}"
        );
    }
}

#[tokio::test]
async fn an_error_body_with_a_null_description_keeps_its_code() {
    let stub = Stub::start(
        3600,
        vec![(
            404,
            vec![],
            json!({"error": "not_found", "error_description": null}),
        )],
    )
    .await;
    let found = stub.client().merchant(9).await.unwrap();
    assert!(found.is_none(), "a 404 is no merchant");
}

#[test]
fn plain_http_is_for_this_machine_only_and_secrets_stay_out_of_debug() {
    for local in [
        "http://127.0.0.1:8787",
        "http://[::1]:8787",
        "http://localhost:8787",
    ] {
        assert!(
            Client::builder(local, "cli_x", "sk_live_secret")
                .build()
                .is_ok(),
            "{local}"
        );
    }
    for remote in ["http://api.example.com", "http://10.0.0.5:8787"] {
        let err = Client::builder(remote, "cli_x", "sk_live_secret")
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("use https"), "{remote}: {err}");
    }
    assert!(
        Client::builder("https://api.example.com", "cli_x", "sk_live_secret")
            .build()
            .is_ok()
    );
    let builder = Client::builder("https://api.example.com", "cli_x", "sk_live_secret");
    let shown = format!("{builder:?}");
    assert!(
        shown.contains("cli_x") && !shown.contains("sk_live_secret"),
        "{shown}"
    );
    let webhooks = payrail::webhooks::Webhooks::new("whsec_c2VjcmV0");
    let shown = format!("{webhooks:?}");
    assert!(!shown.contains("whsec_"), "{shown}");
}

#[tokio::test]
async fn basic_credentials_are_form_encoded_first() {
    // RFC 6749 §2.3.1: the server form-decodes each part, so a `+` or `%` in a secret must
    // reach it encoded (Payrail's own secrets have neither; another issuer's might).
    let stub = Stub::start(3600, vec![]).await;
    let client = Client::builder(&stub.base, "cli_x", "s+c%r t")
        .build()
        .unwrap();
    client
        .transactions_page(&TransactionQuery::new())
        .await
        .unwrap();
    let auth = stub.script.lock().unwrap().token_auth.clone();
    use base64::Engine;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth[0].trim_start_matches("Basic "))
        .unwrap();
    assert_eq!(String::from_utf8(decoded).unwrap(), "cli_x:s%2Bc%25r+t");
}

#[tokio::test]
async fn the_bookmark_an_answer_carries_goes_with_the_next_read() {
    let page = |bookmark: &str| {
        (
            200,
            vec![("Payrail-Bookmark", bookmark.to_owned())],
            json!({"object": "list", "data": [], "has_more": false, "next_cursor": null}),
        )
    };
    let stub = Stub::start(
        3600,
        // The third answer's bookmark is not shaped like one: it is not kept.
        vec![
            page("0000001a-00000002"),
            page("0000001b-00000007"),
            page("not a bookmark!"),
            page("x"),
        ],
    )
    .await;
    let client = stub.client();
    assert_eq!(client.bookmark(), None);
    for _ in 0..4 {
        client
            .transactions_page(&TransactionQuery::new())
            .await
            .unwrap();
    }
    assert_eq!(client.bookmark().as_deref(), Some("x"));
    let sent = stub.script.lock().unwrap().bookmarks.clone();
    assert_eq!(
        sent,
        [
            None,
            Some("0000001a-00000002".to_owned()),
            Some("0000001b-00000007".to_owned()),
            Some("0000001b-00000007".to_owned())
        ]
    );
}

#[tokio::test]
async fn an_api_error_names_the_request_it_answered() {
    let (status, _, body) = error(403, "insufficient_scope");
    let stub = Stub::start(
        3600,
        vec![(
            status,
            vec![(
                "Payrail-Request-Id",
                "req_00112233445566778899aabb".to_owned(),
            )],
            body,
        )],
    )
    .await;
    let err = stub
        .client()
        .transactions_page(&TransactionQuery::new())
        .await
        .unwrap_err();
    assert_eq!(err.request_id(), Some("req_00112233445566778899aabb"));
    assert_eq!(
        err.to_string(),
        "insufficient_scope (403): insufficient_scope on purpose [req_00112233445566778899aabb]"
    );
}
