#!/usr/bin/env bash
# On a machine with a GPU, in one call: builds the runtime on its own (no
# MLIR needed) with the cuda device for sm_89, sm_90 and this GPU, with
# cuDNN's fused attention where cuDNN and its frontend's headers are found,
# and runs the GPU checks (docs/cuda.md, "Run the GPU checks"):
#  1. the device conformance suite, every kernel against the host kernel
#     (f32 2e-5, f16 2e-3, bf16 1e-2; integers and the NF4/int8
#     dequantize bitwise), the cuDNN-shaped attention cases,
#     the library GEMM cases (CUTLASS's grouped MoE weight gradient,
#     cuBLASLt's DGELU) and run-to-run bitwise attention, with cuDNN, again
#     with RP_CUDNN=off (the CUDA-core kernels) and the kernel cases again
#     with RP_CUDA_GRAPHS=on (each program captured and replayed);
#  2. the two-device tests with both plan devices on GPU 0 (RP_CUDA_GPUS);
#  3. with the plans of scripts/gpu-prepare.sh (RP_GPU_PLANS, default
#     build-gpu-plans/): the decoder-layer bench against PyTorch
#     (bench/gpu_layer.py, bench/results/gpu_layer.json), the cost per
#     launch and per job on cuda and on the host (bench/launch_cost.py,
#     bench/results/launch_cost_*.json), training against
#     the host's losses (bench/gpu_train.py; its NF4 LoRA plan also compares
#     the adapters each backend trained, one line: CudaQuant.cu's dequantize
#     in a training run), 1, 2 and 4 plan devices
#     bitwise equal (bench/gpu_bitwise.py, RP_CUDA_GPUS=0,0,0,0), cuDNN's
#     plans from the card's captured descriptor;
#  4. every runtime test (ctest).
# Works without OpenBLAS, GoogleTest or network when build-gpu-deps/ (made
# by scripts/pack-gpu-deps.sh on a development machine) is present.
# Environment: RP_CUDA_ARCHS (default "89;90" plus this GPU's), RP_GPU_DEPS
# (default build-gpu-deps), RP_GPU_PLANS (default build-gpu-plans),
# RP_GPU_CTEST_TIMEOUT (seconds for the runtime suite, default 300),
# RP_GPU_CHECKS (which checks: a comma-separated subset of
# conformance,layer,launch,train,bitwise,aot,ctest, run in that order; default
# all, so that a short device lease can run them in two calls; the build
# runs always), RP_GPU_BUDGET_S (seconds for the whole script, the build
# included: each check runs under `timeout` with what is left, and is
# skipped, said in the summary, under 30 s; default none),
# RP_CUDNN_FRONTEND_INCLUDE_DIR, RP_CUDNN_LIBRARY, RP_CUTLASS_INCLUDE_DIR
# (found when unset).
# scripts/gpu-session.sh is the one command of a device session.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
t0=$(date +%s)
budget=${RP_GPU_BUDGET_S:-0}
deps=${RP_GPU_DEPS:-$root/build-gpu-deps}
plans=${RP_GPU_PLANS:-$root/build-gpu-plans}
lib=lib/x86_64-linux-gnu
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap \
  --format=csv || true
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
  head -1 | tr -d '. ')
archs=${RP_CUDA_ARCHS:-89;90}
if [ -n "$cap" ] && [[ ";$archs;" != *";$cap;"* ]] && [ "$archs" != native ]; then
  archs="$archs;$cap"
fi
args=(-G Ninja -S runtime -B build-gpu -DCMAKE_BUILD_TYPE=Release
  -DRP_ENABLE_CUDA=ON -DRP_CUDA_ARCHS="$archs")
if [ -d "$deps" ]; then
  args+=(-DRP_USE_OPENBLAS=OFF -DRP_GTEST_SOURCE_DIR="$deps/googletest"
    -DFlatBuffers_DIR="$deps/usr/$lib/cmake/flatbuffers"
    -DFLATC="$deps/usr/bin/flatc"
    -DCMAKE_CXX_FLAGS="-isystem $deps/usr/include")
fi

# cuDNN: the frontend's headers (packed, or a venv's), cudnn.h (the
# toolkit's, packed, or PyTorch's wheel), and libcudnn.so.9 at run time.
first() { for f in "$@"; do [ -e "$f" ] && { echo "$f"; return; }; done; }
fe=${RP_CUDNN_FRONTEND_INCLUDE_DIR:-}
if [ -z "$fe" ]; then
  fe=$(first "$deps"/cudnn-frontend/include/cudnn_frontend.h \
    "$root"/.venv*/lib/python3*/site-packages/include/cudnn_frontend.h)
  fe=${fe%/cudnn_frontend.h}
