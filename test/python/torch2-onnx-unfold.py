# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t | FileCheck %s

# Tensor.unfold, as Inkling2's short convolution reads its causal windows:
# the input padded on the left and sliced to its last s + k - 1 positions
# by an end the tracer records from the sequence length, then
# context.unfold(-1, k, 1).flip(-1), weighted and summed over the window;
# a second unfold with step 2 over the sequence. On every path
# bench/families.py checks (loss, every gradient by name, 2 devices
# bitwise). Before: rp.trace stopped at "unsupported op
# aten.unfold.default" (rp/_aten_movement.py maps it now: one strided
# slice per window offset), and the TorchScript export at "ONNX export of
# operator Unfold, input size not accessible" (rp.onnx_symbolics writes it
# as Slices whose ends count from the back).

import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import torch2_lm_check  # noqa: E402


class ShortConv(nn.Module):
    def __init__(self, d=16, k=4):
        super().__init__()
        self.k = k
        self.proj = nn.Linear(d, d)
        self.taps = nn.Parameter(torch.randn(k, d) * 0.5)

    def forward(self, x):
        b, s, d = x.shape
        ctx = self.proj(x).transpose(1, 2)                  # [b, d, s]
        ctx = F.pad(ctx, (self.k - 1, 0))[..., -(s + self.k - 1):]
        win = ctx.unfold(-1, self.k, 1).flip(-1).transpose(1, 2)  # [b,s,d,k]
        y = (win * self.taps.T).sum(-1)
        # Step 2 over the sequence, windows of 3: [b, 7, d, 3].
        pairs = x.unfold(1, 3, 2).mean(-1)
        y = y + F.pad(pairs, (0, 0, 0, s - pairs.shape[1]))
        return x + y


torch2_lm_check.check_both_paths(ShortConv, sys.argv[1],
                                 paths=("trace", "torchscript", "dynamo"))

# CHECK: trace: loss True, grads True ({{[0-9]+}} of {{[0-9]+}} gradients by name within 0.0001 {{.*}}), bitwise True, None
# CHECK: torchscript: loss True, grads True ({{[0-9]+}} of {{[0-9]+}} gradients by name within 0.0001 {{.*}}), bitwise True, None
# CHECK: dynamo: loss True, grads True ({{[0-9]+}} of {{[0-9]+}} gradients by name within 0.0001 {{.*}}), bitwise True, None
