#!/usr/bin/env bash
# Builds the test cluster's images FROM scratch with Docker (nothing is pulled)
# and imports them into the cluster's own containerd: the pause image and a
# busybox image (Debian's busybox-static). Usage: images.sh [extra-image-ref...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "$work/pause" "$work/busybox"
(cd "$here/pause" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$work/pause/pause" ./main.go)
printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' > "$work/pause/Dockerfile"
cp /bin/busybox "$work/busybox/busybox"
printf 'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\nRUN ["/bin/busybox", "mkdir", "-p", "/tmp", "/work", "/root"]\n' > "$work/busybox/Dockerfile"
DOCKER_BUILDKIT=0 docker build -q -t "$PAUSE_IMAGE" "$work/pause" >/dev/null
DOCKER_BUILDKIT=0 docker build -q -t "$BUSYBOX_IMAGE" "$work/busybox" >/dev/null
docker save "$PAUSE_IMAGE" "$BUSYBOX_IMAGE" "$@" -o "$work/images.tar"
ctr -a "$CTR_SOCK" -n k8s.io images import "$work/images.tar" >/dev/null
docker rmi "$PAUSE_IMAGE" "$BUSYBOX_IMAGE" >/dev/null 2>&1 || true  # Docker keeps nothing of them
echo "images.sh: imported $PAUSE_IMAGE $BUSYBOX_IMAGE $*"
