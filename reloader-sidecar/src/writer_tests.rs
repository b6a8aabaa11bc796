use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

fn payload(files: &[(&str, &[u8], u32)]) -> Payload {
    files.iter().map(|(k, v, mode)| (k.to_string(), FileEntry { bytes: v.to_vec(), mode: *mode })).collect()
}

fn generation_dirs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("..") && n != DATA_LINK)
        .collect();
    names.sort();
    names
}

fn mode_of(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn first_write_lays_out_data_link_generation_and_key_links() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("nested/target");
    let writer = AtomicWriter::new(&dir);
    assert_eq!(writer.current().unwrap(), None);
    writer.write(&payload(&[("app.conf", b"a=1\n", 0o644), ("token", b"hunter2", 0o640)])).unwrap();

    let generation = fs::read_link(dir.join(DATA_LINK)).unwrap();
    let generation = generation.to_str().unwrap();
    assert!(generation.starts_with("..20"), "{generation}");
    assert_eq!(generation_dirs(&dir), [generation]);
    assert_eq!(mode_of(&dir.join(generation)), 0o755);
    assert_eq!(fs::read_link(dir.join("app.conf")).unwrap(), Path::new("..data/app.conf"));
    assert_eq!(fs::read(dir.join("app.conf")).unwrap(), b"a=1\n");
    assert_eq!(fs::read(dir.join("token")).unwrap(), b"hunter2");
    assert_eq!(mode_of(&dir.join("app.conf")), 0o644);
    assert_eq!(mode_of(&dir.join("token")), 0o640);
    assert!(!dir.join(DATA_LINK_TMP).exists());
}

#[test]
fn a_swap_replaces_contents_removes_dropped_keys_and_the_old_generation() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let writer = AtomicWriter::new(dir);
    writer.write(&payload(&[("keep", b"v1", 0o644), ("drop", b"x", 0o644)])).unwrap();
    let first = fs::read_link(dir.join(DATA_LINK)).unwrap();
    fs::write(dir.join("user-file"), b"mine").unwrap();

    let second = payload(&[("keep", b"v2", 0o600), ("new", b"n", 0o644)]);
    writer.write(&second).unwrap();
    let current = fs::read_link(dir.join(DATA_LINK)).unwrap();
    assert_ne!(first, current);
    assert!(!dir.join(&first).exists(), "the previous generation is removed");
    assert_eq!(generation_dirs(dir), [current.to_str().unwrap()]);
    assert_eq!(fs::read(dir.join("keep")).unwrap(), b"v2");
    assert_eq!(mode_of(&dir.join("keep")), 0o600);
    assert_eq!(fs::read(dir.join("new")).unwrap(), b"n");
    assert!(fs::symlink_metadata(dir.join("drop")).is_err(), "a removed key's link is removed");
    assert_eq!(fs::read(dir.join("user-file")).unwrap(), b"mine", "foreign files are left alone");
    assert_eq!(writer.current().unwrap(), Some(second));
}

#[test]
fn binary_content_is_written_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let writer = AtomicWriter::new(tmp.path());
    let bytes: Vec<u8> = (0..=255u8).rev().chain([0, 0xff, 0xfe]).collect();
    writer.write(&payload(&[("blob.bin", &bytes, 0o644), ("empty", b"", 0o644)])).unwrap();
    assert_eq!(fs::read(tmp.path().join("blob.bin")).unwrap(), bytes);
    assert_eq!(fs::read(tmp.path().join("empty")).unwrap(), b"");
}

#[test]
fn an_empty_payload_leaves_an_empty_generation() {
    let tmp = tempfile::tempdir().unwrap();
    let writer = AtomicWriter::new(tmp.path());
    writer.write(&payload(&[("a", b"1", 0o644)])).unwrap();
    writer.write(&Payload::new()).unwrap();
    assert!(fs::symlink_metadata(tmp.path().join("a")).is_err());
    assert_eq!(writer.current().unwrap(), Some(Payload::new()));
}

#[test]
fn a_file_squatting_on_a_key_is_replaced_by_the_link() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("app.conf"), b"stale copy").unwrap();
    AtomicWriter::new(tmp.path()).write(&payload(&[("app.conf", b"fresh", 0o644)])).unwrap();
    assert_eq!(fs::read_link(tmp.path().join("app.conf")).unwrap(), Path::new("..data/app.conf"));
    assert_eq!(fs::read(tmp.path().join("app.conf")).unwrap(), b"fresh");
}

