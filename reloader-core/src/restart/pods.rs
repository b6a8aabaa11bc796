//! Pods as reload targets (`--reload-pods`, docs/beyond-stakater.md §14): for operators whose
//! pods have no workload reloader can write (a Strimzi PodSet, a database operator's pods), the
//! pods labelled [`super::POD_LABEL`] carry the reload annotations themselves, and a change they
//! reload for makes them due: each is evicted, so that its owner recreates it with the new data.
//!
//! [`sort_due`] sorts what one pass of the evictor found in a namespace: pods to forget (gone,
//! already on their way out, or with no owner to recreate them: never deleted) and, per
//! controller owner, the pods of that owner as [`super::next_step`] takes them, one restart per
//! owner (one pod at a time by default, each after the previous replacement is Ready).

use std::collections::{BTreeMap, BTreeSet};

use super::PodState;

/// A labelled pod as listed in the pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedPod {
    pub name: String,
    /// The `uid` of its controller owner (the owner reference with `controller: true`).
    pub owner: Option<String>,
    pub ready: bool,
    pub terminating: bool,
}

/// What a pass does with the due pods of one namespace.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DuePods {
    /// Due pods that are gone or terminating: nothing left to do for them.
    pub gone: Vec<String>,
    /// Due pods with no controller owner: evicting one would delete it for good, so it is only
    /// said (a Warning Event), then forgotten.
    pub ownerless: Vec<String>,
    /// Per owner `uid`: every listed pod of that owner (`current` is "not due"), for owners with
    /// a due pod or a restart under way (`under_way`).
    pub owners: BTreeMap<String, Vec<PodState>>,
}

/// Sorts the due pods of a namespace (`due`, by name) against its labelled pods (`listed`).
pub fn sort_due(due: &BTreeSet<String>, listed: &[ListedPod], under_way: &BTreeSet<String>) -> DuePods {
    let mut sorted = DuePods::default();
    let by_name: BTreeMap<&str, &ListedPod> = listed.iter().map(|pod| (pod.name.as_str(), pod)).collect();
    let mut owners: BTreeSet<&str> = under_way.iter().map(String::as_str).collect();
    for name in due {
        match by_name.get(name.as_str()) {
            None => sorted.gone.push(name.clone()),
            Some(pod) if pod.terminating => sorted.gone.push(name.clone()),
            Some(ListedPod { owner: None, .. }) => sorted.ownerless.push(name.clone()),
            Some(ListedPod { owner: Some(owner), .. }) => {
                owners.insert(owner);
            }
        }
    }
    for owner in owners {
        let pods = listed
            .iter()
            .filter(|pod| pod.owner.as_deref() == Some(owner))
            .map(|pod| PodState {
                name: pod.name.clone(),
                current: !due.contains(&pod.name),
                ready: pod.ready,
                terminating: pod.terminating,
            })
            .collect();
        sorted.owners.insert(owner.to_owned(), pods);
    }
    sorted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, owner: Option<&str>, ready: bool, terminating: bool) -> ListedPod {
        ListedPod { name: name.into(), owner: owner.map(Into::into), ready, terminating }
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn due_pods_are_sorted_by_what_can_be_done_for_them() {
        let listed = [
            pod("a-1", Some("rs-a"), true, false),
            pod("a-2", Some("rs-a"), true, false),
            pod("a-3", Some("rs-a"), false, false),
            pod("b-1", Some("rs-b"), true, true),
            pod("bare", None, true, false),
            pod("c-1", Some("rs-c"), true, false),
        ];
        struct Case {
            name: &'static str,
            due: &'static [&'static str],
            under_way: &'static [&'static str],
            gone: &'static [&'static str],
            ownerless: &'static [&'static str],
            owners: &'static [(&'static str, &'static [(&'static str, bool)])],
        }
        let cases = [
            Case {
                name: "one owner: its every pod, the due ones not current",
                due: &["a-1", "a-3"],
                under_way: &[],
                gone: &[],
                ownerless: &[],
                owners: &[("rs-a", &[("a-1", false), ("a-2", true), ("a-3", false)])],
            },
            Case {
                name: "gone and terminating pods are forgotten",
                due: &["b-1", "zz-9"],
                under_way: &[],
                gone: &["b-1", "zz-9"],
                ownerless: &[],
                owners: &[],
            },
            Case {
                name: "a pod without a controller owner is never grouped",
                due: &["bare", "c-1"],
                under_way: &[],
                gone: &[],
                ownerless: &["bare"],
                owners: &[("rs-c", &[("c-1", false)])],
            },
            Case {
                name: "a restart under way is looked at with no due pod left",
                due: &[],
                under_way: &["rs-a"],
                gone: &[],
                ownerless: &[],
                owners: &[("rs-a", &[("a-1", true), ("a-2", true), ("a-3", true)])],
            },
            Case {
                name: "an owner under way whose pods are all gone has none",
                due: &[],
                under_way: &["rs-z"],
                gone: &[],
                ownerless: &[],
                owners: &[("rs-z", &[])],
            },
        ];
        for case in cases {
            let sorted = sort_due(&names(case.due), &listed, &names(case.under_way));
            assert_eq!(
                sorted.gone,
                case.gone.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                "{}",
                case.name
            );
            assert_eq!(
                sorted.ownerless,
                case.ownerless.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                "{}",
                case.name
            );
            let owners: Vec<(String, Vec<(String, bool)>)> = sorted
                .owners
                .into_iter()
                .map(|(owner, pods)| (owner, pods.into_iter().map(|p| (p.name, p.current)).collect()))
                .collect();
            let expected: Vec<(String, Vec<(String, bool)>)> = case
                .owners
                .iter()
                .map(|(owner, pods)| {
                    (owner.to_string(), pods.iter().map(|(n, current)| (n.to_string(), *current)).collect())
                })
                .collect();
            assert_eq!(owners, expected, "{}", case.name);
        }
    }

    #[test]
    fn readiness_and_termination_reach_the_planner() {
        let listed = [pod("a-1", Some("rs-a"), false, false), pod("a-2", Some("rs-a"), true, true)];
        let sorted = sort_due(&names(&["a-1"]), &listed, &names(&["rs-a"]));
        let pods = &sorted.owners["rs-a"];
        assert_eq!(
            pods[0],
            PodState { name: "a-1".into(), current: false, ready: false, terminating: false }
        );
        assert_eq!(pods[1], PodState { name: "a-2".into(), current: true, ready: true, terminating: true });
    }
}
