//! `payrail_evm::cctp` against the CCTP V2 vectors that the crate `cctp-rs` 8.0.0 publishes
//! (generated from its Lean model of Circle's message format): every accept vector decodes to
//! the fields it lists and encodes back byte for byte, every reject vector is refused for its
//! reason, and the finality, transfer-mode and domain tables agree. The vectors are data,
//! downloaded and checked against a pinned sha256 by `bash scripts/setup`.

use payrail_evm::cctp::{
    deposit_for_burn_call, domain, message_hash, BurnBody, BurnMessage, Finality, Message,
    MessageError, DOMAINS, U256,
};
use serde_json::{Map, Value};
use std::path::PathBuf;

fn vectors() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../.cache/cctp-rs-8.0.0/tests/fixtures/lean/cctp_v2_vectors.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "the CCTP V2 vectors are missing at {} ({e}): run `bash scripts/setup` to download them",
            path.display()
        )
    });
    serde_json::from_str(&text).expect("the CCTP V2 vectors are not JSON")
}

fn list<'a>(vectors: &'a Value, name: &str, count: usize) -> &'a [Value] {
    let list = vectors[name]
        .as_array()
        .unwrap_or_else(|| panic!("the vectors have no list {name}"));
    // The file is pinned by its sha256: its lists have exactly these many vectors.
    assert_eq!(list.len(), count, "{name}");
    list
}

fn object<'a>(value: &'a Value, name: &str) -> &'a Map<String, Value> {
    value[name]
        .as_object()
        .unwrap_or_else(|| panic!("no object {name} in {value}"))
}

fn text<'a>(value: &'a Value, name: &str) -> &'a str {
    value[name]
        .as_str()
        .unwrap_or_else(|| panic!("no text {name} in {value}"))
}

fn bytes(value: &Value) -> Vec<u8> {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not text: {value}"));
    hex::decode(
        text.strip_prefix("0x")
            .unwrap_or_else(|| panic!("not 0x: {text}")),
    )
    .unwrap_or_else(|e| panic!("not hex: {text} ({e})"))
}

fn hex0x(bytes: &[u8]) -> Value {
    Value::String(format!("0x{}", hex::encode(bytes)))
}

fn number(value: u32) -> Value {
    Value::from(value)
}

fn decimal(value: U256) -> Value {
    Value::String(value.to_string())
}

fn finality(level: Option<Finality>) -> Value {
    level.map_or(Value::Null, |level| Value::from(level.name()))
}

fn domain_name(id: u32) -> Value {
    Value::from(
        domain(id)
            .map(|d| d.name)
            .expect("a decoded domain is known"),
    )
}

/// Each field a vector lists against what the codec decoded; a field the test does not know
/// fails it, so that nothing a vector says goes unchecked.
fn check_fields(
    vector: &str,
    part: &str,
    fields: &Map<String, Value>,
    actual: impl Fn(&str) -> Option<Value>,
) {
    assert!(!fields.is_empty(), "{vector}: no {part} fields");
    for (field, expected) in fields {
        let actual = actual(field)
            .unwrap_or_else(|| panic!("{vector}: the {part} field {field} is not checked here"));
        assert_eq!(&actual, expected, "{vector}: {part}.{field}");
    }
}

