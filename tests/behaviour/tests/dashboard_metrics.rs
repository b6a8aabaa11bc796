//! The chart's Grafana dashboard and alerting rules (`grafanaDashboard`, `prometheusRule`;
//! docs/monitoring.md) cannot silently rot: every metric that a dashboard panel, a dashboard
//! variable or an alert expression queries, and every label name those queries match or group on,
//! is exported by the real binary on the plane once it has reloaded a workload, failed to write
//! another and skipped a third. The chart renders the ConfigMap and the PrometheusRule only when
//! they are enabled, with the usual namespace, label and annotation knobs. Prometheus's own parser
//! (`promtool check rules`, built by `hack/build promtool`) accepts the rendered alerting rules and
//! every panel query of the dashboard.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use reloader_harness::{NotYet, Reloader, wait_until};
use reloader_tests::chart::{Helm, Manifest, Promtool};
use reloader_tests::fixtures::*;
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(60);
const CONFIG: &str = "app-config";
const RELEASE: &str = "rel";
const NAMESPACE: &str = "ops";
const MONITORING_API: &[&str] = &["monitoring.coreos.com/v1"];
const DASHBOARD_FILE: &str = include_str!("../../../charts/reloader/dashboards/reloader.json");

/// Labels Prometheus adds to every series of a scrape target (the Prometheus Operator's
/// ServiceMonitor and PodMonitor targets), which no binary exports itself.
const TARGET_LABELS: [&str; 7] = ["namespace", "job", "pod", "instance", "service", "endpoint", "container"];

/// What the issue asks the dashboard to show, by the series that show it.
const DASHBOARD_MUST_QUERY: [&str; 12] = [
    "reloader_action_total",
    "reloader_reload_latency_seconds_bucket",
    "reloader_skip_reasons_total",
    "reloader_error_types_total",
    "reloader_workqueue_depth",
    "reloader_write_rate_limit_wait_seconds_bucket",
    "reloader_leader",
    "reloader_leader_transitions_total",
    "reloader_index_objects",
    "process_resident_memory_bytes",
    "process_cpu_seconds_total",
    "reloader_build_info",
];

const ALERTS: [&str; 5] = [
    "ReloaderReloadFailures",
    "ReloaderNoLeader",
    "ReloaderWatchErrors",
    "ReloaderReloadLoopStopped",
    "ReloaderWriteRateLimitSaturated",
];

/// A tiny reader of the PromQL this project writes: enough to list the series and label names an
/// expression reads, not to evaluate it.
mod promql {
    use std::collections::BTreeSet;

    const GROUPING: [&str; 6] = ["by", "without", "on", "ignoring", "group_left", "group_right"];
    const KEYWORDS: [&str; 7] = ["and", "or", "unless", "bool", "offset", "inf", "nan"];
    /// Aggregations may put `by (...)` between their name and their argument.
    const AGGREGATIONS: [&str; 14] = [
        "sum",
        "min",
        "max",
        "avg",
        "count",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
        "group",
        "limitk",
        "limit_ratio",
    ];

    /// One instant or range selector: the metric and the label names its matchers name.
    #[derive(Debug, PartialEq, Eq)]
    pub struct Selector {
        pub metric: String,
        pub labels: BTreeSet<String>,
    }

    /// Everything an expression reads.
    #[derive(Debug, Default, PartialEq, Eq)]
    pub struct Reads {
        pub selectors: Vec<Selector>,
        /// Label names of `by`, `without`, `on`, `ignoring`, `group_left` and `group_right`.
        pub grouping: BTreeSet<String>,
    }

    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Token {
        Ident(String),
        Open(char),
        Close(char),
        /// `=`, `!=`, `=~`, `!~` (and `==`, which only matters outside braces).
        Matcher,
        /// Strings, numbers, durations, commas, operators.
        Other,
    }

