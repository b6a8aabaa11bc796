//! Kubernetes Events on workloads, as Stakater records them (docs/compatibility.md §10):
//! `Reloaded` (Normal) and `ReloadFail` (Warning) in core/v1, on the workload object (uid
//! included, so `kubectl describe` lists them), reported by `reloader-<resources>` like the
//! Stakater controller that watched the changed resource; plus our own `InvalidAnnotation`.
//!
//! Recording never blocks a writer: Events go through a bounded queue to one delivery task,
//! which, like client-go's recorder, counts a repeat of an identical Event on the Event already
//! stored (`count`, `lastTimestamp`) instead of creating another. Each Event waits
//! [`DELIVERY_DELAY`] after it was recorded, so the write it reports is served first.

use std::collections::{HashMap, VecDeque};
use std::future::Future;

use k8s_openapi::api::core::v1::{Event, EventSource as CoreEventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use reloader_core::model::{ResourceKey, ResourceKind, WorkloadKey};
use reloader_core::timing::{HoldReason, LOOP_STOPPED, LoopStop};
use tokio::sync::mpsc;
use tracing::{Instrument as _, debug, warn};

use crate::client::FIELD_MANAGER;
use crate::observe::trace;

/// Events waiting for delivery; beyond this, new ones are dropped (and logged).
const QUEUE_CAPACITY: usize = 1024;
/// Events (and spam buckets) remembered, as many as client-go's recorder keeps.
const REMEMBERED: usize = 4096;
/// client-go's spam filter: 25 Events at once per object, then one per 5 minutes.
const SPAM_BURST: f64 = 25.0;
const SPAM_REFILL: std::time::Duration = std::time::Duration::from_secs(300);
/// How long an Event waits after the work that recorded it. A reload's Event is recorded as its
/// write returns, while kube-apiserver still sends the change to the workload's watchers (its
/// controller, whoever waits on the rollout); written at once, the Event competes with that for
/// the API server's CPU, and in a fan-out with the next writes. A report is never urgent.
/// Measured on bench F1 (docs/benchmark.md): 300 writes 0.96–0.99 s, against 1.09–1.14 s.
const DELIVERY_DELAY: std::time::Duration = std::time::Duration::from_millis(100);
/// The API server keeps notes of events.k8s.io to this many bytes; ours stay within it.
const MESSAGE_LIMIT: usize = 1024;

/// Why an Event is recorded: its `reason` and its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventReason {
    /// A workload was reloaded (Normal).
    Reloaded,
    /// A reload or a resume after a pause period failed (Warning).
    ReloadFail,
    /// A workload's reloader annotation cannot be understood (Warning).
    InvalidAnnotation,
    /// Ours: a pod was evicted to restart it with the reload (Normal, docs/beyond-stakater.md §13).
    PodEvicted,
    /// Ours: a restart by eviction stopped, a replacement not Ready in time (Warning).
    EvictionStopped,
    /// Ours: a pod a change reloads has no owner to recreate it, so it is not evicted (Warning,
    /// docs/beyond-stakater.md §14).
    PodNotEvicted,
    /// Ours: a reload waits for the workload's delay, minimum interval or maintenance window
    /// (Normal, docs/beyond-stakater.md §15).
    ReloadHeld,
    /// Ours: the loop guard stopped a workload's reloads (Warning, docs/beyond-stakater.md §15).
    ReloadLoopStopped,
}

impl EventReason {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            EventReason::Reloaded => "Reloaded",
            EventReason::ReloadFail => "ReloadFail",
            EventReason::InvalidAnnotation => "InvalidAnnotation",
            EventReason::PodEvicted => "PodEvicted",
            EventReason::EvictionStopped => "EvictionStopped",
            EventReason::PodNotEvicted => "PodNotEvicted",
            EventReason::ReloadHeld => "ReloadHeld",
            EventReason::ReloadLoopStopped => "ReloadLoopStopped",
        }
    }

    fn event_type(self) -> &'static str {
        match self {
            EventReason::Reloaded | EventReason::PodEvicted | EventReason::ReloadHeld => "Normal",
            EventReason::ReloadFail
            | EventReason::InvalidAnnotation
            | EventReason::EvictionStopped
            | EventReason::PodNotEvicted
            | EventReason::ReloadLoopStopped => "Warning",
        }
    }
}

