//! The reload records ("markers") of a pod template, set against the current hashes.

use std::collections::BTreeSet;

use super::{ExplainSettings, MarkerState, MarkerSummary, OtherMarker};
use crate::hash::DELETE_MARKER_HASH;
use crate::markers::{AnnotationMarker, EnvMarker};
use crate::model::{ContentHash, ReloadStrategy, ResourceKey};
use crate::naming::env_var_name;
use crate::views::WorkloadView;

pub(super) fn marker_summary(
    view: &WorkloadView,
    key: &ResourceKey,
    current: Option<ContentHash>,
    settings: &ExplainSettings,
) -> MarkerSummary {
    let (env_var, annotation, container, recorded, recorded_hash) = match view
        .strategy(settings.decide.strategy)
    {
        ReloadStrategy::EnvVars => {
            let name = env_var_name(key.kind, &key.name);
            let found = view.markers.env.iter().find(|m| *m.name == *name);
            let container =
                found.and_then(|m| view.containers.get(usize::from(m.container))).map(ToString::to_string);
            let recorded = found.map(|m| m.value.to_string());
            let hash = found.and_then(|m| ContentHash::from_hex(&m.value));
            (Some(name), None, container, recorded, hash)
        }
        ReloadStrategy::Annotations => {
            let found = view.markers.annotation.as_ref().filter(|a| a.resource == *key);
            let key = settings.keys.last_reloaded_from.clone();
            (None, Some(key), None, found.map(|a| a.hash.to_hex()), found.map(|a| a.hash))
        }
    };
    let state = match (&recorded, recorded_hash) {
        (None, _) => MarkerState::None,
        (Some(_), Some(hash)) if hash == DELETE_MARKER_HASH && annotation.is_some() => {
            MarkerState::DeleteMarker
        }
        (Some(_), Some(hash)) if Some(hash) == current => MarkerState::Current,
        (Some(_), _) => MarkerState::Different,
    };
    MarkerSummary {
        env_var,
        annotation,
        container,
        recorded,
        state,
        matches_current: state == MarkerState::Current,
    }
}

/// The markers of the pod template not shown with a resource: env-var markers whose resource is
/// not listed (or, under the annotations strategy, all of them), and the annotation marker when
/// the env-vars strategy is in use or its resource is not listed.
pub(super) fn other_markers(
    view: &WorkloadView,
    listed: &BTreeSet<ResourceKey>,
    settings: &ExplainSettings,
) -> Vec<OtherMarker> {
    let strategy = view.strategy(settings.decide.strategy);
    let mut shown: BTreeSet<&str> = BTreeSet::new();
    if strategy == ReloadStrategy::EnvVars {
        let names: BTreeSet<String> = listed.iter().map(|k| env_var_name(k.kind, &k.name)).collect();
        let mut others = Vec::new();
        for marker in &view.markers.env {
            // Only the first marker of a name counts (it is the one shown with the resource).
            if names.contains(&*marker.name) && shown.insert(&marker.name) {
                continue;
            }
            others.push(env_other(view, marker));
        }
        others.extend(view.markers.annotation.as_ref().map(|a| annotation_other(a, settings)));
        return others;
    }
    let mut others: Vec<OtherMarker> = view.markers.env.iter().map(|m| env_other(view, m)).collect();
    if let Some(annotation) = view.markers.annotation.as_ref().filter(|a| !listed.contains(&a.resource)) {
        others.push(annotation_other(annotation, settings));
    }
    others
}

fn env_other(view: &WorkloadView, marker: &EnvMarker) -> OtherMarker {
    OtherMarker {
        marker: marker.name.to_string(),
        container: view.containers.get(usize::from(marker.container)).map(ToString::to_string),
        recorded: marker.value.to_string(),
        resource: None,
    }
}

fn annotation_other(annotation: &AnnotationMarker, settings: &ExplainSettings) -> OtherMarker {
    OtherMarker {
        marker: settings.keys.last_reloaded_from.clone(),
        container: None,
        recorded: annotation.hash.to_hex(),
        resource: Some(format!("{}/{}", annotation.resource.kind, annotation.resource.name)),
    }
}
