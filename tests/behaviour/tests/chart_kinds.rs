//! The chart and the code agree on workload kinds: the Helm chart's ClusterRole grants each kind
//! of the controller's registry (`reloader_cli::kinds`) exactly the verbs the registry says the
//! code uses, so adding a kind or a verb to one without the other fails here. (That each granted
//! verb is really needed, and enough, is proven on the plane by `chart_rbac`.) Kinds declared in
//! the values (`reloader.customWorkloads`) get their flag, rules and webhook rule, and a
//! declaration the binary could not use is refused when the chart is rendered.

use std::collections::BTreeSet;

use reloader_cli::kinds;
use reloader_tests::chart::Helm;
use serde_json::{Value, json};

fn strings(value: &Value) -> impl Iterator<Item = &str> {
    value.as_array().into_iter().flatten().filter_map(Value::as_str)
}

#[test]
fn the_chart_grants_each_registered_kind_the_verbs_the_code_uses() {
    let helm = Helm::locate().expect("helm from the dev cache (hack/build helm)");
    // Both optional kinds switched on, so every registered kind has its rule.
    let values = json!({ "reloader": { "isArgoRollouts": true, "isOpenshift": true } });
    let manifest = helm.template("reloader", "reloader", &values).expect("helm template");
    let rules: Vec<&Value> = manifest
        .objects()
        .iter()
        .filter(|object| object["kind"] == "ClusterRole")
        .flat_map(|role| role["rules"].as_array().into_iter().flatten())
        .collect();
    assert!(!rules.is_empty(), "the default values render a ClusterRole");
    for info in kinds::all() {
        let granted: BTreeSet<&str> = rules
            .iter()
            .filter(|rule| strings(&rule["apiGroups"]).any(|group| group == info.group))
            .filter(|rule| strings(&rule["resources"]).any(|resource| resource == info.plural))
            .flat_map(|rule| strings(&rule["verbs"]))
            .collect();
        let used: BTreeSet<&str> = info.verbs.iter().copied().collect();
        assert_eq!(granted, used, "{}.{}: the chart's verbs vs the registry's", info.plural, info.group);
    }
}

// ---------------------------------------------------------------------------------------------
// Kinds declared in the values (`reloader.customWorkloads`, one `--custom-workload` each): the
// chart passes each declaration to the binary, grants the verbs a declared kind is used with
// (read, watch, patch) in every role that holds the workload rules, and sends the kind to the
// admission webhook; a declaration the binary could not parse is refused by `helm template`.

const RELEASE: &str = "rel";

/// The webhook, with the API server's address `helm template` cannot look up.
fn webhook_on() -> Value {
    json!({ "enabled": true, "networkPolicy": { "from": [{ "ipBlock": { "cidr": "172.16.0.10/32" } }] } })
}
const NAMESPACE: &str = "ops";
const CUSTOM_VERBS: [&str; 4] = ["get", "list", "watch", "patch"];

/// Two kinds no chart value knows of: Agones's GameServerSet (its pod template two levels down,
/// inside the GameServer template) and a kind whose operator copies an annotations map to its
/// pods.
fn custom_workloads() -> Value {
    json!([
        {"group": "agones.dev", "version": "v1", "kind": "GameServerSet", "resource": "gameserversets",
         "template": "/spec/template/spec/template"},
        {"group": "queues.example.com", "version": "v1beta2", "kind": "QueueWorker",
         "resource": "queueworkers", "annotations": "/spec/podAnnotations"},
    ])
}

/// (group, version, resource) of each declared kind, and its flag, in the order declared.
const DECLARED: [(&str, &str, &str, &str); 2] = [
    (
        "agones.dev",
        "v1",
        "gameserversets",
        "--custom-workload=group=agones.dev,version=v1,kind=GameServerSet,resource=gameserversets,\
         template=/spec/template/spec/template",
    ),
    (
        "queues.example.com",
        "v1beta2",
        "queueworkers",
        "--custom-workload=group=queues.example.com,version=v1beta2,kind=QueueWorker,\
         resource=queueworkers,annotations=/spec/podAnnotations",
    ),
];