/// Who reports an Event (`source.component` and `reportingComponent`). Stakater runs one
/// controller per watched resource type, each recording as `reloader-<resource>`; Events that
/// no resource caused are ours and report as `reloader`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventSource {
    Resource(ResourceKind),
    Reloader,
}

impl EventSource {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            EventSource::Resource(ResourceKind::ConfigMap) => "reloader-configmaps",
            EventSource::Resource(ResourceKind::Secret) => "reloader-secrets",
            EventSource::Resource(ResourceKind::SecretProviderClass) => {
                "reloader-secretproviderclasspodstatuses"
            }
            EventSource::Reloader => "reloader",
        }
    }
}

/// The object an Event is about: the workload as it was read before the write (Stakater
/// references that object, so its uid and resourceVersion). Without a uid (nothing could be
/// read) the Event is still recorded, but `kubectl describe` cannot list it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EventTarget {
    pub(crate) key: WorkloadKey,
    pub(crate) uid: Option<String>,
    pub(crate) resource_version: Option<String>,
}

impl EventTarget {
    /// A workload known by name only.
    pub(crate) fn named(key: WorkloadKey) -> Self {
        EventTarget { key, uid: None, resource_version: None }
    }

    fn object_reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(crate::kinds::info(self.key.kind).api_version()),
            kind: Some(self.key.kind.as_str().into()),
            namespace: Some(self.key.namespace.to_string()),
            name: Some(self.key.name.to_string()),
            uid: self.uid.clone(),
            resource_version: self.resource_version.clone(),
            field_path: None,
        }
    }
}

/// One Event to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WorkloadEvent {
    pub(crate) target: EventTarget,
    pub(crate) reason: EventReason,
    pub(crate) source: EventSource,
    pub(crate) message: String,
}

impl WorkloadEvent {
    /// Stakater's text for a written reload.
    pub(crate) fn reloaded(target: EventTarget, resource: &ResourceKey) -> Self {
        let message = format!(
            "Changes detected in '{}' of type '{}' in namespace '{}', Updated '{}' of type '{}' in namespace '{}'",
            resource.name,
            resource.kind.marker_type(),
            resource.namespace,
            target.key.name,
            target.key.kind.as_str(),
            target.key.namespace,
        );
        Self::new(target, EventReason::Reloaded, EventSource::Resource(resource.kind), message)
    }

    /// Stakater's text for a write that failed; `error` is the API server's message.
    pub(crate) fn reload_failed(target: EventTarget, resource: &ResourceKey, error: &str) -> Self {
        let message = format!(
            "Update for '{}' of type '{}' in namespace '{}' failed with error {error}",
            target.key.name,
            target.key.kind.as_str(),
            target.key.namespace,
        );
        Self::new(target, EventReason::ReloadFail, EventSource::Resource(resource.kind), message)
    }

    /// Ours (Stakater has no pause timer to fail).
    pub(crate) fn resume_failed(target: EventTarget, error: &str) -> Self {
        let message = format!("Resume after pause period failed: {error}");
        Self::new(target, EventReason::ReloadFail, EventSource::Reloader, message)
    }

    /// Ours: what is wrong with the workload's annotations.
    pub(crate) fn invalid_annotation(target: EventTarget, problems: String) -> Self {
        Self::new(target, EventReason::InvalidAnnotation, EventSource::Reloader, problems)
    }

