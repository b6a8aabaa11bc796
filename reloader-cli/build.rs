//! Stamps `reloader --version` with the git commit and the build date, and lays out the release
//! binary's code so that what runs after start-up sits together ([`order_code`]).
//!
//! Reproducible: the date is `SOURCE_DATE_EPOCH` when set (release builds and `hack/image` set
//! it), else the commit's own date, never the wall clock. Works without `.git` (a source tarball
//! or a container build context): `RELOADER_GIT_COMMIT` names the commit, else it says `unknown`.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!("cargo:rerun-if-env-changed=RELOADER_GIT_COMMIT");
    watch_git_head();
    order_code();

    let commit = std::env::var("RELOADER_GIT_COMMIT")
        .ok()
        .filter(|commit| !commit.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .map(|commit| commit.trim().chars().take(12).collect::<String>())
        .unwrap_or_else(|| "unknown".to_owned());
    let epoch = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .or_else(|| git(&["log", "-1", "--format=%ct", "HEAD"]))
        .and_then(|epoch| epoch.trim().parse::<i64>().ok());
    let date = epoch.map(utc_date).unwrap_or_else(|| "unknown".to_owned());
    let version = std::env::var("CARGO_PKG_VERSION").expect("cargo sets CARGO_PKG_VERSION");
    println!("cargo:rustc-env=RELOADER_LONG_VERSION={version} (commit {commit}, built {date})");
}

/// Re-run when HEAD moves (a commit or a checkout), not on every build.
fn watch_git_head() {
    let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) else { return };
    let git_dir = PathBuf::from(git_dir.trim());
    let head = git_dir.join("HEAD");
    if head.exists() {
        println!("cargo:rerun-if-changed={}", head.display());
    }
    let Some(common) = git(&["rev-parse", "--git-common-dir"]) else { return };
    let common = PathBuf::from(common.trim());
    let common = if common.is_absolute() { common } else { git_dir.join(common) };
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        let reference = common.join(branch.trim());
        if reference.exists() {
            println!("cargo:rerun-if-changed={}", reference.display());
        }
    }
    let packed = common.join("packed-refs");
    if packed.exists() {
        println!("cargo:rerun-if-changed={}", packed.display());
    }
}

/// Release builds for x86_64 Linux link with Rust's own lld, which places the functions listed in
/// `code-order.txt` (written by `hack/code-order`) first and together: the kernel maps code in
/// blocks of 64 KiB or more, so the steady state's functions scattered over the text would keep
/// most of the binary resident (docs/benchmark.md, "Resident code"). Names the build does not
/// have are skipped. Left out when the build chooses another linker, which may not know the flag.
fn order_code() {
    const ORDER: &str = "code-order.txt";
    // hack/image passes the list resolved to its build's names when some differ from the list's.
    const RESOLVED_ORDER: &str = "RELOADER_CODE_ORDER";
    println!("cargo:rerun-if-env-changed={RESOLVED_ORDER}");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let release = std::env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let target = std::env::var("TARGET").unwrap_or_default();
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let other_linker = ["linker=", "linker-flavor", "linker-features", "fuse-ld", "link-self-contained"]
        .iter()
        .any(|flag| flags.contains(flag));
    if !release || target != "x86_64-unknown-linux-gnu" || other_linker {
        return;
    }
    let order = match std::env::var_os(RESOLVED_ORDER) {
        Some(resolved) => PathBuf::from(resolved),
        None => PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join(ORDER),
    };
    println!("cargo:rerun-if-changed={}", order.display());
    if order.exists() {
        println!("cargo:rustc-link-arg-bin=reloader=-Wl,--symbol-ordering-file={}", order.display());
        println!("cargo:rustc-link-arg-bin=reloader=-Wl,--no-warn-symbol-ordering");
    }
}

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `YYYY-MM-DD` (UTC) of a Unix time, without a date crate in the build script
/// (Howard Hinnant's days-to-civil algorithm).
fn utc_date(epoch: i64) -> String {
    let days = epoch.div_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
