#!/usr/bin/env bash
# Builds kube-apiserver and kubelet from the module k8s.io/kubernetes (through the Go module
# proxy) into a cache directory outside the repository. A warm run only checks the stamp file.
# Usage: .ci/kube/build.sh   (env: KUBE_VERSION, STEWARD_KUBE_CACHE)
set -euo pipefail
KUBE_VERSION="${KUBE_VERSION:-v1.34.3}"
STAGING_VERSION="v0${KUBE_VERSION#v1}"          # v1.34.3 -> v0.34.3
CACHE="${STEWARD_KUBE_CACHE:-/var/cache/steward-kube}/${KUBE_VERSION}"
BIN="$CACHE/bin"
if [[ -x "$BIN/kube-apiserver" && -x "$BIN/kubelet" && -f "$BIN/.stamp" && "$(cat "$BIN/.stamp")" == "$KUBE_VERSION" ]]; then
  echo "kube binaries $KUBE_VERSION cached in $BIN"
  exit 0
fi
mkdir -p "$BIN"
MOD="$CACHE/src"
rm -rf "$MOD"; mkdir -p "$MOD"
cd "$MOD"
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local
cat > go.mod <<GOMOD
module steward.local/kubebuild

go 1.24
GOMOD
cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
# The staging replaces come from k8s.io/kubernetes' own go.mod: every "./staging/..." target
# maps to the published module of the same name at the staging version.
kmod="$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
[[ -f "$kmod" ]] || { echo "build.sh: cannot read go.mod of k8s.io/kubernetes@${KUBE_VERSION}" >&2; exit 1; }
replaces=()
while read -r name; do replaces+=("$name"); done < <(awk '/=> \.\/staging\//{print $1}' "$kmod" | sort -u)
echo "build.sh: ${#replaces[@]} staging replaces"
go mod edit -require="k8s.io/kubernetes@${KUBE_VERSION}"
for r in "${replaces[@]}"; do go mod edit -replace="${r}=${r}@${STAGING_VERSION}"; done
go mod tidy
LD="-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION}"
maj="${KUBE_VERSION#v}"; maj="${maj%%.*}"; min="${KUBE_VERSION#v*.}"; min="${min%%.*}"
LD="$LD -X k8s.io/component-base/version.gitMajor=${maj} -X k8s.io/component-base/version.gitMinor=${min}"
LD="$LD -X k8s.io/component-base/version.gitTreeState=clean"
LD="$LD -X k8s.io/client-go/pkg/version.gitVersion=${KUBE_VERSION} -X k8s.io/client-go/pkg/version.gitMajor=${maj} -X k8s.io/client-go/pkg/version.gitMinor=${min}"
nice -n 19 go build -trimpath -ldflags "$LD" -o "$BIN/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
nice -n 19 go build -trimpath -ldflags "$LD" -o "$BIN/kubelet" k8s.io/kubernetes/cmd/kubelet
echo "$KUBE_VERSION" > "$BIN/.stamp"
"$BIN/kube-apiserver" --version
