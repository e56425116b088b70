//! A real local EVM node for the chain tests: `anvil` on a free port, the test contracts
//! (compiled from `contracts/` by `scripts/contracts.js`) deployed on it, and real transactions
//! sent from its funded accounts (anvil signs them with the account's key). Also a switchable
//! TCP relay in front of it, to take the node away and bring it back.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::{eventually, free_port, root};

/// `m/44'/60'/0'/0` of BIP39's "abandon … about" test mnemonic: the deposit key of the tests
/// (its child 0 is the widely published `0x9858EfFD232B4033E47d90003D41EC34EcaEda94`).
pub const TEST_XPUB: &str = "xpub6EF8jXqFeFEW5bwMU7RpQtHkzE4KJxcqJtvkCjJumzW8CPpacXkb92ek4WzLQXjL93HycJwTPUAcuNxCqFPKKU5m5Z2Vq4nCyh5CyPeBFFr";
/// BIP39's well-known test mnemonic: the custody wallet of [`TEST_XPUB`], which the sweep reads
/// from stdin.
pub const TEST_MNEMONIC: &str = "abandon abandon abandon abandon abandon abandon abandon abandon \
                                 abandon abandon abandon about";

/// A local EVM node, stopped when dropped, or when the test process ends however it ends (a
/// shared node in a static is never dropped): a watchdog shell stops it when its stdin closes.
pub struct Anvil {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    watchdog: Mutex<(Child, Option<ChildStdin>)>,
    http: reqwest::blocking::Client,
}

impl Anvil {
    /// Starts anvil (chain id 31337, automining one block per transaction).
    pub fn start() -> Anvil {
        Anvil::start_chain(31337)
    }

