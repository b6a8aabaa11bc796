//! The text form of an [`Explanation`]: one section for the workload, one for its annotations,
//! one per resource, each a column of labels and values a newcomer can read top to bottom.

use std::fmt::Write as _;

use super::{
    DeclaredTarget, Explanation, KeyFilterSummary, MarkerState, MarkerSummary, ReferenceSummary,
    ResourceExplanation,
};

/// Rows of `label: value`, the values aligned; a row with an empty label continues the previous one.
#[derive(Default)]
struct Section {
    title: String,
    rows: Vec<(String, String)>,
}

impl Section {
    fn new(title: impl Into<String>) -> Self {
        Section { title: title.into(), rows: Vec::new() }
    }

    fn row(&mut self, label: &str, value: impl Into<String>) {
        self.rows.push((label.to_owned(), value.into()));
    }

    /// A label with several values, one per line; `empty` when there are none.
    fn rows(&mut self, label: &str, values: impl IntoIterator<Item = String>, empty: &str) {
        let mut values = values.into_iter();
        self.row(label, values.next().unwrap_or_else(|| empty.to_owned()));
        for value in values {
            self.row("", value);
        }
    }

    fn write(&self, out: &mut String) {
        // The label column holds the label, its colon and two spaces (nothing if no row has a label).
        let width = match self.rows.iter().map(|(label, _)| label.len()).max().unwrap_or(0) {
            0 => 0,
            longest => longest + 3,
        };
        let _ = writeln!(out, "{}", self.title);
        for (label, value) in &self.rows {
            let label = if label.is_empty() { String::new() } else { format!("{label}:") };
            let _ = writeln!(out, "  {label:<width$}{value}");
        }
    }
}

/// The explanation as text for people.
pub fn render_text(explanation: &Explanation) -> String {
    let mut sections = vec![workload_section(explanation), annotation_section(explanation)];
    if !explanation.problems.is_empty() {
        let mut problems = Section::new("Problems in the annotations");
        for problem in &explanation.problems {
            problems.row("", format!("- {problem}"));
        }
        sections.push(problems);
    }
    sections.extend(explanation.resources.iter().map(|r| resource_section(explanation, r)));
    if explanation.resources.is_empty() {
        let mut none = Section::new("ConfigMaps and Secrets");
        none.row("", "none: the pod spec uses none, and no reloader annotation names or matches any");
        sections.push(none);
    }
    if !explanation.other_markers.is_empty() {
        let mut others = Section::new("Other reload records on the pod template (left by earlier reloads)");
        for marker in &explanation.other_markers {
            let container =
                marker.container.as_ref().map(|c| format!(" on container {c}")).unwrap_or_default();
            let resource = marker.resource.as_ref().map(|r| format!(" (for {r})")).unwrap_or_default();
            others.row("", format!("- {} = {}{container}{resource}", marker.marker, marker.recorded));
        }
        sections.push(others);
    }
    let mut out = String::new();
    for (i, section) in sections.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        section.write(&mut out);
    }
    out
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

