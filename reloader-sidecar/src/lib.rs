//! `reloader sidecar`: copies named ConfigMaps and Secrets into a directory, swapped atomically
//! in the kubelet's `..data` layout, and tells the application after every content change (HTTP,
//! a signal, or a touched file). `--init` writes once and exits, for an initContainer.
//!
//! Content, not events, drives it: the merged files are fingerprinted, and only a fingerprint
//! different from the directory's current one is written and notified. So metadata-only updates,
//! re-lists after a watch error and a sidecar starting after its init container (same content on
//! disk) write and notify nothing, while the first write into an empty directory notifies.
//! A deleted object keeps its files, like a kubelet-mounted volume, until it is re-created.
//!
//! - [`args`]: flags and the morecontainers environment variables.
//! - `watch`: one watch per object; `engine`: merge, compare, write; `writer`: the atomic swap.
//! - `notify`: the notifications; `metrics`: /metrics, /live, /readyz; `run`: start to stop.
//!
//! All but [`watch_error`] (which the controller's watches use, on every platform) is Unix only:
//! symlinks, file modes and signals, for the application beside it in its pod.

#[cfg(unix)]
mod args;
#[cfg(unix)]
mod backoff;
#[cfg(unix)]
mod engine;
#[cfg(unix)]
mod metrics;
#[cfg(unix)]
mod notify;
#[cfg(unix)]
mod payload;
#[cfg(unix)]
mod run;
#[cfg(unix)]
mod watch;
pub mod watch_error;
#[cfg(unix)]
mod writer;

#[cfg(unix)]
pub use args::SidecarArgs;
#[cfg(unix)]
pub use run::run;
