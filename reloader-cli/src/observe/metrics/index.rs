//! `reloader_index_objects{kind="resources"|"workloads"}` and `reloader_reload_loops_stopped`,
//! read from the index on every scrape, so live creates, deletes and an operator's clearing of a
//! loop stop show at once.

use std::sync::{Arc, OnceLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::labels::KindLabels;

/// The index's sizes: (resources, workloads, workloads whose reloads the loop guard stopped).
pub(crate) type IndexSizes = Box<dyn Fn() -> (u64, u64, u64) + Send + Sync>;

/// Encodes the index's sizes once [`IndexSizesCollector::read_from`] has named the index; before
/// that (a process with no index yet) the family is not exposed.
#[derive(Clone, Default)]
pub(super) struct IndexSizesCollector(Arc<OnceLock<IndexSizes>>);

impl IndexSizesCollector {
    pub(super) fn read_from(&self, sizes: IndexSizes) {
        if self.0.set(sizes).is_err() {
            tracing::error!("the index's sizes were named twice; the first source stays");
        }
    }
}

impl std::fmt::Debug for IndexSizesCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexSizesCollector").field("reading", &self.0.get().is_some()).finish()
    }
}

impl Collector for IndexSizesCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(sizes) = self.0.get() else { return Ok(()) };
        let (resources, workloads, loops_stopped) = sizes();
        let gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let family = Family::<KindLabels, Gauge>::default();
        for (kind, n) in [("resources", resources), ("workloads", workloads)] {
            family.get_or_create(&KindLabels { kind }).set(gauge(n));
        }
        let metric = encoder.encode_descriptor(
            "reloader_index_objects",
            "Entries in the in-memory index, by kind (resources, workloads)",
            None,
            family.metric_type(),
        )?;
        family.encode(metric)?;
        let stopped = Gauge::<i64>::default();
        stopped.set(gauge(loops_stopped));
        let metric = encoder.encode_descriptor(
            "reloader_reload_loops_stopped",
            "Workloads whose reloads the loop guard stopped, until an operator deletes their reloader.dev/reload-loop-stopped annotation",
            None,
            stopped.metric_type(),
        )?;
        stopped.encode(metric)
    }
}
