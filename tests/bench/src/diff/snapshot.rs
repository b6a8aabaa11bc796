//! What a controller left behind in one namespace, as `key -> value` lines that compare across
//! controllers: the pod templates (annotations, and env container by container), the reloader
//! annotations of each workload, the Jobs, the Events reloader recorded, the notification bodies
//! and the `/metrics` series. The namespace's name, timestamps and generated name suffixes are
//! normalised so two runs in two namespaces compare equal when they did the same thing.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, PodTemplateSpec};
use kube::Client;
use kube::api::{Api, ListParams};
use regex::Regex;
use serde_json::Value;

use reloader_tests::fixtures::{Kind, list_observed};
use reloader_tests::fixtures_extra::RecordedRequest;

use crate::BenchError;

/// `key -> value`, sorted.
pub type Snapshot = BTreeMap<String, String>;

/// Replaces what differs between two runs of the same scenario by construction.
pub struct Normaliser {
    namespace: String,
    timestamp: Regex,
    generated: Regex,
    duration: Regex,
    unix_time: Regex,
}

impl Normaliser {
    pub fn new(namespace: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            timestamp: Regex::new(
                r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?( [+-]\d{4} UTC)?",
            )
            .expect("a valid regex"),
            generated: Regex::new(r"-[a-z0-9]{5}$").expect("a valid regex"),
            duration: Regex::new(r"\b(\d+(\.\d+)?(ns|µs|us|ms|s|m|h))+\b").expect("a valid regex"),
            // Seconds since the epoch, as in `last-reloaded-from`'s `observedAt` (2001..2286).
            unix_time: Regex::new(r"\b[1-9]\d{9}\b").expect("a valid regex"),
        }
    }

    pub fn text(&self, text: &str) -> String {
        let text = text.replace(&self.namespace, "<ns>");
        let text = self.timestamp.replace_all(&text, "<time>");
        let text = self.unix_time.replace_all(&text, "<unix-time>");
        self.duration.replace_all(&text, "<duration>").into_owned()
    }

    /// A generated object name (`<cronjob>-x7k2p` -> `<cronjob>-*`); only for names known to be
    /// generated.
    pub fn generated_name(&self, name: &str) -> String {
        self.generated.replace_all(name, "-*").into_owned()
    }

    /// JSON with sorted keys and normalised strings; other text as is, normalised.
    pub fn body(&self, body: &str) -> String {
        match serde_json::from_str::<Value>(body) {
            Ok(value) => self.text(&value.to_string()),
            Err(_) => self.text(body),
        }
    }
}

/// Pod template annotations and each container's env, keyed `template <Kind>/<name> ...`.
fn template_lines(out: &mut Snapshot, norm: &Normaliser, prefix: &str, template: &PodTemplateSpec) {
    let annotations = template.metadata.as_ref().and_then(|m| m.annotations.clone()).unwrap_or_default();
    for (key, value) in annotations {
        out.insert(format!("{prefix} annotation {key}"), norm.text(&value));
    }
    let Some(spec) = &template.spec else { return };
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| ("init", c))
        .chain(spec.containers.iter().map(|c| ("container", c)));
    for (role, container) in containers {
        for env in container.env.iter().flatten() {
            let value = env.value.clone().unwrap_or_else(|| "<from a reference>".to_owned());
            out.insert(format!("{prefix} {role} {} env {}", container.name, env.name), norm.text(&value));
        }
    }
}

/// The workloads of `kinds` in `namespace`: their templates and reloader's annotations.
pub async fn workloads(
    client: &Client,
    namespace: &str,
    kinds: &[Kind],
    norm: &Normaliser,
) -> Result<Snapshot, BenchError> {
    let mut out = Snapshot::new();
    for kind in kinds {
        for (name, observed) in list_observed(client, namespace, *kind).await? {
            // Jobs are listed on their own (generated names, owners).
            if *kind == Kind::Job && observed.annotations.contains_key("cronjob.kubernetes.io/instantiate") {
                continue;
            }
            let prefix = format!("template {kind}/{name}");
            template_lines(&mut out, norm, &prefix, &observed.template);
            for (key, value) in &observed.annotations {
                if key.contains("reloader") {
                    out.insert(format!("workload {kind}/{name} annotation {key}"), norm.text(value));
                }
            }
        }
    }
    Ok(out)
}

