//! What the run needs, checked against a scripted API server: Stakater's own RBAC, our chart's,
//! webhook mode, namespaced scope, HA.

use std::collections::BTreeSet;
use std::sync::Mutex;

use reloader_core::model::WorkloadKind;

use super::*;
use crate::args::testing::options;

/// An API server that allows exactly `rules` (group, resources, verbs), in every namespace, and
/// records what it was asked.
struct Rbac {
    rules: Vec<(&'static str, Vec<&'static str>, Vec<&'static str>)>,
    asked: Mutex<Vec<(Permission, Option<String>)>>,
}

impl Rbac {
    fn new(rules: &[(&'static str, &[&'static str], &[&'static str])]) -> Self {
        let rules = rules.iter().map(|(g, r, v)| (*g, r.to_vec(), v.to_vec())).collect();
        Rbac { rules, asked: Mutex::new(Vec::new()) }
    }
}

#[async_trait]
impl AccessReview for Rbac {
    async fn allows(&self, p: Permission, namespace: Option<&str>) -> Result<bool, kube::Error> {
        self.asked.lock().unwrap().push((p, namespace.map(String::from)));
        Ok(self.rules.iter().any(|(g, r, v)| *g == p.group && r.contains(&p.resource) && v.contains(&p.verb)))
    }
}

/// Stakater v1.4.21's static ClusterRole (deployments/kubernetes/reloader.yaml), rule by rule.
fn stakater_static_rbac() -> Rbac {
    Rbac::new(&[
        ("", &["secrets", "configmaps"], &["list", "get", "watch"]),
        ("apps", &["deployments", "daemonsets", "statefulsets"], &["list", "get", "update", "patch"]),
        ("extensions", &["deployments", "daemonsets"], &["list", "get", "update", "patch"]),
        ("batch", &["cronjobs"], &["list", "get"]),
        ("batch", &["jobs"], &["create", "delete", "list", "get"]),
        ("", &["events"], &["create", "patch"]),
    ])
}

const BUILT_IN: [WorkloadKind; 5] = [
    WorkloadKind::Deployment,
    WorkloadKind::DaemonSet,
    WorkloadKind::StatefulSet,
    WorkloadKind::CronJob,
    WorkloadKind::Job,
];

fn summary(needs: &[Need]) -> BTreeSet<String> {
    needs
        .iter()
        .map(|n| {
            format!("{:?} {}/{} {}", n.purpose, n.permission.group, n.permission.resource, n.permission.verb)
        })
        .collect()
}

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
}

/// Polls `check` once: the fake reviews answer at once, so its first pass is done, and what is
/// left (the re-checks) is dropped.
fn first_pass(check: impl Future<Output = ()>) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    runtime.block_on(async {
        assert!(
            futures::poll!(std::pin::pin!(check)).is_pending(),
            "the check idles or re-checks; it never ends"
        );
    });
}

#[test]
fn stakaters_rbac_lacks_watch_on_every_workload_kind() {
    let needs = required(&options(&[]), &EnabledKinds::of(&BUILT_IN), false);
    let denied = block_on(denied(&stakater_static_rbac(), &needs));
    let expected: BTreeSet<String> = [
        "Read apps/deployments watch",
        "Read apps/daemonsets watch",
        "Read apps/statefulsets watch",
        "Read batch/cronjobs watch",
        "Read batch/jobs watch",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(summary(&denied), expected);
    assert!(denied.iter().all(|n| n.namespaces == [None]), "all namespaces: {denied:?}");
}

#[test]
fn what_each_configuration_needs() {
    /// Flags, kinds, CSI served, needs that must be there, needs that must not.
    type Case<'a> = (&'a [&'a str], &'a [WorkloadKind], bool, &'a [&'a str], &'a [&'a str]);
    let cases: &[Case] = &[
        (
            &[],
            &BUILT_IN,
            false,
            &[
                "Read /configmaps watch",
                "Write apps/deployments patch",
                "Write batch/jobs delete",
                "Write /events create",
                "Write /events patch",
            ],
            &["Read /namespaces list", "Write coordination.k8s.io/leases update"],
        ),
        (
            &["--resources-to-ignore=configMaps"],
            &BUILT_IN,
            false,
            &["Read /secrets list"],
            &["Read /configmaps list"],
        ),
        (&["--namespace-selector=team=a"], &BUILT_IN, false, &["Read /namespaces watch"], &[]),
        (
            &["--webhook-url=http://127.0.0.1:1/hook"],
            &BUILT_IN,
            false,
            &["Read apps/deployments watch"],
            &["Write apps/deployments patch", "Write batch/jobs create"],
        ),
        (
            &["--enable-ha=true", "--pod-name=r-0", "--pod-namespace=ops"],
            &BUILT_IN,
            false,
            &["Write coordination.k8s.io/leases update"],
            &[],
        ),
        (&[], &[WorkloadKind::CronJob], false, &["Write batch/jobs create"], &["Read batch/jobs watch"]),
        (
            &[],
            &BUILT_IN,
            true,
            &[
                "Read secrets-store.csi.x-k8s.io/secretproviderclasses watch",
                "Read secrets-store.csi.x-k8s.io/secretproviderclasspodstatuses list",
            ],
            &[],
        ),
    ];
    for (flags, kinds, csi, present, absent) in cases {
        let needs = summary(&required(&options(flags), &EnabledKinds::of(kinds), *csi));
        for p in *present {
            assert!(needs.contains(*p), "{flags:?}: {p} missing from {needs:?}");
        }
        for a in *absent {
            assert!(!needs.contains(*a), "{flags:?}: {a} should not be needed");
        }
    }
}

