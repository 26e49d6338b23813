# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t | FileCheck %s

# The two forms the linear-recurrence families write that rp.trace maps
# as compositions of rp ops: a recurrence whose steps are written in place
# into a fresh tensor, out[:, t] = h (RWKV's WKV, RecurrentGemma's RG-LRU,
# the gated delta rule's chunk loop: rp/_capture.py turns each write into
# a concat around the row, a repeated index written twice keeping the
# last), and a unit lower-triangular solve (the gated delta rule's UT
# transform, torch.linalg.solve_triangular(A, B, upper=False,
# unitriangular=True): rp/_aten_linalg.py, the product of
# (I + N^(2^j)) factors), and the same inverse by forward substitution
# written row by row into a computed tensor (attn[..., i, :i] = row + ...,
# a chain of a select and a slice: Kimi-Linear's and Bailing's form). The step-0 loss and every parameter's gradient
# equal PyTorch autograd's within 1e-4. Before: `unsupported op
# aten.copy_.default ... rp has no writes into a view` and `unsupported
# op aten.linalg_solve_triangular.default`.

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
        self.a = nn.Linear(d, d)
        self.k = nn.Linear(d, 8)
        self.v = nn.Linear(d, d)
        self.decay = nn.Parameter(torch.randn(d) * 0.5)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        u = self.a(x)
        out = torch.zeros_like(u)
        h = torch.zeros(b, d)
        w = torch.sigmoid(self.decay)
        for t in range(s):
            h = w * h + u[:, t]
            out[:, t] = torch.tanh(h)
        out[:, -1] = out[:, -1] * 0.5 + h        # the last row written again
        # A [B, 8, 8] unit lower-triangular system (its upper part and
        # diagonal are ignored) solved for [B, 8, d] right-hand sides.
        k = self.k(x)[:, :8]                      # [B, 8, 8]
        a = 0.3 * torch.tanh(k)
        rhs = self.v(x)[:, :8]                    # [B, 8, d]
        sol = torch.linalg.solve_triangular(a, rhs, upper=False,
                                            unitriangular=True)
        # The same inverse by forward substitution, written in place row
        # by row into a computed tensor (the torch-export form of the gated
        # delta rule: attn[..., i, :i] = row + ...).
        inv = -torch.tril(a, -1)
        for i in range(1, 8):
            row = inv[..., i, :i].clone()
            sub = inv[..., :i, :i].clone()
            inv[..., i, :i] = row + (row.unsqueeze(-1) * sub).sum(-2)
        sol = sol + (inv + torch.eye(8)) @ rhs
        mixed = torch.cat([sol, torch.zeros(b, s - 8, d)], dim=1)
        return x + self.out(out + 0.1 * mixed)


step0.print_two_block_check(Mix, Path(sys.argv[1]), "recurrence")

# CHECK:      recurrence: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: recurrence: gradients: 21 of 21, within 0.0001: True
