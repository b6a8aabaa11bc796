use k8s_openapi::jiff::Timestamp;
use reloader_core::model::{ResourceKey, ResourceKind, WorkloadKey, WorkloadKind};

use std::time::Duration;

use super::{
    DELIVERY_DELAY, EventReason, EventRecorder, EventSink as _, EventSource, EventTarget, Observations,
    SpamFilter, WorkloadEvent, event_name, truncate,
};

fn target(kind: WorkloadKind, name: &str) -> EventTarget {
    EventTarget {
        key: WorkloadKey::new(kind, "shop", name),
        uid: Some("0f4c-uid".into()),
        resource_version: Some("4711".into()),
    }
}

fn resource(kind: ResourceKind, name: &str) -> ResourceKey {
    ResourceKey::new(kind, "shop", name)
}

/// Stakater's texts, reasons, types and reporting components (internal/pkg/handler/upgrade.go and
/// the per-resource controllers of v1.4.21).
#[test]
fn events_carry_stakaters_reason_type_source_and_text() {
    struct Case {
        event: WorkloadEvent,
        reason: &'static str,
        type_: &'static str,
        component: &'static str,
        message: &'static str,
    }
    let cases = [
        Case {
            event: WorkloadEvent::reloaded(
                target(WorkloadKind::Deployment, "web"),
                &resource(ResourceKind::ConfigMap, "web-config"),
            ),
            reason: "Reloaded",
            type_: "Normal",
            component: "reloader-configmaps",
            message: "Changes detected in 'web-config' of type 'CONFIGMAP' in namespace 'shop', Updated 'web' of type 'Deployment' in namespace 'shop'",
        },
        Case {
            event: WorkloadEvent::reloaded(
                target(WorkloadKind::CronJob, "nightly"),
                &resource(ResourceKind::Secret, "db"),
            ),
            reason: "Reloaded",
            type_: "Normal",
            component: "reloader-secrets",
            message: "Changes detected in 'db' of type 'SECRET' in namespace 'shop', Updated 'nightly' of type 'CronJob' in namespace 'shop'",
        },
        Case {
            event: WorkloadEvent::reloaded(
                target(WorkloadKind::StatefulSet, "store"),
                &resource(ResourceKind::SecretProviderClass, "vault"),
            ),
            reason: "Reloaded",
            type_: "Normal",
            component: "reloader-secretproviderclasspodstatuses",
            message: "Changes detected in 'vault' of type 'SECRETPROVIDERCLASS' in namespace 'shop', Updated 'store' of type 'StatefulSet' in namespace 'shop'",
        },
        Case {
            event: WorkloadEvent::reload_failed(
                target(WorkloadKind::DaemonSet, "agent"),
                &resource(ResourceKind::Secret, "token"),
                "daemonsets.apps \"agent\" is forbidden",
            ),
            reason: "ReloadFail",
            type_: "Warning",
            component: "reloader-secrets",
            message: "Update for 'agent' of type 'DaemonSet' in namespace 'shop' failed with error daemonsets.apps \"agent\" is forbidden",
        },
        Case {
            event: WorkloadEvent::resume_failed(target(WorkloadKind::Deployment, "web"), "timed out"),
            reason: "ReloadFail",
            type_: "Warning",
            component: "reloader",
            message: "Resume after pause period failed: timed out",
        },
        Case {
            event: WorkloadEvent::invalid_annotation(
                EventTarget::named(WorkloadKey::new(WorkloadKind::Deployment, "shop", "web")),
                "bad pattern".into(),
            ),
            reason: "InvalidAnnotation",
            type_: "Warning",
            component: "reloader",
            message: "bad pattern",
        },
    ];
    for case in cases {
        let at = Timestamp::from_second(1_700_000_000).unwrap();
        let core = case.event.to_core("web.1".into(), at, at, 1);
        assert_eq!(core.reason.as_deref(), Some(case.reason), "{}", case.message);
        assert_eq!(core.type_.as_deref(), Some(case.type_), "{}", case.message);
        assert_eq!(core.message.as_deref(), Some(case.message));
        let source = core.source.as_ref().and_then(|s| s.component.as_deref());
        assert_eq!(source, Some(case.component), "{}", case.message);
        assert_eq!(core.reporting_component.as_deref(), Some(case.component), "{}", case.message);
        assert_eq!(core.reporting_instance.as_deref(), Some(""), "Stakater's recorder has no host");
        assert_eq!(core.count, Some(1));
    }
}

