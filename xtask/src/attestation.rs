//! `xtask attestation`: a local stand-in for Circle's CCTP V2 attestation service ("Iris"), for
//! the local chains and the tests, as `anvil` stands in for a network. It answers Iris's V2
//! lookup, `GET /v2/messages/{sourceDomain}?transactionHash=0x…`, and its fee quote,
//! `GET /v2/burn/USDC/fees/{sourceDomainId}/{destDomainId}`, in Iris's documented shapes, so
//! that the worker runs one code path against it and, with only its configuration changed,
//! against Circle's production service.
//!
//! For a transaction on the node of a configured domain, it reads the receipt and takes every
//! `MessageSent(bytes)` log the domain's message transmitter emitted, in log order. Nothing is
//! signed before the transaction has its confirmations (`head + 1 − block`, as the worker counts
//! them); until then, and for a transaction without such a log or not yet mined, it answers 404
//! `{"error":"Message hash not found"}`, Iris's answer while it has nothing to give.
//!
//! Once confirmed, each message is filled in as Circle's service fills it in before signing:
//!
//! - **nonce**: V2 messages are emitted with a zero nonce; here it is
//!   `keccak256(sourceDomain as 4 big-endian bytes ‖ transaction hash ‖ logIndex as 8
//!   big-endian bytes)`, so the same question always gets the same message and attestation.
//! - **finalityThresholdExecuted**: 2000 once the standard confirmations are reached; 1000 when
//!   the domain has fast confirmations, they are reached but the standard ones are not, and the
//!   message asks for at most 1000 (`minFinalityThreshold ≤ 1000`). A transaction is answered
//!   whole or not at all: while any of its messages still waits, the answer is 404.
//! - **feeExecuted** of a burn message (a USDC transfer): 0 when attested at 2000; at 1000, the
//!   fast fee: `ceil(amount × FAST_FEE_BPS / 10 000)` (`--fast-fee-bps`, 1 unless said), at most
//!   the message's `maxFee` (Circle would instead wait for finality when `maxFee` is too low;
//!   here the fee is capped). A body that is not a burn message is left as it is.
//!
//! The attestation: every configured attester signs `keccak256(message)` (65 bytes `r ‖ s ‖ v`,
//! `v` 27 or 28, low `s`, RFC 6979 so deterministic), the signatures concatenated in ascending
//! order of the signers' addresses, as `MessageTransmitterV2` checks them. The keys come from
//! `PAYRAIL_CCTP_ATTESTER_KEYS` (comma-separated 32-byte hex) only, never the command line, and
//! are never printed; only their addresses are.
//!
//! The fee quote of a route from a configured domain to another configured domain is the
//! configuration's, asked of no node: `[{"finalityThreshold": 1000, "minimumFee": FAST_FEE_BPS},
//! {"finalityThreshold": 2000, "minimumFee": 0}]`, the fees in basis points of the amount (1 is
//! 0.01 %), the fast one the very fee charged at 1000 above. Circle answers per route; a source
//! domain without fast confirmations has no Fast Transfer, so its routes are quoted the 2000 entry
//! only. A domain not configured is no route's end here, whether Circle knows it or not.
//!
//! Answers: 200 `{"messages": [...]}` or the quote; 400 for a domain that is not decimal digits
//! below 2³², a domain not configured, a route from a domain to itself, a malformed hash, or a
//! missing, repeated or unknown query parameter (the quote takes none); 404 for any other path;
//! 405 for another method on either path; 431 for a request head over [`MAX_HEAD`] bytes; 503
//! naming the node's problem when a node is unreachable or answers garbage. Every answer is JSON.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use payrail_evm::cctp::{self, BurnBody, Message, FINALIZED_THRESHOLD, U256};
use payrail_evm::k256::ecdsa::{RecoveryId, SigningKey};
use serde_json::{json, Value};
use sha3::{Digest, Keccak256};
use zeroize::Zeroizing;

/// The environment variable the attesters' private keys come from.
pub const KEYS_VARIABLE: &str = "PAYRAIL_CCTP_ATTESTER_KEYS";
/// The fast fee, in basis points of the amount, unless `--fast-fee-bps` says otherwise.
pub const DEFAULT_FAST_FEE_BPS: u32 = 1;
/// The most bytes a request's line and headers may take together.
pub const MAX_HEAD: usize = 8 * 1024;
/// Iris's answer while it has no attestation to give (HTTP 404).
pub const NOT_FOUND: &str = "Message hash not found";
/// The finality threshold of a fast transfer, and the most a message may ask for to get one.
const FAST_THRESHOLD: u32 = 1000;
/// Basis points in a whole.
const BPS: u32 = 10_000;
/// Connections served at once; more are answered 503 at once.
const MAX_CONNECTIONS: usize = 64;
/// How long a client may take to send its request, and to take the answer.
const CLIENT_DEADLINE: Duration = Duration::from_secs(10);
/// How long a node may take to answer one call.
const NODE_DEADLINE: Duration = Duration::from_secs(10);
/// The most bytes of a node's answer read.
const MAX_NODE_ANSWER: u64 = 8 * 1024 * 1024;

/// The command's usage.
pub const USAGE: &str = "usage: xtask attestation --listen 127.0.0.1:PORT \
     --chain DOMAIN=RPC_URL,CONFIRMATIONS[,FAST_CONFIRMATIONS]… --transmitter DOMAIN=0xADDRESS… \
     [--fast-fee-bps N] (the attesters' private keys, comma-separated hex, in \
     PAYRAIL_CCTP_ATTESTER_KEYS; serves GET /v2/messages/DOMAIN?transactionHash=0x… and \
     GET /v2/burn/USDC/fees/SOURCE_DOMAIN/DESTINATION_DOMAIN until stopped)";

/// One source chain: the CCTP domain it plays and where to read it.
#[derive(Clone)]
pub struct Chain {
    /// The CCTP domain it plays (7 for Polygon PoS, 6 for Base, …).
    pub domain: u32,
    /// Its node's JSON-RPC URL (never printed: providers put keys in them).
    pub rpc_url: String,
    /// The confirmations a standard transfer waits for.
    pub confirmations: u64,
    /// The confirmations a fast transfer waits for, if it has fast transfers at all.
    pub fast_confirmations: Option<u64>,
    /// Its message transmitter: only its `MessageSent` logs count.
    pub transmitter: [u8; 20],
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field("domain", &self.domain)
            .field("confirmations", &self.confirmations)
            .field("fast_confirmations", &self.fast_confirmations)
            .field("transmitter", &hex0x(&self.transmitter))
            .finish_non_exhaustive()
    }
}

/// One attester: its key (wiped when dropped) and its address.
pub struct Attester {
    key: SigningKey,
    address: [u8; 20],
}

impl std::fmt::Debug for Attester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Attester({})", hex0x(&self.address))
    }
}

/// What the service serves.
#[derive(Debug)]
pub struct Config {
    /// The source chains, by ascending domain, each domain once.
    pub chains: Vec<Chain>,
    /// The attesters, by ascending address.
    attesters: Vec<Attester>,
    /// The fast fee in basis points of the amount (0 to 10 000).
    pub fast_fee_bps: u32,
    /// Whether each request is logged to stderr (the command does; the tests need not).
    pub log_requests: bool,
}

impl Config {
    /// A configuration of these chains, attested by the keys in `keys` (comma-separated 32-byte
    /// hex, as [`KEYS_VARIABLE`] holds them), with this fast fee. Errors never echo a key.
    pub fn new(mut chains: Vec<Chain>, keys: &str, fast_fee_bps: u32) -> Result<Config, String> {
        if chains.is_empty() {
            return Err("name at least one --chain".to_owned());
        }
        chains.sort_by_key(|c| c.domain);
        if let Some(pair) = chains.windows(2).find(|p| p[0].domain == p[1].domain) {
            return Err(format!("domain {} is named twice", pair[0].domain));
        }
        for chain in &chains {
            check_chain(chain)?;
        }
        if fast_fee_bps > BPS {
            return Err(format!(
                "--fast-fee-bps {fast_fee_bps}: at most {BPS} basis points"
            ));
        }
        Ok(Config {
            chains,
            attesters: attesters(keys)?,
            fast_fee_bps,
            log_requests: false,
        })
    }

    /// The attesters' addresses, ascending: the signers of every attestation, in order.
    pub fn attester_addresses(&self) -> Vec<[u8; 20]> {
        self.attesters.iter().map(|a| a.address).collect()
    }
}

