//! The real binary's command line: every Stakater flag is listed, and a bad value exits before
//! any API call with one line naming the flag and the value. KUBECONFIG points to a missing
//! file and the environment is otherwise empty, so reaching a cluster is impossible.

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BINARY: &str = env!("CARGO_BIN_EXE_reloader");

/// docs/compatibility.md §1, plus the leader-election tuning flags and ours.
const FLAGS: &[&str] = &[
    "--auto-reload-all",
    "--configmap-annotation",
    "--secret-annotation",
    "--auto-annotation",
    "--configmap-auto-annotation",
    "--secret-auto-annotation",
    "--auto-search-annotation",
    "--search-match-annotation",
    "--ignore-annotation",
    "--pause-deployment-annotation",
    "--pause-deployment-time-annotation",
    "--log-format",
    "--log-level",
    "--webhook-url",
    "--resources-to-ignore",
    "--ignored-workload-types",
    "--namespaces",
    "--namespaces-to-ignore",
    "--namespace-selector",
    "--resource-label-selector",
    "--is-Argo-Rollouts",
    "--is-openshift",
    "--reload-strategy",
    "--reload-on-create",
    "--reload-on-delete",
    "--enable-ha",
    "--sync-after-restart",
    "--enable-pprof",
    "--pprof-addr",
    "--enable-csi-integration",
    "--metrics-addr",
    "--leader-election-id",
    "--leader-election-namespace",
    "--leader-election-lease-duration",
    "--leader-election-renew-deadline",
    "--leader-election-retry-period",
    "--leader-election-release-on-cancel",
    "--coalesce-period",
    "--maintenance-window",
    "--loop-guard",
    "--max-writes-per-second",
    "--dry-run",
    "--ignored-secret-types",
    "--admission-webhook",
    "--job-fence",
    "--webhook-tls-cert",
    "--webhook-tls-key",
    "--webhook-addr",
    "--otlp-endpoint",
    "--allow-suspended-cronjobs",
    // Stakater's v2 line (unreleased): docs/compatibility.md §1.
    "--health-addr",
    "--configmap-exclude-annotation",
    "--secret-exclude-annotation",
    "--secretproviderclass-annotation",
    "--secretproviderclass-auto-annotation",
    "--secretproviderclass-exclude-annotation",
];

fn reloader(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(BINARY);
    command
        .args(args)
        .env_clear()
        .env("KUBECONFIG", "/nonexistent/reloader-test/kubeconfig")
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    command
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    reloader(args, env).output().expect("run the reloader binary")
}

#[test]
fn help_lists_every_flag() {
    for args in [&["--help"][..], &["run", "--help"]] {
        let output = run(args, &[]);
        assert!(output.status.success(), "{args:?}: {output:?}");
        let help = String::from_utf8(output.stdout).unwrap();
        for flag in FLAGS {
            let listed =
                help.lines().any(|line| line.trim_start().split([' ', '[', '=']).next() == Some(*flag));
            assert!(listed, "{args:?} does not list {flag}:\n{help}");
        }
        // Environment-only settings are not flags to document.
        assert!(!help.contains("--pod-name"), "{help}");
    }
}

/// A command line that must be refused.
struct Bad {
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
    /// Texts the single error line must contain: the flag and the value.
    needles: &'static [&'static str],
}

