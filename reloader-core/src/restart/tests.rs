use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::*;

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn the_policy_comes_from_the_annotations() {
    let policy = |pairs: &[(&str, &str)]| EvictionPolicy::of(Some(&annotations(pairs)));
    assert_eq!(policy(&[]), Ok(None));
    assert_eq!(EvictionPolicy::of(None), Ok(None));
    assert_eq!(
        policy(&[(RESTART, "evict")]),
        Ok(Some(EvictionPolicy { max_unavailable: 1, ready_timeout: Duration::from_secs(600) }))
    );
    assert_eq!(
        policy(&[(RESTART, " evict "), (MAX_UNAVAILABLE, "3"), (READY_TIMEOUT, "90s")]),
        Ok(Some(EvictionPolicy { max_unavailable: 3, ready_timeout: Duration::from_secs(90) }))
    );
    for (pairs, key, value) in [
        (&[(RESTART, "delete")][..], RESTART, "delete"),
        (&[(RESTART, "evict"), (MAX_UNAVAILABLE, "0")][..], MAX_UNAVAILABLE, "0"),
        (&[(RESTART, "evict"), (MAX_UNAVAILABLE, "25%")][..], MAX_UNAVAILABLE, "25%"),
        (&[(RESTART, "evict"), (READY_TIMEOUT, "soon")][..], READY_TIMEOUT, "soon"),
        (&[(RESTART, "evict"), (READY_TIMEOUT, "0s")][..], READY_TIMEOUT, "0s"),
    ] {
        let error = policy(pairs).unwrap_err();
        assert_eq!((error.key, error.value.as_str()), (key, value));
        assert!(error.to_string().contains(key) && error.to_string().contains(value), "{error}");
    }
}

fn template(env: &[(&str, &str)], annotation: Option<&str>) -> PodTemplateSpec {
    let env: Vec<_> = env.iter().map(|(n, v)| serde_json::json!({"name": n, "value": v})).collect();
    let mut template = serde_json::json!({"spec": {"containers": [{"name": "app", "env": env}]}});
    if let Some(value) = annotation {
        template["metadata"] =
            serde_json::json!({"annotations": {"reloader.stakater.com/last-reloaded-from": value}});
    }
    serde_json::from_value(template).unwrap()
}

#[test]
fn a_pod_is_current_when_it_records_what_the_template_records() {
    fn record(env: &[(&str, &str)], annotation: Option<&str>) -> MarkerRecord {
        MarkerRecord::of(&template(env, annotation), &AnnotationKeys::default())
    }
    let marker = |hash: &str, at: i64| {
        format!(
            r#"{{"type":"CONFIGMAP","name":"c","namespace":"ns","hash":"{hash}","containerRefs":["app"],"observedAt":{at}}}"#
        )
    };
    let h1 = "1111111111111111111111111111111111111111";
    let h2 = "2222222222222222222222222222222222222222";
    let workload = record(&[("LOG", "info"), ("STAKATER_C_CONFIGMAP", h1)], None);
    // Another non-marker env entry before it (an injecting webhook) does not count; another value does.
    assert_eq!(record(&[("INJECTED", "x"), ("STAKATER_C_CONFIGMAP", h1), ("LOG", "info")], None), workload);
    assert_ne!(record(&[("STAKATER_C_CONFIGMAP", h2)], None), workload);
    assert_ne!(record(&[], None), workload);
    // The annotation's time does not count, its hash does.
    assert_eq!(record(&[], Some(&marker(h1, 1))), record(&[], Some(&marker(h1, 2))));
    assert_ne!(record(&[], Some(&marker(h1, 1))), record(&[], Some(&marker(h2, 1))));
    assert_eq!(workload.digest().len(), 16);
    assert_ne!(workload.digest(), record(&[], None).digest());
}

fn pod(name: &str, current: bool, ready: bool) -> PodState {
    PodState { name: name.to_owned(), current, ready, terminating: false }
}

fn terminating(name: &str) -> PodState {
    PodState { name: name.to_owned(), current: false, ready: false, terminating: true }
}

const ONE: EvictionPolicy = EvictionPolicy { max_unavailable: 1, ready_timeout: Duration::from_secs(60) };
const NOW: i64 = 1_000_000;

fn evicting(evicted: u32, last: i64) -> Progress {
    Progress {
        target: "t".into(),
        started_at: NOW - 500,
        last_eviction_at: last,
        evicted,
        state: ProgressState::Evicting,
    }
}

