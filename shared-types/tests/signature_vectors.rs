//! The signature vectors every Payrail library checks itself against
//! (`shared-types/vectors/webhook-signatures.json`): the sender's `sign` and the receiver's
//! `Verifier` must give exactly the pinned answers.

use serde_json::Value;
use shared_types::webhook::{sign, Verifier, VerifyError, DEFAULT_TOLERANCE_SECONDS};

const VECTORS: &str = include_str!("../vectors/webhook-signatures.json");

fn vectors(section: &str) -> Vec<Value> {
    let all: Value = serde_json::from_str(VECTORS).expect("the vector file is JSON");
    let list = all[section].as_array().expect("a list").clone();
    assert!(!list.is_empty(), "no {section} vectors");
    list
}

fn text<'a>(vector: &'a Value, field: &str) -> &'a str {
    vector[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {vector}"))
}

fn number(vector: &Value, field: &str) -> i64 {
    vector[field]
        .as_i64()
        .unwrap_or_else(|| panic!("{field} in {vector}"))
}

#[test]
fn sign_gives_the_pinned_signatures() {
    for vector in vectors("sign") {
        assert_eq!(
            sign(
                text(&vector, "secret"),
                number(&vector, "timestamp"),
                text(&vector, "body").as_bytes()
            ),
            text(&vector, "signature"),
            "{vector}"
        );
    }
}

#[test]
fn the_verifier_gives_the_pinned_answers() {
    let mut seen = std::collections::BTreeSet::new();
    for vector in vectors("verify") {
        let secrets: Vec<&str> = vector["secrets"]
            .as_array()
            .expect("secrets")
            .iter()
            .map(|s| s.as_str().expect("a secret"))
            .collect();
        let (first, rest) = secrets.split_first().expect("at least one secret");
        let verifier = rest
            .iter()
            .fold(Verifier::new(first), |v, s| v.also_accept(s))
            .with_tolerance(
                vector["tolerance"]
                    .as_i64()
                    .unwrap_or(DEFAULT_TOLERANCE_SECONDS),
            );
        let got = match verifier.verify(
            text(&vector, "header"),
            text(&vector, "body").as_bytes(),
            number(&vector, "now"),
        ) {
            Ok(()) => "ok",
            Err(VerifyError::MalformedHeader) => "malformed_header",
            Err(VerifyError::TimestampOutOfTolerance) => "timestamp_out_of_tolerance",
            Err(VerifyError::NoMatchingSignature) => "no_matching_signature",
            Err(VerifyError::BadPayload) => "bad_payload",
        };
        assert_eq!(got, text(&vector, "result"), "{}", text(&vector, "name"));
        seen.insert(got);
    }
    // The file exercises every answer, so a verifier that always says one thing fails it.
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        [
            "malformed_header",
            "no_matching_signature",
            "ok",
            "timestamp_out_of_tolerance"
        ]
    );
}
