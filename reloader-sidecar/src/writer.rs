//! Writes a [`Payload`] into a directory the way the kubelet's AtomicWriter lays out a volume:
//!
//! ```text
//! <dir>/..2025_01_31_12_00_00.123456789/   every file of one generation
//! <dir>/..data -> ..2025_01_31_12_00_00.123456789
//! <dir>/<key>  -> ..data/<key>
//! ```
//!
//! A generation is written completely in a fresh directory, then `..data` is switched to it with
//! one `rename(2)` of a symlink, which readers observe as atomic. Files of a generation never
//! change after the swap; the previous generation is removed right after it. So a reader that
//! needs a consistent set resolves `..data` once, reads the files under that directory, and
//! starts again if a file vanished or `..data` no longer points there (it then read a
//! generation being removed). Reading each `<key>` symlink separately may straddle a swap,
//! exactly as with a kubelet-mounted ConfigMap; reading one file is always atomic.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;

use super::payload::{FileEntry, Payload, is_valid_key};

const DATA_LINK: &str = "..data";
const DATA_LINK_TMP: &str = "..data_tmp";
const GENERATION_DIR_MODE: u32 = 0o755;

#[derive(Debug, Error)]
pub(crate) enum WriteError {
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{0} exists and is not a symlink; the directory was not written by a reloader sidecar or kubelet"
    )]
    DataNotSymlink(PathBuf),
    #[error("key {0:?} is not a valid file name")]
    InvalidKey(String),
}

fn io_error<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> WriteError + 'a {
    move |source| WriteError::Io { action, path: path.to_owned(), source }
}

/// Everything the writer creates goes through here, so a test can check each file, directory and
/// symlink the moment it appears (its mode before anything else touches it).
pub(crate) trait Create: std::fmt::Debug + Send + Sync {
    /// A new regular file, created with `mode` (the umask may only narrow it), never an existing one.
    fn file(&self, path: &Path, mode: u32) -> io::Result<File>;
    /// A new directory created with `mode`, and its missing parents (with the same mode).
    fn dir(&self, path: &Path, mode: u32, recursive: bool) -> io::Result<()>;
    fn symlink(&self, target: &Path, link: &Path) -> io::Result<()>;
}

/// The host's filesystem.
#[derive(Debug)]
pub(crate) struct HostFs;

impl Create for HostFs {
    fn file(&self, path: &Path, mode: u32) -> io::Result<File> {
        OpenOptions::new().write(true).create_new(true).mode(mode).open(path)
    }

    fn dir(&self, path: &Path, mode: u32, recursive: bool) -> io::Result<()> {
        fs::DirBuilder::new().mode(mode).recursive(recursive).create(path)
    }

    fn symlink(&self, target: &Path, link: &Path) -> io::Result<()> {
        symlink(target, link)
    }
}

/// Swaps generations of files into one directory.
#[derive(Debug, Clone)]
pub(crate) struct AtomicWriter {
    dir: PathBuf,
    fs: Arc<dyn Create>,
}

impl AtomicWriter {
    pub(crate) fn new(dir: impl Into<PathBuf>) -> Self {
        Self::on(dir, Arc::new(HostFs))
    }

    pub(crate) fn on(dir: impl Into<PathBuf>, fs: Arc<dyn Create>) -> Self {
        Self { dir: dir.into(), fs }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The files of the current generation, or `None` if there is none (or it vanished).
    pub(crate) fn current(&self) -> Result<Option<Payload>, WriteError> {
        let Some(generation) = self.current_generation()? else {
            return Ok(None);
        };
        let gen_dir = self.dir.join(&generation);
        let entries = match fs::read_dir(&gen_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error("list", &gen_dir)(e)),
        };
        let mut payload = Payload::new();
        for entry in entries {
            let entry = entry.map_err(io_error("list", &gen_dir))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
            let path = entry.path();
            let metadata = entry.metadata().map_err(io_error("stat", &path))?;
            if !metadata.is_file() || !is_valid_key(&name) {
                continue;
            }
            let bytes = fs::read(&path).map_err(io_error("read", &path))?;
            payload.insert(name, FileEntry { bytes, mode: metadata.permissions().mode() & 0o7777 });
        }
        Ok(Some(payload))
    }

