//! Where the command's settings live: flags, then the environment, then a config file that only
//! its owner can read (0600, like `~/.ssh` keys: a file others can read is refused).

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The config file's contents.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// API base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
    /// API client id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// API client secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The secret `payrail listen` signs forwarded events with; kept so a local receiver's
    /// configuration survives restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_secret: Option<String>,
    /// A portal session (`payrail login`), for portal operations such as resending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub portal: Option<PortalLogin>,
}

/// A portal session.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortalLogin {
    /// Who logged in.
    pub email: String,
    /// The session cookie's value.
    pub cookie: String,
    /// The session's CSRF token.
    pub csrf: String,
}

/// How a secret shows in `Debug`: whether there is one, never what it is.
fn redacted(secret: Option<&str>) -> &'static str {
    match secret {
        Some(_) => "<redacted>",
        None => "<none>",
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("api_url", &self.api_url)
            .field("client_id", &self.client_id)
            .field("client_secret", &redacted(self.client_secret.as_deref()))
            .field("listen_secret", &redacted(self.listen_secret.as_deref()))
            .field("portal", &self.portal)
            .finish()
    }
}

impl std::fmt::Debug for PortalLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortalLogin")
            .field("email", &self.email)
            .field("cookie", &redacted(Some(&self.cookie)))
            .field("csrf", &redacted(Some(&self.csrf)))
            .finish()
    }
}

/// The environment the command runs in (a snapshot, so tests can give their own).
pub type Env = HashMap<String, String>;

/// The config file's path: `PAYRAIL_CONFIG`, else `$XDG_CONFIG_HOME/payrail/config.toml`, else
/// `~/.config/payrail/config.toml`.
pub fn path(env: &Env) -> Result<PathBuf, String> {
    if let Some(path) = env.get("PAYRAIL_CONFIG").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let base = match (env.get("XDG_CONFIG_HOME"), env.get("HOME")) {
        (Some(xdg), _) if !xdg.is_empty() => PathBuf::from(xdg),
        (_, Some(home)) if !home.is_empty() => Path::new(home).join(".config"),
        _ => return Err("no config file path: set PAYRAIL_CONFIG or HOME".into()),
    };
    Ok(base.join("payrail").join("config.toml"))
}

/// Reads the config file; a missing file is an empty config. Refused when group or others may
/// read or write it.
pub fn load(path: &Path) -> Result<Config, String> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
        Err(err) => return Err(format!("{}: {err}", path.display())),
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "{} holds credentials but others can access it (mode {mode:o}); run: chmod 600 {}",
            path.display(),
            path.display()
        ));
    }
    if meta.len() > 64 * 1024 {
        return Err(format!("{} is larger than 64 KiB", path.display()));
    }
    let text = std::fs::read_to_string(path).map_err(|err| format!("{}: {err}", path.display()))?;
    toml::from_str(&text).map_err(|err| format!("{}: {err}", path.display()))
}

/// Writes the config file with mode 0600 (its folder 0700), replacing it atomically.
pub fn save(path: &Path, config: &Config) -> Result<(), String> {
    let fail = |err: std::io::Error| format!("{}: {err}", path.display());
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(fail)?;
        }
    }
    let text = toml::to_string(config).map_err(|err| err.to_string())?;
    let temporary = path.with_extension("toml.new");
    let _ = std::fs::remove_file(&temporary);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .map_err(fail)?;
    file.write_all(text.as_bytes()).map_err(fail)?;
    file.sync_all().map_err(fail)?;
    std::fs::rename(&temporary, path).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("payrail-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("payrail").join("config.toml")
    }

    #[test]
    fn debug_shows_no_secret() {
        let config = Config {
            client_id: Some("cli_x".into()),
            client_secret: Some("sk_live_secret".into()),
            listen_secret: Some("whsec_secret".into()),
            portal: Some(PortalLogin {
                email: "a@example.com".into(),
                cookie: "cookie-secret".into(),
                csrf: "csrf-secret".into(),
            }),
            ..Config::default()
        };
        let shown = format!("{config:?}");
        assert!(
            shown.contains("cli_x") && shown.contains("a@example.com"),
            "{shown}"
        );
        for secret in [
            "sk_live_secret",
            "whsec_secret",
            "cookie-secret",
            "csrf-secret",
        ] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }

    #[test]
    fn saved_files_are_private_and_read_back() {
        let path = temp("save");
        let config = Config {
            api_url: Some("http://127.0.0.1:8787".into()),
            client_secret: Some("sk_x".into()),
            ..Config::default()
        };
        save(&path, &config).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        assert_eq!(load(&path).unwrap(), config);
        std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap()).unwrap();
    }

    #[test]
    fn a_file_others_can_read_is_refused_and_a_missing_one_is_empty() {
        let path = temp("open");
        assert_eq!(load(&path).unwrap(), Config::default());
        save(&path, &Config::default()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = load(&path).unwrap_err();
        assert!(
            err.contains("mode 644") && err.contains("chmod 600"),
            "{err}"
        );
        std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap()).unwrap();
    }

    #[test]
    fn the_path_follows_the_environment() {
        let env = |pairs: &[(&str, &str)]| -> Env {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            path(&env(&[("PAYRAIL_CONFIG", "/x/c.toml"), ("HOME", "/h")])).unwrap(),
            PathBuf::from("/x/c.toml")
        );
        assert_eq!(
            path(&env(&[("XDG_CONFIG_HOME", "/xdg"), ("HOME", "/h")])).unwrap(),
            PathBuf::from("/xdg/payrail/config.toml")
        );
        assert_eq!(
            path(&env(&[("HOME", "/h")])).unwrap(),
            PathBuf::from("/h/.config/payrail/config.toml")
        );
        assert!(path(&env(&[])).is_err());
    }
}
