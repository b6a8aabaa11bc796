//! CPU profiles: pprof-rs samples every thread's stack from a SIGPROF handler.

use std::sync::mpsc::Receiver;

use pprof::protos::Message as _;
use tokio::sync::oneshot;

/// Samples per second, as Go's CPU profiler.
const FREQUENCY_HZ: i32 = 100;
/// Libraries whose frames are not unwound from a signal handler (pprof-rs' advice: unwinding
/// through them can deadlock or crash).
const UNWIND_BLOCKLIST: [&str; 4] = ["libc", "libgcc", "pthread", "vdso"];

#[derive(Debug, thiserror::Error)]
pub(crate) enum CpuProfileError {
    #[error("starting the CPU sampler: {0}")]
    Start(#[source] pprof::Error),
    #[error("building the CPU profile: {0}")]
    Report(#[source] pprof::Error),
    #[error("encoding the CPU profile: {0}")]
    /// The protobuf crate's error, as text (pprof-rs does not re-export its type).
    Encode(String),
}

/// Samples until `stop` is dropped (or sent to), saying on `started` when sampling began;
/// returns the profile in pprof's protobuf format. Blocking: run it on a blocking thread.
pub(crate) fn record(started: oneshot::Sender<()>, stop: &Receiver<()>) -> Result<Vec<u8>, CpuProfileError> {
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(FREQUENCY_HZ)
        .blocklist(&UNWIND_BLOCKLIST)
        .build()
        .map_err(CpuProfileError::Start)?;
    // The caller may have gone away already: then `stop` is closed too.
    let _ = started.send(());
    // Returns at once when the sender is dropped.
    let _ = stop.recv();
    let report = guard.report().build().map_err(CpuProfileError::Report)?;
    drop(guard);
    let profile = report.pprof().map_err(CpuProfileError::Report)?;
    profile.write_to_bytes().map_err(|error| CpuProfileError::Encode(error.to_string()))
}