    /// Ours: one pod of a restart by eviction evicted.
    pub(crate) fn pod_evicted(target: EventTarget, pod: &str, evicted: u32) -> Self {
        let message = format!("Evicted pod {pod} to restart it with the reload ({evicted} evicted so far)");
        Self::new(target, EventReason::PodEvicted, EventSource::Reloader, message)
    }

    /// Ours: a restart by eviction stopped; nothing more is evicted until the markers change.
    pub(crate) fn eviction_stopped(target: EventTarget, waited: std::time::Duration, evicted: u32) -> Self {
        let message = format!(
            "Restart by eviction stopped: a replacement pod was not Ready {}s after the last eviction \
             ({evicted} evicted); no further evictions until the next change",
            waited.as_secs()
        );
        Self::new(target, EventReason::EvictionStopped, EventSource::Reloader, message)
    }

    /// Ours: a pod a change reloads, left running: with no controller owner, nothing would
    /// recreate it.
    pub(crate) fn pod_not_evicted(target: EventTarget, change: &str) -> Self {
        let message = format!(
            "Not evicted: the pod has no controller owner to recreate it; restart it yourself to load the change to {change}"
        );
        Self::new(target, EventReason::PodNotEvicted, EventSource::Reloader, message)
    }

    /// Ours: a reload held until `until` (RFC 3339) by the workload's timing.
    pub(crate) fn reload_held(target: EventTarget, resources: &str, reason: HoldReason, until: &str) -> Self {
        let message = format!("Reload for {resources} held by the {} until {until}", reason.as_str());
        Self::new(target, EventReason::ReloadHeld, EventSource::Reloader, message)
    }

    /// Ours: the loop guard stopped the workload's reloads.
    pub(crate) fn reload_loop_stopped(target: EventTarget, stop: &LoopStop) -> Self {
        let message = format!(
            "Reloads stopped: {}, which keeps changing; delete the annotation {LOOP_STOPPED} to resume",
            stop.describe()
        );
        Self::new(target, EventReason::ReloadLoopStopped, EventSource::Reloader, message)
    }

    fn new(target: EventTarget, reason: EventReason, source: EventSource, message: String) -> Self {
        WorkloadEvent { target, reason, source, message: truncate(&message, MESSAGE_LIMIT) }
    }

    /// What makes two Events the same one, counted rather than repeated (client-go's key).
    fn identity(&self) -> String {
        [self.spam_key().as_str(), self.reason.as_label(), &self.message].join("\u{0}")
    }

    /// The spam filter's key (client-go's): the reporter, the object and the type, not the
    /// reason nor the message.
    fn spam_key(&self) -> String {
        let t = &self.target;
        [
            self.source.as_label(),
            t.key.kind.as_str(),
            &t.key.namespace,
            &t.key.name,
            t.uid.as_deref().unwrap_or_default(),
            self.reason.event_type(),
        ]
        .join("\u{0}")
    }

    /// The core/v1 Event as Stakater's recorder writes it the first time.
    fn to_core(&self, name: String, first: Timestamp, last: Timestamp, count: i32) -> Event {
        let component = self.source.as_label().to_string();
        Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(self.target.key.namespace.to_string()),
                ..Default::default()
            },
            involved_object: self.target.object_reference(),
            reason: Some(self.reason.as_label().into()),
            message: Some(self.message.clone()),
            type_: Some(self.reason.event_type().into()),
            first_timestamp: Some(Time(first)),
            last_timestamp: Some(Time(last)),
            count: Some(count),
            source: Some(CoreEventSource { component: Some(component.clone()), host: None }),
            reporting_component: Some(component),
            reporting_instance: Some(String::new()),
            ..Default::default()
        }
    }
}

/// Where Events on workloads go. Recording is best effort and returns at once: an Event is a
/// report, never a reason to fail, delay or retry a reload.
pub(crate) trait EventSink: Send + Sync {
    fn record(&self, event: WorkloadEvent);
}

