#!/usr/bin/env bash
# Starts a second Docker engine beside the first, with its own socket, data root, exec root
# and pidfile (for env workers over many engines and their test), and loads the task images
# into it from the first engine. Like the first (scripts/start-dockerd.sh) it makes no bridge
# and touches no iptables, so the two engines do not fight over the network.
#   bash scripts/start-second-dockerd.sh [DIR]        start (idempotent); prints the socket URL last
#   bash scripts/start-second-dockerd.sh --stop [DIR] stop it (SIGTERM, waits for the pidfile to go)
#   bash scripts/start-second-dockerd.sh --quota [DIR] start it on a btrfs data root with quotas
#     (scripts/quota-data-root.sh: DIR/data is a btrfs loop file DIR/btrfs.img), so it caps each
#     container's writable layer: the engine of the OS writable-budget tests. Exits 3 when the
#     btrfs data root cannot be made (no root, no btrfs-progs, no loop device, no btrfs).
# DIR defaults to /tmp/agentrl-dockerd2 (socket DIR/docker.sock, data DIR/data, exec DIR/exec);
# with --quota to /var/lib/agentrl-dockerd-quota (the loop file must be on disk, not a tmpfs).
# Images: AGENTRL_SECOND_DOCKERD_IMAGES (unset: "agentrl/os:latest"; empty: none), each copied
# only when missing or different (docker save | docker load).
set -euo pipefail

stop=0
quota=0
while [ $# -gt 0 ]; do
  case "$1" in
    --stop) stop=1; shift ;;
    --quota) quota=1; shift ;;
    *) break ;;
  esac
done
if [ "$quota" = 1 ]; then dir=${1:-/var/lib/agentrl-dockerd-quota}; else dir=${1:-/tmp/agentrl-dockerd2}; fi
sock="$dir/docker.sock"
pidfile="$dir/dockerd.pid"
second=(docker -H "unix://$sock")
say() { echo "[second-dockerd] $*" >&2; }

if [ "$stop" = 1 ]; then
  if [ -f "$pidfile" ]; then
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    say "stopped (pid $pid)"
  fi
  exit 0
fi

if ! "${second[@]}" info >/dev/null 2>&1; then
  if ! command -v dockerd >/dev/null 2>&1; then say "dockerd not installed (apt-get install docker.io)"; exit 2; fi
  if [ "$(id -u)" != 0 ]; then say "not root: cannot start a second dockerd"; exit 2; fi
  if ! docker info >/dev/null 2>&1; then say "the first Docker engine does not answer (bash scripts/start-dockerd.sh)"; exit 2; fi
  mkdir -p "$dir/exec"
  storage=()
  if [ "$quota" = 1 ]; then
    if ! bash "$(dirname "$0")/quota-data-root.sh" "$dir/data" "$dir/btrfs.img"; then
      say "no btrfs data root with quotas (see the line above): no quota engine"
      exit 3
    fi
    storage=(--storage-driver btrfs)
  fi
  mkdir -p "$dir/data"
  say "starting dockerd on unix://$sock"
  nohup dockerd --host "unix://$sock" --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$pidfile" "${storage[@]}" \
    --bridge=none --iptables=false --ip-forward=false --ip-masq=false \
    >"$dir/dockerd.log" 2>&1 &
  for _ in $(seq 1 60); do "${second[@]}" info >/dev/null 2>&1 && break; sleep 0.5; done
  if ! "${second[@]}" info >/dev/null 2>&1; then say "dockerd did not come up; see $dir/dockerd.log"; tail -5 "$dir/dockerd.log" >&2; exit 1; fi
fi

for image in ${AGENTRL_SECOND_DOCKERD_IMAGES-agentrl/os:latest}; do
  source_id=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
  if [ -z "$source_id" ]; then say "$image is not on the first engine (agentrl env build): not copied"; continue; fi
  target_id=$("${second[@]}" image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
  if [ "$source_id" = "$target_id" ]; then continue; fi
  say "loading $image from the first engine"
  docker save "$image" | "${second[@]}" load >/dev/null
done
echo "unix://$sock"
