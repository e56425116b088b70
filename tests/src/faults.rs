//! A JSON-RPC node that misbehaves on request: a proxy in front of a real node (anvil) that the
//! tests control. Per method and at a chosen rate it drops the call, hangs past the worker's
//! deadline, holds it until the test lets it go, raises the price it answers call by call,
//! answers garbage, an oversized body or a JSON-RPC error, answers `null` for a receipt or a
//! transaction that exists, lags the head by some blocks or freezes it at one, invents a
//! transfer log, or reports another chain id. Everything else is passed to the node as it is.
//!
//! Real nodes and the load balancers in front of them do all of these; the worker must never
//! move money twice, or spend without bound, because of one.
//!
//! It can also act out what anvil lacks of an OP Stack chain (Base): the L1 data fee
//! ([`FaultyNode::charge_l1_fee`]). The `GasPriceOracle` predeploy answers its bound, every
//! transaction the sender broadcasts is charged the fee from its balance (anvil mines each
//! transaction when it arrives, so the charge and the transaction land together), and its
//! receipt carries `l1Fee`, as an OP Stack node's does.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The longest a [`Fault::Hold`] holds a call: less than the worker's 5-second deadline.
pub const HOLD_AT_MOST: Duration = Duration::from_secs(4);

use serde_json::{json, Value};

/// What the proxy does instead of passing a call on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Closes the connection without an answer.
    Drop,
    /// Answers nothing for longer than the worker waits (then closes).
    Hang,
    /// Holds the call until [`FaultyNode::release`] (at most [`HOLD_AT_MOST`], within the
    /// worker's deadline), then passes it on: a slow node, for a test to act while the worker
    /// waits on it.
    Hold,
    /// Passes the call on at once, then holds the node's answer until [`FaultyNode::release`]
    /// (at most [`HOLD_AT_MOST`]) the first time these exact parameters are seen: the node has
    /// done what was asked (a transaction broadcast) while the worker still waits to hear it,
    /// for a test to kill the worker then. The same call again is answered at once.
    AnswerLate,
    /// Answers `200` with a body that is not JSON.
    Garbage,
    /// Answers a body larger than the worker reads.
    Oversized,
    /// Answers a JSON-RPC error.
    Refuse,
    /// Answers `result: null` (a lagging or pruned node asked for a receipt or a transaction).
    Null,
    /// Answers the node's head less this many blocks (`eth_blockNumber`).
    Lag(u64),
    /// Passes the call on and adds this much to the quantity it answers for every call of the
    /// method before it (`eth_maxPriorityFeePerGas`): a price that moves between two readers.
    Climb(u128),
    /// Answers this chain id (`eth_chainId`).
    ChainId(u64),
    /// Answers this block number as the head (`eth_blockNumber`): a node frozen there.
    Head(u64),
    /// Passes the call on and adds this log to the answer when the request's filter would
    /// match it (`eth_getLogs`): a node that invents a transfer ([`invented_transfer`]).
    ExtraLog(Value),
}

/// An ERC-20 `Transfer` log of `units` of `token` from `from` to `to` in block `block`, in a
/// transaction the chain never saw (`hash`): what [`Fault::ExtraLog`] adds to answers.
pub fn invented_transfer(
    (token, from, to): (&str, &str, &str),
    units: u128,
    block: u64,
    hash: &str,
) -> Value {
    let topic = |a: &str| format!("0x{:0>64}", a.trim_start_matches("0x").to_ascii_lowercase());
    json!({
        "address": token,
        "topics": ["0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef",
                   topic(from), topic(to)],
        "data": format!("0x{units:064x}"),
        "blockNumber": format!("{block:#x}"),
        "blockHash": format!("0x{}", "cd".repeat(32)),
        "transactionHash": hash,
        "transactionIndex": "0x0",
        "logIndex": "0x0",
        "removed": false
    })
}

/// The L1 data fee the proxy charges (see the module's documentation).
#[derive(Debug, Clone)]
struct L1Fee {
    /// The sender charged, lower case.
    sender: String,
    /// What each of its transactions pays, in wei.
    fee: u128,
    /// What the `GasPriceOracle`'s `getL1FeeUpperBound` answers.
    bound: u128,
}

#[derive(Default)]
struct State {
    /// The L1 data fee acted out, if any.
    l1_fee: Option<L1Fee>,
    /// The transactions charged it, by hash.
    charged: std::collections::BTreeSet<String>,
    /// Per method: the fault and how often, in percent.
    rules: BTreeMap<String, (Fault, u32)>,
    /// Calls seen, per method.
    calls: BTreeMap<String, usize>,
    /// The parameters of the calls whose answers were held late ([`Fault::AnswerLate`]).
    answered_late: std::collections::BTreeSet<String>,
    /// Calls answered with a fault, per method.
    faulted: BTreeMap<String, usize>,
}

