use super::*;
use crate::annotations::AnnotationKeys;
use crate::markers::{MarkerAction, annotation_marker_value, apply_to_template};
use crate::model::{RefVia, ReloadStrategy, WorkloadKind};
use crate::testkit::*;

use RefVia::{EnvFrom, Volume};

fn names(views: &[&WorkloadView]) -> Vec<String> {
    views.iter().map(|v| format!("{}/{}", v.key.namespace, v.key.name)).collect()
}

/// The plan's decisions with the marker changes alone, as the rows read them.
fn decisions(plan: EventPlan) -> Vec<(WorkloadKey, Result<MarkerChange, SkipReason>)> {
    plan.decisions.into_iter().map(|(key, decision)| (key, decision.map(|planned| planned.change))).collect()
}

fn index_of(workloads: &[TestWorkload]) -> Index {
    let mut index = Index::default();
    for w in workloads {
        assert_eq!(index.upsert_workload(w.view()), None);
    }
    index
}

#[test]
fn resource_changes() {
    let mut index = Index::default();
    let v1 = cm("c");
    let v2 = cm("c").with_hash(hash("v2"));
    let steps: [(ResourceView, ResourceChange); 6] = [
        (v1.clone(), ResourceChange::Created),
        // §A 5: labels and other annotations are not in the view at all.
        (v1.clone(), ResourceChange::Unchanged),
        (v1.clone().matched(), ResourceChange::FlagsChanged),
        (v1.clone().matched().ignored(), ResourceChange::FlagsChanged),
        (v2.clone(), ResourceChange::ContentChanged { previous: v1.hash }),
        (v2.clone(), ResourceChange::Unchanged),
    ];
    for (i, (view, want)) in steps.into_iter().enumerate() {
        let key = view.key.clone();
        assert_eq!(index.upsert_resource(view.clone()), want, "step {i}");
        assert_eq!(index.resource(&key), Some(&view), "step {i}");
    }
    assert_eq!(index.stats().resources, 1);
    assert_eq!(index.remove_resource(&v2.key), Some(v2.clone()));
    assert_eq!(index.remove_resource(&v2.key), None);
    assert_eq!(index.stats().resources, 0);
}

#[test]
fn candidates() {
    let workloads = [
        deployment("by-reference").annotate(AUTO, "true").uses_cm("app", "shared", Volume),
        deployment("by-name").annotate(CM_RELOAD, "listed, shared"),
        deployment("by-template-name").annotate_template(CM_RELOAD, "listed"),
        deployment("by-pattern").annotate(CM_RELOAD, "app-.*"),
        deployment("by-search").annotate(SEARCH, "true").uses_cm("app", "shared", EnvFrom),
        deployment("secret-pattern").annotate(SECRET_RELOAD, "app-.*"),
        deployment("elsewhere").in_namespace("other").annotate(CM_RELOAD, "listed, app-.*"),
        deployment("unrelated").annotate(AUTO, "true").uses_cm("app", "own", EnvFrom),
    ];
    let index = index_of(&workloads);
    let cases: [(&str, ResourceView, &[&str]); 7] = [
        (
            "reference, name and search",
            cm("shared"),
            &["default/by-name", "default/by-pattern", "default/by-reference", "default/by-search"],
        ),
        (
            "plain names on metadata and template",
            cm("listed"),
            &["default/by-name", "default/by-pattern", "default/by-template-name"],
        ),
        ("pattern holders of the kind and namespace", cm("app-1"), &["default/by-pattern"]),
        ("Secret pattern", secret("app-1"), &["default/secret-pattern"]),
        ("another namespace", cm("listed").in_namespace("other"), &["other/elsewhere"]),
        ("Secret pattern holders for any Secret", secret("shared"), &["default/secret-pattern"]),
        ("nobody", secret("shared").in_namespace("third"), &[]),
    ];
    for (name, resource, want) in cases {
        assert_eq!(names(&index.candidates(&resource.key)), want, "{name}");
    }
    // Search with match decides through the same candidates (§A 15: only the workload with
    // search reloads among the two sharing the ConfigMap).
    let opts = DecideOptions::default();
    let planned: Vec<_> =
        decisions(index.plan_event(&cm("shared").matched(), ResourceEventKind::Updated, &opts, |_| false))
            .into_iter()
            .map(|(key, result)| (key.name.to_string(), result.map(|c| c.container)))
            .collect();
    assert_eq!(
        planned,
        [
            ("by-name".to_string(), Ok(0)),
            ("by-pattern".to_string(), Err(SkipReason::NotAnnotated)),
            ("by-reference".to_string(), Ok(0)),
            ("by-search".to_string(), Ok(0)),
        ]
    );
    let stats = index.stats();
    assert_eq!((stats.workloads, stats.pattern_holders), (8, 3));
    // shared, listed, own in default; listed in other.
    assert_eq!(stats.reverse_entries, 4);
}

