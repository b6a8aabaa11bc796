use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::KeyToPath;

use super::*;
use crate::decide::{
    DecideOptions, ResourceEventKind, SkipReason, ViewMarkers, annotation_problems, plan, plan_update,
};
use crate::hash::{configmap_hashes, secret_hashes, sha1};
use crate::markers::MarkerAction;
use crate::model::{RefVia, ReloadStrategy};
use crate::testkit::*;

const CM_KEYS: &str = "reloader.stakater.com/configmap-keys";
const SECRET_KEYS: &str = "reloader.stakater.com/secret-keys";

fn exact(k: &str) -> KeyPattern {
    KeyPattern::Exact(k.into())
}

fn glob(k: &str) -> KeyPattern {
    KeyPattern::Glob(k.into())
}

#[test]
fn annotation_values_parse() {
    let lists = |entries: &[(&str, Vec<KeyPattern>)]| {
        Ok(KeyFilter::Lists(entries.iter().map(|(n, p)| (Box::<str>::from(*n), p.clone())).collect()))
    };
    let cases: Vec<(&str, Result<KeyFilter, ()>)> = vec![
        ("referenced", Ok(KeyFilter::Referenced)),
        ("  referenced ", Ok(KeyFilter::Referenced)),
        ("app=db.url", lists(&[("app", vec![exact("db.url")])])),
        (
            "app-config=db.url,feature.*;other=key",
            lists(&[("app-config", vec![exact("db.url"), glob("feature.*")]), ("other", vec![exact("key")])]),
        ),
        (" app = a , b? ; ", lists(&[("app", vec![exact("a"), glob("b?")])])),
        ("app=a;;app=b", lists(&[("app", vec![exact("a"), exact("b")])])),
        ("app=a,,b", lists(&[("app", vec![exact("a"), exact("b")])])),
        ("a.b-c=K_1", lists(&[("a.b-c", vec![exact("K_1")])])),
        ("", Err(())),
        ("  ;  ", Err(())),
        ("app", Err(())),
        ("app=", Err(())),
        ("app= , ", Err(())),
        ("=key", Err(())),
        ("App=key", Err(())),
        ("app=[ab]", Err(())),
        ("app=a/b", Err(())),
        ("app=a b", Err(())),
        ("app=a=b", Err(())),
        ("Referenced", Err(())),
    ];
    for (value, want) in cases {
        let got = parse_key_filter(value).map_err(|_| ());
        assert_eq!(got, want, "{value:?}");
    }
}

