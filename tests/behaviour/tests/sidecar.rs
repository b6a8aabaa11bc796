//! `reloader sidecar` on the real control plane, with the real binary (`target/debug/reloader`;
//! build it first with `cargo build -p reloader-cli`): the write rules, atomic swaps under a
//! concurrent reader, one notification per content change, init mode, least-privilege RBAC from
//! the example manifest, a kube-apiserver restart, and docs/benchmark.md P1 (propagation latency).
//!
//! P1 is printed by `p1_propagation_latency`; for quiet numbers run it alone:
//! `cargo test -p reloader-tests --test sidecar p1 -- --nocapture --test-threads=1`.

#[path = "support/sidecar.rs"]
mod support;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::PostParams;
use reloader_harness::{ControlPlane, PlaneOptions};
use reloader_tests::fixtures::TestEnv;
use serde_json::json;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_mode_waits_for_every_object_writes_once_and_exits() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, .. } = &env;
    let work = tempfile::tempdir().unwrap();
    let mut init = Sidecar::start(
        plane.kubeconfig_path(),
        ns.name(),
        work.path(),
        &["--configmap=app", "--secret=creds", "--init", "--init-timeout=60s"],
    );

    tokio::time::sleep(Duration::from_secs(2)).await;
    init.assert_running();
    assert!(!init.dir.join("..data").exists(), "nothing is written before every object exists");

    let binary: &[u8] = &[0x00, 0x9f, 0x92, 0x96, 0xff, b'\n'];
    let configmaps: Api<ConfigMap> = ns.api(client);
    configmaps
        .create(&PostParams::default(), &configmap("app", &[("app.conf", "a=1\n")], &[("logo.bin", binary)]))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    init.assert_running();
    let secrets: Api<Secret> = ns.api(client);
    secrets
        .create(&PostParams::default(), &secret("creds", &[("password", "hunter2-init-value")]))
        .await
        .unwrap();

    let status = init.wait_for_exit(WAIT).await;
    assert!(status.success(), "init mode failed ({status}):\n{}", init.log());
    let dir = &init.dir;
    let generation = fs::read_link(dir.join("..data")).unwrap();
    assert!(generation.to_str().unwrap().starts_with("..20"), "{generation:?}");
    assert_eq!(generation_dirs(dir), [generation.to_str().unwrap()]);
    for key in ["app.conf", "logo.bin", "password"] {
        assert_eq!(fs::read_link(dir.join(key)).unwrap(), Path::new("..data").join(key));
    }
    assert_eq!(fs::read(dir.join("app.conf")).unwrap(), b"a=1\n");
    assert_eq!(fs::read(dir.join("logo.bin")).unwrap(), binary, "binaryData byte for byte");
    assert_eq!(fs::read(dir.join("password")).unwrap(), b"hunter2-init-value", "Secret data decoded");
    assert_eq!(mode(&dir.join("app.conf")), 0o644);
    assert_eq!(mode(&dir.join("password")), 0o640);
    assert!(!init.log().contains("hunter2-init-value"), "a secret value was logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_mode_times_out_naming_the_missing_objects() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, .. } = &env;
    let configmaps: Api<ConfigMap> = ns.api(&plane.client());
    configmaps.create(&PostParams::default(), &configmap("present", &[("k", "v")], &[])).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut init = Sidecar::start(
        plane.kubeconfig_path(),
        ns.name(),
        work.path(),
        &["--configmap=present,absent-cm", "--secret=absent-secret", "--init=true", "--init-timeout=3s"],
    );
    let started = Instant::now();
    let status = init.wait_for_exit(WAIT).await;
    assert!(!status.success(), "init mode must fail on timeout");
    assert!(started.elapsed() >= Duration::from_secs(3), "gave up before --init-timeout");
    let log = init.log();
    assert!(
        log.contains(
            "timed out after 3s waiting for configmap/absent-cm (not found), secret/absent-secret (not found)"
        ),
        "{log}"
    );
    assert!(!init.dir.join("..data").exists(), "nothing is written on timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_rule_and_one_notification_per_content_change() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, .. } = &env;
    let configmaps: Api<ConfigMap> = ns.api(client);
    let secrets: Api<Secret> = ns.api(client);
    configmaps
        .create(
            &PostParams::default(),
            &configmap("app", &[("a", "1"), ("shared", "from-configmap")], &[("bin", &[1, 2, 3])]),
        )
        .await
        .unwrap();
    secrets
        .create(
            &PostParams::default(),
            &secret("creds", &[("shared", "s3cr3t-shared"), ("token", "t0ken-v1")]),
        )
        .await
        .unwrap();

    let endpoint = Endpoint::start().await;
    let work = tempfile::tempdir().unwrap();
    let endpoint_flag = format!("--endpoint={}", endpoint.url);
    let mut sidecar = Sidecar::start(
        plane.kubeconfig_path(),
        ns.name(),
        work.path(),
        &["--configmap=app", "--secret=creds", &endpoint_flag, "--endpoint-method=PUT"],
    );
    let dir = sidecar.dir.clone();

    // First write: every key, the Secret winning the collision, one notification.
    endpoint.wait_for(1).await;
    let files = text_files(&dir);
    assert_eq!(files.keys().collect::<Vec<_>>(), ["a", "bin", "shared", "token"]);
    assert_eq!(files["shared"], "s3cr3t-shared", "the later object wins a collision");
    assert_eq!(mode(&dir.join("shared")), 0o640);
    assert_eq!(mode(&dir.join("a")), 0o644);
    assert_eq!(endpoint.calls.lock().unwrap()[0].1, "PUT /-/reload HTTP/1.1");
    assert!(
        sidecar.log().contains(r#"key "shared" is in both configmap/app and secret/creds"#),
        "{}",
        sidecar.log()
    );
    assert_eq!(sidecar.get("/readyz").await.0, 200);
    assert_eq!(sidecar.get("/live").await.0, 200);

    // One patch that removes a key, adds one and changes binaryData: one swap, one notification.
    let first_generation = fs::read_link(dir.join("..data")).unwrap();
    merge_patch(&configmaps, "app", json!({"data": {"a": null, "b": "2"}, "binaryData": {"bin": "BAUG"}}))
        .await;
    endpoint.wait_for(2).await;
    let files = read_generation(&dir).unwrap().unwrap();
    assert_eq!(files.keys().collect::<Vec<_>>(), ["b", "bin", "shared", "token"]);
    assert_eq!(files["bin"], [4, 5, 6]);
    assert!(fs::symlink_metadata(dir.join("a")).is_err(), "the removed key's link is gone");
    assert!(!dir.join(&first_generation).exists(), "the previous generation is removed");
    assert_eq!(generation_dirs(&dir).len(), 1);

    // A Secret value change.
    merge_patch(&secrets, "creds", json!({"stringData": {"token": "t0ken-v2"}})).await;
    endpoint.wait_for(3).await;
    assert_eq!(fs::read(dir.join("token")).unwrap(), b"t0ken-v2");

    // Metadata-only changes: no swap, no notification.
    let generation = fs::read_link(dir.join("..data")).unwrap();
    for i in 0..3 {
        merge_patch(&configmaps, "app", json!({"metadata": {"labels": {"touched": i.to_string()}}})).await;
        merge_patch(&secrets, "creds", json!({"metadata": {"annotations": {"touched": i.to_string()}}}))
            .await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(endpoint.count(), 3, "a metadata-only change notified");
    assert_eq!(
        fs::read_link(dir.join("..data")).unwrap(),
        generation,
        "a metadata-only change rewrote files"
    );

    // A deleted object keeps its files; re-created, it is followed again.
    configmaps.delete("app", &Default::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(endpoint.count(), 3);
    assert_eq!(fs::read(dir.join("b")).unwrap(), b"2");
    configmaps.create(&PostParams::default(), &configmap("app", &[("c", "3")], &[])).await.unwrap();
    endpoint.wait_for(4).await;
    assert_eq!(text_files(&dir).keys().collect::<Vec<_>>(), ["c", "shared", "token"]);

    let (status, metrics) = sidecar.get("/metrics").await;
    assert_eq!(status, 200);
    for line in [
        "reloader_sidecar_updates_total 4",
        r#"reloader_sidecar_notifications_total{kind="http",result="success"} 4"#,
    ] {
        assert!(metrics.contains(line), "missing {line:?} in\n{metrics}");
    }
    sidecar.assert_running();
    let log = sidecar.log();
    for value in ["s3cr3t-shared", "t0ken-v1", "t0ken-v2"] {
        assert!(!log.contains(value), "the secret value {value:?} was logged");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_never_sees_a_mixed_set_during_100_updates() {
    const KEYS: usize = 5;
    const UPDATES: usize = 100;
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, .. } = &env;
    let configmaps: Api<ConfigMap> = ns.api(&plane.client());
    let data = |generation: usize| -> serde_json::Map<String, serde_json::Value> {
        (0..KEYS)
            .map(|k| {
                // Sizes change with the generation, so a torn file would not pass for a whole one.
                let body = format!("generation={generation};{}", "x".repeat(100 + generation * 13 + k));
                (format!("file-{k}"), serde_json::Value::String(body))
            })
            .collect()
    };
    let initial: Vec<(String, String)> =
        data(0).into_iter().map(|(k, v)| (k, v.as_str().unwrap().to_owned())).collect();
    let initial: Vec<(&str, &str)> = initial.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    configmaps.create(&PostParams::default(), &configmap("app", &initial, &[])).await.unwrap();

    let endpoint = Endpoint::start().await;
    let work = tempfile::tempdir().unwrap();
    let endpoint_flag = format!("--endpoint={}", endpoint.url);
    let mut sidecar =
        Sidecar::start(plane.kubeconfig_path(), ns.name(), work.path(), &["--configmap=app", &endpoint_flag]);
    endpoint.wait_for(1).await;

    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (dir, done) = (sidecar.dir.clone(), done.clone());
        std::thread::spawn(move || {
            let mut passes = 0usize;
            let mut generations_seen = std::collections::BTreeSet::new();
            while !done.load(Ordering::Acquire) {
                let files = read_generation(&dir).unwrap().expect("written before the reader starts");
                assert_eq!(files.len(), KEYS, "a partial set: {:?}", files.keys());
                let generations: Vec<usize> = files
                    .iter()
                    .map(|(name, bytes)| {
                        let text = std::str::from_utf8(bytes).unwrap();
                        let (head, padding) = text.split_once(';').unwrap();
                        let generation: usize = head.strip_prefix("generation=").unwrap().parse().unwrap();
                        let k: usize = name.strip_prefix("file-").unwrap().parse().unwrap();
                        assert_eq!(padding.len(), 100 + generation * 13 + k, "a torn file {name}");
                        generation
                    })
                    .collect();
                assert!(generations.iter().all(|g| *g == generations[0]), "a mixed set: {generations:?}");
                generations_seen.insert(generations[0]);
                passes += 1;
            }
            (passes, generations_seen.len())
        })
    };

    for generation in 1..=UPDATES {
        merge_patch(&configmaps, "app", json!({ "data": data(generation) })).await;
        if generation % 10 == 0 {
            // Metadata-only: must not count as a change.
            merge_patch(&configmaps, "app", json!({"metadata": {"labels": {"at": generation.to_string()}}}))
                .await;
        }
        endpoint.wait_for(1 + generation).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    done.store(true, Ordering::Release);
    let (passes, distinct) = reader.join().expect("the reader saw a partial or mixed set");
    println!("reader: {passes} consistent passes over {distinct} generations");
    assert!(distinct > UPDATES / 2, "the reader raced too few swaps ({distinct}) to mean anything");
    assert_eq!(endpoint.count(), 1 + UPDATES, "exactly one notification per content change");
    assert_eq!(text_files(&sidecar.dir)["file-0"].split(';').next(), Some("generation=100"));
    sidecar.assert_running();
}

/// docs/benchmark.md P1: from an update's API response to the files swapped and to the endpoint called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p1_propagation_latency() {
    const UPDATES: usize = 100;
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, .. } = &env;
    let configmaps: Api<ConfigMap> = ns.api(&plane.client());
    configmaps.create(&PostParams::default(), &configmap("app", &[("value", "0")], &[])).await.unwrap();
    let endpoint = Endpoint::start().await;
    let work = tempfile::tempdir().unwrap();
    let endpoint_flag = format!("--endpoint={}", endpoint.url);
    let mut sidecar =
        Sidecar::start(plane.kubeconfig_path(), ns.name(), work.path(), &["--configmap=app", &endpoint_flag]);
    endpoint.wait_for(1).await;

    // Watches the swaps: when each generation's content first appears behind `..data`.
    let swaps: Arc<Mutex<BTreeMap<usize, Instant>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (dir, swaps, done) = (sidecar.dir.clone(), swaps.clone(), done.clone());
        std::thread::spawn(move || {
            let mut last = PathBuf::new();
            while !done.load(Ordering::Acquire) {
                if let Ok(target) = fs::read_link(dir.join("..data"))
                    && target != last
                    && let Ok(value) = fs::read_to_string(dir.join(&target).join("value"))
                {
                    let at = Instant::now();
                    swaps.lock().unwrap().entry(value.parse().unwrap()).or_insert(at);
                    last = target;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };

    let mut updated_at = Vec::with_capacity(UPDATES);
    for i in 1..=UPDATES {
        merge_patch(&configmaps, "app", json!({"data": {"value": i.to_string()}})).await;
        updated_at.push(Instant::now());
        endpoint.wait_for(1 + i).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done.store(true, Ordering::Release);
    watcher.join().unwrap();

    let swaps = swaps.lock().unwrap().clone();
    let called = endpoint.times();
    let mut to_swap = Vec::with_capacity(UPDATES);
    let mut to_call = Vec::with_capacity(UPDATES);
    for (i, updated) in updated_at.iter().enumerate() {
        let swapped = swaps.get(&(i + 1)).unwrap_or_else(|| panic!("update {} was never swapped in", i + 1));
        to_swap.push(swapped.saturating_duration_since(*updated));
        to_call.push(called[i + 1].saturating_duration_since(*updated));
    }
    to_swap.sort();
    to_call.sort();
    println!(
        "P1 sidecar propagation, {UPDATES} updates: files swapped p50 {} p99 {}; endpoint called p50 {} p99 {} \
         (target p99 <= 100 ms)",
        ms(percentile(&to_swap, 0.5)),
        ms(percentile(&to_swap, 0.99)),
        ms(percentile(&to_call, 0.5)),
        ms(percentile(&to_call, 0.99)),
    );
    sidecar.assert_running();
}

/// The Role in docs/sidecar-example.yaml (get/list/watch limited to the named objects) is enough,
/// and an object outside it is reported as forbidden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_manifests_least_privilege_role_is_enough() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, .. } = &env;

    let manifest = include_str!("../../../docs/sidecar-example.yaml");
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(manifest).unwrap();
    let mut account = None;
    for mut document in documents.into_iter().filter(|d| !d.is_null()) {
        document["metadata"]["namespace"] = json!(ns.name());
        match document["kind"].as_str().unwrap() {
            "Role" => {
                let role: k8s_openapi::api::rbac::v1::Role = serde_json::from_value(document).unwrap();
                ns.api(client).create(&PostParams::default(), &role).await.unwrap();
            }
            "RoleBinding" => {
                document["subjects"][0]["namespace"] = json!(ns.name());
                let binding: k8s_openapi::api::rbac::v1::RoleBinding =
                    serde_json::from_value(document).unwrap();
                ns.api(client).create(&PostParams::default(), &binding).await.unwrap();
            }
            "ServiceAccount" => account = document["metadata"]["name"].as_str().map(str::to_owned),
            _ => {}
        }
    }
    let account = account.expect("the example has a ServiceAccount");
    let configmaps: Api<ConfigMap> = ns.api(client);
    for name in ["prometheus-config", "prometheus-rules", "not-in-the-role"] {
        configmaps.create(&PostParams::default(), &configmap(name, &[(name, "x")], &[])).await.unwrap();
    }
    let secrets: Api<Secret> = ns.api(client);
    secrets
        .create(&PostParams::default(), &secret("prometheus-remote-write", &[("password", "pw")]))
        .await
        .unwrap();

    // A kubeconfig for the ServiceAccount: the admin one with the account's token.
    let config = plane.service_account_config(ns.name(), &account).await.unwrap();
    let mut kubeconfig = kube::config::Kubeconfig::read_from(plane.kubeconfig_path()).unwrap();
    for named in &mut kubeconfig.auth_infos {
        named.auth_info =
            Some(kube::config::AuthInfo { token: config.auth_info.token.clone(), ..Default::default() });
    }
    let work = tempfile::tempdir().unwrap();
    let kubeconfig_path = work.path().join("kubeconfig");
    fs::write(&kubeconfig_path, serde_json::to_string(&kubeconfig).unwrap()).unwrap();

    fs::create_dir_all(work.path().join("allowed")).unwrap();
    let mut allowed = Sidecar::start(
        &kubeconfig_path,
        ns.name(),
        &work.path().join("allowed"),
        &["--configmap=prometheus-config,prometheus-rules", "--secret=prometheus-remote-write", "--init"],
    );
    let status = allowed.wait_for_exit(WAIT).await;
    assert!(status.success(), "{}", allowed.log());
    assert_eq!(
        text_files(&allowed.dir).keys().collect::<Vec<_>>(),
        ["password", "prometheus-config", "prometheus-rules"]
    );

    fs::create_dir_all(work.path().join("denied")).unwrap();
    let mut denied = Sidecar::start(
        &kubeconfig_path,
        ns.name(),
        &work.path().join("denied"),
        &["--configmap=prometheus-config,not-in-the-role", "--init", "--init-timeout=3s"],
    );
    let status = denied.wait_for_exit(WAIT).await;
    assert!(!status.success());
    let log = denied.log();
    assert!(log.contains("configmap/not-in-the-role (list failed:") && log.contains("forbidden"), "{log}");
}

/// kube-apiserver killed right after an update and started again: the update still arrives,
/// later updates too, and the re-list does not notify again for content already written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apiserver_restart_loses_no_update() {
    let plane = ControlPlane::start(PlaneOptions::api_only()).await.expect("starting a plane of our own");
    let env = TestEnv::on(&plane).await;
    let TestEnv { ns, client, .. } = &env;
    let configmaps: Api<ConfigMap> = ns.api(client);
    configmaps.create(&PostParams::default(), &configmap("app", &[("value", "v0")], &[])).await.unwrap();
    let endpoint = Endpoint::start().await;
    let work = tempfile::tempdir().unwrap();
    let endpoint_flag = format!("--endpoint={}", endpoint.url);
    let mut sidecar =
        Sidecar::start(plane.kubeconfig_path(), ns.name(), work.path(), &["--configmap=app", &endpoint_flag]);
    let dir = sidecar.dir.clone();
    endpoint.wait_for(1).await;

    for round in 1..=3 {
        let value = format!("v{round}");
        merge_patch(&configmaps, "app", json!({"data": {"value": value}})).await;
        plane.stop_apiserver();
        tokio::time::sleep(Duration::from_secs(3)).await;
        sidecar.assert_running();
        plane.start_apiserver().await.expect("restarting kube-apiserver");
        wait_for_files(&dir, &format!("{value} after restart {round}"), |f| f.get("value") == Some(&value))
            .await;
        endpoint.wait_for(1 + round).await;
    }

    // Updates after the restarts still flow.
    let configmaps: Api<ConfigMap> = ns.api(&plane.client());
    merge_patch(&configmaps, "app", json!({"data": {"value": "after"}})).await;
    wait_for_files(&dir, "the update after the restarts", |f| {
        f.get("value").map(String::as_str) == Some("after")
    })
    .await;
    endpoint.wait_for(5).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(endpoint.count(), 5, "a re-list or resumed watch notified twice");
    sidecar.assert_running();
    let (_, metrics) = sidecar.get("/metrics").await;
    assert!(metrics.contains("reloader_sidecar_watch_errors_total{object=\"configmap/app\"}"), "{metrics}");
}
