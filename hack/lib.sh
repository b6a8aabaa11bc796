# Shared shell helpers for hack/ scripts. Source it; it sets HACK_DIR, ROOT_DIR and CACHE_DIR.
set -euo pipefail
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_DIR="$(cd "$HACK_DIR/.." && pwd)"
# shellcheck source=versions.env
source "$HACK_DIR/versions.env"
# One variable moves the whole cache (binaries keyed by version live below it).
CACHE_DIR="${RELOADER_DEV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/reloader-dev}"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
export CGO_ENABLED=0

log() { printf '[hack %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[hack] error: %s\n' "$*" >&2; exit 1; }
# The one version source: [workspace.package] version in Cargo.toml (image tag, chart appVersion).
workspace_version() { sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$ROOT_DIR/Cargo.toml"; }
# Builds the benchmark's release binaries (reloader, reloader-bench, reloader-floor) and prints
# the folder they are in.
build_release_binaries() {
  log "building the release binaries (reloader, reloader-bench, reloader-floor)"
  cargo build --release --locked -p reloader-cli --bin reloader >&2
  cargo build --release --locked -p reloader-bench --bin reloader-bench --bin reloader-floor >&2
  printf '%s\n' "${CARGO_TARGET_DIR:-$ROOT_DIR/target}/release"
}
