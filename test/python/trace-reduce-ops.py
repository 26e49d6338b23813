# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t | FileCheck %s

# ATen reductions rp.trace writes as compositions of rp ops
# (rp/_aten_reduce.py), each on the gradient's path of a small LM:
# logsumexp over a causally masked score row (GraniteSWA's attention
# sinks: sigmoid(logsumexp(scores) - sink)), Tensor.norm(p=2) clamped
# (Zaya's q/k L2-norm), sum with a dtype (DiffLlama's lambdas) and
# index_select with a repeated index (XLNet's relative shift), std
# without correction (Gemma 3n's Gaussian top-k: relu(h - mean - 1.64 *
# std)) and var with the default one over two dims. The step-0
# loss and every parameter's gradient equal PyTorch autograd's within
# 1e-4. Before these handlers each was `rp.trace: unsupported op` or
# `unsupported form of aten.sum.dim_IntList`.

import os
import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import step0  # noqa: E402


class Mix(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.sink = nn.Parameter(torch.randn(1) * 0.1)
        self.lam = nn.Parameter(torch.randn(d) * 0.3)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k = self.q(x), self.k(x)
        q = q / q.norm(p=2, dim=-1, keepdim=True).clamp_min(1e-6)
        scores = q @ k.transpose(1, 2)                         # [B, S, S]
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        lse = torch.logsumexp(scores, dim=-1, keepdim=True)    # [B, S, 1]
        gate = torch.sigmoid(lse - self.sink)
        lam = torch.exp(torch.sum(self.lam * self.lam, dim=-1,
                                  dtype=torch.float32))
        idx = torch.tensor([0, 2, 2, 1] * (d // 4))
        picked = torch.index_select(self.k(x), 2, idx)
        both = torch.logsumexp(scores[:, :, :4], dim=(1, 2))   # [B]
        h = self.k(x)
        cut = h.mean(-1, keepdim=True) + 1.64 * torch.std(
            h, dim=-1, keepdim=True, unbiased=False)
        sparse = torch.relu(h - cut)
        spread = torch.var(q, dim=(1, 2))                       # [B]
        return x + self.out(gate * x * lam + picked + sparse) + \
            (both + spread)[:, None, None]


step0.print_two_block_check(Mix, Path(sys.argv[1]), "reduce")

# CHECK:      reduce: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: reduce: gradients: 19 of 19, within 0.0001: True
