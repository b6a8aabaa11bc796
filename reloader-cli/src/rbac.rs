//! The RBAC this run needs, checked beside the watches' first lists (docs/behaviour.md, "Missing
//! RBAC"): one SelfSubjectRulesReview per namespace, and a SelfSubjectAccessReview only for what
//! the rules do not list. Every missing permission is logged once, as the rule to add; a missing
//! read (what the watches need to see changes) keeps `/readyz` failing until a re-check finds it
//! granted. A missing permission never stops the process: the watches back off and retry, and
//! the writes fail one by one with the API server's reason.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, ResourceRule, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    SelfSubjectRulesReview, SelfSubjectRulesReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use reloader_core::model::WorkloadKind;
use reloader_core::options::{IgnoredResources, NamespaceScope, Options};
use tracing::{debug, error, info, warn};

use crate::kinds::{EnabledKinds, KindInfo};
use crate::observe::http::Health;

/// How often the missing reads are checked again.
const RECHECK_PERIOD: Duration = Duration::from_secs(10);

/// One verb on one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Permission {
    pub(crate) group: &'static str,
    pub(crate) resource: &'static str,
    pub(crate) verb: &'static str,
}

/// What a permission is for: without a read reloader cannot see changes (not ready); without a
/// write the reloads that need it fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    Read,
    Write,
}

/// Where a permission is needed: all namespaces, or each of these.
pub(crate) type Namespaces = Vec<Option<String>>;

/// A permission this run needs, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Need {
    pub(crate) permission: Permission,
    pub(crate) purpose: Purpose,
    pub(crate) namespaces: Namespaces,
}

/// Whether the API server allows something to the identity reloader runs as.
#[async_trait]
pub(crate) trait AccessReview: Send + Sync {
    /// `namespace` `None`: in all namespaces (or a cluster-scoped resource).
    async fn allows(&self, permission: Permission, namespace: Option<&str>) -> Result<bool, kube::Error>;
}

/// SelfSubjectAccessReviews on the API server (every authenticated identity may create them).
pub(crate) struct KubeAccessReview(pub(crate) Client);

#[async_trait]
impl AccessReview for KubeAccessReview {
    async fn allows(&self, permission: Permission, namespace: Option<&str>) -> Result<bool, kube::Error> {
        // `pods/eviction`: a subresource, as RBAC rules name it.
        let (resource, subresource) = match permission.resource.split_once('/') {
            Some((resource, subresource)) => (resource, Some(subresource.to_owned())),
            None => (permission.resource, None),
        };
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    group: Some(permission.group.to_owned()),
                    resource: Some(resource.to_owned()),
                    subresource,
                    verb: Some(permission.verb.to_owned()),
                    namespace: namespace.map(str::to_owned),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let api: Api<SelfSubjectAccessReview> = Api::all(self.0.clone());
        let answer = api.create(&PostParams::default(), &review).await?;
        Ok(answer.status.is_some_and(|status| status.allowed))
    }
}

/// The rules RBAC lists for the identity reloader runs as, in one namespace.
#[async_trait]
pub(crate) trait RulesReview: Send + Sync {
    async fn rules(&self, namespace: &str) -> Result<Vec<ResourceRule>, kube::Error>;
}

/// SelfSubjectRulesReviews on the API server (every authenticated identity may create them).
pub(crate) struct KubeRulesReview(pub(crate) Client);

#[async_trait]
impl RulesReview for KubeRulesReview {
    async fn rules(&self, namespace: &str) -> Result<Vec<ResourceRule>, kube::Error> {
        let review = SelfSubjectRulesReview {
            spec: SelfSubjectRulesReviewSpec { namespace: Some(namespace.to_owned()) },
            ..SelfSubjectRulesReview::default()
        };
        let api: Api<SelfSubjectRulesReview> = Api::all(self.0.clone());
        let answer = api.create(&PostParams::default(), &review).await?;
        Ok(answer.status.map(|status| status.resource_rules).unwrap_or_default())
    }
}

/// Where the rules granted in all namespaces are read: RBAC lists a namespace's RoleBindings'
/// rules beside the ClusterRoleBindings', and this name is not a DNS label, so no namespace (and
/// no RoleBinding) can ever be there. A review of an empty namespace is refused.
const NO_NAMESPACE: &str = "-";

/// Rules first, one review per namespace, then a SelfSubjectAccessReview for each permission the
/// rules do not list: only a listed rule is taken as an answer, because a rules review may be
/// incomplete (another authorizer beside RBAC) and the access review is exact. With RBAC that
/// grants what the run needs, the whole check is one request per namespace.
pub(crate) struct RulesFirst<R, A> {
    rules: R,
    access: A,
    /// Per namespace, read once: the re-checks only ask what the rules did not list.
    listed: tokio::sync::Mutex<HashMap<String, Vec<ResourceRule>>>,
}

