//! Annotation keys (configurable by flags) and the values reloader reads from a workload.

use std::collections::BTreeMap;

mod explicit;

pub(crate) use explicit::{ExplicitEntry, explicit_entries};
pub use explicit::{
    ExplicitList, MAX_LIST_PATTERNS, PATTERNS_DFA_SIZE_LIMIT, PATTERNS_SIZE_LIMIT, PatternLimit,
};

use crate::model::ResourceKind;

/// Keys of every annotation reloader reads or writes. Defaults are Stakater's; each is a flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationKeys {
    pub(crate) configmap_reload: String,
    pub(crate) secret_reload: String,
    pub(crate) auto: String,
    pub(crate) configmap_auto: String,
    pub(crate) secret_auto: String,
    pub(crate) search: String,
    pub search_match: String,
    pub ignore: String,
    pub pause_period: String,
    pub paused_at: String,
    /// Not configurable in Stakater: fixed keys.
    pub(crate) configmap_exclude: String,
    pub(crate) secret_exclude: String,
    pub(crate) spc_auto: String,
    pub(crate) spc_reload: String,
    pub(crate) spc_exclude: String,
    pub rollout_strategy: String,
    pub last_reloaded_from: String,
    /// Our own, not configurable: the key filters (docs/beyond-stakater.md §10).
    pub configmap_keys: String,
    pub secret_keys: String,
    /// Our own, not configurable: how long the admission webhook holds a release's rollout
    /// (docs/beyond-stakater.md §11).
    pub hold_period: String,
}

pub const LAST_RELOADED_FROM: &str = "reloader.stakater.com/last-reloaded-from";

/// The ConfigMap key filter of a workload (docs/beyond-stakater.md §10).
pub const CONFIGMAP_KEYS: &str = "reloader.stakater.com/configmap-keys";
/// The Secret key filter of a workload (docs/beyond-stakater.md §10).
pub const SECRET_KEYS: &str = "reloader.stakater.com/secret-keys";

/// The hold the admission webhook puts on a Deployment's release (docs/beyond-stakater.md §11).
pub const HOLD_PERIOD: &str = "reloader.stakater.com/hold-period";

impl Default for AnnotationKeys {
    fn default() -> Self {
        AnnotationKeys {
            configmap_reload: "configmap.reloader.stakater.com/reload".into(),
            secret_reload: "secret.reloader.stakater.com/reload".into(),
            auto: "reloader.stakater.com/auto".into(),
            configmap_auto: "configmap.reloader.stakater.com/auto".into(),
            secret_auto: "secret.reloader.stakater.com/auto".into(),
            search: "reloader.stakater.com/search".into(),
            search_match: "reloader.stakater.com/match".into(),
            ignore: "reloader.stakater.com/ignore".into(),
            pause_period: "deployment.reloader.stakater.com/pause-period".into(),
            paused_at: "deployment.reloader.stakater.com/paused-at".into(),
            configmap_exclude: "configmaps.exclude.reloader.stakater.com/reload".into(),
            secret_exclude: "secrets.exclude.reloader.stakater.com/reload".into(),
            spc_auto: "secretproviderclass.reloader.stakater.com/auto".into(),
            spc_reload: "secretproviderclass.reloader.stakater.com/reload".into(),
            spc_exclude: "secretproviderclasses.exclude.reloader.stakater.com/reload".into(),
            rollout_strategy: "reloader.stakater.com/rollout-strategy".into(),
            last_reloaded_from: LAST_RELOADED_FROM.into(),
            configmap_keys: CONFIGMAP_KEYS.into(),
            secret_keys: SECRET_KEYS.into(),
            hold_period: HOLD_PERIOD.into(),
        }
    }
}

impl AnnotationKeys {
    pub(crate) fn explicit(&self, kind: ResourceKind) -> &str {
        match kind {
            ResourceKind::ConfigMap => &self.configmap_reload,
            ResourceKind::Secret => &self.secret_reload,
            ResourceKind::SecretProviderClass => &self.spc_reload,
        }
    }

    pub(crate) fn typed_auto(&self, kind: ResourceKind) -> &str {
        match kind {
            ResourceKind::ConfigMap => &self.configmap_auto,
            ResourceKind::Secret => &self.secret_auto,
            ResourceKind::SecretProviderClass => &self.spc_auto,
        }
    }

    pub(crate) fn exclude(&self, kind: ResourceKind) -> &str {
        match kind {
            ResourceKind::ConfigMap => &self.configmap_exclude,
            ResourceKind::Secret => &self.secret_exclude,
            ResourceKind::SecretProviderClass => &self.spc_exclude,
        }
    }
}

/// The reloader annotations of one annotation map (workload metadata, or pod template),
/// copied out so the index keeps a few short strings instead of whole maps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadAnnotations {
    pub auto: Option<Box<str>>,
    pub(crate) search: Option<Box<str>>,
    /// Indexed by [`kind_index`]: ConfigMap, Secret, SecretProviderClass. Their patterns are
    /// compiled here, when the view is built, never when a decision is made.
    pub(crate) explicit: [Option<ExplicitList>; 3],
    pub(crate) typed_auto: [Option<Box<str>>; 3],
    pub(crate) exclude: [Option<Box<str>>; 3],
}

pub(crate) fn kind_index(kind: ResourceKind) -> usize {
    match kind {
        ResourceKind::ConfigMap => 0,
        ResourceKind::Secret => 1,
        ResourceKind::SecretProviderClass => 2,
    }
}

const KINDS: [ResourceKind; 3] =
    [ResourceKind::ConfigMap, ResourceKind::Secret, ResourceKind::SecretProviderClass];

impl ReloadAnnotations {
    pub(crate) fn from_map(map: Option<&BTreeMap<String, String>>, keys: &AnnotationKeys) -> Self {
        let Some(map) = map else { return Self::default() };
        let get = |k: &str| map.get(k).map(|v| Box::<str>::from(v.as_str()));
        ReloadAnnotations {
            auto: get(&keys.auto),
            search: get(&keys.search),
            explicit: KINDS.map(|k| map.get(keys.explicit(k)).map(|v| ExplicitList::parse(v))),
            typed_auto: KINDS.map(|k| get(keys.typed_auto(k))),
            exclude: KINDS.map(|k| get(keys.exclude(k))),
        }
    }

    /// docs/compatibility.md §4.3 step 1: does this map hold any of the keys that select it for `kind`?
    pub(crate) fn selects_for(&self, kind: ResourceKind) -> bool {
        let i = kind_index(kind);
        self.explicit[i].is_some()
            || self.auto.is_some()
            || self.typed_auto[i].is_some()
            || self.search.is_some()
    }
}

/// Go's `strconv.ParseBool`: `1 t T TRUE true True` are true, `0 f F FALSE false False` false,
/// anything else is not a boolean (`None`).
pub fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Splits a comma-separated list, trimming each entry and dropping empty ones.
pub(crate) fn split_list(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|e| !e.is_empty())
}
