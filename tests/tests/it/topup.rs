//! A merchant tops up its balance, on a real local chain in production mode: an admin gives the
//! merchant a top-up address per network (derived from the deposit key at a fresh index, stable,
//! never another merchant's or a checkout's; viewers see it and cannot make one), money sent
//! there is credited to the merchant's account in the books once at the network's depth, exactly
//! once whatever the cron runs, and money reorged away before its depth never is. The section of
//! the merchant page, in Chromium at a desktop's and a phone's width.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use payrail_tests::browser::{exclusive, Browser};
use payrail_tests::chain::{chains, Anvil, TEST_XPUB};
use payrail_tests::faults::{invented_transfer, Fault, FaultyNode};
use payrail_tests::{eventually, form, PortalSession, Reply, Worker};
use reqwest::Method;
use serde_json::{json, Value};

/// Confirmations the tests' networks ask for.
const DEPTH: u64 = 3;
/// Half an ether, in wei.
const HALF_ETHER: u128 = 500_000_000_000_000_000;

/// A chain with USDC and a production worker watching it as Polygon (USDC, and its coin; its
/// node behind a proxy that passes every call on unless a test says otherwise) and as Base
/// (ether).
struct Setup {
    anvil: Anvil,
    usdc: String,
    customer: String,
    worker: Worker,
    /// Polygon's node as the worker sees it.
    node: FaultyNode,
}

fn start() -> Setup {
    let anvil = Anvil::start();
    let usdc = anvil.token("USD Coin", "USDC");
    let customer = anvil.account(1);
    anvil.mint(&usdc, &customer, 1_000_000_000_000);
    let eth = anvil.feed("ETH / USD", 300_000_000_000, anvil.time());
    let node = FaultyNode::start(&anvil.url);
    let mut config: Value = serde_json::from_str(&chains(
        "polygon",
        &node.url,
        DEPTH,
        &[("USDC", &usdc)],
        &[],
    ))
    .unwrap();
    config["base"] = json!({"rpc_url": anvil.url, "chain_id": 31337, "confirmations": DEPTH,
        "native": "ETH", "feeds": {"ETH/USD": {"address": eth}}});
    let worker = Worker::start_with_vars(
        "production",
        3600,
        &[
            ("PAYRAIL_EVM_XPUB", TEST_XPUB),
            ("PAYRAIL_CHAINS", &config.to_string()),
        ],
    );
    Setup {
        anvil,
        usdc,
        customer,
        worker,
        node,
    }
}

/// The shared chain and worker, for one test at a time: each mines blocks, which would change
/// another's confirmations under it.
fn shared() -> (MutexGuard<'static, ()>, &'static Setup) {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    (guard, SETUP.get_or_init(start))
}

/// The first institution's merchants with `status`, by id.
fn merchants(worker: &Worker, status: &str) -> Vec<i64> {
    let ids = &worker.credentials.institutions[0].merchant_ids;
    let db = worker.database();
    let mut out: Vec<i64> = ids
        .iter()
        .copied()
        .filter(|id| {
            db.query_row("SELECT status FROM merchants WHERE id = ?1", [id], |r| {
                r.get::<_, String>(0)
            })
            .unwrap()
                == status
        })
        .collect();
    out.sort_unstable();
    out
}

/// `POST /portal/api/merchants/{id}/topup/{network}`.
fn give(worker: &Worker, session: &PortalSession, merchant: i64, network: &str) -> Reply {
    worker.portal(
        Method::POST,
        &format!("/portal/api/merchants/{merchant}/topup/{network}"),
        Some(session),
        None,
    )
}

/// The merchant's top-up address on `network`, given out by the admin.
fn address(worker: &Worker, session: &PortalSession, merchant: i64, network: &str) -> String {
    let reply = give(worker, session, merchant, network);
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()["address"].as_str().unwrap().to_owned()
}

