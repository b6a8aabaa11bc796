//! The pinned `helm` binary run on `charts/reloader`: lint and template with a values document.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::manifest::Manifest;
use reloader_harness::{PlaneError, cache_dir};

/// hack/versions.env, for HELM_VERSION and PROMETHEUS_VERSION (the harness's `Versions` has no
/// use for helm or promtool).
const VERSIONS_ENV: &str = include_str!("../../../../hack/versions.env");

/// `helm` from the dev cache (`hack/build helm`), pointed at the repository's chart.
#[derive(Debug, Clone)]
pub struct Helm {
    binary: PathBuf,
    chart: PathBuf,
}

impl Helm {
    /// The pinned helm in the cache and `charts/reloader`; an error naming `hack/build helm` when
    /// helm is missing.
    pub fn locate() -> Result<Self, PlaneError> {
        let binary = pinned_binary("HELM_VERSION", "helm")?;
        let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/reloader");
        Ok(Self { binary, chart })
    }

    /// `helm lint --strict` with `values`, as a release in `namespace`.
    pub fn lint(&self, namespace: &str, values: &serde_json::Value) -> Result<(), PlaneError> {
        let values_file = ValuesFile::write(values)?;
        self.run(&[
            "lint",
            "--strict",
            path(&self.chart)?,
            "--namespace",
            namespace,
            "-f",
            values_file.path()?,
        ])
        .map(drop)
    }

    /// `helm template <release>` into `namespace` with `values`, parsed.
    pub fn template(
        &self,
        release: &str,
        namespace: &str,
        values: &serde_json::Value,
    ) -> Result<Manifest, PlaneError> {
        self.template_with_apis(release, namespace, values, &[])
    }

    /// `helm template` as for a cluster that also serves `api_versions` (`--api-versions`), so
    /// objects of optional APIs (monitors, VPA) render.
    pub fn template_with_apis(
        &self,
        release: &str,
        namespace: &str,
        values: &serde_json::Value,
        api_versions: &[&str],
    ) -> Result<Manifest, PlaneError> {
        let values_file = ValuesFile::write(values)?;
        let mut args = vec![
            "template",
            release,
            path(&self.chart)?,
            "--namespace",
            namespace,
            "-f",
            values_file.path()?,
        ];
        args.extend(api_versions.iter().flat_map(|api| ["--api-versions", api]));
        Manifest::parse(&self.run(&args)?)
    }

    /// The same helm pointed at another chart folder (Stakater's, for the switching-day play of
    /// hack/diff-stakater).
    pub fn with_chart(&self, chart: impl Into<PathBuf>) -> Self {
        Self { binary: self.binary.clone(), chart: chart.into() }
    }

    /// The NOTES.txt a `helm install` of `values` prints. Helm 3 contacts the API server even for
    /// `--dry-run=client` (helm/helm#13144), so this needs a cluster (`kubeconfig`); nothing is
    /// installed.
    pub fn notes(
        &self,
        release: &str,
        namespace: &str,
        values: &serde_json::Value,
        kubeconfig: &Path,
    ) -> Result<String, PlaneError> {
        Ok(self.dry_run(release, namespace, values, kubeconfig)?.1)
    }

    /// What a `helm install` of `values` would apply and print: the manifest and the NOTES.txt,
    /// rendered with the cluster's API versions (`kubeconfig`); nothing is installed.
    pub fn dry_run(
        &self,
        release: &str,
        namespace: &str,
        values: &serde_json::Value,
        kubeconfig: &Path,
    ) -> Result<(String, String), PlaneError> {
        let output =
            self.on_cluster(&["install", release], &["--dry-run=client"], namespace, values, kubeconfig)?;
        let (manifest, notes) = output.split_once("\nNOTES:\n").unwrap_or((output.as_str(), ""));
        Ok((manifest.to_owned(), notes.to_owned()))
    }

    /// `helm upgrade --install <release>` of this chart with `values` into `namespace` of the
    /// cluster of `kubeconfig`, waiting for nothing (no pods run on the plane).
    pub fn upgrade_install(
        &self,
        release: &str,
        namespace: &str,
        values: &serde_json::Value,
        kubeconfig: &Path,
    ) -> Result<String, PlaneError> {
        self.on_cluster(
            &["upgrade", "--install", release],
            &["--create-namespace"],
            namespace,
            values,
            kubeconfig,
        )
    }

