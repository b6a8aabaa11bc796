//! Which namespaces the controller acts in: `--namespaces`, `--namespaces-to-ignore` and the
//! live result of `--namespace-selector` (labels can change at runtime).

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use reloader_core::options::NamespaceScope;

#[derive(Clone, Debug)]
pub(crate) struct ScopeFilter {
    /// `Some` with `--namespaces`: the only namespaces in scope. The watches are namespaced
    /// already; the admission webhook, which anyone may ask about any namespace, is not.
    only: Option<Arc<HashSet<String>>>,
    ignored: Arc<HashSet<String>>,
    /// `Some` when a namespace selector is set: the namespaces whose labels match it now.
    selected: Option<Arc<RwLock<HashSet<String>>>>,
}

impl ScopeFilter {
    pub(crate) fn new(scope: &NamespaceScope) -> Self {
        match scope {
            NamespaceScope::All { ignore, selector } => ScopeFilter {
                only: None,
                ignored: Arc::new(ignore.iter().cloned().collect()),
                selected: selector.as_ref().map(|_| Arc::default()),
            },
            NamespaceScope::Only(namespaces) => ScopeFilter {
                only: Some(Arc::new(namespaces.iter().cloned().collect())),
                ignored: Arc::default(),
                selected: None,
            },
        }
    }

    pub(crate) fn contains(&self, namespace: &str) -> bool {
        if self.only.as_ref().is_some_and(|only| !only.contains(namespace))
            || self.ignored.contains(namespace)
        {
            return false;
        }
        match &self.selected {
            Some(selected) => selected.read().expect("scope lock").contains(namespace),
            None => true,
        }
    }

    /// Records whether a namespace matches the selector now; returns true if that changed.
    pub(crate) fn set_selected(&self, namespace: &str, matches: bool) -> bool {
        let Some(selected) = &self.selected else { return false };
        let mut set = selected.write().expect("scope lock");
        if matches { set.insert(namespace.to_string()) } else { set.remove(namespace) }
    }

    /// The namespaces the selector matches now (none without a selector).
    pub(crate) fn selected_namespaces(&self) -> Vec<String> {
        self.selected
            .as_ref()
            .map(|s| s.read().expect("scope lock").iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use reloader_core::selector::LabelSelector;

    use super::*;

    fn all(ignore: &[&str], selector: bool) -> NamespaceScope {
        NamespaceScope::All {
            ignore: ignore.iter().map(|s| s.to_string()).collect(),
            selector: selector.then(|| "team=a".parse::<LabelSelector>().unwrap()),
        }
    }

    #[test]
    fn scope_rules() {
        let only = NamespaceScope::Only(vec!["a".into()]);
        // (scope, namespaces selected by labels, namespace asked, in scope?)
        let cases: &[(NamespaceScope, &[&str], &str, bool)] = &[
            (all(&[], false), &[], "anything", true),
            (all(&["kube-system"], false), &[], "kube-system", false),
            (all(&["kube-system"], false), &[], "default", true),
            (all(&[], true), &[], "default", false),
            (all(&[], true), &["default"], "default", true),
            (all(&[], true), &["default"], "other", false),
            (all(&["default"], true), &["default"], "default", false),
            (only.clone(), &[], "a", true),
            // The namespaced watches never deliver other namespaces, but the webhook can be
            // asked about any.
            (only.clone(), &[], "b", false),
            (only, &["b"], "b", false),
        ];
        for (scope, selected, namespace, expected) in cases {
            let filter = ScopeFilter::new(scope);
            for ns in *selected {
                filter.set_selected(ns, true);
            }
            assert_eq!(filter.contains(namespace), *expected, "{scope:?} selected={selected:?} {namespace}");
        }
    }

    #[test]
    fn selection_changes_are_reported_once() {
        let filter = ScopeFilter::new(&all(&[], true));
        assert!(filter.set_selected("a", true));
        assert!(!filter.set_selected("a", true));
        assert_eq!(filter.selected_namespaces(), ["a"]);
        assert!(filter.set_selected("a", false));
        assert!(!filter.set_selected("a", false));
        assert!(
            !ScopeFilter::new(&all(&[], false)).set_selected("a", true),
            "no selector, nothing to record"
        );
    }
}
