//! Fixtures beyond [`crate::fixtures`], for the kinds, scope, behaviour, secrecy and bad-input
//! tests: local HTTP endpoints that record (or swallow) what reloader sends, a counting TCP proxy
//! and a slow, flaky HTTP proxy in front of kube-apiserver, the namespaced RBAC a single-namespace reloader needs, the
//! admission webhook's test certificates, and small waits on logs, Jobs and unique values.
//!
//! ```no_run
//! # async fn example(plane: &reloader_harness::ControlPlane) -> Result<(), reloader_harness::PlaneError> {
//! use reloader_tests::fixtures_extra::HttpRecorder;
//! let hook = HttpRecorder::start().await;
//! hook.fail_next(2, 500);
//! let url = hook.url("/hook");
//! # let _ = url; Ok(()) }
//! ```

mod flaky_proxy;
mod http;
mod proxy;
mod rbac;
mod support;
mod webhook;

pub use flaky_proxy::{Exchange, FlakyProxy, Outcome};
pub use http::{BlackHole, HttpRecorder, RecordedRequest};
pub use proxy::ApiProxy;
pub use rbac::grant_namespaced_reloader_role;
pub use support::{
    ANNOTATION_PAUSE_PERIOD, ANNOTATION_PAUSED_AT, ANNOTATION_ROLLOUT_STRATEGY, Exited, jobs_owned_by,
    label_namespace, rfc3339_seconds, run_reloader_to_exit, unique_token, wait_for_log,
};
pub use webhook::{ApiServerClientCertificate, WebhookCertificates};
