//! The identity every benchmarked controller runs as, and the API requests it makes.
//!
//! kube-apiserver's `apiserver_request_total` has no label for the caller, so a quiet-window delta
//! would also count kube-controller-manager and the benchmark itself. API Priority and Fairness
//! does know the caller: each FlowSchema below matches only the benchmark's ServiceAccount and one
//! class of request, so `apiserver_flowcontrol_dispatched_requests_total{flow_schema=..}` counts
//! exactly that controller's requests of that class, whichever controller it is.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::flowcontrol::v1::FlowSchema;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, PostParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::BenchError;
use reloader_harness::ControlPlane;
use reloader_harness::KubeconfigFile;
use reloader_harness::{NotYet, wait_until};

/// Namespace of the benchmark's ServiceAccount, meta-info ConfigMap and leader Lease.
pub const NAMESPACE: &str = "reloader-bench";
/// The ServiceAccount both controllers run as.
pub const ACCOUNT: &str = "controller";
const FLOW_PREFIX: &str = "reloader-bench-";
/// A priority level of the default APF configuration that queues little on an idle plane.
const PRIORITY_LEVEL: &str = "workload-high";

/// A class of API request, one FlowSchema each, listed by matching precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestClass {
    /// PATCH or UPDATE of a Deployment, StatefulSet or DaemonSet: a reload.
    WorkloadWrite,
    List,
    Watch,
    Get,
    /// Any other write: Events, the leader Lease, the meta-info ConfigMap.
    OtherWrite,
    /// Anything else, non-resource URLs included.
    Other,
}

impl RequestClass {
    pub const ALL: [RequestClass; 6] = [
        RequestClass::WorkloadWrite,
        RequestClass::List,
        RequestClass::Watch,
        RequestClass::Get,
        RequestClass::OtherWrite,
        RequestClass::Other,
    ];

    fn slug(self) -> &'static str {
        match self {
            RequestClass::WorkloadWrite => "workload-write",
            RequestClass::List => "list",
            RequestClass::Watch => "watch",
            RequestClass::Get => "get",
            RequestClass::OtherWrite => "other-write",
            RequestClass::Other => "other",
        }
    }

    fn flow_schema(self) -> String {
        format!("{FLOW_PREFIX}{}", self.slug())
    }

    /// (apiGroups, resources, verbs) of its one resource rule.
    fn resource_rule(self) -> (Value, Value, Value) {
        let any = json!(["*"]);
        match self {
            RequestClass::WorkloadWrite => (
                json!(["apps"]),
                json!(["deployments", "statefulsets", "daemonsets"]),
                json!(["patch", "update"]),
            ),
            RequestClass::List => (any.clone(), any, json!(["list"])),
            RequestClass::Watch => (any.clone(), any, json!(["watch"])),
            RequestClass::Get => (any.clone(), any, json!(["get"])),
            RequestClass::OtherWrite => {
                (any.clone(), any, json!(["create", "update", "patch", "delete", "deletecollection"]))
            }
            RequestClass::Other => (any.clone(), any.clone(), any),
        }
    }

    fn flow_schema_object(self, precedence: i32) -> FlowSchema {
        let (groups, resources, verbs) = self.resource_rule();
        let mut rule = json!({
            "subjects": [{ "kind": "ServiceAccount", "serviceAccount": { "namespace": NAMESPACE, "name": ACCOUNT } }],
            "resourceRules": [{
                "apiGroups": groups, "resources": resources, "verbs": verbs,
                "clusterScope": true, "namespaces": ["*"],
            }],
        });
        if self == RequestClass::Other {
            rule["nonResourceRules"] = json!([{ "verbs": ["*"], "nonResourceURLs": ["*"] }]);
        }
        from_json(json!({
            "metadata": { "name": self.flow_schema() },
            "spec": {
                "matchingPrecedence": precedence,
                "priorityLevelConfiguration": { "name": PRIORITY_LEVEL },
                "distinguisherMethod": { "type": "ByUser" },
                "rules": [rule],
            },
        }))
    }
}

/// kube-apiserver's `/metrics`, as text.
pub async fn apiserver_metrics(client: &Client) -> Result<String, BenchError> {
    let request = axum::http::Request::get("/metrics").body(Vec::new()).map_err(BenchError::measure)?;
    Ok(client.request_text(request).await?)
}

/// Requests counted per class since the API server started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RequestCounts(pub BTreeMap<RequestClass, u64>);

impl RequestCounts {
    /// Reads kube-apiserver's `/metrics`.
    pub async fn read(client: &Client) -> Result<Self, BenchError> {
        Ok(Self::parse(&apiserver_metrics(client).await?))
    }

