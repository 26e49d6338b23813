#!/usr/bin/env bash
# Installs every Debian package rp needs and makes the project venv and the
# torch-2 venv (scripts/torch2-venv.sh).
# Idempotent: when everything is present it prints one line and exits.
# Usage: scripts/setup.sh [--no-torch2]
#   --no-torch2: everything but the torch-2 venv, which only lit's torch2
#   tests use: scripts/test.sh makes it with torch2-venv.sh while it builds.
set -euo pipefail

torch2=1
case "${1:-}" in
"") ;;
--no-torch2) torch2=0 ;;
*)
  echo "setup: unknown option '$1' (usage: scripts/setup.sh [--no-torch2])" >&2
  exit 1
  ;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"

debs=(
  # compiler: MLIR/LLVM 22 (lit and FileCheck ship in llvm-22-tools)
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  # importer
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
  # runtime and tests
  libopenblas-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev
  libflatbuffers-dev flatbuffers-compiler libcli11-dev
  # data parallelism across processes: Gloo (host), mpirun for the tests
  libgloo-dev openmpi-bin
  # build; clang-14 and its runtime libraries for the fuzz targets
  # (scripts/fuzz.sh: libFuzzer, ASan, UBSan) and scripts/test.sh's ASan tree
  cmake ninja-build ccache g++ clang-14 libclang-rt-14-dev
  # the style checks of scripts/test.sh (.clang-tidy, .clang-format);
  # clang-tidy 22 (the LLVM the compiler builds on) because 14 runs every
  # matcher inside system headers: the cuDNN frontend's headers alone made
  # one file (CudnnAttention.cpp) 477 CPU s of tidy's 500 s
  clang-tidy-22 clang-format-14
  # python: tracer, reference checks, test models
  python3-venv python3-numpy python3-torch python3-torchvision python3-onnx
  python3-matplotlib
)

missing=()
for p in "${debs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The project venv sees Debian's torch/onnx/numpy; PyPI-only tools are pinned
# so that they never shadow Debian's numpy or protobuf.
# transformers 4.40.2 runs on Debian's torch 1.13 and Python 3.11 and has
# Llama, Qwen2, Mistral and GPT-2 (test/python/transformers-models.py),
# Mixtral and Qwen2-MoE (test/python/onnx-moe.py, trace-moe.py,
# qwen-moe.py); it pulls tokenizers 0.19. Qwen3 and Qwen3-MoE came later
# (4.51, which needs torch 2) and are tested in the torch-2 venv below.
pypi=(onnxruntime==1.16.3 transformers==4.40.2)
if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating $venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
stamp="$venv/.rp-pypi"
want="${pypi[*]}"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  cons=$(mktemp)
  "$venv/bin/python" - >"$cons" <<'PY'
import numpy, google.protobuf
print(f"numpy=={numpy.__version__}")
print(f"protobuf=={google.protobuf.__version__}")
PY
  echo "setup: installing into the venv: ${pypi[*]}"
  "$venv/bin/pip" install -q --disable-pip-version-check -c "$cons" "${pypi[@]}"
  rm -f "$cons"
  echo "$want" >"$stamp"
fi

# cuDNN's frontend, header-only C++ (the cuda driver's fused attention,
# runtime/lib/cuda/cudnn/): its wheel's include/ lands in the venv's
# site-packages, where the build looks. --no-deps: its Python half's
# dependencies (CUTLASS DSL, TVM FFI) are not needed for the headers.
fe_pin=nvidia-cudnn-frontend==1.32.0
fe_stamp="$venv/.rp-cudnn-frontend"
if [ ! -f "$fe_stamp" ] || [ "$(cat "$fe_stamp")" != "$fe_pin" ]; then
  echo "setup: installing the cuDNN frontend's headers: $fe_pin"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "$fe_pin"
  echo "$fe_pin" >"$fe_stamp"
fi

# CUTLASS's headers (header-only C++; the MoE weight gradient's grouped
# GEMM, runtime/lib/cuda/CudaMoECutlass.cu): the wheel puts them under
# site-packages/cutlass_library/source/include, where the build looks.
# --no-deps: its Python half's dependencies are not needed for the headers.
cutlass_pin=nvidia-cutlass==4.2.0.0
cutlass_stamp="$venv/.rp-cutlass"
if [ ! -f "$cutlass_stamp" ] || [ "$(cat "$cutlass_stamp")" != "$cutlass_pin" ]; then
  echo "setup: installing CUTLASS's headers: $cutlass_pin"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "$cutlass_pin"
  echo "$cutlass_pin" >"$cutlass_stamp"
fi

# The torch-2 venv (.venv-torch2): torch 2 and transformers 5 for the tests
# that need them (Qwen3-MoE, transformers 5's models, the dynamo exporter),
# every package pinned in scripts/torch2-requirements.txt; the script also
# installs rp into it editable, as below.
if [ "$torch2" = 1 ]; then
  bash "$root/scripts/torch2-venv.sh" "$root/.venv-torch2"
fi

# `import rp` and `python -m rp` in the venv, as the README uses them: an
# editable install of python/ (a .pth file naming it, which is what pip's
# editable install writes, without needing setuptools or the network).
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ "$(cat "$site/rp-editable.pth" 2>/dev/null)" != "$root/python" ]; then
  echo "$root/python" >"$site/rp-editable.pth"
  echo "setup: rp (python/) installed editable into $venv"
fi

if [ "$torch2" = 1 ]; then
  also=", torch-2 venv $root/.venv-torch2"
else
  also=" (the torch-2 venv left to scripts/torch2-venv.sh)"
fi
echo "setup: ok (MLIR $(/usr/lib/llvm-22/bin/mlir-opt --version | sed -n 's/.*LLVM version \([0-9.]*\).*/\1/p' | head -1), venv $venv$also)"
