//! Which webhook URLs an endpoint may have: server-side request forgery guard. Pure; the DNS
//! step (production only) lives with the caller.
//!
//! Production: `https` only, to a public host: no IP literal or name that points at loopback,
//! private, link-local (cloud metadata), carrier-grade NAT, multicast, documentation or reserved
//! space, and no `localhost` / `.local` / `.internal` names. Sandbox also allows `http` and
//! `https` to `localhost`, `127.0.0.1` and `[::1]`, so developers can receive events locally.

use std::net::{IpAddr, Ipv4Addr};

use worker::Url;

/// Longest URL accepted.
pub const MAX_URL_LEN: usize = 2048;

/// The result of the static checks.
#[derive(Debug, PartialEq, Eq)]
pub enum Checked {
    /// Fine as it is (an IP literal, or a loopback allowed in sandbox).
    Ready(Url),
    /// Fine if its name resolves only to public addresses.
    NeedsDns(Url, String),
}

/// Whether `ip` is a public unicast address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let s = v6.segments();
            // NAT64 (64:ff9b::/96) carries an IPv4 address in its last 32 bits.
            if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return is_public_v4(Ipv4Addr::new(
                    (s[6] >> 8) as u8,
                    s[6] as u8,
                    (s[7] >> 8) as u8,
                    s[7] as u8,
                ));
            }
            // ::, ::1, the deprecated IPv4-compatible ::a.b.c.d and the IPv4-translated
            // ::ffff:0:a.b.c.d (a translator's view of any v4 host): none is a receiver's address.
            if s[..6] == [0; 6] || s[..6] == [0, 0, 0, 0, 0xffff, 0] {
                return false;
            }
            !(v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (s[0] & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated, still routed inside)
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation 2001:db8::/32
                || (s[0] == 0x2001 && s[1] == 0) // Teredo 2001::/32 wraps an IPv4 peer
                || (s[0] == 0x2001 && s[1] == 2 && s[2] == 0) // benchmarking 2001:2::/48
                || (s[0] == 0x2001 && (0x10..0x30).contains(&s[1])) // ORCHID 2001:10::/28, 2001:20::/28
                || (s[0] == 0x2002) // 6to4 may wrap anything
                || s[..3] == [0x64, 0xff9b, 1] // local-use NAT64 64:ff9b:1::/48 (RFC 8215)
                || s[..4] == [0x100, 0, 0, 0]) // discard-only 100::/64
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254/16, cloud metadata among it
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || a >= 240) // reserved
}

fn is_loopback_host(host: &str) -> bool {
    matches!(host, "localhost" | "127.0.0.1" | "[::1]")
}

/// The ports of this machine a sandbox's webhook endpoints may use (`PAYRAIL_LOOPBACK_PORTS`: a
/// comma-separated list of ports and ranges, such as `3000-3999,8080`). A loopback endpoint's
/// replies are kept in the delivery log, so an endpoint on any port would let an admin read
/// whatever else listens on the machine (a local node, the worker itself): only the ports the
/// operator names are receivers'. None named: no loopback endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoopbackPorts(Vec<(u16, u16)>);

impl LoopbackPorts {
    /// Parses the list; a malformed one names the part at fault.
    pub fn parse(text: &str) -> Result<LoopbackPorts, String> {
        let mut ranges = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (low, high) = part.split_once('-').unwrap_or((part, part));
            match (low.trim().parse::<u16>(), high.trim().parse::<u16>()) {
                (Ok(low), Ok(high)) if 0 < low && low <= high => ranges.push((low, high)),
                _ => return Err(format!("{part:?} is not a port or a range of ports")),
            }
        }
        Ok(LoopbackPorts(ranges))
    }

    /// Whether `port` is one of them.
    pub fn allows(&self, port: u16) -> bool {
        self.0
            .iter()
            .any(|(low, high)| (*low..=*high).contains(&port))
    }

    /// The list as the operator would write it (`none` when empty).
    pub fn describe(&self) -> String {
        if self.0.is_empty() {
            return "none".to_owned();
        }
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(low, high)| {
                if low == high {
                    low.to_string()
                } else {
                    format!("{low}-{high}")
                }
            })
            .collect();
        parts.join(",")
    }
}

/// The port of `url` when it points at this machine (the loopback names and addresses a sandbox
/// accepts), the scheme's own when it names none.
pub fn loopback_port(url: &Url) -> Option<u16> {
    let host = url.host_str()?.to_ascii_lowercase();
    is_loopback_host(&host)
        .then(|| url.port_or_known_default())
        .flatten()
}