    /// The counts in a `/metrics` text.
    pub fn parse(metrics: &str) -> Self {
        let mut counts = BTreeMap::new();
        for line in
            metrics.lines().filter(|l| l.starts_with("apiserver_flowcontrol_dispatched_requests_total{"))
        {
            let Some((labels, value)) = line.rsplit_once(' ') else { continue };
            let Some(class) = RequestClass::ALL
                .into_iter()
                .find(|class| labels.contains(&format!("flow_schema=\"{}\"", class.flow_schema())))
            else {
                continue;
            };
            *counts.entry(class).or_default() += value.trim().parse::<f64>().unwrap_or_default() as u64;
        }
        Self(counts)
    }

    pub fn get(&self, class: RequestClass) -> u64 {
        self.0.get(&class).copied().unwrap_or_default()
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &RequestCounts) -> RequestCounts {
        Self(RequestClass::ALL.into_iter().map(|c| (c, self.get(c).saturating_sub(earlier.get(c)))).collect())
    }
}

/// Creates the namespace, the ServiceAccount (bound to cluster-admin, as both controllers need to
/// read and patch everywhere) and the FlowSchemas, then proves that a request made as the account
/// is counted in its class.
pub async fn set_up(plane: &ControlPlane) -> Result<(), BenchError> {
    let client = plane.client();
    create_or_keep(
        &Api::<Namespace>::all(client.clone()),
        from_json(json!({ "metadata": { "name": NAMESPACE } })),
    )
    .await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    create_or_keep(&accounts, from_json(json!({ "metadata": { "name": ACCOUNT } }))).await?;
    let binding: ClusterRoleBinding = from_json(json!({
        "metadata": { "name": format!("{FLOW_PREFIX}{ACCOUNT}") },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" },
        "subjects": [{ "kind": "ServiceAccount", "namespace": NAMESPACE, "name": ACCOUNT }],
    }));
    create_or_keep(&Api::<ClusterRoleBinding>::all(client.clone()), binding).await?;
    let schemas: Api<FlowSchema> = Api::all(client.clone());
    for (i, class) in RequestClass::ALL.into_iter().enumerate() {
        create_or_keep(&schemas, class.flow_schema_object(500 + i as i32)).await?;
    }

    let account = plane.service_account_client(NAMESPACE, ACCOUNT).await?;
    let probe: Api<Namespace> = Api::all(account);
    wait_until(
        "a GET made as the benchmark's account to be counted by its FlowSchema",
        Duration::from_secs(60),
        || {
            let (client, probe) = (client.clone(), probe.clone());
            async move {
                let before = RequestCounts::read(&client).await.map_err(|e| NotYet(e.to_string()))?;
                probe.get(NAMESPACE).await?;
                let after = RequestCounts::read(&client).await.map_err(|e| NotYet(e.to_string()))?;
                let counted = after.since(&before).get(RequestClass::Get);
                if counted >= 1 { Ok(()) } else { Err(NotYet::because("the GET was not counted yet")) }
            }
        },
    )
    .await?;
    Ok(())
}

/// A kubeconfig for the benchmark's account with a fresh token (tokens expire after an hour).
pub async fn kubeconfig(plane: &ControlPlane) -> Result<KubeconfigFile, BenchError> {
    Ok(KubeconfigFile::for_service_account(plane, NAMESPACE, ACCOUNT).await?)
}

async fn create_or_keep<K>(api: &Api<K>, object: K) -> Result<(), BenchError>
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// Builds a typed object from JSON written in the benchmark itself (a mistake there is a bug).
pub fn from_json<K: DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("the benchmark's own manifests match their types")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_the_benchmarks_flow_schemas() {
        let metrics = "\
# HELP apiserver_flowcontrol_dispatched_requests_total x
apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"reloader-bench-list\",priority_level=\"workload-high\"} 4
apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"reloader-bench-workload-write\",priority_level=\"workload-high\"} 12
apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"service-accounts\",priority_level=\"workload-low\"} 99
";
        let counts = RequestCounts::parse(metrics);
        assert_eq!(counts.get(RequestClass::List), 4);
        assert_eq!(counts.get(RequestClass::WorkloadWrite), 12);
        assert_eq!(counts.get(RequestClass::Watch), 0);
        let later = RequestCounts::parse(&metrics.replace("} 4", "} 6"));
        assert_eq!(later.since(&counts).get(RequestClass::List), 2);
        assert_eq!(later.since(&counts).get(RequestClass::WorkloadWrite), 0);
    }
}
