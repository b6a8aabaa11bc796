//! The `reloader-meta-info` ConfigMap: how this instance was built and configured, published
//! where `RELOADER_NAMESPACE` points (docs/compatibility.md §2), for tools that inspect a running Reloader.

use std::collections::BTreeMap;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use serde::Serialize;

pub const CONFIG_MAP_NAME: &str = "reloader-meta-info";
pub const LABEL_KEY: &str = "reloader.stakater.com/meta-info";
pub const LABEL_VALUE: &str = "reloader";
const FIELD_MANAGER: &str = "reloader";

/// `buildInfo`. Field names follow Stakater's where the meaning is the same.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct BuildInfo {
    release_version: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    rust_version: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    commit_hash: Option<&'static str>,
}

impl BuildInfo {
    /// Commit and compiler version are stamped by the release build through environment variables
    /// at compile time; a local `cargo build` leaves them out.
    fn current() -> Self {
        Self {
            release_version: env!("CARGO_PKG_VERSION"),
            rust_version: option_env!("RELOADER_RUSTC_VERSION"),
            commit_hash: option_env!("RELOADER_GIT_COMMIT"),
        }
    }
}

/// `deploymentInfo`.
#[derive(Debug, Serialize)]
struct DeploymentInfo<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    namespace: &'a str,
}

/// Creates or updates the ConfigMap in `namespace` with server-side apply, so concurrent
/// replicas and restarts converge on the same object without read-modify-write races.
/// `options_json` is the effective configuration, already serialized (`reloaderOptions`).
pub async fn publish(
    client: kube::Client,
    namespace: &str,
    deployment_name: Option<&str>,
    options_json: String,
) -> anyhow::Result<()> {
    let config_map = desired(namespace, deployment_name, options_json)?;
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    api.patch(CONFIG_MAP_NAME, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&config_map))
        .await
        .with_context(|| format!("applying ConfigMap {namespace}/{CONFIG_MAP_NAME}"))?;
    tracing::info!(namespace, name = CONFIG_MAP_NAME, "published meta-info ConfigMap");
    Ok(())
}

fn desired(
    namespace: &str,
    deployment_name: Option<&str>,
    options_json: String,
) -> anyhow::Result<ConfigMap> {
    let build_info = serde_json::to_string(&BuildInfo::current()).context("encoding buildInfo")?;
    let deployment_info = serde_json::to_string(&DeploymentInfo { name: deployment_name, namespace })
        .context("encoding deploymentInfo")?;
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(CONFIG_MAP_NAME.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([(LABEL_KEY.to_owned(), LABEL_VALUE.to_owned())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([
            ("buildInfo".to_owned(), build_info),
            ("reloaderOptions".to_owned(), options_json),
            ("deploymentInfo".to_owned(), deployment_info),
        ])),
        ..ConfigMap::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn desired_config_map_carries_label_and_the_three_keys() {
        let cm =
            desired("reloader", Some("reloader-reloader"), r#"{"autoReloadAll":false}"#.to_owned()).unwrap();
        let value = serde_json::to_value(&cm).unwrap();
        // Server-side apply needs the type on the object itself.
        assert_eq!(value["apiVersion"], "v1");
        assert_eq!(value["kind"], "ConfigMap");
        assert_eq!(value["metadata"]["labels"][LABEL_KEY], LABEL_VALUE);

        let data = cm.data.unwrap();
        assert_eq!(data["reloaderOptions"], r#"{"autoReloadAll":false}"#);
        let deployment: serde_json::Value = serde_json::from_str(&data["deploymentInfo"]).unwrap();
        assert_eq!(deployment, serde_json::json!({"name": "reloader-reloader", "namespace": "reloader"}));
        let build: serde_json::Value = serde_json::from_str(&data["buildInfo"]).unwrap();
        assert_eq!(build["releaseVersion"], env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn deployment_name_is_omitted_when_unknown() {
        let cm = desired("ops", None, "{}".to_owned()).unwrap();
        let deployment: serde_json::Value =
            serde_json::from_str(&cm.data.unwrap()["deploymentInfo"]).unwrap();
        assert_eq!(deployment, serde_json::json!({"namespace": "ops"}));
    }
}
