//! Property tests of the content hashes: no panic on any data, the same digest as a plain model
//! of Stakater's `GetSHAfrom*` (sort `k=v`, join with `;`, SHA-1), independent of the order
//! entries arrive in, and changed by any change of a value.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use proptest::prelude::*;
use sha1::{Digest, Sha1};

use super::*;

/// Stakater's shape, spelled out: `key=value` strings, sorted bytewise, joined with `;`.
fn model(entries: &[(Vec<u8>, Vec<u8>)]) -> String {
    let mut joined: Vec<Vec<u8>> = entries.iter().map(|(k, v)| [&k[..], b"=", &v[..]].concat()).collect();
    joined.sort();
    hex::encode(Sha1::digest(joined.join(&b";"[..])))
}

fn as_bytes(map: &BTreeMap<String, String>) -> Vec<(Vec<u8>, Vec<u8>)> {
    map.iter().map(|(k, v)| (k.clone().into_bytes(), v.clone().into_bytes())).collect()
}

/// ConfigMap and Secret keys: what the API server accepts.
fn key() -> impl Strategy<Value = String> {
    "[-._a-zA-Z0-9]{1,20}"
}

/// Values without `;`: with it, Stakater's unescaped join can make two maps read alike (see
/// `a_value_with_a_separator_collides_as_in_stakater`), so "any change shows" holds without it.
fn plain_value() -> impl Strategy<Value = String> {
    "[^;]{0,30}"
}

fn data() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(key(), any::<String>(), 0..8)
}

proptest! {
    #[test]
    fn any_data_hashes_as_stakater_hashes_it(
        data in prop::collection::vec((any::<String>(), any::<String>()), 0..8),
        binary in prop::collection::vec((any::<String>(), any::<Vec<u8>>()), 0..4),
        secret in prop::collection::vec((any::<String>(), any::<Vec<u8>>()), 0..8),
    ) {
        let configmap = configmap_hash(
            data.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            binary.iter().map(|(k, v)| (k.as_str(), v.as_slice())),
        );
        let mut expected: Vec<(Vec<u8>, Vec<u8>)> =
            data.iter().map(|(k, v)| (k.clone().into_bytes(), v.clone().into_bytes())).collect();
        expected.extend(binary.iter().map(|(k, v)| (k.clone().into_bytes(), STANDARD.encode(v).into_bytes())));
        prop_assert_eq!(configmap.to_hex(), model(&expected));

        let hashed = secret_hash(secret.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
        let expected: Vec<_> = secret.iter().map(|(k, v)| (k.clone().into_bytes(), v.clone())).collect();
        prop_assert_eq!(hashed.to_hex(), model(&expected));

        // The one-pass form used on every listed object: the same hash, and a digest per entry.
        let (one_pass, digests) = configmap_hashes(
            data.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            binary.iter().map(|(k, v)| (k.as_str(), v.as_slice())),
        );
        prop_assert_eq!(one_pass, configmap);
        prop_assert_eq!(digests.keys().count(), data.len() + binary.len());
        let (one_pass, digests) = secret_hashes(secret.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
        prop_assert_eq!(one_pass, hashed);
        let each = secret.iter().map(|(k, v)| (k.as_str().into(), sha1(&entry(k, v)))).collect();
        prop_assert_eq!(digests, KeyDigests::new(each));
    }

    #[test]
    fn spc_status_hashes_as_stakater_hashes_it(
        class in any::<String>(),
        objects in prop::collection::vec((any::<String>(), any::<String>()), 0..6),
    ) {
        let hashed = spc_pod_status_hash(&class, objects.iter().map(|(id, v)| (id.as_str(), v.as_str())));
        let mut expected: Vec<_> =
            objects.iter().map(|(id, v)| (id.clone().into_bytes(), v.clone().into_bytes())).collect();
        expected.push((b"SecretProviderClassName".to_vec(), class.into_bytes()));
        prop_assert_eq!(hashed.to_hex(), model(&expected));
    }

    #[test]
    fn the_order_entries_arrive_in_does_not_matter(
        (entries, shuffled) in data()
            .prop_map(|map| map.into_iter().collect::<Vec<_>>())
            .prop_flat_map(|entries| (Just(entries.clone()), Just(entries).prop_shuffle())),
    ) {
        let (a, b) = (&entries, &shuffled);
        prop_assert_eq!(
            configmap_hash(a.iter().map(|(k, v)| (k.as_str(), v.as_str())), []),
            configmap_hash(b.iter().map(|(k, v)| (k.as_str(), v.as_str())), [])
        );
        prop_assert_eq!(
            secret_hash(a.iter().map(|(k, v)| (k.as_str(), v.as_bytes()))),
            secret_hash(b.iter().map(|(k, v)| (k.as_str(), v.as_bytes())))
        );
    }

    #[test]
    fn changing_any_one_value_changes_the_hash(
        map in prop::collection::btree_map(key(), plain_value(), 1..8),
        pick in any::<prop::sample::Index>(),
        new_value in plain_value(),
    ) {
        let changed_key = pick.get(&map.keys().cloned().collect::<Vec<_>>()).clone();
        if map[&changed_key] == new_value {
            return Ok(()); // Not a change (rare; no reject, so a million cases stay within proptest's reject budget).
        }
        let mut changed = map.clone();
        changed.insert(changed_key.clone(), new_value);
        let hash = |m: &BTreeMap<String, String>| configmap_hash(m.iter().map(|(k, v)| (k.as_str(), v.as_str())), []);
        prop_assert_ne!(hash(&map), hash(&changed), "changing {}", changed_key);
        let secret = |m: &BTreeMap<String, String>| secret_hash(m.iter().map(|(k, v)| (k.as_str(), v.as_bytes())));
        prop_assert_ne!(secret(&map), secret(&changed));
        prop_assert_eq!(hash(&map).to_hex(), model(&as_bytes(&map)));
    }

    /// A Secret and a ConfigMap with the same text data hash alike (Secret values are hashed as
    /// their decoded bytes), and `binaryData` is hashed as its base64 text.
    #[test]
    fn secret_bytes_and_configmap_base64_are_consistent(map in data(), bytes in any::<Vec<u8>>()) {
        let text = configmap_hash(map.iter().map(|(k, v)| (k.as_str(), v.as_str())), []);
        let secret = secret_hash(map.iter().map(|(k, v)| (k.as_str(), v.as_bytes())));
        prop_assert_eq!(text, secret);
        let encoded = STANDARD.encode(&bytes);
        prop_assert_eq!(
            configmap_hash([], [("bin", bytes.as_slice())]),
            configmap_hash([("bin", encoded.as_str())], [])
        );
    }

    /// The hand-written vector (`test.url`) keeps its digest, and any entry added beside it
    /// changes the digest.
    #[test]
    fn the_table_vector_holds_and_any_extra_entry_changes_it(extra in data()) {
        let vector = ("test.url", "www.stakater.com");
        let alone = configmap_hash([vector], []);
        prop_assert_eq!(alone.to_hex(), "3c9a892aeaedc759abc3df9884a37b8be5680382");
        let mut with_extra: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        with_extra.push(vector);
        prop_assert_eq!(configmap_hash(with_extra.iter().copied(), []) == alone, extra.is_empty());
    }
}

#[test]
fn a_value_with_a_separator_collides_as_in_stakater() {
    // Stakater joins without escaping; the marker must be the one it would write, collision and all.
    let one_key = configmap_hash([("a", "1;b=2")], []);
    let two_keys = configmap_hash([("a", "1"), ("b", "2")], []);
    assert_eq!(one_key, two_keys);
}
