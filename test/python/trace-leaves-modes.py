# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t | FileCheck %s

# rp.trace traces training mode and then gives every module its own mode
# back, not the top module's to all of them: a wrapper (in training mode,
# as a new module is) around a model the user put in eval mode leaves the
# model in eval mode, after a trace and after a refused one. Before, the
# model came back in training mode (module.train(was) of the wrapper):
# Gemma 3n then ran its training-only AltUp weight clamp in a later
# torch.export of the same model, which stopped at "a fake tensor in the
# exported program constant's list" (bench/families.py runs rp.trace before
# the dynamo export, in one process).

import sys
from pathlib import Path

import torch
import torch.nn as nn

import rp

out = Path(sys.argv[1])


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.0)
        self.b = nn.Linear(8, 8)

    def forward(self, x):
        return self.b(self.drop(self.a(x)))


class Wrapper(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x).sum(-1)


class Refused(Wrapper):
    def forward(self, x):
        return torch.logcumsumexp(self.inner(x), dim=-1)


def modes(model):
    return " ".join(f"{n or 'top'}={m.training}"
                    for n, m in model.named_modules())


for name, cls in (("traced", Wrapper), ("refused", Refused)):
    inner = Inner().eval()
    inner.b.train()  # one submodule in the other mode
    model = cls(inner)
    try:
        rp.trace(model, (torch.randn(2, 8),), out / name)
    except rp.TraceError:
        pass
    print(f"{name}: {modes(model)}")

# CHECK: traced: top=True inner=False inner.a=False inner.drop=False inner.b=True
# CHECK: refused: top=True inner=False inner.a=False inner.drop=False inner.b=True