#[test]
fn every_accept_vector_decodes_to_its_fields_and_back() {
    let vectors = vectors();
    for vector in list(&vectors, "accept_message_vectors", 9) {
        let name = text(vector, "name");
        let raw = bytes(&vector["raw"]);

        let transfer = BurnMessage::decode(&raw).unwrap_or_else(|e| panic!("{name}: refused: {e}"));
        assert_eq!(transfer.encode(), raw, "{name}: re-encoded");
        assert_eq!(transfer.hash(), message_hash(&raw), "{name}");

        // The two layers alone agree with the whole, and round-trip too.
        let message = Message::decode(&raw).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&message, transfer.message(), "{name}");
        assert_eq!(message.encode(), raw, "{name}");
        let body = BurnBody::decode(&message.message_body).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&body, transfer.body(), "{name}");
        assert_eq!(body.encode(), message.message_body, "{name}");
        let rebuilt = BurnMessage::new(message.clone(), body.clone())
            .unwrap_or_else(|e| panic!("{name}: rebuilt: {e}"));
        assert_eq!(rebuilt, transfer, "{name}: decode(encode(x)) == x");

        check_fields(name, "header", object(vector, "header"), |field| {
            Some(match field {
                "version" => number(message.version),
                "source_domain" => number(message.source_domain),
                "source_domain_name" => domain_name(message.source_domain),
                "destination_domain" => number(message.destination_domain),
                "destination_domain_name" => domain_name(message.destination_domain),
                "nonce" => hex0x(&message.nonce),
                "sender" => hex0x(&message.sender),
                "recipient" => hex0x(&message.recipient),
                "destination_caller" => hex0x(&message.destination_caller),
                "min_finality_threshold" => number(message.min_finality_threshold),
                "finality_threshold_executed" => number(message.finality_threshold_executed),
                _ => return None,
            })
        });
        check_fields(name, "body", object(vector, "body"), |field| {
            Some(match field {
                "version" => number(body.version),
                "burn_token" => hex0x(&body.burn_token),
                "mint_recipient" => hex0x(&body.mint_recipient),
                "amount" => decimal(body.amount),
                "message_sender" => hex0x(&body.message_sender),
                "max_fee" => decimal(body.max_fee),
                "fee_executed" => decimal(body.fee_executed),
                "expiration_block" => decimal(body.expiration_block),
                "hook_data" => hex0x(&body.hook_data),
                _ => return None,
            })
        });
        check_fields(name, "derived", object(vector, "derived"), |field| {
            Some(match field {
                "message_len_bytes" => Value::from(raw.len()),
                "requested_finality" => finality(message.requested_finality()),
                "attested_finality" => finality(message.attested_finality()),
                "is_permissionless" => Value::from(message.is_permissionless()),
                "is_fast_transfer" => Value::from(message.is_fast_transfer()),
                "has_placeholder_nonce" => Value::from(message.has_placeholder_nonce()),
                "has_hooks" => Value::from(body.has_hooks()),
                _ => return None,
            })
        });
    }
}

/// The refusal each reject kind of the vectors is.
fn refuses_as(kind: &str, error: &MessageError) -> bool {
    match kind {
        "too_short_header" => matches!(error, MessageError::TooShortHeader { .. }),
        "too_short_body" => matches!(error, MessageError::TooShortBody { .. }),
        "unknown_source_domain" => matches!(error, MessageError::UnknownSourceDomain { .. }),
        "unknown_destination_domain" => {
            matches!(error, MessageError::UnknownDestinationDomain { .. })
        }
        "unsupported_header_version" => {
            matches!(error, MessageError::UnsupportedHeaderVersion { .. })
        }
        "unsupported_body_version" => {
            matches!(error, MessageError::UnsupportedBodyVersion { .. })
        }
        "non_canonical_burn_token" => matches!(error, MessageError::NonCanonicalBurnToken),
        "non_canonical_mint_recipient" => {
            matches!(error, MessageError::NonCanonicalMintRecipient)
        }
        "non_canonical_message_sender" => {
            matches!(error, MessageError::NonCanonicalMessageSender)
        }
        _ => panic!("the reject kind {kind} has no refusal here"),
    }
}

