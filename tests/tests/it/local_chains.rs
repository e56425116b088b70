//! The two local chains `scripts/dev` sets up (`scripts/local-chain.js` on two anvil nodes of
//! their own chain ids), with the local attestation service started from the arguments the
//! script prints, as `scripts/dev` starts it: the networks' configuration is one the worker
//! takes (USDC on both, each with its CCTP contracts and the service), and USDC burnt by the
//! treasury on Polygon for a wallet on Base is attested by the service once the burn has its
//! confirmations and minted there for exactly the amount, by anyone.

use std::time::Duration;

use payrail_evm::address_bytes;
use payrail_evm::cctp::{self, BurnMessage, U256};
use payrail_evm::chains::{self, CctpTransfer};
use payrail_tests::chain::{self, Anvil};
use payrail_tests::eventually;
use serde_json::Value;

#[test]
fn the_local_chains_carry_usdc_from_polygon_to_base_through_the_local_attestation_service() {
    let (polygon, base) = (Anvil::start(), Anvil::start_chain(31338));
    let port = payrail_tests::free_port();
    let attestation_url = format!("http://127.0.0.1:{port}");
    let local = chain::local_chain(&[&polygon.url, "polygon", "base", &base.url, &attestation_url]);

    // The worker's configuration: USDC on both networks, each with its contracts and service.
    let networks = chains::parse(&local["chains"].to_string()).expect("the worker takes it");
    let (on_polygon, on_base) = (&networks["polygon"], &networks["base"]);
    let (usdc_polygon, usdc_base) = (
        on_polygon.tokens["USDC"].address.clone(),
        on_base.tokens["USDC"].address.clone(),
    );
    assert_ne!(usdc_polygon, usdc_base, "each chain's USDC is its own");
    assert!(on_base.is_native("ETH"));
    let (from, to) = (
        on_polygon.cctp.clone().expect("Polygon's CCTP"),
        on_base.cctp.clone().expect("Base's CCTP"),
    );
    assert_eq!((from.domain, to.domain), (7, 6));
    for c in [&from, &to] {
        assert_eq!(c.attestation_url, attestation_url);
        assert_eq!(c.transfer, CctpTransfer::Standard);
    }

    let service = chain::attestation(&local["attestation"]);
    assert_eq!(service.url(), attestation_url);

    // The treasury burns 12.5 USDC on Polygon for a wallet on Base.
    let treasury = local["treasury"].as_str().unwrap().to_owned();
    let wallet = base.account(6);
    let amount: u128 = 12_500_000;
    let supply = polygon.total_supply(&usdc_polygon);
    polygon.approve(&usdc_polygon, &treasury, &from.token_messenger, amount);
    let burn = cctp::deposit_for_burn_call(
        U256::from(amount),
        to.domain,
        address_bytes(&wallet).unwrap(),
        address_bytes(&usdc_polygon).unwrap(),
        [0; 32],
        U256::ZERO,
        cctp::FINALIZED_THRESHOLD,
    );
    let receipt = polygon.send(&treasury, Some(&from.token_messenger), &burn);
    let hash = receipt["transactionHash"].as_str().unwrap().to_owned();
    assert_eq!(polygon.total_supply(&usdc_polygon), supply - amount);

    // The service signs once the burn has its confirmations (Polygon mines a block every two
    // seconds); until then it answers 404, as Circle's does.
    let http = reqwest::blocking::Client::new();
    let lookup = format!("{attestation_url}/v2/messages/7?transactionHash={hash}");
    let answer: Value = eventually("the burn's attestation", Duration::from_secs(60), || {
        let response = http.get(&lookup).send().ok()?;
        match response.status().as_u16() {
            200 => response.json().ok(),
            404 => None,
            other => panic!("the service answered {other}: {:?}", response.text()),
        }
    });
    let found = &answer["messages"][0];
    assert_eq!(found["status"], "complete", "{answer}");
    let bytes =
        |field: &str| hex::decode(found[field].as_str().unwrap().trim_start_matches("0x")).unwrap();
    let (message, attestation) = (bytes("message"), bytes("attestation"));
    let transfer = BurnMessage::decode(&message).expect("a V2 burn message");
    assert_eq!(
        (transfer.source().name, transfer.destination().name),
        ("polygon", "base")
    );
    assert_eq!(transfer.body().amount, U256::from(amount));
    let attester = address_bytes(&base.account(9)).unwrap();
    cctp::check_attestation(&message, &attestation, &[attester], 1).expect("the local attester");

    // Anyone mints on Base: the wallet holds exactly the amount.
    let relayer = base.account(5);
    base.send(
        &relayer,
        Some(&to.message_transmitter),
        &cctp::receive_message_call(&message, &attestation),
    );
    assert_eq!(base.balance_of(&usdc_base, &wallet), amount);
    drop(service);
}
