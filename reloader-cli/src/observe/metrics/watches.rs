//! The watches' metrics: their failures, and the Namespace events of `--namespace-selector`.

use super::counters::{ErrorCounters, EventsReceived};
use super::{ErrorType, EventType, ResourceType};

#[derive(Clone)]
pub(crate) struct WatchMetrics {
    pub(super) errors: ErrorCounters,
    pub(super) received: EventsReceived,
}

impl WatchMetrics {
    pub(crate) fn error(&self, error_type: ErrorType) {
        self.errors.error(error_type);
    }

    pub(crate) fn event_received(&self, event_type: EventType, resource_type: impl Into<ResourceType>) {
        self.received.event_received(event_type, resource_type);
    }
}
