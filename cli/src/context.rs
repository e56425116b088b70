//! The settings a command runs with (flags, then the environment, then the config file), and
//! what they give: the API URL, an API client, secrets.

use std::io::{BufRead, Read};
use std::path::PathBuf;

use payrail::Client;

use crate::config::{self, Config, Env};
use crate::output::Failure;
use crate::Io;

/// What every command gets.
pub(crate) struct Context<'a> {
    env: &'a Env,
    /// The config file's path.
    pub(crate) path: PathBuf,
    /// The config file's contents; a command that changes them calls [`Context::save`].
    pub(crate) config: Config,
    /// `--api-url`.
    api_url: Option<String>,
    /// `--json`: print JSON instead of tables.
    pub(crate) json: bool,
}

impl<'a> Context<'a> {
    /// Reads the config file.
    pub(crate) fn load(env: &'a Env, api_url: Option<String>, json: bool) -> Result<Self, Failure> {
        let path = config::path(env)?;
        let config = config::load(&path)?;
        Ok(Context {
            env,
            path,
            config,
            api_url,
            json,
        })
    }

    /// The environment's `variable`, else `saved` from the config file.
    fn setting(&self, variable: &str, saved: Option<&str>) -> Option<String> {
        self.env
            .get(variable)
            .cloned()
            .or_else(|| saved.map(str::to_owned))
    }

    /// The API base URL: `--api-url`, then `PAYRAIL_API_URL`, then the config file.
    pub(crate) fn api_url(&self) -> Result<String, Failure> {
        self.api_url
            .clone()
            .or_else(|| self.setting("PAYRAIL_API_URL", self.config.api_url.as_deref()))
            .ok_or_else(|| {
                Failure::from(
                    "no API URL: pass --api-url, set PAYRAIL_API_URL, or run payrail configure"
                        .to_owned(),
                )
            })
    }

    /// An API client with the environment's credentials, else the config file's.
    pub(crate) fn client(&self) -> Result<Client, Failure> {
        let id = self.setting("PAYRAIL_CLIENT_ID", self.config.client_id.as_deref());
        let secret = self.setting(
            "PAYRAIL_CLIENT_SECRET",
            self.config.client_secret.as_deref(),
        );
        match (id, secret) {
            (Some(id), Some(secret)) => Ok(Client::new(self.api_url()?, id, secret)?),
            _ => Err(Failure::from(
                "no client credentials: set PAYRAIL_CLIENT_ID and PAYRAIL_CLIENT_SECRET, or run payrail configure"
                    .to_owned(),
            )),
        }
    }

    /// A secret from the environment's `variable` (when not empty), else one line of standard
    /// input (prompted for with `prompt`, without echo, on a terminal).
    pub(crate) fn secret(
        &self,
        io: &mut Io,
        variable: &str,
        prompt: &str,
    ) -> Result<String, Failure> {
        if let Some(value) = self.env.get(variable).filter(|v| !v.is_empty()) {
            return Ok(value.clone());
        }
        let value = if io.stdin_is_terminal {
            rpassword::prompt_password(prompt)?
        } else {
            // One line, and no more than a secret could ever need.
            let mut line = String::new();
            (&mut io.stdin).take(4096).read_line(&mut line)?;
            line
        };
        let value = value.trim().to_owned();
        if value.is_empty() {
            return Err(Failure::from(format!(
                "no secret given: set {variable} or pass it on standard input"
            )));
        }
        Ok(value)
    }

    /// Writes the config file.
    pub(crate) fn save(&self) -> Result<(), Failure> {
        Ok(config::save(&self.path, &self.config)?)
    }
}
