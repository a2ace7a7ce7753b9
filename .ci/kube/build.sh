#!/usr/bin/env bash
# Builds kube-apiserver, kubelet and kube-controller-manager from the module k8s.io/kubernetes
# (through the Go module proxy) into a cache directory outside the repository. A warm run only
# checks the stamp file; a cache missing only some binaries (one built before a binary was added
# here) builds just those, reusing the Go build cache of the others (same flags).
# kube-router (NetworkPolicy enforcement only) is built from its own module, cached beside them.
# Usage: .ci/kube/build.sh   (env: KUBE_VERSION, KUBE_ROUTER_VERSION, STEWARD_KUBE_CACHE)
set -euo pipefail
KUBE_VERSION="${KUBE_VERSION:-v1.34.3}"
STAGING_VERSION="v0${KUBE_VERSION#v1}"          # v1.34.3 -> v0.34.3
CACHE="${STEWARD_KUBE_CACHE:-/var/cache/steward-kube}/${KUBE_VERSION}"
BIN="$CACHE/bin"
KUBE_ROUTER_VERSION="${KUBE_ROUTER_VERSION:-v2.1.0}"
# kube-router: a module without replace directives, so `go install module@version` builds it.
if [[ ! -x "$BIN/kube-router" || ! -f "$BIN/.kube-router-stamp" || "$(cat "$BIN/.kube-router-stamp")" != "$KUBE_ROUTER_VERSION" ]]; then
  echo "build.sh: building kube-router $KUBE_ROUTER_VERSION"
  mkdir -p "$BIN"
  rm -f "$BIN/.kube-router-stamp"
  tmpbin="$(mktemp -d)"
  GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local GOBIN="$tmpbin" nice -n 19 \
    go install -trimpath -ldflags "-s -w" "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@${KUBE_ROUTER_VERSION}"
  mv -f "$tmpbin/kube-router" "$BIN/kube-router"; rmdir "$tmpbin"
  echo "$KUBE_ROUTER_VERSION" > "$BIN/.kube-router-stamp"
fi
BINARIES=(kube-apiserver kubelet kube-controller-manager)
missing=()
if [[ -f "$BIN/.stamp" && "$(cat "$BIN/.stamp")" == "$KUBE_VERSION" ]]; then
  for b in "${BINARIES[@]}"; do [[ -x "$BIN/$b" ]] || missing+=("$b"); done
else
  missing=("${BINARIES[@]}")
fi
if ((${#missing[@]} == 0)); then
  echo "kube binaries $KUBE_VERSION cached in $BIN"
  exit 0
fi
echo "build.sh: building ${missing[*]} $KUBE_VERSION"
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
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
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
# Each binary is written beside its final name and renamed: a running cluster keeps the old
# file (a rename never touches a running executable).
rm -f "$BIN/.stamp"
for b in "${missing[@]}"; do
  nice -n 19 go build -trimpath -ldflags "$LD" -o "$BIN/.$b.new" "k8s.io/kubernetes/cmd/$b"
  mv -f "$BIN/.$b.new" "$BIN/$b"
done
echo "$KUBE_VERSION" > "$BIN/.stamp"
"$BIN/kube-apiserver" --version
