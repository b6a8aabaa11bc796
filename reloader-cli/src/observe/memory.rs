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
//!
//! After the initial sync the code start-up ran is released too ([`release_cold_code`]): it is
//! most of the resident memory of a controller this size.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's start-up options: the profiler is compiled in, and samples one allocation per
/// ~64 KiB allocated (`lg_prof_sample:16`; Go samples per 512 KiB, too coarse for a heap of a few
/// MB) once `--enable-pprof` activates it; one arena as with glibc; freed pages returned at once
/// through start-up (no decay, so no background thread to purge them; the controller's steady
/// state keeps them a while, [`keep_freed_pages_for_a_while`]). Measured on bench M1
/// (docs/benchmark.md), against one arena with caches and a 1 s decay on a background thread:
/// anonymous memory 6.5 -> 5.1 MiB steady, and 2.5 MiB less at the peak.
///
/// Per-thread caches only during start-up ([`runtime`]): the initial lists allocate and free a
/// buffer of each object's size thousands of times, and without a cache each free emptied a slab
/// that was purged and faulted back in. Bench M1's data on the local plane (docs/benchmark.md):
/// 0.29-0.32 CPU s to sync without them, 0.13-0.14 with them, for the same steady and peak RSS.
#[cfg(feature = "jemalloc")]
#[allow(unsafe_code, non_upper_case_globals)]
// SAFETY: jemalloc reads this NUL-terminated string once, at its initialisation.
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static malloc_conf: &[u8; JEMALLOC_CONF.len()] = JEMALLOC_CONF;

#[cfg(feature = "jemalloc")]
const JEMALLOC_CONF: &[u8; 102] =
    b"prof:true,prof_active:false,lg_prof_sample:16,narenas:1,tcache:true,dirty_decay_ms:0,muzzy_decay_ms:0\0";

/// Set once start-up is over: each runtime worker then drops its thread cache.
static START_UP_OVER: AtomicBool = AtomicBool::new(false);

/// The multi-threaded tokio runtime every `reloader` process runs on. Its workers keep their
/// allocator caches through start-up and drop them when they next park after
/// [`end_start_up`].
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(drop_thread_cache_after_start_up)
        .build()
}

/// Start-up is over: the runtime's workers drop their allocator caches, as a steady state that
/// allocates little wants (the caches would hold what they last freed).
pub fn end_start_up() {
    START_UP_OVER.store(true, Ordering::Relaxed);
}

/// Once per thread, after [`end_start_up`]: flushes this thread's allocator cache and turns it off.
fn drop_thread_cache_after_start_up() {
    thread_local! {
        static DROPPED: Cell<bool> = const { Cell::new(false) };
    }
    if !START_UP_OVER.load(Ordering::Relaxed) || DROPPED.get() {
        return;
    }
    DROPPED.set(true);
    #[cfg(feature = "jemalloc")]
    {
        #[allow(unsafe_code)]
        // SAFETY: "thread.tcache.enabled" is a NUL-terminated name whose value is a bool.
        if let Err(error) = unsafe { tikv_jemalloc_ctl::raw::write(b"thread.tcache.enabled\0", false) } {
            tracing::debug!(%error, "jemalloc: this thread's cache could not be turned off");
        }
    }
}

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

/// After the initial lists: ends start-up's allocator caches ([`end_start_up`]), and returns
/// the memory the lists freed to the system, and the pages of code start-up used and the steady
/// state does not (see [`release_cold_code`]). The sidecar calls it once its directory first
/// holds every object's content.
pub fn release_after_sync() {
    end_start_up();
    release_free_memory();
    release_cold_code();
}

/// How long the steady state keeps freed pages, in milliseconds (jemalloc's `ssize_t`): dirty
/// pages become muzzy (`MADV_FREE`) after about this long, and muzzy ones are returned after as
/// long again.
#[cfg(feature = "jemalloc")]
const STEADY_STATE_DECAY_MS: isize = 1000;

