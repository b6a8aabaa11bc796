//! Killing etcd under the plane and starting it again, for tests of an etcd outage.

use super::ControlPlane;
use super::running::lock;
use super::startup::{start_etcd_process, wait_for_etcd};
use crate::PlaneError;

impl ControlPlane {
    /// Kills etcd with SIGKILL, as a crash would; kube-apiserver and the other components keep
    /// running and see their etcd connections fail. Only for a plane of one's own.
    pub fn kill_etcd(&self) {
        if let Some(mut etcd) = lock(&self.processes).etcd.take() {
            etcd.kill();
        }
    }

    /// Starts etcd again on the same data directory and ports, and waits until it reports
    /// healthy (kube-apiserver reconnects by itself). Does nothing when it is running.
    pub async fn start_etcd(&self) -> Result<(), PlaneError> {
        {
            let mut processes = lock(&self.processes);
            if processes.etcd.as_mut().is_some_and(|etcd| etcd.exited().is_none()) {
                return Ok(());
            }
            processes.etcd = Some(start_etcd_process(&self.binaries, &self.layout, self.network.as_deref())?);
        }
        wait_for_etcd(&self.layout, &self.processes).await
    }
}
