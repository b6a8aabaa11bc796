//! Workload kinds declared by the user (`--custom-workload`, docs/beyond-stakater.md §12): any
//! namespaced kind whose objects hold a pod template at a JSON pointer, reloaded like the
//! built-in kinds; or whose operator copies only a map of annotations to its pods, where the
//! markers are then written. A declaration reads
//!
//! ```text
//! group=apps.kruise.io,version=v1alpha1,kind=CloneSet,resource=clonesets,template=/spec/template
//! group=example.com,version=v1,kind=Cluster,resource=clusters,annotations=/spec/podAnnotations
//! ```
//!
//! Declarations come from the command line, so they are few and live as long as the process:
//! `WorkloadKind::declare` leaks each once into a `&'static CustomKind`, which keeps
//! `WorkloadKind` `Copy` and its names `&'static str` like the built-in kinds'.

use std::fmt;

use crate::selector::{check_dns_label, check_dns_subdomain};

/// One declared kind: its API identity and where its objects keep their pod template.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CustomKind {
    pub group: Box<str>,
    pub version: Box<str>,
    pub kind: Box<str>,
    /// The resource name (plural) in URLs and RBAC rules.
    pub resource: Box<str>,
    /// Where reloader finds references and writes markers in an object of the kind.
    pub target: PodTarget,
}

/// What of its pods an object of a declared kind holds, at a JSON pointer (RFC 6901).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PodTarget {
    /// A pod template (`template=`): references are discovered in it, markers written into it.
    Template(JsonPointer),
    /// A map of annotations the kind's operator copies to its pods (`annotations=`): markers are
    /// written there as annotations, whatever the strategy; references come only from the
    /// reload annotations (there is no pod spec to discover them in).
    Annotations(JsonPointer),
    /// The objects are pods, reload targets themselves (`--reload-pods`, docs/beyond-stakater.md
    /// §14): never declared, never written; a pod to reload is evicted so its owner replaces it.
    Pod,
}

impl PodTarget {
    /// The pointer, escaped; the object itself (`""`) for a pod.
    pub fn pointer(&self) -> &str {
        match self {
            PodTarget::Template(pointer) | PodTarget::Annotations(pointer) => pointer.as_str(),
            PodTarget::Pod => "",
        }
    }

    /// The declaration's field name.
    pub fn field(&self) -> &'static str {
        match self {
            PodTarget::Template(_) => "template",
            PodTarget::Annotations(_) => "annotations",
            PodTarget::Pod => "pod",
        }
    }
}

