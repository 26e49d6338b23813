# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t | FileCheck %s

# An assert on a value computed from the data (XLM's
# `assert lengths.max().item() <= slen`, the lengths counted from the
# tokens): it held while tracing and the graph is the same either way, so
# rp.trace goes on past it (rp/_capture.py's _in_assert) and the step
# matches PyTorch's. Before: "module 'lm.transformer' (XLMModel) reads the
# value of a tensor computed from the inputs or parameters". Near miss: the
# same read in an `if` is still refused (control flow on data). torch 2
# only: torch 1.13's make_fx stops at any read.

import os
import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import rp  # noqa: E402
import step0  # noqa: E402

out = Path(sys.argv[1])


class Checked(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, x):
        lengths = (x.abs().sum(-1) > 0).sum(-1)
        assert lengths.max().item() <= x.shape[1]
        return x + torch.tanh(self.lin(x))


step0.print_two_block_check(Checked, out, "assert")

# CHECK: assert: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK: assert: gradients: {{[0-9]+}} of {{[0-9]+}}, within 0.0001: True


class Branch(Checked):
    def forward(self, x):
        if (x.abs().sum(-1) > 0).sum().item() > 0:
            return x + torch.tanh(self.lin(x))
        return x


try:
    step0.print_two_block_check(Branch, out, "branch")
except rp.TraceError as err:
    print("branch: TraceError:", err)

# CHECK: branch: TraceError: rp.trace: module 'blocks.0' (Branch) reads the value of a tensor computed from the inputs or parameters
