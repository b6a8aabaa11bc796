//! The set of files the sidecar writes: merged from the watched objects, validated, fingerprinted.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use reloader_core::hash;
use reloader_core::model::ContentHash;

/// One file of the target directory.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct FileEntry {
    pub(crate) bytes: Vec<u8>,
    /// Permission bits.
    pub(crate) mode: u32,
}

impl fmt::Debug for FileEntry {
    /// Lengths only: the bytes may be a Secret's.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FileEntry({} bytes, {:o})", self.bytes.len(), self.mode)
    }
}

/// Every file of the target directory, by file name.
pub(crate) type Payload = BTreeMap<String, FileEntry>;

/// A watched object, as named in warnings and errors.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SourceId {
    pub(crate) kind: SourceKind,
    pub(crate) name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum SourceKind {
    ConfigMap,
    Secret,
}

impl fmt::Display for SourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            SourceKind::ConfigMap => "configmap",
            SourceKind::Secret => "secret",
        };
        write!(f, "{kind}/{}", self.name)
    }
}

/// The files one object contributes.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SourceFiles {
    pub(crate) files: BTreeMap<String, Vec<u8>>,
    pub(crate) mode: u32,
}

impl fmt::Debug for SourceFiles {
    /// Keys only: the bytes may be a Secret's.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceFiles").field("keys", &self.files.keys()).field("mode", &self.mode).finish()
    }
}

impl SourceFiles {
    /// `data` as UTF-8 bytes and `binaryData` as is.
    pub(crate) fn from_configmap(cm: &ConfigMap, mode: u32) -> Self {
        let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for (key, value) in cm.data.iter().flatten() {
            files.insert(key.clone(), value.as_bytes().to_vec());
        }
        for (key, value) in cm.binary_data.iter().flatten() {
            files.insert(key.clone(), value.0.clone());
        }
        Self { files, mode }
    }

    /// `data`, already decoded from base64 by the API client.
    pub(crate) fn from_secret(secret: &Secret, mode: u32) -> Self {
        let files = secret.data.iter().flatten().map(|(k, v)| (k.clone(), v.0.clone())).collect();
        Self { files, mode }
    }
}

/// Something wrong with a key, reported by name (never by value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MergeWarning {
    /// The key cannot be a file name in the target directory.
    InvalidKey { source: SourceId, key: String },
    /// Two objects hold the key; the later one (in `--configmap` then `--secret` order) wins.
    Collision { key: String, kept: SourceId, dropped: SourceId },
}

impl fmt::Display for MergeWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeWarning::InvalidKey { source, key } => {
                write!(f, "{source}: key {key:?} is not a valid file name; skipped")
            }
            MergeWarning::Collision { key, kept, dropped } => {
                write!(f, "key {key:?} is in both {dropped} and {kept}; using the one from {kept}")
            }
        }
    }
}

/// Whether `key` can be a file of the target directory: one path element, not `.`, and not
/// starting with `..`, which is reserved for `..data` and the timestamped directories.
pub(crate) fn is_valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key != "."
        && !key.starts_with("..")
        && !key.contains('/')
        && !key.contains('\0')
}

/// Merges the objects' files in order; a later object's key replaces an earlier one's.
pub(crate) fn merge<'a>(
    sources: impl IntoIterator<Item = (&'a SourceId, &'a SourceFiles)>,
) -> (Payload, Vec<MergeWarning>) {
    let mut payload = Payload::new();
    let mut owner: BTreeMap<&str, &SourceId> = BTreeMap::new();
    let mut warnings = Vec::new();
    for (source, content) in sources {
        for (key, bytes) in &content.files {
            if !is_valid_key(key) {
                warnings.push(MergeWarning::InvalidKey { source: source.clone(), key: key.clone() });
                continue;
            }
            if let Some(previous) = owner.insert(key, source) {
                warnings.push(MergeWarning::Collision {
                    key: key.clone(),
                    kept: source.clone(),
                    dropped: previous.clone(),
                });
            }
            payload.insert(key.clone(), FileEntry { bytes: bytes.clone(), mode: content.mode });
        }
    }
    (payload, warnings)
}