/// From now on, pages freed wait about a second before going back to the system (start-up,
/// per [`malloc_conf`], returns them at once). Why: every watch event frees buffers that the
/// next one allocates again (rustls shrinks a connection's read buffer once drained, hyper and
/// kube's line codec grow theirs per event), and returned at once, each costs an `madvise`, a TLB
/// flush on the other core and fresh page faults on the reload's path. Measured on the local
/// plane (docs/benchmark.md, "The allocator on a reload's path"): from a ConfigMap's watch event
/// read to its Deployment's PATCH written, p50 0.58-0.68 -> 0.41-0.49 ms at L1's pace, for
/// 0.6-0.8 MiB of steady RSS. The controller and the process floor call it after
/// [`release_after_sync`]; the sidecar, which serves in every pod and is not latency-bound, does
/// not.
pub fn keep_freed_pages_for_a_while() {
    #[cfg(feature = "jemalloc")]
    {
        let narenas = tikv_jemalloc_ctl::arenas::narenas::read().unwrap_or(0);
        // Arenas made later (jemalloc's arena for huge allocations) take the defaults.
        let names = ["arenas.dirty_decay_ms".to_owned(), "arenas.muzzy_decay_ms".to_owned()]
            .into_iter()
            .chain(
                (0..narenas)
                    .flat_map(|i| [format!("arena.{i}.dirty_decay_ms"), format!("arena.{i}.muzzy_decay_ms")]),
            );
        for name in names {
            let name = format!("{name}\0");
            #[allow(unsafe_code)]
            // SAFETY: a NUL-terminated name of a jemalloc setting whose value is an ssize_t.
            if let Err(error) =
                unsafe { tikv_jemalloc_ctl::raw::write(name.as_bytes(), STEADY_STATE_DECAY_MS) }
            {
                tracing::debug!(%error, setting = name.trim_end_matches('\0'), "jemalloc: the decay could not be set");
            }
        }
    }
}

