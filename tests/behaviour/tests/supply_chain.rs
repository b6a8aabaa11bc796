//! The release path's supply-chain guarantees (docs/release.md, "Supply chain"), read from the
//! workflow files and the Dockerfile themselves (actionlint, run by `hack/lint-release`, checks
//! that GitHub can run them):
//! - every action is pinned by a 40-hex commit digest, its release tag in a comment beside it;
//! - the release workflow publishes only after the whole test command passed (a job that calls
//!   ci.yml, which runs `.ci/run`, and `needs:` of the publishing job);
//! - the image and the chart are signed by digest with cosign, keyless (an OIDC identity, no key);
//! - SBOMs from Cargo.lock (CycloneDX) and from the image (SPDX) are attested to the image and
//!   attached to the GitHub release, and both artifacts get a build provenance attestation;
//! - the Dockerfile pins every base image by digest.

use std::path::{Path, PathBuf};

use serde_json::Value;

const CI: &str = "ci.yml";
const RELEASE: &str = "release.yml";
/// The step ids the release's later steps read their digests from.
const IMAGE_STEP: &str = "image";
const CHART_STEP: &str = "chart";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn workflows() -> Vec<(String, String)> {
    let dir = root().join(".github/workflows");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| matches!(path.extension().and_then(|e| e.to_str()), Some("yml" | "yaml")))
        .map(|path| (path.file_name().unwrap().to_string_lossy().into_owned(), read(&path)))
        .collect();
    files.sort();
    assert!(files.iter().any(|(name, _)| name == RELEASE), "{RELEASE} in {}", dir.display());
    files
}

fn parse(name: &str, text: &str) -> Value {
    serde_saphyr::from_str(text).unwrap_or_else(|error| panic!("{name}: {error}"))
}

fn workflow(name: &str) -> Value {
    parse(name, &read(&root().join(".github/workflows").join(name)))
}

fn is_commit_digest(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Every `uses:` of a workflow (steps' and reusable-workflow jobs') that is not pinned: a remote
/// action or workflow must name a 40-hex commit, `docker://` images a sha256 digest, and the line
/// must keep the release tag as a comment (what a reviewer reads). Local workflows (`./`) are
/// the same commit as the caller.
fn unpinned_uses(name: &str, text: &str) -> Vec<String> {
    let parsed = parse(name, text);
    let mut uses = Vec::new();
    for (job_name, job) in parsed["jobs"].as_object().expect("jobs") {
        if let Some(reference) = job["uses"].as_str() {
            uses.push((job_name.clone(), reference.to_owned()));
        }
        for step in job["steps"].as_array().into_iter().flatten() {
            if let Some(reference) = step["uses"].as_str() {
                uses.push((job_name.clone(), reference.to_owned()));
            }
        }
    }
    assert!(!uses.is_empty(), "{name} uses no action");
    let mut unpinned = Vec::new();
    for (job_name, reference) in uses {
        if reference.starts_with("./") {
            continue;
        }
        let pinned = match reference.strip_prefix("docker://") {
            Some(image) => image.split_once("@sha256:").is_some_and(|(_, digest)| {
                digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit())
            }),
            None => reference.rsplit_once('@').is_some_and(|(_, version)| is_commit_digest(version)),
        };
        let tagged = text.lines().any(|line| {
            line.split_once("uses:").is_some_and(|(_, rest)| {
                rest.trim_start().starts_with(&reference)
                    && rest.split_once(" # ").is_some_and(|(_, tag)| !tag.trim().is_empty())
            })
        });
        if !pinned || !tagged {
            unpinned.push(format!(
                "{name}: job {job_name}: {reference} (pinned: {pinned}, tag comment: {tagged})"
            ));
        }
    }
    unpinned
}

#[test]
fn every_action_is_pinned_by_commit_digest() {
    let unpinned: Vec<String> =
        workflows().iter().flat_map(|(name, text)| unpinned_uses(name, text)).collect();
    assert!(unpinned.is_empty(), "actions not pinned by commit digest:\n{}", unpinned.join("\n"));
}

/// The check itself: a tag, a branch, a short digest or a missing tag comment are refused.
#[test]
fn the_pin_check_refuses_tags_and_short_digests() {
    let sha = "11d5960a326750d5838078e36cf38b85af677262";
    let workflow =
        |uses: &str| format!("on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - uses: {uses}\n");
    assert!(unpinned_uses("pinned", &workflow(&format!("actions/checkout@{sha} # v4.4.0"))).is_empty());
    assert!(
        unpinned_uses("local", "on: push\njobs:\n  t:\n    uses: ./.github/workflows/ci.yml\n").is_empty()
    );
    for refused in [
        "actions/checkout@v4 # v4".to_owned(),
        "actions/checkout@main # main".to_owned(),
        format!("actions/checkout@{} # v4.4.0", &sha[..12]),
        format!("actions/checkout@{sha}"),
        format!("actions/checkout@{} # v4.4.0", sha.to_uppercase()),
        "docker://alpine:3 # 3".to_owned(),
    ] {
        assert_eq!(unpinned_uses("refused", &workflow(&refused)).len(), 1, "{refused} is refused");
    }
}

