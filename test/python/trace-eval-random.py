# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t | FileCheck %s

# rp.trace traces training mode. A module whose training mode draws random
# numbers (PhiMoE's router: sparsemixer samples its experts with
# exponential_ noise) and that the user left in eval mode is traced again
# in eval mode, the step PyTorch runs from the same model: PhiMoE picks
# its experts there by torch.max(dim)'s indices, which rp.trace maps (the
# first position of the max, as rp-import's ArgMax). Loss and every
# gradient against PyTorch. Near miss: the same router in training mode is
# still refused (its step is random). Before: "unsupported op
# aten.exponential_.default ... rp has no random ops", then "unsupported
# use of result 1 of aten.max.dim".

import os
import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import rp  # noqa: E402
import step0  # noqa: E402
import tiny_gpt  # noqa: E402

out = Path(sys.argv[1])


class Router(nn.Module):
    """Picks one of 4 experts per token: by the max score in eval mode,
    with Gumbel noise on the scores in training mode."""

    def __init__(self, d=16, n=4):
        super().__init__()
        self.gate = nn.Linear(d, n)

    def forward(self, x):
        scores = self.gate(x)
        if self.training:
            noise = torch.empty_like(scores).exponential_().log()
            scores = scores - noise
        best, idx = scores.max(dim=-1)
        return torch.sigmoid(best), idx


class Block(nn.Module):
    def __init__(self, d=16, n=4):
        super().__init__()
        self.router = Router(d, n)
        self.experts = nn.Parameter(torch.randn(n, d) * 0.5)

    def forward(self, x):
        w, idx = self.router(x)
        pick = (torch.arange(4) == idx[..., None]).to(x.dtype)  # one-hot
        return x + w[..., None] * torch.tanh(x * (pick @ self.experts))


tokens, labels = tiny_gpt.batch()
torch.manual_seed(0)
model = step0.TwoBlockLM(Block)
for b in model.blocks:
    b.router.eval()
for line in step0.check(model, {"tokens": tokens}, labels, out, "eval"):
    print(line)
print("modes after:", [b.router.training for b in model.blocks])

# CHECK: eval: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK: eval: gradients: {{[0-9]+}} of {{[0-9]+}}, within 0.0001: True
# CHECK: modes after: [False, False]

model.train()
try:
    rp.trace(model, (tokens[:1],), out / "train")
    print("training: traced")
except rp.TraceError as err:
    print("training: TraceError:", err)

# CHECK: training: TraceError: rp.trace: unsupported op aten.exponential_.default in module 'blocks.0.router' (Router); rp has no random ops: rp.trace traces training mode, where this module draws random numbers (a router's sampling or jitter noise); rp cannot train it (a module left in eval mode, model.eval(), is traced in eval mode when its training mode draws random numbers)
