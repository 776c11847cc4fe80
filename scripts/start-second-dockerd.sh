#!/usr/bin/env bash
# Starts a second Docker engine beside the first, with its own socket, data root, exec root
# and pidfile (for env workers over many engines and their test), and loads the task images
# into it from the first engine. Like the first (scripts/start-dockerd.sh) it makes no bridge
# and touches no iptables, so the two engines do not fight over the network.
#   bash scripts/start-second-dockerd.sh [DIR]        start (idempotent); prints the socket URL last
#   bash scripts/start-second-dockerd.sh --stop [DIR] stop it (SIGTERM, waits for the pidfile to go)
# DIR defaults to /tmp/agentrl-dockerd2 (socket DIR/docker.sock, data DIR/data, exec DIR/exec).
# Images: AGENTRL_SECOND_DOCKERD_IMAGES (unset: "agentrl/os:latest"; empty: none), each copied
# only when missing or different (docker save | docker load).
set -euo pipefail

stop=0
if [ "${1:-}" = "--stop" ]; then stop=1; shift; fi
dir=${1:-/tmp/agentrl-dockerd2}
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
  mkdir -p "$dir/data" "$dir/exec"
  say "starting dockerd on unix://$sock"
  nohup dockerd --host "unix://$sock" --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$pidfile" \
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
