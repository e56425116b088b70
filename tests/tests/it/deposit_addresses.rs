//! Deposit addresses on EVM networks are derived by BIP32 from the configured extended public
//! key, one fresh index per session, allocated atomically: parallel sessions never share one.

use std::collections::HashSet;

use payrail_tests::Worker;
use serde_json::json;

/// `m/44'/60'/0'/0` of BIP39's "abandon … about" test mnemonic; its child 0 is the widely
/// published `0x9858EfFD232B4033E47d90003D41EC34EcaEda94`.
const XPUB: &str = "xpub6EF8jXqFeFEW5bwMU7RpQtHkzE4KJxcqJtvkCjJumzW8CPpacXkb92ek4WzLQXjL93HycJwTPUAcuNxCqFPKKU5m5Z2Vq4nCyh5CyPeBFFr";

#[test]
fn every_session_gets_its_own_derived_address() {
    let worker = Worker::start_with_vars("sandbox", 3600, &[("PAYRAIL_EVM_XPUB", XPUB)]);
    let key = worker.credentials.institutions[0].merchants[0]
        .public_key
        .clone();
    let session = |reference: String| {
        worker.checkout_session(&json!({
            "publicKey": key, "amount": "10.00", "currency": "EUR", "title": "Derived",
            "externalReference": reference, "redirectUrl": "https://shop.example/done",
            "allowCrypto": true
        }))
    };
    // The first session takes index 0 (the default way to pay is on an EVM network).
    let first = session("DERIVE-0".into());
    let page = worker.send(worker.http_get(first["url"].as_str().unwrap()), None);
    assert!(
        page.text
            .contains("0x9858EfFD232B4033E47d90003D41EC34EcaEda94"),
        "{}",
        page.text
    );
    // Twelve at once: twelve different indexes and addresses.
    let ids: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..12)
            .map(|i| scope.spawn(move || session(format!("DERIVE-P{i}"))))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap()["id"].as_str().unwrap().to_owned())
            .collect()
    });
    let db = worker.database();
    let mut indexes = HashSet::new();
    let mut addresses = HashSet::new();
    for id in &ids {
        let (index, address): (i64, String) = db
            .query_row(
                "SELECT deposit_index, deposit_address FROM checkout_sessions WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert!(
            address.starts_with("0x") && address.len() == 42,
            "{address}"
        );
        indexes.insert(index);
        addresses.insert(address);
    }
    assert_eq!(indexes.len(), 12, "{indexes:?}");
    assert_eq!(addresses.len(), 12);
    assert!(!indexes.contains(&0), "index 0 went to the first session");
}