impl<R, A> RulesFirst<R, A> {
    pub(crate) fn new(rules: R, access: A) -> Self {
        RulesFirst { rules, access, listed: Default::default() }
    }
}

impl<R: RulesReview, A> RulesFirst<R, A> {
    async fn listed_as_granted(&self, permission: Permission, namespace: &str) -> bool {
        let mut listed = self.listed.lock().await;
        if !listed.contains_key(namespace) {
            let rules = self.rules.rules(namespace).await.unwrap_or_else(|e| {
                // Not a problem of its own: every permission is then asked one by one.
                debug!(error = %e, namespace, "could not list the RBAC rules; asking per permission");
                Vec::new()
            });
            listed.insert(namespace.to_owned(), rules);
        }
        listed[namespace].iter().any(|rule| grants(rule, permission))
    }
}

#[async_trait]
impl<R: RulesReview, A: AccessReview> AccessReview for RulesFirst<R, A> {
    async fn allows(&self, permission: Permission, namespace: Option<&str>) -> Result<bool, kube::Error> {
        if self.listed_as_granted(permission, namespace.unwrap_or(NO_NAMESPACE)).await {
            return Ok(true);
        }
        self.access.allows(permission, namespace).await
    }
}

/// Whether a listed rule grants a permission on every object of the resource. A rule limited to
/// some names does not: the watches list every object and the writes go to any.
fn grants(rule: &ResourceRule, permission: Permission) -> bool {
    let covers = |values: &[String], wanted: &str| values.iter().any(|v| v == "*" || v == wanted);
    rule.resource_names.as_ref().is_none_or(Vec::is_empty)
        && covers(&rule.verbs, permission.verb)
        && covers(rule.api_groups.as_deref().unwrap_or_default(), permission.group)
        && covers(rule.resources.as_deref().unwrap_or_default(), permission.resource)
}

/// The namespaces the watches cover.
pub(crate) fn watched_namespaces(options: &Options) -> Namespaces {
    match &options.namespace_scope {
        NamespaceScope::All { .. } => vec![None],
        NamespaceScope::Only(list) => list.iter().cloned().map(Some).collect(),
    }
}

/// Verbs on workloads that only reading needs (`get` is read fresh just before a write).
fn purpose_of_workload_verb(verb: &str) -> Purpose {
    if matches!(verb, "list" | "watch") { Purpose::Read } else { Purpose::Write }
}

/// Webhook mode and dry runs never write a workload.
pub(crate) fn writes_workloads(options: &Options) -> bool {
    options.webhook_url.is_none() && !options.dry_run
}

/// Every permission the code uses in this configuration (the watches' list/watch, the writes of
/// each enabled kind, Events, the Lease), one entry per verb.
pub(crate) fn required(options: &Options, kinds: &EnabledKinds, csi: bool) -> Vec<Need> {
    let watched = watched_namespaces(options);
    let mut needs = Vec::new();
    let mut need = |group, resource, verb, purpose, namespaces: &Namespaces| {
        needs.push(Need {
            permission: Permission { group, resource, verb },
            purpose,
            namespaces: namespaces.clone(),
        });
    };
    let reads = ["list", "watch"];
    for (ignored, resource) in
        [(IgnoredResources::ConfigMaps, "configmaps"), (IgnoredResources::Secrets, "secrets")]
    {
        if options.ignored_resources != ignored {
            reads.iter().for_each(|verb| need("", resource, verb, Purpose::Read, &watched));
        }
    }
    if let NamespaceScope::All { selector: Some(_), .. } = &options.namespace_scope {
        reads.iter().for_each(|verb| need("", "namespaces", verb, Purpose::Read, &vec![None]));
    }
    if csi {
        for resource in ["secretproviderclasses", "secretproviderclasspodstatuses"] {
            reads
                .iter()
                .for_each(|verb| need("secrets-store.csi.x-k8s.io", resource, verb, Purpose::Read, &watched));
        }
    }
    let writes = writes_workloads(options);
    for kind in kinds.iter() {
        let info: &KindInfo = &crate::kinds::info(kind);
        for verb in info.verbs {
            let purpose = purpose_of_workload_verb(verb);
            if purpose == Purpose::Read || writes {
                need(info.group, info.plural, verb, purpose, &watched);
            }
        }
    }
    // A CronJob reloads by creating a Job, even when Jobs themselves are not watched.
    if writes && kinds.contains(WorkloadKind::CronJob) && !kinds.contains(WorkloadKind::Job) {
        need("batch", "jobs", "create", Purpose::Write, &watched);
    }
    // Restarts by eviction (docs/beyond-stakater.md §13): each opted-in workload's pods are
    // listed, and evicted. Pods as reload targets (§14) are watched (their kind's verbs above),
    // and evicted.
    if writes && options.restart_by_eviction && !options.reload_pods {
        need("", "pods", "list", Purpose::Write, &watched);
    }
    if writes && (options.restart_by_eviction || options.reload_pods) {
        need("", "pods/eviction", "create", Purpose::Write, &watched);
    }
    // Core/v1 Events, as Stakater's recorder writes them: created, then patched when repeated.
    for verb in ["create", "patch"] {
        need("", "events", verb, Purpose::Write, &watched);
    }
    if let Some(election) = &options.leader_election {
        let lease_namespace = vec![Some(election.namespace.clone())];
        for verb in ["get", "create", "update"] {
            need("coordination.k8s.io", "leases", verb, Purpose::Write, &lease_namespace);
        }
    }
    needs
}