/// Static checks of a webhook URL. `sandbox` relaxes them for local receivers.
pub fn check(text: &str, sandbox: bool) -> Result<Checked, String> {
    if text.len() > MAX_URL_LEN {
        return Err(format!("url must be at most {MAX_URL_LEN} characters"));
    }
    let url = Url::parse(text).map_err(|_| {
        "url must be an absolute URL such as https://example.com/webhooks".to_owned()
    })?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("url must not carry credentials".into());
    }
    if url.fragment().is_some() {
        return Err("url must not have a #fragment".into());
    }
    let host = url.host_str().unwrap_or("").to_ascii_lowercase();
    if host.is_empty() {
        return Err("url must name a host".into());
    }
    let scheme = url.scheme();
    if sandbox && is_loopback_host(&host) && matches!(scheme, "http" | "https") {
        return Ok(Checked::Ready(url));
    }
    if scheme != "https" {
        return Err(if sandbox {
            "url must use https (http is allowed only for localhost and 127.0.0.1 in sandbox mode)"
                .into()
        } else {
            "url must use https".into()
        });
    }
    match url.host() {
        Some(url::Host::Ipv4(ip)) if !is_public(IpAddr::V4(ip)) => Err(format!(
            "url must point at a public address; {ip} is not one"
        )),
        Some(url::Host::Ipv6(ip)) if !is_public(IpAddr::V6(ip)) => Err(format!(
            "url must point at a public address; {ip} is not one"
        )),
        Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)) => Ok(Checked::Ready(url)),
        _ => {
            // A name ending in a dot is the same name, fully qualified.
            let host = host.strip_suffix('.').unwrap_or(&host).to_owned();
            let internal = host == "localhost"
                || !host.contains('.')
                || [
                    ".localhost",
                    ".local",
                    ".internal",
                    ".home.arpa",
                    ".lan",
                    ".intranet",
                ]
                .iter()
                .any(|suffix| host.ends_with(suffix));
            if internal {
                return Err(format!(
                    "url must point at a public host; {host} is internal"
                ));
            }
            // After IDNA a host name is letters, digits, dots and hyphens; anything else (the
            // URL standard lets `&`, `=` and more through) could steer the DNS lookup.
            if !host
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
            {
                return Err(format!(
                    "url must name a host of letters, digits, dots and hyphens; got {host:?}"
                ));
            }
            Ok(Checked::NeedsDns(url, host))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(url: &str, sandbox: bool) -> bool {
        check(url, sandbox).is_err()
    }

    #[test]
    fn production_accepts_public_https_only() {
        assert!(matches!(
            check("https://hooks.example.com/payrail", false),
            Ok(Checked::NeedsDns(_, host)) if host == "hooks.example.com"
        ));
        assert!(matches!(
            check("https://93.184.216.34/hook", false),
            Ok(Checked::Ready(_))
        ));
        assert!(matches!(
            check("https://[2606:4700:4700::1111]/hook", false),
            Ok(Checked::Ready(_))
        ));
        // An internationalised name reaches DNS as its ASCII form.
        assert!(matches!(
            check("https://bücher.example/hook", false),
            Ok(Checked::NeedsDns(_, host)) if host == "xn--bcher-kva.example"
        ));
        for bad in [
            "http://hooks.example.com/",
            "https://localhost/hook",
            "https://127.0.0.1/hook",
            "https://2130706433/hook", // 127.0.0.1, written as a number
            "https://0x7f.1/hook",
            "https://10.1.2.3/",
            "https://172.16.0.1/",
            "https://192.168.1.1/",
            "https://169.254.169.254/latest/meta-data/",
            "https://100.64.0.1/",
            "https://0.0.0.0/",
            "https://[::1]/",
            "https://[fd00::1]/",
            "https://[fe80::1]/",
            "https://[::ffff:127.0.0.1]/",
            "https://[64:ff9b::a9fe:a9fe]/",
            "https://[::7f00:1]/", // ::127.0.0.1, IPv4-compatible
            "https://[::a9fe:a9fe]/",
            "https://[::ffff:0:a9fe:a9fe]/", // IPv4-translated 169.254.169.254
            "https://[::ffff:0:808:808]/",   // IPv4-translated, even a public one
            "https://[2001::1]/",            // Teredo
            "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
            "https://[fec0::1]/",              // site-local
            "https://[100::1]/",               // discard-only
            "https://[2001:2::1]/",            // benchmarking
            "https://[64:ff9b:1::a9fe:a9fe]/", // local-use NAT64
            "https://localhost./hook",
            "https://metadata.google.internal./",
            "https://printer.local./",
            "https://hooks.example.com&type=A&name=internal/",
            "https://a=b.example.com/",
            "https://metadata.google.internal/",
            "https://printer.local/",
            "https://intranet/",
            "https://user:pw@hooks.example.com/",
            "https://hooks.example.com/#frag",
            "ftp://hooks.example.com/",
            "not a url",
            "/relative",
        ] {
            assert!(refused(bad, false), "{bad}");
        }
    }

    #[test]
    fn sandbox_also_accepts_local_receivers() {
        for ok in [
            "http://127.0.0.1:9000/hooks",
            "http://localhost:3000/",
            "https://localhost/",
            "http://[::1]:8080/",
        ] {
            assert!(matches!(check(ok, true), Ok(Checked::Ready(_))), "{ok}");
            assert!(refused(ok, false), "{ok} in production");
        }
        assert!(refused("http://192.168.1.10/", true));
        assert!(refused("http://hooks.example.com/", true));
    }

    #[test]
    fn loopback_ports_are_the_operators_list() {
        let ports = LoopbackPorts::parse("3000-3999, 8080,").unwrap();
        assert!(ports.allows(3000) && ports.allows(3999) && ports.allows(8080));
        assert!(!ports.allows(2999) && !ports.allows(4000) && !ports.allows(8545));
        assert_eq!(ports.describe(), "3000-3999,8080");
        assert_eq!(LoopbackPorts::parse("").unwrap().describe(), "none");
        assert!(!LoopbackPorts::default().allows(3000));
        for bad in ["0", "70000", "4000-3000", "x", "1-2-3"] {
            assert!(LoopbackPorts::parse(bad).is_err(), "{bad}");
        }
        let port = |u: &str| loopback_port(&Url::parse(u).unwrap());
        assert_eq!(port("http://127.0.0.1:8545/"), Some(8545));
        assert_eq!(port("http://127.1:8545/"), Some(8545));
        assert_eq!(port("http://2130706433:8545/"), Some(8545));
        assert_eq!(port("http://0x7f000001:8545/"), Some(8545));
        assert_eq!(port("http://localhost/"), Some(80));
        assert_eq!(port("https://[::1]/"), Some(443));
        assert_eq!(port("https://example.com:8545/"), None);
    }
}
