//! The admission webhook's shared state, until it takes narrow handles of its own; every other
//! stage already receives only what it uses (see `run.rs`).

use std::sync::{Arc, RwLock};

use reloader_core::index::Index;
use reloader_core::options::Options;

use crate::kinds::EnabledKinds;
use crate::observe::metrics::Metrics;
use crate::reconcile::scope::ScopeFilter;

pub(crate) struct Context {
    pub options: Options,
    pub index: Arc<RwLock<Index>>,
    pub metrics: Arc<Metrics>,
    /// Which namespaces are in scope right now (namespace selector and ignore list).
    pub scope: ScopeFilter,
    /// Resolved kinds to watch (OpenShift detection, Argo flag, ignored workload types).
    pub kinds: EnabledKinds,
}
