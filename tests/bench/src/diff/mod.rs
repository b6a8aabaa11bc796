//! hack/diff-stakater: the differential check against the real Stakater Reloader binary
//! (docs/migration.md). One local control plane; each row of the scenario table
//! ([`scenarios::table`]) runs against Stakater, then against ours, each in a namespace of its
//! own with the same objects, flags and changes; what each left behind ([`snapshot`]) is compared
//! key by key. Then the switching day is played ([`switching`]): Stakater installed with its own
//! chart reloads every kind, its release is upgraded to our chart and our binary takes over.
//!
//! Differences listed in hack/diff-stakater.expected are reported as expected; any other one,
//! and any switching-day problem, fails the run. Never run in CI (it needs `STAKATER_BIN`).

mod expected;
mod scenarios;
mod snapshot;
mod switching;

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use reloader_harness::{ControlPlane, Crd, PlaneOptions};
use reloader_tests::fixtures::{Kind, Resources};
use reloader_tests::fixtures_extra::HttpRecorder;

use crate::BenchError;
use crate::identity::{self, from_json};
use crate::subject::{Flavour, Launch, Subject};

pub use expected::Expected;
pub use snapshot::Difference;

use scenarios::{Notify, Scenario, Step};
use snapshot::{Normaliser, Snapshot};

/// What to run.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    pub ours: PathBuf,
    pub stakater: PathBuf,
    /// Stakater's git dir, for its chart (v1.4.21) in the switching-day play; without it the
    /// play is skipped and the run says so.
    pub stakater_git: Option<PathBuf>,
    pub stakater_tag: String,
    /// The expected-differences file.
    pub expected: PathBuf,
    /// Where the controllers' logs go.
    pub log_dir: PathBuf,
    /// Only the scenarios whose name contains this.
    pub only: Option<String>,
    /// Skip the switching-day play.
    pub skip_switching: bool,
    /// The pause after each change (and after start-up) before anything is read.
    pub settle: Duration,
}

/// One difference and the expected-list entry that explains it, if any.
#[derive(Debug)]
pub struct Found {
    pub difference: Difference,
    pub expected: Option<usize>,
}

/// The outcome of a run.
#[derive(Debug)]
pub struct DiffReport {
    pub found: Vec<Found>,
    pub expected: Vec<Expected>,
    /// Switching-day problems, one sentence each; `None` when the play was skipped (and why).
    pub switching: Result<Vec<String>, String>,
}

impl DiffReport {
    pub fn unexpected(&self) -> impl Iterator<Item = &Difference> {
        self.found.iter().filter(|found| found.expected.is_none()).map(|found| &found.difference)
    }

    /// Expected entries that matched nothing this time (the diff shrank: remove them).
    pub fn unused_expected(&self) -> Vec<&Expected> {
        self.expected
            .iter()
            .enumerate()
            .filter(|(index, _)| !self.found.iter().any(|found| found.expected == Some(*index)))
            .map(|(_, expected)| expected)
            .collect()
    }

    pub fn passed(&self) -> bool {
        self.unexpected().next().is_none() && self.switching.as_ref().map(Vec::is_empty).unwrap_or(false)
    }

    /// The human-readable report.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let unexpected: Vec<&Difference> = self.unexpected().collect();
        out += &format!("UNEXPECTED differences from Stakater: {}\n", unexpected.len());
        for difference in &unexpected {
            out += &format!("  - {difference}\n");
        }
        let expected: Vec<&Found> = self.found.iter().filter(|found| found.expected.is_some()).collect();
        out += &format!("\nexpected differences (hack/diff-stakater.expected): {}\n", expected.len());
        for found in expected {
            let why = found
                .expected
                .and_then(|index| self.expected.get(index))
                .map(|e| e.why.as_str())
                .unwrap_or_default();
            out += &format!("  - {}  [{why}]\n", found.difference.subject());
        }
        let unused = self.unused_expected();
        if !unused.is_empty() {
            out += &format!("\nexpected entries that matched nothing (remove them?): {}\n", unused.len());
            for entry in unused {
                out += &format!("  - {}\n", entry.pattern);
            }
        }
        out += "\nswitching day: ";
        match &self.switching {
            Ok(problems) if problems.is_empty() => {
                out += "no workload rolled, no marker changed, every Stakater series still there\n"
            }
            Ok(problems) => {
                out += &format!("{} problem(s)\n", problems.len());
                for problem in problems {
                    out += &format!("  - {problem}\n");
                }
            }
            Err(why) => out += &format!("not played: {why}\n"),
        }
        out
    }
}