fn helm() -> Helm {
    Helm::locate().expect("helm from the dev cache (hack/build helm)")
}

fn of_kind<'a>(manifest: &'a reloader_tests::chart::Manifest, kind: &str) -> Vec<&'a Value> {
    manifest.objects().iter().filter(|object| object["kind"] == kind).collect()
}

/// The rules of `role` that name `group`, as (apiGroups, resources, verbs).
fn rules_for<'a>(role: &'a Value, group: &str) -> Vec<(Vec<&'a str>, Vec<&'a str>, Vec<&'a str>)> {
    role["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|rule| strings(&rule["apiGroups"]).any(|g| g == group))
        .map(|rule| {
            (
                strings(&rule["apiGroups"]).collect(),
                strings(&rule["resources"]).collect(),
                strings(&rule["verbs"]).collect(),
            )
        })
        .collect()
}

/// Each declared kind has exactly one rule in `role`: its group, its resource, get/list/watch/patch.
fn assert_custom_rules(role: &Value) {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let name = format!("{} {}", text(&role["kind"]), text(&role["metadata"]["name"]));
    let name = match role["metadata"]["namespace"].as_str() {
        Some(namespace) => format!("{name} in {namespace}"),
        None => name,
    };
    for (group, _, resource, _) in DECLARED {
        assert_eq!(
            rules_for(role, group),
            [(vec![group], vec![resource], CUSTOM_VERBS.to_vec())],
            "{name}: the rule for {resource}.{group}"
        );
    }
}

#[test]
fn declared_kinds_get_a_flag_a_cluster_rule_and_a_webhook_rule_each_with_a_template() {
    let helm = helm();
    let values = json!({ "reloader": { "customWorkloads": custom_workloads() }, "webhook": webhook_on() });
    helm.lint(NAMESPACE, &values).expect("helm lint --strict");
    let manifest = helm.template(RELEASE, NAMESPACE, &values).expect("helm template");

    let args = manifest.controller().expect("the controller Deployment").args();
    let declared: Vec<&str> =
        args.iter().map(String::as_str).filter(|arg| arg.starts_with("--custom-workload")).collect();
    let flags: Vec<&str> = DECLARED.iter().map(|(.., flag)| *flag).collect();
    assert_eq!(declared, flags, "one --custom-workload per entry, in order, fields in order");

    let cluster_roles = of_kind(&manifest, "ClusterRole");
    assert_eq!(cluster_roles.len(), 1, "global mode renders one ClusterRole");
    assert_custom_rules(cluster_roles[0]);

    let [configuration] = of_kind(&manifest, "MutatingWebhookConfiguration")[..] else {
        panic!("one MutatingWebhookConfiguration with webhook.enabled");
    };
    let rules = configuration["webhooks"][0]["rules"].as_array().expect("webhook rules");
    for (group, version, resource, flag) in DECLARED {
        let matching: Vec<&Value> =
            rules.iter().filter(|rule| strings(&rule["apiGroups"]).any(|g| g == group)).collect();
        // An annotations map is no pod template: the webhook has nothing to keep in it.
        let expected = if flag.contains("template=") {
            vec![json!({"apiGroups": [group], "apiVersions": [version], "resources": [resource],
                        "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"})]
        } else {
            Vec::new()
        };
        assert_eq!(matching, expected.iter().collect::<Vec<_>>(), "the webhook rules for {resource}.{group}");
    }

    // Without declarations nothing of them is rendered.
    let plain =
        helm.template(RELEASE, NAMESPACE, &json!({ "webhook": webhook_on() })).expect("helm template");
    let args = plain.controller().expect("the controller Deployment").args();
    assert!(
        !args.iter().any(|arg| arg.starts_with("--custom-workload")),
        "no declaration, no flag: {args:?}"
    );
    for (group, ..) in DECLARED {
        assert!(rules_for(of_kind(&plain, "ClusterRole")[0], group).is_empty(), "no rule for {group}");
    }
}

#[test]
fn declared_kinds_are_granted_in_each_namespaced_role() {
    let helm = helm();
    let values = json!({ "reloader": { "customWorkloads": custom_workloads(), "watchGlobally": false,
                                       "namespaces": ["games"] } });
    helm.lint(NAMESPACE, &values).expect("helm lint --strict");
    let manifest = helm.template(RELEASE, NAMESPACE, &values).expect("helm template");
    assert!(of_kind(&manifest, "ClusterRole").is_empty(), "namespaced mode renders no ClusterRole");
    let workload_roles: Vec<&Value> = of_kind(&manifest, "Role")
        .into_iter()
        .filter(|role| role["metadata"]["name"] == format!("{RELEASE}-reloader-role"))
        .collect();
    let mut namespaces: Vec<&str> =
        workload_roles.iter().filter_map(|role| role["metadata"]["namespace"].as_str()).collect();
    namespaces.sort_unstable();
    assert_eq!(namespaces, ["games", NAMESPACE], "a workload Role in each watched namespace");
    workload_roles.into_iter().for_each(assert_custom_rules);
}

/// Declarations the binary could not use: `helm template` refuses each, naming the field.
#[test]
fn bad_declarations_are_refused_naming_the_field() {
    let good = json!({"group": "agones.dev", "version": "v1", "kind": "GameServerSet",
                      "resource": "gameserversets", "template": "/spec/template/spec/template"});
    let with = |changes: Value, removed: &[&str]| {
        let mut entry = good.clone();
        let fields = entry.as_object_mut().expect("an object");
        for key in removed {
            fields.remove(*key);
        }
        fields.extend(changes.as_object().expect("an object").clone());
        entry
    };
    let cases: [(&str, Value, &str); 11] = [
        ("kind missing", with(json!({}), &["kind"]), "/reloader/customWorkloads/1': missing property 'kind'"),
        (
            "neither template nor annotations",
            with(json!({}), &["template"]),
            "/reloader/customWorkloads/1': missing property 'template'",
        ),
        (
            "both template and annotations",
            with(json!({"annotations": "/spec/podAnnotations"}), &[]),
            "/reloader/customWorkloads/1/annotations",
        ),
        (
            "a pointer without its leading /",
            with(json!({"template": "spec/template"}), &[]),
            "/reloader/customWorkloads/1/template",
        ),
        (
            "a comma in a value",
            with(json!({"resource": "gameserversets,fleets"}), &[]),
            "/reloader/customWorkloads/1/resource",
        ),
        (
            "a comma in a pointer",
            with(json!({"template": "/spec/a,b"}), &[]),
            "/reloader/customWorkloads/1/template",
        ),
        (
            "an = in a pointer",
            with(json!({"annotations": "/spec/a=b"}), &["template"]),
            "/reloader/customWorkloads/1/annotations",
        ),
        ("a group without a dot", with(json!({"group": "agones"}), &[]), "/reloader/customWorkloads/1/group"),
        (
            "a kind in lower case",
            with(json!({"kind": "gameServerSet"}), &[]),
            "/reloader/customWorkloads/1/kind",
        ),
        (
            "a misspelt field",
            with(json!({"templates": "/spec/template"}), &["template"]),
            "'templates' not allowed",
        ),
        (
            "a kind declared twice",
            with(json!({"group": "queues.example.com", "resource": "queueworkers"}), &[]),
            "reloader.customWorkloads[1]: resource queueworkers in group queues.example.com is already declared",
        ),
    ];
    let helm = helm();
    let mut failures = Vec::new();
    for (name, entry, needle) in cases {
        // The bad entry second, after a good one, so the message must point at the right one.
        let first = custom_workloads()[1].clone();
        let values = json!({ "reloader": { "customWorkloads": [first, entry] } });
        match helm.template(RELEASE, NAMESPACE, &values) {
            Ok(_) => failures.push(format!("{name}: rendered, but must be refused")),
            Err(error) if !error.to_string().contains(needle) => {
                failures.push(format!("{name}: refused without naming '{needle}': {error}"))
            }
            Err(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
