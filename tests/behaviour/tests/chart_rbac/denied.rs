//! docs/behaviour.md F49: a missing permission is reported clearly (log, `reloader_error_types_total`, a
//! `ReloadFail` Event) and does not crash-loop.

use std::time::Duration;

use reloader_core::model::WorkloadKind;
use reloader_harness::{NotYet, wait_until};
use reloader_tests::chart::exercise::forbidden_line;
use reloader_tests::chart::probe::{Probe, built_in_kinds};
use reloader_tests::chart::{ApplyMode, Cut, Helm, Installation, apply, release_name};
use reloader_tests::fixtures::TestEnv;
use serde_json::json;

use super::{Scope, WAIT, isolate};

/// Without `patch` on apps workloads: each failed reload is logged with the API server's reason,
/// counted in `reloader_error_types_total{type="forbidden"}` and reported by a `ReloadFail` Event; the
/// process stays up, live and ready, and keeps reloading the kinds it may write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_write_is_reported_and_does_not_crash_loop() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns: namespace, client, .. } = &env;
    let values = json!({ "reloader": { "watchGlobally": false } });
    let manifest = Helm::locate().unwrap().template(&release_name(), namespace.name(), &values).unwrap();
    let removal = manifest
        .rule_removals()
        .into_iter()
        .find(|r| r.summary.contains("deployments") && r.cut == Cut::Verb("patch".into()))
        .expect("the apps rule grants patch");
    let mut probe = Probe::create(client, namespace.name(), &built_in_kinds()).await.unwrap();

    let _isolation = isolate(Scope::ReleaseNamespace).await;
    let installation = Installation::install(plane, &manifest, Some(&removal)).await.unwrap();
    let mut pods = installation.start(plane).await.unwrap();
    let pod = &mut pods[0];
    pod.wait_ready(WAIT).await.expect("ready: reading is allowed");

    let allowed = [WorkloadKind::CronJob, WorkloadKind::Job];
    for round in 1..=2 {
        probe.mark().await.unwrap();
        probe.change_config_map(&round.to_string()).await.unwrap();
        // The positive twin: the same process reloads the kinds it may write.
        wait_until("the batch workloads to be reloaded", WAIT, || async {
            let changed = probe.changed().await?;
            if allowed.iter().all(|kind| changed.contains(kind)) {
                Ok(())
            } else {
                Err(NotYet(format!("{changed:?}")))
            }
        })
        .await
        .unwrap();
        wait_until("three forbidden errors per round", WAIT, || async {
            let errors = pod.metric(r#"reloader_error_types_total{type="forbidden"}"#).await?.unwrap_or(0.0);
            if errors >= f64::from(3 * round) { Ok(errors) } else { Err(NotYet(format!("{errors}"))) }
        })
        .await
        .unwrap();
        assert_eq!(pod.exit_status(), None, "the process keeps running after forbidden writes");
        assert_eq!(pod.get("/live").await.unwrap().0, 200);
        assert_eq!(pod.get("/readyz").await.unwrap().0, 200);
    }
    let failed =
        pod.metric(r#"reloader_reload_executed_total{success="false"}"#).await.unwrap().unwrap_or(0.0);
    assert!(failed >= 6.0, "failed reloads counted: {failed}");
    let log = pod.log_text();
    let line = log
        .lines()
        .find(|line| line.contains("reload failed") && line.contains("probe-deployment"))
        .unwrap_or_else(|| panic!("no reload failure logged for the Deployment:\n{log}"));
    assert!(line.contains(" is forbidden") && line.contains("cannot patch resource"), "{line}");
    // Events are written a moment after the failure they report.
    let events = wait_until("a ReloadFail Event on the Deployment", WAIT, || async {
        let events = probe.events(WorkloadKind::Deployment, "ReloadFail").await?;
        if events.is_empty() { Err(NotYet::because("none yet")) } else { Ok(events) }
    })
    .await
    .unwrap();
    let note = events[0].note.clone().expect("the Event has a note");
    assert!(note.contains(" is forbidden"), "the Event says why: {note}");
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert!(probe.template(WorkloadKind::Deployment).await.unwrap().is_some());
    // It would be restarted by the kubelet if it had exited: no restarts means the same process.
    assert_eq!(pod.exit_status(), None);

    pod.kill();
    probe.delete_workloads().await.unwrap();
    installation.uninstall(plane).await;
}

/// Without `watch` on ConfigMaps and Secrets: the watch failure is logged with the reason and
/// counted in `reloader_error_types_total{type="watch"}`, the process keeps retrying without exiting,
/// and once the permission is granted it picks up and reloads, with no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_watch_is_reported_retried_and_recovers() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns: namespace, client, .. } = &env;
    let values = json!({ "reloader": { "watchGlobally": false } });
    let manifest = Helm::locate().unwrap().template(&release_name(), namespace.name(), &values).unwrap();
    let removal = manifest
        .rule_removals()
        .into_iter()
        .find(|r| r.summary.contains("configmaps,secrets") && r.cut == Cut::Verb("watch".into()))
        .expect("the ConfigMap/Secret rule grants watch");
    let mut probe = Probe::create(client, namespace.name(), &[WorkloadKind::Deployment]).await.unwrap();

    let _isolation = isolate(Scope::ReleaseNamespace).await;
    let installation = Installation::install(plane, &manifest, Some(&removal)).await.unwrap();
    let mut pods = installation.start(plane).await.unwrap();
    let pod = &mut pods[0];
    wait_until("watch errors to be counted", WAIT, || async {
        let errors = pod.metric(r#"reloader_error_types_total{type="watch"}"#).await?.unwrap_or(0.0);
        if errors >= 2.0 { Ok(()) } else { Err(NotYet(format!("{errors}"))) }
    })
    .await
    .unwrap();
    let log = pod.log_text();
    let line = forbidden_line(&log).unwrap_or_else(|| panic!("the watch failure names the reason:\n{log}"));
    assert!(line.contains("cannot watch resource"), "{line}");
    assert_eq!(pod.exit_status(), None, "the process retries instead of exiting");
    assert_eq!(pod.get("/live").await.unwrap().0, 200);

    apply(client, &manifest.rbac(), ApplyMode::Persist).await.expect("granting the full rules");
    probe.mark().await.unwrap();
    // The watch comes back within its backoff (at most 30 s); keep changing until a reload shows.
    let mut round = 0;
    wait_until("a reload once watch is granted", Duration::from_secs(90), || {
        round += 1;
        let value = round.to_string();
        let probe = &probe;
        async move {
            if !probe.changed().await?.is_empty() {
                return Ok(());
            }
            probe.change_config_map(&value).await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            Err(NotYet("not reloaded yet".into()))
        }
    })
    .await
    .unwrap();
    assert_eq!(pod.exit_status(), None, "recovered in the same process");

    pod.kill();
    probe.delete_workloads().await.unwrap();
    installation.uninstall(plane).await;
}
