#!/usr/bin/env bash
# Installs what the test cluster needs from Debian, only when missing:
# etcd (etcd-server), containerd + runc, the CNI plugins, busybox-static (test image),
# ipset and iptables (kube-router's NetworkPolicy enforcement).
set -euo pipefail
need=()
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[[ -x /usr/lib/cni/bridge || -x /opt/cni/bin/bridge ]] || need+=(containernetworking-plugins)
[[ -x /bin/busybox ]] || need+=(busybox-static)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v ipset >/dev/null 2>&1 || need+=(ipset)
if ((${#need[@]})); then
  echo "install.sh: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1 || {
    apt-get update >/dev/null
    apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
  }
  # Debian's etcd-server package enables and starts a system etcd on the default ports; the
  # test cluster runs its own on a loopback port, so stop that one if the package started it.
  if [[ " ${need[*]} " == *" etcd-server "* ]] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now etcd >/dev/null 2>&1 || true
  fi
fi
echo "install.sh: etcd $(etcd --version 2>/dev/null | head -1 | awk '{print $3}'), containerd $(containerd --version | awk '{print $3}')"
