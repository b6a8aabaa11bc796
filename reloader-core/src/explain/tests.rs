//! Explanations of the workloads of docs/behaviour.md §A, built from real Deployments.

mod cases;
mod text;

use super::*;
use crate::model::{ReloadStrategy, WorkloadKind};
use crate::testkit::*;

use RefVia::{EnvFrom, Volume};

fn explained_with(
    workload: &TestWorkload,
    resources: &[ResourceView],
    settings: &ExplainSettings,
) -> Explanation {
    let view = crate::workload::Workload::view(workload, &settings.keys);
    let init_containers = init_container_names(workload);
    explain(&ExplainInput {
        workload: &view,
        init_containers: &init_containers,
        resources,
        settings,
        eviction: &Ok(None),
    })
}

fn explained(workload: &TestWorkload, resources: &[ResourceView]) -> Explanation {
    explained_with(workload, resources, &ExplainSettings::default())
}

/// One resource of an explanation, reduced to what a case checks.
#[derive(Debug, PartialEq, Eq)]
struct Row {
    resource: String,
    exists: bool,
    /// The rule, or `skip:<reason>`.
    outcome: String,
    container: Option<String>,
    next_change: String,
}

fn rows(explanation: &Explanation) -> Vec<Row> {
    explanation
        .resources
        .iter()
        .map(|r| Row {
            resource: format!("{}/{}", r.kind, r.name),
            exists: r.exists,
            outcome: match (&r.decision.rule, &r.decision.skip_reason) {
                (Some(rule), _) => rule.clone(),
                (None, Some(reason)) => format!("skip:{reason}"),
                (None, None) => "?".into(),
            },
            container: r.decision.container.clone(),
            next_change: r.next_change.clone(),
        })
        .collect()
}

fn row(resource: &str, exists: bool, outcome: &str, container: Option<&str>, next_change: &str) -> Row {
    Row {
        resource: resource.into(),
        exists,
        outcome: outcome.into(),
        container: container.map(Into::into),
        next_change: next_change.into(),
    }
}

#[test]
fn references_name_the_container_and_whether_it_is_an_init_container() {
    let workload = deployment("web")
        .init_containers(&["setup"])
        .annotate(AUTO, "true")
        .uses_cm("setup", "cfg", EnvFrom)
        .uses_cm("app", "cfg", Volume)
        .uses_cm("", "cfg", RefVia::Projected);
    let explanation = explained(&workload, &[cm("cfg")]);
    let refs = &explanation.resources[0].references;
    let summary = |via: &str, container: Option<&str>, init| ReferenceSummary {
        via: via.into(),
        container: container.map(Into::into),
        init,
    };
    assert_eq!(
        refs,
        &[
            summary("volume", Some("app"), false),
            summary("projected", None, false),
            summary("env_from", Some("setup"), true)
        ]
    );
    assert_eq!(explanation.workload.init_containers, ["setup"]);
}

#[test]
fn annotations_in_effect_come_from_the_workload_else_the_pod_template() {
    let workload = deployment("web")
        .annotate(SECRET_RELOAD, "creds")
        .annotate_template(AUTO, "true")
        .uses_cm("app", "cfg", EnvFrom)
        .uses_secret("app", "creds", EnvFrom);
    let explanation = explained(&workload, &[cm("cfg"), secret("creds")]);
    let a = &explanation.annotations;
    assert_eq!(a.workload, BTreeMap::from([(SECRET_RELOAD.to_owned(), "creds".to_owned())]));
    assert_eq!(a.pod_template, BTreeMap::from([(AUTO.to_owned(), "true".to_owned())]));
    let in_effect: Vec<(&str, &str)> = a.in_effect.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    // The template's auto covers ConfigMaps; for Secrets the workload's own list wins (§4.3 step 1).
    assert_eq!(
        in_effect,
        [("configmaps", "pod_template"), ("secretproviderclasses", "pod_template"), ("secrets", "workload")]
    );
    let cfg = &explanation.resources[0];
    assert_eq!(cfg.decision.because, "reloader.stakater.com/auto is \"true\" on the pod template");
    let creds = &explanation.resources[1];
    assert_eq!(creds.decision.because, "secret.reloader.stakater.com/reload on the workload names it");
}