/// `GET /portal/api/merchants/{id}/topup`, the part of `network`.
fn topups(worker: &Worker, session: &PortalSession, merchant: i64, network: &str) -> Value {
    let reply = worker.portal(
        Method::GET,
        &format!("/portal/api/merchants/{merchant}/topup"),
        Some(session),
        None,
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()["networks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["network"] == network)
        .cloned()
        .unwrap_or_else(|| panic!("no {network} in {}", reply.text))
}

/// The transfer `hash` as the portal lists it, once it is there.
fn listed(n: &Value, hash: &str) -> Option<Value> {
    n["transfers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tx_hash"] == hash)
        .cloned()
}

/// Runs the cron until the portal shows the transfer `hash` to `merchant` on `network` as
/// `done` holds.
fn until_listed(
    s: &Setup,
    session: &PortalSession,
    (merchant, network, hash): (i64, &str, &str),
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    eventually(what, Duration::from_secs(40), || {
        s.worker.cron();
        listed(&topups(&s.worker, session, merchant, network), hash).filter(&done)
    })
}

/// The posted totals (debits, credits) of account `id`; zeros when it does not exist.
fn posted(worker: &Worker, id: &str) -> (u128, u128) {
    worker
        .database()
        .query_row(
            "SELECT debits_posted, credits_posted FROM ledger_accounts WHERE id = ?1",
            [id],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
        )
        .map(|(d, c)| (d.parse().unwrap(), c.parse().unwrap()))
        .unwrap_or((0, 0))
}

/// The books' transfers recording the chain transaction `hash`: (code, amount), by id.
fn posted_for(worker: &Worker, hash: &str) -> BTreeMap<String, (String, String)> {
    let db = worker.database();
    let mut stmt = db
        .prepare("SELECT id, code, amount FROM ledger_transfers WHERE reference = ?1")
        .unwrap();
    stmt.query_map([hash], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// When the watch of `token` at `address` was last checked, Unix seconds.
fn last_check(worker: &Worker, address: &str, token: &str) -> i64 {
    worker
        .database()
        .query_row(
            "SELECT checked_at FROM topup_watches WHERE address = lower(?1) AND token = lower(?2)",
            [address, token],
            |r| r.get(0),
        )
        .unwrap()
}

/// A page of the portal on `session`.
fn page(worker: &Worker, session: &PortalSession, path: &str) -> Reply {
    worker.portal_page(session, path)
}

/// A viewer of the first institution, invited by `admin`.
fn viewer(worker: &Worker, admin: &PortalSession) -> PortalSession {
    let invited = worker.portal(
        Method::POST,
        "/portal/api/users",
        Some(admin),
        Some(&json!({"email": "topup-viewer@northwind.example", "role": "viewer"})),
    );
    assert_eq!(invited.status, 201, "{}", invited.text);
    worker.portal_login_as(
        "topup-viewer@northwind.example",
        invited.json()["password"].as_str().unwrap(),
    )
}

#[test]
fn an_admin_gives_a_merchant_a_stable_top_up_address_per_network_of_its_own() {
    let (_one, s) = shared();
    let worker = &s.worker;
    let admin = worker.portal_login(0);
    let active = merchants(worker, "active");
    let (a, b) = (active[0], active[1]);

    // Before: each watched network, no address, what it would accept.
    let before = topups(worker, &admin, a, "polygon");
    assert_eq!(before["address"], Value::Null);
    let assets: Vec<&str> = before["assets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["asset"].as_str().unwrap())
        .collect();
    assert_eq!(assets, ["USDC", "POL"], "the token and the network's coin");
    assert_eq!(
        topups(worker, &admin, a, "base")["assets"][0]["asset"],
        "ETH"
    );

    let polygon = address(worker, &admin, a, "polygon");
    assert!(
        polygon.starts_with("0x") && polygon.len() == 42,
        "{polygon}"
    );
    let shown = topups(worker, &admin, a, "polygon");
    assert_eq!(shown["address"], json!(polygon));
    assert_eq!(
        shown["payment_uri"],
        json!(format!("ethereum:{polygon}@31337"))
    );
    assert_eq!(shown["confirmations"], DEPTH);
    assert_eq!(shown["created_by"], "admin@northwind.example");
    // Stable: asked again, six times at once, it is the same address.
    let again: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|_| scope.spawn(|| address(worker, &admin, a, "polygon")))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(again.iter().all(|x| *x == polygon), "{again:?}");
    // Another network, another merchant (six asking at once for a new one): other addresses.
    let base = address(worker, &admin, a, "base");
    let other: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|_| scope.spawn(|| address(worker, &admin, b, "polygon")))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(other.iter().all(|x| *x == other[0]), "{other:?}");
    let all: HashSet<String> = [&polygon, &base, &other[0]]
        .into_iter()
        .map(|x| x.to_ascii_lowercase())
        .collect();
    assert_eq!(all.len(), 3, "{all:?}");
    // From the deposit key's allocator: no checkout's address, no index twice.
    let key = &worker.credentials.institutions[0].merchants[0].public_key;
    let session = worker.checkout_session(&json!({
        "publicKey": key, "amount": "5.00", "currency": "USD", "title": "Top-up test",
        "externalReference": "TOPUP-DISTINCT", "redirectUrl": "https://shop.example/done",
        "allowCrypto": true
    }));
    let db = worker.database();
    let deposit: (i64, String) = db
        .query_row(
            "SELECT deposit_index, lower(deposit_address) FROM checkout_sessions WHERE id = ?1",
            [session["id"].as_str().unwrap()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(!all.contains(&deposit.1));
    let indexes: Vec<i64> = db
        .prepare("SELECT derivation_index FROM topup_addresses")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let distinct: HashSet<i64> = indexes.iter().copied().collect();
    assert_eq!(distinct.len(), indexes.len(), "{indexes:?}");
    assert!(!distinct.contains(&deposit.0), "{indexes:?} {deposit:?}");
    // Each address is watched for every asset of its network.
    let watched: i64 = db
        .query_row(
            "SELECT count(*) FROM topup_watches WHERE address = lower(?1)",
            [&polygon],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(watched, 2, "USDC and POL");

    // A viewer sees the address and cannot make one.
    let viewer = viewer(worker, &admin);
    assert_eq!(
        topups(worker, &viewer, a, "polygon")["address"],
        json!(polygon)
    );
    give(worker, &viewer, b, "base").assert_error(403, "admin_required");
    let seen = page(worker, &viewer, &format!("/portal/merchants/{a}"));
    assert_eq!(seen.status, 200);
    assert!(seen.text.contains("Top up balance"), "{}", seen.text);
    assert!(seen.text.contains(&polygon));
    let seen_b = page(worker, &viewer, &format!("/portal/merchants/{b}"));
    assert!(
        !seen_b.text.contains("topup-create"),
        "no form for a viewer"
    );
    assert!(seen_b
        .text
        .contains("an admin of an active merchant can create one"));
    let refused = worker.send(
        worker
            .request(Method::POST, &format!("/portal/merchants/{b}/topup"))
            .header("Cookie", format!("payrail_portal={}", viewer.cookie))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form(&[("csrf_token", &viewer.csrf), ("network", "base")])),
        None,
    );
    assert_eq!(refused.status, 403);
    assert_eq!(topups(worker, &admin, b, "base")["address"], Value::Null);
    // The admin's page form gives it, and goes back to the section.
    let made = worker.send(
        worker
            .request(Method::POST, &format!("/portal/merchants/{b}/topup"))
            .header("Cookie", format!("payrail_portal={}", admin.cookie))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form(&[("csrf_token", &admin.csrf), ("network", "base")])),
        None,
    );
    assert_eq!(made.status, 303, "{}", made.text);
    assert!(made
        .header("location")
        .unwrap()
        .ends_with(&format!("/portal/merchants/{b}#top-up")));
    assert!(topups(worker, &admin, b, "base")["address"].is_string());

    // Not for a suspended merchant (it would not be watched), nor on a network not watched,
    // nor another institution's merchant.
    let suspended = merchants(worker, "suspended");
    give(worker, &admin, suspended[0], "polygon").assert_error(409, "conflict");
    give(worker, &admin, a, "ethereum").assert_error(404, "not_found");
    let stranger = worker.portal_login(1);
    give(worker, &stranger, a, "polygon").assert_error(404, "not_found");
    let hidden = worker.portal(
        Method::GET,
        &format!("/portal/api/merchants/{a}/topup"),
        Some(&stranger),
        None,
    );
    assert_eq!(hidden.status, 404);
}

#[test]
fn usdc_and_ether_sent_to_top_up_addresses_credit_the_merchant_once_at_their_depth() {
    let (_one, s) = shared();
    let worker = &s.worker;
    let admin = worker.portal_login(0);
    let merchant = merchants(worker, "active")[2];
    let polygon = address(worker, &admin, merchant, "polygon");
    let base = address(worker, &admin, merchant, "base");
    let usdc = s.usdc.to_ascii_lowercase();
    let owed_usdc = format!("polygon:{usdc}:merchant:{merchant}");
    let owed_ether = format!("base:native:merchant:{merchant}");

    let token_hash = s.anvil.transfer(&s.usdc, &s.customer, &polygon, 25_000_000);
    let ether_hash = s.anvil.pay_ether(&s.customer, &base, HALF_ETHER);
    // Seen, not yet credited: nothing in the books.
    let seen = until_listed(
        s,
        &admin,
        (merchant, "polygon", &token_hash),
        "the USDC to be seen",
        |t| !t["credited"].as_bool().unwrap(),
    );
    assert_eq!(seen["amount"], "25");
    assert_eq!(seen["asset"], "USDC");
    assert_eq!(seen["base_units"], "25000000");
    assert!(seen["confirmations"].as_u64().unwrap() < DEPTH, "{seen}");
    let ether_seen = until_listed(
        s,
        &admin,
        (merchant, "base", &ether_hash),
        "the ether to be seen",
        |t| !t["credited"].as_bool().unwrap(),
    );
    assert_eq!(ether_seen["amount"], "0.5");
    assert_eq!(ether_seen["asset"], "ETH");
    for hash in [&token_hash, &ether_hash] {
        assert!(posted_for(worker, hash).is_empty(), "not before its depth");
    }
    assert_eq!(posted(worker, &owed_usdc), (0, 0));

    s.anvil.mine(DEPTH);
    for (network, hash) in [("polygon", &token_hash), ("base", &ether_hash)] {
        let credited = until_listed(
            s,
            &admin,
            (merchant, network, hash),
            "the top-up to be credited",
            |t| t["credited"].as_bool().unwrap(),
        );
        assert_eq!(credited["confirmations"], DEPTH);
    }
    // In custody at the address, owed to the merchant.
    let polygon_lower = polygon.to_ascii_lowercase();
    let base_lower = base.to_ascii_lowercase();
    assert_eq!(posted(worker, &owed_usdc), (0, 25_000_000));
    assert_eq!(posted(worker, &owed_ether), (0, HALF_ETHER));
    assert_eq!(
        posted(worker, &format!("polygon:{usdc}:custody:{polygon_lower}")),
        (25_000_000, 0)
    );
    assert_eq!(
        posted(
            worker,
            &format!("polygon:{usdc}:unallocated:{polygon_lower}")
        ),
        (25_000_000, 25_000_000)
    );
    assert_eq!(
        posted(worker, &format!("base:native:custody:{base_lower}")),
        (HALF_ETHER, 0)
    );
    let books = posted_for(worker, &token_hash);
    assert_eq!(
        books.values().cloned().collect::<Vec<_>>(),
        [
            ("receipt".to_owned(), "25000000".to_owned()),
            ("topup".to_owned(), "25000000".to_owned()),
        ],
        "{books:?}"
    );
    assert!(books.contains_key(&format!("topup:polygon:{token_hash}:0:{polygon_lower}")));
    assert_eq!(posted_for(worker, &ether_hash).len(), 2);

    // A second top-up at its depth, met by eight cron runs at once; then the runs after them
    // read the same blocks again (each check reads back `confirmations` blocks).
    let second = s.anvil.transfer(&s.usdc, &s.customer, &polygon, 4_000_000);
    s.anvil.mine(DEPTH);
    let racing = || {
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| worker.cron());
            }
        });
    };
    racing();
    until_listed(
        s,
        &admin,
        (merchant, "polygon", &second),
        "the second top-up to be credited",
        |t| t["credited"].as_bool().unwrap(),
    );
    let checked = last_check(worker, &polygon, &usdc);
    eventually(
        "the watch to be read again",
        Duration::from_secs(40),
        || {
            racing();
            (last_check(worker, &polygon, &usdc) > checked).then_some(())
        },
    );
    racing();
    assert_eq!(posted(worker, &owed_usdc), (0, 29_000_000), "each once");
    assert_eq!(posted(worker, &owed_ether), (0, HALF_ETHER));
    for hash in [&token_hash, &second, &ether_hash] {
        assert_eq!(
            posted_for(worker, hash).len(),
            2,
            "{hash}: a receipt and a top-up"
        );
    }
    let topups: i64 = worker
        .database()
        .query_row(
            "SELECT count(*) FROM ledger_transfers WHERE code = 'topup' AND credit_account = ?1",
            [&owed_usdc],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(topups, 2);
    // The books balance, and every address holds on chain what they say.
    payrail_tests::books::assert_balanced(worker, &s.anvil);
}

