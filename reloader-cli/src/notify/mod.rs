//! Telling people and systems what happened: Kubernetes Events on workloads, the
//! `--webhook-url` POSTs that replace reloads, and alerts after each reload (`ALERT_*`).

pub(crate) mod alerts;
pub(crate) mod events;
pub(crate) mod webhook;
