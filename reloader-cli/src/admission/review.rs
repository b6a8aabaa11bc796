//! One AdmissionReview: which workload it is about, and the JSON patch that keeps or stamps its
//! markers (reloader_core::admission). Reads the index, never the API server; every answer
//! allows the write, with a patch or without.

use std::collections::BTreeSet;
use std::sync::Mutex;

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::gvk::GroupVersionKind;
use reloader_core::admission::{
    hold_release, opted_out, preserve_markers, refresh_markers, stamp_markers, template_changes,
};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::custom_kind::PodTarget;
use reloader_core::model::WorkloadKind;
use reloader_core::views::WorkloadView;
use serde_json::Value;
use tracing::{debug, info, warn};

use super::AdmissionState;
use crate::client::FIELD_MANAGER;
use crate::kinds::EnabledKinds;
use crate::observe::metrics::AdmissionOutcome as Outcome;

/// The response to `request`: always allowed; with a patch when markers are added.
pub(crate) fn review(
    ctx: &AdmissionState,
    request: &AdmissionRequest<DynamicObject>,
) -> (AdmissionResponse, Outcome) {
    let allowed = AdmissionResponse::from(request);
    let ops = match operations(ctx, request) {
        Ok(Some(ops)) if ops.is_empty() => return (allowed, Outcome::Unchanged),
        Ok(Some(ops)) => ops,
        Ok(None) => return (allowed, Outcome::Skipped),
        Err(e) => {
            // Only the category: serde's message may quote a value of the object (an env var).
            warn!(kind = %request.kind.kind, namespace = ?request.namespace, name = %request.name,
                error = ?e.classify(), "admission review: the object does not read as its kind; allowed unchanged");
            return (allowed, Outcome::Error);
        }
    };
    if ctx.dry_run {
        info!(kind = %request.kind.kind, namespace = ?request.namespace, name = %request.name,
            patch = %serde_json::Value::Array(ops), "dry run: the admission webhook would add markers");
        return (allowed, Outcome::DryRun);
    }
    debug!(kind = %request.kind.kind, namespace = ?request.namespace, name = %request.name, ops = ops.len(),
        "admission review: adding markers");
    let patch = match serde_json::from_value::<json_patch::Patch>(Value::Array(ops)) {
        Ok(patch) => patch,
        Err(e) => {
            warn!(kind = %request.kind.kind, namespace = ?request.namespace, name = %request.name,
                error = ?e.classify(), "admission review: the patch does not parse; allowed unchanged");
            return (AdmissionResponse::from(request), Outcome::Error);
        }
    };
    match allowed.with_patch(patch) {
        Ok(patched) => (patched, Outcome::Patched),
        Err(e) => {
            warn!(kind = %request.kind.kind, namespace = ?request.namespace, name = %request.name,
                error = %e, "admission review: the patch does not serialize; allowed unchanged");
            (AdmissionResponse::from(request), Outcome::Error)
        }
    }
}

/// The patch operations, or `None` when the request is not one to act on.
fn operations(
    ctx: &AdmissionState,
    request: &AdmissionRequest<DynamicObject>,
) -> Result<Option<Vec<Value>>, serde_json::Error> {
    let Some(kind) = workload_kind(&request.kind, &ctx.kinds) else {
        warn_unhandled_kind(&request.kind);
        return Ok(None);
    };
    if request.sub_resource.is_some() || !ctx.kinds.contains(kind) {
        return Ok(None);
    }
    // An annotations map is no pod template: its operator, not the API server, starts the pods,
    // and a re-apply that drops the marker restarts nothing (docs/beyond-stakater.md §12).
    if kind.custom().is_some_and(|custom| matches!(custom.target, PodTarget::Annotations(_))) {
        return Ok(None);
    }
    // Outside the watched scope nothing is patched: reloads happen only inside it, and any answer
    // there would tell the caller something of that namespace's objects. A CREATE may leave the
    // namespace to the request's URL (`request.namespace` is the URL's).
    let Some(namespace) = request.namespace.as_deref().filter(|ns| !ns.is_empty()) else {
        return Ok(None);
    };
    if !ctx.scope.contains(namespace) {
        return Ok(None);
    }
    let Some(object) = &request.object else { return Ok(None) };
    let mut new = serde_json::to_value(object)?;
    if opted_out(&new) {
        return Ok(None);
    }
    let keys = &ctx.keys;
    match request.operation {
        Operation::Update => {
            // A write by the controller that removes a marker (a deleted resource under the
            // env-vars strategy) must not have it copied back.
            if field_manager(request) == Some(FIELD_MANAGER) {
                return Ok(None);
            }
            let Some(old) = &request.old_object else { return Ok(None) };
            let pointer = crate::kinds::info(kind).template_pointer;
            let old = serde_json::to_value(old)?;
            let mut ops = preserve_markers(kind, pointer, &old, &new, keys);
            // docs/beyond-stakater.md §11: an update that rolls the workload anyway carries the
            // current hashes, so a release changing the template and a ConfigMap rolls once.
            if kind != WorkloadKind::Job {
                let mut patched = new;
                let preserved = serde_json::from_value::<json_patch::Patch>(Value::Array(ops.clone()))?;
                if json_patch::patch(&mut patched, &preserved).is_ok()
                    && template_changes(&old, &patched, pointer)
                {
                    let view = view_of(kind, &patched, keys)?;
                    let now = chrono::Utc::now().timestamp();
                    let index = ctx.index.read().expect("index lock");
                    ops.extend(refresh_markers(&patched, pointer, &view, &index, &ctx.decide, keys, now));
                    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                    ops.extend(hold_release(&patched, &view, &index, &ctx.decide, keys, ctx.hold, &now));
                }
            }
            Ok(Some(ops))
        }
        Operation::Create => {
            new["metadata"]["namespace"] = Value::from(namespace);
            let view = view_of(kind, &new, keys)?;
            let now = chrono::Utc::now().timestamp();
            let index = ctx.index.read().expect("index lock");
            let pointer = crate::kinds::info(kind).template_pointer;
            Ok(Some(stamp_markers(&new, pointer, &view, &index, &ctx.decide, keys, now)))
        }
        Operation::Delete | Operation::Connect => Ok(None),
    }
}

