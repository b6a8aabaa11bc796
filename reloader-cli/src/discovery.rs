//! What the API server serves and RBAC allows, read at start-up to decide which workload kinds
//! a run watches (OpenShift, Argo Rollouts, the declared kinds) and whether the CSI integration
//! runs; and, for a declared kind whose CRD is missing, read again until it appears.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;
use kube::Client;
use reloader_core::model::WorkloadKind;
use reloader_core::options::Options;
use tokio::sync::{OnceCell, watch};
use tracing::{debug, error, info, warn};

use crate::kinds::{
    self, Availability, EnabledKinds, KindFlag, KindInfo, spc_pod_status_resource, spc_resource,
};
use crate::observe::http::Health;
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
        Ok(wanted.iter().all(|wanted| served.iter().any(|r| r.name == wanted.plural)))
    }

    async fn serves(&self, info: &KindInfo) -> Result<bool, kube::Error> {
        Ok(self.resources(&info.api_version()).await?.iter().any(|r| r.name == info.plural))
    }

    /// The resources the API server serves in `group_version` (none when it does not serve it).
    /// The group list comes first: asked for a group version it does not serve, kube-apiserver
    /// answers 404 with a plain-text body, which kube's client logs as a warning at every start.
    async fn resources(&self, group_version: &str) -> Result<Vec<APIResource>, kube::Error> {
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
        group_resources(&self.client, group_version).await
    }
}

/// The resources of `group_version`, asking for the group list first (see
/// [`ServedApis::resources`]: a group version it does not name would be a logged 404).
async fn listed_group_resources(
    client: &Client,
    group_version: &str,
) -> Result<Vec<APIResource>, kube::Error> {
    let groups = client.list_api_groups().await?;
    if !groups.groups.iter().flat_map(|g| &g.versions).any(|v| v.group_version == group_version) {
        return Ok(Vec::new());
    }
    group_resources(client, group_version).await
}

