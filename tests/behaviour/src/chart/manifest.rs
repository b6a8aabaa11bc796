//! A rendered chart: its objects, the RBAC rules in them (and copies with one rule cut), and
//! the controller's command line and environment as its Deployment gives them to each pod.

use std::fmt;

use serde_json::Value;

use reloader_harness::PlaneError;

/// What confines the controller's identity: its RBAC, and the write fence (docs/security.md)
/// where the chart renders it.
const RBAC_KINDS: [&str; 7] = [
    "ServiceAccount",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];

/// The objects `helm template` printed, in order.
#[derive(Debug, Clone)]
pub struct Manifest {
    objects: Vec<Value>,
}

impl Manifest {
    /// Parses the multi-document YAML `helm template` prints.
    pub fn parse(rendered: &str) -> Result<Self, PlaneError> {
        let documents: Vec<Value> = serde_saphyr::from_multiple(rendered).map_err(|error| {
            PlaneError::Manifest { what: "helm template output".into(), detail: error.to_string() }
        })?;
        let objects = documents.into_iter().filter(|document| document.is_object()).collect();
        Ok(Self { objects })
    }

    pub fn objects(&self) -> &[Value] {
        &self.objects
    }

    /// `(kind, namespace/name)` of each object, for messages.
    pub fn describe(&self) -> Vec<String> {
        self.objects.iter().map(|object| format!("{} {}", kind(object), qualified_name(object))).collect()
    }

    /// The ServiceAccount and the (Cluster)Roles and their bindings only.
    pub fn rbac(&self) -> Manifest {
        let objects =
            self.objects.iter().filter(|object| RBAC_KINDS.contains(&kind(object))).cloned().collect();
        Manifest { objects }
    }

    /// Every single cut that takes something out of one rule: each verb of a rule with several
    /// verbs, each resource of a rule with several resources, and the whole rule when it has one
    /// of each.
    pub fn rule_removals(&self) -> Vec<RuleRemoval> {
        let mut removals = Vec::new();
        for object in self.objects.iter().filter(|object| matches!(kind(object), "Role" | "ClusterRole")) {
            let role = RoleRef::of(object);
            for (index, rule) in rules(object).iter().enumerate() {
                let verbs = strings(&rule["verbs"]);
                let resources = strings(&rule["resources"]);
                let summary = summarize(rule);
                let mut cut = |cut| {
                    removals.push(RuleRemoval {
                        role: role.clone(),
                        rule: index,
                        summary: summary.clone(),
                        cut,
                    })
                };
                if verbs.len() > 1 {
                    verbs.iter().for_each(|verb| cut(Cut::Verb(verb.clone())));
                }
                if resources.len() > 1 {
                    resources.iter().for_each(|resource| cut(Cut::Resource(resource.clone())));
                }
                if verbs.len() <= 1 && resources.len() <= 1 {
                    cut(Cut::Rule);
                }
            }
        }
        removals
    }

    /// A copy with `removal` applied (a rule left without verbs or resources disappears).
    pub fn without(&self, removal: &RuleRemoval) -> Manifest {
        let mut copy = self.clone();
        for object in copy.objects.iter_mut().filter(|object| RoleRef::of(object) == removal.role) {
            let Some(rules) = object.get_mut("rules").and_then(Value::as_array_mut) else { continue };
            let Some(rule) = rules.get_mut(removal.rule) else { continue };
            let keep = match &removal.cut {
                Cut::Rule => false,
                Cut::Verb(verb) => retain_other(&mut rule["verbs"], verb),
                Cut::Resource(resource) => retain_other(&mut rule["resources"], resource),
            };
            if !keep {
                rules.remove(removal.rule);
            }
        }
        copy
    }