#[test]
fn a_top_up_reorged_away_before_its_depth_is_never_credited() {
    let s = start();
    let worker = &s.worker;
    let admin = worker.portal_login(0);
    let merchant = merchants(worker, "active")[0];
    // The first index of the deposit key on a fresh worker: its widely published address.
    let polygon = address(worker, &admin, merchant, "polygon");
    assert_eq!(polygon, "0x9858EfFD232B4033E47d90003D41EC34EcaEda94");
    let base = address(worker, &admin, merchant, "base");
    let before = s.anvil.snapshot();
    let token_hash = s.anvil.transfer(&s.usdc, &s.customer, &polygon, 7_000_000);
    let ether_hash = s.anvil.pay_ether(&s.customer, &base, HALF_ETHER);
    for (network, hash) in [("polygon", &token_hash), ("base", &ether_hash)] {
        until_listed(
            &s,
            &admin,
            (merchant, network, hash),
            "the top-up to be seen",
            |t| !t["credited"].as_bool().unwrap(),
        );
    }
    s.anvil.revert(before);
    s.anvil.mine(DEPTH + 1);
    let stored = |hash: &str| -> i64 {
        worker
            .database()
            .query_row(
                "SELECT count(*) FROM topup_transfers WHERE tx_hash = ?1",
                [hash],
                |r| r.get(0),
            )
            .unwrap()
    };
    eventually(
        "the reorged top-ups to be gone",
        Duration::from_secs(40),
        || {
            worker.cron();
            (stored(&token_hash) == 0 && stored(&ether_hash) == 0).then_some(())
        },
    );
    // Read past the old blocks, and still nothing in the books.
    let polygon_head: i64 = s.anvil.head().try_into().unwrap();
    eventually(
        "the watches to read past the reorg",
        Duration::from_secs(40),
        || {
            worker.cron();
            let least: i64 = worker
                .database()
                .query_row("SELECT min(scanned_to) FROM topup_watches", [], |r| {
                    r.get(0)
                })
                .unwrap();
            (least + i64::try_from(DEPTH).unwrap() > polygon_head).then_some(())
        },
    );
    for hash in [&token_hash, &ether_hash] {
        assert!(
            posted_for(worker, hash).is_empty(),
            "{hash} was never credited"
        );
    }
    let usdc = s.usdc.to_ascii_lowercase();
    assert_eq!(
        posted(worker, &format!("polygon:{usdc}:merchant:{merchant}")),
        (0, 0)
    );
    assert_eq!(
        posted(worker, &format!("base:native:merchant:{merchant}")),
        (0, 0)
    );
    assert!(listed(&topups(worker, &admin, merchant, "polygon"), &token_hash).is_none());

    // Sent again on the new chain: credited once.
    let again = s.anvil.transfer(&s.usdc, &s.customer, &polygon, 7_000_000);
    s.anvil.mine(DEPTH);
    until_listed(
        &s,
        &admin,
        (merchant, "polygon", &again),
        "the new top-up credited",
        |t| t["credited"].as_bool().unwrap(),
    );
    assert_eq!(
        posted(worker, &format!("polygon:{usdc}:merchant:{merchant}")),
        (0, 7_000_000)
    );
    // The books balance, and every address holds on chain what they say.
    payrail_tests::books::assert_balanced(worker, &s.anvil);
}

