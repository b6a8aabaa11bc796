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
    assert_eq!(a.metrics_addr, MetricsAddr(Some("127.0.0.1:9091".parse().unwrap())), "loopback unless asked");
    assert_eq!((a.configmap_mode, a.secret_mode), (0o644, 0o640));
    assert!(parse(&[]).is_err(), "--path is required");
}

#[test]
fn lists_are_split_trimmed_and_deduplicated() {
    let a =
        parse(&["--path", "/d", "--configmap", "a, b,,a", "--configmap", "c", "--secret", "s1,s2,"]).unwrap();
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
        cmd.args(["--exact", "args::tests::env_child", "--ignored", "--nocapture"]).env(CHILD_MARKER, "1");
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
    for (init, want) in [("false", "false"), ("0", "false"), ("", "false"), ("no", "false"), ("true", "true")]
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