#[test]
fn one_pod_at_a_time_each_after_the_previous_replacement_is_ready() {
    let evict = |pods: &[&str]| Step::Evict { pods: pods.iter().map(|p| (*p).to_owned()).collect() };
    let two = EvictionPolicy { max_unavailable: 2, ..ONE };
    let stopped = |p: Progress| Progress { state: ProgressState::Stopped, ..p };
    let done = |p: Progress| Progress { state: ProgressState::Done, ..p };
    /// (case, policy, recorded progress, pods, desired replicas, expected step)
    type Case = (&'static str, EvictionPolicy, Option<Progress>, Vec<PodState>, Option<u32>, Step);
    let cases: Vec<Case> = vec![
        (
            "all stale: the highest ordinal first",
            ONE,
            None,
            vec![pod("web-0", false, true), pod("web-10", false, true), pod("web-9", false, true)],
            Some(3),
            evict(&["web-10"]),
        ),
        (
            "max-unavailable 2",
            two,
            None,
            vec![pod("a-0", false, true), pod("a-1", false, true), pod("a-2", false, true)],
            Some(3),
            evict(&["a-2", "a-1"]),
        ),
        (
            "a replacement not Ready yet: wait",
            ONE,
            Some(evicting(1, NOW - 10)),
            vec![pod("web-0", false, true), pod("web-1", true, false)],
            Some(2),
            Step::Wait,
        ),
        (
            "max-unavailable 2, one terminating (counted once): one more",
            two,
            Some(evicting(1, NOW - 10)),
            vec![pod("a-0", false, true), pod("a-1", false, true), terminating("a-2")],
            Some(3),
            evict(&["a-1"]),
        ),
        (
            "the evicted pod not replaced yet (one missing): wait",
            ONE,
            Some(evicting(1, NOW - 10)),
            vec![pod("web-0", false, true)],
            Some(2),
            Step::Wait,
        ),
        (
            "still terminating: wait",
            ONE,
            Some(evicting(1, NOW - 10)),
            vec![pod("web-0", false, true), terminating("web-1")],
            Some(2),
            Step::Wait,
        ),
        (
            "the replacement is Ready: the next one",
            ONE,
            Some(evicting(1, NOW - 10)),
            vec![pod("web-0", false, true), pod("web-1", true, true)],
            Some(2),
            evict(&["web-0"]),
        ),
        (
            "all current and Ready: done",
            ONE,
            Some(evicting(2, NOW - 10)),
            vec![pod("web-0", true, true), pod("web-1", true, true)],
            Some(2),
            Step::Done { progress: Some(done(evicting(2, NOW - 10))) },
        ),
        (
            "nothing stale, nothing recorded: done, nothing to write",
            ONE,
            None,
            vec![pod("x", true, true)],
            None,
            Step::Done { progress: None },
        ),
        (
            "already recorded done",
            ONE,
            Some(done(evicting(2, NOW - 10))),
            vec![pod("web-0", true, true)],
            Some(1),
            Step::Done { progress: None },
        ),
        (
            "a replacement not Ready past the timeout: stop",
            ONE,
            Some(evicting(1, NOW - 61)),
            vec![pod("web-0", false, true), pod("web-1", true, false)],
            Some(2),
            Step::Stop { progress: stopped(evicting(1, NOW - 61)), waited: Duration::from_secs(61) },
        ),
        (
            "stopped for these markers: nothing more",
            ONE,
            Some(stopped(evicting(1, NOW - 500))),
            vec![pod("web-0", false, true), pod("web-1", true, true)],
            Some(2),
            Step::Stopped,
        ),
        (
            "stopped for other markers: a new restart",
            ONE,
            Some(Progress { target: "old".into(), ..stopped(evicting(1, NOW - 500)) }),
            vec![pod("web-0", false, true), pod("web-1", false, true)],
            Some(2),
            evict(&["web-1"]),
        ),
        (
            "unavailable before any eviction (not ours): wait, no timeout",
            ONE,
            None,
            vec![pod("web-0", false, true), pod("web-1", false, false)],
            Some(2),
            Step::Wait,
        ),
        (
            "no desired count known: the pods present count",
            ONE,
            None,
            vec![pod("p-a", false, true), pod("p-b", true, true)],
            None,
            evict(&["p-a"]),
        ),
    ];
    for (case, policy, recorded, pods, desired, want) in cases {
        let target =
            recorded.as_ref().filter(|p| p.target != "old").map_or("t", |p| p.target.as_str()).to_owned();
        assert_eq!(next_step(policy, recorded.as_ref(), &target, &pods, desired, NOW), want, "{case}");
    }
}

#[test]
fn progress_counts_the_evictions_of_one_restart_and_survives_its_annotation() {
    let first = Progress::after_evictions(None, "t", 1, NOW);
    assert_eq!((first.started_at, first.last_eviction_at, first.evicted), (NOW, NOW, 1));
    let second = Progress::after_evictions(Some(&first), "t", 2, NOW + 30);
    assert_eq!((second.started_at, second.last_eviction_at, second.evicted), (NOW, NOW + 30, 3));
    let other = Progress::after_evictions(Some(&second), "u", 1, NOW + 60);
    assert_eq!((other.target.as_str(), other.started_at, other.evicted), ("u", NOW + 60, 1));
    let stored = annotations(&[(PROGRESS, &second.to_annotation())]);
    assert_eq!(Progress::read(Some(&stored)), Some(second));
    assert_eq!(Progress::read(Some(&annotations(&[(PROGRESS, "garbage")]))), None);
}
