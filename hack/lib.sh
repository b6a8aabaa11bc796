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
# The target the container image is built for (hack/image). A function's symbol name ends in a
# hash of its crate's build, and cargo hashes whether `--target` was given: the benchmark's
# binaries are built with it too, so reloader-cli/code-order.txt, recorded on them by
# hack/code-order, names the image's functions exactly.
RELEASE_TARGET=x86_64-unknown-linux-gnu
# Builds the benchmark's release binaries (reloader, reloader-bench, reloader-floor) and prints
# the folder they are in.
build_release_binaries() {
  log "building the release binaries (reloader, reloader-bench, reloader-floor) for $RELEASE_TARGET"
  cargo build --release --locked --target "$RELEASE_TARGET" -p reloader-cli --bin reloader >&2
  cargo build --release --locked --target "$RELEASE_TARGET" -p reloader-bench --bin reloader-bench --bin reloader-floor >&2
  printf '%s\n' "${CARGO_TARGET_DIR:-$ROOT_DIR/target}/$RELEASE_TARGET/release"
}
# listed_functions <binary> <list>: how many of <list>'s functions <binary> defines, their size in
# bytes, and the span of code they cover (from the lowest start to the highest end).
listed_functions() {
  nm -t d -S --defined-only "$1" |
    awk 'NR == FNR { listed[$1] = 1; next }
         NF == 4 && $3 ~ /^[tTwW]$/ && ($4 in listed) && !seen[$4]++ {
           start = $1 + 0; end = start + $2; bytes += $2; placed++
           if (placed == 1 || start < low) low = start
           if (end > high) high = end
         }
         END { print placed + 0, bytes + 0, high - low }' "$2" -
}
# resolve_code_order <binary> <list>: reloader-cli/code-order.txt's functions under the names
# <binary> gives them, in the list's order. A name ends in a hash of its crate's build
# (`17h<hex>E`), which another toolchain or build setting can change: a name the binary lacks is
# matched without its hash, and since a generic function's instances share that name, all of
# them are listed (a superset: more code packed with the steady state's).
resolve_code_order() {
  nm --defined-only "$1" | awk '$2 ~ /^[tTwW]$/ { print $3 }' |
    awk 'function bare(name) { sub(/17h[0-9a-f]+E$/, "", name); return name }
         NR == FNR { listed[$1] = FNR; next }
         { names[++n] = $1; present[$1] = 1 }
         END {
           # The bare names of listed functions the binary lacks, at the rank of the first of them.
           for (name in listed) {
             if (name in present) continue
             b = bare(name)
             if (!(b in missing) || listed[name] < missing[b]) missing[b] = listed[name]
           }
           for (i = 1; i <= n; i++) {
             name = names[i]
             if (name in listed) print listed[name], name
             else if (bare(name) in missing) print missing[bare(name)], name
           }
         }' "$2" - |
    sort -s -n -k1,1 | cut -d' ' -f2- | awk '!seen[$0]++'
}
