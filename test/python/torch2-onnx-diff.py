# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t | FileCheck %s

# torch.diff, as BLT marks its patch boundaries: differences along the
# sequence with a prepended first row, a second difference (n=2), and the
# diff of a bool mask (its xor). On every path bench/families.py checks
# (loss, every gradient by name, 2 devices bitwise). Before: the
# TorchScript export stopped at "Exporting the operator 'aten::diff' to
# ONNX opset version 17 is not supported" (rp.onnx_symbolics writes it as
# Slices and Sub, Xor for bools); rp.trace and the dynamo exporter
# decompose it themselves.

import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import torch2_lm_check  # noqa: E402


class Diffs(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.a = nn.Linear(d, d)

    def forward(self, x):
        h = self.a(x)
        step = torch.diff(h, dim=1, prepend=h[:, :1])       # [b, s, d]
        curve = torch.diff(h, n=2, dim=-1)                   # [b, s, d - 2]
        edge = torch.diff(h > 0, dim=1, prepend=(h > 0)[:, :1])
        y = torch.tanh(step) + edge.to(h.dtype) * 0.1
        return x + y + torch.nn.functional.pad(curve, (1, 1)) * 0.1


torch2_lm_check.check_both_paths(Diffs, sys.argv[1],
                                 paths=("trace", "torchscript", "dynamo"))

# CHECK: trace: loss True, grads True ({{[0-9]+}} of {{[0-9]+}} gradients by name within 0.0001 {{.*}}), bitwise True, None
# CHECK: torchscript: loss True, grads True ({{[0-9]+}} of {{[0-9]+}} gradients by name within 0.0001 {{.*}}), bitwise True, None
# CHECK: dynamo: loss True, grads True ({{[0-9]+}} of {{[0-9]+}} gradients by name within 0.0001 {{.*}}), bitwise True, None