/// The Jobs in `namespace`, by normalised name: how many, who owns them, their markers.
pub async fn jobs(client: &Client, namespace: &str, norm: &Normaliser) -> Result<Snapshot, BenchError> {
    let mut out = Snapshot::new();
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), namespace);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut listed = jobs.list(&ListParams::default()).await?.items;
    // Oldest first, so the n-th Job a CronJob spawned has the same key in both runs.
    listed.sort_by(|a, b| {
        (a.metadata.creation_timestamp.as_ref().map(|t| t.0), &a.metadata.name)
            .cmp(&(b.metadata.creation_timestamp.as_ref().map(|t| t.0), &b.metadata.name))
    });
    for job in listed {
        let raw_name = job.metadata.name.as_deref().unwrap_or_default();
        let from_cronjob =
            job.metadata.owner_references.iter().flatten().any(|owner| owner.kind == "CronJob");
        let family = if from_cronjob { norm.generated_name(raw_name) } else { raw_name.to_owned() };
        let count = counts.entry(family.clone()).or_default();
        *count += 1;
        let name = if from_cronjob { format!("{family}#{count}") } else { family };
        let owners: Vec<String> = job
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|owner| format!("{}/{}", owner.kind, owner.name))
            .collect();
        out.insert(format!("job {name} owners"), owners.join(","));
        for (key, value) in job.metadata.annotations.iter().flatten() {
            out.insert(format!("job {name} annotation {key}"), norm.text(value));
        }
        if let Some(template) = job.spec.as_ref().map(|spec| &spec.template) {
            template_lines(&mut out, norm, &format!("job {name}"), template);
        }
    }
    for (name, count) in counts {
        out.insert(format!("job {name} count"), count.to_string());
    }
    Ok(out)
}

/// Events recorded by a reloader (source or reporting component naming reloader), keyed by
/// the object, reason and type; the value is every message with its count.
pub async fn events(client: &Client, namespace: &str, norm: &Normaliser) -> Result<Snapshot, BenchError> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let mut grouped: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for event in api.list(&ListParams::default()).await? {
        let component = event
            .source
            .as_ref()
            .and_then(|source| source.component.clone())
            .or_else(|| event.reporting_component.clone())
            .unwrap_or_default();
        if !component.contains("reloader")
            && !event.reporting_component.as_deref().unwrap_or_default().contains("reloader")
        {
            continue;
        }
        let object = &event.involved_object;
        let key = format!(
            "event {}/{} {} {}",
            object.kind.as_deref().unwrap_or_default(),
            object.name.as_deref().unwrap_or_default(),
            event.reason.as_deref().unwrap_or_default(),
            event.type_.as_deref().unwrap_or_default(),
        );
        let uid = if object.uid.as_deref().unwrap_or_default().is_empty() { "no uid" } else { "uid" };
        grouped.entry(key).or_default().push(format!(
            "{} [component {component}, {uid}, count {}]",
            norm.text(event.message.as_deref().unwrap_or_default()),
            // An events.k8s.io Event counts its repeats in `series`.
            event.series.as_ref().and_then(|series| series.count).or(event.count).unwrap_or(1)
        ));
    }
    Ok(grouped
        .into_iter()
        .map(|(key, mut messages)| {
            messages.sort();
            (key, messages.join(" | "))
        })
        .collect())
}

/// The notification bodies, in the order received, keyed by path and position.
pub fn notifications(requests: &[RecordedRequest], norm: &Normaliser) -> Snapshot {
    let mut bodies: Vec<String> = requests
        .iter()
        .map(|request| format!("{} {}", norm.text(&request.path), norm.body(&request.text())))
        .collect();
    // Delivery order across workloads is not part of the contract; content and count are.
    bodies.sort();
    bodies.into_iter().enumerate().map(|(i, body)| (format!("notification #{i}"), body)).collect()
}

/// The `/metrics` series (name and labels, not values): `metric <name>{<sorted labels>}` ->
/// "present"; a histogram's buckets are one key per label set, the value listing the bounds
/// (parsed, so `1` and `1.0` are the same bound).
pub fn metric_series(metrics: &str, norm: &Normaliser) -> Snapshot {
    let mut out = Snapshot::new();
    let mut buckets: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for line in metrics.lines().filter(|line| !line.starts_with('#') && !line.trim().is_empty()) {
        let Some((series, _)) = line.rsplit_once(' ') else { continue };
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => (name, parse_labels(labels.trim_end_matches('}'))),
            None => (series, Vec::new()),
        };
        let bound = labels.iter().find(|(key, _)| key == "le").map(|(_, value)| value.clone());
        let mut labels: Vec<String> = labels
            .into_iter()
            .filter(|(key, _)| key != "le")
            .map(|(key, value)| format!("{key}=\"{value}\""))
            .collect();
        labels.sort();
        let key = norm.text(&format!("metric {name}{{{}}}", labels.join(",")));
        match bound {
            Some(bound) => buckets.entry(key).or_default().push(parse_bound(&bound)),
            None => {
                out.insert(key, "present".to_owned());
            }
        }
    }
    for (key, mut bounds) in buckets {
        bounds.sort_by(f64::total_cmp);
        let bounds: Vec<String> = bounds.iter().map(|bound| bound.to_string()).collect();
        out.insert(key, format!("le {}", bounds.join(",")));
    }
    out
}

