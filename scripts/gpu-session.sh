#!/usr/bin/env bash
# The one command of a device session (docs/cuda.md, "One device session"):
# scripts/gpu-test.sh within a time budget, its checks in the order that
# matters most first (conformance, the decoder-layer bench, the cost per
# launch and per job, training against the host, 1/2/4 devices bitwise,
# cuDNN's ahead-of-time plans; the whole
# ctest suite only when asked), its log and results copied to $OUT (the
# device tool brings that folder back). Needs, carried from the development
# machine: build-gpu-plans/ and build-gpu-deps/ (scripts/gpu-prepare.sh).
# Environment: RP_GPU_BUDGET_S (default 540: one 600 s call with room to
# copy the results), RP_GPU_CHECKS (default conformance,layer,launch,train,
# bitwise,aot), OUT (default build-gpu/out).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${OUT:-$root/build-gpu/out}
mkdir -p "$out"
export RP_GPU_BUDGET_S=${RP_GPU_BUDGET_S:-540}
export RP_GPU_CHECKS=${RP_GPU_CHECKS:-conformance,layer,launch,train,bitwise,aot}
export PYTHONUNBUFFERED=1
bash scripts/gpu-test.sh 2>&1 | tee "$out/gpu-test.log"
rc=${PIPESTATUS[0]}
# At most 8 files come back: the log, the figures (the layer's, the launch
# cost's), the card's lines and its captured cuDNN descriptor.
cp bench/results/gpu_layer.json bench/results/launch_cost_cuda.json \
  bench/results/launch_cost_host.json build-gpu/list-devices.txt "$out/" 2>/dev/null
for f in $(ls -t profiles/cudnn/*.json 2>/dev/null | grep -v synthetic | head -2); do
  cp "$f" "$out/"
done
[ -f build-gpu/ctest.log ] && cp build-gpu/ctest.log "$out/"
ls -l "$out"
exit $rc