/// Runs the table and the switching day on a fresh plane.
pub async fn run(options: &DiffOptions) -> Result<DiffReport, BenchError> {
    let expected_text = std::fs::read_to_string(&options.expected).map_err(|source| BenchError::Io {
        context: format!("reading {}", options.expected.display()),
        source,
    })?;
    let expected = expected::parse(&expected_text).map_err(BenchError::measure)?;
    std::fs::create_dir_all(&options.log_dir).map_err(|source| BenchError::Io {
        context: format!("creating {}", options.log_dir.display()),
        source,
    })?;

    say("starting the control plane");
    let plane = ControlPlane::start(PlaneOptions::default()).await?;
    plane.install_crds(&[Crd::ArgoRollouts, Crd::DeploymentConfig]).await?;
    identity::set_up(&plane).await?;
    let receiver = HttpRecorder::start().await;
    let stakater = Subject { flavour: Flavour::Stakater, binary: options.stakater.clone() };
    let ours = Subject { flavour: Flavour::Ours, binary: options.ours.clone() };

    let mut found = Vec::new();
    let mut namespaces = Vec::new();
    for scenario in scenarios::table() {
        if options.only.as_deref().is_some_and(|only| !scenario.name.contains(only)) {
            continue;
        }
        let mut snapshots = Vec::new();
        for subject in [&stakater, &ours] {
            say(&format!("{} with {}", scenario.name, subject.label()));
            let namespace = format!("d-{}-{}", scenario.name, subject.label());
            snapshots.push(run_scenario(&plane, subject, &scenario, &namespace, &receiver, options).await?);
            namespaces.push(namespace);
        }
        for difference in snapshot::compare(scenario.name, &snapshots[0], &snapshots[1]) {
            let subject = difference.subject();
            let expected = expected.iter().position(|entry| entry.matches(&subject));
            found.push(Found { difference, expected });
        }
    }

    let switching = if options.skip_switching {
        Err("--skip-switching-day".to_owned())
    } else if let Some(git) = &options.stakater_git {
        delete_namespaces(&plane.client(), &namespaces).await?;
        say("switching day");
        let problems = switching::play(&plane, &stakater, &ours, git, &options.stakater_tag, options).await?;
        // A switching-day problem can be expected too (e.g. a Go-only series), as `switching-day <problem>`.
        let mut unexplained = Vec::new();
        for problem in problems {
            let difference = Difference {
                scenario: "switching-day".to_owned(),
                key: problem.clone(),
                stakater: None,
                ours: None,
            };
            match expected.iter().position(|entry| entry.matches(&difference.subject())) {
                Some(index) => found.push(Found { difference, expected: Some(index) }),
                None => unexplained.push(problem),
            }
        }
        Ok(unexplained)
    } else {
        Err("no Stakater git dir (STAKATER_GIT_DIR) to take its chart from".to_owned())
    };
    Ok(DiffReport { found, expected, switching })
}

