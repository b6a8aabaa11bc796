//! The vocabulary: resource and workload kinds, their keys, content hashes and references.

use std::fmt;

use crate::custom_kind::{CustomKind, CustomKindError};

/// The kind of a watched resource a workload can reload for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceKind {
    ConfigMap,
    Secret,
    /// A `SecretProviderClass`, whose content is read from its `SecretProviderClassPodStatus`.
    SecretProviderClass,
}

impl ResourceKind {
    /// Suffix of the env-var marker (`STAKATER_<NAME>_<SUFFIX>`) and the `type` of the annotation marker.
    pub fn marker_type(self) -> &'static str {
        match self {
            ResourceKind::ConfigMap => "CONFIGMAP",
            ResourceKind::Secret => "SECRET",
            ResourceKind::SecretProviderClass => "SECRETPROVIDERCLASS",
        }
    }

    pub(crate) fn from_marker_type(s: &str) -> Option<Self> {
        match s {
            "CONFIGMAP" => Some(ResourceKind::ConfigMap),
            "SECRET" => Some(ResourceKind::Secret),
            "SECRETPROVIDERCLASS" => Some(ResourceKind::SecretProviderClass),
            _ => None,
        }
    }

    /// Label used in metrics and logs (`configmaps`, `secrets`, `secretproviderclasses`).
    pub fn plural(self) -> &'static str {
        match self {
            ResourceKind::ConfigMap => "configmaps",
            ResourceKind::Secret => "secrets",
            ResourceKind::SecretProviderClass => "secretproviderclasses",
        }
    }
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ResourceKind::ConfigMap => "ConfigMap",
            ResourceKind::Secret => "Secret",
            ResourceKind::SecretProviderClass => "SecretProviderClass",
        })
    }
}

/// Every workload kind reloader can roll.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkloadKind {
    Deployment,
    DaemonSet,
    StatefulSet,
    CronJob,
    Job,
    /// argoproj.io/v1alpha1 Rollout.
    Rollout,
    /// apps.openshift.io/v1 DeploymentConfig.
    DeploymentConfig,
    /// A kind the user declared (`--custom-workload`).
    Custom(&'static CustomKind),
}

/// What the core knows of a kind (its API types live in the backends).
struct KindFacts {
    /// The kind as the API server names it.
    name: &'static str,
    /// See [`WorkloadKind::is_long_running`].
    long_running: bool,
    /// What a person may type instead of the name (`kubectl`'s short names and more).
    short_names: &'static [&'static str],
}

impl WorkloadKind {
    /// Every built-in kind (declared ones are the options').
    pub const ALL: [WorkloadKind; 7] = [
        WorkloadKind::Deployment,
        WorkloadKind::DaemonSet,
        WorkloadKind::StatefulSet,
        WorkloadKind::CronJob,
        WorkloadKind::Job,
        WorkloadKind::Rollout,
        WorkloadKind::DeploymentConfig,
    ];

    /// Every fact about a kind, in one place.
    fn facts(self) -> KindFacts {
        let (name, long_running, short_names): (_, _, &[_]) = match self {
            WorkloadKind::Deployment => ("Deployment", true, &["deploy"]),
            WorkloadKind::DaemonSet => ("DaemonSet", true, &["ds"]),
            WorkloadKind::StatefulSet => ("StatefulSet", true, &["sts"]),
            WorkloadKind::CronJob => ("CronJob", false, &["cj"]),
            WorkloadKind::Job => ("Job", false, &[]),
            WorkloadKind::Rollout => ("Rollout", true, &["ro"]),
            WorkloadKind::DeploymentConfig => ("DeploymentConfig", true, &["dc"]),
            // Its controller keeps pods on the template, as far as reloader can tell. A pod is
            // evicted only for a live change, never by a catch-up (it records no marker).
            WorkloadKind::Custom(custom) => {
                (&*custom.kind, custom.target != crate::custom_kind::PodTarget::Pod, &[])
            }
        };
        KindFacts { name, long_running, short_names }
    }

