#!/usr/bin/env bash
# On a machine with a GPU: builds the runtime on its own (no MLIR needed)
# with the cuda device for this GPU, and runs its tests, the device
# conformance suite first (every kernel against the host kernel). Works
# without OpenBLAS, GoogleTest or network when build-gpu-deps/ (made by
# scripts/pack-gpu-deps.sh on a development machine) is present.
# Environment: RP_CUDA_ARCHS (default native: the GPUs of this machine),
# RP_GPU_DEPS (default build-gpu-deps), RP_GPU_CTEST_TIMEOUT (seconds for
# the whole runtime suite after the GPU tests, default 600).
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
# One GPU: the two-device tests (cross-device events, the staged two-device
# training against the host) again with both plan devices on GPU 0.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" = 1 ]; then
  echo "== one GPU: the two-device tests with RP_CUDA_GPUS=0,0"
  RP_CUDA_GPUS=0,0 build-gpu/test/rp-runtime-tests \
    --gtest_filter='*Conformance*:*StagedTrainingOnBackend*' || status=1
fi
timeout "${RP_GPU_CTEST_TIMEOUT:-600}" ctest --test-dir build-gpu \
  --output-on-failure -j "$(nproc)" >build-gpu/ctest.log 2>&1 || status=1
grep -E 'tests passed|Failed|Skipped' build-gpu/ctest.log | tail -20
exit $status