    fn tokens(expr: &str) -> Vec<Token> {
        let chars: Vec<char> = expr.chars().collect();
        let mut out = Vec::new();
        let mut i = 0;
        let skip_to = |i: &mut usize, end: char| {
            *i += 1;
            while *i < chars.len() && chars[*i] != end {
                *i += if chars[*i] == '\\' { 2 } else { 1 };
            }
            *i += 1;
        };
        while i < chars.len() {
            let c = chars[i];
            match c {
                c if c.is_whitespace() => i += 1,
                '"' | '\'' | '`' => {
                    skip_to(&mut i, c);
                    out.push(Token::Other);
                }
                // A range or subquery duration.
                '[' => {
                    skip_to(&mut i, ']');
                    out.push(Token::Other);
                }
                '{' | '(' => {
                    out.push(Token::Open(c));
                    i += 1;
                }
                '}' | ')' => {
                    out.push(Token::Close(c));
                    i += 1;
                }
                '=' | '!' => {
                    i += if matches!(chars.get(i + 1), Some('=' | '~')) { 2 } else { 1 };
                    out.push(Token::Matcher);
                }
                c if c.is_ascii_digit() || c == '.' => {
                    while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                        i += 1;
                    }
                    out.push(Token::Other);
                }
                c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                    let start = i;
                    while i < chars.len()
                        && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
                    {
                        i += 1;
                    }
                    out.push(Token::Ident(chars[start..i].iter().collect()));
                }
                _ => {
                    out.push(Token::Other);
                    i += 1;
                }
            }
        }
        out
    }

    /// The series and labels `expr` reads.
    pub fn reads(expr: &str) -> Reads {
        let tokens = tokens(expr);
        let mut reads = Reads::default();
        let mut i = 0;
        while i < tokens.len() {
            if let Token::Ident(word) = &tokens[i] {
                let next = tokens.get(i + 1);
                if GROUPING.contains(&word.as_str()) {
                    if next == Some(&Token::Open('(')) {
                        i += 2;
                        while i < tokens.len() && tokens[i] != Token::Close(')') {
                            if let Token::Ident(label) = &tokens[i] {
                                reads.grouping.insert(label.clone());
                            }
                            i += 1;
                        }
                    }
                } else if !(KEYWORDS.contains(&word.as_str())
                    || AGGREGATIONS.contains(&word.as_str())
                    || next == Some(&Token::Open('(')))
                {
                    let mut selector = Selector { metric: word.clone(), labels: BTreeSet::new() };
                    if next == Some(&Token::Open('{')) {
                        i += 2;
                        while i < tokens.len() && tokens[i] != Token::Close('}') {
                            if let (Token::Ident(label), Some(Token::Matcher)) =
                                (&tokens[i], tokens.get(i + 1))
                            {
                                selector.labels.insert(label.clone());
                            }
                            i += 1;
                        }
                    }
                    reads.selectors.push(selector);
                }
            }
            i += 1;
        }
        reads
    }

    /// A Grafana variable query: `label_values(<selector>, <label>)` reads the selector and the
    /// label; anything else is an expression.
    pub fn variable_reads(query: &str) -> Reads {
        let inner = query.trim().strip_prefix("label_values(").and_then(|rest| rest.strip_suffix(')'));
        match inner.and_then(|inner| inner.rsplit_once(',')) {
            Some((selector, label)) => {
                let mut reads = reads(selector);
                reads.grouping.insert(label.trim().to_owned());
                reads
            }
            None => reads(query),
        }
    }
}

use promql::Reads;

/// The sample names of one scrape and, for each, the label names its samples carry.
struct Exported(BTreeMap<String, BTreeSet<String>>);

impl Exported {
    fn parse(text: &str) -> Self {
        let mut exported: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for line in text.lines().filter(|line| !line.starts_with('#') && !line.is_empty()) {
            let series = line.rsplit_once(' ').map_or(line, |(series, _)| series);
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            let names = exported.entry(name.to_owned()).or_default();
            // Label values here never hold `",`; good enough to split the pairs.
            for pair in labels.trim_end_matches('}').split("\",").filter(|pair| !pair.is_empty()) {
                names.insert(pair.split_once('=').map_or(pair, |(label, _)| label).to_owned());
            }
        }
        Exported(exported)
    }