#[test]
fn the_involved_object_is_the_workload_read_before_the_write() {
    let cases = [
        (WorkloadKind::Deployment, "apps/v1", "Deployment"),
        (WorkloadKind::CronJob, "batch/v1", "CronJob"),
        (WorkloadKind::Job, "batch/v1", "Job"),
        (WorkloadKind::Rollout, "argoproj.io/v1alpha1", "Rollout"),
    ];
    for (kind, api_version, kind_name) in cases {
        let event = WorkloadEvent::reloaded(target(kind, "w"), &resource(ResourceKind::ConfigMap, "c"));
        let at = Timestamp::from_second(1_700_000_000).unwrap();
        let core = event.to_core("w.1".into(), at, at, 1);
        let object = &core.involved_object;
        assert_eq!(object.api_version.as_deref(), Some(api_version));
        assert_eq!(object.kind.as_deref(), Some(kind_name));
        assert_eq!(object.namespace.as_deref(), Some("shop"));
        assert_eq!(object.name.as_deref(), Some("w"));
        assert_eq!(object.uid.as_deref(), Some("0f4c-uid"));
        assert_eq!(object.resource_version.as_deref(), Some("4711"));
        assert_eq!(core.metadata.namespace.as_deref(), Some("shop"));
        let json = serde_json::to_value(&core).unwrap();
        assert_eq!(json["firstTimestamp"], "2023-11-14T22:13:20Z");
        assert_eq!(json["reportingInstance"], "");
    }
}

#[test]
fn event_names_are_the_object_name_and_hex_nanoseconds() {
    let at = Timestamp::from_nanosecond(1_700_000_000_123_456_789).unwrap();
    assert_eq!(event_name("web", at), "web.17979cfe3d85cd15");
}

#[test]
fn identical_events_are_counted_and_different_ones_kept_apart() {
    let at = Timestamp::from_second(1_700_000_000).unwrap();
    let later = Timestamp::from_second(1_700_000_060).unwrap();
    let mut seen = Observations::default();
    let first = WorkloadEvent::reloaded(
        target(WorkloadKind::Deployment, "web"),
        &resource(ResourceKind::ConfigMap, "a"),
    );
    let other_resource = WorkloadEvent::reloaded(
        target(WorkloadKind::Deployment, "web"),
        &resource(ResourceKind::ConfigMap, "b"),
    );
    let mut other_uid = first.clone();
    other_uid.target.uid = Some("new-uid".into());
    // The resourceVersion changes with every write; the Event stays the same one.
    let mut next_version = first.clone();
    next_version.target.resource_version = Some("4712".into());

    let name = |n: &str| {
        let n = n.to_owned();
        move || n
    };
    let (observed, repeat) = seen.observe(first.identity(), name("web.1"), at);
    assert_eq!((observed.name.as_str(), observed.count, repeat), ("web.1", 1, false));
    let (observed, repeat) = seen.observe(next_version.identity(), name("unused"), later);
    assert_eq!((observed.name.as_str(), observed.count, observed.first, repeat), ("web.1", 2, at, true));
    assert_eq!(seen.observe(first.identity(), name("unused"), later).0.count, 3);
    for (other, fresh) in [(&other_resource, "web.2"), (&other_uid, "web.3")] {
        let (observed, repeat) = seen.observe(other.identity(), name(fresh), later);
        assert_eq!((observed.name.as_str(), observed.count, repeat), (fresh, 1, false));
    }
}

#[test]
fn observations_forget_the_oldest_beyond_their_bound() {
    let at = Timestamp::from_second(1).unwrap();
    let mut seen = Observations::default();
    for i in 0..=super::REMEMBERED {
        seen.observe(format!("event-{i}"), || format!("n{i}"), at);
    }
    assert_eq!(seen.0.len(), super::REMEMBERED);
    assert!(!seen.observe("event-0".into(), || "again".into(), at).1, "the oldest is forgotten");
    assert!(seen.observe(format!("event-{}", super::REMEMBERED), || "x".into(), at).1);
}

