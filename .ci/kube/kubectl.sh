#!/usr/bin/env bash
# A tiny stand-in for kubectl (Debian's is older than the cluster): raw GETs and
# namespace creation with curl and the test kubeconfig's token.
#   kubectl.sh get --raw PATH | kubectl.sh create-namespace NAME | kubectl.sh delete-raw PATH
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/env.sh"
token="$(sed -n 's/^ *token: //p' "$KDIR/kubeconfig")"
api="https://127.0.0.1:$API_PORT"
c=(curl -fsSk --max-time 10 -A steward-kube-sh -H "Authorization: Bearer $token")
case "$1" in
  get) "${c[@]}" "$api$3" ;;
  create-namespace) "${c[@]}" -X POST -H 'Content-Type: application/json' \
      -d "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$2\"}}" "$api/api/v1/namespaces" >/dev/null ;;
  delete-raw) "${c[@]}" -X DELETE "$api$2" >/dev/null ;;
  *) echo "kubectl.sh: unknown command $1" >&2; exit 2 ;;
esac
