//! Content hashes, byte-for-byte compatible with Stakater Reloader (docs/compatibility.md §5), so a
//! workload it already reloaded carries exactly the marker we would write.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sha1::{Digest, Sha1};

use crate::model::{ContentHash, KeyDigests, MAX_KEY_DIGESTS};

/// SHA-1 of `__RELOADER_EMPTY_DELETE_MARKER__`: the annotation-strategy marker of a deleted resource.
pub const DELETE_MARKER_HASH: ContentHash = ContentHash([
    0xaa, 0xe4, 0x5b, 0xad, 0xef, 0x99, 0x28, 0x4e, 0x4d, 0xae, 0x01, 0xd6, 0x04, 0x61, 0x54, 0xea, 0x9d,
    0x99, 0x53, 0x2f,
]);

/// SHA-1 of arbitrary bytes.
pub fn sha1(bytes: &[u8]) -> ContentHash {
    ContentHash(Sha1::digest(bytes).into())
}

/// Sorts the entries, joins them with `;` and hashes the result: the shape of every hash here.
fn hash_entries(mut entries: Vec<Vec<u8>>) -> ContentHash {
    entries.sort_unstable();
    let mut hasher = Sha1::new();
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            hasher.update(b";");
        }
        hasher.update(e);
    }
    ContentHash(hasher.finalize().into())
}

fn entry(key: &str, value: &[u8]) -> Vec<u8> {
    let mut e = Vec::with_capacity(key.len() + 1 + value.len());
    e.extend_from_slice(key.as_bytes());
    e.push(b'=');
    e.extend_from_slice(value);
    e
}

/// ConfigMap: `k=v` per `data` key, `k=<base64>` per `binaryData` key.
pub fn configmap_hash<'a>(
    data: impl IntoIterator<Item = (&'a str, &'a str)>,
    binary_data: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> ContentHash {
    let mut entries: Vec<Vec<u8>> = data.into_iter().map(|(k, v)| entry(k, v.as_bytes())).collect();
    entries.extend(binary_data.into_iter().map(|(k, v)| entry(k, STANDARD.encode(v).as_bytes())));
    hash_entries(entries)
}

/// Secret: `k=<decoded bytes>` per `data` key. `type`, `stringData` and metadata are not hashed.
pub fn secret_hash<'a>(data: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> ContentHash {
    hash_entries(data.into_iter().map(|(k, v)| entry(k, v)).collect())
}

/// ConfigMap: its hash ([`configmap_hash`]) and, key by key, the SHA-1 of each entry that hash
/// reads (docs/beyond-stakater.md §10), from one pass over the data: every listed object needs
/// both. Over [`MAX_KEY_DIGESTS`] keys, no per-key digest is computed or kept.
pub fn configmap_hashes<'a>(
    data: impl IntoIterator<Item = (&'a str, &'a str)>,
    binary_data: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> (ContentHash, KeyDigests) {
    let mut entries: Vec<(&str, Vec<u8>)> =
        data.into_iter().map(|(k, v)| (k, entry(k, v.as_bytes()))).collect();
    entries.extend(binary_data.into_iter().map(|(k, v)| (k, entry(k, STANDARD.encode(v).as_bytes()))));
    hashes_of(entries)
}

/// Secret: [`secret_hash`] and its key digests, as [`configmap_hashes`].
pub fn secret_hashes<'a>(data: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> (ContentHash, KeyDigests) {
    hashes_of(data.into_iter().map(|(k, v)| (k, entry(k, v))).collect())
}

fn hashes_of(entries: Vec<(&str, Vec<u8>)>) -> (ContentHash, KeyDigests) {
    if entries.len() > MAX_KEY_DIGESTS {
        // Too many keys to keep a digest of each (bounded index memory): the whole hash only.
        let keys = entries.len();
        return (hash_entries(entries.into_iter().map(|(_, e)| e).collect()), KeyDigests::omitted(keys));
    }
    let digests: Vec<(Box<str>, ContentHash)> = entries.iter().map(|(k, e)| ((*k).into(), sha1(e))).collect();
    let hash = match digests.as_slice() {
        // One entry is hashed alone, nothing joined: the whole hash is its digest.
        [(_, only)] => *only,
        _ => hash_entries(entries.into_iter().map(|(_, e)| e).collect()),
    };
    (hash, KeyDigests::new(digests))
}

/// SecretProviderClassPodStatus: `ID=Version` per `status.objects[]`, plus
/// `SecretProviderClassName=<name>`.
pub fn spc_pod_status_hash<'a>(
    class_name: &str,
    objects: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> ContentHash {
    let mut entries: Vec<Vec<u8>> = objects.into_iter().map(|(id, v)| entry(id, v.as_bytes())).collect();
    entries.push(entry("SecretProviderClassName", class_name.as_bytes()));
    hash_entries(entries)
}

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_from_compat() {
        let cases: &[(&str, ContentHash, &str)] = &[
            ("plain sha1", sha1(b"www.stakater.com"), "abd4ed82fb04548388a6cf3c339fd9dc84d275df"),
            (
                "configmap test.url",
                configmap_hash([("test.url", "www.stakater.com")], []),
                "3c9a892aeaedc759abc3df9884a37b8be5680382",
            ),
            ("empty configmap", configmap_hash([], []), "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
            ("empty secret", secret_hash([]), "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
            (
                "delete marker",
                sha1(b"__RELOADER_EMPTY_DELETE_MARKER__"),
                "aae45badef99284e4dae01d6046154ea9d99532f",
            ),
            ("delete marker const", DELETE_MARKER_HASH, "aae45badef99284e4dae01d6046154ea9d99532f"),
        ];
        for (what, got, want) in cases {
            assert_eq!(got.to_hex(), *want, "{what}");
        }
    }

    #[test]
    fn entries_are_sorted_and_joined() {
        let a = configmap_hash([("b", "2"), ("a", "1")], []);
        assert_eq!(a, sha1(b"a=1;b=2"));
        let bin = configmap_hash([("a", "1")], [("bin", &[0xffu8, 0x00][..])]);
        assert_eq!(bin, sha1(b"a=1;bin=/wA="));
        assert_eq!(secret_hash([("password", &b"hunter2"[..])]), sha1(b"password=hunter2"));
        assert_eq!(
            spc_pod_status_hash("vault", [("secret/db", "v2"), ("secret/api", "v1")]),
            sha1(b"SecretProviderClassName=vault;secret/api=v1;secret/db=v2")
        );
    }

    #[test]
    fn a_secret_value_is_hashed_as_raw_bytes_not_base64() {
        assert_ne!(secret_hash([("k", &b"v"[..])]), configmap_hash([], [("k", &b"v"[..])]));
    }
}
