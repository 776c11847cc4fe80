#!/usr/bin/env bash
# Installs what a fresh machine needs to run agentrl and its tests. Safe to run twice.
#   bash scripts/setup.sh            everything
#   SKIP_DOCKER=1 bash scripts/setup.sh   no Docker engine or images
# Without root, steps that need root are skipped with a line saying what to install by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
as_root() { [ "$(id -u)" = 0 ]; }

# --- 1. Debian packages -------------------------------------------------------------
APT_PACKAGES=(docker.io debootstrap)
missing=()
for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  if as_root; then
    say "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    say "not root: install these by hand: sudo apt-get install ${missing[*]}"
  fi
else
  say "Debian packages present"
fi

# Chromium for the dashboard's browser test (packages/dashboard, driven by playwright-core).
if ! dpkg -s chromium >/dev/null 2>&1; then
  if as_root; then
    say "installing chromium (dashboard browser test)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
      || say "apt-get failed: the dashboard's browser test will skip"
  else
    say "not root: for the dashboard's browser test install by hand: sudo apt-get install chromium"
  fi
fi

# --- 2. Node packages and build -----------------------------------------------------
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "npm ci"
  npm ci --no-audit --no-fund
fi
say "building TypeScript"
npm run build --silent

# --- 3. Docker engine and images ----------------------------------------------------
# The OS and DB tasks run in local images (agentrl/os, agentrl/db) built from a Debian
# debootstrap rootfs: no image registry is needed. `agentrl env build` skips images whose
# content hash is unchanged, so a second run takes a second.
if [ "${SKIP_DOCKER:-0}" != 1 ]; then
  if bash scripts/start-dockerd.sh; then
    say "building the task images (agentrl env build)"
    npm run --silent agentrl -- env build \
      || say "env build failed: OS and DB tasks (and their tests) will be unavailable"
    say "building the runtime image agentrl/runtime (agentrl env build --image runtime)"
    npm run --silent agentrl -- env build --image runtime \
      || say "runtime image build failed: deploy/swarm (and test/swarm.test.ts) will be unavailable"
  else
    say "no Docker engine: OS and DB tasks will be unavailable"
  fi
fi

# --- 3b. The quota engine (optional) ------------------------------------------------
# A second Docker engine on a btrfs data root with quotas (a sparse loop file in
# /var/lib/agentrl-dockerd-quota), which caps each container's writable layer: the OS
# writable-budget tests run on it (packages/envs/src/docker/quota-engine.ts); the first
# engine keeps its plain data root (container removal on btrfs takes 4-20 s, not ~1 s).
# Measured here: ~30 s (mostly copying agentrl/os into it), ~0.5 GB of disk, dockerd +
# containerd ~125 MB of RAM. Any failure here only makes those tests skip, saying why.
# SKIP_QUOTA_ENGINE=1 skips this step.
if [ "${SKIP_DOCKER:-0}" != 1 ] && [ "${SKIP_QUOTA_ENGINE:-0}" != 1 ]; then
  if as_root; then
    if ! command -v mkfs.btrfs >/dev/null 2>&1; then
      say "installing btrfs-progs (the quota engine of the OS writable-budget tests)"
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq btrfs-progs >/dev/null; } \
        || say "apt-get failed: no btrfs-progs"
    fi
    if docker info >/dev/null 2>&1 && bash scripts/start-second-dockerd.sh --quota >/dev/null; then
      say "quota engine up (unix:///var/lib/agentrl-dockerd-quota/docker.sock, btrfs with quotas)"
    else
      say "no quota engine (see the lines above): the OS writable-budget tests will skip"
    fi
  else
    say "not root: no quota engine, the OS writable-budget tests will skip (sudo bash scripts/start-second-dockerd.sh --quota)"
  fi
fi

# --- 4. Notebooks: Jupyter and the tslab kernel -------------------------------------
# notebooks/*.ipynb run on tslab, a TypeScript Jupyter kernel (a root devDependency, so
# `npm ci` above installed it), under Debian's Jupyter; `bash scripts/run-notebooks.sh`
# executes them headless (test/notebooks.test.ts does, and skips when this step did not
# run). SKIP_NOTEBOOKS=1 skips this step.
if [ "${SKIP_NOTEBOOKS:-0}" != 1 ]; then
  NOTEBOOK_APT_PACKAGES=(jupyter-nbconvert python3-nbclient jupyter-client python3-ipython)
  missing=()
  for p in "${NOTEBOOK_APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    if as_root; then
      say "installing Jupyter for the notebooks: ${missing[*]}"
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } \
        || say "apt-get failed: the notebooks (and their test) will be unavailable"
    else
      say "not root: for the notebooks install by hand: sudo apt-get install ${missing[*]}"
    fi
  fi
  kernel_spec_present() {
    /usr/bin/python3 -c "from jupyter_client.kernelspec import KernelSpecManager as K; K().get_kernel_spec('tslab')" >/dev/null 2>&1
  }
  if ! /usr/bin/python3 -c "import jupyter_client" >/dev/null 2>&1; then
    say "no Jupyter in /usr/bin/python3: notebooks unavailable"
  elif kernel_spec_present; then
    say "tslab kernel spec present"
  else
    # Kernel spec argv is `tslab kernel ...`: run-notebooks.sh puts node_modules/.bin on PATH.
    say "installing the tslab Jupyter kernel spec"
    npx --no-install tslab install --python /usr/bin/python3 >/dev/null \
      || say "tslab install failed: notebooks unavailable"
  fi
fi
say "done"
