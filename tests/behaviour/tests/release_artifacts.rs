//! What a user installs from, read from the files that make it (docs/release.md, "What a release
//! holds"): the chart's metadata (Artifact Hub, `helm search`), the binaries the release workflow
//! builds for each platform, the krew manifest made from their checksums, and the classic Helm
//! repository index. The linux/amd64 archive is packed here from the test build's binary. And the
//! Kubernetes versions it supports (docs/kubernetes-versions.md): one range, in hack/versions.env,
//! the chart's `kubeVersion`, the README, the CI matrix and the record of the last matrix run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// What `hack/lib.sh` names `RELEASE_PLATFORMS`, and the Rust target each is built for.
const PLATFORMS: [(&str, &str, &str); 5] = [
    ("linux", "amd64", "x86_64-unknown-linux-gnu"),
    ("linux", "arm64", "aarch64-unknown-linux-gnu"),
    ("darwin", "amd64", "x86_64-apple-darwin"),
    ("darwin", "arm64", "aarch64-apple-darwin"),
    ("windows", "amd64", "x86_64-pc-windows-msvc"),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    let path = root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).unwrap_or_else(|error| panic!("{error}:\n{text}"))
}

/// A `key = "value"` of Cargo.toml's `[workspace.package]`.
fn workspace_package(key: &str) -> String {
    let cargo = read("Cargo.toml");
    let section = cargo.split("[workspace.package]").nth(1).expect("[workspace.package]");
    let section = section.split("\n[").next().unwrap_or_default();
    section
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{key} = \"")).and_then(|rest| rest.strip_suffix('"')))
        .unwrap_or_else(|| panic!("no {key} in [workspace.package]"))
        .to_owned()
}

/// The repository file a URL of the project's on `main` points at, if it is one.
fn repository_file(url: &str, repository: &str) -> Option<PathBuf> {
    let raw = repository.replace("https://github.com/", "https://raw.githubusercontent.com/");
    url.strip_prefix(&format!("{raw}/main/"))
        .or_else(|| url.strip_prefix(&format!("{repository}/blob/main/")))
        .map(|path| root().join(path))
}

#[test]
fn the_chart_says_where_it_comes_from_for_artifact_hub() {
    let chart = yaml(&read("charts/reloader/Chart.yaml"));
    let values = yaml(&read("charts/reloader/values.yaml"));
    let repository = workspace_package("repository");
    assert_eq!(chart["home"], repository.as_str());
    assert!(
        chart["sources"].as_array().unwrap().iter().any(|s| s == repository.as_str()),
        "{}",
        chart["sources"]
    );
    let icon = chart["icon"].as_str().expect("icon");
    let icon_file =
        repository_file(icon, &repository).unwrap_or_else(|| panic!("icon {icon} is the project's"));
    assert!(icon_file.is_file(), "the icon {} exists", icon_file.display());
    assert!(chart["keywords"].as_array().is_some_and(|k| k.len() >= 3), "keywords");
    assert!(
        chart["maintainers"]
            .as_array()
            .is_some_and(|m| !m.is_empty() && m.iter().all(|m| m["name"].is_string())),
        "maintainers with names"
    );

    let annotations = &chart["annotations"];
    assert_eq!(annotations["artifacthub.io/license"], workspace_package("license").as_str());
    let images = yaml(annotations["artifacthub.io/images"].as_str().expect("artifacthub.io/images"));
    let app_version = chart["appVersion"].as_str().expect("appVersion");
    let image = format!("{}:{app_version}", values["image"]["repository"].as_str().unwrap());
    assert_eq!(images[0]["image"], image.as_str(), "the image this chart version runs: {images}");
    let links = yaml(annotations["artifacthub.io/links"].as_str().expect("artifacthub.io/links"));
    for link in links.as_array().expect("a list of links") {
        let url = link["url"].as_str().expect("a url");
        assert!(link["name"].is_string() && url.starts_with(&repository), "{link}");
        if let Some(file) = repository_file(url, &repository) {
            assert!(file.is_file(), "{url} names {} of this repository", file.display());
        }
    }
    let changes = yaml(annotations["artifacthub.io/changes"].as_str().expect("artifacthub.io/changes"));
    let kinds = BTreeSet::from(["added", "changed", "deprecated", "removed", "fixed", "security"]);
    for change in changes.as_array().expect("a list of changes") {
        let kind = change["kind"].as_str().unwrap_or_default();
        assert!(kinds.contains(kind), "Artifact Hub knows no change kind {kind:?}");
        assert!(change["description"].as_str().is_some_and(|d| !d.is_empty()), "{change}");
    }
}

