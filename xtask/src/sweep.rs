//! The custody sweep (`xtask sweep`): the offline signer that moves what deposit addresses hold
//! into the treasury once their watch has ended, and what merchants' top-up addresses hold while
//! they stay watched.
//!
//! A top-up address (every asset of it) is swept as far as the books hold it: at most its
//! custody account's posted balance (what the watcher booked, final at the network's depth), a
//! coin one less its gas; its tokens before its coin, and an asset waits while a sweep of
//! another asset of the address is still `sent`, so each is signed on the address's real nonce
//! and booked balance. The worker's watch of it reads on through the sweep (docs/LEDGER.md,
//! "Sweeping a top-up address").
//!
//! For each deposit whose watch ended (`deposit_watches.watch_until` in the past), on each
//! configured network: its key is derived from the custody mnemonic at its stored index and must
//! give its stored address; its balance (the token's `balanceOf`, or the coin) is read at one
//! block with its nonce; a token deposit without coin for its gas first gets exactly gas limit ×
//! price from the custody gas address, mined before the sweep is signed; then everything goes to
//! the treasury (a coin deposit sends its balance less the gas). Prices are the worker's: a
//! fixed EIP-1559 price (max fee = tip), so the fee charged is the fee paid.
//!
//! Every transaction is stored in `custody_sweeps` as `sent`, with its signed bytes, before it
//! is broadcast; the worker's cron follows it to its final receipt and posts it to the books. Run
//! twice, it sends nothing the second time: balances are zero, and a deposit with a sweep still
//! `sent` is only waited on (its bytes broadcast again), never swept again. Two sweeps at once
//! cannot both send: a transaction takes its sender's nonce in the store, and a deposit's gas
//! funding is refused while an earlier one is not yet spent. A deposit still watched is never
//! read.

pub mod keys;
pub mod node;
pub mod store;

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use payrail_evm::Eip1559;
use serde_json::Value;

use crate::secrets::Target;
use keys::{Custody, Key};
use node::Node;
use store::{Deposit, ListRead, NewSweep, Screened, Stored};

/// Looks at one deposit again at most this many times when another signer takes its nonce.
const ATTEMPTS: usize = 5;
/// The most the treasury's signer pays per gas when a network names no cap (the worker's).
pub use payrail_evm::chains::Network;

/// Reads `PAYRAIL_CHAINS` with the worker's own parser; the error never echoes it (node URLs
/// carry keys).
pub fn networks(chains: &str) -> Result<BTreeMap<String, Network>, String> {
    payrail_evm::chains::parse(chains)
        .map_err(|e| format!("the networks (PAYRAIL_CHAINS or --chains): {e}"))
}

/// The coin a network's gas is paid in (the worker's `chain::config::coin`).
pub use crate::reconcile::coin;

/// `units` of an asset with `decimals`, as a person reads it.
pub fn amount(units: u128, decimals: u32) -> String {
    let scale = 10u128.checked_pow(decimals).unwrap_or(u128::MAX);
    let (whole, frac) = (units / scale, units % scale);
    if frac == 0 {
        return whole.to_string();
    }
    let width = usize::try_from(decimals).unwrap_or(0);
    let frac = format!("{frac:0width$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

/// How a sweep runs.
pub struct Options {
    /// The database: local or production.
    pub target: Target,
    /// The networks, as `PAYRAIL_CHAINS`.
    pub chains: String,
    /// The treasury's address.
    pub treasury: String,
    /// The worker's `PAYRAIL_EVM_XPUB`, when known: the mnemonic must be its.
    pub xpub: Option<String>,
    /// How long to wait for each transaction to be mined.
    pub wait: Duration,
    /// Unix seconds now: the deposits whose watch ended before it are swept.
    pub now: i64,
    /// Where the books are read: D1, and the objects of the institutions held in them (locally
    /// their files, remotely through the worker's operator endpoint).
    pub books: crate::reconcile::Books,
}

/// What a sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Sweeps signed and sent by this run.
    pub swept: usize,
    /// Gas fundings signed and sent by this run.
    pub funded: usize,
    /// Transactions stored earlier that were still unmined, waited on.
    pub waited: usize,
    /// Deposits or networks refused, or that failed.
    pub refused: usize,
}

/// A transaction to see mined before the run ends.
struct Watching {
    what: String,
    hash: String,
    raw: String,
    node: usize,
}

/// One network as this run uses it.
struct Net<'a> {
    name: &'a str,
    config: &'a Network,
    node: &'a Node,
    gas: &'a Key,
    /// The treasury's screening on it, clear.
    screened: &'a Screened,
}

