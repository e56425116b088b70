//! Nothing unbounded and nothing by accident: bodies are capped before they are read, forms and
//! JSON have field and depth caps, a receiver's answer costs at most 4 KB, every route answers an
//! unknown method with 405 and `Allow`, sandbox writes need their own scope, a closed checkout's
//! way to pay cannot change, and an institution's endpoints are capped.

use std::time::Duration;

use payrail_tests::hooks::{act, detail, endpoint, log, payment};
use payrail_tests::receiver::{Mode, Receiver};
use payrail_tests::{eventually, form, Worker};
use reqwest::Method;
use serde_json::json;

/// This module's own worker: one test fills the second institution up to its twenty endpoints,
/// after which nobody else could add one to it.
fn worker() -> &'static Worker {
    Worker::own("limits")
}

const FORM: &str = "application/x-www-form-urlencoded";

#[test]
fn a_huge_token_form_is_refused_before_it_is_read() {
    let worker = worker();
    // 8,000 fields, 64 KB (eight times the cap), with no credentials. Not more: the worker
    // answers before the body ends and closes, and a body larger than the loopback buffers
    // would still be being written then, so the client would see a reset, not the 413.
    let huge = "field=1&".repeat(8_000);
    let declared = worker.send(
        worker
            .request(Method::POST, "/oauth/token")
            .header("Content-Type", FORM)
            .body(huge),
        Some("/oauth/token"),
    );
    declared.assert_error(413, "payload_too_large");
    // Without a Content-Length (chunked): refused while streaming, once past the cap. Just past
    // it (9,000 bytes against 8 KB): the whole body is written before the answer comes, so the
    // client reads the 413 rather than racing the worker's close while it still writes (a
    // 64 KB stream was sometimes cut off mid-write, the answer never read).
    let just_over = "field=1&".repeat(1_125);
    let streamed = worker.send(
        worker
            .request(Method::POST, "/oauth/token")
            .header("Content-Type", FORM)
            .body(reqwest::blocking::Body::new(std::io::Cursor::new(
                just_over.into_bytes(),
            ))),
        Some("/oauth/token"),
    );
    streamed.assert_error(413, "payload_too_large");
    // The worker is not held up: a normal request still answers.
    let ok = worker.token_form(&[
        ("grant_type", "client_credentials"),
        ("client_id", &worker.credentials.institutions[0].client_id),
        (
            "client_secret",
            &worker.credentials.institutions[0].client_secret,
        ),
    ]);
    assert_eq!(ok.status, 200, "{}", ok.text);
}

#[test]
fn a_form_with_too_many_fields_is_refused_naming_the_cap() {
    let worker = worker();
    let mut pairs: Vec<(String, String)> = (0..70).map(|i| (format!("f{i}"), "1".into())).collect();
    pairs.push(("grant_type".into(), "client_credentials".into()));
    let refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let reply = worker.send(
        worker
            .request(Method::POST, "/oauth/token")
            .header("Content-Type", FORM)
            .body(form(&refs)),
        Some("/oauth/token"),
    );
    assert!(reply
        .assert_error(400, "invalid_request")
        .contains("fields"));
}

#[test]
fn deeply_nested_json_is_refused_before_it_is_parsed() {
    let worker = worker();
    let nested = format!(
        "{{\"publicKey\": {}1{}}}",
        "[".repeat(5_000),
        "]".repeat(5_000)
    );
    let reply = worker.send(
        worker
            .request(Method::POST, "/checkout/sessions")
            .header("Content-Type", "application/json")
            .body(nested),
        Some("/checkout/sessions"),
    );
    assert!(reply
        .assert_error(400, "invalid_request")
        .contains("nested"));
    let big = json!({"publicKey": "x".repeat(20_000)});
    worker
        .post_json("/checkout/sessions", &big, None, "/checkout/sessions")
        .assert_error(413, "payload_too_large");
}

#[test]
fn a_portal_body_over_its_cap_is_refused() {
    let worker = worker();
    let session = worker.portal_login(0);
    let (endpoint_id, _) = endpoint(worker, &session, "http://127.0.0.1:9/cap", None);
    worker
        .portal(
            Method::PATCH,
            &format!("/portal/api/webhook-endpoints/{endpoint_id}"),
            Some(&session),
            Some(&json!({"description": "d".repeat(70 * 1024)})),
        )
        .assert_error(413, "payload_too_large");
}

#[test]
fn a_receiver_that_answers_without_end_costs_four_kilobytes() {
    let worker = worker();
    let session = worker.portal_login(0);
    let receiver = Receiver::start();
    receiver.set_mode(Mode::Endless);
    let (endpoint_id, _) = endpoint(
        worker,
        &session,
        &receiver.url("/endless"),
        Some(&["payment.succeeded"]),
    );
    let id = payment(worker, 0, "LIMIT-ENDLESS-1");
    act(worker, 0, id, "pay", json!({"amount": "40.00"}));
    let delivery = eventually("the delivery to succeed", Duration::from_secs(40), || {
        log(worker, &session, &endpoint_id, "status=succeeded")["data"]
            .as_array()
            .unwrap()
            .first()
            .cloned()
    });
    let d = detail(worker, &session, delivery["id"].as_str().unwrap());
    let attempt = &d["attempts"][0];
    assert_eq!(attempt["outcome"], "ok", "{d}");
    let kept = attempt["response_body"].as_str().unwrap();
    assert_eq!(kept.len(), 4096);
    assert!(kept.bytes().all(|b| b == b'x'));
}

