#!/usr/bin/env bash
# Starts the single-node test cluster: etcd (loopback), a containerd of its own,
# a CNI bridge, kube-apiserver, kubelet, kube-controller-manager (only its
# namespace and serviceaccount controllers) and kube-router (only its
# NetworkPolicy firewall; all from build.sh's cache), then imports the test
# images and creates the test namespace. Writes $KDIR/kubeconfig. Idempotent:
# a running cluster is left as is, except that a missing
# kube-controller-manager or kube-router is started beside it.
# Facts and fixes: the shared notes on the kubernetes test cluster (restrict_oom_score_adj,
# node IP on the bridge, kubelet preferred address type InternalIP).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
for b in kube-apiserver kubelet kube-controller-manager kube-router; do
  [[ -x "$KUBE_BIN/$b" ]] || { echo "start.sh: no $b in $KUBE_BIN: run build.sh" >&2; exit 1; }
done
# one start at a time on this machine (parallel test binaries may both try)
exec 9>"${KDIR%/}.start.lock"
flock 9
log="$KDIR/log"
nodeready() { "$here/kubectl.sh" get --raw "/api/v1/nodes/$NODE" 2>/dev/null | grep -q '"type":"Ready","status":"True"'; }
alive() { # the process runs (a zombie, dead but not yet reaped, does not)
  [[ -f "$KDIR/$1.pid" ]] || return 1
  local st; st="$(ps -o stat= -p "$(cat "$KDIR/$1.pid")" 2>/dev/null)"
  [[ -n "$st" && "$st" != Z* ]]
}
fail() { echo "start.sh: $*" >&2; for f in "$log"/*.log; do echo "== $f"; tail -20 "$f"; done >&2; "$here/stop.sh" >/dev/null 2>&1 || true; exit 1; }
waitfor() { # waitfor SECONDS what cmd...
  local n=$(( $1 * 5 )) what=$2; shift 2
  for ((i = 0; i < n; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  fail "$what did not come up"
}
bg() { # bg name cmd... : run detached in its own session, pid in $KDIR/name.pid
  local name=$1; shift
  setsid "$@" >"$log/$name.log" 2>&1 < /dev/null 9>&- &
  echo $! > "$KDIR/$name.pid"
}
# kube-controller-manager with only the controllers the tests need: namespace
# (deletes a namespace's contents, then the namespace) and serviceaccount (the
# "default" account of every namespace, which real clusters' admission needs
# before a pod is created). No scheduler: pods set nodeName. Loopback only; its
# health endpoint (always allowed) tells when it serves.
kcm_healthy() { curl -fsk --max-time 2 "https://127.0.0.1:$KCM_PORT/healthz" >/dev/null; }
start_kcm() { # 0 when it serves (started now or already running)
  alive kube-controller-manager && return 0
  mkdir -p "$KDIR/kcm"
  bg kube-controller-manager "$KUBE_BIN/kube-controller-manager" --kubeconfig "$KDIR/kubeconfig" \
    --controllers namespace-controller,serviceaccount-controller --leader-elect=false \
    --bind-address 127.0.0.1 --secure-port "$KCM_PORT" --cert-dir "$KDIR/kcm" \
    --concurrent-namespace-syncs 4 --profiling=false --v 1
  for ((i = 0; i < 300; i++)); do kcm_healthy && return 0; alive kube-controller-manager || break; sleep 0.2; done
  return 1
}
# kube-router as the NetworkPolicy enforcer only (the bridge CNI enforces
# nothing): iptables chains KUBE-ROUTER-*, KUBE-POD-FW-*, KUBE-NWPLCY-* and
# ipsets KUBE-SRC-*, KUBE-DST-* for the pods of this node; no routing, no
# service proxy, no CNI configuration, no port (its health endpoint would
# listen on every interface): it is up once its chain is hooked into FORWARD.
# stop.sh removes exactly those.
krouter_healthy() { iptables -S FORWARD 2>/dev/null | grep -q -- '-j KUBE-ROUTER-FORWARD'; }
start_krouter() { # 0 when it serves (started now or already running)
  alive kube-router && return 0
  bg kube-router "$KUBE_BIN/kube-router" --kubeconfig "$KDIR/kubeconfig" --hostname-override "$NODE" \
    --run-firewall=true --run-router=false --run-service-proxy=false --enable-cni=false \
    --service-cluster-ip-range "$SERVICE_CIDR" --health-port 0 --metrics-port 0 --v 1
  for ((i = 0; i < 300; i++)); do krouter_healthy && return 0; alive kube-router || break; sleep 0.2; done
  return 1
}
if [[ -f "$KDIR/kubeconfig" ]] && nodeready; then
  # A running cluster is never torn down here (others use it): a controller
  # manager or kube-router that does not come up is reported, nothing else is touched.
  start_kcm || { echo "start.sh: kube-controller-manager did not come up beside the running cluster:" >&2; tail -20 "$log/kube-controller-manager.log" >&2; exit 1; }
  start_krouter || { echo "start.sh: kube-router did not come up beside the running cluster:" >&2; tail -20 "$log/kube-router.log" >&2; exit 1; }
  echo "start.sh: cluster already running ($KDIR/kubeconfig)"; exit 0
fi
# a half-started or dead cluster: clear it first
[[ -d "$KDIR" ]] && "$here/stop.sh" >/dev/null 2>&1
mkdir -p "$KDIR"/{etcd,pki,log,containerd/root,containerd/state,cni/net.d,cni/ipam,kubelet,opt}

# --- etcd, loopback only, on ports of its own
bg etcd etcd --name steward --data-dir "$KDIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "steward=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "" 

# --- the CNI bridge with its gateway address (the kubelet's node IP lives on it)
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
  ip link add "$BRIDGE" type bridge
fi
ip addr replace "$BRIDGE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
ip link set "$BRIDGE" up
# Docker sets the FORWARD policy to DROP and bridged traffic passes iptables
# (br_netfilter): let pods on this bridge reach each other (sandbox -> relay).
iptables -C FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT -m comment --comment steward-kube 2>/dev/null ||
  iptables -I FORWARD 1 -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT -m comment --comment steward-kube
cni_bin=/usr/lib/cni; [[ -x $cni_bin/bridge ]] || cni_bin=/opt/cni/bin
cat > "$KDIR/cni/net.d/10-steward.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "steward-kube", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$KDIR/cni/ipam", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$BRIDGE_IP"}]]}},
  {"type": "loopback"}]}
JSON

# --- a containerd of its own (config, root, state, socket); never Docker's
cat > "$KDIR/containerd/config.toml" <<TOML
version = 2
root = "$KDIR/containerd/root"
state = "$KDIR/containerd/state"
[grpc]
  address = "$CTR_SOCK"
[ttrpc]
  address = "$CTR_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$KDIR/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin"
    conf_dir = "$KDIR/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = false
    Root = "$KDIR/containerd/runc"
TOML
bg containerd containerd --config "$KDIR/containerd/config.toml"

# --- credentials: a service-account key and a static admin token (loopback test cluster only)
[[ -f "$KDIR/pki/sa.key" ]] || openssl genrsa -out "$KDIR/pki/sa.key" 2048 2>/dev/null
token="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
echo "$token,steward-admin,steward-admin,system:masters" > "$KDIR/pki/tokens.csv"
cat > "$KDIR/kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: steward-test
  cluster:
    server: https://127.0.0.1:$API_PORT
    insecure-skip-tls-verify: true
users:
- name: steward-admin
  user:
    token: $token
contexts:
- name: steward-test
  context: {cluster: steward-test, user: steward-admin, namespace: $NAMESPACE}
current-context: steward-test
YAML
chmod 600 "$KDIR/kubeconfig" "$KDIR/pki/tokens.csv"

waitfor 30 etcd bash -c "exec 3<>/dev/tcp/127.0.0.1/$ETCD_PORT"
waitfor 30 containerd ctr -a "$CTR_SOCK" version

# --- kube-apiserver: loopback, token auth, AlwaysAllow, no ServiceAccount admission
bg kube-apiserver "$KUBE_BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" --etcd-prefix /steward-registry \
  --bind-address 127.0.0.1 --secure-port "$API_PORT" --advertise-address "$BRIDGE_IP" \
  --cert-dir "$KDIR/pki" --token-auth-file "$KDIR/pki/tokens.csv" \
  --authorization-mode AlwaysAllow --disable-admission-plugins ServiceAccount \
  --service-account-issuer https://steward-test.invalid --service-account-key-file "$KDIR/pki/sa.key" \
  --service-account-signing-key-file "$KDIR/pki/sa.key" --service-cluster-ip-range "$SERVICE_CIDR" \
  --kubelet-preferred-address-types InternalIP --enable-priority-and-fairness=false \
  --profiling=false --endpoint-reconciler-type none

# images go in while the apiserver starts
"$here/images.sh" >"$log/images.log" 2>&1 || fail "importing the images failed: $(tail -5 "$log/images.log")"
waitfor 60 kube-apiserver "$here/kubectl.sh" get --raw /readyz

# --- kubelet: node IP and serving address on the bridge (its port stays private)
cat > "$KDIR/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $BRIDGE_IP
port: 10250
readOnlyPort: 0
healthzPort: 0
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$CTR_SOCK
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
registerNode: true
serializeImagePulls: false
maxPods: 250
podPidsLimit: -1
resolvConf: ""
podLogsDir: $KDIR/pod-logs
YAML
cat > "$KDIR/kubelet/kubeconfig" < "$KDIR/kubeconfig"
# What the kubelet makes outside $KDIR whatever its flags (fixed paths, its
# cgroup hierarchy): noted when absent now, so that stop.sh removes exactly that.
for p in /var/lib/kubelet /var/log/pods /var/log/containers /sys/fs/cgroup/*/kubepods; do
  [[ "$p" == *"*"* ]] && continue
  [[ -e "$p" ]] || echo "$p" >> "$KDIR/created.list"
done
for c in /sys/fs/cgroup/*/; do [[ -e "${c}kubepods" ]] || echo "${c}kubepods" >> "$KDIR/created.list"; done
# ...and the iptables chains it makes (KUBE-FIREWALL, KUBE-KUBELET-CANARY,
# KUBE-IPTABLES-HINT, in every table, IPv4 and IPv6): the KUBE-* chains that
# exist now are not ours, stop.sh removes the others.
for t in iptables ip6tables; do
  "$t-save" 2>/dev/null | awk -v t="$t" '/^\*/ {tb = substr($1, 2)} /^:KUBE-/ {print t, tb, substr($1, 2)}'
done > "$KDIR/chains.before"
bg kubelet "$KUBE_BIN/kubelet" --config "$KDIR/kubelet/config.yaml" --kubeconfig "$KDIR/kubelet/kubeconfig" \
  --root-dir "$KDIR/kubelet/root" --cert-dir "$KDIR/kubelet/pki" --hostname-override "$NODE" \
  --node-ip "$BRIDGE_IP" --v 1
waitfor 90 "node $NODE" nodeready
start_kcm || fail "kube-controller-manager did not come up"
start_krouter || fail "kube-router did not come up"

# --- the test namespace
"$here/kubectl.sh" get --raw "/api/v1/namespaces/$NAMESPACE" >/dev/null 2>&1 ||
  "$here/kubectl.sh" create-namespace "$NAMESPACE"
echo "start.sh: cluster up: KUBECONFIG=$KDIR/kubeconfig node=$NODE namespace=$NAMESPACE"
