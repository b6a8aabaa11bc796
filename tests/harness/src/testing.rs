//! What a test needs around the plane: the shared instance, a namespace of its own, and the
//! components' logs when it fails.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Config, Resource};

use crate::process::tail;
use crate::{ControlPlane, PlaneError, PlaneOptions};

/// Lines of each component's log printed when a test fails.
pub const LOG_TAIL_LINES: usize = 40;

pub(crate) async fn shared_plane() -> &'static ControlPlane {
    static SHARED: tokio::sync::OnceCell<Result<ControlPlane, String>> = tokio::sync::OnceCell::const_new();
    let started = SHARED
        .get_or_init(|| async {
            ControlPlane::start(PlaneOptions::default()).await.map_err(|error| error.to_string())
        })
        .await;
    match started {
        Ok(plane) => plane,
        Err(reason) => panic!("the local control plane did not start: {reason}"),
    }
}

impl ControlPlane {
    /// A new namespace named after the calling test, deleted (best effort) when dropped.
    ///
    /// # Panics
    ///
    /// When the namespace cannot be created.
    pub async fn namespace(&self) -> TestNamespace {
        self.try_namespace().await.expect("creating a test namespace")
    }

    /// [`Self::namespace`], returning the error.
    pub async fn try_namespace(&self) -> Result<TestNamespace, PlaneError> {
        static CREATED: AtomicUsize = AtomicUsize::new(0);
        let name = namespace_name(std::thread::current().name(), CREATED.fetch_add(1, Ordering::Relaxed));
        let mut namespace = Namespace::default();
        namespace.meta_mut().name = Some(name.clone());
        Api::<Namespace>::all(self.client()).create(&PostParams::default(), &namespace).await?;
        Ok(TestNamespace { name, admin: self.admin_config().clone() })
    }

    /// A guard that prints the end of each component's log if the test panics while it lives.
    pub fn dump_logs_on_panic(&self) -> PanicLogDump {
        PanicLogDump { logs: self.logs() }
    }

    /// Prints the last `lines` lines of each component's log to stderr.
    pub fn print_log_tails(&self, lines: usize) {
        print_tails(&self.logs(), lines);
    }
}

fn print_tails(logs: &[(String, PathBuf)], lines: usize) {
    for (component, path) in logs {
        eprintln!("----- last {lines} lines of {component} ({}) -----", path.display());
        match tail(path, lines) {
            Ok(tail) => tail.iter().for_each(|line| eprintln!("{line}")),
            Err(error) => eprintln!("(cannot read it: {error})"),
        }
    }
}

/// A namespace for one test. Dropping it deletes the namespace, best effort.
#[derive(Debug)]
pub struct TestNamespace {
    name: String,
    admin: Config,
}

impl TestNamespace {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// An [`Api`] for namespaced resources of kind `K` in this namespace.
    pub fn api<K>(&self, client: &Client) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(client.clone(), &self.name)
    }
}

impl std::fmt::Display for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        // Drop cannot await, and the test's runtime may be shutting down: delete from a thread
        // with a runtime of its own. The namespace controller finishes the job asynchronously.
        let name = std::mem::take(&mut self.name);
        let admin = self.admin.clone();
        let deleted = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            runtime.block_on(async move {
                let client = Client::try_from(admin).ok()?;
                Api::<Namespace>::all(client).delete(&name, &DeleteParams::background()).await.ok()
            })
        });
        let _ = deleted.join();
    }
}

/// Prints the end of each component's log when dropped during a panic (see
/// [`ControlPlane::dump_logs_on_panic`]). Output goes to stderr, which the test harness shows
/// for failed tests.
#[derive(Debug)]
#[must_use = "the logs are printed when this guard is dropped during a panic"]
pub struct PanicLogDump {
    logs: Vec<(String, PathBuf)>,
}

impl Drop for PanicLogDump {
    fn drop(&mut self) {
        if std::thread::panicking() {
            print_tails(&self.logs, LOG_TAIL_LINES);
        }
    }
}

/// A DNS label made from the test's thread name (the test's path) and a counter.
fn namespace_name(thread_name: Option<&str>, counter: usize) -> String {
    const MAX_BASE: usize = 50;
    let test = thread_name.and_then(|name| name.rsplit("::").next()).unwrap_or("test");
    let mut base = String::with_capacity(MAX_BASE);
    for character in test.chars() {
        let character = if character.is_ascii_alphanumeric() { character.to_ascii_lowercase() } else { '-' };
        if !(character == '-' && (base.is_empty() || base.ends_with('-'))) {
            base.push(character);
        }
        if base.len() == MAX_BASE {
            break;
        }
    }
    let base = base.trim_end_matches('-');
    let base = if base.is_empty() || base == "main" { "test" } else { base };
    format!("{base}-{counter}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_are_dns_labels_after_the_test() {
        assert_eq!(namespace_name(Some("lease_update_conflicts"), 3), "lease-update-conflicts-3");
        assert_eq!(namespace_name(Some("module::Nested__Name"), 0), "nested-name-0");
        assert_eq!(namespace_name(None, 7), "test-7");
        assert_eq!(namespace_name(Some("main"), 1), "test-1");
        let long = namespace_name(Some(&"a".repeat(100)), 12);
        assert!(long.len() <= 63, "{long}");
        assert!(long.ends_with("-12"));
    }
}
