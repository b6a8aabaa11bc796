//! The scenario table of hack/diff-stakater: each row is a set of ConfigMaps, Secrets and
//! workloads, the flags (and alert environment) both controllers run with, and the changes made
//! while they run. Every annotation form, both strategies, every kind the plane hosts, the
//! create/delete/sync flags, pause, webhook mode and each alert sink are covered.

use reloader_tests::fixtures::{
    ANNOTATION_AUTO, ANNOTATION_CONFIGMAP_AUTO, ANNOTATION_CONFIGMAP_EXCLUDE, ANNOTATION_CONFIGMAP_RELOAD,
    ANNOTATION_IGNORE, ANNOTATION_MATCH, ANNOTATION_SEARCH, ANNOTATION_SECRET_AUTO, ANNOTATION_SECRET_RELOAD,
    Kind, ResourceRef, Strategy, WorkloadSpec,
};
use reloader_tests::fixtures_extra::ANNOTATION_PAUSE_PERIOD;

/// A change made while the controller runs; each is followed by a settling pause.
#[derive(Debug, Clone)]
pub enum Step {
    Update(ResourceRef, &'static [(&'static str, &'static str)]),
    Create(ResourceRef, &'static [(&'static str, &'static str)]),
    Delete(ResourceRef),
}

/// Where the controller sends notifications in a row, if anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notify {
    None,
    /// `--webhook-url` (webhook mode: notify, never reload).
    Webhook,
    /// `ALERT_ON_RELOAD=true` with this `ALERT_SINK` (`raw` is Stakater's plain webhook).
    Alert(&'static str),
}

/// A resource that exists before the controller starts.
#[derive(Debug, Clone)]
pub struct Seed {
    pub resource: ResourceRef,
    pub data: &'static [(&'static str, &'static str)],
    pub annotations: &'static [(&'static str, &'static str)],
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: &'static str,
    pub strategy: Strategy,
    /// Flags both controllers get, besides `--namespaces=<its namespace>` and the strategy.
    pub flags: &'static [&'static str],
    pub notify: Notify,
    pub seeds: Vec<Seed>,
    pub workloads: Vec<WorkloadSpec>,
    pub steps: Vec<Step>,
}

const V1: &[(&str, &str)] = &[("key", "v1")];
const V2: &[(&str, &str)] = &[("key", "v2")];
const V3: &[(&str, &str)] = &[("key", "v3")];
/// Argo Rollouts on. DeploymentConfigs are detected by ours; Stakater v1.4.21 has no
/// `--is-openshift` and does not reload them (an expected difference).
const EVERY_KIND: &[&str] = &["--is-Argo-Rollouts=true"];

fn config() -> ResourceRef {
    ResourceRef::configmap("app-config")
}

fn secret() -> ResourceRef {
    ResourceRef::secret("app-secret")
}

fn seed(resource: ResourceRef) -> Seed {
    Seed { resource, data: V1, annotations: &[] }
}

fn deployment(name: &str) -> WorkloadSpec {
    WorkloadSpec::new(Kind::Deployment, name).replicas(0)
}

/// Every annotation form on Deployments, and the auto annotation on every other kind.
fn annotation_forms() -> Vec<WorkloadSpec> {
    let (config, secret) = (config(), secret());
    let mut workloads = vec![
        deployment("auto")
            .metadata_annotation(ANNOTATION_AUTO, "true")
            .env_from_configmap(&config.name)
            .env_from_secret(&secret.name),
        deployment("auto-false")
            .metadata_annotation(ANNOTATION_AUTO, "false")
            .env_from_configmap(&config.name),
        deployment("auto-template")
            .template_annotation(ANNOTATION_AUTO, "true")
            .env_from_configmap(&config.name),
        deployment("cm-auto")
            .metadata_annotation(ANNOTATION_CONFIGMAP_AUTO, "true")
            .configmap_volume(&config.name)
            .env_from_secret(&secret.name),
        deployment("secret-auto")
            .metadata_annotation(ANNOTATION_SECRET_AUTO, "true")
            .secret_volume(&secret.name)
            .env_from_configmap(&config.name),
        deployment("cm-reload").metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, "app-config"),
        deployment("cm-reload-regex").metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, "app-.*,other"),
        deployment("secret-reload").metadata_annotation(ANNOTATION_SECRET_RELOAD, "app-secret"),
        deployment("search")
            .metadata_annotation(ANNOTATION_SEARCH, "true")
            .env_from_configmap("matched-config"),
        deployment("exclude")
            .metadata_annotation(ANNOTATION_AUTO, "true")
            .metadata_annotation(ANNOTATION_CONFIGMAP_EXCLUDE, "app-config")
            .env_from_configmap(&config.name)
            .env_from_secret(&secret.name),
        deployment("ignored-resource")
            .metadata_annotation(ANNOTATION_AUTO, "true")
            .env_from_configmap("ignored-config"),
        deployment("projected")
            .metadata_annotation(ANNOTATION_AUTO, "true")
            .projected_configmap(&config.name)
            .projected_secret(&secret.name),
        deployment("key-refs")
            .metadata_annotation(ANNOTATION_AUTO, "true")
            .configmap_key_ref(&config.name)
            .secret_key_ref(&secret.name),
        deployment("init").metadata_annotation(ANNOTATION_AUTO, "true").init_env_from_configmap(&config.name),
        deployment("two-containers")
            .containers(2)
            .in_container(1)
            .metadata_annotation(ANNOTATION_AUTO, "true")
            .env_from_configmap(&config.name),
    ];
    for kind in
        [Kind::DaemonSet, Kind::StatefulSet, Kind::Rollout, Kind::DeploymentConfig, Kind::CronJob, Kind::Job]
    {
        let name = format!("auto-{}", kind.short());
        workloads.push(
            WorkloadSpec::new(kind, name)
                .replicas(0)
                .metadata_annotation(ANNOTATION_AUTO, "true")
                .env_from_configmap(&config.name)
                .env_from_secret(&secret.name),
        );
    }
    workloads
}

