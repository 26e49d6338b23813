# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t | FileCheck %s

# ONNX ops rp-import folded only on input-independent values, now also on
# run-time values (lib/Import/ONNX/RuntimeComposed.cpp, ScatterHandlers.cpp),
# through the TorchScript exporter (opset 17) and the dynamo exporter
# (opset 18), each on the gradient's path of a small LM: Abs (Dory), Clip
# (clamp), ReduceLogSumExp (GraniteSWA's attention sinks), Tile
# (DiffLlama's repeat), Trilu of a run-time tensor (the gated delta rule's
# masks), And/Or/Xor of masks computed from the tokens (Gemma 4's),
# ArgMax and ArgMin of a row (gathered by index), CumSum along two axes
# of a run-time tensor, Mod of integer ids (BLT's hashed n-grams) and a
# float fmod, and a
# recurrence written one step at a time into a fresh tensor (out[:, t] =
# h: RWKV's and RecurrentGemma's, which dynamo writes as ScatterElements).
# Per path, as bench/families.py checks a family: the loss within 1e-4 of
# PyTorch's, every gradient by its parameter name within 1e-4, 2 devices
# bitwise equal to 1. Before: `operator <op> is supported on
# input-independent values only` for each.

import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import torch2_lm_check  # noqa: E402


class Mix(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, d // 2)
        self.decay = nn.Parameter(torch.randn(d) * 0.5)
        self.sink = nn.Parameter(torch.randn(1) * 0.1)
        self.out = nn.Linear(d, d)

    def forward(self, x, tokens):
        b, s, d = x.shape
        h = self.a(x)
        y = h.abs() * 0.5 + h.clamp(-0.2, 0.3)
        scores = torch.tril(h @ h.transpose(1, 2))              # [B, S, S]
        lse = torch.logsumexp(scores, dim=-1, keepdim=True)     # [B, S, 1]
        y = y + torch.sigmoid(lse - self.sink) * h
        y = y + self.b(x).repeat(1, 1, 2)
        rare = (tokens == 3) | (tokens == 5)
        odd = (tokens > 10) & (tokens < 40)
        either = rare ^ odd
        y = y + torch.where(either[..., None], h, -h) * 0.1
        # The largest and smallest of each row, picked by index (ArgMax,
        # ArgMin, then GatherElements: PhiMoE's sparsemixer).
        y = y + h.gather(-1, h.argmax(-1, keepdim=True)) * 0.2
        y = y + h.gather(-1, h.argmin(-1, keepdim=True)) * 0.3
        # A running sum over the sequence and over the features (CumSum:
        # one matmul with a triangular constant, Mamba-2's chunked scan).
        y = y + torch.cumsum(h, dim=1) * 0.1 + torch.cumsum(h, dim=-1) * 0.05
        # Mod of run-time values: integer ids hashed into buckets (BLT's
        # byte n-grams: Python's %), and a float fmod on the gradient's
        # path (its gradient 1, as torch.fmod's).
        buckets = (tokens * 7919 - 300) % 13
        y = y + buckets.float()[..., None] * 0.01 + torch.fmod(h, 0.7) * 0.1
        out = torch.zeros_like(h)
        state = torch.zeros_like(h[:, 0])
        w = torch.sigmoid(self.decay)
        for t in range(s):
            state = w * state + h[:, t]
            out[:, t] = torch.tanh(state)
        return x + self.out(y + out)


torch2_lm_check.check_both_paths(Mix, sys.argv[1], tokens_to_layers=True)

# CHECK: torchscript: loss True, grads True (19 of 19 gradients by name within 0.0001 {{.*}}), bitwise True, None
# CHECK: dynamo: loss True, grads True (19 of 19 gradients by name within 0.0001 {{.*}}), bitwise True, None
