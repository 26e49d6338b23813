# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t | FileCheck %s

# ATen ops rp.trace writes as compositions of rp ops (rp/_aten_compose.py),
# in a small LM where each one is on the gradient's path: softplus (beta 1
# and 2, with inputs past the threshold), logsigmoid (Inkling's router;
# inputs past its threshold too), expm1, clamp / clamp_min /
# clamp_max, cumsum along the sequence, repeat, gather along the last axis
# and topk (a router's choice: the values' gradient reaches the chosen
# scores; ties broken as torch.topk breaks them). The step-0 loss and every
# parameter's gradient equal PyTorch autograd's within 1e-4. Before these
# handlers each op was `rp.trace: unsupported op aten.<op>.default`.

import math
import os
import re
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import rp  # noqa: E402
import step0  # noqa: E402
import tiny_gpt  # noqa: E402


class Mix(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.score = nn.Linear(d, 8)
        self.out = nn.Linear(d + 2, d)

    def forward(self, x):
        h = self.a(x)
        y = F.softplus(h) + F.softplus(8 * h, beta=2.0, threshold=5.0)
        y = y + torch.expm1(h.clamp(max=0.5)) + h.clamp(-0.2, 0.3) \
            + h.clamp_min(0.1)
        y = y + F.logsigmoid(h) + F.logsigmoid(40 * h) / 40
        y = y + y.cumsum(dim=1) / 16
        s = self.score(x)
        vals, idx = s.topk(2, dim=-1)
        picked = torch.gather(s.softmax(-1), -1, idx)
        extra = vals * picked                                  # [B, S, 2]
        y = torch.cat([y, extra], dim=-1)
        return x + self.out(y)


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(64, 8)
        self.blocks = nn.Sequential(Mix(), Mix())
        self.head = nn.Linear(16, 64)

    def forward(self, tokens):
        e = self.emb(tokens).repeat(1, 1, 2)                   # [B, S, 16]
        return self.head(self.blocks(e))


tokens, labels = tiny_gpt.batch()
out = Path(sys.argv[1])
torch.manual_seed(0)
for line in step0.check(LM(), {"tokens": tokens}, labels, out, "compose"):
    print(line)

# CHECK:      compose: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: compose: gradients: 15 of 15, within 0.0001: True


# cumsum is one matmul by a triangular constant: nothing in the IR holds
# S^2 times the other dims (Falcon-H1's 256-step Mamba chunks made 8 GiB of
# a broadcast product, over the 16 GiB budget with the rest).
class Cum(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(32, 32)

    def forward(self, x):
        return x + self.lin(x).cumsum(dim=1) / 128


cum = rp.trace(nn.Sequential(Cum(), Cum()), (torch.randn(2, 128, 32),),
               out / "cum")
sizes = [math.prod(int(d) for d in t.split("x")[:-1])
         for t in re.findall(r"tensor<([0-9x]+x[fi][0-9]+)>",
                             cum.read_text())]
# CHECK: cumsum: largest tensor 16384 elements
print("cumsum: largest tensor", max(sizes), "elements")