#[test]
fn leftovers_of_a_crash_are_cleaned_up() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::create_dir(dir.join("..2020_01_01_00_00_00.000000001")).unwrap();
    fs::write(dir.join("..2020_01_01_00_00_00.000000001/half"), b"x").unwrap();
    symlink("nowhere", dir.join(DATA_LINK_TMP)).unwrap();
    let writer = AtomicWriter::new(dir);
    writer.write(&payload(&[("a", b"1", 0o644)])).unwrap();
    assert_eq!(generation_dirs(dir).len(), 1);
    assert!(fs::symlink_metadata(dir.join(DATA_LINK_TMP)).is_err());
}

#[test]
fn a_dangling_data_link_reads_as_nothing_and_is_repaired() {
    let tmp = tempfile::tempdir().unwrap();
    symlink("..2020_01_01_00_00_00.1", tmp.path().join(DATA_LINK)).unwrap();
    let writer = AtomicWriter::new(tmp.path());
    assert_eq!(writer.current().unwrap(), None);
    writer.write(&payload(&[("a", b"1", 0o644)])).unwrap();
    assert_eq!(fs::read(tmp.path().join("a")).unwrap(), b"1");
}

#[test]
fn refuses_a_directory_it_does_not_own_and_invalid_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let writer = AtomicWriter::new(tmp.path());
    assert!(matches!(writer.write(&payload(&[("../escape", b"x", 0o644)])), Err(WriteError::InvalidKey(_))));
    fs::create_dir(tmp.path().join(DATA_LINK)).unwrap();
    assert!(matches!(writer.write(&payload(&[("a", b"1", 0o644)])), Err(WriteError::DataNotSymlink(_))));
}

/// A reader that resolves `..data` once per pass must see every file of one generation, complete,
/// while generations are swapped under it as fast as the writer can go.
#[test]
fn concurrent_reader_never_sees_a_partial_or_mixed_set() {
    const KEYS: usize = 8;
    const SWAPS: usize = 100;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_owned();
    let writer = AtomicWriter::new(&dir);
    let generation_payload = |generation: usize| -> Payload {
        (0..KEYS)
            .map(|k| {
                // Sizes vary with the generation so a torn write would show as a wrong length.
                let body = format!("gen={generation};key={k};{}", "x".repeat(1000 + generation * 37 + k));
                (format!("file-{k}"), FileEntry { bytes: body.into_bytes(), mode: 0o644 })
            })
            .collect()
    };
    writer.write(&generation_payload(0)).unwrap();

    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (dir, done) = (dir.clone(), done.clone());
        std::thread::spawn(move || {
            let (mut complete_passes, mut retried_passes) = (0usize, 0usize);
            let mut seen: BTreeMap<usize, usize> = BTreeMap::new();
            while !done.load(Ordering::Acquire) {
                let generation_dir = dir.join(fs::read_link(dir.join(DATA_LINK)).unwrap());
                let mut generations = Vec::with_capacity(KEYS);
                let mut vanished = false;
                for k in 0..KEYS {
                    match fs::read(generation_dir.join(format!("file-{k}"))) {
                        Ok(bytes) => {
                            let text = String::from_utf8(bytes).unwrap();
                            let generation: usize = text
                                .strip_prefix("gen=")
                                .unwrap()
                                .split(';')
                                .next()
                                .unwrap()
                                .parse()
                                .unwrap();
                            let expected_len =
                                format!("gen={generation};key={k};").len() + 1000 + generation * 37 + k;
                            assert_eq!(text.len(), expected_len, "a partial file: {}", &text[..30]);
                            generations.push(generation);
                        }
                        // The generation was replaced and removed mid-pass: read again.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {
                            vanished = true;
                            break;
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                if vanished {
                    retried_passes += 1;
                    continue;
                }
                assert!(
                    generations.iter().all(|g| *g == generations[0]),
                    "mixed generations {generations:?}"
                );
                *seen.entry(generations[0]).or_default() += 1;
                complete_passes += 1;
            }
            (complete_passes, retried_passes, seen.len())
        })
    };
    for generation in 1..=SWAPS {
        writer.write(&generation_payload(generation)).unwrap();
    }
    // Let the reader finish a few passes on the last generation too.
    std::thread::sleep(std::time::Duration::from_millis(20));
    done.store(true, Ordering::Release);
    let (complete, retried, distinct) = reader.join().expect("the reader saw a partial or mixed set");
    assert!(complete > 0, "the reader completed no pass");
    assert!(distinct >= 2, "the reader observed only {distinct} generation(s); the test raced nothing");
    eprintln!("{complete} consistent passes over {distinct} generations, {retried} retried");
    assert_eq!(generation_dirs(&dir).len(), 1);
    assert_eq!(writer.current().unwrap(), Some(generation_payload(SWAPS)));
}

/// What [`Checking`] saw of one thing the writer created, the moment it appeared.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Created {
    path: PathBuf,
    kind: &'static str,
    /// Mode bits as created (before any write or chmod), and the mode the writer asked for.
    mode: u32,
    asked: u32,
}

