#!/usr/bin/env bash
# Mounts a btrfs file system with quotas at DIR, made in a sparse loop file IMAGE, so a Docker
# engine started with `--data-root DIR --storage-driver btrfs` caps each container's writable
# layer (`--storage-opt size`, a btrfs qgroup limit): one on-disk write budget per container,
# the whole root writable. (XFS project quotas would do the same with overlay2, but kernels
# built without XFS quota support, like this machine's, refuse `-o pquota`.)
#   bash scripts/quota-data-root.sh DIR IMAGE
# Idempotent: a btrfs already mounted at DIR gets quotas enabled and is kept. Exits non-zero,
# saying which step failed, when any step fails (no root, no mkfs.btrfs, no loop device, no
# btrfs in the kernel, quotas refused); callers then fall back to the plain data root.
# The file's size: half the free space of IMAGE's file system, between 8 and 100 GiB (sparse:
# only what is written takes disk space).
set -uo pipefail
dir=${1:?usage: quota-data-root.sh DIR IMAGE}
image=${2:?usage: quota-data-root.sh DIR IMAGE}
say() { echo "[quota-data-root] $*" >&2; }

is_btrfs_mount() { [ "$(findmnt -n -o FSTYPE --mountpoint "$1" 2>/dev/null)" = btrfs ]; }

if [ -d "$dir" ] && is_btrfs_mount "$dir"; then
  btrfs quota enable "$dir" 2>/dev/null || { say "btrfs quotas refused on $dir"; exit 1; }
  say "$dir is btrfs with quotas already"
  exit 0
fi
[ "$(id -u)" = 0 ] || { say "not root"; exit 1; }
command -v mkfs.btrfs >/dev/null 2>&1 || { say "mkfs.btrfs missing (apt-get install btrfs-progs)"; exit 1; }
command -v losetup >/dev/null 2>&1 || { say "losetup missing"; exit 1; }
grep -qw btrfs /proc/filesystems || modprobe btrfs 2>/dev/null || { say "the kernel has no btrfs"; exit 1; }
if [ -d "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then say "$dir exists and is not empty: not mounting over it"; exit 1; fi
mkdir -p "$dir" "$(dirname "$image")" || { say "cannot make $dir"; exit 1; }

if [ ! -f "$image" ]; then
  free_kib=$(df -k --output=avail "$(dirname "$image")" | tail -1)
  size_gib=$(( free_kib / 1024 / 1024 / 2 ))
  [ "$size_gib" -gt 100 ] && size_gib=100
  if [ "$size_gib" -lt 8 ]; then say "only $((free_kib / 1024 / 1024)) GiB free beside $image"; exit 1; fi
  truncate -s "${size_gib}G" "$image" || { say "cannot make $image"; exit 1; }
  if ! mkfs.btrfs -q -f "$image" >/dev/null 2>&1; then say "mkfs.btrfs failed"; rm -f "$image"; exit 1; fi
fi
device=$(losetup -j "$image" | cut -d: -f1 | head -1)
if [ -z "$device" ]; then
  device=$(losetup -f --show "$image" 2>/dev/null) || { say "no free loop device (losetup -f failed)"; exit 1; }
fi
if ! mount -t btrfs "$device" "$dir"; then say "mount of $device failed"; losetup -d "$device" 2>/dev/null; exit 1; fi
if ! btrfs quota enable "$dir"; then say "btrfs quotas refused"; umount "$dir"; losetup -d "$device" 2>/dev/null; exit 1; fi
say "$dir: btrfs with quotas on $device ($image)"
