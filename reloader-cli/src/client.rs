//! Every kube client `reloader run` uses is built here, so every API request it makes counts in
//! `rest_client_requests_total` / `rest_client_request_duration_seconds` (observe::metrics).

mod retry_after;

use std::time::Duration;

use anyhow::Context as _;
use kube::client::ClientBuilder;

use crate::observe::metrics::{RestClientMetricsLayer, RestClientStats};
use retry_after::RetryAfterLayer;

/// The field manager of every write to a workload and every Event, so writes are attributed and
/// the admission webhook can recognise (and let pass) its own controller's patches.
pub(crate) const FIELD_MANAGER: &str = "Reloader";

/// The configuration found once (KUBECONFIG or in-cluster), and the metrics the clients feed.
pub(crate) struct Clients {
    config: kube::Config,
    layer: RestClientMetricsLayer,
}

impl Clients {
    pub(crate) async fn infer(metrics: RestClientStats) -> anyhow::Result<Self> {
        let config = kube::Config::infer()
            .await
            .context("building the Kubernetes client (KUBECONFIG or in-cluster)")?;
        let layer = RestClientMetricsLayer::new(metrics, &config.cluster_url);
        Ok(Self { config, layer })
    }

    /// A new client with its own connection pool.
    pub(crate) fn client(&self) -> anyhow::Result<kube::Client> {
        self.build(self.config.clone())
    }

    /// A new client with its own connection pool whose every request (connecting, sending,
    /// waiting for the answer) gives up after `timeout`: a hung connection (a partition) cannot
    /// hold a leader's renewal or write past its renew deadline. Not for watches, whose answers
    /// are long by design.
    pub(crate) fn client_with_timeout(&self, timeout: Duration) -> anyhow::Result<kube::Client> {
        self.build(self.config_with_timeout(timeout))
    }

    fn config_with_timeout(&self, timeout: Duration) -> kube::Config {
        let mut config = self.config.clone();
        config.connect_timeout = Some(timeout);
        config.read_timeout = Some(timeout);
        config.write_timeout = Some(timeout);
        config
    }

    fn build(&self, config: kube::Config) -> anyhow::Result<kube::Client> {
        let builder = ClientBuilder::try_from(config).context("building the Kubernetes client")?;
        Ok(builder.with_layer(&self.layer).build())
    }

    /// A client for the executor's writes, with its own connection pool and `timeout` like
    /// [`Self::client_with_timeout`]. kube's built-in retry of 429/503/504 is off: the writer
    /// retries itself (docs/behaviour.md, F52), so each attempt is counted, logged and checked
    /// against leadership, and never sooner than the server's `Retry-After`, which
    /// [`RetryAfterLayer`] keeps in the error it reads.
    pub(crate) fn writer_client(&self, timeout: Duration) -> anyhow::Result<kube::Client> {
        let mut config = self.config_with_timeout(timeout);
        config.default_retry = false;
        let builder = ClientBuilder::try_from(config).context("building the Kubernetes client for writes")?;
        Ok(builder.with_layer(&self.layer).with_layer(&RetryAfterLayer).build())
    }
}
