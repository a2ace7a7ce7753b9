# Shared settings of the test cluster scripts (sourced). Every name, port and
# path is the cluster's own so that it never touches Docker's containerd.
KUBE_VERSION="${KUBE_VERSION:-v1.34.3}"
STEWARD_KUBE_CACHE="${STEWARD_KUBE_CACHE:-/var/cache/steward-kube}"
KUBE_BIN="${STEWARD_KUBE_CACHE}/${KUBE_VERSION}/bin"
KDIR="${STEWARD_KUBE_DIR:-/tmp/steward-kube}"      # all state; removed by stop.sh
ETCD_PORT="${STEWARD_KUBE_ETCD_PORT:-23790}"
ETCD_PEER_PORT="${STEWARD_KUBE_ETCD_PEER_PORT:-23800}"
API_PORT="${STEWARD_KUBE_API_PORT:-26443}"
KCM_PORT="${STEWARD_KUBE_KCM_PORT:-26457}"          # kube-controller-manager's health endpoint
SERVICE_CIDR="${STEWARD_KUBE_SERVICE_CIDR:-10.97.0.0/24}"
BRIDGE="${STEWARD_KUBE_BRIDGE:-stwk0}"
POD_CIDR="${STEWARD_KUBE_POD_CIDR:-10.88.0.0/16}"
BRIDGE_IP="${STEWARD_KUBE_BRIDGE_IP:-10.88.0.1}"
NODE="${STEWARD_KUBE_NODE:-steward-node}"
NAMESPACE="${STEWARD_KUBE_NAMESPACE:-steward-test}"
CTR_SOCK="$KDIR/containerd/containerd.sock"
PAUSE_IMAGE="steward.local/pause:1"
BUSYBOX_IMAGE="steward.local/busybox:1"
