#!/usr/bin/env bash
# Makes a venv with PyTorch 2.x from PyPI (default /tmp/torch2-venv) for
# checking python/rp against torch 2 (best effort; CI uses Debian's 1.13).
#
# PyPI's Linux torch wheel depends on ~3 GB of nvidia-* CUDA packages. This
# installs the wheel without them (--no-deps), its pure-Python deps, and
# only the four CUDA libraries torch needs to load that the machine's CUDA
# 13 toolkit (/usr/local/cuda, on the loader path) does not provide; on a
# machine without that toolkit, install torch with its dependencies.
#
# Usage: scripts/torch2-venv.sh [VENV]   then run the python tests with it:
#   sed 's#config.python_executable = .*#config.python_executable = "VENV/bin/python"#' \
#     build/test/lit.site.cfg.py > /tmp/lit2/lit.site.cfg.py
#   lit /tmp/lit2 --filter python/
set -euo pipefail

venv=${1:-/tmp/torch2-venv}
torch_version=2.15.0
torchvision_version=0.29.2
# transformers 5 and the dynamo exporter's onnxscript, for
# test/python/Inputs/make_torch2_fixtures.py and the transformers tests.
transformers_version=5.24.0
onnxscript_version=0.7.2

if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv "$venv"
fi
pip=("$venv/bin/pip" install -q --disable-pip-version-check)
"${pip[@]}" --no-deps "torch==$torch_version" "torchvision==$torchvision_version"
"${pip[@]}" filelock typing_extensions sympy networkx jinja2 fsspec numpy \
  pillow onnx matplotlib
# Their versions are the ones torch $torch_version pins.
"${pip[@]}" --no-deps nvidia-cufile==1.17.1.22 nvidia-cusparselt-cu13==0.8.1 \
  nvidia-nvshmem-cu13==3.7.2 nvidia-nccl-cu13==2.30.7
"${pip[@]}" "transformers==$transformers_version" \
  "onnxscript==$onnxscript_version"
"$venv/bin/python" -c "import torch, torchvision, transformers; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'transformers', transformers.__version__)"
