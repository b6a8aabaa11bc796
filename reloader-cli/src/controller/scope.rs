//! Which namespaces the controller acts in: `--namespaces`, `--namespaces-to-ignore` and the
//! live result of `--namespace-selector` (labels can change at runtime).

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use reloader_core::options::{NamespaceScope, Options};

#[derive(Clone)]
pub struct ScopeFilter {
    ignored: Arc<HashSet<String>>,
    /// `Some` when a namespace selector is set: the namespaces whose labels match it now.
    selected: Option<Arc<RwLock<HashSet<String>>>>,
}

impl ScopeFilter {
    pub fn new(options: &Options) -> Self {
        match &options.namespace_scope {
            NamespaceScope::All { ignore, selector } => ScopeFilter {
                ignored: Arc::new(ignore.iter().cloned().collect()),
                selected: selector.as_ref().map(|_| Arc::default()),
            },
            // Watches are namespaced already; nothing to filter.
            NamespaceScope::Only(_) => ScopeFilter { ignored: Arc::default(), selected: None },
        }
    }

    pub fn contains(&self, namespace: &str) -> bool {
        if self.ignored.contains(namespace) {
            return false;
        }
        match &self.selected {
            Some(selected) => selected.read().expect("scope lock").contains(namespace),
            None => true,
        }
    }

    /// Records whether a namespace matches the selector now; returns true if that changed.
    pub fn set_selected(&self, namespace: &str, matches: bool) -> bool {
        let Some(selected) = &self.selected else { return false };
        let mut set = selected.write().expect("scope lock");
        if matches { set.insert(namespace.to_string()) } else { set.remove(namespace) }
    }

    pub fn uses_selector(&self) -> bool {
        self.selected.is_some()
    }
}
