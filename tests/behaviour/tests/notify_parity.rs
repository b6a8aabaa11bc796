//! docs/behaviour.md B27 and E39: Events and alerts exactly as Stakater Reloader v1.4.21 records
//! and sends them (docs/compatibility.md §9, §10), against the real binary.
//!
//! Events are core/v1 Events on the workload: `kubectl describe` lists them with the field
//! selector it builds from the object (name, namespace, kind and uid), and event exporters see
//! Stakater's reasons, types, texts and reporting component.

use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams};
use reloader_harness::{NotYet, wait_until};
use reloader_tests::fixtures::*;
use reloader_tests::fixtures_extra::*;

const TIMEOUT: Duration = Duration::from_secs(60);
const CONFIG: &str = "app-config";
const SECRET: &str = "app-secret";

/// The core/v1 Events `kubectl describe deployment <name>` shows: its field selector names the
/// object's name, namespace, kind and uid.
async fn described_events(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<(Deployment, Vec<Event>), NotYet> {
    let deployment: Deployment = Api::namespaced(client.clone(), namespace).get(name).await?;
    let uid = deployment.metadata.uid.clone().unwrap_or_default();
    let selector = format!(
        "involvedObject.name={name},involvedObject.namespace={namespace},involvedObject.kind=Deployment,involvedObject.uid={uid}"
    );
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let listed = events.list(&ListParams::default().fields(&selector)).await?.items;
    Ok((deployment, listed))
}

/// Waits until `web` shows an Event with `reason` whose message is `message`, counted `count`
/// times; returns it and the Deployment as it is then.
async fn wait_for_event(
    client: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
    message: &str,
    count: i32,
) -> (Deployment, Event) {
    wait_until(&format!("{reason} x{count} on {name}: {message}"), TIMEOUT, || async {
        let (deployment, events) = described_events(client, namespace, name).await?;
        let found = events.iter().find(|e| {
            e.reason.as_deref() == Some(reason)
                && e.message.as_deref() == Some(message)
                && e.count.unwrap_or(1) >= count
        });
        match found {
            Some(event) => Ok((deployment, event.clone())),
            None => Err(NotYet::because(format!("{events:#?}"))),
        }
    })
    .await
    .unwrap()
}

/// Waits until `name` shows an Event with `reason`; returns the first.
async fn wait_for_reason(client: &Client, namespace: &str, name: &str, reason: &str) -> Event {
    wait_until(&format!("a {reason} Event on {name}"), TIMEOUT, || async {
        let (_, events) = described_events(client, namespace, name).await?;
        let found = events.into_iter().find(|e| e.reason.as_deref() == Some(reason));
        found.ok_or_else(|| NotYet::because(format!("no {reason} yet")))
    })
    .await
    .unwrap()
}

fn resource_version(value: Option<&String>) -> u64 {
    value.and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("a numeric resourceVersion: {value:?}"))
}

/// What Stakater's recorder sets on every Event: the reporting component named after the
/// resource type that changed, no host, and the workload as read before the write.
fn assert_reported_like_stakater(
    event: &Event,
    component: &str,
    workload: &Deployment,
    written: &Deployment,
) {
    let source = event.source.as_ref().expect("a source");
    assert_eq!(source.component.as_deref(), Some(component), "{event:#?}");
    assert_eq!(source.host, None, "{event:#?}");
    assert_eq!(event.reporting_component.as_deref(), Some(component), "{event:#?}");
    assert_eq!(event.reporting_instance.as_deref().unwrap_or_default(), "", "{event:#?}");
    let object = &event.involved_object;
    assert_eq!(object.api_version.as_deref(), Some("apps/v1"));
    assert_eq!(object.kind.as_deref(), Some("Deployment"));
    assert_eq!(object.name, workload.metadata.name);
    assert_eq!(object.namespace, workload.metadata.namespace);
    assert_eq!(object.uid, workload.metadata.uid);
    // The version read before the write: not older than before the change, older than after it.
    let referenced = resource_version(object.resource_version.as_ref());
    assert!(referenced >= resource_version(workload.metadata.resource_version.as_ref()), "{event:#?}");
    assert!(referenced < resource_version(written.metadata.resource_version.as_ref()), "{event:#?}");
}

