//! `xtask attestation` from the outside: the service runs in-process on a free port, in front of
//! a real `anvil`, and is asked over HTTP as the worker asks Circle's Iris. The transmitter is a
//! contract written here by hand, a few opcodes that emit their call data as `MessageSent(bytes)`,
//! so the test needs none of the project's contracts. What a node that is down or answers garbage
//! does to the service is tested against a fake node of a few lines.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use payrail_evm::cctp::{
    self, address_to_bytes32, check_attestation, recover_signers, BurnBody, Message, U256,
};
use payrail_evm::k256::ecdsa::SigningKey;
use serde_json::{json, Value};
use sha3::{Digest, Keccak256};
use xtask::attestation::{self, Server};

/// The attesters' keys, as `PAYRAIL_CCTP_ATTESTER_KEYS` holds them.
const KEYS: [&str; 3] = [
    "0x8f2a55949038a9610f50fb23b5883af3b4ecb3c3bb792cbcefbd1542c692be63",
    "0xc87509a1c067bbde78beb793e6fa76530b6382a4c0241e5e4a9ec0a0f44dc0d3",
    "0xae6ae8e5ccbfb04590405997ee2d52d2b330726137b875053c36d94e974d162f",
];
/// The CCTP domain the anvil node plays (Polygon PoS's number).
const DOMAIN: u32 = 7;
/// The confirmations a standard transfer waits for.
const CONFIRMATIONS: u64 = 5;
/// The confirmations a fast transfer waits for.
const FAST: u64 = 2;
/// The longest a test waits for anything.
const PATIENCE: Duration = Duration::from_secs(20);

