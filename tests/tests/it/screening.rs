//! Sanctions screening against the real worker and a local chain with its own sanctions oracle
//! (Chainalysis's interface) and the operator's list loaded from an SDN file: a listed address
//! is refused as a settlement wallet, a wallet listed after it was set holds the payout, a
//! refund or a return to a listed address is refused, and an oracle that cannot be read stops
//! all of them until it answers (the operator told once). Nothing is signed in any of these,
//! and the books stay balanced.

use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use payrail_tests::browser::{exclusive, Browser};
use payrail_tests::eventually;
use payrail_tests::faults::Fault;
use reqwest::Method;
use serde_json::{json, Value};

use super::settlement::{start_screened, Setup};

/// The operator's token of the screening worker.
const OPERATOR_TOKEN: &str = "operator-token-for-the-screening-tests";
/// An address of the sample SDN file (`tests/fixtures/sdn-sample.xml`).
const SDN_LISTED: &str = "0x5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e";

/// One worker with a sanctions oracle on its chain, for one test at a time (a test lists
/// addresses and makes the oracle unreadable).
fn shared() -> (MutexGuard<'static, ()>, &'static Setup) {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    (
        guard,
        SETUP.get_or_init(|| start_screened(&[("PAYRAIL_OPERATOR_TOKEN", OPERATOR_TOKEN)])),
    )
}

/// Heals the node when dropped: a test that fails while the oracle is made unreadable leaves
/// the next tests a node that answers.
struct Heals<'a>(&'a payrail_tests::faults::FaultyNode);

impl Drop for Heals<'_> {
    fn drop(&mut self) {
        self.0.heal();
    }
}

impl Setup {
    fn oracle(&self) -> &str {
        self.oracle.as_deref().expect("a sanctions oracle")
    }

    /// Sets merchant `merchant`'s wallet on polygon to `address` through the portal.
    fn set_wallet(&self, merchant: usize, address: &str) -> payrail_tests::Reply {
        let id = self.worker.credentials.institutions[0].merchant_ids[merchant];
        let session = self.worker.portal_login(0);
        self.worker.portal(
            Method::PUT,
            &format!("/portal/api/merchants/{id}/wallets/polygon"),
            Some(&session),
            Some(&json!({ "address": address })),
        )
    }

    /// Merchant `merchant`'s wallet on polygon, as stored.
    fn wallet_of(&self, merchant: usize) -> Option<String> {
        let id = self.worker.credentials.institutions[0].merchant_ids[merchant];
        self.worker
            .database()
            .query_row(
                "SELECT address FROM merchant_wallets WHERE merchant_id = ?1 \
                 AND network = 'polygon'",
                [id],
                |r| r.get(0),
            )
            .ok()
    }

