//! The registry of workload kinds: each kind is declared once, in [`visit`], as its backend type
//! and the facts the type does not tell (what switches the kind on, the RBAC verbs the code uses,
//! where admission finds the pod template); its API group, version and plural come from the type.
//! Code that works with every kind is written once, generic over the backend type, as a
//! [`KindVisitor`]: the watches, the typed reads and writes, the reading of an admission request's
//! object. Which kinds a run watches is `discovery`'s to decide. Adding a kind touches this
//! registry and its backend only. A kind the user declares (`--custom-workload`) has no type of
//! its own: it is read and written as a `DynamicObject` and seen through the CRD backend's
//! `CustomObject`, the registry entry built from its declaration.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;

use futures::future::BoxFuture;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{Api, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind, Status};
use kube::{Client, Resource};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::custom_kind::{CustomKind, PodTarget};
use reloader_core::model::{WorkloadKey, WorkloadKind};
use reloader_core::options::Options;
use reloader_core::skeleton::Skeleton;
use reloader_core::workload::{PatchKind, Precondition, Workload};
use reloader_workload_apps::{AppsKind, AppsWorkload};
use reloader_workload_argo::Rollout;
use reloader_workload_batch::{CronJobWorkload, JobWorkload, origin};
use reloader_workload_crd::{CrdObject, CrdSpec, CustomObject};
use reloader_workload_openshift::DeploymentConfig;
use serde::de::DeserializeOwned;

use crate::job_origins::JobOrigin;

/// What switches a kind on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// Served by every API server: on unless ignored.
    BuiltIn,
    /// A CRD turned on by a flag; the flag set but the CRD missing stops start-up.
    Flag(KindFlag),
    /// A CRD turned on by a flag, or detected when the flag is left empty.
    FlagOrDetected(KindFlag),
    /// Declared by the user (`--custom-workload`); watched once its CRD is served.
    Declared,
    /// Pods as reload targets: on with `--reload-pods`, watched by their label only.
    ReloadPods,
}

/// A flag that switches a CRD-served kind on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindFlag {
    ArgoRollouts,
    OpenShift,
}

impl KindFlag {
    /// The flag as typed, without its value.
    pub fn name(self) -> &'static str {
        match self {
            KindFlag::ArgoRollouts => "--is-Argo-Rollouts",
            KindFlag::OpenShift => "--is-openshift",
        }
    }

    /// The flag's value; `None` when left empty (the kind is then detected).
    pub(crate) fn value(self, options: &Options) -> Option<bool> {
        match self {
            KindFlag::ArgoRollouts => Some(options.argo_rollouts),
            KindFlag::OpenShift => options.openshift,
        }
    }
}

/// Everything the controller knows about one workload kind.
#[derive(Debug, Clone, Copy)]
pub struct KindInfo {
    pub kind: WorkloadKind,
    /// API group (`""` only for pods as reload targets).
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    /// Where an object of the kind keeps its pod template, as a JSON pointer (admission patches).
    pub template_pointer: &'static str,
    pub availability: Availability,
    /// The RBAC verbs the controller uses on this kind (watch, read fresh, write).
    pub verbs: &'static [&'static str],
}

impl KindInfo {
    /// `group/version`, as in `apiVersion` (`version` alone in the core group).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The dynamic API type (reads of metadata alone go through it).
    pub fn api_resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind.as_str()),
            self.plural,
        )
    }
}

const POD_TEMPLATE: &str = "/spec/template";
const READ: [&str; 3] = ["get", "list", "watch"];
/// Pods as reload targets are watched, never read one by one nor written (they are evicted).
const WATCH: [&str; 2] = ["list", "watch"];
const READ_PATCH: [&str; 4] = ["get", "list", "watch", "patch"];
const READ_CREATE_DELETE: [&str; 5] = ["get", "list", "watch", "create", "delete"];

