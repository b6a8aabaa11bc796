//! What the chart and the binary tell a user switching from Stakater (docs/migration.md): the
//! NOTES.txt of `helm install` for the values that behave differently from what a Stakater user
//! may expect (scoped mode adds the release namespace, webhook mode never reloads, chart 1.x
//! image keys, Stakater's own image), and the start-up log line of webhook mode.
//!
//! Helm 3 needs a reachable API server even for a client dry run, hence the plane.

use std::time::Duration;

use reloader_harness::{ControlPlane, NotYet, PlaneOptions, Reloader, wait_until};
use reloader_tests::chart::Helm;
use reloader_tests::fixtures::TestEnv;
use serde_json::{Value, json};

const RELEASE: &str = "rel";
const NAMESPACE: &str = "ops";
const WEBHOOK_MODE: &str = "never reloads a workload";
const LEGACY_KEYS: &str = "come from Stakater's chart 1.x";
const STAKATER_IMAGE: &str = "is Stakater Reloader's, not this";
const RELEASE_NAMESPACE_ADDED: &str = "The release namespace is always included";
const SELECTOR_UNUSED: &str = "apply only with\nreloader.watchGlobally=true";
const NO_FENCE: &str = "no write fence is installed";

/// A values set, what its notes must say and what they must not.
struct NotesRow {
    name: &'static str,
    values: Value,
    says: &'static [&'static str],
    never: &'static [&'static str],
}

fn rows() -> Vec<NotesRow> {
    let every_note =
        &[WEBHOOK_MODE, LEGACY_KEYS, STAKATER_IMAGE, RELEASE_NAMESPACE_ADDED, SELECTOR_UNUSED, NO_FENCE];
    vec![
        NotesRow {
            name: "default",
            values: json!({}),
            says: &["It watches every namespace."],
            never: every_note,
        },
        NotesRow {
            name: "scoped a, b",
            values: json!({"reloader": {"watchGlobally": false, "namespaces": ["b", "a"]}}),
            says: &["It watches only: a, b, ops.", RELEASE_NAMESPACE_ADDED],
            never: &[WEBHOOK_MODE, SELECTOR_UNUSED],
        },
        NotesRow {
            name: "scoped with a namespace selector",
            values: json!({"reloader": {"watchGlobally": false, "namespaceSelector": "team=a"}}),
            says: &["It watches only: ops.", SELECTOR_UNUSED],
            never: &[RELEASE_NAMESPACE_ADDED],
        },
        NotesRow {
            name: "webhookUrl",
            values: json!({"reloader": {"webhookUrl": "https://hooks.example.com/reload"}}),
            says: &[WEBHOOK_MODE, "https://hooks.example.com/reload"],
            never: &[LEGACY_KEYS],
        },
        NotesRow {
            name: "chart 1.x image keys",
            values: json!({"reloader": {"deployment": {"image": {
                "name": "registry.example.com/team/reloader", "tag": "v1.3.0"}}}}),
            says: &[
                "reloader.deployment.image.name, reloader.deployment.image.tag come from Stakater's chart 1.x",
                "the image is registry.example.com/team/reloader:v1.3.0",
            ],
            never: &[STAKATER_IMAGE, WEBHOOK_MODE],
        },
        NotesRow {
            name: "Stakater's image kept from a 2.x values file",
            values: json!({"image": {"repository": "ghcr.io/stakater/reloader", "tag": "v1.4.21"}}),
            says: &[STAKATER_IMAGE, "ghcr.io/stakater/reloader:v1.4.21"],
            never: &[LEGACY_KEYS],
        },
    ]
}

#[tokio::test]
async fn notes_say_what_differs_from_a_stakater_install() {
    let env = TestEnv::new().await;
    let helm = Helm::locate().expect("helm from the dev cache (hack/build helm)");
    let mut failures = Vec::new();
    for row in rows() {
        let notes = match helm.notes(RELEASE, NAMESPACE, &row.values, env.plane.kubeconfig_path()) {
            Ok(notes) => notes,
            Err(error) => {
                failures.push(format!("{}: helm install --dry-run: {error}", row.name));
                continue;
            }
        };
        if notes.trim().is_empty() {
            failures.push(format!("{}: no NOTES printed", row.name));
        }
        for text in row.says.iter().filter(|text| !notes.contains(*text)) {
            failures.push(format!("{}: notes lack {text:?}:\n{notes}", row.name));
        }
        for text in row.never.iter().filter(|text| notes.contains(*text)) {
            failures.push(format!("{}: notes must not say {text:?}:\n{notes}", row.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// An API server that does not serve ValidatingAdmissionPolicy (turned off here; absent before
/// Kubernetes 1.30): the fence cannot be installed, and the notes say so instead of leaving it out
/// silently (docs/kubernetes-versions.md).
#[tokio::test]
async fn notes_say_when_the_cluster_cannot_take_the_write_fence() {
    let off = ["validatingadmissionpolicies", "validatingadmissionpolicybindings"]
        .map(|resource| format!("admissionregistration.k8s.io/v1/{resource}=false"))
        .join(",");
    // The API server's own admission plugin watches the policies: off with them. The harness
    // turns ServiceAccount off on a plane without controllers; the last flag wins, so both.
    let plugins = "--disable-admission-plugins=ServiceAccount,ValidatingAdmissionPolicy".to_owned();
    let options = PlaneOptions {
        apiserver_args: vec![format!("--runtime-config={off}"), plugins],
        ..PlaneOptions::api_only()
    };
    let plane =
        ControlPlane::start(options).await.unwrap_or_else(|e| panic!("starting a plane without VAP: {e}"));
    let helm = Helm::locate().expect("helm from the dev cache (hack/build helm)");
    let (manifest, notes) = helm
        .dry_run(RELEASE, NAMESPACE, &json!({}), plane.kubeconfig_path())
        .expect("helm install --dry-run");
    assert!(notes.contains(NO_FENCE), "the notes say the fence is missing:\n{notes}");
    assert!(!manifest.contains("kind: ValidatingAdmissionPolicy"), "no policy is rendered:\n{manifest}");
}

#[tokio::test]
async fn webhook_mode_says_at_start_up_that_it_never_reloads() {
    let env = TestEnv::new().await;
    let reloader = Reloader::builder(env.plane)
        .args([format!("--namespaces={}", env.ns.name()), "--webhook-url=http://127.0.0.1:9/hook".to_owned()])
        .start()
        .await
        .expect("reloader in webhook mode starts");
    let line = wait_until("the webhook-mode line in the log", Duration::from_secs(30), || async {
        let log = reloader.log_text();
        log.lines()
            .find(|line| line.contains("webhook mode") && line.contains("no workload is ever reloaded"))
            .map(str::to_owned)
            .ok_or_else(|| NotYet::because("not logged yet"))
    })
    .await
    .expect("webhook mode is said once at start-up");
    assert!(!line.contains("127.0.0.1:9/hook"), "the webhook URL may carry a token; never logged: {line}");

    // The control: without --webhook-url nothing claims webhook mode.
    let reloading = Reloader::builder(env.plane)
        .args([format!("--namespaces={}", env.ns.name())])
        .start()
        .await
        .expect("reloader starts");
    assert!(!reloading.log_text().contains("webhook mode"), "{}", reloading.log_text());
}
