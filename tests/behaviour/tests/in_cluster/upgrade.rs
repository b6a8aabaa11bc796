//! H56: `helm upgrade` of an HA install to another build while ConfigMap changes are made: each
//! change is written once (none lost to the hand-over, none repeated by the new leader's catch-up),
//! a workload whose objects did not change is not rolled by the new replicas' start, and the
//! Lease passes to a new pod.
//!
//! The other build is the image `hack/image` made with its binary's commit stamp replaced (the
//! `RELOADER_GIT_COMMIT` the release build embeds, which `reloader --version` and the
//! `reloader-meta-info` ConfigMap report) and packed again under another tag: a second release
//! build would cost the test command minutes for the same difference.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams};
use reloader_harness::{NotYet, wait_until};
use reloader_tests::chart::Helm;
use serde_json::json;

use crate::chart::{APPS, RELEASE, RELEASE_NAMESPACE, RELEASE_SELECTOR, wait_for_leader_among};
use crate::restamp;
use crate::support::{Cluster, IMAGE_REPOSITORY, RELOAD_PATIENCE, VERSION, webhook_enabled, workspace_root};

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
    let from =
        Side { helm: &cluster.helm, values: values(None), tag: VERSION.to_owned(), commit: old_commit };
    let to =
        Side { helm: &cluster.helm, values: values(Some(&next_tag())), tag: next_tag(), commit: new_commit };
    upgrade_while_changing(cluster, from, to).await;
}

/// One side of an upgrade: the chart it installs (a `Helm` on its chart), with what values, the
/// image tag its pods run and the commit that build reports.
pub struct Side<'a> {
    pub helm: &'a Helm,
    pub values: serde_json::Value,
    pub tag: String,
    pub commit: String,
}

/// Installs `from` (HA, two replicas), then upgrades it to `to` while ConfigMap changes are made:
/// each change written once, a workload nobody changes not rolled, the Lease handed to a new pod.
pub async fn upgrade_while_changing(cluster: &Cluster, from: Side<'_>, to: Side<'_>) {
    let install = |side: &Side| {
        side.helm
            .upgrade_install(RELEASE, RELEASE_NAMESPACE, &side.values, cluster.plane.kubeconfig_path())
            .unwrap_or_else(|error| panic!("helm upgrade --install {RELEASE}: {error}"))
    };
    install(&from);
    cluster.rolled_out(RELEASE_NAMESPACE, RELEASE_SELECTOR).await;
    let pods = cluster.ready_pods(RELEASE_NAMESPACE, RELEASE_SELECTOR, 2).await;
    let old_names: Vec<String> = pods.iter().filter_map(|pod| pod.metadata.name.clone()).collect();
    let old_leader = wait_for_leader_among(cluster, &old_names).await;
    let published = wait_until("the first build to publish its commit", RELOAD_PATIENCE, || async {
        published_commit(cluster).await.ok_or_else(|| NotYet::because("no reloader-meta-info yet"))
    })
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(published, from.commit, "the first build runs");

    // A workload nobody changes: the upgrade must not roll it.
    cluster.run_app(APPS, "still", "unchanged").await;
    let still_generation = cluster.generation(APPS, "still").await;

    let before = cluster.generation(APPS, "web").await;
    install(&to);
    let next = format!("{IMAGE_REPOSITORY}:{}", to.tag);
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
    let published = wait_until("the other build to publish its commit", RELOAD_PATIENCE, || async {
        match published_commit(cluster).await {
            Some(commit) if commit == to.commit => Ok(commit),
            other => Err(NotYet(format!("reloader-meta-info says {other:?}"))),
        }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(published, to.commit, "the other build runs");

    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        cluster.generation(APPS, "web").await,
        before + changes,
        "{changes} changes, each written once"
    );
    assert_eq!(cluster.generation(APPS, "still").await, still_generation, "the upgrade rolled no workload");
    cluster.pod_printing(APPS, "app=web", "app", &format!("env GREETING=upgrade-{changes}")).await;
}

/// H60 (`hack/upgrade-test`, not the test command: it builds the previous release): the chart and
/// image of the previous release (`RELOADER_PREVIOUS_SOURCE`, that commit checked out with its
/// image built by its own `hack/image`) installed with HA on the real node, then upgraded to this
/// commit's chart and image while ConfigMap changes are made.
pub async fn from_the_previous_release(cluster: &Cluster, previous: &Path) {
    // Its own version's archive: the only one its `hack/image` wrote there.
    let images = previous.join("target/image");
    let archive = std::fs::read_dir(&images)
        .unwrap_or_else(|error| panic!("{}: {error} (hack/upgrade-test builds it)", images.display()))
        .filter_map(|entry| Some(entry.ok()?.path()))
        .find(|path| {
            path.extension().is_some_and(|e| e == "tar") && path.to_string_lossy().ends_with(".oci.tar")
        })
        .unwrap_or_else(|| panic!("no image archive in {}", images.display()));
    let previous_tag = format!("{VERSION}-previous");
    // Both builds carry the same version: the previous one gets a tag of its own, then this one's
    // is imported again so that its tag names this build.
    let previous_name = format!("{IMAGE_REPOSITORY}:{previous_tag}");
    cluster.node.import_image(&archive, &[&previous_name]).unwrap_or_else(|error| panic!("{error}"));
    let current = workspace_root().join(format!("target/image/reloader-{VERSION}.oci.tar"));
    cluster.node.import_image(&current, &[]).unwrap_or_else(|error| panic!("{error}"));

    let previous_helm = cluster.helm.with_chart(previous.join("charts/reloader"));
    let mut previous_values = values(None);
    previous_values["image"] = json!({ "tag": previous_tag });
    let from = Side {
        helm: &previous_helm,
        values: previous_values,
        tag: previous_tag,
        commit: commit_of(previous),
    };
    let to = Side {
        helm: &cluster.helm,
        values: values(None),
        tag: VERSION.to_owned(),
        commit: commit_of(&workspace_root()),
    };
    upgrade_while_changing(cluster, from, to).await;
}

/// The commit `dir` is checked out at.
fn commit_of(dir: &Path) -> String {
    let output = std::process::Command::new("git").arg("-C").arg(dir).args(["rev-parse", "HEAD"]).output();
    let output = output.unwrap_or_else(|error| panic!("git rev-parse in {}: {error}", dir.display()));
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}