fn annotation_seeds() -> Vec<Seed> {
    vec![
        seed(config()),
        seed(secret()),
        Seed {
            resource: ResourceRef::configmap("matched-config"),
            data: V1,
            annotations: &[(ANNOTATION_MATCH, "true")],
        },
        Seed {
            resource: ResourceRef::configmap("ignored-config"),
            data: V1,
            annotations: &[(ANNOTATION_IGNORE, "true")],
        },
    ]
}

fn annotation_steps() -> Vec<Step> {
    vec![
        Step::Update(config(), V2),
        Step::Update(secret(), V2),
        Step::Update(ResourceRef::configmap("matched-config"), V2),
        Step::Update(ResourceRef::configmap("ignored-config"), V2),
        Step::Update(config(), V3),
    ]
}

fn single(name: &'static str, notify: Notify) -> Scenario {
    Scenario {
        name,
        strategy: Strategy::EnvVars,
        flags: &[],
        notify,
        seeds: vec![seed(config())],
        workloads: vec![
            deployment("web").metadata_annotation(ANNOTATION_AUTO, "true").env_from_configmap("app-config"),
        ],
        steps: vec![Step::Update(config(), V2)],
    }
}

/// The table.
pub fn table() -> Vec<Scenario> {
    let late = ResourceRef::configmap("late-config");
    let late_secret = ResourceRef::secret("late-secret");
    let mut rows = Vec::new();
    for (name, strategy) in
        [("annotations-env-vars", Strategy::EnvVars), ("annotations-annotations", Strategy::Annotations)]
    {
        rows.push(Scenario {
            name,
            strategy,
            flags: EVERY_KIND,
            notify: Notify::None,
            seeds: annotation_seeds(),
            workloads: annotation_forms(),
            steps: annotation_steps(),
        });
    }
    rows.push(Scenario {
        name: "create-delete",
        strategy: Strategy::EnvVars,
        flags: &["--reload-on-create=true", "--reload-on-delete=true"],
        notify: Notify::None,
        seeds: vec![],
        workloads: vec![
            deployment("late").metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, "late-config"),
            deployment("late-secret").metadata_annotation(ANNOTATION_SECRET_RELOAD, "late-secret"),
            deployment("late-auto")
                .metadata_annotation(ANNOTATION_AUTO, "true")
                .env_from_configmap("late-config"),
        ],
        steps: vec![
            Step::Create(late.clone(), V1),
            Step::Create(late_secret.clone(), V1),
            Step::Update(late.clone(), V2),
            Step::Delete(late),
            Step::Delete(late_secret),
        ],
    });
    rows.push(Scenario {
        name: "create-delete-annotations",
        strategy: Strategy::Annotations,
        flags: &["--reload-on-create=true", "--reload-on-delete=true"],
        notify: Notify::None,
        seeds: vec![],
        workloads: vec![deployment("late").metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, "late-config")],
        steps: vec![
            Step::Create(ResourceRef::configmap("late-config"), V1),
            Step::Delete(ResourceRef::configmap("late-config")),
        ],
    });
    rows.push(Scenario {
        name: "sync-after-restart",
        strategy: Strategy::EnvVars,
        flags: &["--reload-on-create=true", "--sync-after-restart=true"],
        notify: Notify::None,
        seeds: vec![seed(config()), seed(secret())],
        workloads: vec![
            deployment("web").metadata_annotation(ANNOTATION_AUTO, "true").env_from_configmap("app-config"),
            deployment("web-secret").metadata_annotation(ANNOTATION_SECRET_RELOAD, "app-secret"),
        ],
        steps: vec![],
    });
    rows.push(Scenario {
        name: "pause-period",
        strategy: Strategy::EnvVars,
        flags: &[],
        notify: Notify::None,
        seeds: vec![seed(config())],
        workloads: vec![
            deployment("paused")
                .metadata_annotation(ANNOTATION_AUTO, "true")
                .metadata_annotation(ANNOTATION_PAUSE_PERIOD, "1h")
                .env_from_configmap("app-config"),
        ],
        steps: vec![Step::Update(config(), V2), Step::Update(config(), V3)],
    });
    rows.push(Scenario { flags: &["--reload-on-create=true"], ..single("webhook-mode", Notify::Webhook) });
    for sink in ["raw", "slack", "teams", "gchat"] {
        let name: &'static str = match sink {
            "raw" => "alert-raw",
            "slack" => "alert-slack",
            "teams" => "alert-teams",
            _ => "alert-gchat",
        };
        rows.push(single(name, Notify::Alert(sink)));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_covers_what_the_check_promises() {
        let table = table();
        let kinds: std::collections::BTreeSet<&str> =
            table.iter().flat_map(|row| row.workloads.iter().map(|w| w.kind().as_str())).collect();
        for kind in Kind::ALL {
            assert!(kinds.contains(kind.as_str()), "no {kind} in the table");
        }
        for strategy in Strategy::ALL {
            assert!(table.iter().any(|row| row.strategy == strategy), "{strategy:?} missing");
        }
        for flag in ["--reload-on-create=true", "--reload-on-delete=true", "--sync-after-restart=true"] {
            assert!(table.iter().any(|row| row.flags.contains(&flag)), "{flag} missing");
        }
        for notify in [
            Notify::Webhook,
            Notify::Alert("raw"),
            Notify::Alert("slack"),
            Notify::Alert("teams"),
            Notify::Alert("gchat"),
        ] {
            assert!(table.iter().any(|row| row.notify == notify), "{notify:?} missing");
        }
        let annotations: std::collections::BTreeSet<String> = table
            .iter()
            .flat_map(|row| row.workloads.iter().map(|w| format!("{w:?}")))
            .collect::<Vec<_>>()
            .join(" ")
            .split('"')
            .filter(|part| part.contains("reloader.stakater.com"))
            .map(str::to_owned)
            .collect();
        for key in [
            ANNOTATION_AUTO,
            ANNOTATION_CONFIGMAP_AUTO,
            ANNOTATION_SECRET_AUTO,
            ANNOTATION_CONFIGMAP_RELOAD,
            ANNOTATION_SECRET_RELOAD,
            ANNOTATION_CONFIGMAP_EXCLUDE,
            ANNOTATION_SEARCH,
            ANNOTATION_PAUSE_PERIOD,
        ] {
            assert!(annotations.contains(key), "annotation {key} missing from the table");
        }
        let names: std::collections::BTreeSet<&str> = table.iter().map(|row| row.name).collect();
        assert_eq!(names.len(), table.len(), "scenario names are unique (they name namespaces)");
    }
}
