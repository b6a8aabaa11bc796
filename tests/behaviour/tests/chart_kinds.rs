//! The chart and the code agree on workload kinds: the Helm chart's ClusterRole grants each kind
//! of the controller's registry (`reloader_cli::kinds`) exactly the verbs the registry says the
//! code uses, so adding a kind or a verb to one without the other fails here. (That each granted
//! verb is really needed, and enough, is proven on the plane by `chart_rbac`.)

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