/// The run's state.
struct Run<'a, 'w> {
    opts: &'a Options,
    treasury: String,
    out: &'w mut dyn Write,
    summary: Summary,
    watching: Vec<Watching>,
    /// The next nonce stored transactions leave the custody gas address, per network.
    gas_next: BTreeMap<String, u64>,
    /// The treasury's address as the worker sends from it, per network.
    senders: BTreeMap<String, Vec<String>>,
    /// What the operator's sanctions list says of the treasury.
    list: ListRead,
}

/// Sweeps every deposit whose watch has ended and that holds a balance, with `mnemonic` (the
/// custody wallet's), printing what it does to `out`.
pub fn run(mnemonic: &str, opts: &Options, out: &mut dyn Write) -> Result<Summary, String> {
    let networks = networks(&opts.chains)?;
    let custody = Custody::from_mnemonic(mnemonic)?;
    if let Some(xpub) = &opts.xpub {
        if xpub.trim() != custody.xpub() {
            return Err(
                "the mnemonic on stdin is not the custody wallet of PAYRAIL_EVM_XPUB: nothing swept"
                    .to_owned(),
            );
        }
    }
    let gas = custody.gas()?;
    let treasury = opts.treasury.trim().to_ascii_lowercase();
    if payrail_evm::address_bytes(&treasury).is_none() || !treasury.starts_with("0x") {
        return Err(format!(
            "{treasury:?} is not an address (0x and 40 hex digits)"
        ));
    }
    if treasury == gas.address {
        return Err("the treasury cannot be the custody gas address".to_owned());
    }
    let snapshot = store::snapshot(&opts.target, opts.now, &gas.address, &treasury)?;
    let mut deposits = snapshot.deposits;
    deposits.extend(store::held_deposits(&opts.books, &snapshot.held, opts.now)?);
    let mut by_network: BTreeMap<&str, Vec<&Deposit>> = BTreeMap::new();
    for deposit in &deposits {
        by_network
            .entry(&deposit.network)
            .or_default()
            .push(deposit);
    }
    let mut run = Run {
        opts,
        treasury,
        out,
        summary: Summary::default(),
        watching: Vec::new(),
        gas_next: snapshot.gas_next,
        senders: snapshot.treasury,
        list: snapshot.list,
    };
    let open = snapshot.open;
    let topups = deposits.iter().filter(|d| d.is_topup()).count();
    let opening = format!(
        "{} deposits' watches have ended, and {topups} assets of merchants' top-up addresses \
         are swept as far as the books hold them; the custody gas address is {}; sweeping to \
         the treasury {}",
        deposits.len() - topups,
        gas.address,
        run.treasury
    );
    run.say(opening);
    let mut nodes = Vec::new();
    for (name, list) in &by_network {
        let Some(config) = networks.get(*name) else {
            run.say(format!(
                "{name}: not configured: {} deposits left as they are",
                list.len()
            ));
            continue;
        };
        let node = Node::new(name, &config.rpc_url)?;
        let screened = match run.check_network(name, config, &node, list) {
            Ok(screened) => screened,
            Err(why) => {
                run.say(format!("{name}: refused: {why}"));
                run.summary.refused += 1;
                continue;
            }
        };
        nodes.push(node);
        let net = Net {
            name,
            config,
            node: &nodes[nodes.len() - 1],
            gas: &gas,
            screened: &screened,
        };
        for deposit in list {
            let rows: Vec<Stored> = open
                .iter()
                .filter(|r| {
                    let of = if r.kind == "sweep" {
                        &r.from_address
                    } else {
                        &r.to_address
                    };
                    *of == deposit.address
                })
                .cloned()
                .collect();
            if let Err(why) = run.deposit(&custody, &net, nodes.len() - 1, deposit, rows) {
                run.say(format!("{name}: {} refused: {why}", deposit.address));
                run.summary.refused += 1;
            }
        }
    }
    // Each transaction of this run, and each one waited on, mined before the run ends.
    for w in std::mem::take(&mut run.watching) {
        let line = match nodes[w.node].wait_mined(&w.hash, &w.raw, opts.wait) {
            Ok(Some(receipt)) => {
                let block = node::quantity(&receipt["blockNumber"]).unwrap_or(0);
                if succeeded(&receipt) {
                    format!("{}: {} mined in block {block}", w.what, w.hash)
                } else {
                    run.summary.refused += 1;
                    format!("{}: {} REVERTED in block {block}", w.what, w.hash)
                }
            }
            Ok(None) => format!(
                "{}: {} not mined yet; it is stored, and broadcast again until it is",
                w.what, w.hash
            ),
            Err(e) => format!("{}: {} not followed: {e}", w.what, w.hash),
        };
        run.say(line);
    }
    let s = run.summary.clone();
    run.say(format!(
        "swept {} deposits (funding gas for {}), waited on {} sent before, refused {}; the \
         worker makes each final at its depth and posts it to the books",
        s.swept, s.funded, s.waited, s.refused
    ));
    Ok(s)
}

