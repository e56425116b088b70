//! The command line: its definition, and parsing it (help, version and usage errors included).

use std::io::Write;

use clap::{Args, Parser, Subcommand, ValueEnum};
use payrail::{EventType, Status};

use crate::Io;

#[derive(Parser)]
#[command(
    name = "payrail",
    version,
    about = "Work with the Payrail partner API from a terminal"
)]
pub(crate) struct Cli {
    /// API base URL (default: PAYRAIL_API_URL, then the config file).
    #[arg(long, global = true)]
    pub(crate) api_url: Option<String>,
    /// Print JSON instead of tables, for scripts.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The commands.
#[derive(Subcommand)]
pub(crate) enum Command {
    /// Save the API URL and a client's credentials in the config file (mode 0600). The client
    /// secret is read from PAYRAIL_CLIENT_SECRET, or from standard input.
    Configure(ConfigureArgs),
    /// Log in to the portal (needed by `events resend`). The password is read from
    /// PAYRAIL_PORTAL_PASSWORD, or from standard input.
    Login(LoginArgs),
    /// Transactions of your institution.
    Transactions {
        #[command(subcommand)]
        action: TransactionsCommand,
    },
    /// Merchants of your institution.
    Merchants {
        #[command(subcommand)]
        action: MerchantsCommand,
    },
    /// The events feed, and resending deliveries.
    Events {
        #[command(subcommand)]
        action: EventsCommand,
    },
    /// Forward new events to a local URL, signed with a local secret (Ctrl-C to stop).
    Listen(ListenArgs),
    /// Sandbox: create a checkout for a merchant and drive it to an event.
    Trigger(TriggerArgs),
}

/// `payrail configure`.
#[derive(Args)]
pub(crate) struct ConfigureArgs {
    /// The API client id, from the portal.
    #[arg(long)]
    pub(crate) client_id: String,
}

/// `payrail login`.
#[derive(Args)]
pub(crate) struct LoginArgs {
    /// The portal user's e-mail address.
    #[arg(long)]
    pub(crate) email: String,
}

/// `payrail transactions …`.
#[derive(Subcommand)]
pub(crate) enum TransactionsCommand {
    /// List transactions, newest first.
    List(TransactionsListArgs),
    /// One transaction.
    Get(GetArgs),
}

/// `payrail transactions list`.
#[derive(Args)]
pub(crate) struct TransactionsListArgs {
    /// Only this status.
    #[arg(long, value_parser = parse_status)]
    pub(crate) status: Option<Status>,
    /// Only this merchant's.
    #[arg(long)]
    pub(crate) merchant: Option<i64>,
    /// Only this order's (`external_reference`).
    #[arg(long)]
    pub(crate) reference: Option<String>,
    /// Created at or after (a date, a date-time with offset, or Unix seconds).
    #[arg(long)]
    pub(crate) created_after: Option<String>,
    /// Created before.
    #[arg(long)]
    pub(crate) created_before: Option<String>,
    #[command(flatten)]
    pub(crate) limit: Limit,
}

/// `payrail merchants …`.
#[derive(Subcommand)]
pub(crate) enum MerchantsCommand {
    /// List merchants, newest first.
    List(MerchantsListArgs),
    /// One merchant.
    Get(GetArgs),
}

/// `payrail merchants list`.
#[derive(Args)]
pub(crate) struct MerchantsListArgs {
    /// Only the merchant with your reference.
    #[arg(long)]
    pub(crate) reference: Option<String>,
    #[command(flatten)]
    pub(crate) limit: Limit,
}

/// `payrail events …`.
#[derive(Subcommand)]
pub(crate) enum EventsCommand {
    /// List events, newest first.
    List(EventsListArgs),
    /// Deliver an event again to its endpoint (a delivery id from the portal's log, `dlv_…`);
    /// needs `payrail login`.
    Resend(ResendArgs),
}

/// `payrail events list`.
#[derive(Args)]
pub(crate) struct EventsListArgs {
    /// Only this type.
    #[arg(long = "type", value_parser = parse_event_type)]
    pub(crate) kind: Option<EventType>,
    /// Only this transaction's.
    #[arg(long)]
    pub(crate) transaction: Option<i64>,
    #[command(flatten)]
    pub(crate) limit: Limit,
}

/// `payrail events resend`.
#[derive(Args)]
pub(crate) struct ResendArgs {
    /// The delivery.
    pub(crate) delivery: String,
}

/// `get` of one transaction or merchant.
#[derive(Args)]
pub(crate) struct GetArgs {
    /// Its id.
    pub(crate) id: i64,
}

/// `--limit`, of every `list`.
#[derive(Args)]
pub(crate) struct Limit {
    /// How many to show.
    #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub(crate) limit: u64,
}

impl Limit {
    /// The page size to read with: the limit, up to the API's 100.
    pub(crate) fn page_size(&self) -> u32 {
        self.limit.min(100) as u32
    }
}

/// `payrail listen`.
#[derive(Args)]
pub(crate) struct ListenArgs {
    /// Where to POST each event, e.g. http://localhost:3000/webhooks.
    #[arg(long, required_unless_present = "print_secret")]
    pub(crate) forward_to: Option<String>,
    /// How often to read the events feed, in milliseconds.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(200..=60_000))]
    pub(crate) interval_ms: u64,
    /// Print the local signing secret (made and saved on first use) and exit: give it to the
    /// receiver before forwarding starts.
    #[arg(long)]
    pub(crate) print_secret: bool,
}

/// `payrail trigger`.
#[derive(Args)]
pub(crate) struct TriggerArgs {
    /// The event to produce.
    pub(crate) event: TriggerEvent,
    /// The merchant (default: the first that can take payments).
    #[arg(long)]
    pub(crate) merchant: Option<i64>,
    /// The order amount.
    #[arg(long, default_value = "25.00")]
    pub(crate) amount: String,
    /// The order currency.
    #[arg(long, default_value = "EUR")]
    pub(crate) currency: String,
    /// The order id (default: a new `trigger-…` reference).
    #[arg(long)]
    pub(crate) reference: Option<String>,
    /// Where the checkout returns; it must be one of the merchant's return origins
    /// (default: the API's own origin, which the demo merchants allow).
    #[arg(long)]
    pub(crate) redirect_url: Option<String>,
}

/// The events `payrail trigger` produces.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TriggerEvent {
    #[value(name = "payment.succeeded")]
    Succeeded,
    #[value(name = "payment.paid")]
    Paid,
    #[value(name = "payment.refunded")]
    Refunded,
}

