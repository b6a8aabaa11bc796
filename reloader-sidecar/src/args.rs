//! The `reloader sidecar` command line, and the environment variables morecontainers used.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use rustix::process::Signal;

/// Copy ConfigMaps/Secrets into a directory with an atomic swap and notify the application.
#[derive(clap::Args, Debug, Clone)]
pub struct SidecarArgs {
    /// ConfigMaps to copy, in merge order (comma-separated or repeated).
    #[arg(long = "configmap", env = "RELOADER_CONFIGMAP", value_name = "NAME", value_delimiter = ',')]
    pub(crate) configmaps: Vec<String>,

    /// Secrets to copy, merged after the ConfigMaps (comma-separated or repeated).
    #[arg(long = "secret", env = "RELOADER_SECRET", value_name = "NAME", value_delimiter = ',')]
    pub(crate) secrets: Vec<String>,

    /// Directory that receives the files (created if missing).
    #[arg(long, env = "RELOADER_PATH", value_name = "DIR")]
    pub(crate) path: PathBuf,

    /// Namespace of the objects [default: the kubeconfig's or in-cluster namespace].
    #[arg(long, short = 'n', env = "POD_NAMESPACE")]
    pub(crate) namespace: Option<String>,

    /// Kubeconfig file [default: $KUBECONFIG, in-cluster config, then ~/.kube/config].
    #[arg(long, value_name = "FILE")]
    pub(crate) kubeconfig: Option<PathBuf>,

    /// URL to call after each content change.
    #[arg(long, env = "RELOADER_ENDPOINT", value_name = "URL")]
    pub(crate) endpoint: Option<Url>,

    /// HTTP method of the notification.
    #[arg(long, default_value = "POST", value_parser = parse_method)]
    pub(crate) endpoint_method: Method,

    /// Status that counts as success: `2xx`-style classes or codes, comma-separated.
    #[arg(long, default_value = "2xx", value_parser = parse_expected_status)]
    pub(crate) endpoint_expected_status: ExpectedStatus,

    /// Retries after a failed notification, with exponential backoff.
    #[arg(long, default_value_t = 5)]
    pub(crate) endpoint_retries: u32,

    /// Timeout of one notification request (`500ms`, `10s`, `1m`).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub(crate) endpoint_timeout: Duration,

    /// File holding the PID to signal after each content change (read each time).
    #[arg(long, env = "RELOADER_PIDFILE", value_name = "FILE")]
    pub(crate) pidfile: Option<PathBuf>,

    /// Signal sent to the PID in `--pidfile` (`HUP`, `SIGUSR1`, a number).
    #[arg(long, env = "RELOADER_SIGNAL", default_value = "SIGHUP", value_parser = parse_signal)]
    pub(crate) signal: Signal,

    /// File created or whose mtime is updated after each content change.
    #[arg(long = "touch-file", env = "RELOADER_TOUCHFILE", value_name = "FILE")]
    pub(crate) touch_file: Option<PathBuf>,

    /// Write once when every object exists, then exit (for an initContainer).
    #[arg(
        long,
        env = "RELOADER_INIT",
        value_parser = parse_bool,
        num_args = 0..=1,
        require_equals = true,
        default_value = "false",
        default_missing_value = "true",
    )]
    pub(crate) init: bool,

    /// How long init mode waits for the objects.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub(crate) init_timeout: Duration,

    /// Address of /metrics, /live and /readyz (`127.0.0.1:9091`; `:9091` for every interface, as
    /// probes and scrapers from outside the pod need; empty disables).
    #[arg(long, default_value = "127.0.0.1:9091", value_parser = parse_metrics_addr)]
    pub(crate) metrics_addr: MetricsAddr,

    /// Mode of files that come from ConfigMaps (octal).
    #[arg(long, default_value = "0644", value_parser = parse_mode)]
    pub(crate) configmap_mode: u32,

    /// Mode of files that come from Secrets (octal). 0640 keeps them private to the owner and the
    /// pod's fsGroup, which is how an application running as another user reads them.
    #[arg(long, default_value = "0640", value_parser = parse_mode)]
    pub(crate) secret_mode: u32,
}

impl SidecarArgs {
    /// ConfigMap names, trimmed, without the empty entries `a,,b` or a trailing comma leave.
    pub(crate) fn configmap_names(&self) -> Vec<String> {
        clean_names(&self.configmaps)
    }

    pub(crate) fn secret_names(&self) -> Vec<String> {
        clean_names(&self.secrets)
    }
}

fn clean_names(names: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        if !out.iter().any(|seen| seen == name) {
            out.push(name.to_owned());
        }
    }
    out
}

/// Where the metrics server listens, if anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MetricsAddr(pub(crate) Option<SocketAddr>);