#[test]
fn markers_are_compared_with_the_current_hash() {
    let current = cm("cfg");
    let hex = current.hash.to_hex();
    let base = || deployment("web").annotate(AUTO, "true").uses_cm("app", "cfg", EnvFrom);
    let cases = [
        ("never reloaded", base(), MarkerState::None, None, false),
        (
            "reloaded for the current data",
            base().env("app", "STAKATER_CFG_CONFIGMAP", &hex),
            MarkerState::Current,
            Some(hex.as_str()),
            false,
        ),
        (
            "reloaded for older data",
            base().env("app", "STAKATER_CFG_CONFIGMAP", "0000000000000000000000000000000000000000"),
            MarkerState::Different,
            Some("0000000000000000000000000000000000000000"),
            true,
        ),
        (
            "garbage value",
            base().env("app", "STAKATER_CFG_CONFIGMAP", "oops"),
            MarkerState::Different,
            Some("oops"),
            true,
        ),
    ];
    for (name, workload, state, recorded, on_start) in cases {
        let explanation = explained(&workload, std::slice::from_ref(&current));
        let r = &explanation.resources[0];
        assert_eq!(r.current_hash.as_deref(), Some(hex.as_str()), "{name}");
        assert_eq!(r.marker.env_var.as_deref(), Some("STAKATER_CFG_CONFIGMAP"), "{name}");
        assert_eq!(r.marker.state, state, "{name}");
        assert_eq!(r.marker.matches_current, state == MarkerState::Current, "{name}");
        assert_eq!(r.marker.recorded.as_deref(), recorded, "{name}");
        assert_eq!(r.marker.container.is_some(), recorded.is_some(), "{name}");
        assert_eq!(r.reloads_on_controller_start, on_start, "{name}");
        assert!(explanation.other_markers.is_empty(), "{name}: {:?}", explanation.other_markers);
    }
}

#[test]
fn the_annotation_strategy_reads_last_reloaded_from() {
    let current = cm("cfg");
    let record = crate::markers::annotation_marker_value(&current.key, &current.hash, "app", 1);
    let workload = deployment("web")
        .annotate(AUTO, "true")
        .uses_cm("app", "cfg", EnvFrom)
        .annotate_template(LAST_RELOADED_FROM, &record)
        .env("app", "STAKATER_OLD_CONFIGMAP", "abc");
    let settings = ExplainSettings {
        decide: DecideOptions { strategy: ReloadStrategy::Annotations, ..DecideOptions::default() },
        ..ExplainSettings::default()
    };
    let explanation = explained_with(&workload, std::slice::from_ref(&current), &settings);
    let r = &explanation.resources[0];
    assert_eq!(r.marker.annotation.as_deref(), Some(LAST_RELOADED_FROM));
    assert_eq!(r.marker.env_var, None);
    assert_eq!(r.marker.state, MarkerState::Current);
    assert_eq!(r.next_change, "reload: set reloader.stakater.com/last-reloaded-from on the pod template");
    // The env var of an earlier env-vars run is listed, not silently dropped.
    assert_eq!(
        explanation.other_markers,
        [OtherMarker {
            marker: "STAKATER_OLD_CONFIGMAP".into(),
            container: Some("app".into()),
            recorded: "abc".into(),
            resource: None
        }]
    );
}