/// client-go's filter: 25 Events per reporter, object and type at once, then one per 5 minutes;
/// the reason and the message do not matter.
#[test]
fn the_spam_filter_allows_a_burst_then_one_per_five_minutes() {
    let start = std::time::Instant::now();
    let mut filter = SpamFilter::default();
    let web = WorkloadEvent::reloaded(
        target(WorkloadKind::Deployment, "web"),
        &resource(ResourceKind::ConfigMap, "a"),
    );
    let web_other_message = WorkloadEvent::reloaded(
        target(WorkloadKind::Deployment, "web"),
        &resource(ResourceKind::ConfigMap, "b"),
    );
    let api = WorkloadEvent::reloaded(
        target(WorkloadKind::Deployment, "api"),
        &resource(ResourceKind::ConfigMap, "a"),
    );
    let warning = WorkloadEvent::reload_failed(
        target(WorkloadKind::Deployment, "web"),
        &resource(ResourceKind::ConfigMap, "a"),
        "x",
    );

    let accepted = (0..30).filter(|i| {
        let event = if i % 2 == 0 { &web } else { &web_other_message };
        filter.accept(event.spam_key(), start)
    });
    assert_eq!(accepted.count(), 25);
    assert!(filter.accept(api.spam_key(), start), "another object has its own budget");
    assert!(filter.accept(warning.spam_key(), start), "another type has its own budget");
    assert!(!filter.accept(web.spam_key(), start + Duration::from_secs(299)));
    assert!(filter.accept(web.spam_key(), start + Duration::from_secs(300)), "one more after 5 minutes");
    assert!(!filter.accept(web.spam_key(), start + Duration::from_secs(301)));
}

#[test]
fn truncated_messages_fit_the_limit_with_their_ellipsis() {
    let short = "fits";
    assert_eq!(truncate(short, 1024), short);
    for text in ["x".repeat(2000), "é".repeat(1500)] {
        let cut = truncate(&text, 1024);
        assert!(cut.len() <= 1024, "{} bytes", cut.len());
        assert!(cut.ends_with('…'));
    }
}

#[test]
fn reasons_have_their_labels() {
    let reasons = [
        EventReason::Reloaded,
        EventReason::ReloadFail,
        EventReason::InvalidAnnotation,
        EventReason::PodEvicted,
        EventReason::EvictionStopped,
    ];
    let labels: Vec<_> = reasons.map(|r| (r.as_label(), r.event_type())).into();
    assert_eq!(
        labels,
        [
            ("Reloaded", "Normal"),
            ("ReloadFail", "Warning"),
            ("InvalidAnnotation", "Warning"),
            ("PodEvicted", "Normal"),
            ("EvictionStopped", "Warning")
        ]
    );
    assert_eq!(EventSource::Reloader.as_label(), "reloader");
}

/// Each Event is written [`DELIVERY_DELAY`] after it was recorded, and Events recorded together
/// are written together: the wait does not add up over a fan-out.
#[tokio::test(start_paused = true)]
async fn events_are_written_a_delay_after_they_were_recorded_not_one_after_another() {
    const CREATED: &[u8] =
        br#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"web.1"},"involvedObject":{}}"#;
    let (sent, mut writes) = tokio::sync::mpsc::unbounded_channel();
    let api = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let _ = sent.send((request.method().clone(), tokio::time::Instant::now()));
        async {
            let created =
                http::Response::builder().status(201).body(kube::client::Body::from(CREATED.to_vec()));
            Ok::<_, std::convert::Infallible>(created.expect("a valid response"))
        }
    });
    let (recorder, delivery) = EventRecorder::new(kube::Client::new(api, "default"));
    let delivery = tokio::spawn(delivery);

    let recorded = tokio::time::Instant::now();
    for name in ["web", "api"] {
        let settings = resource(ResourceKind::ConfigMap, "settings");
        recorder.record(WorkloadEvent::reloaded(target(WorkloadKind::Deployment, name), &settings));
    }
    for _ in ["web", "api"] {
        let (method, at) = writes.recv().await.expect("an Event written");
        assert_eq!(method, http::Method::POST, "a first Event is created");
        assert_eq!(at - recorded, DELIVERY_DELAY);
    }
    drop(recorder);
    delivery.await.expect("the delivery ends with its last handle");
}
