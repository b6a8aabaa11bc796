//! H56: `helm upgrade` of an HA install to another build while ConfigMap changes are made: each
//! change is written once (none lost to the hand-over, none repeated by the new leader's catch-up),
//! a workload whose objects did not change is not rolled by the new replicas' start, and the
//! Lease passes to a new pod.
//!
//! The other build is the image `hack/image` made with its binary's commit stamp replaced (the
//! `RELOADER_GIT_COMMIT` the release build embeds, which `reloader --version` and the
//! `reloader-meta-info` ConfigMap report) and packed again under another tag: a second release
//! build would cost the test command minutes for the same difference.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams};
use serde_json::json;

use crate::chart::{APPS, RELEASE, RELEASE_NAMESPACE, RELEASE_SELECTOR, wait_for_leader_among};
use crate::restamp;
use crate::support::{Cluster, IMAGE_REPOSITORY, VERSION, webhook_enabled, workspace_root};

/// The tag the upgrade moves to.
fn next_tag() -> String {
    format!("{VERSION}-next")
}

/// The changes throughout the upgrade reload `web` every second or so, dozens of times: a reload
/// loop by the loop guard's measure (docs/beyond-stakater.md §15), which this test is not about.
fn values(tag: Option<&str>) -> serde_json::Value {
    let mut values = json!({
        "reloader": { "enableHA": true, "deployment": { "replicas": 2 }, "loopGuard": "off" },
        "webhook": webhook_enabled(),
    });
    if let Some(tag) = tag {
        values["image"] = json!({ "tag": tag });
    }
    values
}

/// The image of every live pod of the release.
async fn release_images(cluster: &Cluster) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(cluster.client(), RELEASE_NAMESPACE);
    let list =
        pods.list(&ListParams::default().labels(RELEASE_SELECTOR)).await.expect("listing the release's pods");
    list.items
        .into_iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter_map(|pod| pod.spec?.containers.into_iter().next()?.image)
        .collect()
}

/// The commit stamp `reloader-meta-info` reports, once a replica has published it.
async fn published_commit(cluster: &Cluster) -> Option<String> {
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client(), RELEASE_NAMESPACE);
    let meta = config_maps.get_opt("reloader-meta-info").await.ok().flatten()?;
    let build: serde_json::Value = serde_json::from_str(meta.data?.get("buildInfo")?).ok()?;
    build["commitHash"].as_str().map(str::to_owned)
}

pub async fn helm_upgrade(cluster: &Cluster) {
    let archive = workspace_root().join(format!("target/image/reloader-{VERSION}.oci.tar"));
    let work = tempfile::tempdir().expect("a temp dir");
    let next_archive = work.path().join("next.oci.tar");
    let (old_commit, new_commit) = restamp::restamp(&archive, &next_archive, IMAGE_REPOSITORY, &next_tag());
    cluster.node.import_image(&next_archive, &[]).unwrap_or_else(|error| panic!("{error}"));
    let next = format!("{IMAGE_REPOSITORY}:{}", next_tag());

    cluster.helm_install(RELEASE, RELEASE_NAMESPACE, &values(None));
    cluster.rolled_out(RELEASE_NAMESPACE, RELEASE_SELECTOR).await;
    let pods = cluster.ready_pods(RELEASE_NAMESPACE, RELEASE_SELECTOR, 2).await;
    let old_names: Vec<String> = pods.iter().filter_map(|pod| pod.metadata.name.clone()).collect();
    let old_leader = wait_for_leader_among(cluster, &old_names).await;
    assert_eq!(published_commit(cluster).await.as_deref(), Some(old_commit.as_str()), "the first build runs");

    // A workload nobody changes: the upgrade must not roll it.
    cluster.run_app(APPS, "still", "unchanged").await;
    let still_generation = cluster.generation(APPS, "still").await;

    let before = cluster.generation(APPS, "web").await;
    cluster.helm_install(RELEASE, RELEASE_NAMESPACE, &values(Some(&next_tag())));
    let mut changes = 0;
    let upgraded = loop {
        changes += 1;
        cluster.put_config_map(APPS, "web", "greeting", &format!("upgrade-{changes}")).await;
        cluster.wait_for_generation(APPS, "web", before + changes).await;
        let images = release_images(cluster).await;
        let done = images.len() == 2 && images.iter().all(|image| *image == next);
        if done && changes >= 3 {
            break true;
        }
        assert!(changes < 200, "the upgrade did not finish: {images:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(upgraded);
    cluster.rolled_out(RELEASE_NAMESPACE, RELEASE_SELECTOR).await;
    let new_pods = cluster.ready_pods(RELEASE_NAMESPACE, RELEASE_SELECTOR, 2).await;
    let new_names: Vec<String> = new_pods.iter().filter_map(|pod| pod.metadata.name.clone()).collect();
    let new_leader = wait_for_leader_among(cluster, &new_names).await;
    assert_ne!(new_leader, old_leader);
    assert_eq!(published_commit(cluster).await.as_deref(), Some(new_commit.as_str()), "the other build runs");

    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        cluster.generation(APPS, "web").await,
        before + changes,
        "{changes} changes, each written once"
    );
    assert_eq!(cluster.generation(APPS, "still").await, still_generation, "the upgrade rolled no workload");
    cluster.pod_printing(APPS, "app=web", "app", &format!("env GREETING=upgrade-{changes}")).await;
}