/// Which HTTP statuses a notification accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExpectedStatus(Vec<StatusRule>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StatusRule {
    /// `2xx`: any status whose first digit matches.
    Class(u16),
    Exact(u16),
}

impl ExpectedStatus {
    pub(crate) fn matches(&self, status: StatusCode) -> bool {
        let code = status.as_u16();
        self.0.iter().any(|rule| match *rule {
            StatusRule::Class(class) => code / 100 == class,
            StatusRule::Exact(exact) => code == exact,
        })
    }
}

/// Booleans as people write them: `true/false`, `1/0`, `yes/no`, `on/off` (any case), and an
/// empty value is false. morecontainers treated any non-empty value, `false` included, as true.
pub(crate) fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "t" | "true" | "y" | "yes" | "on" => Ok(true),
        "" | "0" | "f" | "false" | "n" | "no" | "off" => Ok(false),
        other => Err(format!("`{other}` is not a boolean (use true/false, 1/0, yes/no, on/off)")),
    }
}

/// `HUP`, `SIGHUP`, `sighup` or a signal number.
pub(crate) fn parse_signal(s: &str) -> Result<Signal, String> {
    let trimmed = s.trim();
    if let Ok(number) = trimmed.parse::<i32>() {
        return Signal::from_named_raw(number)
            .ok_or_else(|| format!("{number} is not a known signal number"));
    }
    let upper = trimmed.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let signal = match name {
        "HUP" => Signal::HUP,
        "INT" => Signal::INT,
        "QUIT" => Signal::QUIT,
        "KILL" => Signal::KILL,
        "USR1" => Signal::USR1,
        "USR2" => Signal::USR2,
        "ALRM" => Signal::ALARM,
        "TERM" => Signal::TERM,
        "CONT" => Signal::CONT,
        "WINCH" => Signal::WINCH,
        "IO" | "POLL" => Signal::IO,
        // The BSDs (macOS) have no SIGPWR.
        #[cfg(target_os = "linux")]
        "PWR" => Signal::POWER,
        _ => return Err(format!("unknown signal `{trimmed}` (try HUP, USR1, USR2, TERM, or a number)")),
    };
    Ok(signal)
}

fn parse_method(s: &str) -> Result<Method, String> {
    Method::from_bytes(s.trim().to_ascii_uppercase().as_bytes())
        .map_err(|_| format!("`{s}` is not an HTTP method"))
}

/// `2xx`, `200`, `200,204,3xx`.
pub(crate) fn parse_expected_status(s: &str) -> Result<ExpectedStatus, String> {
    let mut rules = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let lower = item.to_ascii_lowercase();
        let rule = match lower.strip_suffix("xx") {
            Some(class) => match class.parse::<u16>() {
                Ok(c @ 1..=5) if class.len() == 1 => StatusRule::Class(c),
                _ => return Err(format!("`{item}` is not a status class (1xx to 5xx)")),
            },
            None => match lower.parse::<u16>() {
                Ok(code @ 100..=599) => StatusRule::Exact(code),
                _ => return Err(format!("`{item}` is not an HTTP status (100 to 599)")),
            },
        };
        rules.push(rule);
    }
    if rules.is_empty() {
        return Err("no expected status given".to_owned());
    }
    Ok(ExpectedStatus(rules))
}

/// `500ms`, `10s`, `2m`, `1h`, or plain seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: u64 = number.parse().map_err(|_| format!("`{s}` is not a duration (e.g. 500ms, 10s, 2m)"))?;
    let duration = match unit {
        "ms" => Duration::from_millis(value),
        "" | "s" => Duration::from_secs(value),
        "m" => Duration::from_secs(value.saturating_mul(60)),
        "h" => Duration::from_secs(value.saturating_mul(3600)),
        _ => return Err(format!("unknown unit in `{s}` (use ms, s, m or h)")),
    };
    Ok(duration)
}

/// `:9091` listens on every interface; `host:port` on one; empty disables the server.
pub(crate) fn parse_metrics_addr(s: &str) -> Result<MetricsAddr, String> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(MetricsAddr(None));
    }
    if let Some(port) = s.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| format!("`{s}` has no valid port"))?;
        return Ok(MetricsAddr(Some(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))));
    }
    s.parse::<SocketAddr>()
        .map(|addr| MetricsAddr(Some(addr)))
        .map_err(|_| format!("`{s}` is not an address like :9091 or 127.0.0.1:9091"))
}

/// Octal file mode such as `0644` or `640`; only permission bits.
pub(crate) fn parse_mode(s: &str) -> Result<u32, String> {
    let s = s.trim();
    let digits = s.strip_prefix("0o").unwrap_or(s);
    match u32::from_str_radix(digits, 8) {
        Ok(mode) if mode <= 0o777 => Ok(mode),
        _ => Err(format!("`{s}` is not an octal file mode like 0644")),
    }
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
