# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t | FileCheck %s

# `int | bool` and `int & bool` through the TorchScript exporter (opset 17)
# after rp.onnx_symbolics.register(): CPM-Ant's attention mask is
# `context | (bool mask)` with an int64 context, then `& (span == span)`.
# The exporter refuses bitwise ops on non-bool values, and ONNX's
# BitwiseOr/BitwiseAnd start at opset 18; with one side 0 or 1 they are
# exact in arithmetic: a | b = a + b (1 - a mod 2), a & b = b (a mod 2)
# (python/rp/_onnx_bitwise.py). Checked: the export stops without
# register(); after it, every value of a table of negative, zero and
# positive integers against both bools matches PyTorch in the exported
# graph (onnx's reference evaluator), and an LM whose attention mask is
# `(int context | causal) & (a bool of the tokens)` trains on 1 and 2
# devices with every gradient right (even and odd, negative and positive
# context values pick different keys, so a wrong parity changes the loss).
# Near miss: `|` of two integer tensors at opset 17 is refused at export,
# naming opset 18.

import sys
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import torch2_lm_check  # noqa: E402

import rp.onnx_symbolics  # noqa: E402


class Masked(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)

    def forward(self, x, tokens):
        s = x.shape[1]
        i = torch.arange(s)
        context = (i[:, None] * 7 + i[None, :] * 3) % 9 - 4  # -4 .. 4
        causal = i[None, :] <= i[:, None]
        keep = (tokens > 20)[:, None, :]
        allowed = ((context | causal) & keep) != 0
        allowed = allowed | torch.eye(s, dtype=torch.bool)
        att = self.q(x) @ self.k(x).transpose(-1, -2) * 0.25
        att = att.masked_fill(~allowed, float("-inf"))
        return x + torch.softmax(att, -1) @ self.v(x)


class Table(nn.Module):
    def forward(self, a, b):
        return a | b, b | a, a & b, b & a, torch.bitwise_or(a.int(), b)


class IntInt(nn.Module):
    def forward(self, a, b):
        return a | b


out = Path(sys.argv[1])
a = torch.arange(-5, 6).repeat_interleave(2)
b = torch.tensor([True, False] * 11)


def export(module, args, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(out / name), opset_version=17,
                          dynamo=False)


def attempt(name, module, args):
    try:
        export(module, args, name + ".onnx")
        print(f"{name}: exported")
    except Exception as e:  # the exporter's own error types
        print(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:150]}")


attempt("before register", Table(), (a, b))
# CHECK: before register: SymbolicValueError: ONNX export does NOT support exporting bitwise OR for non-boolean input values

rp.onnx_symbolics.register()
export(Table(), (a, b), "table.onnx")
import onnx  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

model = onnx.load(str(out / "table.onnx"))
got = ReferenceEvaluator(model).run(
    None, {model.graph.input[0].name: a.numpy(),
           model.graph.input[1].name: b.numpy()})
want = Table()(a, b)
print("table:", [bool(g.dtype == w.numpy().dtype
                      and np.array_equal(g, w.numpy()))
                 for g, w in zip(got, want)])
# CHECK: table: [True, True, True, True, True]

torch2_lm_check.check_both_paths(Masked, out, tokens_to_layers=True,
                                 paths=("torchscript",))
# CHECK: torchscript: loss True, grads True (15 of 15 gradients by name within 0.0001 {{.*}}), bitwise True, None

attempt("int | int", IntInt(), (a, a))
# CHECK: int | int: SymbolicValueError: Unsupported: ONNX export of operator aten::__or_, | of two integer tensors needs ONNX's BitwiseOr (opset 18)