/// The kinds reloader rolls, by the group and kind the API server names.
fn workload_kind(gvk: &GroupVersionKind, enabled: &EnabledKinds) -> Option<WorkloadKind> {
    crate::kinds::by_group_kind(&gvk.group, &gvk.kind, enabled.iter())
}

/// A review of a kind that is no workload (a Pod, a ConfigMap) means the webhook's rules send it
/// more than the chart does. It is allowed unchanged, as every review is (this webhook never
/// blocks a write), and said once per kind so a misrouted stream does not flood the log.
fn warn_unhandled_kind(gvk: &GroupVersionKind) {
    static WARNED: Mutex<BTreeSet<(String, String)>> = Mutex::new(BTreeSet::new());
    let key = (gvk.group.clone(), gvk.kind.clone());
    let mut warned = WARNED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // Bounded: past a few dozen kinds the rules are plainly wrong, and one more line says nothing new.
    if warned.len() < 64 && warned.insert(key) {
        warn!(group = %gvk.group, version = %gvk.version, kind = %gvk.kind,
            "admission review for a kind that is not a workload: allowed unchanged (check the webhook's rules)");
    }
}

/// `fieldManager` of the UPDATE/PATCH options, when the client set one.
fn field_manager(request: &AdmissionRequest<DynamicObject>) -> Option<&str> {
    request.options.as_ref()?.0.get("fieldManager")?.as_str()
}

/// The view the controller's watch would build for `object`, through its backend.
fn view_of(
    kind: WorkloadKind,
    object: &Value,
    keys: &AnnotationKeys,
) -> Result<WorkloadView, serde_json::Error> {
    Ok(crate::views::workload_view(&crate::kinds::Loaded::from_json(kind, object)?, keys))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_group() {
        let declared = reloader_core::model::WorkloadKind::declare(&[
            "group=apps.kruise.io,version=v1alpha1,kind=CloneSet,resource=clonesets,template=/spec/template"
                .into(),
        ])
        .unwrap();
        let enabled = EnabledKinds::of(&[WorkloadKind::ALL.as_slice(), &declared].concat());
        let workload_kind = |gvk: &GroupVersionKind| workload_kind(gvk, &enabled);
        let gvk = |group: &str, kind: &str| GroupVersionKind::gvk(group, "v1", kind);
        assert_eq!(workload_kind(&gvk("apps.kruise.io", "CloneSet")), Some(declared[0]));
        assert_eq!(workload_kind(&gvk("example.com", "CloneSet")), None);
        assert_eq!(workload_kind(&gvk("apps", "Deployment")), Some(WorkloadKind::Deployment));
        assert_eq!(workload_kind(&gvk("batch", "CronJob")), Some(WorkloadKind::CronJob));
        assert_eq!(workload_kind(&gvk("argoproj.io", "Rollout")), Some(WorkloadKind::Rollout));
        assert_eq!(
            workload_kind(&gvk("apps.openshift.io", "DeploymentConfig")),
            Some(WorkloadKind::DeploymentConfig)
        );
        assert_eq!(workload_kind(&gvk("", "Pod")), None);
        assert_eq!(workload_kind(&gvk("example.com", "Deployment")), None);
    }

    #[test]
    fn every_backend_builds_a_view_from_json() {
        let template = serde_json::json!({"metadata": {"annotations": {"team": "a"}},
            "spec": {"containers": [{"name": "app", "image": "app:1",
                "envFrom": [{"configMapRef": {"name": "app-config"}}]}]}});
        let keys = AnnotationKeys::default();
        for kind in WorkloadKind::ALL {
            let spec = match kind {
                WorkloadKind::CronJob => {
                    serde_json::json!({"schedule": "@hourly", "jobTemplate": {"spec": {"template": template}}})
                }
                _ => serde_json::json!({"selector": {"matchLabels": {"app": "x"}}, "template": template}),
            };
            let object = serde_json::json!({"metadata": {"name": "x", "namespace": "ns",
                "annotations": {"reloader.stakater.com/auto": "true"}}, "spec": spec});
            let view = view_of(kind, &object, &keys).unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(view.key.kind, kind);
            assert_eq!(&*view.key.namespace, "ns");
            assert_eq!(view.references.len(), 1, "{kind}");
            assert!(view.has_template, "{kind}");
        }
    }
}
