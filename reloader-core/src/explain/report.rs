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
///                 "dry_run", "webhook_only" },
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
///     "current_hash": null | "<40 hex digits>",
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
    pub workload: WorkloadSummary,
    pub settings: SettingsSummary,
    pub annotations: AnnotationSummary,
    /// [`annotation_problems`], one line each.
    pub problems: Vec<String>,
    pub resources: Vec<ResourceExplanation>,
    /// Markers on the pod template that no resource above accounts for (left by earlier reloads).
    pub other_markers: Vec<OtherMarker>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkloadSummary {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub containers: Vec<String>,
    pub init_containers: Vec<String>,
    pub not_watched: Option<String>,
    pub pause_period: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SettingsSummary {
    pub strategy: String,
    pub auto_reload_all: bool,
    pub reload_on_create: bool,
    pub dry_run: bool,
    pub webhook_only: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnnotationSummary {
    pub workload: BTreeMap<String, String>,
    pub pod_template: BTreeMap<String, String>,
    pub in_effect: BTreeMap<String, String>,
    pub patterns: Vec<PatternSummary>,
}

/// A regular-expression entry of an explicit list in effect, and what it selects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PatternSummary {
    pub kind: String,
    pub annotation: String,
    pub source: String,
    pub pattern: String,
    pub valid: bool,
    pub matches: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceExplanation {
    pub kind: String,
    pub name: String,
    pub exists: bool,
    pub ignored: bool,
    pub matched: bool,
    pub not_watched: Option<String>,
    pub references: Vec<ReferenceSummary>,
    pub decision: DecisionSummary,
    pub current_hash: Option<String>,
    pub marker: MarkerSummary,
    pub reloads_on_controller_start: bool,
    pub next_change: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReferenceSummary {
    pub via: String,
    pub container: Option<String>,
    pub init: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DecisionSummary {
    pub reload: bool,
    pub rule: Option<String>,
    pub skip_reason: Option<String>,
    pub container: Option<String>,
    pub because: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MarkerSummary {
    pub env_var: Option<String>,
    pub annotation: Option<String>,
    pub container: Option<String>,
    pub recorded: Option<String>,
    pub state: MarkerState,
    pub matches_current: bool,
}

/// The recorded marker against the current hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkerState {
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
pub struct OtherMarker {
    pub marker: String,
    pub container: Option<String>,
    pub recorded: String,
    pub resource: Option<String>,
}
