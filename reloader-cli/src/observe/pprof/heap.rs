//! Heap profiles: jemalloc samples allocations (one per ~64 KiB allocated, see
//! [`crate::observe::memory`]) once activated; a dump is converted to pprof's format and
//! symbolised in-process. Without the `jemalloc` feature the allocator is glibc's, which cannot
//! sample, and the endpoint says so.

#[derive(Debug, thiserror::Error)]
pub(crate) enum HeapProfileError {
    #[cfg(not(feature = "jemalloc"))]
    #[error("heap profiles need jemalloc: this binary was built without the `jemalloc` feature")]
    Unsupported,
    #[cfg(feature = "jemalloc")]
    #[error("jemalloc's profiler is not compiled in or not enabled (opt.prof)")]
    ProfilerOff,
    #[cfg(feature = "jemalloc")]
    #[error("dumping the heap profile: {0:#}")]
    Dump(anyhow::Error),
    #[cfg(feature = "jemalloc")]
    #[error("the heap profile task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl HeapProfileError {
    /// Not built in is 501 Not Implemented; anything else a server error.
    pub(crate) fn status(&self) -> axum::http::StatusCode {
        match self {
            #[cfg(not(feature = "jemalloc"))]
            HeapProfileError::Unsupported => axum::http::StatusCode::NOT_IMPLEMENTED,
            #[cfg(feature = "jemalloc")]
            _ => axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// Starts sampling allocations; the profile covers what is allocated from now on.
pub(crate) async fn activate() {
    #[cfg(feature = "jemalloc")]
    jemalloc_pprof::activate_jemalloc_profiling().await;
}

/// The live heap in pprof's format (gzipped protobuf, as Go serves it).
pub(crate) async fn dump() -> Result<Vec<u8>, HeapProfileError> {
    #[cfg(feature = "jemalloc")]
    {
        let control = jemalloc_pprof::PROF_CTL.as_ref().ok_or(HeapProfileError::ProfilerOff)?;
        let mut control = control.clone().lock_owned().await;
        // Writes a temporary file and reads the binary's symbols: a blocking thread's work.
        tokio::task::spawn_blocking(move || {
            let profile = control.dump_pprof().map_err(HeapProfileError::Dump);
            super::release_profiling_memory();
            profile
        })
        .await?
    }
    #[cfg(not(feature = "jemalloc"))]
    Err(HeapProfileError::Unsupported)
}