#[test]
fn namespaced_scope_is_checked_per_namespace_and_explained_as_a_role() {
    let options = options(&["--namespaces=shop,web"]);
    let needs = required(&options, &EnabledKinds::of(&[WorkloadKind::Deployment]), false);
    let rbac = stakater_static_rbac();
    let denied = block_on(denied(&rbac, &needs));
    let watch = denied.iter().find(|n| n.permission.verb == "watch").expect("watch is denied");
    assert_eq!(watch.namespaces, [Some("shop".to_owned()), Some("web".to_owned())]);
    assert_eq!(
        explanation(watch),
        "RBAC: reloader may not watch deployments (apiGroup \"apps\") in namespace shop, web; add the rule \
         {apiGroups: [\"apps\"], resources: [\"deployments\"], verbs: [\"watch\"]} to its Role there (or its \
         ClusterRole), or install reloader's chart, whose RBAC is exactly what reloader needs; until then \
         reloader cannot see changes and is not ready"
    );
    let asked = rbac.asked.lock().unwrap();
    assert!(asked.iter().all(|(_, ns)| ns.is_some()), "never asked cluster-wide: {asked:?}");
}

#[test]
fn a_write_is_explained_without_holding_readiness_back() {
    let needs = required(&options(&[]), &EnabledKinds::of(&BUILT_IN), false);
    let health = Health::new();
    let rbac: Arc<dyn AccessReview> = Arc::new(Rbac::new(&[
        ("", &["secrets", "configmaps"], &["list", "watch"]),
        ("apps", &["deployments", "daemonsets", "statefulsets"], &["list", "watch"]),
        ("batch", &["cronjobs", "jobs"], &["list", "watch"]),
    ]));
    health.set_ready(true);
    health.set_reads_granted(false);
    first_pass(check(rbac, needs.clone(), health.clone()));
    assert!(health.is_ready(), "only writes are missing");

    let stakater: Arc<dyn AccessReview> = Arc::new(stakater_static_rbac());
    first_pass(check(stakater, needs, health.clone()));
    assert!(!health.is_ready(), "a missing watch holds readiness back");
}

#[test]
fn an_auto_detected_kind_reports_the_verbs_rbac_denies() {
    let info = crate::kinds::info(WorkloadKind::DeploymentConfig);
    let none = Rbac::new(&[]);
    assert_eq!(block_on(denied_verbs(&none, &info, &vec![None], true)), info.verbs.to_vec());
    assert_eq!(
        block_on(denied_verbs(&none, &info, &vec![None], false)),
        ["list", "watch"],
        "webhook mode only watches"
    );
    let stakater_openshift =
        Rbac::new(&[("apps.openshift.io", &["deploymentconfigs"], &["list", "get", "update", "patch"])]);
    assert_eq!(block_on(denied_verbs(&stakater_openshift, &info, &vec![None], true)), ["watch"]);
    let full = Rbac::new(&[("apps.openshift.io", &["deploymentconfigs"], info.verbs)]);
    assert!(block_on(denied_verbs(&full, &info, &vec![None], true)).is_empty());
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str], names: &[&str]) -> ResourceRule {
    let strings = |values: &[&str]| values.iter().map(|v| v.to_string()).collect::<Vec<_>>();
    ResourceRule {
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        verbs: strings(verbs),
        resource_names: (!names.is_empty()).then(|| strings(names)),
    }
}

