# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t | FileCheck %s

# rp.onnx_symbolics.register(): the symbolics torch's TorchScript exporter
# lacks (expm1: Apertus's xIELU; rms_norm: DiffLlama's nn.RMSNorm;
# linalg_solve_triangular: the gated delta rule of Qwen3-Next and its kin)
# or gets wrong (repeat_interleave with a negative dim turned the model's
# shared -1 constant into the rank minus 1: GLM's interleaved rotary
# flattened nothing and its torch.cat stopped with "All tensors must have
# the same rank"; Cohere's view(..., -1, head_dim) got 3 heads),
# written in standard ONNX that rp-import maps. Each on the gradient's path
# of a small LM, checked on both ONNX paths as bench/families.py checks a
# family, on 1 and 2 devices (bench/families.py registers them for its
# TorchScript exports as a user would). Without register(), the TorchScript export stops at the
# first of them. Near miss: a right-sided solve (left=False) is refused
# at export with the reason. (Complex rotary tables, torch.polar:
# torch2-onnx-complex-rotary.py; the tracer's bool scatter:
# torch2-onnx-scatter-bool.py.)

import sys
import warnings
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import torch2_lm_check  # noqa: E402

import rp.onnx_symbolics  # noqa: E402


class Layer(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.k = nn.Linear(d, 8)
        self.norm = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d))
        self.register_buffer("angles", torch.randn(16, 4), persistent=False)

    def forward(self, x):
        b, s, d = x.shape
        h = self.a(x)
        y = torch.expm1(torch.clamp(h, max=0.5)) * 0.5
        y = y + F.rms_norm(h, (d,), self.norm)           # eps: f32's epsilon
        y = y + F.rms_norm(h, (d,), None, 1e-5) * 0.25   # no weight
        # GLM's partial interleaved rotary, as transformers writes it: the
        # table's first half repeated pairwise (repeat_interleave, dim -1),
        # rotate_half (every other feature, stacked and flattened back
        # with flatten(-2): the same -1), the rest concatenated.
        q = h.reshape(b, s, 2, 8).transpose(1, 2)
        cos = torch.cos(self.angles[:s])[None, None]
        cos = cos[..., : cos.shape[-1] // 2].repeat_interleave(2, dim=-1)
        rot = cos.shape[-1]
        q_rot, q_pass = q[..., :rot], q[..., rot:]
        turned = torch.stack((-q_rot[..., 1::2], q_rot[..., 0::2]),
                             dim=-1).flatten(-2)
        q = torch.cat([q_rot * cos + turned * 0.5, q_pass], dim=-1)
        y = y + q.transpose(1, 2).reshape(b, s, d)
        # A unit lower and a non-unit upper triangular solve over chunks of
        # 8 tokens (Qwen3-Next's UT transform: A from the keys).
        kk = self.k(x).reshape(b, 2, 8, 8)
        a = (kk @ kk.transpose(-1, -2)) * 0.1
        v = h.reshape(b, 2, 8, d)
        lower = torch.linalg.solve_triangular(a, v, upper=False,
                                              unitriangular=True)
        diag = torch.eye(8) * 2.0 + a.triu(1)
        upper = torch.linalg.solve_triangular(diag, v, upper=True)
        return x + y + (lower + upper).reshape(b, s, d) * 0.1


# The TorchScript path only: torch.export decomposes expm1 and rms_norm
# itself and stops at linalg_solve_triangular (transformers writes the
# delta rule's solve as a loop under dynamo).
torch2_lm_check.check_both_paths(Layer, sys.argv[1], paths=("torchscript",))

# CHECK: torchscript: loss True, grads True (13 of 13 gradients by name within 0.0001 {{.*}}), bitwise True, None


class RightSolve(nn.Module):
    def forward(self, a, b):
        return torch.linalg.solve_triangular(a, b, upper=False, left=False)


rp.onnx_symbolics.register()
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(RightSolve(), (torch.randn(4, 4), torch.randn(2, 4)),
                          str(Path(sys.argv[1]) / "x.onnx"),
                          opset_version=17, dynamo=False)
    print("left=False: exported")
except Exception as e:  # the exporter's own error types
    print(f"left=False: {type(e).__name__}: {str(e).splitlines()[0][:160]}")

# CHECK: left=False: SymbolicValueError: Unsupported: ONNX export of operator aten::linalg_solve_triangular, rp.onnx_symbolics writes left=True only (A X = B)