impl CustomKind {
    /// Parses and checks one declaration; the error names the declaration and the field.
    pub fn parse(declaration: &str) -> Result<Self, CustomKindError> {
        let fail = |field: &'static str, value: &str, reason: String| CustomKindError {
            declaration: declaration.to_owned(),
            field,
            value: value.to_owned(),
            reason,
        };
        let mut fields: [(&'static str, Option<&str>); 6] = [
            ("group", None),
            ("version", None),
            ("kind", None),
            ("resource", None),
            ("template", None),
            ("annotations", None),
        ];
        for pair in declaration.split(',').map(str::trim).filter(|pair| !pair.is_empty()) {
            let Some((name, value)) = pair.split_once('=') else {
                return Err(fail("", pair, "expected field=value".into()));
            };
            let (name, value) = (name.trim(), value.trim());
            let Some((field, slot)) = fields.iter_mut().find(|(field, _)| *field == name) else {
                return Err(fail(
                    "",
                    name,
                    "unknown field: expected group, version, kind, resource, and template or annotations"
                        .into(),
                ));
            };
            if slot.replace(value).is_some() {
                return Err(fail(field, value, "given twice".into()));
            }
        }
        let [group, version, kind, resource, template, annotations] = fields;
        if let Some((field, _)) = [group, version, kind, resource].iter().find(|(_, value)| value.is_none()) {
            return Err(fail(field, "", "missing: every declaration names it".into()));
        }
        let [group, version, kind, resource] =
            [group, version, kind, resource].map(|(_, v)| v.unwrap_or_default());
        let target = match (template.1, annotations.1) {
            (Some(pointer), None) => PodTarget::Template(
                JsonPointer::parse(pointer).map_err(|why| fail("template", pointer, why))?,
            ),
            (None, Some(pointer)) => PodTarget::Annotations(
                JsonPointer::parse(pointer).map_err(|why| fail("annotations", pointer, why))?,
            ),
            (Some(_), Some(pointer)) => {
                return Err(fail("annotations", pointer, "give template or annotations, not both".into()));
            }
            (None, None) => {
                return Err(fail(
                    "template",
                    "",
                    "missing: every declaration names a template (or an annotations map)".into(),
                ));
            }
        };
        check_dns_subdomain(group).map_err(|why| fail("group", group, format!("not an API group: {why}")))?;
        check_dns_label(version)
            .map_err(|why| fail("version", version, format!("not an API version: {why}")))?;
        check_kind_name(kind).map_err(|why| fail("kind", kind, why))?;
        check_dns_label(resource)
            .map_err(|why| fail("resource", resource, format!("not a resource name: {why}")))?;
        Ok(CustomKind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            resource: resource.into(),
            target,
        })
    }

    /// Pods as reload targets (`--reload-pods`): the one kind of this shape, made once.
    pub fn pods() -> &'static CustomKind {
        static PODS: std::sync::OnceLock<&'static CustomKind> = std::sync::OnceLock::new();
        PODS.get_or_init(|| {
            Box::leak(Box::new(CustomKind {
                group: "".into(),
                version: "v1".into(),
                kind: "Pod".into(),
                resource: "pods".into(),
                target: PodTarget::Pod,
            }))
        })
    }

    /// `group/version`, as in `apiVersion` (`version` alone in the core group).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The declaration as the flag takes it (round-trips through [`CustomKind::parse`]).
    pub fn declaration(&self) -> String {
        format!(
            "group={},version={},kind={},resource={},{}={}",
            self.group,
            self.version,
            self.kind,
            self.resource,
            self.target.field(),
            self.target.pointer()
        )
    }
}

/// A declaration the controller cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--custom-workload {declaration:?}: {}{value:?}: {reason}", field_prefix(field))]
pub struct CustomKindError {
    pub declaration: String,
    /// The field at fault (empty when the entry itself is malformed).
    pub field: &'static str,
    pub value: String,
    pub reason: String,
}

fn field_prefix(field: &str) -> String {
    if field.is_empty() { String::new() } else { format!("{field}=") }
}

/// A kind name as the API server takes it: an upper-case letter, then letters and digits.
fn check_kind_name(kind: &str) -> Result<(), String> {
    let mut chars = kind.chars();
    let starts_upper = chars.next().is_some_and(|c| c.is_ascii_uppercase());
    if starts_upper && chars.all(|c| c.is_ascii_alphanumeric()) {
        Ok(())
    } else {
        Err("not a kind name: expected an upper-case letter, then letters and digits (CloneSet)".into())
    }
}

/// An RFC 6901 JSON pointer into an object's `spec` (escaped form: `~0` is `~`, `~1` is `/`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JsonPointer(Box<str>);

impl JsonPointer {
    /// Checks a pointer to a pod template or an annotations map: under `/spec` (what the kind's controller reads;
    /// `metadata` and `status` are never a template), every token non-empty, escapes valid.
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some(rest) = text.strip_prefix('/') else {
            return Err("not a JSON pointer: expected a leading '/' (/spec/template)".into());
        };
        let tokens: Vec<&str> = rest.split('/').collect();
        if tokens.iter().any(|token| token.is_empty()) {
            return Err("a JSON pointer with an empty token (a doubled or trailing '/')".into());
        }
        if let Some(token) = tokens.iter().find(|token| !escapes_are_valid(token)) {
            return Err(format!("token {token:?}: '~' must be followed by 0 or 1 (RFC 6901)"));
        }
        if tokens[0] != "spec" || tokens.len() < 2 {
            return Err("must point inside the object's spec (/spec/...)".into());
        }
        Ok(JsonPointer(text.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn escapes_are_valid(token: &str) -> bool {
    let bytes = token.as_bytes();
    bytes.iter().enumerate().all(|(i, &b)| b != b'~' || matches!(bytes.get(i + 1), Some(b'0' | b'1')))
}

impl fmt::Display for JsonPointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests;
