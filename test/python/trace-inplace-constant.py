# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t | FileCheck %s

# An in-place op writing into a tensor folded at trace time (Llama 4's
# router: torch.full_like(logits, -inf).scatter_(1, top_k_indices,
# top_k_values)) leaves that constant as it was: the trace once recorded
# the written tensor as the constant, so the traced microbatch itself came
# out right and every other one read its scores. Traced on one row and
# trained on two microbatches (the second row's routing differs), the loss
# and every gradient equal PyTorch's, and 2 devices are bitwise equal to 1.

import os
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import rp  # noqa: E402
import tiny_gpt  # noqa: E402

out = Path(sys.argv[1])
D, V, E = 16, 64, 4


class Routed(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(D, E, bias=False)
        self.experts = nn.Parameter(torch.randn(E, D, D) * 0.2)

    def forward(self, x):
        logits = self.router(x)                                # [B, S, E]
        top, idx = torch.topk(logits, 2, dim=-1)
        scores = torch.full_like(logits, float("-inf")).scatter_(-1, idx, top)
        gate = torch.sigmoid(scores)                 # 0 off the top 2
        zero = torch.zeros_like(gate).masked_fill_(gate > 0.5, 1.0)
        y = torch.einsum("bse,edf,bsd->bsf", gate + 0.1 * zero,
                         self.experts, x)
        return x + y


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList([Routed(), Routed()])
        self.head = nn.Linear(D, V)

    def forward(self, tokens):
        h = self.emb(tokens)
        for b in self.blocks:
            h = b(h)
        return self.head(h)


tokens, labels = tiny_gpt.batch(vocab=V)
torch.manual_seed(0)
model = tiny_gpt.make_distinct(LM())
ref_loss, ref_grads = tiny_gpt.reference(model, tokens, labels)
src = rp.trace(model, (tokens[:1],), out / "routed")
runs = tiny_gpt.train_on_devices(src, out, "routed", tokens, labels)
loss, grads = runs[1]
errs = {n: np.linalg.norm(grads[n] - g) / np.linalg.norm(g)
        for n, g in ref_grads.items() if n in grads}
# CHECK: loss within 1e-4: True
print("loss within 1e-4:", abs(loss - ref_loss) <= 1e-4 * abs(ref_loss),
      loss, ref_loss)
# CHECK: gradients: 7 of 7 within 1e-4: True
print(f"gradients: {len(errs)} of {len(ref_grads)} within 1e-4:",
      all(e <= 1e-4 for e in errs.values()), max(errs.values()))
loss2, grads2 = runs[2]
# CHECK: 2 devices bitwise: True
print("2 devices bitwise:", loss2 == loss and sorted(grads2) == sorted(grads)
      and all(np.array_equal(grads2[n], grads[n]) for n in grads))