    /// Writes `payload` as the new generation, then removes keys it no longer has and the
    /// previous generation. Files outside the layout (not our symlinks) are left alone.
    pub(crate) fn write(&self, payload: &Payload) -> Result<(), WriteError> {
        if let Some(key) = payload.keys().find(|k| !is_valid_key(k)) {
            return Err(WriteError::InvalidKey(key.clone()));
        }
        self.fs.dir(&self.dir, GENERATION_DIR_MODE, true).map_err(io_error("create", &self.dir))?;
        let previous = self.current_generation()?;
        let previous_keys = match &previous {
            Some(generation) => list_names(&self.dir.join(generation))?,
            None => BTreeSet::new(),
        };

        let generation = self.create_generation_dir()?;
        let gen_dir = self.dir.join(&generation);
        if let Err(e) = self.write_files(&gen_dir, payload) {
            let _ = fs::remove_dir_all(&gen_dir);
            return Err(e);
        }

        let tmp_link = self.dir.join(DATA_LINK_TMP);
        remove_if_exists(&tmp_link)?;
        self.fs.symlink(Path::new(&generation), &tmp_link).map_err(io_error("create symlink", &tmp_link))?;
        let data_link = self.dir.join(DATA_LINK);
        fs::rename(&tmp_link, &data_link).map_err(io_error("rename over", &data_link))?;

        for key in payload.keys() {
            self.link_key(key)?;
        }
        for key in previous_keys.iter().filter(|k| !payload.contains_key(k.as_str())) {
            self.unlink_key(key)?;
        }
        self.remove_other_generations(&generation);
        Ok(())
    }

    fn current_generation(&self) -> Result<Option<OsString>, WriteError> {
        let link = self.dir.join(DATA_LINK);
        match fs::read_link(&link) {
            Ok(target) => Ok(Some(target.into_os_string())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => Err(WriteError::DataNotSymlink(link)),
            Err(e) => Err(io_error("read symlink", &link)(e)),
        }
    }

    fn create_generation_dir(&self) -> Result<OsString, WriteError> {
        let stamp = chrono::Utc::now().format("..%Y_%m_%d_%H_%M_%S%.9f").to_string();
        let mut attempt = 0u32;
        loop {
            let name = if attempt == 0 { stamp.clone() } else { format!("{stamp}-{attempt}") };
            let path = self.dir.join(&name);
            match self.fs.dir(&path, GENERATION_DIR_MODE, false) {
                Ok(()) => {
                    fs::set_permissions(&path, Permissions::from_mode(GENERATION_DIR_MODE))
                        .map_err(io_error("chmod", &path))?;
                    return Ok(name.into());
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => attempt += 1,
                Err(e) => return Err(io_error("create", &path)(e)),
            }
        }
    }

    fn write_files(&self, gen_dir: &Path, payload: &Payload) -> Result<(), WriteError> {
        for (key, entry) in payload {
            let path = gen_dir.join(key);
            // Created with its mode, so a Secret's file is never readable by others, even before
            // its data is in.
            let mut file = self.fs.file(&path, entry.mode).map_err(io_error("create", &path))?;
            file.write_all(&entry.bytes).map_err(io_error("write", &path))?;
            // Explicitly, so the process umask cannot narrow the documented modes either.
            file.set_permissions(Permissions::from_mode(entry.mode)).map_err(io_error("chmod", &path))?;
        }
        Ok(())
    }

    /// Points `<key>` at `..data/<key>`, replacing anything else of that name by an atomic rename.
    fn link_key(&self, key: &str) -> Result<(), WriteError> {
        let link = self.dir.join(key);
        let target = Path::new(DATA_LINK).join(key);
        match fs::read_link(&link) {
            Ok(existing) if existing == target => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.fs.symlink(&target, &link).map_err(io_error("create symlink", &link))
            }
            _ => {
                let tmp = self.dir.join(format!("..{key}.tmp"));
                remove_if_exists(&tmp)?;
                self.fs.symlink(&target, &tmp).map_err(io_error("create symlink", &tmp))?;
                fs::rename(&tmp, &link).map_err(io_error("rename over", &link))
            }
        }
    }

    /// Removes `<key>` only if it is our symlink, so a file the application put there survives.
    fn unlink_key(&self, key: &str) -> Result<(), WriteError> {
        let link = self.dir.join(key);
        match fs::read_link(&link) {
            Ok(existing) if existing == Path::new(DATA_LINK).join(key) => remove_if_exists(&link),
            _ => Ok(()),
        }
    }

    /// Removes the previous generation and any a crash left behind. A failure here leaves only
    /// garbage, not a wrong view, so it is logged rather than returned.
    fn remove_other_generations(&self, current: &OsString) {
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let is_generation = name.to_str().is_some_and(|n| {
                n.strip_prefix("..").is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            });
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_generation && is_dir && &name != current {
                let path = entry.path();
                if let Err(e) = fs::remove_dir_all(&path) {
                    tracing::warn!(path = %path.display(), error = %e, "cannot remove an old generation");
                }
            }
        }
    }
}

fn list_names(dir: &Path) -> Result<BTreeSet<String>, WriteError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeSet::new()),
        Err(e) => return Err(io_error("list", dir)(e)),
    };
    let mut names = BTreeSet::new();
    for entry in entries {
        let entry = entry.map_err(io_error("list", dir))?;
        if let Some(name) = entry.file_name().to_str() {
            names.insert(name.to_owned());
        }
    }
    Ok(names)
}

fn remove_if_exists(path: &Path) -> Result<(), WriteError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error("remove", path)(e)),
    }
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