/// Queues Events for [`EventDelivery`], which writes them through the API server.
pub(crate) struct EventRecorder {
    queue: mpsc::Sender<Recorded>,
}

/// An Event in the queue.
struct Recorded {
    event: WorkloadEvent,
    /// The trace context of the work that reports it.
    reported_by: opentelemetry::Context,
    at: tokio::time::Instant,
}

impl EventRecorder {
    /// The queue handle and the delivery loop, which the caller owns and runs; it ends when
    /// every handle is gone.
    pub(crate) fn new(client: Client) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let (queue, pending) = mpsc::channel(QUEUE_CAPACITY);
        let delivery = EventDelivery { client, seen: Observations::default(), spam: SpamFilter::default() };
        (EventRecorder { queue }, delivery.run(pending))
    }
}

impl EventSink for EventRecorder {
    fn record(&self, event: WorkloadEvent) {
        let recorded =
            Recorded { event, reported_by: trace::current_context(), at: tokio::time::Instant::now() };
        if let Err(e) = self.queue.try_send(recorded) {
            let event = match &e {
                mpsc::error::TrySendError::Full(recorded) | mpsc::error::TrySendError::Closed(recorded) => {
                    &recorded.event
                }
            };
            warn!(
                workload = %event.target.key,
                reason = event.reason.as_label(),
                "Event queue full or closed; Event dropped"
            );
        }
    }
}

struct EventDelivery {
    client: Client,
    seen: Observations,
    spam: SpamFilter,
}

impl EventDelivery {
    async fn run(mut self, mut pending: mpsc::Receiver<Recorded>) {
        while let Some(Recorded { mut event, reported_by, at }) = pending.recv().await {
            // From when it was recorded: Events recorded together are written together.
            tokio::time::sleep_until(at + DELIVERY_DELAY).await;
            let span = tracing::info_span!(
                "reloader.k8s_event",
                "reloader.k8s_event.reason" = event.reason.as_label(),
                "reloader.workload.kind" = event.target.key.kind.as_str(),
                "k8s.namespace.name" = %event.target.key.namespace,
                "reloader.workload.name" = %event.target.key.name,
                "error.type" = tracing::field::Empty,
            );
            trace::set_parent(&span, &reported_by);
            let delivered = self.deliver(&mut event).instrument(span.clone()).await;
            if let Err(error) = delivered {
                span.record("error.type", "api");
                warn!(
                    workload = %event.target.key,
                    reason = event.reason.as_label(),
                    %error,
                    "could not record Kubernetes Event"
                );
            }
        }
    }

    async fn deliver(&mut self, event: &mut WorkloadEvent) -> Result<(), kube::Error> {
        if event.target.uid.is_none()
            && let Err(error) = self.identify(&mut event.target).await
        {
            // Still worth recording by name: exporters see it, only `describe` does not.
            debug!(workload = %event.target.key, %error, "could not read the workload's uid for its Event");
        }
        let api: Api<Event> = Api::namespaced(self.client.clone(), &event.target.key.namespace);
        let now = Timestamp::now();
        // As client-go: the repeat is counted first, then the spam filter may skip the write
        // (a later repeat that passes carries the full count).
        let (seen, repeat) =
            self.seen.observe(event.identity(), || event_name(&event.target.key.name, now), now);
        if !self.spam.accept(event.spam_key(), std::time::Instant::now()) {
            debug!(workload = %event.target.key, reason = event.reason.as_label(), "Event skipped by the spam filter");
            return Ok(());
        }
        if repeat {
            let patch = Patch::Strategic(serde_json::json!({
                "count": seen.count,
                "lastTimestamp": Time(now),
                "message": event.message,
            }));
            match api.patch(&seen.name, &write_params(), &patch).await {
                Ok(_) => return Ok(()),
                // Expired or deleted since: record it anew, keeping the count (as client-go does).
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let core = event.to_core(seen.name, seen.first, now, seen.count);
        api.create(&create_params(), &core).await.map(drop)
    }
}

impl EventDelivery {
    /// Reads the uid of a workload known by name only (annotation problems are found in the
    /// index, which keeps no uid), so that `kubectl describe` lists its Events too.
    async fn identify(&self, target: &mut EventTarget) -> Result<(), kube::Error> {
        let resource = crate::kinds::api_resource(target.key.kind);
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &target.key.namespace, &resource);
        if let Some(found) = api.get_metadata_opt(&target.key.name).await? {
            target.uid = found.metadata.uid;
            target.resource_version = found.metadata.resource_version;
        }
        Ok(())
    }
}

/// Stakater's Events are written by field manager `Reloader`, like its workload writes.
fn create_params() -> PostParams {
    PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }
}

