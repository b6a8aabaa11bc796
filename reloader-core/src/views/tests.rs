//! Views built from real objects through the `Workload` trait.

use super::*;
use crate::model::{RefVia, ReloadStrategy, ResourceKind};
use crate::testkit::{cm, deployment};

#[test]
fn views_are_built_from_workloads() {
    let c = cm("c");
    let workload = deployment("web")
        .kind(WorkloadKind::StatefulSet)
        .containers(&["app", "sidecar"])
        .annotate("reloader.stakater.com/auto", "true")
        .annotate("deployment.reloader.stakater.com/pause-period", "5m")
        .annotate_template("configmap.reloader.stakater.com/reload", "c")
        .uses("sidecar", ResourceKind::ConfigMap, "c", RefVia::EnvFrom)
        .env("app", "STAKATER_C_CONFIGMAP", &c.hash.to_hex());
    let view = workload.view();
    assert_eq!(view.key, WorkloadKey::new(WorkloadKind::StatefulSet, "default", "web"));
    assert_eq!(view.metadata_rules.auto.as_deref(), Some("true"));
    assert_eq!(view.template_rules.explicit[0].as_deref(), Some("c"));
    assert_eq!(view.containers, [Box::from("app"), Box::from("sidecar")]);
    assert_eq!(view.references.len(), 1);
    assert_eq!(view.markers.recorded_hash(&c.key, ReloadStrategy::EnvVars), Some(c.hash));
    assert_eq!(view.pause_period.as_deref(), Some("5m"));
    assert!(view.has_template && !view.suspended && !view.paused && !view.restart_strategy);

    let bare = deployment("web").without_template().view();
    assert!(!bare.has_template);
    assert!(bare.containers.is_empty() && bare.references.is_empty() && bare.markers == Markers::default());
}
