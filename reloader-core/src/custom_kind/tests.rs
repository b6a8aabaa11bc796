use super::*;

const CLONESET: &str =
    "group=apps.kruise.io,version=v1alpha1,kind=CloneSet,resource=clonesets,template=/spec/template";

#[test]
fn declarations_parse_in_any_field_order() {
    for declaration in [
        CLONESET,
        "template=/spec/template, resource=clonesets ,kind=CloneSet,version=v1alpha1,group=apps.kruise.io,",
    ] {
        let custom = CustomKind::parse(declaration).unwrap();
        assert_eq!(&*custom.group, "apps.kruise.io");
        assert_eq!(&*custom.version, "v1alpha1");
        assert_eq!(&*custom.kind, "CloneSet");
        assert_eq!(&*custom.resource, "clonesets");
        assert_eq!(custom.target, PodTarget::Template(JsonPointer::parse("/spec/template").unwrap()));
        assert_eq!(custom.api_version(), "apps.kruise.io/v1alpha1");
        assert_eq!(CustomKind::parse(&custom.declaration()).unwrap(), custom, "round-trips");
    }
    let deep = CustomKind::parse(
        "group=keda.sh,version=v1alpha1,kind=ScaledJob,resource=scaledjobs,template=/spec/jobTargetRef/template",
    )
    .unwrap();
    assert_eq!(deep.target.pointer(), "/spec/jobTargetRef/template");
    let map =
        CustomKind::parse(&CLONESET.replace("template=/spec/template", "annotations=/spec/podAnnotations"))
            .unwrap();
    assert_eq!(map.target, PodTarget::Annotations(JsonPointer::parse("/spec/podAnnotations").unwrap()));
    assert_eq!(CustomKind::parse(&map.declaration()).unwrap(), map, "round-trips");
}

#[test]
fn bad_declarations_name_the_field_and_value() {
    let with = |field: &str, value: &str| {
        CLONESET
            .split(',')
            .map(|pair| {
                if pair.starts_with(&format!("{field}=")) { format!("{field}={value}") } else { pair.into() }
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    let without = |field: &str| {
        CLONESET
            .split(',')
            .filter(|pair| !pair.starts_with(&format!("{field}=")))
            .collect::<Vec<_>>()
            .join(",")
    };
    // (declaration, field at fault, value at fault, part of the reason)
    let cases: Vec<(String, &str, &str, &str)> = vec![
        (without("kind"), "kind", "", "missing"),
        (without("resource"), "resource", "", "missing"),
        (without("template"), "template", "", "missing"),
        (without("group"), "group", "", "missing"),
        (format!("{CLONESET},kind=Other"), "kind", "Other", "given twice"),
        (format!("{CLONESET},replicas=/spec/replicas"), "", "replicas", "unknown field"),
        (format!("{CLONESET},oops"), "", "oops", "expected field=value"),
        (with("group", "Apps.Kruise"), "group", "Apps.Kruise", "not an API group"),
        (with("version", "V1"), "version", "V1", "not an API version"),
        (with("kind", "cloneSet"), "kind", "cloneSet", "upper-case letter"),
        (with("kind", "Clone-Set"), "kind", "Clone-Set", "not a kind name"),
        (with("resource", "CloneSets"), "resource", "CloneSets", "not a resource name"),
        (with("template", "spec/template"), "template", "spec/template", "leading '/'"),
        (with("template", "/spec//template"), "template", "/spec//template", "empty token"),
        (with("template", "/spec/template/"), "template", "/spec/template/", "empty token"),
        (with("template", "/spec/te~2mplate"), "template", "/spec/te~2mplate", "RFC 6901"),
        (with("template", "/spec"), "template", "/spec", "inside the object's spec"),
        (with("template", "/metadata/annotations"), "template", "/metadata/annotations", "spec"),
        (with("template", "/status/template"), "template", "/status/template", "spec"),
        (
            format!("{CLONESET},annotations=/spec/podAnnotations"),
            "annotations",
            "/spec/podAnnotations",
            "not both",
        ),
        (
            without("template").replace("kind=", "annotations=/spec/x/,kind="),
            "annotations",
            "/spec/x/",
            "empty token",
        ),
    ];
    for (declaration, field, value, reason) in cases {
        let error = CustomKind::parse(&declaration).expect_err(&declaration);
        assert_eq!((error.field, error.value.as_str()), (field, value), "{declaration}");
        assert!(error.reason.contains(reason), "{declaration}: {}", error.reason);
        assert_eq!(error.declaration, declaration);
        let message = error.to_string();
        assert!(message.starts_with("--custom-workload"), "{message}");
        assert!(message.contains(value), "{message}");
    }
}

#[test]
fn escaped_pointer_tokens_are_kept_escaped() {
    let custom = CustomKind::parse(&CLONESET.replace("/spec/template", "/spec/pod~1templates/a~0b")).unwrap();
    assert_eq!(custom.target.pointer(), "/spec/pod~1templates/a~0b");
}
