//! What the API server serves and RBAC allows, read at start-up to decide which workload kinds
//! a run watches (OpenShift, Argo Rollouts) and whether the CSI integration runs.

use kube::Client;
use reloader_core::options::Options;
use tokio::sync::OnceCell;
use tracing::{info, warn};

use crate::kinds::{
    self, Availability, EnabledKinds, KindFlag, KindInfo, spc_pod_status_resource, spc_resource,
};
use crate::rbac::{self, AccessReview};

/// What the API server serves, for the start-up's detections (OpenShift, Argo Rollouts, CSI):
/// the group list is read once, when first needed, and shared by all of them.
pub(crate) struct ServedApis {
    client: Client,
    group_versions: OnceCell<Vec<String>>,
}

impl ServedApis {
    pub(crate) fn new(client: Client) -> Self {
        Self { client, group_versions: OnceCell::new() }
    }

    /// Whether the API server serves both CSI resources (the driver's CRDs are installed).
    pub(crate) async fn csi(&self) -> Result<bool, kube::Error> {
        let wanted = [spc_resource(), spc_pod_status_resource()];
        let served = self.resources(&wanted[0].api_version).await?;
        Ok(wanted.iter().all(|wanted| served.contains(&wanted.plural)))
    }

    async fn serves(&self, info: &KindInfo) -> Result<bool, kube::Error> {
        Ok(self.resources(&info.api_version()).await?.iter().any(|name| name == info.plural))
    }

    /// The resources the API server serves in `group_version` (none when it does not serve it).
    /// The group list comes first: asked for a group version it does not serve, kube-apiserver
    /// answers 404 with a plain-text body, which kube's client logs as a warning at every start.
    async fn resources(&self, group_version: &str) -> Result<Vec<String>, kube::Error> {
        let listed = self
            .group_versions
            .get_or_try_init(|| async {
                let groups = self.client.list_api_groups().await?;
                Ok::<_, kube::Error>(
                    groups.groups.into_iter().flat_map(|g| g.versions).map(|v| v.group_version).collect(),
                )
            })
            .await?;
        if !listed.iter().any(|v| v == group_version) {
            return Ok(Vec::new());
        }
        match self.client.list_api_group_resources(group_version).await {
            Ok(list) => Ok(list.resources.into_iter().map(|r| r.name).collect()),
            // Removed since the group list was read.
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }
}

/// The kinds this run watches: applies `--ignored-workload-types`, `--is-Argo-Rollouts` and
/// `--is-openshift` (empty: enabled when the API server serves apps.openshift.io/v1).
/// A kind switched on explicitly but not served stops start-up: watching it would only
/// retry 404s forever and never become ready, which hides the real problem. A kind only
/// detected is skipped, with one warning, when RBAC denies what reloader does with it.
pub(crate) async fn enabled_kinds(
    apis: &ServedApis,
    options: &Options,
    review: &dyn AccessReview,
) -> Result<EnabledKinds, DiscoveryError> {
    let mut kinds = Vec::new();
    for info in kinds::all() {
        let ignored = options.ignored_workloads.contains(&info.kind);
        let enabled = match info.availability {
            Availability::BuiltIn => !ignored,
            Availability::Flag(flag) => {
                !ignored && flag.value(options) == Some(true) && require(apis, flag, info).await?
            }
            // Resolved even when ignored: `--is-openshift=true` without the API is an error.
            Availability::FlagOrDetected(flag) => {
                let on = match flag.value(options) {
                    Some(true) => require(apis, flag, info).await?,
                    Some(false) => false,
                    None => {
                        let served = apis.serves(info).await?;
                        info!(served, "detected {} {}", info.api_version(), info.kind.as_str());
                        served && (ignored || permitted_when_detected(review, info, flag, options).await)
                    }
                };
                on && !ignored
            }
        };
        if enabled {
            kinds.push(info.kind);
        }
    }
    Ok(EnabledKinds::of(&kinds))
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum DiscoveryError {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error(
        "{flag}=true but the API server does not serve {plural}.{group_version}: install its CRD or turn the flag off"
    )]
    NotServed { flag: &'static str, group_version: String, plural: &'static str },
}

/// Whether RBAC lets reloader use a kind it detected; says once why not.
async fn permitted_when_detected(
    review: &dyn AccessReview,
    info: &KindInfo,
    flag: KindFlag,
    options: &Options,
) -> bool {
    let namespaces = rbac::watched_namespaces(options);
    let denied = rbac::denied_verbs(review, info, &namespaces, rbac::writes_workloads(options)).await;
    if denied.is_empty() {
        return true;
    }
    warn!(
        kind = info.kind.as_str(),
        "{} ({}) is served, but RBAC denies {} on {} (apiGroup \"{}\"): not watched; grant those verbs \
         to reload it, or pass {}=false to stop detecting it",
        info.kind.as_str(),
        info.api_version(),
        denied.join(", "),
        info.plural,
        info.group,
        flag.name(),
    );
    false
}

async fn require(apis: &ServedApis, flag: KindFlag, info: &KindInfo) -> Result<bool, DiscoveryError> {
    if apis.serves(info).await? {
        Ok(true)
    } else {
        Err(DiscoveryError::NotServed {
            flag: flag.name(),
            group_version: info.api_version(),
            plural: info.plural,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use reloader_core::model::WorkloadKind;

    use super::*;

    /// Grants everything: these tests are about what is served.
    struct Granted;

    #[async_trait::async_trait]
    impl AccessReview for Granted {
        async fn allows(&self, _: rbac::Permission, _: Option<&str>) -> Result<bool, kube::Error> {
            Ok(true)
        }
    }

    /// An API server serving `served` (group versions and their resources); the paths it was asked
    /// for go to the returned list.
    fn discovery(
        served: &'static [(&'static str, &'static [&'static str])],
    ) -> (Client, Arc<Mutex<Vec<String>>>) {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        let api = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let path = request.uri().path().to_owned();
            log.lock().unwrap().push(path.clone());
            let group_version =
                |gv: &str| serde_json::json!({"groupVersion": gv, "version": gv.rsplit('/').next()});
            let body = if path == "/apis" {
                let groups: Vec<_> = served
                    .iter()
                    .map(|(gv, _)| {
                        serde_json::json!({
                            "name": gv.split('/').next(),
                            "versions": [group_version(gv)],
                            "preferredVersion": group_version(gv),
                        })
                    })
                    .collect();
                Some(serde_json::json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
            } else {
                served.iter().find(|(gv, _)| path == format!("/apis/{gv}")).map(|(gv, plurals)| {
                    let resources: Vec<_> = plurals
                        .iter()
                        .map(|name| {
                            serde_json::json!({"name": name, "singularName": "", "namespaced": true, "kind": "K", "verbs": ["get"]})
                        })
                        .collect();
                    serde_json::json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
                })
            };
            let response = match body {
                Some(body) => http::Response::builder()
                    .status(200)
                    .body(kube::client::Body::from(body.to_string().into_bytes())),
                None => http::Response::builder()
                    .status(404)
                    .body(kube::client::Body::from(b"404 page not found".to_vec())),
            };
            async move { Ok::<_, std::convert::Infallible>(response.expect("a valid response")) }
        });
        (Client::new(api, "default"), asked)
    }

