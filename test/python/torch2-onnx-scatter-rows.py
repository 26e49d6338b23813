# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t | FileCheck %s

# ScatterND with constant indices that are not a box (ScatterHandlers.cpp's
# writeRows): writes at scattered positions, `y[:, [0, 3, 5, 9]] = u` and
# `w[:, [1, 4, 4, 7], [2, 0, 9, 3]] = v`, on run-time values on the
# gradient's path of a small LM (the TorchScript exporter writes both as
# ScatterND; Bailing's and Kimi's linear attention write such indices).
# The second writes element (4, 9) and (4, 0) of each row and so on.
# Per path, as bench/families.py checks a family: the loss within 1e-4 of
# PyTorch's, every gradient by its parameter name within 1e-4, 2 devices
# bitwise equal to 1. Before: "a ScatterND of run-time updates is mapped
# only as a slice write ...; these indices are not one".

import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import torch2_lm_check  # noqa: E402


class Mix(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, d)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        y = x.clone()
        y[:, [0, 3, 5, 9]] = h[:, 4:8] * 2.0
        z = self.b(y)
        w = z.clone()
        w[:, [1, 4, 4, 7], [2, 0, 9, 3]] = torch.sigmoid(h[:, 2:6, 5])
        return x + w


torch2_lm_check.check_both_paths(Mix, sys.argv[1])

# CHECK: torchscript: loss True, grads True (11 of 11 gradients by name within 0.0001 {{.*}}), bitwise True, None
# CHECK: dynamo: loss True, grads True (11 of 11 gradients by name within 0.0001 {{.*}}), bitwise True, None