    /// The screening decisions stored in D1 about `address`: (subject, result, listed_by).
    fn screenings_of(&self, address: &str) -> Vec<(String, String, Option<String>)> {
        let db = self.worker.database();
        let mut statement = db
            .prepare(
                "SELECT subject, result, listed_by FROM screenings WHERE address = lower(?1) \
                 ORDER BY screened_at, id",
            )
            .unwrap();
        statement
            .query_map([address], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// The hold on payment `id`'s settlement, once the cron has recorded one.
    fn held_for(&self, id: i64) -> String {
        eventually("the payout held", Duration::from_secs(30), || {
            self.worker.cron();
            self.detail(id)["settlement_hold"]["reason"]
                .as_str()
                .map(str::to_owned)
        })
    }

    /// Reads credited payment `id`'s deposit `address` again at each cron run (a credited
    /// payment's addresses are read every 30 minutes: as if that long had passed) until the
    /// money after its credit there is `base_units`.
    fn uncredited_until(&self, id: i64, address: &str, base_units: &str) {
        eventually(
            "the money after the credit shown",
            Duration::from_secs(30),
            || {
                self.worker
                    .database()
                    .execute(
                        "UPDATE deposit_watches SET checked_at = 0 WHERE address = lower(?1)",
                        [address],
                    )
                    .unwrap();
                self.worker.cron();
                self.anvil.mine(1);
                (self.detail(id)["uncredited"][0]["base_units"] == base_units).then_some(())
            },
        );
    }

    /// The screening outages open now.
    fn open_outages(&self) -> i64 {
        self.worker
            .database()
            .query_row(
                "SELECT count(*) FROM screening_outages WHERE ended_at IS NULL",
                [],
                |r| r.get(0),
            )
            .unwrap()
    }

    fn operator(&self, method: Method, path: &str) -> reqwest::blocking::RequestBuilder {
        self.worker
            .request(method, path)
            .bearer_auth(OPERATOR_TOKEN)
    }
}

#[test]
fn a_listed_address_is_refused_as_a_settlement_wallet_with_the_list_that_names_it() {
    let (_one, s) = shared();
    let before = s.wallet_of(2);
    // On the oracle.
    let listed = s.anvil.account(8);
    s.anvil.sanction(s.oracle(), &[&listed], true);
    let refused = s
        .set_wallet(2, &listed)
        .assert_error(400, "invalid_request");
    assert!(refused.contains("sanctions list"), "{refused}");
    assert!(
        refused.contains(&s.oracle().to_ascii_lowercase()),
        "{refused}"
    );
    assert_eq!(s.wallet_of(2), before, "the wallet did not change");
    // (Another test has this address send money, screened as a return's sender.)
    let decisions: Vec<_> = s
        .screenings_of(&listed)
        .into_iter()
        .filter(|(subject, _, _)| subject == "wallet")
        .collect();
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(
        (decisions[0].0.as_str(), decisions[0].1.as_str()),
        ("wallet", "listed")
    );
    // On the operator's list, loaded from an SDN file the way `xtask screening-load` does.
    let load = xtask::sdn::read(&payrail_tests::root().join("tests/fixtures/sdn-sample.xml"))
        .expect("the sample SDN file");
    let loaded = xtask::sdn::send(&s.worker.base_url, OPERATOR_TOKEN, "OFAC SDN", true, &load)
        .expect("the load");
    let count = u64::try_from(load.entries.len()).unwrap();
    assert_eq!(loaded.added, count);
    let again = xtask::sdn::send(&s.worker.base_url, OPERATOR_TOKEN, "OFAC SDN", true, &load)
        .expect("the same load again");
    assert_eq!((again.added, again.kept, again.removed), (0, count, 0));
    let refused = s
        .set_wallet(2, SDN_LISTED)
        .assert_error(400, "invalid_request");
    assert!(refused.contains("OFAC SDN: SDN 90001"), "{refused}");
    assert_eq!(s.wallet_of(2), before);
    // The operator's list as its API shows it; a load without the operator's token is refused.
    let list = s.worker.send(
        s.operator(Method::GET, "/operator/sanctioned-addresses"),
        None,
    );
    assert_eq!(list.status, 200, "{}", list.text);
    assert!(list.text.contains(SDN_LISTED), "{}", list.text);
    // An entry taken off is no longer screened against, and kept for the record.
    let other = "0x0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c0b5c";
    assert!(list.text.contains(other), "{}", list.text);
    let removed = s.worker.send(
        s.operator(Method::POST, "/operator/sanctioned-addresses/remove")
            .json(&json!({"address": other, "source": "OFAC SDN"})),
        None,
    );
    assert_eq!(removed.status, 200, "{}", removed.text);
    let again = s.worker.send(
        s.operator(Method::POST, "/operator/sanctioned-addresses/remove")
            .json(&json!({"address": other, "source": "OFAC SDN"})),
        None,
    );
    again.assert_error(404, "not_found");
    let listed_now = |removed: bool| {
        s.worker
            .send(
                s.operator(
                    Method::GET,
                    &format!("/operator/sanctioned-addresses?removed={removed}"),
                ),
                None,
            )
            .text
    };
    assert!(!listed_now(false).contains(other));
    assert!(listed_now(true).contains(other));
    let anonymous = s.worker.send(
        s.worker
            .request(Method::POST, "/operator/sanctioned-addresses")
            .json(&json!({"source": "x", "published": "2026-01-01", "entries": []})),
        None,
    );
    assert_eq!(anonymous.status, 401, "{}", anonymous.text);
    let bad = s.worker.send(
        s.operator(Method::POST, "/operator/sanctioned-addresses")
            .json(&json!({"source": "manual", "published": "2026-02-30",
                "entries": [{"address": SDN_LISTED, "entry": "x"}]})),
        None,
    );
    bad.assert_error(400, "invalid_request");
    // A clear address is taken, and its screening kept with the change.
    let clear = s.anvil.account(9);
    let taken = s.set_wallet(2, &clear);
    assert_eq!(taken.status, 200, "{}", taken.text);
    let decisions = s.screenings_of(&clear);
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(
        (decisions[0].0.as_str(), decisions[0].1.as_str()),
        ("wallet", "clear")
    );
    if let Some(before) = before {
        assert_eq!(s.set_wallet(2, &before).status, 200);
    }
}

#[test]
fn a_wallet_listed_after_it_was_set_holds_the_payout_until_the_wallet_is_changed() {
    let (_one, s) = shared();
    let before = s.wallet_of(1).expect("merchant 1's wallet");
    let wallet = s.anvil.account(6);
    assert_eq!(s.set_wallet(1, &wallet).status, 200);
    let id = s.paid(1, "9.00", "USD");
    s.anvil.sanction(s.oracle(), &[&wallet], true);
    let reason = s.held_for(id);
    assert!(reason.contains("sanctions list"), "{reason}");
    assert!(reason.contains(&wallet.to_ascii_lowercase()), "{reason}");
    // More runs: still held, nothing signed, and the decision recorded once.
    for _ in 0..3 {
        s.worker.cron();
        s.anvil.mine(1);
    }
    assert_eq!(s.raw_status(id), "succeeded");
    assert!(s.sends(id).is_empty(), "nothing was signed");
    assert_eq!(s.anvil.balance_of(&s.usdc, &wallet), 0);
    let payouts: Vec<_> = s
        .screenings_of(&wallet)
        .into_iter()
        .filter(|(subject, _, _)| subject == "payout")
        .collect();
    assert_eq!(payouts.len(), 1, "{payouts:?}");
    assert_eq!(payouts[0].1, "listed");
    // A new wallet (screened clear when set) is paid once, and its payout's screening kept.
    let other = s.anvil.account(7);
    assert_eq!(s.set_wallet(1, &other).status, 200);
    s.settle(&[id]);
    assert_eq!(s.sends(id).len(), 1);
    assert!(s.anvil.balance_of(&s.usdc, &other) > 0);
    assert_eq!(s.anvil.balance_of(&s.usdc, &wallet), 0);
    let cleared: Vec<_> = s
        .screenings_of(&other)
        .into_iter()
        .map(|(subject, result, _)| (subject, result))
        .collect();
    assert!(
        cleared.contains(&("payout".to_owned(), "clear".to_owned())),
        "{cleared:?}"
    );
    s.anvil.sanction(s.oracle(), &[&wallet], false);
    assert_eq!(s.set_wallet(1, &before).status, 200);
    s.assert_books();
}

#[test]
fn a_refund_or_a_return_to_a_listed_address_is_refused_and_nothing_is_signed() {
    let (_one, s) = shared();
    let (id, session) = s.checkout(0, "8.00", "USD", "SCREEN-REFUND");
    let (address, units) = s.worker.deposit(&session);
    s.anvil.transfer(&s.usdc, &s.customer, &address, units);
    s.anvil.mine(2);
    s.until_credited(&session);
    let listed = s.anvil.account(5);
    s.anvil.sanction(s.oracle(), &[&listed], true);
    let refused = s
        .refund(id, "8.00", &listed, Some("screen-refund-1"))
        .assert_error(400, "invalid_request");
    assert!(refused.contains("sanctions list"), "{refused}");
    assert!(refused.contains("may not send money"), "{refused}");
    // Money sent after the credit, returned to a listed address: refused too.
    s.anvil.transfer(&s.usdc, &s.customer, &address, 2_000_000);
    s.anvil.mine(2);
    let portal = s.worker.portal_login(0);
    s.uncredited_until(id, &address, "2000000");
    let return_to = |to: &str, key: &str| {
        s.worker.send(
            s.worker
                .request(Method::POST, &format!("/portal/api/payments/{id}/returns"))
                .header("Cookie", format!("payrail_portal={}", portal.cookie))
                .header("X-CSRF-Token", &portal.csrf)
                .header("Idempotency-Key", key)
                .json(&json!({"deposit": address, "address": to})),
            None,
        )
    };
    let refused = return_to(&listed, "screen-return-1").assert_error(400, "invalid_request");
    assert!(refused.contains("sanctions list"), "{refused}");
    // Money a listed address sends after the credit stays frozen: it is returned to nobody.
    let listed_sender = s.anvil.account(8);
    s.anvil.sanction(s.oracle(), &[&listed_sender], true);
    s.anvil.mint(&s.usdc, &listed_sender, 1_000_000);
    s.anvil
        .transfer(&s.usdc, &listed_sender, &address, 1_000_000);
    s.anvil.mine(2);
    s.uncredited_until(id, &address, "3000000");
    // Screened as it arrived: on the payment's record, and the admins told once, before any
    // return is asked.
    let on_arrival: Vec<_> = s
        .screenings_of(&listed_sender)
        .into_iter()
        .filter(|(subject, result, _)| subject == "payment" && result == "listed")
        .collect();
    assert_eq!(on_arrival.len(), 1, "{on_arrival:?}");
    for _ in 0..2 {
        s.worker.cron();
    }
    let told: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT count(*) FROM notifications WHERE kind = 'screening_hold' AND subject = ?1",
            [format!(
                "Money from a sanctioned sender reached payment {id}'s address"
            )],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(told, 1, "the admins told once");
    let refused =
        return_to(&s.anvil.account(4), "screen-return-2").assert_error(400, "invalid_request");
    assert!(refused.contains("stays frozen"), "{refused}");
    assert!(
        refused.contains(&listed_sender.to_ascii_lowercase()),
        "{refused}"
    );
    let detail = s.detail(id);
    assert!(
        detail["refunds"].as_array().unwrap().is_empty(),
        "nothing stored: {detail}"
    );
    let mut decisions: Vec<(String, String)> = s
        .screenings_of(&listed)
        .into_iter()
        .map(|(subject, result, _)| (subject, result))
        .collect();
    decisions.sort();
    assert_eq!(
        decisions,
        [
            ("refund".to_owned(), "listed".to_owned()),
            ("return".to_owned(), "listed".to_owned())
        ]
    );
    // To a clear address the refund goes out, its screening stored with it (the cron started
    // the payment's settlement meanwhile: once it is paid, the refund is the merchant's debt).
    s.settle(&[id]);
    s.allow_debt(0, 8_000_000);
    let clear = s.anvil.account(4);
    let made = s.refund(id, "8.00", &clear, Some("screen-refund-2"));
    assert_eq!(made.status, 201, "{}", made.text);
    let refund_id = made.json()["id"].as_str().unwrap().to_owned();
    let stored: String = s
        .worker
        .database()
        .query_row(
            "SELECT subject_id FROM screenings WHERE subject = 'refund' AND result = 'clear' \
             AND address = lower(?1)",
            [&clear],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored, refund_id);
    s.refunds_done(id);
    s.anvil.sanction(s.oracle(), &[&listed], false);
    s.assert_books();
}

#[test]
fn a_refund_to_an_address_listed_after_it_was_asked_is_screened_again_and_never_signed() {
    let (_one, s) = shared();
    // Merchant 2 owes nothing (merchant 0 owes the refunds of another test).
    let id = s.paid(2, "6.00", "USD");
    s.settle(&[id]);
    s.allow_debt(2, 6_000_000);
    // An address no other test screens.
    let later = "0x4a7e4a7e4a7e4a7e4a7e4a7e4a7e4a7e4a7e4a7e";
    // The refund waits for the treasury (its node cannot estimate the transfer now) after its
    // address was screened clear; the address is listed meanwhile.
    let node = s.node.as_ref().expect("the node behind a proxy");
    let heals = Heals(node);
    node.set("eth_estimateGas", Fault::Refuse, 100);
    let made = s.refund(id, "6.00", later, Some("screen-refund-later"));
    assert_eq!(made.status, 201, "{}", made.text);
    let refund_id = made.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(made.json()["state"], "sending", "{}", made.text);
    assert!(made.json()["tx_hash"].is_null(), "{}", made.text);
    s.anvil.sanction(s.oracle(), &[later], true);
    drop(heals);
    let error = eventually(
        "the refund held by its second screening",
        Duration::from_secs(30),
        || {
            s.worker.cron();
            s.detail(id)["refunds"][0]["error"]
                .as_str()
                .filter(|e| e.contains("sanctions list"))
                .map(str::to_owned)
        },
    );
    assert!(error.contains("nothing is sent to it"), "{error}");
    // More runs screen it again; the decision is stored once, and nothing is ever signed.
    for _ in 0..3 {
        s.worker.cron();
    }
    let signed: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT count(*) FROM chain_sends WHERE refund_id = ?1",
            [&refund_id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(signed, 0, "nothing signed for a listed address");
    let mut decisions: Vec<(String, String)> = s
        .screenings_of(later)
        .into_iter()
        .map(|(subject, result, _)| (subject, result))
        .collect();
    decisions.sort();
    assert_eq!(
        decisions,
        [
            ("refund".to_owned(), "clear".to_owned()),
            ("refund".to_owned(), "listed".to_owned())
        ]
    );
    assert_eq!(s.detail(id)["refunds"][0]["state"], "sending");
    // The listing lifted (a false positive), the refund goes out once.
    s.anvil.sanction(s.oracle(), &[later], false);
    s.refunds_done(id);
    s.assert_books();
}

#[test]
fn an_unreadable_oracle_stops_wallets_and_payouts_until_it_answers_and_the_operator_is_told_once() {
    let (_one, s) = shared();
    let node = s.node.as_ref().expect("the node behind a proxy");
    let _heals = Heals(node);
    let id = s.paid(2, "6.00", "USD");
    let oracle_calls = format!("eth_call to:{}", s.oracle().to_ascii_lowercase());
    node.set(&oracle_calls, Fault::Refuse, 100);
    // A wallet cannot be set: refused for now, never taken unscreened.
    let refused = s
        .set_wallet(3, &s.anvil.account(3))
        .assert_error(503, "payments_unavailable");
    assert!(refused.contains("sanctions oracle on polygon"), "{refused}");
    // The payout waits with the reason, through several runs.
    let reason = s.held_for(id);
    assert!(reason.contains("cannot be read"), "{reason}");
    for _ in 0..3 {
        s.worker.cron();
    }
    assert_eq!(s.raw_status(id), "succeeded");
    assert!(s.sends(id).is_empty(), "nothing was signed");
    // One outage, told once.
    let outages: Vec<Value> = {
        let reply = s
            .worker
            .send(s.operator(Method::GET, "/operator/screening-outages"), None);
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()["data"].as_array().unwrap().clone()
    };
    assert_eq!(outages.len(), 1, "{outages:?}");
    assert_eq!(outages[0]["network"], "polygon");
    assert_ne!(outages[0]["email_status"], "pending", "{outages:?}");
    assert_eq!(s.open_outages(), 1);
    // It answers again: the outage ends and the payment settles, once.
    node.release(&oracle_calls);
    s.settle(&[id]);
    assert_eq!(s.sends(id).len(), 1);
    assert_eq!(s.open_outages(), 0);
    s.assert_books();
}

impl Setup {
    /// A checkout of `amount` USD for merchant `merchant` paid exactly from `payer` (an address
    /// the node signs for): its transaction id, session and deposit address.
    fn paid_from(&self, merchant: usize, amount: &str, payer: &str) -> (i64, String, String) {
        let (id, session) = self.checkout(merchant, amount, "USD", &format!("SCREEN-{amount}"));
        let (address, units) = self.worker.deposit(&session);
        self.anvil.mint(&self.usdc, payer, units);
        self.anvil.transfer(&self.usdc, payer, &address, units);
        self.anvil.mine(2);
        (id, session, address)
    }

    /// Runs the cron until payment `id` shows `raw_status` (as the partner API reads it).
    fn until_raw(&self, id: i64, raw_status: &str) -> Value {
        eventually(
            &format!("payment {id} {raw_status}"),
            Duration::from_secs(30),
            || {
                self.worker.cron();
                let t = self.worker.transaction(0, id);
                (t["raw_status"] == raw_status).then_some(t)
            },
        )
    }

    /// Decides held payment `id` through the portal's JSON API, in `portal`'s session.
    fn decide(
        &self,
        portal: &payrail_tests::PortalSession,
        id: i64,
        decision: &str,
        note: &str,
    ) -> payrail_tests::Reply {
        self.worker.portal(
            Method::POST,
            &format!("/portal/api/screening/{id}"),
            Some(portal),
            Some(&json!({"decision": decision, "note": note})),
        )
    }

    /// Today's audit export, in `portal`'s session.
    fn export_today(&self, portal: &payrail_tests::PortalSession) -> payrail_tests::Reply {
        let today = payrail_tests::today();
        let export = self.worker.portal_page(
            portal,
            &format!("/portal/screening/export.csv?from={today}&to={today}"),
        );
        assert_eq!(export.status, 200, "{}", export.text);
        export
    }

    /// Notifications of kind `kind` whose body names payment `id`.
    fn told(&self, kind: &str, id: i64) -> i64 {
        self.worker
            .database()
            .query_row(
                "SELECT count(*) FROM notifications WHERE kind = ?1 \
                 AND body LIKE 'Payment ' || ?2 || ' %'",
                rusqlite::params![kind, id],
                |r| r.get(0),
            )
            .unwrap()
    }
}

#[test]
fn money_from_a_listed_address_is_held_until_an_admin_releases_it_once_or_blocks_it() {
    let (_one, s) = shared();
    let payer = s.anvil.account(2);
    s.anvil.sanction(s.oracle(), &[&payer], true);
    let (owed_before, _) = s.owed(1);
    let (id, session, deposit) = s.paid_from(1, "11.00", &payer);
    // Polls and a cron run race to credit it: it is held once, with one review.
    let polls = at_once(4, |i| {
        if i == 0 {
            s.worker.cron();
        }
        s.worker.send(
            s.worker
                .request(Method::GET, &format!("/checkout/{session}/status")),
            None,
        )
    });
    assert!(polls.iter().all(|(status, _)| *status == 200), "{polls:?}");
    // Held: pending to partners with its raw_status, nothing in the merchant's balance, the
    // admins told once, and the page tells the customer it is under review.
    let held = s.until_raw(id, "held");
    assert_eq!(held["status"], "pending", "{held}");
    assert_eq!(held["amount"]["gross"], "11.00", "{held}");
    for _ in 0..3 {
        s.worker.cron();
        s.anvil.mine(1);
    }
    assert_eq!(s.worker.transaction(0, id)["raw_status"], "held");
    assert!(s.sends(id).is_empty(), "nothing was signed");
    assert_eq!(s.owed(1).0, owed_before, "not the merchant's");
    assert_eq!(s.told("screening_hold", id), 1);
    let reviews: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT count(*) FROM screening_reviews WHERE transaction_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(reviews, 1);
    let page = s.worker.send(
        s.worker
            .request(Method::GET, &format!("/checkout/{session}")),
        None,
    );
    assert!(page.text.contains("data-status=\"held\""), "{}", page.text);
    assert!(page.text.contains("under review"), "{}", page.text);
    // Nothing refunds it either.
    let refused = s.refund(id, "11.00", &s.anvil.account(9), Some("screen-held-refund"));
    assert_eq!(refused.status, 409, "{}", refused.text);
    // The queue shows it with its evidence; a note is required.
    let admin = s.worker.portal_login(0);
    let review = s.worker.screening_review(&admin, id);
    assert!(review["decision"].is_null(), "{review}");
    assert!(
        review["reason"]
            .as_str()
            .unwrap()
            .contains(&payer.to_ascii_lowercase()),
        "{review}"
    );
    assert_eq!(review["evidence"][0]["result"], "listed", "{review}");
    assert_eq!(review["held"][0]["address"], deposit.to_ascii_lowercase());
    s.decide(&admin, id, "release", "  ")
        .assert_error(400, "invalid_request");
    // Two admins release it at once: one decision is made, the other is told it was.
    let answers = at_once(4, |_| s.decide(&admin, id, "release", "false positive"));
    one_decision_made(&answers);
    assert_eq!(s.worker.transaction(0, id)["raw_status"], "succeeded");
    // Released, it continues as its credit would have: settled once.
    s.settle(&[id]);
    assert_eq!(s.sends(id).len(), 1);
    let late = s.decide(&admin, id, "block", "too late");
    assert_eq!(late.status, 409, "{}", late.text);

    // Another from the same payer, blocked: it fails, its money stays in custody.
    let (blocked, _, deposit) = s.paid_from(1, "4.00", &payer);
    s.until_raw(blocked, "held");
    let decided = s.decide(&admin, blocked, "block", "confirmed match with OFAC entry");
    assert_eq!(decided.status, 200, "{}", decided.text);
    assert_eq!(decided.json()["raw_status"], "failed");
    for _ in 0..3 {
        s.worker.cron();
        s.anvil.mine(1);
    }
    let after = s.worker.transaction(0, blocked);
    assert_eq!(
        (after["status"].as_str(), after["raw_status"].as_str()),
        (Some("failed"), Some("failed"))
    );
    assert!(s.sends(blocked).is_empty());
    assert_eq!(
        s.anvil.balance_of(&s.usdc, &deposit),
        4_000_000,
        "frozen in custody"
    );
    let returned = s.worker.send(
        s.worker
            .request(
                Method::POST,
                &format!("/portal/api/payments/{blocked}/returns"),
            )
            .header("Cookie", format!("payrail_portal={}", admin.cookie))
            .header("X-CSRF-Token", &admin.csrf)
            .header("Idempotency-Key", "screen-blocked-return")
            .json(&json!({"deposit": deposit, "address": s.anvil.account(9)})),
        None,
    );
    assert_eq!(returned.status, 409, "{}", returned.text);
    // The audit export holds every screening and decision of the day.
    let export = s.export_today(&admin);
    for needle in [
        format!("payment,{id},polygon,{}", payer.to_ascii_lowercase()),
        format!("decision,payment,{id}"),
        format!("decision,payment,{blocked}"),
        "confirmed match with OFAC entry".to_owned(),
        "false positive".to_owned(),
    ] {
        assert!(export.text.contains(&needle), "{needle}: {}", export.text);
    }
    s.anvil.sanction(s.oracle(), &[&payer], false);
    s.assert_books();
}

/// Of racing decisions' `answers`, exactly one was made (200); every other was told it was
/// decided already (409).
fn one_decision_made(answers: &[(u16, String)]) {
    let made = answers.iter().filter(|(status, _)| *status == 200).count();
    assert_eq!(made, 1, "{answers:?}");
    assert!(
        answers
            .iter()
            .filter(|(status, _)| *status != 200)
            .all(|(status, text)| *status == 409 && text.contains("decided already")),
        "{answers:?}"
    );
}

/// `n` calls at once: every answer as status and body.
fn at_once(n: usize, call: impl Fn(usize) -> payrail_tests::Reply + Sync) -> Vec<(u16, String)> {
    let answers = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let call = &call;
                scope.spawn(move || {
                    let reply = call(i);
                    (reply.status, reply.text)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    answers
}

#[test]
fn money_from_an_address_on_the_operators_list_is_held_like_the_oracles() {
    let (_one, s) = shared();
    let mut load = xtask::sdn::read(&payrail_tests::root().join("tests/fixtures/sdn-sample.xml"))
        .expect("the sample SDN file");
    load.entries.retain(|e| e.address == SDN_LISTED);
    xtask::sdn::send(
        &s.worker.base_url,
        OPERATOR_TOKEN,
        "EU sample",
        false,
        &load,
    )
    .expect("the load");
    // The node signs for the listed address (anvil impersonates it), with gas money.
    s.anvil.rpc("anvil_impersonateAccount", json!([SDN_LISTED]));
    s.anvil
        .pay_ether(&s.anvil.account(0), SDN_LISTED, 10u128.pow(18));
    let (id, _, _) = s.paid_from(1, "5.00", SDN_LISTED);
    s.until_raw(id, "held");
    let admin = s.worker.portal_login(0);
    let review = s.worker.screening_review(&admin, id);
    assert!(
        review["reason"]
            .as_str()
            .unwrap()
            .contains("EU sample: SDN 90001"),
        "{review}"
    );
    assert!(
        review["evidence"][0]["oracle"].is_string(),
        "the oracle was read too"
    );
    let decided = s.decide(&admin, id, "block", "listed by the EU");
    assert_eq!(decided.status, 200, "{}", decided.text);
    s.assert_books();
}

#[test]
fn an_unreadable_oracle_credits_nothing_until_it_answers() {
    let (_one, s) = shared();
    let node = s.node.as_ref().expect("the node behind a proxy");
    let _heals = Heals(node);
    let oracle_calls = format!("eth_call to:{}", s.oracle().to_ascii_lowercase());
    node.set(&oracle_calls, Fault::Garbage, 100);
    let (id, session) = s.checkout(1, "7.00", "USD", "SCREEN-WAIT");
    let (address, units) = s.worker.deposit(&session);
    s.anvil.transfer(&s.usdc, &s.customer, &address, units);
    s.anvil.mine(2);
    let waiting = eventually("the credit waiting", Duration::from_secs(30), || {
        s.worker.cron();
        let reply = s.worker.send(
            s.worker
                .request(Method::GET, &format!("/checkout/{session}/status")),
            None,
        );
        let body = reply.json();
        body["chain"]["screening_wait"]
            .as_str()
            .map(|_| body.clone())
    });
    assert_eq!(waiting["status"], "pending", "{waiting}");
    for _ in 0..3 {
        s.worker.cron();
    }
    assert_eq!(s.worker.transaction(0, id)["raw_status"], "pending");
    assert_eq!(s.open_outages(), 1, "one outage, told once");
    node.release(&oracle_calls);
    s.until_raw(id, "succeeded");
    s.settle(&[id]);
    s.assert_books();
}

/// The review queue, a held payment's page and the hosted page of a held payment, at a
/// desktop's and a phone's width, with no serious or critical accessibility violation; the
/// page's own form releases the payment.
#[test]
fn the_review_queue_and_a_held_payment_in_chromium_at_both_widths() {
    let (_one, s) = shared();
    let payer = s.anvil.account(2);
    s.anvil.sanction(s.oracle(), &[&payer], true);
    let (id, session, _) = s.paid_from(1, "13.00", &payer);
    s.until_raw(id, "held");
    // And a merchant's top-up from a listed sender.
    let merchant = s.worker.credentials.institutions[0].merchant_ids[3];
    let given = s.worker.portal(
        Method::POST,
        &format!("/portal/api/merchants/{merchant}/topup/polygon"),
        Some(&s.worker.portal_login(0)),
        None,
    );
    assert_eq!(given.status, 200, "{}", given.text);
    let listed = s.anvil.account(8);
    s.anvil.sanction(s.oracle(), &[&listed], true);
    s.anvil.mint(&s.usdc, &listed, 1_500_000);
    let topup_hash = s.anvil.transfer(
        &s.usdc,
        &listed,
        given.json()["address"].as_str().unwrap(),
        1_500_000,
    );
    s.topup_until(3, &topup_hash, |t| t["screening"] == "held");
    let review = s.topup_review(&s.worker.portal_login(0), &topup_hash)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let _browser = exclusive();
    let browser = Browser::start();
    let admin = &s.worker.credentials.institutions[0];
    browser.log_in(
        &s.worker.base_url,
        &admin.admin_email,
        &admin.admin_password,
    );
    for (width, height) in [(1280, 900), (390, 844)] {
        browser.resize(width, height);
        browser.goto(&format!("{}/portal/screening", s.worker.base_url));
        let card = browser.wait_text(&format!("#review-{id}"));
        assert!(card.contains("sanctions list"), "{card}");
        super::balances::photograph(
            &browser,
            (width, height),
            &format!("#review-{id}"),
            "portal-screening-queue",
        );
        let violations = browser.serious_accessibility_violations();
        assert!(violations.is_empty(), "queue at {width}: {violations:#?}");
        let card = browser.wait_text(&format!("#{review}"));
        assert!(card.contains("Top-up of 1.5 USDC"), "{card}");
        assert!(card.contains(&listed.to_ascii_lowercase()), "{card}");
        super::balances::photograph(
            &browser,
            (width, height),
            &format!("#{review}"),
            "portal-screening-topup",
        );
        browser.goto(&format!(
            "{}/portal/merchants/{merchant}",
            s.worker.base_url
        ));
        let row = browser.wait_text(&format!("tr[data-tx='{topup_hash}']"));
        assert!(row.contains("held for review"), "{row}");
        super::balances::photograph(
            &browser,
            (width, height),
            "#top-up",
            "portal-merchant-topup-held",
        );
        let violations = browser.serious_accessibility_violations();
        assert!(
            violations.is_empty(),
            "merchant page at {width}: {violations:#?}"
        );
        browser.goto(&format!("{}/portal/payments/{id}", s.worker.base_url));
        assert!(browser
            .wait_text("#screening-hold")
            .contains("Held for review"));
        super::balances::photograph(
            &browser,
            (width, height),
            "#screening-hold",
            "portal-payment-held",
        );
        let violations = browser.serious_accessibility_violations();
        assert!(violations.is_empty(), "payment at {width}: {violations:#?}");
        browser.goto(&format!("{}/checkout/{session}", s.worker.base_url));
        assert!(browser.wait_text("#status").contains("under review"));
        browser.screenshot(&format!("hosted-page-held-{width}"));
        let violations = browser.serious_accessibility_violations();
        assert!(
            violations.is_empty(),
            "hosted page at {width}: {violations:#?}"
        );
    }
    // The page's form: a note, then Release.
    browser.resize(1280, 900);
    browser.goto(&format!("{}/portal/screening", s.worker.base_url));
    browser.fill(
        &format!("#note-{id}"),
        "the customer proved the wallet is theirs",
    );
    browser.click(&format!("#review-{id} button[value=release]"));
    let decided = browser.wait_text(&format!("#review-{id} .decided"));
    assert!(decided.contains("released"), "{decided}");
    assert_eq!(s.worker.transaction(0, id)["raw_status"], "succeeded");
    // The top-up's form: a note, then Block.
    browser.fill(
        &format!("#note-{review}"),
        "the sender is the listed entity",
    );
    browser.click(&format!("#{review} button[value=block]"));
    let decided = browser.wait_text(&format!("#{review} .decided"));
    assert!(decided.contains("blocked"), "{decided}");
    s.anvil.sanction(s.oracle(), &[&payer], false);
    s.assert_books();
}

impl Setup {
    /// Merchant `merchant`'s top-up transfer `hash` as the portal lists it, once `done` holds
    /// (the cron run and a block mined each time).
    fn topup_until(&self, merchant: usize, hash: &str, done: impl Fn(&Value) -> bool) -> Value {
        let id = self.worker.credentials.institutions[0].merchant_ids[merchant];
        let portal = self.worker.portal_login(0);
        eventually(
            &format!("top-up {hash} listed"),
            Duration::from_secs(40),
            || {
                self.worker.cron();
                self.anvil.mine(1);
                let reply = self.worker.portal(
                    Method::GET,
                    &format!("/portal/api/merchants/{id}/topup"),
                    Some(&portal),
                    None,
                );
                assert_eq!(reply.status, 200, "{}", reply.text);
                reply.json()["networks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|n| n["transfers"].as_array().unwrap().clone())
                    .find(|t| t["tx_hash"] == hash)
                    .filter(&done)
            },
        )
    }

    /// The screening queue's review of the held top-up in transaction `hash`, in `portal`'s
    /// session.
    fn topup_review(&self, portal: &payrail_tests::PortalSession, hash: &str) -> Value {
        let reply = self
            .worker
            .portal(Method::GET, "/portal/api/screening", Some(portal), None);
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()["topups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["tx_hash"] == hash)
            .cloned()
            .unwrap_or_else(|| panic!("no review of {hash}: {}", reply.text))
    }

    /// Decides held top-up review `id` through the portal's JSON API.
    fn decide_topup(
        &self,
        portal: &payrail_tests::PortalSession,
        id: &str,
        decision: &str,
        note: &str,
    ) -> payrail_tests::Reply {
        self.worker.portal(
            Method::POST,
            &format!("/portal/api/screening/topups/{id}"),
            Some(portal),
            Some(&json!({"decision": decision, "note": note})),
        )
    }
}

#[test]
fn a_top_up_from_a_listed_address_is_held_until_an_admin_releases_it_once_or_blocks_it() {
    let (_one, s) = shared();
    let admin = s.worker.portal_login(0);
    let merchant = s.worker.credentials.institutions[0].merchant_ids[2];
    let given = s.worker.portal(
        Method::POST,
        &format!("/portal/api/merchants/{merchant}/topup/polygon"),
        Some(&admin),
        None,
    );
    assert_eq!(given.status, 200, "{}", given.text);
    let address = given.json()["address"].as_str().unwrap().to_owned();
    let listed = s.anvil.account(8);
    s.anvil.sanction(s.oracle(), &[&listed], true);
    s.anvil.mint(&s.usdc, &listed, 3_000_000);
    let (owed_before, _) = s.owed(2);
    let held_hash = s.anvil.transfer(&s.usdc, &listed, &address, 2_000_000);
    let clear_hash = s.anvil.transfer(&s.usdc, &s.customer, &address, 5_000_000);
    // Cron runs race to read the address: each top-up is recorded once (below: one review,
    // the admins told once). The clear sender's is credited; the listed one's is held, in no
    // one's balance.
    for _ in 0..4 {
        s.anvil.mine(1);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| s.worker.cron());
            }
        });
    }
    s.topup_until(2, &clear_hash, |t| t["credited"] == true);
    let held = s.topup_until(2, &held_hash, |t| t["screening"] == "held");
    assert_eq!(held["credited"], false, "{held}");
    for _ in 0..3 {
        s.worker.cron();
        s.anvil.mine(1);
    }
    assert_eq!(
        s.owed(2).0,
        owed_before + 5_000_000,
        "only the clear top-up"
    );
    let told: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT count(*) FROM notifications WHERE kind = 'screening_hold' \
             AND body LIKE '%' || ?1 || '%'",
            [&held_hash],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(told, 1, "the admins told once");
    let reviews: i64 = s
        .worker
        .database()
        .query_row(
            "SELECT count(*) FROM topup_reviews WHERE tx_hash = ?1",
            [&held_hash],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(reviews, 1, "one review");
    // The queue shows it with its evidence.
    let review = s.topup_review(&admin, &held_hash);
    let review_id = review["id"].as_str().unwrap().to_owned();
    assert!(review["decision"].is_null(), "{review}");
    assert_eq!(review["sender"], listed.to_ascii_lowercase(), "{review}");
    assert_eq!(review["amount"], "2", "{review}");
    assert_eq!(review["evidence"][0]["result"], "listed", "{review}");
    assert_eq!(review["evidence"][0]["subject"], "topup", "{review}");
    s.decide_topup(&admin, &review_id, "release", " ")
        .assert_error(400, "invalid_request");
    s.decide_topup(&admin, "tpr_unknown", "release", "no such")
        .assert_error(404, "not_found");
    // Two admins release it at once: one decision is made, the other is told it was.
    let answers = at_once(4, |_| {
        s.decide_topup(
            &admin,
            &review_id,
            "release",
            "false positive: our own test wallet",
        )
    });
    one_decision_made(&answers);
    assert_eq!(s.owed(2).0, owed_before + 7_000_000, "released once");
    s.topup_until(2, &held_hash, |t| {
        t["credited"] == true && t["screening"] == "released"
    });
    // Another from the same sender, blocked: it stays frozen, never the merchant's.
    let blocked_hash = s.anvil.transfer(&s.usdc, &listed, &address, 1_000_000);
    s.topup_until(2, &blocked_hash, |t| t["screening"] == "held");
    let blocked = s.topup_review(&admin, &blocked_hash);
    let decided = s.decide_topup(
        &admin,
        blocked["id"].as_str().unwrap(),
        "block",
        "confirmed match with the oracle",
    );
    assert_eq!(decided.status, 200, "{}", decided.text);
    assert_eq!(decided.json()["decision"], "blocked");
    let after = s.topup_until(2, &blocked_hash, |t| t["screening"] == "blocked");
    assert_eq!(after["credited"], false, "{after}");
    assert_eq!(
        s.owed(2).0,
        owed_before + 7_000_000,
        "blocked: not credited"
    );
    // The audit export holds the decisions.
    let export = s.export_today(&admin);
    for needle in [
        format!("screening,topup,{held_hash}:"),
        format!("decision,topup,{held_hash}:"),
        format!("decision,topup,{blocked_hash}:"),
        "confirmed match with the oracle".to_owned(),
    ] {
        assert!(export.text.contains(&needle), "{needle}: {}", export.text);
    }
    s.assert_books();
}
