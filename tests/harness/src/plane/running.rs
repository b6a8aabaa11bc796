//! The running processes, and waiting on them.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::PlaneError;
use crate::process::Process;
use crate::wait::{NotYet, wait_until};

/// The running processes, stopped in reverse start order.
#[derive(Default)]
pub(super) struct Processes {
    pub(super) etcd: Option<Process>,
    pub(super) apiserver: Option<Process>,
    pub(super) controller_manager: Option<Process>,
    pub(super) scheduler: Option<Process>,
    pub(super) kwok: Option<Process>,
}

impl Processes {
    pub(super) fn all_mut(&mut self) -> impl Iterator<Item = &mut Process> {
        [
            &mut self.etcd,
            &mut self.apiserver,
            &mut self.controller_manager,
            &mut self.scheduler,
            &mut self.kwok,
        ]
        .into_iter()
        .flatten()
    }

    /// The first process that has ended, as the error to report.
    pub(super) fn first_exited(&mut self) -> Option<PlaneError> {
        self.all_mut().find_map(|process| {
            let status = process.exited()?;
            let tail = crate::process::tail(process.log(), 30).unwrap_or_default().join("\n");
            Some(PlaneError::Exited {
                component: process.name().to_owned(),
                status: status.to_string(),
                log: process.log().display().to_string(),
                tail,
            })
        })
    }

    pub(super) fn stop_all(&mut self) {
        for process in
            [&mut self.kwok, &mut self.scheduler, &mut self.controller_manager, &mut self.apiserver]
                .into_iter()
                .flatten()
        {
            process.kill();
        }
        // etcd last, and gracefully, so it never sees a half-written request.
        if let Some(etcd) = &mut self.etcd {
            etcd.terminate(Duration::from_secs(5));
        }
    }
}

pub(super) fn lock(processes: &Mutex<Processes>) -> MutexGuard<'_, Processes> {
    processes.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Polls until `probe` succeeds, failing early when a component exits.
pub(super) async fn wait_guarded<T, F, Fut>(
    processes: &Mutex<Processes>,
    what: &str,
    timeout: Duration,
    mut probe: F,
) -> Result<T, PlaneError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, NotYet>>,
{
    let outcome = wait_until(what, timeout, || {
        let exited = lock(processes).first_exited();
        let attempt = probe();
        async move {
            match exited {
                // Stop polling: the component is gone. The error is rebuilt below.
                Some(_) => Ok(None),
                None => attempt.await.map(Some),
            }
        }
    })
    .await?;
    match outcome {
        Some(value) => Ok(value),
        None => Err(lock(processes).first_exited().expect("a component exited")),
    }
}