/// The registry: runs `visitor` with the registry entry of `kind`, whose type names the kind's
/// backend type.
pub(crate) fn visit<V: KindVisitor>(kind: WorkloadKind, visitor: V) -> V::Output {
    use Availability::{BuiltIn, Flag, FlagOrDetected};
    match kind {
        WorkloadKind::Custom(declared) => visitor.visit(&Registered::<DynamicObject>::declared(declared)),
        WorkloadKind::Deployment => {
            visitor.visit(&const { Registered::<Deployment>::new(POD_TEMPLATE, BuiltIn, &READ_PATCH) })
        }
        WorkloadKind::DaemonSet => {
            visitor.visit(&const { Registered::<DaemonSet>::new(POD_TEMPLATE, BuiltIn, &READ_PATCH) })
        }
        WorkloadKind::StatefulSet => {
            visitor.visit(&const { Registered::<StatefulSet>::new(POD_TEMPLATE, BuiltIn, &READ_PATCH) })
        }
        // A CronJob reloads by creating a Job from its template (the Job rule covers it).
        WorkloadKind::CronJob => visitor
            .visit(&const { Registered::<CronJob>::new("/spec/jobTemplate/spec/template", BuiltIn, &READ) }),
        // A Job reloads by being deleted and recreated.
        WorkloadKind::Job => {
            visitor.visit(&const { Registered::<Job>::new(POD_TEMPLATE, BuiltIn, &READ_CREATE_DELETE) })
        }
        WorkloadKind::Rollout => visitor.visit(
            &const { Registered::<Rollout>::new(POD_TEMPLATE, Flag(KindFlag::ArgoRollouts), &READ_PATCH) },
        ),
        WorkloadKind::DeploymentConfig => visitor.visit(
            &const {
                Registered::<DeploymentConfig>::new(
                    POD_TEMPLATE,
                    FlagOrDetected(KindFlag::OpenShift),
                    &READ_PATCH,
                )
            },
        ),
    }
}

/// A registry entry: a kind's backend type `K`, and what the controller knows of the kind.
pub(crate) struct Registered<K> {
    pub(crate) info: KindInfo,
    backend: PhantomData<fn() -> K>,
}

impl Registered<DynamicObject> {
    /// The entry of a declared kind: what the declaration says, the verbs of a patched kind.
    /// Pods as reload targets are made the same way, but only watched.
    fn declared(declared: &'static CustomKind) -> Self {
        let pods = declared.target == PodTarget::Pod;
        let info = KindInfo {
            kind: WorkloadKind::Custom(declared),
            group: &declared.group,
            version: &declared.version,
            plural: &declared.resource,
            // For an annotations map: where the map is.
            template_pointer: declared.target.pointer(),
            availability: if pods { Availability::ReloadPods } else { Availability::Declared },
            verbs: if pods { &WATCH } else { &READ_PATCH },
        };
        Registered { info, backend: PhantomData }
    }
}

impl<K: BuiltInKind> Registered<K> {
    /// The kind, its API group, version and plural are `K`'s. Read from `k8s_openapi::Resource`,
    /// which `kube::Resource` is implemented from, for `&'static` values in a `const`.
    const fn new(
        template_pointer: &'static str,
        availability: Availability,
        verbs: &'static [&'static str],
    ) -> Self {
        let info = KindInfo {
            kind: K::WORKLOAD_KIND,
            group: K::GROUP,
            version: K::VERSION,
            plural: K::URL_PATH_SEGMENT,
            template_pointer,
            availability,
            verbs,
        };
        Registered { info, backend: PhantomData }
    }
}

/// Code written once for every kind, generic over the kind's backend type; [`visit`] runs it.
pub(crate) trait KindVisitor {
    type Output;
    fn visit<K: KindObject>(self, kind: &Registered<K>) -> Self::Output;
}

