//! The plane's directory.

use std::path::{Path, PathBuf};

use crate::PlaneError;

/// Prefix of the plane directories made for tests, followed by the owning process id.
const TEMP_PREFIX: &str = "reloader-plane-";

/// The plane's directory: the chosen one emptied, or a fresh temporary one (which also sweeps
/// away those of test processes that died without cleaning up).
pub(super) fn prepare(chosen: Option<&Path>) -> Result<(PathBuf, Option<tempfile::TempDir>), PlaneError> {
    if let Some(dir) = chosen {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|source| PlaneError::Io {
                context: format!("emptying {}", dir.display()),
                source,
            })?;
        }
        create(dir)?;
        return Ok((dir.to_owned(), None));
    }
    let shm = Path::new("/dev/shm");
    let base =
        if shm.is_dir() && tempfile::tempdir_in(shm).is_ok() { shm.to_owned() } else { std::env::temp_dir() };
    sweep_stale_dirs(&base);
    let temp = tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
        .tempdir_in(&base)
        .map_err(|source| PlaneError::Io {
            context: format!("creating a directory in {}", base.display()),
            source,
        })?;
    Ok((temp.path().to_owned(), Some(temp)))
}

/// Removes plane directories whose owning process no longer runs.
fn sweep_stale_dirs(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix(TEMP_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

pub(super) fn create(dir: &Path) -> Result<(), PlaneError> {
    std::fs::create_dir_all(dir)
        .map_err(|source| PlaneError::Io { context: format!("creating {}", dir.display()), source })
}
