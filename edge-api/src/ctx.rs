//! The context of one event (a request, a cron run, a queue batch): the bindings, the database,
//! the clock, the mode and the keys, built once at the entry point and handed down. Nothing
//! below the entry points reads the environment itself, so no layer reaches back up for it.

use std::cell::OnceCell;
use std::rc::Rc;

use base64::Engine;
use payrail_evm::chains::Chains;
use worker::Env;

use crate::error::{ApiError, OrInternal};
use crate::sql::Db;

/// How long a settlement wallet waits after it is set or changed before settlements use it,
/// when `PAYRAIL_WALLET_COOLOFF_SECONDS` does not say.
pub const DEFAULT_WALLET_COOL_OFF_SECONDS: i64 = 24 * 3600;

/// Whether the deployment takes real payments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Real money: no sandbox controls.
    Production,
    /// `PAYRAIL_MODE=sandbox` (the local default): lifecycle controls for tests and demos.
    Sandbox,
}

/// Everything an event's handlers need from the platform.
pub struct Ctx {
    /// The bindings and variables, read only through the methods below.
    env: Env,
    /// The database (D1), through the one executor.
    pub db: Db,
    /// Production or sandbox.
    pub mode: Mode,
    /// The caller's address (`CF-Connecting-IP`), for throttling; `None` outside requests.
    caller_address: Option<String>,
    /// `PAYRAIL_CHAINS` as parsed, once per event (shared with the context's copies).
    chains: Rc<OnceCell<Result<Option<Rc<Chains>>, String>>>,
}

/// The queue webhook deliveries travel on.
pub const DELIVERY_QUEUE: &str = "DELIVERIES";

impl Ctx {
    /// The delivery queue's binding.
    pub fn delivery_queue(&self) -> Result<worker::Queue, ApiError> {
        self.env.queue(DELIVERY_QUEUE).or_internal("bind queue")
    }

    /// The send-email binding `EMAIL` and the sender `PAYRAIL_NOTIFY_FROM`, when both are
    /// configured.
    pub fn email(&self) -> Option<(worker::SendEmail, String)> {
        let binding = self.env.get_binding::<worker::SendEmail>("EMAIL").ok()?;
        Some((binding, self.var("PAYRAIL_NOTIFY_FROM")?))
    }

