//! The sentences of an explanation: why a rule applies or does not, and what the next change to
//! a resource would do. Written for someone who has never read the reloader docs: they name the
//! annotation, where it is, and its value.

use super::{ExplainSettings, RulesInEffect, rules_in_effect};
use crate::annotations::{AnnotationKeys, kind_index, parse_go_bool, split_list};
use crate::decide::{Rule, SkipReason, effective_rules};
use crate::duration::parse_pause_period;
use crate::model::{ReloadStrategy, ResourceKey, ResourceKind, WorkloadKind};
use crate::naming::env_var_name;
use crate::views::{ResourceView, WorkloadView};

/// "on the workload" / "on the pod template": where the rules for `kind` are read.
fn location(view: &WorkloadView, kind: ResourceKind) -> &'static str {
    match rules_in_effect(view, kind) {
        RulesInEffect::Workload => "on the workload",
        RulesInEffect::PodTemplate | RulesInEffect::None => "on the pod template",
    }
}

/// Why `rule` selects the resource.
pub(super) fn rule(
    view: &WorkloadView,
    resource: &ResourceView,
    rule: Rule,
    settings: &ExplainSettings,
) -> String {
    let keys = &settings.keys;
    let kind = resource.key.kind;
    let rules = effective_rules(view, kind);
    let at = location(view, kind);
    let value = |v: &Option<Box<str>>| v.as_deref().unwrap_or_default().to_owned();
    match rule {
        Rule::Explicit => {
            let list = rules.explicit[kind_index(kind)].as_ref();
            match list.and_then(|list| list.matching_entry(&resource.key.name)) {
                Some(entry) if entry != &*resource.key.name => {
                    format!("the pattern \"{entry}\" in {} {at} matches its name", keys.explicit(kind))
                }
                _ => format!("{} {at} names it", keys.explicit(kind)),
            }
        }
        Rule::SearchMatch => {
            format!("{} is \"true\" {at} and the {kind} carries {}: \"true\"", keys.search, keys.search_match)
        }
        Rule::Auto => format!("{} is \"{}\" {at}", keys.auto, value(&rules.auto)),
        Rule::TypedAuto => {
            format!("{} is \"{}\" {at}", keys.typed_auto(kind), value(&rules.typed_auto[kind_index(kind)]))
        }
        Rule::AutoReloadAll => {
            format!("--auto-reload-all is on and the workload has no {} annotation", keys.auto)
        }
    }
}

/// Why the resource does not reload the workload.
pub(super) fn skip(
    view: &WorkloadView,
    resource: &ResourceView,
    reason: SkipReason,
    keys: &AnnotationKeys,
) -> String {
    let kind = resource.key.kind;
    let slot = kind_index(kind);
    match reason {
        SkipReason::ResourceIgnored => format!("the {kind} is marked {}: \"true\"", keys.ignore),
        SkipReason::Excluded => {
            let on_workload = view.metadata_rules.exclude[slot]
                .as_deref()
                .is_some_and(|list| split_list(list).any(|e| e == &*resource.key.name));
            let at = if on_workload { "on the workload" } else { "on the pod template" };
            format!("{} {at} excludes it", keys.exclude(kind))
        }
        SkipReason::NotAnnotated => not_annotated(view, resource, keys),
        SkipReason::AutoDisabled => {
            let rules = effective_rules(view, kind);
            let auto = rules.auto.as_deref().unwrap_or_default();
            let (key, value) = if auto.is_empty() || parse_go_bool(auto) == Some(true) {
                (keys.typed_auto(kind), rules.typed_auto[slot].as_deref().unwrap_or_default())
            } else {
                (keys.auto.as_str(), auto)
            };
            format!("{key} is \"{value}\" {}, and no other rule selects it", location(view, kind))
        }
        SkipReason::NotReferenced => "the pod spec does not use it (auto and search rules only cover the \
                                      ConfigMaps and Secrets the pod spec uses)"
            .to_owned(),
        SkipReason::NoContainers => "the pod template has no containers to record a reload on".to_owned(),
        SkipReason::NoTemplate => "the workload has no pod template of its own (workloadRef)".to_owned(),
        SkipReason::Suspended => format!("the {} is suspended", view.key.kind),
        SkipReason::AlreadyCurrent => "the workload already records this change".to_owned(),
        SkipReason::LoopStopped => format!(
            "the loop guard stopped its reloads; delete the annotation {} to resume",
            crate::timing::LOOP_STOPPED
        ),
    }
}