fn write_params() -> PatchParams {
    PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }
}

/// client-go's Event name: the object's name and the time in hex nanoseconds.
fn event_name(object: &str, at: Timestamp) -> String {
    format!("{object}.{:x}", at.as_nanosecond())
}

#[derive(Debug, Clone)]
struct Observation {
    name: String,
    first: Timestamp,
    count: i32,
}

/// The Events recorded so far, by identity.
#[derive(Default)]
struct Observations(Bounded<Observation>);

impl Observations {
    /// Counts an Event: a repeat of a recorded one (`true`, its count raised) or a first one,
    /// named by `name`. Returns the observation to write.
    fn observe(
        &mut self,
        identity: String,
        name: impl FnOnce() -> String,
        at: Timestamp,
    ) -> (Observation, bool) {
        if let Some(seen) = self.0.get_mut(&identity) {
            seen.count += 1;
            return (seen.clone(), true);
        }
        let seen = Observation { name: name(), first: at, count: 1 };
        self.0.insert(identity, seen.clone());
        (seen, false)
    }
}

/// client-go's spam filter: per reporting component, object and type, a burst of Events, then
/// one per refill period.
#[derive(Default)]
struct SpamFilter(Bounded<TokenBucket>);

#[derive(Debug, Clone, Copy)]
struct TokenBucket {
    tokens: f64,
    updated: std::time::Instant,
}

impl SpamFilter {
    fn accept(&mut self, key: String, now: std::time::Instant) -> bool {
        let bucket = match self.0.get_mut(&key) {
            Some(bucket) => bucket,
            None => {
                self.0.insert(key.clone(), TokenBucket { tokens: SPAM_BURST, updated: now });
                self.0.get_mut(&key).expect("just inserted")
            }
        };
        let refilled =
            now.saturating_duration_since(bucket.updated).as_secs_f64() / SPAM_REFILL.as_secs_f64();
        bucket.tokens = (bucket.tokens + refilled).min(SPAM_BURST);
        bucket.updated = now;
        if bucket.tokens < 1.0 {
            return false;
        }
        bucket.tokens -= 1.0;
        true
    }
}

/// A map that forgets its oldest entries beyond [`REMEMBERED`] (client-go's cache size).
struct Bounded<V> {
    by_key: HashMap<String, V>,
    order: VecDeque<String>,
}

impl<V> Default for Bounded<V> {
    fn default() -> Self {
        Bounded { by_key: HashMap::new(), order: VecDeque::new() }
    }
}

impl<V> Bounded<V> {
    fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.by_key.get_mut(key)
    }

    fn insert(&mut self, key: String, value: V) {
        if self.order.len() >= REMEMBERED
            && let Some(oldest) = self.order.pop_front()
        {
            self.by_key.remove(&oldest);
        }
        self.order.push_back(key.clone());
        self.by_key.insert(key, value);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_key.len()
    }
}

/// Cuts `s` to at most `max` bytes (the API server counts bytes), the ellipsis included.
fn truncate(s: &str, max: usize) -> String {
    const ELLIPSIS: char = '…';
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(ELLIPSIS.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ELLIPSIS}", &s[..end])
}

#[cfg(test)]
mod tests;