    const CSI: (&str, &[&str]) =
        ("secrets-store.csi.x-k8s.io/v1", &["secretproviderclasses", "secretproviderclasspodstatuses"]);

    #[tokio::test]
    async fn the_detections_share_one_read_of_the_group_list() {
        let (client, asked) = discovery(&[
            ("argoproj.io/v1alpha1", &["rollouts"]),
            ("apps.openshift.io/v1", &["deploymentconfigs"]),
            CSI,
        ]);
        let apis = ServedApis::new(client);
        let kinds =
            enabled_kinds(&apis, &crate::args::testing::options(&["--is-Argo-Rollouts=true"]), &Granted)
                .await
                .unwrap();
        assert!(
            kinds.contains(WorkloadKind::Rollout) && kinds.contains(WorkloadKind::DeploymentConfig),
            "{kinds}"
        );
        assert!(apis.csi().await.unwrap());
        let mut asked = asked.lock().unwrap().clone();
        asked.sort();
        assert_eq!(
            asked,
            [
                "/apis",
                "/apis/apps.openshift.io/v1",
                "/apis/argoproj.io/v1alpha1",
                "/apis/secrets-store.csi.x-k8s.io/v1"
            ]
        );
    }

    #[tokio::test]
    async fn a_group_version_the_list_does_not_name_is_never_asked_for() {
        let (client, asked) = discovery(&[]);
        let apis = ServedApis::new(client);
        let kinds = enabled_kinds(&apis, &crate::args::testing::options(&[]), &Granted).await.unwrap();
        assert!(!kinds.contains(WorkloadKind::DeploymentConfig), "{kinds}");
        assert!(!apis.csi().await.unwrap());
        // One group version served without the other CSI resource is not CSI.
        let (client, _) = discovery(&[("secrets-store.csi.x-k8s.io/v1", &["secretproviderclasses"])]);
        assert!(!ServedApis::new(client).csi().await.unwrap());
        assert_eq!(*asked.lock().unwrap(), ["/apis"]);
        // Switched on but not served: start-up stops, naming the flag.
        let (client, _) = discovery(&[]);
        let refused = enabled_kinds(
            &ServedApis::new(client),
            &crate::args::testing::options(&["--is-Argo-Rollouts=true"]),
            &Granted,
        )
        .await;
        assert!(
            matches!(refused, Err(DiscoveryError::NotServed { flag: "--is-Argo-Rollouts", .. })),
            "{refused:?}"
        );
    }
}