/// The receipt's status: succeeded.
fn succeeded(receipt: &Value) -> bool {
    receipt["status"] == "0x1"
}

impl Run<'_, '_> {
    fn say(&mut self, line: String) {
        let _ = writeln!(self.out, "{line}");
    }

    /// Whether a network may be swept: its node is on its chain, the treasury is the one the
    /// worker sends from there (when it has sent), no deposit is the treasury, and the treasury
    /// is on no sanctions list (the operator's, read with the snapshot, and the network's
    /// oracle, read now): its screening, clear. An oracle that cannot be read refuses the
    /// network, as a listed treasury does: nothing is sent to an address not screened clear.
    fn check_network(
        &self,
        name: &str,
        config: &Network,
        node: &Node,
        deposits: &[&Deposit],
    ) -> Result<Screened, String> {
        let id = node.chain_id()?;
        if id != config.chain_id {
            return Err(format!(
                "the node is on chain {id}, not the configured {}",
                config.chain_id
            ));
        }
        let senders = self.senders.get(name).cloned().unwrap_or_default();
        if !senders.is_empty() && !senders.contains(&self.treasury) {
            return Err(format!(
                "the treasury given ({}) is not the address the worker's treasury sends from \
                 ({})",
                self.treasury,
                senders.join(", ")
            ));
        }
        if deposits.iter().any(|d| d.address == self.treasury) {
            return Err("the treasury is one of the deposit addresses".to_owned());
        }
        let listed = |by: &str| {
            format!(
                "the treasury {} is on a sanctions list ({by}): nothing is swept to it",
                self.treasury
            )
        };
        if let Some(by) = &self.list.named_by {
            return Err(listed(by));
        }
        let oracle = match &config.sanctions_oracle {
            None => None,
            Some(oracle) => {
                let unreadable = |why: &str| {
                    format!(
                        "the sanctions oracle {oracle} cannot be read ({why}): nothing is swept \
                         until the treasury can be screened"
                    )
                };
                let head = node.head().map_err(|e| unreadable(&e))?;
                let call = serde_json::json!({
                    "to": oracle,
                    "data": payrail_evm::is_sanctioned_call(&self.treasury)
                });
                let answer = node
                    .call("eth_call", serde_json::json!([call, format!("{head:#x}")]))
                    .map_err(|e| unreadable(&e))?;
                let sanctioned = payrail_evm::sanctioned_answer(answer.as_str().unwrap_or(""))
                    .map_err(unreadable)?;
                if sanctioned {
                    return Err(listed(&format!("the sanctions oracle {oracle} on {name}")));
                }
                Some((oracle.to_ascii_lowercase(), head))
            }
        };
        Ok(Screened {
            oracle,
            list_version: self.list.version,
        })
    }

