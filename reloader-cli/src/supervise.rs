//! Owns every long-running task. A task is critical: if one ends or panics before shutdown,
//! the supervisor logs which one and why, fails `/live`, cancels everything and returns the
//! error, so the process exits non-zero and the kubelet restarts it (docs/behaviour.md).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use anyhow::anyhow;
use futures::FutureExt as _;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

use crate::observe::http::Health;

/// How a task ended.
type Ended = (String, anyhow::Result<()>);

pub(crate) struct Supervisor {
    tasks: JoinSet<Ended>,
    shutdown: CancellationToken,
    health: Health,
}

impl Supervisor {
    pub(crate) fn new(shutdown: CancellationToken, health: Health) -> Self {
        Supervisor { tasks: JoinSet::new(), shutdown, health }
    }

    /// Spawns a task that must run until shutdown. It is dropped when shutdown fires, unless it
    /// is a service that shuts down by itself: see [`Self::spawn_service`].
    pub(crate) fn spawn<F>(&mut self, name: impl Into<String>, task: F)
    where
        F: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let shutdown = self.shutdown.clone();
        self.spawn_service(name, async move {
            tokio::select! {
                () = shutdown.cancelled() => Ok(()),
                result = task => result,
            }
        });
    }

    /// Spawns a task that watches the shutdown token itself (a server finishing its requests).
    pub(crate) fn spawn_service<F>(&mut self, name: impl Into<String>, task: F)
    where
        F: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let name = name.into();
        self.tasks.spawn(async move {
            let result = match AssertUnwindSafe(task).catch_unwind().await {
                Ok(result) => result,
                Err(panic) => Err(anyhow!("panicked: {}", panic_message(&*panic))),
            };
            (name, result)
        });
    }

    /// Waits for shutdown, or for a task to end before it: then reports the failure, fails
    /// `/live`, starts the shutdown and returns the error.
    pub(crate) async fn watch(&mut self) -> anyhow::Result<()> {
        let ended = tokio::select! {
            () = self.shutdown.cancelled() => return Ok(()),
            ended = self.tasks.join_next() => ended,
        };
        let Some(ended) = ended else {
            // Nothing left to supervise: wait for the shutdown.
            self.shutdown.cancelled().await;
            return Ok(());
        };
        let (name, result) = ended.unwrap_or_else(|e| ("a task".into(), Err(e.into())));
        if self.shutdown.is_cancelled() {
            return Ok(());
        }
        let error = match result {
            Ok(()) => anyhow!("{name} ended unexpectedly"),
            Err(e) => e.context(format!("{name} failed")),
        };
        error!(task = %name, error = %format_args!("{error:#}"), "a critical task stopped; exiting so the process is restarted");
        self.health.set_live(false);
        self.shutdown.cancel();
        Err(error)
    }

    /// After shutdown: waits (bounded) for the tasks to finish.
    pub(crate) async fn finish(mut self, within: Duration) {
        let all = async {
            while let Some(ended) = self.tasks.join_next().await {
                if let Ok((name, Err(e))) = ended {
                    warn!(task = %name, error = %format_args!("{e:#}"), "task failed while shutting down");
                }
            }
        };
        if tokio::time::timeout(within, all).await.is_err() {
            warn!(?within, "tasks still running at shutdown; abandoning them");
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn supervised(
        task: impl Future<Output = anyhow::Result<()>> + Send + 'static,
    ) -> (anyhow::Result<()>, Health, bool) {
        let shutdown = CancellationToken::new();
        let health = Health::new();
        let mut supervisor = Supervisor::new(shutdown.clone(), health.clone());
        supervisor.spawn("steady task", std::future::pending());
        supervisor.spawn("ConfigMap watch", task);
        let result = tokio::time::timeout(Duration::from_secs(5), supervisor.watch())
            .await
            .expect("supervisor returned");
        supervisor.finish(Duration::from_secs(1)).await;
        (result, health, shutdown.is_cancelled())
    }

    #[tokio::test]
    async fn a_panicking_task_fails_liveness_and_names_itself() {
        let (result, health, cancelled) = supervised(async {
            tokio::task::yield_now().await;
            panic!("index lock poisoned");
        })
        .await;
        let error = format!("{:#}", result.unwrap_err());
        assert!(error.contains("ConfigMap watch failed") && error.contains("index lock poisoned"), "{error}");
        assert!(!health.is_live());
        assert!(cancelled, "the other tasks are told to stop");
    }

    #[tokio::test]
    async fn a_task_that_ends_or_fails_before_shutdown_is_a_failure() {
        let (result, health, _) = supervised(async { Ok(()) }).await;
        assert_eq!(result.unwrap_err().to_string(), "ConfigMap watch ended unexpectedly");
        assert!(!health.is_live());

        let (result, health, _) = supervised(async { Err(anyhow!("port taken")) }).await;
        assert_eq!(format!("{:#}", result.unwrap_err()), "ConfigMap watch failed: port taken");
        assert!(!health.is_live());
    }

    #[tokio::test]
    async fn shutdown_is_not_a_failure() {
        let shutdown = CancellationToken::new();
        let health = Health::new();
        let mut supervisor = Supervisor::new(shutdown.clone(), health.clone());
        supervisor.spawn("watch", std::future::pending());
        let stopping = shutdown.clone();
        supervisor.spawn_service("server", async move {
            stopping.cancelled().await;
            Ok(())
        });
        shutdown.cancel();
        supervisor.watch().await.unwrap();
        tokio::time::timeout(Duration::from_secs(1), supervisor.finish(Duration::from_secs(1)))
            .await
            .unwrap();
        assert!(health.is_live());
    }
}
