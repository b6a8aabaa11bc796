//! The text form, as a newcomer reads it.

use super::*;

#[test]
fn the_text_reads_as_sections_with_aligned_values() {
    let current = cm("app-config");
    let workload = deployment("web")
        .init_containers(&["setup"])
        .annotate(AUTO, "true")
        .annotate(CM_EXCLUDE, "legacy")
        .uses_cm("app", "app-config", EnvFrom)
        .uses_cm("setup", "legacy", Volume)
        .env("app", "STAKATER_APP_CONFIG_CONFIGMAP", &current.hash.to_hex());
    let text = render_text(&explained(&workload, &[current.clone(), cm("legacy")]));
    let hash = current.hash.to_hex();
    let want = format!(
        "\
Deployment web in namespace default
  Containers:       app
  Init containers:  setup
  Controller:       reload strategy env-vars, --auto-reload-all off, --reload-on-create off

Reloader annotations
  On the workload:      configmaps.exclude.reloader.stakater.com/reload: \"legacy\"
                        reloader.stakater.com/auto: \"true\"
  On the pod template:  none
  For ConfigMaps:       the workload's annotations apply
  For Secrets:          the workload's annotations apply

ConfigMap app-config
  Exists:         yes
  Used by:        envFrom of container app
  Decision:       a change reloads the workload, because reloader.stakater.com/auto is \"true\" on the workload
  Recorded in:    env var STAKATER_APP_CONFIG_CONFIGMAP of container app
  Data hash now:  {hash}
  Last recorded:  {hash} (the same as the hash now)
  Next change:    reload: set STAKATER_APP_CONFIG_CONFIGMAP on container app

ConfigMap legacy
  Exists:         yes
  Used by:        volume mounted by init container setup
  Decision:       a change does not reload the workload, because configmaps.exclude.reloader.stakater.com/reload on the workload excludes it
  Data hash now:  {}
  Last recorded:  nothing yet
  Next change:    nothing: configmaps.exclude.reloader.stakater.com/reload on the workload excludes it
",
        cm("legacy").hash.to_hex()
    );
    assert_eq!(text, want);
}

#[test]
fn the_text_of_a_workload_without_resources_says_so() {
    let text = render_text(&explained(&deployment("web"), &[cm("unrelated")]));
    assert!(
        text.contains(
            "ConfigMaps and Secrets\n  none: the pod spec uses none, and no reloader annotation names or matches any\n"
        ),
        "{text}"
    );
    assert!(text.contains("For ConfigMaps:       no annotation applies"), "{text}");
}

#[test]
fn the_text_names_stale_records_problems_scope_and_leftover_markers() {
    let current = cm("cfg");
    let workload = deployment("web")
        .annotate(AUTO, "true")
        .annotate(CM_RELOAD, "(")
        .uses_cm("app", "cfg", EnvFrom)
        .env("app", "STAKATER_CFG_CONFIGMAP", "0000000000000000000000000000000000000000")
        .env("app", "STAKATER_GONE_CONFIGMAP", "1111111111111111111111111111111111111111");
    let text = render_text(&explained(&workload, std::slice::from_ref(&current)));
    for phrase in [
        "Problems in the annotations\n  - annotation configmap.reloader.stakater.com/reload on the workload: entry \"(\" \
         is not a valid regular expression",
        "  Pattern:              \"(\" in configmap.reloader.stakater.com/reload is not a valid regular expression \
         and matches nothing\n",
        "  Last recorded:  0000000000000000000000000000000000000000 (not the hash now: a controller starting now \
         reloads at once)\n",
        "Other reload records on the pod template (left by earlier reloads)\n  - STAKATER_GONE_CONFIGMAP = \
         1111111111111111111111111111111111111111 on container app\n",
    ] {
        assert!(text.contains(phrase), "missing {phrase:?} in:\n{text}");
    }

    let settings = ExplainSettings {
        scope: Scope {
            workload: Some("namespace default is ignored (--namespaces-to-ignore)".into()),
            ..Scope::default()
        },
        ..ExplainSettings::default()
    };
    let text = render_text(&explained_with(&workload, std::slice::from_ref(&current), &settings));
    for phrase in [
        "  Not watched:  namespace default is ignored (--namespaces-to-ignore): nothing below happens\n",
        "  Decision:       the annotations would reload the workload (reloader.stakater.com/auto is \"true\" on \
         the workload), but it is not watched\n",
        "  Next change:    nothing: namespace default is ignored (--namespaces-to-ignore)\n",
        // Out of scope, nothing catches up either.
        "  Last recorded:  0000000000000000000000000000000000000000 (not the hash now)\n",
    ] {
        assert!(text.contains(phrase), "missing {phrase:?} in:\n{text}");
    }
}