    /// What in `reads` the binary does not export: unknown series, and label names that none
    /// of the series read carries (Prometheus's target labels aside).
    fn problems(&self, reads: &Reads) -> Vec<String> {
        let mut problems = Vec::new();
        let mut carried: BTreeSet<&str> = TARGET_LABELS.into_iter().collect();
        for selector in &reads.selectors {
            let Some(labels) = self.0.get(&selector.metric) else {
                problems.push(format!("{} is not exported", selector.metric));
                continue;
            };
            carried.extend(labels.iter().map(String::as_str));
            for label in &selector.labels {
                if !labels.contains(label) && !TARGET_LABELS.contains(&label.as_str()) {
                    problems.push(format!("{} has no label {label}", selector.metric));
                }
            }
        }
        for label in &reads.grouping {
            if !carried.contains(label.as_str()) {
                problems.push(format!("no series read carries the grouping label {label}"));
            }
        }
        problems
    }
}

/// What a query of the chart is: Grafana runs panel and variable queries (only panel queries are
/// PromQL; a variable's `label_values(...)` is Grafana's), Prometheus evaluates alerts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QueryKind {
    Panel,
    Variable,
    Alert,
}

/// One query of the chart: where it is, its text and what it reads.
struct Query {
    kind: QueryKind,
    place: String,
    text: String,
    reads: Reads,
}

/// Every PromQL query of a dashboard: panel targets (rows included) and variable queries.
fn dashboard_queries(dashboard: &Value) -> Vec<Query> {
    fn panels<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for panel in list.as_array().into_iter().flatten() {
            out.push(panel);
            panels(&panel["panels"], out);
        }
    }
    let mut all = Vec::new();
    panels(&dashboard["panels"], &mut all);
    let mut queries = Vec::new();
    for panel in all.iter().filter(|panel| panel["type"] != "row") {
        let title = panel["title"].as_str().unwrap_or("?");
        let targets = panel["targets"].as_array().map(Vec::as_slice).unwrap_or_default();
        assert!(!targets.is_empty(), "panel {title:?} queries nothing");
        for target in targets {
            let text =
                target["expr"].as_str().unwrap_or_else(|| panic!("panel {title:?}: a target without expr"));
            queries.push(Query {
                kind: QueryKind::Panel,
                place: format!("panel {title:?}"),
                text: text.to_owned(),
                reads: promql::reads(text),
            });
        }
    }
    for variable in dashboard["templating"]["list"].as_array().into_iter().flatten() {
        if variable["type"] != "query" {
            continue;
        }
        let query = &variable["query"];
        let text = query["query"].as_str().or(query.as_str()).expect("a variable's query");
        queries.push(Query {
            kind: QueryKind::Variable,
            place: format!("variable {}", variable["name"]),
            text: text.to_owned(),
            reads: promql::variable_reads(text),
        });
    }
    queries
}

/// Every alert of a rendered PrometheusRule: (alert name, expression).
fn alert_expressions(rule: &Value) -> Vec<(String, String)> {
    let groups = rule["spec"]["groups"].as_array().expect("spec.groups");
    groups
        .iter()
        .flat_map(|group| group["rules"].as_array().cloned().unwrap_or_default())
        .map(|rule| {
            let alert = rule["alert"].as_str().expect("an alert name").to_owned();
            (alert, rule["expr"].as_str().expect("an expression").to_owned())
        })
        .collect()
}

fn render(values: &Value) -> Manifest {
    let helm = Helm::locate().expect("helm (hack/build helm)");
    helm.lint(NAMESPACE, values).unwrap_or_else(|e| panic!("helm lint --strict {values}: {e}"));
    helm.template_with_apis(RELEASE, NAMESPACE, values, MONITORING_API)
        .unwrap_or_else(|e| panic!("helm template {values}: {e}"))
}

fn objects_of_kind<'a>(manifest: &'a Manifest, kind: &str) -> Vec<&'a Value> {
    manifest.objects().iter().filter(|object| object["kind"] == kind).collect()
}

