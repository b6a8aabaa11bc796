//! docs/behaviour.md §E42: no Secret value (nor ConfigMap value) appears in any output of the
//! controller: its log at trace level (text and JSON), Kubernetes Events, `/metrics`, alert
//! bodies, webhook bodies. Unique values are planted, every kind of event is made to happen
//! (update, create, delete; reload, alert, webhook), and every output is searched for each value
//! in raw, base64 and hex form.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use k8s_openapi::api::core::v1::{Event, Secret};
use kube::Client;
use kube::api::{Api, ListParams};
use reloader_harness::{ControlPlane, Reloader, TestNamespace};
use reloader_tests::fixtures::*;
use reloader_tests::fixtures_extra::*;

const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);
const CONFIG: &str = "app-config";
const SECRET: &str = "db-credentials";
const LATE_SECRET: &str = "late-credentials";
/// docs/compatibility.md §5: SHA-1 of `__RELOADER_EMPTY_DELETE_MARKER__`.
const DELETE_MARKER: &str = "aae45badef99284e4dae01d6046154ea9d99532f";

/// The planted values: every form any of them could take in an output.
struct Planted {
    values: Vec<String>,
}

impl Planted {
    fn new() -> Self {
        let values = ["pw-old-", "pw-new-", "pw-late-", "cm-old-", "cm-new-"]
            .iter()
            .map(|prefix| format!("{}Zq9", unique_token(prefix)))
            .collect();
        Self { values }
    }

    fn value(&self, index: usize) -> &str {
        &self.values[index]
    }

    /// `(value, form name, text)` for every value and form.
    fn forms(&self) -> Vec<(&str, &'static str, String)> {
        let mut forms = Vec::new();
        for value in &self.values {
            let bytes = value.as_bytes();
            forms.push((value.as_str(), "raw", value.clone()));
            forms.push((value.as_str(), "base64", STANDARD.encode(bytes)));
            forms.push((value.as_str(), "base64 without padding", STANDARD_NO_PAD.encode(bytes)));
            forms.push((value.as_str(), "base64url", URL_SAFE_NO_PAD.encode(bytes)));
            forms.push((value.as_str(), "hex", hex::encode(bytes)));
        }
        forms
    }

    /// Every `(output, form)` where a planted value shows up.
    fn leaks(&self, outputs: &[(String, String)]) -> Vec<String> {
        let mut found = Vec::new();
        for (output, text) in outputs {
            for (value, form, needle) in self.forms() {
                if text.contains(&needle) {
                    found.push(format!("{value} ({form}) in {output}"));
                }
            }
        }
        found
    }
}

/// One namespace with its reloader: Deployment `web` and CronJob `nightly` use ConfigMap
/// [`CONFIG`], Secret [`SECRET`] and (once it exists) Secret [`LATE_SECRET`].
struct Site {
    ns: TestNamespace,
    reloader: Reloader,
    web: WorkloadId,
    strategy: Option<Strategy>,
}

async fn site(
    plane: &ControlPlane,
    client: &Client,
    planted: &Planted,
    strategy: Option<Strategy>,
    configure: impl FnOnce(reloader_harness::ReloaderBuilder) -> reloader_harness::ReloaderBuilder,
) -> Site {
    let ns = plane.namespace().await;
    let resources = Resources::new(client, ns.name());
    resources.create(&ResourceRef::configmap(CONFIG), &[("setting", planted.value(3))]).await.unwrap();
    resources.create(&ResourceRef::secret(SECRET), &[("password", planted.value(0))]).await.unwrap();
    let mut web = None;
    for kind in [Kind::Deployment, Kind::CronJob] {
        let name = if kind == Kind::Deployment { "web" } else { "nightly" };
        let created = WorkloadSpec::new(kind, name)
            .metadata_annotation(ANNOTATION_AUTO, "true")
            .env_from_secret(SECRET)
            .secret_volume(SECRET)
            .configmap_key_ref(CONFIG)
            .env_from_secret(LATE_SECRET)
            .create(client, ns.name())
            .await
            .unwrap();
        web.get_or_insert(created);
    }
    let builder = Reloader::builder(plane).name(format!("reloader-{}", ns.name())).args([
        format!("--namespaces={}", ns.name()),
        "--log-level=trace".into(),
        "--reload-on-create=true".into(),
        "--reload-on-delete=true".into(),
    ]);
    let reloader = configure(builder).start().await.unwrap();
    Site { ns, reloader, web: web.unwrap(), strategy }
}