#[test]
fn a_listed_rule_grants_every_object_of_its_resources() {
    let watch_deployments = Permission { group: "apps", resource: "deployments", verb: "watch" };
    // Rule, and whether it grants watch on apps/deployments.
    let cases = [
        (rule(&["apps"], &["deployments"], &["watch"], &[]), true),
        (rule(&["apps"], &["deployments", "daemonsets"], &["list", "watch"], &[]), true),
        (rule(&["*"], &["*"], &["*"], &[]), true),
        (rule(&["apps"], &["*"], &["watch"], &[]), true),
        (rule(&["apps"], &["deployments"], &["*"], &[]), true),
        (rule(&["apps"], &["deployments"], &["list"], &[]), false),
        (rule(&[""], &["deployments"], &["watch"], &[]), false),
        (rule(&["extensions"], &["deployments"], &["watch"], &[]), false),
        (rule(&["apps"], &["deployments/scale"], &["watch"], &[]), false),
        (rule(&["apps"], &["deployments"], &["watch"], &["web"]), false),
        (ResourceRule { verbs: vec!["watch".into()], ..ResourceRule::default() }, false),
    ];
    for (rule, granted) in cases {
        assert_eq!(grants(&rule, watch_deployments), granted, "{rule:?}");
    }
}

/// Rules reviews that list the same rules in every namespace (or fail), and record where they
/// were asked.
struct Listed {
    rules: Option<Vec<ResourceRule>>,
    asked: Mutex<Vec<String>>,
}

impl Listed {
    fn of(rules: Vec<ResourceRule>) -> Self {
        Listed { rules: Some(rules), asked: Mutex::new(Vec::new()) }
    }

    fn failing() -> Self {
        Listed { rules: None, asked: Mutex::new(Vec::new()) }
    }
}

#[async_trait]
impl RulesReview for Listed {
    async fn rules(&self, namespace: &str) -> Result<Vec<ResourceRule>, kube::Error> {
        self.asked.lock().unwrap().push(namespace.to_owned());
        self.rules.clone().ok_or_else(|| {
            kube::Error::Api(Box::new(
                kube::core::Status::failure("no namespace on request", "BadRequest").with_code(400),
            ))
        })
    }
}

/// Stakater's static ClusterRole as a rules review lists it.
fn stakater_static_rules() -> Vec<ResourceRule> {
    stakater_static_rbac()
        .rules
        .iter()
        .map(|(group, resources, verbs)| rule(&[group], resources, verbs, &[]))
        .collect()
}

#[test]
fn rules_granting_everything_are_the_whole_check() {
    let options = options(&[]);
    let needs = required(&options, &EnabledKinds::of(&BUILT_IN), false);
    let everything = vec![rule(&["*"], &["*"], &["*"], &[])];
    let review = RulesFirst::new(Listed::of(everything), Rbac::new(&[]));
    assert!(block_on(denied(&review, &needs)).is_empty());
    assert_eq!(*review.rules.asked.lock().unwrap(), [NO_NAMESPACE], "one rules review, cluster-wide");
    assert!(review.access.asked.lock().unwrap().is_empty(), "no access review");
}

#[test]
fn what_the_rules_do_not_list_is_asked_one_by_one() {
    let needs = required(&options(&[]), &EnabledKinds::of(&BUILT_IN), false);
    let expected = summary(&block_on(denied(&stakater_static_rbac(), &needs)));
    // Listed rules that miss watch, as the access reviews do; lists that miss everything
    // (an authorizer beside RBAC); a rules review that fails. Same answer each time.
    for rules in [Listed::of(stakater_static_rules()), Listed::of(Vec::new()), Listed::failing()] {
        let listed_any = rules.rules.as_ref().is_some_and(|r| !r.is_empty());
        let review = RulesFirst::new(rules, stakater_static_rbac());
        let denied = block_on(denied(&review, &needs));
        assert_eq!(summary(&denied), expected);
        assert_eq!(review.rules.asked.lock().unwrap().len(), 1, "the rules are read once");
        let access_reviews = review.access.asked.lock().unwrap().len();
        if listed_any {
            assert_eq!(access_reviews, denied.len(), "only what the rules did not list");
        } else {
            assert_eq!(access_reviews, needs.len(), "every permission");
        }
    }
}

#[test]
fn namespaced_scope_reads_the_rules_of_each_namespace() {
    let options = options(&["--namespaces=shop,web"]);
    let needs = required(&options, &EnabledKinds::of(&[WorkloadKind::Deployment]), false);
    let review = RulesFirst::new(Listed::of(stakater_static_rules()), stakater_static_rbac());
    let denied = block_on(denied(&review, &needs));
    let watch = denied.iter().find(|n| n.permission.verb == "watch").expect("watch is denied");
    assert_eq!(watch.namespaces, [Some("shop".to_owned()), Some("web".to_owned())]);
    assert_eq!(*review.rules.asked.lock().unwrap(), ["shop", "web"]);
    let asked = review.access.asked.lock().unwrap();
    assert_eq!(asked.len(), 2, "watch, in each namespace: {asked:?}");
}