fn steps(workflow: &Value, job: &str) -> Vec<Value> {
    workflow["jobs"][job]["steps"].as_array().unwrap_or_else(|| panic!("job {job} has steps")).clone()
}

/// The publishing job of release.yml: the one that pushes the image.
fn release_job(release: &Value) -> (String, Value) {
    let jobs = release["jobs"].as_object().expect("jobs");
    let (name, job) = jobs
        .iter()
        .find(|(_, job)| job["steps"].as_array().into_iter().flatten().any(|step| step["id"] == IMAGE_STEP))
        .expect("a job with the image step");
    (name.clone(), job.clone())
}

fn step_with_id(steps: &[Value], id: &str) -> Value {
    steps.iter().find(|step| step["id"] == id).unwrap_or_else(|| panic!("a step with id {id}")).clone()
}

fn uses_action(step: &Value, action: &str) -> bool {
    step["uses"].as_str().is_some_and(|uses| uses.split_once('@').is_some_and(|(name, _)| name == action))
}

fn run(step: &Value) -> &str {
    step["run"].as_str().unwrap_or("")
}

/// The environment a step's `run` sees a variable as: its own `env`, then the job's.
fn env_of<'a>(job: &'a Value, step: &'a Value, variable: &str) -> &'a str {
    step["env"][variable].as_str().or_else(|| job["env"][variable].as_str()).unwrap_or_default()
}

