//! `reloader sidecar`: being written.