    /// Sweeps one deposit: waits on what is already sent for it, or funds its gas and sweeps
    /// it, or finds nothing to do.
    fn deposit(
        &mut self,
        custody: &Custody,
        net: &Net<'_>,
        node_index: usize,
        deposit: &Deposit,
        mut rows: Vec<Stored>,
    ) -> Result<(), String> {
        let index = u32::try_from(deposit.derivation_index)
            .ok()
            .filter(|i| *i < keys::GAS_INDEX)
            .ok_or_else(|| format!("index {} is not a deposit's", deposit.derivation_index))?;
        let key = custody.child(index)?;
        if key.address != deposit.address.to_ascii_lowercase() {
            return Err(format!(
                "the custody key at index {index} gives {}, not the stored address: not swept",
                key.address
            ));
        }
        let label = format!(
            "{}: {} ({}index {index}, {})",
            net.name,
            deposit.address,
            if deposit.is_topup() { "top-up, " } else { "" },
            deposit.asset
        );
        for _ in 0..ATTEMPTS {
            let step = match self.attempt(net, deposit, &key, &label, &rows) {
                Ok(step) => step,
                // Another signer stored a transaction for it meanwhile (its sweep can make
                // the chain refuse ours, as a transfer of what is no longer there): look again.
                Err(e) => {
                    let now = store::of_deposit(&self.opts.target, net.name, &deposit.address)?;
                    if now.len() == rows.len() {
                        return Err(e);
                    }
                    rows = now;
                    continue;
                }
            };
            match step {
                // Another signer took a nonce: what it stored is read again.
                Step::Again => {
                    rows = store::of_deposit(&self.opts.target, net.name, &deposit.address)?;
                }
                Step::Funded(funding) => rows.push(*funding),
                Step::Nothing => return Ok(()),
                Step::Watch(hash, raw, waited) => {
                    if waited {
                        self.summary.waited += 1;
                        self.say(format!("{label}: waiting on its sweep {hash}, sent before"));
                    }
                    self.watching.push(Watching {
                        what: format!("{label} sweep"),
                        hash,
                        raw,
                        node: node_index,
                    });
                    return Ok(());
                }
            }
        }
        Err("other signers kept taking its nonce; run again".to_owned())
    }