/// The needs the API server denies, each narrowed to the namespaces where it is denied. When a
/// review fails, that is logged once and the rest counts as allowed: the watches will say what
/// is wrong.
pub(crate) async fn denied(review: &dyn AccessReview, needs: &[Need]) -> Vec<Need> {
    let mut denied = Vec::new();
    for need in needs {
        let mut namespaces = Vec::new();
        for namespace in &need.namespaces {
            match review.allows(need.permission, namespace.as_deref()).await {
                Ok(true) => {}
                Ok(false) => namespaces.push(namespace.clone()),
                Err(e) => {
                    // Said once: the remaining checks would fail the same way.
                    warn!(error = %e, "could not check RBAC with a SelfSubjectAccessReview; not checking further");
                    return denied;
                }
            }
        }
        if !namespaces.is_empty() {
            denied.push(Need { namespaces, ..need.clone() });
        }
    }
    denied
}

/// The one log line for a missing permission: what is denied, where, and the rule to add.
pub(crate) fn explanation(need: &Need) -> String {
    let Permission { group, resource, verb } = need.permission;
    let (place, role) = match need.namespaces.as_slice() {
        [None] => ("in all namespaces".to_owned(), "its ClusterRole"),
        namespaces => {
            let names: Vec<&str> = namespaces.iter().flatten().map(String::as_str).collect();
            (format!("in namespace {}", names.join(", ")), "its Role there (or its ClusterRole)")
        }
    };
    let consequence = match need.purpose {
        Purpose::Read => "until then reloader cannot see changes and is not ready",
        Purpose::Write => "until then the reloads that need it fail",
    };
    format!(
        "RBAC: reloader may not {verb} {resource} (apiGroup \"{group}\") {place}; add the rule \
         {{apiGroups: [\"{group}\"], resources: [\"{resource}\"], verbs: [\"{verb}\"]}} to {role}, \
         or install reloader's chart, whose RBAC is exactly what reloader needs; {consequence}"
    )
}

/// Logs each denied need once. Returns the denied reads.
pub(crate) fn explain(denied: Vec<Need>) -> Vec<Need> {
    let mut reads = Vec::new();
    for need in denied {
        let Permission { group, resource, verb } = need.permission;
        match need.purpose {
            Purpose::Read => {
                error!(api_group = group, resource, verb, "{}", explanation(&need));
                reads.push(need);
            }
            Purpose::Write => warn!(api_group = group, resource, verb, "{}", explanation(&need)),
        }
    }
    reads
}

/// Checks the needs, explains what is missing and holds readiness back while a read is missing
/// (and until the check is done: nothing is granted before it is known). Then re-checks the
/// missing reads until they are granted, and idles.
pub(crate) async fn check(review: Arc<dyn AccessReview>, needs: Vec<Need>, health: Health) {
    let mut missing = explain(denied(review.as_ref(), &needs).await);
    health.set_reads_granted(missing.is_empty());
    while !missing.is_empty() {
        tokio::time::sleep(RECHECK_PERIOD).await;
        missing = denied(review.as_ref(), &missing).await;
        if missing.is_empty() {
            info!("RBAC: every permission reloader reads with is granted now");
            health.set_reads_granted(true);
        }
    }
    std::future::pending::<()>().await;
}

/// For a kind that is only auto-detected: the verbs RBAC denies on it somewhere in `namespaces`
/// (empty: the kind may be used). Without `writes`, only what watching it needs is checked.
pub(crate) async fn denied_verbs(
    review: &dyn AccessReview,
    info: &KindInfo,
    namespaces: &Namespaces,
    writes: bool,
) -> Vec<&'static str> {
    let needs: Vec<Need> = info
        .verbs
        .iter()
        .map(|verb| Need {
            permission: Permission { group: info.group, resource: info.plural, verb },
            purpose: purpose_of_workload_verb(verb),
            namespaces: namespaces.clone(),
        })
        .filter(|need| writes || need.purpose == Purpose::Read)
        .collect();
    denied(review, &needs).await.into_iter().map(|need| need.permission.verb).collect()
}

#[cfg(test)]
mod tests;
