//! The SDK's receiver against the signature vectors every Payrail library shares
//! (`shared-types/vectors/webhook-signatures.json`): where the signature holds, the event is
//! parsed; otherwise the pinned refusal comes back.

use payrail::webhooks::{VerifyError, Webhooks, DEFAULT_TOLERANCE_SECONDS};
use serde_json::Value;

const VECTORS: &str = include_str!("../../shared-types/vectors/webhook-signatures.json");

#[test]
fn webhooks_give_the_pinned_answers_and_parse_what_verifies() {
    let all: Value = serde_json::from_str(VECTORS).expect("the vector file is JSON");
    let vectors = all["verify"].as_array().expect("verify vectors");
    let mut accepted = 0;
    for vector in vectors {
        let name = vector["name"].as_str().expect("name");
        let secrets: Vec<&str> = vector["secrets"]
            .as_array()
            .expect("secrets")
            .iter()
            .map(|s| s.as_str().expect("a secret"))
            .collect();
        let (first, rest) = secrets.split_first().expect("at least one secret");
        let webhooks = rest
            .iter()
            .fold(Webhooks::new(first), |w, s| w.also_accept(s))
            .with_tolerance(
                vector["tolerance"]
                    .as_i64()
                    .unwrap_or(DEFAULT_TOLERANCE_SECONDS),
            );
        let body = vector["body"].as_str().expect("body");
        let got = webhooks.verify_at(
            vector["header"].as_str().expect("header"),
            body.as_bytes(),
            vector["now"].as_i64().expect("now"),
        );
        match (vector["result"].as_str().expect("result"), got) {
            ("ok", Ok(event)) => {
                let sent: Value = serde_json::from_str(body).expect("an event");
                assert_eq!(event.id, sent["id"].as_str().expect("id"), "{name}");
                accepted += 1;
            }
            ("malformed_header", Err(VerifyError::MalformedHeader))
            | ("timestamp_out_of_tolerance", Err(VerifyError::TimestampOutOfTolerance))
            | ("no_matching_signature", Err(VerifyError::NoMatchingSignature)) => {}
            (want, got) => panic!("{name}: want {want}, got {got:?}"),
        }
    }
    assert!(accepted > 0 && accepted < vectors.len());
}