/// The proxy; it stops serving when dropped (its thread ends with the test process).
pub struct FaultyNode {
    /// `http://127.0.0.1:<port>`: give this to the worker as the node's URL.
    pub url: String,
    state: Arc<Mutex<State>>,
    /// Woken when the rules change, for the calls held.
    changed: Arc<Condvar>,
}

impl FaultyNode {
    /// Starts a proxy passing every call to `upstream` until told otherwise.
    pub fn start(upstream: &str) -> FaultyNode {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let state = Arc::new(Mutex::new(State::default()));
        let changed = Arc::new(Condvar::new());
        let shared = (Arc::clone(&state), Arc::clone(&changed));
        let upstream = upstream.to_owned();
        std::thread::spawn(move || {
            let client = reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("http client");
            let seed = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
            for stream in listener.incoming().flatten() {
                let (state, changed) = (Arc::clone(&shared.0), Arc::clone(&shared.1));
                let (client, upstream) = (client.clone(), upstream.clone());
                let roll = next(&seed);
                std::thread::spawn(move || {
                    serve(stream, (&state, &changed), &client, &upstream, roll)
                });
            }
        });
        FaultyNode {
            url,
            state,
            changed,
        }
    }

    /// From now on, answers `percent` % of the calls of `method` with `fault`. `method` may
    /// name the call's last parameter after a space (`eth_getTransactionCount pending`), or
    /// the contract a call is to (`eth_call to:0x…`, lower case): then only those calls.
    pub fn set(&self, method: &str, fault: Fault, percent: u32) {
        self.state
            .lock()
            .unwrap()
            .rules
            .insert(method.to_owned(), (fault, percent.min(100)));
        self.changed.notify_all();
    }

    /// Passes the calls of `method` on again, the ones held too.
    pub fn release(&self, method: &str) {
        self.state.lock().unwrap().rules.remove(method);
        self.changed.notify_all();
    }

    /// From now on, acts out an OP Stack chain's L1 data fee for `sender`'s transactions: each
    /// pays `fee` wei besides its gas, and the `GasPriceOracle` bounds it at `bound`.
    pub fn charge_l1_fee(&self, sender: &str, fee: u128, bound: u128) {
        self.state.lock().unwrap().l1_fee = Some(L1Fee {
            sender: sender.to_ascii_lowercase(),
            fee,
            bound,
        });
    }

    /// The transactions charged an L1 data fee so far.
    pub fn charged_l1_fees(&self) -> usize {
        self.state.lock().unwrap().charged.len()
    }

    /// Passes every call on again, the ones held too.
    pub fn heal(&self) {
        self.state.lock().unwrap().rules.clear();
        self.changed.notify_all();
    }

    /// Calls of `method` seen so far.
    pub fn calls(&self, method: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .calls
            .get(method)
            .copied()
            .unwrap_or(0)
    }

    /// Calls of every method seen so far.
    pub fn total_calls(&self) -> usize {
        self.state.lock().unwrap().calls.values().sum()
    }

    /// Calls of `method` answered with a fault so far.
    pub fn faulted(&self, method: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .faulted
            .get(method)
            .copied()
            .unwrap_or(0)
    }
}

/// A cron run of `worker` in which the first broadcast of a transaction the `nodes` have not
/// seen before reaches its node, and the worker is killed (SIGKILL) before it hears the answer,
/// then started again on the same database ([`crate::Worker::kill_and_restart`]): what
/// `at_kill` read just before the kill, or `None` when the run broadcast nothing new and ended
/// by itself. The nodes pass every call on again afterwards.
pub fn cron_killed_at_broadcast<T>(
    worker: &crate::Worker,
    nodes: &[&FaultyNode],
    at_kill: impl FnOnce() -> T,
) -> Option<T> {
    const BROADCAST: &str = "eth_sendRawTransaction";
    let held = || nodes.iter().map(|n| n.faulted(BROADCAST)).sum::<usize>();
    let before = held();
    for node in nodes {
        node.set(BROADCAST, Fault::AnswerLate, 100);
    }
    let killed = std::thread::scope(|scope| {
        let cron = worker.request(reqwest::Method::GET, "/__scheduled?cron=*+*+*+*+*");
        // Killed in the middle, it has no answer.
        let run = scope.spawn(move || drop(cron.send()));
        let broadcast = crate::eventually(
            "a broadcast or the run's end",
            Duration::from_secs(60),
            || {
                if held() > before {
                    Some(true)
                } else {
                    run.is_finished().then_some(false)
                }
            },
        );
        broadcast.then(|| {
            let read = at_kill();
            worker.kill_and_restart();
            read
        })
    });
    for node in nodes {
        node.heal();
    }
    killed
}

