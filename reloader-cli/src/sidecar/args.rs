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
    pub configmaps: Vec<String>,

    /// Secrets to copy, merged after the ConfigMaps (comma-separated or repeated).
    #[arg(long = "secret", env = "RELOADER_SECRET", value_name = "NAME", value_delimiter = ',')]
    pub secrets: Vec<String>,

    /// Directory that receives the files (created if missing).
    #[arg(long, env = "RELOADER_PATH", value_name = "DIR")]
    pub path: PathBuf,

    /// Namespace of the objects [default: the kubeconfig's or in-cluster namespace].
    #[arg(long, short = 'n', env = "POD_NAMESPACE")]
    pub namespace: Option<String>,

    /// Kubeconfig file [default: $KUBECONFIG, in-cluster config, then ~/.kube/config].
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// URL to call after each content change.
    #[arg(long, env = "RELOADER_ENDPOINT", value_name = "URL")]
    pub endpoint: Option<Url>,

    /// HTTP method of the notification.
    #[arg(long, default_value = "POST", value_parser = parse_method)]
    pub endpoint_method: Method,

    /// Status that counts as success: `2xx`-style classes or codes, comma-separated.
    #[arg(long, default_value = "2xx", value_parser = parse_expected_status)]
    pub endpoint_expected_status: ExpectedStatus,

    /// Retries after a failed notification, with exponential backoff.
    #[arg(long, default_value_t = 5)]
    pub endpoint_retries: u32,

    /// Timeout of one notification request (`500ms`, `10s`, `1m`).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub endpoint_timeout: Duration,

    /// File holding the PID to signal after each content change (read each time).
    #[arg(long, env = "RELOADER_PIDFILE", value_name = "FILE")]
    pub pidfile: Option<PathBuf>,

    /// Signal sent to the PID in `--pidfile` (`HUP`, `SIGUSR1`, a number).
    #[arg(long, env = "RELOADER_SIGNAL", default_value = "SIGHUP", value_parser = parse_signal)]
    pub signal: Signal,

    /// File created or whose mtime is updated after each content change.
    #[arg(long = "touch-file", env = "RELOADER_TOUCHFILE", value_name = "FILE")]
    pub touch_file: Option<PathBuf>,

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
    pub init: bool,

    /// How long init mode waits for the objects.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub init_timeout: Duration,

    /// Address of /metrics, /live and /readyz (`:9091`, `127.0.0.1:9091`; empty disables).
    #[arg(long, default_value = ":9091", value_parser = parse_metrics_addr)]
    pub metrics_addr: MetricsAddr,

    /// Mode of files that come from ConfigMaps (octal).
    #[arg(long, default_value = "0644", value_parser = parse_mode)]
    pub configmap_mode: u32,

    /// Mode of files that come from Secrets (octal). 0640 keeps them private to the owner and the
    /// pod's fsGroup, which is how an application running as another user reads them.
    #[arg(long, default_value = "0640", value_parser = parse_mode)]
    pub secret_mode: u32,
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
pub struct MetricsAddr(pub Option<SocketAddr>);

/// Which HTTP statuses a notification accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedStatus(Vec<StatusRule>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StatusRule {
    /// `2xx`: any status whose first digit matches.
    Class(u16),
    Exact(u16),
}

impl ExpectedStatus {
    pub fn matches(&self, status: StatusCode) -> bool {
        let code = status.as_u16();
        self.0.iter().any(|rule| match *rule {
            StatusRule::Class(class) => code / 100 == class,
            StatusRule::Exact(exact) => code == exact,
        })
    }
}

/// Booleans as people write them: `true/false`, `1/0`, `yes/no`, `on/off` (any case), and an
/// empty value is false. morecontainers treated any non-empty value, `false` included, as true.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "t" | "true" | "y" | "yes" | "on" => Ok(true),
        "" | "0" | "f" | "false" | "n" | "no" | "off" => Ok(false),
        other => Err(format!("`{other}` is not a boolean (use true/false, 1/0, yes/no, on/off)")),
    }
}

