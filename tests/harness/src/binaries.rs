//! Where the control-plane binaries live: the cache that `hack/build` fills, keyed by the
//! versions pinned in `hack/versions.env`, with the Kubernetes version of the matrix that
//! `RELOADER_KUBERNETES_VERSION` selects (docs/kubernetes-versions.md).

use std::path::{Path, PathBuf};

use crate::PlaneError;

/// The variable that selects the Kubernetes version of the matrix (hack/lib.sh reads it too).
pub const KUBERNETES_VERSION_VAR: &str = "RELOADER_KUBERNETES_VERSION";

fn is_kubernetes_version(version: &str) -> bool {
    let mut parts = version.strip_prefix("v1.").unwrap_or_default().split('.');
    let number =
        |part: Option<&str>| part.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    number(parts.next()) && number(parts.next()) && parts.next().is_none()
}

/// hack/versions.env, embedded so the harness and the build script can never disagree.
const VERSIONS_ENV: &str = include_str!("../../../hack/versions.env");

/// The component versions pinned in `hack/versions.env`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    pub kubernetes: String,
    pub etcd: String,
    pub kwok: String,
    pub helm: String,
    pub argo_rollouts: String,
    pub openkruise: String,
    pub keda: String,
    pub containerd: String,
    pub node_images: String,
}

impl Versions {
    /// The pinned versions this crate was compiled against.
    pub fn pinned() -> Self {
        Self::parse(VERSIONS_ENV).expect("hack/versions.env names every component")
    }

    /// The versions this run uses: the pinned ones, with Kubernetes replaced by
    /// `RELOADER_KUBERNETES_VERSION` when it is set, as hack/lib.sh does.
    pub fn selected() -> Self {
        Self::pinned().with_kubernetes(std::env::var(KUBERNETES_VERSION_VAR).ok())
    }

    fn with_kubernetes(mut self, chosen: Option<String>) -> Self {
        if let Some(version) = chosen.filter(|version| !version.is_empty()) {
            assert!(
                is_kubernetes_version(&version),
                "{KUBERNETES_VERSION_VAR}={version}: expected v1.<minor>.<patch>, e.g. {}",
                self.kubernetes
            );
            self.kubernetes = version;
        }
        self
    }

    fn parse(env_file: &str) -> Option<Self> {
        let value = |key: &str| {
            env_file.lines().map(str::trim).filter(|line| !line.starts_with('#')).find_map(|line| {
                let (name, value) = line.split_once('=')?;
                (name.trim() == key).then(|| value.trim().trim_matches('"').to_owned())
            })
        };
        Some(Self {
            kubernetes: value("KUBERNETES_VERSION")?,
            etcd: value("ETCD_VERSION")?,
            kwok: value("KWOK_VERSION")?,
            helm: value("HELM_VERSION")?,
            argo_rollouts: value("ARGO_ROLLOUTS_VERSION")?,
            openkruise: value("OPENKRUISE_VERSION")?,
            keda: value("KEDA_VERSION")?,
            containerd: value("CONTAINERD_VERSION")?,
            node_images: value("NODE_IMAGES_VERSION")?,
        })
    }
}

/// The cache folder of hack/lib.sh: `$RELOADER_DEV_CACHE`, else `$XDG_CACHE_HOME/reloader-dev`,
/// else `~/.cache/reloader-dev`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("RELOADER_DEV_CACHE").filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"));
    base.join("reloader-dev")
}

/// Paths of every binary and data file the plane needs.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
    pub kube_scheduler: PathBuf,
    /// Not needed by the plane; for tests that script it.
    pub kubectl: PathBuf,
    /// Not needed by the plane; for chart tests.
    pub helm: PathBuf,
    pub kwok: PathBuf,
    /// The KWOK stage files (node and pod lifecycles) copied from its module by hack/build.
    pub kwok_stages: PathBuf,
    /// The Argo Rollouts `Rollout` CRD read from its module by hack/build.
    pub rollout_crd: PathBuf,
    /// The OpenKruise `CloneSet` CRD read from its module by hack/build.
    pub cloneset_crd: PathBuf,
    /// The KEDA `ScaledJob` CRD read from its module by hack/build.
    pub scaledjob_crd: PathBuf,
    pub versions: Versions,
}

impl Binaries {
    /// The binaries of the selected versions in `cache`.
    pub fn in_cache(cache: &Path) -> Self {
        let versions = Versions::selected();
        let kubernetes = cache.join(format!("kubernetes-{}", versions.kubernetes));
        let kwok = cache.join(format!("kwok-{}", versions.kwok));
        Self {
            etcd: cache.join(format!("etcd-{}", versions.etcd)).join("etcd"),
            kube_apiserver: kubernetes.join("kube-apiserver"),
            kube_controller_manager: kubernetes.join("kube-controller-manager"),
            kube_scheduler: kubernetes.join("kube-scheduler"),
            kubectl: kubernetes.join("kubectl"),
            helm: cache.join(format!("helm-{}", versions.helm)).join("helm"),
            kwok_stages: kwok.join("stages"),
            kwok: kwok.join("kwok"),
            rollout_crd: cache
                .join(format!("argo-rollouts-{}", versions.argo_rollouts))
                .join("rollout-crd.yaml"),
            cloneset_crd: cache.join(format!("openkruise-{}", versions.openkruise)).join("cloneset-crd.yaml"),
            scaledjob_crd: cache.join(format!("keda-{}", versions.keda)).join("scaledjob-crd.yaml"),
            versions,
        }
    }

