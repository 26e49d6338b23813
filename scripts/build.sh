#!/usr/bin/env bash
# Configures (once) and builds rp into build/. Used by test.sh and demo.sh.
# Usage: scripts/build.sh [ninja targets...]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# ccache sees paths relative to the checkout, so a clone in another folder
# (CI's) reuses what this machine compiled before.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
build="$root/build"

if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DPython3_EXECUTABLE="$root/.venv/bin/python" \
    "-DCMAKE_CUDA_ARCHITECTURES=89;90" >"$build.configure.log" 2>&1 || {
    cat "$build.configure.log"
    echo "build: configure failed (log above)" >&2
    exit 1
  }
fi
if ! ninja -C "$build" "$@" >"$build.log" 2>&1; then
  grep -E 'error|FAILED' "$build.log" | head -40
  tail -20 "$build.log"
  echo "build: failed (full log: $build.log)" >&2
  exit 1
fi
echo "build: ok ($(grep -c '^\[' "$build.log") steps run)"
