//! docs/benchmark.md's M1 data set, created with bounded concurrency and grown in steps (¼, ½, all) so
//! that one plane serves every size: 20 namespaces; ConfigMaps and Secrets of 8 KiB; Helm release
//! Secrets of 256 KiB; Deployments, StatefulSets and DaemonSets referencing 2-4 of them by env,
//! envFrom, volume and projected volume. Workloads run no pods: pod churn says nothing about a
//! reloader and would drown 2 cores.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::Client;
use kube::api::{Api, PostParams};
use serde::Serialize;
use serde_json::json;

use super::BenchError;
use super::identity::from_json;
use reloader_tests::fixtures::{ANNOTATION_AUTO, Kind, ResourceKind, Via, WorkloadSpec};

pub const NAMESPACES: usize = 20;
/// Requests in flight while creating: enough to keep kube-apiserver busy, few enough for 2 cores.
const CONCURRENCY: usize = 16;
const RESOURCE_BYTES: usize = 8 * 1024;
const HELM_RELEASE_BYTES: usize = 256 * 1024;
const VIAS: [Via; 4] = [Via::KeyRef, Via::EnvFrom, Via::Volume, Via::Projected];
/// The key every ConfigMap and Secret holds (the one `Via::KeyRef` reads).
const DATA_KEY: &str = "key";

/// How many objects of each sort.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Sizes {
    pub configmaps: usize,
    pub secrets: usize,
    pub helm_releases: usize,
    pub deployments: usize,
    pub statefulsets: usize,
    pub daemonsets: usize,
}

impl Sizes {
    /// docs/benchmark.md's M1.
    pub const FULL: Sizes = Sizes {
        configmaps: 2000,
        secrets: 2000,
        helm_releases: 100,
        deployments: 500,
        statefulsets: 100,
        daemonsets: 100,
    };

    /// docs/benchmark.md's M10: ten times M1's ConfigMaps, Secrets and Helm releases (same sizes each),
    /// and 10,000 workloads.
    pub const M10: Sizes = Sizes {
        configmaps: 20_000,
        secrets: 20_000,
        helm_releases: 1_000,
        deployments: 8_000,
        statefulsets: 1_000,
        daemonsets: 1_000,
    };

    /// `fraction` of [`Sizes::FULL`], each count at least 1.
    pub fn scaled(fraction: f64) -> Sizes {
        Self::FULL.times(fraction)
    }

    /// `fraction` of these sizes, each count at least 1.
    pub fn times(self, fraction: f64) -> Sizes {
        let of = |n: usize| ((n as f64 * fraction).round() as usize).max(1);
        let full = self;
        Sizes {
            configmaps: of(full.configmaps),
            secrets: of(full.secrets),
            helm_releases: of(full.helm_releases),
            deployments: of(full.deployments),
            statefulsets: of(full.statefulsets),
            daemonsets: of(full.daemonsets),
        }
    }

    /// Every object of the data set (namespaces aside).
    pub fn objects(&self) -> usize {
        self.configmaps + self.secrets + self.helm_releases + self.workloads()
    }

    pub fn workloads(&self) -> usize {
        self.deployments + self.statefulsets + self.daemonsets
    }
}

/// The data set as created so far.
pub struct DataSet {
    client: Client,
    created: Sizes,
}

impl DataSet {
    /// Creates the namespaces.
    pub async fn new(client: Client) -> Result<Self, BenchError> {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        for n in 0..NAMESPACES {
            create(&namespaces, from_json(json!({ "metadata": { "name": namespace(n) } }))).await?;
        }
        Ok(Self { client, created: Sizes::default() })
    }

    pub fn sizes(&self) -> Sizes {
        self.created
    }

    /// Creates what `target` has beyond what exists; returns how long that took.
    pub async fn grow_to(&mut self, target: Sizes) -> Result<Duration, BenchError> {
        let started = Instant::now();
        let from = self.created;
        let client = &self.client;
        bounded(from.configmaps..target.configmaps, |i| {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace(i));
            let data = BTreeMap::from([(DATA_KEY.to_owned(), text(RESOURCE_BYTES, 1, i))]);
            let object =
                ConfigMap { data: Some(data), ..from_json(json!({ "metadata": { "name": configmap(i) } })) };
            async move { create(&api, object).await }
        })
        .await?;
        bounded(from.secrets..target.secrets, |i| {
            let api: Api<Secret> = Api::namespaced(client.clone(), &namespace(i));
            let data =
                BTreeMap::from([(DATA_KEY.to_owned(), ByteString(text(RESOURCE_BYTES, 2, i).into_bytes()))]);
            let object =
                Secret { data: Some(data), ..from_json(json!({ "metadata": { "name": secret(i) } })) };
            async move { create(&api, object).await }
        })
        .await?;
        bounded(from.helm_releases..target.helm_releases, |i| {
            let api: Api<Secret> = Api::namespaced(client.clone(), &namespace(i));
            let release = format!("release-{i:04}");
            let mut object: Secret = from_json(json!({
                "metadata": {
                    "name": format!("sh.helm.release.v1.{release}.v1"),
                    "labels": { "owner": "helm", "name": release, "status": "deployed", "version": "1" },
                },
                "type": "helm.sh/release.v1",
            }));
            let payload = ByteString(text(HELM_RELEASE_BYTES, 3, i).into_bytes());
            object.data = Some(BTreeMap::from([("release".to_owned(), payload)]));
            async move { create(&api, object).await }
        })
        .await?;
        // Workloads last, so that what they reference exists.
        for (kind, from, to) in [
            (Kind::Deployment, from.deployments, target.deployments),
            (Kind::StatefulSet, from.statefulsets, target.statefulsets),
            (Kind::DaemonSet, from.daemonsets, target.daemonsets),
        ] {
            bounded(from..to, |i| {
                let spec = workload(kind, i, &target);
                let client = client.clone();
                async move { create_workload(&client, spec, &namespace(i)).await }
            })
            .await?;
        }
        self.created = target;
        Ok(started.elapsed())
    }
}