fn check_chain(chain: &Chain) -> Result<(), String> {
    let domain = chain.domain;
    match cctp::domain(domain) {
        Some(d) if d.evm => {}
        Some(d) => {
            return Err(format!(
                "domain {domain} is {}, not an EVM network: only EVM chains are read here",
                d.name
            ))
        }
        None => return Err(format!("domain {domain} is not a known CCTP V2 domain")),
    }
    if !(chain.rpc_url.starts_with("http://") || chain.rpc_url.starts_with("https://")) {
        return Err(format!(
            "domain {domain}: the node's URL must be http:// or https://"
        ));
    }
    let most = payrail_evm::chains::MAX_CONFIRMATIONS;
    if !(1..=most).contains(&chain.confirmations) {
        return Err(format!(
            "domain {domain}: CONFIRMATIONS must be from 1 to {most}"
        ));
    }
    if let Some(fast) = chain.fast_confirmations {
        if !(1..=chain.confirmations).contains(&fast) {
            return Err(format!(
                "domain {domain}: FAST_CONFIRMATIONS must be from 1 to CONFIRMATIONS ({})",
                chain.confirmations
            ));
        }
    }
    Ok(())
}

/// The attesters of the comma-separated keys, by ascending address: at least one, each once.
fn attesters(keys: &str) -> Result<Vec<Attester>, String> {
    let mut attesters = Vec::new();
    for (i, text) in keys.split(',').enumerate() {
        let text = text.trim();
        let hex_digits = text.strip_prefix("0x").unwrap_or(text);
        let bytes = Zeroizing::new(hex::decode(hex_digits).unwrap_or_default());
        if bytes.len() != 32 {
            return Err(format!(
                "{KEYS_VARIABLE}: key {} is not 32 bytes of hex",
                i + 1
            ));
        }
        let key = SigningKey::from_slice(&bytes).map_err(|_| {
            format!(
                "{KEYS_VARIABLE}: key {} is not a secp256k1 private key",
                i + 1
            )
        })?;
        let address = payrail_evm::address_bytes(&payrail_evm::address_of(key.verifying_key()))
            .ok_or_else(|| format!("{KEYS_VARIABLE}: key {} has no address", i + 1))?;
        attesters.push(Attester { key, address });
    }
    attesters.sort_by_key(|a| a.address);
    if let Some(pair) = attesters.windows(2).find(|p| p[0].address == p[1].address) {
        return Err(format!(
            "{KEYS_VARIABLE}: the key of {} is given twice",
            hex0x(&pair[0].address)
        ));
    }
    if attesters.len() > cctp::MAX_SIGNATURES {
        return Err(format!(
            "{KEYS_VARIABLE}: at most {} attesters",
            cctp::MAX_SIGNATURES
        ));
    }
    Ok(attesters)
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    /// Print the usage.
    Help,
    /// Serve `config` on `listen`.
    Serve {
        /// The address to listen on.
        listen: String,
        /// What to serve.
        config: Config,
    },
}

/// Reads the command line (after `attestation`) and the attesters' keys (the value of
/// [`KEYS_VARIABLE`], if set).
pub fn parse(args: &[String], keys: Option<&str>) -> Result<Command, String> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        return Ok(Command::Help);
    }
    let mut listen = None;
    let mut chains: Vec<(u32, String, u64, Option<u64>)> = Vec::new();
    let mut transmitters: Vec<(u32, [u8; 20])> = Vec::new();
    let mut fast_fee_bps = None;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let mut value = || {
            rest.next()
                .filter(|v| !v.starts_with("--"))
                .ok_or_else(|| format!("{flag} needs a value; {USAGE}"))
        };
        match flag.as_str() {
            "--listen" if listen.is_none() => listen = Some(value()?.clone()),
            "--chain" => chains.push(chain_spec(value()?)?),
            "--transmitter" => transmitters.push(transmitter_spec(value()?)?),
            "--fast-fee-bps" if fast_fee_bps.is_none() => {
                let v = value()?;
                fast_fee_bps = Some(v.parse::<u32>().map_err(|_| {
                    format!("--fast-fee-bps {v:?}: a whole number of basis points")
                })?);
            }
            "--listen" | "--fast-fee-bps" => return Err(format!("{flag} is given twice")),
            other => return Err(format!("unknown argument {other:?}; {USAGE}")),
        }
    }
    let listen = listen.ok_or_else(|| format!("--listen is required; {USAGE}"))?;
    let mut configured = Vec::with_capacity(chains.len());
    for (domain, rpc_url, confirmations, fast_confirmations) in chains {
        let mut named = transmitters.iter().filter(|(d, _)| *d == domain);
        let transmitter = match (named.next(), named.next()) {
            (Some((_, address)), None) => *address,
            (None, _) => return Err(format!("domain {domain} needs --transmitter {domain}=0x…")),
            (Some(_), Some(_)) => {
                return Err(format!("domain {domain} has more than one --transmitter"))
            }
        };
        configured.push(Chain {
            domain,
            rpc_url,
            confirmations,
            fast_confirmations,
            transmitter,
        });
    }
    if let Some((domain, _)) = transmitters
        .iter()
        .find(|(d, _)| !configured.iter().any(|c| c.domain == *d))
    {
        return Err(format!(
            "--transmitter {domain}=…: no --chain {domain}=… to go with it"
        ));
    }
    let keys = keys
        .filter(|k| !k.trim().is_empty())
        .ok_or_else(|| format!("{KEYS_VARIABLE}: the attesters' private keys are required"))?;
    let config = Config::new(
        configured,
        keys,
        fast_fee_bps.unwrap_or(DEFAULT_FAST_FEE_BPS),
    )?;
    Ok(Command::Serve { listen, config })
}

/// `DOMAIN=RPC_URL,CONFIRMATIONS[,FAST_CONFIRMATIONS]`.
fn chain_spec(spec: &str) -> Result<(u32, String, u64, Option<u64>), String> {
    let form = "--chain DOMAIN=RPC_URL,CONFIRMATIONS[,FAST_CONFIRMATIONS]";
    let (domain, rest) = spec
        .split_once('=')
        .ok_or_else(|| format!("{form}: no '=' after the domain"))?;
    let domain = domain_number(domain)
        .ok_or_else(|| format!("{form}: {domain:?} is not a domain number"))?;
    let parts: Vec<&str> = rest.split(',').map(str::trim).collect();
    let number = |text: &str, what: &str| {
        text.parse::<u64>()
            .map_err(|_| format!("{form}: domain {domain}'s {what} {text:?} is not a number"))
    };
    match parts.as_slice() {
        [url, confirmations] => Ok((
            domain,
            (*url).to_owned(),
            number(confirmations, "CONFIRMATIONS")?,
            None,
        )),
        [url, confirmations, fast] => Ok((
            domain,
            (*url).to_owned(),
            number(confirmations, "CONFIRMATIONS")?,
            Some(number(fast, "FAST_CONFIRMATIONS")?),
        )),
        _ => Err(format!(
            "{form}: domain {domain} needs its node's URL and its confirmations"
        )),
    }
}

/// `DOMAIN=0xADDRESS`.
fn transmitter_spec(spec: &str) -> Result<(u32, [u8; 20]), String> {
    let form = "--transmitter DOMAIN=0xADDRESS";
    let (domain, address) = spec
        .split_once('=')
        .ok_or_else(|| format!("{form}: no '=' after the domain"))?;
    let domain = domain_number(domain)
        .ok_or_else(|| format!("{form}: {domain:?} is not a domain number"))?;
    let address = address.trim();
    let bytes = address
        .strip_prefix("0x")
        .filter(|h| h.len() == 40)
        .and_then(|_| payrail_evm::address_bytes(address))
        .ok_or_else(|| format!("{form}: {address:?} is not 0x and 40 hex digits"))?;
    Ok((domain, bytes))
}