    /// One look at a deposit.
    fn attempt(
        &mut self,
        net: &Net<'_>,
        deposit: &Deposit,
        key: &Key,
        label: &str,
        rows: &[Stored],
    ) -> Result<Step, String> {
        let node = net.node;
        let sent_sweep = |same: bool| {
            rows.iter().find(move |r| {
                r.kind == "sweep" && r.state == "sent" && (r.token == deposit.token) == same
            })
        };
        if let Some(sent) = sent_sweep(true) {
            return Ok(Step::Watch(sent.tx_hash.clone(), sent.raw.clone(), true));
        }
        // A top-up address holds several assets, swept one transaction at a time: the others
        // wait until the books hold what one took out (its gas too).
        if let Some(other) = sent_sweep(false) {
            self.say(format!(
                "{label}: waits for the address's sweep {} of another asset to be final; run \
                 again then",
                other.tx_hash
            ));
            return Ok(Step::Nothing);
        }
        if let Some(funding) = rows.iter().find(|r| r.kind == "gas" && r.state == "sent") {
            // A funding of its gas not yet final: the sweep waits until it is mined.
            match node.wait_mined(&funding.tx_hash, &funding.raw, self.opts.wait)? {
                Some(receipt) if succeeded(&receipt) => {}
                Some(_) => return Err(format!("its gas funding {} reverted", funding.tx_hash)),
                None => {
                    return Err(format!(
                        "its gas funding {} is not mined yet; run again",
                        funding.tx_hash
                    ))
                }
            }
        }
        let at = node.head()?;
        let native = deposit.token == payrail_evm::Token::NATIVE;
        let held = if native {
            node.coin_balance(&deposit.address, at)?
        } else {
            node.token_balance(&deposit.token, &deposit.address, at)?
        };
        // A top-up address stays watched: only what the books hold there (booked by the
        // watcher once final at the network's depth) is swept; the rest waits for a later sweep.
        let units = match deposit.booked_units()? {
            Some(booked) if booked < held => {
                self.say(format!(
                    "{label}: holds {} {}, of which the books hold {} so far: the rest is swept \
                     once the watcher has booked it",
                    amount(held, deposit.decimals),
                    deposit.asset,
                    amount(booked, deposit.decimals)
                ));
                booked
            }
            _ => held,
        };
        if units == 0 {
            return Ok(Step::Nothing);
        }
        let nonce = node.nonce_at(&deposit.address, at)?;
        let (price, floor) = net.node.gas_price()?;
        let cap = u128::from(net.config.max_gas_price_gwei) * 1_000_000_000;
        if price > cap {
            return Err(format!(
                "gas costs {} gwei, above the network's cap of {} gwei: not now",
                price.div_ceil(1_000_000_000),
                net.config.max_gas_price_gwei
            ));
        }
        // On an OP Stack chain a transaction also pays an L1 data fee besides its gas.
        let l1_fee = match &net.config.l1_fee_oracle {
            Some(oracle) => node.l1_fee_bound(oracle)?,
            None => 0,
        };
        let treasury = self.treasury.clone();
        let to_bytes = |address: &str| {
            payrail_evm::address_bytes(address)
                .ok_or_else(|| format!("{address} is not an address"))
        };
        let (tx, moved) = if native {
            let gas = node.estimate(&deposit.address, &treasury, units, "0x")?;
            let fee = u128::from(gas) * price + l1_fee;
            if units <= fee {
                self.say(format!(
                    "{label}: holds {} {}, less than its gas: left",
                    amount(units, deposit.decimals),
                    deposit.asset
                ));
                return Ok(Step::Nothing);
            }
            let value = units - fee;
            (
                Eip1559 {
                    chain_id: net.config.chain_id,
                    nonce,
                    max_priority_fee_per_gas: price,
                    max_fee_per_gas: price,
                    gas_limit: gas,
                    to: to_bytes(&treasury)?,
                    value,
                    data: Vec::new(),
                },
                value,
            )
        } else {
            let call = payrail_evm::transfer_call(&treasury, units);
            let gas = node.estimate(&deposit.address, &deposit.token, 0, &call)?;
            let coin = node.coin_balance(&deposit.address, at)?;
            let need = u128::from(gas) * price + l1_fee;
            // A funding not yet spent by a sweep: this deposit's gas is paid, whatever the
            // price did since (another signer's funding, or one before a stop).
            let funded = rows.iter().any(|g| {
                g.kind == "gas"
                    && g.state != "failed"
                    && !rows
                        .iter()
                        .any(|s| s.kind == "sweep" && s.created_at >= g.created_at)
            });
            let price = if coin >= need {
                price
            } else if coin.saturating_sub(l1_fee) / u128::from(gas) >= floor {
                // Its coin pays a lower price that is still enough for the next block.
                coin.saturating_sub(l1_fee) / u128::from(gas)
            } else if funded {
                return Err(format!(
                    "its gas was funded, but {} wei no longer pays for {gas} gas at today's \
                     price; fund it by hand or run again later",
                    coin
                ));
            } else {
                return Ok(
                    match self.fund(net, deposit, need - coin, (price, l1_fee), (label, rows))? {
                        Some(funding) => Step::Funded(Box::new(funding)),
                        None => Step::Again,
                    },
                );
            };
            let data = hex_bytes(&call)?;
            (
                Eip1559 {
                    chain_id: net.config.chain_id,
                    nonce,
                    max_priority_fee_per_gas: price,
                    max_fee_per_gas: price,
                    gas_limit: gas,
                    to: to_bytes(&deposit.token)?,
                    value: 0,
                    data,
                },
                units,
            )
        };
        let signed = tx.sign(&key.signing).map_err(|e| e.to_string())?;
        let stored = store::insert(
            &self.opts.target,
            &NewSweep {
                tx_hash: &signed.hash,
                network: net.name,
                token: &deposit.token,
                asset: &deposit.asset,
                decimals: deposit.decimals,
                kind: "sweep",
                from: &deposit.address,
                to: &treasury,
                nonce,
                units: moved,
                gas_limit: tx.gas_limit,
                gas_price: tx.max_fee_per_gas,
                raw: &signed.raw,
                now: unix_now(),
                sweeps_seen: 0,
                screened: Some(net.screened),
                held_by: deposit.held_by,
            },
        )?;
        if !stored {
            return Ok(Step::Again); // another signer took its nonce: look again
        }
        if let Err(e) = node.send_raw(&signed.raw) {
            self.say(format!(
                "{label}: broadcast refused ({e}); it is stored and broadcast again"
            ));
        }
        self.summary.swept += 1;
        self.say(format!(
            "{label}: sweeping {} {} to the treasury in {} (gas {} × {} wei)",
            amount(moved, deposit.decimals),
            deposit.asset,
            signed.hash,
            tx.gas_limit,
            tx.max_fee_per_gas
        ));
        Ok(Step::Watch(signed.hash, signed.raw, false))
    }

