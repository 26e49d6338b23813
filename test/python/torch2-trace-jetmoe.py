# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# JetMoE through rp.trace: its mixture of MLP experts and its mixture of
# attention heads (each token's query projection by each chosen expert,
# and that expert's output projection after attention) split the tokens
# by a .tolist() of the experts' counts, a data-dependent shape; rp.trace
# replaces the MLP mixture's forward and the attention mixture's map and
# reduce by every expert's projection picked by a one-hot of the routing
# (rp._moe_jetmoe). The shrunk family (bench/families.py's rule): loss and
# every gradient by name within 1e-4 of PyTorch, 2 devices bitwise equal
# to 1, and the modules' own methods back after the trace. Before, "unsupported
# op aten.sort.default in module '...self_attention.experts.router'".

import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parents[1] / "bench"))
sys.path.insert(0, str(here / "Inputs"))
import families  # noqa: E402
import tiny_gpt  # noqa: E402

out = Path(sys.argv[1])
model = families.build("jetmoe")
tokens, labels = tiny_gpt.batch(vocab=families.VOCAB, b=families.M, s=16)
ref = families.reference(model, tokens, labels)
cell = families.check_path("trace", model, ref, tokens, labels, out)
# CHECK: jetmoe: loss True, grads True, 2 devices bitwise True, reason None
print(f"jetmoe: loss {cell['loss']}, grads {cell['grads']}, 2 devices "
      f"bitwise {cell['bitwise']}, reason {cell['reason']}")
# CHECK-NEXT: {{[0-9]+}} of {{[0-9]+}} gradients by name within 0.0001
print(cell["detail"])
patched = [n for n, m in model.named_modules()
           if {"map", "reduce", "forward"} & set(vars(m))]
# CHECK-NEXT: methods left patched: []
print("methods left patched:", patched)
