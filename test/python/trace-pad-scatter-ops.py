# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t | FileCheck %s

# ATen ops rp.trace writes as compositions of rp ops (rp/_aten_pad.py), in
# a small LM where each one is on the gradient's path: constant_pad_nd
# (a short convolution's left padding, a value pad, and RWKV's time shift,
# which pads one row before and crops one after), abs (with exact zeros,
# whose gradient PyTorch takes as 0), scatter of a constant at top-k
# indices along the last axis (a sparse attention indexer's mask; two
# slots naming one column), scatter of the top-k values into a row of
# -inf (Llama 4's router; the values get the gradient), and/or of bool
# masks and of int masks holding 0 and 1 (CPM-Ant's attention mask starts
# from an int32 tensor of ones), and the count of a bool mask. The step-0
# loss and every parameter's gradient equal PyTorch autograd's within 1e-4.
# Before
# these handlers each op was `rp.trace: unsupported op aten.<op>`.

import os
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import step0  # noqa: E402


class Mix(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.score = nn.Linear(d, 16)
        self.out = nn.Linear(d, d)
        self.shift = nn.ZeroPad2d((0, 0, 1, -1))

    def forward(self, x):
        h = self.a(x)                                          # [B, S, 16]
        y = F.pad(h, (2, 0))[..., :-2] + F.pad(h, (0, 1), value=0.5)[..., 1:]
        y = y + self.shift(h)
        y = y + torch.relu(h).abs() + (h - 0.1).abs()
        s = self.score(x)
        idx = s.topk(2, dim=-1).indices
        idx = torch.cat([idx, idx[..., :1]], dim=-1)           # a repeat
        masked = s.scatter(-1, idx, float("-inf"))
        keep = (s > 0) & (masked > -1e30)
        keep = keep | (s < -0.5)
        top, top_idx = s.topk(2, dim=-1)
        routed = torch.full_like(s, float("-inf")).scatter_(-1, top_idx, top)
        y = y + torch.sigmoid(routed)
        ones = torch.ones(s.shape, dtype=torch.int32)         # CPM-Ant's
        both = (ones & (s > 0)) | (s < -0.5)                   # int32 0/1
        count = (s > 0).sum(-1, keepdim=True)                  # int64
        y = y + both * s + count / 16
        y = y + torch.where(keep, s, torch.zeros_like(s)) \
            + masked.clamp(min=-1.0)
        return x + self.out(y)


step0.print_two_block_check(Mix, Path(sys.argv[1]), "pad")

# CHECK:      pad: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: pad: gradients: 15 of 15, within 0.0001: True
