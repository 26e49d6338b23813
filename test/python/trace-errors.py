# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t | FileCheck %s

# rp.trace refuses what it cannot map, with the ATen op and the module path
# it ran in; layers that do not cover the module are an error; rp.train
# turns rp-run's failure into rp.ToolError carrying rp-run's message.

import os
import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import rp  # noqa: E402
import tiny_gpt  # noqa: E402

out = Path(sys.argv[1])


def attempt(what, fn):
    try:
        fn()
        print(what, "traced")
    except rp.TraceError as err:
        print(what, "TraceError:", err, f"[op={err.op} module={err.module_path}]")


class LogCumSumExp(nn.Module):
    def forward(self, x):
        return torch.logcumsumexp(x, dim=-1)


class Body(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.mix = LogCumSumExp()

    def forward(self, x):
        return self.mix(self.lin(x))


class Net(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.blocks = nn.Sequential(Body(), Body())
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.blocks(x))


x = torch.randn(2, 8)
# CHECK: unsupported op: TraceError: rp.trace: unsupported op aten.logcumsumexp.default in module 'blocks.0.mix' (LogCumSumExp) [op=aten.logcumsumexp.default module=blocks.0.mix]
attempt("unsupported op:", lambda: rp.trace(Net(), (x,), out / "a"))

# A transposed convolution is refused naming the attribute; any forward
# convolution maps (trace-conv.py).
class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.ConvTranspose2d(3, 4, 3, padding=1))

    def forward(self, img):
        return self.stem(img)


# CHECK: convolution: TraceError: rp.trace: unsupported form of aten.convolution.default in module 'stem.0' (ConvTranspose2d): transposed = True (a transposed convolution, nn.ConvTranspose2d); rp maps forward convolutions only (any stride, padding, dilation and groups) [op=aten.convolution.default module=stem.0]
attempt("convolution:", lambda: rp.trace(Conv(), (torch.randn(2, 3, 8, 8),), out / "conv"))

# Control flow on a tensor's value cannot be one static graph.
class Branch(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        y = self.lin(x)
        return y * 2 if y.sum() > 0 else y


# CHECK: data-dependent: TraceError: rp.trace: module '0' (Branch) reads the value of a tensor {{.*}}.item(), bool() or int() of a tensor); rp traces one static graph, so control flow cannot depend on {{.*}}module=0]
attempt("data-dependent:", lambda: rp.trace(nn.Sequential(Branch(), Branch()), (x,), out / "branch"))

# A write into a view of a tensor the model did not compute (here its
# input) would reach the caller's tensor: refused, naming what rp maps
# (writes into computed tensors: trace-recurrence-ops.py).
class WriteInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        x[:, 0] = self.lin(x)[:, 1]
        return self.lin(x)


# CHECK: write into input: TraceError: rp.trace: unsupported op aten.copy_.default in module '0' (WriteInput); rp maps a write through slices and selects (x[:, t] = h, x[..., :n].copy_(y)) into a tensor the model computed and reads only after the write; this one writes elsewhere (an input, a parameter, a view read again): build the tensor with torch.cat instead
attempt("write into input:", lambda: rp.trace(nn.Sequential(WriteInput(), WriteInput()), (x.clone(),), out / "write"))

# Dropout is traced in training mode (as the module sets it); rp has no
# random ops, so p > 0 is refused and p = 0 is the identity.
class NoMix(Net):
    def __init__(self, dropout):
        super().__init__(dropout)
        for b in self.blocks:
            b.mix = nn.Identity()


# CHECK: dropout: TraceError: rp.trace: unsupported op aten.bernoulli_.float in module 'drop' (Dropout); rp has no random ops (dropout is traced in training mode and must have p = 0) [op=aten.bernoulli_.float module=drop]
attempt("dropout:", lambda: rp.trace(NoMix(0.1), (x,), out / "b"))
# CHECK: no dropout: traced
attempt("no dropout:", lambda: rp.trace(NoMix(0.0), (x,), out / "c"))

gpt = tiny_gpt.GPT()
tokens, _ = tiny_gpt.batch()
# CHECK: gap: TraceError: rp.trace: the layers do not cover the module: aten.native_layer_norm.default in module 'h.1.ln_1' (LayerNorm) runs between layer 'h.0' and the next one; list a layer that contains it
attempt("gap:", lambda: rp.trace(gpt, (tokens,), out / "d", layers=["h.0", "ln_f"]))
# CHECK: not a module: TraceError: rp.trace: layer 'h.7' is not a submodule of GPT; the layers do not cover the module
attempt("not a module:", lambda: rp.trace(gpt, (tokens,), out / "e", layers=["h.0", "h.7"]))
# CHECK: overlap: TraceError: rp.trace: layers 'h.0' and 'h.0.attn' overlap
attempt("overlap:", lambda: rp.trace(gpt, (tokens,), out / "f", layers=["h.0", "h.0.attn"]))
# CHECK: out of order: TraceError: rp.trace: layer 'h.1' runs after layer 'h.0'; list the layers in the order they run, each running once
attempt("out of order:", lambda: rp.trace(gpt, (tokens,), out / "g", layers=["h.1", "h.0"]))
unused = tiny_gpt.GPT()
unused.spare = nn.Linear(4, 4)  # never called by forward
# CHECK: never runs: TraceError: rp.trace: layer 'spare' computes nothing when the module runs; the layers do not cover the module
attempt("never runs:", lambda: rp.trace(unused, (tokens,), out / "h", layers=["h.0", "h.1", "spare"]))

# Explicit layers that do cover the module: the given ones, with prefix
# and suffix around them.
src = rp.trace(gpt, (tokens,), out / "i", layers=["h.0", "h.1", "ln_f"])
layers = [l.split('"')[1] for l in src.read_text().splitlines() if "rp.layer " in l]
# CHECK: explicit layers: prefix h.0 h.1 ln_f suffix
print("explicit layers:", *layers)

# rp-run's errors reach Python as ToolError with its stderr.
plan = rp.compile(src)
try:
    list(rp.train(plan, {"tokens": tokens[:1]}))
except rp.ToolError as err:
    # CHECK: train: ToolError rp-run 1
    print("train: ToolError", err.tool, err.returncode)
    # CHECK-NEXT: rp-run: error: input 'tokens' has shape [1, 16]; the plan takes 1 microbatches of [2, 16]
    print(err.stderr.strip().splitlines()[-1])