fn dashboard_config_maps(manifest: &Manifest) -> Vec<&Value> {
    objects_of_kind(manifest, "ConfigMap")
        .into_iter()
        .filter(|object| !object["metadata"]["labels"]["grafana_dashboard"].is_null())
        .collect()
}

/// The dashboard and the rules as the chart renders them with both enabled (and HA, so the
/// no-leader rule is there).
fn rendered_queries() -> Vec<Query> {
    let values = json!({"grafanaDashboard": {"enabled": true}, "prometheusRule": {"enabled": true},
                        "reloader": {"enableHA": true}});
    let manifest = render(&values);
    let config_maps = dashboard_config_maps(&manifest);
    assert_eq!(config_maps.len(), 1, "one dashboard ConfigMap");
    let text = config_maps[0]["data"]["reloader.json"].as_str().expect("data reloader.json");
    let dashboard: Value = serde_json::from_str(text).expect("the dashboard is JSON");
    let mut queries = dashboard_queries(&dashboard);
    let read: BTreeSet<&str> =
        queries.iter().flat_map(|q| q.reads.selectors.iter().map(|s| s.metric.as_str())).collect();
    let missing: Vec<_> = DASHBOARD_MUST_QUERY.iter().filter(|metric| !read.contains(**metric)).collect();
    assert!(missing.is_empty(), "the dashboard shows nothing of {missing:?}");

    let rules = objects_of_kind(&manifest, "PrometheusRule");
    assert_eq!(rules.len(), 1, "one PrometheusRule");
    let alerts = alert_expressions(rules[0]);
    assert_eq!(alerts.iter().map(|(alert, _)| alert.as_str()).collect::<Vec<_>>(), ALERTS);
    queries.extend(alerts.into_iter().map(|(alert, expr)| Query {
        kind: QueryKind::Alert,
        place: format!("alert {alert}"),
        reads: promql::reads(&expr),
        text: expr,
    }));
    queries
}

async fn wait_for_sample(reloader: &Reloader, sample: &str) {
    wait_until(sample, TIMEOUT, || async {
        match reloader.metric(sample).await.map_err(|e| NotYet::because(e.to_string()))? {
            Some(value) if value >= 1.0 => Ok(()),
            value => Err(NotYet::because(format!("{value:?}"))),
        }
    })
    .await
    .unwrap();
}

async fn wait_for_family(reloader: &Reloader, family: &str) {
    wait_until(&format!("a sample of {family}"), TIMEOUT, || async {
        let text = reloader.metrics().await.map_err(|e| NotYet::because(e.to_string()))?;
        if text.lines().any(|line| line.starts_with(&format!("{family}{{"))) {
            Ok(())
        } else {
            Err(NotYet::because("no sample yet"))
        }
    })
    .await
    .unwrap();
}

