#!/usr/bin/env bash
# On a machine with a GPU: builds the runtime on its own (no MLIR needed)
# with the cuda device for this GPU, and runs its tests, the device
# conformance suite first (every kernel against the host kernel). Works
# without OpenBLAS, GoogleTest or network when build-gpu-deps/ (made by
# scripts/pack-gpu-deps.sh on a development machine) is present.
# Environment: RP_CUDA_ARCHS (default native: the GPUs of this machine),
# RP_GPU_DEPS (default build-gpu-deps).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
deps=${RP_GPU_DEPS:-$root/build-gpu-deps}
archs=${RP_CUDA_ARCHS:-native}
lib=lib/x86_64-linux-gnu
args=(-G Ninja -S runtime -B build-gpu -DCMAKE_BUILD_TYPE=Release
  -DRP_ENABLE_CUDA=ON -DRP_CUDA_ARCHS="$archs")
if [ -d "$deps" ]; then
  args+=(-DRP_USE_OPENBLAS=OFF -DRP_GTEST_SOURCE_DIR="$deps/googletest"
    -DFlatBuffers_DIR="$deps/usr/$lib/cmake/flatbuffers"
    -DFLATC="$deps/usr/bin/flatc"
    -DCMAKE_CXX_FLAGS="-isystem $deps/usr/include")
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
start=$(date +%s)
cmake "${args[@]}" || exit 1
ninja -C build-gpu rp-runtime-tests rp-run || exit 1
echo "== built in $(( $(date +%s) - start )) s"
# The cuda driver is the library next to rp-run that the registry loads
# (docs/cuda.md); the tests find it in the build's bin/ too.
ls -l build-gpu/bin/librp-driver-cuda.so || exit 1
build-gpu/bin/rp-run --list-devices
status=0
build-gpu/test/rp-runtime-tests --gtest_filter='*Conformance*' || status=1
ctest --test-dir build-gpu --output-on-failure -j "$(nproc)" \
  >build-gpu/ctest.log 2>&1 || status=1
grep -E 'tests passed|Failed|Skipped' build-gpu/ctest.log | tail -20
exit $status