/// Why the last check of the watch of `token` at `address` could not be taken, if it could not.
fn node_error(worker: &Worker, address: &str, token: &str) -> Option<String> {
    worker
        .database()
        .query_row(
            "SELECT node_error FROM topup_watches WHERE address = lower(?1) AND token = lower(?2)",
            [address, token],
            |r| r.get(0),
        )
        .unwrap()
}

#[test]
fn a_top_up_log_the_address_balance_does_not_bear_out_is_never_credited() {
    let (_one, s) = shared();
    let worker = &s.worker;
    let admin = worker.portal_login(0);
    let active = merchants(worker, "active");
    assert!(active.len() > 4, "{active:?}");
    let merchant = active[4];
    let polygon = address(worker, &admin, merchant, "polygon");
    let owed = format!(
        "polygon:{}:merchant:{merchant}",
        s.usdc.to_ascii_lowercase()
    );
    // A real top-up of 5 USDC is credited: the watch's total.
    let real = s.anvil.transfer(&s.usdc, &s.customer, &polygon, 5_000_000);
    s.anvil.mine(DEPTH);
    until_listed(
        s,
        &admin,
        (merchant, "polygon", &real),
        "the real top-up to be credited",
        |t| t["credited"].as_bool().unwrap(),
    );
    assert_eq!(posted(worker, &owed), (0, 5_000_000));
    // The node invents 20 USDC more, in the next block, in every answer that covers it.
    let invented = format!("0x{}", "ef".repeat(32));
    let block = s.anvil.head() + 1;
    s.node.set(
        "eth_getLogs",
        Fault::ExtraLog(invented_transfer(
            (&s.usdc, &s.customer, &polygon),
            20_000_000,
            block,
            &invented,
        )),
        100,
    );
    s.anvil.mine(DEPTH + 1);
    let why = eventually("the check to be refused", Duration::from_secs(40), || {
        s.anvil.mine(1);
        worker.cron();
        node_error(worker, &polygon, &s.usdc).filter(|why| why.contains("balance"))
    });
    assert!(why.contains("show 25 USDC"), "{why}");
    assert!(why.contains("its balance there is 5 USDC"), "{why}");
    assert!(s.node.faulted("eth_getLogs") > 0);
    assert!(posted_for(worker, &invented).is_empty(), "never credited");
    assert_eq!(posted(worker, &owed), (0, 5_000_000));
    // The node stops inventing: the watch reads on, the invented transfer is gone, and the
    // books hold what the chain does.
    s.node.heal();
    eventually(
        "the watch to read past the invented transfer",
        Duration::from_secs(40),
        || {
            s.anvil.mine(1);
            worker.cron();
            let stored: i64 = worker
                .database()
                .query_row(
                    "SELECT count(*) FROM topup_transfers WHERE tx_hash = ?1",
                    [&invented],
                    |r| r.get(0),
                )
                .unwrap();
            (node_error(worker, &polygon, &s.usdc).is_none() && stored == 0).then_some(())
        },
    );
    assert_eq!(posted(worker, &owed), (0, 5_000_000));
    payrail_tests::books::assert_balanced(worker, &s.anvil);
}

