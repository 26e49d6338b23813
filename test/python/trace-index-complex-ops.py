# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t | FileCheck %s

# ATen ops rp.trace writes as compositions of rp ops, each on the
# gradient's path of a small LM: advanced indexing with one index tensor
# (rp/_aten_index.py: a learned table read at positions, as Whisper's
# embed_positions[position_ids], and a middle axis picked, as Falcon's
# x[:, :, idx]; a repeated index accumulates; a boolean mask of rows
# computed from constants read and written, as X-MOD's language adapters:
# z[keep] = f(y[keep])), clamp with tensor bounds
# (PhiMoE's router, both bounds run-time tensors that broadcast) and
# complex rotary products (rp/_aten_complex.py:
# view_as_complex times a constant complex table and times a run-time
# complex value, then view_as_real, as DeepSeek-V2 and Llama 4 write
# rotary embeddings). The step-0 loss and every parameter's gradient equal
# PyTorch autograd's within 1e-4. Before these handlers each op was
# `rp.trace: unsupported op` or `unsupported form of aten.<op>`.

import os
import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import step0  # noqa: E402


class Mix(nn.Module):
    def __init__(self, d=16, s=64):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, d)
        self.table = nn.Parameter(torch.randn(s, d) * 0.1)
        self.score = nn.Linear(d, 8)
        self.out = nn.Linear(d, d)
        freqs = torch.outer(torch.arange(s).float(),
                            1.0 / 100 ** (torch.arange(0, d, 2).float() / d))
        self.register_buffer("cis", torch.polar(torch.ones_like(freqs),
                                                freqs), persistent=False)

    def forward(self, x):
        b, s, d = x.shape
        pos = torch.arange(s)
        y = x + self.table[pos]                                # [B, S, D]
        idx = torch.tensor([3, 0, 3, 1])                       # a repeat
        h = self.a(y).reshape(b, s, 4, 4)
        y = y + h[:, :, idx].reshape(b, s, d)
        keep = torch.arange(b) % 2 == 0                        # a constant
        z = torch.zeros_like(y)
        z[keep] = self.b(y[keep])
        y = y + z
        lo, hi = self.b(y)[..., :1], self.b(y)[..., 1:2] + 1.0
        y = y + self.a(y).clamp(lo, hi) + self.b(y).clamp(min=lo)
        y = y + torch.sigmoid(self.score(y)).repeat(1, 1, 2)
        q = torch.view_as_complex(self.a(y).float().reshape(b, s, -1, 2))
        k = torch.view_as_complex(self.b(y).float().reshape(b, s, -1, 2))
        rot = torch.view_as_real(q * self.cis[:s]).flatten(2)
        both = torch.view_as_real(q * k).flatten(2)
        return x + self.out(y + rot + 0.1 * both)


step0.print_two_block_check(Mix, Path(sys.argv[1]), "index")

# CHECK:      index: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: index: gradients: 21 of 21, within 0.0001: True