#[test]
fn globs_match_keys() {
    let cases = [
        ("feature.*", "feature.a", true),
        ("feature.*", "feature.", true),
        ("feature.*", "feature", false),
        ("*.url", "db.url", true),
        ("*.url", "db.urls", false),
        ("a?c", "abc", true),
        ("a?c", "ac", false),
        ("*", "", true),
        ("*a*b*", "xxaxxbxx", true),
        ("*a*b*", "xxbxxaxx", false),
        ("a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false),
        ("exact", "exact", true),
        ("exact", "exactly", false),
    ];
    for (pattern, key, want) in cases {
        assert_eq!(KeyPattern::parse(pattern).unwrap().matches(key), want, "{pattern} ~ {key}");
    }
}

fn cm_with(data: &[(&str, &str)]) -> ResourceView {
    let mut view = cm("app");
    (view.hash, view.keys) = configmap_hashes(data.iter().copied(), []);
    view
}

/// The keys the selection hashes, and the hash is over exactly those entries.
#[test]
fn selection_per_annotation_form() {
    let data = [("db.url", "u"), ("feature.a", "1"), ("feature.b", "2"), ("key", "k"), ("other", "o")];
    let resource = cm_with(&data);
    let with_items = |mut w: TestWorkload, keys: &[&str]| {
        let volume =
            w.deployment.spec.as_mut().unwrap().template.spec.as_mut().unwrap().volumes.as_mut().unwrap();
        volume[0].config_map.as_mut().unwrap().items = Some(
            keys.iter().map(|k| KeyToPath { key: (*k).into(), path: (*k).into(), mode: None }).collect(),
        );
        w
    };
    let base = || deployment("web").annotate(AUTO, "true");
    let cases: Vec<(&str, TestWorkload, Option<Vec<&str>>)> = vec![
        ("no annotation", base().uses_cm("app", "app", RefVia::EnvFrom), None),
        (
            "exact",
            base().annotate(CM_KEYS, "app=db.url").uses_cm("app", "app", RefVia::EnvFrom),
            Some(vec!["db.url"]),
        ),
        (
            "exact and glob",
            base().annotate(CM_KEYS, "app=db.url,feature.*").uses_cm("app", "app", RefVia::EnvFrom),
            Some(vec!["db.url", "feature.a", "feature.b"]),
        ),
        (
            "another resource named",
            base().annotate(CM_KEYS, "other=x").uses_cm("app", "app", RefVia::EnvFrom),
            None,
        ),
        ("invalid", base().annotate(CM_KEYS, "app=").uses_cm("app", "app", RefVia::EnvFrom), None),
        (
            "secret filter only",
            base().annotate(SECRET_KEYS, "app=key").uses_cm("app", "app", RefVia::EnvFrom),
            None,
        ),
        (
            "on the pod template",
            base().annotate_template(CM_KEYS, "app=key").uses_cm("app", "app", RefVia::EnvFrom),
            Some(vec!["key"]),
        ),
        (
            "no key matches",
            base().annotate(CM_KEYS, "app=nope").uses_cm("app", "app", RefVia::EnvFrom),
            Some(vec![]),
        ),
        (
            "referenced: env valueFrom",
            base().annotate(CM_KEYS, "referenced").uses_cm("app", "app", RefVia::EnvValueFrom),
            Some(vec!["key"]),
        ),
        (
            "referenced: volume items",
            with_items(
                base().annotate(CM_KEYS, "referenced").uses_cm("app", "app", RefVia::Volume),
                &["db.url", "other"],
            ),
            Some(vec!["db.url", "other"]),
        ),
        (
            "referenced: volume items and env valueFrom",
            with_items(
                base().annotate(CM_KEYS, "referenced").uses_cm("app", "app", RefVia::Volume).uses_cm(
                    "app",
                    "app",
                    RefVia::EnvValueFrom,
                ),
                &["db.url"],
            ),
            Some(vec!["db.url", "key"]),
        ),
        (
            "referenced: whole volume",
            base().annotate(CM_KEYS, "referenced").uses_cm("app", "app", RefVia::Volume),
            None,
        ),
        (
            "referenced: envFrom beside a key",
            base().annotate(CM_KEYS, "referenced").uses_cm("app", "app", RefVia::EnvValueFrom).uses_cm(
                "app",
                "app",
                RefVia::EnvFrom,
            ),
            None,
        ),
        ("referenced: not used", base().annotate(CM_KEYS, "referenced"), None),
    ];
    for (what, workload, want) in cases {
        let view = workload.view();
        let selection = key_selection(&view, ResourceKind::ConfigMap, "app");
        let hashed: Vec<&str> = selection.hashed_keys(&resource.keys).collect();
        match want {
            None => {
                assert_eq!(selection, KeySelection::Whole, "{what}");
                assert_eq!(marker_hash(&view, &resource), resource.hash, "{what}: Stakater's hash");
            }
            Some(keys) => {
                assert_eq!(hashed, keys, "{what}");
                let mut hexes: Vec<String> = data
                    .iter()
                    .filter(|(k, _)| keys.contains(k))
                    .map(|(k, v)| sha1(format!("{k}={v}").as_bytes()).to_hex())
                    .collect();
                hexes.sort();
                assert_eq!(marker_hash(&view, &resource), sha1(hexes.join(";").as_bytes()), "{what}");
            }
        }
    }
}

#[test]
fn key_digests_hash_what_the_whole_hash_reads() {
    let (_, cm) = configmap_hashes([("a", "1")], [("bin", &[0xffu8, 0x00][..])]);
    assert_eq!(
        cm.entries().iter().map(|(k, d)| (&**k, *d)).collect::<Vec<_>>(),
        [("a", sha1(b"a=1")), ("bin", sha1(b"bin=/wA="))]
    );
    let (_, secret) = secret_hashes([("password", &b"hunter2"[..])]);
    assert_eq!(secret.entries()[0].1, sha1(b"password=hunter2"));
}

/// A tiny xorshift generator: random enough to vary values, no dependency.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn bytes(&mut self) -> Vec<u8> {
        let len = (self.next() % 40) as usize;
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// The hidden-data check: whatever the unlisted keys hold (values, added, removed), the
/// filtered hash stays the same; a listed key's value always changes it.
#[test]
fn the_filtered_hash_never_depends_on_an_unlisted_key() {
    let seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    let mut random = Random(seed);
    let workload = deployment("web")
        .annotate(AUTO, "true")
        .annotate(SECRET_KEYS, "app=password,tls.*")
        .uses_secret("app", "app", RefVia::EnvFrom)
        .view();
    let listed: [(&str, &[u8]); 3] = [("password", b"hunter2"), ("tls.crt", b"crt"), ("tls.key", b"key")];
    let secret_view = |data: &BTreeMap<String, Vec<u8>>| {
        let entries = || data.iter().map(|(k, v)| (k.as_str(), v.as_slice()));
        let mut view = secret("app");
        (view.hash, view.keys) = secret_hashes(entries());
        view
    };
    let base: BTreeMap<String, Vec<u8>> = listed.iter().map(|(k, v)| (k.to_string(), v.to_vec())).collect();
    let reference = marker_hash(&workload, &secret_view(&base));
    for round in 0..500 {
        let mut data = base.clone();
        for i in 0..(random.next() % 6) {
            let name =
                ["user", "api.token", "tls", "password2", "xpassword", "ca.crt"][(i as usize + round) % 6];
            data.insert(name.to_owned(), random.bytes());
        }
        let view = secret_view(&data);
        assert_eq!(marker_hash(&workload, &view), reference, "seed {seed}, round {round}: {:?}", data.keys());
        let (listed_key, _) = listed[round % 3];
        let mut changed = data.clone();
        changed.get_mut(listed_key).unwrap().push(b'!');
        assert_ne!(marker_hash(&workload, &secret_view(&changed)), reference, "seed {seed}, round {round}");
    }
}

/// Both strategies record the same filtered hash; a change to an unlisted key plans nothing,
/// even when the annotation marker records another resource.
#[test]
fn both_strategies_record_the_filtered_hash() {
    let workload = deployment("web")
        .annotate(CM_KEYS, "app=db.url")
        .annotate(AUTO, "true")
        .uses_cm("app", "app", RefVia::EnvFrom)
        .view();
    let before = cm_with(&[("db.url", "u"), ("noise", "1")]);
    let after = cm_with(&[("db.url", "u"), ("noise", "2")]);
    let changed = cm_with(&[("db.url", "v"), ("noise", "2")]);
    for strategy in [ReloadStrategy::EnvVars, ReloadStrategy::Annotations] {
        let opts = DecideOptions { strategy, ..Default::default() };
        let change = plan(&workload, &changed, ResourceEventKind::Updated, &opts).unwrap();
        assert_eq!(change.action, MarkerAction::Set(marker_hash(&workload, &changed)), "{strategy:?}");
        assert_ne!(marker_hash(&workload, &changed), changed.hash, "{strategy:?}");
        let after_keys = |resource: &ResourceView, previous: &ResourceView| {
            let event = ResourceEventKind::Updated;
            plan_update(&workload, resource, Some(&previous.keys), event, &opts, ViewMarkers::Settled)
                .map(|planned| planned.change)
        };
        let unlisted = after_keys(&after, &before);
        assert_eq!(unlisted, Err(SkipReason::AlreadyCurrent), "{strategy:?}");
        let listed = after_keys(&changed, &after);
        assert!(listed.is_ok(), "{strategy:?}");
    }
}

#[test]
fn invalid_filters_are_annotation_problems() {
    let cases = [
        (CM_KEYS, "", true),
        (CM_KEYS, "app=[", true),
        (SECRET_KEYS, "app=", true),
        (CM_KEYS, "app=a*", false),
        (SECRET_KEYS, "referenced", false),
    ];
    for (key, value, invalid) in cases {
        let view = deployment("web").annotate(key, value).view();
        let problems = annotation_problems(&view, &Default::default());
        let found = problems
            .iter()
            .any(|p| p.to_string().contains(key) && p.to_string().contains("every key is hashed"));
        assert_eq!(found, invalid, "{key}={value:?}: {problems:?}");
    }
}

/// docs/beyond-stakater.md §10, bounded memory: an object of more than `MAX_KEY_DIGESTS` keys
/// keeps no per-key digests, and a filter on it hashes it whole, so a change of any of its keys
/// reloads (never a missed reload; an unlisted key's change is one reload too many). At the limit
/// the filter works as everywhere else; crossing the limit either way reloads once.
#[test]
fn objects_with_too_many_keys_are_hashed_whole() {
    use crate::model::MAX_KEY_DIGESTS;
    let workload = deployment("web")
        .annotate(CM_KEYS, "app=db.url")
        .annotate(AUTO, "true")
        .uses_cm("app", "app", RefVia::EnvFrom)
        .view();
    // `keys` keys: db.url, then noise keys, one of which holds `noise`.
    let object = |keys: usize, url: &str, noise: &str| {
        let names: Vec<String> = (1..keys).map(|i| format!("k{i}")).collect();
        let mut data: Vec<(&str, &str)> = vec![("db.url", url)];
        data.extend(names.iter().enumerate().map(|(i, k)| (k.as_str(), if i == 0 { noise } else { "v" })));
        cm_with(&data)
    };
    let opts = DecideOptions::default();
    let update = |now: &ResourceView, before: &ResourceView| {
        let event = ResourceEventKind::Updated;
        plan_update(&workload, now, Some(&before.keys), event, &opts, ViewMarkers::Settled)
            .map(|planned| planned.change.action)
    };
    struct Case {
        name: &'static str,
        before: ResourceView,
        now: ResourceView,
        /// `Some(hash)`: reloads recording it; `None`: skipped as already current.
        records: Option<ContentHash>,
    }
    let (wide, at_limit) = (MAX_KEY_DIGESTS + 1, MAX_KEY_DIGESTS);
    let cases = [
        Case {
            name: "over the limit, an unlisted key changes: reloads with the whole hash",
            before: object(wide, "u", "1"),
            now: object(wide, "u", "2"),
            records: Some(object(wide, "u", "2").hash),
        },
        Case {
            name: "over the limit, the listed key changes: reloads with the whole hash",
            before: object(wide, "u", "1"),
            now: object(wide, "v", "1"),
            records: Some(object(wide, "v", "1").hash),
        },
        Case {
            name: "at the limit, an unlisted key changes: nothing to do",
            before: object(at_limit, "u", "1"),
            now: object(at_limit, "u", "2"),
            records: None,
        },
        Case {
            name: "at the limit, the listed key changes: reloads with the filtered hash",
            before: object(at_limit, "u", "1"),
            now: object(at_limit, "v", "1"),
            records: Some(sha1(sha1(b"db.url=v").to_hex().as_bytes())),
        },
        Case {
            name: "shrinking below the limit: the filtered hash replaces the whole one",
            before: object(wide, "u", "1"),
            now: object(at_limit, "u", "1"),
            records: Some(sha1(sha1(b"db.url=u").to_hex().as_bytes())),
        },
        Case {
            name: "growing over the limit: the whole hash replaces the filtered one",
            before: object(at_limit, "u", "1"),
            now: object(wide, "u", "1"),
            records: Some(object(wide, "u", "1").hash),
        },
    ];
    for case in cases {
        let want = case.records.map(MarkerAction::Set).ok_or(SkipReason::AlreadyCurrent);
        assert_eq!(update(&case.now, &case.before), want, "{}", case.name);
        if let Some(hash) = case.records {
            assert_eq!(marker_hash(&workload, &case.now), hash, "{}", case.name);
        }
    }
    assert!(object(at_limit, "u", "1").keys.kept());
    let wide = object(wide, "u", "1");
    assert!(!wide.keys.kept() && wide.keys.keys().next().is_none());
    // Still Stakater's whole hash.
    let data = wide_data(MAX_KEY_DIGESTS + 1);
    assert_eq!(
        wide.hash,
        crate::hash::configmap_hash(data.iter().map(|(k, v)| (k.as_str(), v.as_str())), [])
    );
}

/// The data `objects_with_too_many_keys_are_hashed_whole` builds with url "u" and noise "1".
fn wide_data(keys: usize) -> Vec<(String, String)> {
    let mut data = vec![("db.url".to_owned(), "u".to_owned())];
    data.extend((1..keys).map(|i| (format!("k{i}"), if i == 1 { "1" } else { "v" }.to_owned())));
    data
}

/// Omitting the digests costs nothing in the view: the same two words either way.
#[test]
fn key_digests_are_two_words() {
    assert_eq!(size_of::<KeyDigests>(), 2 * size_of::<usize>());
}
