//! The small value types of the options, and how their flag text parses.

use std::convert::Infallible;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;

/// A string that must never be logged (webhook URLs carry tokens): `Debug` hides it and there
/// is no `Display`; read it with [`SensitiveString::expose`] where it is used.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SensitiveString(String);

impl SensitiveString {
    pub(crate) fn new(value: impl Into<String>) -> Self {
        SensitiveString(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for SensitiveString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() { f.write_str("\"\"") } else { f.write_str("<redacted>") }
    }
}

impl FromStr for SensitiveString {
    type Err = Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(SensitiveString::new(s))
    }
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl LogFormat {
    /// The flag value that selects this format (Stakater's: empty for text).
    pub(crate) fn as_flag_value(self) -> &'static str {
        match self {
            LogFormat::Text => "",
            LogFormat::Json => "json",
        }
    }
}

/// `--log-level`, with logrus's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum LogLevel {
    Trace,
    Debug,
    #[default]
    Info,
    Warning,
    Error,
    Fatal,
    Panic,
}

impl LogLevel {
    /// Case-insensitive, and `warn` for `warning`, as logrus reads it.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text.to_ascii_lowercase().as_str() {
            "trace" => LogLevel::Trace,
            "debug" => LogLevel::Debug,
            "info" => LogLevel::Info,
            "warn" | "warning" => LogLevel::Warning,
            "error" => LogLevel::Error,
            "fatal" => LogLevel::Fatal,
            "panic" => LogLevel::Panic,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Fatal => "fatal",
            LogLevel::Panic => "panic",
        }
    }
}

/// Where alerts go (`ALERT_SINK`); anything unknown gets the raw text, as in Stakater.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AlertSink {
    Slack,
    Teams,
    GoogleChat,
    #[default]
    Raw,
}

impl AlertSink {
    pub(crate) fn parse(text: &str) -> Self {
        match text.trim().to_ascii_lowercase().as_str() {
            "slack" => AlertSink::Slack,
            "teams" => AlertSink::Teams,
            "gchat" => AlertSink::GoogleChat,
            _ => AlertSink::Raw,
        }
    }
}

/// A listen address as Go's `net.Listen("tcp", ...)` reads it. Without a host (`:9090`) it means
/// every interface, IPv4 and IPv6 (a dual-stack socket); with one it is bound as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenAddr {
    /// `None`: no host was given.
    pub host: Option<IpAddr>,
    pub port: u16,
}

impl ListenAddr {
    /// Whether both addresses would claim the same port on some interface.
    pub(crate) fn overlaps(self, other: ListenAddr) -> bool {
        let any = |a: ListenAddr| a.host.is_none_or(|ip| ip.is_unspecified());
        // Port 0 asks for a free port: never the same as another listener's.
        self.port != 0 && self.port == other.port && (self.host == other.host || any(self) || any(other))
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.host {
            None => write!(f, ":{}", self.port),
            Some(ip) => write!(f, "{}", SocketAddr::new(ip, self.port)),
        }
    }
}

impl std::str::FromStr for ListenAddr {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        parse_listen_addr(text)
    }
}

/// Parses a Go listen address: `:9090` (every interface, IPv4 and IPv6), `0.0.0.0:9090`,
/// `127.0.0.1:9090`, `[::1]:9090`, `localhost:9090`. Host names other than `localhost` would need
/// DNS, so they are refused.
pub(crate) fn parse_listen_addr(text: &str) -> Result<ListenAddr, String> {
    const EXPECTED: &str = "expected [host]:port, with an IP address or localhost as host";
    let (host, port) = text.rsplit_once(':').ok_or(EXPECTED)?;
    let port: u16 = port.parse().map_err(|_| format!("{EXPECTED}; the port must be a number up to 65535"))?;
    let host = match host {
        "" => None,
        "localhost" => Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        _ => Some(match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(v6) => v6.parse::<std::net::Ipv6Addr>().map(IpAddr::V6).map_err(|_| EXPECTED)?,
            None => host.parse::<Ipv4Addr>().map(IpAddr::V4).map_err(|_| EXPECTED)?,
        }),
    };
    Ok(ListenAddr { host, port })
}

/// Splits one list-flag value as Go's flag package does (a CSV record: `,`-separated, fields
/// may be double-quoted with `""` for a quote), then trims the entries and drops empty ones.
pub(crate) fn split_flag_list(text: &str) -> Result<Vec<String>, String> {
    let mut entries = Vec::new();
    let mut rest = text;
    loop {
        let trimmed = rest.trim_start();
        let (field, after) = if let Some(quoted) = trimmed.strip_prefix('"') {
            quoted_field(quoted)?
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            let field = &rest[..end];
            if field.contains('"') {
                return Err(format!("bare \" in unquoted entry {field:?}"));
            }
            (field.to_owned(), &rest[end..])
        };
        let field = field.trim();
        if !field.is_empty() {
            entries.push(field.to_owned());
        }
        match after.strip_prefix(',') {
            Some(next) => rest = next,
            None => return Ok(entries),
        }
    }
}

