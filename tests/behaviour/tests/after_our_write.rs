//! docs/behaviour.md §C32e on the real control plane: a change that closely follows one of our
//! own writes is decided on what that write left, not on a view the workload watch has not
//! brought back yet. Each Deployment (env-vars, `--reload-on-create`, `--reload-on-delete`)
//! plays one sequence on its Secret, each step sent as soon as the previous one returned:
//!
//! - created, its reload seen, then deleted: the env var must go;
//! - created and deleted at once (the create's write still queued or in flight): it must go;
//! - its reload for `b` seen, then changed to `c` and back to `b` at once: it must record `b`.
//!
//! A second Secret, changed last, tells when the controller is done: it is in the same watch, so
//! its event comes after the others, and one workload's writes go out in order. Once its marker
//! shows, the first Secret's marker must match that Secret's last state.
//!
//! Build the binary first: `cargo build -p reloader-cli`.

use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use reloader_harness::PlaneError;
use reloader_tests::fixtures::*;

const ROUNDS: usize = 12;
/// Sequences played at once.
const IN_FLIGHT: usize = 6;
const RELOAD_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy)]
enum Sequence {
    DeleteAfterReload,
    CreateThenDelete,
    ChangeAndBack,
}

impl Sequence {
    const ALL: [Sequence; 3] =
        [Sequence::DeleteAfterReload, Sequence::CreateThenDelete, Sequence::ChangeAndBack];

    fn tag(self) -> &'static str {
        match self {
            Sequence::DeleteAfterReload => "seen-deleted",
            Sequence::CreateThenDelete => "created-deleted",
            Sequence::ChangeAndBack => "and-back",
        }
    }
}

struct Round {
    sequence: Sequence,
    workload: WorkloadSpec,
    subject: ResourceRef,
    sentinel: ResourceRef,
}

fn rounds() -> Vec<Round> {
    let mut rounds = Vec::new();
    for sequence in Sequence::ALL {
        for i in 0..ROUNDS {
            let name = format!("{}-{i}", sequence.tag());
            let subject = ResourceRef::secret(format!("{name}-subject"));
            let sentinel = ResourceRef::secret(format!("{name}-sentinel"));
            let workload = WorkloadSpec::new(Kind::Deployment, &name)
                .metadata_annotation(ANNOTATION_SECRET_RELOAD, format!("{},{}", subject.name, sentinel.name))
                .env_from_secret(&subject.name)
                .env_from_secret(&sentinel.name)
                .without_pods();
            rounds.push(Round { sequence, workload, subject, sentinel });
        }
    }
    rounds
}

fn deployment(namespace: &str, name: &str) -> WorkloadId {
    WorkloadId { kind: Kind::Deployment, namespace: namespace.to_owned(), name: name.to_owned() }
}

/// Plays `round`; the subject's hash the workload must end with (`None`: no marker).
async fn play(
    client: &Client,
    resources: &Resources,
    namespace: &str,
    round: &Round,
) -> Result<Option<String>, String> {
    let workload = deployment(namespace, round.workload.name());
    let subject = &round.subject;
    let step = |what: &'static str| move |error: PlaneError| format!("{what}: {error}");
    let reload = Strategy::EnvVars;
    Ok(match round.sequence {
        Sequence::DeleteAfterReload => {
            let hash = resources.create(subject, &[("token", "a")]).await.map_err(step("create"))?;
            workload
                .wait_for_marker(client, subject, reload, &hash, RELOAD_TIMEOUT)
                .await
                .map_err(step("the create's reload"))?;
            resources.delete(subject).await.map_err(step("delete"))?;
            None
        }
        Sequence::CreateThenDelete => {
            resources.create(subject, &[("token", "a")]).await.map_err(step("create"))?;
            resources.delete(subject).await.map_err(step("delete"))?;
            None
        }
        Sequence::ChangeAndBack => {
            let kept = resources.update_data(subject, &[("token", "b")]).await.map_err(step("to b"))?;
            workload
                .wait_for_marker(client, subject, reload, &kept, RELOAD_TIMEOUT)
                .await
                .map_err(step("the reload for b"))?;
            resources.update_data(subject, &[("token", "c")]).await.map_err(step("to c"))?;
            resources.update_data(subject, &[("token", "b")]).await.map_err(step("back to b"))?;
            Some(kept)
        }
    })
}

/// Plays `round`, then changes its sentinel and waits for that reload; what is wrong then.
async fn problem(client: &Client, resources: &Resources, namespace: &str, round: &Round) -> Option<String> {
    let name = round.workload.name();
    let workload = deployment(namespace, name);
    let checked = async {
        let wanted = play(client, resources, namespace, round).await?;
        let sentinel = round.sentinel.clone();
        let done = resources.update_data(&sentinel, &[("done", "yes")]).await.map_err(|e| e.to_string())?;
        workload
            .wait_for_marker(client, &sentinel, Strategy::EnvVars, &done, RELOAD_TIMEOUT)
            .await
            .map_err(|e| format!("the sentinel's reload: {e}"))?;
        let marker =
            workload.marker(client, &round.subject, Strategy::EnvVars).await.map_err(|e| e.to_string())?;
        let marker = marker.map(|marker| marker.value);
        Ok::<_, String>((marker != wanted).then(|| format!("wanted marker {wanted:?}, found {marker:?}")))
    };
    match checked.await {
        Ok(None) => None,
        Ok(Some(problem)) | Err(problem) => Some(format!("{name} ({:?}): {problem}", round.sequence)),
    }
}

#[tokio::test]
async fn a_change_right_after_our_write_is_decided_on_what_that_write_left() {
    let env = TestEnv::with_crds().await;
    let TestEnv { client, resources, ns, .. } = &env;
    let namespace = ns.name();
    let rounds = rounds();
    for round in &rounds {
        resources.create(&round.sentinel, &[("done", "no")]).await.expect("creating a sentinel");
        if let Sequence::ChangeAndBack = round.sequence {
            resources.create(&round.subject, &[("token", "a")]).await.expect("creating a subject");
        }
        round.workload.create(client, namespace).await.expect("creating a workload");
    }
    let _reloader =
        env.reloader(Strategy::EnvVars, &["--reload-on-create=true", "--reload-on-delete=true"]).await;

    let wrong: Vec<String> = futures::stream::iter(&rounds)
        .map(|round| problem(client, resources, namespace, round))
        .buffer_unordered(IN_FLIGHT)
        .filter_map(|problem| async move { problem })
        .collect()
        .await;
    assert!(wrong.is_empty(), "{} of {} wrong:\n  {}", wrong.len(), rounds.len(), wrong.join("\n  "));
}
