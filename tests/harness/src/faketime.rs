//! A process with its wall clock shifted, as on a node whose clock drifted: libfaketime
//! (Debian's `libfaketime`, which `hack/build` installs) preloaded with a fixed offset. The
//! monotonic clock is left alone, as NTP leaves it alone on a real node.

use std::path::{Path, PathBuf};

use crate::PlaneError;

/// Overrides where libfaketime is looked for.
pub const LIBFAKETIME_ENV: &str = "RELOADER_LIBFAKETIME";
const LIBRARY: &str = "libfaketime.so.1";

/// The preloadable libfaketime. Missing is an error, never a skip: the tests that shift clocks
/// would otherwise prove nothing.
pub fn libfaketime() -> Result<PathBuf, PlaneError> {
    if let Ok(path) = std::env::var(LIBFAKETIME_ENV) {
        return Ok(PathBuf::from(path));
    }
    let multiarch = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("faketime").join(LIBRARY));
    let plain = ["/usr/lib/faketime", "/usr/local/lib/faketime"].map(|dir| Path::new(dir).join(LIBRARY));
    multiarch.chain(plain).find(|path| path.is_file()).ok_or_else(|| PlaneError::Command {
        command: LIBRARY.into(),
        detail: format!(
            "not found under /usr/lib/*/faketime, /usr/lib/faketime or /usr/local/lib/faketime: \
             install Debian's libfaketime (`hack/build faketime`, or `apt-get install faketime`) \
             or point {LIBFAKETIME_ENV} at it"
        ),
    })
}

/// The environment that shifts a process's wall clock by `offset_seconds` (either sign).
pub(crate) fn shifted_clock_env(offset_seconds: i64) -> Result<Vec<(String, String)>, PlaneError> {
    let library = libfaketime()?;
    Ok(vec![
        ("LD_PRELOAD".into(), library.display().to_string()),
        ("FAKETIME".into(), format!("{offset_seconds:+}s")),
        ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
    ])
}
