#!/usr/bin/env bash
# Executes the TypeScript notebooks headless with the tslab kernel (nbclient, the library
# under `jupyter nbconvert --execute`); fails on any cell error.
#   bash scripts/run-notebooks.sh                             every notebooks/*.ipynb
#   bash scripts/run-notebooks.sh notebooks/quickstart.ipynb  just one
#
# Options (environment variables, with defaults):
#   NOTEBOOK_OUTPUT_DIR    where the executed notebooks are written [a new temporary folder];
#                          a failed notebook is written too, up to its failing cell
#   NOTEBOOK_CELL_TIMEOUT  seconds one cell may run [600]
#   NOTEBOOK_PYTHON        the Python with Jupyter's nbclient [/usr/bin/python3, else python3]
#
# Exit codes: 0 every notebook ran without error; 1 a notebook failed (its failing cell and
# that cell's output are printed); 77 a prerequisite is missing (jupyter's nbclient, the tslab
# kernel spec, node_modules/.bin/tslab): run `bash scripts/setup.sh`.
# The notebooks import the @agentrl/* packages from their dist/ builds: this script runs
# `npm run build` first when a package's sources are newer than its dist/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

say() { printf '[notebooks] %s\n' "$*"; }
missing() { say "missing: $*; run 'bash scripts/setup.sh'"; exit 77; }

# --- prerequisites ------------------------------------------------------------------
# Debian's Jupyter lives in the system Python, which may not be the first python3 on PATH.
python=""
for candidate in ${NOTEBOOK_PYTHON:-/usr/bin/python3 python3}; do
  if "$candidate" -c "import nbclient, nbformat" >/dev/null 2>&1; then python="$candidate"; break; fi
done
[ -n "$python" ] || missing "Python's nbclient (Debian: jupyter-nbconvert python3-nbclient jupyter-client)"
[ -x node_modules/.bin/tslab ] || missing "the tslab npm package (npm install)"
"$python" -c "from jupyter_client.kernelspec import KernelSpecManager as K; K().get_kernel_spec('tslab')" >/dev/null 2>&1 \
  || missing "the tslab kernel spec (npx tslab install --python /usr/bin/python3)"
# The kernel spec starts the command `tslab`: the project's own copy.
export PATH="$root/node_modules/.bin:$PATH"

# --- the dist/ builds the notebooks import ------------------------------------------
newest() { find "$1" -type f -printf '%T@\n' 2>/dev/null | sort -n | tail -n 1; }
stale=""
for package in packages/*/; do
  [ -f "$package/package.json" ] || continue
  # tsc -b rewrites only the outputs that change: compare the newest source with the newest output.
  built="$(newest "$package/dist")"
  if [ -z "$built" ] || awk -v source="$(newest "$package/src")" -v built="$built" 'BEGIN { exit !(source > built) }'; then
    stale="$stale $(basename "${package%/}")"
  fi
done
if [ -n "$stale" ]; then
  say "building (dist/ older than src/ in:$stale)"
  npm run --silent build
fi

# --- run ------------------------------------------------------------------------------
if [ $# -gt 0 ]; then notebooks=("$@"); else notebooks=(notebooks/*.ipynb); fi
output="${NOTEBOOK_OUTPUT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/agentrl-notebooks-XXXXXX")}"
mkdir -p "$output"
say "writing executed notebooks to $output"

# Executes one notebook in its own folder; writes it to the output folder whatever happens.
# Exit: 0 ok, 1 a cell failed, 75 worth one retry (the kernel never answered, or tslab's
# compiler tripped over files changing under it).
run_one() {
  # The kernel inherits NODE_OPTIONS: a preload that mends tslab's race with its own binds.
  NODE_OPTIONS="${NODE_OPTIONS:+$NODE_OPTIONS }--require \"$root/scripts/tslab-zeromq-binds.cjs\"" \
  "$python" - "$1" "$output/$(basename "$1")" "${NOTEBOOK_CELL_TIMEOUT:-600}" <<'PYTHON'
import os, sys
import nbformat
from nbclient import NotebookClient

source, target, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3])
notebook = nbformat.read(source, as_version=4)
started = []  # indices of the code cells started so far (tslab reports no execution counts)
client = NotebookClient(notebook, kernel_name="tslab", timeout=timeout,
                        resources={"metadata": {"path": os.path.dirname(os.path.abspath(source))}},
                        on_cell_start=lambda cell, cell_index: started.append(cell_index))
failure = None
try:
    client.execute()
except Exception as error:  # CellExecutionError, DeadKernelError, CellTimeoutError
    failure = error
finally:
    nbformat.write(notebook, target)
if failure is None:
    sys.exit(0)

def output_text(output):
    if output.get("output_type") == "stream":
        return output.get("text", "")
    if output.get("output_type") == "error":
        return "\n".join(output.get("traceback", [])) or f"{output.get('ename')}: {output.get('evalue')}"
    return output.get("data", {}).get("text/plain", "")

failing = notebook.cells[started[-1]] if started else None
text = "".join(output_text(o) for o in failing.get("outputs", [])) if failing else ""
summary = str(failure).strip().splitlines()
print(f"{type(failure).__name__}" + ("" if type(failure).__name__ == "CellExecutionError" or not summary else f": {summary[-1]}"))
if failing is not None:
    print("--- failing cell (first lines) ---")
    print("\n".join(failing.source.splitlines()[:8]))
    print("--- its output (last lines) ---")
    print("\n".join(text.splitlines()[-30:]))
# Two failures that say nothing about the notebook, worth one retry (exit 75):
# - tslab's compiler watches package.json and .d.ts files under node_modules; when another
#   process rewrites one mid-run (a concurrent build or npm install on a shared work tree),
#   the next cell fails with "Unexpected pending rebuildTimer".
# - the kernel never answered, so no cell started: tslab 1.0.22 starts its zeromq receive
#   loops before its sockets finish binding, and a kernel_info request that lands in that
#   window fails with EBUSY ("Socket is blocked by a bind or unbind operation"), which kills
#   the shell loop: the kernel lives on, deaf, until nbclient's start-up timeout.
sys.exit(75 if "Unexpected pending rebuildTimer" in text or not started else 1)
PYTHON
}

failed=0
for notebook in "${notebooks[@]}"; do
  log="$output/$(basename "$notebook" .ipynb).log"
  started=$(date +%s)
  code=0
  run_one "$notebook" >"$log" 2>&1 || code=$?
  if [ "$code" = 75 ]; then
    say "$notebook: the kernel did not start, or tslab saw files change under it; retrying once"
    sed 's/^/    /' "$log"
    code=0
    run_one "$notebook" >"$log" 2>&1 || code=$?
  fi
  seconds=$(( $(date +%s) - started ))
  if [ "$code" = 0 ]; then
    say "$notebook: ok (${seconds} s)"
  else
    failed=1
    say "$notebook: FAILED (${seconds} s)"
    sed 's/^/    /' "$log"
  fi
done
exit "$failed"