    /// Sends `wei` from the custody gas address to a token deposit for its sweep's gas (at
    /// `price` per gas, with an L1 data fee of at most `l1_fee`), and
    /// waits until it is mined; the funding as stored, or `None` when another signer took its
    /// nonce or funds the deposit.
    fn fund(
        &mut self,
        net: &Net<'_>,
        deposit: &Deposit,
        wei: u128,
        (price, l1_fee): (u128, u128),
        (label, rows): (&str, &[Stored]),
    ) -> Result<Option<Stored>, String> {
        let (target, node, gas) = (&self.opts.target, net.node, net.gas);
        let stored_next = self.gas_next.get(net.name).copied().unwrap_or(0);
        let nonce = node.pending_nonce(&gas.address)?.max(stored_next);
        let limit = node.estimate(&gas.address, &deposit.address, wei, "0x")?;
        let have = node.coin_balance(&gas.address, node.head()?)?;
        let cost = wei + u128::from(limit) * price + l1_fee;
        if have < cost {
            return Err(format!(
                "the custody gas address {} holds {} {coin}, and funding this sweep's gas takes \
                 {} {coin}: fund it",
                gas.address,
                amount(have, 18),
                amount(cost, 18),
                coin = coin(net.name)
            ));
        }
        let tx = Eip1559 {
            chain_id: net.config.chain_id,
            nonce,
            max_priority_fee_per_gas: price,
            max_fee_per_gas: price,
            gas_limit: limit,
            to: payrail_evm::address_bytes(&deposit.address)
                .ok_or_else(|| format!("{} is not an address", deposit.address))?,
            value: wei,
            data: Vec::new(),
        };
        let signed = tx.sign(&gas.signing).map_err(|e| e.to_string())?;
        let now = unix_now();
        let stored = store::insert(
            target,
            &NewSweep {
                tx_hash: &signed.hash,
                network: net.name,
                token: payrail_evm::Token::NATIVE,
                asset: coin(net.name),
                decimals: 18,
                kind: "gas",
                from: &gas.address,
                to: &deposit.address,
                nonce,
                units: wei,
                gas_limit: limit,
                gas_price: price,
                raw: &signed.raw,
                now,
                sweeps_seen: rows.iter().filter(|r| r.kind == "sweep").count(),
                screened: None,
                held_by: deposit.held_by,
            },
        )?;
        if !stored {
            // Another signer funds it, swept it meanwhile, or took the nonce: look again.
            return Ok(None);
        }
        self.gas_next.insert(net.name.to_owned(), nonce + 1);
        if let Err(e) = node.send_raw(&signed.raw) {
            self.say(format!(
                "{label}: broadcast of its gas funding refused ({e}); it is stored and broadcast \
                 again"
            ));
        }
        self.summary.funded += 1;
        match node.wait_mined(&signed.hash, &signed.raw, self.opts.wait)? {
            Some(receipt) if succeeded(&receipt) => {
                self.say(format!(
                    "{label}: funded its gas with {} {} in {} (block {})",
                    amount(wei, 18),
                    coin(net.name),
                    signed.hash,
                    node::quantity(&receipt["blockNumber"]).unwrap_or(0)
                ));
                Ok(Some(Stored {
                    tx_hash: signed.hash,
                    kind: "gas".to_owned(),
                    token: payrail_evm::Token::NATIVE.to_owned(),
                    from_address: gas.address.clone(),
                    to_address: deposit.address.clone(),
                    nonce: i64::try_from(nonce).unwrap_or(i64::MAX),
                    units: wei.to_string(),
                    gas_limit: i64::try_from(limit).unwrap_or(i64::MAX),
                    gas_price: price.to_string(),
                    raw: signed.raw,
                    state: "sent".to_owned(),
                    created_at: now,
                }))
            }
            Some(_) => Err(format!("its gas funding {} reverted", signed.hash)),
            None => Err(format!(
                "its gas funding {} is not mined yet; run again",
                signed.hash
            )),
        }
    }
}