/// A workload kind's type on the wire, as the controller reads, writes and sees its objects.
pub(crate) trait KindObject:
    Resource + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static
{
    /// The API of `info`'s kind in `namespace`, or in all of them.
    fn api(client: &Client, namespace: Option<&str>, info: &KindInfo) -> Api<Self>;

    /// The object as its backend type, ready to be seen as a core `Workload`.
    fn into_loaded(self, kind: WorkloadKind) -> Loaded;

    /// The object a view's skeleton stands for, for the kinds whose writes can be built from it;
    /// `None` for Jobs and CronJobs, whose writes copy the whole template (they read it).
    fn loaded_from_skeleton(kind: WorkloadKind, skeleton: Skeleton) -> Option<Loaded>;

    /// What the object offers as the origin of a Job a reload creates (Jobs and CronJobs only).
    fn job_origin(&self, _keys: &AnnotationKeys) -> Option<JobOrigin> {
        None
    }
}

impl<K: BuiltInKind> KindObject for K {
    fn api(client: &Client, namespace: Option<&str>, _: &KindInfo) -> Api<Self> {
        match namespace {
            Some(namespace) => Api::namespaced(client.clone(), namespace),
            None => Api::all(client.clone()),
        }
    }

    fn into_loaded(self, _: WorkloadKind) -> Loaded {
        Loaded::new(self)
    }

    fn loaded_from_skeleton(_: WorkloadKind, skeleton: Skeleton) -> Option<Loaded> {
        K::from_skeleton(skeleton).map(Loaded::new)
    }

    fn job_origin(&self, keys: &AnnotationKeys) -> Option<JobOrigin> {
        BuiltInKind::job_origin(self, keys)
    }
}

/// A declared kind travels as untyped JSON; its backend type reads it by the declaration.
impl KindObject for DynamicObject {
    fn api(client: &Client, namespace: Option<&str>, info: &KindInfo) -> Api<Self> {
        let resource = info.api_resource();
        match namespace {
            Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
            None => Api::all_with(client.clone(), &resource),
        }
    }

    fn into_loaded(self, kind: WorkloadKind) -> Loaded {
        let declared = kind.custom().expect("only declared kinds are read as DynamicObject");
        Loaded(Box::new(CustomObject::read(declared, self.metadata, &self.data)))
    }

    fn loaded_from_skeleton(kind: WorkloadKind, skeleton: Skeleton) -> Option<Loaded> {
        let declared = kind.custom().expect("only declared kinds are read as DynamicObject");
        Some(Loaded(Box::new(CustomObject::from_skeleton(declared, skeleton))))
    }
}

/// A built-in kind's backend type: the kind is its type's.
pub(crate) trait BuiltInKind:
    k8s_openapi::Resource<Scope = NamespaceResourceScope>
    + Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + fmt::Debug
    + Send
    + Sync
    + 'static
{
    const WORKLOAD_KIND: WorkloadKind;

    /// Calls `f` with the object seen as a core `Workload`.
    fn with_workload<R>(&self, f: impl FnOnce(&dyn Workload) -> R) -> R;

    /// The object a view's skeleton stands for, for the kinds whose writes can be built from it;
    /// `None` for Jobs and CronJobs, whose writes copy the whole template (they read it).
    fn from_skeleton(skeleton: Skeleton) -> Option<Self>;

    /// See [`KindObject::job_origin`].
    fn job_origin(&self, _keys: &AnnotationKeys) -> Option<JobOrigin> {
        None
    }
}

/// The apps/v1 kinds share one backend, generic over [`AppsKind`]. One `impl` each: a blanket one
/// over `AppsKind` would overlap the CRD kinds' in the compiler's eyes.
macro_rules! apps_kind_object {
    ($($kind:ty),*) => {$(
        impl BuiltInKind for $kind {
            const WORKLOAD_KIND: WorkloadKind = <$kind as AppsKind>::WORKLOAD_KIND;

            fn with_workload<R>(&self, f: impl FnOnce(&dyn Workload) -> R) -> R {
                f(&AppsWorkload(self))
            }

            fn from_skeleton(skeleton: Skeleton) -> Option<Self> {
                Some(AppsKind::from_skeleton(skeleton))
            }
        }
    )*};
}
apps_kind_object!(Deployment, DaemonSet, StatefulSet);