/// A domain number: decimal digits only.
fn domain_number(text: &str) -> Option<u32> {
    let text = text.trim();
    if text.is_empty() || text.len() > 10 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

// ---------------------------------------------------------------------------------------------
// The command

/// `xtask attestation`: parses, prints what it serves (the attesters' addresses, never their
/// keys) and serves until the process is stopped.
pub fn run(args: &[String], keys: Option<Zeroizing<String>>) -> Result<(), String> {
    let (listen, mut config) = match parse(args, keys.as_deref().map(String::as_str))? {
        Command::Help => {
            println!("{USAGE}");
            return Ok(());
        }
        Command::Serve { listen, config } => (listen, config),
    };
    drop(keys);
    config.log_requests = true;
    let listener = TcpListener::bind(&listen).map_err(|e| format!("--listen {listen}: {e}"))?;
    let addresses: Vec<String> = config
        .attester_addresses()
        .iter()
        .map(|a| hex0x(a))
        .collect();
    let mut lines = Vec::new();
    for chain in &config.chains {
        let node = Node::new(chain)?;
        let reached = match node.call("eth_chainId", json!([])) {
            Ok(id) => format!("node answers, chain id {}", id.as_str().unwrap_or("?")),
            Err(problem) => format!("{problem} (answers 503 until it is back)"),
        };
        lines.push(format!(
            "  domain {} ({}): standard at {} confirmations, {}; transmitter {}; {reached}",
            chain.domain,
            cctp::domain(chain.domain).map_or("?", |d| d.name),
            chain.confirmations,
            chain
                .fast_confirmations
                .map_or("no fast transfers".to_owned(), |f| format!("fast at {f}")),
            hex0x(&chain.transmitter),
        ));
    }
    let fee = config.fast_fee_bps;
    let server = serve(config, listener)?;
    println!(
        "attestation service on {}: GET /v2/messages/DOMAIN?transactionHash=0x…, \
         GET /v2/burn/USDC/fees/SOURCE_DOMAIN/DESTINATION_DOMAIN",
        server.url()
    );
    println!(
        "  attesters (ascending): {}; fast fee {fee} bps",
        addresses.join(", ")
    );
    for line in lines {
        println!("{line}");
    }
    server.wait();
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The server

/// A running service; stops serving when dropped.
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<address>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves until the process ends.
    pub fn wait(mut self) {
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees it is to stop.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Serves `config` on `listener`: a thread accepts, and each connection (one request, then
/// closed) gets a thread of its own, at most [`MAX_CONNECTIONS`] at once.
pub fn serve(config: Config, listener: TcpListener) -> Result<Server, String> {
    let addr = listener
        .local_addr()
        .map_err(|e| format!("the listener's address: {e}"))?;
    let nodes = config
        .chains
        .iter()
        .map(Node::new)
        .collect::<Result<Vec<Node>, String>>()?;
    let service = Arc::new(Service { config, nodes });
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = Arc::clone(&stop);
    let accept = std::thread::Builder::new()
        .name("attestation".to_owned())
        .spawn(move || accept_loop(&listener, &service, &stopping))
        .map_err(|e| format!("start the service's thread: {e}"))?;
    Ok(Server {
        addr,
        stop,
        accept: Some(accept),
    })
}

fn accept_loop(listener: &TcpListener, service: &Arc<Service>, stop: &AtomicBool) {
    let active = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else {
            // Out of descriptors, or a connection reset before it was taken: not a reason to
            // stop, nor to spin.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let busy = Reply::error(503, "the attestation service is busy; try again");
            finish(stream, &busy);
            continue;
        }
        let (service, done) = (Arc::clone(service), Arc::clone(&active));
        let spawned = std::thread::Builder::new()
            .name("attestation-request".to_owned())
            .spawn(move || {
                handle(stream, &service);
                done.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            // No thread to be had: the connection is dropped unanswered (its stream went with
            // the closure), and the service lets the system breathe.
            active.fetch_sub(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// An answer: a status and a JSON body.
#[derive(Debug, Clone, PartialEq)]
struct Reply {
    status: u16,
    body: Value,
}

impl Reply {
    fn error(status: u16, message: impl Into<String>) -> Reply {
        Reply {
            status,
            body: json!({ "error": message.into() }),
        }
    }

    fn not_found() -> Reply {
        Reply::error(404, NOT_FOUND)
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

/// Why a request's head could not be read.
enum HeadError {
    /// The client went away (or sent nothing in time): nothing to answer.
    Gone,
    /// Over [`MAX_HEAD`] bytes without its end.
    TooLarge,
    /// The client stopped sending midway.
    Slow,
}

/// The request line and headers, up to their blank line.
fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, HeadError> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 2048];
    loop {
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            if end > MAX_HEAD {
                return Err(HeadError::TooLarge);
            }
            head.truncate(end);
            return Ok(head);
        }
        // Its end may still come in the next 3 bytes; past them, it is too large already.
        if head.len() > MAX_HEAD + 3 {
            return Err(HeadError::TooLarge);
        }
        match stream.read(&mut buf) {
            Ok(0) => return Err(HeadError::Gone),
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) if head.is_empty() => return Err(HeadError::Gone),
            Err(_) => return Err(HeadError::Slow),
        }
    }
}

fn handle(mut stream: TcpStream, service: &Service) {
    let _ = stream.set_read_timeout(Some(CLIENT_DEADLINE));
    let _ = stream.set_write_timeout(Some(CLIENT_DEADLINE));
    let (reply, line) = match read_head(&mut stream) {
        Ok(head) => {
            let head = String::from_utf8_lossy(&head);
            let line = head.lines().next().unwrap_or_default().to_owned();
            (service.answer(&line), line)
        }
        Err(HeadError::Gone) => return,
        Err(HeadError::Slow) => (
            Reply::error(408, "the request did not arrive in time"),
            String::new(),
        ),
        Err(HeadError::TooLarge) => (
            Reply::error(
                431,
                format!("the request's line and headers are over {MAX_HEAD} bytes"),
            ),
            String::new(),
        ),
    };
    if service.config.log_requests {
        let shown: String = line.chars().take(200).collect();
        eprintln!("attestation: {shown} -> {}", reply.status);
    }
    finish(stream, &reply);
}

/// Writes the answer and closes the connection, reading a little of what the client may still
/// send first, so that closing with unread input does not reset the answer away.
fn finish(mut stream: TcpStream, reply: &Reply) {
    let body = reply.body.to_string();
    let allow = if reply.status == 405 {
        "Allow: GET\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\n{allow}Connection: close\r\n\r\n",
        reply.status,
        reason(reply.status),
        body.len()
    );
    if stream.write_all(head.as_bytes()).is_err() || stream.write_all(body.as_bytes()).is_err() {
        return;
    }
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut drained = 0usize;
    let mut buf = [0u8; 4096];
    while drained < 64 * 1024 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// The answer to a path not served.
const NO_SUCH_RESOURCE: &str =
    "no such resource: GET /v2/messages/{sourceDomain}?transactionHash=0x… \
     and GET /v2/burn/USDC/fees/{sourceDomainId}/{destDomainId} are served here";

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    /// The attested messages of a transaction.
    Messages(Lookup),
    /// The fee quote of the route from `source` to `destination`.
    Fees { source: u32, destination: u32 },
}

/// A lookup the request asks for: the source domain and the transaction hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lookup {
    domain: u32,
    hash: [u8; 32],
}

/// A path served, with its domains as the path spells them.
enum Resource<'a> {
    /// `/v2/messages/{sourceDomain}`.
    Messages(&'a str),
    /// `/v2/burn/USDC/fees/{sourceDomainId}/{destDomainId}`.
    Fees(&'a str, &'a str),
}

/// The resource a path names, if it is one served: each domain one non-empty segment.
fn resource(path: &str) -> Option<Resource<'_>> {
    let segment = |text: &&str| !text.is_empty() && !text.contains('/');
    if let Some(domain) = path.strip_prefix("/v2/messages/") {
        return Some(domain).filter(segment).map(Resource::Messages);
    }
    let (source, destination) = path.strip_prefix("/v2/burn/USDC/fees/")?.split_once('/')?;
    (segment(&source) && segment(&destination)).then_some(Resource::Fees(source, destination))
}

/// What a request line asks for, or the answer refusing it. Checks nothing about the domains but
/// their form.
fn parse_request(line: &str) -> Result<Request, Reply> {
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Reply::error(
            400,
            "the request line is not METHOD TARGET HTTP/1.x",
        ));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(Reply::error(400, "only HTTP/1.x is served here"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let resource = resource(path).ok_or_else(|| Reply::error(404, NO_SUCH_RESOURCE))?;
    if method != "GET" {
        return Err(Reply::error(
            405,
            format!("{method} is not allowed: only GET is"),
        ));
    }
    let domain = |text: &str, role: &str| {
        domain_number(text).ok_or_else(|| {
            Reply::error(
                400,
                format!("the {role} domain {:?} is not a domain number", shown(text)),
            )
        })
    };
    let mut parameters = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")));
    match resource {
        Resource::Messages(source) => {
            let domain = domain(source, "source")?;
            let hash = transaction_hash(parameters)?;
            Ok(Request::Messages(Lookup { domain, hash }))
        }
        Resource::Fees(source, destination) => {
            let source = domain(source, "source")?;
            let destination = domain(destination, "destination")?;
            match parameters.next() {
                Some((name, _)) => Err(Reply::error(
                    400,
                    format!(
                        "unknown query parameter {:?}: the fee quote takes none",
                        shown(name)
                    ),
                )),
                None => Ok(Request::Fees {
                    source,
                    destination,
                }),
            }
        }
    }
}

/// The transaction hash a lookup's query parameters (name, value) give, or the answer refusing
/// them.
fn transaction_hash<'a>(
    parameters: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<[u8; 32], Reply> {
    let mut hash = None;
    for (name, value) in parameters {
        match name {
            "transactionHash" if hash.is_none() => hash = Some(value),
            "transactionHash" => {
                return Err(Reply::error(400, "transactionHash is given more than once"))
            }
            "nonce" => {
                return Err(Reply::error(
                    400,
                    "only lookups by transactionHash are served here, not by nonce",
                ))
            }
            other => {
                return Err(Reply::error(
                    400,
                    format!("unknown query parameter {:?}", shown(other)),
                ))
            }
        }
    }
    let hash =
        hash.ok_or_else(|| Reply::error(400, "the query parameter transactionHash is required"))?;
    hash.strip_prefix("0x")
        .filter(|h| h.len() == 64)
        .and_then(|h| hex::decode(h).ok())
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .ok_or_else(|| {
            Reply::error(
                400,
                format!(
                    "transactionHash {:?} is not 0x and 64 hex digits",
                    shown(hash)
                ),
            )
        })
}

/// A client's text as an answer quotes it: its first 80 characters.
fn shown(text: &str) -> String {
    text.chars().take(80).collect()
}

/// The service's state, shared by the connections.
struct Service {
    config: Config,
    /// The chains' nodes, in the order of `config.chains`.
    nodes: Vec<Node>,
}

/// Why a lookup has no answer of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    /// A node is unreachable or answers garbage (503).
    Node(String),
    /// Signing failed (500): never expected.
    Internal(String),
}

impl Service {
    fn answer(&self, request_line: &str) -> Reply {
        let answered = match parse_request(request_line) {
            Ok(Request::Messages(lookup)) => self.lookup(&lookup),
            Ok(Request::Fees {
                source,
                destination,
            }) => self.fees(source, destination),
            Err(reply) => Err(reply),
        };
        match answered {
            Ok(body) => Reply { status: 200, body },
            Err(reply) => reply,
        }
    }

    /// The index in `config.chains` of the chain of `domain` (the route's `role` end), or the
    /// answer refusing a domain not served.
    fn served(&self, domain: u32, role: &str) -> Result<usize, Reply> {
        let chains = &self.config.chains;
        chains
            .iter()
            .position(|c| c.domain == domain)
            .ok_or_else(|| {
                let served: Vec<String> = chains.iter().map(|c| c.domain.to_string()).collect();
                Reply::error(
                    400,
                    format!(
                        "the {role} domain {domain} is not served here (served: {})",
                        served.join(", ")
                    ),
                )
            })
    }

    /// The answer to a lookup: `{"messages": [...]}`, or any other answer.
    fn lookup(&self, lookup: &Lookup) -> Result<Value, Reply> {
        let index = self.served(lookup.domain, "source")?;
        match self.messages(index, &lookup.hash) {
            Ok(Some(messages)) => Ok(json!({ "messages": messages })),
            Ok(None) => Err(Reply::not_found()),
            Err(Failure::Node(problem)) => Err(Reply::error(503, problem)),
            Err(Failure::Internal(problem)) => Err(Reply::error(500, problem)),
        }
    }

    /// The fee quote of the route from `source` to `destination`, in basis points by finality
    /// threshold: the fast fee at 1000 if the source chain has fast transfers, nothing at 2000.
    fn fees(&self, source: u32, destination: u32) -> Result<Value, Reply> {
        let chain = &self.config.chains[self.served(source, "source")?];
        self.served(destination, "destination")?;
        if source == destination {
            return Err(Reply::error(
                400,
                format!(
                    "the destination domain {destination} is the source domain: a route goes \
                     from one domain to another"
                ),
            ));
        }
        let fast = chain.fast_confirmations.map(|_| {
            json!({"finalityThreshold": FAST_THRESHOLD, "minimumFee": self.config.fast_fee_bps})
        });
        let standard = json!({"finalityThreshold": FINALIZED_THRESHOLD, "minimumFee": 0});
        Ok(Value::Array(fast.into_iter().chain([standard]).collect()))
    }

    /// The attested messages of a transaction on chain `index`, or `None` while there is none
    /// to give.
    fn messages(&self, index: usize, hash: &[u8; 32]) -> Result<Option<Vec<Value>>, Failure> {
        let chain = &self.config.chains[index];
        let node = &self.nodes[index];
        let receipt = node
            .call("eth_getTransactionReceipt", json!([hex0x(hash)]))
            .map_err(Failure::Node)?;
        if receipt.is_null() {
            return Ok(None);
        }
        let unreadable = |what: &str| {
            Failure::Node(format!(
                "the node of domain {} answered a receipt without a readable {what}",
                chain.domain
            ))
        };
        if !receipt.is_object() {
            return Err(unreadable("body"));
        }
        // A receipt of a transaction not yet in a block (some nodes answer one).
        if receipt["blockNumber"].is_null() {
            return Ok(None);
        }
        let block = quantity(&receipt["blockNumber"]).ok_or_else(|| unreadable("blockNumber"))?;
        let sent = message_sent_logs(&receipt, chain).map_err(|what| unreadable(&what))?;
        if sent.is_empty() {
            return Ok(None);
        }
        let head = node
            .call("eth_blockNumber", json!([]))
            .map_err(Failure::Node)?;
        let head = quantity(&head).ok_or_else(|| {
            Failure::Node(format!(
                "the node of domain {} answered a block number that is not one",
                chain.domain
            ))
        })?;
        let confirmations = (head + 1).saturating_sub(block);
        let mut out = Vec::with_capacity(sent.len());
        for (log_index, message) in sent {
            let Some(executed) = executed_threshold(chain, confirmations, &message) else {
                // The transaction is answered whole or not at all.
                return Ok(None);
            };
            let nonce = nonce(chain.domain, hash, log_index);
            let attested = fill(message, nonce, executed, self.config.fast_fee_bps);
            let attestation =
                attest(&self.config.attesters, &attested.encode()).map_err(Failure::Internal)?;
            out.push(entry(&attested, &attestation));
        }
        Ok(Some(out))
    }
}

/// The finality a message is attested at with `confirmations` on its chain, or `None` while it
/// is not yet attestable.
fn executed_threshold(chain: &Chain, confirmations: u64, message: &Message) -> Option<u32> {
    if confirmations >= chain.confirmations {
        Some(FINALIZED_THRESHOLD)
    } else if message.min_finality_threshold <= FAST_THRESHOLD
        && chain
            .fast_confirmations
            .is_some_and(|fast| confirmations >= fast)
    {
        Some(FAST_THRESHOLD)
    } else {
        None
    }
}

/// The `MessageSent` messages of the chain's transmitter in a receipt, with their log indices,
/// in log order. A log of the transmitter with that topic that is not an ABI-encoded V2 message
/// from this domain is left out (and said on stderr); a receipt whose logs cannot be read at all
/// is an error naming what was unreadable.
fn message_sent_logs(receipt: &Value, chain: &Chain) -> Result<Vec<(u64, Message)>, String> {
    let logs = match &receipt["logs"] {
        Value::Array(logs) => logs,
        Value::Null => return Ok(Vec::new()),
        _ => return Err("logs".to_owned()),
    };
    let mut out = Vec::new();
    for log in logs {
        let address = log["address"]
            .as_str()
            .and_then(payrail_evm::address_bytes)
            .ok_or("log address")?;
        let topic = log["topics"]
            .as_array()
            .ok_or("log topics")?
            .first()
            .and_then(Value::as_str);
        if address != chain.transmitter
            || !topic.is_some_and(|t| t.eq_ignore_ascii_case(cctp::MESSAGE_SENT_TOPIC))
            || log["removed"] == json!(true)
        {
            continue;
        }
        let log_index = quantity(&log["logIndex"]).ok_or("logIndex")?;
        let data = log["data"]
            .as_str()
            .and_then(|d| d.strip_prefix("0x"))
            .and_then(|d| hex::decode(d).ok())
            .ok_or("log data")?;
        let message = abi_bytes(&data)
            .ok_or("not ABI-encoded bytes")
            .and_then(|raw| Message::decode(raw).map_err(|_| "not a CCTP V2 message"))
            .and_then(|m| {
                if m.source_domain == chain.domain {
                    Ok(m)
                } else {
                    Err("from another source domain")
                }
            });
        match message {
            Ok(message) => out.push((log_index, message)),
            Err(why) => eprintln!(
                "attestation: domain {}: a MessageSent log (index {log_index}) of the \
                 transmitter is {why}; left out",
                chain.domain
            ),
        }
    }
    out.sort_by_key(|(index, _)| *index);
    Ok(out)
}

/// The contents of a lone ABI-encoded `bytes` (an event's only, non-indexed argument): its
/// offset (32), its length, then it padded with zeros to whole words; `None` for anything else.
fn abi_bytes(data: &[u8]) -> Option<&[u8]> {
    let word = |at: usize| -> Option<usize> {
        let w = data.get(at..at + 32)?;
        if w[..24].iter().any(|b| *b != 0) {
            return None;
        }
        usize::try_from(u64::from_be_bytes(w[24..].try_into().ok()?)).ok()
    };
    if word(0)? != 32 {
        return None;
    }
    let len = word(32)?;
    if len > cctp::MAX_MESSAGE_LEN || data.len() != 64 + len.div_ceil(32) * 32 {
        return None;
    }
    let (bytes, padding) = data[64..].split_at(len);
    padding.iter().all(|b| *b == 0).then_some(bytes)
}

/// The nonce this service gives the message of log `log_index` of transaction `hash` on
/// `domain`: `keccak256(domain (4 bytes, big-endian) ‖ hash ‖ log_index (8 bytes, big-endian))`.
pub fn nonce(domain: u32, hash: &[u8; 32], log_index: u64) -> [u8; 32] {
    let mut hasher = Keccak256::new();
    hasher.update(domain.to_be_bytes());
    hasher.update(hash);
    hasher.update(log_index.to_be_bytes());
    hasher.finalize().into()
}

/// The fast fee of a burn of `amount` that accepts at most `max_fee`:
/// `ceil(amount × bps / 10 000)`, at most `max_fee`.
pub fn fast_fee(amount: U256, max_fee: U256, bps: u32) -> U256 {
    let bps = bps.min(BPS);
    // amount = q × 10 000 + r, so ceil(amount × bps / 10 000) = q × bps + ceil(r × bps / 10 000),
    // and q × bps ≤ amount: nothing overflows.
    let (quotient, remainder) = div_small(amount, BPS);
    let whole = mul_small(quotient, bps);
    let part = (u64::from(remainder) * u64::from(bps)).div_ceil(u64::from(BPS));
    add_small(whole, part).min(max_fee)
}

fn div_small(value: U256, divisor: u32) -> (U256, u32) {
    let mut out = [0u8; 32];
    let mut remainder = 0u64;
    for (digit, byte) in out.iter_mut().zip(value.0) {
        let current = remainder * 256 + u64::from(byte);
        *digit = (current / u64::from(divisor)) as u8;
        remainder = current % u64::from(divisor);
    }
    (U256(out), remainder as u32)
}

/// `value × factor`, or [`U256::MAX`] when it overflows.
fn mul_small(value: U256, factor: u32) -> U256 {
    let mut out = [0u8; 32];
    let mut carry = 0u64;
    for (digit, byte) in out.iter_mut().zip(value.0).rev() {
        let current = u64::from(byte) * u64::from(factor) + carry;
        *digit = current as u8;
        carry = current >> 8;
    }
    if carry == 0 {
        U256(out)
    } else {
        U256::MAX
    }
}

/// `value + addend`, or [`U256::MAX`] when it overflows.
fn add_small(value: U256, addend: u64) -> U256 {
    let mut out = value.0;
    let mut carry = u128::from(addend);
    for digit in out.iter_mut().rev() {
        if carry == 0 {
            break;
        }
        let current = u128::from(*digit) + (carry & 0xff);
        *digit = current as u8;
        carry = (carry >> 8) + (current >> 8);
    }
    if carry == 0 {
        U256(out)
    } else {
        U256::MAX
    }
}

/// The message as attested: its nonce and executed finality filled in, and, in a burn message,
/// the fee charged (see the module's documentation).
fn fill(mut message: Message, nonce: [u8; 32], executed: u32, fast_fee_bps: u32) -> Message {
    message.nonce = nonce;
    message.finality_threshold_executed = executed;
    if let Ok(mut body) = BurnBody::decode(&message.message_body) {
        body.fee_executed = if executed < FINALIZED_THRESHOLD {
            fast_fee(body.amount, body.max_fee, fast_fee_bps)
        } else {
            U256::ZERO
        };
        message.message_body = body.encode();
    }
    message
}

/// Every attester's signature of `keccak256(message)`, in the attesters' (ascending) order.
fn attest(attesters: &[Attester], message: &[u8]) -> Result<Vec<u8>, String> {
    let digest = cctp::message_hash(message);
    let mut out = Vec::with_capacity(attesters.len() * cctp::SIGNATURE_LEN);
    for attester in attesters {
        let (signature, recovery) = attester
            .key
            .sign_prehash_recoverable(&digest)
            .map_err(|_| format!("{} could not sign", hex0x(&attester.address)))?;
        // k256 already gives the low s; the other half would be refused on chain.
        let (signature, recovery) = match signature.normalize_s() {
            Some(low) => (
                low,
                RecoveryId::new(!recovery.is_y_odd(), recovery.is_x_reduced()),
            ),
            None => (signature, recovery),
        };
        out.extend_from_slice(&signature.to_bytes());
        out.push(27 + u8::from(recovery.is_y_odd()));
    }
    Ok(out)
}

/// One entry of the answer's `messages`, in Iris's V2 shape.
fn entry(message: &Message, attestation: &[u8]) -> Value {
    let source = message.source_domain;
    let destination = message.destination_domain;
    let body = BurnBody::decode(&message.message_body).ok().map(|body| {
        json!({
            "burnToken": word(source, &body.burn_token),
            "mintRecipient": word(destination, &body.mint_recipient),
            "amount": body.amount.to_string(),
            "messageSender": word(source, &body.message_sender),
            "maxFee": body.max_fee.to_string(),
            "feeExecuted": body.fee_executed.to_string(),
            "expirationBlock": body.expiration_block.to_string(),
            "hookData": if body.hook_data.is_empty() {
                String::new()
            } else {
                hex0x(&body.hook_data)
            },
        })
    });
    json!({
        "message": hex0x(&message.encode()),
        "eventNonce": hex0x(&message.nonce),
        "attestation": hex0x(attestation),
        "decodedMessage": {
            "sourceDomain": source.to_string(),
            "destinationDomain": destination.to_string(),
            "nonce": hex0x(&message.nonce),
            "sender": word(source, &message.sender),
            "recipient": word(destination, &message.recipient),
            "destinationCaller": word(destination, &message.destination_caller),
            "minFinalityThreshold": message.min_finality_threshold.to_string(),
            "finalityThresholdExecuted": message.finality_threshold_executed.to_string(),
            "messageBody": hex0x(&message.message_body),
            "decodedMessageBody": body,
        },
        "cctpVersion": 2,
        "status": "complete",
        "delayReason": null,
    })
}

/// A message's 32-byte word as its domain reads it: an EVM domain's address (`0x` and 40 hex
/// digits) when it is one, else the whole word.
fn word(domain: u32, word: &[u8; 32]) -> String {
    match cctp::bytes32_to_address(word) {
        Some(address) if cctp::domain(domain).is_some_and(|d| d.evm) => hex0x(&address),
        _ => hex0x(word),
    }
}

fn hex0x(bytes: &[u8]) -> String {
    format!("0x{}", hex::encode(bytes))
}

/// A JSON-RPC quantity (`0x` hex) as a number.
fn quantity(value: &Value) -> Option<u64> {
    let digits = value.as_str()?.strip_prefix("0x")?;
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

// ---------------------------------------------------------------------------------------------
// The nodes

/// A chain's node, over JSON-RPC. Its errors never name its URL.
struct Node {
    agent: ureq::Agent,
    url: String,
    domain: u32,
}

impl Node {
    fn new(chain: &Chain) -> Result<Node, String> {
        Ok(Node {
            agent: crate::reconcile::node_agent(
                &format!("the node of domain {}", chain.domain),
                NODE_DEADLINE,
            )?,
            url: chain.rpc_url.clone(),
            domain: chain.domain,
        })
    }

    /// The result of one call (`null` included); an error sentence for anything else.
    fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        let domain = self.domain;
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let response = self
            .agent
            .post(&self.url)
            .send_json(request)
            .map_err(|e| match e {
                ureq::Error::Status(status, _) => {
                    format!("the node of domain {domain} answered {method} with HTTP {status}")
                }
                ureq::Error::Transport(t) => {
                    format!(
                        "the node of domain {domain} is unreachable ({:?})",
                        t.kind()
                    )
                }
            })?;
        let mut raw = Vec::new();
        response
            .into_reader()
            .take(MAX_NODE_ANSWER + 1)
            .read_to_end(&mut raw)
            .map_err(|e| {
                format!(
                    "the node of domain {domain} broke off its answer to {method} ({:?})",
                    e.kind()
                )
            })?;
        if raw.len() as u64 > MAX_NODE_ANSWER {
            return Err(format!(
                "the node of domain {domain} answered {method} with more than {MAX_NODE_ANSWER} \
                 bytes"
            ));
        }
        let answer: Value = serde_json::from_slice(&raw).map_err(|_| {
            format!("the node of domain {domain} answered {method} with something not JSON")
        })?;
        if let Some(error) = answer.get("error").filter(|e| !e.is_null()) {
            let said: String = error["message"]
                .as_str()
                .unwrap_or("no message")
                .chars()
                .take(200)
                .collect();
            return Err(format!(
                "the node of domain {domain} refused {method}: {said}"
            ));
        }
        answer.get("result").cloned().ok_or_else(|| {
            format!("the node of domain {domain} answered {method} without a result")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use payrail_evm::cctp::{address_to_bytes32, check_attestation, recover_signers};

    /// Three keys, as the environment variable holds them.
    const KEYS: &str = "0x1111111111111111111111111111111111111111111111111111111111111111, \
                        2222222222222222222222222222222222222222222222222222222222222222,\
                        0x3333333333333333333333333333333333333333333333333333333333333333";

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|a| (*a).to_owned()).collect()
    }

    fn chain() -> Chain {
        Chain {
            domain: 7,
            rpc_url: "http://127.0.0.1:1".to_owned(),
            confirmations: 5,
            fast_confirmations: Some(2),
            transmitter: [0xaa; 20],
        }
    }

    fn config() -> Config {
        Config::new(vec![chain()], KEYS, 1).unwrap()
    }

    fn message(min_finality: u32, body: Vec<u8>) -> Message {
        Message {
            version: cctp::MESSAGE_VERSION,
            source_domain: 7,
            destination_domain: 6,
            nonce: [0; 32],
            sender: address_to_bytes32([0x11; 20]),
            recipient: address_to_bytes32([0x22; 20]),
            destination_caller: [0; 32],
            min_finality_threshold: min_finality,
            finality_threshold_executed: 0,
            message_body: body,
        }
    }

    fn burn(amount: u128, max_fee: u128) -> BurnBody {
        BurnBody {
            version: cctp::BURN_BODY_VERSION,
            burn_token: address_to_bytes32([0x33; 20]),
            mint_recipient: address_to_bytes32([0x44; 20]),
            amount: U256::from(amount),
            message_sender: address_to_bytes32([0x55; 20]),
            max_fee: U256::from(max_fee),
            fee_executed: U256::ZERO,
            expiration_block: U256::ZERO,
            hook_data: Vec::new(),
        }
    }

    /// An ABI-encoded `bytes`, as a `MessageSent` log's data.
    fn abi(raw: &[u8]) -> Vec<u8> {
        let mut out = U256::from(32).0.to_vec();
        out.extend_from_slice(&U256::from(raw.len() as u128).0);
        out.extend_from_slice(raw);
        out.resize(64 + raw.len().div_ceil(32) * 32, 0);
        out
    }

    #[test]
    fn the_command_line_is_read_and_checked() {
        let good = args(&[
            "--listen",
            "127.0.0.1:0",
            "--chain",
            "7=http://127.0.0.1:8545,5,2",
            "--chain",
            "6=http://127.0.0.1:8546,3",
            "--transmitter",
            "6=0x00000000000000000000000000000000000000bb",
            "--transmitter",
            "7=0x00000000000000000000000000000000000000AA",
            "--fast-fee-bps",
            "3",
        ]);
        let Command::Serve { listen, config } = parse(&good, Some(KEYS)).unwrap() else {
            panic!("not a serve");
        };
        assert_eq!(listen, "127.0.0.1:0");
        assert_eq!(config.fast_fee_bps, 3);
        let chains: Vec<(u32, u64, Option<u64>, u8)> = config
            .chains
            .iter()
            .map(|c| {
                (
                    c.domain,
                    c.confirmations,
                    c.fast_confirmations,
                    c.transmitter[19],
                )
            })
            .collect();
        assert_eq!(chains, [(6, 3, None, 0xbb), (7, 5, Some(2), 0xaa)]);
        let addresses = config.attester_addresses();
        assert_eq!(addresses.len(), 3);
        assert!(addresses.windows(2).all(|p| p[0] < p[1]), "ascending");
        // The fee defaults to 1 basis point.
        let default = args(&[
            "--listen",
            "127.0.0.1:0",
            "--chain",
            "7=http://x,1",
            "--transmitter",
            "7=0x00000000000000000000000000000000000000aa",
        ]);
        match parse(&default, Some(KEYS)).unwrap() {
            Command::Serve { config, .. } => assert_eq!(config.fast_fee_bps, DEFAULT_FAST_FEE_BPS),
            Command::Help => panic!("not help"),
        }
        assert!(matches!(parse(&args(&["--help"]), None), Ok(Command::Help)));

        let refused = |list: &[&str], keys: Option<&str>| parse(&args(list), keys).unwrap_err();
        let base = [
            "--listen",
            "127.0.0.1:0",
            "--chain",
            "7=http://x,5,2",
            "--transmitter",
            "7=0x00000000000000000000000000000000000000aa",
        ];
        let with = |extra: &[&str]| -> Vec<String> {
            base.iter().chain(extra).map(|a| (*a).to_owned()).collect()
        };
        // Another chain, with a transmitter of its own.
        let and = |domain: &str, spec: &str| {
            let spec = format!("{domain}={spec}");
            let transmitter = format!("{domain}=0x{}", "cc".repeat(20));
            let extra = [
                "--chain",
                spec.as_str(),
                "--transmitter",
                transmitter.as_str(),
            ];
            with(&extra)
        };
        for (list, says) in [
            (with(&["--bogus"]), "unknown argument \"--bogus\""),
            (with(&["--fast-fee-bps", "10001"]), "at most 10000"),
            (with(&["--fast-fee-bps", "x"]), "--fast-fee-bps"),
            (
                with(&["--listen", "127.0.0.1:1"]),
                "--listen is given twice",
            ),
            (
                with(&["--chain", "7=http://y,5"]),
                "domain 7 is named twice",
            ),
            (
                with(&["--chain", "6=http://y,5"]),
                "domain 6 needs --transmitter",
            ),
            (
                with(&[
                    "--transmitter",
                    "6=0x00000000000000000000000000000000000000aa",
                ]),
                "no --chain 6",
            ),
            (
                with(&[
                    "--transmitter",
                    "7=0x00000000000000000000000000000000000000ab",
                ]),
                "more than one",
            ),
            (and("4", "http://y,5"), "not a known CCTP V2 domain"),
            (and("5", "http://y,5"), "not an EVM network"),
            (and("6", "ws://y,5"), "http:// or https://"),
            (and("6", "http://y,0"), "CONFIRMATIONS must be from 1"),
            (
                and("6", "http://y,2,3"),
                "FAST_CONFIRMATIONS must be from 1 to",
            ),
            (
                and("6", "http://y"),
                "needs its node's URL and its confirmations",
            ),
            (and("x", "http://y,1"), "not a domain number"),
            (
                with(&["--transmitter", "7=0xaa"]),
                "not 0x and 40 hex digits",
            ),
            (args(&["--listen"]), "--listen needs a value"),
            (args(&base[2..]), "--listen is required"),
        ] {
            let error = parse(&list, Some(KEYS)).unwrap_err();
            assert!(error.contains(says), "{list:?}: {error}");
        }
        assert!(refused(&base, None).contains(KEYS_VARIABLE));
        assert!(refused(&base, Some("  ")).contains(KEYS_VARIABLE));
    }

    #[test]
    fn keys_are_checked_without_ever_being_echoed() {
        let secret = "ab".repeat(31);
        let error = Config::new(vec![chain()], &secret, 1).unwrap_err();
        assert_eq!(
            error,
            format!("{KEYS_VARIABLE}: key 1 is not 32 bytes of hex")
        );
        let zero = format!("{KEYS},0x{}", "00".repeat(32));
        let error = Config::new(vec![chain()], &zero, 1).unwrap_err();
        assert_eq!(
            error,
            format!("{KEYS_VARIABLE}: key 4 is not a secp256k1 private key")
        );
        let twice = format!("{KEYS},{}", "22".repeat(32));
        let error = Config::new(vec![chain()], &twice, 1).unwrap_err();
        assert!(error.contains("given twice"), "{error}");
        assert!(!error.contains(&"22".repeat(32)), "{error}");
        let printed = format!("{:?}", config());
        for digits in ["11", "22", "33"] {
            assert!(!printed.contains(&digits.repeat(32)), "{printed}");
        }
        assert!(
            !printed.contains("127.0.0.1:1"),
            "the node's URL: {printed}"
        );
    }

    #[test]
    fn the_fast_fee_is_rounded_up_and_capped() {
        let fee = |amount: u128, max: u128, bps: u32| {
            fast_fee(U256::from(amount), U256::from(max), bps).to_u128()
        };
        assert_eq!(fee(1_000_000, 1_000, 1), Some(100));
        assert_eq!(fee(1_000_001, 1_000, 1), Some(101));
        assert_eq!(fee(1, 1_000, 1), Some(1));
        assert_eq!(fee(0, 1_000, 1), Some(0));
        assert_eq!(fee(1_000_000, 1_000, 0), Some(0));
        assert_eq!(fee(1_000_000, 1_000, 14), Some(1_000), "capped at maxFee");
        assert_eq!(fee(1_000_000, 0, 1), Some(0));
        assert_eq!(fee(123_456_789, u128::MAX, 10_000), Some(123_456_789));
        assert_eq!(
            fee(u128::MAX, u128::MAX, 3),
            Some(u128::MAX / 10_000 * 3 + 1)
        );
        // The widest amount neither overflows nor wraps.
        assert_eq!(fast_fee(U256::MAX, U256::MAX, 10_000), U256::MAX);
        let (q, r) = div_small(U256::MAX, 10_000);
        assert_eq!(add_small(mul_small(q, 10_000), u64::from(r)), U256::MAX);
        assert_eq!(add_small(U256::MAX, 1), U256::MAX);
        assert_eq!(mul_small(U256::MAX, 2), U256::MAX);
    }

    #[test]
    fn the_nonce_is_deterministic_and_distinct() {
        let hash = [7u8; 32];
        assert_eq!(nonce(7, &hash, 3), nonce(7, &hash, 3));
        let mut preimage = 7u32.to_be_bytes().to_vec();
        preimage.extend_from_slice(&hash);
        preimage.extend_from_slice(&3u64.to_be_bytes());
        assert_eq!(
            nonce(7, &hash, 3),
            <[u8; 32]>::from(Keccak256::digest(&preimage))
        );
        assert_ne!(nonce(7, &hash, 3), nonce(7, &hash, 4));
        assert_ne!(nonce(7, &hash, 3), nonce(6, &hash, 3));
        assert_ne!(nonce(7, &hash, 3), nonce(7, &[8; 32], 3));
    }

    #[test]
    fn abi_bytes_are_read_strictly() {
        for len in [0, 1, 31, 32, 33, 376] {
            let raw: Vec<u8> = (0..len).map(|i| i as u8).collect();
            assert_eq!(abi_bytes(&abi(&raw)), Some(raw.as_slice()), "{len}");
        }
        let good = abi(&[1, 2, 3]);
        let mut bad_offset = good.clone();
        bad_offset[31] = 0x40;
        assert_eq!(abi_bytes(&bad_offset), None);
        let mut long = good.clone();
        long[63] = 40;
        assert_eq!(abi_bytes(&long), None);
        let mut dirty = good.clone();
        dirty[70] = 1;
        assert_eq!(abi_bytes(&dirty), None, "non-zero padding");
        assert_eq!(abi_bytes(&good[..90]), None);
        assert_eq!(abi_bytes(&[good.clone(), vec![0; 32]].concat()), None);
        assert_eq!(abi_bytes(&[]), None);
        let mut huge = good;
        huge[40] = 1;
        assert_eq!(abi_bytes(&huge), None);
    }

    #[test]
    fn finality_follows_the_confirmations_and_the_request() {
        let chain = chain();
        let fast = message(1000, Vec::new());
        let standard = message(2000, Vec::new());
        let eager = message(500, Vec::new());
        assert_eq!(executed_threshold(&chain, 1, &fast), None);
        assert_eq!(executed_threshold(&chain, 2, &fast), Some(1000));
        assert_eq!(executed_threshold(&chain, 4, &eager), Some(1000));
        assert_eq!(executed_threshold(&chain, 4, &standard), None);
        assert_eq!(executed_threshold(&chain, 5, &standard), Some(2000));
        assert_eq!(executed_threshold(&chain, 5, &fast), Some(2000));
        assert_eq!(
            executed_threshold(&chain, 500, &message(1001, Vec::new())),
            Some(2000)
        );
        assert_eq!(
            executed_threshold(&chain, 4, &message(1001, Vec::new())),
            None
        );
        let no_fast = Chain {
            fast_confirmations: None,
            ..chain
        };
        assert_eq!(executed_threshold(&no_fast, 4, &fast), None);
    }

    #[test]
    fn a_message_is_filled_signed_and_shown_as_iris_shows_it() {
        let config = config();
        let emitted = message(1000, burn(2_500_000, 400).encode());
        let n = nonce(7, &[9; 32], 0);
        let fast = fill(emitted.clone(), n, 1000, 1);
        let body = BurnBody::decode(&fast.message_body).unwrap();
        assert_eq!(body.fee_executed, U256::from(250));
        assert_eq!((fast.nonce, fast.finality_threshold_executed), (n, 1000));
        let standard = fill(emitted.clone(), n, 2000, 1);
        assert!(BurnBody::decode(&standard.message_body)
            .unwrap()
            .fee_executed
            .is_zero());
        // Only the attestation service's fields change.
        let mut expected = emitted.clone();
        expected.nonce = n;
        expected.finality_threshold_executed = 2000;
        assert_eq!(standard, expected);
        // A body that is no burn message is left as it is.
        let other = fill(message(2000, vec![1, 2, 3]), n, 2000, 1);
        assert_eq!(other.message_body, [1, 2, 3]);

        let raw = fast.encode();
        let attestation = attest(&config.attesters, &raw).unwrap();
        assert_eq!(
            attestation,
            attest(&config.attesters, &raw).unwrap(),
            "deterministic"
        );
        assert_eq!(
            recover_signers(&raw, &attestation).unwrap(),
            config.attester_addresses()
        );
        assert_eq!(
            check_attestation(&raw, &attestation, &config.attester_addresses(), 3),
            Ok(())
        );

        let shown = entry(&fast, &attestation);
        assert_eq!(shown["message"], hex0x(&raw));
        assert_eq!(shown["eventNonce"], hex0x(&n));
        assert_eq!(shown["attestation"], hex0x(&attestation));
        assert_eq!(shown["cctpVersion"], 2);
        assert_eq!(shown["status"], "complete");
        assert!(shown["delayReason"].is_null());
        let decoded = &shown["decodedMessage"];
        assert_eq!(decoded["sourceDomain"], "7");
        assert_eq!(decoded["destinationDomain"], "6");
        assert_eq!(decoded["nonce"], hex0x(&n));
        assert_eq!(decoded["sender"], hex0x(&[0x11; 20]));
        assert_eq!(decoded["recipient"], hex0x(&[0x22; 20]));
        assert_eq!(decoded["destinationCaller"], hex0x(&[0; 20]));
        assert_eq!(decoded["minFinalityThreshold"], "1000");
        assert_eq!(decoded["finalityThresholdExecuted"], "1000");
        assert_eq!(decoded["messageBody"], hex0x(&fast.message_body));
        let body = &decoded["decodedMessageBody"];
        assert_eq!(body["burnToken"], hex0x(&[0x33; 20]));
        assert_eq!(body["mintRecipient"], hex0x(&[0x44; 20]));
        assert_eq!(body["amount"], "2500000");
        assert_eq!(body["messageSender"], hex0x(&[0x55; 20]));
        assert_eq!(body["maxFee"], "400");
        assert_eq!(body["feeExecuted"], "250");
        assert_eq!(body["expirationBlock"], "0");
        assert_eq!(body["hookData"], "");
        assert!(entry(&other, &attestation)["decodedMessage"]["decodedMessageBody"].is_null());
        // A non-EVM domain's words are shown whole.
        assert_eq!(
            word(5, &address_to_bytes32([1; 20])),
            hex0x(&address_to_bytes32([1; 20]))
        );
        assert_eq!(word(6, &[0xff; 32]), hex0x(&[0xff; 32]));
    }

    #[test]
    fn only_the_transmitters_message_sent_logs_count_in_log_order() {
        let chain = chain();
        let topic = cctp::MESSAGE_SENT_TOPIC;
        let transmitter = hex0x(&chain.transmitter);
        let log = |address: &str, topic: &str, index: u64, data: &[u8]| {
            json!({"address": address, "topics": [topic], "logIndex": format!("{index:#x}"),
                   "data": hex0x(data), "removed": false})
        };
        let first = message(2000, vec![1]);
        let second = message(1000, vec![2]);
        let mut foreign = message(2000, vec![3]);
        foreign.source_domain = 6;
        let receipt = json!({"logs": [
            log(&transmitter, topic, 9, &abi(&second.encode())),
            log(&hex0x(&[0xbb; 20]), topic, 3, &abi(&first.encode())),
            log(&transmitter, &hex0x(&[0; 32]), 4, &abi(&first.encode())),
            log(&transmitter.to_uppercase().replace("0X", "0x"), topic, 5, &abi(&first.encode())),
            log(&transmitter, topic, 6, &abi(&foreign.encode())),
            log(&transmitter, topic, 7, &[1, 2, 3]),
        ]});
        let found = message_sent_logs(&receipt, &chain).unwrap();
        assert_eq!(found, vec![(5, first), (9, second)]);
        assert_eq!(
            message_sent_logs(&json!({"logs": []}), &chain).unwrap(),
            vec![]
        );
        assert_eq!(
            message_sent_logs(&json!({"logs": 3}), &chain).unwrap_err(),
            "logs"
        );
        let no_index = json!({"logs": [{"address": transmitter, "topics": [topic], "data": "0x"}]});
        assert_eq!(
            message_sent_logs(&no_index, &chain).unwrap_err(),
            "logIndex"
        );
    }

    #[test]
    fn requests_are_read_strictly() {
        let hash = format!("0x{}", "ab".repeat(32));
        let ok = parse_request(&format!(
            "GET /v2/messages/7?transactionHash={hash} HTTP/1.1"
        ));
        assert_eq!(
            ok,
            Ok(Request::Messages(Lookup {
                domain: 7,
                hash: [0xab; 32]
            }))
        );
        let fees = |source, destination| {
            Ok(Request::Fees {
                source,
                destination,
            })
        };
        assert_eq!(
            parse_request("GET /v2/burn/USDC/fees/7/6 HTTP/1.1"),
            fees(7, 6)
        );
        // A query without parameters, and leading zeros, as the lookup takes them.
        assert_eq!(
            parse_request("GET /v2/burn/USDC/fees/007/0? HTTP/1.1"),
            fees(7, 0)
        );
        let refused = |line: &str| parse_request(line).unwrap_err();
        for (line, status, says) in [
            (
                "GET /v2/burn/USDC/fees/+7/6 HTTP/1.1",
                400,
                "the source domain \"+7\" is not a domain number",
            ),
            (
                "GET /v2/burn/USDC/fees/7/4294967296 HTTP/1.1",
                400,
                "the destination domain \"4294967296\" is not a domain number",
            ),
            (
                "GET /v2/burn/USDC/fees/7/6?transactionHash=0x00 HTTP/1.1",
                400,
                "unknown query parameter \"transactionHash\": the fee quote takes none",
            ),
            ("PUT /v2/burn/USDC/fees/7/6 HTTP/1.1", 405, "only GET"),
            ("GET /v2/burn/USDC/fees/7 HTTP/1.1", 404, "no such resource"),
            (
                "GET /v2/burn/USDC/fees/7/ HTTP/1.1",
                404,
                "no such resource",
            ),
            (
                "GET /v2/burn/USDC/fees/7/6/ HTTP/1.1",
                404,
                "no such resource",
            ),
            (
                "GET /v2/burn/usdc/fees/7/6 HTTP/1.1",
                404,
                "no such resource",
            ),
            (
                "POST /v2/burn/EURC/fees/7/6 HTTP/1.1",
                404,
                "no such resource",
            ),
            (
                "GET /v2/messages/7 HTTP/1.1",
                400,
                "transactionHash is required",
            ),
            (
                "GET /v2/messages/x?transactionHash=0x00 HTTP/1.1",
                400,
                "not a domain number",
            ),
            (
                "GET /v2/messages/-1?transactionHash=0x00 HTTP/1.1",
                400,
                "not a domain number",
            ),
            (
                "GET /v2/messages/99999999999?transactionHash=0x00 HTTP/1.1",
                400,
                "not a domain number",
            ),
            (
                "GET /v2/messages/7?transactionHash=0xab HTTP/1.1",
                400,
                "not 0x and 64 hex digits",
            ),
            (
                &format!(
                    "GET /v2/messages/7?transactionHash={} HTTP/1.1",
                    "ab".repeat(32)
                ),
                400,
                "not 0x and 64",
            ),
            (
                &format!(
                    "GET /v2/messages/7?transactionHash=0x{} HTTP/1.1",
                    "zz".repeat(32)
                ),
                400,
                "not 0x and 64",
            ),
            (
                &format!(
                    "GET /v2/messages/7?transactionHash={hash}&transactionHash={hash} HTTP/1.1"
                ),
                400,
                "more than once",
            ),
            (
                &format!("GET /v2/messages/7?transactionHash={hash}&page=2 HTTP/1.1"),
                400,
                "unknown query parameter \"page\"",
            ),
            ("GET /v2/messages/7?nonce=5 HTTP/1.1", 400, "not by nonce"),
            (
                &format!("POST /v2/messages/7?transactionHash={hash} HTTP/1.1"),
                405,
                "only GET",
            ),
            ("GET /v1/messages/7/0x00 HTTP/1.1", 404, "no such resource"),
            ("GET /v2/messages/ HTTP/1.1", 404, "no such resource"),
            ("GET /v2/messages/7/x HTTP/1.1", 404, "no such resource"),
            ("GET /v2/messages/7", 400, "request line"),
            ("GET /v2/messages/7 SPDY/3", 400, "HTTP/1.x"),
        ] {
            let reply = refused(line);
            assert_eq!(reply.status, status, "{line}");
            let error = reply.body["error"].as_str().unwrap();
            assert!(error.contains(says), "{line}: {error}");
        }
    }

    #[test]
    fn a_domain_not_served_is_refused_before_any_node_is_asked() {
        // The node's URL is a closed port: asking it would answer 503.
        let service = Service {
            nodes: vec![Node::new(&chain()).unwrap()],
            config: config(),
        };
        let hash = format!("0x{}", "ab".repeat(32));
        let reply = service.answer(&format!(
            "GET /v2/messages/6?transactionHash={hash} HTTP/1.1"
        ));
        assert_eq!(reply.status, 400);
        assert_eq!(
            reply.body["error"],
            "the source domain 6 is not served here (served: 7)"
        );
        let reply = service.answer(&format!(
            "GET /v2/messages/7?transactionHash={hash} HTTP/1.1"
        ));
        assert_eq!(reply.status, 503);
        let error = reply.body["error"].as_str().unwrap();
        assert!(
            error.starts_with("the node of domain 7 is unreachable"),
            "{error}"
        );
        assert!(!error.contains("127.0.0.1"), "{error}");
        // The fee quote is the configuration's: no node is asked (there is none to ask).
        let service = Service {
            nodes: Vec::new(),
            config: Config::new(
                vec![
                    chain(),
                    Chain {
                        domain: 6,
                        fast_confirmations: None,
                        ..chain()
                    },
                ],
                KEYS,
                7,
            )
            .unwrap(),
        };
        let quote = |path: &str| service.answer(&format!("GET {path} HTTP/1.1"));
        assert_eq!(
            quote("/v2/burn/USDC/fees/7/6"),
            Reply {
                status: 200,
                body: json!([
                    {"finalityThreshold": 1000, "minimumFee": 7},
                    {"finalityThreshold": 2000, "minimumFee": 0},
                ])
            }
        );
        assert_eq!(
            quote("/v2/burn/USDC/fees/6/7"),
            Reply {
                status: 200,
                body: json!([{"finalityThreshold": 2000, "minimumFee": 0}])
            }
        );
        for (path, error) in [
            (
                "/v2/burn/USDC/fees/3/7",
                "the source domain 3 is not served here (served: 6, 7)",
            ),
            (
                "/v2/burn/USDC/fees/7/3",
                "the destination domain 3 is not served here (served: 6, 7)",
            ),
            (
                "/v2/burn/USDC/fees/6/6",
                "the destination domain 6 is the source domain: a route goes from one domain \
                 to another",
            ),
        ] {
            assert_eq!(quote(path), Reply::error(400, error), "{path}");
        }
    }
}
