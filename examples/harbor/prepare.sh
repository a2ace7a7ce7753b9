#!/bin/sh
# Copies a static busybox beside each task's environment/Dockerfile, so the
# images build FROM scratch and nothing is pulled.
# On Debian/Ubuntu: apt-get install -y busybox-static
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bb=$(command -v busybox || true)
if [ -z "$bb" ]; then
  echo "busybox not found: install busybox-static (apt-get install -y busybox-static)" >&2
  exit 1
fi
if ! file "$bb" 2>/dev/null | grep -q 'statically linked' && ldd "$bb" >/dev/null 2>&1; then
  echo "$bb is dynamically linked: install busybox-static" >&2
  exit 1
fi
for env in "$here"/dataset/*/environment; do
  cp "$bb" "$env/busybox"
  echo "copied $bb to $env/busybox"
done
