//! The writer's and the admission webhook's shared state, until they take narrow handles of
//! their own; every other stage already receives only what it uses (see `run.rs`).

mod executor;
mod writer;

use std::sync::{Arc, RwLock};

use kube::Client;
use reloader_core::index::Index;
use reloader_core::options::Options;
use tokio::sync::watch;

use crate::events::EventPublisher;
use crate::kinds::EnabledKinds;
use crate::metrics::Metrics;
use crate::reconcile::scope::ScopeFilter;

pub(crate) use executor::{Executor, Work};
pub(crate) use writer::FIELD_MANAGER;

pub(crate) struct Context {
    pub client: Client,
    pub options: Options,
    pub index: Arc<RwLock<Index>>,
    pub metrics: Arc<Metrics>,
    pub events: EventPublisher,
    /// True while this replica holds the lease (always true without HA).
    pub leader: watch::Receiver<bool>,
    /// Which namespaces are in scope right now (namespace selector and ignore list).
    pub scope: ScopeFilter,
    /// Resolved kinds to watch (OpenShift detection, Argo flag, ignored workload types).
    pub kinds: EnabledKinds,
    /// `ALERT_ON_RELOAD` notifications, when configured.
    pub alerter: Option<crate::alerts::Alerter>,
}