/// Hands what this thread's allocator cache holds back to its arena, where
/// [`release_free_memory`] can return it (a blocking thread keeps its cache while it lives).
/// Only the profiles call it, which are Unix only.
#[cfg(unix)]
pub(crate) fn flush_thread_cache() {
    #[cfg(feature = "jemalloc")]
    {
        #[allow(unsafe_code)]
        // SAFETY: "thread.tcache.flush" takes no value: every pointer null, every length zero.
        let errno = unsafe {
            tikv_jemalloc_sys::mallctl(
                c"thread.tcache.flush".as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        if errno != 0 {
            tracing::debug!(errno, "jemalloc: flushing this thread's cache failed");
        }
    }
}

/// Returns the memory the allocator holds free to the system.
pub(crate) fn release_free_memory() {
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

/// Pages out this binary's code and read-only data, so that what stays resident is what the
/// controller goes on to run, not what start-up ran.
///
/// Why: the kernel maps a binary's code in large blocks (large folios, read-ahead windows,
/// 64 KiB fault-around), so start-up code, unwind tables and error paths sit resident beside the
/// steady state's code: ~14 MiB of ours. The pages stay in the page cache; those the controller
/// runs next come back by minor faults (no disk read), in the same blocks. Measured on bench M1
/// (docs/benchmark.md) at ¼ size: steady RSS 16.8 -> 13.9 MiB (the floor: 9.1 -> 6.2 MiB). Only
/// folios no other process maps are paged out. Kernels without `MADV_PAGEOUT` (before 5.4)
/// refuse the advice, which leaves everything as it was.
pub fn release_cold_code() {
    #[cfg(target_os = "linux")]
    {
        let (Ok(exe), Ok(maps)) =
            (std::fs::read_link("/proc/self/exe"), std::fs::read_to_string("/proc/self/maps"))
        else {
            return;
        };
        for range in read_only_mappings_of(&maps, &exe.to_string_lossy()) {
            #[allow(unsafe_code)]
            // SAFETY: the range is a whole read-only, private file mapping of this process, as
            // /proc/self/maps lists it; paging it out keeps its contents (clean pages are mapped
            // again from the page cache, or read from the file, on the next access).
            let refused =
                unsafe { libc::madvise(range.start as *mut libc::c_void, range.len(), libc::MADV_PAGEOUT) }
                    != 0;
            if refused {
                let error = std::io::Error::last_os_error();
                tracing::debug!(%error, "madvise(MADV_PAGEOUT) on this binary's code refused");
                return;
            }
        }
    }
}

/// The address ranges of `exe`'s read-only private mappings (code and read-only data) in a
/// `/proc/<pid>/maps` listing: `start-end perms offset dev inode path`.
#[cfg(any(target_os = "linux", test))]
fn read_only_mappings_of(maps: &str, exe: &str) -> Vec<std::ops::Range<usize>> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(6, ' ');
            let (range, perms) = (fields.next()?, fields.next()?);
            let path = fields.nth(3)?.trim_start();
            let read_only_private =
                perms.len() == 4 && perms.starts_with('r') && &perms[1..2] == "-" && perms.ends_with('p');
            if !read_only_private || path != exe {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let (start, end) = (usize::from_str_radix(start, 16).ok()?, usize::from_str_radix(end, 16).ok()?);
            (start < end).then_some(start..end)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXE: &str = "/usr/local/bin/reloader";

    /// Start-up runs with this thread's allocator cache; once it is over, the thread's next park
    /// turns the cache off.
    #[cfg(feature = "jemalloc")]
    #[test]
    fn the_thread_cache_is_dropped_at_the_first_park_after_start_up() {
        #[allow(unsafe_code)]
        // SAFETY: a NUL-terminated name of a bool setting.
        let enabled = || unsafe { tikv_jemalloc_ctl::raw::read::<bool>(b"thread.tcache.enabled\0") }.unwrap();
        assert!(enabled(), "start-up runs with the cache");
        drop_thread_cache_after_start_up();
        assert!(enabled() || START_UP_OVER.load(Ordering::Relaxed), "kept until start-up is over");
        end_start_up();
        drop_thread_cache_after_start_up();
        assert!(!enabled(), "dropped after start-up");
    }

    /// Start-up returns freed pages at once (`malloc_conf`); once asked, every arena, and those
    /// made later, keeps them about a second.
    #[cfg(feature = "jemalloc")]
    #[test]
    fn freed_pages_are_kept_a_while_once_asked() {
        #[allow(unsafe_code)]
        // SAFETY: NUL-terminated names of ssize_t settings.
        let read = |name: &str| unsafe { tikv_jemalloc_ctl::raw::read::<isize>(name.as_bytes()) }.unwrap();
        let settings = [
            "arena.0.dirty_decay_ms\0",
            "arena.0.muzzy_decay_ms\0",
            "arenas.dirty_decay_ms\0",
            "arenas.muzzy_decay_ms\0",
        ];
        for setting in settings {
            assert_eq!(read(setting), 0, "{setting} before");
        }
        keep_freed_pages_for_a_while();
        for setting in settings {
            assert_eq!(read(setting), STEADY_STATE_DECAY_MS, "{setting} after");
        }
    }

    #[test]
    fn read_only_mappings_of_the_binary_only() {
        let maps = "\
55f847bfe000-55f847f6f000 r--p 00000000 fd:01 1234 /usr/local/bin/reloader
55f847f6f000-55f848a47000 r-xp 00370000 fd:01 1234 /usr/local/bin/reloader
55f848a47000-55f848ab6000 r--p 00e47000 fd:01 1234 /usr/local/bin/reloader
55f848ab6000-55f848abc000 rw-p 00eb5000 fd:01 1234 /usr/local/bin/reloader
55f849000000-55f849200000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0000100000 r-xp 00000000 fd:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000200000-7f0000300000 r-xs 00000000 fd:01 1234 /usr/local/bin/reloader
7f0000300000-7f0000400000 r--p 00000000 fd:01 1235 /usr/local/bin/reloader-floor
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0                          [vdso]
";
        let expected = vec![
            0x55f8_47bf_e000..0x55f8_47f6_f000,
            0x55f8_47f6_f000..0x55f8_48a4_7000,
            0x55f8_48a4_7000..0x55f8_48ab_6000,
        ];
        assert_eq!(read_only_mappings_of(maps, EXE), expected);
    }

    #[test]
    fn paths_with_spaces_and_bad_lines() {
        let cases: &[(&str, usize)] = &[
            ("1000-2000 r-xp 0 fd:01 7 /opt/my dir/reloader", 1),
            ("1000-2000 r-xp 0 fd:01 7 /opt/my dir/reloader (deleted)", 0),
            ("2000-1000 r-xp 0 fd:01 7 /opt/my dir/reloader", 0),
            ("zz-2000 r-xp 0 fd:01 7 /opt/my dir/reloader", 0),
            ("1000-2000 r-xp", 0),
            ("", 0),
        ];
        for (line, ranges) in cases {
            assert_eq!(read_only_mappings_of(line, "/opt/my dir/reloader").len(), *ranges, "{line:?}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_finds_its_own_code() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert!(!read_only_mappings_of(&maps, &exe.to_string_lossy()).is_empty(), "{maps}");
    }
}