    /// The binaries in the default cache, failing with the command that builds them when any is
    /// missing.
    pub fn locate() -> Result<Self, PlaneError> {
        let cache = cache_dir();
        let binaries = Self::in_cache(&cache);
        let missing: Vec<PathBuf> = [
            &binaries.etcd,
            &binaries.kube_apiserver,
            &binaries.kube_controller_manager,
            &binaries.kube_scheduler,
            &binaries.kwok,
            // Older caches lack the lease heartbeat stage; hack/build adds it.
            &binaries.kwok_stages.join("node-node-heartbeat-with-lease.yaml"),
        ]
        .into_iter()
        .filter(|path| !path.exists())
        .cloned()
        .collect();
        if missing.is_empty() { Ok(binaries) } else { Err(PlaneError::MissingBinaries { cache, missing }) }
    }

    /// The KWOK stage files, sorted so the plane starts the same way every time.
    pub fn kwok_stage_files(&self) -> Result<Vec<PathBuf>, PlaneError> {
        let io_error =
            |source| PlaneError::Io { context: format!("reading {}", self.kwok_stages.display()), source };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&self.kwok_stages).map_err(io_error)? {
            let path = entry.map_err(io_error)?.path();
            if path.extension().is_some_and(|ext| ext == "yaml") {
                files.push(path);
            }
        }
        files.sort();
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_pinned_versions_file() {
        let versions = Versions::parse(
            "# comment\nKUBERNETES_VERSION=v1.36.3\nETCD_VERSION=v3.6.16\nKWOK_VERSION=v0.8.0\n\
             HELM_VERSION=v3.20.2\nARGO_ROLLOUTS_VERSION=v1.9.3\nOPENKRUISE_VERSION=v1.8.2\n\
             KEDA_VERSION=v2.21.0\nCONTAINERD_VERSION=v2.4.2\nNODE_IMAGES_VERSION=1\n",
        )
        .unwrap();
        assert_eq!(versions.kubernetes, "v1.36.3");
        assert_eq!(versions.etcd, "v3.6.16");
        assert_eq!(versions.kwok, "v0.8.0");
        assert_eq!(versions.helm, "v3.20.2");
        assert_eq!(versions.argo_rollouts, "v1.9.3");
        assert_eq!(versions.openkruise, "v1.8.2");
        assert_eq!(versions.keda, "v2.21.0");
        assert_eq!(versions.containerd, "v2.4.2");
        assert_eq!(versions.node_images, "1");
    }

    #[test]
    fn a_missing_version_is_an_error() {
        assert_eq!(Versions::parse("KUBERNETES_VERSION=v1.36.3\n"), None);
    }

    #[test]
    fn the_embedded_file_names_every_component() {
        let versions = Versions::pinned();
        assert!(versions.kubernetes.starts_with("v1."), "{versions:?}");
    }

    #[test]
    fn a_chosen_kubernetes_version_replaces_the_pinned_one() {
        let pinned = Versions::pinned();
        assert_eq!(pinned.clone().with_kubernetes(None), pinned);
        assert_eq!(pinned.clone().with_kubernetes(Some(String::new())), pinned);
        let chosen = pinned.clone().with_kubernetes(Some("v1.32.9".to_owned()));
        assert_eq!(chosen.kubernetes, "v1.32.9");
        assert_eq!(chosen.etcd, pinned.etcd);
    }

    #[test]
    fn kubernetes_versions_are_checked() {
        for good in ["v1.32.9", "v1.36.3", "v1.100.0"] {
            assert!(is_kubernetes_version(good), "{good}");
        }
        for bad in ["1.32.9", "v1.32", "v1.32.9-rc.1", "v2.0.0", "v1..3", "v1.32.9.1", ""] {
            assert!(!is_kubernetes_version(bad), "{bad}");
        }
    }

    #[test]
    #[should_panic(expected = "RELOADER_KUBERNETES_VERSION=1.32: expected v1.<minor>.<patch>")]
    fn a_malformed_chosen_version_is_refused() {
        let _ = Versions::pinned().with_kubernetes(Some("1.32".to_owned()));
    }

    #[test]
    fn binaries_are_keyed_by_version() {
        let binaries = Binaries::in_cache(Path::new("/cache"));
        let kubernetes = format!("/cache/kubernetes-{}/kube-apiserver", binaries.versions.kubernetes);
        assert_eq!(binaries.kube_apiserver, PathBuf::from(kubernetes));
        let keda = format!("/cache/keda-{}/scaledjob-crd.yaml", binaries.versions.keda);
        assert_eq!(binaries.scaledjob_crd, PathBuf::from(keda));
    }
}