#[test]
fn search_without_match_does_not_reload_through_the_index() {
    let index = index_of(&[
        deployment("with-search").annotate(SEARCH, "true").uses_cm("app", "c", EnvFrom),
        deployment("without").uses_cm("app", "c", EnvFrom),
    ]);
    let opts = DecideOptions::default();
    let results: Vec<_> = decisions(index.plan_event(&cm("c"), ResourceEventKind::Updated, &opts, |_| false))
        .into_iter()
        .map(|(key, result)| (key.name.to_string(), result.is_ok()))
        .collect();
    assert_eq!(results, [("with-search".to_string(), false), ("without".to_string(), false)]);
}

#[test]
fn updates_and_removals_keep_the_lookups_exact() {
    let first = deployment("web").annotate(CM_RELOAD, "a, p-.*").uses_secret("app", "s", EnvFrom);
    let mut index = index_of(std::slice::from_ref(&first));
    let key = first.view().key;
    assert_eq!(names(&index.candidates(&cm("a").key)), ["default/web"]);
    assert_eq!(names(&index.candidates(&cm("p-1").key)), ["default/web"]);
    assert_eq!(names(&index.candidates(&secret("s").key)), ["default/web"]);

    // A status-only update changes nothing in the lookups.
    let mut same = first.view();
    same.paused = true;
    assert_eq!(index.upsert_workload(same), Some(first.view()));
    assert_eq!(names(&index.candidates(&cm("a").key)), ["default/web"]);

    // New annotations: the old entries go, the new ones come.
    let second = deployment("web").annotate(CM_RELOAD, "b").uses_secret("app", "t", Volume);
    assert!(index.upsert_workload(second.view()).is_some());
    for gone in [cm("a"), cm("p-1"), secret("s")] {
        assert!(index.candidates(&gone.key).is_empty(), "{}", gone.key);
    }
    assert_eq!(names(&index.candidates(&cm("b").key)), ["default/web"]);
    assert_eq!(names(&index.candidates(&secret("t").key)), ["default/web"]);
    assert_eq!(
        index.stats(),
        IndexStats { resources: 0, workloads: 1, reverse_entries: 2, pattern_holders: 0, loops_stopped: 0 }
    );

    assert_eq!(index.remove_workload(&key), Some(second.view()));
    assert_eq!(index.remove_workload(&key), None);
    assert!(index.candidates(&cm("b").key).is_empty());
    assert_eq!(index.stats(), IndexStats::default());
    assert!(index.lookup.pattern_holders.is_empty());

    // A freed slot is reused without leaking the old workload into the new one's lookups.
    let other = deployment("other").annotate(CM_RELOAD, "z");
    index.upsert_workload(other.view());
    assert_eq!(names(&index.candidates(&cm("z").key)), ["default/other"]);
    assert!(index.candidates(&cm("b").key).is_empty());
    assert_eq!(index.workloads().count(), 1);
    assert_eq!(index.workload(&other.view().key), Some(&other.view()));
}

fn marked(
    workload: TestWorkload,
    resource: &ResourceView,
    hash: ContentHash,
    strategy: ReloadStrategy,
) -> TestWorkload {
    match strategy {
        ReloadStrategy::EnvVars => {
            let env = crate::naming::env_var_name(resource.key.kind, &resource.key.name);
            workload.env("app", &env, &hash.to_hex())
        }
        ReloadStrategy::Annotations => workload
            .annotate_template(LAST_RELOADED_FROM, &annotation_marker_value(&resource.key, &hash, "app", 7)),
    }
}

