//! `cargo run -p xtask -- <command>`: local data and credential commands.
//!
//! ```text
//! seed          [--persist-to DIR] [--base-url URL] [--credentials-out FILE]
//! bulk-data     --transactions N [--persist-to DIR] [--seed N]
//! rotate-secret CLIENT_ID (--local [--persist-to DIR] | --remote)
//! add-admin     INSTITUTION_ID EMAIL (--local [--persist-to DIR] | --remote)
//! add-institution NAME ADMIN_EMAIL (--local [--persist-to DIR] | --remote)
//! set-psp-fee INSTITUTION_ID BASIS_POINTS (--local [--persist-to DIR] | --remote)
//! seal-treasury-key   (the key's 64 hex digits on stdin; PAYRAIL_ENCRYPTION_KEY in the
//!                      environment; prints the value of the PAYRAIL_TREASURY_KEY secret)
//! reconcile     (--local [--persist-to DIR] | --remote [--url URL]) [--chains JSON]
//!               [--treasury ADDRESS] [--xpub XPUB]   (the books against the chain; exits 1 on
//!               any drift; remotely, the books of the institutions held in their objects are
//!               read through the worker at URL, the operator's token from PAYRAIL_OPERATOR_TOKEN)
//! move          INSTITUTION_ID… --url URL   (each institution's money moved into its own
//!               object, one at a time, by the worker at URL; the operator's token from
//!               PAYRAIL_OPERATOR_TOKEN; stops at the first that does not move)
//! sweep         (--local [--persist-to DIR] | --remote [--url URL]) [--treasury 0x…]
//!               [--chains FILE] [--wait SECONDS]   (the custody mnemonic on stdin; the networks
//!               from PAYRAIL_CHAINS unless --chains, the treasury from PAYRAIL_TREASURY_ADDRESS
//!               unless --treasury, locally else from what scripts/dev wrote; PAYRAIL_EVM_XPUB,
//!               when known, must be the mnemonic's; remotely, the deposits of the institutions
//!               held in their objects are read through the worker at URL, the operator's token
//!               from PAYRAIL_OPERATOR_TOKEN)
//! screening-load FILE --url URL [--source NAME] [--replace]   (the EVM addresses of OFAC's SDN
//!               list, FILE in its classic sdn.xml format, listed as sanctioned by the worker at
//!               URL under NAME, "OFAC SDN" unless said; --replace also takes off NAME's
//!               addresses the file no longer names; the operator's token from
//!               PAYRAIL_OPERATOR_TOKEN)
//! screening-list --url URL [--removed]   (the worker's sanctions list at URL, newest first, a
//!               line per entry: address, source, listed on, entry; --removed also shows the
//!               entries taken off, with when and by whom; the operator's token from
//!               PAYRAIL_OPERATOR_TOKEN)
//! screening-remove ADDRESS --source NAME --url URL   (takes ADDRESS off the list NAME at the
//!               worker at URL, kept for the record; exits 1 when NAME does not list it; the
//!               operator's token from PAYRAIL_OPERATOR_TOKEN)
//! float-move    --from NETWORK --to NETWORK --amount USDC --reference REF --url URL
//!               [--requested-by NAME]   (the treasury's USDC moved between networks with CCTP
//!               by the worker at URL: its burn is sent at once, the mint follows from the cron;
//!               the same REF again answers the same move; the operator's token from
//!               PAYRAIL_OPERATOR_TOKEN)
//! float-moves   --url URL [ID]   (the worker's float moves, newest first, or the one ID: state,
//!               amount and route, the fee CCTP kept, why one waits)
//! attestation   --listen 127.0.0.1:PORT --transmitter DOMAIN=0xADDRESS… [--fast-fee-bps N]
//!               --chain DOMAIN=RPC_URL,CONFIRMATIONS[,FAST_CONFIRMATIONS]…   (a local stand-in
//!               for Circle's CCTP V2 attestation service, answering
//!               GET /v2/messages/DOMAIN?transactionHash=0x… as Iris does once the transaction has
//!               its confirmations, and its fee quote GET /v2/burn/USDC/fees/SOURCE/DESTINATION;
//!               the attesters' keys from PAYRAIL_CCTP_ATTESTER_KEYS,
//!               comma-separated; serves until stopped)
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use rusqlite::Connection;
use xtask::{attestation, demo, float, localdb, moves, reconcile, sdn, secrets, sweep};
use zeroize::Zeroizing;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("seed") => seed(&args[1..]),
        Some("bulk-data") => bulk_data(&args[1..]),
        Some("rotate-secret") => rotate_secret(&args[1..]),
        Some("add-admin") => add_admin(&args[1..]),
        Some("add-institution") => add_institution(&args[1..]),
        Some("seal-treasury-key") => seal_treasury_key(),
        Some("set-psp-fee") => set_psp_fee(&args[1..]),
        Some("reconcile") => reconcile(&args[1..]),
        Some("sweep") => sweep(&args[1..]),
        Some("move") => move_institutions(&args[1..]),
        Some("screening-load") => screening_load(&args[1..]),
        Some("screening-list") => screening_list(&args[1..]),
        Some("screening-remove") => screening_remove(&args[1..]),
        Some("attestation") => attestation(&args[1..]),
        Some("float-move") => float_move(&args[1..]),
        Some("float-moves") => float_moves(&args[1..]),
        _ => Err(
            "usage: xtask seed | bulk-data --transactions N | rotate-secret CLIENT_ID --local|--remote \
             | add-admin INSTITUTION_ID EMAIL --local|--remote \
             | add-institution NAME ADMIN_EMAIL --local|--remote | seal-treasury-key | set-psp-fee INSTITUTION_ID BASIS_POINTS --local|--remote \
             | reconcile --local|--remote [--url URL] [--chains JSON] [--treasury ADDRESS] [--xpub XPUB] \
             | sweep --local|--remote [--url URL] [--treasury 0x…] (the custody mnemonic on stdin) \
             | move INSTITUTION_ID… --url URL (PAYRAIL_OPERATOR_TOKEN in the environment) \
             | screening-load FILE --url URL [--source NAME] [--replace] \
             | screening-list --url URL [--removed] \
             | screening-remove ADDRESS --source NAME --url URL \
             | float-move --from NETWORK --to NETWORK --amount USDC --reference REF --url URL \
             | float-moves --url URL [ID] \
             | attestation --listen 127.0.0.1:PORT --chain DOMAIN=RPC_URL,CONFIRMATIONS[,FAST_CONFIRMATIONS]… \
             --transmitter DOMAIN=0xADDRESS… [--fast-fee-bps N] (PAYRAIL_CCTP_ATTESTER_KEYS in the environment) \
             (screening-*, float-*: PAYRAIL_OPERATOR_TOKEN in the environment)"
                .to_owned(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The local stand-in for Circle's CCTP V2 attestation service, until stopped. The attesters'
/// keys from the environment only: a command line is kept by the shell's history.
fn attestation(args: &[String]) -> Result<(), String> {
    let keys = std::env::var(attestation::KEYS_VARIABLE)
        .ok()
        .map(Zeroizing::new);
    attestation::run(args, keys)
}

/// Moves institutions' money into their objects through the worker's operator API.
fn move_institutions(args: &[String]) -> Result<(), String> {
    let opts = Options(args.to_vec());
    let url = opts
        .value("--url")?
        .ok_or("--url: the worker's base URL (scripts/dev's, or production's) is required")?;
    let ids = args
        .iter()
        .take_while(|a| !a.starts_with("--"))
        .map(|a| {
            a.parse::<i64>()
                .map_err(|_| format!("{a:?} is not an institution id"))
        })
        .collect::<Result<Vec<i64>, String>>()?;
    if ids.is_empty() {
        return Err("name the institutions to move, by id".to_owned());
    }
    // The token from the environment only: a command line is kept by the shell's history.
    let token = std::env::var("PAYRAIL_OPERATOR_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .ok_or("PAYRAIL_OPERATOR_TOKEN: the operator's token is required")?;
    let done = moves::run(&url, &token, &ids, &mut std::io::stdout())?;
    if done.len() == ids.len() && done.iter().all(|m| m.moved) {
        Ok(())
    } else {
        Err("not every institution moved (see above); the rest work from D1 as before".to_owned())
    }
}

/// Lists the EVM addresses of an OFAC SDN file as sanctioned through the worker's operator API,
/// in one request (the API's bound is [`sdn::MAX_PER_REQUEST`]: a larger list is refused, not
/// split, since each `--replace` request would take off the others' addresses).
fn screening_load(args: &[String]) -> Result<(), String> {
    let opts = Options(args.to_vec());
    let file = args
        .first()
        .filter(|a| !a.starts_with("--"))
        .ok_or("screening-load needs the SDN FILE (OFAC's sdn.xml)")?;
    let url = opts
        .value("--url")?
        .ok_or("--url: the worker's base URL (scripts/dev's, or production's) is required")?;
    let source = opts
        .value("--source")?
        .unwrap_or_else(|| "OFAC SDN".to_owned());
    if source.trim().is_empty() {
        return Err("--source must name the list".to_owned());
    }
    let replace = opts.flag("--replace");
    // The token from the environment only: a command line is kept by the shell's history.
    let token = std::env::var("PAYRAIL_OPERATOR_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .ok_or("PAYRAIL_OPERATOR_TOKEN: the operator's token is required")?;
    let load = sdn::read(std::path::Path::new(file))?;
    let loaded = sdn::send(&url, &token, &source, replace, &load)?;
    println!(
        "loaded {} addresses from {source} published {}: {} added, {} already listed, {} removed",
        load.entries.len(),
        load.published,
        loaded.added,
        loaded.kept,
        loaded.removed
    );
    Ok(())
}

/// Prints the operator's sanctions list as the worker shows it: a line per entry, then a count.
fn screening_list(args: &[String]) -> Result<(), String> {
    let opts = Options(args.to_vec());
    let url = opts
        .value("--url")?
        .ok_or("--url: the worker's base URL (scripts/dev's, or production's) is required")?;
    let removed = opts.flag("--removed");
    let entries = sdn::list(&url, &operator_token()?, removed)?;
    print!("{}", sdn::table(&entries));
    if entries.len() >= sdn::LIST_MAX {
        eprintln!(
            "the worker shows at most {} entries, newest first: older ones may be left out",
            sdn::LIST_MAX
        );
    }
    Ok(())
}

/// Takes one address off one list through the worker's operator API (the worker keeps the entry,
/// marked taken off); fails with the worker's message when the list has no such entry.
fn screening_remove(args: &[String]) -> Result<(), String> {
    let opts = Options(args.to_vec());
    let address = args
        .first()
        .filter(|a| !a.starts_with("--"))
        .ok_or("screening-remove needs the ADDRESS to take off (0x and 40 hex digits)")?;
    let source = opts
        .value("--source")?
        .ok_or("--source NAME: the list to take the address off (e.g. \"OFAC SDN\") is required")?;
    let url = opts
        .value("--url")?
        .ok_or("--url: the worker's base URL (scripts/dev's, or production's) is required")?;
    sdn::remove(&url, &operator_token()?, address, &source)?;
    println!(
        "took {} off {} (kept for the record)",
        address.trim().to_ascii_lowercase(),
        source.trim()
    );
    Ok(())
}

/// Moves the treasury's USDC between networks through the worker's operator API and prints the
/// move.
fn float_move(args: &[String]) -> Result<(), String> {
    let opts = Options(args.to_vec());
    let required = |name: &str, what: &str| -> Result<String, String> {
        opts.value(name)?
            .ok_or_else(|| format!("{name}: {what} is required"))
    };
    let url = required(
        "--url",
        "the worker's base URL (scripts/dev's, or production's)",
    )?;
    let (from, to) = (
        required("--from", "the network the USDC leaves")?,
        required("--to", "the network it arrives on")?,
    );
    let amount = required("--amount", "the USDC to move (e.g. 2500.00)")?;
    let reference = required(
        "--reference",
        "a reference of yours (the same again is the same move)",
    )?;
    let requested_by = opts.value("--requested-by")?;
    let ask = float::Ask {
        from: &from,
        to: &to,
        amount: &amount,
        reference: &reference,
        requested_by: requested_by.as_deref(),
    };
    let (made, new) = float::make(&url, &operator_token()?, &ask)?;
    if !new {
        println!("the reference {reference:?} already made this move:");
    }
    print!("{}", float::table(&[made]));
    Ok(())
}

/// Prints the worker's float moves, or one.
fn float_moves(args: &[String]) -> Result<(), String> {
    let opts = Options(args.to_vec());
    let url = opts
        .value("--url")?
        .ok_or("--url: the worker's base URL (scripts/dev's, or production's) is required")?;
    let id = args
        .first()
        .filter(|a| !a.starts_with("--"))
        .map(String::as_str);
    let moves = float::read(&url, &operator_token()?, id)?;
    print!("{}", float::table(&moves));
    Ok(())
}

/// The operator's token, from the environment only: a command line is kept by the shell's
/// history.
fn operator_token() -> Result<String, String> {
    std::env::var("PAYRAIL_OPERATOR_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| "PAYRAIL_OPERATOR_TOKEN: the operator's token is required".to_owned())
}

/// Named options (`--name value` or a bare `--flag`) after positional arguments.
struct Options(Vec<String>);

impl Options {
    fn value(&self, name: &str) -> Result<Option<String>, String> {
        match self.0.iter().position(|a| a == name) {
            None => Ok(None),
            Some(i) => self
                .0
                .get(i + 1)
                .filter(|v| !v.starts_with("--"))
                .cloned()
                .map(Some)
                .ok_or_else(|| format!("{name} needs a value")),
        }
    }

    fn flag(&self, name: &str) -> bool {
        self.0.iter().any(|a| a == name)
    }

    fn persist_to(&self) -> Result<PathBuf, String> {
        Ok(self
            .value("--persist-to")?
            .map_or_else(|| PathBuf::from(".wrangler/state"), PathBuf::from))
    }
}

fn open(persist_to: &std::path::Path) -> Result<Connection, String> {
    let file = localdb::database_file(persist_to)?;
    Connection::open(&file).map_err(|e| format!("{}: {e}", file.display()))
}

fn seed(args: &[String]) -> Result<(), String> {
    let opts = Options(args.to_vec());
    let mut conn = open(&opts.persist_to()?)?;
    let base_url = opts
        .value("--base-url")?
        .unwrap_or_else(|| "http://127.0.0.1:8787".to_owned());
    if demo::is_seeded(&conn).map_err(|e| e.to_string())? {
        println!("demo data already loaded");
        return Ok(());
    }
    let credentials = demo::seed(&mut conn, &base_url).map_err(|e| e.to_string())?;
    if let Some(out) = opts.value("--credentials-out")? {
        let json = serde_json::to_string_pretty(&credentials).map_err(|e| e.to_string())?;
        std::fs::write(&out, json + "\n").map_err(|e| format!("{out}: {e}"))?;
    }
    println!("demo data loaded");
    Ok(())
}

fn bulk_data(args: &[String]) -> Result<(), String> {
    let opts = Options(args.to_vec());
    let count: usize = opts
        .value("--transactions")?
        .ok_or("--transactions N is required")?
        .parse()
        .map_err(|_| "--transactions must be a number")?;
    let seed: u64 = opts
        .value("--seed")?
        .map_or(Ok(7), |s| s.parse())
        .map_err(|_| "--seed must be a number")?;
    let mut conn = open(&opts.persist_to()?)?;
    let started = std::time::Instant::now();
    demo::bulk(&mut conn, count, seed).map_err(|e| e.to_string())?;
    let total: i64 = conn
        .query_row("SELECT count(*) FROM transactions", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    println!(
        "added {count} transactions in {:.1} s; {total} in all",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn target(opts: &Options) -> Result<secrets::Target, String> {
    match (opts.flag("--local"), opts.flag("--remote")) {
        (true, false) => Ok(secrets::Target::Local(opts.persist_to()?)),
        (false, true) => Ok(secrets::Target::Remote),
        _ => Err("say --local or --remote".to_owned()),
    }
}

fn add_admin(args: &[String]) -> Result<(), String> {
    let (institution, email) = match args {
        [institution, email, ..] if !institution.starts_with("--") && !email.starts_with("--") => {
            (institution, email)
        }
        _ => return Err("add-admin needs INSTITUTION_ID EMAIL".to_owned()),
    };
    let institution: i64 = institution
        .parse()
        .map_err(|_| "INSTITUTION_ID must be a number")?;
    let password = secrets::add_admin(institution, email, &target(&Options(args[2..].to_vec()))?)?;
    // The password goes to stdout once; only its hash is stored.
    println!("{password}");
    eprintln!("added portal admin {email}; give them this password over a safe channel");
    Ok(())
}

fn add_institution(args: &[String]) -> Result<(), String> {
    let (name, email) = match args {
        [name, email, ..] if !name.starts_with("--") && !email.starts_with("--") => (name, email),
        _ => return Err("add-institution needs NAME ADMIN_EMAIL".to_owned()),
    };
    let target = target(&Options(args[2..].to_vec()))?;
    let (id, password) = secrets::add_institution(name, email, &target)?;
    // The password goes to stdout once; only its hash is stored.
    println!("{password}");
    eprintln!(
        "added institution {id} ({name}) with portal admin {email}; give them this password over \
         a safe channel.\nNext: they log in at <base_url>/portal/, create an API client \
         (Developers), onboard a merchant (Merchants: details, onboarding, a settlement wallet, a \
         return origin) and add a webhook endpoint (Webhooks)."
    );
    Ok(())
}

fn rotate_secret(args: &[String]) -> Result<(), String> {
    let client_id = args
        .first()
        .filter(|a| !a.starts_with("--"))
        .ok_or("rotate-secret needs a CLIENT_ID")?;
    let secret = secrets::rotate(client_id, &target(&Options(args[1..].to_vec()))?)?;
    // The secret goes to stdout once; it is stored nowhere.
    println!("{secret}");
    eprintln!(
        "rotated {client_id}: the old secret and every token issued under it stop working now"
    );
    Ok(())
}

/// Reads the treasury key from stdin (never from the command line, where the shell's history
/// and the process list would keep it) and prints it sealed.
fn seal_treasury_key() -> Result<(), String> {
    let encryption_key = std::env::var("PAYRAIL_ENCRYPTION_KEY")
        .map_err(|_| "PAYRAIL_ENCRYPTION_KEY is not set".to_owned())?;
    let mut key = String::new();
    std::io::stdin()
        .read_line(&mut key)
        .map_err(|e| format!("read the key from stdin: {e}"))?;
    println!("{}", secrets::seal_treasury_key(&encryption_key, &key)?);
    Ok(())
}

fn set_psp_fee(args: &[String]) -> Result<(), String> {
    let (institution, bps) = match args {
        [institution, bps, ..] if !institution.starts_with("--") && !bps.starts_with("--") => {
            (institution, bps)
        }
        _ => return Err("set-psp-fee needs INSTITUTION_ID BASIS_POINTS".to_owned()),
    };
    let institution: i64 = institution
        .parse()
        .map_err(|_| "INSTITUTION_ID must be a number")?;
    let bps: i64 = bps.parse().map_err(|_| "BASIS_POINTS must be a number")?;
    secrets::set_psp_fee(institution, bps, &target(&Options(args[2..].to_vec()))?)?;
    eprintln!("institution {institution} now pays {bps} basis points of each settled payment");
    Ok(())
}

/// The books against the chain: prints every figure, and fails naming any drift.
fn reconcile(args: &[String]) -> Result<(), String> {
    let opts = Options(args.to_vec());
    let target = target(&opts)?;
    let local = match &target {
        secrets::Target::Local(persist_to) => reconcile::LocalSettings::read(persist_to)?,
        secrets::Target::Remote => None,
    }
    .unwrap_or_default();
    // An argument, else the environment, else (locally) what scripts/dev wrote.
    let setting = |option: &str, variable: &str, written: Option<String>| {
        Ok::<_, String>(
            opts.value(option)?
                .or_else(|| {
                    std::env::var(variable)
                        .ok()
                        .filter(|v| !v.trim().is_empty())
                })
                .or(written),
        )
    };
    let chains = setting(
        "--chains",
        "PAYRAIL_CHAINS",
        local.chains.as_ref().map(ToString::to_string),
    )?
    .ok_or("no networks: give --chains JSON or set PAYRAIL_CHAINS")?;
    let treasury = setting("--treasury", "PAYRAIL_TREASURY_ADDRESS", local.treasury)?;
    let xpub = setting("--xpub", "PAYRAIL_EVM_XPUB", local.xpub)?;
    let config = reconcile::Config::new(&chains, treasury.as_deref(), xpub.as_deref())?;
    if config.treasury.is_none() {
        eprintln!("no treasury address (--treasury or PAYRAIL_TREASURY_ADDRESS): not compared");
    }
    let books = books_of(&target, &opts)?;
    let report = reconcile::reconcile(&books, &config)?;
    print!("{}", report.render());
    if report.clean() {
        Ok(())
    } else {
        Err("the books drift from the chain (see above)".to_owned())
    }
}

/// Where an operator command reads the books: D1, and (remotely through the worker at `--url`)
/// the institutions held in their objects; locally every object's file is read.
fn books_of(target: &secrets::Target, opts: &Options) -> Result<reconcile::Books, String> {
    Ok(match (target, opts.value("--url")?) {
        (secrets::Target::Remote, Some(url)) => {
            // The token from the environment only: a command line is kept by the shell's history.
            let token = std::env::var("PAYRAIL_OPERATOR_TOKEN")
                .ok()
                .filter(|t| !t.trim().is_empty())
                .ok_or("--url needs the operator's token in PAYRAIL_OPERATOR_TOKEN")?;
            reconcile::Books::Remote(Some(reconcile::Operator { url, token }))
        }
        (secrets::Target::Local(_), Some(_)) => {
            return Err("--url is for --remote: locally every object's file is read".to_owned())
        }
        (target, None) => reconcile::Books::of(target),
    })
}

/// The custody sweep: reads the custody mnemonic from stdin (never the command line, where the
/// shell's history and the process list would keep it; wiped once read) and sweeps every deposit
/// whose watch has ended, and what the books hold at merchants' top-up addresses, into the
/// treasury.
fn sweep(args: &[String]) -> Result<(), String> {
    use std::io::{IsTerminal, Read};
    let opts = Options(args.to_vec());
    let target = target(&opts)?;
    let local = match &target {
        secrets::Target::Local(persist_to) => reconcile::LocalSettings::read(persist_to)?,
        secrets::Target::Remote => None,
    }
    .unwrap_or_default();
    let env = |variable: &str| {
        std::env::var(variable)
            .ok()
            .filter(|v| !v.trim().is_empty())
    };
    // An argument, else the environment, else (locally) what scripts/dev wrote.
    let treasury = opts
        .value("--treasury")?
        .or_else(|| env("PAYRAIL_TREASURY_ADDRESS"))
        .or(local.treasury)
        .ok_or("say --treasury 0x… (the treasury's address, as the portal's overview shows it)")?;
    let chains = match opts.value("--chains")? {
        Some(file) => Some(std::fs::read_to_string(&file).map_err(|e| format!("{file}: {e}"))?),
        None => env("PAYRAIL_CHAINS").or(local.chains.as_ref().map(ToString::to_string)),
    }
    .ok_or("set PAYRAIL_CHAINS (the worker's networks) or say --chains FILE")?;
    let wait = opts
        .value("--wait")?
        .map_or(Ok(300), |s| s.parse::<u64>())
        .map_err(|_| "--wait must be a number of seconds")?;
    let mut mnemonic = Zeroizing::new(String::new());
    let stdin = std::io::stdin();
    let read = if stdin.is_terminal() {
        // Typed or pasted: one line, not echoed anywhere else.
        eprint!("the custody mnemonic: ");
        stdin.read_line(&mut mnemonic)
    } else {
        stdin.lock().read_to_string(&mut mnemonic)
    };
    read.map_err(|e| format!("read the custody mnemonic from stdin: {e}"))?;
    let books = books_of(&target, &opts)?;
    let options = sweep::Options {
        books,
        target,
        chains,
        treasury,
        xpub: env("PAYRAIL_EVM_XPUB").or(local.xpub),
        wait: std::time::Duration::from_secs(wait),
        now: sweep::unix_now(),
    };
    let summary = sweep::run(&mnemonic, &options, &mut std::io::stdout())?;
    drop(mnemonic);
    if summary.refused > 0 {
        return Err(format!(
            "{} deposits or networks were refused",
            summary.refused
        ));
    }
    Ok(())
}