    /// Starts anvil as chain `chain_id` (a second network of its own), automining.
    pub fn start_chain(chain_id: u64) -> Anvil {
        let port = free_port();
        let binary = root().join("node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil");
        assert!(
            binary.is_file(),
            "{} is missing (run scripts/setup)",
            binary.display()
        );
        let script = format!(
            "'{}' --port {port} --host 127.0.0.1 --chain-id {chain_id} --silent >/dev/null 2>&1 \
             & a=$!; cat >/dev/null; kill $a; wait $a",
            binary.display()
        );
        let mut child = Command::new("bash")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .spawn()
            .expect("start anvil's watchdog");
        let stdin = child.stdin.take().expect("piped stdin");
        let anvil = Anvil {
            url: format!("http://127.0.0.1:{port}"),
            watchdog: Mutex::new((child, Some(stdin))),
            http: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("http client"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while anvil.try_rpc("eth_chainId", json!([])).is_none() {
            assert!(Instant::now() < deadline, "anvil did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        anvil
    }

    /// A JSON-RPC call's result, or `None` when the node did not give one.
    pub fn try_rpc(&self, method: &str, params: Value) -> Option<Value> {
        let reply: Value = self
            .http
            .post(&self.url)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send()
            .ok()?
            .json()
            .ok()?;
        reply.get("result").cloned()
    }

    /// A JSON-RPC call's result; panics naming the call otherwise.
    pub fn rpc(&self, method: &str, params: Value) -> Value {
        self.try_rpc(method, params.clone())
            .unwrap_or_else(|| panic!("{method} {params} failed"))
    }

    /// The funded account `index` (anvil's default accounts).
    pub fn account(&self, index: usize) -> String {
        self.rpc("eth_accounts", json!([]))[index]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// The newest block's number.
    pub fn head(&self) -> u64 {
        quantity(&self.rpc("eth_blockNumber", json!([])))
    }

    /// Mines `n` blocks.
    pub fn mine(&self, n: u64) {
        self.rpc("anvil_mine", json!([format!("{n:#x}")]));
    }

    /// Sends a transaction from `from` (signed by the node with the account's key) and waits
    /// for its receipt; returns the receipt.
    pub fn send(&self, from: &str, to: Option<&str>, data: &str) -> Value {
        self.send_value(from, to, data, 0)
    }

    /// The same, carrying `wei` of ether.
    pub fn send_value(&self, from: &str, to: Option<&str>, data: &str, wei: u128) -> Value {
        let mut tx = json!({"from": from, "data": data, "gas": "0x2dc6c0",
            "value": format!("{wei:#x}")});
        if let Some(to) = to {
            tx["to"] = json!(to);
        }
        let hash = self.rpc("eth_sendTransaction", json!([tx]));
        let receipt = eventually("a receipt", Duration::from_secs(20), || {
            self.try_rpc("eth_getTransactionReceipt", json!([hash]))
                .filter(|r| !r.is_null())
        });
        assert_eq!(receipt["status"], "0x1", "reverted: {receipt}");
        receipt
    }

    /// Deploys contract `name` from `contracts/` with ABI-encoded constructor `args`; returns its
    /// address.
    pub fn deploy(&self, name: &str, args: &str) -> String {
        let code = format!("{}{args}", artefact(name)["bytecode"].as_str().unwrap());
        let receipt = self.send(&self.account(0), None, &code);
        receipt["contractAddress"].as_str().unwrap().to_owned()
    }

    /// A new `TestToken` with 6 decimals.
    pub fn token(&self, name: &str, symbol: &str) -> String {
        // constructor(string name, string symbol, uint8 decimals)
        let args = format!(
            "{}{}{}{}{}",
            word(0x60),
            word(0xa0),
            word(6),
            abi_string(name),
            abi_string(symbol)
        );
        self.deploy("TestToken", &args)
    }

    /// Mints `units` of `token` to `to`.
    pub fn mint(&self, token: &str, to: &str, units: u128) {
        let mint = selector("TestToken", "mint(address,uint256)");
        let data = format!("0x{mint}{}{}", address_word(to), word(units));
        self.send(&self.account(0), Some(token), &data);
    }

    /// Transfers `units` of `token` from `from` to `to`; returns the transaction hash.
    pub fn transfer(&self, token: &str, from: &str, to: &str, units: u128) -> String {
        let transfer = selector("TestToken", "transfer(address,uint256)");
        let data = format!("0x{transfer}{}{}", address_word(to), word(units));
        let receipt = self.send(from, Some(token), &data);
        receipt["transactionHash"].as_str().unwrap().to_owned()
    }

    /// The same without waiting for it to be mined (with automine off, many go into one block:
    /// each takes at most 100,000 gas); returns its hash.
    pub fn transfer_unmined(&self, token: &str, from: &str, to: &str, units: u128) -> String {
        let transfer = selector("TestToken", "transfer(address,uint256)");
        let data = format!("0x{transfer}{}{}", address_word(to), word(units));
        let tx = json!({"from": from, "to": token, "data": data, "gas": "0x186a0"});
        self.rpc("eth_sendTransaction", json!([tx]))
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Sends `wei` of ether from `from` to `to` in a transaction of its own; returns its hash.
    pub fn pay_ether(&self, from: &str, to: &str, wei: u128) -> String {
        let receipt = self.send_value(from, Some(to), "0x", wei);
        receipt["transactionHash"].as_str().unwrap().to_owned()
    }

    /// Sends `wei` of ether from `from` to `to` from inside a call to a `TestForwarder`
    /// contract (an internal transfer); returns the receipt.
    pub fn forward_ether(&self, forwarder: &str, from: &str, to: &str, wei: u128) -> Value {
        self.send_value(from, Some(forwarder), &forward_call(to), wei)
    }

    /// The same, without waiting for it to be mined (with automine off, several go into one
    /// block); returns its hash.
    pub fn forward_ether_unmined(
        &self,
        forwarder: &str,
        from: &str,
        to: &str,
        wei: u128,
    ) -> String {
        let tx = json!({"from": from, "to": forwarder, "data": forward_call(to), "gas": "0x2dc6c0",
            "value": format!("{wei:#x}")});
        self.rpc("eth_sendTransaction", json!([tx]))
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// A new `TestPriceFeed` with 8 decimals answering `answer` as of `updated_at`.
    pub fn feed(&self, description: &str, answer: u128, updated_at: u64) -> String {
        // constructor(uint8 decimals, string description)
        let args = format!("{}{}{}", word(8), word(0x40), abi_string(description));
        let feed = self.deploy("TestPriceFeed", &args);
        self.set_feed(&feed, answer, updated_at);
        feed
    }

    /// A new sanctions oracle (`SanctionsList`, Chainalysis's interface) owned by account 0.
    pub fn sanctions_oracle(&self) -> String {
        self.deploy("SanctionsList", "")
    }

    /// Lists (`true`) or unlists `addresses` on the sanctions oracle `oracle`, as its owner.
    pub fn sanction(&self, oracle: &str, addresses: &[&str], listed: bool) {
        let signature = if listed {
            "addToSanctionsList(address[])"
        } else {
            "removeFromSanctionsList(address[])"
        };
        // One dynamic array argument: its offset, its length, its items.
        let mut data = format!(
            "0x{}{}{}",
            selector("SanctionsList", signature),
            word(0x20),
            word(addresses.len() as u128)
        );
        for address in addresses {
            data.push_str(&address_word(address));
        }
        self.send(&self.account(0), Some(oracle), &data);
    }

    /// Whether the sanctions oracle `oracle` lists `address`.
    pub fn is_sanctioned(&self, oracle: &str, address: &str) -> bool {
        let data = format!(
            "0x{}{}",
            selector("SanctionsList", "isSanctioned(address)"),
            address_word(address)
        );
        let word = self.rpc("eth_call", json!([{"to": oracle, "data": data}, "latest"]));
        word.as_str().is_some_and(|w| w.ends_with('1'))
    }

    /// Sets a `TestPriceFeed`'s answer as of `updated_at` (for a sequencer uptime feed: 0 up,
    /// 1 down, since `updated_at`).
    pub fn set_feed(&self, feed: &str, answer: u128, updated_at: u64) {
        // set(int256 answer, uint256 updatedAt)
        let set = selector("TestPriceFeed", "set(int256,uint256)");
        let data = format!("0x{set}{}{}", word(answer), word(updated_at.into()));
        self.send(&self.account(0), Some(feed), &data);
    }

    /// `owner`'s balance of `token` (ERC-20 `balanceOf`).
    pub fn balance_of(&self, token: &str, owner: &str) -> u128 {
        let data = format!("0x70a08231{}", address_word(owner));
        let word = self.rpc("eth_call", json!([{"to": token, "data": data}, "latest"]));
        u128::from_str_radix(word.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
    }

    /// Sets `owner`'s balance of the test token `token` to `units`, behind everyone's back (a
    /// transaction already signed against the old balance then reverts). `TestToken` keeps
    /// `balanceOf` in its fourth storage slot (after `name`, `symbol`, `totalSupply`; its
    /// immutables take none), so `owner`'s entry is at `keccak256(owner . 3)`.
    pub fn set_token_balance(&self, token: &str, owner: &str, units: u128) {
        use sha3::{Digest, Keccak256};
        let key = hex::decode(format!("{}{}", address_word(owner), word(3))).unwrap();
        let slot = hex::encode(Keccak256::digest(key));
        self.rpc(
            "anvil_setStorageAt",
            json!([token, format!("0x{slot}"), format!("0x{}", word(units))]),
        );
    }

    /// `owner`'s balance of ether, in wei.
    pub fn ether_balance(&self, owner: &str) -> u128 {
        let wei = self.rpc("eth_getBalance", json!([owner, "latest"]));
        u128::from_str_radix(wei.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
    }

    /// Sets `address`'s ether to `wei`, behind everyone's back.
    pub fn set_balance(&self, address: &str, wei: u128) {
        self.rpc("anvil_setBalance", json!([address, format!("{wei:#x}")]));
    }

    /// Lets transactions be sent from `address` without its key (anvil signs for it), or stops.
    pub fn impersonate(&self, address: &str, on: bool) {
        let method = if on {
            "anvil_impersonateAccount"
        } else {
            "anvil_stopImpersonatingAccount"
        };
        self.rpc(method, json!([address]));
    }

    /// A mined transaction's receipt.
    pub fn receipt(&self, hash: &str) -> Value {
        self.rpc("eth_getTransactionReceipt", json!([hash]))
    }

    /// Takes a snapshot of the chain; [`Anvil::revert`] goes back to it (a reorg).
    pub fn snapshot(&self) -> Value {
        self.rpc("evm_snapshot", json!([]))
    }

    /// Goes back to `snapshot`: every block after it is gone.
    pub fn revert(&self, snapshot: Value) {
        assert_eq!(self.rpc("evm_revert", json!([snapshot])), json!(true));
    }

    /// The unix time of the newest block.
    pub fn time(&self) -> u64 {
        let block = self.rpc("eth_getBlockByNumber", json!(["latest", false]));
        quantity(&block["timestamp"])
    }
}

/// Our CCTP V2-compatible contracts on one node (`contracts/CctpMessageTransmitter.sol` and
/// `contracts/CctpTokenMessenger.sol`), owned by account 0.
pub struct Cctp {
    /// The node's CCTP domain.
    pub domain: u32,
    /// The message transmitter.
    pub transmitter: String,
    /// The token messenger, paired with the transmitter.
    pub messenger: String,
}

impl Anvil {
    /// Deploys a message transmitter for `domain` that takes attestations by exactly
    /// `threshold` of `attesters`, and a token messenger paired with it that burns and mints
    /// `usdc` (a `TestToken` of account 0's, which makes the messenger its minter) and pays
    /// fees to `fee_recipient`.
    pub fn cctp(
        &self,
        domain: u32,
        attesters: &[&str],
        threshold: u32,
        usdc: &str,
        fee_recipient: &str,
    ) -> Cctp {
        // constructor(uint32 domain, address[] attesters, uint256 threshold)
        let mut args = format!(
            "{}{}{}{}",
            word(domain.into()),
            word(0x60),
            word(threshold.into()),
            word(attesters.len() as u128)
        );
        for attester in attesters {
            args.push_str(&address_word(attester));
        }
        let transmitter = self.deploy("CctpMessageTransmitter", &args);
        // constructor(address transmitter, address feeRecipient)
        let args = format!(
            "{}{}",
            address_word(&transmitter),
            address_word(fee_recipient)
        );
        let messenger = self.deploy("CctpTokenMessenger", &args);

        let owner = self.account(0);
        let pair = selector("CctpMessageTransmitter", "setTokenMessenger(address)");
        let data = format!("0x{pair}{}", address_word(&messenger));
        self.send(&owner, Some(&transmitter), &data);
        let serve = selector("CctpTokenMessenger", "setLocalToken(address,bool)");
        let data = format!("0x{serve}{}{}", address_word(usdc), word(1));
        self.send(&owner, Some(&messenger), &data);
        let minter = selector("TestToken", "setMinter(address,bool)");
        let data = format!("0x{minter}{}{}", address_word(&messenger), word(1));
        self.send(&owner, Some(usdc), &data);
        Cctp {
            domain,
            transmitter,
            messenger,
        }
    }

    /// Lets `local` (on this node) send to and take messages from `remote`'s messenger, minting
    /// `local_usdc` for `remote_usdc` burnt there.
    pub fn cctp_link(&self, local: &Cctp, local_usdc: &str, remote: &Cctp, remote_usdc: &str) {
        let owner = self.account(0);
        let add = selector(
            "CctpTokenMessenger",
            "addRemoteTokenMessenger(uint32,bytes32)",
        );
        let data = format!(
            "0x{add}{}{}",
            word(remote.domain.into()),
            address_word(&remote.messenger)
        );
        self.send(&owner, Some(&local.messenger), &data);
        let link = selector(
            "CctpTokenMessenger",
            "linkTokenPair(address,uint32,bytes32)",
        );
        let data = format!(
            "0x{link}{}{}{}",
            address_word(local_usdc),
            word(remote.domain.into()),
            address_word(remote_usdc)
        );
        self.send(&owner, Some(&local.messenger), &data);
    }

    /// Lets `spender` move `units` of `owner`'s `token`.
    pub fn approve(&self, token: &str, owner: &str, spender: &str, units: u128) {
        let approve = selector("TestToken", "approve(address,uint256)");
        let data = format!("0x{approve}{}{}", address_word(spender), word(units));
        self.send(owner, Some(token), &data);
    }

    /// `token`'s total supply (ERC-20 `totalSupply`).
    pub fn total_supply(&self, token: &str) -> u128 {
        let word = self.call(token, "0x18160ddd");
        u128::from_str_radix(word.trim_start_matches("0x"), 16).unwrap()
    }

    /// A read-only call's result, `0x` hex.
    pub fn call(&self, to: &str, data: &str) -> String {
        self.rpc("eth_call", json!([{"to": to, "data": data}, "latest"]))
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Why a call of `to` from `from` reverts (the node's error message, with the reason), or
    /// `None` when it does not.
    pub fn revert_reason(&self, from: &str, to: &str, data: &str) -> Option<String> {
        let call = json!({"from": from, "to": to, "data": data, "gas": "0x2dc6c0"});
        let reply: Value = self
            .http
            .post(&self.url)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "eth_call",
                "params": [call, "latest"]}))
            .send()
            .expect("eth_call")
            .json()
            .expect("a JSON-RPC reply");
        reply["error"]["message"].as_str().map(str::to_owned)
    }

    /// Sends a transaction from `from` to `to` that may revert, and waits for its receipt;
    /// returns the receipt, whatever its status.
    pub fn send_may_revert(&self, from: &str, to: &str, data: &str) -> Value {
        let tx = json!({"from": from, "to": to, "data": data, "gas": "0x2dc6c0"});
        let hash = self.rpc("eth_sendTransaction", json!([tx]));
        eventually("a receipt", Duration::from_secs(20), || {
            self.try_rpc("eth_getTransactionReceipt", json!([hash]))
                .filter(|r| !r.is_null())
        })
    }
}

/// The logs in `receipt` that `address` emitted with topic 0 `topic` (`0x` hex).
pub fn logs_of(receipt: &Value, address: &str, topic: &str) -> Vec<Value> {
    receipt["logs"]
        .as_array()
        .map(|logs| {
            logs.iter()
                .filter(|log| {
                    log["address"]
                        .as_str()
                        .is_some_and(|a| a.eq_ignore_ascii_case(address))
                        && log["topics"][0]
                            .as_str()
                            .is_some_and(|t| t.eq_ignore_ascii_case(topic))
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

impl Drop for Anvil {
    fn drop(&mut self) {
        // Closing the pipe makes the watchdog stop the node.
        let (child, stdin) = self.watchdog.get_mut().unwrap_or_else(|e| e.into_inner());
        drop(stdin.take());
        let _ = child.wait();
    }
}

/// Sets up local chains as `scripts/dev` does: `scripts/local-chain.js` run with `args` (the
/// token node's URL, the networks, and for two chains the ether node's URL and the attestation
/// service's); its output.
pub fn local_chain(args: &[&str]) -> Value {
    let output = Command::new("node")
        .arg("scripts/local-chain.js")
        .args(args)
        .current_dir(root())
        .output()
        .expect("run node (is scripts/env.sh sourced? use scripts/test)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("local-chain.js prints JSON")
}

/// The treasury of `scripts/dev`: anvil's well-known account 2, funded by `local-chain.js`.
pub const DEV_TREASURY_KEY: &str =
    "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";

/// A sandbox worker on the local chains `local` (the output of [`local_chain`]) as `scripts/dev`
/// runs it: the test wallet's deposit addresses, the `scripts/dev` treasury sealed with the
/// dev encryption key, settlement wallets usable at once, and the cron fired every
/// `cron_period` seconds when given (see [`crate::Worker::start_with_cron`]), and the operator
/// API open to [`OPERATOR_TOKEN`].
pub fn worker_on(local: &Value, cron_period: Option<u64>) -> crate::Worker {
    let key = std::env::var("PAYRAIL_DEV_ENCRYPTION_KEY")
        .expect("PAYRAIL_DEV_ENCRYPTION_KEY (run through scripts/test)");
    let sealed = xtask::secrets::seal_treasury_key(&key, DEV_TREASURY_KEY).unwrap();
    let chains = local["chains"].to_string();
    crate::Worker::start_with_cron(
        "sandbox",
        3600,
        &[
            ("PAYRAIL_EVM_XPUB", TEST_XPUB),
            ("PAYRAIL_CHAINS", &chains),
            ("PAYRAIL_TREASURY_KEY", &sealed),
            ("PAYRAIL_WALLET_COOLOFF_SECONDS", "0"),
            ("PAYRAIL_OPERATOR_TOKEN", OPERATOR_TOKEN),
        ],
        cron_period,
    )
}

/// The operator's token of [`worker_on`]'s worker (its operator API: float moves).
pub const OPERATOR_TOKEN: &str = "op_local_chains_5e0c2b7a9d1f4e3c8b6a";

/// The local attester of `scripts/local-chain.js`: anvil's well-known account 9's key, as
/// `PAYRAIL_CCTP_ATTESTER_KEYS` holds it.
pub const LOCAL_ATTESTER_KEY: &str =
    "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6";

/// The local attestation service (`xtask attestation`, in this process), serving the arguments
/// `scripts/local-chain.js` printed (its output's `attestation`) as `scripts/dev` starts it,
/// signed by the local attester; it stops when dropped.
pub fn attestation(args: &Value) -> xtask::attestation::Server {
    attestation_signed_by(args, LOCAL_ATTESTER_KEY)
}

/// [`attestation`], its messages signed with `key` (another key: an attestation the chain's
/// transmitter does not take).
pub fn attestation_signed_by(args: &Value, key: &str) -> xtask::attestation::Server {
    let args: Vec<String> = args
        .as_array()
        .expect("the attestation's arguments")
        .iter()
        .map(|a| a.as_str().expect("an argument").to_owned())
        .collect();
    let Ok(xtask::attestation::Command::Serve { listen, config }) =
        xtask::attestation::parse(&args, Some(key))
    else {
        panic!("the attestation's arguments are refused: {args:?}");
    };
    let listener = TcpListener::bind(&listen).expect("bind the attestation service");
    xtask::attestation::serve(config, listener).expect("serve the attestation service")
}

/// The worker's `PAYRAIL_CHAINS` for one network on `url` with `tokens` (asset, contract),
/// `feeds` (pair, contract) and `confirmations`.
pub fn chains(
    network: &str,
    url: &str,
    confirmations: u64,
    tokens: &[(&str, &str)],
    feeds: &[(&str, &str)],
) -> String {
    let tokens: serde_json::Map<String, Value> = tokens
        .iter()
        .map(|(asset, address)| ((*asset).to_owned(), json!({"address": address})))
        .collect();
    let feeds: serde_json::Map<String, Value> = feeds
        .iter()
        .map(|(pair, address)| ((*pair).to_owned(), json!({"address": address})))
        .collect();
    json!({network: {"rpc_url": url, "chain_id": 31337, "confirmations": confirmations,
        "tokens": tokens, "feeds": feeds}})
    .to_string()
}

fn quantity(value: &Value) -> u64 {
    u64::from_str_radix(value.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

fn word(value: u128) -> String {
    format!("{value:064x}")
}

fn address_word(address: &str) -> String {
    format!(
        "{:0>64}",
        address.trim_start_matches("0x").to_ascii_lowercase()
    )
}

/// `TestForwarder.forward(to)`'s call data.
fn forward_call(to: &str) -> String {
    let forward = selector("TestForwarder", "forward(address)");
    format!("0x{forward}{}", address_word(to))
}

fn abi_string(text: &str) -> String {
    let mut bytes = hex(text.as_bytes());
    while !bytes.len().is_multiple_of(64) || bytes.is_empty() {
        bytes.push('0');
    }
    format!("{}{bytes}", word(text.len() as u128))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A compiled contract of `contracts/` (`.cache/contracts/<name>.json`).
fn artefact(name: &str) -> Value {
    let path = root().join(format!(".cache/contracts/{name}.json"));
    serde_json::from_slice(
        &std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{} (run scripts/test): {e}", path.display())),
    )
    .unwrap()
}

/// A function's selector, as solc computed it.
fn selector(contract: &str, signature: &str) -> String {
    artefact(contract)["selectors"][signature]
        .as_str()
        .unwrap_or_else(|| panic!("{contract} has no {signature}"))
        .to_owned()
}

/// A TCP relay to `target` that can be switched off: while off, connections are closed at
/// once (the node looks unreachable).
pub struct Relay {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    up: Arc<AtomicBool>,
}

impl Relay {
    /// Relays a free port to `target` (`http://host:port`), on.
    pub fn start(target: &str) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind relay");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let target = target.trim_start_matches("http://").to_owned();
        let up = Arc::new(AtomicBool::new(true));
        let on = up.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                if !on.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                pipe(
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    on.clone(),
                );
                pipe(server, client, on.clone());
            }
        });
        Relay { url, up }
    }

    /// Takes the node away, or brings it back.
    pub fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` while the relay is up; switched off, it cuts the connection (kept-alive
/// connections included).
fn pipe(mut from: TcpStream, mut to: TcpStream, up: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let mut buffer = [0u8; 16 * 1024];
        while let Ok(n) = from.read(&mut buffer) {
            if n == 0 || !up.load(Ordering::SeqCst) || to.write_all(&buffer[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}