    /// `helm uninstall <release> --wait` from `namespace` of the cluster of `kubeconfig`.
    pub fn uninstall(&self, release: &str, namespace: &str, kubeconfig: &Path) -> Result<String, PlaneError> {
        self.run(&[
            "uninstall",
            release,
            "--wait",
            "--kubeconfig",
            path(kubeconfig)?,
            "--namespace",
            namespace,
        ])
    }

    /// `helm <command> <chart> <flags>` against the cluster of `kubeconfig`, with `values`.
    fn on_cluster(
        &self,
        command: &[&str],
        flags: &[&str],
        namespace: &str,
        values: &serde_json::Value,
        kubeconfig: &Path,
    ) -> Result<String, PlaneError> {
        let values_file = ValuesFile::write(values)?;
        let mut args = command.to_vec();
        args.push(path(&self.chart)?);
        args.extend_from_slice(flags);
        args.extend(["--kubeconfig", path(kubeconfig)?, "--namespace", namespace, "-f", values_file.path()?]);
        self.run(&args)
    }

    fn run(&self, args: &[&str]) -> Result<String, PlaneError> {
        let command = format!("helm {}", args.iter().take(2).copied().collect::<Vec<_>>().join(" "));
        let output = Command::new(&self.binary)
            .args(args)
            .output()
            .map_err(|source| PlaneError::Io { context: format!("running {command}"), source })?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            let detail = format!(
                "{}\n{}",
                String::from_utf8_lossy(&output.stdout).trim(),
                String::from_utf8_lossy(&output.stderr).trim()
            );
            Err(PlaneError::Command { command, detail })
        }
    }
}

/// `<cache>/<name>-<version>/<name>` for the version pinned as `variable`, as hack/build installs
/// it; an error naming the missing file otherwise.
pub(super) fn pinned_binary(variable: &str, name: &str) -> Result<PathBuf, PlaneError> {
    let version = pinned_version(variable).ok_or_else(|| PlaneError::Manifest {
        what: "hack/versions.env".into(),
        detail: format!("{variable} is not set"),
    })?;
    let cache = cache_dir();
    let binary = cache.join(format!("{name}-{version}")).join(name);
    if binary.exists() {
        Ok(binary)
    } else {
        Err(PlaneError::MissingBinaries { cache, missing: vec![binary] })
    }
}

/// A version pinned in hack/versions.env (`HELM_VERSION`, `PROMETHEUS_VERSION`, ...).
pub(super) fn pinned_version(variable: &str) -> Option<String> {
    VERSIONS_ENV.lines().map(str::trim).filter(|line| !line.starts_with('#')).find_map(|line| {
        let (name, value) = line.split_once('=')?;
        (name.trim() == variable).then(|| value.trim().trim_matches('"').to_owned())
    })
}

fn path(path: &Path) -> Result<&str, PlaneError> {
    path.to_str().ok_or_else(|| PlaneError::Manifest {
        what: path.display().to_string(),
        detail: "the path is not UTF-8".into(),
    })
}

/// A values document in a temporary file (JSON is YAML, so helm reads it as is).
struct ValuesFile(tempfile::NamedTempFile);

impl ValuesFile {
    fn write(values: &serde_json::Value) -> Result<Self, PlaneError> {
        let io_error = |source| PlaneError::Io { context: "writing a helm values file".into(), source };
        let file = tempfile::Builder::new().prefix("values-").suffix(".json").tempfile().map_err(io_error)?;
        std::fs::write(file.path(), values.to_string()).map_err(io_error)?;
        Ok(Self(file))
    }

    fn path(&self) -> Result<&str, PlaneError> {
        path(self.0.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helm_and_prometheus_versions_are_pinned() {
        assert!(pinned_version("HELM_VERSION").is_some_and(|version| version.starts_with("v3.")));
        assert!(pinned_version("PROMETHEUS_VERSION").is_some_and(|version| version.starts_with("v0.")));
        assert_eq!(pinned_version("NO_SUCH_VERSION"), None);
    }
}