fn parse_bound(text: &str) -> f64 {
    if text == "+Inf" { f64::INFINITY } else { text.parse().unwrap_or(f64::NAN) }
}

/// `a="x",b="y,z"` -> [(a, x), (b, y,z)]; quotes and backslash escapes honoured.
fn parse_labels(text: &str) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    let mut rest = text.trim_start_matches(',');
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((index, ch)) = chars.next() {
            match ch {
                '\\' => value.extend(chars.next().map(|(_, escaped)| escaped)),
                '"' => {
                    end = index + 1;
                    break;
                }
                other => value.push(other),
            }
        }
        labels.push((key.trim().to_owned(), value));
        rest = after[end..].trim_start_matches(',');
    }
    labels
}

/// One difference between the two snapshots of a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub scenario: String,
    pub key: String,
    pub stakater: Option<String>,
    pub ours: Option<String>,
}

impl Difference {
    /// `<scenario> <key>`, what the expected list matches against.
    pub fn subject(&self) -> String {
        format!("{} {}", self.scenario, self.key)
    }
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let side = |value: &Option<String>| value.clone().unwrap_or_else(|| "(absent)".to_owned());
        write!(
            f,
            "{}\n      stakater: {}\n      ours:     {}",
            self.subject(),
            side(&self.stakater),
            side(&self.ours)
        )
    }
}

/// Every key whose value differs or that only one side has.
pub fn compare(scenario: &str, stakater: &Snapshot, ours: &Snapshot) -> Vec<Difference> {
    let keys: std::collections::BTreeSet<&String> = stakater.keys().chain(ours.keys()).collect();
    keys.into_iter()
        .filter(|key| stakater.get(*key) != ours.get(*key))
        .map(|key| Difference {
            scenario: scenario.to_owned(),
            key: key.clone(),
            stakater: stakater.get(key).cloned(),
            ours: ours.get(key).cloned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_namespace_times_durations_and_generated_names() {
        let norm = Normaliser::new("d-annotations-ours");
        assert_eq!(
            norm.text(r#"{"namespace":"d-annotations-ours","observedAt":"2026-11-23T23:37:14Z"}"#),
            r#"{"namespace":"<ns>","observedAt":"<time>"}"#
        );
        assert_eq!(
            norm.text(r#"{"hash":"b6c65933ced9","observedAt":1795477652}"#),
            r#"{"hash":"b6c65933ced9","observedAt":<unix-time>}"#
        );
        assert_eq!(norm.text("paused for 59m59.9s"), "paused for <duration>");
        assert_eq!(norm.generated_name("auto-cj-x7k2p"), "auto-cj-*");
        assert_eq!(norm.generated_name("auto-cj"), "auto-cj");
    }

    #[test]
    fn compares_both_ways() {
        let a: Snapshot = [("k1".into(), "v".into()), ("k2".into(), "x".into())].into();
        let b: Snapshot = [("k1".into(), "v".into()), ("k3".into(), "y".into())].into();
        let differences = compare("s", &a, &b);
        let keys: Vec<&str> = differences.iter().map(|d| d.key.as_str()).collect();
        assert_eq!(keys, ["k2", "k3"]);
        assert!(compare("s", &a, &a).is_empty());
    }

    #[test]
    fn metric_series_drop_values_and_comments() {
        let norm = Normaliser::new("ns1");
        let text = "# HELP x y\nreloader_reload_executed_total{success=\"true\"} 3\nprocess_open_fds 9\n\
                    h_bucket{verb=\"GET\",le=\"1.0\"} 1\nh_bucket{le=\"+Inf\",verb=\"GET\"} 1\nh_bucket{le=\"0.5\",verb=\"GET\"} 0\n\
                    m{b=\"2\",a=\"x,y\"} 1\n";
        let series = metric_series(text, &norm);
        let keys: Vec<&str> = series.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "metric h_bucket{verb=\"GET\"}",
                "metric m{a=\"x,y\",b=\"2\"}",
                "metric process_open_fds{}",
                "metric reloader_reload_executed_total{success=\"true\"}"
            ]
        );
        assert_eq!(series["metric h_bucket{verb=\"GET\"}"], "le 0.5,1,inf");
    }
}
