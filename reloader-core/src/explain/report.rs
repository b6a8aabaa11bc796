//! The explanation as data: what `-o json` and `-o yaml` print, and what the text is rendered from.

use std::collections::BTreeMap;

use serde::Serialize;

/// Why a workload would or would not reload, resource by resource.
///
/// The serialized form (JSON with `-o json`, YAML with `-o yaml`) is stable; fields are only
/// ever added. Enumerated values are lowercase identifiers:
///
/// ```text
/// {
///   "workload": { "kind": "Deployment", "namespace", "name", "containers": [..], "init_containers": [..],
///                 "not_watched": null | "<why a controller with these flags ignores it>",
///                 "pause_period": null | "<raw annotation value>" },
///   "settings": { "strategy": "env-vars" | "annotations", "auto_reload_all", "reload_on_create",
///                 "dry_run", "webhook_only", "one_rollout_per_release" (only when true) },
///   "annotations": {
///     "workload": { "<key>": "<raw value>", .. },      // reloader annotations on the workload
///     "pod_template": { "<key>": "<raw value>", .. },  // and on its pod template
///     "in_effect": { "configmaps" | "secrets" | "secretproviderclasses": "workload" | "pod_template" | "none" },
///     "patterns": [ { "kind", "annotation", "source": "workload" | "pod_template", "pattern",
///                     "valid", "matches": ["<name>", ..] } ]
///   },
///   "problems": [ "<one line per problem in the annotations>" ],
///   "resources": [ {                                   // sorted by kind, then name
///     "kind": "ConfigMap" | "Secret" | "SecretProviderClass", "name", "exists",
///     "ignored", "matched",                            // ignore / match annotations on the resource
///     "not_watched": null | "<why>",
///     "references": [ { "via": "volume" | "projected" | "csi" | "env_value_from" | "env_from",
///                       "container": null | "<name>", "init": bool } ],
///     "decision": { "reload": bool, "rule": null | "explicit" | "search_match" | "auto" | "typed_auto"
///                   | "auto_reload_all", "skip_reason": null | "<reloader_skipped_total reason>",
///                   "container": null | "<container that gets the marker>", "because": "<sentence>" },
///     "current_hash": null | "<40 hex digits>",          // the filtered hash under a key filter
///     "key_filter": { "annotation", "value", "valid": bool, "patterns": null | ["<pattern>"],
///                     "hashed_keys": ["<key>"] },     // only when the workload has a filter
///     "marker": { "env_var": null | "STAKATER_..", "annotation": null | "<key>",
///                 "container": null | "<name>", "recorded": null | "<value>",
///                 "state": "none" | "current" | "different" | "delete_marker", "matches_current": bool },
///     "reloads_on_controller_start": bool,             // recorded hash differs: the catch-up reloads
///     "next_change": "<sentence: what a change to this resource would do>"
///   } ],
///   "other_markers": [ { "marker", "container": null | "<name>", "recorded",
///                        "resource": null | "<Kind>/<name>" } ]
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    pub(crate) workload: WorkloadSummary,
    pub(crate) settings: SettingsSummary,
    pub(crate) annotations: AnnotationSummary,
    /// [`annotation_problems`], one line each.
    pub(crate) problems: Vec<String>,
    pub(crate) resources: Vec<ResourceExplanation>,
    /// Markers on the pod template that no resource above accounts for (left by earlier reloads).
    pub(crate) other_markers: Vec<OtherMarker>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct WorkloadSummary {
    pub(crate) kind: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) containers: Vec<String>,
    pub(crate) init_containers: Vec<String>,
    pub(crate) not_watched: Option<String>,
    pub(crate) pause_period: Option<String>,
    /// How it restarts, when it asked for more than the marker (restart by eviction).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) restart: Option<String>,
    /// A declared kind's `apiVersion` and pod template pointer (`--custom-workload`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) declared: Option<DeclaredSummary>,
    /// When it reloads, a reload held now, a loop guard's stop (docs/beyond-stakater.md §15);
    /// absent for a workload with none of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) timing: Option<TimingSummary>,
}