impl BuiltInKind for CronJob {
    const WORKLOAD_KIND: WorkloadKind = WorkloadKind::CronJob;

    fn with_workload<R>(&self, f: impl FnOnce(&dyn Workload) -> R) -> R {
        f(&CronJobWorkload(self))
    }

    fn from_skeleton(_: Skeleton) -> Option<Self> {
        None
    }

    fn job_origin(&self, keys: &AnnotationKeys) -> Option<JobOrigin> {
        let (uid, digest) = origin::cron_job_digest(self, keys)?;
        Some(JobOrigin::CronJob { uid, digest })
    }
}

impl BuiltInKind for Job {
    const WORKLOAD_KIND: WorkloadKind = WorkloadKind::Job;

    fn with_workload<R>(&self, f: impl FnOnce(&dyn Workload) -> R) -> R {
        f(&JobWorkload(self))
    }

    fn from_skeleton(_: Skeleton) -> Option<Self> {
        None
    }

    fn job_origin(&self, keys: &AnnotationKeys) -> Option<JobOrigin> {
        Some(JobOrigin::Job(origin::recreated_job_digest(self, keys)))
    }
}

impl<S: CrdSpec + Send + Sync + 'static> BuiltInKind for CrdObject<S> {
    const WORKLOAD_KIND: WorkloadKind = S::WORKLOAD_KIND;

    fn with_workload<R>(&self, f: impl FnOnce(&dyn Workload) -> R) -> R {
        f(self)
    }

    fn from_skeleton(skeleton: Skeleton) -> Option<Self> {
        Some(CrdObject::from_skeleton(skeleton))
    }
}

/// The registry entry of `kind`.
pub fn info(kind: WorkloadKind) -> KindInfo {
    struct Info;
    impl KindVisitor for Info {
        type Output = KindInfo;
        fn visit<K: KindObject>(self, kind: &Registered<K>) -> KindInfo {
            kind.info
        }
    }
    visit(kind, Info)
}

/// Every built-in kind, in `WorkloadKind::ALL` order (for the chart's RBAC checks).
pub fn all() -> impl Iterator<Item = KindInfo> {
    WorkloadKind::ALL.into_iter().map(info)
}

/// The built-in or `declared` kind an API group and kind name denote (any version).
pub(crate) fn by_group_kind(
    group: &str,
    kind: &str,
    declared: impl IntoIterator<Item = WorkloadKind>,
) -> Option<WorkloadKind> {
    all()
        .chain(declared.into_iter().filter_map(|k| k.custom().map(|_| info(k))))
        .find(|k| k.group == group && k.kind.as_str() == kind)
        .map(|k| k.kind)
}

/// Checks the declared kinds against the built-in ones: a built-in kind needs no declaration,
/// and its resource cannot be declared again.
pub(crate) fn check_declared(declared: &[WorkloadKind]) -> Result<(), DeclaredKindError> {
    for &kind in declared {
        let custom = info(kind);
        if let Some(built_in) = all().find(|b| {
            b.group == custom.group && (b.kind.as_str() == custom.kind.as_str() || b.plural == custom.plural)
        }) {
            let declaration = kind.custom().map(CustomKind::declaration).unwrap_or_default();
            return Err(DeclaredKindError::BuiltIn { declaration, built_in: built_in.kind });
        }
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum DeclaredKindError {
    #[error("--custom-workload {declaration:?}: {built_in} is built in: it needs no declaration")]
    BuiltIn { declaration: String, built_in: WorkloadKind },
}

/// The dynamic API type of any workload kind.
pub(crate) fn api_resource(kind: WorkloadKind) -> ApiResource {
    info(kind).api_resource()
}

/// SecretProviderClassPodStatus (CSI integration): watched as a resource, not a workload.
pub(crate) fn spc_pod_status_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("secrets-store.csi.x-k8s.io", "v1", "SecretProviderClassPodStatus"),
        "secretproviderclasspodstatuses",
    )
}

