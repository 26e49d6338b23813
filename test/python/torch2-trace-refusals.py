# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# What rp.trace cannot map ends in an rp.TraceError naming the op, the
# module path and what to do, never in a Python exception from inside rp
# (DeepSeek-V3 once ended in "TypeError: object of type 'Fused' has no
# len()"; it now traces, torch2-families.py): a handler that meets an
# argument form it did not foresee is an "unsupported form" naming the op
# and the exception.

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import hf_models  # noqa: E402
import rp  # noqa: E402

out = Path(sys.argv[1])
tokens = torch.randint(0, hf_models.VOCAB, (1, 16))


def attempt(what, model):
    try:
        rp.trace(model, (tokens,), out / what)
        print(what, "traced")
    except rp.TraceError as err:
        print(what, "TraceError:", err)
        print(what, f"op={err.op} module={err.module_path}")


def broken(e, n):
    raise IndexError("tuple index out of range")


handlers = sys.modules["rp.trace"]._HANDLERS
saved, handlers["silu"] = handlers["silu"], broken
try:
    attempt("llama", hf_models.make("llama"))
finally:
    handlers["silu"] = saved
# CHECK: llama TraceError: rp.trace: unsupported form of aten.silu.default in module 'lm.model.layers.0.mlp.act_fn'
# CHECK-SAME: IndexError: tuple index out of range
# CHECK: llama op=aten.silu.default module=lm.model.layers.0.mlp.act_fn


class Router(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 8))


class Experts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_up_proj = torch.nn.Parameter(torch.randn(4, 12, 8))
        self.down_proj = torch.nn.Parameter(torch.randn(4, 8, 6))


class Picky(torch.nn.Module):
    """The stacked-experts structure, and a forward that rejects what the
    MoE probe feeds it."""

    def __init__(self):
        super().__init__()
        self.top_k = 2
        self.router, self.experts = Router(), Experts()

    def forward(self, x):
        raise RuntimeError("expected a 3-d input")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(hf_models.VOCAB, 8)
        self.moe = Picky()

    def forward(self, tokens):
        return self.moe(self.emb(tokens))


attempt("picky", Net())
# CHECK: picky TraceError: rp.trace: module 'moe' (Picky) looks like a mixture-of-experts block, but running it on random tokens to find its form failed with RuntimeError: expected a 3-d input
# CHECK: picky op=moe routing module=moe