#[test]
fn release_publishes_only_after_the_test_command_passed() {
    let release = workflow(RELEASE);
    let jobs = release["jobs"].as_object().expect("jobs");
    let test_jobs: Vec<&String> = jobs
        .iter()
        .filter(|(_, job)| job["uses"] == format!("./.github/workflows/{CI}"))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(test_jobs.len(), 1, "one job of {RELEASE} calls {CI}");
    let (name, job) = release_job(&release);
    let needs: Vec<&str> = match &job["needs"] {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    assert!(needs.contains(&test_jobs[0].as_str()), "job {name} needs {}: {needs:?}", test_jobs[0]);

    // ci.yml can be called, and what it runs is the test command.
    let ci = workflow(CI);
    assert!(ci["on"].get("workflow_call").is_some(), "{CI} has `on: workflow_call`: {}", ci["on"]);
    let runs_test_command = ci["jobs"]
        .as_object()
        .expect("jobs")
        .values()
        .flat_map(|job| job["steps"].as_array().cloned().unwrap_or_default())
        .any(|step| run(&step).contains(".ci/run"));
    assert!(runs_test_command, "{CI} runs .ci/run");
}

#[test]
fn release_signs_the_image_and_the_chart_by_digest_keylessly() {
    let release = workflow(RELEASE);
    let (name, job) = release_job(&release);
    assert_eq!(job["permissions"]["id-token"], "write", "job {name}: keyless signing needs id-token: write");
    let steps = steps(&release, &name);
    assert!(steps.iter().any(|step| uses_action(step, "sigstore/cosign-installer")), "cosign is installed");
    let image = step_with_id(&steps, IMAGE_STEP);
    assert!(uses_action(&image, "docker/build-push-action"), "the image step builds and pushes");
    assert_eq!(image["with"]["push"], true, "the image step pushes");

    let cosign: Vec<&Value> = steps.iter().filter(|step| run(step).contains("cosign ")).collect();
    for step in &cosign {
        for key_flag in ["--key", "COSIGN_PRIVATE_KEY", "COSIGN_PASSWORD"] {
            assert!(!run(step).contains(key_flag), "keyless: no {key_flag} in {}", run(step));
        }
    }
    // Signed by digest: `cosign sign` of <repository>@<digest>, the digest the push step printed.
    for (artifact, repository_variable, digest_step) in
        [("image", "IMAGE", IMAGE_STEP), ("chart", "CHARTS", CHART_STEP)]
    {
        let signed = cosign.iter().any(|step| {
            let digest = format!("${{{{ steps.{digest_step}.outputs.digest }}}}");
            run(step).lines().any(|line| {
                line.contains("cosign sign --yes")
                    && line.contains(&format!("${{{repository_variable}}}"))
                    && line.contains("@${DIGEST}")
            }) && env_of(&job, step, "DIGEST") == digest
                && !env_of(&job, step, repository_variable).is_empty()
        });
        assert!(signed, "the {artifact} is signed with `cosign sign` by the digest of step {digest_step}");
    }
    let chart = step_with_id(&steps, CHART_STEP);
    assert!(run(&chart).contains("helm push"), "the chart step pushes the chart");
    assert!(
        run(&chart).contains("digest=") && run(&chart).contains("GITHUB_OUTPUT"),
        "the chart step outputs its digest"
    );
}

#[test]
fn release_attaches_sboms_and_build_provenance() {
    let release = workflow(RELEASE);
    let (name, job) = release_job(&release);
    assert_eq!(job["permissions"]["attestations"], "write", "job {name} writes attestations");
    assert_eq!(job["permissions"]["contents"], "write", "job {name} creates the GitHub release");
    let steps = steps(&release, &name);
    let all_runs: String = steps.iter().map(run).collect::<Vec<_>>().join("\n");

    // SBOM from Cargo.lock (CycloneDX, the binary's crates) and from the image (SPDX, by digest).
    assert!(all_runs.contains("cargo install --locked cargo-cyclonedx --version"), "cargo-cyclonedx, pinned");
    assert!(
        all_runs.contains("cargo cyclonedx") && all_runs.contains("--format json"),
        "a CycloneDX JSON SBOM"
    );
    assert!(
        steps.iter().any(|step| uses_action(step, "anchore/sbom-action/download-syft")),
        "syft is installed"
    );
    assert!(
        all_runs.contains("scan")
            && all_runs.contains("registry:${IMAGE}@${DIGEST}")
            && all_runs.contains("spdx-json="),
        "syft scans the pushed image by digest into SPDX"
    );
    for predicate_type in ["cyclonedx", "spdxjson"] {
        assert!(
            all_runs.contains(&format!("cosign attest --yes --type {predicate_type}")),
            "the {predicate_type} SBOM is attested to the image"
        );
    }

    // Build provenance for the image and for the chart, by the digests their steps pushed.
    for digest_step in [IMAGE_STEP, CHART_STEP] {
        let digest = format!("${{{{ steps.{digest_step}.outputs.digest }}}}");
        let attested = steps.iter().any(|step| {
            uses_action(step, "actions/attest-build-provenance")
                && step["with"]["subject-digest"] == digest.as_str()
                && step["with"]["push-to-registry"] == true
        });
        assert!(
            attested,
            "a provenance attestation of the digest of step {digest_step}, pushed to the registry"
        );
    }

    // The GitHub release carries the SBOM files and the chart package (all written to dist/).
    let release_step =
        steps.iter().find(|step| run(step).contains("gh release create")).expect("a gh release step");
    assert!(
        run(release_step).contains("--verify-tag") && run(release_step).contains("dist/*"),
        "{}",
        run(release_step)
    );
    assert!(
        all_runs.contains("dist/reloader-${VERSION}-${target}.cdx.json"),
        "the CycloneDX SBOMs land in dist/"
    );
    assert!(
        all_runs.contains("dist/reloader-${VERSION}-image-linux-${arch}.spdx.json"),
        "the SPDX SBOMs land in dist/"
    );
}

/// Every base image of the Dockerfile is pinned by a sha256 digest; a stage built on an earlier
/// stage, and `scratch` (no image), need none. No `# syntax=` frontend image is pulled by tag.
#[test]
fn dockerfile_pins_base_images_by_digest() {
    let dockerfile = read(&root().join("Dockerfile"));
    let mut stages = Vec::new();
    let mut bases = 0;
    for line in dockerfile.lines() {
        let line = line.trim();
        if let Some(syntax) = line.strip_prefix("# syntax=") {
            assert!(syntax.contains("@sha256:"), "the frontend image is pinned by digest: {line}");
        }
        let Some(rest) = line.strip_prefix("FROM ") else { continue };
        let words: Vec<&str> = rest.split_whitespace().filter(|word| !word.starts_with("--")).collect();
        let image = words[0];
        let earlier_stage = stages.iter().any(|stage| stage == image);
        if let [_, as_keyword, stage] = words[..] {
            assert!(as_keyword.eq_ignore_ascii_case("AS"), "{line}");
            stages.push(stage.to_owned());
        }
        if image == "scratch" || earlier_stage {
            continue;
        }
        assert!(!image.contains('$'), "a base image named by a build argument is not pinned: {line}");
        let digest = image.split_once("@sha256:").map(|(_, digest)| digest).unwrap_or_default();
        assert!(
            digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "base image pinned by a sha256 digest: {line}"
        );
        bases += 1;
    }
    assert!(bases >= 1, "the Dockerfile has a base image");
}