#[test]
fn patterns_report_what_they_match_and_invalid_entries_are_problems() {
    let workload = deployment("web").annotate(CM_RELOAD, "app-.*, [, nothing-.*");
    let explanation = explained(&workload, &[cm("app-1"), cm("other")]);
    let patterns: Vec<(&str, bool, Vec<&str>)> = explanation
        .annotations
        .patterns
        .iter()
        .map(|p| (p.pattern.as_str(), p.valid, p.matches.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        patterns,
        [("app-.*", true, vec!["app-1"]), ("[", false, vec![]), ("nothing-.*", true, vec![])]
    );
    assert_eq!(explanation.problems.len(), 1, "{:?}", explanation.problems);
    assert!(explanation.problems[0].contains("\"[\" is not a valid regular expression"));
    assert_eq!(
        rows(&explanation).iter().map(|r| r.resource.as_str()).collect::<Vec<_>>(),
        ["ConfigMap/app-1"]
    );
}

#[test]
fn scope_settings_and_kind_specific_writes_change_the_next_change() {
    let auto = || deployment("web").annotate(AUTO, "true").uses_cm("app", "cfg", EnvFrom);
    let ignored_kind = ExplainSettings {
        scope: Scope {
            kinds: BTreeMap::from([(
                ResourceKind::ConfigMap,
                "ConfigMaps are ignored (--resources-to-ignore)".into(),
            )]),
            ..Scope::default()
        },
        ..ExplainSettings::default()
    };
    let out_of_scope = ExplainSettings {
        scope: Scope {
            workload: Some("namespace default is not watched (--namespaces=a)".into()),
            ..Scope::default()
        },
        ..ExplainSettings::default()
    };
    let dry_run = ExplainSettings { dry_run: true, ..ExplainSettings::default() };
    let on_create = ExplainSettings { reload_on_create: true, ..ExplainSettings::default() };
    let all = ExplainSettings {
        decide: DecideOptions {
            auto_reload_all: true,
            strategy: ReloadStrategy::EnvVars,
            ..DecideOptions::default()
        },
        ..ExplainSettings::default()
    };
    let cases: Vec<(&str, TestWorkload, Vec<ResourceView>, ExplainSettings, &str)> = vec![
        (
            "ignored type",
            auto(),
            vec![cm("cfg")],
            ignored_kind,
            "nothing: ConfigMaps are ignored (--resources-to-ignore)",
        ),
        (
            "workload out of scope",
            auto(),
            vec![cm("cfg")],
            out_of_scope,
            "nothing: namespace default is not watched (--namespaces=a)",
        ),
        (
            "dry run",
            auto(),
            vec![cm("cfg")],
            dry_run,
            "nothing written (--dry-run): the write is only logged and counted; it would set \
             STAKATER_CFG_CONFIGMAP on container app",
        ),
        (
            "missing, reload on create",
            auto(),
            vec![],
            on_create,
            "when it is created: reload: set STAKATER_CFG_CONFIGMAP on container app",
        ),
        (
            "auto-reload-all",
            deployment("web").uses_cm("app", "cfg", EnvFrom),
            vec![cm("cfg")],
            all,
            "reload: set STAKATER_CFG_CONFIGMAP on container app",
        ),
        (
            "CronJob",
            auto().kind(WorkloadKind::CronJob),
            vec![cm("cfg")],
            ExplainSettings::default(),
            "reload: create a Job from the CronJob, with STAKATER_CFG_CONFIGMAP on container app",
        ),
        (
            "suspended CronJob",
            auto().kind(WorkloadKind::CronJob).suspended(),
            vec![cm("cfg")],
            ExplainSettings::default(),
            "nothing: the CronJob is suspended",
        ),
        (
            "Job",
            auto().kind(WorkloadKind::Job),
            vec![cm("cfg")],
            ExplainSettings::default(),
            "reload: delete the Job and create it again, with STAKATER_CFG_CONFIGMAP on container app",
        ),
        (
            "pause period",
            auto().annotate("deployment.reloader.stakater.com/pause-period", "5m"),
            vec![cm("cfg")],
            ExplainSettings::default(),
            "reload: set STAKATER_CFG_CONFIGMAP on container app, then pause the Deployment for 5m",
        ),
    ];
    for (name, workload, resources, settings, want) in cases {
        let explanation = explained_with(&workload, &resources, &settings);
        assert_eq!(explanation.resources[0].next_change, want, "{name}");
    }
}

#[test]
fn the_json_has_the_documented_shape() {
    let workload = deployment("web").annotate(AUTO, "true").uses_cm("app", "cfg", EnvFrom);
    let json = serde_json::to_value(explained(&workload, &[cm("cfg")])).unwrap();
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        keys(&json),
        ["annotations", "other_markers", "problems", "resources", "settings", "workload"]
    );
    assert_eq!(
        keys(&json["resources"][0]),
        [
            "current_hash",
            "decision",
            "exists",
            "ignored",
            "kind",
            "marker",
            "matched",
            "name",
            "next_change",
            "not_watched",
            "references",
            "reloads_on_controller_start",
        ]
    );
    assert_eq!(json["resources"][0]["decision"]["rule"], "auto");
    assert_eq!(json["resources"][0]["marker"]["state"], "none");
    assert_eq!(json["resources"][0]["references"][0]["via"], "env_from");
    assert_eq!(json["settings"]["strategy"], "env-vars");
    assert_eq!(json["workload"]["kind"], "Deployment");
}

