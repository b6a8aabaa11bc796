//! The allocator and its settings.
//!
//! The index itself is small (hundreds of bytes per object), but glibc gives every thread that
//! allocates during the initial lists its own arena and keeps the freed pages: measured on bench
//! M1, ~5 MB of live heap sat in ~60 MB of RSS. Fewer arenas and one trim after the initial sync
//! return that memory to the system (measured together: 70 MB -> 31-33 MB peak-to-steady on the
//! full M1 data set).
//!
//! With the `jemalloc` feature the allocator is jemalloc instead, with its heap profiler compiled
//! in but inactive: `/debug/pprof/heap` (`--enable-pprof`, [`super::pprof`]) needs an allocator
//! that samples. The same two settings apply: one arena, and a purge after the initial sync.

#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's start-up options: the profiler is compiled in, and samples one allocation per
/// ~64 KiB allocated (`lg_prof_sample:16`; Go samples per 512 KiB, too coarse for a heap of a few
/// MB) once `--enable-pprof` activates it; one arena as with glibc, and freed pages returned
/// within a second by a background thread.
#[cfg(feature = "jemalloc")]
#[allow(unsafe_code, non_upper_case_globals)]
// SAFETY: jemalloc reads this NUL-terminated string once, at its initialisation.
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static malloc_conf: &[u8; JEMALLOC_CONF.len()] = JEMALLOC_CONF;

#[cfg(feature = "jemalloc")]
const JEMALLOC_CONF: &[u8; 99] =
    b"prof:true,prof_active:false,lg_prof_sample:16,narenas:1,background_thread:true,dirty_decay_ms:1000\0";

/// Caps the allocator's arenas. Call first thing in `main`, before other threads exist.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "jemalloc")))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt only changes allocator tuning; it is called before any other thread runs.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
    // jemalloc: `narenas:1` in `malloc_conf`.
}

/// The live heap: bytes the allocator has handed out and not had back (jemalloc's
/// `stats.allocated`); `None` without the `jemalloc` feature.
pub fn heap_allocated() -> Option<u64> {
    #[cfg(feature = "jemalloc")]
    {
        tikv_jemalloc_ctl::epoch::advance().ok()?;
        tikv_jemalloc_ctl::stats::allocated::read().ok().map(|bytes| bytes as u64)
    }
    #[cfg(not(feature = "jemalloc"))]
    None
}

/// Returns the memory freed after the initial lists to the system.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "jemalloc")))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim is thread-safe and only releases memory glibc holds free.
    unsafe {
        libc::malloc_trim(0);
    }
    #[cfg(feature = "jemalloc")]
    {
        /// `arena.<i>.purge` with i = MALLCTL_ARENAS_ALL: every arena.
        const PURGE_ALL_ARENAS: &[u8] = b"arena.4096.purge\0";
        #[allow(unsafe_code)]
        // SAFETY: "arena.<i>.purge" takes no value: every pointer null, every length zero.
        let errno = unsafe {
            tikv_jemalloc_sys::mallctl(
                PURGE_ALL_ARENAS.as_ptr().cast(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        if errno != 0 {
            tracing::debug!(errno, "jemalloc: purging the free pages failed");
        }
    }
}