    pub fn as_str(self) -> &'static str {
        self.facts().name
    }

    /// Whether the kind keeps its pods running and converges them on its template, so that
    /// writing a marker it already should carry only brings it up to date. A Job or CronJob
    /// reload runs batch work again instead (recreates the Job, spawns one): only a live change
    /// may do that, never a start-up or leadership catch-up (docs/beyond-stakater.md §2).
    pub fn is_long_running(self) -> bool {
        self.facts().long_running
    }

    /// Parses a kind as typed by a person (`deployment`, `deploy`, `Deployment`, `deployments`, ...):
    /// any case, any number of trailing `s`; a built-in kind or one of `declared`.
    pub fn parse_loose(s: &str, declared: &[WorkloadKind]) -> Option<Self> {
        let stem = |name: &str| name.to_ascii_lowercase().trim_end_matches('s').to_owned();
        let typed = stem(s);
        WorkloadKind::ALL.iter().chain(declared).copied().find(|kind| {
            let facts = kind.facts();
            std::iter::once(facts.name)
                .chain(facts.short_names.iter().copied())
                .any(|name| stem(name) == typed)
        })
    }

    /// Parses every declaration (`--custom-workload`) and leaks each once (they live as long as
    /// the process); the same kind declared twice is an error.
    pub fn declare(declarations: &[String]) -> Result<Vec<WorkloadKind>, CustomKindError> {
        let mut kinds: Vec<WorkloadKind> = Vec::new();
        for declaration in declarations.iter().filter(|d| !d.trim().is_empty()) {
            let custom = CustomKind::parse(declaration)?;
            let twice = kinds
                .iter()
                .filter_map(|k| k.custom())
                .any(|c| c.group == custom.group && (c.kind == custom.kind || c.resource == custom.resource));
            if twice {
                return Err(CustomKindError {
                    declaration: declaration.clone(),
                    field: "kind",
                    value: custom.kind.to_string(),
                    reason: format!("{}.{} is declared twice", custom.resource, custom.group),
                });
            }
            kinds.push(WorkloadKind::Custom(Box::leak(Box::new(custom))));
        }
        Ok(kinds)
    }

    /// The declaration of a kind the user declared; `None` for a built-in kind.
    pub fn custom(self) -> Option<&'static CustomKind> {
        match self {
            WorkloadKind::Custom(custom) => Some(custom),
            _ => None,
        }
    }

    /// Pods as reload targets (`--reload-pods`, docs/beyond-stakater.md §14).
    pub fn pods() -> Self {
        WorkloadKind::Custom(CustomKind::pods())
    }

    /// Is this [`WorkloadKind::pods`]: reloaded by evicting the pod, never written?
    pub fn is_pods(self) -> bool {
        self.custom().is_some_and(|custom| custom.target == crate::custom_kind::PodTarget::Pod)
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A SHA-1 content hash, kept as 20 bytes (the hex form is only built when written or logged).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentHash(pub [u8; 20]);

impl ContentHash {
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses the lowercase (or uppercase) 40-digit hex form; anything else is `None`.
    pub fn from_hex(s: &str) -> Option<Self> {
        let mut out = [0u8; 20];
        hex::decode_to_slice(s.trim(), &mut out).ok()?;
        Some(ContentHash(out))
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentHash({})", self.to_hex())
    }
}

/// An object's `metadata.resourceVersion`, where it parses as the decimal number etcd-backed API
/// servers give (comparable within one API server, docs/behaviour.md §G). `0` and anything else
/// is `None`: the ordering of docs/behaviour.md §G then falls back to not replaying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceVersion(std::num::NonZeroU64);

impl ResourceVersion {
    pub fn parse(s: &str) -> Option<Self> {
        // `u64::from_str` takes a leading `+`; a resourceVersion never has one.
        if !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse::<std::num::NonZeroU64>().ok().map(ResourceVersion)
    }
}

impl fmt::Display for ResourceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An object's `metadata.uid`, kept in 16 bytes when it is a canonical lowercase UUID (what API
/// servers give); anything else is `None`, and a write that needs it reads the object instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Uid([u8; 16]);

impl Uid {
    pub fn parse(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
            return None;
        }
        let digits: String = s.split('-').collect();
        if digits.bytes().any(|c| c.is_ascii_uppercase()) {
            return None;
        }
        let mut out = [0u8; 16];
        hex::decode_to_slice(&digits, &mut out).ok()?;
        Some(Uid(out))
    }
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = hex::encode(self.0);
        write!(f, "{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
    }
}