/// SecretProviderClass (CSI integration): watched for its `ignore`/`match` annotations only.
pub(crate) fn spc_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("secrets-store.csi.x-k8s.io", "v1", "SecretProviderClass"),
        "secretproviderclasses",
    )
}

/// The kinds this run watches.
#[derive(Debug, Clone)]
pub(crate) struct EnabledKinds(Vec<WorkloadKind>);

impl EnabledKinds {
    pub(crate) fn of(kinds: &[WorkloadKind]) -> Self {
        EnabledKinds(kinds.to_vec())
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = WorkloadKind> + '_ {
        self.0.iter().copied()
    }

    pub(crate) fn contains(&self, kind: WorkloadKind) -> bool {
        self.0.contains(&kind)
    }
}

impl fmt::Display for EnabledKinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.0.iter().map(|k| k.as_str()).collect();
        f.write_str(&names.join(","))
    }
}

/// A workload object as its backend type, whichever kind it is.
pub(crate) struct Loaded(Box<dyn AsWorkload>);

/// What a [`Loaded`] object can do: be seen as a core `Workload`. `BuiltInKind::with_workload`
/// is generic over its result, which a `dyn` cannot call.
trait AsWorkload: Send + Sync {
    fn as_workload(&self, f: &mut dyn FnMut(&dyn Workload));
}

impl<K: BuiltInKind> AsWorkload for K {
    fn as_workload(&self, f: &mut dyn FnMut(&dyn Workload)) {
        self.with_workload(f)
    }
}

impl AsWorkload for CustomObject {
    fn as_workload(&self, f: &mut dyn FnMut(&dyn Workload)) {
        f(self)
    }
}

impl Loaded {
    pub(crate) fn new<K: BuiltInKind>(object: K) -> Self {
        Loaded(Box::new(object))
    }

    /// Calls `f` with the object seen through the core `Workload` trait.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&dyn Workload) -> R) -> R {
        let (mut f, mut result) = (Some(f), None);
        self.0.as_workload(&mut |workload| result = f.take().map(|f| f(workload)));
        result.expect("every backend shows its object once")
    }

    /// The object a view's skeleton stands for, for the kinds whose writes can be built from it;
    /// `None` for Jobs and CronJobs, whose writes copy the whole template (they read it).
    pub(crate) fn from_skeleton(kind: WorkloadKind, skeleton: Skeleton) -> Option<Self> {
        struct FromSkeleton(WorkloadKind, Skeleton);
        impl KindVisitor for FromSkeleton {
            type Output = Option<Loaded>;
            fn visit<K: KindObject>(self, _: &Registered<K>) -> Option<Loaded> {
                K::loaded_from_skeleton(self.0, self.1)
            }
        }
        visit(kind, FromSkeleton(kind, skeleton))
    }

    /// Reads an object of `kind` from JSON (an admission request's object).
    pub(crate) fn from_json(kind: WorkloadKind, object: &serde_json::Value) -> serde_json::Result<Self> {
        struct FromJson<'a>(WorkloadKind, &'a serde_json::Value);
        impl KindVisitor for FromJson<'_> {
            type Output = serde_json::Result<Loaded>;
            fn visit<K: KindObject>(self, _: &Registered<K>) -> serde_json::Result<Loaded> {
                K::deserialize(self.1).map(|object| object.into_loaded(self.0))
            }
        }
        visit(kind, FromJson(kind, object))
    }
}

fn namespaced<K: KindObject>(client: &Client, key: &WorkloadKey, registered: &Registered<K>) -> Api<K> {
    K::api(client, Some(&key.namespace), &registered.info)
}

