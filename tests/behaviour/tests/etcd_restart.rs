//! etcd killed (SIGKILL) and restarted under the plane (docs/behaviour.md F51): kube-apiserver
//! keeps running but can write nothing; it keeps the controller's watches open from its cache.
//! A write due during the outage is held and lands once etcd is back; the watches deliver
//! again, a later change reloads exactly once, and nothing reloads for the outage. Counted from
//! the API server: each workload's generation and Deployment revision.

mod ha_support;

use std::time::{Duration, Instant};

use reloader_harness::{NotYet, PlaneOptions, Reloader, wait_until};
use reloader_tests::fixtures::{Resources, Strategy, TestEnv, negative_wait};

use ha_support::{WebAndIdle, generation, private_plane, reloads_executed, rollouts_of, wait_for_rollouts};

const REACTION: Duration = Duration::from_secs(90);
/// Long enough for kube-apiserver to notice etcd is gone and for the controller's watches to
/// be affected (its etcd client retries for several seconds before giving up a request).
const OUTAGE: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_restart_watches_resume_later_changes_reload_and_nothing_reloads_spuriously() {
    let plane = private_plane(PlaneOptions::default()).await;
    let env = TestEnv::on(&plane).await;
    let TestEnv { ns, client, resources, .. } = &env;
    let WebAndIdle { settings, web, idle, .. } = WebAndIdle::create(&env).await;
    // The coalescing window holds a write for 3 s: long enough to kill etcd under it.
    let mut reloader = env.reloader_builder().arg("--coalesce-period=3s").start().await.unwrap();

    let settings_v2 = resources.update_data(&settings, &[("level", "2")]).await.unwrap();
    let latency = web
        .wait_for_marker(client, &settings, Strategy::EnvVars, &settings_v2, REACTION)
        .await
        .unwrap()
        .saturating_sub(Duration::from_secs(3));
    wait_for_rollouts(client, &web, 2).await;
    wait_for_rollouts(client, &idle, 1).await;

    // A change whose write falls in the outage: kube-apiserver holds it until etcd is back.
    let settings_v3 = resources.update_data(&settings, &[("level", "3")]).await.unwrap();
    let held = Instant::now();
    wait_until("the change to be queued", Duration::from_secs(3), || async {
        match reloader.metric("reloader_workqueue_adds_total").await.ok().flatten() {
            Some(adds) if adds >= 2.0 => Ok(()),
            other => Err(NotYet::because(format!("{other:?} queued"))),
        }
    })
    .await
    .unwrap();
    plane.kill_etcd();
    tokio::time::sleep(OUTAGE).await;
    assert!(reloader.exit_status().is_none(), "reloader exited during the outage:\n{}", reloader.log_text());
    plane.start_etcd().await.unwrap();

    // Writes go through again once kube-apiserver has reconnected to etcd.
    let client = plane.client();
    let resources = Resources::new(&client, ns.name());
    web.wait_for_marker(&client, &settings, Strategy::EnvVars, &settings_v3, REACTION).await.unwrap();
    let settings_v4 = wait_until("a write through the API server after etcd's restart", REACTION, || async {
        resources.update_data(&settings, &[("level", "4")]).await.map_err(|e| NotYet::because(e.to_string()))
    })
    .await
    .unwrap();
    let after_restart =
        web.wait_for_marker(&client, &settings, Strategy::EnvVars, &settings_v4, REACTION).await.unwrap();
    let after_restart = after_restart.saturating_sub(Duration::from_secs(3));
    tokio::time::sleep(negative_wait(latency.max(after_restart))).await;

    assert!(reloader.exit_status().is_none(), "reloader exited:\n{}", reloader.log_text());
    assert_eq!(
        generation(&client, &web).await,
        4,
        "web: created, v2, v3 (held through the outage), v4 — each once"
    );
    assert_eq!(generation(&client, &idle).await, 1, "idle reloaded although quiet never changed");
    wait_for_rollouts(&client, &web, 4).await;
    assert_eq!(rollouts_of(&client, &idle).await, 1, "idle: no new pod template");
    assert_eq!(reloads_executed(&reloader).await, 3.0, "reloads executed");

    // What an operator sees: the write that hung through the outage, in the log and in the
    // write latency (one write above the 10 s bucket), and no failed reload.
    let log = reloader.log_text();
    let slow =
        log.lines().filter(|l| l.contains("the API server was slow to answer a write")).collect::<Vec<_>>();
    assert!(slow.iter().any(|l| l.contains("/web")), "no slow-write warning for web:\n{log}");
    assert!(!log.contains("reload failed"), "{log}");
    let kind = r#"{workload_kind="Deployment"}"#;
    let count = metric(&reloader, &format!("reloader_action_latency_seconds_count{kind}")).await;
    let within_10s =
        metric(&reloader, r#"reloader_action_latency_seconds_bucket{le="10.0",workload_kind="Deployment"}"#)
            .await;
    assert_eq!((count, within_10s), (3.0, 2.0), "one write of three took longer than 10 s");
    assert_eq!(metric(&reloader, r#"reloader_reload_executed_total{success="false"}"#).await, 0.0);
    eprintln!(
        "etcd restart: reload latency {latency:?} before, {held:?} for the change held through a \
         {OUTAGE:?} outage, {after_restart:?} after",
        held = held.elapsed()
    );
}

async fn metric(reloader: &Reloader, sample: &str) -> f64 {
    reloader.metric(sample).await.unwrap().unwrap_or_else(|| panic!("no sample {sample}"))
}
