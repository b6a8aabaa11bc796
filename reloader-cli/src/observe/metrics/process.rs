//! The standard Prometheus `process_*` series, read on each scrape as Go's process collector
//! does (Stakater exports them through client_golang's default registry): generic pod
//! dashboards show CPU, memory and file descriptors for reloader too.
//!
//! The values come from `metrics-process` (it reads `/proc/self` on Linux); this module only
//! encodes them with prometheus-client. A value the platform cannot give is left out.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

/// One `process_*` family: name as registered (counters without `_total`), help, unit.
struct Family {
    name: &'static str,
    help: &'static str,
    unit: Option<Unit>,
}

const CPU: Family = Family {
    name: "process_cpu",
    help: "Total user and system CPU time spent in seconds.",
    unit: Some(Unit::Seconds),
};
const OPEN_FDS: Family =
    Family { name: "process_open_fds", help: "Number of open file descriptors.", unit: None };
const MAX_FDS: Family =
    Family { name: "process_max_fds", help: "Maximum number of open file descriptors.", unit: None };
const VIRTUAL_MEMORY: Family =
    Family { name: "process_virtual_memory", help: "Virtual memory size in bytes.", unit: Some(Unit::Bytes) };
const VIRTUAL_MEMORY_MAX: Family = Family {
    name: "process_virtual_memory_max",
    help: "Maximum amount of virtual memory available in bytes.",
    unit: Some(Unit::Bytes),
};
const RESIDENT_MEMORY: Family = Family {
    name: "process_resident_memory",
    help: "Resident memory size in bytes.",
    unit: Some(Unit::Bytes),
};
const START_TIME: Family = Family {
    name: "process_start_time",
    help: "Start time of the process since unix epoch in seconds.",
    unit: Some(Unit::Seconds),
};

/// Collects the process figures on every scrape.
#[derive(Debug, Default)]
pub(super) struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let now = metrics_process::collector::collect();
        if let Some(seconds) = now.cpu_seconds_total {
            encode(&mut encoder, &CPU, ConstCounter::new(seconds))?;
        }
        let gauges = [
            (&OPEN_FDS, now.open_fds),
            (&MAX_FDS, now.max_fds),
            (&VIRTUAL_MEMORY, now.virtual_memory_bytes),
            (&VIRTUAL_MEMORY_MAX, now.virtual_memory_max_bytes),
            (&RESIDENT_MEMORY, now.resident_memory_bytes),
            (&START_TIME, now.start_time_seconds),
        ];
        for (family, value) in gauges {
            if let Some(value) = value {
                encode(&mut encoder, family, ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX)))?;
            }
        }
        Ok(())
    }
}

fn encode(
    encoder: &mut DescriptorEncoder,
    family: &Family,
    metric: impl EncodeMetric,
) -> Result<(), std::fmt::Error> {
    let metric_encoder =
        encoder.encode_descriptor(family.name, family.help, family.unit.as_ref(), metric.metric_type())?;
    metric.encode(metric_encoder)
}