/// Polls `check` until it gives a value, failing after `timeout`.
fn eventually<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A POST of a JSON-RPC call; `None` when the node gives no result.
fn try_rpc(url: &str, method: &str, params: Value) -> Option<Value> {
    let answer: Value = ureq::post(url)
        .timeout(Duration::from_secs(10))
        .send_json(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .ok()?
        .into_json()
        .ok()?;
    answer.get("result").cloned()
}

/// A local EVM node, killed when dropped.
struct Anvil {
    url: String,
    child: Child,
}

impl Anvil {
    fn start() -> Anvil {
        let binary = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil");
        assert!(
            binary.is_file(),
            "{} is missing (run scripts/setup)",
            binary.display()
        );
        // A port found free may be taken before anvil binds it: then another.
        for _ in 0..3 {
            let port = free_port();
            let mut child = Command::new(&binary)
                .args([
                    "--port",
                    &port.to_string(),
                    "--host",
                    "127.0.0.1",
                    "--silent",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start anvil");
            let url = format!("http://127.0.0.1:{port}");
            let deadline = Instant::now() + PATIENCE;
            loop {
                if try_rpc(&url, "eth_chainId", json!([])).is_some() {
                    return Anvil { url, child };
                }
                if child.try_wait().ok().flatten().is_some() || Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!("anvil did not start");
    }

    fn rpc(&self, method: &str, params: Value) -> Value {
        try_rpc(&self.url, method, params.clone())
            .unwrap_or_else(|| panic!("{method} {params} failed"))
    }

    fn account(&self, index: usize) -> String {
        self.rpc("eth_accounts", json!([]))[index]
            .as_str()
            .expect("an account")
            .to_owned()
    }

    fn mine(&self, blocks: u64) {
        self.rpc("anvil_mine", json!([format!("{blocks:#x}")]));
    }

    /// Sends a transaction from account 0 (anvil signs it) and waits for its receipt.
    fn send(&self, to: Option<&str>, data: &str, wei: u128) -> Value {
        let mut tx = json!({"from": self.account(0), "data": data, "gas": "0x2dc6c0",
                            "value": format!("{wei:#x}")});
        if let Some(to) = to {
            tx["to"] = json!(to);
        }
        let hash = self.rpc("eth_sendTransaction", json!([tx]));
        let receipt = eventually("a receipt", PATIENCE, || {
            try_rpc(&self.url, "eth_getTransactionReceipt", json!([hash])).filter(|r| !r.is_null())
        });
        assert_eq!(receipt["status"], "0x1", "reverted: {receipt}");
        receipt
    }

    /// Deploys a contract that emits its call data as `MessageSent(bytes)`, `times` times a call.
    fn emitter(&self, times: usize) -> String {
        let receipt = self.send(None, &emitter_code(times), 0);
        receipt["contractAddress"]
            .as_str()
            .expect("a contract address")
            .to_owned()
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The creation code of the emitter: its runtime writes the ABI encoding of its call data as
/// `bytes` to memory (offset 0x20, length, the data; memory past it is zero, so the padding is
/// too) and logs it with topic `MessageSent(bytes)`, `times` times, then stops.
fn emitter_code(times: usize) -> String {
    let topic = hex::decode(&cctp::MESSAGE_SENT_TOPIC[2..]).expect("the topic");
    let mut runtime = vec![
        0x60, 0x20, 0x60, 0x00, 0x52, // mstore(0, 0x20)
        0x36, 0x60, 0x20, 0x52, // mstore(0x20, calldatasize)
        0x36, 0x60, 0x00, 0x60, 0x40, 0x37, // calldatacopy(0x40, 0, calldatasize)
    ];
    for _ in 0..times {
        runtime.push(0x7f); // push32 the topic
        runtime.extend_from_slice(&topic);
        runtime.extend_from_slice(&[
            0x60, 0x1f, 0x36, 0x01, // calldatasize + 31
            0x60, 0x05, 0x1c, 0x60, 0x05, 0x1b, // rounded down to whole words
            0x60, 0x40, 0x01, // plus the two head words
            0x60, 0x00, 0xa1, // log1(0, size, topic)
        ]);
    }
    runtime.push(0x00); // stop
    let len = u8::try_from(runtime.len()).expect("a short runtime");
    // codecopy(0, 11, len); return(0, len): the 11 bytes of this prefix, then the runtime.
    let init = [
        0x60, len, 0x80, 0x60, 0x0b, 0x60, 0x00, 0x39, 0x60, 0x00, 0xf3,
    ];
    format!("0x{}{}", hex::encode(init), hex::encode(runtime))
}

/// A transfer's message from domain 7 to Base (6), as `MessageSent` carries it: nonce, executed
/// finality and fee still zero.
fn transfer(min_finality: u32, amount: u128, max_fee: u128) -> Message {
    let body = BurnBody {
        version: cctp::BURN_BODY_VERSION,
        burn_token: address_to_bytes32([0x3c; 20]),
        mint_recipient: address_to_bytes32([0x42; 20]),
        amount: U256::from(amount),
        message_sender: address_to_bytes32([0x51; 20]),
        max_fee: U256::from(max_fee),
        fee_executed: U256::ZERO,
        expiration_block: U256::ZERO,
        hook_data: vec![0xca, 0xfe],
    };
    Message {
        version: cctp::MESSAGE_VERSION,
        source_domain: DOMAIN,
        destination_domain: 6,
        nonce: [0; 32],
        sender: address_to_bytes32([0x28; 20]),
        recipient: address_to_bytes32([0x28; 20]),
        destination_caller: [0; 32],
        min_finality_threshold: min_finality,
        finality_threshold_executed: 0,
        message_body: body.encode(),
    }
}

fn hex0x(bytes: &[u8]) -> String {
    format!("0x{}", hex::encode(bytes))
}

fn unhex(text: &Value) -> Vec<u8> {
    let text = text.as_str().expect("a hex string");
    hex::decode(text.strip_prefix("0x").expect("0x")).expect("hex")
}

/// The attesters' addresses, derived here from their keys, ascending.
fn attester_addresses() -> Vec<[u8; 20]> {
    let mut addresses: Vec<[u8; 20]> = KEYS
        .iter()
        .map(|k| {
            let key = SigningKey::from_slice(&unhex(&json!(k))).expect("a key");
            payrail_evm::address_bytes(&payrail_evm::address_of(key.verifying_key()))
                .expect("an address")
        })
        .collect();
    addresses.sort_unstable();
    addresses
}

/// The service on a free port, for the node at `rpc_url` playing [`DOMAIN`] with transmitter
/// `transmitter`, plus `extra` arguments.
fn service(rpc_url: &str, transmitter: &str, extra: &[&str]) -> Server {
    let mut args: Vec<String> = [
        "--listen",
        "127.0.0.1:0",
        "--chain",
        &format!("{DOMAIN}={rpc_url},{CONFIRMATIONS},{FAST}"),
        "--transmitter",
        &format!("{DOMAIN}={transmitter}"),
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .collect();
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let attestation::Command::Serve { config, .. } =
        attestation::parse(&args, Some(&KEYS.join(","))).expect("a configuration")
    else {
        panic!("not a serve");
    };
    assert_eq!(config.attester_addresses(), attester_addresses());
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the service");
    attestation::serve(config, listener).expect("serve")
}

/// `GET path` of the service: the status and the JSON body.
fn get(server: &Server, path: &str) -> (u16, Value) {
    let url = format!("{}{path}", server.url());
    match ureq::get(&url).timeout(PATIENCE).call() {
        Ok(response) => (response.status(), response.into_json().expect("JSON")),
        Err(ureq::Error::Status(status, response)) => {
            (status, response.into_json().expect("a JSON error body"))
        }
        Err(e) => panic!("GET {path}: {e}"),
    }
}

fn lookup(server: &Server, hash: &str) -> (u16, Value) {
    get(
        server,
        &format!("/v2/messages/{DOMAIN}?transactionHash={hash}"),
    )
}

/// The service's answer once it is 200, asked until then.
fn attested(server: &Server, hash: &str) -> Value {
    eventually("an attestation", PATIENCE, || {
        let (status, body) = lookup(server, hash);
        (status == 200).then_some(body)
    })
}

fn assert_pending(server: &Server, hash: &str) {
    let (status, body) = lookup(server, hash);
    assert_eq!(
        (status, body),
        (404, json!({"error": "Message hash not found"}))
    );
}

/// Checks one entry of an answer against the message emitted: only the attestation service's
/// fields changed (the nonce, `finalityThresholdExecuted` and the burn's `feeExecuted`), the
/// nonce the one documented, and the attestation signed by exactly the attesters, ascending.
/// Returns the message attested.
fn check_entry(entry: &Value, emitted: &Message, hash: &str, log_index: u64) -> Message {
    let raw = unhex(&entry["message"]);
    let message = Message::decode(&raw).expect("a V2 message");
    let mut preimage = DOMAIN.to_be_bytes().to_vec();
    preimage.extend_from_slice(&unhex(&json!(hash)));
    preimage.extend_from_slice(&log_index.to_be_bytes());
    let nonce: [u8; 32] = Keccak256::digest(&preimage).into();
    assert_eq!(message.nonce, nonce);
    assert_eq!(entry["eventNonce"], hex0x(&nonce));
    let mut expected = emitted.clone();
    expected.nonce = nonce;
    expected.finality_threshold_executed = message.finality_threshold_executed;
    let mut body = BurnBody::decode(&emitted.message_body).expect("a burn");
    body.fee_executed = BurnBody::decode(&message.message_body)
        .expect("a burn")
        .fee_executed;
    expected.message_body = body.encode();
    assert_eq!(message, expected, "only the service's fields change");

    let attestation = unhex(&entry["attestation"]);
    assert_eq!(attestation.len(), 3 * cctp::SIGNATURE_LEN);
    assert_eq!(
        recover_signers(&raw, &attestation).expect("signers"),
        attester_addresses()
    );
    assert_eq!(
        check_attestation(&raw, &attestation, &attester_addresses(), 3),
        Ok(())
    );
    assert_eq!(entry["cctpVersion"], 2);
    assert_eq!(entry["status"], "complete");
    let decoded = &entry["decodedMessage"];
    assert_eq!(decoded["sourceDomain"], DOMAIN.to_string());
    assert_eq!(decoded["destinationDomain"], "6");
    assert_eq!(decoded["nonce"], hex0x(&nonce));
    assert_eq!(decoded["sender"], hex0x(&[0x28; 20]));
    assert_eq!(decoded["destinationCaller"], hex0x(&[0; 20]));
    assert_eq!(
        decoded["minFinalityThreshold"],
        emitted.min_finality_threshold.to_string()
    );
    assert_eq!(
        decoded["finalityThresholdExecuted"],
        message.finality_threshold_executed.to_string()
    );
    assert_eq!(decoded["messageBody"], hex0x(&message.message_body));
    let body = &decoded["decodedMessageBody"];
    assert_eq!(body["mintRecipient"], hex0x(&[0x42; 20]));
    assert_eq!(body["hookData"], "0xcafe");
    message
}

fn fee(message: &Message) -> u128 {
    BurnBody::decode(&message.message_body)
        .expect("a burn")
        .fee_executed
        .to_u128()
        .expect("a small fee")
}

#[test]
fn a_standard_transfer_is_attested_only_at_its_depth_and_the_same_twice() {
    let anvil = Anvil::start();
    let transmitter = anvil.emitter(1);
    let server = service(&anvil.url, &transmitter, &[]);
    let emitted = transfer(2000, 1_000_000, 500);
    let receipt = anvil.send(Some(&transmitter), &hex0x(&emitted.encode()), 0);
    let hash = receipt["transactionHash"].as_str().expect("a hash");

    // One confirmation: nothing is signed.
    assert_pending(&server, hash);
    // Three: a fast transfer would be attested, a standard one is not.
    anvil.mine(2);
    assert_pending(&server, hash);
    // Four: one short.
    anvil.mine(1);
    assert_pending(&server, hash);
    // Five: attested.
    anvil.mine(1);
    let answer = attested(&server, hash);
    let messages = answer["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 1, "{answer}");
    let log_index = u64::from_str_radix(
        receipt["logs"][0]["logIndex"]
            .as_str()
            .expect("a log index")
            .trim_start_matches("0x"),
        16,
    )
    .expect("a number");
    let message = check_entry(&messages[0], &emitted, hash, log_index);
    assert_eq!(message.finality_threshold_executed, 2000);
    assert_eq!(fee(&message), 0, "no fee at finality");
    assert_eq!(
        messages[0]["decodedMessage"]["decodedMessageBody"]["feeExecuted"],
        "0"
    );
    assert_eq!(
        messages[0]["decodedMessage"]["decodedMessageBody"]["amount"],
        "1000000"
    );

    // Asked again, later: the same message and attestation, byte for byte.
    anvil.mine(3);
    assert_eq!(lookup(&server, hash), (200, answer));
}

#[test]
fn a_fast_transfer_is_attested_at_1000_with_its_fee_then_at_2000() {
    let anvil = Anvil::start();
    let transmitter = anvil.emitter(1);
    let server = service(&anvil.url, &transmitter, &[]);

    let fast = transfer(1000, 1_000_001, 500);
    let receipt = anvil.send(Some(&transmitter), &hex0x(&fast.encode()), 0);
    let hash = receipt["transactionHash"].as_str().expect("a hash");
    let log_index = u64::from_str_radix(
        receipt["logs"][0]["logIndex"]
            .as_str()
            .expect("an index")
            .trim_start_matches("0x"),
        16,
    )
    .expect("a number");
    assert_pending(&server, hash);
    anvil.mine(1);
    let early = attested(&server, hash);
    let message = check_entry(&early["messages"][0], &fast, hash, log_index);
    assert_eq!(message.finality_threshold_executed, 1000);
    // 1 basis point of 1 000 001, rounded up.
    assert_eq!(fee(&message), 101);

    // A fee above the message's maxFee is capped at it: 1 bp of 10 000 000 is 1000 > 50.
    let capped = transfer(1000, 10_000_000, 50);
    let capped_receipt = anvil.send(Some(&transmitter), &hex0x(&capped.encode()), 0);
    let capped_hash = capped_receipt["transactionHash"].as_str().expect("a hash");
    anvil.mine(1);
    let answer = attested(&server, capped_hash);
    let entry = &answer["messages"][0];
    assert_eq!(entry["decodedMessage"]["finalityThresholdExecuted"], "1000");
    assert_eq!(
        entry["decodedMessage"]["decodedMessageBody"]["feeExecuted"],
        "50"
    );

    // The first transfer at its standard depth: attested at 2000, no fee, the same nonce.
    anvil.mine(CONFIRMATIONS);
    let late = attested(&server, hash);
    let finalized = check_entry(&late["messages"][0], &fast, hash, log_index);
    assert_eq!(finalized.finality_threshold_executed, 2000);
    assert_eq!(fee(&finalized), 0);
    assert_eq!(finalized.nonce, message.nonce);
    assert_ne!(late, early);
}

#[test]
fn every_message_sent_log_of_the_transmitter_and_only_those_are_attested() {
    let anvil = Anvil::start();
    let twice = anvil.emitter(2);
    let other = anvil.emitter(1);
    let server = service(&anvil.url, &twice, &[]);
    let emitted = transfer(2000, 7_000_000, 0);

    let receipt = anvil.send(Some(&twice), &hex0x(&emitted.encode()), 0);
    let hash = receipt["transactionHash"].as_str().expect("a hash");
    let elsewhere = anvil.send(Some(&other), &hex0x(&emitted.encode()), 0);
    let elsewhere = elsewhere["transactionHash"].as_str().expect("a hash");
    let plain = anvil.send(Some(&anvil.account(1)), "0x", 1);
    let plain = plain["transactionHash"].as_str().expect("a hash");
    anvil.mine(CONFIRMATIONS);

    let answer = attested(&server, hash);
    let messages = answer["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2, "one entry per log: {answer}");
    let indices: Vec<u64> = receipt["logs"]
        .as_array()
        .expect("logs")
        .iter()
        .map(|l| {
            u64::from_str_radix(
                l["logIndex"]
                    .as_str()
                    .expect("an index")
                    .trim_start_matches("0x"),
                16,
            )
            .expect("a number")
        })
        .collect();
    assert_eq!(indices.len(), 2);
    let first = check_entry(&messages[0], &emitted, hash, indices[0]);
    let second = check_entry(&messages[1], &emitted, hash, indices[1]);
    assert_ne!(first.nonce, second.nonce, "each log its own nonce");

    // The same message from a contract that is not the transmitter, a transaction without any
    // log, and a transaction the chain never saw: nothing to attest, however deep.
    assert_pending(&server, elsewhere);
    assert_pending(&server, plain);
    assert_pending(&server, &hex0x(&[0x5a; 32]));
}

/// Sends `request` as it is and returns the status and the body of the answer.
fn raw(server: &Server, request: &[u8]) -> (u16, Value, String) {
    let mut stream = TcpStream::connect(server.addr()).expect("connect");
    stream.set_read_timeout(Some(PATIENCE)).expect("a timeout");
    stream.write_all(request).expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("an answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (
        status,
        serde_json::from_str(body).expect("a JSON body"),
        head.to_owned(),
    )
}

#[test]
fn requests_that_are_not_lookups_are_refused_naming_the_problem_and_a_down_node_is_503() {
    // The node's URL is a port nobody listens on.
    let down = format!("http://127.0.0.1:{}", free_port());
    let server = service(&down, "0x00000000000000000000000000000000000000aa", &[]);
    let hash = hex0x(&[0xab; 32]);
    let refused = |path: &str, status: u16, says: &str| {
        let (got, body) = get(&server, path);
        let error = body["error"].as_str().unwrap_or_default();
        assert_eq!(got, status, "{path}: {body}");
        assert!(error.contains(says), "{path}: {error}");
    };
    refused(
        &format!("/v2/messages/6?transactionHash={hash}"),
        400,
        "the source domain 6 is not served here (served: 7)",
    );
    refused(
        &format!("/v2/messages/polygon?transactionHash={hash}"),
        400,
        "not a domain number",
    );
    refused(
        "/v2/messages/7?transactionHash=0x1234",
        400,
        "is not 0x and 64 hex digits",
    );
    refused(
        &format!("/v2/messages/7?transactionHash={}", "ab".repeat(32)),
        400,
        "is not 0x and 64 hex digits",
    );
    refused("/v2/messages/7", 400, "transactionHash is required");
    refused(
        &format!("/v2/messages/7?transactionHash={hash}&foo=1"),
        400,
        "unknown query parameter \"foo\"",
    );
    refused(
        &format!("/v2/messages/7?transactionHash={hash}&transactionHash={hash}"),
        400,
        "more than once",
    );
    refused("/v2/messages/7?nonce=12", 400, "not by nonce");
    refused("/v1/attestations/0x00", 404, "no such resource");

    let (status, body, head) = raw(
        &server,
        format!("POST /v2/messages/7?transactionHash={hash} HTTP/1.1\r\nHost: x\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!(status, 405, "{body}");
    assert!(head.contains("Allow: GET"), "{head}");
    assert!(body["error"]
        .as_str()
        .is_some_and(|e| e.contains("only GET")));

    let big = format!(
        "GET /v2/messages/7?transactionHash={hash} HTTP/1.1\r\nX-Padding: {}\r\n\r\n",
        "p".repeat(attestation::MAX_HEAD)
    );
    let (status, body, _) = raw(&server, big.as_bytes());
    assert_eq!(status, 431, "{body}");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("bytes")));
    // Within the bound, the same request is read (and answered for what it asks).
    let within = big.replacen(&"p".repeat(200), "", 1);
    let (status, body, _) = raw(&server, within.as_bytes());
    assert_eq!(status, 503, "{body}");

    // A well-formed lookup of a domain whose node is down: 503, naming the node, not its URL.
    let (status, body) = lookup(&server, &hash);
    assert_eq!(status, 503, "{body}");
    let error = body["error"].as_str().expect("an error");
    assert!(
        error.starts_with("the node of domain 7 is unreachable"),
        "{error}"
    );
    assert!(!error.contains(&down), "{error}");
}

/// Base (6) as a second chain, without fast transfers, its node at `rpc_url`: the arguments to
/// add to [`service`]'s.
fn and_base(rpc_url: &str) -> Vec<String> {
    vec![
        "--chain".to_owned(),
        format!("6={rpc_url},{CONFIRMATIONS}"),
        "--transmitter".to_owned(),
        "6=0x00000000000000000000000000000000000000bb".to_owned(),
    ]
}

/// The fee quote of the route from `source` to `destination`, as the path spells them.
fn quote(server: &Server, source: &str, destination: &str) -> (u16, Value) {
    get(
        server,
        &format!("/v2/burn/USDC/fees/{source}/{destination}"),
    )
}

#[test]
fn the_fee_quote_is_the_fast_fee_charged_and_only_where_fast_transfers_are() {
    let anvil = Anvil::start();
    let transmitter = anvil.emitter(1);
    let down = format!("http://127.0.0.1:{}", free_port());
    let mut extra = and_base(&down);
    extra.extend(["--fast-fee-bps".to_owned(), "3".to_owned()]);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let server = service(&anvil.url, &transmitter, &extra);

    // From Polygon (fast at 2 confirmations): the fast fee at 1000, nothing at 2000.
    assert_eq!(
        quote(&server, "7", "6"),
        (
            200,
            json!([
                {"finalityThreshold": 1000, "minimumFee": 3},
                {"finalityThreshold": 2000, "minimumFee": 0},
            ])
        )
    );
    // From Base (no fast transfers; its node is down, and no node is asked): 2000 only.
    assert_eq!(
        quote(&server, "6", "7"),
        (200, json!([{"finalityThreshold": 2000, "minimumFee": 0}]))
    );

    // What is quoted is what a fast transfer is charged: 3 bp of 2 000 000 is 600.
    let fast = transfer(1000, 2_000_000, 1_000);
    let receipt = anvil.send(Some(&transmitter), &hex0x(&fast.encode()), 0);
    let hash = receipt["transactionHash"].as_str().expect("a hash");
    anvil.mine(FAST - 1);
    let answer = attested(&server, hash);
    let decoded = &answer["messages"][0]["decodedMessage"];
    assert_eq!(decoded["finalityThresholdExecuted"], "1000");
    assert_eq!(decoded["decodedMessageBody"]["feeExecuted"], "600");

    // Without --fast-fee-bps, the default fee of 1 basis point is quoted.
    let extra = and_base(&down);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let default = service(&anvil.url, &transmitter, &extra);
    assert_eq!(
        quote(&default, "7", "6"),
        (
            200,
            json!([
                {"finalityThreshold": 1000, "minimumFee": 1},
                {"finalityThreshold": 2000, "minimumFee": 0},
            ])
        )
    );
}

#[test]
fn fee_quotes_that_are_not_routes_here_are_refused_naming_the_problem() {
    // The nodes are ports nobody listens on: a quote asks none of them.
    let down = format!("http://127.0.0.1:{}", free_port());
    let extra = and_base(&down);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let server = service(&down, "0x00000000000000000000000000000000000000aa", &extra);
    let error = |status: u16, error: &str| (status, json!({ "error": error }));

    // Domains not configured, whether CCTP knows them (3, Arbitrum) or not (99).
    for (source, destination, says) in [
        (
            "3",
            "7",
            "the source domain 3 is not served here (served: 6, 7)",
        ),
        (
            "99",
            "6",
            "the source domain 99 is not served here (served: 6, 7)",
        ),
        (
            "7",
            "3",
            "the destination domain 3 is not served here (served: 6, 7)",
        ),
        (
            "6",
            "99",
            "the destination domain 99 is not served here (served: 6, 7)",
        ),
        (
            "7",
            "7",
            "the destination domain 7 is the source domain: a route goes from one domain to \
             another",
        ),
        ("x", "6", "the source domain \"x\" is not a domain number"),
        ("-1", "6", "the source domain \"-1\" is not a domain number"),
        ("+7", "6", "the source domain \"+7\" is not a domain number"),
        (
            "4294967296",
            "6",
            "the source domain \"4294967296\" is not a domain number",
        ),
        (
            "7",
            "x",
            "the destination domain \"x\" is not a domain number",
        ),
        (
            "7",
            "-1",
            "the destination domain \"-1\" is not a domain number",
        ),
        (
            "7",
            "+6",
            "the destination domain \"+6\" is not a domain number",
        ),
        (
            "7",
            "4294967296",
            "the destination domain \"4294967296\" is not a domain number",
        ),
    ] {
        assert_eq!(
            quote(&server, source, destination),
            error(400, says),
            "{source} -> {destination}"
        );
    }

    // The quote takes no query parameter.
    for query in ["amount=1000000", "transactionHash=0x00", "x"] {
        let path = format!("/v2/burn/USDC/fees/7/6?{query}");
        let name = query.split('=').next().expect("a name");
        assert_eq!(
            get(&server, &path),
            error(
                400,
                &format!("unknown query parameter {name:?}: the fee quote takes none")
            ),
            "{path}"
        );
    }

    // Only GET, as on the lookup's path.
    let (status, body, head) = raw(
        &server,
        b"POST /v2/burn/USDC/fees/7/6 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(
        (status, body),
        error(405, "POST is not allowed: only GET is")
    );
    assert!(head.contains("Allow: GET"), "{head}");

    // Any other path is no resource.
    let no_such = "no such resource: GET /v2/messages/{sourceDomain}?transactionHash=0x… and \
                   GET /v2/burn/USDC/fees/{sourceDomainId}/{destDomainId} are served here";
    for path in [
        "/v2/burn/USDC/fees/7",
        "/v2/burn/USDC/fees/7/",
        "/v2/burn/USDC/fees/7/6/",
        "/v2/burn/USDC/fees/7/6/1",
        "/v2/burn/EURC/fees/7/6",
        "/v2/burn/usdc/fees/7/6",
        "/v2/fees/7/6",
    ] {
        assert_eq!(get(&server, path), error(404, no_such), "{path}");
    }
}

/// A fake JSON-RPC node: answers each method with the status and body it is told (a missing
/// method: `result: null`), or closes the connection unanswered for the body `"drop"`.
struct FakeNode {
    url: String,
    answers: Arc<Mutex<HashMap<String, (u16, String)>>>,
}

impl FakeNode {
    fn start() -> FakeNode {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake node");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let answers: Arc<Mutex<HashMap<String, (u16, String)>>> = Arc::default();
        let shared = Arc::clone(&answers);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let answers = Arc::clone(&shared);
                std::thread::spawn(move || fake_answer(stream, &answers));
            }
        });
        FakeNode { url, answers }
    }

    fn set(&self, method: &str, status: u16, body: &str) {
        self.answers
            .lock()
            .expect("answers")
            .insert(method.to_owned(), (status, body.to_owned()));
    }
}

fn fake_answer(mut stream: TcpStream, answers: &Mutex<HashMap<String, (u16, String)>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let request: Value = loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&data);
        if let Some((_, body)) = text.split_once("\r\n\r\n") {
            if let Ok(request) = serde_json::from_str(body) {
                break request;
            }
        }
    };
    let method = request["method"].as_str().unwrap_or_default().to_owned();
    let (status, body) = answers
        .lock()
        .expect("answers")
        .get(&method)
        .cloned()
        .unwrap_or((200, r#"{"jsonrpc":"2.0","id":1,"result":null}"#.to_owned()));
    if body == "drop" {
        return;
    }
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
}

#[test]
fn a_node_answering_garbage_is_503_naming_the_problem_never_a_panic() {
    let node = FakeNode::start();
    let transmitter = "0x00000000000000000000000000000000000000aa";
    let server = service(&node.url, transmitter, &[]);
    let hash = hex0x(&[0x77; 32]);
    const RECEIPT: &str = "eth_getTransactionReceipt";

    // A receipt the node does not have: Iris's pending answer.
    assert_pending(&server, &hash);

    let data = {
        let raw = transfer(2000, 1, 0).encode();
        let mut out = U256::from(32).0.to_vec();
        out.extend_from_slice(&U256::from(raw.len() as u128).0);
        out.extend_from_slice(&raw);
        out.resize(64 + raw.len().div_ceil(32) * 32, 0);
        hex0x(&out)
    };
    let good_receipt = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "blockNumber": "0x10", "status": "0x1", "logs": [{
            "address": transmitter, "topics": [cctp::MESSAGE_SENT_TOPIC], "data": data,
            "logIndex": "0x0", "removed": false}]}})
    .to_string();
    let cases: [(&str, u16, String, &str); 8] = [
        (
            RECEIPT,
            200,
            "<html>bad gateway</html>".to_owned(),
            "something not JSON",
        ),
        (RECEIPT, 502, String::new(), "with HTTP 502"),
        (
            RECEIPT,
            200,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"header not found"}}"#
                .to_owned(),
            "refused eth_getTransactionReceipt: header not found",
        ),
        (
            RECEIPT,
            200,
            r#"{"jsonrpc":"2.0","id":1}"#.to_owned(),
            "without a result",
        ),
        (
            RECEIPT,
            200,
            r#"{"jsonrpc":"2.0","id":1,"result":42}"#.to_owned(),
            "receipt without a readable body",
        ),
        (
            RECEIPT,
            200,
            r#"{"jsonrpc":"2.0","id":1,"result":{"blockNumber":"0xzz","logs":[]}}"#.to_owned(),
            "readable blockNumber",
        ),
        (RECEIPT, 200, "drop".to_owned(), "the node of domain 7"),
        (
            "eth_blockNumber",
            200,
            r#"{"jsonrpc":"2.0","id":1,"result":"banana"}"#.to_owned(),
            "a block number that is not one",
        ),
    ];
    for (method, status, body, says) in cases {
        if method == "eth_blockNumber" {
            node.set(RECEIPT, 200, &good_receipt);
        }
        node.set(method, status, &body);
        let (got, answer) = lookup(&server, &hash);
        let error = answer["error"].as_str().unwrap_or_default();
        assert_eq!(got, 503, "{method} answering {body:?}: {answer}");
        assert!(error.contains(says), "{method} answering {body:?}: {error}");
        assert!(!error.contains(&node.url), "{error}");
    }

    // The service lived through all of it: the node healed, the message is attested (block
    // 0x10 under head 0x14 is five confirmations).
    node.set(
        "eth_blockNumber",
        200,
        r#"{"jsonrpc":"2.0","id":1,"result":"0x14"}"#,
    );
    let answer = attested(&server, &hash);
    let entry = &answer["messages"][0];
    assert_eq!(entry["decodedMessage"]["finalityThresholdExecuted"], "2000");
    // One block less is one confirmation short.
    node.set(
        "eth_blockNumber",
        200,
        r#"{"jsonrpc":"2.0","id":1,"result":"0x13"}"#,
    );
    assert_pending(&server, &hash);
}
