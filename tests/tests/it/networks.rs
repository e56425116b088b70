//! The configured EVM networks as the portal shows them, against a real local node (anvil): the
//! chain id the node reports, its newest block as blocks are mined, a node on the wrong chain,
//! and one that cannot be reached, without the node's URL ever being shown.

use std::time::Duration;

use payrail_tests::chain::Anvil;
use payrail_tests::{eventually, Worker};
use reqwest::Method;
use serde_json::{json, Value};

#[test]
fn the_portal_shows_each_networks_node() {
    let anvil = Anvil::start();
    let usdc = anvil.token("USD Coin", "USDC");
    let now = anvil.time();
    let eur = anvil.feed("EUR / USD", 108_000_000, now);
    let gbp = anvil.feed("GBP / USD", 127_000_000, now - 7200);
    let chains = json!({
        "polygon": {"rpc_url": anvil.url, "chain_id": 31337, "confirmations": 2,
            "tokens": {"USDC": {"address": usdc}},
            "feeds": {"EUR/USD": {"address": eur}, "GBP/USD": {"address": gbp}}},
        "arbitrum": {"rpc_url": anvil.url, "chain_id": 42161},
        "base": {"rpc_url": "http://127.0.0.1:1/secret-key-in-url", "chain_id": 8453, "l1_fee_oracle": "0x420000000000000000000000000000000000000F"}
    });
    let worker = Worker::start_with_vars(
        "production",
        3600,
        &[("PAYRAIL_CHAINS", &chains.to_string())],
    );
    let session = worker.portal_login(0);
    let read = || {
        let reply = worker.portal(Method::GET, "/portal/api/networks", Some(&session), None);
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert!(!reply.text.contains("secret-key-in-url"), "{}", reply.text);
        assert!(!reply.text.contains(&anvil.url), "{}", reply.text);
        reply.json()["data"].as_array().unwrap().clone()
    };
    let by_name =
        |list: &[Value], name: &str| list.iter().find(|n| n["network"] == name).unwrap().clone();
    let first = read();
    let polygon = by_name(&first, "polygon");
    assert_eq!(polygon["status"], "ok", "{polygon}");
    assert_eq!(polygon["node_chain_id"], 31337);
    assert_eq!(polygon["confirmations"], 2);
    let head = polygon["head_block"].as_u64().unwrap();
    assert_eq!(polygon["tokens"][0]["asset"], "USDC");
    assert_eq!(
        polygon["tokens"][0]["address"]
            .as_str()
            .unwrap()
            .to_ascii_lowercase(),
        usdc.to_ascii_lowercase()
    );
    let feed = |pair: &str| {
        polygon["feeds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["pair"] == pair)
            .unwrap()
            .clone()
    };
    assert_eq!(feed("EUR/USD")["status"], "ok", "{polygon}");
    assert_eq!(feed("EUR/USD")["answer"], "1.08");
    assert_eq!(feed("GBP/USD")["status"], "stale");
    let why = feed("GBP/USD")["error"].as_str().unwrap().to_owned();
    assert!(
        why.contains("stale") && why.contains("at most 3600 s"),
        "{why}"
    );
    assert_eq!(by_name(&first, "arbitrum")["status"], "wrong_chain");
    assert_eq!(
        by_name(&first, "arbitrum")["confirmations"],
        12,
        "the default depth"
    );
    let base = by_name(&first, "base");
    assert_eq!(base["status"], "unreachable", "{base}");
    assert!(base["error"].as_str().unwrap().contains("unreachable"));

    // The overview page shows the same, without the URL.
    let page = worker.send(
        worker
            .request(Method::GET, "/portal/")
            .header("Cookie", format!("payrail_portal={}", session.cookie)),
        None,
    );
    assert_eq!(page.status, 200);
    assert!(
        page.text.contains("data-network=\"polygon\""),
        "{}",
        page.text
    );
    assert!(page.text.contains("wrong_chain"));
    assert!(
        page.text.contains("data-feed=\"polygon:GBP/USD\""),
        "{}",
        page.text
    );
    assert!(!page.text.contains("secret-key-in-url"));

    // Five new blocks: the newest block follows.
    anvil.mine(5);
    eventually("the new head", Duration::from_secs(10), || {
        let now = by_name(&read(), "polygon")["head_block"].as_u64().unwrap();
        (now >= head + 5).then_some(())
    });
}