    /// The controller Deployment's pod spec, read for running the binary as its pods would.
    pub fn controller(&self) -> Result<Controller, PlaneError> {
        let deployments: Vec<&Value> =
            self.objects.iter().filter(|object| kind(object) == "Deployment").collect();
        let [deployment] = deployments[..] else {
            return Err(manifest_error(format!("expected one Deployment, found {}", deployments.len())));
        };
        let pod = &deployment["spec"]["template"]["spec"];
        let containers = pod["containers"].as_array().map(Vec::as_slice).unwrap_or_default();
        let [container] = containers else {
            return Err(manifest_error(format!("expected one container, found {}", containers.len())));
        };
        if container.get("command").is_some() {
            return Err(manifest_error("the container overrides the image's command".into()));
        }
        Ok(Controller {
            name: deployment["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
            namespace: deployment["metadata"]["namespace"].as_str().unwrap_or_default().to_owned(),
            replicas: deployment["spec"]["replicas"].as_u64().unwrap_or(1) as usize,
            service_account: pod["serviceAccountName"].as_str().unwrap_or("default").to_owned(),
            args: strings(&container["args"]),
            env: container["env"].as_array().cloned().unwrap_or_default(),
        })
    }
}

/// A Role or ClusterRole by identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleRef {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl RoleRef {
    fn of(object: &Value) -> Self {
        Self {
            kind: kind(object).to_owned(),
            namespace: object["metadata"]["namespace"].as_str().map(str::to_owned),
            name: object["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
        }
    }
}

/// What one removal takes out of its rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cut {
    Rule,
    Verb(String),
    Resource(String),
}

/// One rule of one role, partly or wholly taken out.
#[derive(Debug, Clone)]
pub struct RuleRemoval {
    pub role: RoleRef,
    /// Index in the role's `rules`.
    pub rule: usize,
    /// The rule as `group resources: verbs`.
    pub summary: String,
    pub cut: Cut,
}

impl RuleRemoval {
    /// Whether the removal touches a role whose name contains `part`.
    pub fn in_role_named(&self, part: &str) -> bool {
        self.role.name.contains(part)
    }
}

impl fmt::Display for RuleRemoval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cut = match &self.cut {
            Cut::Rule => "the whole rule".to_owned(),
            Cut::Verb(verb) => format!("verb {verb}"),
            Cut::Resource(resource) => format!("resource {resource}"),
        };
        let scope = self.role.namespace.as_deref().map(|ns| format!("{ns}/")).unwrap_or_default();
        write!(f, "{} {scope}{} [{}] without {cut}", self.role.kind, self.role.name, self.summary)
    }
}

/// The controller container of the chart's Deployment.
#[derive(Debug, Clone)]
pub struct Controller {
    pub name: String,
    pub namespace: String,
    pub replicas: usize,
    pub service_account: String,
    args: Vec<String>,
    env: Vec<Value>,
}

impl Controller {
    /// The container's args, minus `--metrics-addr` (a test gives each process a free port).
    pub fn args(&self) -> Vec<String> {
        let mut args = Vec::new();
        let mut skip_value = false;
        for arg in &self.args {
            if std::mem::take(&mut skip_value) {
                continue;
            }
            if arg == "--metrics-addr" {
                skip_value = true;
            } else if !arg.starts_with("--metrics-addr=") {
                args.push(arg.clone());
            }
        }
        args
    }

    /// The name the `index`-th pod gets (the fieldRef `metadata.name`).
    pub fn pod_name(&self, index: usize) -> String {
        format!("{}-7d4b9c-{index}", self.name)
    }

    /// The environment of the `index`-th pod: literal values, and the downward API fields the
    /// kubelet would fill in. Anything else (Secrets, resource fields) is an error: a test that
    /// needs it must provide it.
    pub fn env(&self, index: usize) -> Result<Vec<(String, String)>, PlaneError> {
        self.env
            .iter()
            .map(|entry| {
                let name = entry["name"].as_str().unwrap_or_default().to_owned();
                if let Some(value) = entry.get("value") {
                    return Ok((name, value.as_str().unwrap_or_default().to_owned()));
                }
                match entry["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                    Some("metadata.name") => Ok((name, self.pod_name(index))),
                    Some("metadata.namespace") => Ok((name, self.namespace.clone())),
                    _ => Err(manifest_error(format!(
                        "env {name} has a source the test cannot provide: {entry}"
                    ))),
                }
            })
            .collect()
    }
}

fn kind(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or_default()
}

