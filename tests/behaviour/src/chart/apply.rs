//! Putting a rendered chart on the API server (for real, or as a server-side dry run).

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, Scope};
use kube::{Client, ResourceExt as _};

use super::manifest::Manifest;
use reloader_harness::PlaneError;

const FIELD_MANAGER: &str = "reloader-tests-chart";

/// Whether an apply is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyMode {
    /// `?dryRun=All`: admission and validation run in full, nothing is stored.
    DryRun,
    Persist,
}

/// Server-side applies every object of `manifest` as the admin, with strict field validation
/// (an unknown or duplicated field is an error, not a warning). Every kind must be served.
pub async fn apply(client: &Client, manifest: &Manifest, mode: ApplyMode) -> Result<(), PlaneError> {
    let mut params = PatchParams::apply(FIELD_MANAGER).force().validation_strict();
    if mode == ApplyMode::DryRun {
        params = params.dry_run();
    }
    for value in manifest.objects() {
        let object: DynamicObject = serde_json::from_value(value.clone()).map_err(|error| {
            PlaneError::Manifest { what: "a rendered object".into(), detail: format!("{error}: {value}") }
        })?;
        let types = object.types.clone().unwrap_or_default();
        let what = format!("{} {}", types.kind, object.name_any());
        let gvk = GroupVersionKind::try_from(&types)
            .map_err(|error| PlaneError::Manifest { what: what.clone(), detail: error.to_string() })?;
        let (resource, capabilities) =
            discovery::pinned_kind(client, &gvk).await.map_err(|error| PlaneError::Manifest {
                what: what.clone(),
                detail: format!("the API server does not serve it: {error}"),
            })?;
        let api: Api<DynamicObject> = match (capabilities.scope, object.namespace()) {
            (Scope::Namespaced, Some(namespace)) => {
                Api::namespaced_with(client.clone(), &namespace, &resource)
            }
            (Scope::Namespaced, None) => {
                return Err(PlaneError::Manifest {
                    what,
                    detail: "a namespaced object without a namespace".into(),
                });
            }
            (Scope::Cluster, _) => Api::all_with(client.clone(), &resource),
        };
        api.patch(&object.name_any(), &params, &Patch::Apply(&object)).await.map_err(|error| {
            PlaneError::Manifest { what: format!("applying {what} ({mode:?})"), detail: error.to_string() }
        })?;
    }
    Ok(())
}
