# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t | FileCheck %s

# Layers rp.trace finds itself may run more than once, and ops between two
# runs join the next one: a looped model (Dory's recurrent section, HRM's
# cycles) runs its blocks twice, with a shared norm and a residual between
# the runs and a per-layer slice of an embedding before each block (Gemma
# 4's per-layer inputs). Each run is its own rp.layer ("blocks.0#2" from
# the second run on) reading the same weights; the loss and every gradient
# equal PyTorch's on 1 device, and 2 devices are bitwise equal to 1. Before
# this, both models were "the layers do not cover the module". Given
# layers keep the strict rule (trace-errors.py); a repeated list that never
# runs (a vision tower) is passed over. A value computed from the
# parameters under torch.no_grad() that an op with gradients reads stops
# the gradient there as in PyTorch (trace-stop-gradient.py).

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
D, V = 16, 64


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(D, 2 * D)
        self.down = nn.Linear(2 * D, D)

    def forward(self, x, extra):
        return x + self.down(torch.tanh(self.up(x + extra)))


class Looped(nn.Module):
    def __init__(self, no_grad_first=False):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.per_layer = nn.Embedding(V, 2 * D)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, V)
        self.no_grad_first = no_grad_first

    def forward(self, tokens):
        h = self.embed(tokens)
        per = self.per_layer(tokens).reshape(*tokens.shape, 2, D)
        start = self.norm(h)
        for loop in range(2):
            off = self.no_grad_first and loop == 0
            with torch.no_grad() if off else torch.enable_grad():
                h = self.norm(h) + start
                for i, b in enumerate(self.blocks):
                    h = b(h, per.select(2, i))
        return self.head(h)


tokens, labels = tiny_gpt.batch(vocab=V)
torch.manual_seed(0)
model = tiny_gpt.make_distinct(Looped())
ref_loss, ref_grads = tiny_gpt.reference(model, tokens, labels)
src = rp.trace(model, (tokens[:1],), out / "looped")
# CHECK: layers: prefix blocks.0 blocks.1 blocks.0#2 blocks.1#2 suffix
print("layers:", *[ln.split('"')[1] for ln in src.read_text().splitlines()
                   if "rp.layer " in ln])
runs = tiny_gpt.train_on_devices(src, out, "looped", tokens, labels)
loss, grads = runs[1]
errs = {n: np.linalg.norm(grads[n] - g) / np.linalg.norm(g)
        for n, g in ref_grads.items() if n in grads}
# CHECK: loss within 1e-4: True
print("loss within 1e-4:", abs(loss - ref_loss) <= 1e-4 * abs(ref_loss))
# CHECK: gradients: 14 of 14 within 1e-4: True
print(f"gradients: {len(errs)} of {len(ref_grads)} within 1e-4:",
      all(e <= 1e-4 for e in errs.values()))
loss2, grads2 = runs[2]
# CHECK: 2 devices bitwise: True
print("2 devices bitwise:", loss2 == loss and sorted(grads2) == sorted(grads)
      and all(np.array_equal(grads2[n], grads[n]) for n in grads))


# The first repeated list a breadth-first search finds may never run on
# text (a multimodal causal LM's vision or audio tower: GOT-OCR 2's, before
# "layer 'lm.model.vision_tower.layers.0' computes nothing"): the layers
# are the first list whose children all ran.
class WithTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.tower = nn.ModuleList([Block(), Block()])
        self.lm = Looped()

    def forward(self, tokens):
        return self.lm(tokens)


src = rp.trace(WithTower(), (tokens[:1],), out / "tower")
# CHECK: tower layers: prefix lm.blocks.0 lm.blocks.1 lm.blocks.0#2 lm.blocks.1#2 suffix
print("tower layers:", *[ln.split('"')[1] for ln in
                         src.read_text().splitlines() if "rp.layer " in ln])

# RWKV rescales its blocks' weights in place under torch.no_grad() by
# 2 ** (block // rescale_every): by 1 in the first blocks, which changes
# neither the value nor its gradient (traced as before the refusal came);
# by 2 the gradient PyTorch reports is that of the rescaled weight, which
# rp cannot express (a stop-gradient would give the weight none), so that
# is refused.
class Rescaled(nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.blocks = nn.ModuleList([nn.Linear(D, D), nn.Linear(D, D)])
        self.head = nn.Linear(D, V)
        self.factor = factor

    def forward(self, tokens):
        with torch.no_grad():
            self.blocks[0].weight.mul_(self.factor)
        h = self.embed(tokens)
        for b in self.blocks:
            h = h + torch.tanh(b(h))
        return self.head(h)


# CHECK: rescaled by 1: traced
# CHECK: rescaled by 2: TraceError: rp.trace: {{.*}} computes aten.mul_.{{.*}} under torch.no_grad() in place into the parameter 'blocks.0.weight'{{.*}}reads it with gradients on
for factor in (1, 2):
    try:
        rp.trace(Rescaled(factor), (tokens[:1],), out / f"rescaled{factor}")
        print(f"rescaled by {factor}: traced")
    except rp.TraceError as err:
        print(f"rescaled by {factor}: TraceError:", err)