/// `Reloaded` Events are listed by `kubectl describe`, with Stakater's texts and components; a
/// repeat of the same Event is counted on it, as client-go's recorder does.
#[tokio::test]
async fn reloaded_events_are_described_with_stakaters_fields() {
    let env = TestEnv::with_crds().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let ns = ns.name();
    let config = ResourceRef::configmap(CONFIG);
    let secret = ResourceRef::secret(SECRET);
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    resources.create(&secret, &[("p", "s1")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::Deployment, "web")
        .metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, CONFIG)
        .metadata_annotation(ANNOTATION_SECRET_RELOAD, SECRET)
        .env_from_configmap(CONFIG)
        .env_from_secret(SECRET)
        .create(client, ns)
        .await
        .unwrap();
    let _reloader = env.reloader(Strategy::EnvVars, &[]).await;

    let (before, _) = described_events(client, ns, "web").await.unwrap();
    let hash = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    web.wait_for_marker(client, &config, Strategy::EnvVars, &hash, TIMEOUT).await.unwrap();
    let from_config = format!(
        "Changes detected in '{CONFIG}' of type 'CONFIGMAP' in namespace '{ns}', Updated 'web' of type 'Deployment' in namespace '{ns}'"
    );
    let (written, event) = wait_for_event(client, ns, "web", "Reloaded", &from_config, 1).await;
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    assert_eq!(event.count, Some(1));
    assert_reported_like_stakater(&event, "reloader-configmaps", &before, &written);

    let hash = resources.update_data(&secret, &[("p", "s2")]).await.unwrap();
    web.wait_for_marker(client, &secret, Strategy::EnvVars, &hash, TIMEOUT).await.unwrap();
    let from_secret = format!(
        "Changes detected in '{SECRET}' of type 'SECRET' in namespace '{ns}', Updated 'web' of type 'Deployment' in namespace '{ns}'"
    );
    let (after_secret, event) = wait_for_event(client, ns, "web", "Reloaded", &from_secret, 1).await;
    assert_reported_like_stakater(&event, "reloader-secrets", &written, &after_secret);

    // The same change again: the first Event counts it instead of a new one appearing.
    let hash = resources.update_data(&config, &[("k", "v3")]).await.unwrap();
    web.wait_for_marker(client, &config, Strategy::EnvVars, &hash, TIMEOUT).await.unwrap();
    wait_for_event(client, ns, "web", "Reloaded", &from_config, 2).await;
    let (_, events) = described_events(client, ns, "web").await.unwrap();
    let reloaded: Vec<_> = events.iter().filter(|e| e.reason.as_deref() == Some("Reloaded")).collect();
    assert_eq!(reloaded.len(), 2, "one per message, repeats counted: {reloaded:#?}");
}

/// A write the API server refuses: Stakater's `ReloadFail` Warning, on the workload's uid.
#[tokio::test]
async fn a_refused_write_is_described_as_stakaters_reload_fail() {
    let env = TestEnv::with_crds().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let ns = ns.name();
    let config = ResourceRef::configmap(CONFIG);
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    let (label, value) = FROZEN_LABEL;
    let frozen = WorkloadSpec::new(Kind::Deployment, "frozen")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(CONFIG)
        .label(label, value)
        .without_pods()
        .create(client, ns)
        .await
        .unwrap();
    let freeze = TemplateFreeze::install(client, ns, std::slice::from_ref(&frozen)).await.unwrap();
    let _reloader = env.reloader(Strategy::EnvVars, &[]).await;

    resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    let prefix = format!("Update for 'frozen' of type 'Deployment' in namespace '{ns}' failed with error ");
    let event = wait_for_reason(client, ns, "frozen", "ReloadFail").await;
    let message = event.message.as_deref().unwrap_or_default();
    assert!(message.starts_with(&prefix) && message.len() > prefix.len(), "{message:?}");
    assert!(!message.contains("ErrorResponse"), "the API server's message, not a debug dump: {message:?}");
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let source = event.source.as_ref().and_then(|s| s.component.as_deref());
    assert_eq!(source, Some("reloader-configmaps"));
    assert_eq!(event.reporting_component.as_deref(), Some("reloader-configmaps"));
    freeze.remove().await.unwrap();
}