    /// Where reconciliation drift is e-mailed (`PAYRAIL_OPERATOR_EMAIL`: one address, or several
    /// separated by commas), when configured.
    pub fn operator_emails(&self) -> Vec<String> {
        self.var("PAYRAIL_OPERATOR_EMAIL")
            .map(|text| {
                text.split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A way to bind the database again later, for work that outlives this borrow (a response
    /// that streams).
    pub fn database_binder(&self) -> impl Fn() -> worker::Result<Db> + 'static {
        let env = self.env.clone();
        move || env.d1("DB").map(Db::Primary)
    }

    /// Binds the database and reads the mode; the rest of the configuration is read when a
    /// handler needs it.
    pub fn new(env: Env) -> Result<Ctx, ApiError> {
        let db = Db::Primary(env.d1("DB").or_internal("bind D1")?);
        let var = |name: &str| env.var(name).ok().map(|v| v.to_string());
        let mode = match var("PAYRAIL_MODE").as_deref() {
            Some("sandbox") => Mode::Sandbox,
            _ => Mode::Production,
        };
        Ok(Ctx {
            env,
            db,
            mode,
            caller_address: None,
            chains: Rc::default(),
        })
    }

    /// The same context with its reads served through a D1 session that starts on the primary
    /// (`first-primary`): the page's first read sees every write before it (an admin's own
    /// change, after its redirect), and its later reads may come from a replica at least as new.
    /// What the portal's read pages use; writes still go to the primary (D1 sends a session's
    /// writes there), and money decisions never go through one. Its database's bookmark says
    /// where its reads stood.
    pub fn reading_through_session(&self) -> Result<Ctx, ApiError> {
        let Db::Primary(primary) = &self.db else {
            return Err(ApiError::internal(
                "open a read session",
                "already reading through one",
            ));
        };
        let session = primary
            .with_session(Some("first-primary"))
            .or_internal("open a read session")?;
        Ok(Ctx {
            env: self.env.clone(),
            db: Db::Session(session),
            mode: self.mode,
            caller_address: self.caller_address.clone(),
            chains: self.chains.clone(),
        })
    }

    /// The same context for a request from `address`.
    pub fn with_caller_address(mut self, address: Option<String>) -> Ctx {
        self.caller_address = address;
        self
    }

    /// The operator's token (`PAYRAIL_OPERATOR_TOKEN`), when configured: the operator's API
    /// exists only then.
    pub fn operator_token(&self) -> Option<String> {
        self.secret("PAYRAIL_OPERATOR_TOKEN")
    }

    /// The object holding `institution`'s money (`crate::objects`), reached through the
    /// worker's binding.
    pub fn institution_object(&self, institution: i64) -> Result<Db, ApiError> {
        let stub = self
            .env
            .durable_object(crate::objects::BINDING)
            .and_then(|namespace| namespace.get_by_name(&crate::objects::name(institution)))
            .or_internal("bind the institution's object")?;
        Ok(Db::Object(crate::sql::Object::new(stub, institution)))
    }

    /// Whether D1 work is counted and reported (`PAYRAIL_METER=1`; see `sql::meter`). Off unless
    /// set, and never set in the production configuration.
    pub fn metered(&self) -> bool {
        self.var("PAYRAIL_METER").as_deref() == Some("1")
    }

    /// Whether sandbox controls exist.
    pub fn sandbox(&self) -> bool {
        self.mode == Mode::Sandbox
    }

    /// The caller's address, or `unknown` (throttles then share one bucket).
    pub fn caller_address(&self) -> &str {
        self.caller_address.as_deref().unwrap_or("unknown")
    }

    /// Current time in Unix seconds (`SystemTime` is unavailable on wasm32).
    pub fn now(&self) -> i64 {
        (js_sys::Date::now() / 1000.0).floor() as i64
    }

    /// A secret (production) or, for local runs, a plain variable; empty reads as unset. Read
    /// when needed rather than for every event: the partner API's hot paths need none of them.
    fn secret(&self, name: &str) -> Option<String> {
        self.env
            .secret(name)
            .map(|s| s.to_string())
            .ok()
            .filter(|text| !text.trim().is_empty())
            .or_else(|| self.var(name))
    }

    /// A plain variable; empty reads as unset.
    fn var(&self, name: &str) -> Option<String> {
        self.env
            .var(name)
            .ok()
            .map(|v| v.to_string())
            .filter(|text| !text.trim().is_empty())
    }

    /// The extended public key deposit addresses on EVM networks derive from
    /// (`PAYRAIL_EVM_XPUB`), when configured. Public: custody keeps the private keys.
    pub fn evm_xpub(&self) -> Option<String> {
        self.secret("PAYRAIL_EVM_XPUB")
    }

    /// The EVM networks as `PAYRAIL_CHAINS` configures them (JSON; a secret, as URLs may carry
    /// keys), parsed by the one parser the operator's tools share, once per event: `None` when
    /// it is not set; a configuration that does not parse is a logged 500 naming the problem
    /// (never the URLs).
    pub fn chains(&self) -> Result<Option<Rc<Chains>>, ApiError> {
        self.chains
            .get_or_init(|| {
                self.secret("PAYRAIL_CHAINS")
                    .map(|text| payrail_evm::chains::parse(&text).map(Rc::new))
                    .transpose()
            })
            .clone()
            .map_err(|why| ApiError::internal("PAYRAIL_CHAINS", why))
    }

    /// Sandbox on a local development node only: an account the node signs for
    /// (`PAYRAIL_DEMO_WALLET`), which the hosted page's sandbox panel pays from.
    pub fn demo_wallet(&self) -> Option<String> {
        self.var("PAYRAIL_DEMO_WALLET")
    }

    /// The treasury's signing key, sealed under the encryption key (`PAYRAIL_TREASURY_KEY`, a
    /// secret): it signs settlements and refunds. Opened only to sign, never logged or shown.
    pub fn treasury_key(&self) -> Option<String> {
        self.secret("PAYRAIL_TREASURY_KEY")
    }

    /// The node calls one cron run may make (`PAYRAIL_CRON_NODE_CALLS`), when set to a number.
    pub fn cron_node_calls(&self) -> Option<u32> {
        self.var("PAYRAIL_CRON_NODE_CALLS")
            .and_then(|v| v.parse().ok())
    }

    /// The calls one request of an institution's move may make (`PAYRAIL_MOVE_CALLS`, 20 to
    /// 900; 900 when unset): a move needing more goes on over several requests. Tests set it low
    /// to watch a move resume.
    pub fn move_calls(&self) -> usize {
        self.var("PAYRAIL_MOVE_CALLS")
            .and_then(|v| v.parse().ok())
            .filter(|n| (20..=900).contains(n))
            .unwrap_or(900)
    }

    /// How long after it is set or changed a settlement wallet is first used
    /// (`PAYRAIL_WALLET_COOLOFF_SECONDS`, 0 to 30 days; 24 hours when unset).
    pub fn wallet_cool_off_seconds(&self) -> i64 {
        self.var("PAYRAIL_WALLET_COOLOFF_SECONDS")
            .and_then(|v| v.parse().ok())
            .filter(|s| (0..=30 * 24 * 3600).contains(s))
            .unwrap_or(DEFAULT_WALLET_COOL_OFF_SECONDS)
    }

    /// How long events (with their deliveries and attempts) and ended checkout sessions are
    /// kept (`PAYRAIL_RETENTION_SECONDS`, from 0 to 400 days; 30 days when unset, as Stripe
    /// keeps events). Tests set it low to watch the cron prune.
    pub fn retention_seconds(&self) -> i64 {
        self.var("PAYRAIL_RETENTION_SECONDS")
            .and_then(|v| v.parse().ok())
            .filter(|s| (0..=400 * 24 * 3600).contains(s))
            .unwrap_or(DEFAULT_RETENTION_SECONDS)
    }

    /// The ports of this machine a sandbox's webhook endpoints may use
    /// (`PAYRAIL_LOOPBACK_PORTS`; none when unset), or a logged 500 naming a malformed list.
    pub fn loopback_ports(&self) -> Result<crate::webhook_url::LoopbackPorts, ApiError> {
        crate::webhook_url::LoopbackPorts::parse(
            &self.var("PAYRAIL_LOOPBACK_PORTS").unwrap_or_default(),
        )
        .map_err(|why| ApiError::internal("read PAYRAIL_LOOPBACK_PORTS", why))
    }

    /// How many times faster the webhook retry schedule runs (`PAYRAIL_WEBHOOK_TIME_SCALE`; 1 in
    /// production, larger in tests).
    pub fn webhook_time_scale(&self) -> u64 {
        self.var("PAYRAIL_WEBHOOK_TIME_SCALE")
            .and_then(|v| v.parse().ok())
            .filter(|s| *s >= 1)
            .unwrap_or(1)
    }

    /// The key sealing webhook signing secrets (`PAYRAIL_ENCRYPTION_KEY`), or a logged 500 naming
    /// the missing (or malformed) secret.
    pub fn sealing_key(&self) -> Result<[u8; 32], ApiError> {
        self.secret("PAYRAIL_ENCRYPTION_KEY")
            .and_then(|text| {
                base64::engine::general_purpose::STANDARD
                    .decode(text.trim())
                    .ok()?
                    .try_into()
                    .ok()
            })
            .ok_or("PAYRAIL_ENCRYPTION_KEY is not set (wrangler secret put PAYRAIL_ENCRYPTION_KEY)")
            .or_internal("sealing key")
    }
}

/// How long events and ended checkout sessions are kept unless configured: 30 days.
pub const DEFAULT_RETENTION_SECONDS: i64 = 30 * 24 * 60 * 60;

/// Unix seconds as the API's timestamp text (`2026-11-21T10:00:00Z`).
pub fn timestamp(unix: i64) -> Result<String, ApiError> {
    shared_types::time::format_unix(unix)
        .ok_or("time out of range")
        .or_internal("format time")
}
