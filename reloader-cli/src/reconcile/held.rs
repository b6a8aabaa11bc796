//! Held reloads, taken up by whoever leads (docs/beyond-stakater.md §15). The executor records
//! a held reload on its workload; after a restart or a fail-over, the leader plans the recorded
//! resources again against what they are now and queues the result, which the executor holds
//! until the record's end. A change reverted meanwhile plans nothing, and the record goes.

use std::time::Instant;

use jiff::Timestamp;
use reloader_core::decide::DecideOptions;
use reloader_core::index::Index;
use reloader_core::model::{ResourceKey, WorkloadKey};
use reloader_core::timing::HeldReload;
use tracing::{info, warn};

use super::WorkQueue;
use crate::executor::Work;

/// Queues the held reload `key` records, unless a write to it is already queued (the executor
/// holding it is the one that recorded it). True when something was queued.
pub(crate) fn adopt(index: &Index, key: &WorkloadKey, decide: &DecideOptions, queue: &dyn WorkQueue) -> bool {
    let Some(text) = index.workload(key).and_then(|view| view.held_record()) else { return false };
    if queue.has_work(key) {
        return false;
    }
    let record = match HeldReload::parse(text) {
        Ok(record) => record,
        Err(problem) => {
            // Nothing to take up: the write that finds no change removes the record.
            warn!(workload = %key, %problem, "unreadable held-reload record; removing it");
            queue.enqueue(key.clone(), Work::Reload(Vec::new()), Instant::now());
            return true;
        }
    };
    let resources = record.resources.iter().map(|(kind, name)| ResourceKey::new(*kind, &key.namespace, name));
    let changes = index.replan(key, resources, decide);
    info!(workload = %key, until = %record.until, reason = record.reason.as_str(), changes = changes.len(), "taking up a held reload");
    queue.enqueue(key.clone(), Work::Reload(changes), instant_of(record.since));
    true
}

/// A past wall-clock instant on the monotonic clock (now, if further back than it reaches).
fn instant_of(at: Timestamp) -> Instant {
    let ago = Timestamp::now().duration_since(at);
    let ago = std::time::Duration::try_from(ago).unwrap_or_default();
    Instant::now().checked_sub(ago).unwrap_or_else(Instant::now)
}