/// `{ "delay", "min_interval", "maintenance_window": null | "<text>", "held": null | { "since",
/// "until", "reason", "resources": ["<Kind>/<name>"] }, "loop_stopped": null | "<what tripped>" }`
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct TimingSummary {
    pub(crate) delay: Option<String>,
    pub(crate) min_interval: Option<String>,
    pub(crate) maintenance_window: Option<String>,
    pub(crate) held: Option<HeldSummary>,
    pub(crate) loop_stopped: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct HeldSummary {
    pub(crate) since: String,
    pub(crate) until: String,
    pub(crate) reason: &'static str,
    pub(crate) resources: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DeclaredSummary {
    pub(crate) api_version: String,
    pub(crate) resource: String,
    pub(crate) target: DeclaredTarget,
    pub(crate) pointer: String,
}

/// What a declaration points at (`template=` or `annotations=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DeclaredTarget {
    Template,
    Annotations,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct SettingsSummary {
    pub(crate) strategy: String,
    pub(crate) auto_reload_all: bool,
    pub(crate) reload_on_create: bool,
    pub(crate) dry_run: bool,
    pub(crate) webhook_only: bool,
    /// Shown only when on, so the output of other configurations is unchanged.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) one_rollout_per_release: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct AnnotationSummary {
    pub(crate) workload: BTreeMap<String, String>,
    pub(crate) pod_template: BTreeMap<String, String>,
    pub(crate) in_effect: BTreeMap<String, String>,
    pub(crate) patterns: Vec<PatternSummary>,
}

/// A regular-expression entry of an explicit list in effect, and what it selects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct PatternSummary {
    pub(crate) kind: String,
    pub(crate) annotation: String,
    pub(crate) source: String,
    pub(crate) pattern: String,
    pub(crate) valid: bool,
    pub(crate) matches: Vec<String>,
}

/// A key filter (docs/beyond-stakater.md §10) and what it hashes of one resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct KeyFilterSummary {
    pub(crate) annotation: String,
    pub(crate) value: String,
    /// False: the value does not parse, the whole object is hashed.
    pub(crate) valid: bool,
    /// The patterns that apply to this resource; `None`: the whole object is hashed.
    pub(crate) patterns: Option<Vec<String>>,
    /// The keys of the resource now hashed into the marker (every key when unfiltered).
    pub(crate) hashed_keys: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ResourceExplanation {
    pub(crate) kind: String,
    pub(crate) name: String,
    pub(crate) exists: bool,
    pub(crate) ignored: bool,
    pub(crate) matched: bool,
    pub(crate) not_watched: Option<String>,
    pub(crate) references: Vec<ReferenceSummary>,
    pub(crate) decision: DecisionSummary,
    pub(crate) current_hash: Option<String>,
    /// The key filter of this resource's type, when the workload carries one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) key_filter: Option<KeyFilterSummary>,
    pub(crate) marker: MarkerSummary,
    pub(crate) reloads_on_controller_start: bool,
    pub(crate) next_change: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ReferenceSummary {
    pub(crate) via: String,
    pub(crate) container: Option<String>,
    pub(crate) init: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct DecisionSummary {
    pub(crate) reload: bool,
    pub(crate) rule: Option<String>,
    pub(crate) skip_reason: Option<String>,
    pub(crate) container: Option<String>,
    pub(crate) because: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct MarkerSummary {
    pub(crate) env_var: Option<String>,
    pub(crate) annotation: Option<String>,
    pub(crate) container: Option<String>,
    pub(crate) recorded: Option<String>,
    pub(crate) state: MarkerState,
    pub(crate) matches_current: bool,
}

/// The recorded marker against the current hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MarkerState {
    /// Nothing recorded for this resource.
    None,
    /// The recorded hash is the current one.
    Current,
    /// Something else is recorded (or the resource is missing).
    Different,
    /// The annotation strategy's record of a deletion.
    DeleteMarker,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct OtherMarker {
    pub(crate) marker: String,
    pub(crate) container: Option<String>,
    pub(crate) recorded: String,
    pub(crate) resource: Option<String>,
}