/// A pseudo-random number from 0 to 99 (xorshift: the same run of faults for the same calls).
fn next(seed: &AtomicU64) -> u32 {
    let mut x = seed.load(Ordering::Relaxed);
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    seed.store(x, Ordering::Relaxed);
    u32::try_from(x % 100).unwrap_or(0)
}

/// Largest request read.
const MAX_REQUEST: usize = 1024 * 1024;

/// One connection: one request, one answer (or a fault), then closed.
fn serve(
    stream: TcpStream,
    (state, changed): (&Mutex<State>, &Condvar),
    client: &reqwest::blocking::Client,
    upstream: &str,
    roll: u32,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    if length > MAX_REQUEST {
        return;
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let method = request["method"].as_str().unwrap_or_default().to_owned();
    let id = request["id"].clone();
    let (fault, earlier) = {
        let mut state = state.lock().unwrap();
        let calls = state.calls.entry(method.clone()).or_default();
        *calls += 1;
        let earlier = *calls - 1;
        // A rule for the method with its last parameter (`eth_getTransactionCount pending`)
        // comes before one for the method alone.
        let last = request["params"]
            .as_array()
            .and_then(|p| p.last())
            .and_then(Value::as_str)
            .unwrap_or_default();
        // And one for a call to one contract (`eth_call to:0x…`, lower case) before both.
        let to = request["params"][0]["to"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let mut fault = state
            .rules
            .get(&format!("{method} to:{to}"))
            .or_else(|| state.rules.get(&format!("{method} {last}")))
            .or_else(|| state.rules.get(&method))
            .filter(|(_, percent)| roll < *percent)
            .map(|(fault, _)| fault.clone());
        if fault == Some(Fault::AnswerLate)
            && !state.answered_late.insert(request["params"].to_string())
        {
            fault = None;
        }
        if fault.is_some() {
            *state.faulted.entry(method.clone()).or_default() += 1;
        }
        (fault, earlier)
    };
    let pass = || -> Option<Value> {
        client
            .post(upstream)
            .header("Content-Type", "application/json")
            .body(body.clone())
            .send()
            .ok()?
            .json()
            .ok()
    };
    let l1_fee = state.lock().unwrap().l1_fee.clone();
    let answer = match fault {
        None => match l1_fee {
            Some(l1) => with_l1_fee(&request, &l1, state, client, upstream, pass),
            None => pass(),
        },
        Some(Fault::Drop) => return,
        Some(Fault::Hold) => {
            let held = |s: &mut State| matches!(s.rules.get(&method), Some((Fault::Hold, _)));
            drop(
                changed
                    .wait_timeout_while(state.lock().unwrap(), HOLD_AT_MOST, held)
                    .unwrap(),
            );
            pass()
        }
        Some(Fault::AnswerLate) => {
            let answer = pass();
            let held = |s: &mut State| matches!(s.rules.get(&method), Some((Fault::AnswerLate, _)));
            drop(
                changed
                    .wait_timeout_while(state.lock().unwrap(), HOLD_AT_MOST, held)
                    .unwrap(),
            );
            answer
        }
        Some(Fault::Hang) => {
            // Longer than the worker's 5-second deadline, then gone.
            std::thread::sleep(Duration::from_secs(7));
            return;
        }
        Some(Fault::Garbage) => {
            respond(&mut writer, b"<html>502 Bad Gateway</html>");
            return;
        }
        Some(Fault::Oversized) => {
            let padding = "0".repeat(2 * 1024 * 1024);
            let body = json!({"jsonrpc": "2.0", "id": id, "result": padding}).to_string();
            respond(&mut writer, body.as_bytes());
            return;
        }
        Some(Fault::Refuse) => Some(json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32000, "message": "refused by the faulty node (test)"}})),
        Some(Fault::Null) => Some(json!({"jsonrpc": "2.0", "id": id, "result": null})),
        Some(Fault::ChainId(chain)) => {
            Some(json!({"jsonrpc": "2.0", "id": id, "result": format!("{chain:#x}")}))
        }
        Some(Fault::Head(head)) => {
            Some(json!({"jsonrpc": "2.0", "id": id, "result": format!("{head:#x}")}))
        }
        Some(Fault::ExtraLog(log)) => pass().map(|mut answer| {
            if matches(&request["params"][0], &log) {
                if let Some(logs) = answer["result"].as_array_mut() {
                    logs.push(log);
                }
            }
            answer
        }),
        Some(Fault::Climb(step)) => pass().map(|mut answer| {
            let value = answer["result"]
                .as_str()
                .and_then(|v| u128::from_str_radix(v.trim_start_matches("0x"), 16).ok())
                .unwrap_or(0);
            let climbed = value.saturating_add(step.saturating_mul(earlier as u128));
            answer["result"] = json!(format!("{climbed:#x}"));
            answer
        }),
        Some(Fault::Lag(blocks)) => pass().map(|mut answer| {
            let head = answer["result"]
                .as_str()
                .and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok())
                .unwrap_or(0);
            answer["result"] = json!(format!("{:#x}", head.saturating_sub(blocks)));
            answer
        }),
    };
    match answer {
        Some(answer) => respond(&mut writer, answer.to_string().as_bytes()),
        None => respond(&mut writer, b"{}"),
    }
}