/// What one look at a deposit leads to.
enum Step {
    /// Look again at what is stored: another signer took a nonce, or funds the deposit.
    Again,
    /// Its gas was funded (and mined): sweep it.
    Funded(Box<Stored>),
    /// Nothing to send.
    Nothing,
    /// A sweep to see mined: sent now, or (true) sent before.
    Watch(String, String, bool),
}

/// Unix seconds now: when a transaction is stored.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn hex_bytes(text: &str) -> Result<Vec<u8>, String> {
    hex::decode(text.trim_start_matches("0x")).map_err(|_| format!("{text} is not hex"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_as_people_write_them() {
        assert_eq!(amount(12_500_000, 6), "12.5");
        assert_eq!(amount(1, 18), "0.000000000000000001");
        assert_eq!(amount(3_000_000_000_000_000_000, 18), "3");
        assert_eq!(amount(0, 6), "0");
    }

    #[test]
    fn reads_the_workers_network_configuration_and_never_echoes_it() {
        let networks = networks(
            r#"{"polygon": {"rpc_url": "http://127.0.0.1:8545", "chain_id": 31337,
                "confirmations": 2, "tokens": {"USDC": {"address": "0x5fbdb2315678afecb367f032d93f642f64180aa3"}},
                "feeds": {}}, "base": {"rpc_url": "http://n.example", "chain_id": 8453,
                "native": "ETH", "max_gas_price_gwei": 20,
                "l1_fee_oracle": "0x420000000000000000000000000000000000000F"}}"#,
        )
        .unwrap();
        assert_eq!(networks["polygon"].chain_id, 31337);
        assert_eq!(networks["polygon"].max_gas_price_gwei, 500);
        assert_eq!(networks["base"].max_gas_price_gwei, 20);
        let err =
            super::networks(r#"{"polygon": {"rpc_url": "https://KEY.example"}}"#).unwrap_err();
        assert!(!err.contains("KEY"), "{err}");
        assert_eq!((coin("polygon"), coin("base")), ("POL", "ETH"));
        // The worker's rules, not a looser copy: a configuration the worker refuses is refused.
        let refused =
            super::networks(r#"{"base": {"rpc_url": "http://n.example", "chain_id": 8453}}"#)
                .unwrap_err();
        assert!(refused.contains("l1_fee_oracle is required"), "{refused}");
    }
}
