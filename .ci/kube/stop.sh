#!/usr/bin/env bash
# Stops the test cluster and leaves nothing: kube-controller-manager stopped,
# pods deleted through the API (so the kubelet tears down their containers
# and networks), then the kubelet, apiserver, containerd (and its shims) and etcd stopped, leftover
# mounts and network namespaces on the bridge removed, the bridge and its
# iptables rule deleted, and the state directory removed. Safe to run twice.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
[[ -d "$KDIR" ]] || { ip link del "$BRIDGE" 2>/dev/null; rm -f "${KDIR%/}.start.lock"; exit 0; }
alive() { [[ -f "$KDIR/$1.pid" ]] && kill -0 "$(cat "$KDIR/$1.pid")" 2>/dev/null; }
stopproc() { # stopproc name: TERM, then KILL after 10 s
  alive "$1" || return 0
  local pid; pid="$(cat "$KDIR/$1.pid")"
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null
}
# the controllers first: nothing reacts to what follows
stopproc kube-controller-manager
stopproc kube-router
# kube-router's NetworkPolicy state (it leaves its rules when stopped): the
# jumps from the built-in chains, its chains, its ipsets — by its names only.
for chain in INPUT FORWARD OUTPUT; do
  iptables -S "$chain" 2>/dev/null | grep -E -- '-j KUBE-ROUTER-(INPUT|FORWARD|OUTPUT)( |$)' | sed 's/^-A /-D /' |
    while read -r rule; do eval "iptables $rule" 2>/dev/null; done
done
krchains="$(iptables -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-(ROUTER-(INPUT|FORWARD|OUTPUT)|POD-FW-|NWPLCY-)/ {print $2}')"
for c in $krchains; do iptables -F "$c" 2>/dev/null; done
for c in $krchains; do iptables -X "$c" 2>/dev/null; done
if command -v ipset >/dev/null 2>&1; then
  for s in $(ipset list -n 2>/dev/null | grep -E '^KUBE-(SRC|DST)-'); do ipset destroy "$s" 2>/dev/null; done
fi
if alive kube-apiserver && alive kubelet; then
  # every pod of every namespace, immediately; the kubelet confirms each removal
  for ns in $("$here/kubectl.sh" get --raw /api/v1/pods 2>/dev/null | grep -o '"namespace":"[^"]*"' | sort -u | cut -d'"' -f4); do
    "$here/kubectl.sh" delete-raw "/api/v1/namespaces/$ns/pods?gracePeriodSeconds=0" 2>/dev/null
  done
  for _ in $(seq 100); do
    "$here/kubectl.sh" get --raw /api/v1/pods 2>/dev/null | grep -q '"kind":"Pod"' || break
    sleep 0.2
  done
fi
stopproc kubelet
# whatever pod sandboxes remain (a killed kubelet): stop them through containerd
if alive containerd; then
  for t in $(ctr -a "$CTR_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$CTR_SOCK" -n k8s.io tasks kill -s KILL "$t" >/dev/null 2>&1; done
  sleep 0.5
  for t in $(ctr -a "$CTR_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$CTR_SOCK" -n k8s.io tasks delete -f "$t" >/dev/null 2>&1; done
fi
stopproc kube-apiserver
stopproc containerd
# the runc shims of this containerd (their command line names its socket)
for pid in $(pgrep -f -- "-address $CTR_SOCK" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
stopproc etcd
# network namespaces whose pod end sits on this cluster's bridge
for ns in $(ls /var/run/netns 2>/dev/null | grep '^cni-'); do
  peer="$(ip -n "$ns" -o link show eth0 2>/dev/null | sed -n 's/.*eth0@if\([0-9]*\).*/\1/p')"
  [[ -n "$peer" ]] && ip -o link show 2>/dev/null | grep -q "^$peer: .* master $BRIDGE " && ip netns delete "$ns" 2>/dev/null
done
# what the kubelet made outside the state directory (listed by start.sh)
if [[ -f "$KDIR/created.list" ]]; then
  while read -r p; do
    case "$p" in
      /sys/fs/cgroup/*) [[ -d "$p" ]] && find "$p" -depth -type d -exec rmdir {} \; 2>/dev/null ;;
      *) rm -rf -- "$p" ;;
    esac
  done < "$KDIR/created.list"
fi
# the kubelet's iptables chains (those start.sh did not find): the jumps to
# them from the built-in chains, then the chains themselves
if [[ -f "$KDIR/chains.before" ]]; then
  for t in iptables ip6tables; do
    for tb in filter nat mangle; do
      mine="$("$t-save" -t "$tb" 2>/dev/null | awk '/^:KUBE-/ {print substr($1, 2)}' |
        grep -v -x -F -f <(awk -v t="$t" -v tb="$tb" '$1 == t && $2 == tb {print $3}' "$KDIR/chains.before"))"
      [[ -n "$mine" ]] || continue
      for c in $mine; do
        "$t" -t "$tb" -S 2>/dev/null | grep -E -- "^-A [A-Z]+ .*-j $c( |\$)" | grep -v -- "^-A KUBE-" | sed 's/^-A /-D /' |
          while read -r rule; do eval "$t -t $tb $rule" 2>/dev/null; done
      done
      for c in $mine; do "$t" -t "$tb" -F "$c" 2>/dev/null; done
      for c in $mine; do "$t" -t "$tb" -X "$c" 2>/dev/null; done
    done
  done
fi
# mounts under the state directory, deepest first
grep -o " $KDIR[^ ]*" /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
while iptables -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT -m comment --comment steward-kube 2>/dev/null; do :; done
ip link del "$BRIDGE" 2>/dev/null
rm -rf "$KDIR" "${KDIR%/}.start.lock"
echo "stop.sh: cluster stopped, $KDIR removed"
