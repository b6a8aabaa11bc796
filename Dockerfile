# reloader's container image for users with a container engine. The same final image as
# hack/image (which builds it here without one): a static binary, CA certificates, passwd/group
# for the numeric non-root user 65534, no shell, nothing written at run time (works with
# readOnlyRootFilesystem: true).
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=0.1.0 --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg SOURCE_DATE_EPOCH="$(git log -1 --format=%ct)" -t ghcr.io/reloader/reloader:0.1.0 .
#
# Each platform compiles natively in its own build stage (buildx runs arm64 under QEMU when the
# builder is amd64): glibc is linked statically (crt-static), which needs no cross toolchain;
# getrandom uses the raw syscall (a static binary cannot dlsym glibc's getrandom, and the
# fallback, /dev/urandom, is not there in every sandbox).
# linux/arm64 is built by the release workflow but not exercised on the project's test machine.

# The build image is pinned by digest (the multi-arch index of rust:1.95.0-bookworm, the toolchain
# rust-toolchain.toml pins): a re-pushed tag cannot change what builds the release. To bump it,
# read the new tag's index digest (`docker buildx imagetools inspect rust:<version>-bookworm`) and
# replace both here. The final stage is `scratch`, which is no image. The Dockerfile frontend is
# the one built into BuildKit (RUN --mount needs no `# syntax` image).
FROM rust:1.95.0-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1 AS build
# Set by buildx from --platform (amd64, arm64).
ARG TARGETARCH
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH=0
WORKDIR /build
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/build/target,id=reloader-target-${TARGETARCH},sharing=locked \
    set -eu; \
    case "${TARGETARCH}" in \
      amd64) target=x86_64-unknown-linux-gnu ;; \
      arm64) target=aarch64-unknown-linux-gnu ;; \
      *) echo "unsupported TARGETARCH ${TARGETARCH} (linux/amd64 and linux/arm64 are)" >&2; exit 1 ;; \
    esac; \
    RUSTFLAGS="-C target-feature=+crt-static --cfg getrandom_backend=\"linux_getrandom\" --remap-path-prefix=/usr/local/cargo=/cargo" \
    RELOADER_GIT_COMMIT="${REVISION}" SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH}" \
      cargo build --release --locked -p reloader-cli --target "${target}"; \
    mkdir -p /rootfs/etc/ssl/certs /rootfs/tmp /rootfs/usr/share/doc/reloader; \
    install -m 0755 "target/${target}/release/reloader" /rootfs/reloader; \
    install -m 0644 /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ca-certificates.crt; \
    install -m 0644 LICENSE /rootfs/usr/share/doc/reloader/LICENSE; \
    printf 'root:x:0:0:root:/:/nonexistent\nnobody:x:65534:65534:nobody:/nonexistent:/nonexistent\n' >/rootfs/etc/passwd; \
    printf 'root:x:0:\nnobody:x:65534:\n' >/rootfs/etc/group; \
    printf 'hosts: files dns\n' >/rootfs/etc/nsswitch.conf; \
    chmod 1777 /rootfs/tmp

FROM scratch
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="reloader" \
      org.opencontainers.image.source="https://github.com/reloader/reloader" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /rootfs/ /
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65534:65534
ENTRYPOINT ["/reloader"]
