//! RFC 6902 JSON patches of a pod template, for kinds that do not accept strategic merge (CRDs
//! answer 415): precise operations on the touched env entries and the marker annotation only,
//! guarded by a `test` of `metadata.resourceVersion` so index-based operations can never land on
//! an object that changed since it was read (the server then rejects the whole patch with 422
//! "Testing value /metadata/resourceVersion failed"; re-read and retry).

use std::borrow::Cow;

use k8s_openapi::api::core::v1::{EnvVar, PodTemplateSpec};
use serde_json::{Value, json};

use crate::annotations::AnnotationKeys;
use crate::markers::{MarkerChange, template_annotation, template_containers, with_changes};

/// Escapes one reference token of a JSON pointer (RFC 6901: `~` → `~0`, `/` → `~1`).
pub(crate) fn escape_pointer_token(token: &str) -> Cow<'_, str> {
    if token.contains(['~', '/']) {
        Cow::Owned(token.replace('~', "~0").replace('/', "~1"))
    } else {
        Cow::Borrowed(token)
    }
}

/// The `test` operation that makes a patch apply only to `resource_version`. An empty version
/// (an object that was never read from a server) fails the test, so it never writes blindly.
pub(crate) fn resource_version_test(resource_version: &str) -> Value {
    json!({"op": "test", "path": "/metadata/resourceVersion", "value": resource_version})
}

/// The JSON patch that applies `changes` to `template`, found at JSON pointer `prefix` in the
/// object (`/spec/template` for DeploymentConfigs and Rollouts), or `None` if the template
/// already records them all. The first operation tests `resource_version`; missing parent
/// arrays and objects are created with `add`; other containers and env entries are untouched.
pub fn template_json_patch(
    template: &PodTemplateSpec,
    prefix: &str,
    resource_version: &str,
    changes: &[MarkerChange],
    keys: &AnnotationKeys,
    now_unix: i64,
) -> Option<Value> {
    let after = with_changes(template, changes, keys, now_unix)?;
    let mut ops = vec![resource_version_test(resource_version)];
    for (i, (before, after)) in
        template_containers(template).iter().zip(template_containers(&after)).enumerate()
    {
        let env_path = format!("{prefix}/spec/containers/{i}/env");
        env_ops(&env_path, before.env.as_deref().unwrap_or_default(), after.env.as_deref(), &mut ops);
    }
    annotation_ops(template, &after, prefix, &keys.last_reloaded_from, &mut ops);
    Some(Value::Array(ops))
}

/// Operations turning one container's `before` env list into `after`. `apply_to_template` only
/// edits entries in place, removes every entry of a name, or appends a name not present yet, so
/// pairing the k-th entry of a name before with the k-th entry of that name after is exact.
fn env_ops(path: &str, before: &[EnvVar], after: Option<&[EnvVar]>, ops: &mut Vec<Value>) {
    let after = after.unwrap_or_default();
    if before == after {
        return;
    }
    if before.is_empty() {
        // `add` on an existing member replaces it, so this also covers `env: []` and `env: null`.
        ops.push(json!({"op": "add", "path": path, "value": after}));
        return;
    }
    let mut removed = Vec::new();
    for (j, entry) in before.iter().enumerate() {
        let occurrence = nth_occurrence(before, j);
        match after.iter().filter(|e| e.name == entry.name).nth(occurrence) {
            None => removed.push(j),
            Some(new) if new != entry => {
                ops.push(json!({"op": "replace", "path": format!("{path}/{j}"), "value": new}));
            }
            Some(_) => {}
        }
    }
    // Highest index first, so each removal leaves the indexes of the next ones valid.
    for j in removed.into_iter().rev() {
        ops.push(json!({"op": "remove", "path": format!("{path}/{j}")}));
    }
    for (k, entry) in after.iter().enumerate() {
        let occurrence = nth_occurrence(after, k);
        if before.iter().filter(|e| e.name == entry.name).count() <= occurrence {
            ops.push(json!({"op": "add", "path": format!("{path}/-"), "value": entry}));
        }
    }
}

/// How many entries before `list[index]` have its name.
fn nth_occurrence(list: &[EnvVar], index: usize) -> usize {
    list[..index].iter().filter(|e| e.name == list[index].name).count()
}

fn annotation_ops(
    before: &PodTemplateSpec,
    after: &PodTemplateSpec,
    prefix: &str,
    key: &str,
    ops: &mut Vec<Value>,
) {
    let Some(value) = template_annotation(after, key) else { return };
    let current = template_annotation(before, key);
    if current == Some(value) {
        return;
    }
    let metadata = before.metadata.as_ref();
    let op = if metadata.is_none() {
        json!({"op": "add", "path": format!("{prefix}/metadata"), "value": {"annotations": {key: value}}})
    } else if metadata.and_then(|m| m.annotations.as_ref()).is_none() {
        json!({"op": "add", "path": format!("{prefix}/metadata/annotations"), "value": {key: value}})
    } else {
        let path = format!("{prefix}/metadata/annotations/{}", escape_pointer_token(key));
        let verb = if current.is_some() { "replace" } else { "add" };
        json!({"op": verb, "path": path, "value": value})
    };
    ops.push(op);
}

#[cfg(test)]
mod tests;
