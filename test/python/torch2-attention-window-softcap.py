# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# Gemma 2 (soft-capped scores, sliding-window and global layers), Gemma 3
# (sliding-window and global layers) and Mistral (a sliding window on every
# layer), shrunk by bench/families.py's rule (window 8 over 16 tokens, so
# the window drops keys) and traced with rp.trace: every attention becomes
# one rp.attention carrying `causal`, `window` and `softcap`, with no S x S
# mask operand left and no softmax outside it; the loss and every gradient
# by name within 1e-4 of PyTorch on the host, 2 devices bitwise equal to 1.

import re
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parents[1] / "bench"))
import families  # noqa: E402

out = Path(sys.argv[1])
for name in ["gemma2", "gemma3_text", "mistral"]:
    result = families.run_family(name, out / name, paths=("trace",))
    cell = result.get("trace") or {}
    print(f"{name}: build {result['build']}, loss {cell.get('loss')}, "
          f"grads {cell.get('grads')}, bitwise {cell.get('bitwise')}, "
          f"{cell.get('reason')}")
    ir = (out / name / "trace" / "model.mlir").read_text()
    attentions = re.findall(r"rp\.attention [^:]*:", ir)
    windows = sorted({int(w) for a in attentions
                      for w in re.findall(r"window = (\d+)", a)})
    caps = sorted({float(c) for a in attentions
                   for c in re.findall(r"softcap = ([0-9.e+-]+)", a)})
    print(f"{name}: {len(attentions)} attentions, "
          f"{sum('causal' in a for a in attentions)} causal, "
          f"{sum('window' in a for a in attentions)} windowed {windows}, "
          f"{sum('softcap' in a for a in attentions)} soft-capped {caps}, "
          f"{sum('mask(' in a for a in attentions)} with a mask operand, "
          f"{len(re.findall(r'rp.softmax ', ir))} softmax, "
          f"{len(re.findall(r'rp.tanh ', ir))} tanh")

# Gemma 2's layers alternate sliding-window and global attention, both
# soft-capped at 50; its final logits' soft-cap (30) stays a tanh.
# CHECK: gemma2: build None, loss True, grads True, bitwise True, None
# CHECK-NEXT: gemma2: 2 attentions, 2 causal, 1 windowed [8], 2 soft-capped [50.0], 0 with a mask operand, 0 softmax, 1 tanh
# CHECK: gemma3_text: build None, loss True, grads True, bitwise True, None
# CHECK-NEXT: gemma3_text: 2 attentions, 2 causal, {{[12]}} windowed [8], 0 soft-capped [], 0 with a mask operand, 0 softmax
# CHECK: mistral: build None, loss True, grads True, bitwise True, None
# CHECK-NEXT: mistral: 2 attentions, 2 causal, 2 windowed [8], 0 soft-capped [], 0 with a mask operand, 0 softmax, 0 tanh