/// Identifies a ConfigMap, Secret or SecretProviderClass.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey {
    pub kind: ResourceKind,
    pub namespace: Box<str>,
    pub name: Box<str>,
}

impl ResourceKey {
    pub fn new(kind: ResourceKind, namespace: &str, name: &str) -> Self {
        ResourceKey { kind, namespace: namespace.into(), name: name.into() }
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// Identifies a workload.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkloadKey {
    pub kind: WorkloadKind,
    pub namespace: Box<str>,
    pub name: Box<str>,
}

impl WorkloadKey {
    pub fn new(kind: WorkloadKind, namespace: &str, name: &str) -> Self {
        WorkloadKey { kind, namespace: namespace.into(), name: name.into() }
    }
}

impl fmt::Display for WorkloadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// How a pod spec uses a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum RefVia {
    /// `volumes[].configMap` / `volumes[].secret`.
    Volume,
    /// `volumes[].projected.sources[]`.
    Projected,
    /// `volumes[].csi.volumeAttributes.secretProviderClass`.
    Csi,
    /// `env[].valueFrom.configMapKeyRef` / `secretKeyRef`.
    EnvValueFrom,
    /// `envFrom[].configMapRef` / `secretRef`.
    EnvFrom,
}

impl RefVia {
    /// A volume of the pod spec (plain, projected or CSI), as opposed to an env reference.
    pub(crate) fn is_volume(self) -> bool {
        matches!(self, RefVia::Volume | RefVia::Projected | RefVia::Csi)
    }
}

/// One use of a resource by a pod spec.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    pub(crate) kind: ResourceKind,
    pub(crate) name: Box<str>,
    pub(crate) via: RefVia,
    /// The container using it (for volumes: the first container mounting the volume), if any.
    pub(crate) container: Option<ContainerRef>,
}

/// A container of the pod spec, by position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ContainerRef {
    Regular(u16),
    Init(u16),
}

/// How a reload is recorded in the pod template (docs/compatibility.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ReloadStrategy {
    /// `STAKATER_<NAME>_<TYPE>` env var on one container.
    #[default]
    EnvVars,
    /// The `reloader.stakater.com/last-reloaded-from` pod-template annotation.
    Annotations,
}

impl ReloadStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            ReloadStrategy::EnvVars => "env-vars",
            ReloadStrategy::Annotations => "annotations",
        }
    }
}

/// Objects with more keys than this keep no per-key digests: a key filter then hashes the whole
/// object, so any change of it counts as a change of the filtered keys (docs/beyond-stakater.md
/// §10). Bounds what the index keeps per object to about 1,024 × (56 bytes + key length).
pub const MAX_KEY_DIGESTS: usize = 1024;

/// Per-key digests of a ConfigMap/Secret, sorted by key: what a filter hashes. None are kept for
/// an object of more than [`MAX_KEY_DIGESTS`] keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDigests(Digests);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Digests {
    Kept(Box<[(Box<str>, ContentHash)]>),
    /// Over the limit: only the number of keys.
    Omitted {
        keys: usize,
    },
}

impl Default for KeyDigests {
    fn default() -> Self {
        KeyDigests(Digests::Kept(Box::default()))
    }
}

impl KeyDigests {
    /// From `(key, digest)` pairs in any order.
    pub fn new(mut digests: Vec<(Box<str>, ContentHash)>) -> Self {
        digests.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        KeyDigests(Digests::Kept(digests.into_boxed_slice()))
    }

    /// The digests of an object of `keys` keys, more than [`MAX_KEY_DIGESTS`]: none kept.
    pub fn omitted(keys: usize) -> Self {
        KeyDigests(Digests::Omitted { keys })
    }

    /// False for an object over [`MAX_KEY_DIGESTS`] keys, whose digests were not kept.
    pub fn kept(&self) -> bool {
        matches!(self.0, Digests::Kept(_))
    }