fi
# The box's python3 (a GPU image's PyTorch venv) brings cuDNN's wheel.
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)
hdr=$(first /usr/local/cuda/include/cudnn.h /usr/include/cudnn.h \
  "$deps"/cudnn/include/cudnn.h \
  "$root"/.venv-torch2/lib/python3*/site-packages/nvidia/cudnn/include/cudnn.h \
  "${site:-/nonexistent}"/nvidia/cudnn/include/cudnn.h)
hdr=${hdr%/cudnn.h}
# CUTLASS's headers (packed, or a venv's nvidia-cutlass): the MoE weight
# gradient's grouped GEMM reads its problems on the device.
cut=${RP_CUTLASS_INCLUDE_DIR:-}
if [ -z "$cut" ]; then
  cut=$(first "$deps"/cutlass/include/cutlass/gemm/device/gemm_grouped.h \
    "$root"/.venv*/lib/python3*/site-packages/cutlass_library/source/include/cutlass/gemm/device/gemm_grouped.h)
  cut=${cut%/cutlass/gemm/device/gemm_grouped.h}
fi
[ -n "$cut" ] && args+=(-DRP_CUTLASS_INCLUDE_DIR="$cut")
echo "== CUTLASS: ${cut:-none (the MoE weight gradient copies its counts to the host)}"
[ -f "$fe/cudnn_frontend.h" ] && args+=(-DRP_CUDNN_FRONTEND_INCLUDE_DIR="$fe")
[ -f "$hdr/cudnn.h" ] && args+=(-DRP_CUDNN_INCLUDE_DIR="$hdr")
if [ -z "${RP_CUDNN_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcudnn.so.9 '; then
  found=$(first /usr/local/cuda/lib/libcudnn.so.9 /usr/local/cuda/lib64/libcudnn.so.9 \
    "$root"/.venv-torch2/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9 \
    "${site:-/nonexistent}"/nvidia/cudnn/lib/libcudnn.so.9)
  [ -n "$found" ] && export RP_CUDNN_LIBRARY=$found
fi
echo "== cuDNN: frontend headers ${fe:-none}, cudnn.h ${hdr:-none}," \
  "library ${RP_CUDNN_LIBRARY:-from the loader path}"

start=$(date +%s)
cmake "${args[@]}" | grep -E 'rp runtime' || true
ninja -C build-gpu rp-runtime-tests rp-run || exit 1
echo "== built in $(($(date +%s) - start)) s for archs $archs"
# The cuda driver is the library next to rp-run that the registry loads
# (docs/cuda.md); the tests find it in the build's bin/ too.
ls -l build-gpu/bin/librp-driver-cuda.so || exit 1
build-gpu/bin/rp-run --list-devices | tee build-gpu/list-devices.txt
# Headers, library and an sm_80+ GPU: the tests then expect cuDNN to run
# the attention (CudnnLibraryTest).
if [ -f "$fe/cudnn_frontend.h" ] && [ -f "$hdr/cudnn.h" ] && [ "${cap:-0}" -ge 80 ] &&
  { [ -n "${RP_CUDNN_LIBRARY:-}" ] || ldconfig -p 2>/dev/null | grep -q 'libcudnn.so.9 '; }; then
  export RP_EXPECT_CUDNN=1
fi
if grep -q 'through cuDNN' build-gpu/list-devices.txt; then
  echo "== cuDNN: present, attention runs on it"
else
  echo "== cuDNN: absent or not used (the attention line above says why)"
fi
status=0
summary=()
want() { [[ ",${RP_GPU_CHECKS:-conformance,layer,launch,train,bitwise,aot,ctest}," == *",$1,"* ]]; }
check() { # name, command...
  local name=$1 left=0 start rc
  shift
  if [ "$budget" -gt 0 ]; then
    left=$((budget - ($(date +%s) - t0)))
    if [ "$left" -lt 30 ]; then
      summary+=("skip   $name: RP_GPU_BUDGET_S=$budget spent")
      return
    fi
    set -- timeout "$left" "$@"
  fi
  echo "== $name"
  start=$(date +%s)
  "$@"
  rc=$?
  if [ $rc = 0 ]; then summary+=("ok     $name ($(($(date +%s) - start)) s)"); else
    [ $rc = 124 ] && name="$name (stopped at the budget)"
    summary+=("FAILED $name ($(($(date +%s) - start)) s)")
    status=1
  fi
}
want conformance && check "conformance (cuDNN where it takes the call)" \
  build-gpu/test/rp-runtime-tests --gtest_filter='*Conformance*:*Cudnn*:*AttentionPath*'
want conformance && check "conformance, RP_CUDNN=off (CUDA-core attention)" \
  env RP_CUDNN=off build-gpu/test/rp-runtime-tests --gtest_filter='*Conformance*'
# Every kernel again with each call's program captured as a CUDA graph
# and replayed (RP_CUDA_GRAPHS=on): a call that cannot be captured says so.
want conformance && check "conformance, RP_CUDA_GRAPHS=on (captured, replayed)" \
  env RP_CUDA_GRAPHS=on build-gpu/test/rp-runtime-tests --gtest_filter='*KernelConformance*'
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if want conformance && [ "${gpus:-0}" = 1 ]; then
  check "two-device tests, RP_CUDA_GPUS=0,0" env RP_CUDA_GPUS=0,0 \
    build-gpu/test/rp-runtime-tests \
    --gtest_filter='*Conformance*:*StagedTrainingOnBackend*'
fi
py=python3
[ -x "$root/.venv-torch2/bin/python" ] && py=$root/.venv-torch2/bin/python
# The headline figure first, so that a short lease gets it.
if want layer && [ -d "$plans/layer" ]; then
  check "decoder layer vs PyTorch (bench/gpu_layer.py)" \
    "$py" bench/gpu_layer.py run "$plans/layer" --build build-gpu
elif want layer; then
  summary+=("skip   layer bench: no $plans/layer (scripts/gpu-prepare.sh)")
fi
# The cuda backend's cost per launch and per job (the profiles' launch_us
# and job_us, docs/hardware-profiles.md), beside the host's on the same box.
if want launch && [ -f "$plans/launch/tiny.rpplan" ]; then
  mkdir -p bench/results
  card=h100
  nvidia-smi -L 2>/dev/null | grep -q H200 && card=h200
  check "launch and hand-off cost, cuda (bench/launch_cost.py)" \
    "$py" bench/launch_cost.py --backend cuda --plan "$plans/launch/tiny.rpplan" \
    --bin build-gpu/bin --hw "$card" --json bench/results/launch_cost_cuda.json
  check "launch and hand-off cost, host (bench/launch_cost.py)" \
    "$py" bench/launch_cost.py --backend host --plan "$plans/launch/tiny.rpplan" \
    --bin build-gpu/bin --json bench/results/launch_cost_host.json
elif want launch; then
  summary+=("skip   launch cost: no $plans/launch (scripts/gpu-prepare.sh)")
fi
if [ -d "$plans" ]; then
  want train && check "training vs host (bench/gpu_train.py)" \
    "$py" bench/gpu_train.py run "$plans" --steps 6 --bin build-gpu/bin
  want bitwise && check "1, 2, 4 plan devices bitwise (bench/gpu_bitwise.py)" \
    "$py" bench/gpu_bitwise.py "$plans" --bin build-gpu/bin
else
  summary+=("skip   training and bitwise runs: no $plans (scripts/gpu-prepare.sh)")
fi
# cuDNN ahead of time: the card's descriptor captured, and the layer
# plans' attention built from it (rp-cudnn-device, docs/cuda.md).
if want aot && ninja -C build-gpu -t targets all 2>/dev/null | grep -q '^rp-cudnn-device:'; then
  ninja -C build-gpu rp-cudnn-device >/dev/null &&
    check "cuDNN descriptor capture (scripts/cudnn-capture.sh)" \
      bash scripts/cudnn-capture.sh build-gpu
  desc=$(ls -t profiles/cudnn/*.json 2>/dev/null | grep -v synthetic | head -1)
  if [ -n "$desc" ] && [ -d "$plans/layer" ]; then
    for p in "$plans"/layer/*.rpplan; do
      check "cuDNN plans of $(basename "$p") from $desc" \
        build-gpu/bin/rp-cudnn-device check "$p" --device "$desc"
    done
  fi
fi
want ctest && check "runtime suite (ctest)" bash -c "timeout ${RP_GPU_CTEST_TIMEOUT:-300} \
  ctest --test-dir build-gpu --output-on-failure -j $(nproc) \
  >build-gpu/ctest.log 2>&1; rc=\$?; grep -E 'tests passed|Failed|Skipped' \
  build-gpu/ctest.log | tail -20; exit \$rc"
echo "== summary"
printf '%s\n' "${summary[@]}"
exit $status
