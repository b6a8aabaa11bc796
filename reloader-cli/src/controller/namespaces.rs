//! With `--namespace-selector`, watches Namespace labels so that adding or removing a label at
//! runtime takes effect for the next change (metadata only: nothing else is needed).

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::{WatchStreamExt, watcher};
use reloader_core::options::NamespaceScope;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Context;
use super::reconciler::Reconciler;
use super::resources::Synced;

pub fn spawn(ctx: Arc<Context>, _reconciler: Arc<Reconciler>, shutdown: CancellationToken) -> Option<Synced> {
    let NamespaceScope::All { selector: Some(selector), .. } = &ctx.options.namespace_scope else {
        return None;
    };
    let selector = selector.clone();
    let (tx, rx) = watch::channel(false);
    let api: Api<PartialObjectMeta<Namespace>> = Api::all(ctx.client.clone());
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            let event = tokio::select! {
                _ = shutdown.cancelled() => return,
                e = stream.next() => match e { Some(e) => e, None => return },
            };
            match event {
                Ok(watcher::Event::Apply(ns) | watcher::Event::InitApply(ns)) => {
                    let name = ns.metadata.name.unwrap_or_default();
                    let labels = ns.metadata.labels.unwrap_or_default();
                    if ctx.scope.set_selected(&name, selector.matches(&labels)) {
                        info!(namespace = %name, selected = selector.matches(&labels), "namespace selection changed");
                    }
                }
                Ok(watcher::Event::Delete(ns)) => {
                    ctx.scope.set_selected(&ns.metadata.name.unwrap_or_default(), false);
                }
                Ok(watcher::Event::InitDone) => {
                    let _ = tx.send(true);
                }
                Ok(watcher::Event::Init) => {}
                Err(e) => {
                    warn!(error = %e, "namespace watch failed; retrying with backoff");
                    ctx.metrics.error(crate::observe::metrics::ErrorType::Watch);
                }
            }
        }
    });
    Some(rx)
}