/// docs/beyond-stakater.md §12 and §13: a declared kind's declaration, and how the workload
/// restarts, are shown with the workload.
#[test]
fn the_declaration_and_the_restart_method_are_shown() {
    let declared = crate::model::WorkloadKind::declare(&[
        "group=apps.kruise.io,version=v1alpha1,kind=CloneSet,resource=clonesets,template=/spec/template"
            .into(),
        "group=example.com,version=v1,kind=Cluster,resource=clusters,annotations=/spec/podAnnotations".into(),
    ])
    .unwrap();
    let explain_with =
        |workload: &TestWorkload, eviction: &Result<Option<crate::restart::EvictionPolicy>, _>, on: bool| {
            let settings = ExplainSettings { restart_by_eviction: on, ..ExplainSettings::default() };
            let view = crate::workload::Workload::view(workload, &settings.keys);
            let explanation = explain(&ExplainInput {
                workload: &view,
                init_containers: &[],
                resources: &[],
                settings: &settings,
                eviction,
            });
            render_text(&explanation)
        };
    let clone_set = deployment("web").kind(declared[0]);
    let text = explain_with(&clone_set, &Ok(None), false);
    assert!(text.contains("CloneSet web in namespace"), "{text}");
    assert!(text.contains("Declared kind:  apps.kruise.io/v1alpha1 clonesets, pod template at /spec/template (--custom-workload)"), "{text}");
    assert!(!text.contains("Restart:"), "{text}");
    let map = deployment("db").kind(declared[1]).annotations_map();
    assert!(explain_with(&map, &Ok(None), false).contains("pod annotations map at /spec/podAnnotations"));

    let policy = crate::restart::EvictionPolicy {
        max_unavailable: 2,
        ready_timeout: std::time::Duration::from_secs(90),
    };
    let text = explain_with(&clone_set, &Ok(Some(policy)), true);
    assert!(
        text.contains("Restart:") && text.contains("2 at a time") && text.contains("within 90s"),
        "{text}"
    );
    let text = explain_with(&clone_set, &Ok(Some(policy)), false);
    assert!(text.contains("without --restart-by-eviction: only the marker is written"), "{text}");
    let problem = crate::restart::EvictionPolicy::of(Some(&std::collections::BTreeMap::from([(
        crate::restart::RESTART.to_owned(),
        "now".to_owned(),
    )])));
    let text = explain_with(&clone_set, &problem, true);
    assert!(text.contains("not understood") && text.contains("\"now\""), "{text}");
    // In JSON too.
    let settings = ExplainSettings { restart_by_eviction: true, ..ExplainSettings::default() };
    let view = crate::workload::Workload::view(&clone_set, &settings.keys);
    let explanation = explain(&ExplainInput {
        workload: &view,
        init_containers: &[],
        resources: &[],
        settings: &settings,
        eviction: &Ok(Some(policy)),
    });
    let json = serde_json::to_value(&explanation).unwrap();
    assert_eq!(json["workload"]["declared"]["pointer"], "/spec/template");
    assert_eq!(json["workload"]["declared"]["target"], "template");
    assert!(json["workload"]["restart"].as_str().unwrap().contains("by eviction"));
}

/// docs/beyond-stakater.md §15: the timing, a reload held now (why, until when) and a loop
/// guard's stop are shown with the workload; a workload with none of them shows none.
#[test]
fn timing_holds_and_loop_stops_are_shown() {
    use crate::timing::{
        DELAY, HELD, HeldReload, HoldReason, LOOP_STOPPED, LoopStop, MAINTENANCE_WINDOW, Windows,
    };
    let at = |text: &str| text.parse::<jiff::Timestamp>().unwrap();
    let record = HeldReload {
        since: at("2026-12-01T10:00:00Z"),
        until: at("2026-12-02T02:00:00Z"),
        reason: HoldReason::MaintenanceWindow,
        resources: vec![(ResourceKind::ConfigMap, "settings".to_owned())],
    };
    let stop = LoopStop {
        at: at("2026-12-01T09:00:00Z"),
        reloads: 20,
        within: std::time::Duration::from_secs(600),
        resource: "ConfigMap/churn".to_owned(),
    };
    let held = deployment("web")
        .annotate(DELAY, "5m")
        .annotate(MAINTENANCE_WINDOW, "Mon-Fri 02:00-04:00 Europe/Berlin")
        .annotate(HELD, &record.to_annotation());
    let explanation = explained(&held, &[]);
    let json = serde_json::to_value(&explanation).unwrap();
    let timing = &json["workload"]["timing"];
    assert_eq!(timing["delay"], "5m0s");
    assert_eq!(timing["maintenance_window"], "Mon-Fri 02:00-04:00 Europe/Berlin");
    assert_eq!(timing["held"]["reason"], "maintenance-window");
    assert_eq!(timing["held"]["until"], "2026-12-02T02:00:00Z");
    assert_eq!(timing["held"]["resources"], serde_json::json!(["ConfigMap/settings"]));
    let text = render_text(&explanation);
    assert!(text.contains("ConfigMap/settings held by the maintenance-window since 2026-12-01T10:00:00Z; applied at 2026-12-02T02:00:00Z"), "{text}");

    let stopped = deployment("web").annotate(LOOP_STOPPED, &stop.to_annotation());
    let text = render_text(&explained(&stopped, &[]));
    assert!(text.contains("reloads stopped: 20 reloads within 10m, the last for ConfigMap/churn"), "{text}");

    assert!(
        serde_json::to_value(explained(&deployment("web"), &[])).unwrap()["workload"].get("timing").is_none()
    );
    // The default windows show for every workload, unless it says "always".
    let settings = ExplainSettings {
        default_windows: Some(Arc::new("* 02:00-04:00 UTC".parse::<Windows>().unwrap())),
        ..ExplainSettings::default()
    };
    let json = serde_json::to_value(explained_with(&deployment("web"), &[], &settings)).unwrap();
    assert_eq!(json["workload"]["timing"]["maintenance_window"], "* 02:00-04:00 UTC");
    let always = deployment("web").annotate(MAINTENANCE_WINDOW, "always");
    let json = serde_json::to_value(explained_with(&always, &[], &settings)).unwrap();
    assert!(json["workload"].get("timing").is_none(), "{json}");
}