fn qualified_name(object: &Value) -> String {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match object["metadata"]["namespace"].as_str() {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}

fn rules(object: &Value) -> &[Value] {
    object["rules"].as_array().map(Vec::as_slice).unwrap_or_default()
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().into_iter().flatten().filter_map(|item| item.as_str().map(str::to_owned)).collect()
}

fn summarize(rule: &Value) -> String {
    let groups: Vec<String> = strings(&rule["apiGroups"])
        .into_iter()
        .map(|g| if g.is_empty() { "\"\"".into() } else { g })
        .collect();
    format!(
        "{} {}: {}",
        groups.join(","),
        strings(&rule["resources"]).join(","),
        strings(&rule["verbs"]).join(",")
    )
}

/// Removes `item` from the string list; false when nothing is left.
fn retain_other(list: &mut Value, item: &str) -> bool {
    if let Some(items) = list.as_array_mut() {
        items.retain(|value| value.as_str() != Some(item));
        !items.is_empty()
    } else {
        false
    }
}

fn manifest_error(detail: String) -> PlaneError {
    PlaneError::Manifest { what: "the rendered chart".into(), detail }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENDERED: &str = r#"---
# Source: reloader/templates/serviceaccount.yaml
apiVersion: v1
kind: ServiceAccount
metadata:
  name: r-reloader
  namespace: ops
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: r-reloader-role
rules:
  - apiGroups: [""]
    resources: ["configmaps", "secrets"]
    verbs: ["list", "watch"]
  - apiGroups: ["batch"]
    resources: ["jobs"]
    verbs: ["create"]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: r-reloader
  namespace: ops
spec:
  replicas: 2
  template:
    spec:
      serviceAccountName: r-reloader
      containers:
        - name: r-reloader
          args: ["--log-level=info", "--metrics-addr", ":9090", "--metrics-addr=:1", "--is-openshift=false"]
          env:
            - name: RELOADER_DEPLOYMENT_NAME
              value: "r-reloader"
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
"#;

    #[test]
    fn enumerates_one_cut_per_verb_resource_or_single_rule() {
        let manifest = Manifest::parse(RENDERED).unwrap();
        let removals: Vec<String> = manifest.rule_removals().iter().map(ToString::to_string).collect();
        assert_eq!(
            removals,
            [
                "ClusterRole r-reloader-role [\"\" configmaps,secrets: list,watch] without verb list",
                "ClusterRole r-reloader-role [\"\" configmaps,secrets: list,watch] without verb watch",
                "ClusterRole r-reloader-role [\"\" configmaps,secrets: list,watch] without resource configmaps",
                "ClusterRole r-reloader-role [\"\" configmaps,secrets: list,watch] without resource secrets",
                "ClusterRole r-reloader-role [batch jobs: create] without the whole rule",
            ]
        );
    }

    #[test]
    fn a_cut_changes_only_its_rule() {
        let manifest = Manifest::parse(RENDERED).unwrap();
        let removals = manifest.rule_removals();
        let role =
            |m: &Manifest| m.objects().iter().find(|o| o["kind"] == "ClusterRole").unwrap()["rules"].clone();

        let without_watch = manifest.without(&removals[1]);
        assert_eq!(role(&without_watch)[0]["verbs"], serde_json::json!(["list"]));
        assert_eq!(role(&without_watch)[1], role(&manifest)[1]);

        let without_jobs = manifest.without(&removals[4]);
        assert_eq!(role(&without_jobs).as_array().unwrap().len(), 1);
        assert_eq!(role(&manifest).as_array().unwrap().len(), 2, "the original is untouched");
    }

    #[test]
    fn the_controller_runs_as_its_pods_would() {
        let manifest = Manifest::parse(RENDERED).unwrap();
        assert_eq!(manifest.rbac().objects().len(), 2);
        let controller = manifest.controller().unwrap();
        assert_eq!((controller.replicas, controller.service_account.as_str()), (2, "r-reloader"));
        assert_eq!(controller.args(), ["--log-level=info", "--is-openshift=false"]);
        let env = controller.env(1).unwrap();
        assert_eq!(
            env,
            [
                ("RELOADER_DEPLOYMENT_NAME".to_owned(), "r-reloader".to_owned()),
                ("POD_NAME".to_owned(), controller.pod_name(1)),
                ("POD_NAMESPACE".to_owned(), "ops".to_owned()),
            ]
        );
        assert_ne!(controller.pod_name(0), controller.pod_name(1));
    }
}
