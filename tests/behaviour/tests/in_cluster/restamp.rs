//! Another build of the image, for H56: the archive `hack/image` wrote, its binary's commit stamp
//! replaced by another of the same length, packed again with `hack/lib.sh`'s `oci_archive` under
//! another tag.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::workspace_root;

fn run(command: &mut Command) -> String {
    let output = command.output().unwrap_or_else(|error| panic!("{command:?}: {error}"));
    assert!(output.status.success(), "{command:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Writes `to`, the image of `from` with its binary's commit stamp replaced, named
/// `repository:tag`; returns the old and the new stamp.
pub fn restamp(from: &Path, to: &Path, repository: &str, tag: &str) -> (String, String) {
    let work = tempfile::tempdir().expect("a temp dir");
    let (layout, rootfs) = (work.path().join("layout"), work.path().join("rootfs"));
    std::fs::create_dir_all(&layout).expect("a layout dir");
    std::fs::create_dir_all(&rootfs).expect("a rootfs dir");
    run(Command::new("tar").arg("-xf").arg(from).arg("-C").arg(&layout));
    let blob = |digest: &Value| {
        let hex = digest.as_str().and_then(|d| d.strip_prefix("sha256:")).expect("a sha256 digest");
        layout.join("blobs/sha256").join(hex)
    };
    let index = read_json(&layout.join("index.json"));
    let manifest = read_json(&blob(&index["manifests"][0]["digest"]));
    let config = read_json(&blob(&manifest["config"]["digest"]));
    run(Command::new("tar").arg("-xzf").arg(blob(&manifest["layers"][0]["digest"])).arg("-C").arg(&rootfs));

    let labels = &config["config"]["Labels"];
    let old = labels["org.opencontainers.image.revision"].as_str().expect("a revision label").to_owned();
    assert!(old.len() == 40 && old.bytes().all(|b| b.is_ascii_hexdigit()), "not a commit stamp: {old}");
    // Same length, every digit different.
    let new: String = old.chars().map(|c| if c == 'f' { '0' } else { 'f' }).collect();
    let binary = rootfs.join("reloader");
    let bytes = std::fs::read(&binary).expect("the binary");
    assert!(
        bytes.windows(old.len()).any(|window| window == old.as_bytes()),
        "the binary does not embed {old}"
    );
    let mut patched = bytes;
    let mut at = 0;
    while let Some(offset) = patched[at..].windows(old.len()).position(|window| window == old.as_bytes()) {
        patched[at + offset..at + offset + old.len()].copy_from_slice(new.as_bytes());
        at += offset + old.len();
    }
    std::fs::write(&binary, patched).expect("writing the restamped binary");

    let mut labels = labels.clone();
    labels["org.opencontainers.image.revision"] = Value::String(new.clone());
    labels["org.opencontainers.image.version"] = Value::String(tag.to_owned());
    let mut image_config = config["config"].clone();
    image_config["Labels"] = labels.clone();
    let members = labels.to_string();
    let members = &members[1..members.len() - 1];
    let entries: Vec<String> = std::fs::read_dir(&rootfs)
        .expect("the rootfs")
        .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    run(Command::new("bash")
        .arg("-c")
        .arg(r#"set -euo pipefail; source "$0"; oci_archive "$@""#)
        .arg(workspace_root().join("hack/lib.sh"))
        .arg(&rootfs)
        .arg(to)
        .arg(repository)
        .arg(tag)
        .arg(image_config.to_string())
        .arg(members)
        .arg(format!("restamped {new}"))
        .args(&entries)
        .env("SOURCE_DATE_EPOCH", "0"));
    (old, new)
}
