#!/usr/bin/env bash
# What the test suite leaves in Docker: every container, network, volume and
# image labelled dev.steward.managed=true that was not there before it ran.
#   leftovers.sh snapshot FILE   record what is there now
#   leftovers.sh check FILE      fail, naming each, if anything was added since
#                                (and remove FILE)
# Without a Docker daemon there is nothing to leave, and both succeed. It
# sees the whole daemon: a Steward run or another checkout's suite running
# on the same daemon meanwhile shows up here too.
set -euo pipefail
timeout 10 docker info >/dev/null 2>&1 || exit 0
list() {
  local f=label=dev.steward.managed=true
  { docker ps -aq --no-trunc --filter "$f" | sed 's/^/container /'
    docker network ls -q --no-trunc --filter "$f" | sed 's/^/network /'
    docker volume ls -q --filter "$f" | sed 's/^/volume /'
    docker images -q --no-trunc --filter "$f" | sed 's/^/image /'
  } | sort -u
}
case "${1:-}" in
snapshot) list >"$2" ;;
check)
  if [ ! -f "$2" ]; then
    echo "leftovers: no snapshot from before the suite (no Docker daemon then); not checked"
    exit 0
  fi
  trap 'rm -f "$2"' EXIT
  left=$(comm -13 "$2" <(list))
  if [ -n "$left" ]; then
    echo "leftovers: the tests left these in Docker:"
    while read -r kind id; do
      case "$kind" in
      image) what=$(docker image inspect -f '{{join .RepoTags ","}} task={{index .Config.Labels "dev.steward.task"}} scope={{index .Config.Labels "dev.steward.lock-scope"}}' "$id" 2>/dev/null || true) ;;
      volume | network) what=$(docker "$kind" inspect -f '{{.Name}} task={{index .Labels "dev.steward.task"}}' "$id" 2>/dev/null || true) ;;
      container) what=$(docker inspect -f '{{.Name}} task={{index .Config.Labels "dev.steward.task"}}' "$id" 2>/dev/null || true) ;;
      esac
      echo "  $kind ${id:0:19} $what"
    done <<<"$left"
    exit 1
  fi ;;
*) echo "usage: leftovers.sh snapshot|check FILE" >&2; exit 2 ;;
esac
