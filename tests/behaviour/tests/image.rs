//! The container image built by `hack/image` (README.md, "Install in a cluster"), proven rather
//! than assumed: the archive is unpacked as a runtime would, its config is checked (numeric
//! non-root user, entrypoint is the binary, no shell anywhere in the rootfs, the binary asks for
//! no dynamic loader), and the binary is run FROM THE UNPACKED ROOTFS, chrooted in a user
//! namespace as the image's user, against the local control plane, where it performs a reload.
//! The kubeconfig names the API server `kubernetes` (a name its certificate holds), resolved from
//! the rootfs's `/etc/hosts` (which kubelet mounts in a pod), so name resolution inside the image
//! is exercised.
//!
//! `hack/test` runs `hack/image` first. Under `CI=true` a missing archive or a missing `unshare`
//! fails the test; elsewhere it is skipped with a message.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use reloader_harness::{NotYet, free_port, wait_until};
use reloader_tests::fixtures::TestEnv;
use serde_json::{Value, json};

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true")
}

/// The archive, or `None` (skip) when it is missing outside CI.
fn archive() -> Option<PathBuf> {
    let path = workspace_root().join(format!("target/image/reloader-{VERSION}.oci.tar"));
    if path.exists() {
        return Some(path);
    }
    let message = format!("{} is missing: build it with `hack/image`", path.display());
    assert!(!under_ci(), "{message}");
    eprintln!("skipped: {message}");
    None
}