/// Starts the controller and waits until it is ready. Stakater's port is fixed (`:9090`), and
/// on a shared machine another process may hold it for a moment: a start that fails to bind is
/// tried again a few times.
async fn start_ready(
    plane: &ControlPlane,
    subject: &Subject,
    launch: &Launch,
    options: &DiffOptions,
) -> Result<crate::subject::Controller, BenchError> {
    const ATTEMPTS: usize = 10;
    for attempt in 1..=ATTEMPTS {
        let mut controller = subject.start(plane, &options.log_dir, launch).await?;
        match controller.wait_ready(Duration::from_secs(60)).await {
            Ok(_) => return Ok(controller),
            Err(error) if attempt < ATTEMPTS && error.to_string().contains("address already in use") => {
                say(&format!("{}: its port is taken, trying again", subject.label()));
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
            Err(error) => return Err(error),
        }
    }
    unreachable!("the last attempt returns")
}

fn say(what: &str) {
    eprintln!("diff-stakater: {what}");
}

async fn create_namespace(client: &Client, name: &str) -> Result<(), BenchError> {
    let namespace: Namespace = from_json(json!({ "metadata": { "name": name } }));
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await?;
    Ok(())
}

/// Deletes them and waits until they are gone, so nothing in them is seen by a global watch.
async fn delete_namespaces(client: &Client, names: &[String]) -> Result<(), BenchError> {
    let api = Api::<Namespace>::all(client.clone());
    for name in names {
        let _ = api.delete(name, &DeleteParams::default()).await;
    }
    for name in names {
        reloader_harness::wait_until(
            &format!("namespace {name} to be gone"),
            Duration::from_secs(120),
            || async {
                match api.get_opt(name).await? {
                    None => Ok(()),
                    Some(_) => Err(reloader_harness::NotYet::because("still terminating")),
                }
            },
        )
        .await?;
    }
    Ok(())
}

/// One scenario against one controller in `namespace`: objects first, then the controller, then
/// each change; returns what it left behind.
async fn run_scenario(
    plane: &ControlPlane,
    subject: &Subject,
    scenario: &Scenario,
    namespace: &str,
    receiver: &HttpRecorder,
    options: &DiffOptions,
) -> Result<Snapshot, BenchError> {
    let client = plane.client();
    create_namespace(&client, namespace).await?;
    let resources = Resources::new(&client, namespace);
    for seed in &scenario.seeds {
        resources.create_annotated(&seed.resource, seed.data, seed.annotations).await?;
    }
    for workload in &scenario.workloads {
        workload.create(&client, namespace).await?;
    }

    let hook = receiver.url(&format!("/{namespace}/hook"));
    let mut launch = Launch::named(format!("diff-{namespace}")).arg(format!("--namespaces={namespace}"));
    launch = launch.args(scenario.flags.iter().map(|flag| flag.to_string()));
    launch.strategy = scenario.strategy.flag_value().to_owned();
    match scenario.notify {
        Notify::None => {}
        Notify::Webhook => launch = launch.arg(format!("--webhook-url={hook}")),
        Notify::Alert(sink) => {
            for (key, value) in [
                ("ALERT_ON_RELOAD", "true"),
                ("ALERT_SINK", sink),
                ("ALERT_WEBHOOK_URL", hook.as_str()),
                ("ALERT_ADDITIONAL_INFO", "cluster-a"),
            ] {
                launch.env.push((key.to_owned(), value.to_owned()));
            }
        }
    }
    let mut controller = start_ready(plane, subject, &launch, options).await?;
    tokio::time::sleep(options.settle).await;
    for step in &scenario.steps {
        match step {
            Step::Update(resource, data) => drop(resources.update_data(resource, data).await?),
            Step::Create(resource, data) => drop(resources.create(resource, data).await?),
            Step::Delete(resource) => resources.delete(resource).await?,
        }
        tokio::time::sleep(options.settle).await;
    }

    let norm = Normaliser::new(namespace);
    let mut snapshot = snapshot::workloads(&client, namespace, &Kind::ALL, &norm).await?;
    snapshot.extend(snapshot::jobs(&client, namespace, &norm).await?);
    snapshot.extend(snapshot::events(&client, namespace, &norm).await?);
    let prefix = format!("/{namespace}/");
    let requests: Vec<_> =
        receiver.requests().into_iter().filter(|request| request.path.starts_with(&prefix)).collect();
    snapshot.extend(snapshot::notifications(&requests, &norm));
    snapshot.extend(snapshot::metric_series(&controller.metrics().await?, &norm));
    let exited = controller.exited();
    controller.terminate(Duration::from_secs(5));
    if let Some(status) = exited {
        return Err(BenchError::measure(format!(
            "{} exited ({status}) during {}:\n{}",
            subject.label(),
            scenario.name,
            controller.log_tail(20)
        )));
    }
    Ok(snapshot)
}