/// The OP Stack's `GasPriceOracle` predeploy.
const GAS_PRICE_ORACLE: &str = "0x420000000000000000000000000000000000000f";

/// Serialises charges, so two broadcasts never read and set the sender's balance at once.
static CHARGING: Mutex<()> = Mutex::new(());

/// A call on a chain that charges `l1`: the oracle answered, a broadcast charged, a receipt
/// given its `l1Fee`; anything else passed on.
fn with_l1_fee(
    request: &Value,
    l1: &L1Fee,
    state: &Mutex<State>,
    client: &reqwest::blocking::Client,
    upstream: &str,
    pass: impl Fn() -> Option<Value>,
) -> Option<Value> {
    let id = request["id"].clone();
    let params = &request["params"];
    match request["method"].as_str().unwrap_or_default() {
        "eth_call"
            if params[0]["to"]
                .as_str()
                .map(str::to_ascii_lowercase)
                .as_deref()
                == Some(GAS_PRICE_ORACLE) =>
        {
            Some(json!({"jsonrpc": "2.0", "id": id, "result": format!("0x{:064x}", l1.bound)}))
        }
        "eth_sendRawTransaction" => {
            let _one = CHARGING.lock().unwrap();
            let upstream_call = |method: &str, params: Value| -> Option<Value> {
                let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
                let answer: Value = client.post(upstream).json(&body).send().ok()?.json().ok()?;
                Some(answer["result"].clone())
            };
            let balance = || {
                upstream_call("eth_getBalance", json!([l1.sender, "latest"]))?
                    .as_str()
                    .and_then(|h| u128::from_str_radix(h.trim_start_matches("0x"), 16).ok())
            };
            let set = |wei: u128| {
                upstream_call("anvil_setBalance", json!([l1.sender, format!("{wei:#x}")]))
            };
            set(balance()?.saturating_sub(l1.fee))?;
            let answer = pass();
            let hash = answer
                .as_ref()
                .and_then(|a| a["result"].as_str())
                .map(str::to_ascii_lowercase);
            let charged = hash.is_some_and(|h| state.lock().unwrap().charged.insert(h));
            if !charged {
                // Refused, or a transaction charged before broadcast again: nothing is paid.
                set(balance()?.saturating_add(l1.fee))?;
            }
            answer
        }
        "eth_getTransactionReceipt" => pass().map(|mut answer| {
            let hash = answer["result"]["transactionHash"]
                .as_str()
                .map(str::to_ascii_lowercase);
            if hash.is_some_and(|h| state.lock().unwrap().charged.contains(&h)) {
                answer["result"]["l1Fee"] = json!(format!("{:#x}", l1.fee));
            }
            answer
        }),
        _ => pass(),
    }
}

/// Whether an `eth_getLogs` `filter` would match `log`: its block range, its address (when
/// the filter names one) and every topic the filter names.
fn matches(filter: &Value, log: &Value) -> bool {
    let number = |v: &Value| {
        v.as_str()
            .and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok())
    };
    let block = number(&log["blockNumber"]);
    let in_range = match (
        number(&filter["fromBlock"]),
        number(&filter["toBlock"]),
        block,
    ) {
        (Some(from), Some(to), Some(block)) => (from..=to).contains(&block),
        _ => false,
    };
    let same = |a: &Value, b: &Value| {
        a.as_str().map(str::to_ascii_lowercase) == b.as_str().map(str::to_ascii_lowercase)
    };
    let address = filter["address"].is_null() || same(&filter["address"], &log["address"]);
    let topics = filter["topics"].as_array().is_none_or(|wanted| {
        wanted
            .iter()
            .enumerate()
            .all(|(i, topic)| topic.is_null() || same(topic, &log["topics"][i]))
    });
    in_range && address && topics
}

fn respond(writer: &mut TcpStream, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    let _ = writer.write_all(head.as_bytes());
    let _ = writer.write_all(body);
    let _ = writer.flush();
}