fn run(command: &mut Command) -> String {
    let output = command.output().unwrap_or_else(|error| panic!("{command:?}: {error}"));
    assert!(output.status.success(), "{command:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// An OCI image layout unpacked from the archive, and its single image's rootfs.
struct Unpacked {
    _dir: tempfile::TempDir,
    config: Value,
    rootfs: PathBuf,
}

impl Unpacked {
    fn from_archive(archive: &Path) -> Self {
        let dir = tempfile::Builder::new().prefix("reloader-image-").tempdir().expect("a temp dir");
        let layout = dir.path().join("layout");
        let rootfs = dir.path().join("rootfs");
        std::fs::create_dir_all(&layout).unwrap();
        std::fs::create_dir_all(&rootfs).unwrap();
        run(Command::new("tar").arg("-xf").arg(archive).arg("-C").arg(&layout));

        let blob = |digest: &str| {
            let hex =
                digest.strip_prefix("sha256:").unwrap_or_else(|| panic!("not a sha256 digest: {digest}"));
            layout.join("blobs/sha256").join(hex)
        };
        let read_json = |path: &Path| -> Value {
            serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        assert!(layout.join("oci-layout").exists(), "not an OCI image layout");
        let index = read_json(&layout.join("index.json"));
        let manifests = index["manifests"].as_array().expect("index.json lists manifests");
        assert_eq!(manifests.len(), 1, "one image: {index}");
        let descriptor = &manifests[0];
        assert_eq!(descriptor["annotations"]["org.opencontainers.image.ref.name"], VERSION, "{index}");
        let manifest = read_json(&blob(descriptor["digest"].as_str().unwrap()));
        let config = read_json(&blob(manifest["config"]["digest"].as_str().unwrap()));

        // docker load (before Docker 25) reads manifest.json: it must name the same blobs.
        let docker = read_json(&layout.join("manifest.json"));
        let config_hex = manifest["config"]["digest"].as_str().unwrap().trim_start_matches("sha256:");
        assert_eq!(docker[0]["Config"], format!("blobs/sha256/{config_hex}"), "{docker}");
        assert_eq!(
            docker[0]["RepoTags"][0].as_str().map(|tag| tag.ends_with(&format!(":{VERSION}"))),
            Some(true),
            "{docker}"
        );

        // Every blob matches its digest (a runtime refuses one that does not).
        for digest in std::iter::once(descriptor["digest"].as_str().unwrap())
            .chain(std::iter::once(manifest["config"]["digest"].as_str().unwrap()))
            .chain(manifest["layers"].as_array().unwrap().iter().map(|l| l["digest"].as_str().unwrap()))
        {
            let sum = run(Command::new("sha256sum").arg(blob(digest)));
            assert_eq!(sum.split_whitespace().next(), digest.strip_prefix("sha256:"), "blob {digest}");
        }

        let layers = manifest["layers"].as_array().expect("layers");
        let diff_ids = config["rootfs"]["diff_ids"].as_array().expect("diff_ids");
        assert_eq!(layers.len(), diff_ids.len(), "{manifest} {config}");
        for layer in layers {
            assert_eq!(layer["mediaType"], "application/vnd.oci.image.layer.v1.tar+gzip", "{layer}");
            run(Command::new("tar")
                .arg("-xzf")
                .arg(blob(layer["digest"].as_str().unwrap()))
                .arg("--no-same-owner")
                .arg("-C")
                .arg(&rootfs));
        }
        Self { _dir: dir, config, rootfs }
    }

    /// `uid:gid` of the image's user.
    fn user(&self) -> (u32, u32) {
        let user = self.config["config"]["User"].as_str().expect("the image names a user");
        let (uid, gid) = user.split_once(':').unwrap_or((user, user));
        let numeric = |id: &str| id.parse::<u32>().unwrap_or_else(|_| panic!("user {user:?} is not numeric"));
        (numeric(uid), numeric(gid))
    }

    fn entrypoint(&self) -> PathBuf {
        let entrypoint = self.config["config"]["Entrypoint"].as_array().expect("an entrypoint");
        assert_eq!(entrypoint.len(), 1, "the entrypoint is the binary alone: {entrypoint:?}");
        PathBuf::from(entrypoint[0].as_str().unwrap())
    }

    fn inside(&self, path: &Path) -> PathBuf {
        self.rootfs.join(path.strip_prefix("/").unwrap_or(path))
    }
}

/// True when an ELF file has a PT_INTERP program header, i.e. needs a dynamic loader and the
/// shared libraries it would load.
fn needs_dynamic_loader(elf: &[u8]) -> bool {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(elf[4], 2, "a 64-bit ELF file");
    let u16_at = |at: usize| u16::from_le_bytes([elf[at], elf[at + 1]]) as usize;
    let offset = u64::from_le_bytes(elf[32..40].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(54), u16_at(56));
    (0..count).any(|i| {
        let at = offset + i * size;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == 3
    })
}

#[test]
fn config_and_rootfs_are_minimal() {
    let Some(archive) = archive() else { return };
    let image = Unpacked::from_archive(&archive);

    let (uid, gid) = image.user();
    assert_ne!(uid, 0, "the image runs as a non-root user");
    assert_ne!(gid, 0, "the image runs with a non-root group");
    assert_eq!(image.config["os"], "linux");
    let labels = &image.config["config"]["Labels"];
    assert_eq!(labels["org.opencontainers.image.version"], VERSION, "{labels}");
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0", "{labels}");
    for label in ["org.opencontainers.image.source", "org.opencontainers.image.revision"] {
        assert!(labels[label].as_str().is_some_and(|v| !v.is_empty()), "{label} missing: {labels}");
    }

    let binary = std::fs::read(image.inside(&image.entrypoint())).expect("the entrypoint is in the rootfs");
    assert!(!needs_dynamic_loader(&binary), "the binary must be static: the image has no libraries");
    assert!(image.inside(Path::new("/etc/ssl/certs/ca-certificates.crt")).exists(), "CA certificates");

    // No shell and no other program: every regular file but the binary is data.
    let entrypoint = image.inside(&image.entrypoint());
    let files = run(Command::new("find").arg(&image.rootfs).args(["-type", "f"]));
    for file in files.lines().map(PathBuf::from) {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!["sh", "bash", "ash", "dash", "busybox"].contains(&name.as_str()), "a shell: {file:?}");
        if file != entrypoint {
            let head = std::fs::read(&file).unwrap();
            assert!(!head.starts_with(b"\x7fELF"), "a program besides the binary: {}", file.display());
        }
    }
    for dir in ["bin", "sbin", "usr/bin", "lib", "lib64", "usr/lib"] {
        assert!(!image.rootfs.join(dir).exists(), "/{dir} in the image");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_from_the_image_reloads_as_the_image_user() {
    let Some(archive) = archive() else { return };
    if !unshare_available() {
        return;
    }
    let image = Unpacked::from_archive(&archive);
    let (uid, gid) = image.user();
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, .. } = &env;

    // What kubelet mounts into a pod, and a kubeconfig that names the API server by host name.
    let etc = image.rootfs.join("etc");
    std::fs::write(etc.join("hosts"), "127.0.0.1 localhost kubernetes\n").unwrap();
    let kubeconfig = std::fs::read_to_string(plane.kubeconfig_path()).unwrap();
    assert!(kubeconfig.contains("https://127.0.0.1:"), "the plane serves on 127.0.0.1: {kubeconfig}");
    let kubeconfig = kubeconfig.replace("https://127.0.0.1:", "https://kubernetes:");
    // Owner-only, as a mounted Secret would be: in the user namespace the test's own uid is
    // the image's user, so the binary can read it and nobody else can.
    let kubeconfig_path = etc.join("kubeconfig");
    std::fs::write(&kubeconfig_path, kubeconfig).unwrap();
    std::fs::set_permissions(&kubeconfig_path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();

    let configmaps: kube::Api<ConfigMap> = ns.api(client);
    let deployments: kube::Api<Deployment> = ns.api(client);
    let configmap: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "image-config" }, "data": { "greeting": "hello" }
    }))
    .unwrap();
    configmaps.create(&PostParams::default(), &configmap).await.unwrap();
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "image-web", "annotations": { "reloader.stakater.com/auto": "true" } },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": "image-web" } },
            "template": {
                "metadata": { "labels": { "app": "image-web" } },
                "spec": { "containers": [{
                    "name": "web", "image": "web:1",
                    "envFrom": [{ "configMapRef": { "name": "image-config" } }]
                }] }
            }
        }
    }))
    .unwrap();
    deployments.create(&PostParams::default(), &deployment).await.unwrap();

    let port = free_port();
    let log_path = image.rootfs.parent().unwrap().join("reloader.log");
    let log = std::fs::File::create(&log_path).unwrap();
    // The binary as the image's user, in the image's rootfs, with nothing from the host but the
    // network (the plane is on 127.0.0.1) and the environment given here.
    let mut reloader = tokio::process::Command::new("unshare")
        .arg("--user")
        .arg(format!("--map-user={uid}"))
        .arg(format!("--map-group={gid}"))
        .arg(format!("--root={}", image.rootfs.display()))
        .arg("--wd=/")
        .arg(image.entrypoint())
        .arg(format!("--metrics-addr=127.0.0.1:{port}"))
        .arg(format!("--namespaces={}", ns.name()))
        .env_clear()
        .env("KUBECONFIG", "/etc/kubeconfig")
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("unshare starts");
    let log_text = || std::fs::read_to_string(&log_path).unwrap_or_default();

    let http = reqwest::Client::new();
    let ready = wait_until("the image's reloader to be ready", Duration::from_secs(60), || async {
        match http.get(format!("http://127.0.0.1:{port}/readyz")).send().await {
            Ok(response) if response.status().is_success() => Ok(()),
            other => Err(NotYet::because(format!("{other:?}"))),
        }
    })
    .await;
    ready.unwrap_or_else(|error| panic!("{error}\nreloader log:\n{}", log_text()));

    configmaps
        .patch(
            "image-config",
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": { "greeting": "hi" } })),
        )
        .await
        .unwrap();
    let reloaded = wait_until("the Deployment to be reloaded", Duration::from_secs(60), || async {
        let template = serde_json::to_value(deployments.get("image-web").await.map_err(NotYet::from)?.spec)
            .map_err(|e| NotYet::because(e.to_string()))?;
        let env = template["template"]["spec"]["containers"][0]["env"].to_string();
        if env.contains("STAKATER_IMAGE_CONFIG_CONFIGMAP") { Ok(()) } else { Err(NotYet::because(env)) }
    })
    .await;
    reloaded.unwrap_or_else(|error| panic!("{error}\nreloader log:\n{}", log_text()));

    let version = Command::new("unshare")
        .arg("--user")
        .arg(format!("--map-user={uid}"))
        .arg(format!("--map-group={gid}"))
        .arg(format!("--root={}", image.rootfs.display()))
        .arg(image.entrypoint())
        .arg("--version")
        .env_clear()
        .output()
        .expect("unshare runs");
    let version = String::from_utf8_lossy(&version.stdout);
    assert!(version.contains(VERSION) && version.contains("commit "), "reloader --version: {version}");
    reloader.kill().await.ok();
}

/// A user namespace is how the test runs the image's user without root. Missing: fail under CI.
fn unshare_available() -> bool {
    let works = Command::new("unshare")
        .args(["--user", "--map-user=65534", "--map-group=65534", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !works {
        let message = "`unshare --user` (util-linux, user namespaces enabled) is needed to run the image";
        assert!(!under_ci(), "{message}");
        eprintln!("skipped: {message}");
    }
    works
}