#[tokio::test]
async fn secret_and_configmap_values_never_appear_in_any_output() {
    let env = TestEnv::new().await;
    let TestEnv { plane, client, .. } = &env;
    let planted = Planted::new();
    let alerts = HttpRecorder::start().await;
    let hook = HttpRecorder::start().await;

    let sites = [
        site(plane, client, &planted, Some(Strategy::EnvVars), |b| {
            b.env("ALERT_ON_RELOAD", "true")
                .env("ALERT_WEBHOOK_URL", alerts.url("/raw"))
                .env("ALERT_SINK", "raw")
        })
        .await,
        site(plane, client, &planted, Some(Strategy::Annotations), |b| {
            b.args(["--reload-strategy=annotations", "--log-format=json"])
                .env("ALERT_ON_RELOAD", "true")
                .env("ALERT_WEBHOOK_URL", alerts.url("/slack"))
                .env("ALERT_SINK", "slack")
        })
        .await,
        site(plane, client, &planted, None, |b| {
            b.args(["--log-format=json".to_owned(), format!("--webhook-url={}", hook.url("/hook"))])
        })
        .await,
    ];

    for site in &sites {
        exercise(client, site, &planted).await;
    }
    // Webhook mode: update Secret, update ConfigMap, create, delete.
    hook.wait_for("four webhook notices", RELOAD_TIMEOUT, |r| r.len() >= 4).await.unwrap();
    // Alerts: update Secret, update ConfigMap, create (the delete alert may still be queued).
    alerts.wait_for("alerts from both sites", RELOAD_TIMEOUT, |r| r.len() >= 2 * 2 * 3).await.unwrap();

    // Every output, with a text it must contain: proof that it is the real, complete capture.
    let mut outputs: Vec<(String, String, &str)> = Vec::new();
    for site in &sites {
        let name = site.ns.name();
        outputs.push((format!("the log of the reloader for {name}"), site.reloader.log_text(), "TRACE"));
        let metrics = site.reloader.metrics().await.unwrap();
        outputs.push((
            format!("/metrics of the reloader for {name}"),
            metrics,
            "reloader_reload_executed_total",
        ));
        let events: Api<Event> = site.ns.api(client);
        let listed = events.list(&ListParams::default()).await.unwrap().items;
        // In webhook mode nothing reloads, so only the pods' own Events are there.
        let expected = if site.strategy.is_some() { "Reloaded" } else { "Scheduled" };
        outputs.push((format!("Events in {name}"), serde_json::to_string(&listed).unwrap(), expected));
    }
    for request in alerts.requests() {
        outputs.push((
            format!("alert body to {}", request.path),
            request.text(),
            "Reloader detected changes in",
        ));
    }
    for request in hook.requests() {
        outputs.push(("webhook body".to_owned(), request.text(), "\"hash\""));
    }
    for (output, text, expected) in &outputs {
        assert!(text.contains(expected), "{output} does not contain {expected:?}: {text}");
    }
    let outputs: Vec<(String, String)> =
        outputs.into_iter().map(|(output, text, _)| (output, text)).collect();
    // The search itself works: the Secret as the API serves it does contain a planted value.
    let served: Api<Secret> = sites[0].ns.api(client);
    let served = serde_json::to_string(&served.get(SECRET).await.unwrap()).unwrap();
    assert!(!planted.leaks(&[("the Secret itself".into(), served)]).is_empty(), "the search finds values");

    let leaks = planted.leaks(&outputs);
    assert!(leaks.is_empty(), "planted values leaked:\n{}", leaks.join("\n"));
}

/// Update the Secret, update the ConfigMap, create and delete another Secret; after each step
/// wait for the controller to act (the annotations strategy records only the latest change).
/// The webhook site is not waited for here: its notices are counted by the caller.
async fn exercise(client: &Client, site: &Site, planted: &Planted) {
    let resources = Resources::new(client, site.ns.name());
    let (secret, config, late) =
        (ResourceRef::secret(SECRET), ResourceRef::configmap(CONFIG), ResourceRef::secret(LATE_SECRET));
    let acted = |resource: &ResourceRef, hash: String| {
        let resource = resource.clone();
        async move {
            if let Some(strategy) = site.strategy {
                site.web.wait_for_marker(client, &resource, strategy, &hash, RELOAD_TIMEOUT).await.unwrap();
            }
        }
    };
    acted(&secret, resources.update_data(&secret, &[("password", planted.value(1))]).await.unwrap()).await;
    acted(&config, resources.update_data(&config, &[("setting", planted.value(4))]).await.unwrap()).await;
    acted(&late, resources.create(&late, &[("token", planted.value(2))]).await.unwrap()).await;
    resources.delete(&late).await.unwrap();
    match site.strategy {
        Some(Strategy::EnvVars) => {
            site.web.wait_for_no_marker(client, &late, Strategy::EnvVars, RELOAD_TIMEOUT).await.unwrap();
        }
        Some(Strategy::Annotations) => acted(&late, DELETE_MARKER.to_owned()).await,
        None => {}
    }
}