/// The host's filesystem, recording the mode of each file and directory as it is created.
#[derive(Debug, Default)]
struct Checking(std::sync::Mutex<Vec<Created>>);

impl Checking {
    fn record(&self, path: &Path, kind: &'static str, asked: u32) {
        let mode = fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777;
        self.0.lock().unwrap().push(Created { path: path.to_owned(), kind, mode, asked });
    }
}

impl Create for Checking {
    fn file(&self, path: &Path, mode: u32) -> io::Result<File> {
        let file = HostFs.file(path, mode)?;
        self.record(path, "file", mode);
        Ok(file)
    }

    fn dir(&self, path: &Path, mode: u32, recursive: bool) -> io::Result<()> {
        let missing: Vec<PathBuf> =
            path.ancestors().take_while(|p| !p.exists()).map(Path::to_path_buf).collect();
        HostFs.dir(path, mode, recursive)?;
        for created in missing.iter().rev() {
            self.record(created, "dir", mode);
        }
        Ok(())
    }

    fn symlink(&self, target: &Path, link: &Path) -> io::Result<()> {
        HostFs.symlink(target, link)?;
        // A symlink's own mode is always 0777 on Linux and never consulted: what it points at is.
        self.0.lock().unwrap().push(Created { path: link.to_owned(), kind: "symlink", mode: 0, asked: 0 });
        Ok(())
    }
}

/// Every file and directory a sidecar ever creates (the target and its parents, generations,
/// each key's file, the temporary `..data_tmp` and `..<key>.tmp` links of a swap) is no wider
/// than its final mode from its first instant: a Secret's file is never readable by another user
/// between its creation and the chmod after the write.
#[test]
fn nothing_is_ever_created_wider_than_its_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("parent/target");
    let checking = Arc::new(Checking::default());
    let writer = AtomicWriter::on(&dir, checking.clone());
    let modes = [0o640, 0o600, 0o644, 0o400, 0o444];
    let files = |round: u8| -> Payload {
        modes
            .iter()
            .map(|&mode| (format!("key-{mode:o}"), FileEntry { bytes: vec![round; 16], mode }))
            .collect()
    };
    writer.write(&files(1)).unwrap();
    // A key the application replaced by a file of its own is taken back through `..<key>.tmp`.
    fs::remove_file(dir.join("key-640")).unwrap();
    fs::write(dir.join("key-640"), b"not ours").unwrap();
    writer.write(&files(2)).unwrap();

    let created = checking.0.lock().unwrap().clone();
    let kinds = |kind| created.iter().filter(|c| c.kind == kind).count();
    assert_eq!(kinds("file"), 2 * modes.len(), "{created:#?}");
    assert_eq!(kinds("dir"), 2 + 2, "the target, its parent and two generations: {created:#?}");
    let names: BTreeSet<String> =
        created.iter().filter_map(|c| c.path.file_name()?.to_str().map(str::to_owned)).collect();
    assert!(names.contains(DATA_LINK_TMP) && names.contains("..key-640.tmp"), "{names:?}");
    for c in created.iter().filter(|c| c.kind != "symlink") {
        assert_eq!(
            c.mode & !c.asked,
            0,
            "{} created {:o}, wider than {:o}",
            c.path.display(),
            c.mode,
            c.asked
        );
    }
    // And the files end exactly at their modes, whatever the umask narrowed at creation.
    for mode in modes {
        assert_eq!(mode_of(&dir.join(format!("key-{mode:o}"))), mode);
    }
    assert!(
        matches!(HostFs.file(&dir.join("key-640"), 0o640), Err(e) if e.kind() == io::ErrorKind::AlreadyExists),
        "never over an existing file"
    );
}