impl TriggerEvent {
    /// The event's type name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            TriggerEvent::Succeeded => "payment.succeeded",
            TriggerEvent::Paid => "payment.paid",
            TriggerEvent::Refunded => "payment.refunded",
        }
    }
}

fn parse_status(text: &str) -> Result<Status, String> {
    text.parse().map_err(|_| {
        let all: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
        format!("the statuses are {}", all.join(", "))
    })
}

fn parse_event_type(text: &str) -> Result<EventType, String> {
    EventType::parse(text).ok_or_else(|| {
        let all: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
        format!("the event types are {}", all.join(", "))
    })
}

/// Parses the command line `args` (program name first). Help and the version go to `out`
/// (exit code 0), usage errors to `err` (exit code 2); either way the command ends with the
/// code answered.
pub(crate) fn parse(args: Vec<String>, io: &mut Io) -> Result<Cli, i32> {
    Cli::try_parse_from(args).map_err(|err| {
        let code = if err.use_stderr() { 2 } else { 0 };
        let text = err.render().to_string();
        let _ = if code == 0 {
            io.out.write_all(text.as_bytes())
        } else {
            io.err.write_all(text.as_bytes())
        };
        code
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_checked_before_anything_runs() {
        for bad in [
            vec!["payrail", "transactions", "list", "--status", "lost"],
            vec!["payrail", "trigger", "payment.lost"],
            vec!["payrail", "listen"],
            vec![
                "payrail",
                "listen",
                "--forward-to",
                "x",
                "--interval-ms",
                "5",
            ],
        ] {
            assert!(Cli::try_parse_from(&bad).is_err(), "{bad:?}");
        }
        assert!(Cli::try_parse_from(["payrail", "trigger", "payment.paid", "--json"]).is_ok());
    }
}