#[test]
fn catch_up_reloads_stale_markers_once() {
    for strategy in [ReloadStrategy::EnvVars, ReloadStrategy::Annotations] {
        let opts = DecideOptions { strategy, ..DecideOptions::default() };
        let current = cm("c").with_hash(hash("v2"));
        let pattern = cm("app-1").with_hash(hash("v2"));
        let auto = || deployment("x").annotate(AUTO, "true").uses_cm("app", "c", EnvFrom);
        let workloads = [
            marked(auto(), &current, hash("v1"), strategy).with_name("stale"),
            marked(auto(), &current, current.hash, strategy).with_name("current"),
            auto().with_name("no-marker"),
            marked(auto(), &current, DELETE_MARKER_HASH, strategy).with_name("delete-marker"),
            marked(deployment("x").annotate(CM_RELOAD, "app-.*"), &pattern, hash("v1"), strategy)
                .with_name("pattern"),
            // A stale marker for a resource it no longer reloads for: plan says no.
            marked(deployment("x").uses_cm("app", "c", EnvFrom), &current, hash("v1"), strategy)
                .with_name("not-annotated"),
            marked(auto().annotate(CM_EXCLUDE, "c"), &current, hash("v1"), strategy).with_name("excluded"),
        ];
        let mut index = index_of(&workloads);
        index.upsert_resource(current.clone());
        index.upsert_resource(pattern.clone());
        index.upsert_resource(cm("unused"));

        let changes = index.catch_up(&opts);
        let got: Vec<_> = changes
            .iter()
            .map(|(key, change)| (key.name.to_string(), change.resource.name.to_string()))
            .collect();
        assert_eq!(
            got,
            [("pattern".to_string(), "app-1".to_string()), ("stale".to_string(), "c".to_string())],
            "{strategy:?}"
        );
        for (_, change) in &changes {
            assert_eq!(change.strategy, strategy);
            let resource = if change.resource == current.key { &current } else { &pattern };
            assert_eq!(change.action, MarkerAction::Set(resource.hash));
        }

        // Apply the changes as the writer would and sweep again: nothing left.
        for (key, change) in changes {
            let mut workload = workloads.iter().find(|w| w.view().key == key).unwrap().clone();
            let template = &mut workload.deployment.spec.as_mut().unwrap().template;
            assert!(apply_to_template(template, &[change], &AnnotationKeys::default(), 8));
            index.upsert_workload(workload.view());
        }
        assert_eq!(index.catch_up(&opts), [], "{strategy:?}");
    }
}

#[test]
fn catch_up_respects_kinds_that_cannot_reload() {
    let resource = cm("c").with_hash(hash("v2"));
    let workload = marked(
        deployment("cron")
            .kind(WorkloadKind::CronJob)
            .suspended()
            .annotate(AUTO, "true")
            .uses_cm("app", "c", EnvFrom),
        &resource,
        hash("v1"),
        ReloadStrategy::EnvVars,
    );
    let mut index = index_of(&[workload]);
    index.upsert_resource(resource);
    assert_eq!(index.catch_up(&DecideOptions::default()), []);
}

/// How a resource reaches the index in a `missed_changes` case.
enum Step {
    /// The first list (no change version recorded).
    Listed(ResourceView),
    /// A watch event or a re-list.
    Watched(ResourceView),
}