/// GETs a workload; `None` when it no longer exists.
pub(crate) async fn load(client: &Client, key: &WorkloadKey) -> Result<Option<Loaded>, kube::Error> {
    struct Load<'a>(&'a Client, &'a WorkloadKey);
    impl<'a> KindVisitor for Load<'a> {
        type Output = BoxFuture<'a, Result<Option<Loaded>, kube::Error>>;
        fn visit<K: KindObject>(self, registered: &Registered<K>) -> Self::Output {
            let Load(client, key) = self;
            let api = namespaced::<K>(client, key, registered);
            Box::pin(
                async move { Ok(api.get_opt(&key.name).await?.map(|object| object.into_loaded(key.kind))) },
            )
        }
    }
    visit(key.kind, Load(client, key)).await
}

/// PATCHes a workload; the object as the API server left it, as its backend type.
pub(crate) async fn patch(
    client: &Client,
    key: &WorkloadKey,
    params: &PatchParams,
    patch: &Patch<serde_json::Value>,
) -> Result<Loaded, kube::Error> {
    struct SendPatch<'a>(&'a Client, &'a WorkloadKey, &'a PatchParams, &'a Patch<serde_json::Value>);
    impl<'a> KindVisitor for SendPatch<'a> {
        type Output = BoxFuture<'a, Result<Loaded, kube::Error>>;
        fn visit<K: KindObject>(self, registered: &Registered<K>) -> Self::Output {
            let SendPatch(client, key, params, patch) = self;
            let api = namespaced::<K>(client, key, registered);
            Box::pin(async move { Ok(api.patch(&key.name, params, patch).await?.into_loaded(key.kind)) })
        }
    }
    visit(key.kind, SendPatch(client, key, params, patch)).await
}

/// Whether the API server's 422 to a patch is the patch's precondition failing. Only a JSON
/// patch's (its `test`) is refused with 422 rather than 409: built-in kinds say so in the
/// message; custom resources answer a bare 422 "Invalid", so the version is compared instead.
pub(crate) async fn precondition_failed<F>(
    patch: PatchKind,
    precondition: &Precondition,
    refusal: &Status,
    current_version: impl FnOnce() -> F,
) -> Result<bool, kube::Error>
where
    F: Future<Output = Result<Option<String>, kube::Error>>,
{
    if patch != PatchKind::Json {
        return Ok(false);
    }
    let moved = match precondition {
        Precondition::ResourceVersion(expected) => {
            current_version().await?.is_some_and(|now| now != *expected)
        }
        Precondition::None => false,
    };
    Ok(moved || refusal.message.contains("test"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_registered_as_its_own_backend_type() {
        for kind in WorkloadKind::ALL {
            assert_eq!(info(kind).kind, kind);
        }
    }

    #[test]
    fn the_template_pointer_is_where_the_backend_reads_the_pod_template() {
        for info in all() {
            // An object with a pod template only at the registered pointer.
            let mut object = serde_json::json!({"metadata": {"name": "probe", "namespace": "ns"}});
            let mut at = &mut object;
            for token in info.template_pointer.trim_start_matches('/').split('/') {
                at = &mut at[token];
            }
            *at = serde_json::json!({"spec": {"containers": [{"name": "probe-container"}]}});
            if info.kind == WorkloadKind::CronJob {
                object["spec"]["schedule"] = "* * * * *".into();
            }
            let loaded = Loaded::from_json(info.kind, &object).expect("the backend type reads it");
            let (kind, containers): (WorkloadKind, Vec<String>) = loaded.with(|w| {
                let containers = w
                    .pod_template()
                    .and_then(|t| t.spec.as_ref())
                    .map_or_else(Vec::new, |spec| spec.containers.iter().map(|c| c.name.clone()).collect());
                (w.kind(), containers)
            });
            assert_eq!(kind, info.kind);
            assert_eq!(containers, ["probe-container"], "{:?} at {}", info.kind, info.template_pointer);
        }
    }

    #[test]
    fn every_kind_can_be_watched_and_read() {
        for info in all() {
            for verb in ["get", "list", "watch"] {
                assert!(info.verbs.contains(&verb), "{:?} lacks {verb}", info.kind);
            }
        }
    }
}
