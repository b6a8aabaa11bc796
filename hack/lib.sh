# Shared shell helpers for hack/ scripts. Source it; it sets HACK_DIR, ROOT_DIR and CACHE_DIR.
set -euo pipefail
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_DIR="$(cd "$HACK_DIR/.." && pwd)"
# shellcheck source=versions.env
source "$HACK_DIR/versions.env"
# The Kubernetes version of the matrix to build, start and test (hack/matrix); the pinned newest by
# default. The test harness reads the same variable (tests/harness/src/binaries.rs).
KUBERNETES_PINNED="$KUBERNETES_VERSION"
KUBERNETES_VERSION="${RELOADER_KUBERNETES_VERSION:-$KUBERNETES_VERSION}"
[[ $KUBERNETES_VERSION =~ ^v1\.[0-9]+\.[0-9]+$ ]] ||
  { echo "RELOADER_KUBERNETES_VERSION=$KUBERNETES_VERSION: expected v1.<minor>.<patch>, e.g. $KUBERNETES_OLDEST" >&2; exit 2; }
# One variable moves the whole cache (binaries keyed by version live below it).
CACHE_DIR="${RELOADER_DEV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/reloader-dev}"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
export CGO_ENABLED=0
# The names the node's own images (hack/build node) are imported under; the harness uses the same.
NODE_IMAGE_REPOSITORY=reloader.dev/node

log() { printf '[hack %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[hack] error: %s\n' "$*" >&2; exit 1; }
# The one version source: [workspace.package] version in Cargo.toml (image tag, chart appVersion).
workspace_version() { sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$ROOT_DIR/Cargo.toml"; }
# The project's home ([workspace.package] repository in Cargo.toml): release asset addresses.
workspace_repository() { sed -n '/^\[workspace.package\]/,/^\[/s/^repository = "\(.*\)"/\1/p' "$ROOT_DIR/Cargo.toml"; }
# The platforms the release builds `reloader` for (.github/workflows/release.yml, job binaries).
RELEASE_PLATFORMS=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64)
# release_asset <version> <os> <arch>: the archive name of that platform's binary (a zip for
# Windows, as krew and Windows users expect; a tar.gz elsewhere).
release_asset() {
  local extension=tar.gz
  [[ "$2" == windows ]] && extension=zip
  printf 'reloader-%s-%s-%s.%s\n' "$1" "$2" "$3" "$extension"
}
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

# oci_archive <rootfs> <archive> <repository> <tag> <config JSON> <labels JSON members> <history>
#   <entries...>: packs <entries> of <rootfs> as a one-layer linux/amd64 image, written as an OCI
# image layout plus the manifest.json of `docker save` (docker load, containerd's `ctr images
# import`, skopeo and kind all read it). Reproducible: every timestamp is SOURCE_DATE_EPOCH, files
# are sorted, owners are 0:0, gzip stores no name or time. Sets MANIFEST_DIGEST, LAYER_SIZE,
# CONFIG_SIZE and MANIFEST_SIZE.
oci_archive() {
  local rootfs="$1" archive="$2" repository="$3" tag="$4" config="$5" labels="$6" history="$7"
  shift 7
  local work created digest size layer_digest diff_id config_digest
  work="$(mktemp -d "${TMPDIR:-/tmp}/oci-archive.XXXXXX")"
  created="$(date -u -d "@${SOURCE_DATE_EPOCH:-0}" +%Y-%m-%dT%H:%M:%SZ)"
  mkdir -p "$work/layout/blobs/sha256"
  put_blob() { # <file>: moves it into blobs/sha256/ under its digest; sets digest and size
    digest="sha256:$(sha256sum "$1" | cut -d' ' -f1)"
    size="$(stat -c %s "$1")"
    mv "$1" "$work/layout/blobs/sha256/${digest#sha256:}"
  }
  reproducible_tar() { # <dir> <out> <entries...>
    local dir="$1" out="$2"; shift 2
    tar --sort=name --mtime="@${SOURCE_DATE_EPOCH:-0}" --owner=0 --group=0 --numeric-owner \
      --format=gnu -C "$dir" -cf "$out" "$@"
  }
  reproducible_tar "$rootfs" "$work/layer.tar" "$@"
  diff_id="sha256:$(sha256sum "$work/layer.tar" | cut -d' ' -f1)"
  gzip -n -9 "$work/layer.tar"
  put_blob "$work/layer.tar.gz"; layer_digest="$digest"; LAYER_SIZE="$size"
  printf '%s' "{\"architecture\":\"amd64\",\"os\":\"linux\",\"created\":\"$created\",\"config\":$config,\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"$diff_id\"]},\"history\":[{\"created\":\"$created\",\"created_by\":\"$history\"}]}" >"$work/config.json"
  put_blob "$work/config.json"; config_digest="$digest"; CONFIG_SIZE="$size"
  printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"$config_digest\",\"size\":$CONFIG_SIZE},\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"$layer_digest\",\"size\":$LAYER_SIZE}],\"annotations\":{$labels}}" >"$work/manifest"
  put_blob "$work/manifest"; MANIFEST_DIGEST="$digest"; MANIFEST_SIZE="$size"
  # ref.name is the tag skopeo's oci-archive:<file>:<tag> picks; io.containerd.image.name is the
  # name containerd (kind load, ctr images import) and docker load give the image.
  printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"$MANIFEST_DIGEST\",\"size\":$MANIFEST_SIZE,\"platform\":{\"architecture\":\"amd64\",\"os\":\"linux\"},\"annotations\":{\"org.opencontainers.image.ref.name\":\"$tag\",\"io.containerd.image.name\":\"$repository:$tag\"}}]}" >"$work/layout/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$work/layout/oci-layout"
  # What `docker save` writes beside the layout (Docker < 25 reads only this file).
  printf '%s' "[{\"Config\":\"blobs/sha256/${config_digest#sha256:}\",\"RepoTags\":[\"$repository:$tag\"],\"Layers\":[\"blobs/sha256/${layer_digest#sha256:}\"]}]" >"$work/layout/manifest.json"
  reproducible_tar "$work/layout" "$archive.tmp" blobs index.json manifest.json oci-layout
  mv "$archive.tmp" "$archive"
  rm -rf "$work"
}