struct MissedCase {
    name: &'static str,
    steps: Vec<Step>,
    /// The workload's form the index held before (`None`: seen for the first time).
    previous: Option<TestWorkload>,
    workload: TestWorkload,
    /// (resource name, event, `None` for a planned change or the skip reason).
    want: Vec<(&'static str, ResourceEventKind, Option<SkipReason>)>,
}

/// docs/behaviour.md §G: a change the index met before the workload is planned for it once it is
/// seen; a workload created after the change is not; every case where the versions cannot tell
/// plans nothing.
#[test]
fn missed_changes() {
    use ResourceEventKind::{Created, Updated};
    use Step::{Listed, Watched};
    let v2 = |name: &str| cm(name).with_hash(hash("v2"));
    let auto = |name: &str| deployment("web").annotate(AUTO, "true").uses_cm("app", name, EnvFrom);
    let case = |name, steps, previous, workload, want| MissedCase { name, steps, previous, workload, want };
    // Listed at start-up, then its data changed at version 20.
    let changed_at_20 = || vec![Listed(cm("c").at_version("5")), Watched(v2("c").at_version("20"))];
    let cases = vec![
        case(
            "the change came before the workload's ADDED event, after its creation",
            changed_at_20(),
            None,
            auto("c").at_version("10"),
            vec![("c", Updated, None)],
        ),
        case(
            "the workload was created after the change",
            changed_at_20(),
            None,
            auto("c").at_version("30"),
            vec![],
        ),
        case(
            "versions compare as numbers, not as text",
            vec![Listed(cm("c").at_version("5")), Watched(v2("c").at_version("100"))],
            None,
            auto("c").at_version("99"),
            vec![("c", Updated, None)],
        ),
        case(
            "a listed resource records no change",
            vec![Listed(v2("c").at_version("20"))],
            None,
            auto("c").at_version("10"),
            vec![],
        ),
        case(
            "a resource created while watched, before the workload: a create",
            vec![Watched(cm("c").at_version("20"))],
            None,
            auto("c").at_version("10"),
            vec![("c", Created, None)],
        ),
        case(
            "labels or match/ignore changing later do not make the content change newer",
            vec![
                Listed(cm("c").at_version("5")),
                Watched(v2("c").at_version("20")),
                Watched(v2("c").matched().at_version("40")),
            ],
            None,
            auto("c").at_version("30"),
            vec![],
        ),
        case(
            "only the last content change counts",
            vec![
                Listed(cm("c").at_version("5")),
                Watched(v2("c").at_version("20")),
                Watched(cm("c").with_hash(hash("v3")).at_version("40")),
            ],
            None,
            auto("c").at_version("30"),
            vec![("c", Updated, None)],
        ),
        case(
            "an unparsable workload version: nothing",
            changed_at_20(),
            None,
            auto("c").at_version("x10"),
            vec![],
        ),
        case(
            "an unparsable version on the last content change: nothing",
            vec![Watched(cm("c").at_version("5")), Watched(v2("c").at_version("2O"))],
            None,
            auto("c").at_version("1"),
            vec![],
        ),
        case(
            "a status update (same decision inputs) replays nothing",
            changed_at_20(),
            Some(auto("c").at_version("8")),
            auto("c").at_version("10"),
            vec![],
        ),
        case(
            "annotated after the change was decided on the old form, before it happened",
            changed_at_20(),
            Some(deployment("web").uses_cm("app", "c", EnvFrom).at_version("8")),
            auto("c").at_version("10"),
            vec![("c", Updated, None)],
        ),
        case(
            "the decision still has the last word",
            changed_at_20(),
            None,
            marked(auto("c"), &v2("c"), hash("v2"), ReloadStrategy::EnvVars).at_version("10"),
            vec![("c", Updated, Some(SkipReason::AlreadyCurrent))],
        ),
        case(
            "only resources the workload may reload for",
            vec![
                Listed(cm("other").at_version("5")),
                Watched(v2("other").at_version("20")),
                Watched(secret("c").at_version("21")),
            ],
            None,
            auto("c").at_version("10"),
            vec![],
        ),
        case(
            "explicit names and patterns, in its own namespace only",
            vec![
                Watched(cm("named").at_version("20")),
                Watched(cm("app-1").at_version("21")),
                Watched(cm("app-2").at_version("9")),
                Watched(cm("app-1").in_namespace("other").at_version("22")),
                Watched(cm("unrelated").at_version("23")),
            ],
            None,
            deployment("web").annotate(CM_RELOAD, "named, app-.*").at_version("10"),
            // The lookups offer a pattern holder every resource of the kind; decide says no.
            vec![
                ("app-1", Created, None),
                ("named", Created, None),
                ("unrelated", Created, Some(SkipReason::NotAnnotated)),
            ],
        ),
    ];
    let opts = DecideOptions::default();
    for MissedCase { name, steps, previous, workload, want } in cases {
        let mut index = Index::default();
        for step in steps {
            match step {
                Listed(view) => index.upsert_listed_resource(view),
                Watched(view) => index.upsert_resource(view),
            };
        }
        let previous = previous.map(|p| p.view());
        if let Some(previous) = &previous {
            index.upsert_workload(previous.clone());
        }
        let view = workload.view();
        index.upsert_workload(view.clone());
        let got: Vec<_> = index
            .missed_changes(&view.key, previous.as_ref(), &opts)
            .into_iter()
            .map(|missed| (missed.resource.name.to_string(), missed.event, missed.plan.err()))
            .collect();
        let want: Vec<_> = want.into_iter().map(|(n, e, s)| (n.to_string(), e, s)).collect();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn missed_changes_plan_the_current_hash_for_that_workload_only() {
    let mut index = Index::default();
    let changed = cm("c").with_hash(hash("v2")).at_version("20");
    index.upsert_listed_resource(cm("c").at_version("5"));
    index.upsert_resource(changed.clone());
    let older = deployment("older").annotate(AUTO, "true").uses_cm("app", "c", EnvFrom).at_version("10");
    let newer = deployment("newer").annotate(AUTO, "true").uses_cm("app", "c", EnvFrom).at_version("30");
    for w in [&older, &newer] {
        index.upsert_workload(w.view());
    }
    let missed = index.missed_changes(&older.view().key, None, &DecideOptions::default());
    let [MissedChange { resource, event: ResourceEventKind::Updated, plan: Ok(change) }] = missed.as_slice()
    else {
        panic!("{missed:?}")
    };
    assert_eq!(*resource, changed.key);
    assert_eq!(change.action, MarkerAction::Set(changed.hash));
    assert_eq!(index.missed_changes(&newer.view().key, None, &DecideOptions::default()), []);
    assert_eq!(
        index.missed_changes(
            &WorkloadKey::new(WorkloadKind::Deployment, NS, "gone"),
            None,
            &DecideOptions::default()
        ),
        []
    );
}

#[test]
fn resource_versions_parse_as_decimal_numbers_only() {
    use crate::model::ResourceVersion;
    let parse = |s: &str| ResourceVersion::parse(s).map(|v| v.to_string());
    assert_eq!(parse("12345"), Some("12345".into()));
    for bad in ["", "0", "+1", "-1", " 1", "1a", "18446744073709551616"] {
        assert_eq!(parse(bad), None, "{bad:?}");
    }
    assert!(ResourceVersion::parse("9") < ResourceVersion::parse("10"));
}

/// docs/behaviour.md §G: a workload whose ADDED event came after the change (a greater creation
/// version) is not planned for it; one whose creation version is unknown always is.
#[test]
fn plans_leave_out_workloads_created_after_the_change() {
    let auto = |name: &str| deployment(name).annotate(AUTO, "true").uses_cm("app", "c", EnvFrom);
    let mut index = Index::default();
    index.upsert_watched_workload(auto("watched-before").at_version("10").view());
    index.upsert_watched_workload(auto("watched-after").at_version("30").view());
    index.upsert_workload(auto("listed-after").at_version("30").view());
    index.upsert_watched_workload(auto("unversioned").view());
    index.upsert_watched_workload(auto("modified-after").at_version("10").view());
    // A later event of a known workload (a status update) does not move its creation.
    index.upsert_watched_workload(auto("modified-after").at_version("31").view());
    let planned = |resource: &ResourceView| -> Vec<String> {
        let plan =
            index.plan_event(resource, ResourceEventKind::Updated, &DecideOptions::default(), |_| false);
        plan.targets().map(|key| key.name.to_string()).collect()
    };
    let changed = cm("c").with_hash(hash("v2"));
    assert_eq!(
        planned(&changed.clone().at_version("20")),
        ["listed-after", "modified-after", "unversioned", "watched-before"]
    );
    assert_eq!(
        planned(&changed),
        ["listed-after", "modified-after", "unversioned", "watched-after", "watched-before"],
        "a change without a version leaves nobody out"
    );
}

/// A resource event's scan metrics read its namespace's workloads alone.
#[test]
fn workloads_by_namespace() {
    let mut index = index_of(&[
        deployment("a"),
        deployment("b").in_namespace("other"),
        deployment("c"),
        deployment("d").in_namespace("other"),
    ]);
    let in_ns = |index: &Index, namespace: &str| {
        let resource = cm("c").in_namespace(namespace);
        let plan =
            index.plan_event(&resource, ResourceEventKind::Updated, &DecideOptions::default(), |_| false);
        plan.scanned.get(&WorkloadKind::Deployment).copied().unwrap_or_default()
    };
    assert_eq!(in_ns(&index, "default"), 2);
    assert_eq!(in_ns(&index, "other"), 2);
    assert_eq!(in_ns(&index, "third"), 0);

    // A freed id reused in another namespace leaves the first one's list.
    index.remove_workload(&deployment("a").view().key);
    assert!(index.upsert_workload(deployment("e").in_namespace("third").view()).is_none());
    assert_eq!(in_ns(&index, "default"), 1);
    assert_eq!(in_ns(&index, "third"), 1);

    // An update keeps it listed once; the last removal forgets the namespace.
    assert!(index.upsert_workload(deployment("c").annotate(AUTO, "true").view()).is_some());
    assert_eq!(in_ns(&index, "default"), 1);
    index.remove_workload(&deployment("c").view().key);
    assert_eq!(in_ns(&index, "default"), 0);
    assert!(!index.workloads.by_namespace.contains_key("default"));
}

/// Stakater runs its strategy on every workload a rule selects, used or not; those that do not
/// use the resource are counted in the plan (no candidates, so no decision of theirs is planned).
#[test]
fn selected_but_unused() {
    let workloads = [
        deployment("auto-own").annotate(AUTO, "true").uses_cm("app", "own", EnvFrom),
        deployment("typed-auto-own").annotate(CM_AUTO, "true").uses_cm("app", "own", EnvFrom),
        deployment("auto-user").annotate(AUTO, "true").uses_cm("app", "shared", EnvFrom),
        deployment("search-own").annotate(SEARCH, "true").uses_cm("app", "own", EnvFrom),
        deployment("auto-off").annotate(AUTO, "false").uses_cm("app", "own", EnvFrom),
        deployment("plain").uses_cm("app", "own", EnvFrom),
        deployment("elsewhere").in_namespace("other").annotate(AUTO, "true"),
    ];
    let index = index_of(&workloads);
    let opts = DecideOptions::default();
    let all = DecideOptions { auto_reload_all: true, ..DecideOptions::default() };
    let cases: [(&str, ResourceView, &DecideOptions, u64); 6] = [
        ("auto and typed auto not using it; the user is a candidate", cm("shared"), &opts, 2),
        ("search counts when the resource is matched", cm("shared").matched(), &opts, 3),
        ("an ignored resource selects nobody", cm("shared").ignored(), &opts, 0),
        ("typed auto is per kind: the ConfigMap one does not select a Secret", secret("shared"), &opts, 2),
        ("--auto-reload-all selects the unannotated (and unmatched search) too", cm("shared"), &all, 4),
        ("another namespace", cm("shared").in_namespace("third"), &opts, 0),
    ];
    for (name, resource, opts, want) in cases {
        let plan = index.plan_event(&resource, ResourceEventKind::Updated, opts, |_| false);
        assert_eq!(plan.selected_but_unused, want, "{name}");
    }
}

/// docs/behaviour.md §C32e: the API server's answer to our own write is in the index at once, so
/// a change decided before the watch brings the write back (a delete right after a create) is
/// decided on the markers the workload carries; an older event does not take it back.
#[test]
fn our_writes_are_seen_before_the_watch_brings_them_back() {
    let resource = secret("late");
    let env = crate::naming::env_var_name(resource.key.kind, &resource.key.name);
    let web = || deployment("web").annotate(AUTO, "true").uses_secret("app", "late", EnvFrom);
    let key = web().view().key;
    let removal = |index: &Index| {
        let plan =
            index.plan_event(&resource, ResourceEventKind::Deleted, &DecideOptions::default(), |_| false);
        decisions(plan).into_iter().map(|(_, plan)| plan.map(|change| change.action)).collect::<Vec<_>>()
    };
    let has_marker =
        |index: &Index| index.workload(&key).unwrap().markers.env_value(resource.key.kind, "late").is_some();
    let mut index = Index::default();
    index.upsert_watched_workload(web().at_version("10").view());
    assert_eq!(removal(&index), [Err(SkipReason::AlreadyCurrent)]);

    let written = web().env("app", &env, &resource.hash.to_hex()).at_version("12");
    assert!(index.upsert_written_workload(written.view()));
    assert_eq!(removal(&index), [Ok(MarkerAction::Remove)]);
    // The same answer again, or an older one, is not newer than the view.
    assert!(!index.upsert_written_workload(written.view()));
    assert!(!index.upsert_written_workload(web().at_version("11").view()));

    // The watch, still behind the write (a status update before it), does not take it back...
    let previous = index.upsert_watched_workload(web().at_version("11").view());
    assert_eq!(previous, Some(written.view()), "the view the index holds");
    assert!(has_marker(&index));
    // ...and once it has caught up, every event counts again: someone removed the marker.
    index.upsert_watched_workload(written.view());
    index.upsert_watched_workload(web().at_version("13").view());
    assert!(!has_marker(&index));
    index.upsert_watched_workload(web().at_version("12").view());
    assert!(!has_marker(&index), "a watch event is stored as it comes once the write is confirmed");

    // A workload the index does not hold is not brought back by a write's answer.
    index.remove_workload(&key);
    assert!(!index.upsert_written_workload(written.at_version("14").view()));
    assert!(index.workload(&key).is_none());
}

/// docs/behaviour.md §C32e: while a write of ours is queued or in flight for a workload, a change
/// its view already records is planned anyway (that write may change the markers).
#[test]
fn changes_for_a_workload_being_written_are_planned_even_if_its_view_records_them() {
    let resource = cm("c");
    let env = crate::naming::env_var_name(resource.key.kind, &resource.key.name);
    let index = index_of(&[
        deployment("being-written").annotate(AUTO, "true").uses_cm("app", "c", EnvFrom).env(
            "app",
            &env,
            &resource.hash.to_hex(),
        ),
        deployment("settled").annotate(AUTO, "true").uses_cm("app", "c", EnvFrom).env(
            "app",
            &env,
            &resource.hash.to_hex(),
        ),
        deployment("not-selected").uses_cm("app", "c", EnvFrom),
    ]);
    let plan = index.plan_event(&resource, ResourceEventKind::Updated, &DecideOptions::default(), |w| {
        w.name.as_ref() != "settled"
    });
    let got: Vec<(String, Result<MarkerAction, SkipReason>)> = decisions(plan)
        .into_iter()
        .map(|(key, plan)| (key.name.to_string(), plan.map(|c| c.action)))
        .collect();
    assert_eq!(
        got,
        [
            ("being-written".to_owned(), Ok(MarkerAction::Set(resource.hash))),
            ("not-selected".to_owned(), Err(SkipReason::NotAnnotated)),
            ("settled".to_owned(), Err(SkipReason::AlreadyCurrent)),
        ]
    );
}

/// One event, one plan: the writes with the rule that chose each, the candidates' skips, the
/// namespace's workloads by kind and Stakater's `strategy_not_updated` count, from one pass.
#[test]
fn one_plan_per_event() {
    use crate::decide::Rule;
    let index = index_of(&[
        deployment("explicit").annotate(CM_RELOAD, "shared"),
        deployment("auto-user").annotate(AUTO, "true").uses_cm("app", "shared", EnvFrom),
        deployment("typed-user")
            .kind(WorkloadKind::StatefulSet)
            .annotate(CM_AUTO, "true")
            .uses_cm("app", "shared", Volume),
        deployment("excluded")
            .annotate(AUTO, "true")
            .annotate(CM_EXCLUDE, "shared")
            .uses_cm("app", "shared", EnvFrom),
        deployment("plain-user").kind(WorkloadKind::DaemonSet).uses_cm("app", "shared", EnvFrom),
        deployment("auto-elsewhere").annotate(AUTO, "true").uses_cm("app", "own", EnvFrom),
        deployment("other-namespace")
            .in_namespace("other")
            .annotate(AUTO, "true")
            .uses_cm("app", "shared", EnvFrom),
    ]);
    let key = |name: &str, kind: WorkloadKind| WorkloadKey::new(kind, NS, name);
    let (deploy, sts, ds) = (WorkloadKind::Deployment, WorkloadKind::StatefulSet, WorkloadKind::DaemonSet);
    type Row = (
        &'static str,
        ResourceView,
        Option<SkipReason>,
        Vec<(WorkloadKey, Rule)>,
        Vec<(WorkloadKey, SkipReason)>,
        u64,
    );
    let rows: [Row; 3] = [
        (
            "a change",
            cm("shared"),
            None,
            vec![
                (key("auto-user", deploy), Rule::Auto),
                (key("explicit", deploy), Rule::Explicit),
                (key("typed-user", sts), Rule::TypedAuto),
            ],
            vec![
                (key("excluded", deploy), SkipReason::Excluded),
                (key("plain-user", ds), SkipReason::NotAnnotated),
            ],
            1,
        ),
        (
            "an ignored resource concerns nobody",
            cm("shared").ignored(),
            Some(SkipReason::ResourceIgnored),
            vec![],
            vec![],
            0,
        ),
        ("a resource nobody names", cm("nobody"), None, vec![], vec![], 4),
    ];
    for (name, resource, event_skip, writes, skips, unused) in rows {
        let plan =
            index.plan_event(&resource, ResourceEventKind::Updated, &DecideOptions::default(), |_| false);
        assert_eq!(plan.event_skip, event_skip, "{name}");
        let got: Vec<(WorkloadKey, Rule)> = plan.writes().map(|(k, p)| (k.clone(), p.rule)).collect();
        assert_eq!(got, writes, "{name}");
        let got: Vec<(WorkloadKey, SkipReason)> = plan.skips().map(|(k, r)| (k.clone(), r)).collect();
        assert_eq!(got, skips, "{name}");
        assert_eq!(plan.selected_but_unused, unused, "{name}");
        // Every workload of the namespace is scanned, whatever the resource.
        assert_eq!(plan.scanned, [(deploy, 4), (sts, 1), (ds, 1)].into_iter().collect(), "{name}");
        let matched: Vec<(WorkloadKind, (u64, u64))> = plan.scan_counts().into_iter().collect();
        let want_matched = |kind| writes.iter().filter(|(k, _)| k.kind == kind).count() as u64;
        assert_eq!(
            matched,
            [(deploy, (4, want_matched(deploy))), (ds, (1, want_matched(ds))), (sts, (1, want_matched(sts)))],
            "{name}"
        );
    }
}

/// docs/beyond-stakater.md §12: an annotations map with the search annotation references
/// nothing, yet a matched resource of its namespace reaches it through the index.
#[test]
fn an_annotations_map_searching_is_offered_every_matched_resource() {
    let index = index_of(&[
        deployment("map").annotate(SEARCH, "true").annotations_map(),
        deployment("plain").annotate(SEARCH, "true"),
    ]);
    let opts = DecideOptions::default();
    for (resource, reloads) in
        [(cm("any").matched(), true), (cm("other"), false), (secret("s").matched(), true)]
    {
        let reloaded: Vec<String> =
            decisions(index.plan_event(&resource, ResourceEventKind::Updated, &opts, |_| false))
                .into_iter()
                .filter(|(_, result)| result.is_ok())
                .map(|(key, _)| key.name.to_string())
                .collect();
        assert_eq!(
            reloaded,
            if reloads { vec!["map".to_owned()] } else { Vec::<String>::new() },
            "{:?}",
            resource.key
        );
    }
}
