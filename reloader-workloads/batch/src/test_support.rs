//! Shared fixtures of the batch tests.

use reloader_core::annotations::AnnotationKeys;
use reloader_core::markers::{MarkerAction, MarkerChange, annotation_marker_value};
use reloader_core::model::{ContentHash, ReloadStrategy, ResourceKey, ResourceKind};
use reloader_core::workload::WriteContext;

pub const NOW_UNIX: i64 = 1_723_000_000;
pub const H1: ContentHash = ContentHash([0x11; 20]);
pub const H2: ContentHash = ContentHash([0x22; 20]);
pub const ENV_CM: &str = "STAKATER_APP_CONFIG_CONFIGMAP";
pub const ENV_SECRET: &str = "STAKATER_DB_SECRET";

pub fn cm() -> ResourceKey {
    ResourceKey::new(ResourceKind::ConfigMap, "ns", "app-config")
}

pub fn secret() -> ResourceKey {
    ResourceKey::new(ResourceKind::Secret, "ns", "db")
}

pub fn set(
    resource: ResourceKey,
    hash: ContentHash,
    strategy: ReloadStrategy,
    container: u16,
) -> MarkerChange {
    MarkerChange { resource, action: MarkerAction::Set(hash), strategy, container }
}

pub fn remove(resource: ResourceKey, strategy: ReloadStrategy) -> MarkerChange {
    MarkerChange { resource, action: MarkerAction::Remove, strategy, container: 0 }
}

pub fn marker(resource: &ResourceKey, hash: ContentHash, container: &str) -> String {
    annotation_marker_value(resource, &hash, container, NOW_UNIX)
}

pub fn write_context(keys: &AnnotationKeys) -> WriteContext<'_> {
    WriteContext { keys, now_unix: NOW_UNIX, now_rfc3339: "2024-08-07T03:06:40Z".into() }
}
