#!/usr/bin/env bash
# Packs what a GPU machine lacks to build and test the runtime, from this
# machine's Debian packages, into build-gpu-deps/ (ignored by git; carry it
# along with the checkout). A GPU machine has nvcc, cmake and ninja but no
# Debian OpenBLAS, GoogleTest, FlatBuffers or CLI11 and no network: the
# runtime builds its plain GEMM there (RP_USE_OPENBLAS=OFF), GoogleTest from
# the packed sources (RP_GTEST_SOURCE_DIR), and finds FlatBuffers (headers,
# static library, flatc) and CLI11's headers in the pack. scripts/gpu-test.sh
# uses it. About 40 MB (27 of them CUTLASS's headers).
# Usage: scripts/pack-gpu-deps.sh [OUT_DIR]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/build-gpu-deps}
lib=/usr/lib/x86_64-linux-gnu
need() {
  [ -e "$1" ] || {
    echo "pack-gpu-deps: $1 is missing; install $2 (scripts/setup.sh does)" >&2
    exit 1
  }
}
need /usr/src/googletest/CMakeLists.txt googletest
need /usr/include/flatbuffers/flatbuffers.h libflatbuffers-dev
need $lib/libflatbuffers.a libflatbuffers-dev
need /usr/bin/flatc flatbuffers-compiler
need /usr/include/CLI/CLI.hpp libcli11-dev

tmp="$out.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp/usr/include" "$tmp/usr/bin" \
  "$tmp/usr${lib#/usr}/cmake/flatbuffers"
cp -r /usr/src/googletest "$tmp/googletest"
cp -r /usr/include/flatbuffers /usr/include/CLI "$tmp/usr/include/"
cp /usr/bin/flatc "$tmp/usr/bin/"
cp $lib/libflatbuffers.a "$tmp/usr${lib#/usr}/"
# The static library's targets only: the shared ones name a .so not packed.
for f in FlatBuffersConfig.cmake FlatBuffersConfigVersion.cmake \
  FlatBuffersTargets.cmake FlatBuffersTargets-none.cmake; do
  cp "$lib/cmake/flatbuffers/$f" "$tmp/usr${lib#/usr}/cmake/flatbuffers/"
done
# cuDNN's frontend (header-only, 3 MB; scripts/setup.sh installs it into
# .venv) and cuDNN's own headers, so that the box builds the cuDNN
# attention; the box brings libcudnn.so.9 (its toolkit's or PyTorch's).
fe=${RP_CUDNN_FRONTEND_INCLUDE_DIR:-$(ls -d "$root"/.venv/lib/python3*/site-packages/include 2>/dev/null | head -1)}
if [ -f "$fe/cudnn_frontend.h" ]; then
  mkdir -p "$tmp/cudnn-frontend"
  cp -r "$fe" "$tmp/cudnn-frontend/include"
else
  echo "pack-gpu-deps: no cuDNN frontend headers (scripts/setup.sh); the box's attention will run on CUDA cores" >&2
fi
# CUTLASS's headers (header-only, 27 MB; scripts/setup.sh installs PyPI's
# nvidia-cutlass into .venv): the MoE weight gradient's grouped GEMM
# (runtime/lib/cuda/CudaMoECutlass.cu). cutlass/ and cute/ whole: a header
# missed would fail the box's build of the driver.
cut=${RP_CUTLASS_INCLUDE_DIR:-$(ls -d "$root"/.venv/lib/python3*/site-packages/cutlass_library/source/include 2>/dev/null | head -1)}
if [ -f "$cut/cutlass/gemm/device/gemm_grouped.h" ]; then
  mkdir -p "$tmp/cutlass/include"
  cp -r "$cut/cutlass" "$cut/cute" "$tmp/cutlass/include/"
else
  echo "pack-gpu-deps: no CUTLASS headers (scripts/setup.sh); the box's MoE weight gradient will copy its counts to the host" >&2
fi
if ls /usr/local/cuda/include/cudnn*.h >/dev/null 2>&1; then
  mkdir -p "$tmp/cudnn/include"
  cp /usr/local/cuda/include/cudnn*.h "$tmp/cudnn/include/"
fi
rm -rf "$out"
mv "$tmp" "$out"
echo "pack-gpu-deps: $out ($(du -sh "$out" | cut -f1))"