const BAD: &[Bad] = &[
    Bad { args: &["--reload-strategy=foo"], env: &[], needles: &["--reload-strategy", "\"foo\""] },
    Bad { args: &["run", "--reload-strategy=foo"], env: &[], needles: &["--reload-strategy", "\"foo\""] },
    Bad {
        args: &["--resources-to-ignore=configmaps,secrets"],
        env: &[],
        needles: &["--resources-to-ignore", "\"configmaps,secrets\""],
    },
    Bad { args: &["--resources-to-ignore=pods"], env: &[], needles: &["--resources-to-ignore", "\"pods\""] },
    Bad {
        args: &["--ignored-workload-types=deployments"],
        env: &[],
        needles: &["--ignored-workload-types", "\"deployments\""],
    },
    Bad {
        args: &["--namespace-selector=env in (a"],
        env: &[],
        needles: &["--namespace-selector", "\"env in (a\""],
    },
    Bad {
        args: &["--resource-label-selector=-bad=x"],
        env: &[],
        needles: &["--resource-label-selector", "\"-bad=x\""],
    },
    Bad { args: &["--coalesce-period=5x"], env: &[], needles: &["--coalesce-period", "\"5x\""] },
    Bad { args: &["--loop-guard=often"], env: &[], needles: &["--loop-guard", "\"often\""] },
    Bad {
        args: &["--maintenance-window=Mun 02:00-04:00 UTC"],
        env: &[],
        needles: &["--maintenance-window", "\"Mun 02:00-04:00 UTC\"", "unknown day \"Mun\""],
    },
    Bad {
        args: &["--leader-election-lease-duration=-1s"],
        env: &[],
        needles: &["--leader-election-lease-duration", "\"-1s\""],
    },
    Bad {
        args: &["--leader-election-renew-deadline=20s"],
        env: &[],
        needles: &["--leader-election-renew-deadline", "\"20s\""],
    },
    Bad { args: &["--metrics-addr=nonsense"], env: &[], needles: &["--metrics-addr", "\"nonsense\""] },
    Bad { args: &["--log-level=loud"], env: &[], needles: &["--log-level", "\"loud\""] },
    Bad { args: &["--is-openshift=maybe"], env: &[], needles: &["--is-openshift", "\"maybe\""] },
    Bad { args: &["--enable-ha=maybe"], env: &[], needles: &["--enable-ha", "\"maybe\""] },
    Bad {
        args: &["--max-writes-per-second=fast"],
        env: &[],
        needles: &["--max-writes-per-second", "\"fast\""],
    },
    Bad { args: &["--max-writes-per-second=-1"], env: &[], needles: &["--max-writes-per-second", "\"-1\""] },
    Bad {
        args: &["--enable-pprof", "--pprof-addr=:9090"],
        env: &[],
        needles: &["--pprof-addr", "\":9090\""],
    },
    Bad { args: &["--namespaces=Bad_NS"], env: &[], needles: &["--namespaces", "\"Bad_NS\""] },
    Bad {
        args: &["--webhook-url=hooks.example.com"],
        env: &[],
        needles: &["--webhook-url", "\"<redacted>\""],
    },
    Bad { args: &["--admission-webhook"], env: &[], needles: &["--admission-webhook", "--webhook-tls-cert"] },
    Bad { args: &["--enable-ha"], env: &[], needles: &["--enable-ha", "POD_NAME"] },
    // The environment is read: POD_NAME is there, POD_NAMESPACE is missing.
    Bad {
        args: &["run", "--enable-ha"],
        env: &[("POD_NAME", "reloader-0")],
        needles: &["--enable-ha", "POD_NAMESPACE"],
    },
    Bad {
        args: &[],
        env: &[("KUBERNETES_NAMESPACE", "Bad_NS")],
        needles: &["KUBERNETES_NAMESPACE", "\"Bad_NS\""],
    },
    Bad { args: &["--otlp-endpoint=x"], env: &[], needles: &["--otlp-endpoint", "\"x\""] },
    Bad {
        args: &[],
        env: &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")],
        needles: &["--otlp-endpoint", "\"collector:4318\""],
    },
    // Usage errors are one line too.
    Bad { args: &["--no-such-flag"], env: &[], needles: &["--no-such-flag"] },
    Bad {
        args: &["--enable-ha", "false"],
        env: &[],
        needles: &["unexpected argument 'false'", "--enable-ha=false"],
    },
    Bad { args: &["--log-level"], env: &[], needles: &["--log-level"] },
    Bad {
        args: &["--auto-reload-all", "run"],
        env: &[],
        needles: &["the subcommand 'run' cannot be used with '--auto-reload-all"],
    },
];

#[test]
fn bad_values_exit_with_one_line_naming_flag_and_value() {
    for Bad { args, env, needles } in BAD {
        let output = run(args, env);
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?} {env:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}: stdout {:?}", String::from_utf8_lossy(&output.stdout));
        assert_eq!(stderr.lines().count(), 1, "{args:?} {env:?}: not one line:\n{stderr}");
        assert!(stderr.starts_with("reloader: ") && stderr.ends_with('\n'), "{args:?}: {stderr:?}");
        for needle in *needles {
            assert!(stderr.contains(needle), "{args:?} {env:?}: {needle} missing from {stderr:?}");
        }
        assert!(!stderr.contains("\u{1b}["), "{args:?}: colour codes in {stderr:?}");
    }
}

/// Whether the child exited on its own within `limit`; kills it otherwise.
fn finished_within(child: &mut Child, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if child.try_wait().expect("poll the child").is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("kill the child");
    child.wait().expect("reap the child");
    false
}

