#!/bin/sh
# Copies a static busybox into image/ so `docker build` needs no base image.
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
cp "$bb" "$here/image/busybox"
echo "copied $bb to $here/image/busybox"