/// The resources of `group_version`; none when it is not (or no longer) served.
async fn group_resources(client: &Client, group_version: &str) -> Result<Vec<APIResource>, kube::Error> {
    match client.list_api_group_resources(group_version).await {
        Ok(list) => Ok(list.resources),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// How a declared kind stands on the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DeclaredState {
    Served,
    /// Its group version or resource is not served (the CRD is not installed, or not yet).
    Missing,
    /// Served, but not as declared; why.
    Mismatch(String),
}

/// Compares a declared kind with what its group version serves.
fn declared_state(info: &KindInfo, served: &[APIResource]) -> DeclaredState {
    let kind = info.kind.as_str();
    match served.iter().find(|r| r.name == info.plural) {
        Some(r) if r.kind != kind => DeclaredState::Mismatch(format!(
            "{}.{} serves kind {}, not {kind}",
            info.plural, info.group, r.kind
        )),
        Some(r) if !r.namespaced => DeclaredState::Mismatch(format!(
            "{kind} is cluster-scoped: only namespaced kinds hold workloads reloader can roll"
        )),
        Some(_) => DeclaredState::Served,
        None => match served.iter().find(|r| r.kind == kind && !r.name.contains('/')) {
            Some(r) => DeclaredState::Mismatch(format!(
                "{kind} is served as resource {:?}, not {:?}: declare resource={}",
                r.name, info.plural, r.name
            )),
            None => DeclaredState::Missing,
        },
    }
}

/// The declared kinds: each checked against the built-in kinds and, where its CRD is installed,
/// against what the API server serves (a mismatch stops start-up). A kind whose CRD is missing
/// is said once here and watched when it appears ([`CrdWait`]).
async fn check_declared_kinds(apis: &ServedApis, options: &Options) -> Result<(), DiscoveryError> {
    kinds::check_declared(&options.custom_kinds).map_err(|e| DiscoveryError::Declared(e.to_string()))?;
    for &kind in &options.custom_kinds {
        let info = kinds::info(kind);
        let declaration = kind.custom().map(|c| c.declaration()).unwrap_or_default();
        match declared_state(&info, &apis.resources(&info.api_version()).await?) {
            DeclaredState::Served => {
                info!(kind = kind.as_str(), "declared kind {} {} is served", info.api_version(), info.plural);
            }
            DeclaredState::Missing => warn!(
                kind = kind.as_str(),
                "--custom-workload {declaration:?}: {}.{} is not served (its CRD is not installed); \
                 watched when it appears",
                info.plural,
                info.api_version(),
            ),
            DeclaredState::Mismatch(why) => {
                return Err(DiscoveryError::Declared(format!("--custom-workload {declaration:?}: {why}")));
            }
        }
    }
    Ok(())
}

/// Waits for the CRD of a declared kind that was missing at start-up; what is awaited shows in
/// `/readyz`'s body (readiness itself does not wait: the kind has no objects yet).
#[derive(Clone)]
pub(crate) struct CrdWait {
    client: Client,
    health: Health,
    period: Duration,
}

/// How often the API server is asked whether a missing CRD has appeared.
const CRD_POLL_PERIOD: Duration = Duration::from_secs(5);

impl CrdWait {
    pub(crate) fn new(client: Client, health: Health) -> Self {
        CrdWait { client, health, period: CRD_POLL_PERIOD }
    }

    /// Returns once `info`'s kind is served as declared. Meanwhile `synced` is set (nothing to
    /// list), and a served kind that does not match the declaration is said once per change.
    pub(crate) async fn until_served(&self, info: &KindInfo, synced: &watch::Sender<bool>) {
        let pending = format!(
            "waiting for {}.{} (--custom-workload {}): its CRD is not installed",
            info.plural,
            info.api_version(),
            info.kind.as_str()
        );
        let mut said: Option<DeclaredState> = None;
        let mut waiting = false;
        loop {
            let state = match listed_group_resources(&self.client, &info.api_version()).await {
                Ok(served) => declared_state(info, &served),
                Err(error) => {
                    debug!(%error, kind = info.kind.as_str(), "reading discovery for a declared kind");
                    DeclaredState::Missing
                }
            };
            if state == DeclaredState::Served {
                if waiting {
                    info!(
                        kind = info.kind.as_str(),
                        "{}.{} is now served: watching it",
                        info.plural,
                        info.api_version()
                    );
                    self.health.set_pending(&pending, false);
                }
                return;
            }
            if !waiting {
                waiting = true;
                let _ = synced.send(true);
                self.health.set_pending(&pending, true);
            }
            if let DeclaredState::Mismatch(why) = &state
                && said.as_ref() != Some(&state)
            {
                error!(
                    kind = info.kind.as_str(),
                    "--custom-workload {}: {why}; not watched",
                    info.kind.as_str()
                );
            }
            said = Some(state);
            tokio::time::sleep(self.period).await;
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
        let info = &info;
        let ignored = options.ignored_workloads.contains(&info.kind);
        let enabled = match info.availability {
            Availability::BuiltIn => !ignored,
            // Not among the built-in kinds `all` lists.
            Availability::Declared | Availability::ReloadPods => false,
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
    check_declared_kinds(apis, options).await?;
    kinds.extend(options.custom_kinds.iter().copied());
    if options.reload_pods {
        kinds.push(WorkloadKind::pods());
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
    #[error("{0}")]
    Declared(String),
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

    /// An API server serving `served` (group versions and their resources, each `plural`, or
    /// `plural:Kind`, or `plural:Kind:cluster`); the paths it was asked for go to the returned list.
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
                        .map(|resource| {
                            let mut parts = resource.split(':');
                            let name = parts.next().unwrap_or_default();
                            let kind = parts.next().unwrap_or("K");
                            let namespaced = parts.next() != Some("cluster");
                            serde_json::json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": ["get"]})
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

    const CLONESET: &str = "--custom-workload=group=apps.kruise.io,version=v1alpha1,kind=CloneSet,resource=clonesets,template=/spec/template";

    #[tokio::test]
    async fn declared_kinds_are_checked_against_what_is_served() {
        let options = crate::args::testing::options(&[CLONESET]);
        let declared = options.custom_kinds[0];
        // Served as declared, or not served at all (watched when it appears): enabled either way.
        const SERVED: (&str, &[&str]) =
            ("apps.kruise.io/v1alpha1", &["clonesets:CloneSet", "clonesets/status:CloneSet"]);
        const OTHER: (&str, &[&str]) = ("apps.kruise.io/v1alpha1", &["statefulsets:StatefulSet"]);
        let all: [&'static [(&str, &[&str])]; 3] = [&[SERVED], &[], &[OTHER]];
        for served in all {
            let (client, _) = discovery(served);
            let kinds = enabled_kinds(&ServedApis::new(client), &options, &Granted).await.unwrap();
            assert!(kinds.contains(declared), "{served:?}: {kinds}");
        }
        // Served otherwise: start-up stops, naming the declaration and what is wrong.
        let cases: [(&[&str], &str); 3] = [
            (&["clonesets:CloneSet:cluster"], "is cluster-scoped"),
            (&["clonesets:StatefulSet"], "serves kind StatefulSet, not CloneSet"),
            (&["clonesetz:CloneSet"], "declare resource=clonesetz"),
        ];
        for (resources, why) in cases {
            let served: &'static [(&str, &[&str])] =
                Box::leak(Box::new([("apps.kruise.io/v1alpha1", resources)]));
            let (client, _) = discovery(served);
            let error = enabled_kinds(&ServedApis::new(client), &options, &Granted).await.unwrap_err();
            let message = error.to_string();
            assert!(message.contains(why) && message.contains("kind=CloneSet"), "{resources:?}: {message}");
        }
        // A built-in kind needs no declaration.
        let options = crate::args::testing::options(&[
            "--custom-workload=group=apps,version=v1,kind=Deployment,resource=deployments,template=/spec/template",
        ]);
        let (client, _) = discovery(&[]);
        let error = enabled_kinds(&ServedApis::new(client), &options, &Granted).await.unwrap_err();
        assert!(error.to_string().contains("Deployment is built in"), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_missing_crd_is_awaited_without_holding_readiness_back() {
        let options = crate::args::testing::options(&[CLONESET]);
        let info = kinds::info(options.custom_kinds[0]);
        let (client, asked) = discovery(&[]);
        let health = Health::new();
        let wait = CrdWait::new(client, health.clone());
        let (synced, mut synced_rx) = watch::channel(false);
        let waiting = tokio::spawn(async move { wait.until_served(&info, &synced).await });
        synced_rx.wait_for(|synced| *synced).await.unwrap();
        assert_eq!(health.pending().len(), 1, "said in /readyz");
        assert!(health.pending()[0].contains("clonesets.apps.kruise.io"), "{:?}", health.pending());
        tokio::time::sleep(CRD_POLL_PERIOD * 3).await;
        assert!(!waiting.is_finished());
        let asked = asked.lock().unwrap().clone();
        assert!(asked.len() >= 3, "asked again each period: {asked:?}");
        // Only the group list: a group version it does not name would be a 404 kube logs.
        assert!(asked.iter().all(|path| path == "/apis"), "{asked:?}");
        waiting.abort();
    }
}