/// `HUP`, `SIGHUP`, `sighup` or a signal number.
pub fn parse_signal(s: &str) -> Result<Signal, String> {
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
pub fn parse_expected_status(s: &str) -> Result<ExpectedStatus, String> {
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
pub fn parse_duration(s: &str) -> Result<Duration, String> {
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
pub fn parse_metrics_addr(s: &str) -> Result<MetricsAddr, String> {
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
pub fn parse_mode(s: &str) -> Result<u32, String> {
    let s = s.trim();
    let digits = s.strip_prefix("0o").unwrap_or(s);
    match u32::from_str_radix(digits, 8) {
        Ok(mode) if mode <= 0o777 => Ok(mode),
        _ => Err(format!("`{s}` is not an octal file mode like 0644")),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: SidecarArgs,
    }

    fn parse(argv: &[&str]) -> Result<SidecarArgs, clap::Error> {
        let mut full = vec!["reloader"];
        full.extend_from_slice(argv);
        Cli::try_parse_from(full).map(|c| c.args)
    }

    #[test]
    fn booleans_parse_the_way_people_write_them() {
        for yes in ["true", "TRUE", "True", "1", "yes", "on", " y "] {
            assert_eq!(parse_bool(yes), Ok(true), "{yes:?}");
        }
        for no in ["false", "False", "0", "no", "off", "", "  "] {
            assert_eq!(parse_bool(no), Ok(false), "{no:?}");
        }
        assert!(parse_bool("maybe").is_err());
        assert!(parse_bool("2").is_err());
    }

    #[test]
    fn init_flag_forms() {
        assert!(!parse(&["--path", "/d"]).unwrap().init);
        assert!(parse(&["--path", "/d", "--init"]).unwrap().init);
        assert!(parse(&["--path", "/d", "--init=true"]).unwrap().init);
        assert!(!parse(&["--path", "/d", "--init=false"]).unwrap().init);
        assert!(!parse(&["--path", "/d", "--init=0"]).unwrap().init);
        assert!(parse(&["--path", "/d", "--init=yes"]).unwrap().init);
        assert!(parse(&["--path", "/d", "--init=bogus"]).is_err());
        // `--init` does not swallow the next argument.
        let a = parse(&["--init", "--path", "/d"]).unwrap();
        assert!(a.init);
        assert_eq!(a.path, PathBuf::from("/d"));
    }

    #[test]
    fn defaults() {
        let a = parse(&["--path", "/data"]).unwrap();
        assert_eq!(a.endpoint_method, Method::POST);
        assert!(a.endpoint_expected_status.matches(StatusCode::NO_CONTENT));
        assert!(!a.endpoint_expected_status.matches(StatusCode::MOVED_PERMANENTLY));
        assert_eq!(a.signal, Signal::HUP);
        assert_eq!(a.init_timeout, Duration::from_secs(60));
        assert_eq!(a.metrics_addr, MetricsAddr(Some("0.0.0.0:9091".parse().unwrap())));
        assert_eq!((a.configmap_mode, a.secret_mode), (0o644, 0o640));
        assert!(parse(&[]).is_err(), "--path is required");
    }

    #[test]
    fn lists_are_split_trimmed_and_deduplicated() {
        let a = parse(&["--path", "/d", "--configmap", "a, b,,a", "--configmap", "c", "--secret", "s1,s2,"])
            .unwrap();
        assert_eq!(a.configmap_names(), ["a", "b", "c"]);
        assert_eq!(a.secret_names(), ["s1", "s2"]);
    }

    #[test]
    fn signals_by_name_or_number() {
        for (input, want) in [
            ("HUP", Signal::HUP),
            ("SIGHUP", Signal::HUP),
            ("sigusr1", Signal::USR1),
            ("USR2", Signal::USR2),
            ("TERM", Signal::TERM),
            ("1", Signal::HUP),
            ("10", Signal::USR1),
        ] {
            assert_eq!(parse_signal(input), Ok(want), "{input}");
        }
        assert!(parse_signal("SIGBOGUS").is_err());
        assert!(parse_signal("0").is_err());
    }

    #[test]
    fn expected_status_rules() {
        let s = parse_expected_status("200, 3xx").unwrap();
        assert!(s.matches(StatusCode::OK));
        assert!(s.matches(StatusCode::FOUND));
        assert!(!s.matches(StatusCode::NO_CONTENT));
        for bad in ["", "6xx", "20x", "abc", "99", "600", "22xx"] {
            assert!(parse_expected_status(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn durations_modes_and_addresses() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("1.5s").is_err());
        assert!(parse_duration("s").is_err());
        assert_eq!(parse_mode("0600"), Ok(0o600));
        assert_eq!(parse_mode("640"), Ok(0o640));
        assert!(parse_mode("0999").is_err());
        assert!(parse_mode("01777").is_err());
        assert_eq!(parse_metrics_addr(""), Ok(MetricsAddr(None)));
        assert_eq!(parse_metrics_addr("127.0.0.1:0"), Ok(MetricsAddr(Some("127.0.0.1:0".parse().unwrap()))));
        assert!(parse_metrics_addr(":http").is_err());
    }

    #[test]
    fn method_is_case_insensitive() {
        let a = parse(&["--path", "/d", "--endpoint-method", "put"]).unwrap();
        assert_eq!(a.endpoint_method, Method::PUT);
    }

    /// Environment variables cannot be set safely in a multi-threaded test process, so this test
    /// runs `env_child` in a fresh copy of the test binary with the morecontainers variables set.
    #[test]
    fn morecontainers_environment_variables() {
        let run = |extra: &[(&str, &str)]| {
            let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
            cmd.args(["--exact", "sidecar::args::tests::env_child", "--ignored", "--nocapture"])
                .env(CHILD_MARKER, "1");
            for (k, v) in extra {
                cmd.env(k, v);
            }
            cmd.output().unwrap()
        };
        let base = [
            ("RELOADER_CONFIGMAP", "app-config, extra"),
            ("RELOADER_SECRET", "creds"),
            ("RELOADER_PATH", "/etc/app"),
            ("RELOADER_ENDPOINT", "http://127.0.0.1:8080/-/reload"),
            ("RELOADER_PIDFILE", "/run/app.pid"),
            ("RELOADER_SIGNAL", "USR1"),
            ("RELOADER_TOUCHFILE", "/tmp/reloaded"),
            ("POD_NAMESPACE", "team-a"),
        ];
        for (init, want) in
            [("false", "false"), ("0", "false"), ("", "false"), ("no", "false"), ("true", "true")]
        {
            let mut vars = base.to_vec();
            vars.push(("RELOADER_INIT", init));
            vars.push(("EXPECT_INIT", want));
            let out = run(&vars);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "RELOADER_INIT={init:?}: {stdout}");
            assert!(stdout.contains("1 passed"), "child test did not run: {stdout}");
        }
        let mut vars = base.to_vec();
        vars.push(("RELOADER_INIT", "maybe"));
        vars.push(("EXPECT_INIT", "error"));
        let out = run(&vars);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    }

    const CHILD_MARKER: &str = "RELOADER_SIDECAR_ARGS_ENV_CHILD";

    #[test]
    #[ignore = "run in a child process by morecontainers_environment_variables"]
    fn env_child() {
        assert_eq!(std::env::var(CHILD_MARKER).as_deref(), Ok("1"), "run only by the parent test");
        let expect = std::env::var("EXPECT_INIT").unwrap();
        let parsed = parse(&[]);
        if expect == "error" {
            assert!(parsed.is_err());
            return;
        }
        let a = parsed.unwrap();
        assert_eq!(a.init.to_string(), expect);
        assert_eq!(a.configmap_names(), ["app-config", "extra"]);
        assert_eq!(a.secret_names(), ["creds"]);
        assert_eq!(a.path, PathBuf::from("/etc/app"));
        assert_eq!(a.endpoint.unwrap().as_str(), "http://127.0.0.1:8080/-/reload");
        assert_eq!(a.pidfile, Some(PathBuf::from("/run/app.pid")));
        assert_eq!(a.signal, Signal::USR1);
        assert_eq!(a.touch_file, Some(PathBuf::from("/tmp/reloaded")));
        assert_eq!(a.namespace.as_deref(), Some("team-a"));
    }
}
