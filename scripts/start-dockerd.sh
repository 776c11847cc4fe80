#!/usr/bin/env bash
# Starts a Docker engine when none answers (no systemd here). Containers get no network
# unless a task asks for loopback: the engine makes no bridge and touches no iptables.
set -euo pipefail
if docker info >/dev/null 2>&1; then echo "[setup] Docker engine is running"; exit 0; fi
if ! command -v dockerd >/dev/null 2>&1; then echo "[setup] dockerd not installed (apt-get install docker.io)"; exit 1; fi
if [ "$(id -u)" != 0 ]; then echo "[setup] not root: start dockerd by hand"; exit 1; fi

# Optional (AGENTRL_QUOTA_DATA_ROOT=1; needs btrfs-progs): the data root on a btrfs loop file
# with quotas, so each OS container gets one on-disk write budget over its whole writable
# root (`--storage-opt size`), as the original's writable root. Off by default: measured on a
# loaded 2-core machine, removing a container took ~4-11 s on btrfs against ~0.4-1.2 s on
# overlay2/ext4. Without it (or when any step fails: then this falls back, never fails the
# start) OS containers get a read-only root with tmpfs folders.
data_root=${AGENTRL_DOCKER_DATA_ROOT:-/var/lib/agentrl-docker}
quota_args=()
if [ "${AGENTRL_QUOTA_DATA_ROOT:-0}" = 1 ]; then
  if bash "$(dirname "$0")/quota-data-root.sh" "$data_root" "${data_root}.img"; then
    quota_args=(--data-root "$data_root" --storage-driver btrfs)
    echo "[setup] Docker data root: btrfs with quotas at $data_root (one disk budget per container)"
  else
    echo "[setup] no btrfs data root with quotas (see the line above): the default data root; OS containers get a read-only root with tmpfs folders"
  fi
fi

start() {
  echo "[setup] starting dockerd $*"
  nohup dockerd --bridge=none --iptables=false --ip-forward=false --ip-masq=false "$@" \
    >>/var/log/agentrl-dockerd.log 2>&1 &
  echo $! >/run/agentrl-dockerd.pid 2>/dev/null || true
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && { echo "[setup] Docker engine is up"; return 0; }; sleep 1; done
  return 1
}
if start "${quota_args[@]}"; then exit 0; fi
if [ ${#quota_args[@]} -gt 0 ]; then
  echo "[setup] dockerd did not come up on the btrfs data root: starting it on the default one"
  kill "$(cat /run/agentrl-dockerd.pid)" 2>/dev/null || true
  sleep 2
  if start; then exit 0; fi
fi
echo "[setup] dockerd did not come up; see /var/log/agentrl-dockerd.log"; exit 1