/// A reload, a write the API server refuses, a workload skipped and an update without a data
/// change, on an HA replica with a write rate limit: then every series and label the dashboard
/// and the alerts query is in `/metrics`.
#[tokio::test]
async fn every_series_the_dashboard_and_the_alerts_query_is_exported() {
    let queries = rendered_queries();
    let env = TestEnv::new().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let config = ResourceRef::configmap(CONFIG);
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    let auto = |name: &str| {
        WorkloadSpec::new(Kind::Deployment, name)
            .metadata_annotation(ANNOTATION_AUTO, "true")
            .env_from_configmap(CONFIG)
            .without_pods()
    };
    let web = auto("web").create(client, ns.name()).await.unwrap();
    let (label, value) = FROZEN_LABEL;
    let frozen = auto("frozen").label(label, value).create(client, ns.name()).await.unwrap();
    // Not annotated: skipped.
    WorkloadSpec::new(Kind::Deployment, "plain")
        .env_from_configmap(CONFIG)
        .without_pods()
        .create(client, ns.name())
        .await
        .unwrap();
    let freeze = TemplateFreeze::install(client, ns.name(), &[frozen]).await.unwrap();
    let reloader = env
        .reloader_builder()
        .args(["--enable-ha", "--max-writes-per-second=50"])
        .env("POD_NAME", "dashboard-0")
        .env("POD_NAMESPACE", ns.name())
        .start()
        .await
        .unwrap();
    wait_for_sample(&reloader, "reloader_leader").await;

    let hash = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    web.wait_for_marker(client, &config, Strategy::EnvVars, &hash, TIMEOUT).await.unwrap();
    wait_for_sample(&reloader, r#"reloader_reload_executed_total{success="false"}"#).await;
    resources.update_metadata(&config, &[("touched", "yes")], &[]).await.unwrap();
    wait_for_sample(&reloader, r#"reloader_skipped_total{reason="no_data_change"}"#).await;
    for family in ["reloader_skip_reasons_total", "reloader_error_types_total", "reloader_index_objects"] {
        wait_for_family(&reloader, family).await;
    }
    let exported = Exported::parse(&reloader.metrics().await.unwrap());
    freeze.remove().await.unwrap();

    let problems: Vec<String> = queries
        .iter()
        .flat_map(|query| {
            exported
                .problems(&query.reads)
                .into_iter()
                .map(move |p| format!("{}: {p}\n    {}", query.place, query.text))
        })
        .collect();
    assert!(problems.is_empty(), "queries of series the binary does not export:\n{}", problems.join("\n"));
}

/// Off by default; on, with the namespace, label and annotation knobs; the rule only where the
/// cluster serves the Prometheus Operator's API, and the no-leader alert only with HA.
#[test]
fn the_chart_renders_the_dashboard_and_the_rules_only_when_enabled() {
    let helm = Helm::locate().expect("helm (hack/build helm)");
    let defaults = render(&json!({}));
    assert!(dashboard_config_maps(&defaults).is_empty(), "no dashboard by default");
    assert!(objects_of_kind(&defaults, "PrometheusRule").is_empty(), "no rules by default");

    let values = json!({
        "grafanaDashboard": {"enabled": true, "namespace": "grafana", "labels": {"grafana_dashboard": "reloader"},
                             "annotations": {"grafana_folder": "Platform"}},
        "prometheusRule": {"enabled": true, "namespace": "monitoring", "additionalLabels": {"release": "kps"},
                           "annotations": {"owner": "platform"}, "ruleLabels": {"team": "platform"},
                           "selector": "job=\"reloader\"",
                           "rules": {"watchErrors": {"enabled": false}, "reloadFailures": {"severity": "critical"}}},
    });
    let manifest = render(&values);
    let config_maps = dashboard_config_maps(&manifest);
    assert_eq!(config_maps.len(), 1);
    let metadata = &config_maps[0]["metadata"];
    assert_eq!(metadata["namespace"], "grafana");
    assert_eq!(metadata["labels"]["grafana_dashboard"], "reloader");
    assert_eq!(metadata["labels"]["app.kubernetes.io/instance"], RELEASE);
    assert_eq!(metadata["annotations"]["grafana_folder"], "Platform");
    let shipped: Value = serde_json::from_str(DASHBOARD_FILE).unwrap();
    let rendered: Value =
        serde_json::from_str(config_maps[0]["data"]["reloader.json"].as_str().unwrap()).unwrap();
    assert_eq!(rendered, shipped, "the ConfigMap carries charts/reloader/dashboards/reloader.json as is");

    let rules = objects_of_kind(&manifest, "PrometheusRule");
    assert_eq!(rules.len(), 1);
    let metadata = &rules[0]["metadata"];
    assert_eq!(metadata["namespace"], "monitoring");
    assert_eq!(metadata["labels"]["release"], "kps");
    assert_eq!(metadata["annotations"]["owner"], "platform");
    let alerts = alert_expressions(rules[0]);
    let names: Vec<_> = alerts.iter().map(|(alert, _)| alert.as_str()).collect();
    assert_eq!(
        names,
        ["ReloaderReloadFailures", "ReloaderReloadLoopStopped", "ReloaderWriteRateLimitSaturated"],
        "no HA, watchErrors off"
    );
    for (alert, expr) in &alerts {
        assert!(expr.contains("job=\"reloader\"") && !expr.contains("namespace=\"ops\""), "{alert}: {expr}");
    }
    let spec_rules = &rules[0]["spec"]["groups"][0]["rules"];
    assert_eq!(spec_rules[0]["labels"], json!({"severity": "critical", "team": "platform"}));
    assert_eq!(spec_rules[1]["labels"], json!({"severity": "warning", "team": "platform"}));

    // Default selector: the release namespace.
    let ha = render(&json!({"prometheusRule": {"enabled": true}, "reloader": {"enableHA": true}}));
    let alerts = alert_expressions(objects_of_kind(&ha, "PrometheusRule")[0]);
    assert_eq!(alerts.iter().map(|(alert, _)| alert.as_str()).collect::<Vec<_>>(), ALERTS);
    for (alert, expr) in &alerts {
        assert!(expr.contains(&format!("namespace=\"{NAMESPACE}\"")), "{alert}: {expr}");
    }

    // Without monitoring.coreos.com/v1 there is no PrometheusRule to create.
    let without_api =
        helm.template(RELEASE, NAMESPACE, &json!({"prometheusRule": {"enabled": true}})).unwrap();
    assert!(objects_of_kind(&without_api, "PrometheusRule").is_empty());
}

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true")
}

/// The pinned promtool, or `None` (skip) when it is missing outside CI: hack/test builds it (in
/// hack/lint-release) before the tests run; a first build takes about 14 minutes.
fn promtool() -> Option<Promtool> {
    match Promtool::locate() {
        Ok(promtool) => Some(promtool),
        Err(error) => {
            assert!(!under_ci(), "{error}");
            eprintln!("skipped: {error}");
            None
        }
    }
}

/// A panel query as Prometheus would receive it from Grafana: its interval variables
/// (`$__rate_interval`, `$__interval`, ...) become a duration, every other variable (`$namespace`,
/// `${job}`, ...) the regex that matches anything, as its "All" value does.
fn fill_grafana_variables(query: &str) -> String {
    let mut filled = String::with_capacity(query.len());
    let mut rest = query;
    while let Some(dollar) = rest.find('$') {
        filled.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        let (name, tail) = match after.strip_prefix('{') {
            Some(braced) => braced.split_once('}').unwrap_or((braced, "")),
            None => {
                let end =
                    after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
                after.split_at(end)
            }
        };
        filled.push_str(if name.starts_with("__") { "1m" } else { ".*" });
        rest = tail;
    }
    filled.push_str(rest);
    filled
}

#[test]
fn grafana_variables_are_filled_as_grafana_would() {
    let cases = [
        ("rate(a_total[$__rate_interval])", "rate(a_total[1m])"),
        (r#"b{namespace=~"$namespace", job=~"${job}"}"#, r#"b{namespace=~".*", job=~".*"}"#),
        (r#"c{pod=~"$pod_name"}[$__interval]"#, r#"c{pod=~".*"}[1m]"#),
        ("no variables", "no variables"),
    ];
    for (query, filled) in cases {
        assert_eq!(fill_grafana_variables(query), filled, "{query}");
    }
}

/// Prometheus's own parser accepts what the chart ships: the alerting rules as rendered (every
/// rule on) and each panel query of the dashboard, as a recording rule.
#[test]
fn promtool_accepts_the_alerting_rules_and_the_dashboard_queries() {
    let Some(promtool) = promtool() else { return };
    let manifest = render(&json!({"prometheusRule": {"enabled": true}, "reloader": {"enableHA": true}}));
    let rules = objects_of_kind(&manifest, "PrometheusRule");
    assert_eq!(rules.len(), 1, "one PrometheusRule");
    let report =
        promtool.check_rules(&rules[0]["spec"]).unwrap_or_else(|e| panic!("the alerting rules: {e}"));
    assert!(report.contains(&format!("SUCCESS: {} rules found", ALERTS.len())), "{report}");

    let dashboard: Value = serde_json::from_str(DASHBOARD_FILE).expect("the dashboard is JSON");
    let panel_queries: Vec<Query> =
        dashboard_queries(&dashboard).into_iter().filter(|query| query.kind == QueryKind::Panel).collect();
    assert!(!panel_queries.is_empty(), "the dashboard has panel queries");
    let recorded: Vec<Value> = panel_queries
        .iter()
        .enumerate()
        .map(|(i, query)| json!({"record": format!("dashboard:query{i}"), "expr": fill_grafana_variables(&query.text)}))
        .collect();
    let rules = json!({"groups": [{"name": "dashboard", "rules": recorded}]});
    let report = promtool.check_rules(&rules).unwrap_or_else(|e| {
        let places: Vec<_> = panel_queries
            .iter()
            .enumerate()
            .map(|(i, q)| format!("dashboard:query{i} = {}", q.place))
            .collect();
        panic!("the dashboard's queries: {e}\n{}", places.join("\n"))
    });
    assert!(report.contains(&format!("SUCCESS: {} rules found", panel_queries.len())), "{report}");
}

/// One case of the PromQL reader: the expression, its selectors (metric, matcher labels) and its
/// grouping labels.
type ReaderCase = (&'static str, &'static [(&'static str, &'static [&'static str])], &'static [&'static str]);

/// The PromQL reader, case by case.
#[test]
fn promql_reads_selectors_labels_and_groupings() {
    let set = |labels: &[&str]| labels.iter().map(|l| l.to_string()).collect::<BTreeSet<_>>();
    let cases: &[ReaderCase] = &[
        ("up", &[("up", &[])], &[]),
        (
            r#"sum by (workload_kind, result) (rate(reloader_action_total{namespace=~"$namespace", job=~"$job"}[$__rate_interval]))"#,
            &[("reloader_action_total", &["namespace", "job"])],
            &["workload_kind", "result"],
        ),
        (
            r#"histogram_quantile(0.99, sum by (le) (rate(x_bucket{a!="1",b!~"2"}[5m])))"#,
            &[("x_bucket", &["a", "b"])],
            &["le"],
        ),
        (
            r#"(max(reloader_leader{namespace="ops"}) or vector(0)) < 1"#,
            &[("reloader_leader", &["namespace"])],
            &[],
        ),
        ("a / on (pod) group_left (kind) b > bool 2", &[("a", &[]), ("b", &[])], &["pod", "kind"]),
        (
            r#"sum(rate(c_total{reason="x,y}"}[1m] offset 5m)) without (instance)"#,
            &[("c_total", &["reason"])],
            &["instance"],
        ),
    ];
    for (expr, selectors, grouping) in cases {
        let reads = promql::reads(expr);
        let expected: Vec<_> = selectors
            .iter()
            .map(|(metric, labels)| promql::Selector { metric: metric.to_string(), labels: set(labels) })
            .collect();
        assert_eq!(reads.selectors, expected, "{expr}");
        assert_eq!(reads.grouping, set(grouping), "{expr}");
    }
    let variable =
        promql::variable_reads(r#"label_values(reloader_build_info{namespace=~"$namespace"}, job)"#);
    assert_eq!(variable.selectors[0].metric, "reloader_build_info");
    assert_eq!(variable.grouping, set(&["job"]));
}

/// The check itself fails on an unknown series, an unknown matcher label and an unknown grouping.
#[test]
fn an_unexported_series_or_label_is_a_problem() {
    let exported = Exported::parse("a_total{kind=\"x\",result=\"ok\"} 1\nb 2\n# EOF\n");
    assert!(exported.problems(&promql::reads(r#"sum by (kind, pod) (a_total{result="ok"}) / b"#)).is_empty());
    let problems = |expr: &str| exported.problems(&promql::reads(expr));
    assert_eq!(problems("c_total"), ["c_total is not exported"]);
    assert_eq!(problems(r#"b{kind="x"}"#), ["b has no label kind"]);
    assert_eq!(problems("sum by (reason) (a_total)"), ["no series read carries the grouping label reason"]);
}