#[test]
fn every_reject_vector_is_refused_for_its_reason() {
    let vectors = vectors();
    let mut kinds = Vec::new();
    for vector in list(&vectors, "reject_message_vectors", 13) {
        let name = text(vector, "name");
        let kind = text(vector, "reject_kind");
        let raw = bytes(&vector["raw"]);
        let error = BurnMessage::decode(&raw)
            .err()
            .unwrap_or_else(|| panic!("{name}: accepted, but it is {kind}"));
        assert!(
            refuses_as(kind, &error),
            "{name}: {kind}, refused as {error:?}"
        );
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    // Every reject kind is met, none mapped twice.
    assert_eq!(kinds.len(), 9, "{kinds:?}");
    let samples = [
        MessageError::TooShortHeader { len: 0 },
        MessageError::TooShortBody { len: 0 },
        MessageError::UnknownSourceDomain { domain: 4 },
        MessageError::UnknownDestinationDomain { domain: 20 },
        MessageError::UnsupportedHeaderVersion { version: 7 },
        MessageError::UnsupportedBodyVersion { version: 9 },
        MessageError::NonCanonicalBurnToken,
        MessageError::NonCanonicalMintRecipient,
        MessageError::NonCanonicalMessageSender,
    ];
    for error in &samples {
        let matching: Vec<_> = kinds.iter().filter(|k| refuses_as(k, error)).collect();
        assert_eq!(matching.len(), 1, "{error:?}: {matching:?}");
    }
}

#[test]
fn finality_vectors_name_exactly_the_two_levels() {
    let vectors = vectors();
    for vector in list(&vectors, "finality_vectors", 10) {
        let threshold = vector["u32"].as_u64().and_then(|n| u32::try_from(n).ok());
        let threshold = threshold.unwrap_or_else(|| panic!("no u32 in {vector}"));
        let level = Finality::from_threshold(threshold);
        assert_eq!(Value::from(level.is_some()), vector["valid"], "{threshold}");
        assert_eq!(
            level.map(|l| Value::from(l.name())),
            vector.get("name").cloned(),
            "{threshold}"
        );
        if let Some(level) = level {
            assert_eq!(level.threshold(), threshold);
        }
    }
}

#[test]
fn transfer_modes_are_fast_by_threshold_and_carry_their_fee_and_hooks() {
    let vectors = vectors();
    for vector in list(&vectors, "transfer_mode_vectors", 6) {
        let mode = text(vector, "mode");
        let threshold = vector["min_finality_threshold"]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or_else(|| panic!("{mode}: no threshold"));
        let max_fee: u128 = text(vector, "max_fee")
            .parse()
            .unwrap_or_else(|e| panic!("{mode}: max fee: {e}"));
        let hook_data = match &vector["hook_data"] {
            Value::Null => Vec::new(),
            hook => bytes(hook),
        };

        let level = Finality::from_threshold(threshold)
            .unwrap_or_else(|| panic!("{mode}: {threshold} is no finality level"));
        assert_eq!(
            Value::from(level == Finality::Fast),
            vector["is_fast"],
            "{mode}"
        );
        assert_eq!(mode.starts_with("fast"), level == Finality::Fast, "{mode}");

        // The burn it asks for carries its fee and threshold in their words.
        let call = deposit_for_burn_call(
            U256::from(max_fee + 1),
            6,
            [0x7f; 20],
            [0x1c; 20],
            [0; 32],
            U256::from(max_fee),
            threshold,
        );
        assert_eq!(call.len(), 2 + 8 + 7 * 64, "{mode}");
        assert_eq!(&call[10 + 5 * 64..10 + 6 * 64], format!("{max_fee:064x}"));
        assert_eq!(&call[10 + 6 * 64..], format!("{threshold:064x}"));

        // The burn message it makes has hooks exactly when it has hook data, and round-trips.
        let message = Message {
            version: 1,
            source_domain: 0,
            destination_domain: 6,
            nonce: [1; 32],
            sender: [0; 32],
            recipient: [0; 32],
            destination_caller: [0; 32],
            min_finality_threshold: threshold,
            finality_threshold_executed: threshold,
            message_body: Vec::new(),
        };
        let body = BurnBody {
            version: 1,
            burn_token: [0; 32],
            mint_recipient: [0; 32],
            amount: U256::from(max_fee + 1),
            message_sender: [0; 32],
            max_fee: U256::from(max_fee),
            fee_executed: U256::ZERO,
            expiration_block: U256::ZERO,
            hook_data: hook_data.clone(),
        };
        let transfer = BurnMessage::new(message, body).unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(
            transfer.body().has_hooks(),
            !vector["hook_data"].is_null(),
            "{mode}"
        );
        assert_eq!(transfer.body().hook_data, hook_data, "{mode}");
        assert_eq!(
            transfer.message().is_fast_transfer(),
            level == Finality::Fast
        );
        assert_eq!(
            BurnMessage::decode(&transfer.encode()).as_ref(),
            Ok(&transfer)
        );
    }
}

#[test]
fn the_domain_table_is_the_vectors_table() {
    let vectors = vectors();
    let table = list(&vectors, "domain_vectors", 42);
    let mut valid = 0;
    for vector in table {
        let id = vector["u32"].as_u64().and_then(|n| u32::try_from(n).ok());
        let id = id.unwrap_or_else(|| panic!("no u32 in {vector}"));
        let known = domain(id);
        assert_eq!(Value::from(known.is_some()), vector["valid"], "domain {id}");
        if let Some(known) = known {
            valid += 1;
            assert_eq!(Value::from(known.name), vector["name"], "domain {id}");
            assert_eq!(Value::from(known.evm), vector["is_evm"], "domain {id}");
        }
    }
    // And the table knows no domain the vectors do not list as valid.
    assert_eq!(DOMAINS.len(), valid);
}