#[test]
fn the_top_up_section_in_the_browser_at_a_desktops_and_a_phones_width() {
    let (_one, s) = shared();
    let _browser = exclusive();
    let worker = &s.worker;
    let merchant = merchants(worker, "active")[3];
    let admin = worker.portal_login(0);
    let creds = &worker.credentials.institutions[0];
    let browser = Browser::start();
    browser.log_in(&worker.base_url, &creds.admin_email, &creds.admin_password);
    browser.goto(&format!("{}/portal/merchants/{merchant}", worker.base_url));
    assert!(browser.wait_text("#top-up h2").contains("Top up balance"));
    browser.click("div[data-network='polygon'] form.topup-create button");
    let shown = browser.wait_text("div[data-network='polygon'] code.topup-address");
    assert!(browser.url().ends_with("#top-up"), "{}", browser.url());
    assert_eq!(
        shown,
        topups(worker, &admin, merchant, "polygon")["address"]
            .as_str()
            .unwrap()
    );
    // One top-up credited and one still confirming, for the table.
    let first = s.anvil.transfer(&s.usdc, &s.customer, &shown, 12_500_000);
    s.anvil.mine(DEPTH);
    until_listed(
        s,
        &admin,
        (merchant, "polygon", &first),
        "the first top-up credited",
        |t| t["credited"].as_bool().unwrap(),
    );
    let second = s.anvil.transfer(&s.usdc, &s.customer, &shown, 3_000_000);
    until_listed(
        s,
        &admin,
        (merchant, "polygon", &second),
        "the second top-up seen",
        |t| !t["credited"].as_bool().unwrap(),
    );
    // Loaded again (the same URL with its fragment would not reload it).
    browser.goto(&format!("{}/portal/merchants/{merchant}", worker.base_url));
    let table = browser.wait_text("div[data-network='polygon'] table.topup-transfers");
    assert!(
        table.contains("12.5 USDC") && table.contains("credited"),
        "{table}"
    );
    assert!(
        table.contains("3 USDC") && table.contains("confirming"),
        "{table}"
    );
    assert!(browser
        .text("div[data-network='polygon'] a.qr svg")
        .is_some());
    let violations = browser.serious_accessibility_violations();
    assert!(violations.is_empty(), "{violations:#?}");
    let artifacts = payrail_tests::root().join("tests/artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifacts dir");
    for width in [1280, 390] {
        browser.resize(width, 2000);
        browser.eval("document.querySelector('#top-up').scrollIntoView(); return 0");
        let png = browser.element_png("#top-up");
        std::fs::write(artifacts.join(format!("merchant-top-up-{width}.png")), png)
            .expect("write screenshot");
        // Nothing in it is wider than the section (a phone never scrolls it sideways).
        let wider = browser.eval(
            "const s = document.querySelector('#top-up').getBoundingClientRect(); \
             return Array.from(document.querySelectorAll('#top-up *')) \
               .filter(e => e.getBoundingClientRect().right > s.right + 1) \
               .map(e => e.tagName + '.' + e.className);",
        );
        assert_eq!(wider, json!([]), "at {width} px");
    }
}
