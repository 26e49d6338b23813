#!/usr/bin/env bash
# On a GPU box, after scripts/gpu-test.sh built build-gpu/: writes cuDNN's
# device-properties descriptor of each GPU to profiles/cudnn/<card>.json
# (rp-cudnn-device capture), for `rp-cudnn-device check` to build a plan's
# cuDNN attention for that card ahead of time, without a GPU (docs/cuda-kernels.md,
# "cuDNN plans ahead of time"). Commit the files it writes.
# Usage: scripts/cudnn-capture.sh [BUILD_DIR] (default build-gpu)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build-gpu}
tool=$build/bin/rp-cudnn-device
[ -x "$tool" ] || {
  echo "cudnn-capture: $tool is missing (built where cuDNN and its frontend are found)" >&2
  exit 1
}
i=0
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null |
  while read -r name; do
    slug=$(echo "$name" | tr 'A-Z' 'a-z' | sed -e 's/nvidia //' -e 's/geforce //' \
      -e 's/[^a-z0-9]\+/-/g' -e 's/^-//' -e 's/-$//')
    "$tool" capture --gpu "$i" -o "$root/profiles/cudnn/$slug.json"
    i=$((i + 1))
  done
