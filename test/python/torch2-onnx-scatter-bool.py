# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t | FileCheck %s

# DeepSeek-V3.2's sparse-attention indexer (also GLM-MoE-DSA, HY-V4, dots3,
# AXK2) masks the keys it did not pick with
# `ones(..., dtype=bool).scatter(-1, topk, False)`. torch's tracer records the
# Python bool as a bool constant, which no aten::scatter overload takes, and
# the TorchScript export stops inside the trace ("INTERNAL ASSERT FAILED at
# alias_analysis.cpp ... We don't have an op for aten::scatter"), before any
# symbolic runs. rp.onnx_symbolics.register() registers a kernel at the
# tracer's dispatch key that records the same scatter with an int fill:
# the export then goes through the exporter's own ScatterElements and
# rp-import's run-time-index scatter. Checked: the export stops without
# register(); after it, eager scatter is unchanged (bool and float values,
# gradients), and the LM trains on 1 and 2 devices with every gradient
# right. Near miss: the same mask scattered along a non-last axis exports
# and is refused by rp-import with its reason.

import subprocess
import sys
import warnings
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import torch2_lm_check  # noqa: E402

import rp  # noqa: E402
import rp.onnx_symbolics  # noqa: E402


class Sparse(nn.Module):
    """Attention over the 4 keys an indexer scores highest (ties of the
    causal mask's -inf aside), as DeepSeek-V3.2's eager path writes it."""

    def __init__(self, d=16, keep=4):
        super().__init__()
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.index = nn.Linear(d, 8)
        self.keep = keep

    def forward(self, x):
        s = x.shape[1]
        causal = torch.full((s, s), float("-inf")).triu(1)
        with torch.no_grad():
            z = self.index(x)
            scores = z @ z.transpose(-1, -2) + causal
            top = scores.topk(self.keep, dim=-1).indices
        masked = torch.ones(scores.shape, dtype=torch.bool).scatter(
            -1, top, False)
        att = self.q(x) @ self.k(x).transpose(-1, -2) * 0.25 + causal
        att = att.masked_fill(masked, torch.finfo(att.dtype).min)
        return x + torch.softmax(att, -1) @ self.v(x)


class Wrong(nn.Module):
    """The same mask scattered along the middle axis."""

    def forward(self, x):
        top = x.transpose(1, 2).topk(2, dim=-1).indices.transpose(1, 2)
        masked = torch.ones(x.shape, dtype=torch.bool).scatter(1, top, False)
        return x.masked_fill(masked, 0.0)


out = Path(sys.argv[1])
x = torch.randn(1, 6, 16)


def export(module, args, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(out / name), opset_version=17,
                          dynamo=False)


try:
    export(Sparse(), (x,), "before.onnx")
    print("before register: exported")
except RuntimeError as e:
    first = str(e).splitlines()[0]
    print("before register:", first[first.index("We don't"):][:60])
# CHECK: before register: We don't have an op for aten::scatter but it isn't a special

# Eager scatter before and after register(): the same values and gradients.
idx = torch.tensor([[2, 0], [1, 3]])
base = torch.randn(2, 4, requires_grad=True)
before = (torch.ones(2, 4, dtype=torch.bool).scatter(1, idx, False),
          base.scatter(1, idx, 2.5))
before[1].sum().backward()
grad_before = base.grad.clone()
base.grad = None
rp.onnx_symbolics.register()
rp.onnx_symbolics.register()  # a second call is harmless
after = (torch.ones(2, 4, dtype=torch.bool).scatter(1, idx, False),
         base.scatter(1, idx, 2.5))
after[1].sum().backward()
print("eager unchanged:", all(torch.equal(a, b) for a, b in
                              zip(before, after))
      and torch.equal(grad_before, base.grad))
# CHECK: eager unchanged: True

torch2_lm_check.check_both_paths(Sparse, out, paths=("torchscript",))
# CHECK: torchscript: loss True, grads True (15 of 15 gradients by name within 0.0001 {{.*}}), bitwise True, None

export(Wrong(), (x,), "wrong.onnx")
r = subprocess.run([str(rp.find_tool("rp-import")), str(out / "wrong.onnx"),
                    "-o", str(out / "wrong.mlir")], capture_output=True,
                   text=True)
last = r.stderr.strip().splitlines()[-1]
print("near miss:", r.returncode, last[last.index("error: "):][:200])
# CHECK: near miss: 1 {{.*}}ScatterElements with indices computed at run time is mapped along the last axis only
