# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t | FileCheck %s

# Where PyTorch stops a gradient, rp.trace puts an rp.stop_gradient: after
# a value computed from the parameters under torch.no_grad() that an op
# with gradients reads (HRM's early recurrent cycles, before this refused
# as "rp has no op that stops a gradient"), and after x.detach() of a value
# with a gradient (before this traced as an identity, so rp trained on
# another gradient than PyTorch's). The loss and every gradient equal
# PyTorch's on 1 device, 2 devices are bitwise equal to 1, and each model's
# gradient differs from the one it would have without the stop (so the op
# is what makes them equal). A model without either emits none. A custom
# autograd.Function's forward also runs with gradients off, but its
# backward gives a gradient: its ops are differentiated as called, with no
# stop (Bloom's GELU; a stop there lost 8 of Bloom's 29 gradients).

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

    def forward(self, x):
        return x + self.down(torch.tanh(self.up(x)))


class Cycles(nn.Module):
    """HRM's form: the first cycle of the shared blocks runs without
    gradients, the second with."""

    def __init__(self, stop=True):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, V)
        self.stop = stop

    def forward(self, tokens):
        h = self.embed(tokens)
        start = h
        for cycle in range(2):
            off = self.stop and cycle == 0
            with torch.no_grad() if off else torch.enable_grad():
                h = self.norm(h) + start
                for b in self.blocks:
                    h = b(h)
        return self.head(h)


class Detached(nn.Module):
    """A gate read once with its gradient and once through .detach()."""

    def __init__(self, stop=True):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.gate = nn.Linear(D, D)
        self.mix = nn.Linear(D, D)
        self.head = nn.Linear(D, V)
        self.stop = stop

    def forward(self, tokens):
        h = self.embed(tokens)
        g = torch.sigmoid(self.gate(h))
        held = g.detach() if self.stop else g
        h = h + self.mix(h) * held + 0.5 * g
        return self.head(torch.tanh(h))


class TanhGate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.tanh(x)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        t = torch.tanh(x)
        return dy * (t + x * (1 - t * t))


class Custom(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.up = nn.Linear(D, D)
        self.head = nn.Linear(D, V)

    def forward(self, tokens):
        return self.head(TanhGate.apply(self.up(self.embed(tokens))))


tokens, labels = tiny_gpt.batch(vocab=V)


def check(name, make):
    torch.manual_seed(0)
    model = tiny_gpt.make_distinct(make(True))
    ref_loss, ref_grads = tiny_gpt.reference(model, tokens, labels)
    free = make(False)
    free.load_state_dict(model.state_dict())
    _, free_grads = tiny_gpt.reference(free, tokens, labels)
    print(f"{name}: a gradient differs without the stop:",
          any(np.linalg.norm(free_grads[n] - g) > 1e-3 * np.linalg.norm(g)
              for n, g in ref_grads.items()))
    src = rp.trace(model, (tokens[:1],), out / name)
    print(f"{name}: stop_gradient ops:",
          src.read_text().count("rp.stop_gradient") > 0)
    plain = rp.trace(free, (tokens[:1],), out / f"{name}-free")
    print(f"{name}: without the stop:",
          plain.read_text().count("rp.stop_gradient"))
    runs = tiny_gpt.train_on_devices(src, out, name, tokens, labels)
    loss, grads = runs[1]
    errs = {n: np.linalg.norm(grads[n] - g) / np.linalg.norm(g)
            for n, g in ref_grads.items() if n in grads}
    print(f"{name}: loss within 1e-4:",
          abs(loss - ref_loss) <= 1e-4 * abs(ref_loss))
    print(f"{name}: gradients: {len(errs)} of {len(ref_grads)} within 1e-4:",
          all(e <= 1e-4 for e in errs.values()))
    loss2, grads2 = runs[2]
    print(f"{name}: 2 devices bitwise:",
          loss2 == loss and sorted(grads2) == sorted(grads) and
          all(np.array_equal(grads2[n], grads[n]) for n in grads))


# CHECK: cycles: a gradient differs without the stop: True
# CHECK-NEXT: cycles: stop_gradient ops: True
# CHECK-NEXT: cycles: without the stop: 0
# CHECK-NEXT: cycles: loss within 1e-4: True
# CHECK-NEXT: cycles: gradients: 13 of 13 within 1e-4: True
# CHECK-NEXT: cycles: 2 devices bitwise: True
check("cycles", Cycles)
# CHECK: detach: a gradient differs without the stop: True
# CHECK-NEXT: detach: stop_gradient ops: True
# CHECK-NEXT: detach: without the stop: 0
# CHECK-NEXT: detach: loss within 1e-4: True
# CHECK-NEXT: detach: gradients: 7 of 7 within 1e-4: True
# CHECK-NEXT: detach: 2 devices bitwise: True
check("detach", Detached)

torch.manual_seed(0)
custom = tiny_gpt.make_distinct(Custom())
c_loss, c_ref = tiny_gpt.reference(custom, tokens, labels)
apply_before = torch.autograd.Function.__dict__.get("apply")
src = rp.trace(custom, (tokens[:1],), out / "custom")
# CHECK: function: stop_gradient ops: 0; apply restored: True
print(f"function: stop_gradient ops: "
      f"{src.read_text().count('rp.stop_gradient')}; apply restored: "
      f"{torch.autograd.Function.__dict__.get('apply') is apply_before}")
runs = tiny_gpt.train_on_devices(src, out, "custom", tokens, labels)
loss, grads = runs[1]
# CHECK-NEXT: function: loss within 1e-4: True; gradients 5 of 5 within 1e-4: True; 2 devices bitwise: True
print("function: loss within 1e-4:", abs(loss - c_loss) <= 1e-4 * abs(c_loss),
      end="; ")
print(f"gradients {sum(n in grads for n in c_ref)} of {len(c_ref)} within "
      f"1e-4:", all(n in grads and np.linalg.norm(grads[n] - g) <=
                    1e-4 * np.linalg.norm(g) for n, g in c_ref.items()),
      end="; ")
loss2, grads2 = runs[2]
print("2 devices bitwise:", loss2 == loss and all(
    np.array_equal(grads2[n], grads[n]) for n in grads))
