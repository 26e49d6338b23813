#!/usr/bin/env bash
# Makes the torch-2 venv (default: the project's .venv-torch2, which
# scripts/setup.sh makes through this script) with the packages of
# scripts/torch2-requirements.txt, every one pinned and installed with
# --no-deps: torch 2.15, transformers 5.24, onnxscript, peft and timm from
# PyPI, for the lit tests that need them (REQUIRES: torch2, run with
# %TORCH2_PYTHON; README.md), and rp itself editable (as setup.sh does in
# .venv). Quiet and quick when the venv already holds those pins.
#
# Usage: scripts/torch2-venv.sh [VENV]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${1:-$root/.venv-torch2}
req="$root/scripts/torch2-requirements.txt"
stamp="$venv/.rp-requirements"

# `import rp` and `python -m rp` in the venv: an editable install of
# python/ (a .pth file naming it, which is what pip's editable install
# writes, without needing setuptools or the network).
editable() {
  local site
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  if [ "$(cat "$site/rp-editable.pth" 2>/dev/null)" != "$root/python" ]; then
    echo "$root/python" >"$site/rp-editable.pth"
    echo "setup: rp (python/) installed editable into $venv"
  fi
}

# The pins, without comments: what the stamp records.
pins=$(grep -vE '^[[:space:]]*(#|$)' "$req")
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pins" ]; then
  editable
  exit 0
fi
echo "setup: installing the torch-2 venv $venv ($(grep -c '==' "$req") pinned packages, ~2.3 GB)"
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$req"
# The import check's stderr (bitsandbytes and torch log optional kernels
# they did not find) is shown only when the check fails.
check_err=$(mktemp)
"$venv/bin/python" -c "import torch, transformers, onnxscript, peft, timm; print('setup: torch-2 venv: torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__)" 2>"$check_err" ||
  { cat "$check_err" >&2; rm -f "$check_err"; exit 1; }
rm -f "$check_err"
echo "$pins" >"$stamp"
editable