    /// The keys whose digests are kept (none over the limit).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries().iter().map(|(k, _)| &**k)
    }

    /// The kept digests (empty over the limit).
    pub(crate) fn entries(&self) -> &[(Box<str>, ContentHash)] {
        match &self.0 {
            Digests::Kept(digests) => digests,
            Digests::Omitted { .. } => &[],
        }
    }
}

/// One key of a resource the pod spec reads (`key: None`: the resource is used whole).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyUse {
    pub(crate) kind: ResourceKind,
    pub(crate) name: Box<str>,
    pub(crate) key: Option<Box<str>>,
}

#[cfg(test)]
mod tests {
    use super::WorkloadKind;

    #[test]
    fn kinds_parse_by_name_short_name_and_plural_in_any_case() {
        let cases = [
            ("deployment", Some(WorkloadKind::Deployment)),
            ("Deployments", Some(WorkloadKind::Deployment)),
            ("deploy", Some(WorkloadKind::Deployment)),
            ("DaemonSet", Some(WorkloadKind::DaemonSet)),
            ("ds", Some(WorkloadKind::DaemonSet)),
            ("d", Some(WorkloadKind::DaemonSet)),
            ("statefulsets", Some(WorkloadKind::StatefulSet)),
            ("sts", Some(WorkloadKind::StatefulSet)),
            ("st", Some(WorkloadKind::StatefulSet)),
            ("cronjob", Some(WorkloadKind::CronJob)),
            ("CJ", Some(WorkloadKind::CronJob)),
            ("jobs", Some(WorkloadKind::Job)),
            ("rollout", Some(WorkloadKind::Rollout)),
            ("ro", Some(WorkloadKind::Rollout)),
            ("deploymentconfig", Some(WorkloadKind::DeploymentConfig)),
            ("dc", Some(WorkloadKind::DeploymentConfig)),
            ("pod", None),
            ("", None),
            ("s", None),
            ("j", None),
        ];
        for (typed, kind) in cases {
            assert_eq!(WorkloadKind::parse_loose(typed, &[]), kind, "{typed:?}");
        }
    }

    const CLONESET: &str =
        "group=apps.kruise.io,version=v1alpha1,kind=CloneSet,resource=clonesets,template=/spec/template";

    #[test]
    fn declare_leaks_each_kind_once_and_refuses_a_kind_twice() {
        let kinds = WorkloadKind::declare(&[
            CLONESET.to_owned(),
            " ".to_owned(),
            "group=keda.sh,version=v1alpha1,kind=ScaledJob,resource=scaledjobs,template=/spec/jobTargetRef/template"
                .to_owned(),
        ])
        .unwrap();
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, ["CloneSet", "ScaledJob"]);
        assert!(kinds.iter().all(|k| k.custom().is_some() && k.is_long_running()));

        for twice in [
            CLONESET.replace("v1alpha1", "v1beta1"),
            CLONESET.replace("kind=CloneSet", "kind=Other"),
            CLONESET.replace("resource=clonesets", "resource=others"),
        ] {
            let error = WorkloadKind::declare(&[CLONESET.to_owned(), twice.clone()]).expect_err(&twice);
            assert!(error.reason.contains("declared twice"), "{twice}: {error}");
            assert_eq!(error.declaration, twice);
        }
        // The same kind name in another group is another kind.
        assert_eq!(
            WorkloadKind::declare(&[CLONESET.to_owned(), CLONESET.replace("apps.kruise.io", "example.com")])
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn declared_kinds_parse_loosely_like_built_in_ones() {
        let kinds = WorkloadKind::declare(&[CLONESET.to_owned()]).unwrap();
        for typed in ["CloneSet", "cloneset", "clonesets", "CLONESETS"] {
            assert_eq!(WorkloadKind::parse_loose(typed, &kinds), Some(kinds[0]), "{typed}");
        }
        assert_eq!(WorkloadKind::parse_loose("cloneset", &[]), None);
        assert_eq!(WorkloadKind::parse_loose("deploy", &kinds), Some(WorkloadKind::Deployment));
    }
}
