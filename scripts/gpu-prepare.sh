#!/usr/bin/env bash
# On a development machine (the compiler built): everything the GPU checks
# of scripts/gpu-test.sh need that a GPU box cannot make, into
# build-gpu-plans/ (ignored by git; carry it, with build-gpu-deps/, to the
# GPU box): bench/gpu_train.py's plans (training against the host, the
# 1/2/4-device bitwise plans) with the host's losses, bench/gpu_layer.py's
# decoder-layer plans (plans only: rp-run --init-weights random makes the
# weights there) and bench/launch_cost.py's tiny plan (the cuda backend's
# cost per launch and per job). Then scripts/pack-gpu-deps.sh.
# Usage: scripts/gpu-prepare.sh [OUT_DIR] (RP_GPU_HOST_STEPS, default 6)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/build-gpu-plans}
py=$root/.venv/bin/python
"$py" "$root/bench/gpu_train.py" prepare "$out"
"$py" "$root/bench/gpu_train.py" host "$out" --steps "${RP_GPU_HOST_STEPS:-6}"
"$py" "$root/bench/gpu_layer.py" prepare "$out/layer"
"$py" "$root/bench/launch_cost.py" --write-plan "$out/launch"
bash "$root/scripts/pack-gpu-deps.sh"
du -sh "$out" "$root/build-gpu-deps"