/// No rule selects the resource: say which rules were there and why each missed.
fn not_annotated(view: &WorkloadView, resource: &ResourceView, keys: &AnnotationKeys) -> String {
    let kind = resource.key.kind;
    let rules = effective_rules(view, kind);
    let at = location(view, kind);
    let mut misses = Vec::new();
    if let Some(list) = rules.explicit[kind_index(kind)].as_deref() {
        misses.push(format!("{} {at} (\"{list}\") does not name it", keys.explicit(kind)));
    }
    match (rules.search.as_deref() == Some("true"), resource.matched) {
        (true, false) => misses.push(format!(
            "{} is \"true\" {at} but the {kind} does not carry {}: \"true\"",
            keys.search, keys.search_match
        )),
        (false, true) => misses.push(format!(
            "the {kind} carries {}: \"true\" but {} is not \"true\" {at}",
            keys.search_match, keys.search
        )),
        _ => {}
    }
    if misses.is_empty() {
        format!("no reloader annotation on the workload or its pod template applies to {kind}s")
    } else {
        misses.join("; ")
    }
}

/// What the next change to the resource would do, given the decision: the container that gets
/// the marker, or why it does not reload.
pub(super) fn next_change(
    view: &WorkloadView,
    key: &ResourceKey,
    exists: bool,
    decision: Result<&str, &str>,
    settings: &ExplainSettings,
) -> String {
    let scope = &settings.scope;
    if let Some(why) = scope.workload.as_ref().or(scope.kinds.get(&key.kind)).or(scope.resources.get(key)) {
        return format!("nothing: {why}");
    }
    let container = match decision {
        Ok(container) => container,
        Err(because) => return format!("nothing: {because}"),
    };
    let action = action(view, key, container, settings);
    match (exists, settings.reload_on_create) {
        (true, _) => action,
        (false, true) => format!("when it is created: {action}"),
        (false, false) => format!(
            "nothing while it does not exist; creating it reloads only with --reload-on-create=true, \
             changes after that: {action}"
        ),
    }
}

/// The write a reload makes, in words.
fn action(view: &WorkloadView, key: &ResourceKey, container: &str, settings: &ExplainSettings) -> String {
    if settings.webhook_only {
        return "post the change to --webhook-url instead of reloading (the workload is not changed)"
            .to_owned();
    }
    let keys = &settings.keys;
    let record = match view.strategy(settings.decide.strategy) {
        ReloadStrategy::EnvVars => format!("{} on container {container}", env_var_name(key.kind, &key.name)),
        ReloadStrategy::Annotations if view.annotations_only => {
            format!("{} in the pod annotations map", keys.last_reloaded_from)
        }
        ReloadStrategy::Annotations => format!("{} on the pod template", keys.last_reloaded_from),
    };
    let write = match view.key.kind {
        WorkloadKind::CronJob => format!("create a Job from the CronJob, with {record}"),
        WorkloadKind::Job => format!("delete the Job and create it again, with {record}"),
        WorkloadKind::Rollout if view.restart_strategy => format!(
            "set spec.restartAt (the pod template is left as is) and record {} on the Rollout",
            keys.last_reloaded_from
        ),
        _ => format!("set {record}"),
    };
    let period = view.pause_period.as_deref().filter(|p| matches!(parse_pause_period(p), Ok(Some(_))));
    let pause = match period {
        Some(period) if view.key.kind == WorkloadKind::Deployment => {
            format!(", then pause the Deployment for {period}")
        }
        _ => String::new(),
    };
    if settings.dry_run {
        format!("nothing written (--dry-run): the write is only logged and counted; it would {write}{pause}")
    } else {
        format!("reload: {write}{pause}")
    }
}