#[test]
fn every_route_answers_an_unknown_method_with_405_and_allow() {
    let worker = worker();
    let http = reqwest::blocking::Client::new();
    let query = Method::from_bytes(b"QUERY").unwrap();
    for (method, path, allow) in [
        (query.clone(), "/v1/transactions", "GET"),
        (query.clone(), "/v1/merchants/1", "GET"),
        (Method::DELETE, "/oauth/token", "POST"),
        (query.clone(), "/checkout/sessions", "POST, OPTIONS"),
        (query.clone(), "/portal/api/clients", "GET, POST"),
        (
            Method::PUT,
            "/portal/api/webhook-endpoints/ep_1",
            "GET, PATCH, DELETE",
        ),
        (query.clone(), "/portal/developers", "GET"),
        (Method::DELETE, "/portal/login", "GET, POST"),
        (query, "/openapi.json", "GET"),
    ] {
        let reply = http
            .request(method.clone(), format!("{}{path}", worker.base_url))
            .send()
            .unwrap();
        assert_eq!(reply.status().as_u16(), 405, "{method} {path}");
        assert_eq!(
            reply.headers().get("allow").and_then(|v| v.to_str().ok()),
            Some(allow),
            "{method} {path}"
        );
        // The portal's pages answer a page (people meet them); everything else the error body.
        if path.starts_with("/portal/") && !path.starts_with("/portal/api/") {
            let page = reply.text().unwrap();
            assert!(
                page.contains("Method not allowed"),
                "{method} {path}: {page}"
            );
        } else {
            let body: serde_json::Value = reply.json().unwrap();
            assert_eq!(body["error"], "method_not_allowed", "{method} {path}");
        }
    }
}

#[test]
fn sandbox_actions_need_the_sandbox_scope() {
    let worker = worker();
    let id = payment(worker, 0, "LIMIT-SCOPE-1");
    let read_only = worker.institution_token(0);
    let reply = worker.post_json(
        &format!("/sandbox/transactions/{id}/pay"),
        &json!({"amount": "40.00"}),
        Some(&read_only),
        "/sandbox/transactions/{id}/{action}",
    );
    assert!(reply
        .assert_error(403, "insufficient_scope")
        .contains("sandbox:write"));
    assert_eq!(worker.transaction(0, id)["raw_status"], "pending");
}

#[test]
fn the_way_to_pay_of_a_paid_checkout_cannot_change() {
    let worker = worker();
    let key = &worker.credentials.institutions[0].merchants[0].public_key;
    let session = worker.checkout_session(&json!({
        "publicKey": key, "amount": "25.00", "currency": "EUR", "title": "Method race",
        "externalReference": "LIMIT-METHOD-1", "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    }));
    let sid = session["id"].as_str().unwrap();
    act(
        worker,
        0,
        session["transaction_id"].as_i64().unwrap(),
        "pay",
        json!({"amount": "25.00"}),
    );
    let reply = worker.send(
        worker
            .request(Method::POST, &format!("/checkout/{sid}/method"))
            .header("Content-Type", FORM)
            .body(form(&[("method", "USDT:tron")])),
        None,
    );
    assert_eq!(reply.status, 409, "{}", reply.text);
    assert!(reply.text.contains("cannot change"), "{}", reply.text);
    let t = worker.transaction(0, session["transaction_id"].as_i64().unwrap());
    assert_ne!(t["networks"]["payment"], "tron");
}

#[test]
fn an_institution_has_at_most_twenty_endpoints() {
    let worker = worker();
    // The second institution's: no other test on this module's worker adds endpoints to it.
    let session = worker.portal_login(1);
    let create = |i: usize| {
        worker.portal(
            Method::POST,
            "/portal/api/webhook-endpoints",
            Some(&session),
            Some(&json!({ "url": format!("http://127.0.0.1:9/cap{i}") })),
        )
    };
    let mut created = 0;
    let refused = loop {
        let reply = create(created);
        if reply.status != 201 {
            break reply;
        }
        created += 1;
        assert!(created <= 20, "a 21st endpoint was created");
    };
    assert!(refused.assert_error(409, "conflict").contains("20"));
    let listed = worker
        .portal(
            Method::GET,
            "/portal/api/webhook-endpoints",
            Some(&session),
            None,
        )
        .json()["data"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(listed, 20);
}

/// An outside probe's finding: a body declared longer than what is sent held the request open
/// without an answer (180 s at checkout, 25 s at the token endpoint). A body gets ten seconds to
/// arrive, then the answer is 408 `request_timeout`; the worker serves others meanwhile.
#[test]
fn a_body_that_never_finishes_is_answered_408() {
    use std::io::{Read, Write};
    let worker = worker();
    let address = worker.base_url.trim_start_matches("http://").to_owned();
    let started: Vec<_> = [
        ("/checkout/sessions", "application/json", r#"{"publicKey":"#),
        ("/oauth/token", FORM, "grant_type=cl"),
        ("/portal/api/login", "application/json", r#"{"email":"#),
    ]
    .into_iter()
    .map(|(path, media_type, part)| {
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: {media_type}\r\n\
             Content-Length: 1000\r\n\r\n{part}"
        )
        .unwrap();
        stream.flush().unwrap();
        // The deadline of the read, not a sleep: the answer comes at ten seconds.
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        (path, stream)
    })
    .collect();
    // Others are served while those wait.
    let ok = worker.send(worker.request(Method::GET, "/openapi.json"), None);
    assert_eq!(ok.status, 200);
    for (path, mut stream) in started {
        let mut answer = Vec::new();
        let mut buffer = [0u8; 4096];
        while !String::from_utf8_lossy(&answer).contains("request_timeout") {
            match stream.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&buffer[..n]),
                Err(e) => panic!("{path}: no answer within 60 s ({e})"),
            }
        }
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 408"), "{path}: {answer}");
        assert!(
            answer.contains("the request body did not arrive within 10 seconds"),
            "{path}: {answer}"
        );
    }
}
