//! The leader election's metrics.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

#[derive(Clone)]
pub(crate) struct LeaderMetrics {
    pub(super) leader: Gauge,
    pub(super) leader_transitions: Counter,
}

impl LeaderMetrics {
    pub(crate) fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    pub(crate) fn leader_transition(&self) {
        self.leader_transitions.inc();
    }
}
