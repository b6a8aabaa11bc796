//! The reloader binary's library: everything that talks to a cluster, wired by `main.rs`.

pub mod sidecar;