/// Our own `InvalidAnnotation` Warning stays, and `kubectl describe` lists it too.
#[tokio::test]
async fn invalid_annotation_warnings_are_described() {
    let env = TestEnv::with_crds().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let ns = ns.name();
    resources.create(&ResourceRef::configmap(CONFIG), &[("k", "v1")]).await.unwrap();
    WorkloadSpec::new(Kind::Deployment, "broken")
        .metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, "cfg-[(")
        .env_from_configmap(CONFIG)
        .without_pods()
        .create(client, ns)
        .await
        .unwrap();
    let _reloader = env.reloader(Strategy::EnvVars, &[]).await;
    let event = wait_for_reason(client, ns, "broken", "InvalidAnnotation").await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert!(event.message.as_deref().unwrap_or_default().contains("cfg-[("), "{event:#?}");
    assert_eq!(event.source.as_ref().and_then(|s| s.component.as_deref()), Some("reloader"));
}

/// Each sink receives Stakater's body byte for byte, `ALERT_ADDITIONAL_INFO` first.
#[tokio::test]
async fn alert_bodies_are_stakaters_byte_for_byte() {
    join_all(["slack", "teams", "gchat", "raw"].map(alert_body)).await;
}

async fn alert_body(sink: &'static str) {
    let env = TestEnv::new().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let ns = ns.name();
    let config = ResourceRef::configmap(CONFIG);
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::Deployment, "web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(CONFIG)
        .without_pods()
        .create(client, ns)
        .await
        .unwrap();
    let receiver = HttpRecorder::start().await;
    let _reloader = env
        .reloader_builder()
        .name(format!("reloader-{sink}"))
        .env("ALERT_ON_RELOAD", "true")
        .env("ALERT_WEBHOOK_URL", receiver.url("/alert"))
        .env("ALERT_SINK", sink)
        // Surrounding spaces are trimmed; `&` shows Go's JSON escaping.
        .env("ALERT_ADDITIONAL_INFO", " prod&eu ")
        .start()
        .await
        .unwrap();

    let hash = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    web.wait_for_marker(client, &config, Strategy::EnvVars, &hash, TIMEOUT).await.unwrap();
    let requests = receiver.wait_for(&format!("a {sink} alert"), TIMEOUT, |r| !r.is_empty()).await.unwrap();
    let alert = &requests[0];
    let text = format!(
        "Reloader detected changes in *{CONFIG}* of type *CONFIGMAP* in namespace *{ns}*. \
         Hence reloaded *web* of type *Deployment* in namespace *{ns}*"
    );
    let (content_type, body) = match sink {
        "slack" => (
            "application/json",
            format!(
                r#"{{"attachments":[{{"author_name":"Reloader","color":"good","text":"prod\u0026eu : {text}"}}]}}"#
            ),
        ),
        "teams" | "gchat" => ("application/json", format!(r#"{{"text":"prod\u0026eu : {text}"}}"#)),
        _ => ("text/plain", format!("prod&eu : {text}").replace('*', "")),
    };
    assert_eq!(alert.method, "POST", "{sink}");
    assert_eq!(alert.content_type.as_deref(), Some(content_type), "{sink}");
    assert_eq!(alert.text(), body, "{sink}");
    assert_eq!(requests.len(), 1, "{sink}: one alert per reload: {requests:?}");
}