pub fn namespace(index: usize) -> String {
    format!("m1-{:02}", index % NAMESPACES)
}

fn configmap(index: usize) -> String {
    format!("config-{index:05}")
}

fn secret(index: usize) -> String {
    format!("secret-{index:05}")
}

/// Workload `index` of `kind`: reloads on any change (`reloader.stakater.com/auto`) and references
/// 2-4 ConfigMaps/Secrets of its own namespace, each in the next of the four ways.
fn workload(kind: Kind, index: usize, sizes: &Sizes) -> WorkloadSpec {
    let prefix = match kind {
        Kind::StatefulSet => "sts",
        Kind::DaemonSet => "ds",
        _ => "deploy",
    };
    let mut spec = WorkloadSpec::new(kind, format!("{prefix}-{index:04}"))
        .without_pods()
        .metadata_annotation(ANNOTATION_AUTO, "true");
    let ns = index % NAMESPACES;
    let local = index / NAMESPACES;
    let references = 2 + index % 3;
    for k in 0..references {
        let (resource, total) = if k % 2 == 0 {
            (ResourceKind::ConfigMap, sizes.configmaps)
        } else {
            (ResourceKind::Secret, sizes.secrets)
        };
        // Resource j lives in namespace j % NAMESPACES; pick among those of this namespace.
        let in_namespace = total.saturating_sub(ns).div_ceil(NAMESPACES);
        if in_namespace == 0 {
            continue;
        }
        let j = ns + NAMESPACES * ((local * 4 + k) % in_namespace);
        let name = if resource == ResourceKind::ConfigMap { configmap(j) } else { secret(j) };
        spec = spec.reference(resource, &name, VIAS[(index + k) % VIAS.len()]);
    }
    spec
}

/// `length` printable characters, different for every (`stream`, `index`), the same every run.
fn text(length: usize, stream: u64, index: usize) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut state = (stream << 32 | index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..length)
        .map(|_| {
            // xorshift64: cheap, and enough to make every object's bytes distinct.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(ALPHABET[(state >> 58) as usize])
        })
        .collect()
}

/// Runs `make(i)` for every `i` in `range`, [`CONCURRENCY`] at a time.
pub async fn bounded<F, Fut>(range: std::ops::Range<usize>, make: F) -> Result<(), BenchError>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<(), BenchError>>,
{
    stream::iter(range).map(make).buffer_unordered(CONCURRENCY).try_collect::<Vec<()>>().await?;
    Ok(())
}

/// Creates the workload `spec` describes; one left by an earlier step is fine.
pub async fn create_workload(client: &Client, spec: WorkloadSpec, namespace: &str) -> Result<(), BenchError> {
    match spec.create(client, namespace).await {
        Ok(_) => Ok(()),
        Err(reloader_harness::PlaneError::Kube(kube::Error::Api(s))) if s.code == 409 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// Creates `object`; one left by an earlier step is fine.
pub async fn create<K>(api: &Api<K>, object: K) -> Result<(), BenchError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_sizes_and_object_counts() {
        assert_eq!(Sizes::FULL.objects(), 4800);
        let quarter = Sizes::scaled(0.25);
        assert_eq!((quarter.configmaps, quarter.helm_releases, quarter.daemonsets), (500, 25, 25));
        assert_eq!(Sizes::scaled(0.0001).objects(), 6);
        assert_eq!((Sizes::M10.objects(), Sizes::M10.workloads()), (51_000, 10_000));
        assert_eq!(Sizes::M10.times(0.01).objects(), 510);
    }

    #[test]
    fn payloads_are_sized_distinct_and_stable() {
        let a = text(RESOURCE_BYTES, 1, 7);
        assert_eq!(a.len(), RESOURCE_BYTES);
        assert_eq!(a, text(RESOURCE_BYTES, 1, 7));
        assert_ne!(a, text(RESOURCE_BYTES, 1, 8));
        assert_ne!(a, text(RESOURCE_BYTES, 2, 7));
    }

    #[test]
    fn workloads_reference_existing_objects_of_their_namespace() {
        let sizes = Sizes::scaled(0.05);
        for index in 0..sizes.deployments {
            let spec = workload(Kind::Deployment, index, &sizes);
            let template = serde_json::to_string(&spec.template()).unwrap();
            let names: Vec<usize> = template
                .match_indices("config-")
                .chain(template.match_indices("secret-"))
                .filter_map(|(at, prefix)| template[at + prefix.len()..at + prefix.len() + 5].parse().ok())
                .collect();
            assert!(names.len() >= 2, "{template}");
            for j in names {
                assert_eq!(j % NAMESPACES, index % NAMESPACES);
                assert!(j < sizes.configmaps.max(sizes.secrets));
            }
        }
    }
}
