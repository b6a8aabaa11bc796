//! Start-up refuses a workload kind that was switched on explicitly but is not served, with one
//! clear error, instead of retrying 404s forever and never becoming ready (docs/compatibility.md
//! §7). A kind that is only detected and not served starts without a warning.

use std::time::Duration;

use reloader_harness::{ControlPlane, Crd, PlaneOptions, Reloader};
use reloader_tests::fixtures_extra::run_reloader_to_exit;

#[tokio::test]
async fn a_kind_switched_on_but_not_served_stops_start_up_with_a_clear_error() {
    // A private plane: the shared one may have the CRDs installed by other tests.
    let plane = ControlPlane::start(PlaneOptions::api_only()).await.expect("starting a private plane");
    let _logs = plane.dump_logs_on_panic();
    let cases = [
        ("--is-Argo-Rollouts=true", "rollouts.argoproj.io/v1alpha1"),
        ("--is-openshift=true", "deploymentconfigs.apps.openshift.io/v1"),
    ];
    for (flag, resource) in cases {
        let exited = run_reloader_to_exit(
            plane.kubeconfig_path(),
            &["--metrics-addr=127.0.0.1:0", flag],
            &[],
            Duration::from_secs(60),
        )
        .await;
        assert_ne!(exited.code, Some(0), "{flag} without its CRD must not start: {:?}", exited.lines());
        let error = exited.lines().into_iter().find(|l| l.contains("does not serve")).unwrap_or_default();
        assert!(
            error.contains(flag) && error.contains(resource),
            "the error names the flag and the missing resource: {:?}",
            exited.lines()
        );
    }

    // Without the flags the kinds are only detected: not served is nothing to warn about (kube's
    // client warns about the plain-text 404 of a group version that is not served).
    let reloader = Reloader::builder(&plane).start().await.expect("ready without the CRDs");
    let log = reloader.log_text();
    assert!(log.contains("served=false"), "DeploymentConfig detected as not served:\n{log}");
    // "404" as a word of its own: a figure such as `heap_allocated_bytes=1948944` is no 404.
    let mentions_404 =
        |line: &str| line.split(|c: char| !c.is_ascii_alphanumeric()).any(|word| word == "404");
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| mentions_404(l) || (l.contains(" WARN ") && l.contains("kube_client")))
        .collect();
    assert!(warnings.is_empty(), "nothing about the 404: {warnings:#?}");
    drop(reloader);

    // The positive twin: once the CRDs are served the same flags start and become ready.
    plane.install_crds(&[Crd::ArgoRollouts, Crd::DeploymentConfig]).await.expect("installing the CRDs");
    let reloader = Reloader::builder(&plane)
        .args(["--is-Argo-Rollouts=true", "--is-openshift=true"])
        .start()
        .await
        .expect("ready once the CRDs are served");
    let log = reloader.log_text();
    let start = log.lines().find(|l| l.contains("starting controller")).unwrap_or_default();
    assert!(start.contains("Rollout") && start.contains("DeploymentConfig"), "both kinds watched: {start}");
}
