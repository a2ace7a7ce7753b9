# Steward's GitHub container action: one static binary, Debian's static
# busybox (a POSIX shell and the usual small tools, so `provider: local`
# tasks run inside the action's container) and CA certificates.
#
# In-repository workflows (`uses: ./`) build this file on the runner. Released
# versions do not: the release workflow (.github/workflows/release.yml) builds
# it once per tag for linux/amd64 and linux/arm64, pushes it to ghcr.io, and
# the tagged action.yml names that image (docs/action.md, "Versions").
#
# Build arguments: VERSION and COMMIT are stamped into the binary
# (`steward version`, the report footers). The build stage runs on
# $BUILDPLATFORM, which BuildKit sets (the default `docker build` on
# GitHub-hosted runners and in docker/build-push-action). The legacy builder
# (Docker Engine before 23, or DOCKER_BUILDKIT=0) sets no BUILDPLATFORM:
# "${BUILDPLATFORM:-linux}" then names the daemon's own architecture, and
# TARGETARCH, empty, compiles for it (cmd/steward/dockerfile_test.go
# TestDockerfileWithoutBuildKit).
ARG GO_VERSION=1.26
ARG DEBIAN_VERSION=bookworm

# Tools for the final image, for the platform the image is for.
FROM debian:${DEBIAN_VERSION}-slim AS tools
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends busybox-static ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# Build stage: compile steward without cgo on the builder's platform, for the
# target's (no emulation for the Go compiler in multi-arch builds).
FROM --platform=${BUILDPLATFORM:-linux} golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
ARG COMMIT=unknown
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags="-s -w -X github.com/steward-evals/steward/internal/version.Version=${VERSION} -X github.com/steward-evals/steward/internal/version.Commit=${COMMIT}" \
      -o /out/steward ./cmd/steward

# Final stage. Dockerfile.prebuilt is the same stage built from files taken
# from the host (the tests build it where nothing can be pulled): keep the two
# in step.
FROM scratch
ARG VERSION=dev
ARG COMMIT=unknown
COPY --from=tools /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=tools /bin/busybox /bin/busybox
COPY --from=build /out/steward /steward
# busybox's applets (sh, cat, tr, sed, grep, awk, sleep, …) as symlinks at
# their usual places (/bin/sh, /usr/bin/env, …); /tmp for temporary files
# and the local sandboxes' workdirs.
RUN ["/bin/busybox", "mkdir", "-p", "/usr/bin", "/sbin", "/usr/sbin", "/tmp"]
RUN ["/bin/busybox", "--install", "-s"]
RUN ["/bin/busybox", "chmod", "1777", "/tmp"]
ENV TMPDIR=/tmp PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
LABEL org.opencontainers.image.source="https://github.com/steward-evals/steward" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
# Exec form: steward is PID 1 and receives the runner's SIGINT/SIGTERM itself.
ENTRYPOINT ["/steward"]
CMD ["action"]