/// A hash of names, modes and contents. Each entry is `name=<mode>:<sha1 of content>`, so no value
/// can make two different payloads join into the same string (keys hold neither `=` nor `;`).
pub(crate) fn fingerprint(payload: &Payload) -> ContentHash {
    let entries: Vec<(&str, String)> = payload
        .iter()
        .map(|(name, entry)| {
            (name.as_str(), format!("{:o}:{}", entry.mode, hash::sha1(&entry.bytes).to_hex()))
        })
        .collect();
    hash::secret_hash(entries.iter().map(|(name, digest)| (*name, digest.as_bytes())))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;

    fn id(kind: SourceKind, name: &str) -> SourceId {
        SourceId { kind, name: name.to_owned() }
    }

    fn files(pairs: &[(&str, &str)], mode: u32) -> SourceFiles {
        SourceFiles {
            files: pairs.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect(),
            mode,
        }
    }

    #[test]
    fn configmap_data_and_binary_data_become_files() {
        let cm = ConfigMap {
            data: Some([("a.conf".to_owned(), "x=1".to_owned())].into()),
            binary_data: Some([("logo.png".to_owned(), ByteString(vec![0x89, 0x50, 0, 0xff]))].into()),
            ..Default::default()
        };
        let got = SourceFiles::from_configmap(&cm, 0o644);
        assert_eq!(got.files["a.conf"], b"x=1");
        assert_eq!(got.files["logo.png"], [0x89, 0x50, 0, 0xff]);
        let secret = Secret {
            data: Some([("token".to_owned(), ByteString(b"s3cr3t".to_vec()))].into()),
            ..Default::default()
        };
        assert_eq!(SourceFiles::from_secret(&secret, 0o640).files["token"], b"s3cr3t");
        assert!(SourceFiles::from_configmap(&ConfigMap::default(), 0o644).files.is_empty());
    }

    #[test]
    fn later_objects_win_and_collisions_are_reported_by_key() {
        let (cm, sec) = (id(SourceKind::ConfigMap, "base"), id(SourceKind::Secret, "creds"));
        let cm_files = files(&[("shared", "from-cm"), ("only-cm", "1")], 0o644);
        let sec_files = files(&[("shared", "hunter2")], 0o640);
        let (payload, warnings) = merge([(&cm, &cm_files), (&sec, &sec_files)]);
        assert_eq!(payload["shared"], FileEntry { bytes: b"hunter2".to_vec(), mode: 0o640 });
        assert_eq!(payload["only-cm"].mode, 0o644);
        assert_eq!(
            warnings,
            [MergeWarning::Collision { key: "shared".to_owned(), kept: sec.clone(), dropped: cm.clone() }]
        );
        let message = warnings[0].to_string();
        assert!(message.contains("shared") && message.contains("secret/creds"), "{message}");
        assert!(!message.contains("hunter2"), "a warning must not carry the value: {message}");
    }

    #[test]
    fn keys_that_are_not_file_names_are_refused() {
        for bad in ["", ".", "..", "..data", "..2024_01_01", "a/b", "/etc/passwd", "../x", "nul\0"] {
            assert!(!is_valid_key(bad), "{bad:?}");
        }
        for good in ["a", ".hidden", "a..b", "app.properties", "-dash_", &"k".repeat(253)] {
            assert!(is_valid_key(good), "{good:?}");
        }
        let src = id(SourceKind::ConfigMap, "cm");
        let (payload, warnings) = merge([(&src, &files(&[("..data", "x"), ("ok", "y")], 0o644))]);
        assert_eq!(payload.keys().collect::<Vec<_>>(), ["ok"]);
        assert_eq!(warnings, [MergeWarning::InvalidKey { source: src, key: "..data".to_owned() }]);
    }

    #[test]
    fn fingerprint_sees_content_names_and_modes_and_nothing_else() {
        let src = id(SourceKind::ConfigMap, "cm");
        let fp = |pairs: &[(&str, &str)], mode| fingerprint(&merge([(&src, &files(pairs, mode))]).0);
        let base = fp(&[("a", "1"), ("b", "2")], 0o644);
        assert_eq!(base, fp(&[("b", "2"), ("a", "1")], 0o644));
        assert_ne!(base, fp(&[("a", "1"), ("b", "3")], 0o644));
        assert_ne!(base, fp(&[("a", "1"), ("c", "2")], 0o644));
        assert_ne!(base, fp(&[("a", "1"), ("b", "2")], 0o640));
        // The Stakater hash would join these two into the same `a=1;b=2`.
        assert_ne!(fp(&[("a", "1;b=2")], 0o644), fp(&[("a", "1"), ("b", "2")], 0o644));
    }

    #[test]
    fn debug_output_hides_bytes() {
        let entry = FileEntry { bytes: b"hunter2".to_vec(), mode: 0o640 };
        assert_eq!(format!("{entry:?}"), "FileEntry(7 bytes, 640)");
    }
}