/// Reads a quoted field up to its closing quote; returns it and what follows.
fn quoted_field(text: &str) -> Result<(String, &str), String> {
    let mut field = String::new();
    let mut rest = text;
    loop {
        let close = rest.find('"').ok_or("unterminated quoted entry")?;
        field.push_str(&rest[..close]);
        rest = &rest[close + 1..];
        match rest.strip_prefix('"') {
            Some(after_escape) => {
                field.push('"');
                rest = after_escape;
            }
            None => {
                let after = rest.trim_start();
                if !after.is_empty() && !after.starts_with(',') {
                    return Err(format!("unexpected text {after:?} after a quoted entry"));
                }
                return Ok((field, after));
            }
        }
    }
}

/// A URL reduced to scheme and host, for places that may show it (the meta-info ConfigMap,
/// error messages): paths, queries and user info carry tokens.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<redacted>".to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let tail = if tail.is_empty() || tail == "/" { tail } else { "/<redacted>" };
    format!("{scheme}://{host}{tail}")
}

/// An `http://` or `https://` URL with a host.
pub(super) fn is_http_url(url: &str) -> bool {
    ["http://", "https://"].iter().any(|scheme| {
        url.strip_prefix(scheme).is_some_and(|rest| !rest.is_empty() && !rest.starts_with(['/', '?', '#']))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        let ok = [
            (":9090", None, 9090, ":9090"),
            ("0.0.0.0:9443", Some("0.0.0.0"), 9443, "0.0.0.0:9443"),
            ("127.0.0.1:6060", Some("127.0.0.1"), 6060, "127.0.0.1:6060"),
            ("localhost:8080", Some("127.0.0.1"), 8080, "127.0.0.1:8080"),
            ("[::]:9090", Some("::"), 9090, "[::]:9090"),
            ("[::1]:0", Some("::1"), 0, "[::1]:0"),
        ];
        for (text, host, port, shown) in ok {
            let expected = ListenAddr { host: host.map(|h| h.parse().unwrap()), port };
            assert_eq!(parse_listen_addr(text), Ok(expected), "{text}");
            assert_eq!(expected.to_string(), shown, "{text}");
        }
        for text in ["9090", ":", ":http", ":70000", "example.com:80", "::1:80", "[::1:80", "1.2.3:80"] {
            assert!(parse_listen_addr(text).is_err(), "{text}");
        }
    }

    #[test]
    fn overlapping_listeners() {
        let addr = |s: &str| parse_listen_addr(s).unwrap();
        let cases = [
            (":9090", "127.0.0.1:9090", true),
            (":9090", "[::1]:9090", true),
            ("0.0.0.0:9090", "127.0.0.1:9090", true),
            ("127.0.0.1:9090", "127.0.0.1:9090", true),
            ("127.0.0.1:9090", "127.0.0.2:9090", false),
            ("0.0.0.0:9090", "0.0.0.0:9091", false),
            (":9090", ":9091", false),
        ];
        for (a, b, overlap) in cases {
            assert_eq!(addr(a).overlaps(addr(b)), overlap, "{a} {b}");
            assert_eq!(addr(b).overlaps(addr(a)), overlap, "{b} {a}");
        }
    }

    #[test]
    fn list_values_split_like_go_flags() {
        let ok: &[(&str, &[&str])] = &[
            ("", &[]),
            ("a", &["a"]),
            ("a,b", &["a", "b"]),
            (" a , b ,", &["a", "b"]),
            ("\"env=prod,team=ops\"", &["env=prod,team=ops"]),
            ("\"a\",b", &["a", "b"]),
            ("x, \"y,z\" ,w", &["x", "y,z", "w"]),
            ("\"say \"\"hi\"\"\"", &["say \"hi\""]),
        ];
        for (text, expected) in ok {
            assert_eq!(split_flag_list(text).unwrap(), *expected, "{text}");
        }
        for text in ["\"open", "a\"b", "\"a\"b"] {
            assert!(split_flag_list(text).is_err(), "{text}");
        }
    }

    #[test]
    fn urls() {
        let redacted = [
            ("https://hooks.slack.com/services/T0/B0/secret", "https://hooks.slack.com/<redacted>"),
            ("http://user:pw@host:8080/", "http://host:8080/"),
            ("http://host?token=1", "http://host/<redacted>"),
            ("not a url", "<redacted>"),
        ];
        for (url, expected) in redacted {
            assert_eq!(redact_url(url), expected, "{url}");
        }
        let http = [
            ("http://collector:4318", true),
            ("https://x/y", true),
            ("https://", false),
            ("ftp://x", false),
            ("collector:4318", false),
        ];
        for (url, expected) in http {
            assert_eq!(is_http_url(url), expected, "{url}");
        }
    }

    #[test]
    fn log_levels_and_sinks() {
        let levels = [("WARN", Some(LogLevel::Warning)), ("Panic", Some(LogLevel::Panic)), ("loud", None)];
        for (text, expected) in levels {
            assert_eq!(LogLevel::parse(text), expected, "{text}");
        }
        let sinks =
            [(" Teams ", AlertSink::Teams), ("gchat", AlertSink::GoogleChat), ("discord", AlertSink::Raw)];
        for (text, expected) in sinks {
            assert_eq!(AlertSink::parse(text), expected, "{text}");
        }
        assert_eq!(format!("{:?}", SensitiveString::new("https://x/token")), "<redacted>");
    }
}
