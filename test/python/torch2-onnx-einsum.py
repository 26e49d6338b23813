# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t | FileCheck %s

# Einsum on run-time values (lib/Import/ONNX/EinsumHandler.cpp), through the
# TorchScript exporter (opset 17) and the dynamo exporter (opset 18), on
# the gradient's path of a small LM, with the equations XLNet's relative
# attention ('ibh,hnd->ibnd', 'ibnd,jbnd->bnij', 'ijbn->bnij',
# 'bnij,jbnd->ibnd', 'ibnd,hnd->ibh'), ProphetNet's ('bnhtc,bnhsc->bnhts')
# and Falcon-H1's Mamba mixer ('bclhn,bclhp->bchpn', 'bzch,bzhpn->bchpn')
# write, one with three operands and one summing a letter no other operand
# has. Per path, as bench/families.py checks a family: the loss within 1e-4
# of PyTorch's, every gradient by its parameter name within 1e-4, 2 devices
# bitwise equal to 1. Before: `operator Einsum is supported on
# input-independent values only`.

import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import torch2_lm_check  # noqa: E402

D, N, H = 16, 2, 4  # width, heads, head width


class Mix(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Parameter(torch.randn(D, N, H) * 0.2)
        self.k = nn.Parameter(torch.randn(D, N, H) * 0.2)
        self.v = nn.Parameter(torch.randn(D, N, H) * 0.2)
        self.o = nn.Parameter(torch.randn(D, N, H) * 0.2)
        self.gate = nn.Linear(D, D)

    def forward(self, x):
        i = x.transpose(0, 1)                                   # [S, B, D]
        q = torch.einsum("ibh,hnd->ibnd", i, self.q)
        k = torch.einsum("ibh,hnd->ibnd", i, self.k)
        v = torch.einsum("ibh,hnd->ibnd", i, self.v)
        s = torch.einsum("ibnd,jbnd->bnij", q, k)               # [B, N, S, S]
        s = s + torch.einsum("ijbn->bnij", torch.tanh(
            torch.einsum("ibnd,jbnd->ijbn", q, v)))
        p = torch.softmax(s, dim=-1)
        a = torch.einsum("bnij,jbnd->ibnd", p, v)
        y = torch.einsum("ibnd,hnd->ibh", a, self.o).transpose(0, 1)
        # ProphetNet's and Mamba's forms on [B, C, L, N, H] chunks.
        b, t, _ = x.shape
        c = x.reshape(b, 2, t // 2, 4, 4)                       # b c l h n
        g = torch.einsum("bclhn,bclhp->bchpn", c, torch.sigmoid(c))
        z = torch.einsum("bzch,bzhpn->bchpn", c.sum(-1)[:, :, :2, :],
                         g * 0.1)
        w = torch.einsum("bnhtc,bnhsc->bnhts", c.permute(0, 3, 1, 2, 4),
                         c.permute(0, 3, 1, 2, 4))
        # Three operands, and a letter summed away by one operand alone.
        e = torch.einsum("bth,hk,bsk->bts", x, self.gate.weight, x)
        f = torch.einsum("bts,bsx->bt", torch.softmax(e, -1), x[..., :3])
        return (x + y + self.gate(x) * f[..., None] * 0.1 +
                z.sum((-1, -2, -3))[:, :, None, None].expand(b, 2, t // 2, D)
                .reshape(b, t, D) * 0.01 +
                w.flatten(1).mean(1)[:, None, None] * 0.01)


torch2_lm_check.check_both_paths(Mix, sys.argv[1], width=D)

# CHECK: torchscript: loss True, grads True (15 of 15 gradients by name within 0.0001 {{.*}}), bitwise True, None
# CHECK: dynamo: loss True, grads True (15 of 15 gradients by name within 0.0001 {{.*}}), bitwise True, None