fn release_workflow() -> Value {
    yaml(&read(".github/workflows/release.yml"))
}

fn run_lines(job: &Value) -> String {
    let steps = job["steps"].as_array().expect("steps");
    steps.iter().filter_map(|step| step["run"].as_str()).collect::<Vec<_>>().join("\n")
}

fn needs(job: &Value) -> Vec<&str> {
    match &job["needs"] {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn uses(job: &Value, action: &str) -> Vec<Value> {
    let steps = job["steps"].as_array().expect("steps");
    let named = |step: &&Value| step["uses"].as_str().is_some_and(|u| u.split('@').next() == Some(action));
    steps.iter().filter(named).cloned().collect()
}

#[test]
fn the_release_builds_binaries_for_every_platform_and_publishes_them_last() {
    let workflow = release_workflow();
    let jobs = &workflow["jobs"];
    let release = &jobs["release"];
    assert!(run_lines(release).contains("gh release create") && run_lines(release).contains("--draft"));

    let binaries = &jobs["binaries"];
    assert_eq!(needs(binaries), ["release"], "binaries go to the release the tested commit made");
    let matrix: BTreeSet<(String, String, String)> = binaries["strategy"]["matrix"]["include"]
        .as_array()
        .expect("a matrix")
        .iter()
        .map(|entry| {
            let field = |key: &str| entry[key].as_str().unwrap_or_default().to_owned();
            (field("os"), field("arch"), field("target"))
        })
        .collect();
    let wanted: BTreeSet<(String, String, String)> = PLATFORMS
        .iter()
        .map(|(os, arch, target)| (os.to_string(), arch.to_string(), target.to_string()))
        .collect();
    assert_eq!(matrix, wanted);
    let lib = read("hack/lib.sh");
    let listed = PLATFORMS.map(|(os, arch, _)| format!("{os}/{arch}")).join(" ");
    assert!(lib.contains(&format!("RELEASE_PLATFORMS=({listed})")), "hack/lib.sh lists {listed}");

    let build = run_lines(binaries);
    for needle in [
        "cargo build --release --locked -p reloader-cli --bin reloader --target \"${TARGET}\"",
        "hack/package-binary",
        "gh release upload",
    ] {
        assert!(build.contains(needle), "job binaries runs {needle:?}:\n{build}");
    }
    let provenance = uses(binaries, "actions/attest-build-provenance");
    assert!(
        provenance.iter().any(|step| step["with"]["subject-path"].is_string()),
        "each archive is attested"
    );

    let publish = &jobs["publish"];
    assert!(needs(publish).contains(&"binaries"), "published once every binary is attached");
    let script = run_lines(publish);
    for needle in [
        "sha256sum",
        "hack/krew-manifest",
        "reloader.krew.yaml",
        "helm repo index",
        "/releases/download/${GITHUB_REF_NAME}",
        "gh-pages",
        "gh release edit \"${GITHUB_REF_NAME}\" --draft=false",
    ] {
        assert!(script.contains(needle), "job publish runs {needle:?}:\n{script}");
    }
    let last = publish["steps"].as_array().unwrap().last().unwrap();
    assert!(last["run"].as_str().is_some_and(|run| run.contains("--draft=false")), "publishing comes last");
}

fn hack(script: &str, args: &[&str]) -> std::process::Output {
    Command::new(root().join("hack").join(script))
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("hack/{script}: {error}"))
}

fn sha256(path: &Path) -> String {
    let output = Command::new("sha256sum").arg(path).output().expect("sha256sum");
    String::from_utf8(output.stdout).unwrap().split_whitespace().next().unwrap().to_owned()
}

#[test]
fn the_linux_archive_packs_and_the_krew_manifest_names_every_platform() {
    let version = workspace_package("version");
    let repository = workspace_package("repository");
    let out = tempfile::tempdir().unwrap();
    let binary = reloader_harness::reloader_binary();
    let packed =
        hack("package-binary", &[binary.to_str().unwrap(), "linux", "amd64", out.path().to_str().unwrap()]);
    assert!(packed.status.success(), "{}", String::from_utf8_lossy(&packed.stderr));
    let archive = PathBuf::from(String::from_utf8(packed.stdout).unwrap().trim());
    assert_eq!(
        archive.file_name().unwrap().to_str().unwrap(),
        format!("reloader-{version}-linux-amd64.tar.gz")
    );
    let listing = Command::new("tar").arg("-tzvf").arg(&archive).output().expect("tar");
    let listing = String::from_utf8(listing.stdout).unwrap();
    let names: Vec<&str> = listing.lines().filter_map(|line| line.split_whitespace().last()).collect();
    assert_eq!(names, ["LICENSE", "reloader"], "{listing}");
    assert!(
        listing.lines().any(|line| line.starts_with("-rwxr-xr-x") && line.ends_with(" reloader")),
        "{listing}"
    );
    let linux_sha = sha256(&archive);
    // Reproducible: a stand-in binary packed twice, the same bytes.
    let stand_in = out.path().join("stand-in");
    std::fs::write(&stand_in, b"#!/bin/sh\n").unwrap();
    let shas: Vec<String> = (0..2)
        .map(|_| {
            let into = tempfile::tempdir().unwrap();
            let packed = hack(
                "package-binary",
                &[stand_in.to_str().unwrap(), "linux", "arm64", into.path().to_str().unwrap()],
            );
            assert!(packed.status.success(), "{}", String::from_utf8_lossy(&packed.stderr));
            sha256(Path::new(String::from_utf8(packed.stdout).unwrap().trim()))
        })
        .collect();
    assert_eq!(shas[0], shas[1], "the same archive twice");
    let refused =
        hack("package-binary", &[stand_in.to_str().unwrap(), "plan9", "amd64", out.path().to_str().unwrap()]);
    assert!(!refused.status.success(), "plan9 is no release platform");

    // The other platforms' archives stand in as checksums, as the workflow computes them.
    let mut checksums = String::new();
    let mut expected = Vec::new();
    for (index, (os, arch, _)) in PLATFORMS.iter().enumerate() {
        let extension = if *os == "windows" { "zip" } else { "tar.gz" };
        let asset = format!("reloader-{version}-{os}-{arch}.{extension}");
        let sha =
            if (*os, *arch) == ("linux", "amd64") { linux_sha.clone() } else { format!("{index:064x}") };
        checksums.push_str(&format!("{sha}  {asset}\n"));
        expected.push((os.to_string(), arch.to_string(), asset, sha));
    }
    let sums = out.path().join("checksums.txt");
    std::fs::write(&sums, &checksums).unwrap();
    let made = hack("krew-manifest", &[sums.to_str().unwrap()]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let manifest = yaml(&String::from_utf8(made.stdout).unwrap());
    assert_eq!(manifest["apiVersion"], "krew.googlecontainertools.github.com/v1alpha2");
    assert_eq!(manifest["kind"], "Plugin");
    assert_eq!(manifest["metadata"]["name"], "reloader", "installed as kubectl-reloader");
    let spec = &manifest["spec"];
    assert_eq!(spec["version"], format!("v{version}").as_str());
    assert_eq!(spec["homepage"], repository.as_str());
    for key in ["shortDescription", "description"] {
        assert!(spec[key].as_str().is_some_and(|text| !text.trim().is_empty()), "spec.{key}");
    }
    let platforms = spec["platforms"].as_array().expect("platforms");
    assert_eq!(platforms.len(), PLATFORMS.len());
    for (platform, (os, arch, asset, sha)) in platforms.iter().zip(&expected) {
        assert_eq!(platform["selector"]["matchLabels"], serde_json::json!({"os": os, "arch": arch}));
        assert_eq!(platform["uri"], format!("{repository}/releases/download/v{version}/{asset}").as_str());
        assert_eq!(platform["sha256"], sha.as_str());
        let bin = if os == "windows" { "reloader.exe" } else { "reloader" };
        assert_eq!(platform["bin"], bin, "the archive's binary");
    }

    // A platform missing from the checksums is refused, by name.
    let partial = out.path().join("partial.txt");
    std::fs::write(&partial, checksums.lines().take(4).collect::<Vec<_>>().join("\n")).unwrap();
    let refused = hack("krew-manifest", &[partial.to_str().unwrap()]);
    assert!(!refused.status.success());
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(error.contains(&format!("reloader-{version}-windows-amd64.zip")), "{error}");
}

/// A `KEY=value` of hack/versions.env.
fn pinned(key: &str) -> String {
    read("hack/versions.env")
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("hack/versions.env has no {key}"))
        .to_owned()
}

/// The minor of `v1.<minor>.<patch>`.
fn minor(version: &str) -> u32 {
    version
        .strip_prefix("v1.")
        .and_then(|rest| rest.split('.').next())
        .and_then(|minor| minor.parse().ok())
        .unwrap_or_else(|| panic!("{version}: expected v1.<minor>.<patch>"))
}

#[test]
fn the_supported_kubernetes_range_is_stated_where_users_look_and_tested() {
    let [oldest, between, newest] =
        ["KUBERNETES_OLDEST", "KUBERNETES_BETWEEN", "KUBERNETES_VERSION"].map(pinned);
    let [old, mid, new] = [&oldest, &between, &newest].map(|version| minor(version));
    assert!(old < mid && mid < new, "oldest {oldest} < between {between} < newest {newest}");
    assert!(new - old >= 3, "the oldest supported minor is at least three older than the newest");

    let chart = yaml(&read("charts/reloader/Chart.yaml"));
    assert_eq!(chart["kubeVersion"], format!(">=1.{old}.0-0").as_str(), "Chart.yaml kubeVersion");
    let readme = read("README.md");
    let range = format!("Kubernetes 1.{old} to 1.{new}");
    assert!(readme.contains(&range), "README.md states the range: {range}");

    // The CI matrix: every push to main runs the oldest and the one between (ci.yml's `test` job
    // runs the newest, through hack/test).
    let ci = yaml(&read(".github/workflows/ci.yml"));
    let matrix = &ci["jobs"]["matrix"];
    assert_eq!(matrix["if"], "github.event_name == 'push' && github.ref == 'refs/heads/main'");
    assert_eq!(matrix["strategy"]["matrix"]["kubernetes"], serde_json::json!(["oldest", "between"]));
    assert!(run_lines(matrix).contains("hack/matrix \"${{ matrix.kubernetes }}\""), "{matrix}");

    // The record of the last full matrix run: a row for each version hack/matrix ran (the newest
    // runs in every hack/test), and every row of it passed.
    let record = read("docs/kubernetes-versions.md");
    let runs = record.split("## The last full matrix run").nth(1).expect("a section with the last run");
    let rows: Vec<&str> = runs.lines().filter(|line| line.starts_with("| 20")).collect();
    for version in [&oldest, &between] {
        assert!(
            rows.iter().any(|row| row.contains(&format!(" {version} "))),
            "docs/kubernetes-versions.md records no run on {version}"
        );
    }
    for row in rows {
        assert!(row.contains("| passed |"), "every version passed in the last matrix run: {row}");
    }
}
