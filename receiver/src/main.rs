//! `payrail-receiver`: the reference webhook receiver as a program.
//!
//! ```text
//! PAYRAIL_WEBHOOK_SECRET=whsec_… payrail-receiver --database shop.db --listen 127.0.0.1:3000
//! ```
//!
//! With `PAYRAIL_API_URL`, `PAYRAIL_CLIENT_ID` and `PAYRAIL_CLIENT_SECRET` it also reconciles
//! with `GET /v1/transactions` every `--reconcile-every` seconds.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use payrail::webhooks::Webhooks;
use payrail::Client;
use payrail_receiver::{Receiver, Store};

#[derive(Parser)]
#[command(version, about = "Reference receiver of Payrail webhooks")]
struct Args {
    /// The SQLite database (created if missing).
    #[arg(long, default_value = "payrail-receiver.db")]
    database: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// The endpoint's signing secret; during a rotation, the old and the new one separated by a
    /// comma.
    #[arg(
        long,
        env = "PAYRAIL_WEBHOOK_SECRET",
        hide_env_values = true,
        value_delimiter = ',',
        required = true
    )]
    secret: Vec<String>,
    /// API base URL, for reconciliation.
    #[arg(long, env = "PAYRAIL_API_URL")]
    api_url: Option<String>,
    /// API client id, for reconciliation.
    #[arg(long, env = "PAYRAIL_CLIENT_ID")]
    client_id: Option<String>,
    /// API client secret, for reconciliation.
    #[arg(long, env = "PAYRAIL_CLIENT_SECRET", hide_env_values = true)]
    client_secret: Option<String>,
    /// Seconds between reconciliations.
    #[arg(long, default_value_t = 300)]
    reconcile_every: u64,
    /// Hours a payment may take from creation to paid: reconciliation looks this far back
    /// before its checkpoint.
    #[arg(long, default_value_t = 72)]
    settle_window_hours: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    // Errors are printed as sentences (an old database's says what to do), not as Debug.
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("payrail-receiver: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut secrets = args
        .secret
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty());
    let first = secrets.next().ok_or("--secret is empty")?;
    let webhooks = secrets.fold(Webhooks::new(first), |w, s| w.also_accept(s));
    let client = match (args.api_url, args.client_id, args.client_secret) {
        (Some(url), Some(id), Some(secret)) => Some(Client::new(url, id, secret)?),
        (None, None, None) => None,
        _ => return Err("reconciliation needs PAYRAIL_API_URL, PAYRAIL_CLIENT_ID and PAYRAIL_CLIENT_SECRET together".into()),
    };
    let reconciles = client.is_some();
    let store = Store::open(&args.database)?;
    let receiver = Receiver::new(
        store,
        webhooks,
        client,
        Duration::from_secs(args.settle_window_hours * 3600),
    )?;
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    eprintln!(
        "receiving webhooks on http://{}/webhooks ({})",
        listener.local_addr()?,
        if reconciles {
            format!("reconciling every {} s", args.reconcile_every)
        } else {
            "no API credentials: not reconciling".to_owned()
        }
    );
    tokio::select! {
        served = receiver.run(listener, Some(Duration::from_secs(args.reconcile_every))) => served?,
        _ = tokio::signal::ctrl_c() => eprintln!("stopping"),
    }
    Ok(())
}