fn workload_section(explanation: &Explanation) -> Section {
    let w = &explanation.workload;
    let mut section = Section::new(format!("{} {} in namespace {}", w.kind, w.name, w.namespace));
    if let Some(declared) = &w.declared {
        let at = match declared.target {
            DeclaredTarget::Template => "pod template at",
            DeclaredTarget::Annotations => "pod annotations map at",
        };
        section.row(
            "Declared kind",
            format!(
                "{} {}, {at} {} (--custom-workload)",
                declared.api_version, declared.resource, declared.pointer
            ),
        );
    }
    section.row("Containers", list_or(&w.containers, "none"));
    if let Some(timing) = &w.timing {
        let parts: Vec<String> = [
            timing.delay.as_ref().map(|d| format!("delay {d}")),
            timing.min_interval.as_ref().map(|d| format!("min-interval {d}")),
            timing.maintenance_window.as_ref().map(|w| format!("windows {w}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !parts.is_empty() {
            section.row("Timing", parts.join(", "));
        }
        if let Some(held) = &timing.held {
            section.row(
                "Held reload",
                format!(
                    "{} held by the {} since {}; applied at {}",
                    held.resources.join(", "),
                    held.reason,
                    held.since,
                    held.until
                ),
            );
        }
        if let Some(stop) = &timing.loop_stopped {
            section.row(
                "Loop guard",
                format!(
                    "reloads stopped: {stop}; delete the annotation {} to resume",
                    crate::timing::LOOP_STOPPED
                ),
            );
        }
    }
    if let Some(restart) = &w.restart {
        section.row("Restart", restart.clone());
    }
    if !w.init_containers.is_empty() {
        section.row("Init containers", w.init_containers.join(", "));
    }
    let s = &explanation.settings;
    let mut settings = format!(
        "reload strategy {}, --auto-reload-all {}, --reload-on-create {}",
        s.strategy,
        on_off(s.auto_reload_all),
        on_off(s.reload_on_create)
    );
    if s.dry_run {
        settings.push_str(", --dry-run");
    }
    if s.webhook_only {
        settings.push_str(", --webhook-url set");
    }
    if s.one_rollout_per_release {
        settings.push_str(", one rollout per release (admission webhook and --coalesce-period)");
    }
    section.row("Controller", settings);
    if let Some(period) = &w.pause_period {
        section
            .row("Pause period", format!("{period} (the Deployment stays paused that long after a reload)"));
    }
    if let Some(why) = &w.not_watched {
        section.row("Not watched", format!("{why}: nothing below happens"));
    }
    section
}

fn annotation_section(explanation: &Explanation) -> Section {
    let a = &explanation.annotations;
    let mut section = Section::new("Reloader annotations");
    let entries = |map: &std::collections::BTreeMap<String, String>| {
        map.iter().map(|(k, v)| format!("{k}: {v:?}")).collect::<Vec<_>>()
    };
    section.rows("On the workload", entries(&a.workload), "none");
    section.rows("On the pod template", entries(&a.pod_template), "none");
    // SecretProviderClasses only matter to those who use them: say nothing of them otherwise.
    let uses_spc = explanation.resources.iter().any(|r| r.kind == "SecretProviderClass")
        || a.workload.keys().chain(a.pod_template.keys()).any(|k| k.contains("secretproviderclass"));
    for (plural, label) in [
        ("configmaps", "ConfigMaps"),
        ("secrets", "Secrets"),
        ("secretproviderclasses", "SecretProviderClasses"),
    ] {
        if plural == "secretproviderclasses" && !uses_spc {
            continue;
        }
        let value = match a.in_effect.get(plural).map(String::as_str) {
            Some("workload") => "the workload's annotations apply",
            Some("pod_template") => "the pod template's annotations apply (the workload has none for them)",
            _ => "no annotation applies",
        };
        section.row(&format!("For {label}"), value);
    }
    for pattern in &a.patterns {
        let matches = if !pattern.valid {
            "is not a valid regular expression and matches nothing".to_owned()
        } else if pattern.matches.is_empty() {
            format!("matches no {}", pattern.kind)
        } else {
            format!("matches {}", pattern.matches.join(", "))
        };
        section.row("Pattern", format!("\"{}\" in {} {matches}", pattern.pattern, pattern.annotation));
    }
    section
}

fn resource_section(explanation: &Explanation, r: &ResourceExplanation) -> Section {
    let mut section = Section::new(format!("{} {}", r.kind, r.name));
    let namespace = &explanation.workload.namespace;
    section.row(
        "Exists",
        if r.exists {
            "yes".to_owned()
        } else {
            format!("no, there is no {} {} in {namespace}", r.kind, r.name)
        },
    );
    section.rows("Used by", r.references.iter().map(reference), "nothing in the pod spec");
    if let Some(why) = &r.not_watched {
        section.row("Not watched", why.clone());
    }
    let watched = r.not_watched.is_none() && explanation.workload.not_watched.is_none();
    let because = &r.decision.because;
    section.row(
        "Decision",
        match (r.decision.reload, watched) {
            (true, true) => format!("a change reloads the workload, because {because}"),
            (true, false) => {
                format!("the annotations would reload the workload ({because}), but it is not watched")
            }
            (false, _) => format!("a change does not reload the workload, because {because}"),
        },
    );
    if r.decision.reload {
        section.row("Recorded in", place(&r.marker, r.decision.container.as_deref()));
    }
    if let Some(filter) = &r.key_filter {
        section.row("Key filter", key_filter(filter));
    }
    section.row(
        "Data hash now",
        r.current_hash.clone().unwrap_or_else(|| "none (it does not exist)".to_owned()),
    );
    section.row("Last recorded", recorded(r));
    section.row("Next change", r.next_change.clone());
    section
}

fn key_filter(f: &KeyFilterSummary) -> String {
    let keys = if f.hashed_keys.is_empty() { "none".to_owned() } else { f.hashed_keys.join(", ") };
    match (&f.patterns, f.valid) {
        (Some(patterns), _) => {
            format!("{} = {:?}: hashes only {keys} (patterns {})", f.annotation, f.value, patterns.join(", "))
        }
        (None, true) => {
            format!("{} = {:?} does not filter this resource: every key is hashed", f.annotation, f.value)
        }
        (None, false) => format!("{} = {:?} is invalid: every key is hashed", f.annotation, f.value),
    }
}

fn reference(r: &ReferenceSummary) -> String {
    let container = match (&r.container, r.init) {
        (Some(name), true) => format!("init container {name}"),
        (Some(name), false) => format!("container {name}"),
        (None, _) => "no container".to_owned(),
    };
    match r.via.as_str() {
        "volume" => format!("volume mounted by {container}"),
        "projected" => format!("projected volume mounted by {container}"),
        "csi" => format!("CSI volume mounted by {container}"),
        "env_value_from" => format!("env var of {container} (valueFrom)"),
        "env_from" => format!("envFrom of {container}"),
        other => format!("{other} of {container}"),
    }
}

/// Where a reload for the resource is recorded, on `container` (the env var's container).
fn place(marker: &MarkerSummary, container: Option<&str>) -> String {
    match (&marker.env_var, &marker.annotation) {
        (Some(env_var), _) => match container {
            Some(container) => format!("env var {env_var} of container {container}"),
            None => format!("env var {env_var}"),
        },
        (None, Some(annotation)) => format!("pod template annotation {annotation}"),
        (None, None) => "nowhere".to_owned(),
    }
}

/// The recorded value against the hash now. With a reload decision the place was just shown;
/// otherwise it is named here.
fn recorded(r: &ResourceExplanation) -> String {
    let marker = &r.marker;
    let value = marker.recorded.as_deref().unwrap_or_default();
    let value = match (r.decision.reload, &marker.container) {
        (true, Some(on)) if Some(on) != r.decision.container.as_ref() => format!("{value} on container {on}"),
        (true, _) => value.to_owned(),
        (false, on) => format!("{value} in the {}", place(marker, on.as_deref())),
    };
    match marker.state {
        MarkerState::None => "nothing yet".to_owned(),
        MarkerState::Current => format!("{value} (the same as the hash now)"),
        MarkerState::DeleteMarker => format!("the deletion of the {} ({value})", r.kind),
        MarkerState::Different if r.reloads_on_controller_start => {
            format!("{value} (not the hash now: a controller starting now reloads at once)")
        }
        MarkerState::Different => format!("{value} (not the hash now)"),
    }
}

fn list_or(items: &[String], empty: &str) -> String {
    if items.is_empty() { empty.to_owned() } else { items.join(", ") }
}
