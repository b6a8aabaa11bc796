//! The notifications' metrics: alerts and `--webhook-url` posts.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::counters::ErrorCounters;
use super::labels::ChannelLabels;
use super::values::StakaterError;
use super::{NotificationChannel, bool_label};

#[derive(Clone)]
pub(crate) struct NotifyMetrics {
    pub(super) notifications: Family<ChannelLabels, Counter>,
    pub(super) errors: ErrorCounters,
}

impl NotifyMetrics {
    /// `reloader_notifications_total{channel, success}`; channel is e.g. `alert-slack`, `webhook`.
    pub(crate) fn notification(&self, channel: NotificationChannel, success: bool) {
        let labels = ChannelLabels { channel: channel.as_label(), success: bool_label(success) };
        self.notifications.get_or_create(&labels).inc();
        if channel == NotificationChannel::Webhook && !success {
            // Stakater's handler fails when its webhook POST fails.
            self.errors.stakater_error(StakaterError::HandlerError);
        }
    }
}