#[test]
fn valid_flags_pass_validation() {
    let cases: &[&[&str]] = &[
        &[],
        &["run"],
        &[
            "--auto-reload-all",
            "--is-Argo-Rollouts=true",
            "--reload-strategy=annotations",
            "--namespace-selector=\"env in (a,b),team:ops\"",
            "--resource-label-selector=reloader:*",
            "--ignored-workload-types=jobs,cronjobs",
            "--resources-to-ignore=configMaps",
            "--log-format=json",
            "--log-level=debug",
            "--coalesce-period=1m30s",
            "--metrics-addr=127.0.0.1:0",
        ],
        // Every flag of Stakater's v2 line, with v2's syntax (alerts as flags too).
        &[
            "--metrics-addr=127.0.0.1:0",
            "--health-addr=127.0.0.1:0",
            "--configmap-exclude-annotation=configmaps.exclude.reloader.stakater.com/reload",
            "--secret-exclude-annotation=secrets.exclude.reloader.stakater.com/reload",
            "--secretproviderclass-annotation=secretproviderclass.reloader.stakater.com/reload",
            "--secretproviderclass-auto-annotation=secretproviderclass.reloader.stakater.com/auto",
            "--secretproviderclass-exclude-annotation=secretproviderclasses.exclude.reloader.stakater.com/reload",
            "--alert-on-reload",
            "--alert-webhook-url=https://hooks.example/T",
            "--alert-sink=raw",
            "--alert-proxy=http://127.0.0.1:3128",
            "--alert-additional-info=prod",
            "--alert-structured",
        ],
    ];
    for args in cases {
        let mut child = reloader(args, &[]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        // Still running (it got past validation) or ended some other way than a usage error.
        if finished_within(&mut child, Duration::from_secs(10)) {
            let mut stderr = String::new();
            child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
            let code = child.wait().unwrap().code();
            assert_ne!(code, Some(2), "{args:?} was rejected: {stderr}");
        }
    }
}

#[test]
fn completion_prints_a_script_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let output = run(&["completion", shell], &[]);
        assert!(output.status.success(), "{shell}: {output:?}");
        let script = String::from_utf8(output.stdout).unwrap();
        for word in ["reloader", "run", "sidecar", "explain", "completion", "reload-strategy"] {
            assert!(script.contains(word), "the {shell} script does not mention {word}:\n{script}");
        }
    }
}

#[test]
fn completion_for_an_unknown_shell_exits_2_with_one_line() {
    let output = run(&["completion", "tcsh"], &[]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("reloader: ") && stderr.contains("tcsh"), "{stderr}");
    assert!(output.stdout.is_empty(), "{:?}", output.stdout);
}

#[test]
fn linked_as_kubectl_reloader_it_is_a_kubectl_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("kubectl-reloader");
    std::os::unix::fs::symlink(BINARY, &plugin).unwrap();
    for args in [&["--help"][..], &["explain", "--help"]] {
        let output = Command::new(&plugin).args(args).env_clear().output().unwrap();
        assert!(output.status.success(), "{args:?}: {output:?}");
        let help = String::from_utf8(output.stdout).unwrap();
        assert!(help.contains("Usage: kubectl reloader"), "{args:?}:\n{help}");
    }
    let explain = Command::new(&plugin).args(["explain", "--help"]).env_clear().output().unwrap();
    let help = String::from_utf8(explain.stdout).unwrap();
    assert!(help.contains("--context") && help.contains("--kubeconfig"), "{help}");
    // The plain name keeps its own usage line.
    let help = String::from_utf8(run(&["--help"], &[]).stdout).unwrap();
    assert!(help.contains("Usage: reloader") && !help.contains("kubectl"), "{help}");
}

#[test]
fn explain_with_a_context_missing_from_the_kubeconfig_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n\
         users:\n- name: u\n  user: {}\ncontexts:\n- name: known\n  context: {cluster: c, user: u}\n\
         current-context: known\n",
    )
    .unwrap();
    let path = kubeconfig.to_str().unwrap();
    let by_flag = run(
        &["explain", "deployment/web", "-n", "shop", "--kubeconfig", path, "--context", "elsewhere"],
        &[],
    );
    let by_env = run(&["explain", "deployment/web", "--context", "elsewhere"], &[("KUBECONFIG", path)]);
    for output in [by_flag, by_env] {
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("context \"elsewhere\" does not exist"), "{stderr}");
    }
}
